"""REST adapter of the Connections door (DESIGN §8): /api/connections …

The door (backend/connectors/interface.py) owns rights, testing and sealing; these routes only
translate. The OAuth start and callback routes live with the OAuth connector code.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import ConnectionCreate, ConnectionOut, ConnectionPatch, ConnectionTestOut, ConnectionTypeOut
from backend.connectors.interface import Connections
from backend.rbac.access import AccessContext

router = APIRouter(prefix="/api/connections", tags=["connections"])
ConnectionId = Annotated[str, Path(alias="connectionId", max_length=32)]


def _door(user, session) -> Connections:
    return Connections(AccessContext(session, user))


@router.get("/types", response_model=list[ConnectionTypeOut], **declared_by(Connections.types))
def list_types(user: CurrentUser, session: DbSession) -> list[ConnectionTypeOut]:
    """The kinds of connection this installation offers and what each needs."""
    return [ConnectionTypeOut.model_validate(t) for t in _door(user, session).types()]


@router.get("", response_model=list[ConnectionOut], **declared_by(Connections.list))
def list_connections(user: CurrentUser, session: DbSession) -> list[ConnectionOut]:
    """The caller's connections and those shared in their mandates (never any credentials)."""
    return [ConnectionOut.model_validate(c) for c in _door(user, session).list()]


@router.post("", status_code=201, response_model=ConnectionOut, **declared_by(Connections.create))
def create_connection(body: ConnectionCreate, user: CurrentUser, session: DbSession) -> ConnectionOut:
    """A connection of a password type (imap …), tested live first: 422 naming `settings` and what
    the outside system said when the test fails (nothing is stored then)."""
    return ConnectionOut.model_validate(
        _door(user, session).create(body.type, body.label, body.settings, body.mandate_id))


@router.get("/{connectionId}", response_model=ConnectionOut, **declared_by(Connections.get))
def get_connection(connection_id: ConnectionId, user: CurrentUser, session: DbSession) -> ConnectionOut:
    return ConnectionOut.model_validate(_door(user, session).get(connection_id))


@router.post("/{connectionId}/test", response_model=ConnectionTestOut, **declared_by(Connections.test))
def test_connection(connection_id: ConnectionId, user: CurrentUser, session: DbSession) -> ConnectionTestOut:
    """Test the connection live; its status follows the result."""
    return ConnectionTestOut.model_validate(_door(user, session).test(connection_id))


@router.patch("/{connectionId}", response_model=ConnectionOut,
              **declared_by(Connections.rename, Connections.share))
def patch_connection(connection_id: ConnectionId, body: ConnectionPatch, user: CurrentUser,
                     session: DbSession) -> ConnectionOut:
    """Rename it (its owner) and/or share it with the mandate (who may share there)."""
    door = _door(user, session)
    view = door.get(connection_id)
    if body.label is not None:
        view = door.rename(connection_id, body.label)
    if body.shared is not None:
        view = door.share(connection_id, body.shared)
    return ConnectionOut.model_validate(view)


@router.delete("/{connectionId}", status_code=204, **declared_by(Connections.delete))
def delete_connection(connection_id: ConnectionId, user: CurrentUser, session: DbSession) -> Response:
    """Delete it: its owner, or who may share in its mandate for a shared one."""
    _door(user, session).delete(connection_id)
    return Response(status_code=204)
