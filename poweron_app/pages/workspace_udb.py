"""The Workspace's UDB panel (Unified Data Bar): tabs Chats, Files and Sources.

Files shows the instance's file store: folders, upload with a progress bar, preview, rename,
delete, full-text search and "Attach" (the file's path goes with the next prompt). Buttons the
user's rights do not allow are hidden; the file service refuses them anyway.
"""

import reflex as rx
from reflex.vars import ArrayVar, ObjectVar

from state.workspace import WorkspaceState
from state.workspace_files import FileRow, FolderRow, HitRow

UPLOAD_ID = "udb-upload"
SOURCES_EMPTY = ("No connections yet — connectors (Outlook, SharePoint, ClickUp, Jira) come with the connector "
                 "work; once connected, their content can be browsed and attached here.")


def _attach_button(path) -> rx.Component:
    return rx.icon_button(rx.icon("paperclip", size=12), size="1", variant="ghost", class_name="file-attach",
                          title="Attach", on_click=WorkspaceState.attach_file(path))


def _folder_row(folder: FolderRow) -> rx.Component:
    return rx.hstack(
        rx.icon("folder", size=14),
        rx.text(folder["name"], size="2", class_name="folder-name", trim="both"),
        on_click=WorkspaceState.open_folder(folder["path"]),
        cursor="pointer", width="100%", spacing="2", align="center", padding="0.2em 0.4em",
        class_name="folder-item",
    )


def _file_row(file: FileRow) -> rx.Component:
    return rx.cond(
        WorkspaceState.file_rename_path == file["path"],
        rx.hstack(
            rx.input(value=WorkspaceState.file_rename_value, on_change=WorkspaceState.set_file_rename_value,
                     id="file-rename-input", auto_focus=True, size="1", width="100%"),
            rx.icon_button(rx.icon("check", size=14), size="1", on_click=WorkspaceState.save_file_rename,
                           id="file-rename-save", title="Save"),
            rx.icon_button(rx.icon("x", size=14), size="1", variant="soft",
                           on_click=WorkspaceState.cancel_file_rename, title="Cancel"),
            width="100%", spacing="1",
        ),
        rx.hstack(
            rx.box(
                rx.text(file["name"], size="2", class_name="file-name", overflow="hidden",
                        text_overflow="ellipsis", white_space="nowrap"),
                rx.text(file["size"], " · ", file["mime"], size="1", color_scheme="gray"),
                on_click=WorkspaceState.preview_file(file["path"]),
                cursor="pointer", flex="1", min_width="0", title="Preview",
            ),
            _attach_button(file["path"]),
            rx.cond(file["may_rename"],
                    rx.icon_button(rx.icon("pencil", size=12), size="1", variant="ghost", class_name="file-rename",
                                   title="Rename",
                                   on_click=WorkspaceState.start_file_rename(file["path"], file["name"]))),
            rx.cond(file["may_delete"],
                    rx.icon_button(rx.icon("trash-2", size=12), size="1", variant="ghost", color_scheme="red",
                                   class_name="file-delete", title="Delete",
                                   on_click=WorkspaceState.ask_file_delete(file["path"]))),
            width="100%", spacing="1", align="center", padding="0.2em 0.4em", border_radius="6px",
            class_name="file-item",
        ),
    )


def _hit_row(hit: HitRow) -> rx.Component:
    return rx.hstack(
        rx.box(
            rx.text(hit["path"], size="2", class_name="hit-path", word_break="break-all"),
            rx.text(hit["snippet"], size="1", color_scheme="gray", class_name="hit-snippet"),
            on_click=WorkspaceState.preview_file(hit["path"]), cursor="pointer", flex="1", min_width="0",
        ),
        _attach_button(hit["path"]),
        width="100%", spacing="1", align="start", class_name="search-hit",
    )


def _rejected_names(rejected):
    """Only the refused files' names go to the server (never the files themselves)."""
    names = rejected.to(ArrayVar, list[dict]).map(
        lambda r: r.to(ObjectVar, dict[str, dict])["file"].to(ObjectVar, dict)["name"])
    return WorkspaceState.upload_rejected(names)


def _upload() -> rx.Component:
    return rx.cond(
        WorkspaceState.can_upload,
        rx.vstack(
            rx.upload(
                rx.hstack(rx.icon("upload", size=14), rx.text("Upload or drop files", size="2"),
                          spacing="2", align="center"),
                id=UPLOAD_ID,
                max_size=WorkspaceState.file_max_bytes,
                on_drop=WorkspaceState.handle_upload(
                    rx.upload_files(upload_id=UPLOAD_ID, on_upload_progress=WorkspaceState.upload_progress)),
                on_drop_rejected=_rejected_names,
                border=f"1px dashed {rx.color('gray', 7)}", border_radius="6px", padding="0.5em",
                width="100%", cursor="pointer", class_name="file-upload",
            ),
            rx.cond(WorkspaceState.uploading,
                    rx.progress(value=WorkspaceState.upload_percent, max=100, id="upload-progress", width="100%")),
            rx.text("Files up to ", WorkspaceState.file_limit, size="1", color_scheme="gray"),
            width="100%", spacing="1", id="file-upload-area",
        ),
    )


