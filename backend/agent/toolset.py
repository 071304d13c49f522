"""Which tools an agent is offered, round by round (spec §5.3).

The tools of the active toolboxes come from the one action library, filtered by what the user
may run (RESOURCE rights, server-side; execute_action checks again), by their active
connections and by what the instance has (file tools only where the feature has a file store).
Two meta tools are added when they have something to offer: requestToolbox, whose
enum lists only the toolboxes requestable now, and queryFeatureInstance (sub-agents).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from backend.actions import get_registry
from backend.actions.base import Action
from backend.actions.catalogue import registry_for
from backend.actions.executor import may_run
from backend.actions.openai_tools import to_tool_definition, tool_name
from backend.actions.registry import ActionRegistry
from backend.actions.toolboxes import MCP_TOOLBOX_PREFIX, Toolbox
from backend.agent.config import FEATURE_DATA_TOOLBOX, QUERY_FEATURE_INSTANCE, REQUEST_TOOLBOX, AgentConfig
from backend.agent.selector import Selection, group_limits, select
from backend.connectors.store import active_connection_types, usable_connections
from backend.connectors.types import connection_type
from backend.db.models import FeatureInstance
from backend.features.registry import get_features
from backend.rbac.access import AccessContext


def usable_actions(access: AccessContext, instance: FeatureInstance, registry: ActionRegistry,
                   toolbox_ids: Iterable[str]) -> dict[str, list[Action]]:
    """The agent tools of `toolbox_ids` the user may use in `instance`, by toolbox: those they
    have the RESOURCE right for, that their active connections serve (spec §5.3) and whose data
    the instance has (file tools only where the feature has a file store)."""
    connections = active_connection_types(access.session, access.user)
    feature = get_features().get(instance.feature_code)
    tables = set(feature.data_tables) if feature else set()
    return {box: [action for action in registry.agent_tools([box])
                  if action.usable_with(connections)
                  and (action.instance_table is None or action.instance_table in tables)
                  and may_run(access, action, instance.mandate_id, instance.id)]
            for box in toolbox_ids}


@dataclass
class Toolset:
    """The tools of one agent run: what is active, what may still be requested."""

    access: AccessContext
    instance: FeatureInstance
    config: AgentConfig
    active: list[str] = field(default_factory=list)
    registry: ActionRegistry = field(init=False)
    _usable: dict[str, list[Action]] = field(default_factory=dict)
    _targets: list[FeatureInstance] | None = None

    def __post_init__(self) -> None:
        self.registry = registry_for(self.access.session, self.instance.mandate_id)
        if self.config.mcp_toolboxes:  # the mandate's external MCP servers (issue 19)
            named = {*self.config.initial_toolboxes, *self.config.available_toolboxes}
            self.config.available_toolboxes += [box.id for box in self.registry.extra_toolboxes
                                                if box.id.startswith(MCP_TOOLBOX_PREFIX) and box.id not in named]
        boxes = {*self.config.initial_toolboxes, *self.config.available_toolboxes}
        self._usable = usable_actions(self.access, self.instance, self.registry, boxes)
        self.active = [box for box in self.config.initial_toolboxes if box in self._usable]

    # --- toolboxes ----------------------------------------------------------------------------

    def requestable(self) -> list[Toolbox]:
        """Toolboxes the agent may request now: configured, not yet active, with usable tools."""
        boxes = [self.registry.toolbox(box) for box in self.config.available_toolboxes
                 if box not in self.active and self._usable.get(box)]
        return [box for box in boxes if box is not None]

    def why_not_requestable(self, box: str) -> str:
        """The reason a requested toolbox is refused (for the tool result the agent reads)."""
        if box in self.active:
            return f"toolbox '{box}' is already active; its tools are offered"
        if self.registry.toolbox(box) is None:
            return f"there is no toolbox '{box}'"
        if box not in self.config.available_toolboxes:
            return f"toolbox '{box}' is not available to this agent"
        return f"toolbox '{box}' has no tools you may use (missing rights or no active connection)"

    def activate(self, box: str) -> list[str]:
        """Activate a requestable toolbox; returns the names of the tools it adds."""
        self.active.append(box)
        return [tool_name(action.id) for action in self._usable[box]]

    def preselect(self, text: str) -> Selection:
        """Activate the requestable toolboxes that best match the request `text` (at most
        config.max_preselected; the rest stay requestable) and return the selection."""
        selection = select(text, [(box, self._usable[box.id]) for box in self.requestable()],
                           self.config.max_preselected)
        for box in selection.selected:
            self.activate(box)
        return selection

    def group_limits(self, limits: dict[str, int]) -> dict[str, tuple[frozenset[str], int]]:
        """Budgets by tool group (e.g. the marketplace rule's) over every tool this run may use."""
        return group_limits(limits, [action for actions in self._usable.values() for action in actions])

    def connections_for(self, box: str) -> list[dict[str, str]]:
        """The active connections the user may use with the tools of `box` (what its tools'
        `connectionId` takes): id, label and type, never a setting or secret."""
        types = {t for action in self._usable.get(box, []) for t in action.connection_types}
        if not types:
            return []
        return [{"connectionId": c.id, "label": c.label, "type": c.type, "typeLabel": connection_type(c.type).label}
                for c in usable_connections(self.access.session, self.access.user, types, active_only=True)]

    # --- tools --------------------------------------------------------------------------------

    def actions(self) -> list[Action]:
        return [action for box in self.active for action in self._usable.get(box, [])]

    def action_for(self, name: str) -> Action | None:
        """The offered action behind a tool name, or None when it is not offered now."""
        return next((action for action in self.actions() if tool_name(action.id) == name), None)

    def toolbox_of_tool(self, name: str) -> str | None:
        """For a tool not offered now: the requestable toolbox that has it."""
        for box in self.config.available_toolboxes:
            if any(tool_name(action.id) == name for action in self._usable.get(box, [])):
                return box
        return None

    def sub_agent_targets(self) -> list[FeatureInstance]:
        """Feature instances a Feature Data Agent could read for this user (features with tables,
        where the user may use its tools), looked up once per run."""
        if self._targets is None:
            self._targets = []
            tools = get_registry().agent_tools([FEATURE_DATA_TOOLBOX])
            if self.config.sub_agents and tools:
                with_tables = {code for code, feature in get_features().items() if feature.data_tables}
                self._targets = [
                    instance for instance in self.access.visible_instances()
                    if instance.feature_code in with_tables and instance.mandate_id == self.instance.mandate_id
                    and any(may_run(self.access, tool, instance.mandate_id, instance.id) for tool in tools)]
        return self._targets

    def definitions(self) -> list[dict[str, Any]]:
        """The `tools` of the next model call: active tools, then the meta tools."""
        tools = [to_tool_definition(action) for action in self.actions()]
        requestable = self.requestable()
        if requestable:
            tools.append(request_toolbox_definition([t.id for t in requestable]))
        targets = self.sub_agent_targets()
        if targets:
            tools.append(query_feature_instance_definition(sorted({t.feature_code for t in targets})))
        return tools


def request_toolbox_definition(toolbox_ids: list[str]) -> dict[str, Any]:
    """Spec §5.3's requestToolbox, its enum the toolboxes requestable now."""
    return {"type": "function", "function": {
        "name": REQUEST_TOOLBOX,
        "description": "Request additional specialized tools for the current task. Call this when you need "
                       "capabilities beyond your current tools; they are offered from your next step on.",
        "parameters": {"type": "object", "additionalProperties": False, "required": ["toolboxId", "reason"],
                       "properties": {
                           "toolboxId": {"type": "string", "enum": toolbox_ids,
                                         "description": "ID of the toolbox to activate"},
                           "reason": {"type": ["string", "null"], "description": "Why you need this toolbox"}}},
        "strict": True}}


def query_feature_instance_definition(feature_codes: list[str]) -> dict[str, Any]:
    """Spec §5.4's queryFeatureInstance: a question to a Feature Data Agent of one instance."""
    return {"type": "function", "function": {
        "name": QUERY_FEATURE_INSTANCE,
        "description": "Ask a data agent a question about the data of one feature instance (its tables, "
                       "read-only). Use an instance id listed in your instructions.",
        "parameters": {"type": "object", "additionalProperties": False,
                       "required": ["featureCode", "instanceId", "question"],
                       "properties": {
                           "featureCode": {"type": "string", "enum": feature_codes},
                           "instanceId": {"type": "string", "description": "ID of the feature instance"},
                           "question": {"type": "string", "description": "The question, in full sentences"}}},
        "strict": True}}
