"""trigger.webhook: ``POST /api/hooks/{workflowId}/{path}`` signed as Standard Webhooks (DESIGN §6).

Order of checks (each answer says no more than the one before it):

1. the workflow is active, has a published version and that version has a trigger.webhook with
   this path, else 404 (unknown, inactive, unpublished and "no such path" look the same);
2. the path exists but not for this method: 405 with Allow;
3. the signature: verified by the `standardwebhooks` package (the reference implementation):
   headers webhook-id, webhook-timestamp (±5 minutes) and webhook-signature
   (``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``, several space-separated during
   secret rotation, compared with hmac.compare_digest), keyed by the trigger's secret
   ``whsec_<base64>`` decoded. Missing, malformed, stale or wrong → 401 and nothing written.
   A trigger without a secret accepts no call (401): an unsigned webhook never starts a run;
4. back-pressure (launch.check_capacity) → 429 with Retry-After (a webhook-id received before
   still gets its 202 {runId});
5. the run and the delivery row are written in ONE transaction: a repeated webhook-id fails on
   the unique constraint (workflow_id, webhook_id) (of two concurrent twins, the second waits for
   the first and then fails), rolls back (its run with it) and answers the first call's runId,
   starting nothing. Otherwise the run is created, everything committed, the run handed
   to the run worker, and the answer is 202 {runId}.

The run input keeps the call's headers without the sender's credentials (`is_credential_header`:
Authorization, Cookie, API keys, tokens, signatures … are dropped, not masked). The secret is never
logged nor put into a message; the body size limit (POWERON_WEBHOOK_MAX_BYTES)
is enforced by the route while reading the body.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from backend import json_limits
from backend.db import session_scope
from backend.db.engine import write_gate
from backend.db.models import WebhookDelivery
from backend.errors import FieldError, Forbidden, InvalidInput, NotFound
from backend.triggers import launch
from backend.triggers.secrets import secret_of

log = logging.getLogger(__name__)

NODE_TYPE = "trigger.webhook"
SIGNATURE_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")
# Credential headers (see `is_credential_header`): dropped before the headers reach the run input.
CREDENTIAL_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "api-key", "apikey", "webhook-signature",
})
CREDENTIAL_WORDS = frozenset({
    "auth", "authorization", "apikey", "credential", "credentials", "cookie", "hmac", "key", "passwd",
    "password", "secret", "session", "sig", "signature", "token",
})
CREDENTIAL_SUFFIXES = ("apikey", "password", "secret", "signature", "token")
WEBHOOK_ID_MAX = 200  # WebhookDelivery.webhook_id


class Unauthorized(Exception):
    """The call is not signed correctly for this trigger (401)."""


class MethodNotAllowed(Exception):
    """The path exists for other methods only (405)."""

    def __init__(self, allowed: list[str]):
        self.allowed = allowed
        super().__init__(f"this webhook accepts {', '.join(allowed)}")


@dataclass(frozen=True)
class Delivery:
    """The answer to a webhook call: its run, and whether the webhook-id had been seen before."""

    run_id: str
    repeated: bool


def _clean_path(path: Any) -> str:
    return str(path or "").strip().strip("/")


def _method(node: dict[str, Any]) -> str:
    return str((node.get("parameters") or {}).get("method") or "POST").upper()


def find_trigger(session: Session, workflow_id: str, path: str, method: str) -> launch.Target:
    """The trigger.webhook node of the published version serving `method` on `path`."""
    workflow, version, nodes = launch.published_triggers(session, workflow_id, NODE_TYPE)
    on_path = [n for n in nodes if _clean_path((n.get("parameters") or {}).get("path")) == _clean_path(path)]
    if not on_path:
        raise NotFound(f"workflow {workflow_id} not found")
    matching = [n for n in on_path if _method(n) == method.upper()]
    if not matching:
        raise MethodNotAllowed(sorted({_method(n) for n in on_path}))
    return launch.Target(workflow, version, matching[0])


def verify(target: launch.Target, body: bytes, headers: Mapping[str, str]) -> str:
    """Check the Standard Webhooks signature of the call; returns its webhook-id.

    Raises:
        Unauthorized: no secret configured, missing or malformed headers, a timestamp outside
            ±5 minutes, or no signature that matches.
    """
    secret = secret_of(target.parameters)
    where = f"trigger '{target.node.get('id')}' of workflow {target.workflow.id}"
    if not secret:
        log.warning("webhook call refused: %s has no secret, so no call can be verified", where)
        raise Unauthorized("this webhook has no secret configured, so no call can be verified")
    try:
        hook = Webhook(secret)
    except Exception:  # noqa: BLE001 - bad base64 or empty: never show the value
        log.error("webhook call refused: the secret of %s is not a valid whsec_<base64> key", where)
        raise Unauthorized("this webhook's secret is not usable; no call can be verified") from None
    signed = {name: headers[name] for name in SIGNATURE_HEADERS if headers.get(name)}
    try:
        hook.verify(body, signed, json_parse=False)
    except WebhookVerificationError as exc:
        raise Unauthorized(f"webhook signature not accepted: {exc}") from None
    except UnicodeDecodeError:
        raise Unauthorized("webhook signature not accepted: the body is not UTF-8 text") from None
    except ValueError:  # a signature without "v1,", bad base64 (binascii.Error is a ValueError)
        raise Unauthorized("webhook signature not accepted: malformed webhook-signature header") from None
    webhook_id = signed["webhook-id"]
    if len(webhook_id) > WEBHOOK_ID_MAX:
        raise InvalidInput([FieldError("webhook-id", f"must have at most {WEBHOOK_ID_MAX} characters")])
    return webhook_id


def parse_body(body: bytes) -> Any:
    """JSON when the body is JSON, else its text (None when empty).

    Parsed after the signature check; JSON beyond backend/json_limits.py (deeper than 64 levels,
    a lone surrogate, NaN) is refused with InvalidInput (422) naming ``body.<path>``, so nothing
    stored can make a later answer fail.
    """
    if not body:
        return None
    try:
        return json_limits.loads(body, "body")
    except ValueError:
        return body.decode("utf-8", errors="replace")


def is_credential_header(name: str) -> bool:
    """True for a header that carries a credential of the sender (or of something in between).

    The rule, case-insensitive: the names in CREDENTIAL_HEADERS (Authorization,
    Proxy-Authorization, Cookie, Set-Cookie, Api-Key, and webhook-signature: verified before the
    run starts, so no workflow needs it), and every name with a word (split at "-", "_" and
    ".") in CREDENTIAL_WORDS or ending in one of CREDENTIAL_SUFFIXES: X-Api-Key, X-Github-Token,
    X-Hub-Signature-256, X-Gitlab-Token, X-Shopify-Hmac-Sha256, X-Amz-Security-Token,
    X-Session-Id, X-Accesstoken and the like. It errs on the side of dropping: an X-Idempotency-Key
    is dropped too. webhook-id and webhook-timestamp are no secrets and stay.

    Args:
        name: the header name as received.

    Returns:
        Whether the header must not be stored.
    """
    name = name.strip().lower()
    if name in CREDENTIAL_HEADERS:
        return True
    words = name.replace("_", "-").replace(".", "-").split("-")
    return any(word in CREDENTIAL_WORDS or word.endswith(CREDENTIAL_SUFFIXES) for word in words)


def stored_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers as the run keeps them: names lower-cased, credential headers dropped.

    Runs, their step logs and every viewer of them (anyone with read rights on runs) see only
    these; the signature is checked on the headers as received, before this.
    """
    return {name.lower(): value for name, value in headers.items() if not is_credential_header(name)}


