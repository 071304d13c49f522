"""Agent configuration (spec §5.3), the agent profiles and the hard limits of seed 004
("Agentische Grenzen").

An :class:`AgentConfig` may lower the limits, never raise them: the hard ones below hold for
every run, whatever a profile or a caller asks for.

Profiles name only toolboxes that have agent tools in the action library and, but for the
Feature Data Agent's, only existing feature codes. Connector toolboxes (e-mail, SharePoint,
ClickUp, Jira, data sources: toolboxes whose tools all need a connection) are not named: a
profile with `connector_toolboxes` offers every one the action registry has, so a connector
toolbox appears by registering its actions.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from backend.actions import get_registry
from backend.actions.base import CONSEQUENCES

# Seed 004: at most 48 rounds, 40 executed tool calls, 12 calls of one tool name; the third
# identical call is suppressed; 12,000 characters per tool result, 64,000 over the history.
ROUND_LIMIT = 48
CALL_LIMIT = 40
PER_TOOL_LIMIT = 12
IDENTICAL_CALLS_ALLOWED = 2
RESULT_LIMIT = 12_000
HISTORY_RESULTS_LIMIT = 64_000

REQUEST_TOOLBOX = "requestToolbox"
QUERY_FEATURE_INSTANCE = "queryFeatureInstance"
FEATURE_DATA_TOOLBOX = "featureData"


class AgentConfig(BaseModel):
    """How one agent may work (spec §5.3); camelCase in JSON as the spec writes it.

    Attributes:
        max_rounds: Model calls with tools at most (capped at ROUND_LIMIT).
        max_cost_chf: Cost of the run's model calls at most, or None for no cost budget.
        initial_toolboxes: Toolboxes whose tools are offered from the first round.
        available_toolboxes: Toolboxes the agent may request with requestToolbox (further
            filtered per user: RBAC and active connections).
        temperature: Sampling temperature, or None for the provider's default.
        tool_budgets: Optional calls-per-tool-name budgets below PER_TOOL_LIMIT, by tool name
            (e.g. seed 004's marketplace rule: {"core_webSearch": 3, "core_readUrl": 5}).
        sub_agents: Whether queryFeatureInstance is offered (never to a sub-agent).
        mcp_toolboxes: Whether the toolboxes of the mandate's external MCP servers (`mcp:<name>`,
            known only in the mandate) are requestable as well (further filtered per user).
        model: The model to ask, or None for the provider's default.
        approvals: Consequences (backend.actions.base.CONSEQUENCES: send, write, delete, external)
            whose tool calls wait for a person's approval; a mandate's admins may choose otherwise
            per profile (backend.agent.approvals).
        max_preselected: Toolboxes the selector may attach before round 1, in addition to the
            initial ones, from the request (backend/agent/selector.py); 0 turns the preselection
            and seed 004's marketplace budgets off. Sub-agents never preselect.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    max_rounds: int = Field(25, ge=1, le=ROUND_LIMIT)
    max_cost_chf: float | None = Field(None, gt=0, alias="maxCostCHF")
    initial_toolboxes: list[str] = Field(default_factory=lambda: ["core"])
    available_toolboxes: list[str] = Field(default_factory=list)
    temperature: float | None = Field(None, ge=0, le=2)
    tool_budgets: dict[str, int] = Field(default_factory=dict)
    sub_agents: bool = False
    model: str | None = None
    mcp_toolboxes: bool = False
    approvals: list[str] = Field(default_factory=list)
    max_preselected: int = Field(2, ge=0, le=5)

    @field_validator("approvals")
    @classmethod
    def _known_consequences(cls, approvals: list[str]) -> list[str]:
        unknown = sorted(set(approvals) - set(CONSEQUENCES))
        if unknown:
            raise ValueError(f"approvals: unknown consequences {unknown} (known: {', '.join(CONSEQUENCES)})")
        return [c for c in CONSEQUENCES if c in approvals]

    @field_validator("tool_budgets")
    @classmethod
    def _budgets_positive(cls, budgets: dict[str, int]) -> dict[str, int]:
        for name, budget in budgets.items():
            if budget < 1:
                raise ValueError(f"toolBudgets.{name} must be at least 1, not {budget}")
        return budgets

    def calls_allowed(self, tool: str) -> int:
        """How often one tool name may be executed in a run."""
        return min(PER_TOOL_LIMIT, self.tool_budgets.get(tool, PER_TOOL_LIMIT))


