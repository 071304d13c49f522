"""Role-based access control of spec §4: template roles, AccessRules and their resolution."""

from backend.rbac.resolver import AccessResolver, Decision
from backend.rbac.rights import DATA, RESOURCE, UI, Level, Rights

__all__ = ["DATA", "RESOURCE", "UI", "AccessResolver", "Decision", "Level", "Rights"]
