"""Approval of consequential tool calls in agent runs (issue 21, item 3).

The agent runs against the scripted model over real HTTP; mail goes to a real IMAP/SMTP pair
(pymap and aiosmtpd, tests/mail_servers.py). The workspace profile asks before `send` and
`delete`: the run pauses in `waiting_approval`, a task appears in the Inbox (/api/tasks) with the
tool, its arguments and the agent's reason, and the decision — in the chat's endpoint or the
Inbox's — lets the run go on: approved, the mail leaves exactly once; declined, cancelled or
expired, the agent reads why and answers.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.agent.approvals import resume_decided
from backend.api.app import create_api
from backend.db.models import utcnow
from backend.engine.timers import expire_due_tasks
from tests.integration.conftest import ADMIN_PASSWORD
from tests.integration.test_agent import call, of, sse_events, stream, tool_results, workspace_id
from tests.mail_servers import imap_server, smtp_server

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
BOTH = pytest.mark.parametrize("db_url", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
                               indirect=True)

REASON = "The user asked me to send the report to Anna."


@pytest.fixture
def mailbox(api):
    """An IMAP/SMTP connection of the admin; yields (connection id, the SMTP server)."""
    with imap_server() as imap, smtp_server() as smtp:
        settings = {"host": imap.host, "port": imap.port, "security": "none", "username": imap.username,
                    "password": imap.password, "smtpHost": smtp.host, "smtpPort": smtp.port, "smtpSecurity": "none"}
        created = api.client.post("/api/connections", json={"type": "imap", "label": "Office", "settings": settings},
                                  headers=api.auth)
        assert created.status_code == 201, created.text
        yield created.json()["id"], smtp


def script_send(ai_server, connection_id: str, answer: str = "Sent.") -> None:
    """The model: e-mail toolbox (if not already active), then sendMail with its reason, then an answer."""
    ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "email", "reason": "mail"}, "r1")])
    mail = {"connectionId": connection_id, "to": ["anna@example.com"], "subject": "Report", "body": "Here it is."}
    ai_server.reply(REASON, tool_calls=[call("email_sendMail", mail, "s1")])
    ai_server.reply(answer)


def approval_stream(api, run_id: str, approved: bool, client: TestClient | None = None,
                    auth: dict | None = None) -> tuple[int, list[tuple[str, dict[str, Any]]]]:
    """POST the chat's decision; (status, the continued run's events)."""
    client = client or api.client
    url = f"/api/workspace/{workspace_id(api)}/agent/runs/{run_id}/approval"
    with client.stream("POST", url, json={"approved": approved}, headers=auth or api.auth) as response:
        if response.status_code != 200:
            return response.status_code, [("body", json.loads(response.read()))]
        return 200, sse_events(response)


def agent_run(api, run_id: str) -> dict[str, Any]:
    return api.client.get(f"/api/workspace/{workspace_id(api)}/agent/runs/{run_id}", headers=api.auth).json()


def wait_for_status(api, run_id: str, status: str, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run = agent_run(api, run_id)
        if run["status"] == status or time.monotonic() > deadline:
            assert run["status"] == status, run
            return run
        time.sleep(0.05)


def paused_run(api, ai_server, mailbox) -> tuple[str, dict[str, Any], list]:
    """A run that asked to send a mail: (run id, its Inbox task, its events)."""
    connection_id, _smtp = mailbox
    script_send(ai_server, connection_id)
    events = stream(api, "Please send the report to anna@example.com by e-mail")
    required = of(events, "approval.required")
    assert len(required) == 1, events
    assert events[-1][0] == "approval.required"  # the stream ends there; no final answer yet
    run_id = events[0][1]["runId"]
    tasks = api.client.get("/api/tasks", headers=api.auth).json()
    task = next(t for t in tasks if t["agentRunId"] == run_id)
    return run_id, task, events


@SQLITE
def test_send_mail_waits_for_approval_and_runs_exactly_once_when_approved(api, ai_server, mailbox):
    _connection_id, smtp = mailbox
    run_id, task, events = paused_run(api, ai_server, mailbox)
    required = of(events, "approval.required")[0]
    assert (required["name"], required["consequences"], required["reason"]) == ("email_sendMail", ["send"], REASON)
    assert required["arguments"]["to"] == ["anna@example.com"]
    # The Inbox task names the tool, its arguments and the agent's reason; nothing was sent yet.
    assert task["kind"] == "approval" and task["status"] == "pending" and task["runId"] is None
    assert task["title"] == "Approve: Send e-mail" and task["message"] == REASON
    assert task["data"]["tool"] == "email_sendMail" and task["data"]["arguments"]["subject"] == "Report"
    assert agent_run(api, run_id)["status"] == "waiting_approval"
    assert smtp.received == []
    # The user the agent acts for is told in the app too (issue 23, part 1), should they have left the chat.
    told = api.client.get("/api/notifications", headers=api.auth).json()
    titles = [n["title"] for n in told if n["kind"] == "task.assigned"]
    assert titles == ["Approval waiting for you: Approve: Send e-mail"]

    status, continued = approval_stream(api, run_id, approved=True)
    assert status == 200, continued
    kinds = [k for k, _ in continued]
    assert kinds[0] == "approval.decided" and kinds[-1] == "final", kinds
    assert of(continued, "approval.decided")[0]["outcome"] == "approved"
    assert [(f["name"], f["ok"]) for f in of(continued, "tool.finished")] == [("email_sendMail", True)]
    assert len(smtp.received) == 1 and smtp.received[0]["Subject"] == "Report"
    run = agent_run(api, run_id)
    assert run["status"] == "completed" and run["answer"] == "Sent."
    assert [s["kind"] for s in run["steps"] if s["kind"].startswith("approval")] == ["approval", "approval_decided"]
    # The model read the mail's result for the paused call.
    assert json.loads(tool_results(ai_server.last_chat)["s1"])["to"] == ["anna@example.com"]

    again, body = approval_stream(api, run_id, approved=True)  # a second click: nothing runs twice
    assert again == 409 and "completed" in body[0][1]["detail"]
    done = api.client.post(f"/api/tasks/{task['id']}/complete", json={"data": {"approved": True}}, headers=api.auth)
    assert done.status_code == 409 and "already completed by admin" in done.json()["detail"]
    assert len(smtp.received) == 1


@SQLITE
def test_declined_in_the_inbox_the_agent_is_told_and_answers(api, ai_server, mailbox):
    _connection_id, smtp = mailbox
    run_id, task, _events = paused_run(api, ai_server, mailbox)
    done = api.client.post(f"/api/tasks/{task['id']}/complete",
                           json={"data": {"approved": False, "comment": "not yet"}}, headers=api.auth)
    assert done.status_code == 200, done.text
    assert done.json()["task"]["status"] == "completed" and done.json()["run"] is None
    run = wait_for_status(api, run_id, "completed")
    told = json.loads(tool_results(ai_server.last_chat)["s1"])
    assert told["approval"] == "declined" and "The user declined" in told["error"] and told["comment"] == "not yet"
    assert run["answer"] == "Sent." and smtp.received == []
    history = api.client.get("/api/tasks?status=completed", headers=api.auth).json()
    assert [t["id"] for t in history if t["agentRunId"] == run_id] == [task["id"]]


@BOTH
def test_two_approvals_at_once_run_the_tool_once(api, ai_server, mailbox):
    _connection_id, smtp = mailbox
    run_id, task, _events = paused_run(api, ai_server, mailbox)
    answers: list[int] = []
    start = threading.Barrier(2)

    def approve() -> None:
        start.wait()
        answers.append(api.client.post(f"/api/tasks/{task['id']}/complete", json={"data": {"approved": True}},
                                       headers=api.auth).status_code)

    threads = [threading.Thread(target=approve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [200, 409]
    wait_for_status(api, run_id, "completed")
    assert len(smtp.received) == 1


@SQLITE
def test_an_expired_or_cancelled_approval_is_told_to_the_agent(api, ai_server, mailbox):
    _connection_id, smtp = mailbox
    run_id, _task, _events = paused_run(api, ai_server, mailbox)
    assert expire_due_tasks(utcnow() + timedelta(hours=73)) == 1  # POWERON_AGENT_APPROVAL_HOURS: 72
    wait_for_status(api, run_id, "completed")
    told = json.loads(tool_results(ai_server.last_chat)["s1"])
    assert told["approval"] == "expired" and "expired" in told["error"]

    ai_server.clear()
    second, task, _events = paused_run(api, ai_server, mailbox)
    cancelled = api.client.post(f"/api/tasks/{task['id']}/cancel", json={"reason": "wrong recipient"},
                                headers=api.auth)
    assert cancelled.status_code == 200, cancelled.text
    wait_for_status(api, second, "completed")
    told = json.loads(tool_results(ai_server.last_chat)["s1"])
    assert told["approval"] == "cancelled" and "withdrawn (by admin)" in told["error"]
    assert smtp.received == []


@SQLITE
def test_a_waiting_run_survives_a_restart_and_goes_on_after_it(api, ai_server, mailbox):
    _connection_id, smtp = mailbox
    run_id, _task, _events = paused_run(api, ai_server, mailbox)
    # Another application started on the same database (as after a restart) takes the decision:
    # nothing of the waiting run lives in the memory of the one that paused it.
    with TestClient(create_api()) as restarted:
        login = restarted.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}).json()
        auth = {"Authorization": f"Bearer {login['token']}"}
        status, continued = approval_stream(api, run_id, True, client=restarted, auth=auth)
    assert status == 200 and [k for k, _ in continued][-1] == "final"
    assert len(smtp.received) == 1 and agent_run(api, run_id)["status"] == "completed"


@SQLITE
def test_a_decision_taken_before_a_restart_is_acted_on_at_start(api, ai_server, mailbox):
    from sqlmodel import select

    from backend.agent import approvals
    from backend.db import session_scope
    from backend.db.models import HumanTask, User
    from backend.rbac.access import AccessContext

    _connection_id, smtp = mailbox
    run_id, task, _events = paused_run(api, ai_server, mailbox)
    with session_scope() as session:  # decided, but the process stopped before the run went on
        admin = session.exec(select(User).where(User.username == "admin")).one()
        approvals.decide(AccessContext(session, admin), session.get(HumanTask, task["id"]), True)
    assert agent_run(api, run_id)["status"] == "waiting_approval"
    assert resume_decided() == 1
    wait_for_status(api, run_id, "completed")
    assert len(smtp.received) == 1


@SQLITE
def test_admins_choose_what_needs_approval_per_profile(api, ai_server, mailbox):
    mandate_id = api.client.get("/api/me", headers=api.auth).json()["mandates"][0]["id"]
    url = f"/api/mandates/{mandate_id}/agent-approvals"
    listed = {p["profile"]: p for p in api.client.get(url, headers=api.auth).json()}
    assert listed["workspace"]["consequences"] == ["send", "delete"] and not listed["workspace"]["customised"]
    bad = api.client.put(f"{url}/workspace", json={"consequences": ["send", "explode"]}, headers=api.auth)
    assert bad.status_code == 422 and "consequences" in bad.text
    assert api.client.put(f"{url}/nobody", json={"consequences": []}, headers=api.auth).status_code == 404
    changed = api.client.put(f"{url}/workspace", json={"consequences": ["external"]}, headers=api.auth)
    assert changed.status_code == 200 and changed.json()["consequences"] == ["external"]

    connection_id, smtp = mailbox
    script_send(ai_server, connection_id)
    events = stream(api, "Please send the report to anna@example.com by e-mail")
    assert not of(events, "approval.required") and events[-1][0] == "final"
    assert len(smtp.received) == 1  # sending no longer waits in this mandate

    reset = api.client.delete(f"{url}/workspace", headers=api.auth)
    assert reset.json()["consequences"] == ["send", "delete"] and not reset.json()["customised"]


@SQLITE
def test_a_chat_with_a_waiting_run_can_be_deleted_and_its_request_leaves_the_inbox(api, ai_server, mailbox):
    run_id, task, events = paused_run(api, ai_server, mailbox)
    chat_id = events[0][1]["chatId"]
    deleted = api.client.delete(f"/api/workspace/{workspace_id(api)}/agent/chats/{chat_id}", headers=api.auth)
    assert deleted.status_code == 204, deleted.text
    assert all(t["id"] != task["id"] for t in api.client.get("/api/tasks", headers=api.auth).json())
    gone = api.client.post(f"/api/tasks/{task['id']}/complete", json={"data": {"approved": True}}, headers=api.auth)
    assert gone.status_code == 404


@SQLITE
def test_cancelling_a_waiting_run_withdraws_its_request(api, ai_server, mailbox):
    _connection_id, smtp = mailbox
    run_id, task, _events = paused_run(api, ai_server, mailbox)
    cancelled = api.client.post(f"/api/workspace/{workspace_id(api)}/agent/runs/{run_id}/cancel", headers=api.auth)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    history = {t["id"]: t for t in api.client.get("/api/tasks?status=cancelled", headers=api.auth).json()}
    assert history[task["id"]]["data"]["cancelReason"] == "the agent run was cancelled"
    status, body = approval_stream(api, run_id, approved=True)
    assert status == 409 and "cancelled" in body[0][1]["detail"] and smtp.received == []


@SQLITE
def test_an_agents_approval_is_mailed_and_decided_from_the_mail_after_sign_in(api, ai_server, mailbox, monkeypatch):
    from sqlmodel import select

    from backend.config import reset_settings_cache
    from backend.db import session_scope
    from backend.db.models import User
    from backend.notifications import mailer
    from tests.integration.test_task_mail import links

    _connection_id, smtp = mailbox
    monkeypatch.setenv("POWERON_SMTP_URL", f"smtp://{smtp.username}:{smtp.password}@127.0.0.1:{smtp.port}")
    reset_settings_cache()
    with session_scope() as session:
        session.exec(select(User).where(User.username == "admin")).one().email = "admin@example.com"
    run_id, task, _events = paused_run(api, ai_server, mailbox)
    assert mailer.wait_idle(30)
    told = [m for m in smtp.received if m["To"] == "admin@example.com"]
    assert [m["Subject"] for m in told] == ["PowerOn: Approval waiting for you: Approve: Send e-mail"]
    token = links(told[0])["approve"]
    # An agent's approval is never decided without signing in, even where one-click would be allowed.
    shown = api.client.get(f"/api/task-links/{token}").json()
    assert shown["state"] == "signIn" and shown["context"] == "An AI agent asks for approval in Workspace"
    decided = api.client.post(f"/api/task-links/{token}/decision", json={"approved": True}, headers=api.auth)
    assert decided.status_code == 200, decided.text
    assert decided.json()["reason"] == "Done: approved by System administrator. The agent goes on."
    run = wait_for_status(api, run_id, "completed")
    assert run["answer"] == "Sent."
    assert [m["Subject"] for m in smtp.received if m["To"] == "anna@example.com"] == ["Report"]
    done = [t for t in api.client.get("/api/tasks?status=completed", headers=api.auth).json() if t["id"] == task["id"]]
    assert done[0]["decidedVia"] == "mail"
