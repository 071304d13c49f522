"""Web Push (issue 23): the installation's VAPID key, the users' browser subscriptions and sending.

- **The key.** POWERON_VAPID_PRIVATE_KEY when set; otherwise a P-256 key pair generated once per
  installation and kept sealed (backend/crypto.py) in ``platform_secret``. Two processes starting
  at once both try to insert it; the second one's insert fails on the primary key inside a
  savepoint and it reads the first one's key, so every process signs with the same key.
- **Subscriptions.** :class:`PushSubscriptions` is the door: a signed-in user adds, lists and
  removes their own browsers' subscriptions only (anybody else's is "not found"). An endpoint
  must be https (plain http only for the hosts in POWERON_PUSH_HTTP_HOSTS); the keys must be
  what a browser's PushManager gives (a P-256 point and a 16-byte secret).
- **Sending.** :func:`notify_in_background` hands a push to one background thread (a slow push
  service delays pushes, never a request or a run step). For each user who did not switch the
  event's push channel off (backend/notifications/preferences.py), every subscription gets the
  payload ``{title, body, url, icon, event}`` encrypted (aes128gcm) and signed (VAPID) by
  pywebpush. A push service answering 404 or 410 has forgotten the subscription: it is
  deleted. Any other failure is kept in ``last_error`` (never the keys, never in the log).

The service worker (assets/sw.js) shows the notification and opens ``url`` when it is clicked.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from email.utils import parseaddr
from urllib.parse import urlsplit

import requests
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid
from pywebpush import WebPushException, webpush
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from backend.config import get_settings
from backend.crypto import seal, unseal
from backend.db import session_scope
from backend.db.models import PlatformSecret, PushSubscription
from backend.errors import FieldError, InvalidInput, NotFound
from backend.notifications import preferences
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, guarded

log = logging.getLogger(__name__)

SECRET_NAME = "webpush.vapid"
ENDPOINT_MAX = 2000
TITLE_MAX = 120
BODY_MAX = 1000
URL_MAX = 500
ERROR_MAX = 500
USER_AGENT_MAX = 300
TTL_SECONDS = 24 * 60 * 60  # a push a phone does not fetch within a day is dropped by the push service
ICON = "/icons/icon-192.png"
GONE = "gone"


def b64url(data: bytes) -> str:
    """`data` as unpadded base64url (the form browsers and push services use)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    """The bytes of unpadded (or padded) base64url `text`; ValueError when it is not base64url."""
    cleaned = text.strip()
    return base64.urlsafe_b64decode(cleaned + "=" * (-len(cleaned) % 4))


# --- the installation's VAPID key ---------------------------------------------------------------


def _parse_key(text: str, name: str) -> Vapid:
    """A Vapid from base64url raw/DER or PEM `text`; ValueError naming `name` (never the key)."""
    try:
        if "-----BEGIN" in text:
            return Vapid.from_pem(text.strip().encode("ascii"))
        return Vapid.from_string(text.strip())
    except Exception:  # noqa: BLE001 - any parse failure is the same mistake for the user
        raise ValueError(f"{name} is not a P-256 private key (expected base64url of the raw 32 bytes, "
                         "or its DER or PEM form)") from None


def _new_private_key() -> str:
    """A fresh P-256 private key as base64url of its raw 32 bytes."""
    key = ec.generate_private_key(ec.SECP256R1())
    return b64url(key.private_numbers().private_value.to_bytes(32, "big"))


def vapid_key(session: Session) -> Vapid:
    """The installation's VAPID key: POWERON_VAPID_PRIVATE_KEY, else the stored one (created once).

    Raises:
        ValueError: POWERON_VAPID_PRIVATE_KEY is malformed, or the stored key was sealed with
            another POWERON_SECRET_KEY.
    """
    configured = get_settings().vapid_private_key
    if configured:
        return _parse_key(configured, "POWERON_VAPID_PRIVATE_KEY")
    row = session.get(PlatformSecret, SECRET_NAME)
    if row is None:
        try:
            with session.begin_nested():
                session.add(PlatformSecret(name=SECRET_NAME, value=seal(_new_private_key())))
        except IntegrityError:  # another process stored its key first: use that one
            pass
        row = session.get(PlatformSecret, SECRET_NAME, populate_existing=True)
    return _parse_key(unseal(row.value), "the stored Web Push key")


