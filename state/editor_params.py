"""The editor's parameter panel beyond plain fields: what a selected node's panel shows about its
type and the handlers of those extras.

- A webhook trigger's **secret** is never on the page: the field says whether one is stored
  (the graph holds it masked, or sealed once replaced here). "Replace" takes a typed whsec_ secret
  (checked, then sealed before it enters the graph), "Generate" makes a new Standard Webhooks secret
  on the server, saves it sealed and shows it once, in clear, to the person who generated it (they
  need it to sign calls) until they dismiss it or select another node.
- A webhook trigger's **help** (Door.webhook_help): its address, whether calls are accepted now
  (with "Activate" / "Publish first"), the Standard Webhooks headers, a curl example signed with
  the real secret for those who may change the workflow (valid 5 minutes, refreshable) and the
  last calls with links to their runs. Loaded when the node, its webhook settings, the active
  switch or the versions change, and on "Refresh" — not on every redraw (runs redraw often).
- An **assignee** field (input.approval / input.form) is a picker of the instance's roles and
  users (Door.assignee_options); a stored assignee that is no longer one of them is shown as such.
- A **connection** field (`connectionId` of a node that needs a connection: an action's
  `connection_type`, email.checkEmail's mail connection — backend.connectors.sources.
  node_connection_types) is a picker of the connections the user may use of those types
  (Connections.list), "label · type · status"; a stored id that is not one of them (deleted,
  another user's, of another type) is shown as such. An expression stays a text field.

Mixed into EditorState (state/editor.py), which calls `_node_extras(node)` whenever the selected
node's form is derived and provides `_edit_selected`, `selected_node`, `field_errors`, `error`,
`save_status`, `workflow_id`, `workflow_active` and `versions`.
"""

from __future__ import annotations

import functools
from typing import Any, TypedDict

import reflex as rx

from backend.actions import ActionContext
from backend.actions.choices import field_choices, option_sources
from backend.actions.executor import InstanceActions
from backend.connectors.interface import Connections, ConnectionView
from backend.connectors.sources import node_connection_types
from backend.connectors.types import connection_type
from backend.errors import DomainError
from backend.features.graphical_editor.interface import GraphicalEditorInterface as Door
from backend.rbac.access import AccessContext
from backend.triggers import secrets as webhook_secrets
from backend.triggers.webhook_help import WebhookHelp
from backend.workflows import graph_edit
from backend.workflows.assignees import AssigneeChoices
from backend.workflows.expression_syntax import looks_templated
from backend.workflows.node_types import NodeType, node_type
from state.auth import NotSignedIn
from state.page import user_message
from state.param_fields import NO_ASSIGNEE, assignee_value, fields_of
from state.permissions import requires, requires_door

CONNECTION_FIELD = "connectionId"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S UTC"
WEBHOOK_TRIGGER = "webhook"  # NodeType.run_trigger of the webhook trigger
STANDARD_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")


class WebhookCallRow(TypedDict):
    key: str
    status: str
    ok: bool
    time: str
    request: str
    message: str
    run_link: str


class PickerOption(TypedDict):
    value: str
    label: str


@functools.cache
def assignee_parameter(known: NodeType) -> str:
    """The parameter of a node type that its schema marks as an assignee (kind "assignee"), or ""."""
    fields = fields_of(known.params_model.model_json_schema(), {})
    return next((f["name"] for f in fields if f["kind"] == "assignee"), "")


def call_rows(workflow_id: str, shown: WebhookHelp) -> list[WebhookCallRow]:
    """The last calls as the panel lists them, newest first."""
    return [WebhookCallRow(
        key=f"{index}", status=str(call.status_code), ok=200 <= call.status_code < 300,
        time=call.received_at.strftime(TIME_FORMAT), request=f"{call.method} /{call.path}", message=call.message,
        run_link=f"/editor/{workflow_id}?run={call.run_id}" if call.run_id else "")
        for index, call in enumerate(shown.calls)]


def picker_options(choices: AssigneeChoices | None, stored: Any) -> tuple[list[PickerOption], list[PickerOption],
                                                                           list[PickerOption], str]:
    """(roles, users, the stored assignee when it is not among them, what is wrong with it)."""
    roles = [PickerOption(value=f"role:{label}", label=label) for label in (choices.roles if choices else [])]
    users = [PickerOption(value=f"user:{user.id}", label=user.name) for user in (choices.users if choices else [])]
    value = assignee_value(stored)
    if value == NO_ASSIGNEE or any(o["value"] == value for o in roles + users):
        return roles, users, [], ""
    key, _, rest = value.partition(":")
    if choices is None:  # the choices are not the caller's to load (read only): show what is stored
        return roles, users, [PickerOption(value=value, label=f"{key} {rest}")], ""
    label, _known = choices.describe(stored)
    return roles, users, [PickerOption(value=value, label=label)], (
        f"The assigned {key} {rest} no longer exists in this instance: choose another assignee.")


