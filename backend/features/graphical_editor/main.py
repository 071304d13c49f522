"""Feature definition of the Graphical Editor (the spec's rename of automation2)."""

import sys

from backend.features.registry import FeatureCatalog, FeatureDefinition, definition_from_module
from backend.rbac.templates import standard_feature_roles

FEATURE_CODE = "graphicalEditor"
LABEL = "Graphical Editor"
ICON = "workflow"

# Permission items: the one place each is spelled. Doors (interface.py, services) declare and
# enforce them with backend.rbac.door.guarded; routes and UI handlers read those declarations.
OPEN = "ui.feature.graphicalEditor"
WORKFLOWS_PAGE = "ui.feature.graphicalEditor.workflows"
CREATE_BUTTON = "ui.feature.graphicalEditor.workflows.create"
RENAME_BUTTON = "ui.feature.graphicalEditor.workflows.rename"
DELETE_BUTTON = "ui.feature.graphicalEditor.workflows.delete"
EDITOR_PAGE = "ui.feature.graphicalEditor.editor"
MONITOR_PAGE = "ui.feature.graphicalEditor.monitor"
INBOX_PAGE = "ui.feature.graphicalEditor.inbox"
EXECUTE = "resource.feature.graphicalEditor.execute"
PUBLISH = "resource.feature.graphicalEditor.publish"
MANAGE_ACCESS = "resource.feature.graphicalEditor.manageAccess"
USE_AGENT = "resource.feature.graphicalEditor.useAgent"
WORKFLOW_DATA = "data.feature.graphicalEditor.workflow"
VERSION_DATA = "data.feature.graphicalEditor.workflow_version"
RUN_DATA = "data.feature.graphicalEditor.workflow_run"
TASK_DATA = "data.feature.graphicalEditor.human_task"
CHAT_DATA = "data.feature.graphicalEditor.chat"
FILE_DATA = "data.feature.graphicalEditor.file"

UI_OBJECTS = (
    (OPEN, "Open the Graphical Editor instance"),
    (WORKFLOWS_PAGE, "Workflows page"),
    (CREATE_BUTTON, "Create workflow button"),
    (RENAME_BUTTON, "Rename workflow button"),
    (DELETE_BUTTON, "Delete workflow button"),
    (EDITOR_PAGE, "Editor page"),
    (MONITOR_PAGE, "Monitor page"),
    (INBOX_PAGE, "Inbox page"),
)
RESOURCE_OBJECTS = (
    (EXECUTE, "Run workflows"),
    (PUBLISH, "Publish, unpublish, archive and restore versions"),
    (MANAGE_ACCESS, "Grant and revoke access to the instance"),
    (USE_AGENT, "Use the editor's AI chat"),
)
DATA_ITEMS = (WORKFLOW_DATA, VERSION_DATA, RUN_DATA, TASK_DATA, CHAT_DATA, FILE_DATA)
DATA_TABLES = tuple(item.rsplit(".", 1)[-1] for item in DATA_ITEMS)
MODIFYING_UI_OBJECTS = (CREATE_BUTTON, RENAME_BUTTON, DELETE_BUTTON)
TEMPLATE_ROLES = standard_feature_roles(FEATURE_CODE, MODIFYING_UI_OBJECTS)
REQUIRED_SERVICES = ("database",)


def get_feature_definition() -> FeatureDefinition:
    """Catalogue metadata of this feature."""
    return definition_from_module(sys.modules[__name__])


def register_feature(catalog: FeatureCatalog) -> None:
    """Add this feature to the catalogue."""
    catalog.register(get_feature_definition())
