"""Core toolbox: the file store of the caller's feature instance (backend.files.service).

Paths look like `/reports/2024/summary.md`; `/` is the root folder. Every action works in the
feature instance of its ActionContext with the caller's DATA rights on the instance's files.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from backend.actions.base import ActionContext, ActionParams, action
from backend.files import service
from backend.files.service import DEFAULT_READ_CHARS, MAX_READ_CHARS, FileEntry, FolderEntry

PATH_HELP = "Path of the file in this workspace's file store, e.g. /reports/summary.md"
FOLDER_HELP = "Folder path, e.g. /reports; / is the root folder"


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class FileInfo(_Output):
    id: str
    path: str
    name: str
    folder_path: str
    mime_type: str
    size_bytes: int
    has_text: bool = Field(description="False for binary files, which cannot be read as text or searched")
    modified_at: datetime

    @classmethod
    def of(cls, entry: FileEntry) -> FileInfo:
        return cls(id=entry.id, path=entry.path, name=entry.name, folder_path=entry.folder_path,
                   mime_type=entry.mime_type, size_bytes=entry.size_bytes, has_text=entry.has_text,
                   modified_at=entry.sys_modified_at)


class FolderInfo(_Output):
    id: str
    path: str
    name: str
    parent_path: str

    @classmethod
    def of(cls, entry: FolderEntry) -> FolderInfo:
        return cls(id=entry.id, path=entry.path, name=entry.name, parent_path=entry.parent_path)


# --- reading ----------------------------------------------------------------------------------------


class ReadFileParams(ActionParams):
    path: str = Field(description=PATH_HELP)
    offset: int = Field(0, ge=0, description="Character to start at (for reading long files in parts)")
    max_chars: int = Field(DEFAULT_READ_CHARS, ge=1, le=MAX_READ_CHARS,
                           description=f"At most this many characters (default {DEFAULT_READ_CHARS:,})")


class ReadFileOutput(_Output):
    path: str
    mime_type: str
    size_bytes: int
    text: str
    offset: int
    total_chars: int
    truncated: bool
    next_offset: int | None = Field(None, description="Offset to continue reading from when truncated")


@action("core.readFile", toolbox="core", instance_table="file", label="Read file",
        description="Read the text of a file in the workspace's file store (text, PDF and DOCX files; "
                    "binary files are refused). Long files are returned in parts: use offset to continue.",
        params=ReadFileParams, output=ReadFileOutput, capabilities=("read",))
def read_file(params: ReadFileParams, context: ActionContext) -> ReadFileOutput:
    read = service.read_text(context, params.path, params.offset, params.max_chars)
    return ReadFileOutput(path=read.file.path, mime_type=read.file.mime_type, size_bytes=read.file.size_bytes,
                          text=read.text, offset=read.offset, total_chars=read.total_chars, truncated=read.truncated,
                          next_offset=read.offset + len(read.text) if read.truncated else None)


class ListFilesParams(ActionParams):
    folder: str = Field("/", description=FOLDER_HELP)
    recursive: bool = Field(False, description="Also list the files in all subfolders")


class ListFilesOutput(_Output):
    folder: str
    files: list[FileInfo]


@action("core.listFiles", toolbox="core", instance_table="file", label="List files",
        description="List the files in a folder of the workspace's file store (optionally with all subfolders).",
        params=ListFilesParams, output=ListFilesOutput, capabilities=("read",))
def list_files(params: ListFilesParams, context: ActionContext) -> ListFilesOutput:
    files = service.list_files(context, params.folder, params.recursive)
    return ListFilesOutput(folder=service.join_path(service.split_path(params.folder, "folder")),
                           files=[FileInfo.of(f) for f in files])


class SearchParams(ActionParams):
    query: str = Field(min_length=1, description="Words to find; files containing all of them (or words "
                                                 "starting with them) match, case-insensitively")
    limit: int = Field(10, ge=1, le=50, description="At most this many files (default 10)")
    folder: str | None = Field(None, description="Only search in this folder and its subfolders")


class SearchHitInfo(_Output):
    file_id: str
    path: str
    name: str
    folder_path: str
    mime_type: str
    snippet: str = Field(description="Text around the matches, which are marked **like this**")


class SearchOutput(_Output):
    query: str
    hits: list[SearchHitInfo]


@action("core.searchInFileContent", toolbox="core", instance_table="file", label="Search in files",
        description="Full-text search over the content of the text, PDF and DOCX files in the workspace's file "
                    "store; returns matching files with their folder and a snippet, best first.",
        params=SearchParams, output=SearchOutput, capabilities=("read",))
def search_in_file_content(params: SearchParams, context: ActionContext) -> SearchOutput:
    hits = service.search_files(context, params.query, params.limit, params.folder)
    return SearchOutput(query=params.query, hits=[
        SearchHitInfo(file_id=h.file.id, path=h.file.path, name=h.file.name, folder_path=h.folder_path,
                      mime_type=h.file.mime_type, snippet=h.snippet) for h in hits])


class ListFoldersParams(ActionParams):
    path: str = Field("/", description=FOLDER_HELP)
    recursive: bool = Field(False, description="Also list every folder below the subfolders")


class ListFoldersOutput(_Output):
    path: str
    folders: list[FolderInfo]


@action("core.listFolders", toolbox="core", instance_table="file", label="List folders",
        description="List the folders inside a folder of the workspace's file store.",
        params=ListFoldersParams, output=ListFoldersOutput, capabilities=("read",))
def list_folders(params: ListFoldersParams, context: ActionContext) -> ListFoldersOutput:
    folders = service.list_folders(context, params.path, params.recursive)
    return ListFoldersOutput(path=service.join_path(service.split_path(params.path)),
                             folders=[FolderInfo.of(f) for f in folders])


# --- writing ----------------------------------------------------------------------------------------


class WriteFileParams(ActionParams):
    path: str = Field(description=PATH_HELP + "; missing folders are created unless createFolders is false")
    content: str = Field(description="The complete text of the file (UTF-8)")
    overwrite: bool = Field(True, description="Replace the file if it exists (default true)")
    create_folders: bool = Field(True, description="Create missing folders on the path (default true)")


@action("core.writeFile", toolbox="core", instance_table="file", label="Write file",
        description="Create a text file in the workspace's file store, or replace the text of an existing one.",
        params=WriteFileParams, output=FileInfo, capabilities=("write",))
def write_file(params: WriteFileParams, context: ActionContext) -> FileInfo:
    return FileInfo.of(service.write_text(context, params.path, params.content, params.overwrite,
                                          params.create_folders))


class PathParams(ActionParams):
    path: str = Field(description=PATH_HELP)


class DeletedFile(_Output):
    deleted: str


@action("core.deleteFile", toolbox="core", instance_table="file", label="Delete file",
        description="Delete a file from the workspace's file store.",
        params=PathParams, output=DeletedFile, capabilities=("write",), consequences=("delete",))
def delete_file(params: PathParams, context: ActionContext) -> DeletedFile:
    return DeletedFile(deleted=service.delete_file(context, params.path).path)


class RenameFileParams(ActionParams):
    path: str = Field(description=PATH_HELP)
    new_name: str = Field(description="The new file name (no folder part), e.g. summary-final.md")


@action("core.renameFile", toolbox="core", instance_table="file", label="Rename file",
        description="Rename a file within its folder in the workspace's file store.",
        params=RenameFileParams, output=FileInfo, capabilities=("write",))
def rename_file(params: RenameFileParams, context: ActionContext) -> FileInfo:
    return FileInfo.of(service.rename_file(context, params.path, params.new_name))


class CopyFileParams(ActionParams):
    path: str = Field(description="Path of the file to copy")
    target_path: str = Field(description="Path of the copy, or an existing folder to copy into")
    overwrite: bool = Field(False, description="Replace a file at the target (default false)")


@action("core.copyFile", toolbox="core", instance_table="file", label="Copy file",
        description="Copy a file to another path or folder of the workspace's file store.",
        params=CopyFileParams, output=FileInfo, capabilities=("write",))
def copy_file(params: CopyFileParams, context: ActionContext) -> FileInfo:
    return FileInfo.of(service.copy_file(context, params.path, params.target_path, params.overwrite))


class FolderPathParams(ActionParams):
    path: str = Field(description="Folder path, e.g. /reports/2024")


@action("core.createFolder", toolbox="core", instance_table="file", label="Create folder",
        description="Create a folder (and any missing parent folders) in the workspace's file store.",
        params=FolderPathParams, output=FolderInfo, capabilities=("write",))
def create_folder(params: FolderPathParams, context: ActionContext) -> FolderInfo:
    return FolderInfo.of(service.create_folder(context, params.path))


class DeleteFolderParams(ActionParams):
    path: str = Field(description="Folder path, e.g. /reports/2024")
    recursive: bool = Field(False, description="Also delete the files and folders inside it (default false: "
                                               "only an empty folder is deleted)")


class DeletedFolderOutput(_Output):
    deleted: str
    files: int = Field(description="Files deleted with it")
    folders: int = Field(description="Folders deleted, itself included")


@action("core.deleteFolder", toolbox="core", instance_table="file", label="Delete folder",
        description="Delete a folder of the workspace's file store; a folder with contents only with recursive.",
        params=DeleteFolderParams, output=DeletedFolderOutput, capabilities=("write",), consequences=("delete",))
def delete_folder(params: DeleteFolderParams, context: ActionContext) -> DeletedFolderOutput:
    result = service.delete_folder(context, params.path, params.recursive)
    return DeletedFolderOutput(deleted=result.path, files=result.files, folders=result.folders)
