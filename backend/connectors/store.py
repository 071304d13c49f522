"""Connections at run time: which ones a user may use, their credentials, renewed secrets, expiry.

Actions, the mail poller and the OAuth refresh call these; people manage connections through the
door (backend/connectors/interface.py). A user may use their own connections and those shared in a
mandate they belong to; any other id is "not found", exactly like a missing one. Secrets are
unsealed only here, for the connector that calls the outside system, and never logged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session, select

from backend.connectors.types import ConnectionFailed, Credentials, connection_type
from backend.crypto import seal, unseal
from backend.db import session_scope
from backend.db.models import Connection, Mandate, Notification, User, UserMandate
from backend.errors import FieldError, InvalidInput, NotFound
from backend.statemachines import connection as lifecycle

CONNECTION_EXPIRED = "connection.expired"


def seal_secret(secret: dict[str, Any]) -> str:
    """A connection's credentials as the one sealed text stored in `Connection.secret`."""
    return seal(json.dumps(secret, separators=(",", ":"))) if secret else ""


def unseal_secret(connection: Connection) -> dict[str, Any]:
    """The credentials of `connection` in clear (for the connector only)."""
    if not connection.secret:
        return {}
    try:
        return json.loads(unseal(connection.secret))
    except ValueError:
        raise ConnectionFailed(f"the credentials of connection '{connection.label}' cannot be opened with this "
                               "server's POWERON_SECRET_KEY: connect it again") from None


def usable_by(user: User) -> Any:
    """The condition on Connection rows `user` may use: their own, and those shared in their mandates."""
    mandates = select(UserMandate.mandate_id).where(UserMandate.user_id == user.id)
    return or_(Connection.owner_id == user.id, Connection.shared.is_(True) & Connection.mandate_id.in_(mandates))


def usable_connections(session: Session, user: User, type_ids: Iterable[str] | None = None,
                       active_only: bool = False) -> list[Connection]:
    """The connections `user` may use (of `type_ids` when given), by label; revoked ones never."""
    query = select(Connection).where(usable_by(user), Connection.status != lifecycle.REVOKED)
    if type_ids is not None:
        query = query.where(Connection.type.in_(list(type_ids)))
    if active_only:
        query = query.where(Connection.status == lifecycle.ACTIVE)
    return list(session.exec(query.order_by(Connection.label, Connection.id)).all())


def active_connection_types(session: Session, user: User) -> set[str]:
    """The connection types of which `user` may use an active connection (spec §5.3: the toolboxes
    of those types are offered to their agents)."""
    rows = session.exec(select(Connection.type).where(usable_by(user), Connection.status == lifecycle.ACTIVE)
                        .distinct()).all()
    return set(rows)


def credentials_of(connection: Connection) -> Credentials:
    """`connection` as a connector works with it (secret unsealed)."""
    return Credentials(connection.id, connection.type, connection.label, dict(connection.settings or {}),
                       unseal_secret(connection), owner_id=connection.owner_id)


def mandate_for_new(session: Session, user: User, mandate_id: str | None) -> Mandate:
    """The mandate a new connection belongs to (the Connections door's rule): the one named (one
    of the user's), else their only one, else Default when they are in it."""
    mine = list(session.exec(select(Mandate).join(UserMandate, UserMandate.mandate_id == Mandate.id)
                             .where(UserMandate.user_id == user.id).order_by(Mandate.name)).all())
    if mandate_id is not None:
        found = next((m for m in mine if m.id == mandate_id), None)
        if found is None:
            raise NotFound(f"mandate {mandate_id} not found")
        return found
    if len(mine) == 1:
        return mine[0]
    from backend.bootstrap import DEFAULT_MANDATE

    default = next((m for m in mine if m.name == DEFAULT_MANDATE), None)
    if default is not None:
        return default
    if not mine:
        raise InvalidInput([FieldError("mandateId", "you belong to no mandate a connection could belong to")])
    raise InvalidInput([FieldError("mandateId", "you belong to several mandates: name the one "
                                                f"({', '.join(m.name for m in mine)})")])


