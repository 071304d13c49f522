"""State of the Connections page (/connections): the signed-in user's connections to outside systems
and those shared with them, through the Connections door (backend/connectors/interface.py).

Adding one: a password type (imap) gets a form generated from its `settingsSchema` (secret fields
masked, choices as selects, the schema's defaults); the door tests the settings live before it
stores anything, and a refusal shows the outside server's message under the form. An OAuth type
(msft) starts the consent at the provider: the browser goes to a one-time start address made
server-side for this user, and the provider's callback comes back to `/connections?connected=<id>`
or `?error=<message>`, which the page shows. A type this installation cannot make says why.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypedDict

import reflex as rx

from backend.connectors.interface import Connections, ConnectionView, TypeView
from backend.connectors.types import connection_type
from backend.errors import DomainError, FieldError, InvalidInput
from backend.rbac.access import AccessContext
from state.auth import AuthState, NotSignedIn
from state.page import PageMixin, RenameMixin, user_message
from state.permissions import requires, requires_door

ACRONYMS = {"smtp": "SMTP", "imap": "IMAP", "url": "URL", "id": "ID", "tls": "TLS", "ssl": "SSL", "api": "API"}
FORM_PROBLEM_FIELDS = ("settings", "type", "mandateId")


def _door(session, user) -> Connections:
    return Connections(AccessContext(session, user))


class ConnectionRow(TypedDict):
    id: str
    label: str
    type: str
    type_label: str
    status: str
    last_error: str
    mandate: str
    owner: str
    mine: bool
    shared: bool
    may_share: bool
    may_delete: bool
    tested: str
    test_ok: bool
    test_message: str
    may_reconnect: bool  # its owner may consent again (an OAuth connection that expired or failed)


class TypeCard(TypedDict):
    id: str
    label: str
    description: str
    auth: str
    unavailable: str
    consent: bool  # (also) made by consent at the provider, available here


class SettingField(TypedDict):
    name: str
    title: str
    kind: str  # text · number · password · select
    default: str
    options: list[str]
    labels: list[str]  # what a select shows for each option
    required: bool
    description: str
    error: str


class MandateOption(TypedDict):
    id: str
    name: str


def field_title(name: str, schema: dict[str, Any]) -> str:
    """"smtpHost" → "SMTP host" (a schema title that is more than the name's words wins)."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower().split()
    generated = " ".join(ACRONYMS.get(w, w) for w in words)
    title = str(schema.get("title") or "")
    if title and title.lower().replace(" ", "") != name.lower():
        return title
    return generated[:1].upper() + generated[1:]


def _resolved(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A property's schema without a null alternative and $refs."""
    options = [o for o in (schema.get("anyOf") or []) if o.get("type") != "null"]
    if len(options) == 1:
        schema = {**{k: v for k, v in schema.items() if k != "anyOf"}, **options[0]}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = {**defs.get(ref.rsplit("/", 1)[-1], {}), **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _connection_choices(wanted: str, connections: list[ConnectionRow]) -> tuple[list[str], list[str]]:
    """A select of the user's own active connections of type `wanted` (ids, labels), a blank first."""
    own = [c for c in connections if c["type"] == wanted and c["mine"] and c["status"] == "active"]
    blank = "— choose one —" if own else "— none yet: add one first —"
    return ["", *(c["id"] for c in own)], [blank, *(c["label"] for c in own)]


def setting_fields(schema: dict[str, Any], secret: set[str],
                   connections: list[ConnectionRow] | None = None) -> list[SettingField]:
    """The form of a password type, in the schema's order: `secret` fields (by alias) and those the
    schema marks (format password, writeOnly) masked, enums as selects, integers as numbers, the
    schema's defaults filled in; a field naming another connection (`connectionType` in its
    schema) a select of the user's own active `connections` of that type."""
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    fields = []
    for name, raw in (schema.get("properties") or {}).items():
        resolved = _resolved(raw, defs)
        options = [str(o) for o in resolved.get("enum", [])]
        named = resolved.get("x-labels") or raw.get("x-labels")  # words for the enum's values, in its order
        labels = [str(label) for label in named] if isinstance(named, list) and len(named) == len(options) \
            else options
        if resolved.get("connectionType"):
            kind = "select"
            options, labels = _connection_choices(str(resolved["connectionType"]), connections or [])
        elif name in secret or resolved.get("format") == "password" or resolved.get("writeOnly"):
            kind = "password"
        elif "enum" in resolved:
            kind = "select"
        elif resolved.get("type") in ("integer", "number"):
            kind = "number"
        else:
            kind = "text"
        default = resolved.get("default", raw.get("default"))
        fields.append(SettingField(
            name=name, title=field_title(name, raw), kind=kind,
            default="" if default is None or kind == "password" else str(default),
            options=options, labels=labels, required=name in required,
            description=str(resolved.get("description") or raw.get("description") or ""), error=""))
    return fields


def settings_of(fields: list[SettingField], form: dict[str, Any]) -> dict[str, Any]:
    """What the form sent as the type's settings: empty fields left out (their defaults apply),
    numbers as integers where they are."""
    settings: dict[str, Any] = {}
    for field in fields:
        raw = form.get(field["name"])
        text = raw if isinstance(raw, str) else "" if raw is None else str(raw)
        if field["kind"] != "password":
            text = text.strip()
        if text == "":
            continue
        settings[field["name"]] = int(text) if field["kind"] == "number" and re.fullmatch(r"\d+", text) else text
    return settings


def connection_row(view: ConnectionView, tests: dict[str, tuple[bool, str]], oauth: bool = False) -> ConnectionRow:
    ok, message = tests.get(view.id, (False, ""))
    return ConnectionRow(
        id=view.id, label=view.label, type=view.type, type_label=view.type_label, status=view.status,
        last_error=view.last_error or "", mandate=view.mandate_name, owner="you" if view.mine else view.owner_name,
        mine=view.mine, shared=view.shared, may_share=view.may_share, may_delete=view.may_delete,
        tested=str(view.settings.get("tested") or ""), test_ok=ok, test_message=message,
        may_reconnect=oauth and view.mine and view.status in ("expired", "error"))


def _consent_url(session, user, type_id: str, label: str | None, mandate_id: str | None,
                 connection_id: str | None = None) -> str:
    """The one-time address (a ticket, two minutes) that starts the consent at the provider for
    this user, made server-side: the browser is sent there (it carries no bearer token). With
    `connection_id`, the consent renews that connection of theirs."""
    try:
        from backend.connectors.oauth import OAuthConsents  # the OAuth connectors (Microsoft 365)
    except ImportError:
        raise InvalidInput([FieldError("type", "connecting by consent is not installed in this build")]) from None
    return OAuthConsents(AccessContext(session, user)).ticket(type_id, mandate_id, label, connection_id).url


class ConnectionsState(RenameMixin, PageMixin, AuthState):
    """The user's connections, the types they can add, the open add form and the delete question."""

    connections: list[ConnectionRow] = []
    types: list[TypeCard] = []
    mandates: list[MandateOption] = []
    form_type: str = ""
    form_type_label: str = ""
    form_fields: list[SettingField] = []
    form_label_error: str = ""
    form_error: str = ""
    form_revision: int = 0
    form_busy: bool = False
    testing_id: str = ""
    delete_id: str = ""
    delete_label: str = ""
    result_notice: str = ""
    result_error: str = ""

    _schemas: dict[str, dict[str, Any]] = {}
    _tests: dict[str, tuple[bool, str]] = {}

    # --- loading --------------------------------------------------------------------------------

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            self._load_navigation(session, user)
            door = _door(session, user)
            kinds = door.types()
            views = door.list()
            access = AccessContext(session, user)
            self.mandates = [MandateOption(id=m.id, name=m.name) for m in access.visible_mandates()
                             if access.is_member(m.id)]
        self._schemas = {t.id: t.settings_schema or {} for t in kinds}
        self.types = [self._card(t) for t in kinds]
        oauth = {t.id for t in kinds if t.auth == "oauth"}
        consent = {t.id for t in kinds if t.consent}
        self.connections = [connection_row(v, self._tests, v.type in oauth or (
            v.type in consent and bool(v.settings.get("consented")))) for v in views]
        self.loaded = True

    @staticmethod
    def _card(kind: TypeView) -> TypeCard:
        return TypeCard(id=kind.id, label=kind.label, description=kind.description, auth=kind.auth,
                        unavailable=kind.unavailable or "", consent=kind.consent)

    def _query(self, name: str) -> str:
        return str(self.router.url.query_parameters.get(name) or "").strip()[:500]

    @rx.event
    @requires_door(Connections.list)
    def load(self):
        """on_load: the connections and types; `?connected=<id>` / `?error=<message>` (the end of a
        consent at the provider) as notices."""
        self.error = self.notice = ""
        self.form_type, self.delete_id, self.rename_id, self.testing_id = "", "", "", ""
        self._tests = {}
        event = self._reload()
        connected, failed = self._query("connected"), self._query("error")
        self.result_error = f"The connection was not made: {failed}" if failed else ""
        self.result_notice = ""
        if connected:
            found = next((c for c in self.connections if c["id"] == connected), None)
            self.result_notice = f"Connected '{found['label']}' ({found['type_label']})." if found else \
                "The connection was made."
        return event

    # --- adding ---------------------------------------------------------------------------------

    @rx.event
    @requires("ui")
    def open_form(self, type_id: str):
        """Show the settings form of a password type."""
        card = next((t for t in self.types if t["id"] == type_id and t["auth"] == "password"), None)
        if card is None:
            return
        kind = connection_type(type_id)
        model = kind.settings_model
        secret = {model.model_fields[n].alias or n for n in kind.secret_fields} if model else set()
        self.form_type, self.form_type_label = card["id"], card["label"]
        self.form_fields = setting_fields(self._schemas.get(type_id, {}), secret, self.connections)
        self.form_label_error = self.form_error = ""
        self.form_revision += 1

    @rx.event
    @requires("ui")
    def close_form(self):
        self.form_type, self.form_fields, self.form_label_error, self.form_error = "", [], "", ""

    def _show_problems(self, exc: InvalidInput) -> None:
        """Each problem under its field; the outside server's answer and the rest under the form."""
        by_field: dict[str, str] = {}
        general: list[str] = []
        for problem in exc.errors:
            if problem.field.startswith("settings."):
                name = problem.field.removeprefix("settings.").split(".")[0]
                by_field[name] = problem.message[:1].upper() + problem.message[1:]
            elif problem.field == "label":
                self.form_label_error = problem.message
            else:
                general.append(problem.message)
        known = {f["name"] for f in self.form_fields}
        general += [f"{name}: {message}" for name, message in by_field.items() if name not in known]
        self.form_fields = [{**f, "error": by_field.get(f["name"], "")} for f in self.form_fields]
        self.form_error = " ".join(m[:1].upper() + m[1:] for m in general)

    @rx.event
    @requires_door(Connections.create)
    def create_connection(self, form: dict):
        """Test the typed settings live and store the connection when the outside system accepts them."""
        type_id = self.form_type
        if not type_id:
            return
        settings = settings_of(self.form_fields, form)
        label = str(form.get("label") or "").strip() or \
            (f"{settings['username']} ({self.form_type_label})" if settings.get("username") else self.form_type_label)
        mandate_id = str(form.get("mandate") or "") or None
        self.form_fields = [{**f, "error": ""} for f in self.form_fields]
        self.form_label_error = self.form_error = ""
        self.form_busy = True
        yield
        created: dict[str, ConnectionView] = {}
        try:
            with self._user_session() as (session, user):
                created["view"] = _door(session, user).create(type_id, label, settings, mandate_id)
        except NotSignedIn:
            self.form_busy = False
            yield self._signed_out()
            return
        except InvalidInput as exc:
            self._show_problems(exc)
        except DomainError as exc:
            self.form_error = user_message(exc)
        self.form_busy = False
        if "view" in created:
            view = created["view"]
            self.form_type, self.form_fields = "", []
            event = self._reload()
            self.notice = f"Connected '{view.label}': {view.settings.get('tested') or 'the test passed'}."
            yield event

    def _to_consent(self, type_id: str, label: str | None, mandate_id: str | None, connection_id: str | None):
        """The event that sends the browser to the consent (or None, `error` saying why not)."""
        self.error = self.notice = self.result_notice = self.result_error = ""
        try:
            with self._user_session() as (session, user):
                url = _consent_url(session, user, type_id, label, mandate_id, connection_id)
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
            return None
        # A full navigation: with `make run` the start address is on the UI's own host, where
        # rx.redirect would only move the single-page app's router (its 404 page).
        return rx.call_script(f"window.location.assign({json.dumps(url)})")

    @rx.event
    @requires("authenticated")
    def connect_oauth(self, form: dict):
        """Start the consent at the provider for a type connected by OAuth (msft)."""
        type_id = str(form.get("type") or "")
        if not any(t["id"] == type_id and t["consent"] for t in self.types):
            self.error = f"'{type_id}' is not connected by consent."
            return None
        return self._to_consent(type_id, str(form.get("label") or "").strip() or None,
                                str(form.get("mandate") or "") or None, None)

    @rx.event
    @requires("authenticated")
    def reconnect(self, connection_id: str):
        """Consent again for one's own OAuth connection that expired or failed: it is renewed."""
        found = next((c for c in self.connections if c["id"] == connection_id and c["may_reconnect"]), None)
        if found is None:
            self.error = "Only its owner can reconnect an expired connection."
            return None
        return self._to_consent(found["type"], None, None, connection_id)

    # --- each connection ------------------------------------------------------------------------

    @rx.event
    @requires_door(Connections.test)
    def test_connection(self, connection_id: str):
        """Test a connection live; its status and the result show in its row."""
        self.testing_id = connection_id
        yield

        def test(session, user) -> None:
            result = _door(session, user).test(connection_id)
            self._tests = {**self._tests, connection_id: (result.ok, result.message)}

        _ok, event = self._attempt(test)
        self.testing_id = ""
        yield event

    @rx.event
    @requires_door(Connections.rename)
    def save_rename(self):
        """Give the connection being renamed its new label."""
        connection_id, label = self.rename_id, self.rename_value
        ok, event = self._attempt(lambda session, user: _door(session, user).rename(connection_id, label),
                                  success=f"Renamed to '{label.strip()}'.")
        if ok:
            self.rename_id = ""
        return event

    @rx.event
    @requires_door(Connections.share)
    def set_shared(self, connection_id: str, shared: bool):
        """Share a connection with every member of its mandate, or stop sharing it."""
        label = next((c["label"] for c in self.connections if c["id"] == connection_id), "")
        _ok, event = self._attempt(
            lambda session, user: _door(session, user).share(connection_id, bool(shared)),
            success=f"'{label}' is now shared with its mandate." if shared else f"'{label}' is no longer shared.")
        return event

    @rx.event
    @requires("ui")
    def ask_delete(self, connection_id: str, label: str):
        self.delete_id, self.delete_label = connection_id, label

    @rx.event
    @requires("ui")
    def cancel_delete(self):
        self.delete_id, self.delete_label = "", ""

    @rx.event
    @requires_door(Connections.delete)
    def confirm_delete(self):
        """Delete the connection the dialog asked about, with its credentials."""
        connection_id, label = self.delete_id, self.delete_label
        self.delete_id = ""
        _ok, event = self._attempt(lambda session, user: _door(session, user).delete(connection_id),
                                   success=f"Deleted '{label}'.")
        return event
