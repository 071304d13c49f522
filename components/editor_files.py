"""The Editor's Files tab: the UDB's files panel of the editor's instance, plus "Use in node"; and
its Sources view (the user's connections, components/udb.py's sources_panel).

With one node selected (and the graph editable), each file row and search hit — and each item of a
source (copied into this instance's files first) — gets a menu of the node's parameters that take a
file (`state.path_fields`); picking one puts the file's path there.
"""

from __future__ import annotations

import reflex as rx

from components.udb import file_dialogs, files_panel, sources_panel


def _menu(state, on_pick, trigger_class: str, id_prefix: str) -> rx.Component:
    editable = state.can_edit & (state.viewing_version == "") & (state.selected_node != "")
    return rx.cond(
        editable & (state.path_fields.length() > 0),
        rx.dropdown_menu.root(
            rx.dropdown_menu.trigger(
                rx.icon_button(rx.icon("corner-down-right", size=12), size="1", variant="ghost",
                               class_name=trigger_class, title="Use in node"),
            ),
            rx.dropdown_menu.content(
                rx.foreach(state.path_fields, lambda field: rx.dropdown_menu.item(
                    field, id=id_prefix + field, class_name=f"{trigger_class}-field", on_click=on_pick(field))),
                size="1",
            ),
        ),
    )


def _use_menu(state, path) -> rx.Component:
    return _menu(state, lambda field: state.use_file(path, field), "use-file", "use-file-")


def _use_source_menu(state, location) -> rx.Component:
    return _menu(state, lambda field: state.use_source(location, field), "use-source", "use-source-")


def _view_switch(state) -> rx.Component:
    return rx.segmented_control.root(
        rx.segmented_control.item("Instance files", value="files", id="files-view-files"),
        rx.segmented_control.item("Sources", value="sources", id="files-view-sources"),
        value=state.files_view, on_change=state.set_files_view, size="1", width="100%", id="files-view",
    )


def editor_files_panel(state) -> rx.Component:
    """The files of the editor's instance (the store its runs' file actions use), or the sources."""
    return rx.vstack(
        _view_switch(state),
        rx.text(
            rx.cond(state.selected_node != "",
                    rx.cond(state.files_view == "sources",
                            "Pick an item into the selected node with the ↳ button of its row: it is copied into "
                            "this instance's files first.",
                            "Pick a file into the selected node with the ↳ button of its row."),
                    rx.cond(state.files_view == "sources",
                            "Mail and files of your connections. Select a node to pick an item into it.",
                            "The files this instance's workflows read and write. Select a node to pick a file into "
                            "it.")),
            size="1", color_scheme="gray", id="editor-files-hint",
        ),
        rx.cond(state.files_view == "sources",
                sources_panel(state, attach=False, row_extra=lambda location: _use_source_menu(state, location)),
                files_panel(state, row_extra=lambda path: _use_menu(state, path), refresh=True)),
        width="100%", spacing="2", id="editor-files",
    )


def editor_file_dialogs(state) -> rx.Component:
    """The files panel's preview and delete dialogs (once on the page)."""
    return file_dialogs(state)
