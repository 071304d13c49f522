"""Feature definition of CommCoach (spec §5.3): a coaching chat with the agent.

Each instance has its own coaching persona and goal (the system prompt in
`FeatureInstance.settings["systemPrompt"]`, :data:`DEFAULT_SYSTEM_PROMPT` until its
administrators change it) and keeps a summary per chat (`AgentChat.summary`).
"""

import sys
from dataclasses import replace

from backend.features.registry import FeatureCatalog, FeatureDefinition, definition_from_module
from backend.rbac.rights import RESOURCE
from backend.rbac.templates import RuleSpec, standard_feature_roles

FEATURE_CODE = "commcoach"
LABEL = "CommCoach"
ICON = "messages-square"

# Permission items: the one place each is spelled (see backend/rbac/door.py).
OPEN = "ui.feature.commcoach"
CHAT_UI = "ui.feature.commcoach.chat"
CONFIGURE = "resource.feature.commcoach.configure"
USE_AGENT = "resource.feature.commcoach.useAgent"
MANAGE_ACCESS = "resource.feature.commcoach.manageAccess"
CHAT_DATA = "data.feature.commcoach.chat"

UI_OBJECTS = (
    (OPEN, "Open the CommCoach instance"),
    (CHAT_UI, "Coaching chat"),
)
RESOURCE_OBJECTS = (
    (USE_AGENT, "Chat with the coach"),
    (CONFIGURE, "Change the coach's persona and goal (the instance's system prompt)"),
    (MANAGE_ACCESS, "Grant and revoke access to the instance"),
)
DATA_ITEMS = (CHAT_DATA,)
DATA_TABLES = tuple(item.rsplit(".", 1)[-1] for item in DATA_ITEMS)
# The standard roles; the persona is the instance's, so its users coach with it but do not change it.
TEMPLATE_ROLES = tuple(
    replace(role, rules=(*role.rules, RuleSpec(RESOURCE, CONFIGURE, view=False)))
    if role.label == f"{FEATURE_CODE}-user" else role
    for role in standard_feature_roles(FEATURE_CODE)
)
REQUIRED_SERVICES = ("database", "ai")

SYSTEM_PROMPT_LIMIT = 8_000
DEFAULT_SYSTEM_PROMPT = (
    "You are a communication coach. Help the user communicate more clearly, kindly and convincingly "
    "at work: in conversations, meetings, e-mails and presentations.\n"
    "- Ask one question at a time, and wait for the answer before the next one.\n"
    "- Give concrete feedback on phrasing: quote what the user wrote, say what works and what does not, "
    "and offer a better wording.\n"
    "- When asked, role-play a difficult conversation (a pay negotiation, feedback to a colleague, an "
    "unhappy customer): stay in your role until the user ends it, then give feedback on how it went.\n"
    "- Be encouraging and honest; keep your answers short."
)


def get_feature_definition() -> FeatureDefinition:
    """Catalogue metadata of this feature."""
    return definition_from_module(sys.modules[__name__])


def register_feature(catalog: FeatureCatalog) -> None:
    """Add this feature to the catalogue."""
    catalog.register(get_feature_definition())
