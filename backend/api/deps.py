"""Request-scoped dependencies: the database session and the authenticated user."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from sqlmodel import Session

from backend.auth import token_and_user
from backend.db import session_scope
from backend.db.models import AuthToken, User


def db_session() -> Iterator[Session]:
    """One transaction per request: committed on success, rolled back on error."""
    with session_scope() as session:
        yield session


# scope="function": commit before the response is sent. With FastAPI's default ("request") the
# commit ran after the client had its answer, so a token from /api/auth/login could be refused
# by the very next request, and a failing commit could follow a success response.
DbSession = Annotated[Session, Depends(db_session, scope="function")]


def bearer_token(request: Request) -> str | None:
    """The token of an `Authorization: Bearer …` header."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


# What a token narrowed to one feature instance may still reach outside that instance's routes.
_INSTANCE_TOKEN_ROUTES = {("GET", "/api/me"), ("POST", "/api/auth/logout")}
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def current_user(request: Request, session: DbSession) -> User:
    """The user the bearer token belongs to; 401 without a valid one, 403 where the token's
    narrowing (``AuthToken.instance_id``, ``read_only``) does not reach."""
    found = token_and_user(session, bearer_token(request))
    if found is None:
        raise HTTPException(
            status_code=401,
            detail="missing, expired or revoked bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    token, user = found
    _check_narrowing(request, token)
    return user


def _check_narrowing(request: Request, token: AuthToken) -> None:
    """A read-only token reads (GET) and nothing else; a token narrowed to one instance reaches
    that instance's routes (`…/{instanceId}/…`) and /api/me, nothing of other instances, the
    mandate or the platform. Login tokens are never narrowed."""
    method = request.method.upper()
    if token.read_only and method not in _SAFE_METHODS:
        raise HTTPException(status_code=403, detail="this API token is read-only: it may only read (GET)")
    if token.instance_id is None:
        return
    asked = request.path_params.get("instanceId")
    route = getattr(request.scope.get("route"), "path", request.url.path)
    if asked == token.instance_id or (asked is None and (method, route) in _INSTANCE_TOKEN_ROUTES):
        return
    raise HTTPException(status_code=403, detail=f"this API token is limited to feature instance {token.instance_id}")


CurrentUser = Annotated[User, Depends(current_user)]
