"""Single sign-on routes (OpenID Connect, see `backend.sso`); none needs a bearer token.

Browser flow: GET /api/auth/oidc/login → provider → GET /api/auth/oidc/callback →
`{POWERON_UI_URL}/sso?code=…` (the UI trades the one-time code for a token server-side) or
`{POWERON_UI_URL}/login?sso_error=…`. API clients trade the code with POST …/exchange.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse

from backend import sso
from backend.api.permissions import permission
from backend.api.schemas import LoginResponse, StrictCamelModel
from backend.config import get_settings

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/auth/oidc", tags=["auth"])

PUBLIC = permission("public")
STATE_COOKIE = "poweron_oidc_state"
NO_STORE = {"Cache-Control": "no-store"}
UNEXPECTED = "single sign-on failed unexpectedly; the server log has the details"


class SsoStatus(StrictCamelModel):
    enabled: bool


class SsoExchangeRequest(StrictCamelModel):
    code: str


def _not_configured() -> JSONResponse:
    return JSONResponse({"detail": sso.NOT_CONFIGURED_MESSAGE}, status_code=404)


def _redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=302, headers=NO_STORE)


@router.get("", response_model=SsoStatus, **PUBLIC)
def sso_status() -> SsoStatus:
    """Whether single sign-on is configured (the login page shows its button then)."""
    return SsoStatus(enabled=sso.is_enabled())


@router.get("/login", status_code=302, **PUBLIC,
            responses={302: {"description": "to the identity provider"}, 404: {"description": "SSO is off"}})
def sso_login():
    """Start a sign-in: redirect to the identity provider (errors go to the UI login page)."""
    if not sso.is_enabled():
        return _not_configured()
    try:
        start = sso.begin_login()
    except sso.SsoError as exc:
        return _redirect(sso.ui_error_url(str(exc)))
    except Exception:  # noqa: BLE001 - the browser gets a message, never a traceback
        log.exception("single sign-on: starting the sign-in failed")
        return _redirect(sso.ui_error_url(UNEXPECTED))
    response = _redirect(start.url)
    response.set_cookie(
        STATE_COOKIE, start.state, max_age=int(sso.LOGIN_TTL.total_seconds()), path=router.prefix,
        httponly=True, samesite="lax", secure=get_settings().api_url.startswith("https://"),
    )
    return response


@router.get("/callback", status_code=302, **PUBLIC,
            responses={302: {"description": "to the UI: /sso?code=… or /login?sso_error=…"}})
def sso_callback(request: Request, state: str | None = None, code: str | None = None, error: str | None = None):
    """Where the identity provider sends the browser back."""
    if not sso.is_enabled():
        return _not_configured()
    try:
        exchange = sso.finish_login(state=state, code=code, error=error,
                                    browser_state=request.cookies.get(STATE_COOKIE))
        response = _redirect(sso.ui_success_url(exchange))
    except sso.SsoError as exc:
        response = _redirect(sso.ui_error_url(str(exc)))
    except Exception:  # noqa: BLE001 - the browser gets a message, never a traceback
        log.exception("single sign-on: finishing the sign-in failed")
        response = _redirect(sso.ui_error_url(UNEXPECTED))
    response.delete_cookie(STATE_COOKIE, path=router.prefix)
    return response


@router.post("/exchange", response_model=LoginResponse, **PUBLIC,
             responses={400: {"description": "invalid, expired or used code"}, 404: {"description": "SSO is off"}})
def sso_exchange(body: SsoExchangeRequest) -> JSONResponse:
    """Trade the one-time code from the callback for a bearer token (single use, 60 seconds)."""
    if not sso.is_enabled():
        return _not_configured()
    try:
        issued = sso.exchange_code(body.code)
    except sso.SsoError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=400)
    return JSONResponse(LoginResponse(token=issued.token, user_id=issued.user_id).model_dump(by_alias=True),
                        headers=NO_STORE)
