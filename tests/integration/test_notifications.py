"""Run history per workflow and failure notifications (issue 7, item 5).

A failing run started by a schedule, webhook or event tells the workflow's owner: one
Notification row (through the ``run.failed`` event and the notifier thread) and, when
POWERON_SMTP_URL is set, a mail that a real SMTP server (aiosmtpd on 127.0.0.1) receives.
Manual runs tell nobody. The notifications API shows and changes the caller's own rows only;
the run history API pages, filters and sums up a workflow's runs.
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Iterator
from datetime import timedelta
from email import message_from_bytes, policy
from typing import Any

import pytest
from sqlmodel import select

from backend.auth import issue_token
from backend.config import reset_settings_cache
from backend.db import session_scope
from backend.db.models import FeatureInstance, Notification, User, Workflow, WorkflowRun, utcnow
from backend.engine import executor
from backend.engine import queue as run_queue
from backend.notifications import mailer, notifier, service
from backend.workflows import service as workflows

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
SMTP_PASSWORD = "s3cret:p@ss/word"  # percent-encoded in the URL; must never show in a log

START = {"id": "start", "type": "trigger.manual", "parameters": {}}
FAILING = {
    "nodes": [START, {"id": "bad", "type": "context.transform",
                      "parameters": {"data": {}, "template": "{{ x.y.z }}"}}],
    "edges": [{"source": "start", "target": "bad"}],
}
WORKING = {
    "nodes": [START, {"id": "ok", "type": "context.transform", "parameters": {"data": {}, "template": "fine"}}],
    "edges": [{"source": "start", "target": "ok"}],
}


@pytest.fixture
def running_notifier(app_config) -> Iterator[notifier.Notifier]:
    """The process's notifier, as the app's lifespan starts it; stopped afterwards."""
    started = notifier.start_notifier()
    assert notifier.start_notifier() is started  # idempotent
    try:
        yield started
    finally:
        notifier.stop_notifier()


def _admin(session) -> User:
    return session.exec(select(User).where(User.username == "admin")).one()


def _editor(session) -> FeatureInstance:
    return session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")).first()


def make_user(username: str, email: str | None = None) -> tuple[str, str]:
    """A user (id, login token)."""
    with session_scope() as session:
        user = User(username=username, email=email, display_name=username.capitalize())
        session.add(user)
        session.flush()
        return user.id, issue_token(session, user).token


def published_workflow(graph: dict[str, Any], owner_id: str | None = None, name: str | None = None) -> str:
    """A workflow of the default editor instance owned by `owner_id` (default: admin), published."""
    with session_scope() as session:
        owner = session.get(User, owner_id) if owner_id else _admin(session)
        workflow = workflows.create_workflow(session, owner, _editor(session), name or f"wf-{uuid.uuid4().hex[:8]}",
                                             "", graph)
        workflows.publish(session, owner, workflow)
        return workflow.id


def start_and_execute(workflow_id: str, trigger: str, starter_id: str | None = None) -> WorkflowRun:
    """Start a run of the published version as the scheduler, a webhook or an event would (it is handed
    to the run queue as it starts), and wait until it comes to rest."""
    with session_scope() as session:
        workflow = session.get(Workflow, workflow_id)
        starter = session.get(User, starter_id) if starter_id else _admin(session)
        run = executor.start_run(session, starter, workflow, workflows.published_version(session, workflow),
                                 None, trigger=trigger)
        run_id = run.id
    run_queue.wait_for_rest(run_id, 60)
    with session_scope() as session:
        return session.get(WorkflowRun, run_id)


def notifications_of(user_id: str) -> list[Notification]:
    with session_scope() as session:
        return list(session.exec(select(Notification).where(Notification.user_id == user_id)).all())


def admin_id() -> str:
    with session_scope() as session:
        return _admin(session).id


# --- the notifier ---------------------------------------------------------------------------------


@pytest.mark.parametrize("trigger", ["schedule", "webhook", "event"])
def test_a_failed_unattended_run_notifies_the_workflow_owner_once(running_notifier, trigger):
    owner_id, _ = make_user(f"owner-{trigger}", f"owner-{trigger}@example.com")
    workflow_id = published_workflow(FAILING, owner_id, name=f"Nightly import {trigger}")
    # The run is started by someone else (the scheduler acts with the creator's rights, but a
    # webhook or event run may be started by another caller): the owner is told.
    run = start_and_execute(workflow_id, trigger)
    assert run.status == "failed" and run.trigger == trigger
    assert running_notifier.wait_idle()

    told = notifications_of(owner_id)
    assert len(told) == 1, told
    note = told[0]
    assert (note.kind, note.workflow_id, note.run_id, note.read_at) == ("run.failed", workflow_id, run.id, None)
    assert f"Nightly import {trigger}" in note.title and trigger in note.title
    assert "node 'bad' failed" in note.message
    assert notifications_of(admin_id()) == []  # the starter is not the owner

    # Handling the same failure again (a repeated event) adds nothing.
    assert notifier.handle_run_failed(run.id) is None
    assert len(notifications_of(owner_id)) == 1


@SQLITE
def test_manual_and_successful_runs_notify_nobody(running_notifier):
    failing = published_workflow(FAILING)
    working = published_workflow(WORKING)
    assert start_and_execute(failing, "manual").status == "failed"
    assert start_and_execute(failing, "form").status == "failed"  # a person submitted it and sees the result
    assert start_and_execute(working, "schedule").status == "completed"
    assert running_notifier.wait_idle()
    assert notifications_of(admin_id()) == []
    with session_scope() as session:
        assert session.exec(select(Notification)).all() == []


@SQLITE
def test_a_failure_is_missed_by_nobody_after_a_restart_of_the_notifier(running_notifier):
    workflow_id = published_workflow(FAILING)
    notifier.stop_notifier()
    again = notifier.start_notifier()
    assert again is not running_notifier and again.is_alive()
    run = start_and_execute(workflow_id, "schedule")
    assert again.wait_idle()
    assert [n.run_id for n in notifications_of(admin_id())] == [run.id]


# --- e-mail ---------------------------------------------------------------------------------------


class Inbox:
    """aiosmtpd handler keeping every message (and the credentials it was sent with)."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.logins: list[tuple[str, str]] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos),
                              message_from_bytes(envelope.original_content, policy=policy.default)))
        return "250 OK"

    def authenticate(self, server, session, envelope, mechanism, auth_data):
        from aiosmtpd.smtp import AuthResult

        login, password = auth_data.login.decode(), auth_data.password.decode()
        self.logins.append((login, password))
        return AuthResult(success=(login, password) == ("mailer", SMTP_PASSWORD))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def smtp_server(monkeypatch) -> Iterator[tuple[Inbox, int]]:
    """A real SMTP server on 127.0.0.1 with AUTH (LOGIN/PLAIN over the plain connection)."""
    aiosmtpd = pytest.importorskip("aiosmtpd.controller")
    inbox = Inbox()
    port = _free_port()
    controller = aiosmtpd.Controller(inbox, hostname="127.0.0.1", port=port, authenticator=inbox.authenticate,
                                     auth_require_tls=False)
    controller.start()
    try:
        yield inbox, port
    finally:
        controller.stop()


