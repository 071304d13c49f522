"""Notification settings per user (issue 23, part 5): which events reach a user on which channel.

``/api/notifications/settings`` lists every event × channel (on until switched off) and changes
the caller's own choices only; a bad entry is refused naming it and nothing is saved. A failed
unattended run follows its owner's choices: no in-app row when "in the app" is off, no mail
when "e-mail" is off (against a real SMTP server on 127.0.0.1).
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager

import pytest
from sqlmodel import select

from backend.config import reset_settings_cache
from backend.db import session_scope
from backend.db.models import FeatureInstance, Notification, NotificationSetting, User
from backend.engine import executor
from backend.engine import queue as run_queue
from backend.notifications import mailer, notifier
from backend.workflows import service as workflows
from tests.integration.test_push import make_user
from tests.mail_servers import smtp_server

EVENTS = ("task.assigned", "task.expiring", "run.failed")
CHANNELS = ("app", "mail", "push")
FAILING = {
    "nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}},
              {"id": "bad", "type": "context.transform", "parameters": {"data": {}, "template": "{{ x.y.z }}"}}],
    "edges": [{"source": "start", "target": "bad"}],
}


def settings(api, headers) -> dict[tuple[str, str], bool]:
    response = api.client.get("/api/notifications/settings", headers=headers)
    assert response.status_code == 200, response.text
    return {(s["event"], s["channel"]): s["enabled"] for s in response.json()}


def test_every_event_and_channel_is_on_until_the_user_switches_it_off(api):
    _, headers = make_user("sven")
    listed = api.client.get("/api/notifications/settings", headers=headers).json()
    assert [(s["event"], s["channel"]) for s in listed] == [(e, c) for e in EVENTS for c in CHANNELS]
    assert all(s["enabled"] for s in listed)

    response = api.client.put("/api/notifications/settings", headers=headers, json={"settings": [
        {"event": "task.expiring", "channel": "mail", "enabled": False},
        {"event": "run.failed", "channel": "push", "enabled": False},
    ]})
    assert response.status_code == 200, response.text
    after = {(s["event"], s["channel"]): s["enabled"] for s in response.json()}
    assert settings(api, headers) == after
    assert {key for key, on in after.items() if not on} == {("task.expiring", "mail"), ("run.failed", "push")}

    # Switched on again: one row per choice, not a second one.
    api.client.put("/api/notifications/settings", headers=headers,
                   json={"settings": [{"event": "task.expiring", "channel": "mail", "enabled": True}]})
    assert settings(api, headers)[("task.expiring", "mail")] is True
    with session_scope() as session:
        assert len(session.exec(select(NotificationSetting)).all()) == 2


def test_a_users_settings_are_their_own(api):
    _, anna = make_user("anna")
    _, bert = make_user("bert")
    api.client.put("/api/notifications/settings", headers=anna,
                   json={"settings": [{"event": "task.assigned", "channel": "app", "enabled": False}]})
    assert settings(api, anna)[("task.assigned", "app")] is False
    assert all(settings(api, bert).values())


@pytest.mark.parametrize(("entry", "field", "words"), [
    ({"event": "task.deleted", "channel": "mail", "enabled": False}, "settings[1].event",
     "unknown event 'task.deleted'"),
    ({"event": "run.failed", "channel": "sms", "enabled": False}, "settings[1].channel", "unknown channel 'sms'"),
])
def test_an_unknown_event_or_channel_is_refused_by_name_and_nothing_saved(api, entry, field, words):
    _, headers = make_user(f"u{uuid.uuid4().hex[:6]}")
    response = api.client.put("/api/notifications/settings", headers=headers, json={"settings": [
        {"event": "run.failed", "channel": "app", "enabled": False}, entry]})
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert [e["field"] for e in errors] == [field] and words in errors[0]["message"]
    assert "one of" in errors[0]["message"]
    assert all(settings(api, headers).values())  # the valid first entry was not saved either


def test_enabled_must_be_a_boolean(api):
    _, headers = make_user("tina")
    response = api.client.put("/api/notifications/settings", headers=headers,
                              json={"settings": [{"event": "run.failed", "channel": "app", "enabled": "no"}]})
    assert response.status_code == 422
    assert "enabled" in response.text


def _failing_webhook_run(owner_id: str) -> str:
    with session_scope() as session:
        owner = session.get(User, owner_id)
        editor = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")).first()
        workflow = workflows.create_workflow(session, owner, editor, f"wf-{uuid.uuid4().hex[:6]}", "", FAILING)
        workflows.publish(session, owner, workflow)
        run = executor.start_run(session, owner, workflow, workflows.published_version(session, workflow), None,
                                 trigger="webhook")
        run_id = run.id
    run_queue.wait_for_rest(run_id, 60)
    return run_id


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_failed_run_follows_the_owners_app_and_mail_choices(api, monkeypatch):
    with smtp_server() as smtp:
        monkeypatch.setenv("POWERON_SMTP_URL", f"smtp://{smtp.username}:{smtp.password}@{smtp.host}:{smtp.port}?timeout=5")
        reset_settings_cache()
        started = notifier.start_notifier()
        try:
            no_app_id, no_app = make_user("nils")
            no_mail_id, no_mail = make_user("mona")
            api.client.put("/api/notifications/settings", headers=no_app,
                           json={"settings": [{"event": "run.failed", "channel": "app", "enabled": False}]})
            api.client.put("/api/notifications/settings", headers=no_mail,
                           json={"settings": [{"event": "run.failed", "channel": "mail", "enabled": False}]})
            _failing_webhook_run(no_app_id)
            mona_run = _failing_webhook_run(no_mail_id)
            assert started.wait_idle() and mailer.wait_idle()
        finally:
            notifier.stop_notifier()

    with session_scope() as session:
        told = session.exec(select(Notification.user_id, Notification.run_id)).all()
    assert told == [(no_mail_id, mona_run)]  # Nils switched the app off, Mona only the mail
    assert [recipients for _from, recipients in smtp.envelopes] == [["nils@example.com"]]
    assert "failed" in smtp.received[0]["Subject"]


# --- the panel's state (state/notification_settings.py), on a plain object ----------------------


class FakePanel:
    """NotificationSettingsState's vars with its methods and handlers, on a plain object."""

    def __init__(self, username: str):
        from state.notification_settings import NotificationSettingsState

        self.state_class = NotificationSettingsState
        self.username = username
        self.rows, self.devices = [], []
        self.error = self.notice = self.push_status = self.push_message = ""
        self.loaded = self.push_busy = False

    @contextmanager
    def _user_session(self):
        with session_scope() as session:
            yield session, session.exec(select(User).where(User.username == self.username)).one()

    def _signed_out(self):
        raise AssertionError("signed out")

    def __getattr__(self, name: str):
        from state.page import PageMixin

        if name in ("_reload", "_attempt"):
            return PageMixin.__dict__[name].__get__(self)
        handler = self.state_class.event_handlers.get(name)
        if handler is not None:
            return handler.fn.__get__(self)
        member = self.state_class.__dict__.get(name)
        if member is not None:
            return member.__get__(self)
        raise AttributeError(name)


