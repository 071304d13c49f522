"""Web Push (issue 23, part 4) end to end against a stand-in push service on 127.0.0.1.

A test "browser" subscribes as a real one does: an ECDH P-256 key pair and a 16-byte auth
secret of its own, the application server key from ``GET /api/push/key``, the subscription
posted to ``/api/push/subscriptions``. The server then pushes through pywebpush to the stand-in
(tests/push_server.py), which checks the VAPID signature, the encoding and the TTL; the test
decrypts what arrived with the browser's private key (http_ece) and reads what the phone would
show: title, body and the page a click opens.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import http_ece
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from sqlmodel import Session, select

from backend.auth import issue_token
from backend.config import reset_settings_cache
from backend.db import get_engine, session_scope
from backend.db.models import FeatureInstance, Notification, PlatformSecret, PushSubscription, User
from backend.engine import executor
from backend.engine import queue as run_queue
from backend.notifications import notifier, push
from backend.notifications.preferences import TASK_ASSIGNED
from backend.workflows import service as workflows
from tests.push_server import PushService, RunningPushService

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
START = {"id": "start", "type": "trigger.manual", "parameters": {}}
FAILING = {
    "nodes": [START, {"id": "bad", "type": "context.transform",
                      "parameters": {"data": {}, "template": "{{ x.y.z }}"}}],
    "edges": [{"source": "start", "target": "bad"}],
}


@dataclass
class Browser:
    """A browser's push subscription: its keys stay here, the server gets the public half."""

    endpoint: str
    private_key: ec.EllipticCurvePrivateKey
    auth: bytes

    @classmethod
    def at(cls, service: PushService, token: str | None = None) -> Browser:
        return cls(service.endpoint(token or uuid.uuid4().hex), ec.generate_private_key(ec.SECP256R1()),
                   uuid.uuid4().bytes)

    def subscription(self) -> dict[str, Any]:
        """What ``PushSubscription.toJSON()`` gives."""
        point = self.private_key.public_key().public_bytes(serialization.Encoding.X962,
                                                           serialization.PublicFormat.UncompressedPoint)
        return {"endpoint": self.endpoint, "expirationTime": None,
                "keys": {"p256dh": push.b64url(point), "auth": push.b64url(self.auth)}}

    def read(self, body: bytes) -> dict[str, Any]:
        """The push as the service worker gets it: decrypted with this browser's keys."""
        return json.loads(http_ece.decrypt(body, private_key=self.private_key, auth_secret=self.auth,
                                           version="aes128gcm"))


@pytest.fixture
def push_service(app_config, monkeypatch):
    """The stand-in push service, and the server configured to allow its plain-http endpoints."""
    monkeypatch.setenv("POWERON_PUSH_HTTP_HOSTS", "127.0.0.1")
    reset_settings_cache()
    with RunningPushService() as service:
        yield service
    assert push.wait_idle()


def make_user(username: str) -> tuple[str, dict[str, str]]:
    with session_scope() as session:
        user = User(username=username, display_name=username.capitalize(), email=f"{username}@example.com")
        session.add(user)
        session.flush()
        return user.id, {"Authorization": f"Bearer {issue_token(session, user).token}"}


def subscribe(api, headers: dict[str, str], browser: Browser) -> dict[str, Any]:
    response = api.client.post("/api/push/subscriptions", json=browser.subscription(), headers=headers)
    assert response.status_code == 201, response.text
    return response.json()


def failing_unattended_run(owner_id: str, name: str) -> str:
    """A webhook run of the owner's failing workflow, come to rest; its id."""
    with session_scope() as session:
        owner = session.get(User, owner_id)
        editor = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")).first()
        workflow = workflows.create_workflow(session, owner, editor, name, "", FAILING)
        workflows.publish(session, owner, workflow)
        admin = session.exec(select(User).where(User.username == "admin")).one()
        run = executor.start_run(session, admin, workflow, workflows.published_version(session, workflow), None,
                                 trigger="webhook")
        run_id = run.id
    run_queue.wait_for_rest(run_id, 60)
    return run_id


def test_a_failed_run_is_pushed_to_the_owners_browser_which_decrypts_it(api, push_service):
    owner_id, owner = make_user("paula")
    key = api.client.get("/api/push/key", headers=owner).json()["publicKey"]
    assert api.client.get("/api/push/key", headers=api.auth).json()["publicKey"] == key  # one key per installation
    push_service.expected_key = key
    phone = Browser.at(push_service)
    saved = subscribe(api, owner, phone)
    assert saved["endpoint"] == phone.endpoint and saved["lastError"] is None and "keys" not in saved

    started = notifier.start_notifier()
    try:
        run_id = failing_unattended_run(owner_id, "Nightly invoices")
        assert started.wait_idle() and push.wait_idle()
    finally:
        notifier.stop_notifier()

    [received] = push_service.wait_for(1)
    assert received.headers["content-encoding"] == "aes128gcm" and int(received.headers["ttl"]) > 0
    assert received.claims["aud"] == push_service.origin and received.vapid_key == key
    shown = phone.read(received.body)
    assert shown["title"] == "Workflow 'Nightly invoices' failed (webhook run)"
    assert "node 'bad' failed" in shown["body"]
    assert shown["url"] == f"/notifications?run={run_id}"
    assert shown["icon"] == "/icons/icon-192.png"
    # The in-app notification is there as before.
    with session_scope() as session:
        assert session.exec(select(Notification).where(Notification.user_id == owner_id)).one().run_id == run_id


