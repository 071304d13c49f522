"""`ai.executeCode` (issue 19 item 3, spec §5.2): an agent runs Python in the engine's sandbox.

Real bubblewrap sandbox (as script.python), real agent loop against the scripted model server.
"""

from __future__ import annotations

import json

import pytest

from backend.actions import execute_action
from backend.sandbox import probe
from tests.integration.test_agent import call, of, stream, tool_results

pytestmark = [
    pytest.mark.parametrize("db_url", ["sqlite"], indirect=True),
    pytest.mark.skipif(not probe().available, reason=f"no sandbox here: {probe().reason}"),
]


def test_code_runs_in_the_sandbox_with_its_input_and_returns_result_and_prints(action_context):
    code = "def main(input):\n    print('adding', len(input['values']))\n    return sum(input['values'])\n"
    result = execute_action("ai.executeCode", {"code": code, "input": {"values": [1, 2, 39]}}, action_context)
    assert result.ok, result.error
    assert result.output["output"] == 42
    assert result.output["stdout"].strip() == "adding 3"
    assert result.output["durationMs"] >= 0


def test_an_exception_comes_back_as_a_clear_error_with_the_line(action_context):
    result = execute_action("ai.executeCode", {"code": "x = 1\ny = x / 0\n"}, action_context)
    assert not result.ok
    assert "ZeroDivisionError" in result.error and "line 2" in result.error


def test_the_sandbox_has_no_network_and_stops_at_the_time_limit(action_context):
    no_net = execute_action("ai.executeCode", {"code": (
        "import socket\ns = socket.create_connection(('127.0.0.1', 9), timeout=2)\n")}, action_context)
    assert not no_net.ok and "Error" in no_net.error
    slow = execute_action("ai.executeCode", {"code": "while True:\n    pass\n", "timeoutSeconds": 1}, action_context)
    assert not slow.ok and "time limit" in slow.error


def test_bad_parameters_are_refused_with_the_field_named(action_context):
    empty = execute_action("ai.executeCode", {"code": ""}, action_context)
    assert not empty.ok and "code" in empty.error
    too_long = execute_action("ai.executeCode", {"code": "pass", "timeoutSeconds": 600}, action_context)
    assert not too_long.ok and "timeoutSeconds" in too_long.error


def test_the_agent_requests_the_ai_toolbox_and_calculates_with_code(api, ai_server):
    code = "output = sorted(input, key=len)[-1]"
    ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "ai", "reason": "calculate"}, "c1")])
    ai_server.reply(None, tool_calls=[call("ai_executeCode", {"code": code, "input": ["ab", "abcd", "a"],
                                                              "timeoutSeconds": None}, "c2")])
    ai_server.reply("The longest word is abcd.")

    events = stream(api, "Which word is the longest: ab, abcd, a?")

    finished = of(events, "tool.finished")
    assert [(f["name"], f["ok"]) for f in finished] == [("ai_executeCode", True)]
    assert json.loads(tool_results(ai_server.chat_requests[2])["c2"])["output"] == "abcd"
    assert of(events, "final")[0]["text"] == "The longest word is abcd."
