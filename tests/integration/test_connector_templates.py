# ruff: noqa: F811 - the stand-ins' fixtures are imported by name, and tests take them as arguments
"""The ClickUp and Jira templates (issue 20, item 6) run for real through the REST API, against the Jira
stand-in (tests/jira_server.py), the ClickUp stand-in (tests/clickup_server.py) and the SMTP test server
(tests/mail_servers.py): a workflow is made from the template, its pickers (connections, ClickUp list or
workspace, the mail's address) are set by saving the draft as the editor does, and test runs are started
with the template's sample input.

- "Jira → ClickUp sync": the new issues of project OPS become ClickUp tasks, once each — a second run
  creates nothing, a new issue makes exactly one more task.
- "ClickUp overdue tasks → daily mail": one mail listing exactly the open tasks whose due date has
  passed, or saying there are none.
- Before the connections are chosen, a run of either fails at once naming each node and what to choose.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from email.message import Message
from typing import Any

import pytest

from backend.engine import queue as run_queue
from backend.workflows import templates
from tests.clickup_server import ANNA, BACKLOG_ID, BERT, SPRINT_ID, TEAM_ID, ClickUpServer
from tests.integration.test_clickup import _clickup_stand_in, clickup  # noqa: F401 - fixtures
from tests.integration.test_jira import _stand_in, cloud_settings, jira  # noqa: F401 - fixtures
from tests.jira_server import JiraServer
from tests.mail_servers import imap_server, smtp_server

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here

SYNC = "jira-to-clickup-sync"
OVERDUE = "clickup-overdue-mail"
DAY = timedelta(days=1)


# --- helpers ----------------------------------------------------------------------------------------


def connect(api, kind: str, label: str, settings: dict[str, Any]) -> str:
    """A connection of the admin made over REST (tested live by the connector); its id."""
    made = api.client.post("/api/connections", json={"type": kind, "label": label, "settings": settings},
                           headers=api.auth)
    assert made.status_code == 201, made.text
    return made.json()["id"]


@pytest.fixture
def connections(api, jira: JiraServer, clickup: ClickUpServer) -> dict[str, str]:
    """The admin's Jira Cloud connection (API token) and ClickUp connection (Anna's personal token)."""
    return {"jira": connect(api, "jira", "Jira Cloud", cloud_settings(jira)),
            "clickup": connect(api, "clickup", "ClickUp Acme", {"apiToken": clickup.personal_token})}


def create(api, template_id: str) -> dict[str, Any]:
    made = api.client.post(f"{api.base()}/workflows", json={"name": f"{template_id}-{uuid.uuid4().hex[:6]}",
                                                            "templateId": template_id}, headers=api.auth)
    assert made.status_code == 201, made.text
    workflow = made.json()
    assert workflow["testInput"] == templates.template(template_id).sample_input
    return workflow


def choose(api, workflow: dict[str, Any], choices: dict[str, dict[str, Any]]) -> None:
    """What the user does in the editor: set node parameters (node id → parameters) and save the draft."""
    graph = workflow["graph"]
    nodes = {n["id"]: n for n in graph["nodes"]}
    for node_id, parameters in choices.items():
        nodes[node_id]["parameters"].update(parameters)
    saved = api.client.put(f"{api.base()}/workflows/{workflow['id']}/draft", json={"graph": graph},
                           headers=api.auth)
    assert saved.status_code == 200, saved.text


def run_of(api, workflow: dict[str, Any]) -> dict[str, Any]:
    """A test run with the workflow's test input (the template's sample input), once it has ended."""
    started = api.client.post(f"{api.base()}/workflows/{workflow['id']}/runs", json={"input": workflow["testInput"]},
                              headers=api.auth)
    assert started.status_code == 201, started.text
    run_queue.wait_for_rest(started.json()["id"], 30)
    answer = api.client.get(f"{api.base()}/runs/{started.json()['id']}", headers=api.auth)
    assert answer.status_code == 200, answer.text
    return answer.json()



def steps(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["nodeId"]: s for s in run["steps"]}


def tasks_in(clickup: ClickUpServer, list_id: str) -> dict[str, dict[str, Any]]:
    """The ClickUp tasks of a list in the stand-in, by name."""
    with clickup.lock:
        return {t["name"]: dict(t) for t in clickup.tasks.values() if t["list"] == list_id and not t["deleted"]}


def text_of(message: Message) -> str:
    for part in message.walk():
        if part.get_content_type() == "text/plain":
            text = part.get_payload(decode=True).decode(part.get_content_charset() or "utf-8")
            return text.replace("\r\n", "\n")  # as written, without SMTP's line ends
    raise AssertionError("the mail has no text part")


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


# --- the templates as listed ------------------------------------------------------------------------


@SQLITE
def test_the_cards_say_which_connections_the_templates_need(api):
    listed = {t["id"]: t for t in api.client.get(f"{api.base()}/templates", headers=api.auth).json()}
    sync, overdue = listed[SYNC], listed[OVERDUE]
    assert (sync["name"], sync["connections"], sync["runsAsItIs"]) == ("Jira → ClickUp sync", ["jira", "clickup"],
                                                                       False)
    assert [(n["id"], n["nodes"], n["available"]) for n in sync["needs"]] == [
        ("jira", ["issues"], False), ("clickup", ["find", "create"], False)]
    assert overdue["name"] == "ClickUp overdue tasks → daily mail"
    assert overdue["connections"] == ["clickup", "mail"] and overdue["runsAsItIs"] is False
    assert [(n["id"], n["nodes"]) for n in overdue["needs"]] == [("clickup", ["overdue"]), ("mail", ["send"])]
    assert "jira-to-clickup" not in listed  # the CSV stand-in it replaces is gone


@SQLITE
def test_a_run_before_the_connections_are_chosen_fails_at_once_naming_them(api, jira, clickup):
    sync = run_of(api, create(api, SYNC))
    assert sync["status"] == "failed" and sync["steps"] == [], sync
    assert sync["error"] == (
        "this workflow cannot run here: it needs a Jira connection for node 'issues' (New Jira issues) — none "
        "chosen: add a Jira connection on the Connections page and choose it in the node (connectionId); it needs "
        "a ClickUp connection for node 'find' (Already in ClickUp?), node 'create' (Create the ClickUp task) — none "
        "chosen: add a ClickUp connection on the Connections page and choose it in the node (connectionId)")
    overdue = run_of(api, create(api, OVERDUE))
    assert overdue["status"] == "failed" and overdue["steps"] == [], overdue
    assert "it needs a ClickUp connection for node 'overdue' (Overdue tasks) — none chosen" in overdue["error"]
    assert "it needs a mail connection for node 'send' (Mail the list) — none chosen" in overdue["error"]
    assert jira.calls() == 0 and clickup.calls("GET") == [] and clickup.calls("POST") == []


@SQLITE
def test_connections_chosen_but_no_list_the_search_step_says_so_and_nothing_is_created(api, jira, clickup,
                                                                                         connections):
    jira.add_issue("OPS", "Renew TLS certificates")
    workflow = create(api, SYNC)
    choose(api, workflow, {"issues": {"connectionId": connections["jira"]},
                           "find": {"connectionId": connections["clickup"]},
                           "create": {"connectionId": connections["clickup"]}})
    run = run_of(api, workflow)
    assert run["status"] == "failed", run
    assert "name the workspace (teamId) or the list (listId) to search in" in steps(run)["find"]["error"]
    assert "create" not in steps(run) and tasks_in(clickup, BACKLOG_ID) == {}


# --- Jira → ClickUp sync ----------------------------------------------------------------------------


def sync_workflow(api, connections: dict[str, str], list_id: str = BACKLOG_ID) -> dict[str, Any]:
    workflow = create(api, SYNC)
    pickers = {n["id"]: (n["parameters"]["connectionId"], n["parameters"].get("listId"))
               for n in workflow["graph"]["nodes"] if "connectionId" in n["parameters"]}
    assert pickers == {"issues": ("", None), "find": ("", ""), "create": ("", "")}  # the user chooses
    choose(api, workflow, {"issues": {"connectionId": connections["jira"]},
                           "find": {"connectionId": connections["clickup"], "listId": list_id},
                           "create": {"connectionId": connections["clickup"], "listId": list_id}})
    return workflow


def created_by(run: dict[str, Any]) -> list[str]:
    """The names of the ClickUp tasks the run created (its createTask steps)."""
    return sorted(s["output"]["name"] for s in run["steps"] if s["nodeId"] == "create")


def test_new_jira_issues_become_clickup_tasks_once_each(api, jira, clickup, connections):
    jira.add_issue("OPS", "Archive the 2023 tickets", created=datetime.now(UTC) - 3 * DAY)  # OPS-1: not new
    renew = jira.add_issue("OPS", "Renew TLS certificates",
                           description="Certificates of the customer portal expire on 30 April.")
    backups = jira.add_issue("OPS", "Move backups to the new storage", priority="High")
    rota = jira.add_issue("OPS", "Document the on-call rota")
    jira.add_issue("WEB", "New landing page")  # another project
    workflow = sync_workflow(api, connections)

    first = run_of(api, workflow)
    assert first["status"] == "completed", first
    made = tasks_in(clickup, BACKLOG_ID)
    assert sorted(made) == created_by(first) == ["[OPS-2] Renew TLS certificates",
                                                 "[OPS-3] Move backups to the new storage",
                                                 "[OPS-4] Document the on-call rota"]
    assert (renew, backups, rota) == ("OPS-2", "OPS-3", "OPS-4")
    for key, name in (("OPS-2", "[OPS-2] Renew TLS certificates"), ("OPS-3", "[OPS-3] Move backups to the new "
                                                                            "storage")):
        assert made[name]["tags"] == [f"jira-{key.lower()}"]
        assert made[name]["description"].startswith(f"Jira issue {key}: {jira.url}/browse/{key}")
    assert "Certificates of the customer portal expire on 30 April." in \
        made["[OPS-2] Renew TLS certificates"]["description"]
    assert steps(first)["report"]["output"]["result"].startswith("3 new ClickUp tasks\n- [OPS-")
    assert clickup.calls("POST", f"/list/{BACKLOG_ID}/task") != []

    # The team finishes one task in ClickUp (it is closed now); the next run still knows all three.
    clickup.tasks[made["[OPS-4] Document the on-call rota"]["id"]]["status"] = "complete"
    creations = len(clickup.calls("POST", f"/list/{BACKLOG_ID}/task"))
    second = run_of(api, workflow)
    assert second["status"] == "completed", second
    assert created_by(second) == [] and len(clickup.calls("POST", f"/list/{BACKLOG_ID}/task")) == creations
    assert sorted(tasks_in(clickup, BACKLOG_ID)) == sorted(made)
    assert steps(second)["report"]["output"]["result"] == "0 new ClickUp tasks"

    # A fourth new issue: the third run creates exactly its task.
    jira.add_issue("OPS", "Rotate the API keys")
    third = run_of(api, workflow)
    assert third["status"] == "completed", third
    assert created_by(third) == ["[OPS-5] Rotate the API keys"]
    after = tasks_in(clickup, BACKLOG_ID)
    assert len(after) == 4 and after["[OPS-5] Rotate the API keys"]["tags"] == ["jira-ops-5"]
    rotate = after["[OPS-5] Rotate the API keys"]["id"]
    assert steps(third)["report"]["output"]["result"] == \
        f"1 new ClickUp task\n- [OPS-5] Rotate the API keys: https://app.clickup.com/t/{rotate}"
    # Each issue has exactly one task in ClickUp.
    tags = sorted(tag for task in after.values() for tag in task["tags"])
    assert tags == ["jira-ops-2", "jira-ops-3", "jira-ops-4", "jira-ops-5"]


@SQLITE
def test_a_jql_jira_refuses_fails_the_run_in_jiras_words(api, jira, clickup, connections):
    workflow = sync_workflow(api, connections)
    choose(api, workflow, {"issues": {"jql": "project = NOPE AND created >= -1d ORDER BY created DESC"}})
    run = run_of(api, workflow)
    assert run["status"] == "failed", run
    assert "The value 'NOPE' does not exist for the field 'project'." in steps(run)["issues"]["error"]
    assert "find" not in steps(run) and tasks_in(clickup, BACKLOG_ID) == {}


# --- ClickUp overdue tasks → daily mail -------------------------------------------------------------


@pytest.fixture
def mailbox(api):
    """pymap and aiosmtpd, and the admin's `imap` connection sending through that SMTP server."""
    with imap_server() as imap, smtp_server() as smtp:
        yield smtp, connect(api, "imap", "Team mailbox", imap.settings(smtp))