def _configure_smtp(monkeypatch, port: int, password: str = "s3cret%3Ap%40ss%2Fword") -> None:
    monkeypatch.setenv("POWERON_SMTP_URL", f"smtp://mailer:{password}@127.0.0.1:{port}?timeout=5")
    monkeypatch.setenv("POWERON_SMTP_FROM", "PowerOn <poweron@example.com>")
    reset_settings_cache()


@SQLITE
def test_the_owner_gets_a_mail_through_the_configured_smtp_server(app_config, smtp_server, monkeypatch, caplog):
    inbox, port = smtp_server
    _configure_smtp(monkeypatch, port)
    caplog.set_level(logging.DEBUG, logger="backend.notifications")
    started = notifier.start_notifier()
    try:
        owner_id, _ = make_user("olga", "olga@example.com")
        workflow_id = published_workflow(FAILING, owner_id, name="Invoice sync")
        run = start_and_execute(workflow_id, "webhook")
        assert started.wait_idle() and mailer.wait_idle()
    finally:
        notifier.stop_notifier()

    assert inbox.logins == [("mailer", SMTP_PASSWORD)]
    assert len(inbox.messages) == 1
    mail_from, recipients, message = inbox.messages[0]
    assert (mail_from, recipients) == ("poweron@example.com", ["olga@example.com"])
    assert message["Subject"] == "PowerOn: Workflow 'Invoice sync' failed (webhook run)"
    assert message["To"] == "olga@example.com"
    body = message.get_content()
    assert "Hello Olga," in body and "webhook run of your workflow 'Invoice sync' failed" in body
    assert "node 'bad' failed" in body and run.id in body and workflow_id in body
    assert "/notifications" in body
    # The log names the server, never the password (neither decoded nor as written in the URL).
    assert "mailed" in caplog.text and "127.0.0.1" in caplog.text
    assert SMTP_PASSWORD not in caplog.text and "s3cret" not in caplog.text


