"""trigger.webhook: ``POST /api/hooks/{workflowId}/{path}`` signed as Standard Webhooks (DESIGN §6).

Order of checks (each answer names what to fix, never the secret):

1. the workflow exists, else a plain 404 ("workflow <id> not found"); it has a published version,
   else 404 "… has no published version: publish it in the editor"; that version has a
   trigger.webhook on this path, else 404 "… has no webhook on path '<path>' in its published
   version";
2. the path exists but not for this method: 405 with Allow;
3. the workflow is switched on (active), else 410 "… is switched off (inactive): switch it on in
   the editor" — the address is right but takes no calls until then;
4. the signature: verified by the `standardwebhooks` package (the reference implementation):
   headers webhook-id, webhook-timestamp (±5 minutes) and webhook-signature
   (``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``, several space-separated during
   secret rotation, compared with hmac.compare_digest), keyed by the trigger's secret
   ``whsec_<base64>`` decoded. Missing, malformed, stale or wrong → 401 and nothing written.
   A trigger without a secret accepts no call (401): an unsigned webhook never starts a run;
5. back-pressure (launch.check_capacity) → 429 with Retry-After (a webhook-id received before
   still gets its 202 {runId});
6. the run and the delivery row are written in ONE transaction: a repeated webhook-id fails on
   the unique constraint (workflow_id, webhook_id) (of two concurrent twins, the second waits for
   the first and then fails), rolls back (its run with it) and answers the first call's runId,
   starting nothing. Otherwise the run is created, everything committed, the run handed
   to the run worker, and the answer is 202 {runId}.

The happy path costs one query to find the trigger (active and published, joined); only a call
that is refused there asks the database why.

Call log, for the editor's webhook help: an accepted call is its `webhook_delivery` row (written
anyway, with the run; it carries path and method), so the accepted path pays nothing more. A call
that starts no run — refused (401/403/404/405/410/413/422/429) or a repeated webhook-id — gets a
`webhook_call` row with its answer in a short transaction of its own afterwards, at most
REFUSALS_LOGGED per workflow per REFUSAL_WINDOW_SECONDS and process (anyone can send those), and
each workflow keeps its newest WEBHOOK_CALLS_KEPT of them (older ones are deleted with every
PRUNE_EVERY-th one logged). Calls to unknown workflow ids record nothing.

The run input keeps the call's headers without the sender's credentials (`is_credential_header`:
Authorization, Cookie, API keys, tokens, signatures … are dropped, not masked). The secret is never
logged nor put into a message; the body size limit (POWERON_WEBHOOK_MAX_BYTES)
is enforced by the route while reading the body.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from backend import json_limits
from backend.db import session_scope
from backend.db.engine import write_gate
from backend.db.models import WebhookCall, WebhookDelivery, Workflow, WorkflowVersion
from backend.errors import FieldError, Forbidden, InvalidInput, NotFound
from backend.statemachines import workflow_version as version_lifecycle
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
WEBHOOK_CALLS_KEPT = 20  # newest webhook_call rows kept per workflow
# The prune runs with every PRUNE_EVERY-th call a process logs for a workflow (an insert is ~0.4 ms,
# the prune ~0.6 ms more on SQLite, both inside the write gate): a workflow holds at most
# WEBHOOK_CALLS_KEPT + PRUNE_EVERY - 1 rows per process logging its calls; readers take the newest.
PRUNE_EVERY = 8
_calls_added: dict[str, int] = {}
# Refusals are written by calls nobody signed: a flood of them must not become a flood of writes.
# Per workflow and process at most REFUSALS_LOGGED refusals are recorded per REFUSAL_WINDOW_SECONDS
# (the first ones of a burst; the caller's answer is the same either way).
REFUSALS_LOGGED, REFUSAL_WINDOW_SECONDS = 3 * WEBHOOK_CALLS_KEPT, 60.0
_refusals_logged: dict[str, deque[float]] = {}
PATH_MAX, METHOD_MAX, MESSAGE_MAX = 200, 8, 500  # WebhookCall columns
SHOWN_PATH_MAX = 100  # of a caller's path repeated in a message
ACCEPTED = "accepted: run started"  # how the help shows an accepted call (a WebhookDelivery row)
REPEATED = "repeated webhook-id: answered with the run it started before"


class Unauthorized(Exception):
    """The call is not signed correctly for this trigger (401)."""


class Gone(Exception):
    """The workflow serves this webhook but is switched off (inactive): 410."""


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


def clean_path(path: Any) -> str:
    return str(path or "").strip().strip("/")


def method_of(node: dict[str, Any]) -> str:
    return str((node.get("parameters") or {}).get("method") or "POST").upper()


def find_trigger(session: Session, workflow_id: str, path: str, method: str) -> launch.Target:
    """The trigger.webhook node of the published version serving `method` on `path`.

    Raises:
        NotFound: unknown workflow (plain), or the reason: no published version, no webhook on `path`.
        MethodNotAllowed: `path` is served for other methods only.
        Gone: all is in place but the workflow is switched off.
    """
    try:
        workflow, version, nodes = launch.published_triggers(session, workflow_id, NODE_TYPE)
    except NotFound:
        raise _why_not_served(session, workflow_id, path, method) from None
    return launch.Target(workflow, version, serving_node(nodes, workflow_id, path, method))


def serving_node(nodes: list[dict[str, Any]], workflow_id: str, path: str, method: str) -> dict[str, Any]:
    """The first of `nodes` serving `method` on `path` (NotFound or MethodNotAllowed saying why not)."""
    on_path = [n for n in nodes if clean_path((n.get("parameters") or {}).get("path")) == clean_path(path)]
    if not on_path:
        shown = clean_path(path)[:SHOWN_PATH_MAX]
        raise NotFound(f"workflow {workflow_id} has no webhook on path '{shown}' in its published version")
    matching = [n for n in on_path if method_of(n) == method.upper()]
    if not matching:
        raise MethodNotAllowed(sorted({method_of(n) for n in on_path}))
    return matching[0]


def _why_not_served(session: Session, workflow_id: str, path: str, method: str) -> Exception:
    """Why no active published version serves the call: the error to answer with (see the module doc)."""
    workflow = session.get(Workflow, workflow_id) if workflow_id else None
    if workflow is None:
        return NotFound(f"workflow {workflow_id} not found")
    version = session.exec(select(WorkflowVersion).where(WorkflowVersion.workflow_id == workflow.id,
                                                         WorkflowVersion.status == version_lifecycle.PUBLISHED)
                           ).first()
    if version is None:
        return NotFound(f"workflow {workflow_id} has no published version: publish it in the editor")
    try:
        serving_node(launch.trigger_nodes(version, NODE_TYPE), workflow_id, path, method)
    except (NotFound, MethodNotAllowed) as exc:
        return exc
    return Gone(f"workflow {workflow_id} is switched off (inactive): switch it on in the editor")


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


def delivered(session: Session, workflow_id: str, webhook_id: str) -> WebhookDelivery | None:
    """The accepted call of a workflow with this delivery id (webhook-id), if any."""
    return session.exec(select(WebhookDelivery).where(WebhookDelivery.workflow_id == workflow_id,
                                                      WebhookDelivery.webhook_id == webhook_id)).first()


# --- the call log ------------------------------------------------------------------------------


def _add_call(session: Session, workflow_id: str, path: str, method: str, status: int, message: str,
              run_id: str | None = None) -> None:
    """Add one webhook_call row; every PRUNE_EVERY-th row this process adds for the workflow also
    drops the workflow's rows beyond the newest WEBHOOK_CALLS_KEPT (in the same transaction)."""
    session.add(WebhookCall(workflow_id=workflow_id, path=clean_path(path)[:PATH_MAX],
                            method=method.upper()[:METHOD_MAX], status_code=status, message=message[:MESSAGE_MAX],
                            run_id=run_id))
    added = _calls_added.get(workflow_id, 0) + 1  # a lost increment of two threads only delays a prune
    _calls_added[workflow_id] = added
    if added % PRUNE_EVERY == 0:
        session.flush()
        newest = (select(WebhookCall.id).where(WebhookCall.workflow_id == workflow_id)
                  .order_by(WebhookCall.received_at.desc(), WebhookCall.id.desc()).limit(WEBHOOK_CALLS_KEPT))
        session.execute(delete(WebhookCall).where(WebhookCall.workflow_id == workflow_id,
                                                  WebhookCall.id.not_in(newest))
                        .execution_options(synchronize_session=False))


