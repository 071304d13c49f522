"""The UDB's Files panel (the Unified Data Bar's file store), shared by the Workspace and the Editor.

Every function takes the state class that mixes in :class:`state.workspace_files.FilesMixin`
(its vars and event handlers), so the same panel works on WorkspaceState and EditorState.
Folders, upload with a progress bar, preview, rename, delete and full-text search; the
Workspace adds "Attach" (``attach``: True, or a bool var such as "may use the agent"), the Editor
adds its "Use in node" menu through ``row_extra`` (a function of a file's path var returning the
extra row component). Buttons the user's rights do not allow are hidden; the file service
refuses them anyway.
"""

from __future__ import annotations

from collections.abc import Callable

import reflex as rx
from reflex.vars import ArrayVar, ObjectVar

from state.workspace_files import FileRow, FolderRow, HitRow, SnippetSegment

UPLOAD_ID = "udb-upload"
SOURCES_EMPTY = ("No connections yet — connectors (Outlook, SharePoint, ClickUp, Jira) come with the connector "
                 "work; once connected, their content can be browsed and attached here.")

RowExtra = Callable[..., rx.Component] | None
Attach = bool | rx.Var  # show "Attach": always, never, or while the var is true


def attach_button(state, path) -> rx.Component:
    """Attach the file to the next prompt (states with attachments only: the Workspace)."""
    return rx.icon_button(rx.icon("paperclip", size=12), size="1", variant="ghost", class_name="file-attach",
                          title="Attach", on_click=state.attach_file(path))


def _attach_parts(state, path, attach: Attach) -> list[rx.Component]:
    """The "Attach" button where `attach` allows it (nothing for False)."""
    if isinstance(attach, rx.Var):
        return [rx.cond(attach, attach_button(state, path))]
    return [attach_button(state, path)] if attach else []


def _extras(state, path, attach: Attach, row_extra: RowExtra) -> list[rx.Component]:
    parts = _attach_parts(state, path, attach)
    if row_extra is not None:
        parts.append(row_extra(path))
    return parts


def _folder_row(state, folder: FolderRow) -> rx.Component:
    return rx.hstack(
        rx.icon("folder", size=14),
        rx.text(folder["name"], size="2", class_name="folder-name", trim="both"),
        on_click=state.open_folder(folder["path"]),
        cursor="pointer", width="100%", spacing="2", align="center", padding="0.2em 0.4em",
        class_name="folder-item",
    )


def _file_row(state, file: FileRow, attach: Attach, row_extra: RowExtra) -> rx.Component:
    return rx.cond(
        state.file_rename_path == file["path"],
        rx.hstack(
            rx.input(value=state.file_rename_value, on_change=state.set_file_rename_value,
                     id="file-rename-input", auto_focus=True, size="1", width="100%"),
            rx.icon_button(rx.icon("check", size=14), size="1", on_click=state.save_file_rename,
                           id="file-rename-save", title="Save"),
            rx.icon_button(rx.icon("x", size=14), size="1", variant="soft",
                           on_click=state.cancel_file_rename, title="Cancel"),
            width="100%", spacing="1",
        ),
        rx.hstack(
            rx.box(
                rx.text(file["name"], size="2", class_name="file-name", overflow="hidden",
                        text_overflow="ellipsis", white_space="nowrap"),
                rx.text(file["size"], " · ", file["mime"], size="1", color_scheme="gray"),
                on_click=state.preview_file(file["path"]),
                cursor="pointer", flex="1", min_width="0", title="Preview",
            ),
            *_extras(state, file["path"], attach, row_extra),
            rx.cond(file["may_rename"],
                    rx.icon_button(rx.icon("pencil", size=12), size="1", variant="ghost", class_name="file-rename",
                                   title="Rename",
                                   on_click=state.start_file_rename(file["path"], file["name"]))),
            rx.cond(file["may_delete"],
                    rx.icon_button(rx.icon("trash-2", size=12), size="1", variant="ghost", color_scheme="red",
                                   class_name="file-delete", title="Delete",
                                   on_click=state.ask_file_delete(file["path"]))),
            width="100%", spacing="1", align="center", padding="0.2em 0.4em", border_radius="6px",
            class_name="file-item",
        ),
    )