@SQLITE
def test_an_unreachable_smtp_server_is_logged_without_the_password(app_config, monkeypatch, caplog):
    _configure_smtp(monkeypatch, _free_port())  # nobody listens there
    caplog.set_level(logging.DEBUG, logger="backend.notifications")
    started = notifier.start_notifier()
    try:
        owner_id, _ = make_user("petra", "petra@example.com")
        run = start_and_execute(published_workflow(FAILING, owner_id), "schedule")
        assert started.wait_idle() and mailer.wait_idle()
    finally:
        notifier.stop_notifier()
    # The notification is there all the same; the mail failure is a warning.
    assert [n.run_id for n in notifications_of(owner_id)] == [run.id]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and "could not mail" in warnings[0].getMessage()
    assert "s3cret" not in caplog.text


@SQLITE
def test_no_mail_without_an_address_or_without_smtp(app_config, smtp_server, monkeypatch):
    inbox, port = smtp_server
    owner_id, _ = make_user("rita", "rita@example.com")
    started = notifier.start_notifier()  # SMTP not configured yet
    try:
        start_and_execute(published_workflow(FAILING, owner_id), "schedule")
        assert started.wait_idle() and mailer.wait_idle()
        _configure_smtp(monkeypatch, port)
        start_and_execute(published_workflow(FAILING), "schedule")  # admin has no e-mail address
        assert started.wait_idle() and mailer.wait_idle()
    finally:
        notifier.stop_notifier()
    assert len(notifications_of(owner_id)) == 1 and len(notifications_of(admin_id())) == 1
    assert inbox.messages == []


def test_smtp_urls_are_parsed_and_bad_ones_refused_without_the_password():
    target = mailer.parse_smtp_url("smtp://me%40corp.ch:pa%3Ass@mail.corp.ch?starttls=true")
    assert (target.host, target.port, target.starttls, target.tls) == ("mail.corp.ch", 587, True, False)
    assert (target.username, target.password) == ("me@corp.ch", "pa:ss")
    assert "pa:ss" not in repr(target) and "pa:ss" not in target.redacted
    assert target.redacted == "smtp://me@corp.ch@mail.corp.ch:587?starttls=true"
    assert mailer.parse_smtp_url("smtps://u:p@h").port == 465
    assert mailer.parse_smtp_url("smtp://h").port == 25 and mailer.parse_smtp_url("smtp://h").username is None
    for bad, expected in [("http://u:topsecret@h", "must start with smtp://"),
                          ("smtp://u:topsecret@h?starttls=maybe", "starttls must be true or false"),
                          ("smtps://u:topsecret@h?starttls=true", "starttls is for smtp://"),
                          ("smtp://u:topsecret@h/path", "must not have a path"),
                          ("smtp://u:topsecret@h?tls=1", "unknown option 'tls'"),
                          ("smtp://u:topsecret@h:99999", "invalid port"),
                          ("smtp://u:topsecret@:25", "names no host")]:
        with pytest.raises(ValueError, match=expected) as refused:
            mailer.parse_smtp_url(bad)
        assert "topsecret" not in str(refused.value)


@SQLITE
def test_a_malformed_smtp_url_stops_the_notifier_from_starting(app_config, monkeypatch):
    monkeypatch.setenv("POWERON_SMTP_URL", "smtp://u:topsecret@h?starttls=perhaps")
    reset_settings_cache()
    with pytest.raises(ValueError, match="POWERON_SMTP_URL") as refused:
        notifier.start_notifier()
    assert "topsecret" not in str(refused.value)


# --- the notifications API ------------------------------------------------------------------------


def _notify(user_id: str, title: str, minutes_ago: int = 0) -> str:
    with session_scope() as session:
        note = Notification(user_id=user_id, kind="run.failed", title=title, message=f"error of {title}",
                            created_at=utcnow() - timedelta(minutes=minutes_ago))
        session.add(note)
        return note.id


