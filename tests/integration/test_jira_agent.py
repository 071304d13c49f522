# ruff: noqa: F811 - the fixtures of test_jira are imported by name
"""The Workspace agent works with Jira (issue 20, "done when"): with an active Jira connection the
`jira` toolbox is requestable (and not before); the scripted model (tests/ai_server.py) requests it,
searches by JQL through jira_searchIssues against the Jira stand-in (tests/jira_server.py) and
answers from the issues it found. A JQL Jira refuses comes back to the model as Jira's own text.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.test_agent import call, of, request_toolbox_enum, stream, tool_names, tool_results
from tests.integration.test_jira import _stand_in, cloud, jira  # noqa: F401 - fixtures

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here

JIRA_TOOLS = {"jira_connect", "jira_searchIssues", "jira_getIssue", "jira_createIssue", "jira_updateIssue",
              "jira_transitionIssue", "jira_addComment", "jira_exportTickets", "jira_importTickets"}


@SQLITE
def test_without_a_jira_connection_the_toolbox_is_not_offered(api, ai_server, jira):
    ai_server.reply("I can help with files, the web and AI tasks.")
    stream(api, "What can you do?")
    (request,) = ai_server.chat_requests
    assert "jira" not in (request_toolbox_enum(request) or [])
    assert not set(tool_names(request)) & JIRA_TOOLS


def test_the_agent_is_given_jira_searches_by_jql_and_answers_from_the_issues(api, ai_server, jira, cloud):
    jira.add_issue("OPS", "Printer on floor 3 is jammed", status="To Do", labels=("hardware",))
    jira.add_issue("OPS", "VPN drops every hour", status="In Progress")
    jira.add_issue("WEB", "New banner for the spring sale")
    jql = 'project = OPS AND status != Done ORDER BY created ASC'
    ai_server.reply(None, tool_calls=[call("jira_searchIssues", {"connectionId": cloud, "jql": jql}, "j2")])
    answer = "Two OPS issues are open: the jammed printer on floor 3 and the VPN that drops every hour."
    ai_server.reply(answer)

    events = stream(api, "Which Operations tickets are still open?")

    assert of(events, "final")[0]["text"] == answer
    first, third = ai_server.chat_requests
    # A request about tickets: the Jira toolbox is preselected for round 1 (issue 21), not requested.
    assert of(events, "toolbox.preselected")[0]["toolboxIds"] == ["jira"]
    assert "jira" not in (request_toolbox_enum(first) or [])
    assert JIRA_TOOLS <= set(tool_names(first))
    result = json.loads(tool_results(third)["j2"])
    summaries = [issue["summary"] for issue in result["issues"]]
    assert summaries == ["Printer on floor 3 is jammed", "VPN drops every hour"]
    assert all(issue["key"].startswith("OPS-") for issue in result["issues"])
    searched = [path for method, path, _auth in jira.requests if "/search/jql" in path]
    assert searched, jira.requests  # the real search endpoint was called


@SQLITE
def test_a_jql_jira_refuses_reaches_the_model_as_jiras_own_text(api, ai_server, jira, cloud):
    ai_server.reply(None, tool_calls=[call("jira_searchIssues", {"connectionId": cloud,
                                                                 "jql": "project = OPS AND colour = blue"}, "k2")])
    ai_server.reply("Jira did not understand the search: there is no field 'colour'.")

    events = stream(api, "Find the blue tickets")

    assert of(events, "final")[0]["text"].startswith("Jira did not understand")
    result = tool_results(ai_server.chat_requests[-1])["k2"]
    assert "colour" in result and "does not exist" in result, result
