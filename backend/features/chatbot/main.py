"""Feature definition of the Chatbot: a chat over one database (uploaded tables or an SQL connection)."""

import sys
from dataclasses import replace

from backend.features.registry import FeatureCatalog, FeatureDefinition, definition_from_module
from backend.rbac.rights import RESOURCE, UI
from backend.rbac.templates import RuleSpec, TemplateRole, standard_feature_roles

FEATURE_CODE = "chatbot"
LABEL = "Chatbot"
ICON = "bot"

# Permission items: the one place each is spelled (see backend/rbac/door.py).
OPEN = "ui.feature.chatbot"
CHAT_UI = "ui.feature.chatbot.chat"
CONFIGURE_UI = "ui.feature.chatbot.configure"
USE_AGENT = "resource.feature.chatbot.useAgent"
CONFIGURE = "resource.feature.chatbot.configure"
MANAGE_EMBED = "resource.feature.chatbot.manageEmbed"
MANAGE_ACCESS = "resource.feature.chatbot.manageAccess"
CHAT_DATA = "data.feature.chatbot.chat"
FILE_DATA = "data.feature.chatbot.file"

UI_OBJECTS = (
    (OPEN, "Open the Chatbot instance"),
    (CHAT_UI, "Chat with the chatbot"),
    (CONFIGURE_UI, "The chatbot's settings panel"),
)
RESOURCE_OBJECTS = (
    (USE_AGENT, "Ask the chatbot (run its agent and its database queries)"),
    (CONFIGURE, "Configure the chatbot: system prompt, data source, limits, uploaded tables"),
    (MANAGE_EMBED, "Enable, rotate and disable the chatbot's public embed link"),
    (MANAGE_ACCESS, "Grant and revoke access to the instance"),
)
DATA_ITEMS = (CHAT_DATA, FILE_DATA)
DATA_TABLES = tuple(item.rsplit(".", 1)[-1] for item in DATA_ITEMS)
# Only the instance's admins configure it and manage its embed; users chat, viewers read.
_ADMIN_ONLY = (RuleSpec(UI, CONFIGURE_UI, view=False), RuleSpec(RESOURCE, CONFIGURE, view=False),
               RuleSpec(RESOURCE, MANAGE_EMBED, view=False))


def _admin_only(role: TemplateRole) -> TemplateRole:
    """`role` denied the admin-only items (the admin template keeps them)."""
    if role.label.endswith("-admin"):
        return role
    present = {(rule.context, rule.item) for rule in role.rules}
    return replace(role, rules=(*role.rules, *(r for r in _ADMIN_ONLY if (r.context, r.item) not in present)))


TEMPLATE_ROLES = tuple(_admin_only(role) for role in standard_feature_roles(FEATURE_CODE, (CONFIGURE_UI,)))
REQUIRED_SERVICES = ("database", "ai")


def get_feature_definition() -> FeatureDefinition:
    """Catalogue metadata of this feature."""
    return definition_from_module(sys.modules[__name__])


def register_feature(catalog: FeatureCatalog) -> None:
    """Add this feature to the catalogue."""
    catalog.register(get_feature_definition())