def test_the_notifications_api_shows_and_marks_only_the_callers_own(api, running_notifier):
    admin = admin_id()
    failed = start_and_execute(published_workflow(FAILING, name="Payroll export"), "schedule")
    assert running_notifier.wait_idle()
    older = _notify(admin, "older", minutes_ago=30)
    other_id, other_token = make_user("otto")
    foreign = _notify(other_id, "otto's")
    other = {"Authorization": f"Bearer {other_token}"}
    base = "/api/notifications"

    listed = api.client.get(base, headers=api.auth)
    assert listed.status_code == 200, listed.text
    items = listed.json()
    assert [n["title"] for n in items] == ["Workflow 'Payroll export' failed (schedule run)", "older"]
    newest = items[0]
    assert (newest["kind"], newest["runId"], newest["readAt"]) == ("run.failed", failed.id, None)
    assert newest["workflowId"] == failed.workflow_id and "node 'bad' failed" in newest["message"]
    assert api.client.get(f"{base}/count", headers=api.auth).json() == {"unread": 2}

    # One read: it stays listed, not among the unread ones; reading again keeps its time.
    read = api.client.post(f"{base}/{newest['id']}/read", headers=api.auth)
    assert read.status_code == 200 and read.json()["readAt"] is not None
    again = api.client.post(f"{base}/{newest['id']}/read", headers=api.auth)
    assert again.json()["readAt"] == read.json()["readAt"]
    assert api.client.get(f"{base}/count", headers=api.auth).json() == {"unread": 1}
    assert [n["id"] for n in api.client.get(f"{base}?unread=true", headers=api.auth).json()] == [older]
    assert len(api.client.get(base, headers=api.auth).json()) == 2

    # Somebody else's notification is not found, like a missing one, and stays unread.
    for missing in (foreign, uuid.uuid4().hex):
        refused = api.client.post(f"{base}/{missing}/read", headers=api.auth)
        assert refused.status_code == 404 and "not found" in refused.json()["detail"]
    assert [n["id"] for n in api.client.get(base, headers=other).json()] == [foreign]

    marked = api.client.post(f"{base}/read-all", headers=api.auth)
    assert marked.status_code == 200 and marked.json() == {"marked": 1, "unread": 0}
    assert api.client.get(f"{base}?unread=true", headers=api.auth).json() == []
    assert api.client.get(f"{base}/count", headers=other).json() == {"unread": 1}  # otto's untouched

    assert api.client.get(f"{base}?limit=0", headers=api.auth).status_code == 422
    assert api.client.get(base).status_code == 401


# --- run history ----------------------------------------------------------------------------------


def _runs(workflow_id: str, rows: list[tuple[str, str, int, int | None, str | None]]) -> list[str]:
    """Insert runs: (status, trigger, started minutes ago, duration in seconds or None, error)."""
    now = utcnow()
    ids = []
    with session_scope() as session:
        workflow = session.get(Workflow, workflow_id)
        version = workflows.published_version(session, workflow)
        for status, trigger, minutes_ago, seconds, error in rows:
            started = now - timedelta(minutes=minutes_ago)
            run = WorkflowRun(workflow_id=workflow.id, version_id=version.id, mandate_id=workflow.mandate_id,
                              feature_instance_id=workflow.feature_instance_id, status=status, trigger=trigger,
                              error=error, sys_created_by=workflow.sys_created_by, started_at=started,
                              finished_at=started + timedelta(seconds=seconds) if seconds is not None else None)
            session.add(run)
            session.flush()
            ids.append(run.id)
    return ids