@SQLITE
def test_the_overdue_open_tasks_are_mailed_once_a_day(api, clickup, connections, mailbox):
    smtp, mail_connection = mailbox
    now = datetime.now(UTC)
    renew = clickup.add_task(BACKLOG_ID, "Renew TLS certificates", due=ms(now - 2 * DAY), assignees=[ANNA["id"]])
    login = clickup.add_task(SPRINT_ID, "Fix the login", status="in progress", due=ms(now - DAY),
                             assignees=[ANNA["id"], BERT["id"]])
    clickup.add_task(BACKLOG_ID, "Send the Q1 report", status="complete", due=ms(now - 3 * DAY))  # closed
    clickup.add_task(BACKLOG_ID, "Plan the offsite", due=ms(now + 7 * DAY))  # due next week
    clickup.add_task(BACKLOG_ID, "Tidy the wiki")  # no due date
    workflow = create(api, OVERDUE)
    choose(api, workflow, {"overdue": {"connectionId": connections["clickup"], "teamId": TEAM_ID},
                           "send": {"connectionId": mail_connection, "to": ["anna.meier@acme.example"]}})

    run = run_of(api, workflow)
    assert run["status"] == "completed", run
    assert [s["nodeId"] for s in run["steps"]] == ["start", "overdue", "list", "send"]
    (mail,) = smtp.received
    today = datetime.now(UTC).date().isoformat()
    assert mail["To"] == "anna.meier@acme.example"
    assert mail["Subject"] == f"ClickUp: 2 overdue tasks on {today}"
    body = text_of(mail)
    assert body.startswith("2 overdue ClickUp tasks:")
    due = {task_id: datetime.fromtimestamp(clickup.tasks[task_id]["due"] / 1000, UTC).strftime("%Y-%m-%d %H:%M")
           for task_id in (renew, login)}
    assert (f"- Renew TLS certificates (Backlog)\n  due {due[renew]} UTC · Anna Meier\n"
            f"  https://app.clickup.com/t/{renew}") in body
    assert (f"- Fix the login (Sprint 12)\n  due {due[login]} UTC · Anna Meier, Bert Keller\n"
            f"  https://app.clickup.com/t/{login}") in body
    for not_listed in ("Send the Q1 report", "Plan the offsite", "Tidy the wiki"):
        assert not_listed not in body

    # Both done: the next morning's mail says there is nothing overdue.
    for task_id in (renew, login):
        clickup.tasks[task_id]["status"] = "complete"
    again = run_of(api, workflow)
    assert again["status"] == "completed", again
    assert len(smtp.received) == 2
    assert smtp.received[1]["Subject"] == f"ClickUp: 0 overdue tasks on {today}"
    assert text_of(smtp.received[1]).strip() == "No overdue tasks."
