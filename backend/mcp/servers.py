"""The McpServers door: a mandate's external MCP servers, each the toolbox `mcp:<name>` (issue 19).

Who holds MANAGE_MCP_SERVERS in the mandate (its admins) registers servers (tested first: nothing
is stored unless the server answers its tool list), tests them, refreshes their tools, chooses
the mandate roles that may use them and deletes them. Every member sees the servers whose
toolbox their mandate roles allow (name, description, tools), nothing else; a mandate the caller
does not belong to, and a server of another mandate, are "not found".

Who may use a server is written in the RBAC model itself: one RESOURCE rule per mandate role on
`resource.toolbox.mcp:<name>.*`, allowing it for the chosen roles and refusing it for the others,
so `may_run` (backend/actions/executor.py) enforces it on every call of its tools. Credentials
(headers, OAuth client credentials) are sealed at rest and never leave the door: views carry
header names and `has_oauth` only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import event
from sqlmodel import select

from backend.actions.toolboxes import MCP_TOOLBOX_PREFIX
from backend.crypto import seal
from backend.db.models import AccessRule, McpServer, Role, utcnow
from backend.errors import FieldError, InvalidInput, NotFound
from backend.mcp.client import McpClientError, ServerAccess, access_of, list_tools
from backend.mcp.toolboxes import forget
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, guarded
from backend.rbac.rights import RESOURCE
from backend.rbac.templates import MANAGE_MCP_SERVERS

NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,29}$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
MAX_HEADERS = 20
MAX_HEADER_VALUE = 8000
MAX_URL = 2000
MAX_DESCRIPTION = 1000
MAX_TOOLS = 500
DEFAULT_ROLES = ("admin",)


def toolbox_item(name: str) -> str:
    """The RESOURCE item (a prefix rule) that allows the tools of server `name`."""
    return f"resource.toolbox.{MCP_TOOLBOX_PREFIX}{name}.*"


@dataclass(frozen=True)
class McpToolView:
    """One tool of a server as its server last listed it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool


@dataclass(frozen=True)
class McpServerView:
    """A server as the caller may see it: never a header value or secret.

    `url`, `header_names`, `has_oauth`, `roles` and `last_error` are given to who manages
    the mandate's servers only (None otherwise).
    """

    id: str
    mandate_id: str
    name: str
    toolbox_id: str
    description: str
    status: str
    tools: list[McpToolView]
    tools_refreshed_at: datetime | None
    url: str | None
    header_names: list[str] | None
    has_oauth: bool | None
    roles: list[str] | None
    last_error: str | None
    may_manage: bool


@dataclass(frozen=True)
class McpTestResult:
    """The answer of a live test."""

    ok: bool
    message: str


