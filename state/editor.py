"""State of the Graphical Editor page (/editor/[workflow_id]): the graph on the canvas and its edits.

The graph lives here as a backend-only dict (`_graph`), the canvas gets React Flow nodes and
edges derived from it. Every settled change (drop, drag stop, connect, delete, a parameter
left) is applied to `_graph`, pushed on the undo stack and saved as the draft at once, based on
the version this tab opened: when another tab or person saved in between, the save is refused
and the page offers to reload theirs or keep this one (nothing is lost silently).

Test runs, versions and the AI chat are mixins (state/editor_runs.py, editor_versions.py,
editor_chat.py) over the same graph.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from typing import Any, TypedDict

import reflex as rx

from backend.actions.catalogue import mandate_catalogue
from backend.db.models import Workflow
from backend.errors import Conflict, DomainError, NotFound
from backend.features.graphical_editor.interface import (
    GraphicalEditorInterface,
    VersionView,
    interface_of_workflow,
    last_changed_workflow,
)
from backend.workflows import graph_edit
from backend.workflows.connections import connection_error, handles_of
from backend.workflows.node_types import NodeType, palette
from backend.workflows.service import DraftBase
from backend.workflows.suggestions import expression_suggestions
from backend.workflows.validation import validate_graph
from state.auth import AuthState, NotSignedIn
from state.editor_chat import EditorChatMixin
from state.editor_files import EditorFilesMixin
from state.editor_params import EditorParamsMixin
from state.editor_runs import EditorRunsMixin, named_once
from state.editor_versions import EditorVersionsMixin
from state.instance_choice import InstanceChoiceMixin
from state.page import PageMixin, routed_id, user_message
from state.param_fields import ParamField, fields_of, parse_value
from state.permissions import requires, requires_door

Door = GraphicalEditorInterface
UNDO_LIMIT = 100


class PaletteEntry(TypedDict):
    type: str
    label: str
    description: str


class PaletteGroup(TypedDict):
    name: str
    entries: list[PaletteEntry]


class NodeProblem(TypedDict):
    field: str
    message: str


def _group_name(node_type: NodeType) -> str:
    return node_type.group


def _palette_groups(query: str) -> list[PaletteGroup]:
    words = query.lower().split()
    groups: dict[str, list[PaletteEntry]] = {}
    for node_type in palette():
        haystack = f"{node_type.type} {node_type.label} {node_type.description} {node_type.toolbox or ''}".lower()
        if all(word in haystack for word in words):
            groups.setdefault(_group_name(node_type), []).append(
                PaletteEntry(type=node_type.type, label=node_type.label, description=node_type.description))
    return [PaletteGroup(name=name, entries=entries) for name, entries in groups.items()]


def in_catalogue(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a deriving method with the workflow's mandate catalogue in force: node types, the
    palette and validation then know the mandate's MCP tools (backend/actions/catalogue.py)."""
    @functools.wraps(method)
    def derive(self, *args: Any, **kwargs: Any) -> Any:
        with mandate_catalogue(self._mandate_id or None):
            return method(self, *args, **kwargs)

    return derive


def editor_interface(session, user, workflow_id: str) -> tuple[GraphicalEditorInterface, Workflow]:
    """The interface of the workflow's instance, checked for the user; NotFound when it is not theirs to see."""
    return interface_of_workflow(user, workflow_id, session)


