"""The Graphical Editor page: palette · canvas · parameters, trace, AI chat and versions."""

from __future__ import annotations

import reflex as rx

from components.editor_chat import editor_chat_panel
from components.editor_files import editor_file_dialogs, editor_files_panel
from components.editor_panels import palette_panel, trace_panel
from components.editor_params import parameters_panel
from components.editor_versions import readonly_banner, versions_panel
from components.flow_canvas import flow_canvas
from components.shell import PHONE, PHONE_ONLY, empty_state, gated, page_shell
from state.editor import EditorState

IMPORT_UPLOAD = "import-graph"


def _save_badge() -> rx.Component:
    return rx.badge(
        rx.cond(EditorState.save_status == "saving", rx.spinner(size="1"),
                rx.icon(rx.match(EditorState.save_status, ("saved", "check"), ("readonly", "eye"), "circle-alert"),
                        size=12)),
        EditorState.save_text,
        color_scheme=rx.match(EditorState.save_status, ("saved", "green"), ("saving", "gray"), ("readonly", "gray"),
                              "red"),
        id="save-status", custom_attrs={"data-state": EditorState.save_status}, size="2",
    )


def _fold_button(open_: rx.Var, on_click, icons: tuple[str, str], titles: tuple[str, str],
                 button_id: str) -> rx.Component:
    """Folds a panel away or back; its icon and title say which it will do."""
    return rx.icon_button(
        rx.cond(open_, rx.icon(icons[0], size=16), rx.icon(icons[1], size=16)),
        on_click=on_click, variant="soft", color_scheme="gray", id=button_id,
        title=rx.cond(open_, titles[0], titles[1]), aria_label=rx.cond(open_, titles[0], titles[1]),
        custom_attrs={"data-open": rx.cond(open_, "true", "false")},
    )


def _toolbar() -> rx.Component:
    editing = EditorState.can_edit & (EditorState.viewing_version == "")
    running = EditorState.watching
    return rx.hstack(
        _fold_button(EditorState.palette_open, EditorState.toggle_palette, ("panel-left-close", "panel-left-open"),
                     ("Hide the palette", "Show the palette"), "toggle-palette"),
        rx.heading(EditorState.workflow_name, size="4", id="workflow-name", min_width="0",
                   style={"overflow_wrap": "anywhere"}),
        _save_badge(),
        rx.spacer(),
        rx.icon_button(rx.icon("undo-2", size=16), on_click=EditorState.undo, disabled=~EditorState.can_undo | ~editing,
                       variant="soft", id="undo", title="Undo"),
        rx.icon_button(rx.icon("redo-2", size=16), on_click=EditorState.redo, disabled=~EditorState.can_redo | ~editing,
                       variant="soft", id="redo", title="Redo"),
        rx.cond(
            EditorState.can_execute,
            rx.hstack(
                rx.button(rx.icon("play", size=14), "Test run", on_click=EditorState.test_run, id="test-run",
                          disabled=running | (EditorState.viewing_version != "")),
                rx.button(rx.icon("step-forward", size=14), "Step by step", on_click=EditorState.step_run,
                          id="step-run", variant="soft", disabled=running | (EditorState.viewing_version != "")),
                rx.cond((EditorState.run_status == "paused") & (EditorState.run_pause_reason == "step"),
                        rx.button(rx.icon("chevrons-right", size=14), "Next step", on_click=EditorState.next_step,
                                  id="next-step", color_scheme="orange")),
                rx.cond(running | (EditorState.run_status == "paused"),
                        rx.button(rx.icon("square", size=14), "Cancel run", on_click=EditorState.cancel_test_run,
                                  id="cancel-run", color_scheme="red", variant="soft")),
                spacing="2",
            ),
        ),
        rx.icon_button(rx.icon("download", size=16), on_click=EditorState.export_graph, variant="soft",
                       id="export-graph", title="Export the graph as JSON", aria_label="Export"),
        rx.cond(
            editing,
            rx.upload.root(
                rx.icon_button(rx.icon("upload", size=16), variant="soft", type="button", id="import-graph-button",
                               title="Import a graph from a JSON export (replaces this draft; undoable)",
                               aria_label="Import"),
                id=IMPORT_UPLOAD, accept={"application/json": [".json"]}, max_files=1, no_drag=True,
                on_drop=EditorState.import_graph(rx.upload_files(upload_id=IMPORT_UPLOAD)),
            ),
        ),
        _fold_button(EditorState.side_open, EditorState.toggle_side_panel, ("panel-right-close", "panel-right-open"),
                     ("Hide the side panel", "Show the side panel"), "toggle-side-panel"),
        width="100%", align="center", spacing="2", wrap="wrap", id="editor-toolbar",
    )