def type_label(type_id: str) -> str:
    """A connection type's label (its id when this installation does not know it)."""
    try:
        return connection_type(type_id).label
    except DomainError:
        return type_id


def connection_label(view: ConnectionView) -> str:
    """"Team mailbox · E-mail (IMAP/SMTP) · active"."""
    return f"{view.label} · {view.type_label} · {view.status}"


def connection_choices(views: list[ConnectionView] | None, types: tuple[str, ...], stored: Any
                       ) -> tuple[list[PickerOption], list[PickerOption], str]:
    """(the usable connections of `types`, the stored id when it is not among them, what is wrong
    with it). `views` None: the user's connections could not be read (nothing is said about the id)."""
    options = [PickerOption(value=v.id, label=connection_label(v)) for v in (views or []) if v.type in types]
    stored = stored if isinstance(stored, str) else ""
    if not stored or any(o["value"] == stored for o in options) or views is None:
        extra = [PickerOption(value=stored, label=stored)] if stored and views is None else []
        return options, extra, ""
    other = next((v for v in views if v.id == stored), None)
    if other is not None:
        needed = " or ".join(type_label(t) for t in types) or "another type"
        return options, [PickerOption(value=stored, label=connection_label(other))], (
            f"'{other.label}' is a {other.type_label} connection; this node needs {needed}: choose another.")
    return options, [PickerOption(value=stored, label=f"Unknown connection {stored}")], (
        f"Connection {stored} is not one you may use (deleted, or another user's): choose another.")


