"""Issue 15, one registry: agent profiles name only toolboxes that have agent tools in the action
library and only existing features; a connector toolbox appears by registering its actions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from backend.actions import get_registry
from backend.actions.base import NoParameters, action, declared_action
from backend.actions.registry import ActionRegistry
from backend.agent import config
from backend.agent.config import FEATURE_DATA_TOOLBOX, PROFILES, SUB_AGENT_PROFILE, profile
from backend.features.registry import get_features


def _agent_toolboxes() -> set[str]:
    registry = get_registry()
    return {box.id for box in registry.toolboxes() if registry.agent_tools([box.id])}


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_names_only_toolboxes_with_agent_tools(name):
    resolved = profile(name)
    named = [*resolved.initial_toolboxes, *resolved.available_toolboxes]
    assert named and set(named) <= _agent_toolboxes(), f"profile '{name}' names toolboxes without tools"
    assert len(named) == len(set(named))


def test_every_profile_is_a_feature_but_the_feature_data_agent():
    features = get_features()
    assert set(PROFILES) - {SUB_AGENT_PROFILE} <= set(features)
    assert SUB_AGENT_PROFILE not in features
    sub_agent = profile(SUB_AGENT_PROFILE)
    assert sub_agent.initial_toolboxes == [FEATURE_DATA_TOOLBOX] and not sub_agent.sub_agents


def test_profiles_are_copies():
    profile("workspace").available_toolboxes.append("nonsense")
    assert "nonsense" not in profile("workspace").available_toolboxes
    with pytest.raises(KeyError, match="unknown agent profile 'nonsense'"):
        profile("nonsense")


@action("jira.readIssues", toolbox="featureData", label="Read", description="Reads issues.", params=NoParameters,
        connection_type="featureData")
def _read_issues(params, context) -> list:
    return []


def test_a_connector_toolbox_appears_by_registering_its_actions(monkeypatch):
    assert "featureData" not in profile("workspace").available_toolboxes
    issues = declared_action(_read_issues)
    others = {k: v for k, v in get_registry().actions.items() if v.toolbox != "featureData"}  # its real tools
    with_jira = ActionRegistry({**others, issues.id: issues})
    monkeypatch.setattr(config, "get_registry", lambda: with_jira)
    assert config.connector_toolboxes()[-1] == "featureData"
    assert profile("workspace").available_toolboxes[-1] == "featureData"
    assert "featureData" not in profile("graphicalEditor").available_toolboxes
    # A toolbox with a tool that needs no connection is not a connector toolbox.
    plain = replace(issues, id="jira.listProjects", connection_type=None, connection_types=())
    monkeypatch.setattr(config, "get_registry", lambda: ActionRegistry({**with_jira.actions, plain.id: plain}))
    assert "featureData" not in config.connector_toolboxes()


def test_an_action_may_work_with_several_connection_types():
    """email.sendMail sends through any mail connection: the e-mail toolbox is a connector toolbox,
    usable with an active connection of either type, and only then."""
    send = get_registry().get("email.sendMail")
    assert send.connection_types == ("imap", "msft") and send.connection_type == "imap"
    assert "email" in config.connector_toolboxes()
    assert send.usable_with({"msft"}) and send.usable_with({"imap", "trustee"})
    assert not send.usable_with(set()) and not send.usable_with({"trustee"})
    assert declared_action(_read_issues).connection_types == ("featureData",)
    with pytest.raises(ValueError, match="connection_type must be the first of connection_types"):
        action("x.y", toolbox="trustee", label="x", description="x", connection_type="msft",
               connection_types=("imap", "msft"))
