"""The Workspace's UDB panel (Unified Data Bar): tabs Chats, Files and Sources.

Files shows the instance's file store (components/udb.py, shared with the Editor): folders,
upload with a progress bar, preview, rename, delete, full-text search and, in the Workspace,
"Attach" (the file's path goes with the next prompt: only for those who may talk to the agent).
Buttons the user's rights do not allow are hidden; the file service refuses them anyway.
"""

import reflex as rx

from components.udb import file_delete_dialog, files_panel, preview_dialog, sources_panel
from state.workspace import WorkspaceState


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
        rx.tabs.content(files_panel(WorkspaceState, attach=WorkspaceState.can_use_agent), value="files",
                        padding_top="0.75em"),
        rx.tabs.content(sources_panel(), value="sources", padding_top="0.75em"),
        preview_dialog(WorkspaceState, attach=WorkspaceState.can_use_agent),
        file_delete_dialog(WorkspaceState),
        value=WorkspaceState.udb_tab,
        on_change=WorkspaceState.set_udb_tab,
        id="udb",
        width="20em", flex_shrink="0",
        padding_right="1em", border_right=f"1px solid {rx.color('gray', 4)}",
        max_height="calc(100vh - 8em)", overflow_y="auto",
    )