def run_input(body: bytes, headers: Mapping[str, str], query: Mapping[str, str]) -> dict[str, Any]:
    """The run input (the trigger's output): {body, headers (see `stored_headers`), query}."""
    return {"body": parse_body(body), "headers": stored_headers(headers), "query": dict(query)}


def _delivered(session: Session, workflow_id: str, webhook_id: str) -> WebhookDelivery | None:
    return session.exec(select(WebhookDelivery).where(WebhookDelivery.workflow_id == workflow_id,
                                                      WebhookDelivery.webhook_id == webhook_id)).first()


def receive(workflow_id: str, path: str, method: str, body: bytes, headers: Mapping[str, str],
            query: Mapping[str, str]) -> Delivery:
    """Handle one webhook call (see the module doc); the run is committed and submitted."""
    headers = {k.lower(): v for k, v in headers.items()}
    with launch.accepting, session_scope() as session:
        target = find_trigger(session, workflow_id, path, method)
        webhook_id = verify(target, body, headers)
        try:
            launch.check_capacity()
        except launch.Overloaded:
            seen = _delivered(session, target.workflow.id, webhook_id)  # a repeat still gets its answer
            if seen is None:
                raise
            return Delivery(seen.run_id, repeated=True)
        with write_gate():
            try:
                run = launch.start(session, target, run_input(body, headers, query), "webhook")
                # The unique key (workflow_id, webhook_id) finds a repeated id: the insert fails for a
                # repeat, and of two concurrent twins the second waits for the first and then fails.
                session.add(WebhookDelivery(workflow_id=target.workflow.id, webhook_id=webhook_id, run_id=run.id))
                session.commit()
            except (IntegrityError, Forbidden):
                # A repeat is answered as before, also when its creator may no longer start runs.
                session.rollback()
                seen = _delivered(session, target.workflow.id, webhook_id)
                if seen is None:
                    raise
                return Delivery(seen.run_id, repeated=True)
    launch.submit([run.id])
    return Delivery(run.id, repeated=False)
