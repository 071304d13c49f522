"""Feature definition of the AI Workspace."""

import sys

from backend.features.registry import FeatureCatalog, FeatureDefinition, definition_from_module
from backend.rbac.templates import standard_feature_roles

FEATURE_CODE = "workspace"
LABEL = "Workspace"
ICON = "message-square"

# Permission items: the one place each is spelled (see backend/rbac/door.py).
OPEN = "ui.feature.workspace"
CHAT_UI = "ui.feature.workspace.chat"
USE_AGENT = "resource.feature.workspace.useAgent"
MANAGE_ACCESS = "resource.feature.workspace.manageAccess"
CHAT_DATA = "data.feature.workspace.chat"
FILE_DATA = "data.feature.workspace.file"

UI_OBJECTS = (
    (OPEN, "Open the Workspace instance"),
    (CHAT_UI, "Chat with the agent"),
)
RESOURCE_OBJECTS = (
    (USE_AGENT, "Run the AI agent"),
    (MANAGE_ACCESS, "Grant and revoke access to the instance"),
)
DATA_ITEMS = (CHAT_DATA, FILE_DATA)
DATA_TABLES = tuple(item.rsplit(".", 1)[-1] for item in DATA_ITEMS)
TEMPLATE_ROLES = standard_feature_roles(FEATURE_CODE)
REQUIRED_SERVICES = ("database", "ai")


def get_feature_definition() -> FeatureDefinition:
    """Catalogue metadata of this feature."""
    return definition_from_module(sys.modules[__name__])


def register_feature(catalog: FeatureCatalog) -> None:
    """Add this feature to the catalogue."""
    catalog.register(get_feature_definition())
