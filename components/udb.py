"""The UDB's Files and Sources panels (the Unified Data Bar), shared by the Workspace and the Editor.

Every function takes the state class that mixes in :class:`state.workspace_files.FilesMixin`
(its vars and event handlers), so the same panel works on WorkspaceState and EditorState.
Folders, upload with a progress bar, preview, rename, delete and full-text search; the
Workspace adds "Attach" (``attach``: True, or a bool var such as "may use the agent"), the Editor
adds its "Use in node" menu through ``row_extra`` (a function of a file's path var returning the
extra row component). Buttons the user's rights do not allow are hidden; the file service
refuses them anyway.

Sources (:func:`sources_panel`, state class mixing in :class:`state.sources.SourcesMixin`) browses
the user's connections through the Sources door; the Workspace attaches an item (copied into the
instance's files first), the Editor picks it into a node (``row_extra``).
"""

from __future__ import annotations

from collections.abc import Callable

import reflex as rx
from reflex.vars import ArrayVar, ObjectVar

from state.sources import ICONS, SourceConnectionRow, SourceEntryRow
from state.workspace_files import FileRow, FolderRow, HitRow, SnippetSegment

UPLOAD_ID = "udb-upload"
SOURCES_EMPTY = ("No connections yet with mail or files to browse. Add one on the Connections page (an e-mail "
                 "account, Microsoft 365 …): its folders, mails, attachments and files then appear here.")

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


# --- Sources: the user's connections (state/sources.py, backend/connectors/sources.py) ---------------


def _source_connection(state, row: SourceConnectionRow) -> rx.Component:
    return rx.hstack(
        rx.icon("plug", size=14, flex_shrink="0"),
        rx.box(
            rx.text(row["label"], size="2", class_name="source-connection-label", overflow="hidden",
                    text_overflow="ellipsis", white_space="nowrap"),
            rx.text(row["type_label"], size="1", color_scheme="gray"),
            rx.cond(~row["usable"],
                    rx.text(row["status"], rx.cond(row["last_error"] != "", ": " + row["last_error"], ""),
                            size="1", color_scheme="red", class_name="source-connection-problem")),
            flex="1", min_width="0",
        ),
        rx.icon("chevron-right", size=14, flex_shrink="0"),
        on_click=state.open_source(row["id"]),
        cursor="pointer", width="100%", spacing="2", align="center", padding="0.3em 0.4em", border_radius="6px",
        class_name="source-connection", custom_attrs={"data-label": row["label"]},
    )


def _source_attach_button(state, location) -> rx.Component:
    return rx.icon_button(rx.icon("paperclip", size=12), size="1", variant="ghost", class_name="source-attach",
                          title="Attach (copied into this instance's files)",
                          on_click=state.attach_source(location))


def _source_extras(state, entry: SourceEntryRow, attach: Attach, row_extra: RowExtra) -> list[rx.Component]:
    """Preview (for a mail, which opens to its attachments), Attach and the host's extra button."""
    parts = [rx.cond(entry["previewable"] & entry["container"],
                     rx.icon_button(rx.icon("eye", size=12), size="1", variant="ghost",
                                    class_name="source-preview-button", title="Preview",
                                    on_click=state.preview_source(entry["location"])))]
    if isinstance(attach, rx.Var):
        parts.append(rx.cond(attach & entry["copyable"], _source_attach_button(state, entry["location"])))
    elif attach:
        parts.append(rx.cond(entry["copyable"], _source_attach_button(state, entry["location"])))
    if row_extra is not None:
        parts.append(rx.cond(entry["copyable"], row_extra(entry["location"])))
    return parts


def _source_icon(entry: SourceEntryRow) -> rx.Component:
    """The icon of an entry's kind (static icons: no icon library loaded at run time)."""
    return rx.box(
        rx.match(entry["kind"], *[(kind, rx.icon(name, size=14)) for kind, name in ICONS.items()],
                 rx.icon("file", size=14)),
        display="flex", flex_shrink="0",
    )