def public_key(vapid: Vapid) -> str:
    """The application server key browsers subscribe with: base64url of the uncompressed point."""
    from cryptography.hazmat.primitives import serialization

    raw = vapid.public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return b64url(raw)


def vapid_subject() -> str:
    """Who runs this server, as push services want it (``mailto:`` or ``https://host``)."""
    settings = get_settings()
    if settings.vapid_subject:
        return settings.vapid_subject
    address = parseaddr(settings.smtp_from or "")[1]
    if "@" in address:
        return f"mailto:{address}"
    ui = urlsplit(settings.ui_url)
    if ui.scheme == "https" and ui.hostname and ui.port is None:
        return f"https://{ui.hostname}"
    return "mailto:poweron@localhost"


# --- subscriptions ------------------------------------------------------------------------------


def endpoint_hash(endpoint: str) -> str:
    """The unique key of a subscription's endpoint (SHA-256, hex)."""
    return hashlib.sha256(endpoint.encode("utf-8")).hexdigest()


def _endpoint_errors(endpoint: object) -> list[FieldError]:
    if not isinstance(endpoint, str) or not endpoint.strip():
        return [FieldError("endpoint", "is required: the push service URL of the browser's subscription")]
    if len(endpoint) > ENDPOINT_MAX:
        return [FieldError("endpoint", f"must be at most {ENDPOINT_MAX} characters")]
    try:
        parts = urlsplit(endpoint)
        host = (parts.hostname or "").lower()
    except ValueError:
        return [FieldError("endpoint", "must be a URL like https://push.example.com/…")]
    if parts.scheme == "https" and host:
        return []
    allowed = get_settings().push_http_hosts
    if parts.scheme == "http" and host and host in allowed:
        return []
    return [FieldError("endpoint", "must be an https:// URL of a push service"
                       + (f" (plain http only for {', '.join(allowed)})" if allowed else ""))]


def _key_errors(p256dh: object, auth: object) -> list[FieldError]:
    errors = []
    try:
        point = unb64url(p256dh) if isinstance(p256dh, str) and p256dh else b""
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
        if len(point) != 65:
            raise ValueError
    except ValueError:
        errors.append(FieldError("keys.p256dh", "must be the browser's P-256 public key: base64url of the "
                                                "65-byte uncompressed point (PushSubscription.getKey('p256dh'))"))
    try:
        secret = unb64url(auth) if isinstance(auth, str) and auth else b""
        if len(secret) != 16:
            raise ValueError
    except ValueError:
        errors.append(FieldError("keys.auth", "must be the subscription's authentication secret: base64url of "
                                              "16 bytes (PushSubscription.getKey('auth'))"))
    return errors


def subscribe(session: Session, user_id: str, endpoint: str, p256dh: str, auth: str,
              user_agent: str = "") -> PushSubscription:
    """Keep (or renew) a browser's subscription for `user_id`; InvalidInput naming the bad field.

    An endpoint is one browser profile: subscribing it again replaces its keys, and a browser
    that another user had subscribed before now pushes to `user_id` only.
    """
    errors = _endpoint_errors(endpoint) + _key_errors(p256dh, auth)
    if errors:
        raise InvalidInput(errors)
    digest = endpoint_hash(endpoint)
    row = session.exec(select(PushSubscription).where(PushSubscription.endpoint_hash == digest)).first()
    if row is None:
        row = PushSubscription(endpoint=endpoint, endpoint_hash=digest, user_id=user_id, p256dh="", auth="")
    row.user_id, row.p256dh, row.auth = user_id, p256dh.strip(), auth.strip()
    row.user_agent = (user_agent or "")[:USER_AGENT_MAX]
    row.last_error = None
    session.add(row)
    session.flush()
    return row


