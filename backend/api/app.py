"""Builds the FastAPI application: core routes, every feature's router, error mapping."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.routing import Route

from backend import __version__
from backend.api.actions import router as actions_router
from backend.api.administration import router as administration_router
from backend.api.agent_approvals import router as agent_approvals_router
from backend.api.catalog import router as catalog_router
from backend.api.connections import router as connections_router
from backend.api.connections_oauth import router as connections_oauth_router
from backend.api.core import router as core_router
from backend.api.input_guard import InputGuard
from backend.api.mcp_servers import router as mcp_servers_router
from backend.api.monitor import router as monitor_router
from backend.api.notifications import router as notifications_router
from backend.api.openapi import install as document_errors
from backend.api.push import router as push_router
from backend.api.sso import router as sso_router
from backend.api.task_links import router as task_links_router
from backend.api.tasks import router as tasks_router
from backend.api.triggers import router as triggers_router
from backend.db.models import ImmutableVersionError
from backend.errors import Conflict, Forbidden, InvalidInput, NotFound
from backend.features.registry import get_features
from backend.mcp.server import PATH as MCP_PATH
from backend.mcp.server import McpEndpoint, lifespan_of
from backend.statemachines import ConcurrentTransition, IllegalTransition

log = logging.getLogger(__name__)


def _field_path(loc: tuple) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path")]
    return ".".join(parts) or "body"


async def _request_validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [{"nodeId": None, "field": _field_path(tuple(e.get("loc", ()))), "message": e.get("msg", "")}
              for e in exc.errors()]
    text = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return JSONResponse({"detail": f"invalid input: {text}", "errors": errors}, status_code=422)


def _handler(status: int):
    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        body: dict = {"detail": str(exc)}
        if isinstance(exc, InvalidInput):
            body["errors"] = [e.as_dict() for e in exc.errors]
        return JSONResponse(body, status_code=status)

    return handle


def create_api() -> FastAPI:
    """The REST API, ready to mount on the Reflex backend or to serve on its own.

    It also serves the MCP server at /mcp (backend/mcp/server.py; not part of the OpenAPI schema),
    `api.state.mcp`, whose `run()` the serving process's lifespan enters: this app's own lifespan
    does (TestClient, uvicorn), backend/runtime.py's `create_app` composes it with the background
    services, and under Reflex (which does not run a mounted app's lifespan) a lifespan task of
    poweron_app/poweron_app.py does.
    """
    mcp = McpEndpoint()
    api = FastAPI(
        title="PowerOn Unified API",
        version=__version__,
        openapi_url="/api/openapi.json",
        docs_url="/api/docs",
        redoc_url=None,
        lifespan=lifespan_of(mcp),
    )
    api.state.mcp = mcp
    # A plain route, so that /mcp itself answers (a mount would redirect it to /mcp/).
    api.router.routes.append(Route(MCP_PATH, endpoint=mcp, methods=["GET", "POST", "DELETE"], include_in_schema=False))
    api.add_middleware(InputGuard)  # JSON bodies: UTF-8, at most 64 levels, no lone surrogates (issue 15)
    api.add_exception_handler(RequestValidationError, _request_validation)
    api.add_exception_handler(InvalidInput, _handler(422))
    api.add_exception_handler(NotFound, _handler(404))
    api.add_exception_handler(Forbidden, _handler(403))
    for conflict in (Conflict, IllegalTransition, ConcurrentTransition, ImmutableVersionError):
        api.add_exception_handler(conflict, _handler(409))
    api.include_router(core_router)
    api.include_router(administration_router)
    api.include_router(catalog_router)
    api.include_router(actions_router)
    api.include_router(sso_router)
    api.include_router(tasks_router)
    api.include_router(task_links_router)
    api.include_router(notifications_router)
    api.include_router(monitor_router)
    api.include_router(triggers_router)
    api.include_router(connections_router)
    api.include_router(connections_oauth_router)
    api.include_router(mcp_servers_router)
    api.include_router(agent_approvals_router)
    api.include_router(push_router)
    for feature in get_features().values():
        if feature.router is not None:
            api.include_router(feature.router, prefix=f"/api/{feature.code}")
    document_errors(api)
    return api
