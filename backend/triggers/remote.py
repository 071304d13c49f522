"""trigger.<type>: workflows started by an outside system's webhooks (ClickUp, Jira …; issue 20).

Every connection type that declares :class:`~backend.connectors.types.WebhookSupport` gives one
trigger node type, ``trigger.<type id>`` (``trigger.clickup``, ``trigger.jira``), whose parameters
are the type's (a connection, the events, what narrows them). No second list: the node types are
read from the connection type registry.

Registration follows the published version. Whenever it changes (publish, unpublish, archive,
restore, deletion: backend/workflows/service.py calls :func:`sync`), the workflow's registrations
are compared with the trigger nodes of the version now published:

- a node without a registration of the same fingerprint (type, connection, parameters) is
  registered at the outside system with the publishing user's right to use the connection (a
  connection they may not use is "not found"); its deliveries go to
  ``{POWERON_API_URL}/api/hooks/remote/{token}`` with a fresh random token per registration;
- a registration no published node asks for any more is removed there (best effort: a connection
  deleted meanwhile only leaves a webhook the outside system will see failing) and here.

A refusal of the outside system refuses the publication (InvalidInput naming the node and what
the system said); registrations made in that attempt are removed again, so nothing is half-done.

A delivery (:func:`receive`) is accepted when its token is known, its signature verifies with the
registration's secret (sealed at rest, never returned or logged) and the workflow is active; an
event the node did not ask for is acknowledged and starts nothing. The run (trigger "webhook") runs
the published version as the workflow's creator (launch.start), input ``{"event", "payload"}``. A
delivery the service sends again (same delivery id, e.g. Jira's X-Atlassian-Webhook-Identifier) is
answered with the first one's run and starts nothing (a `webhook_delivery` row per id, unique per
workflow, written with the run).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from backend.config import get_settings
from backend.connectors import store
from backend.connectors.types import ConnectionFailed, ConnectionType, WebhookSupport, connection_types
from backend.crypto import seal, unseal
from backend.db import session_scope
from backend.db.engine import write_gate
from backend.db.models import Connection, RemoteWebhook, User, WebhookDelivery, Workflow, utcnow
from backend.errors import FieldError, InvalidInput, NotFound
from backend.triggers import launch, webhooks

log = logging.getLogger(__name__)

PREFIX = "trigger."
ROUTE = "/api/hooks/remote/"
DELIVERY_ID_MAX = 200  # WebhookDelivery.webhook_id
REPEATED = "a repeated delivery: it started its run before"


class Unauthorized(Exception):
    """The delivery's signature did not verify (401; nothing is started)."""


@dataclass(frozen=True)
class Accepted:
    """What a delivery started: a run, or nothing (`ignored` says why)."""

    run_id: str | None = None
    ignored: str | None = None


# --- the node types ---------------------------------------------------------------------------------


def remote_kinds() -> dict[str, ConnectionType]:
    """{trigger node type: connection type} for every connection type whose system has webhooks."""
    return {PREFIX + kind.id: kind for kind in connection_types() if kind.webhooks is not None}


def remote_kind(node_type: Any) -> ConnectionType | None:
    """The connection type behind a ``trigger.<type>`` node type, else None."""
    return remote_kinds().get(node_type) if isinstance(node_type, str) else None


@functools.cache
def remote_node_types() -> tuple[Any, ...]:
    """The NodeType of each remote trigger (built once; backend/workflows/node_types.py lists them)."""
    from backend.workflows.node_types import remote_trigger_type

    return tuple(remote_trigger_type(type_id, kind) for type_id, kind in remote_kinds().items())


# --- registration -----------------------------------------------------------------------------------


