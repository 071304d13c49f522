"""The Connections door (DESIGN §8): the signed-in user's connections to outside systems.

A connection belongs to a user in a mandate; its owner may rename, test and delete it; an owner who
holds SHARE_CONNECTIONS in its mandate (the mandate's admins) may share it with every member there,
and who holds that right may also delete a shared one. Others never see another user's unshared
connection: it is "not found", exactly like a missing id. Settings typed by a user are tested live
before anything is stored; secrets are sealed and never leave the door (views carry only the public
settings).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import select

from backend.connectors import store
from backend.connectors.types import ConnectionFailed, ConnectionType, Credentials, connection_type, connection_types
from backend.db.models import Connection, Mandate, User, utcnow
from backend.errors import FieldError, Forbidden, InvalidInput, NotFound
from backend.names import clean_name
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, guarded
from backend.rbac.rights import RESOURCE
from backend.rbac.templates import SHARE_CONNECTIONS
from backend.statemachines import connection as lifecycle

LABEL_MAX = 200


@dataclass(frozen=True)
class TypeView:
    """A connection type as the Connections page offers it."""

    id: str
    label: str
    description: str
    auth: str
    settings_schema: dict[str, Any] | None
    unavailable: str | None
    consent: bool = False  # also (or only) made by consent at the provider, available here


@dataclass(frozen=True)
class ConnectionView:
    """A connection as its users see it: never its secret."""

    id: str
    type: str
    type_label: str
    label: str
    status: str
    mandate_id: str
    mandate_name: str
    shared: bool
    last_error: str | None
    owner_id: str
    owner_name: str
    mine: bool
    settings: dict[str, Any]
    created_at: datetime
    may_share: bool
    may_delete: bool


@dataclass(frozen=True)
class TestResult:
    """The answer of a live test."""

    ok: bool
    message: str
    status: str


def _consent_offered(kind: Any) -> bool:
    """Whether a connection of `kind` can be made by consent here (its provider set up)."""
    return kind.oauth is not None and not kind.unavailable() and not kind.oauth.unavailable()


class Connections(Door):
    """The connections one user may use and manage."""

    def __init__(self, access: AccessContext):
        self.access = access
        self.session = access.session
        self.user = access.user

    def call_scope(self, method: str, arguments: dict[str, Any]) -> tuple[str | None, str | None] | None:
        """`share` is checked in the mandate of the connection it names (NotFound for one the user
        may not see, before any right is checked)."""
        if method != "share":
            return None
        return self._visible(arguments.get("connection_id")).mandate_id, None

    # --- reading --------------------------------------------------------------------------------

    @guarded("authenticated")
    def types(self) -> list[TypeView]:
        """Every connection type, with the settings a password type asks for and whether this
        installation can make it."""
        return [TypeView(t.id, t.label, t.description, t.auth,
                         t.settings_model.model_json_schema(by_alias=True) if t.settings_model else None,
                         t.unavailable(), _consent_offered(t)) for t in connection_types()]

    @guarded("authenticated")
    def list(self) -> list[ConnectionView]:
        """The user's own connections and those shared in their mandates, by label."""
        rows = store.usable_connections(self.session, self.user)
        return self._views(rows)

    @guarded("authenticated")
    def get(self, connection_id: str) -> ConnectionView:
        """One connection the user may use, else NotFound."""
        return self._views([self._visible(connection_id)])[0]

    # --- changing -------------------------------------------------------------------------------

    @guarded("authenticated")
    def create(self, type_id: Any, label: Any, settings: Any, mandate_id: str | None = None) -> ConnectionView:
        """A connection of a password type, tested live first: nothing is stored when the outside
        system refuses (422 naming `settings` and what it said)."""
        kind = connection_type(type_id)
        unavailable = kind.unavailable()
        if unavailable:
            raise InvalidInput([FieldError("type", unavailable)])
        name = clean_name(label, "label", LABEL_MAX)
        public, secret = kind.split_settings(settings)
        mandate = self._mandate_for(mandate_id)
        try:
            found = kind.check(Credentials("", kind.id, name, public, secret, owner_id=self.user.id))
        except ConnectionFailed as exc:
            raise InvalidInput([FieldError("settings", f"the connection test failed: {exc}")]) from None
        connection = Connection(mandate_id=mandate.id, owner_id=self.user.id, type=kind.id, label=name,
                                settings={**public, "tested": found}, secret=store.seal_secret(secret))
        self.session.add(connection)
        self.session.flush()
        return self._views([connection])[0]

    @guarded("authenticated")
    def test(self, connection_id: str) -> TestResult:
        """Test a connection the user may use, live; its status follows (active, error, expired)."""
        connection = self._visible(connection_id)
        if connection.status == lifecycle.REVOKED:
            return TestResult(False, "this connection was revoked", connection.status)
        kind = connection_type(connection.type)
        try:
            found = kind.check(store.credentials_of(connection))
        except ConnectionFailed as exc:
            if exc.expired and connection.status == lifecycle.ACTIVE:
                lifecycle.expire(self.session, connection, str(exc))
            elif not exc.expired and connection.status != lifecycle.EXPIRED:
                lifecycle.fail(self.session, connection, str(exc))
            return TestResult(False, str(exc), connection.status)
        lifecycle.restore(self.session, connection, settings={**(connection.settings or {}), "tested": found})
        return TestResult(True, found, connection.status)

    @guarded("authenticated")
    def rename(self, connection_id: str, label: Any) -> ConnectionView:
        """Rename one of the user's own connections."""
        connection = self._own(connection_id, "rename")
        connection.label = clean_name(label, "label", LABEL_MAX)
        connection.sys_modified_at = utcnow()
        connection.lock_version += 1
        self.session.add(connection)
        self.session.flush()
        return self._views([connection])[0]

    @guarded(RESOURCE, SHARE_CONNECTIONS)
    def share(self, connection_id: str, shared: bool) -> ConnectionView:
        """Share one's own connection with every member of its mandate, or stop sharing it (nobody
        lends out another person's account)."""
        connection = self._own(connection_id, "share")
        if not isinstance(shared, bool):
            raise InvalidInput([FieldError("shared", "must be true or false")])
        connection.shared = shared
        connection.sys_modified_at = utcnow()
        connection.lock_version += 1
        self.session.add(connection)
        self.session.flush()
        return self._views([connection])[0]

    @guarded("authenticated")
    def delete(self, connection_id: str) -> None:
        """Delete a connection: the owner's own, or a shared one by who may share in its mandate.
        Its credentials go with it; workflows that name it fail with "connection … not found"."""
        connection = self._visible(connection_id)
        if connection.owner_id != self.user.id and not self._may_share(connection):
            raise Forbidden(f"only the owner of connection '{connection.label}' may delete it")
        self.session.delete(connection)
        self.session.flush()

    # --- helpers --------------------------------------------------------------------------------

    def _visible(self, connection_id: Any) -> Connection:
        found = self.session.get(Connection, connection_id) if isinstance(connection_id, str) and connection_id \
            else None
        if found is None or self.session.exec(select(Connection.id).where(
                Connection.id == found.id, store.usable_by(self.user))).first() is None:
            raise NotFound(f"connection {connection_id or '(none)'} not found")
        return found

    def _own(self, connection_id: Any, what: str) -> Connection:
        found = self._visible(connection_id)
        if found.owner_id != self.user.id:
            raise Forbidden(f"only the owner of connection '{found.label}' may {what} it")
        return found

    def _may_share(self, connection: Connection) -> bool:
        return self.access.resolve(RESOURCE, SHARE_CONNECTIONS, connection.mandate_id, None).allowed

    def _mandate_for(self, mandate_id: str | None) -> Mandate:
        return store.mandate_for_new(self.session, self.user, mandate_id)

    def _views(self, rows: list[Connection]) -> list[ConnectionView]:
        mandates = {m.id: m.name for m in self.session.exec(
            select(Mandate).where(Mandate.id.in_({r.mandate_id for r in rows}))).all()} if rows else {}
        owners = {u.id: (u.display_name or u.username) for u in self.session.exec(
            select(User).where(User.id.in_({r.owner_id for r in rows}))).all()} if rows else {}
        views = []
        for row in rows:
            kind = connection_type(row.type)
            may_share = self._may_share(row)
            mine = row.owner_id == self.user.id
            views.append(ConnectionView(
                id=row.id, type=row.type, type_label=kind.label, label=row.label, status=row.status,
                mandate_id=row.mandate_id, mandate_name=mandates.get(row.mandate_id, ""), shared=row.shared,
                last_error=row.last_error, owner_id=row.owner_id, owner_name=owners.get(row.owner_id, ""),
                mine=mine, settings=_public(kind, row.settings or {}), created_at=row.sys_created_at,
                may_share=mine and may_share, may_delete=mine or may_share))
        return views


def _public(kind: ConnectionType, settings: dict[str, Any]) -> dict[str, Any]:
    """The settings a view may carry (secret fields never are stored there; this is the guard)."""
    secret = set(kind.secret_fields)
    if kind.settings_model is not None:
        secret |= {kind.settings_model.model_fields[n].alias or n for n in kind.secret_fields}
    return {k: v for k, v in settings.items() if k not in secret}