@dataclass(frozen=True)
class Profile:
    """The configuration a feature's agent (or the Feature Data Agent) starts from.

    Attributes:
        config: Its configuration; it names only toolboxes with agent tools in the action library.
        connector_toolboxes: Whether every connector toolbox of the action registry is requestable
            as well (see :func:`connector_toolboxes`).
    """

    config: AgentConfig
    connector_toolboxes: bool = False


SUB_AGENT_PROFILE = "featureData"
# Spec §5.3, by feature code, and spec §5.4's Feature Data Agent. The requestable toolboxes are
# filtered per user (RBAC and connections) by backend.agent.toolset. Features without a profile
# of their own (backend.agent.service) use the Workspace's.
PROFILES: dict[str, Profile] = {
    "workspace": Profile(AgentConfig(initial_toolboxes=["core"], available_toolboxes=["ai", "workflow", "trustee"],
                                     sub_agents=True, mcp_toolboxes=True, approvals=["send", "delete"]),
                       connector_toolboxes=True),
    # Spec §5.3 starts the editor's chat with core + workflow: 26 tools in round 1, over the
    # 20-tool target of issue 6/17. Its work is the graph, so it starts with workflow and requests
    # core (files, web) or ai when a question needs them.
    # It preselects one toolbox at most, so a request that needs files or the web stays near 20 tools.
    "graphicalEditor": Profile(AgentConfig(initial_toolboxes=["workflow"], available_toolboxes=["core", "ai"],
                                           max_preselected=1)),
    # Spec §5.3: CommCoach coaches with the core toolbox only and never escalates (no toolbox to
    # request, no MCP toolboxes, no sub-agents, no preselection); its persona is the instance's.
    "commcoach": Profile(AgentConfig(initial_toolboxes=["core"], available_toolboxes=[], sub_agents=False,
                                     mcp_toolboxes=False, max_preselected=0)),
    # Spec §5.3: the Chatbot answers from its database with core + chatbot, and never escalates.
    "chatbot": Profile(AgentConfig(initial_toolboxes=["core", "chatbot"], available_toolboxes=[], sub_agents=False,
                                   mcp_toolboxes=False, max_preselected=0)),
    # A Feature Data Agent reads one instance's tables; it cannot call a sub-agent.
    SUB_AGENT_PROFILE: Profile(AgentConfig(max_rounds=5, max_cost_chf=0.10, initial_toolboxes=[FEATURE_DATA_TOOLBOX],
                                           available_toolboxes=[], sub_agents=False, max_preselected=0)),
}


def connector_toolboxes() -> list[str]:
    """Toolboxes whose agent tools all need a connection, in spec order, as the action registry has them."""
    registry = get_registry()
    found = []
    for box in registry.toolboxes():
        tools = registry.agent_tools([box.id])
        if tools and all(tool.connection_types for tool in tools):
            found.append(box.id)
    return found


def profile(name: str) -> AgentConfig:
    """A copy of the named profile's configuration, its connector toolboxes added."""
    if name not in PROFILES:
        raise KeyError(f"unknown agent profile '{name}' (known: {', '.join(PROFILES)})")
    chosen = PROFILES[name]
    config = chosen.config.model_copy(deep=True)
    if chosen.connector_toolboxes:
        named = {*config.initial_toolboxes, *config.available_toolboxes}
        config.available_toolboxes += [box for box in connector_toolboxes() if box not in named]
    return config
