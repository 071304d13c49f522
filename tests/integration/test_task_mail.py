"""Tasks reach people by mail and can be decided from it (issue 23, parts 1–2): a new approval is
mailed to each person who may complete it (a real SMTP server, aiosmtpd on 127.0.0.1) with
Approve / Reject / Open links; a link shows its task to anyone holding it but decides only for a
signed-in person who may complete the task — or, where a mandate admin allowed one-click decisions
for the workflow, for its recipient without sign-in — once, before it expires; a reminder goes out
before the task expires. On SQLite and PostgreSQL."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from email.message import Message
from typing import Any

import pytest
from sqlmodel import select

from backend.auth import hash_password
from backend.config import reset_settings_cache
from backend.db import session_scope
from backend.db.models import FeatureInstance, HumanTask, Mandate, Notification, NotificationSetting, TaskLink, User
from backend.engine.timers import remind_expiring_tasks
from backend.notifications import mailer
from backend.tenancy import grant_instance_roles, grant_mandate_roles
from tests.mail_servers import PASSWORD, USERNAME, smtp_server

START = {"id": "start", "type": "trigger.manual", "parameters": {}}
DONE = {"id": "done", "type": "context.transform", "parameters": {"data": {}, "template": "done"}}
ROLE = "graphicalEditor-user"
LINK = re.compile(r"https?://[^\s\"<>]+/act/([A-Za-z0-9_-]+)\?do=(approve|reject|open)")


@pytest.fixture
def smtp(app_config, monkeypatch):
    with smtp_server() as server:
        monkeypatch.setenv("POWERON_SMTP_URL", f"smtp://{USERNAME}:{PASSWORD}@127.0.0.1:{server.port}?timeout=5")
        monkeypatch.setenv("POWERON_SMTP_FROM", "PowerOn <poweron@example.com>")
        monkeypatch.setenv("POWERON_UI_URL", "http://phone.example:3000")
        reset_settings_cache()
        yield server
        reset_settings_cache()


def approval_graph(title: str, timeout: int | None = None) -> dict[str, Any]:
    parameters: dict[str, Any] = {"title": title, "message": "Offer 42 from ACME, CHF 1'200.",
                                  "assignee": {"role": ROLE}}
    if timeout:
        parameters["timeoutSeconds"] = timeout
    return {"nodes": [START, {"id": "ask", "type": "input.approval", "parameters": parameters}, DONE],
            "edges": [{"source": "start", "target": "ask"},
                      {"source": "ask", "target": "done", "sourceHandle": "approved"}]}


def make_user(api, username: str, roles: list[str], email: bool = True) -> str:
    """A member of the admin's mandate holding `roles` in the Graphical Editor; returns a token."""
    with session_scope() as session:
        user = User(username=username, email=f"{username}@example.com" if email else None,
                    display_name=username.split("-")[0].title(), password_hash=hash_password("pass-1234-word"))
        session.add(user)
        session.flush()
        instance = session.get(FeatureInstance, api.instance_id)
        grant_mandate_roles(session, user, session.get(Mandate, instance.mandate_id), [])
        if roles:
            grant_instance_roles(session, user, instance, roles)
    return api.login(username, "pass-1234-word")


