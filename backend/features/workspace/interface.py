"""The door of one Workspace instance: its chats with the agent and its file store.

Every read and write of a Workspace's data from REST (backend/features/workspace/routes.py) or
the UI (state/workspace.py) goes through :class:`WorkspaceInterface`. Its methods declare their
permission with the Workspace's items (main.py) and enforce it (backend/rbac/door.py); the rows
are those of the platform doors it opens for its instance — the agent chats
(backend.agent.service.AgentChats) and the file store (backend.files.service.FileStore), which
apply the own/all rule.
"""

from __future__ import annotations

from typing import BinaryIO

from sqlmodel import Session

from backend.db.models import FeatureInstance, User
from backend.errors import FieldError, InvalidInput
from backend.features.chat_door import chat_door
from backend.features.workspace.main import CHAT_DATA, FEATURE_CODE, FILE_DATA, USE_AGENT
from backend.files import service as files
from backend.files.service import FileEntry, FileStore, SearchHit
from backend.rbac.access import AccessContext
from backend.rbac.door import guarded
from backend.rbac.rights import DATA


class WorkspaceInterface(chat_door(CHAT_DATA, USE_AGENT)):
    """The chats and files of one Workspace instance, authorised as one user.

    The agent and chat methods (can_use_agent, prepare_run, chat_rows, chat_history, rename_chat,
    delete_chat) come from backend.features.chat_door, guarded with the Workspace's items.
    """

    def __init__(self, access: AccessContext, instance: FeatureInstance):
        super().__init__(access, instance)
        self.files = FileStore(access, instance)

    # --- files ------------------------------------------------------------------------------------

    @guarded(DATA, FILE_DATA, "create")
    def upload_file(self, content: BinaryIO | None, uploaded_name: str | None, folder: str = "/",
                    name: str | None = None, size: int | None = None, content_type: str | None = None,
                    overwrite: bool = False) -> FileEntry:
        """Store an uploaded file in `folder` under `name` (default: the uploaded file's name).

        Raises:
            InvalidInput: no file, or a bad name or folder.
            FileTooLarge: over POWERON_FILE_MAX_BYTES or the instance's quota.
        """
        if content is None:
            raise InvalidInput([FieldError("file", "send the file as multipart/form-data field 'file'")])
        filename = name if name is not None else (uploaded_name or "").replace("\\", "/").rsplit("/", 1)[-1]
        files.validate_name(filename, "name")
        path = "/".join([*files.split_path(folder, "folder"), filename])
        if size is not None:
            files.check_file_size(size)
        data = content.read(files.get_limits().max_file_bytes + 1)
        return self.files.store_file(path, data, content_type, overwrite=overwrite)

    @guarded(DATA, FILE_DATA, "read")
    def list_files(self, folder: str = "/", recursive: bool = False) -> list[FileEntry]:
        """The files of a folder (and its subfolders when `recursive`) the user may read."""
        return self.files.list_files(folder, recursive)

    @guarded(DATA, FILE_DATA, "read")
    def search_files(self, query: str, limit: int = 20, folder: str | None = None) -> list[SearchHit]:
        """Full-text search over the files the user may read; a query without words finds nothing."""
        if not any(c.isalnum() for c in query):
            return []
        return self.files.search_files(query, limit, folder)

    @guarded(DATA, FILE_DATA, "read")
    def get_file(self, file_id: str) -> FileEntry:
        """One file's metadata."""
        return self.files.get_file(file_id)

    @guarded(DATA, FILE_DATA, "read")
    def read_file(self, file_id: str) -> tuple[FileEntry, bytes]:
        """One file's metadata and bytes."""
        return self.files.read_bytes(file_id=file_id)

    @guarded(DATA, FILE_DATA, "delete")
    def delete_file(self, file_id: str) -> FileEntry:
        """Delete one file; returns what it was."""
        return self.files.delete_file(file_id=file_id)


def open_interface(access: AccessContext, feature_instance_id: str, mandate_id: str | None = None
                   ) -> WorkspaceInterface:
    """The door of Workspace instance `feature_instance_id` for `access.user`, else NotFound."""
    return WorkspaceInterface(access, access.require_instance(feature_instance_id, FEATURE_CODE, mandate_id))


def get_interface(user: User, mandate_id: str | None, feature_instance_id: str,
                  session: Session) -> WorkspaceInterface:
    """The feature's data access (backend/features/registry.py): the door of one instance."""
    return open_interface(AccessContext(session, user), feature_instance_id, mandate_id)