def _snippet_segment(segment: SnippetSegment) -> rx.Component:
    """A piece of a snippet as plain text (whatever markup the file holds); a match highlighted."""
    return rx.cond(
        segment["match"],
        rx.el.mark(segment["text"], class_name="hit-match", font_weight="bold", color="inherit",
                   background_color=rx.color("amber", 4), border_radius="2px"),
        rx.text.span(segment["text"]),
    )


def _hit_row(state, hit: HitRow, attach: Attach, row_extra: RowExtra) -> rx.Component:
    return rx.hstack(
        rx.box(
            rx.text(hit["path"], size="2", class_name="hit-path", word_break="break-all"),
            # Segments from the file store (backend/files/service.py SearchHit.segments): never markup.
            rx.text(rx.foreach(hit["segments"], _snippet_segment), size="1", color_scheme="gray",
                    class_name="hit-snippet", word_break="break-word"),
            on_click=state.preview_file(hit["path"]), cursor="pointer", flex="1", min_width="0",
        ),
        *_extras(state, hit["path"], attach, row_extra),
        width="100%", spacing="1", align="start", class_name="search-hit",
    )


def _upload(state) -> rx.Component:
    def rejected_names(rejected):
        """Only the refused files' names go to the server (never the files themselves)."""
        names = rejected.to(ArrayVar, list[dict]).map(
            lambda r: r.to(ObjectVar, dict[str, dict])["file"].to(ObjectVar, dict)["name"])
        return state.upload_rejected(names)

    return rx.cond(
        state.can_upload,
        rx.vstack(
            rx.upload(
                rx.hstack(rx.icon("upload", size=14), rx.text("Upload or drop files", size="2"),
                          spacing="2", align="center"),
                id=UPLOAD_ID,
                max_size=state.file_max_bytes,
                on_drop=state.handle_upload(
                    rx.upload_files(upload_id=UPLOAD_ID, on_upload_progress=state.upload_progress)),
                on_drop_rejected=rejected_names,
                border=f"1px dashed {rx.color('gray', 7)}", border_radius="6px", padding="0.5em",
                width="100%", cursor="pointer", class_name="file-upload",
            ),
            rx.cond(state.uploading,
                    rx.progress(value=state.upload_percent, max=100, id="upload-progress", width="100%")),
            rx.text("Files up to ", state.file_limit, size="1", color_scheme="gray"),
            width="100%", spacing="1", id="file-upload-area",
        ),
    )


def _search(state, attach: Attach, row_extra: RowExtra) -> rx.Component:
    return rx.vstack(
        rx.form(
            rx.hstack(
                rx.input(name="query", id="file-search-input", placeholder="Search the files' text…", size="1",
                         width="100%"),
                rx.icon_button(rx.icon("search", size=12), size="1", type="submit", id="file-search",
                               title="Search"),
                rx.cond(state.searched,
                        rx.icon_button(rx.icon("x", size=12), size="1", type="button", variant="soft",
                                       title="Clear search", id="file-search-clear",
                                       on_click=state.clear_search)),
                width="100%", spacing="1",
            ),
            on_submit=state.search_files, reset_on_submit=False, width="100%",
        ),
        rx.cond(
            state.searched,
            rx.cond(
                state.search_hits.length() > 0,
                rx.vstack(rx.foreach(state.search_hits, lambda hit: _hit_row(state, hit, attach, row_extra)),
                          id="file-search-hits", width="100%", spacing="1"),
                rx.text("No file contains '", state.search_query, "'.", size="1", color_scheme="gray",
                        id="file-search-none"),
            ),
        ),
        width="100%", spacing="1",
    )