class McpServers(Door):
    """The external MCP servers of one mandate, as one user may see and manage them."""

    def __init__(self, access: AccessContext, mandate_id: str):
        self.access = access
        self.session = access.session
        self.mandate_id = access.require_mandate(mandate_id).id

    # --- reading --------------------------------------------------------------------------------

    @guarded("authenticated")
    def list(self) -> list[McpServerView]:
        """The servers the caller manages (all of the mandate's) or may use, by name."""
        rows = self.session.exec(select(McpServer).where(McpServer.mandate_id == self.mandate_id)
                                 .order_by(McpServer.name)).all()
        return [self._view(row) for row in rows if self._may_see(row)]

    @guarded("authenticated")
    def get(self, server_id: str) -> McpServerView:
        """One server the caller may see, else NotFound."""
        return self._view(self._visible(server_id))

    # --- managing -------------------------------------------------------------------------------

    @guarded(RESOURCE, MANAGE_MCP_SERVERS)
    def register(self, name: Any, url: Any, description: Any = None, headers: Any = None, oauth: Any = None,
                 roles: Any = None) -> McpServerView:
        """Register a server: its tools are listed first, and nothing is stored when that fails
        (422 naming `url`, `headers` or `oauth` and what went wrong). `roles` (default: admin)
        are the mandate roles that may use it."""
        errors: list[FieldError] = []
        name = _checked(errors, "name", _name, name)
        url = _checked(errors, "url", _url, url)
        description = _checked(errors, "description", _description, description)
        headers = _checked(errors, "headers", _headers, headers)
        oauth = _checked(errors, "oauth", _oauth, oauth)
        role_ids = _checked(errors, "roles", self._role_ids, list(DEFAULT_ROLES) if roles is None else roles)
        if not errors and self._by_name(name) is not None:
            errors.append(FieldError("name", f"a server named '{name}' is already registered in this mandate"))
        if errors:
            raise InvalidInput(errors)
        access = ServerAccess(name, url, headers or {}, oauth)
        tools = self._listed(access, "oauth" if oauth else "headers")
        secret = {**({"headers": headers} if headers else {}), **({"oauth": oauth} if oauth else {})}
        row = McpServer(mandate_id=self.mandate_id, name=name, url=url, description=description,
                        auth_kind="oauth" if oauth else ("headers" if headers else "none"),
                        secret=seal(json.dumps(secret)) if secret else "", tools=tools,
                        tools_refreshed_at=utcnow(), status="active", sys_created_by=self.access.user.id)
        self.session.add(row)
        self.session.flush()
        self._write_rules(name, role_ids)
        self._changed()
        return self._view(row)

    @guarded(RESOURCE, MANAGE_MCP_SERVERS)
    def test(self, server_id: str) -> McpTestResult:
        """Ask the server for its tools, live; its status and last error follow (tools unchanged)."""
        row = self._visible(server_id)
        try:
            tools = list_tools(access_of(row))
        except McpClientError as exc:
            self._mark(row, "error", str(exc))
            return McpTestResult(False, str(exc))
        self._mark(row, "active", None)
        return McpTestResult(True, f"MCP server '{row.name}' answered with {len(tools)} tools")

    @guarded(RESOURCE, MANAGE_MCP_SERVERS)
    def refresh(self, server_id: str) -> McpServerView:
        """List the server's tools again and keep them. When that fails the tools listed before
        are kept and the answer says why (`status` "error", `lastError`)."""
        row = self._visible(server_id)
        try:
            tools = list_tools(access_of(row))[:MAX_TOOLS]
        except McpClientError as exc:
            self._mark(row, "error", str(exc))
            return self._view(row)
        row.tools = tools
        row.tools_refreshed_at = utcnow()
        self._mark(row, "active", None)
        self._changed()
        return self._view(row)

    @guarded(RESOURCE, MANAGE_MCP_SERVERS)
    def set_roles(self, server_id: str, roles: Any) -> McpServerView:
        """Choose the mandate roles that may use the server (every other one may not)."""
        row = self._visible(server_id)
        errors: list[FieldError] = []
        role_ids = _checked(errors, "roles", self._role_ids, roles)
        if errors:
            raise InvalidInput(errors)
        self._write_rules(row.name, role_ids)
        row.lock_version += 1
        row.sys_modified_at = utcnow()
        self.session.add(row)
        self.session.flush()
        return self._view(row)

    @guarded(RESOURCE, MANAGE_MCP_SERVERS)
    def delete(self, server_id: str) -> None:
        """Remove the server, its credentials and its rules; its tools are gone from the catalogue."""
        row = self._visible(server_id)
        for rule in self._rules(row.name):
            self.session.delete(rule)
        self.session.delete(row)
        self.session.flush()
        self._changed()

    # --- helpers --------------------------------------------------------------------------------

    def _changed(self) -> None:
        """This mandate's catalogue is looked up afresh, now and again once the change commits."""
        forget(self.mandate_id)
        event.listen(self.session, "after_commit", lambda _session: forget(self.mandate_id), once=True)

    def _may_manage(self) -> bool:
        return self.access.resolve(RESOURCE, MANAGE_MCP_SERVERS, self.mandate_id).allowed

    def _may_see(self, row: McpServer) -> bool:
        item = f"resource.toolbox.{MCP_TOOLBOX_PREFIX}{row.name}"
        return self._may_manage() or self.access.resolve(RESOURCE, item, self.mandate_id).allowed

    def _visible(self, server_id: Any) -> McpServer:
        row = self.session.get(McpServer, server_id) if isinstance(server_id, str) and server_id else None
        if row is None or row.mandate_id != self.mandate_id or not self._may_see(row):
            raise NotFound(f"MCP server {server_id or '(none)'} not found")
        return row

    def _by_name(self, name: str) -> McpServer | None:
        return self.session.exec(select(McpServer).where(McpServer.mandate_id == self.mandate_id,
                                                         McpServer.name == name)).first()

    def _listed(self, access: ServerAccess, credentials_field: str) -> list[dict[str, Any]]:
        try:
            return list_tools(access)[:MAX_TOOLS]
        except McpClientError as exc:
            refused = "refused the credentials" in str(exc) or "OAuth token" in str(exc)
            field = credentials_field if refused else "url"
            raise InvalidInput([FieldError(field, f"the server was not registered: {exc}")]) from None

    def _mark(self, row: McpServer, status: str, error: str | None) -> None:
        row.status, row.last_error = status, error
        row.sys_modified_at = utcnow()
        row.lock_version += 1
        self.session.add(row)
        self.session.flush()

    def _mandate_roles(self) -> list[Role]:
        return list(self.session.exec(select(Role).where(Role.mandate_id == self.mandate_id,
                                                         Role.feature_instance_id.is_(None))).all())

    def _role_ids(self, roles: Any) -> set[str]:
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise ValueError("must be a list of mandate role names")
        known = {role.role_label: role.id for role in self._mandate_roles()}
        unknown = [r for r in roles if r not in known]
        if unknown:
            raise ValueError(f"unknown mandate role '{unknown[0]}' (the mandate's roles: {', '.join(sorted(known))})")
        return {known[r] for r in roles}

    def _rules(self, name: str) -> list[AccessRule]:
        role_ids = [role.id for role in self._mandate_roles()]
        return list(self.session.exec(select(AccessRule).where(
            AccessRule.role_id.in_(role_ids), AccessRule.context == RESOURCE,
            AccessRule.item == toolbox_item(name))).all())

    def _write_rules(self, name: str, allowed: set[str]) -> None:
        """One RESOURCE rule per mandate role on the server's item: view for `allowed`, none else."""
        existing = {rule.role_id: rule for rule in self._rules(name)}
        for role in self._mandate_roles():
            rule = existing.get(role.id) or AccessRule(role_id=role.id, context=RESOURCE, item=toolbox_item(name))
            rule.view = role.id in allowed
            self.session.add(rule)
        self.session.flush()
        self.access.forget()

    def _view(self, row: McpServer) -> McpServerView:
        manage = self._may_manage()
        secret = access_of(row) if manage else None
        roles = None
        if manage:
            labels = {role.id: role.role_label for role in self._mandate_roles()}
            roles = sorted(labels[rule.role_id] for rule in self._rules(row.name) if rule.view)
        return McpServerView(
            id=row.id, mandate_id=row.mandate_id, name=row.name, toolbox_id=f"{MCP_TOOLBOX_PREFIX}{row.name}",
            description=row.description, status=row.status, tools=[_tool_view(t) for t in row.tools or []],
            tools_refreshed_at=row.tools_refreshed_at, url=row.url if manage else None,
            header_names=sorted(secret.headers) if secret else None,
            has_oauth=bool(secret.oauth) if secret else None, roles=roles,
            last_error=row.last_error if manage else None, may_manage=manage)