def test_gone_subscriptions_are_deleted_and_other_failures_kept(api, push_service):
    user_id, headers = make_user("gina")
    working, gone, busy = (Browser.at(push_service, token) for token in ("tab-ok", "tab-gone", "tab-busy"))
    push_service.gone.add("tab-gone")
    push_service.busy.add("tab-busy")
    for browser in (working, gone, busy):
        subscribe(api, headers, browser)

    report = push.notify_in_background([user_id], TASK_ASSIGNED, "Approval waiting for you: Budget 2027",
                                       "Anna asks you to approve the budget.", "/inbox").result(timeout=30)
    assert (report.sent, report.removed, report.failed) == (1, 1, 1)

    [received] = push_service.wait_for(1)
    assert received.token == "tab-ok"
    assert working.read(received.body) == {"title": "Approval waiting for you: Budget 2027",
                                           "body": "Anna asks you to approve the budget.", "url": "/inbox",
                                           "icon": "/icons/icon-192.png", "event": TASK_ASSIGNED}
    listed = {row["endpoint"]: row for row in api.client.get("/api/push/subscriptions", headers=headers).json()}
    assert set(listed) == {working.endpoint, busy.endpoint}  # the gone one was deleted
    assert listed[working.endpoint]["lastError"] is None
    assert listed[busy.endpoint]["lastError"] == "the push service answered 429 Too Many Requests (retry after 30 s)"


def test_a_user_who_switched_push_off_for_the_event_gets_nothing(api, push_service):
    quiet_id, quiet = make_user("quentin")
    loud_id, loud = make_user("laura")
    quiet_phone, loud_phone = Browser.at(push_service, "quiet"), Browser.at(push_service, "loud")
    subscribe(api, quiet, quiet_phone)
    subscribe(api, loud, loud_phone)
    response = api.client.put("/api/notifications/settings", headers=quiet,
                              json={"settings": [{"event": TASK_ASSIGNED, "channel": "push", "enabled": False}]})
    assert response.status_code == 200, response.text

    report = push.notify_in_background([quiet_id, loud_id], TASK_ASSIGNED, "Task waiting", "Please check",
                                       "/inbox").result(timeout=30)
    assert report.sent == 1
    assert [p.token for p in push_service.wait_for(1)] == ["loud"]
    # Other events still reach the quiet user.
    push.notify_in_background([quiet_id], "run.failed", "Workflow failed", "boom", "/notifications").result(timeout=30)
    assert [p.token for p in push_service.wait_for(2)] == ["loud", "quiet"]
    assert quiet_phone.read(push_service.received[1].body)["title"] == "Workflow failed"


def test_subscriptions_are_the_users_own(api, push_service):
    _, alice = make_user("alice")
    _, bob = make_user("bob")
    alices = subscribe(api, alice, Browser.at(push_service))
    assert api.client.get("/api/push/subscriptions", headers=bob).json() == []
    assert api.client.delete(f"/api/push/subscriptions/{alices['id']}", headers=bob).status_code == 404
    assert api.client.delete(f"/api/push/subscriptions/{uuid.uuid4().hex}", headers=alice).status_code == 404
    assert [s["id"] for s in api.client.get("/api/push/subscriptions", headers=alice).json()] == [alices["id"]]
    assert api.client.delete(f"/api/push/subscriptions/{alices['id']}", headers=alice).status_code == 204
    assert api.client.get("/api/push/subscriptions", headers=alice).json() == []


def test_a_browser_subscribed_again_by_another_user_pushes_to_that_user_only(api, push_service):
    _, alice = make_user("alice2")
    bob_id, bob = make_user("bob2")
    shared = Browser.at(push_service, "shared-tablet")
    first = subscribe(api, alice, shared)
    second = subscribe(api, bob, shared)
    assert second["id"] == first["id"]
    assert api.client.get("/api/push/subscriptions", headers=alice).json() == []
    with session_scope() as session:
        assert session.exec(select(PushSubscription.user_id)).all() == [bob_id]


