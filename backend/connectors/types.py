"""The one registry of connection types (DESIGN §8): what kinds of outside account a user can connect.

A connector module (backend/connectors/kinds/<type>.py) declares its type with
:func:`register_connection_type`; the registry imports every module of that package before it
answers, so a new module there is a new type. Everything else — the Connections door, the
REST API, the Connections page, toolbox availability — reads the registry; no second list.

A type says how a connection is made (`auth`: "password" — settings typed by the user, tested
before anything is stored — or "oauth" — a consent at the provider), which of its settings are
secret (sealed, never returned), how it is tested, and what it offers ("mail", "files") to the
generic actions (datasources, email.checkEmail).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from backend.errors import FieldError, InvalidInput

MAIL, FILES = "mail", "files"


class ConnectionFailed(Exception):
    """The outside system refused or could not be reached; the message says why, in words a user
    can act on, and never holds a secret.

    Attributes:
        expired: the stored credentials can no longer be renewed: the owner must consent (or
            enter a password) again.
    """

    def __init__(self, message: str, expired: bool = False):
        super().__init__(message)
        self.expired = expired


@dataclass(frozen=True)
class Credentials:
    """A connection as a connector works with it: its settings and its unsealed secret."""

    connection_id: str
    type: str
    label: str
    settings: dict[str, Any]
    secret: dict[str, Any] = field(repr=False)
    owner_id: str = ""  # whose connection (or who is creating it): a connection that uses another checks it


@dataclass(frozen=True)
class RemoteHook:
    """A webhook registered at the outside system: its id there and the secret that signs deliveries."""

    remote_id: str
    secret: str = field(repr=False)


@dataclass(frozen=True)
class WebhookSupport:
    """How a connection type's system starts workflows (the trigger node `trigger.<type id>`).

    Attributes:
        events: The event names the trigger offers (the service's own, e.g. "taskCreated",
            "jira:issue_created"), first the default.
        params_model: The trigger node's parameters (pydantic, camelCase aliases): `connectionId`,
            `events` and what narrows the subscription (a ClickUp workspace/space/list, a JQL filter).
        register: `register(credentials, url, events, params, secret)` registers a webhook that POSTs
            `events` to `url`; `params` are the node's parameters (by alias); `secret` is a fresh random
            secret the service may use (Jira) or ignore, returning its own (ClickUp). Raises
            ConnectionFailed naming what the service refused.
        unregister: `unregister(credentials, remote_id)` removes it (a missing one is no error).
        verify: `verify(headers, body, secret)`: whether a delivery is signed with `secret`
            (headers by lower-case name, the raw body).
        event_of: The event name of a delivery's JSON body (None: not an event of this service).
        delivery_id: `delivery_id(headers, body)`: the service's id of one delivery, the same when it
            delivers again (Jira's X-Atlassian-Webhook-Identifier); a repeated one starts no second run.
    """

    events: tuple[str, ...]
    params_model: type[BaseModel]
    register: Callable[[Credentials, str, tuple[str, ...], dict[str, Any], str], RemoteHook]
    unregister: Callable[[Credentials, str], None]
    verify: Callable[[Any, bytes, str], bool]
    event_of: Callable[[Any], str | None]
    delivery_id: Callable[[Any, Any], str | None] = lambda _headers, _body: None


@dataclass(frozen=True)
class ConnectionType:
    """One kind of outside account.

    Attributes:
        id: The type id of the REST API and of `@action(connection_type=…)` (e.g. "imap").
        label: What the Connections page calls it (e.g. "E-mail (IMAP/SMTP)").
        description: One sentence for the page.
        auth: "password" (settings typed by the user) or "oauth" (a consent at the provider). A
            password type may also name an `oauth` provider: it is then made either way.
        settings_model: For password types: the settings POST /api/connections takes (pydantic,
            camelCase aliases); None for OAuth types.
        secret_fields: Settings (by Python name) that are sealed and never returned.
        check: Tests a connection live; returns what it found (e.g. "signed in as anna@…, 12
            folders") or raises ConnectionFailed.
        unavailable: None when this installation can make such connections, else why not (e.g.
            "set POWERON_MSFT_CLIENT_ID …").
        mail: For a type offering MAIL: builds the MailAccess of one connection
            (backend/connectors/access.py).
        files: For a type offering FILES: builds its FileAccess.
        oauth: For auth "oauth": the provider's consent and token endpoints, scopes and how to
            tell whose account was connected (backend.connectors.oauth.OAuthProvider).
        webhooks: When the system can start workflows: how its webhooks are registered and verified.
        renew_due: For credentials that age (OAuth tokens): renews them when they are due, in a
            transaction of its own, or raises ConnectionFailed. `store.open_connection` calls it
            before the caller's session reads the connection, so the caller never holds a
            snapshot older than the renewal (on SQLite a stale snapshot cannot write any more).
    """

    id: str
    label: str
    description: str
    auth: Literal["password", "oauth"]
    check: Callable[[Credentials], str]
    settings_model: type[BaseModel] | None = None
    secret_fields: tuple[str, ...] = ()
    unavailable: Callable[[], str | None] = lambda: None
    mail: Callable[[Credentials], Any] | None = None
    files: Callable[[Credentials], Any] | None = None
    oauth: Any = None
    renew_due: Callable[[Credentials], None] | None = None
    webhooks: WebhookSupport | None = None

    @property
    def offers(self) -> frozenset[str]:
        """What generic actions may use it for: MAIL and/or FILES (from its factories)."""
        return frozenset({MAIL} if self.mail else set()) | frozenset({FILES} if self.files else set())

    def split_settings(self, raw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """(public settings, secret settings) from what a user typed, validated by `settings_model`.

        Raises:
            InvalidInput: naming each wrong field (as `settings.<field>`).
        """
        if self.settings_model is None:
            raise InvalidInput([FieldError("type", f"'{self.id}' connections are made by consent at the "
                                                   "provider (OAuth), not with typed settings")])
        from pydantic import ValidationError

        try:
            parsed = self.settings_model.model_validate(raw if isinstance(raw, dict) else {})
        except ValidationError as exc:
            raise InvalidInput([FieldError("settings." + ".".join(str(p) for p in error["loc"]),
                                           error["msg"].removeprefix("Value error, "))
                                for error in exc.errors(include_url=False, include_input=False)]) from None
        values = parsed.model_dump(by_alias=True)
        secret_names = {self.settings_model.model_fields[name].alias or name for name in self.secret_fields}
        public = {k: v for k, v in values.items() if k not in secret_names}
        secret = {k: v for k, v in values.items() if k in secret_names}
        return public, secret


_TYPES: dict[str, ConnectionType] = {}


def register_connection_type(kind: ConnectionType) -> ConnectionType:
    """Add a connection type to the registry (once per id)."""
    if kind.id in _TYPES and _TYPES[kind.id] is not kind:
        raise ValueError(f"connection type '{kind.id}' is registered twice")
    _TYPES[kind.id] = kind
    return kind


def connection_types() -> list[ConnectionType]:
    """Every registered connection type, by id (registration order depends on which module was
    imported first; lists, requirement ids and the Connections page must not)."""
    _load()
    return sorted(_TYPES.values(), key=lambda kind: kind.id)


def connection_type(type_id: Any) -> ConnectionType:
    """The type `type_id`, else InvalidInput naming the known ones (field `type`)."""
    _load()
    found = _TYPES.get(type_id) if isinstance(type_id, str) else None
    if found is None:
        known = ", ".join(_TYPES) or "none"
        raise InvalidInput([FieldError("type", f"unknown connection type {type_id!r}; known: {known}")])
    return found


@functools.cache
def _load() -> None:
    """Import every connector module of backend/connectors/kinds/ (each registers its type)."""
    import backend.connectors.kinds as kinds

    for info in sorted(pkgutil.iter_modules(kinds.__path__, kinds.__name__ + "."), key=lambda i: i.name):
        importlib.import_module(info.name)
