"""REST adapter of OAuth consents (DESIGN §8, backend/connectors/oauth.py): /api/connections/oauth/{type}/…

A browser navigation carries no bearer header, so the UI first asks for a one-time ticket
(`POST …/tickets`, bearer) and sends the browser to the `url` it gets; an API client that keeps
cookies may call `GET …/start` with its bearer token instead. The start answers 302 to the
provider and sets the consent's HttpOnly cookie (SameSite=Lax, limited to the callback's path);
the provider sends the browser to `GET …/callback`, which answers 302 to the UI's Connections
page: `{POWERON_UI_URL}/connections?connected=<connectionId>` or `?error=<message>`.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import RedirectResponse

from backend.api.deps import CurrentUser, DbSession, bearer_token
from backend.api.permissions import declared_by, permission
from backend.api.schemas import OAuthTicketCreate, OAuthTicketOut
from backend.auth import user_for_token
from backend.config import get_settings
from backend.connectors import oauth
from backend.connectors.oauth import ConsentStart, OAuthConsents, OAuthFailed
from backend.rbac.access import AccessContext

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/connections/oauth", tags=["connections"])
# A type id is a short lower-case name: anything else (a stranger's path) is refused with 422, never
# echoed into a header (the cookie path of the callback).
TypeId = Annotated[str, Path(alias="type", max_length=32, pattern=r"^[a-z][a-z0-9_-]*$",
                             description="a connection type made by consent, e.g. msft")]
NO_STORE = {"Cache-Control": "no-store"}
UNEXPECTED = "connecting failed unexpectedly; the server log has the details"


def _redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=302, headers=NO_STORE)


def _to_provider(start: ConsentStart) -> RedirectResponse:
    response = _redirect(start.url)
    response.set_cookie(start.cookie_name, start.cookie_value, max_age=start.max_age, path=start.cookie_path,
                        httponly=True, samesite="lax", secure=get_settings().api_url.startswith("https://"))
    return response


@router.post("/{type}/tickets", status_code=201, response_model=OAuthTicketOut,
             **declared_by(OAuthConsents.ticket))
def create_ticket(type_id: TypeId, body: OAuthTicketCreate, user: CurrentUser, session: DbSession
                  ) -> OAuthTicketOut:
    """A one-time start of a consent (two minutes): send the browser to its `url`."""
    ticket = OAuthConsents(AccessContext(session, user)).ticket(type_id, body.mandate_id, body.label,
                                                                 body.connection_id)
    return OAuthTicketOut(ticket=ticket.ticket, url=ticket.url, expires_at=ticket.expires_at)


@router.get("/{type}/start", status_code=302, response_class=RedirectResponse, **declared_by(OAuthConsents.start),
            responses={302: {"description": "to the provider's consent (or, for a ticket that cannot start, to "
                                            "the UI's Connections page with ?error=)"}})
def start_consent(
    request: Request,
    session: DbSession,
    type_id: TypeId,
    mandate_id: Annotated[str | None, Query(alias="mandateId", max_length=32)] = None,
    label: Annotated[str | None, Query(max_length=200)] = None,
    connection_id: Annotated[str | None, Query(alias="connectionId", max_length=32)] = None,
):
    """Start a consent: with `?ticket=` (a browser; the ticket says what to connect), or as the bearer
    token's user with these parameters."""
    ticket = request.query_params.get("ticket")  # documented as the security scheme startTicket
    if ticket is not None:
        try:
            return _to_provider(oauth.start_with_ticket(type_id, ticket))
        except OAuthFailed as exc:
            return _redirect(oauth.ui_result_url(error=str(exc)))
        except Exception:  # noqa: BLE001 - the browser gets a message, never a traceback
            log.exception("oauth: starting a consent failed")
            return _redirect(oauth.ui_result_url(error=UNEXPECTED))
    user = user_for_token(session, bearer_token(request))
    if user is None:
        raise HTTPException(status_code=401, detail="missing, expired or revoked bearer token (or give a ticket)",
                            headers={"WWW-Authenticate": "Bearer"})
    return _to_provider(OAuthConsents(AccessContext(session, user)).start(type_id, mandate_id, label, connection_id))


@router.get("/{type}/callback", status_code=302, response_class=RedirectResponse, **permission("public"),
            responses={302: {"description": "to the UI: /connections?connected=<connectionId> or ?error=<message>"}})
def consent_callback(
    request: Request,
    type_id: TypeId,
    state: Annotated[str | None, Query(max_length=500)] = None,
    code: Annotated[str | None, Query(max_length=4000)] = None,
    error: Annotated[str | None, Query(max_length=200)] = None,
    error_description: Annotated[str | None, Query(max_length=2000)] = None,
):
    """Where the provider sends the browser back after the consent (single use, same browser)."""
    try:
        connection_id = oauth.finish(type_id, state=state, code=code, error=error,
                                     error_description=error_description, cookies=request.cookies)
        response = _redirect(oauth.ui_result_url(connected=connection_id))
    except OAuthFailed as exc:
        response = _redirect(oauth.ui_result_url(error=str(exc)))
    except Exception:  # noqa: BLE001 - the browser gets a message, never a traceback
        log.exception("oauth: finishing a consent failed")
        response = _redirect(oauth.ui_result_url(error=UNEXPECTED))
    if state:
        response.delete_cookie(oauth.cookie_name(state), path=oauth.callback_path(type_id))
    return response
