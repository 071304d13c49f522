"""What the editor tells a person about one trigger.webhook node: its address, whether calls to it
are accepted now (and why not), a curl example signed like a real sender signs, and the last calls.

Read through the Graphical Editor's door (`GraphicalEditorInterface.webhook_help`), which decides
whether the caller may see a signature made with the secret (those who may change the workflow) and
which runs they may follow. Framework-free; nothing here writes.

The example is signed with the secret the server checks calls against: the published version's
webhook on that path and method, else (nothing published there yet) the node's own secret, and said
which. It uses the `standardwebhooks` library (as webhooks.verify does) and the current time, so it
is valid for TOLERANCE_SECONDS.
"""

from __future__ import annotations

import json
import shlex
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session, select
from standardwebhooks.webhooks import Webhook

from backend.config import get_settings
from backend.db.models import WebhookCall, WebhookDelivery, Workflow, WorkflowVersion, utcnow
from backend.errors import NotFound
from backend.statemachines import workflow_version as version_lifecycle
from backend.triggers import launch, webhooks
from backend.triggers.secrets import secret_of, usable

TOLERANCE_SECONDS = 300  # Standard Webhooks: webhook-timestamp accepted within ±5 minutes
DEFAULT_BODY: dict[str, Any] = {"hello": "world"}
BODILESS = ("GET", "DELETE")
SIGNATURE_PLACEHOLDER = "v1,<signature: only people who may change this workflow see one>"

# Whether a call to the node's address is accepted now, and what the page says about it.
LIVE, NO_PATH, UNPUBLISHED, NOT_PUBLISHED_HERE, INACTIVE, NO_SECRET = (
    "live", "noPath", "unpublished", "notPublishedHere", "inactive", "noSecret")


@dataclass(frozen=True)
class CallView:
    """One logged call: its answer and, when the reader may open it, the run it started."""

    status_code: int
    received_at: datetime
    method: str
    path: str
    message: str
    run_id: str | None


@dataclass(frozen=True)
class WebhookHelp:
    """Everything the webhook help of one node shows.

    Attributes:
        url: The full address, ``{POWERON_API_URL}/api/hooks/{workflowId}/{path}``.
        method: The HTTP method the node accepts.
        state: LIVE, NO_PATH, UNPUBLISHED, NOT_PUBLISHED_HERE, INACTIVE or NO_SECRET.
        state_text: One sentence for the page.
        draft_differs: The node's path, method or secret differ from what is published (publish to apply).
        secret_set: The node (as stored) has a secret.
        example: A copyable curl command.
        signed_with: "published" or "draft" when the example carries a valid signature, else "".
        valid_until: When that signature stops being accepted (None when unsigned).
        calls: The workflow's last calls, newest first.
    """

    url: str
    method: str
    state: str
    state_text: str
    draft_differs: bool
    secret_set: bool
    example: str
    signed_with: str
    valid_until: datetime | None
    calls: list[CallView] = field(default_factory=list)


def hook_url(workflow_id: str, path: Any) -> str:
    """The public address of a webhook (its path as the trigger has it, without outer slashes)."""
    clean = str(path or "").strip().strip("/")
    return f"{get_settings().api_url}/api/hooks/{workflow_id}/{clean}"


def _published(session: Session, workflow: Workflow) -> WorkflowVersion | None:
    return session.exec(select(WorkflowVersion).where(WorkflowVersion.workflow_id == workflow.id,
                                                      WorkflowVersion.status == version_lifecycle.PUBLISHED)).first()


def _serving(version: WorkflowVersion | None, path: str, method: str) -> dict[str, Any] | None:
    """The node of `version` that a call to `path` with `method` reaches, if any."""
    if version is None:
        return None
    try:
        return webhooks.serving_node(launch.trigger_nodes(version, webhooks.NODE_TYPE), "", path, method)
    except (NotFound, webhooks.MethodNotAllowed):
        return None


def _state(workflow: Workflow, path: str, published: WorkflowVersion | None,
           live_node: dict[str, Any] | None) -> tuple[str, str]:
    if not path:
        return NO_PATH, "Give this webhook a path first."
    if published is None:
        return UNPUBLISHED, "Publish the workflow first: calls answer 404 until then."
    if live_node is None:
        return NOT_PUBLISHED_HERE, ("The published version has no webhook on this path and method: "
                                    "publish the draft to add it (calls answer 404 or 405 until then).")
    if not workflow.active:
        return INACTIVE, "The workflow is switched off (inactive): calls answer 410 until it is activated."
    if not usable((live_node.get("parameters") or {}).get("secret")):
        return NO_SECRET, ("The published webhook has no secret, so every call is refused (401): "
                           "generate one and publish.")
    return LIVE, "Signed calls start a run of the published version."


def _differs(node: dict[str, Any], live_node: dict[str, Any] | None) -> bool:
    """Whether the node's webhook settings differ from the published one with the same id."""
    if live_node is None or live_node.get("id") != node.get("id"):
        return False
    mine, theirs = node.get("parameters") or {}, live_node.get("parameters") or {}
    return (webhooks.clean_path(mine.get("path")) != webhooks.clean_path(theirs.get("path"))
            or webhooks.method_of(node) != webhooks.method_of(live_node)
            or _clear(mine) != _clear(theirs))


