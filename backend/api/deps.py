"""Request-scoped dependencies: the database session and the authenticated user."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from sqlmodel import Session

from backend.auth import user_for_token
from backend.db import session_scope
from backend.db.models import User


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


def current_user(request: Request, session: DbSession) -> User:
    """The user the bearer token belongs to; 401 without a valid one."""
    user = user_for_token(session, bearer_token(request))
    if user is None:
        raise HTTPException(
            status_code=401,
            detail="missing, expired or revoked bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return user


CurrentUser = Annotated[User, Depends(current_user)]