def _fingerprint(node_type: str, parameters: Mapping[str, Any]) -> str:
    text = json.dumps([node_type, parameters], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _wanted(workflow: Workflow, version: Any) -> dict[str, tuple[dict[str, Any], str]]:
    """{node id: (node, fingerprint)} of the remote trigger nodes of `version` (None: none)."""
    if version is None:
        return {}
    kinds = remote_kinds()
    found: dict[str, tuple[dict[str, Any], str]] = {}
    for node in (version.graph or {}).get("nodes", []):
        if isinstance(node, dict) and node.get("type") in kinds and isinstance(node.get("id"), str):
            found[node["id"]] = (node, _fingerprint(node["type"], node.get("parameters") or {}))
    return found


def delivery_url(token: str) -> str:
    """Where the outside system posts the deliveries of one registration."""
    return get_settings().api_url.rstrip("/") + ROUTE + token


def _node_error(node: Mapping[str, Any], field: str, message: str) -> InvalidInput:
    return InvalidInput([FieldError(f"nodes.{node.get('id')}.parameters.{field}", message)])


def _register(session: Session, user: User, workflow: Workflow, node: dict[str, Any], fingerprint: str
              ) -> RemoteWebhook:
    kind = remote_kinds()[node["type"]]
    support: WebhookSupport = kind.webhooks
    try:
        params = support.params_model.model_validate(node.get("parameters") or {}).model_dump(by_alias=True)
    except ValueError as exc:
        raise _node_error(node, "connectionId", f"the {kind.label} trigger's parameters are not valid: {exc}") \
            from None
    connection_id = params.get("connectionId")
    try:
        credentials = store.open_connection(session, user, connection_id, [kind.id])
    except NotFound:
        raise _node_error(node, "connectionId", f"connection {connection_id or '(none)'} was not found among the "
                                                "connections you may use") from None
    except ConnectionFailed as exc:
        raise _node_error(node, "connectionId", str(exc)) from None
    events = tuple(params.get("events") or support.events[:1])
    token = secrets.token_urlsafe(32)
    proposed = secrets.token_urlsafe(32)
    try:
        hook = support.register(credentials, delivery_url(token), events, params, proposed)
    except ConnectionFailed as exc:  # about the connection or the filters: the node as a whole
        raise InvalidInput([FieldError(f"nodes.{node['id']}", f"{kind.label} refused to register the webhook: {exc}")]
                           ) from None
    row = RemoteWebhook(token=token, workflow_id=workflow.id, node_id=node["id"], type=kind.id,
                        connection_id=credentials.connection_id, remote_id=hook.remote_id, secret=seal(hook.secret),
                        fingerprint=fingerprint, events=list(events))
    session.add(row)
    return row


def _unregister(session: Session, row: RemoteWebhook) -> None:
    """Remove a registration at the outside system (best effort) and here."""
    kind = remote_kinds().get(PREFIX + row.type)
    connection = session.get(Connection, row.connection_id)
    if kind is not None and connection is not None:
        try:
            kind.webhooks.unregister(store.credentials_of(connection), row.remote_id)
        except ConnectionFailed as exc:
            log.warning("remote webhook %s of workflow %s could not be removed at %s: %s", row.id, row.workflow_id,
                        kind.label, exc)
    session.delete(row)


def sync(session: Session, workflow: Workflow, user: User | None, version: Any) -> None:
    """Make the workflow's registrations those of `version` (its published version, None: none).

    Raises:
        InvalidInput: a node's connection is not usable by `user` or the outside system refused
            (every registration made in this call is removed again).
    """
    wanted = _wanted(workflow, version)
    wanted_keys = {(node_id, fingerprint) for node_id, (_node, fingerprint) in wanted.items()}
    existing = list(session.exec(select(RemoteWebhook).where(RemoteWebhook.workflow_id == workflow.id)).all())
    kept = {(row.node_id, row.fingerprint) for row in existing} & wanted_keys
    for row in existing:
        if (row.node_id, row.fingerprint) not in kept:
            _unregister(session, row)
    added: list[RemoteWebhook] = []
    try:
        for node_id, (node, fingerprint) in wanted.items():
            if (node_id, fingerprint) in kept:
                continue
            if user is None:
                raise _node_error(node, "connectionId", "nobody to register the webhook as")
            added.append(_register(session, user, workflow, node, fingerprint))
    except Exception:
        for row in added:
            _unregister(session, row)
        raise
    session.flush()


# --- deliveries -------------------------------------------------------------------------------------


def _payload(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        raise InvalidInput([FieldError("body", "the delivery is not JSON")]) from None


def receive(token: str, body: bytes, headers: Mapping[str, str]) -> Accepted:
    """One delivery of an outside system (see the module doc).

    Raises:
        NotFound: no registration has this token (also: its workflow has no such trigger any more).
        Unauthorized: the signature did not verify.
        InvalidInput: the body is not JSON.
        launch.Overloaded: too many runs wait (429; the system retries).
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    with launch.accepting, session_scope() as session:
        row = session.exec(select(RemoteWebhook).where(RemoteWebhook.token == token)).first() \
            if isinstance(token, str) and 0 < len(token) <= 64 else None
        kind = remote_kinds().get(PREFIX + row.type) if row is not None else None
        if row is None or kind is None:
            raise NotFound("no webhook is registered at this address")
        try:
            secret = unseal(row.secret)
        except ValueError:
            raise Unauthorized("this webhook's secret cannot be opened with this server's key") from None
        if not kind.webhooks.verify(lowered, body, secret):
            raise Unauthorized(f"the {kind.label} signature of this delivery did not verify")
        payload = _payload(body)
        event = kind.webhooks.event_of(payload)
        try:
            workflow, version, nodes = launch.published_triggers(session, row.workflow_id, PREFIX + row.type)
        except NotFound:
            return Accepted(ignored="the workflow is switched off or no longer published with this trigger")
        node = next((n for n in nodes if n.get("id") == row.node_id), None)
        if node is None:
            return Accepted(ignored="the workflow no longer has this trigger")
        if event not in row.events:
            return Accepted(ignored=f"event {event!r} is not one this trigger listens to")
        said = kind.webhooks.delivery_id(lowered, payload)
        key = f"{row.type}:{said}"[:DELIVERY_ID_MAX] if said else None
        seen = webhooks.delivered(session, workflow.id, key) if key else None
        if seen is not None:
            return Accepted(run_id=seen.run_id, ignored=REPEATED)
        launch.check_capacity()
        with write_gate():
            try:
                # A webhook run like any other (history filters, failure notices of unattended runs).
                run = launch.start(session, launch.Target(workflow, version, node),
                                   {"event": event, "payload": payload}, "webhook")
                if key:  # the unique (workflow, id) finds a repeat that arrives while this one is written
                    session.add(WebhookDelivery(workflow_id=workflow.id, webhook_id=key, run_id=run.id,
                                                path=f"remote/{row.node_id}"[:200], method="POST"))
                row.last_delivery_at = utcnow()
                session.add(row)
                session.commit()
            except IntegrityError:
                session.rollback()
                seen = webhooks.delivered(session, workflow.id, key) if key else None
                if seen is None:
                    raise
                return Accepted(run_id=seen.run_id, ignored=REPEATED)
        return Accepted(run_id=run.id)
