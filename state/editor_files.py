"""The Editor's Files tab: the UDB's file store of the editor's instance, and picking a file into a node.

A workflow run's file actions (core_files, file.create, ai.describeImage's `path`, …) work in
the file store of the run's feature instance, which for the editor is the Graphical Editor
instance itself (the engine builds its ActionContext from the run's feature_instance_id). So the
panel shows exactly that store: FilesMixin with the host's `instance_id`, its rights on the
instance's file table.

"Use in node" puts a file's path into a parameter of the selected node, through the editor's own
`set_parameter` (undoable, saved as the draft like a typed value). The Sources view of the tab
(state/sources.py) does the same with an item of a connection: it is copied into this instance's
file store first (under /sources/<connection>/…), then its copy's path is picked.
"""

from __future__ import annotations

import re

import reflex as rx

from backend.connectors.sources import Sources
from backend.features.graphical_editor.interface import GraphicalEditorInterface as Door
from backend.files.service import FileStore
from backend.workflows.node_types import node_type
from state.param_fields import ParamField
from state.permissions import requires, requires_door
from state.sources import SourcesMixin
from state.workspace_files import FilesMixin

# Parameter names that take a path (or id) of a file in the file store.
FILE_FIELD_NAMES = {"path", "paths", "fileid", "filepath", "filepaths", "sourcepath", "targetpath", "saveas",
                    "folderpath", "file", "files"}
TEXT_KINDS = ("text", "textarea", "any", "json")
# A description that speaks of the file store (a mail "folder" or a "file name" does not).
_MENTIONS_FILE = re.compile(r"path of|at this path|file store|workspace'?s files|file path|folder path", re.I)


def file_fields(fields: list[ParamField], trigger: bool = False) -> list[str]:
    """The names of the fields a file's path may go into: those named like a path or file
    (path, fileId, sourcePath, targetPath, saveAs, …) or whose description speaks of a path in
    the file store; when there are none, every text field. A trigger has none (a webhook's
    `path` is a URL); base64 fields never take a path."""
    if trigger:
        return []
    texts = [f for f in fields if f["kind"] in TEXT_KINDS and "base64" not in f["name"].lower()]
    named = [f["name"] for f in texts
             if f["name"].lower() in FILE_FIELD_NAMES or _MENTIONS_FILE.search(f["description"] or "")]
    return named or [f["name"] for f in texts if f["kind"] in ("text", "textarea", "any")]


class EditorFilesMixin(FilesMixin, SourcesMixin, mixin=True):
    """Files tab of the editor, with its Sources view (the host state provides instance_id,
    selected_node, param_fields, node_type_id, can_edit, viewing_version and set_parameter)."""

    files_view: str = "files"  # files · sources

    @rx.event
    @requires("ui")
    def set_files_view(self, view: str | list[str]):
        """Switch the tab between the instance's files and the connections' sources."""
        self.files_view = "sources" if view in ("sources", ["sources"]) else "files"

    @rx.var
    def path_fields(self) -> list[str]:
        """The selected node's parameters a file can be picked into ([] without a selected node)."""
        if not self.selected_node:
            return []
        kind = node_type(self.node_type_id)
        return file_fields(self.param_fields, trigger=kind is not None and kind.is_trigger)

    def _field_problem(self, field: str) -> str:
        """Why nothing can be picked into the selected node's `field` now ("" when it can)."""
        if not self.selected_node:
            return "Select a node first."
        if not self.can_edit or self.viewing_version:
            return "This graph is read only here."
        if not any(f["name"] == field for f in self.param_fields):
            return f"The selected node has no parameter '{field}'."
        return ""

    def _put_path(self, field: str, path: str) -> bool:
        """Store `path` in the selected node's `field` (as a string); whether it was kept."""
        # "text" stores the path as a string whatever the field's kind (json/any would parse it).
        type(self).event_handlers["set_parameter"].fn(self, field, "text", path)
        self.form_revision += 1  # the parameter inputs show the new value
        return not self.error

    @rx.event
    @requires_door(Door.save_draft)
    def use_file(self, path: str, field: str):
        """Put a file's path into the selected node's parameter `field` (stored as a string)."""
        if not self.selected_node or not path:
            return
        problem = self._field_problem(field)
        if problem:
            self.files_error = problem
            return
        self.files_notice = f"{path} is now the node's {field}." if self._put_path(field, path) else ""

    @rx.event
    @requires_door(Sources.copy_to_files, FileStore.store_file, Door.save_draft)
    def use_source(self, location: str, field: str):
        """Copy an item of the open connection into this instance's file store and put its copy's
        path into the selected node's parameter `field`."""
        problem = self._field_problem(field)
        if problem:
            self.sources_error, self.sources_notice = problem, ""
            return

        def use() -> None:
            entry = self._copy_source(location)
            if entry is not None:
                kept = self._put_path(field, entry.path)
                self.sources_notice = f"Copied to {entry.path}; it is now the node's {field}." if kept else ""

        yield from self._busy(use)
