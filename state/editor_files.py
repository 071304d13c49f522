"""The Editor's Files tab: the UDB's file store of the editor's instance, and picking a file into a node.

A workflow run's file actions (core_files, file.create, ai.describeImage's `path`, …) work in
the file store of the run's feature instance, which for the editor is the Graphical Editor
instance itself (the engine builds its ActionContext from the run's feature_instance_id). So the
panel shows exactly that store: FilesMixin with the host's `instance_id`, its rights on the
instance's file table.

"Use in node" puts a file's path into a parameter of the selected node, through the editor's own
`set_parameter` (undoable, saved as the draft like a typed value).
"""

from __future__ import annotations

import re

import reflex as rx

from backend.features.graphical_editor.interface import GraphicalEditorInterface as Door
from backend.workflows.node_types import node_type
from state.param_fields import ParamField
from state.permissions import requires_door
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


class EditorFilesMixin(FilesMixin, mixin=True):
    """Files tab of the editor (the host state provides instance_id, selected_node, param_fields,
    node_type_id, can_edit, viewing_version and set_parameter)."""

    @rx.var
    def path_fields(self) -> list[str]:
        """The selected node's parameters a file can be picked into ([] without a selected node)."""
        if not self.selected_node:
            return []
        kind = node_type(self.node_type_id)
        return file_fields(self.param_fields, trigger=kind is not None and kind.is_trigger)

    @rx.event
    @requires_door(Door.save_draft)
    def use_file(self, path: str, field: str):
        """Put a file's path into the selected node's parameter `field` (stored as a string)."""
        if not self.selected_node or not path:
            return
        kind = next((f["kind"] for f in self.param_fields if f["name"] == field), "")
        if not kind:
            self.files_error = f"The selected node has no parameter '{field}'."
            return
        # "text" stores the path as a string whatever the field's kind (json/any would parse it).
        type(self).event_handlers["set_parameter"].fn(self, field, "text", path)
        self.files_notice = "" if self.error else f"{path} is now the node's {field}."
        self.form_revision += 1  # the parameter inputs show the new value