def test_run_history_pages_filters_and_sums_up(api):
    workflow_id = published_workflow(WORKING, name="Reporting")
    other_workflow = published_workflow(WORKING)
    day = 24 * 60
    ids = _runs(workflow_id, [
        ("completed", "schedule", 10, 2, None),
        ("failed", "webhook", 20, 4, "node 'x' failed: boom\n--- stack ---\nTraceback"),
        ("completed", "manual", 30, 6, None),
        ("failed", "schedule", 40, 8, "node 'y' failed: late"),
        ("running", "event", 50, None, None),
        # Three started in the same instant: the cursor neither skips nor repeats one of them.
        ("completed", "schedule", 60, 1, None),
        ("completed", "schedule", 60, 1, None),
        ("completed", "schedule", 60, 1, None),
        ("failed", "schedule", 8 * day, 1, "too old for the 7-day window"),
    ])
    _runs(other_workflow, [("failed", "schedule", 5, 1, "another workflow")])
    base = f"{api.base()}/workflows/{workflow_id}/runs"

    everything = api.client.get(base, headers=api.auth)
    assert everything.status_code == 200, everything.text
    page = everything.json()
    assert page["nextBefore"] is None and len(page["items"]) == 9
    assert [r["id"] for r in page["items"][:5]] == ids[:5]  # newest first
    failed = page["items"][1]
    assert (failed["status"], failed["trigger"], failed["durationMs"]) == ("failed", "webhook", 4000)
    assert failed["error"] == "node 'x' failed: boom" and failed["finishedAt"] is not None
    assert page["items"][4]["durationMs"] is None and page["items"][4]["finishedAt"] is None
    assert "input" not in failed and "context" not in failed

    # Paging two at a time walks every run once, in the same order.
    seen, before = [], None
    while True:
        params = {"limit": 2, **({"before": before} if before else {})}
        chunk = api.client.get(base, params=params, headers=api.auth).json()
        seen += [r["id"] for r in chunk["items"]]
        before = chunk["nextBefore"]
        if before is None:
            break
    assert seen == [r["id"] for r in page["items"]]

    by_status = api.client.get(base, params={"status": "failed"}, headers=api.auth).json()["items"]
    assert [r["id"] for r in by_status] == [ids[1], ids[3], ids[8]]
    both = api.client.get(base, params={"status": "failed", "trigger": "schedule"}, headers=api.auth).json()
    assert [r["id"] for r in both["items"]] == [ids[3], ids[8]]
    assert api.client.get(base, params={"trigger": "event"}, headers=api.auth).json()["items"][0]["id"] == ids[4]
    before_time = api.client.get(base, params={"before": page["items"][3]["startedAt"]}, headers=api.auth).json()
    assert [r["id"] for r in before_time["items"]] == [r["id"] for r in page["items"][4:]]

    for params, field in [({"status": "exploded"}, "status"), ({"trigger": "telepathy"}, "trigger"),
                          ({"limit": 0}, "limit"), ({"limit": 201}, "limit"), ({"before": "yesterday"}, "before")]:
        refused = api.client.get(base, params=params, headers=api.auth)
        assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == field, refused.text

    summary = api.client.get(f"{base}/summary", headers=api.auth)
    assert summary.status_code == 200, summary.text
    figures = summary.json()
    assert figures["workflowId"] == workflow_id and figures["days"] == 7 and figures["total"] == 8
    assert figures["byStatus"] == {"running": 1, "paused": 0, "completed": 5, "failed": 2, "cancelled": 0}
    assert figures["byTrigger"] == {"schedule": 5, "webhook": 1, "manual": 1, "event": 1}
    assert figures["lastRun"]["id"] == ids[0]
    assert figures["lastFailure"]["id"] == ids[1] and figures["lastFailure"]["error"] == "node 'x' failed: boom"
    assert figures["averageDurationMs"] == (2 + 4 + 6 + 8 + 1 + 1 + 1) * 1000 // 7
    longer = api.client.get(f"{base}/summary", params={"days": 30}, headers=api.auth).json()
    assert longer["total"] == 9 and longer["byStatus"]["failed"] == 3
    assert api.client.get(f"{base}/summary", params={"days": 0}, headers=api.auth).status_code == 422

    # A workflow without runs: zeros and no last run; a missing workflow: 404.
    empty = api.client.get(f"{api.base()}/workflows/{published_workflow(WORKING)}/runs/summary",
                           headers=api.auth).json()
    assert empty["total"] == 0 and empty["lastRun"] is None and empty["lastFailure"] is None
    assert empty["averageDurationMs"] is None
    missing = f"{api.base()}/workflows/{uuid.uuid4().hex}/runs"
    assert api.client.get(missing, headers=api.auth).status_code == 404
    assert api.client.get(f"{missing}/summary", headers=api.auth).status_code == 404


def test_run_history_needs_the_right_to_read_runs(api):
    """A user with no role in the instance cannot open it (404); the history is read with the
    same rights as the run list (DATA workflow_run read)."""
    workflow_id = published_workflow(WORKING)
    _runs(workflow_id, [("completed", "schedule", 1, 1, None)])
    _stranger, token = make_user("stranger")
    headers = {"Authorization": f"Bearer {token}"}
    for path in ("runs", "runs/summary"):
        assert api.client.get(f"{api.base()}/workflows/{workflow_id}/{path}", headers=headers).status_code == 404


def test_service_list_is_newest_first_and_limited(app_config):
    user_id, _ = make_user("lena")
    for index in range(3):
        _notify(user_id, f"n{index}", minutes_ago=10 - index)
    with session_scope() as session:
        user = session.get(User, user_id)
        assert [n.title for n in service.list_notifications(session, user, limit=2)] == ["n2", "n1"]
        assert service.unread_count(session, user) == 3
        assert service.mark_all_read(session, user) == 3
        assert service.mark_all_read(session, user) == 0
