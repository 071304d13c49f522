"""The one registry: discovers method modules and answers what exists, by id and by toolbox."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass

import backend.actions.methods as methods_package
from backend.actions.base import ACTION_ATTRIBUTE, Action
from backend.actions.toolboxes import TOOLBOX_IDS, TOOLBOXES, Toolbox


@dataclass(frozen=True)
class ActionRegistry:
    """Every action, by id, and the toolboxes that have actions."""

    actions: dict[str, Action]
    # Toolboxes known only at run time (a mandate's external MCP servers, `mcp:<name>`), after
    # the spec's; see backend/actions/catalogue.py.
    extra_toolboxes: tuple[Toolbox, ...] = ()

    def get(self, action_id: str) -> Action | None:
        return self.actions.get(action_id)

    def in_toolbox(self, toolbox_id: str) -> list[Action]:
        return [a for a in self.actions.values() if a.toolbox == toolbox_id]

    def toolboxes(self) -> list[Toolbox]:
        """Toolboxes in spec order, only those that have at least one action."""
        used = {a.toolbox for a in self.actions.values()}
        return [t for t in (*TOOLBOXES, *self.extra_toolboxes) if t.id in used]

    def toolbox(self, toolbox_id: str) -> Toolbox | None:
        return next((t for t in (*TOOLBOXES, *self.extra_toolboxes) if t.id == toolbox_id), None)

    def with_extra(self, actions: list[Action], toolboxes: list[Toolbox]) -> ActionRegistry:
        """This registry and run-time actions and toolboxes (their ids must not clash)."""
        if not actions and not toolboxes:
            return self
        merged = dict(self.actions)
        for extra in actions:
            if extra.id in merged:
                raise ValueError(f"action id '{extra.id}' is declared twice")
            merged[extra.id] = extra
        return ActionRegistry(merged, (*self.extra_toolboxes, *toolboxes))

    def agent_tools(self, toolbox_ids: list[str]) -> list[Action]:
        return [a for a in self.actions.values() if a.agent_tool and a.toolbox in toolbox_ids]

    def graph_nodes(self) -> list[Action]:
        return [a for a in self.actions.values() if a.graph_node]


def _discover() -> list[Action]:
    found = []
    for info in sorted(pkgutil.walk_packages(methods_package.__path__, methods_package.__name__ + "."),
                       key=lambda i: i.name):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            declared = getattr(value, ACTION_ATTRIBUTE, None)
            if isinstance(declared, Action) and declared.fn is value:
                found.append(declared)
    return found


@functools.cache
def get_registry() -> ActionRegistry:
    """Import every method module once and collect the actions they declare."""
    found: dict[str, Action] = {}
    for declared in _discover():
        if declared.id in found:
            raise ValueError(f"action id '{declared.id}' is declared twice")
        if declared.toolbox not in TOOLBOX_IDS:
            raise ValueError(f"action {declared.id}: unknown toolbox '{declared.toolbox}'")
        found[declared.id] = declared
    return ActionRegistry(found)