def open_connection(session: Session, user: User, connection_id: Any, type_ids: Iterable[str] | None = None
                    ) -> Credentials:
    """The credentials of connection `connection_id` for `user` to use now.

    Raises:
        NotFound: no such connection, or not theirs to use (another user's, another mandate's).
        ConnectionFailed: it is not of `type_ids`, or not active (expired, in error, revoked):
            the message says what to do.
    """
    if isinstance(connection_id, str) and connection_id:
        _renew_if_due(user, connection_id)
    found = session.get(Connection, connection_id) if isinstance(connection_id, str) and connection_id else None
    if found is None or session.exec(select(Connection.id).where(Connection.id == found.id, usable_by(user))
                                     ).first() is None:
        raise NotFound(f"connection {connection_id or '(none)'} not found")
    wanted = list(type_ids) if type_ids is not None else None
    if wanted is not None and found.type not in wanted:
        names = " or ".join(connection_type(t).label for t in wanted)
        raise ConnectionFailed(f"connection '{found.label}' is a {connection_type(found.type).label} connection; "
                               f"this needs {names}")
    if found.status != lifecycle.ACTIVE:
        why = f": {found.last_error}" if found.last_error else ""
        raise ConnectionFailed(f"connection '{found.label}' is {found.status}{why} — reconnect or test it on the "
                               "Connections page", expired=found.status == lifecycle.EXPIRED)
    return credentials_of(found)


def _renew_if_due(user: User, connection_id: str) -> None:
    """Renew the credentials of an active connection `user` may use when they are due, before the
    caller's session reads them (ConnectionType.renew_due; its failures are left to the reads that
    follow: an expired connection is then found expired)."""
    with session_scope() as session:
        found = session.exec(select(Connection).where(Connection.id == connection_id, usable_by(user),
                                                      Connection.status == lifecycle.ACTIVE)).first()
        if found is None:
            return
        kind = connection_type(found.type)
        credentials = credentials_of(found) if kind.renew_due is not None else None
    if credentials is not None:
        try:
            kind.renew_due(credentials)
        except ConnectionFailed:
            pass  # recorded on the connection where it matters (expired); the caller's read says so


def save_secret(connection_id: str, secret: dict[str, Any], expires_at: datetime | None,
                settings: dict[str, Any] | None = None) -> None:
    """Store renewed credentials (a refreshed token) at once, in a transaction of their own: a
    rotated refresh token must not be lost when the action that used it fails afterwards."""
    with session_scope() as session:
        found = session.get(Connection, connection_id)
        if found is None or found.status == lifecycle.REVOKED:
            return
        found.secret = seal_secret(secret)
        found.expires_at = expires_at
        if settings is not None:
            found.settings = {**(found.settings or {}), **settings}
        found.lock_version += 1
        session.add(found)


def mark_expired(connection_id: str, reason: str) -> None:
    """The credentials can no longer be renewed: the connection becomes `expired` (in its own
    transaction) and its owner gets a notification saying why and what to do."""
    with session_scope() as session:
        found = session.get(Connection, connection_id)
        if found is None or found.status != lifecycle.ACTIVE:
            return
        lifecycle.expire(session, found, reason)
        session.add(Notification(
            user_id=found.owner_id, mandate_id=found.mandate_id, kind=CONNECTION_EXPIRED,
            title=f"Connection '{found.label}' expired"[:300],
            message=(f"{reason} Connect it again on the Connections page; until then workflows and agents "
                     "that use it fail with this message.")[:4000],
        ))


def mark_failed(connection_id: str, reason: str) -> None:
    """A test or call failed for another reason: `error` with the reason (own transaction)."""
    with session_scope() as session:
        found = session.get(Connection, connection_id)
        if found is not None and found.status in (lifecycle.ACTIVE, lifecycle.ERROR):
            lifecycle.fail(session, found, reason)
