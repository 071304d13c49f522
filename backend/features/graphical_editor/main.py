"""Feature definition of the Graphical Editor (the spec's rename of automation2)."""

import sys

from backend.features.registry import FeatureCatalog, FeatureDefinition, definition_from_module
from backend.rbac.templates import standard_feature_roles

FEATURE_CODE = "graphicalEditor"
LABEL = "Graphical Editor"
ICON = "workflow"

UI_OBJECTS = (
    ("ui.feature.graphicalEditor", "Open the Graphical Editor instance"),
    ("ui.feature.graphicalEditor.workflows", "Workflows page"),
    ("ui.feature.graphicalEditor.workflows.create", "Create workflow button"),
    ("ui.feature.graphicalEditor.workflows.rename", "Rename workflow button"),
    ("ui.feature.graphicalEditor.workflows.delete", "Delete workflow button"),
    ("ui.feature.graphicalEditor.editor", "Editor page"),
    ("ui.feature.graphicalEditor.monitor", "Monitor page"),
    ("ui.feature.graphicalEditor.inbox", "Inbox page"),
)
RESOURCE_OBJECTS = (
    ("resource.feature.graphicalEditor.execute", "Run workflows"),
    ("resource.feature.graphicalEditor.publish", "Publish, unpublish, archive and restore versions"),
    ("resource.feature.graphicalEditor.manageAccess", "Grant and revoke access to the instance"),
    ("resource.feature.graphicalEditor.useAgent", "Use the editor's AI chat"),
)
DATA_TABLES = ("workflow", "workflow_version", "workflow_run", "human_task", "chat", "file")
MODIFYING_UI_OBJECTS = (
    "ui.feature.graphicalEditor.workflows.create",
    "ui.feature.graphicalEditor.workflows.rename",
    "ui.feature.graphicalEditor.workflows.delete",
)
TEMPLATE_ROLES = standard_feature_roles(FEATURE_CODE, MODIFYING_UI_OBJECTS)
REQUIRED_SERVICES = ("database",)


def get_feature_definition() -> FeatureDefinition:
    """Catalogue metadata of this feature."""
    return definition_from_module(sys.modules[__name__])


def register_feature(catalog: FeatureCatalog) -> None:
    """Add this feature to the catalogue."""
    catalog.register(get_feature_definition())