def _source_name(entry: SourceEntryRow, on_click, action: str) -> rx.Component:
    return rx.box(
        rx.text(entry["name"], size="2", class_name="source-entry-name", overflow="hidden",
                text_overflow="ellipsis", white_space="nowrap"),
        rx.cond(entry["detail"] != "", rx.text(entry["detail"], size="1", color_scheme="gray",
                                               class_name="source-entry-detail", overflow="hidden",
                                               text_overflow="ellipsis", white_space="nowrap")),
        on_click=on_click, cursor="pointer", flex="1", min_width="0",
        title=action + ": " + entry["name"] + rx.cond(entry["detail"] != "", " (" + entry["detail"] + ")", ""),
    )


def _source_entry(state, entry: SourceEntryRow, attach: Attach, row_extra: RowExtra) -> rx.Component:
    """A container opens on a click (a mail: to its attachments), an item previews."""
    return rx.hstack(
        _source_icon(entry),
        rx.cond(entry["container"],
                _source_name(entry, state.open_source_entry(entry["location"], entry["name"]), "Open"),
                _source_name(entry, state.preview_source(entry["location"]), "Preview")),
        *_source_extras(state, entry, attach, row_extra),
        width="100%", spacing="1", align="center", padding="0.2em 0.4em", border_radius="6px",
        class_name="source-entry", custom_attrs={"data-kind": entry["kind"], "data-name": entry["name"]},
    )


def _source_crumb(state, crumb, index) -> rx.Component:
    return rx.fragment(
        rx.text("›", size="1", color_scheme="gray"),
        rx.link(crumb["name"], size="1", class_name="source-crumb", on_click=state.source_crumb(index),
                cursor="pointer", word_break="break-all"),
    )


def _source_trail(state) -> rx.Component:
    """Connections › the connection › where the user stands (each a step back)."""
    return rx.flex(
        rx.link(rx.icon("arrow-left", size=12), "Connections", size="1", id="source-back",
                on_click=state.close_source, cursor="pointer", display="flex", align_items="center", gap="0.2em"),
        rx.text("›", size="1", color_scheme="gray"),
        rx.link(state.source_label, size="1", id="source-top", class_name="source-crumb",
                on_click=state.source_crumb(-1), cursor="pointer", word_break="break-all"),
        rx.foreach(state.source_trail, lambda crumb, index: _source_crumb(state, crumb, index)),
        wrap="wrap", gap="0.3em", align="center", width="100%", id="source-trail",
    )


def _source_search(state) -> rx.Component:
    return rx.form(
        rx.hstack(
            rx.input(name="query", id="source-search-input", placeholder="Search here…", size="1", width="100%"),
            rx.icon_button(rx.icon("search", size=12), size="1", type="submit", id="source-search", title="Search"),
            rx.cond(state.source_searched,
                    rx.icon_button(rx.icon("x", size=12), size="1", type="button", variant="soft",
                                   title="Clear search", id="source-search-clear",
                                   on_click=state.clear_source_search)),
            width="100%", spacing="1",
        ),
        on_submit=state.search_source, reset_on_submit=False, width="100%",
    )


def _source_browser(state, attach: Attach, row_extra: RowExtra) -> rx.Component:
    return rx.vstack(
        _source_trail(state),
        _source_search(state),
        rx.cond(state.source_searched,
                rx.text("Found for '", state.source_query, "':", size="1", color_scheme="gray",
                        id="source-search-note")),
        rx.cond(
            state.source_entries.length() > 0,
            rx.vstack(rx.foreach(state.source_entries, lambda entry: _source_entry(state, entry, attach, row_extra)),
                      id="source-entries", width="100%", spacing="0"),
            rx.cond(state.sources_error == "",
                    rx.text(rx.cond(state.source_searched, "Nothing matches '" + state.source_query + "' here.",
                                    "Nothing here."), size="2", color_scheme="gray", id="source-entries-empty")),
        ),
        width="100%", spacing="2",
    )