class EditorState(EditorRunsMixin, EditorVersionsMixin, EditorChatMixin, EditorFilesMixin, EditorParamsMixin,
                  InstanceChoiceMixin, PageMixin, AuthState):
    """The editor page: canvas, palette, parameter panel, save status, undo/redo."""

    workflow_id: str = ""
    instance_id: str = ""
    _mandate_id: str = ""  # the workflow's mandate: whose catalogue (MCP tools) the palette shows
    workflow_name: str = ""
    missing: bool = False
    can_edit: bool = False
    palette_query: str = ""
    palette_groups: list[PaletteGroup] = []
    canvas_nodes: list[dict[str, Any]] = []
    canvas_edges: list[dict[str, Any]] = []
    fit_revision: int = 0
    # The palette (left) and the side panel (right) can be folded away to give the canvas the room.
    palette_open: bool = True
    side_open: bool = True
    # Part of the parameter inputs' keys: a graph taken from elsewhere (reload, undo, the AI chat)
    # re-creates them, so they show its values instead of what was typed before.
    form_revision: int = 0
    selected_ids: list[str] = []
    # saved · saving · conflict (changed elsewhere, or signed out) · refused (the last change was
    # refused and taken back: `error` says why) · readonly
    save_status: str = "saved"
    save_message: str = ""
    connection_refused: str = ""
    can_undo: bool = False
    can_redo: bool = False
    graph_problems: list[str] = []
    node_problems: dict[str, list[NodeProblem]] = {}
    panel_tab: str = "parameters"
    # The selected node's form.
    node_label: str = ""
    node_type_id: str = ""
    node_type_label: str = ""
    node_on_error: str = "fail"
    param_fields: list[ParamField] = []
    field_errors: dict[str, str] = {}
    expression_options: list[str] = []

    _graph: dict[str, Any] = {}
    _base_version_id: str = ""
    _base_status: str = ""  # draft · published (right after publishing) · "" (no version yet)
    _base_lock_version: int = 0
    _undo: list[dict[str, Any]] = []
    _redo: list[dict[str, Any]] = []
    # The browser's IANA time zone (the canvas reports it): new schedule triggers start in it.
    _time_zone: str = graph_edit.DEFAULT_TIME_ZONE

    @rx.var
    def selected_node(self) -> str:
        return self.selected_ids[0] if len(self.selected_ids) == 1 else ""

    @rx.var
    def save_text(self) -> str:
        return {"saved": "All changes saved", "saving": "Saving…", "conflict": "Not saved",
                "refused": "Last change not saved", "readonly": "Read only"}.get(self.save_status, self.save_status)

    # --- loading --------------------------------------------------------------------------------

    def _refresh(self) -> None:
        self.workflow_id = routed_id(self.router.url.path, "editor")
        with self._user_session() as (session, user):
            self._load_navigation(session, user)
            try:
                iface, workflow = editor_interface(session, user, self.workflow_id)
            except NotFound:
                self.missing, self.loaded = True, True
                return
            self.missing = False
            self.instance_id = iface.instance.id
            self._mandate_id = iface.instance.mandate_id
            self.workflow_name = workflow.name
            rights = iface.editor_rights(workflow)
            self.can_edit, self.can_execute = rights.can_edit, rights.can_execute
            view = iface.workflow_view(workflow, masked=True)
            self._open_instance(session, user, iface.instance.id)  # the header names it; remembered
            self._adopt(view.graph, view.edited)
            self._load_test_input(workflow)
            self._load_versions(iface, workflow)
            self._load_chat_rights(iface, rights.can_use_agent)
        self._show_palette(self.palette_query)
        self._refresh_files()  # the Files tab: this instance's file store
        self.save_status = "readonly" if (self.viewing_version or not self.can_edit) else "saved"
        self.save_message = ""
        self.fit_revision += 1
        self.loaded = True
        self._publish()

    def _adopt(self, graph: dict[str, Any], edited: VersionView | None) -> None:
        """Take `graph` (its secrets masked by the interface: they never reach the page) of the
        version `edited` (None: the workflow has none yet) as the one being edited."""
        self._graph = copy.deepcopy(graph)
        self.form_revision += 1
        self._graph.setdefault("nodes", [])
        self._graph.setdefault("edges", [])
        self._set_base(edited)

    def _set_base(self, version: VersionView | None) -> None:
        """The version the canvas's graph is (the base of the next draft save, and what a Test
        run runs): the draft, or the published version right after publishing."""
        self._base_version_id = version.id if version is not None else ""
        self._base_lock_version = version.lock_version if version is not None else 0
        self._base_status = version.status if version is not None else ""

    @rx.event
    @requires_door(Door.workflow_view)
    def load(self):
        """on_load: check the sign-in, then open the workflow named in the address."""
        self.selected_ids = []
        self.viewing_version = ""
        self._undo, self._redo = [], []
        self.can_undo = self.can_redo = False
        self._clear_run()
        event = self._reload()
        run_id = str(self.router.url.query_parameters.get("run") or "")
        if event is None and run_id and not self.missing:
            self._open_run(run_id)  # /editor/<id>?run=<runId>: the Monitor's link to a run's trace
        return event

    @rx.event
    @requires_door(Door.list_workflows)
    def open_recent(self):
        """/editor: open the workflow changed last in the header's instance, or the Workflows page when
        it has none."""
        try:
            with self._user_session() as (session, user):
                newest = last_changed_workflow(user, session)
        except NotSignedIn:
            return self._signed_out()
        except DomainError:
            newest = None
        return rx.redirect(f"/editor/{newest.id}" if newest else "/workflows")

    # --- what the canvas shows ------------------------------------------------------------------

    def _shown_graph(self) -> dict[str, Any]:
        return self._viewed_graph if self.viewing_version else self._graph

    @in_catalogue
    def _show_palette(self, query: str) -> None:
        self.palette_groups = _palette_groups(query)

    @in_catalogue
    def _publish(self) -> None:
        """Derive the canvas nodes/edges, the problems and the selected node's form from the graph."""
        graph = self._shown_graph()
        problems: dict[str, list[NodeProblem]] = {}
        general: list[str] = []
        for error in validate_graph(graph):
            if error.node_id:
                problems.setdefault(error.node_id, []).append(NodeProblem(field=error.field, message=error.message))
            else:
                general.append(f"{error.field}: {error.message}")
        self.node_problems, self.graph_problems = problems, general
        types = {t.type: t for t in palette()}
        statuses = self.node_statuses
        nodes = []
        for node in graph.get("nodes", []):
            node_id = node.get("id")
            known = types.get(node.get("type"))
            x, y = graph_edit.position_of(node) or (0.0, 0.0)
            issues = problems.get(node_id, [])
            nodes.append({
                "id": node_id, "type": "poweron", "position": {"x": x, "y": y},
                "data": {
                    "label": node.get("label") or (known.label if known else node_id),
                    "nodeType": node.get("type"),
                    "handles": handles_of(node),
                    "isTrigger": bool(known and known.is_trigger),
                    "status": statuses.get(node_id, ""),
                    "invalid": bool(issues),
                    "problem": "; ".join(f"{i['field']}: {i['message']}" for i in issues),
                    "description": known.description if known else "unknown node type",
                },
            })
        edges = []
        for edge in graph.get("edges", []):
            handle = graph_edit.edge_handle(edge)
            edges.append({"id": graph_edit.edge_key(edge), "source": edge.get("source"),
                          "target": edge.get("target"), "sourceHandle": handle,
                          "label": "" if handle == "out" else handle,
                          "animated": statuses.get(edge.get("source")) == "running"})
        self.canvas_nodes, self.canvas_edges = nodes, edges
        shown = {node["id"] for node in nodes}
        if any(node_id not in shown for node_id in self.selected_ids):
            # A node taken away (undo, a refused change, a reload) leaves no panel behind.
            self.selected_ids = [node_id for node_id in self.selected_ids if node_id in shown]
        self._show_selected()

    @in_catalogue
    def _show_selected(self) -> None:
        node = self._shown_node()
        self._node_extras(node)
        if node is None:
            self.node_label = self.node_type_id = self.node_type_label = ""
            self.param_fields, self.expression_options = [], []
            return
        known = next((t for t in palette() if t.type == node.get("type")), None)
        self.node_label = str(node.get("label") or "")
        self.node_type_id = str(node.get("type"))
        self.node_type_label = known.label if known else "unknown type"
        self.node_on_error = str(node.get("onError") or "fail")
        schema = known.params_model.model_json_schema() if known else {"properties": {}}
        self.param_fields = fields_of(schema, node.get("parameters"))
        for problem in self.node_problems.get(node["id"], []):
            name = problem["field"].removeprefix("parameters.").split(".")[0].split("[")[0]
            self.field_errors.setdefault(name, problem["message"])

    # --- saving ---------------------------------------------------------------------------------

    def _change(self, edit, what: str) -> bool:
        """Apply `edit(graph)` to a copy of the graph; keep it (undoable) and save it as the draft.

        Returns whether the change was kept; a refused one is taken back whole (nothing of it
        stays on the canvas, in a panel or in the draft) and `error` says why."""
        if not self.can_edit or self.viewing_version:
            self.error = "This graph is read only here." if self.viewing_version else \
                "Your roles do not allow changing this workflow."
            return False
        before = copy.deepcopy(self._graph)
        after = copy.deepcopy(self._graph)
        try:
            edit(after)
        except graph_edit.GraphEditError as exc:
            self.error = f"Not saved: {what}: {exc}"
            self.save_status = "refused"
            return False
        undo, redo = self._undo, self._redo
        self._undo = [*self._undo[-(UNDO_LIMIT - 1):], before]
        self._redo = []
        self._graph = after
        if self._save():
            return True
        # Refused as invalid (e.g. a schedule it could never run): the change is taken back,
        # the page shows why, and the draft stays as it was.
        self._graph, self._undo, self._redo = before, undo, redo
        self.form_revision += 1
        self.can_undo, self.can_redo = bool(self._undo), bool(self._redo)
        self._publish()
        return False

    def _save(self) -> bool:
        """Save the graph as the draft; False when the backend refused it as invalid (then
        `self.error` says why and the badge says the last change was not saved). A draft changed
        elsewhere or a lost sign-in keep this tab's graph."""
        self.error = ""
        self.save_status = "saving"
        base = DraftBase(self._base_version_id, self._base_lock_version) if self._base_version_id else None
        accepted = True
        try:
            with self._user_session() as (session, user):
                iface, workflow = editor_interface(session, user, self.workflow_id)
                version = iface.save_draft(workflow, self._graph, base)
                self._set_base(version)
                self._note_draft_saved(version)
        except NotSignedIn:
            self.save_status, self.save_message = "conflict", "You are signed out: sign in again to save."
        except Conflict as exc:
            self.save_status, self.save_message = "conflict", user_message(exc)
        except DomainError as exc:
            self.error = f"Not saved: {user_message(named_once(exc))}"
            self.save_status = "refused"
            accepted = False
        else:
            self.save_status, self.save_message = "saved", ""
        self.can_undo, self.can_redo = bool(self._undo), bool(self._redo)
        self._publish()
        return accepted

    @rx.event
    @requires_door(Door.workflow_view)
    def reload_theirs(self):
        """After a refused save: drop this tab's changes and load the draft as saved elsewhere."""
        return self._reload()

    @rx.event
    @requires_door(Door.save_draft)
    def keep_mine(self):
        """After a refused save: save this tab's graph over the newer draft (undo brings theirs back)."""
        try:
            with self._user_session() as (session, user):
                iface, workflow = editor_interface(session, user, self.workflow_id)
                theirs = iface.workflow_view(workflow, masked=True)
                if theirs.edited_version_id is not None:
                    self._undo = [*self._undo[-(UNDO_LIMIT - 1):], copy.deepcopy(theirs.graph)]
                    self._set_base(theirs.edited)
        except NotSignedIn:
            return self._signed_out()
        self._save()
        return None

    def _graph_changed_elsewhere(self) -> None:
        """The draft was changed outside this page's edits (the AI chat's tools): show it, undoable."""
        try:
            with self._user_session() as (session, user):
                iface, workflow = editor_interface(session, user, self.workflow_id)
                view = iface.workflow_view(workflow, masked=True)
                if view.edited_version_id is None or (view.edited_version_id == self._base_version_id
                                                      and view.edited_lock_version == self._base_lock_version):
                    return
                before = copy.deepcopy(self._graph)
                self._adopt(view.graph, view.edited)
                self._note_draft_saved(view.edited)
        except (NotSignedIn, DomainError):
            return
        self._undo = [*self._undo[-(UNDO_LIMIT - 1):], before]
        self._redo = []
        self.can_undo, self.can_redo = True, False
        self._publish()

    # --- canvas events --------------------------------------------------------------------------

    @rx.event
    @requires_door(Door.save_draft)
    def nodes_moved(self, moves: list[dict[str, Any]]):
        """A drag stopped: store the new positions."""
        self._change(lambda graph: graph_edit.move_nodes(graph, moves), "Move")

    @in_catalogue
    def _add_node(self, type_id: str, position: dict[str, Any] | None) -> None:
        """Add a node of `type_id` with its type's starting parameters (in the user's time zone)
        and select it; a refused addition selects nothing (no panel for a node that is not there)."""
        added: list[str] = []

        def edit(graph):
            node = graph_edit.add_node(graph, type_id, position, time_zone=self._time_zone)
            added.append(node["id"])

        if self._change(edit, "Add node") and added[0] in graph_edit.nodes_by_id(self._graph):
            self.selected_ids = added
            self.field_errors = {}
            self.panel_tab = "parameters"
            self._publish()

    @rx.event
    @requires_door(Door.save_draft)
    def drop_node(self, drop: dict[str, Any]):
        """A palette entry was dropped on the canvas: add a node of that type there and select it."""
        x, y = drop.get("x", 0), drop.get("y", 0)
        position = {"x": x if isinstance(x, (int, float)) else 0, "y": y if isinstance(y, (int, float)) else 0}
        self._add_node(str(drop.get("type")), position)

    @rx.event
    @requires_door(Door.save_draft)
    def add_from_palette(self, type_id: str):
        """A palette entry was clicked: add a node of that type next to the others."""
        self._add_node(str(type_id), None)

    @rx.event
    @requires("ui")
    def set_time_zone(self, time_zone: str):
        """The canvas reports the browser's IANA time zone (an unknown one counts as UTC)."""
        self._time_zone = graph_edit.usable_time_zone(time_zone)

    @rx.event
    @requires_door(Door.save_draft)
    def connect_nodes(self, connection: dict[str, Any]):
        """A handle was dragged onto a node: add the edge, or say why the graph rules refuse it."""
        source, target = str(connection.get("source")), str(connection.get("target"))
        handle = str(connection.get("sourceHandle") or "out")
        reason = connection_error(self._graph, source, handle, target)
        if reason:
            self.connection_refused = f"Connection refused: {reason}"
            return
        self.connection_refused = ""
        self._change(lambda graph: graph_edit.add_edge(graph, source, handle, target), "Connect")

    @rx.event
    @requires_door(Door.save_draft)
    def delete_elements(self, removed: dict[str, Any]):
        """Nodes or edges were deleted on the canvas (Delete key)."""
        nodes = [str(n) for n in removed.get("nodes") or []]
        edges = [str(e) for e in removed.get("edges") or []]
        self._change(lambda graph: graph_edit.remove_elements(graph, nodes, edges), "Delete")
        self.selected_ids = [s for s in self.selected_ids if s not in nodes]
        self._publish()

    @rx.event
    @requires_door(Door.save_draft)
    def delete_selected(self):
        """The panel's Delete button: remove the selected nodes with their edges."""
        return EditorState.delete_elements({"nodes": list(self.selected_ids), "edges": []})

    @rx.event
    @requires_door(Door.last_outputs)
    def selection_changed(self, ids: list[str]):
        self.selected_ids = [str(i) for i in ids]
        self.field_errors = {}
        if len(self.selected_ids) == 1 and self.panel_tab not in ("parameters", "trace", "files"):
            self.panel_tab = "parameters"
        self._show_selected()
        self._load_suggestions()

    @rx.event
    @requires_door(Door.last_outputs)
    def node_opened(self, node_id: str):
        """A node was double-clicked: show its parameters (unfolding the side panel)."""
        self.selected_ids = [node_id]
        self.panel_tab = "parameters"
        self.side_open = True
        self._show_selected()
        self._load_suggestions()

    @rx.event
    @requires("ui")
    def dismiss_refusal(self):
        self.connection_refused = ""

    # --- the parameter panel --------------------------------------------------------------------

    def _load_suggestions(self) -> None:
        if not self.selected_node:
            self.expression_options = []
            return
        try:
            with self._user_session() as (session, user):
                iface, workflow = editor_interface(session, user, self.workflow_id)
                last = iface.last_outputs(workflow)
        except (NotSignedIn, DomainError):
            last = {}
        self.expression_options = expression_suggestions(self._shown_graph(), self.selected_node, last)

    def _edit_selected(self, edit, what: str) -> None:
        node_id = self.selected_node

        def change(graph):
            node = graph_edit.nodes_by_id(graph).get(node_id)
            if node is None:
                raise graph_edit.GraphEditError(f"node '{node_id}' is no longer in the graph")
            edit(node)

        self._change(change, what)

    @rx.event
    @requires_door(Door.save_draft)
    def set_parameter(self, name: str, kind: str, text: str):
        """A parameter field was left: store its value (if it changed), or show what is wrong with it."""
        value, problem = parse_value(kind, text)
        if problem:
            self.field_errors = {**self.field_errors, name: problem}
            return
        self.field_errors = {k: v for k, v in self.field_errors.items() if k != name}
        node = graph_edit.nodes_by_id(self._graph).get(self.selected_node) or {}
        if (node.get("parameters") or {}).get(name) == value:
            return

        def edit(target):
            parameters = dict(target.get("parameters") or {})
            if value is None:
                parameters.pop(name, None)
            else:
                parameters[name] = value
            target["parameters"] = parameters

        self._edit_selected(edit, f"Parameter {name}")

    @rx.event
    @requires_door(Door.save_draft)
    def set_flag(self, name: str, checked: bool):
        """A boolean parameter's switch."""
        return EditorState.set_parameter(name, "boolean", "true" if checked else "false")

    @rx.event
    @requires_door(Door.save_draft)
    def toggle_choice(self, name: str, option: str, checked: bool):
        """One option of a `choices` field (several of a fixed set) ticked or unticked; kept in the
        schema's order."""
        field = next((f for f in self.param_fields if f["name"] == name and f["kind"] == "choices"), None)
        if field is None:
            return None
        chosen = set(field["chosen"]) | {option} if checked else set(field["chosen"]) - {option}
        ordered = [o for o in field["options"] if o in chosen]
        return EditorState.set_parameter(name, "choices", json.dumps(ordered) if ordered else "")

    @rx.event
    @requires_door(Door.save_draft)
    def insert_expression(self, name: str, kind: str, current: str, expression: str):
        """Append an expression from the suggestions to a field."""
        text = expression if not current.strip() or kind in ("number", "boolean", "json", "select") \
            else f"{current.rstrip()} {expression}"
        return EditorState.set_parameter(name, "text" if kind != "any" else kind, text)

    @rx.event
    @requires_door(Door.save_draft)
    def set_label(self, text: str):
        if text.strip() and text.strip() != self.node_label:
            self._edit_selected(lambda node: node.__setitem__("label", text.strip()), "Label")

    @rx.event
    @requires_door(Door.save_draft)
    def set_on_error(self, value: str):
        def edit(node):
            if value == "fail":
                node.pop("onError", None)
            else:
                node["onError"] = value

        self._edit_selected(edit, "On error")

    # --- undo / redo ----------------------------------------------------------------------------

    def _travel(self, back: bool) -> None:
        """Undo (back) or redo one change: the graph swaps places with the top of the stack, and is saved."""
        if not (self._undo if back else self._redo) or not self.can_edit or self.viewing_version:
            return
        current = copy.deepcopy(self._graph)
        if back:
            self._graph, self._undo, self._redo = self._undo[-1], self._undo[:-1], [*self._redo, current]
        else:
            self._graph, self._redo, self._undo = self._redo[-1], self._redo[:-1], [*self._undo, current]
        self.form_revision += 1
        self._save()

    @rx.event
    @requires_door(Door.save_draft)
    def undo(self):
        """Go back one change (the canvas's, or one the AI chat made) and save that graph."""
        self._travel(back=True)

    @rx.event
    @requires_door(Door.save_draft)
    def redo(self):
        self._travel(back=False)

    # --- palette and panel ----------------------------------------------------------------------

    @rx.event
    @requires("ui")
    def set_palette_query(self, query: str):
        self.palette_query = query
        self._show_palette(query)

    @rx.event
    @requires("ui")
    def set_panel_tab(self, tab: str):
        self.panel_tab = tab

    @rx.event
    @requires("ui")
    def toggle_palette(self):
        """Fold the palette away (or back): the canvas takes its room and fits the nodes into it."""
        self.palette_open = not self.palette_open
        self.fit_revision += 1

    @rx.event
    @requires("ui")
    def toggle_side_panel(self):
        """Fold the side panel (node, trace, chat, versions, files) away or back."""
        self.side_open = not self.side_open
        self.fit_revision += 1

    # --- import / export ------------------------------------------------------------------------

    @rx.event
    @requires_door(Door.workflow_view)
    def export_graph(self):
        """Download the graph shown as JSON (webhook secrets are never exported)."""
        from backend.workflows.graph_io import export_document

        name = self.workflow_name + (f" v{self.viewing_version}" if self.viewing_version else "")
        text = export_document(name, self._shown_graph())
        filename = "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-") or "workflow"
        return rx.download(data=text, filename=f"{filename}.json")

    @rx.event
    @requires_door(Door.save_draft)
    async def import_graph(self, files: list[rx.UploadFile]):
        """Replace the draft's graph by an uploaded export (undoable); a malformed file changes nothing."""
        from backend.workflows.graph_io import parse_import

        if not files:
            return
        raw = await files[0].read()
        try:
            graph = parse_import(raw)
        except DomainError as exc:
            self.error = f"Import of {files[0].name or 'the file'} refused: {user_message(exc)}"
            return
        self._change(lambda current: (current.clear(), current.update(graph)), "Import")
        if not self.error:
            self.notice = f"Imported {len(graph.get('nodes', []))} nodes from {files[0].name or 'the file'}."
            self.selected_ids = []
            self.fit_revision += 1
            self._publish()