def _clear(parameters: dict[str, Any]) -> str | None:
    try:
        return secret_of(parameters)
    except ValueError:  # sealed with another key
        return None


def sample_body(workflow: Workflow, method: str) -> str:
    """The example's body: the test input's `body` when it has one, else a small JSON object."""
    if method in BODILESS:
        return ""
    test_input = workflow.test_input
    body = test_input.get("body") if isinstance(test_input, dict) and "body" in test_input else DEFAULT_BODY
    return body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)


def curl_command(url: str, method: str, headers: dict[str, str], body: str) -> str:
    """A curl command line (shell-quoted, one option per line)."""
    parts = [f"curl -X {method} {shlex.quote(url)}"]
    parts += [f"-H {shlex.quote(f'{name}: {value}')}" for name, value in headers.items()]
    if body:
        parts.append(f"--data-raw {shlex.quote(body)}")
    return " \\\n  ".join(parts)


def _signing_secret(node: dict[str, Any], live_node: dict[str, Any] | None) -> tuple[str | None, str]:
    """(clear secret, "published" | "draft") the example is signed with; (None, "") without a usable one."""
    for candidate, which in ((live_node, "published"), (node, "draft")):
        parameters = (candidate or {}).get("parameters") or {}
        if candidate is not None and usable(parameters.get("secret")):
            return _clear(parameters), which
    return None, ""


def example(workflow: Workflow, node: dict[str, Any], live_node: dict[str, Any] | None, reveal: bool,
            now: datetime) -> tuple[str, str, datetime | None]:
    """(curl command, signed_with, valid_until): signed with the real secret only when `reveal`."""
    method = webhooks.method_of(node)
    url = hook_url(workflow.id, (node.get("parameters") or {}).get("path"))
    body = sample_body(workflow, method)
    message_id = f"msg_{uuid.uuid4().hex}"
    timestamp = int(now.timestamp())
    secret, which = _signing_secret(node, live_node) if reveal else (None, "")
    signature = Webhook(secret).sign(message_id, datetime.fromtimestamp(timestamp, tz=now.tzinfo), body) \
        if secret else SIGNATURE_PLACEHOLDER
    headers = {"content-type": "application/json", "webhook-id": message_id, "webhook-timestamp": str(timestamp),
               "webhook-signature": signature}
    if not body:
        headers.pop("content-type")
    valid_until = datetime.fromtimestamp(timestamp + TOLERANCE_SECONDS, tz=now.tzinfo) if secret else None
    return curl_command(url, method, headers, body), which, valid_until


def last_calls(session: Session, workflow_id: str) -> list[CallView]:
    """The workflow's last calls, newest first (at most webhooks.WEBHOOK_CALLS_KEPT): the accepted
    ones (their delivery rows) and the others (webhook_call) together."""
    kept = webhooks.WEBHOOK_CALLS_KEPT
    others = session.exec(select(WebhookCall).where(WebhookCall.workflow_id == workflow_id)
                          .order_by(WebhookCall.received_at.desc(), WebhookCall.id.desc()).limit(kept)).all()
    accepted = session.exec(select(WebhookDelivery).where(WebhookDelivery.workflow_id == workflow_id)
                            .order_by(WebhookDelivery.received_at.desc(), WebhookDelivery.id.desc())
                            .limit(kept)).all()
    calls = [CallView(r.status_code, r.received_at, r.method, r.path, r.message, r.run_id) for r in others]
    calls += [CallView(202, r.received_at, r.method or "", r.path or "", webhooks.ACCEPTED, r.run_id)
              for r in accepted]
    return sorted(calls, key=lambda call: call.received_at, reverse=True)[:kept]


def webhook_help(session: Session, workflow: Workflow, node: dict[str, Any], reveal: bool,
                 now: datetime | None = None) -> WebhookHelp:
    """The help of the trigger.webhook `node` (as stored, secret sealed) of `workflow`.

    Args:
        session: the caller's session.
        workflow: the workflow, already checked readable by the caller.
        node: the node as the edited version stores it.
        reveal: whether the example may carry a signature made with the secret.
        now: the signing time (default: now).
    """
    now = now or utcnow()
    parameters = node.get("parameters") or {}
    path = webhooks.clean_path(parameters.get("path"))
    method = webhooks.method_of(node)
    published = _published(session, workflow)
    live_node = _serving(published, path, method) if path else None
    state, text = _state(workflow, path, published, live_node)
    command, which, valid_until = example(workflow, node, live_node, reveal, now) if path else ("", "", None)
    return WebhookHelp(url=hook_url(workflow.id, path), method=method, state=state, state_text=text,
                       draft_differs=_differs(node, live_node), secret_set=usable(parameters.get("secret")),
                       example=command, signed_with=which, valid_until=valid_until,
                       calls=last_calls(session, workflow.id))

