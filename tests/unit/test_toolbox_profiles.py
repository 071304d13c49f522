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
    with pytest.raises(KeyError, match="unknown agent profile 'commcoach'"):
        profile("commcoach")


@action("outlook.readEmails", toolbox="email", label="Read", description="Reads mail.", params=NoParameters,
        connection_type="outlook")
def _read_emails(params, context) -> list:
    return []


def test_a_connector_toolbox_appears_by_registering_its_actions(monkeypatch):
    # The library without its connector actions (and without any e-mail action), as before a connector.
    plain_library = {i: a for i, a in get_registry().actions.items()
                     if a.connection_type is None and a.toolbox != "email"}
    monkeypatch.setattr(config, "get_registry", lambda: ActionRegistry(plain_library))
    assert config.connector_toolboxes() == []
    assert "email" not in profile("workspace").available_toolboxes
    mail = declared_action(_read_emails)
    with_mail = ActionRegistry({**plain_library, mail.id: mail})
    monkeypatch.setattr(config, "get_registry", lambda: with_mail)
    assert config.connector_toolboxes() == ["email"]
    assert profile("workspace").available_toolboxes[-1] == "email"
    assert "email" not in profile("graphicalEditor").available_toolboxes
    # A toolbox with a tool that needs no connection is not a connector toolbox.
    plain = replace(mail, id="email.listFolders", connection_type=None)
    monkeypatch.setattr(config, "get_registry", lambda: ActionRegistry({**with_mail.actions, plain.id: plain}))
    assert config.connector_toolboxes() == []
