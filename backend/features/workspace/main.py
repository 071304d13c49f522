"""Feature definition of the AI Workspace."""

import sys

from backend.features.registry import FeatureCatalog, FeatureDefinition, definition_from_module
from backend.rbac.templates import standard_feature_roles

FEATURE_CODE = "workspace"
LABEL = "Workspace"
ICON = "message-square"

UI_OBJECTS = (
    ("ui.feature.workspace", "Open the Workspace instance"),
    ("ui.feature.workspace.chat", "Chat with the agent"),
)
RESOURCE_OBJECTS = (
    ("resource.feature.workspace.useAgent", "Run the AI agent"),
    ("resource.feature.workspace.manageAccess", "Grant and revoke access to the instance"),
)
DATA_TABLES = ("chat", "file")
TEMPLATE_ROLES = standard_feature_roles(FEATURE_CODE)
REQUIRED_SERVICES = ("database", "ai")


def get_feature_definition() -> FeatureDefinition:
    """Catalogue metadata of this feature."""
    return definition_from_module(sys.modules[__name__])


def register_feature(catalog: FeatureCatalog) -> None:
    """Add this feature to the catalogue."""
    catalog.register(get_feature_definition())