def _tool_view(tool: dict[str, Any]) -> McpToolView:
    annotations = tool.get("annotations") or {}
    return McpToolView(str(tool.get("name", "")), str(tool.get("description") or ""),
                       tool.get("inputSchema") or {"type": "object"}, annotations.get("readOnlyHint") is True)


# --- input checks (each raises ValueError with the message for its field) --------------------


def _checked(errors: list[FieldError], field: str, check: Any, value: Any) -> Any:
    try:
        return check(value)
    except ValueError as exc:
        errors.append(FieldError(field, str(exc)))
        return None


def _name(value: Any) -> str:
    if not isinstance(value, str) or not NAME.match(value):
        raise ValueError("must be 1 to 30 lower-case letters, digits or '-', starting with a letter or digit")
    return value


def _url(value: Any, what: str = "the server's Streamable HTTP address") -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be {what} (http or https)")
    value = value.strip()
    if len(value) > MAX_URL:
        raise ValueError(f"must be at most {MAX_URL} characters")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises for a port that is no number
    except ValueError:
        raise ValueError(f"'{value[:100]}' is no valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http or https URL with a host, not '{value[:100]}'")
    if parts.username or parts.password:
        raise ValueError("must not carry credentials: give them as headers or OAuth client credentials")
    if any(c in value for c in "\r\n\t "):
        raise ValueError("must not contain spaces or line breaks")
    return value


def _description(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_DESCRIPTION:
        raise ValueError(f"must be a text of at most {MAX_DESCRIPTION} characters")
    return value.strip()


def _headers(value: Any) -> dict[str, str] | None:
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise ValueError("must be an object of header names and values")
    if len(value) > MAX_HEADERS:
        raise ValueError(f"at most {MAX_HEADERS} headers")
    for key, text in value.items():
        if not HEADER_NAME.match(key):
            raise ValueError(f"'{key[:100]}' is no valid header name")
        if not isinstance(text, str) or len(text) > MAX_HEADER_VALUE or any(c in text for c in "\r\n\0"):
            raise ValueError(f"the value of {key} must be one line of text, at most {MAX_HEADER_VALUE} characters")
    return dict(value)


def _oauth(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("must be an object {tokenUrl, clientId, clientSecret, scope?}")
    unknown = set(value) - {"tokenUrl", "clientId", "clientSecret", "scope"}
    if unknown:
        raise ValueError(f"unknown field '{sorted(unknown)[0]}' (expected tokenUrl, clientId, clientSecret, scope)")
    try:
        token_url = _url(value.get("tokenUrl"), "the token endpoint's address")
    except ValueError as exc:
        raise ValueError(f"tokenUrl {exc}") from None
    found = {"tokenUrl": token_url}
    for key in ("clientId", "clientSecret"):
        text = value.get(key)
        if not isinstance(text, str) or not text or len(text) > MAX_HEADER_VALUE:
            raise ValueError(f"{key} is required (a text)")
        found[key] = text
    scope = value.get("scope")
    if scope is not None:
        if not isinstance(scope, str) or len(scope) > MAX_HEADER_VALUE:
            raise ValueError("scope must be a text")
        found["scope"] = scope
    return found