def record_refusal(workflow_id: str, path: str, method: str, status: int, message: str,
                   run_id: str | None = None) -> None:
    """Log a call of a workflow that exists that started no run — refused, or a repeated webhook-id
    answered with its earlier run (`run_id`) — in its own short transaction; nothing for unknown ids.

    A failure to record is logged and never changes the answer the caller gets. At most
    REFUSALS_LOGGED such calls per workflow are recorded per REFUSAL_WINDOW_SECONDS in this process
    (anyone can send them: unsigned, or replaying a signed message).
    """
    now = time.monotonic()
    recent = _refusals_logged.setdefault(workflow_id, deque(maxlen=REFUSALS_LOGGED))
    if len(recent) == REFUSALS_LOGGED and now - recent[0] < REFUSAL_WINDOW_SECONDS:
        return
    recent.append(now)
    try:
        with write_gate(), session_scope() as session:
            if workflow_id and session.get(Workflow, workflow_id) is not None:
                _add_call(session, workflow_id, path, method, status, message, run_id)
    except Exception:  # noqa: BLE001 - e.g. the workflow was deleted meanwhile
        log.warning("could not record a refused webhook call of workflow %s", workflow_id, exc_info=True)


def refusal_status(exc: Exception) -> int | None:
    """The HTTP status a webhook call gets for `exc` (None: not a refusal of this module's kinds)."""
    kinds: tuple[tuple[type[Exception], int], ...] = (
        (Unauthorized, 401), (Forbidden, 403), (NotFound, 404), (MethodNotAllowed, 405), (Gone, 410),
        (InvalidInput, 422), (launch.Overloaded, 429))
    return next((status for kind, status in kinds if isinstance(exc, kind)), None)