class EditorParamsMixin(rx.State, mixin=True):
    """Extras of the parameter panel for the selected node."""

    # Webhook trigger: its help (empty webhook_node: the selected node is no webhook).
    webhook_node: str = ""
    webhook_url: str = ""
    webhook_method: str = ""
    webhook_state: str = ""
    webhook_state_text: str = ""
    webhook_draft_differs: bool = False
    webhook_example: str = ""
    webhook_signed_with: str = ""
    webhook_valid_until: str = ""
    webhook_calls: list[WebhookCallRow] = []
    webhook_help_error: str = ""
    # Its secret: the Replace form is open; a generated secret shown once (to whoever generated it).
    secret_editing: bool = False
    generated_secret: str = ""
    # An assignee field's picker.
    assignee_roles: list[PickerOption] = []
    assignee_users: list[PickerOption] = []
    assignee_extra: list[PickerOption] = []
    assignee_problem: str = ""
    # A connection field's picker ("" : the selected node has none).
    connection_field: str = ""
    connection_options: list[PickerOption] = []
    connection_extra: list[PickerOption] = []
    connection_problem: str = ""
    connection_needed: str = ""  # the types it takes, as words: "E-mail (IMAP/SMTP)"
    # Fields whose choices the connector lists (a ClickUp list, a Jira project …; x-options), and the
    # one whose choices are shown.
    choice_fields: list[str] = []
    choice_field: str = ""
    choice_items: list[PickerOption] = []
    choice_problem: str = ""
    choice_busy: bool = False

    _webhook_key: str = ""
    _connection_key: str = ""
    _connection_views: list[ConnectionView] | None = None
    _choices_for: str = ""
    _generated_for: str = ""
    _assignee_key: str = ""
    _assignee_choices: AssigneeChoices | None = None

    @rx.var
    def webhook_headers(self) -> list[str]:
        return list(STANDARD_HEADERS)

    # --- deriving (called by EditorState) -------------------------------------------------------

    def _shown_node(self) -> dict[str, Any] | None:
        """The selected node of the graph on the canvas (None: nothing selected)."""
        return graph_edit.nodes_by_id(self._shown_graph()).get(self.selected_node) if self.selected_node else None

    def _node_extras(self, node: dict[str, Any] | None) -> None:
        """Derive what the panel shows beyond the fields for `node` (None: nothing selected)."""
        node_id = str(node.get("id")) if node else ""
        if node_id != self._generated_for:
            self.generated_secret, self._generated_for = "", ""
        known = node_type(node.get("type")) if node else None
        if known is not None and known.run_trigger == WEBHOOK_TRIGGER:
            self._show_webhook(node)
        else:
            self._clear_webhook()
        field = self._assignee_field(node, known)
        if field:
            self._show_assignee(node, field)
        else:
            self.assignee_roles, self.assignee_users, self.assignee_extra, self.assignee_problem = [], [], [], ""
        self._show_connections(node)
        fields = sorted(option_sources(known.params_model.model_json_schema())) if known else []
        if fields != self.choice_fields or node_id != self._choices_for:
            self.choice_fields, self.choice_field, self.choice_items, self.choice_problem = fields, "", [], ""
            self._choices_for = node_id

    def _panel_interface(self, session, user):
        from state.editor import editor_interface  # state.editor imports this module

        return editor_interface(session, user, self.workflow_id)

    # --- webhook help ---------------------------------------------------------------------------

    def _clear_webhook(self) -> None:
        self.webhook_node = self.webhook_url = self.webhook_method = self.webhook_state = ""
        self.webhook_state_text = self.webhook_example = self.webhook_signed_with = ""
        self.webhook_valid_until = self.webhook_help_error = ""
        self.webhook_draft_differs, self.webhook_calls, self.secret_editing = False, [], False
        self._webhook_key = ""

    def _show_webhook(self, node: dict[str, Any]) -> None:
        """Load the node's help when something it depends on changed since it was loaded."""
        parameters = node.get("parameters") or {}
        versions = getattr(self, "versions", [])
        key = repr((self.workflow_id, node.get("id"), parameters.get("path"), parameters.get("method"),
                    parameters.get("secret"), getattr(self, "workflow_active", False),
                    [(row["id"], row["status"]) for row in versions]))
        if node.get("id") != self.webhook_node:
            self.secret_editing = False
        if key != self._webhook_key:
            self._webhook_key = key
            self._load_webhook_help(str(node.get("id")))

    def _load_webhook_help(self, node_id: str) -> None:
        self.webhook_node = node_id
        try:
            with self._user_session() as (session, user):
                iface, workflow = self._panel_interface(session, user)
                shown = iface.webhook_help(workflow, node_id)
        except NotSignedIn:
            self.webhook_help_error = "Sign in again to see this webhook's address and calls."
            return
        except DomainError as exc:
            self.webhook_help_error = f"The webhook help is not available: {user_message(exc)}"
            return
        self.webhook_help_error = ""
        self.webhook_url, self.webhook_method = shown.url, shown.method
        self.webhook_state, self.webhook_state_text = shown.state, shown.state_text
        self.webhook_draft_differs = shown.draft_differs
        self.webhook_example, self.webhook_signed_with = shown.example, shown.signed_with
        self.webhook_valid_until = shown.valid_until.strftime("%H:%M:%S UTC") if shown.valid_until else ""
        self.webhook_calls = call_rows(self.workflow_id, shown)

    @rx.event
    @requires_door(Door.webhook_help)
    def refresh_webhook_help(self):
        """Refresh: a new signed example (valid 5 minutes from now), the live state and the last calls."""
        if self.webhook_node:
            self._load_webhook_help(self.webhook_node)

    # --- the webhook secret ---------------------------------------------------------------------

    def _store_secret(self, sealed: str, what: str) -> bool:
        """Put the sealed secret into the selected webhook node and save; whether it was saved."""
        if not self.webhook_node or self.webhook_node != self.selected_node:
            self.error = f"{what}: select a webhook trigger first."
            return False

        def edit(node: dict[str, Any]) -> None:
            node["parameters"] = {**(node.get("parameters") or {}), "secret": sealed}

        self.field_errors = {k: v for k, v in self.field_errors.items() if k != "secret"}
        self._edit_selected(edit, what)
        return not self.error and self.save_status == "saved"

    @rx.event
    @requires_door(Door.save_draft)
    def generate_secret(self):
        """Make a new secret on the server, save it sealed in the draft, show it once to this person."""
        clear = webhook_secrets.generate()
        node_id = self.selected_node
        if self._store_secret(webhook_secrets.sealed_new_secret(clear), "Generate secret"):
            self.generated_secret, self._generated_for = clear, node_id
            self.secret_editing = False
        elif not self.error:
            self.error = "The new secret was not saved (see above); generate one again once the draft is saved."

    @rx.event
    @requires_door(Door.save_draft)
    def replace_secret(self, form: dict[str, Any]):
        """The Replace form was sent: check the typed whsec_ secret, seal it and save it."""
        try:
            sealed = webhook_secrets.sealed_new_secret(form.get("secret"))
        except ValueError as exc:
            self.field_errors = {**self.field_errors, "secret": str(exc)}
            return
        if self._store_secret(sealed, "Replace secret"):
            self.secret_editing = False
            self.generated_secret, self._generated_for = "", ""

    @rx.event
    @requires("ui")
    def start_replace_secret(self):
        self.secret_editing = True

    @rx.event
    @requires("ui")
    def cancel_replace_secret(self):
        self.secret_editing = False
        self.field_errors = {k: v for k, v in self.field_errors.items() if k != "secret"}

    @rx.event
    @requires("ui")
    def dismiss_generated_secret(self):
        """The person has stored the generated secret: it is not shown again."""
        self.generated_secret, self._generated_for = "", ""

    # --- the assignee picker --------------------------------------------------------------------

    @staticmethod
    def _assignee_field(node: dict[str, Any] | None, known: NodeType | None) -> str:
        """The name of the node's assignee parameter (kind from the schema's marker), or ""."""
        return assignee_parameter(known) if node is not None and known is not None else ""

    def _show_assignee(self, node: dict[str, Any], field: str) -> None:
        key = f"{self.workflow_id}:{node.get('id')}"
        if key != self._assignee_key:
            self._assignee_key = key
            self._assignee_choices = self._load_assignee_choices()
        stored = (node.get("parameters") or {}).get(field)
        self.assignee_roles, self.assignee_users, self.assignee_extra, self.assignee_problem = picker_options(
            self._assignee_choices, stored)

    def _load_assignee_choices(self) -> AssigneeChoices | None:
        """The instance's roles and users, or None when the caller may not change workflows here."""
        try:
            with self._user_session() as (session, user):
                iface, _workflow = self._panel_interface(session, user)
                if not iface.may_call(Door.assignee_options):
                    return None
                return iface.assignee_options()
        except (NotSignedIn, DomainError):
            return None


    # --- choices fed by the connector -----------------------------------------------------------

    @rx.event
    @requires_door(InstanceActions.run)
    def load_choices(self, name: str):
        """List the choices of field `name` through its connector (as the user, in this instance)."""
        node = self._shown_node()
        known = node_type(node.get("type")) if node else None
        if known is None or name not in self.choice_fields:
            return
        self.choice_field, self.choice_items, self.choice_problem, self.choice_busy = name, [], "", True
        yield
        try:
            with self._user_session() as (session, user):
                actions = InstanceActions.of(ActionContext(session, user, "", self.instance_id), self.instance_id)
                found = field_choices(actions, known.params_model.model_json_schema(), name,
                                      dict(node.get("parameters") or {}))
        except NotSignedIn:
            self.choice_busy = False
            yield self._signed_out()
            return
        except DomainError as exc:
            self.choice_problem, self.choice_busy = user_message(exc), False
            return
        self.choice_items = [PickerOption(value=c.value, label=f"{c.label} ({c.value})" if c.label != c.value
                                          else c.value) for c in found.items]
        self.choice_problem = found.problem[:1].upper() + found.problem[1:] if found.problem else ""
        self.choice_busy = False

    @rx.event
    @requires_door(Door.save_draft)
    def choose(self, name: str, value: str):
        """A choice was picked: the field takes it (saved like a typed value), then shows it."""
        self.choice_field, self.choice_items, self.choice_problem = "", [], ""
        return [type(self).set_parameter(name, "text", value), type(self).show_chosen]

    @rx.event
    @requires("ui")
    def show_chosen(self):
        self.form_revision += 1  # the field's input shows the stored value

    # --- the connection picker ------------------------------------------------------------------

    def _show_connections(self, node: dict[str, Any] | None) -> None:
        """The picker of the node's connectionId, when its type takes a connection and the stored
        value is no expression."""
        types = node_connection_types(node.get("type")) if node else None
        stored = (node.get("parameters") or {}).get(CONNECTION_FIELD) if node else None
        if types is None or looks_templated(stored) or (stored is not None and not isinstance(stored, str)):
            self.connection_field, self.connection_needed = "", ""
            self.connection_options, self.connection_extra, self.connection_problem = [], [], ""
            return
        key = f"{self.workflow_id}:{node.get('id')}"
        if key != self._connection_key:
            self._connection_key = key
            self._connection_views = self._load_connection_views()
        self.connection_field = CONNECTION_FIELD
        self.connection_needed = " or ".join(type_label(t) for t in types) or "matching"
        self.connection_options, self.connection_extra, self.connection_problem = connection_choices(
            self._connection_views, types, stored)

    def _load_connection_views(self) -> list[ConnectionView] | None:
        """The connections the user may use (None when they cannot be read)."""
        try:
            with self._user_session() as (session, user):
                return Connections(AccessContext(session, user)).list()
        except (NotSignedIn, DomainError):
            return None

    @rx.event
    @requires_door(Connections.list)
    def refresh_connections(self):
        """Read the user's connections again (one was added or changed on the Connections page)."""
        self._connection_key = ""
        self._show_selected()