def subscriptions_of(session: Session, user_id: str) -> list[PushSubscription]:
    """The user's subscriptions, oldest first."""
    return list(session.exec(select(PushSubscription).where(PushSubscription.user_id == user_id)
                             .order_by(PushSubscription.sys_created_at, PushSubscription.id)).all())


def unsubscribe(session: Session, user_id: str, subscription_id: str) -> None:
    """Delete one of the user's subscriptions; NotFound for a missing one and for anybody else's."""
    row = session.get(PushSubscription, subscription_id)
    if row is None or row.user_id != user_id:
        raise NotFound(f"push subscription {subscription_id} not found")
    session.delete(row)
    session.flush()


class PushSubscriptions(Door):
    """The door to the signed-in user's own push subscriptions (any signed-in user)."""

    def __init__(self, access: AccessContext):
        self.access = access

    @guarded("authenticated")
    def public_key(self) -> str:
        """The application server key (base64url) a browser subscribes with."""
        return public_key(vapid_key(self.access.session))

    @guarded("authenticated")
    def list(self) -> list[PushSubscription]:
        """The user's subscriptions (one per browser that enabled push)."""
        return subscriptions_of(self.access.session, self.access.user.id)

    @guarded("authenticated")
    def subscribe(self, endpoint: str, p256dh: str, auth: str, user_agent: str = "") -> PushSubscription:
        """Keep the browser's subscription for the user; InvalidInput naming the bad field."""
        return subscribe(self.access.session, self.access.user.id, endpoint, p256dh, auth, user_agent)

    @guarded("authenticated")
    def remove(self, subscription_id: str) -> None:
        """Delete one of the user's subscriptions; NotFound for anybody else's."""
        unsubscribe(self.access.session, self.access.user.id, subscription_id)


# --- sending ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PushReport:
    """What one delivery did: pushes accepted, subscriptions deleted as gone, failures kept."""

    sent: int = 0
    removed: int = 0
    failed: int = 0