@pytest.mark.parametrize(("change", "field", "words"), [
    (lambda s: s.update(endpoint="http://push.example.com/x"), "endpoint", "https://"),
    (lambda s: s.update(endpoint="ftp://127.0.0.1/x"), "endpoint", "https://"),
    (lambda s: s.update(endpoint=""), "endpoint", "required"),
    (lambda s: s["keys"].update(p256dh="AAAA"), "keys.p256dh", "65-byte"),
    (lambda s: s["keys"].update(p256dh="BAAA" * 22), "keys.p256dh", "P-256"),
    (lambda s: s["keys"].update(auth="c2hvcnQ"), "keys.auth", "16 bytes"),
    (lambda s: s["keys"].update(auth="not base64!"), "keys.auth", "16 bytes"),
])
def test_a_bad_subscription_is_refused_naming_the_field(api, push_service, change, field, words):
    _, headers = make_user("vera")
    body = Browser.at(push_service).subscription()
    change(body)
    response = api.client.post("/api/push/subscriptions", json=body, headers=headers)
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert [e["field"] for e in errors] == [field] and words in errors[0]["message"], errors
    assert api.client.get("/api/push/subscriptions", headers=headers).json() == []


def test_a_subscription_without_keys_is_refused(api, push_service):
    _, headers = make_user("wanda")
    response = api.client.post("/api/push/subscriptions", json={"endpoint": push_service.endpoint("x")},
                               headers=headers)
    assert response.status_code == 422
    assert "keys" in json.dumps(response.json())


def test_the_key_is_generated_once_even_by_two_processes_at_once(app_config):
    barrier = threading.Barrier(2)
    keys: list[str] = []

    def start() -> None:
        with Session(get_engine(), expire_on_commit=False) as session:
            barrier.wait()
            keys.append(push.public_key(push.vapid_key(session)))
            session.commit()

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(keys) == 2 and keys[0] == keys[1]
    with session_scope() as session:
        stored = session.get(PlatformSecret, push.SECRET_NAME)
        assert stored.value.startswith("sealed:v1:")  # never in clear text
        assert push.public_key(push.vapid_key(session)) == keys[0]


@SQLITE
def test_a_configured_key_is_used_and_a_malformed_one_named(api, monkeypatch):
    private = ec.generate_private_key(ec.SECP256R1())
    raw = private.private_numbers().private_value.to_bytes(32, "big")
    monkeypatch.setenv("POWERON_VAPID_PRIVATE_KEY", push.b64url(raw))
    reset_settings_cache()
    point = private.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    assert api.client.get("/api/push/key", headers=api.auth).json()["publicKey"] == push.b64url(point)
    monkeypatch.setenv("POWERON_VAPID_PRIVATE_KEY", "not-a-key")
    reset_settings_cache()
    with session_scope() as session, pytest.raises(ValueError, match="POWERON_VAPID_PRIVATE_KEY is not a P-256"):
        push.vapid_key(session)


def test_users_without_a_subscribed_browser_are_pushed_nothing(app_config):
    user_id, _ = make_user("nora")
    pushed = push.notify_in_background([user_id], TASK_ASSIGNED, "t", "b", "/inbox")
    assert pushed.result(timeout=10) == push.PushReport()


def test_a_new_approval_is_pushed_to_its_assignees_browser(api, push_service):
    from backend.db.models import Mandate
    from backend.tenancy import grant_instance_roles, grant_mandate_roles

    user_id, headers = make_user(f"tara{uuid.uuid4().hex[:6]}")
    with session_scope() as session:
        instance = session.get(FeatureInstance, api.instance_id)
        user = session.get(User, user_id)
        grant_mandate_roles(session, user, session.get(Mandate, instance.mandate_id), [])
        grant_instance_roles(session, user, instance, ["graphicalEditor-user"])
    push_service.expected_key = api.client.get("/api/push/key", headers=headers).json()["publicKey"]
    phone = Browser.at(push_service)
    subscribe(api, headers, phone)
    ask = {"id": "ask", "type": "input.approval",
           "parameters": {"title": "Approve the offer", "message": "ACME, CHF 1'200", "assignee": {"user": user_id}}}
    graph = {"nodes": [START, ask], "edges": [{"source": "start", "target": "ask"}]}
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"push-{uuid.uuid4().hex[:6]}", "graph": graph},
                              headers=api.auth)
    run = api.client.post(f"{api.base()}/workflows/{created.json()['id']}/runs", json={"input": {}}, headers=api.auth)
    assert run.status_code == 201 and run.json()["status"] == "paused", run.text
    assert push.wait_idle()
    [received] = push_service.wait_for(1)
    shown = phone.read(received.body)
    with session_scope() as session:
        from backend.db.models import HumanTask

        task_id = session.exec(select(HumanTask.id).where(HumanTask.run_id == run.json()["id"])).one()
    assert (shown["title"], shown["body"], shown["url"]) == (
        "Approval waiting for you: Approve the offer", "ACME, CHF 1'200", f"/inbox?task={task_id}")