def files_panel(state, attach: Attach = False, row_extra: RowExtra = None, refresh: bool = False) -> rx.Component:
    """The open folder of the state's file store, with upload, search, preview, rename and delete.

    Args:
        state: The state class mixing in FilesMixin.
        attach: Show "Attach" on files and search hits (the state keeps `attachments`).
        row_extra: Optional function of a file's path var: one more component on each file row and
            search hit (the Editor's "Use in node" menu).
        refresh: Show a button that reloads the open folder (files a run wrote appear).
    """
    return rx.vstack(
        rx.cond(state.files_error != "",
                rx.callout(state.files_error, icon="triangle-alert", color_scheme="red", size="1",
                           id="files-error", width="100%")),
        rx.cond(state.files_notice != "",
                rx.callout(state.files_notice, icon="check", color_scheme="green", size="1",
                           id="files-notice", width="100%")),
        _upload(state),
        _search(state, attach, row_extra),
        rx.hstack(
            rx.icon_button(rx.icon("arrow-up", size=12), size="1", variant="soft", title="Up", id="folder-up",
                           on_click=state.folder_up, disabled=state.folder == "/"),
            rx.code(state.folder, id="current-folder", size="1"),
            *([rx.spacer(),
               rx.icon_button(rx.icon("refresh-cw", size=12), size="1", variant="ghost", title="Refresh",
                              id="files-refresh", on_click=state.open_folder(state.folder))] if refresh else []),
            spacing="2", align="center", width="100%",
        ),
        rx.cond(
            (state.folders.length() > 0) | (state.files.length() > 0),
            rx.vstack(rx.foreach(state.folders, lambda folder: _folder_row(state, folder)),
                      rx.foreach(state.files, lambda file: _file_row(state, file, attach, row_extra)),
                      id="file-list", width="100%", spacing="0"),
            rx.text("No files in this folder.", size="2", color_scheme="gray", id="file-list-empty"),
        ),
        width="100%", spacing="2",
    )


def sources_panel() -> rx.Component:
    return rx.vstack(
        rx.icon("plug", size=20, color=rx.color("gray", 9)),
        rx.text(SOURCES_EMPTY, size="2", color_scheme="gray", id="sources-empty"),
        width="100%", spacing="2", padding_top="0.5em",
    )


def preview_dialog(state, attach: Attach = False) -> rx.Component:
    """The open file's preview: the start of its text, a PDF's page count, or the image."""
    return rx.dialog.root(
        rx.dialog.content(
            rx.dialog.title(state.preview_path),
            rx.text(state.preview_mime, size="1", color_scheme="gray"),
            rx.cond(state.preview_note != "",
                    rx.text(state.preview_note, size="2", id="file-preview-note")),
            rx.match(
                state.preview_kind,
                ("image", rx.image(src=state.preview_src, max_width="100%", max_height="60vh",
                                   id="file-preview-image")),
                rx.cond(state.preview_text != "",
                        rx.box(rx.text(state.preview_text, size="1", white_space="pre-wrap",
                                       font_family="monospace", id="file-preview-text"),
                               max_height="60vh", overflow_y="auto", width="100%")),
            ),
            rx.hstack(
                *_attach_parts(state, state.preview_path, attach),
                rx.spacer(),
                rx.dialog.close(rx.button("Close", variant="soft", on_click=state.close_preview,
                                          id="file-preview-close")),
                width="100%", margin_top="1em", align="center",
            ),
            id="file-preview", max_width="48em",
        ),
        open=state.preview_path != "",
    )


def file_delete_dialog(state) -> rx.Component:
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title("Delete file"),
            rx.alert_dialog.description("Delete ", state.file_delete_path, "? This cannot be undone."),
            rx.hstack(
                rx.alert_dialog.cancel(rx.button("Cancel", variant="soft",
                                                 on_click=state.cancel_file_delete)),
                rx.alert_dialog.action(rx.button("Delete", color_scheme="red",
                                                 on_click=state.confirm_file_delete,
                                                 id="confirm-file-delete")),
                justify="end", spacing="3", margin_top="1em",
            ),
        ),
        open=state.file_delete_path != "",
    )


def file_dialogs(state, attach: Attach = False) -> rx.Component:
    """The dialogs the files panel opens (preview, delete confirmation): put them once on the page."""
    return rx.fragment(preview_dialog(state, attach), file_delete_dialog(state))
