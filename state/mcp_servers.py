"""The Admin page's "MCP servers" tab: a mandate's external MCP servers (issue 19).

Every read and change goes through the door `backend.mcp.servers.McpServers`, which checks the
signed-in user's rights itself; this mixin of AdminState only keeps what the tab shows and what is
being typed. Credentials typed here go to the door once and are never shown again (the door
answers header names only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import reflex as rx

from backend.errors import FieldError, InvalidInput
from backend.mcp.servers import McpServers, McpServerView
from backend.rbac.access import AccessContext
from state.permissions import requires, requires_door

AUTH_KINDS = ("none", "headers", "oauth")


class McpToolRow(TypedDict):
    name: str
    description: str
    kind: str  # "read" or "write"


class McpServerRow(TypedDict):
    id: str
    name: str
    toolbox_id: str
    url: str
    description: str
    status: str
    last_error: str
    auth: str
    roles: str
    tool_count: int
    tools: list[McpToolRow]
    refreshed: str


def _row(view: McpServerView) -> McpServerRow:
    if view.has_oauth:
        auth = "OAuth client credentials"
    elif view.header_names:
        auth = "headers: " + ", ".join(view.header_names)
    else:
        auth = "none"
    return McpServerRow(
        id=view.id, name=view.name, toolbox_id=view.toolbox_id, url=view.url or "", description=view.description,
        status=view.status, last_error=view.last_error or "", auth=auth, roles=", ".join(view.roles or []),
        tool_count=len(view.tools),
        tools=[McpToolRow(name=t.name, description=t.description, kind="read" if t.read_only else "write")
               for t in view.tools],
        refreshed=view.tools_refreshed_at.strftime("%Y-%m-%d %H:%M UTC") if view.tools_refreshed_at else "never")


def parse_headers(text: str) -> dict[str, str]:
    """`Name: value` lines (blank lines skipped) as a dict; InvalidInput naming the line otherwise."""
    headers: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip() or not value.strip():
            raise InvalidInput([FieldError("headers", f"line {number}: write it as 'Name: value', "
                                                      "e.g. 'Authorization: Bearer …'")])
        headers[name.strip()] = value.strip()
    return headers


class McpServersMixin(rx.State, mixin=True):
    """The MCP servers of the Admin page's mandate, and the add form and dialogs of the tab."""

    mcp_servers: list[McpServerRow] = []
    mcp_name: str = ""
    mcp_url: str = ""
    mcp_description: str = ""
    mcp_auth: str = "none"
    mcp_headers: str = ""
    mcp_token_url: str = ""
    mcp_client_id: str = ""
    mcp_client_secret: str = ""
    mcp_scope: str = ""
    mcp_roles: list[str] = ["admin"]
    mcp_open_id: str = ""  # the server whose tools are unfolded
    mcp_roles_id: str = ""  # the server whose roles dialog is open
    mcp_roles_name: str = ""
    mcp_roles_selected: list[str] = []
    mcp_delete_id: str = ""
    mcp_delete_name: str = ""

    def _load_mcp_servers(self, access: AccessContext, mandate_id: str) -> None:
        self.mcp_servers = [_row(view) for view in McpServers(access, mandate_id).list()]

    def _mcp(self, work: Callable[[McpServers], Any], success: str = "") -> tuple[bool, Any]:
        mandate_id = self.mandate_id
        return self._attempt(lambda session, user: work(McpServers(AccessContext(session, user), mandate_id)),
                             success)

    # --- the add form -----------------------------------------------------------------------------

    @rx.event
    @requires("ui")
    def set_mcp_field(self, field: str, value: str):
        """Typing in the add form (name, url, description, headers, token url, client id/secret, scope)."""
        if field in ("name", "url", "description", "headers", "token_url", "client_id", "client_secret", "scope"):
            setattr(self, f"mcp_{field}", value)

    @rx.event
    @requires("ui")
    def set_mcp_auth(self, value: str):
        self.mcp_auth = value if value in AUTH_KINDS else "none"

    @rx.event
    @requires("ui")
    def toggle_mcp_role(self, role: str, checked: bool):
        chosen = (set(self.mcp_roles) | {role}) if checked else (set(self.mcp_roles) - {role})
        self.mcp_roles = [r for r in ("admin", "user", "viewer") if r in chosen]

    @rx.event
    @requires_door(McpServers.register)
    def add_mcp_server(self):
        """Register the server: the door lists its tools first and stores nothing when that fails."""
        name = self.mcp_name.strip()
        headers_text = self.mcp_headers if self.mcp_auth == "headers" else ""
        oauth = None
        if self.mcp_auth == "oauth":
            oauth = {"tokenUrl": self.mcp_token_url.strip(), "clientId": self.mcp_client_id.strip(),
                     "clientSecret": self.mcp_client_secret, **({"scope": self.mcp_scope.strip()}
                                                                if self.mcp_scope.strip() else {})}
        registered: list[McpServerView] = []

        def register(door: McpServers) -> None:
            headers = parse_headers(headers_text) if headers_text.strip() else None
            registered.append(door.register(name, self.mcp_url.strip(), self.mcp_description.strip() or None,
                                            headers, oauth, list(self.mcp_roles)))

        ok, event = self._mcp(register)
        if ok and registered:
            self.notice = (f"Registered '{name}' with {len(registered[0].tools)} tools: agents can request the "
                           f"toolbox {registered[0].toolbox_id}, and the editor's palette shows them.")
            self.mcp_name = self.mcp_url = self.mcp_description = self.mcp_headers = ""
            self.mcp_token_url = self.mcp_client_id = self.mcp_client_secret = self.mcp_scope = ""
            self.mcp_auth = "none"
            self.mcp_roles = ["admin"]
        return event

    # --- per server ---------------------------------------------------------------------------------

    @rx.event
    @requires("ui")
    def toggle_mcp_tools(self, server_id: str):
        self.mcp_open_id = "" if self.mcp_open_id == server_id else server_id

    @rx.event
    @requires_door(McpServers.test)
    def test_mcp_server(self, server_id: str, name: str):
        """Ask the server for its tools now; say what it answered."""
        results: list[Any] = []
        ok, event = self._mcp(lambda door: results.append(door.test(server_id)))
        if ok and results:
            if results[0].ok:
                self.notice = results[0].message
            else:
                self.error = f"'{name}' did not answer: {results[0].message}"
        return event

    @rx.event
    @requires_door(McpServers.refresh)
    def refresh_mcp_server(self, server_id: str, name: str):
        """List the server's tools again and keep them (the old ones stay when it fails)."""
        views: list[McpServerView] = []
        ok, event = self._mcp(lambda door: views.append(door.refresh(server_id)))
        if ok and views:
            view = views[0]
            if view.status == "error":
                self.error = f"'{name}' could not be refreshed, its tools are kept as they were: {view.last_error}"
            else:
                self.notice = f"'{name}' now has {len(view.tools)} tools."
        return event

    @rx.event
    @requires("ui")
    def ask_mcp_roles(self, server_id: str, name: str, roles: str):
        self.mcp_roles_id, self.mcp_roles_name = server_id, name
        self.mcp_roles_selected = [r.strip() for r in roles.split(",") if r.strip()]

    @rx.event
    @requires("ui")
    def toggle_mcp_roles_selected(self, role: str, checked: bool):
        chosen = (set(self.mcp_roles_selected) | {role}) if checked else (set(self.mcp_roles_selected) - {role})
        self.mcp_roles_selected = [r for r in ("admin", "user", "viewer") if r in chosen]

    @rx.event
    @requires_door(McpServers.set_roles)
    def save_mcp_roles(self):
        server_id, name, roles = self.mcp_roles_id, self.mcp_roles_name, list(self.mcp_roles_selected)
        self.mcp_roles_id = ""
        shown = ", ".join(roles) or "no role"
        _ok, event = self._mcp(lambda door: door.set_roles(server_id, roles),
                               success=f"'{name}' may now be used by: {shown}.")
        return event

    @rx.event
    @requires("ui")
    def ask_mcp_delete(self, server_id: str, name: str):
        self.mcp_delete_id, self.mcp_delete_name = server_id, name

    @rx.event
    @requires_door(McpServers.delete)
    def confirm_mcp_delete(self):
        server_id, name = self.mcp_delete_id, self.mcp_delete_name
        self.mcp_delete_id = ""
        _ok, event = self._mcp(lambda door: door.delete(server_id),
                               success=f"Removed '{name}': its tools are gone from agents and the palette.")
        return event

    @rx.event
    @requires("ui")
    def mcp_dialog_open_change(self, is_open: bool):
        if not is_open:
            self.mcp_roles_id = self.mcp_delete_id = ""