def _search() -> rx.Component:
    return rx.vstack(
        rx.form(
            rx.hstack(
                rx.input(name="query", id="file-search-input", placeholder="Search the files' text…", size="1",
                         width="100%"),
                rx.icon_button(rx.icon("search", size=12), size="1", type="submit", id="file-search",
                               title="Search"),
                rx.cond(WorkspaceState.searched,
                        rx.icon_button(rx.icon("x", size=12), size="1", type="button", variant="soft",
                                       title="Clear search", id="file-search-clear",
                                       on_click=WorkspaceState.clear_search)),
                width="100%", spacing="1",
            ),
            on_submit=WorkspaceState.search_files, reset_on_submit=False, width="100%",
        ),
        rx.cond(
            WorkspaceState.searched,
            rx.cond(
                WorkspaceState.search_hits.length() > 0,
                rx.vstack(rx.foreach(WorkspaceState.search_hits, _hit_row), id="file-search-hits", width="100%",
                          spacing="1"),
                rx.text("No file contains '", WorkspaceState.search_query, "'.", size="1", color_scheme="gray",
                        id="file-search-none"),
            ),
        ),
        width="100%", spacing="1",
    )


def files_panel() -> rx.Component:
    return rx.vstack(
        rx.cond(WorkspaceState.files_error != "",
                rx.callout(WorkspaceState.files_error, icon="triangle-alert", color_scheme="red", size="1",
                           id="files-error", width="100%")),
        rx.cond(WorkspaceState.files_notice != "",
                rx.callout(WorkspaceState.files_notice, icon="check", color_scheme="green", size="1",
                           id="files-notice", width="100%")),
        _upload(),
        _search(),
        rx.hstack(
            rx.icon_button(rx.icon("arrow-up", size=12), size="1", variant="soft", title="Up", id="folder-up",
                           on_click=WorkspaceState.folder_up, disabled=WorkspaceState.folder == "/"),
            rx.code(WorkspaceState.folder, id="current-folder", size="1"),
            spacing="2", align="center", width="100%",
        ),
        rx.cond(
            (WorkspaceState.folders.length() > 0) | (WorkspaceState.files.length() > 0),
            rx.vstack(rx.foreach(WorkspaceState.folders, _folder_row),
                      rx.foreach(WorkspaceState.files, _file_row),
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


def preview_dialog() -> rx.Component:
    return rx.dialog.root(
        rx.dialog.content(
            rx.dialog.title(WorkspaceState.preview_path),
            rx.text(WorkspaceState.preview_mime, size="1", color_scheme="gray"),
            rx.cond(WorkspaceState.preview_note != "",
                    rx.text(WorkspaceState.preview_note, size="2", id="file-preview-note")),
            rx.match(
                WorkspaceState.preview_kind,
                ("image", rx.image(src=WorkspaceState.preview_src, max_width="100%", max_height="60vh",
                                   id="file-preview-image")),
                rx.cond(WorkspaceState.preview_text != "",
                        rx.box(rx.text(WorkspaceState.preview_text, size="1", white_space="pre-wrap",
                                       font_family="monospace", id="file-preview-text"),
                               max_height="60vh", overflow_y="auto", width="100%")),
            ),
            rx.hstack(
                _attach_button(WorkspaceState.preview_path),
                rx.spacer(),
                rx.dialog.close(rx.button("Close", variant="soft", on_click=WorkspaceState.close_preview,
                                          id="file-preview-close")),
                width="100%", margin_top="1em", align="center",
            ),
            id="file-preview", max_width="48em",
        ),
        open=WorkspaceState.preview_path != "",
    )


def file_delete_dialog() -> rx.Component:
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title("Delete file"),
            rx.alert_dialog.description("Delete ", WorkspaceState.file_delete_path, "? This cannot be undone."),
            rx.hstack(
                rx.alert_dialog.cancel(rx.button("Cancel", variant="soft",
                                                 on_click=WorkspaceState.cancel_file_delete)),
                rx.alert_dialog.action(rx.button("Delete", color_scheme="red",
                                                 on_click=WorkspaceState.confirm_file_delete,
                                                 id="confirm-file-delete")),
                justify="end", spacing="3", margin_top="1em",
            ),
        ),
        open=WorkspaceState.file_delete_path != "",
    )


def udb_panel(chats: rx.Component) -> rx.Component:
    """The tabs Chats (the given chats panel), Files and Sources."""
    return rx.tabs.root(
        rx.tabs.list(
            rx.tabs.trigger("Chats", value="chats", id="udb-tab-chats"),
            rx.tabs.trigger("Files", value="files", id="udb-tab-files"),
            rx.tabs.trigger("Sources", value="sources", id="udb-tab-sources"),
            size="1",
        ),
        rx.tabs.content(chats, value="chats", padding_top="0.75em"),
        rx.tabs.content(files_panel(), value="files", padding_top="0.75em"),
        rx.tabs.content(sources_panel(), value="sources", padding_top="0.75em"),
        preview_dialog(),
        file_delete_dialog(),
        value=WorkspaceState.udb_tab,
        on_change=WorkspaceState.set_udb_tab,
        id="udb",
        width="20em", flex_shrink="0",
        padding_right="1em", border_right=f"1px solid {rx.color('gray', 4)}",
        max_height="calc(100vh - 8em)", overflow_y="auto",
    )