def _messages() -> rx.Component:
    return rx.vstack(
        rx.cond(EditorState.error != "", rx.callout(EditorState.error, icon="triangle-alert", color_scheme="red",
                                                     id="editor-error", width="100%", size="1")),
        rx.cond(EditorState.notice != "", rx.callout(EditorState.notice, icon="check", color_scheme="green",
                                                      id="editor-notice", width="100%", size="1")),
        rx.cond(
            EditorState.save_status == "conflict",
            rx.callout(
                rx.hstack(
                    rx.text(EditorState.save_message, id="conflict-message"),
                    rx.button("Reload their version", size="1", on_click=EditorState.reload_theirs,
                              id="reload-theirs"),
                    rx.button("Keep mine", size="1", variant="soft", on_click=EditorState.keep_mine, id="keep-mine"),
                    align="center", spacing="3", wrap="wrap",
                ),
                icon="git-compare", color_scheme="red", id="save-conflict", width="100%", size="1",
            ),
        ),
        rx.cond(
            EditorState.connection_refused != "",
            rx.callout(rx.hstack(rx.text(EditorState.connection_refused), rx.spacer(),
                                 rx.icon_button(rx.icon("x", size=12), size="1", variant="ghost",
                                                on_click=EditorState.dismiss_refusal)),
                       icon="unplug", color_scheme="orange", id="connection-refused", width="100%", size="1"),
        ),
        rx.cond(EditorState.graph_problems.length() > 0,
                rx.callout(rx.foreach(EditorState.graph_problems, lambda p: rx.text(p, size="1")),
                           icon="info", color_scheme="amber", id="graph-problems", width="100%", size="1")),
        readonly_banner(EditorState),
        width="100%", spacing="1",
    )


def _tab(value: str, label: str, icon: str) -> rx.Component:
    return rx.tabs.trigger(rx.hstack(rx.icon(icon, size=14), label, spacing="1", align="center"), value=value,
                           id=f"tab-{value}")


def _side_panel() -> rx.Component:
    return rx.tabs.root(
        rx.tabs.list(_tab("parameters", "Node", "sliders-horizontal"), _tab("trace", "Trace", "list-tree"),
                     _tab("chat", "AI chat", "sparkles"), _tab("versions", "Versions", "history"),
                     _tab("files", "Files", "folder"), size="1"),
        rx.box(
            rx.tabs.content(parameters_panel(EditorState), value="parameters"),
            rx.tabs.content(trace_panel(EditorState), value="trace"),
            rx.tabs.content(editor_chat_panel(EditorState), value="chat", height="100%"),
            rx.tabs.content(versions_panel(EditorState), value="versions"),
            rx.tabs.content(editor_files_panel(EditorState), value="files"),
            padding_top="0.75em", overflow_y="auto", flex="1", min_height="0",
        ),
        editor_file_dialogs(EditorState),
        value=EditorState.panel_tab, on_change=EditorState.set_panel_tab,
        width="26em", flex_shrink="0", height="100%", flex_direction="column", id="side-panel",
        display=rx.cond(EditorState.side_open, "flex", "none"),
    )


def _small_screen_notice() -> rx.Component:
    """On a phone, instead of the canvas: the editor needs a larger screen (other pages still work)."""
    return rx.box(
        empty_state("monitor", "The editor needs a larger screen",
                    "Open this workflow on a tablet or computer to edit it. On this screen the Inbox, Monitor, "
                    "Notifications and Workspace work as usual."),
        id="editor-small-screen", width="100%", style=PHONE_ONLY,
    )


def _editor() -> rx.Component:
    return rx.vstack(
        _toolbar(),
        _messages(),
        rx.hstack(
            palette_panel(EditorState),
            rx.box(
                flow_canvas(
                    nodes=EditorState.canvas_nodes, edges=EditorState.canvas_edges,
                    selected_ids=EditorState.selected_ids,
                    read_only=~EditorState.can_edit | (EditorState.viewing_version != ""),
                    fit_revision=EditorState.fit_revision,
                    on_nodes_moved=EditorState.nodes_moved, on_connect_nodes=EditorState.connect_nodes,
                    on_delete_elements=EditorState.delete_elements, on_drop_node=EditorState.drop_node,
                    on_selection_changed=EditorState.selection_changed, on_node_opened=EditorState.node_opened,
                    on_undo=EditorState.undo, on_redo=EditorState.redo, on_time_zone=EditorState.set_time_zone,
                    id="canvas",
                ),
                flex="1", min_width="0", height="100%", border=f"1px solid {rx.color('gray', 5)}",
                border_radius="8px", overflow="hidden",
            ),
            _side_panel(),
            # The rest of the window below the header, toolbar and messages (page_shell compact).
            width="100%", flex="1", min_height="24em", spacing="3", align="start",
        ),
        width="100%", spacing="2", flex="1", min_height="0", id="editor-main",
        style={PHONE: {"display": "none"}},
    )


def editor_page() -> rx.Component:
    return page_shell(
        "Editor",
        gated(
            "nav_graphical_editor", "the Editor",
            rx.cond(
                EditorState.missing,
                empty_state("search-x", "Workflow not found",
                            "This workflow does not exist or is not yours to see. Open one from the Workflows page."),
                rx.cond(EditorState.loaded, rx.fragment(_small_screen_notice(), _editor()),
                        rx.center(rx.spinner(), padding="4em", width="100%")),
            ),
        ),
        instance=EditorState,
        compact=True,
    )