def _source_list(state) -> rx.Component:
    return rx.cond(
        state.sources_connections.length() > 0,
        rx.vstack(
            rx.text("Your connections and those shared with you:", size="1", color_scheme="gray"),
            rx.vstack(rx.foreach(state.sources_connections, lambda row: _source_connection(state, row)),
                      id="source-connections", width="100%", spacing="0"),
            width="100%", spacing="1",
        ),
        rx.cond(state.sources_loaded,
                rx.vstack(rx.icon("plug", size=20, color=rx.color("gray", 9)),
                          rx.text(SOURCES_EMPTY, size="2", color_scheme="gray", id="sources-empty"),
                          width="100%", spacing="2")),
    )


def source_preview_dialog(state, attach: Attach = False) -> rx.Component:
    """A mail as text, or a file or attachment as the Files tab previews one."""
    return rx.dialog.root(
        rx.dialog.content(
            rx.dialog.title(state.source_preview_title),
            rx.text(state.source_preview_mime, size="1", color_scheme="gray"),
            rx.cond(state.source_preview_note != "",
                    rx.text(state.source_preview_note, size="2", id="source-preview-note")),
            rx.match(
                state.source_preview_kind,
                ("image", rx.image(src=state.source_preview_src, max_width="100%", max_height="60vh",
                                   id="source-preview-image")),
                rx.cond(state.source_preview_text != "",
                        rx.box(rx.text(state.source_preview_text, size="1", white_space="pre-wrap",
                                       font_family="monospace", id="source-preview-text"),
                               max_height="60vh", overflow_y="auto", width="100%")),
            ),
            rx.hstack(
                *([rx.cond(attach, rx.button(rx.icon("paperclip", size=14), "Attach", size="2", variant="soft",
                                             id="source-preview-attach",
                                             on_click=state.attach_source(state.source_preview_location)))]
                  if isinstance(attach, rx.Var) else
                  [rx.button(rx.icon("paperclip", size=14), "Attach", size="2", variant="soft",
                             id="source-preview-attach",
                             on_click=state.attach_source(state.source_preview_location))] if attach else []),
                rx.spacer(),
                rx.dialog.close(rx.button("Close", variant="soft", on_click=state.close_source_preview,
                                          id="source-preview-close")),
                width="100%", margin_top="1em", align="center",
            ),
            id="source-preview", max_width="48em",
        ),
        open=state.source_preview_location != "",
    )


def sources_panel(state=None, attach: Attach | None = None, row_extra: RowExtra = None) -> rx.Component:
    """The Sources tab: the user's connections that offer mail or files; one opened, its folders,
    mails, attachments, sites, drives and files with a trail back, search, preview, and "Attach"
    (the Workspace) or the host's extra button (the Editor's "Use in node"). Copies land in the
    instance's file store under /sources/<connection>/….

    Args:
        state: The state class mixing in state.sources.SourcesMixin; None: the Workspace's
            (WorkspaceState, with Attach while the user may talk to the agent).
        attach: Show "Attach" on items (True, False or a bool var).
        row_extra: Optional function of an item's location var: one more component on each item
            that can be copied.
    """
    if state is None:
        from state.workspace import WorkspaceState

        state, attach = WorkspaceState, WorkspaceState.can_use_agent if attach is None else attach
    attach = False if attach is None else attach
    return rx.vstack(
        rx.cond(state.sources_error != "",
                rx.callout(state.sources_error, icon="triangle-alert", color_scheme="red", size="1",
                           id="sources-error", width="100%")),
        rx.cond(state.sources_notice != "",
                rx.callout(state.sources_notice, icon="check", color_scheme="green", size="1",
                           id="sources-notice", width="100%")),
        rx.cond(state.sources_busy, rx.hstack(rx.spinner(size="1"), rx.text("Asking the connection…", size="1",
                                                                             color_scheme="gray"),
                                              id="sources-busy", align="center", spacing="2")),
        rx.cond(state.source_id == "", _source_list(state), _source_browser(state, attach, row_extra)),
        rx.link(rx.icon("settings-2", size=12), "Manage connections", href="/connections", size="1",
                id="sources-manage", display="flex", align_items="center", gap="0.3em"),
        source_preview_dialog(state, attach),
        width="100%", spacing="2", padding_top="0.25em", id="sources-panel", on_mount=state.load_sources,
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
