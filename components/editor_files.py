"""The Editor's Files tab: the UDB's files panel of the editor's instance, plus "Use in node".

With one node selected (and the graph editable), each file row and search hit gets a menu of the
node's parameters that take a file (`state.path_fields`); picking one puts the file's path there.
"""

from __future__ import annotations

import reflex as rx

from components.udb import file_dialogs, files_panel


def _use_menu(state, path) -> rx.Component:
    editable = state.can_edit & (state.viewing_version == "") & (state.selected_node != "")
    return rx.cond(
        editable & (state.path_fields.length() > 0),
        rx.dropdown_menu.root(
            rx.dropdown_menu.trigger(
                rx.icon_button(rx.icon("corner-down-right", size=12), size="1", variant="ghost",
                               class_name="use-file", title="Use in node"),
            ),
            rx.dropdown_menu.content(
                rx.foreach(state.path_fields, lambda field: rx.dropdown_menu.item(
                    field, id="use-file-" + field, class_name="use-file-field",
                    on_click=state.use_file(path, field))),
                size="1",
            ),
        ),
    )


def editor_files_panel(state) -> rx.Component:
    """The files of the editor's instance (the store its runs' file actions use)."""
    return rx.vstack(
        rx.text(
            rx.cond(state.selected_node != "",
                    "Pick a file into the selected node with the ↳ button of its row.",
                    "The files this instance's workflows read and write. Select a node to pick a file into it."),
            size="1", color_scheme="gray", id="editor-files-hint",
        ),
        files_panel(state, row_extra=lambda path: _use_menu(state, path), refresh=True),
        width="100%", spacing="2", id="editor-files",
    )


def editor_file_dialogs(state) -> rx.Component:
    """The files panel's preview and delete dialogs (once on the page)."""
    return file_dialogs(state)