def _clip(text: str, limit: int, one_line: bool = False) -> str:
    text = " ".join((text or "").split()) if one_line else (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def payload_of(title: str, body: str, url: str, event: str | None) -> str:
    """The JSON the service worker receives (kept well below the 4 KB a push may carry)."""
    return json.dumps({"title": _clip(title, TITLE_MAX, one_line=True), "body": _clip(body, BODY_MAX),
                       "url": (url or "/")[:URL_MAX], "icon": ICON, "event": event or ""})


def _targets(session: Session, user_ids: Iterable[str], event: str | None) -> list[PushSubscription]:
    wanted = [uid for uid in dict.fromkeys(user_ids)
              if event is None or preferences.wants(session, uid, event, preferences.PUSH)]
    if not wanted:
        return []
    return list(session.exec(select(PushSubscription).where(PushSubscription.user_id.in_(wanted))).all())


def _failure(exc: Exception) -> str:
    """What went wrong with one push, for `last_error` (the status and reason, never the keys)."""
    if isinstance(exc, WebPushException) and exc.response is not None:
        response = exc.response
        status = getattr(response, "status_code", None) or getattr(response, "status", None)
        if status in (404, 410):
            return GONE
        reason = getattr(response, "reason", "") or ""
        retry = response.headers.get("Retry-After") if getattr(response, "headers", None) else None
        text = f"the push service answered {status} {reason}".strip()
        return f"{text} (retry after {retry} s)" if retry else text
    if isinstance(exc, requests.RequestException):
        return f"the push service could not be reached ({type(exc).__name__})"
    return f"the push could not be sent ({type(exc).__name__})"


@dataclass(frozen=True)
class _Target:
    """One subscription to push to, read before sending (no session is held while pushing)."""

    id: str
    endpoint: str
    p256dh: str
    auth: str


def _send_one(vapid: Vapid, target: _Target, payload: str) -> str | None:
    """Push `payload` to one subscription: None when accepted, else GONE or the failure."""
    try:
        webpush({"endpoint": target.endpoint, "keys": {"p256dh": target.p256dh, "auth": target.auth}},
                data=payload, vapid_private_key=vapid,
                vapid_claims={"sub": vapid_subject()},  # a fresh dict each time: pywebpush adds this endpoint's aud
                ttl=TTL_SECONDS, timeout=get_settings().push_timeout_seconds)
        return None
    except Exception as exc:  # noqa: BLE001 - one subscription's failure must not stop the others
        return _failure(exc)


def _record(outcomes: dict[str, str | None]) -> PushReport:
    """Keep what the pushes did: clear or set `last_error`, delete gone subscriptions."""
    sent = removed = failed = 0
    with session_scope() as session:
        for subscription_id, outcome in outcomes.items():
            row = session.get(PushSubscription, subscription_id)
            if row is None:  # removed by its user meanwhile
                continue
            host = urlsplit(row.endpoint).hostname
            if outcome is None:
                sent += 1
                row.last_error = None
                session.add(row)
            elif outcome == GONE:
                removed += 1
                log.info("push subscription %s at %s is gone: deleted", row.id, host)
                session.delete(row)
            else:
                failed += 1
                log.warning("push to subscription %s at %s failed: %s", row.id, host, outcome)
                row.last_error = outcome[:ERROR_MAX]
                session.add(row)
    return PushReport(sent, removed, failed)


def send_push(user_ids: Sequence[str], title: str, body: str, url: str, event: str | None = None) -> PushReport:
    """Push a notification to every subscription of `user_ids`, now, on the calling thread.

    With `event`, users who switched that event's push channel off are left out. Gone
    subscriptions (404/410) are deleted, other failures kept in `last_error`. Requests and run
    steps call :func:`notify_in_background` instead.
    """
    with session_scope() as session:
        targets = [_Target(row.id, row.endpoint, row.p256dh, row.auth) for row in _targets(session, user_ids, event)]
        if not targets:
            return PushReport()
        vapid = vapid_key(session)
    payload = payload_of(title, body, url, event)
    return _record({target.id: _send_one(vapid, target, payload) for target in targets})


_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="poweron-push")
_pending: set[Future] = set()
_pending_lock = threading.Lock()


def _deliver(user_ids: list[str], event: str | None, title: str, body: str, url: str) -> PushReport:
    try:
        return send_push(user_ids, title, body, url, event)
    except Exception:  # noqa: BLE001 - a failing push is logged, the thread goes on
        log.exception("pushing %s to %d user(s) failed", event or "a notification", len(user_ids))
        return PushReport()


def notify_in_background(user_ids: Sequence[str], event: str | None, title: str, body: str,
                         url: str) -> Future:
    """Push to `user_ids` on the push thread (never blocks the caller); the Future of its PushReport.

    Args:
        user_ids: who is told; each one's subscriptions get the push.
        event: one of preferences.EVENTS: users who switched its push channel off are left out
            (None: nobody is left out).
        title, body: what the notification shows (clipped to 120 and 1,000 characters).
        url: where a click on it leads, a path of the app such as ``/inbox``.
    """
    future = _executor.submit(_deliver, list(user_ids), event, title, body, url)
    with _pending_lock:
        _pending.add(future)
    future.add_done_callback(lambda done: _forget(done))
    return future


def _forget(future: Future) -> None:
    with _pending_lock:
        _pending.discard(future)


def wait_idle(timeout: float = 10.0) -> bool:
    """Wait until every push handed over so far was sent (tests); whether it was in time."""
    with _pending_lock:
        pending = list(_pending)
    _done, not_done = wait_futures(pending, timeout=timeout)
    return not not_done