def _browser_subscription(endpoint: str) -> dict:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from backend.notifications.push import b64url

    point = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return {"endpoint": endpoint, "expirationTime": None,
            "keys": {"p256dh": b64url(point), "auth": b64url(uuid.uuid4().bytes)}}


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_panel_saves_choices_and_keeps_the_browsers_subscription(api):
    make_user("pia")
    panel = FakePanel("pia")
    panel.load()
    assert [(r["label"], r["app"], r["mail"], r["push"]) for r in panel.rows] == [
        ("Task assigned", True, True, True), ("Task expiring", True, True, True), ("Run failed", True, True, True)]

    panel.toggle("task.assigned", "push", False)
    assert panel.notice == "Saved: Task assigned · Push off." and panel.rows[0]["push"] is False
    panel.toggle("task.nothing", "push", False)
    assert "unknown event 'task.nothing'" in panel.error

    # What the browser answers after subscribing (the page's script hands it over).
    panel.push_result({"status": "subscribed", "userAgent": "Mozilla/5.0 (Linux; Android 14) Chrome/131.0 Mobile",
                       "subscription": _browser_subscription("https://fcm.googleapis.com/fcm/send/abc")})
    assert panel.push_status == "subscribed" and "Push is on for this browser" in panel.push_message
    assert [d["label"] for d in panel.devices] == ["Chrome on Android"]

    # A browser that could not subscribe, and a subscription the server refuses, are explained.
    panel.push_result({"status": "denied"})
    assert panel.push_status == "denied" and "blocked for this site" in panel.push_message
    panel.push_result({"status": "error", "message": "Registration failed - push service error"})
    assert "could not subscribe" in panel.push_message and "push service error" in panel.push_message
    panel.push_result({"status": "subscribed", "subscription": _browser_subscription("http://evil.example/x")})
    assert panel.push_status == "error" and "must be an https:// URL" in panel.push_message

    panel.remove_device(panel.devices[0]["id"])
    assert panel.devices == [] and "no more push notifications" in panel.notice
