"""REST adapter of the McpServers door (DESIGN §8): /api/mandates/{mandateId}/mcp-servers …

The door (backend/mcp/servers.py) owns rights, the live listing of tools, sealing and the RBAC
rules of who may use a server; these routes only translate. Answers never carry a header value
or secret: `headerNames` and `hasOAuth` only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Response
from pydantic import Field

from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import CamelModel, StrictCamelModel
from backend.mcp.servers import McpServers
from backend.rbac.access import AccessContext

router = APIRouter(prefix="/api/mandates/{mandateId}/mcp-servers", tags=["mcp-servers"])
MandateId = Annotated[str, Path(alias="mandateId", max_length=32)]
ServerId = Annotated[str, Path(alias="serverId", max_length=32)]


class McpOAuthIn(StrictCamelModel):
    """OAuth 2.0 client credentials: a token is fetched from `tokenUrl` and sent as bearer."""

    token_url: str = Field(max_length=2000)
    client_id: str = Field(max_length=8000)
    client_secret: str = Field(max_length=8000)
    scope: str | None = Field(None, max_length=8000)


class McpServerCreate(StrictCamelModel):
    """A server to register; its tools are listed first (422 when it cannot be reached)."""

    name: str = Field(max_length=100, description="^[a-z0-9][a-z0-9-]{0,29}$, unique in the mandate")
    url: str = Field(max_length=2000, description="the Streamable HTTP endpoint (http or https)")
    description: str | None = Field(None, max_length=1000)
    headers: dict[str, str] | None = Field(None, description="sent with every request; sealed, never returned")
    oauth: McpOAuthIn | None = None
    roles: list[str] | None = Field(None, max_length=100, description="mandate roles that may use it (default: admin)")


class McpRolesIn(StrictCamelModel):
    roles: list[str] = Field(max_length=100)


class McpToolOut(CamelModel):
    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool


class McpServerOut(CamelModel):
    """A server as the caller may see it; url, headerNames, hasOAuth, roles and lastError only for
    who manages the mandate's servers."""

    id: str
    mandate_id: str
    name: str
    toolbox_id: str
    description: str
    status: str
    tools: list[McpToolOut]
    tools_refreshed_at: datetime | None
    url: str | None
    header_names: list[str] | None
    has_oauth: bool | None = Field(alias="hasOAuth")
    roles: list[str] | None
    last_error: str | None
    may_manage: bool


class McpTestOut(CamelModel):
    ok: bool
    message: str


def _door(user, session, mandate_id: str) -> McpServers:
    return McpServers(AccessContext(session, user), mandate_id)


@router.get("", response_model=list[McpServerOut], **declared_by(McpServers.list))
def list_servers(mandate_id: MandateId, user: CurrentUser, session: DbSession) -> list[McpServerOut]:
    """The mandate's servers the caller manages or may use."""
    return [McpServerOut.model_validate(s) for s in _door(user, session, mandate_id).list()]


@router.post("", status_code=201, response_model=McpServerOut, **declared_by(McpServers.register))
def register_server(mandate_id: MandateId, body: McpServerCreate, user: CurrentUser,
                    session: DbSession) -> McpServerOut:
    """Register a server: 422 naming `url`, `headers` or `oauth` when its tools cannot be listed."""
    oauth = body.oauth.model_dump(by_alias=True, exclude_none=True) if body.oauth else None
    return McpServerOut.model_validate(_door(user, session, mandate_id).register(
        body.name, body.url, body.description, body.headers, oauth, body.roles))


@router.get("/{serverId}", response_model=McpServerOut, **declared_by(McpServers.get))
def get_server(mandate_id: MandateId, server_id: ServerId, user: CurrentUser, session: DbSession) -> McpServerOut:
    return McpServerOut.model_validate(_door(user, session, mandate_id).get(server_id))


@router.delete("/{serverId}", status_code=204, **declared_by(McpServers.delete))
def delete_server(mandate_id: MandateId, server_id: ServerId, user: CurrentUser, session: DbSession) -> Response:
    """Remove the server, its credentials and its rules."""
    _door(user, session, mandate_id).delete(server_id)
    return Response(status_code=204)


@router.post("/{serverId}/test", response_model=McpTestOut, **declared_by(McpServers.test))
def test_server(mandate_id: MandateId, server_id: ServerId, user: CurrentUser, session: DbSession) -> McpTestOut:
    """Ask the server for its tools, live; its status follows."""
    return McpTestOut.model_validate(_door(user, session, mandate_id).test(server_id))


@router.post("/{serverId}/refresh", response_model=McpServerOut, **declared_by(McpServers.refresh))
def refresh_server(mandate_id: MandateId, server_id: ServerId, user: CurrentUser,
                   session: DbSession) -> McpServerOut:
    """List the server's tools again and keep them (on failure the old ones stay; status says why)."""
    return McpServerOut.model_validate(_door(user, session, mandate_id).refresh(server_id))


@router.put("/{serverId}/roles", response_model=McpServerOut, **declared_by(McpServers.set_roles))
def set_server_roles(mandate_id: MandateId, server_id: ServerId, body: McpRolesIn, user: CurrentUser,
                     session: DbSession) -> McpServerOut:
    """Choose the mandate roles that may use the server's tools."""
    return McpServerOut.model_validate(_door(user, session, mandate_id).set_roles(server_id, body.roles))