# --- receiving ---------------------------------------------------------------------------------


def receive(workflow_id: str, path: str, method: str, body: bytes, headers: Mapping[str, str],
            query: Mapping[str, str]) -> Delivery:
    """Handle one webhook call (see the module doc); the run is committed and submitted.

    Every answer to a workflow that exists is logged: an acceptance by its delivery row (committed
    with the run), a refusal or a repeat in `webhook_call` afterwards (record_refusal).
    """
    try:
        delivery = _receive(workflow_id, path, method, body, headers, query)
    except Exception as exc:
        status = refusal_status(exc)
        if status is not None:
            record_refusal(workflow_id, path, method, status, str(exc))
        raise
    if delivery.repeated:
        record_refusal(workflow_id, path, method, 202, REPEATED, delivery.run_id)
    return delivery


def _receive(workflow_id: str, path: str, method: str, body: bytes, headers: Mapping[str, str],
             query: Mapping[str, str]) -> Delivery:
    headers = {k.lower(): v for k, v in headers.items()}
    with launch.accepting, session_scope() as session:
        target = find_trigger(session, workflow_id, path, method)
        webhook_id = verify(target, body, headers)
        try:
            launch.check_capacity()
        except launch.Overloaded:
            seen = delivered(session, target.workflow.id, webhook_id)  # a repeat still gets its answer
            if seen is None:
                raise
            return Delivery(seen.run_id, repeated=True)
        with write_gate():
            try:
                run = launch.start(session, target, run_input(body, headers, query), "webhook")
                # The unique key (workflow_id, webhook_id) finds a repeated id: the insert fails for a
                # repeat, and of two concurrent twins the second waits for the first and then fails.
                # The delivery row is the accepted call's log entry too (path, method, time, run).
                session.add(WebhookDelivery(workflow_id=target.workflow.id, webhook_id=webhook_id, run_id=run.id,
                                            path=clean_path(path)[:PATH_MAX], method=method.upper()[:METHOD_MAX]))
                session.commit()
            except (IntegrityError, Forbidden):
                # A repeat is answered as before, also when its creator may no longer start runs.
                session.rollback()
                seen = delivered(session, target.workflow.id, webhook_id)
                if seen is None:
                    raise
                return Delivery(seen.run_id, repeated=True)
    return Delivery(run.id, repeated=False)