def start(api, graph: dict[str, Any]) -> tuple[str, str, str]:
    """(workflow id, run id, task id) of a run paused at its approval."""
    base = api.base()
    created = api.client.post(f"{base}/workflows", json={"name": f"wf-{uuid.uuid4().hex[:8]}", "graph": graph},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    run = api.client.post(f"{base}/workflows/{created.json()['id']}/runs", json={"input": {}}, headers=api.auth)
    assert run.status_code == 201 and run.json()["status"] == "paused", run.text
    with session_scope() as session:
        task_id = session.exec(select(HumanTask.id).where(HumanTask.run_id == run.json()["id"])).one()
    return created.json()["id"], run.json()["id"], task_id


def mails_to(server, address: str) -> list[Message]:
    assert mailer.wait_idle(30), "the mail thread did not finish"
    return [m for m in server.received if m["To"] == address]


def part(mail: Message, content_type: str) -> str:
    found = next(p for p in mail.walk() if p.get_content_type() == content_type)
    return found.get_payload(decode=True).decode(found.get_content_charset() or "utf-8")


def text_of(mail: Message) -> str:
    return part(mail, "text/plain")


def html_of(mail: Message) -> str:
    return part(mail, "text/html")


def links(mail: Message) -> dict[str, str]:
    """{approve|reject|open: token} of the mail's buttons (the same in text and HTML)."""
    found = {action: token for token, action in LINK.findall(text_of(mail))}
    assert found == {action: token for token, action in LINK.findall(html_of(mail).replace("&amp;", "&"))}
    return found


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def run_status(api, run_id: str) -> str:
    return api.client.get(f"{api.base()}/runs/{run_id}", headers=api.auth).json()["status"]


def test_the_assignees_get_a_mail_whose_approve_link_completes_the_run_once(api, smtp):
    anna = make_user(api, f"anna-{uuid.uuid4().hex[:6]}", [ROLE])
    make_user(api, f"otto-{uuid.uuid4().hex[:6]}", [ROLE], email=False)  # may complete, has no address
    make_user(api, f"vera-{uuid.uuid4().hex[:6]}", ["graphicalEditor-viewer"])  # may not complete
    anna_name = api.client.get("/api/me", headers=bearer(anna)).json()["username"]
    _workflow, run_id, task_id = start(api, approval_graph("Approve offer 42"))

    received = mails_to(smtp, f"{anna_name}@example.com")
    assert len(received) == 1
    mail = received[0]
    assert mail["Subject"] == "PowerOn: Approval waiting for you: Approve offer 42"
    assert mail["From"] == "PowerOn <poweron@example.com>"
    assert "Offer 42 from ACME, CHF 1'200." in text_of(mail) and "Workflow \"wf-" in text_of(mail)
    assert ">Approve</a>" in html_of(mail) and ">Reject</a>" in html_of(mail) and ">Open</a>" in html_of(mail)
    assert "http://phone.example:3000/act/" in text_of(mail)
    tokens = links(mail)
    assert set(tokens) == {"approve", "reject", "open"} and len(set(tokens.values())) == 1
    token = tokens["approve"]
    # Only the people who may complete the task and have an address were mailed: anna.
    assert {m["To"] for m in smtp.received} == {f"{anna_name}@example.com"}
    with session_scope() as session:  # only the link's hash is kept
        assert session.exec(select(TaskLink).where(TaskLink.token_hash == token)).first() is None
        told = session.exec(select(Notification).where(Notification.task_id == task_id)).all()
        assert len(told) >= 2 and {n.kind for n in told} == {"task.assigned"}  # otto is told in the app

    # Opening the link shows the task; it decides nothing, and without sign-in asks for it.
    shown = api.client.get(f"/api/task-links/{token}")
    assert shown.status_code == 200, shown.text
    assert shown.json()["state"] == "signIn" and shown.json()["title"] == "Approve offer 42"
    assert shown.json()["recipient"] == "Anna" and shown.json()["status"] == "pending"
    refused = api.client.post(f"/api/task-links/{token}/decision", json={"approved": True})
    assert refused.status_code == 401 and "Sign in to decide" in refused.json()["detail"]
    assert run_status(api, run_id) == "paused"

    decided = api.client.post(f"/api/task-links/{token}/decision", json={"approved": True, "comment": "ok"},
                              headers=bearer(anna))
    assert decided.status_code == 200, decided.text
    assert decided.json()["state"] == "finished" and decided.json()["outcome"] == "approved"
    assert decided.json()["reason"] == "Done: approved by Anna. The workflow goes on."
    assert decided.json()["decidedBy"] == "Anna" and decided.json()["decidedVia"] == "mail"
    assert run_status(api, run_id) == "completed"
    task = next(t for t in api.client.get("/api/tasks", params={"status": "completed"}, headers=bearer(anna)).json()
                if t["id"] == task_id)
    assert task["decidedVia"] == "mail" and task["data"] == {"approved": True, "comment": "ok"}

    # A second click (or the reject link of the same mail) changes nothing and says who decided.
    again = api.client.post(f"/api/task-links/{token}/decision", json={"approved": False}, headers=bearer(anna))
    assert again.status_code == 409
    assert re.match(r"This task was already approved by Anna on .* UTC from the mail; nothing was changed",
                    again.json()["detail"]), again.text
    assert api.client.get(f"/api/task-links/{token}").json()["state"] == "finished"


def test_a_forwarded_link_works_only_for_someone_who_may_complete_the_task(api, smtp):
    anna = make_user(api, f"anna-{uuid.uuid4().hex[:6]}", [ROLE])
    carol = make_user(api, f"carol-{uuid.uuid4().hex[:6]}", [ROLE])
    bob = make_user(api, f"bob-{uuid.uuid4().hex[:6]}", ["graphicalEditor-viewer"])
    anna_name = api.client.get("/api/me", headers=bearer(anna)).json()["username"]
    _workflow, run_id, _task = start(api, approval_graph("Forwarded"))
    token = links(mails_to(smtp, f"{anna_name}@example.com")[0])["reject"]

    seen = api.client.get(f"/api/task-links/{token}", headers=bearer(bob)).json()
    assert seen["state"] == "foreign" and "This link was sent to Anna" in seen["reason"]
    refused = api.client.post(f"/api/task-links/{token}/decision", json={"approved": False}, headers=bearer(bob))
    assert refused.status_code == 403 and "who may not complete this task" in refused.json()["detail"]
    assert run_status(api, run_id) == "paused"

    assert api.client.get(f"/api/task-links/{token}", headers=bearer(carol)).json()["state"] == "open"
    decided = api.client.post(f"/api/task-links/{token}/decision", json={"approved": False, "comment": "too dear"},
                              headers=bearer(carol))
    assert decided.status_code == 200 and decided.json()["outcome"] == "rejected", decided.text
    assert decided.json()["decidedBy"] == "Carol"
    assert run_status(api, run_id) == "completed"  # rejected: the run ends without the approved branch


def test_tampered_expired_and_answered_links_are_refused_with_a_clear_reason(api, smtp):
    anna = make_user(api, f"anna-{uuid.uuid4().hex[:6]}", [ROLE])
    anna_name = api.client.get("/api/me", headers=bearer(anna)).json()["username"]
    _workflow, run_id, task_id = start(api, approval_graph("Guarded"))
    token = links(mails_to(smtp, f"{anna_name}@example.com")[0])["approve"]

    for bad in (token[:-1] + ("A" if token[-1] != "A" else "B"), "x", "../../etc/passwd", "a" * 150):
        answer = api.client.get(f"/api/task-links/{bad}")
        assert answer.status_code in (200, 404, 422), answer.text
        if answer.status_code == 200:
            assert answer.json()["state"] == "invalid" and answer.json()["taskId"] is None
            assert "not valid" in answer.json()["reason"]
        decided = api.client.post(f"/api/task-links/{bad}/decision", json={"approved": True}, headers=bearer(anna))
        assert decided.status_code in (404, 422), decided.text
    bad_body = api.client.post(f"/api/task-links/{token}/decision", json={"approved": "yes"}, headers=bearer(anna))
    assert bad_body.status_code == 422 and "approved" in bad_body.text

    with session_scope() as session:  # the link's time is up (the task itself is still pending)
        link = session.exec(select(TaskLink).where(TaskLink.task_id == task_id)).one()
        link.expires_at = link.sys_created_at - timedelta(minutes=1)
        session.add(link)
    expired = api.client.post(f"/api/task-links/{token}/decision", json={"approved": True}, headers=bearer(anna))
    assert expired.status_code == 409 and "This link expired on" in expired.json()["detail"]
    assert run_status(api, run_id) == "paused"

    # Answered in the app meanwhile: the link says by whom and how.
    answered = api.client.post(f"/api/tasks/{task_id}/complete", json={"data": {"approved": True}},
                               headers=bearer(anna))
    assert answered.status_code == 200 and answered.json()["task"]["decidedVia"] == "app"
    view = api.client.get(f"/api/task-links/{token}", headers=bearer(anna)).json()
    assert view["state"] == "finished" and view["decidedVia"] == "app"
    assert re.match(r"This task was already approved by Anna on .* in the app; nothing was changed", view["reason"])


def test_one_click_is_a_mandate_admins_choice_per_workflow(api, smtp):
    anna = make_user(api, f"anna-{uuid.uuid4().hex[:6]}", [ROLE])
    anna_name = api.client.get("/api/me", headers=bearer(anna)).json()["username"]
    workflow_id, run_id, _task = start(api, approval_graph("One click"))
    token = links(mails_to(smtp, f"{anna_name}@example.com")[0])["approve"]

    url = f"{api.base()}/workflows/{workflow_id}/mail-decisions"
    not_admin = api.client.put(url, json={"oneClick": True}, headers=bearer(anna))
    assert not_admin.status_code in (403, 404), not_admin.text
    allowed = api.client.put(url, json={"oneClick": True}, headers=api.auth)
    assert allowed.status_code == 200 and allowed.json()["mailOneClick"] is True, allowed.text
    assert api.client.put(url, json={"oneClick": "yes"}, headers=api.auth).status_code == 422

    shown = api.client.get(f"/api/task-links/{token}").json()
    assert shown["state"] == "open" and shown["oneClick"] is True and "to whom this link was sent" in shown["reason"]
    decided = api.client.post(f"/api/task-links/{token}/decision", json={"approved": True})
    assert decided.status_code == 200 and decided.json()["decidedBy"] == "Anna", decided.text
    assert run_status(api, run_id) == "completed"
    detail = api.client.get(f"{api.base()}/workflows/{workflow_id}", headers=api.auth).json()
    assert any(e.get("action") == "mailOneClickAllowed" for e in detail["executionLogs"])


def test_choices_and_configuration_decide_who_is_mailed(api, smtp, monkeypatch):
    anna = make_user(api, f"anna-{uuid.uuid4().hex[:6]}", [ROLE])
    anna_me = api.client.get("/api/me", headers=bearer(anna)).json()
    with session_scope() as session:  # anna switched task mails off (the settings page's choice)
        session.add(NotificationSetting(user_id=anna_me["id"], event="task.assigned", channel="mail", enabled=False))
    _workflow, _run, task_id = start(api, approval_graph("Quiet"))
    assert mails_to(smtp, f"{anna_me['username']}@example.com") == []
    with session_scope() as session:
        assert session.exec(select(Notification).where(Notification.task_id == task_id,
                                                       Notification.user_id == anna_me["id"])).first() is not None
        assert session.exec(select(TaskLink).where(TaskLink.task_id == task_id)).first() is None

    monkeypatch.delenv("POWERON_SMTP_URL")  # no mail configured: in the app only, no links made
    reset_settings_cache()
    bert = make_user(api, f"bert-{uuid.uuid4().hex[:6]}", [ROLE])
    bert_name = api.client.get("/api/me", headers=bearer(bert)).json()["username"]
    _workflow, _run, task_id = start(api, approval_graph("No SMTP"))
    assert mails_to(smtp, f"{bert_name}@example.com") == []
    with session_scope() as session:
        assert session.exec(select(TaskLink).where(TaskLink.task_id == task_id)).first() is None


def test_a_reminder_goes_out_once_before_the_task_expires(api, smtp, monkeypatch):
    monkeypatch.setenv("POWERON_TASK_REMINDER_MINUTES", "30")
    reset_settings_cache()
    anna = make_user(api, f"anna-{uuid.uuid4().hex[:6]}", [ROLE])
    anna_name = api.client.get("/api/me", headers=bearer(anna)).json()["username"]
    _workflow, run_id, task_id = start(api, approval_graph("Expiring", timeout=2 * 3600))
    assert len(mails_to(smtp, f"{anna_name}@example.com")) == 1
    with session_scope() as session:
        due = session.get(HumanTask, task_id).due_at

    assert remind_expiring_tasks(due - timedelta(hours=1)) == 0  # not yet within 30 minutes
    assert remind_expiring_tasks(due - timedelta(minutes=20)) >= 1
    assert remind_expiring_tasks(due - timedelta(minutes=10)) == 0  # once
    reminders = [m for m in mails_to(smtp, f"{anna_name}@example.com") if "Reminder" in m["Subject"]]
    assert len(reminders) == 1
    assert reminders[0]["Subject"] == "PowerOn: Reminder: Approval waiting for you: Expiring"
    assert "expires on" in text_of(reminders[0])
    with session_scope() as session:
        kinds = {n.kind for n in session.exec(select(Notification).where(Notification.task_id == task_id)).all()}
    assert kinds == {"task.assigned", "task.expiring"}
    # The reminder's fresh link works like the first one.
    token = links(reminders[0])["approve"]
    assert api.client.post(f"/api/task-links/{token}/decision", json={"approved": True},
                           headers=bearer(anna)).status_code == 200
    assert run_status(api, run_id) == "completed"
