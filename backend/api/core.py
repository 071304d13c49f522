"""Platform routes: health, login/logout, the caller's identity, node types, features."""

from __future__ import annotations

import os
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy import text

from backend import __version__
from backend.api.deps import CurrentUser, DbSession, bearer_token
from backend.api.permissions import declared_by, permission
from backend.api.schemas import (
    ApiTokenCreate,
    ApiTokenCreated,
    ApiTokenOut,
    CamelModel,
    HealthResponse,
    LoginRequest,
    LoginResponse,
)
from backend.auth import LoginFailed, LoginThrottled, login, revoke_token
from backend.db import session_scope
from backend.features.registry import get_features
from backend.rbac.access import AccessContext
from backend.tenancy import instance_role_labels
from backend.tokens import ApiTokens

router = APIRouter(prefix="/api")


@router.get("/health", response_model=HealthResponse, tags=["platform"], **permission("public"))
def health() -> JSONResponse:
    """Liveness and database reachability; no authentication.

    `pid` names the process that answered: behind one port several backend workers answer in turn.
    """
    features = sorted(get_features())
    try:
        with session_scope() as session:
            session.execute(text("SELECT 1"))
        db = "ok"
    except Exception as exc:  # noqa: BLE001 - any failure means the database is not usable
        db = f"error: {type(exc).__name__}"
    body = HealthResponse(status="ok" if db == "ok" else "degraded", db=db, version=__version__, features=features,
                          pid=os.getpid())
    return JSONResponse(body.model_dump(), status_code=200 if db == "ok" else 503)


@router.post("/auth/login", response_model=LoginResponse, tags=["auth"], **permission("public"))
def auth_login(body: LoginRequest, request: Request, session: DbSession) -> JSONResponse:
    """Exchange username and password for a bearer token.

    Throttling counts per (username, client address) and per client address (`backend.auth`);
    the address is the peer of the connection (``request.client.host``), X-Forwarded-For is not
    believed, so behind a reverse proxy every caller shares the proxy's address.
    """
    try:
        issued = login(session, body.username, body.password,
                       client_address=request.client.host if request.client else None)
    except LoginThrottled as exc:
        return JSONResponse(
            {"detail": str(exc)}, status_code=429, headers={"Retry-After": str(exc.retry_after_seconds)}
        )
    except LoginFailed as exc:
        return JSONResponse({"detail": str(exc)}, status_code=401)
    return JSONResponse(LoginResponse(token=issued.token, user_id=issued.user_id).model_dump(by_alias=True))


@router.post("/auth/logout", status_code=204, tags=["auth"], **permission("authenticated"))
def auth_logout(request: Request, user: CurrentUser, session: DbSession) -> Response:
    """Revoke the token of this request."""
    revoke_token(session, bearer_token(request) or "")
    return Response(status_code=204)


class InstanceInfo(CamelModel):
    id: str
    mandate_id: str
    feature_code: str
    label: str
    roles: list[str]


class MandateInfo(CamelModel):
    id: str
    name: str


class MeResponse(CamelModel):
    id: str
    username: str
    display_name: str | None
    is_sysadmin: bool
    mandates: list[MandateInfo]
    instances: list[InstanceInfo]


@router.get("/me", response_model=MeResponse, tags=["auth"], **permission("authenticated"))
def me(user: CurrentUser, session: DbSession) -> MeResponse:
    """The caller, their mandates and feature instances with their roles."""
    access = AccessContext(session, user)
    mandates = access.visible_mandates()
    instances = access.visible_instances()
    return MeResponse(
        id=user.id,
        username=user.username,
        display_name=user.display_name,
        is_sysadmin=user.is_sysadmin,
        mandates=[MandateInfo(id=m.id, name=m.name) for m in mandates],
        instances=[
            InstanceInfo(
                id=i.id, mandate_id=i.mandate_id, feature_code=i.feature_code, label=i.label,
                roles=instance_role_labels(session, user, i.id),
            )
            for i in instances
        ],
    )


class FeatureInfo(CamelModel):
    code: str
    label: str
    icon: str


@router.get("/features", response_model=list[FeatureInfo], tags=["platform"], **permission("authenticated"))
def features(user: CurrentUser) -> list[FeatureInfo]:
    """The feature catalogue."""
    return [FeatureInfo(code=f.code, label=f.label, icon=f.icon) for f in get_features().values()]


@router.get("/me/tokens", response_model=list[ApiTokenOut], tags=["auth"], **declared_by(ApiTokens.list))
def list_tokens(user: CurrentUser, session: DbSession) -> list[ApiTokenOut]:
    """The caller's personal API tokens (names and dates; the token text is shown only once)."""
    return [ApiTokenOut.model_validate(t) for t in ApiTokens(AccessContext(session, user)).list()]


@router.post("/me/tokens", status_code=201, response_model=ApiTokenCreated, tags=["auth"],
             **declared_by(ApiTokens.create))
def create_token(body: ApiTokenCreate, user: CurrentUser, session: DbSession) -> ApiTokenCreated:
    """A new named personal API token; copy the token now, it is stored only hashed."""
    row, token = ApiTokens(AccessContext(session, user)).create(body.name, body.instance_id, body.read_only)
    return ApiTokenCreated(id=row.id, name=row.name, sys_created_at=row.sys_created_at, token=token,
                           instance_id=row.instance_id, read_only=row.read_only)


@router.delete("/me/tokens/{tokenId}", status_code=204, tags=["auth"], **declared_by(ApiTokens.revoke))
def revoke_token_route(
    token_id: Annotated[str, Path(alias="tokenId")], user: CurrentUser, session: DbSession
) -> Response:
    """Revoke one of the caller's tokens (404 for anybody else's)."""
    ApiTokens(AccessContext(session, user)).revoke(token_id)
    return Response(status_code=204)
