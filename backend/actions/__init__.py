"""The Unified Action Library (spec §3.5, §5.2): one registry of actions grouped in toolboxes.

It feeds graph nodes (actions marked `graph_node`), agent tools (`agent_tool`) and the
editor palette. Method modules in backend/actions/methods/ are discovered automatically.
"""

from backend.actions.base import Action, ActionContext, ActionError, ActionParams, ActionResult, action
from backend.actions.executor import execute_action
from backend.actions.registry import get_registry

__all__ = [
    "Action", "ActionContext", "ActionError", "ActionParams", "ActionResult", "action", "execute_action",
    "get_registry",
]
