"""Web Push (issue 23): the application server key and the caller's browser subscriptions.

A browser subscribes through its PushManager with the key of ``GET /api/push/key`` and posts
the subscription (``PushSubscription.toJSON()``) here. Every route touches the caller's own
subscriptions only; anybody else's answers 404 like a missing one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import CamelModel, StrictCamelModel
from backend.notifications.push import PushSubscriptions
from backend.rbac.access import AccessContext

router = APIRouter(prefix="/api/push", tags=["notifications"])

SubscriptionId = Annotated[str, Path(alias="subscriptionId")]


class PushKeyOut(CamelModel):
    public_key: str


class PushKeysIn(StrictCamelModel):
    p256dh: str
    auth: str


class PushSubscriptionIn(StrictCamelModel):
    """A browser's subscription as ``PushSubscription.toJSON()`` gives it."""

    endpoint: str
    keys: PushKeysIn
    expiration_time: int | None = None


class PushSubscriptionOut(CamelModel):
    id: str
    endpoint: str
    user_agent: str
    last_error: str | None = None
    created_at: datetime


def _door(user, session) -> PushSubscriptions:
    return PushSubscriptions(AccessContext(session, user))


def _out(row) -> PushSubscriptionOut:
    return PushSubscriptionOut(id=row.id, endpoint=row.endpoint, user_agent=row.user_agent,
                               last_error=row.last_error, created_at=row.sys_created_at)


@router.get("/key", response_model=PushKeyOut, **declared_by(PushSubscriptions.public_key))
def application_server_key(user: CurrentUser, session: DbSession) -> PushKeyOut:
    """The VAPID public key (base64url) to subscribe a browser with."""
    return PushKeyOut(public_key=_door(user, session).public_key())


@router.get("/subscriptions", response_model=list[PushSubscriptionOut], **declared_by(PushSubscriptions.list))
def list_subscriptions(user: CurrentUser, session: DbSession) -> list[PushSubscriptionOut]:
    """The caller's subscribed browsers."""
    return [_out(row) for row in _door(user, session).list()]


@router.post("/subscriptions", status_code=201, response_model=PushSubscriptionOut,
             **declared_by(PushSubscriptions.subscribe))
def add_subscription(body: PushSubscriptionIn, request: Request, user: CurrentUser,
                     session: DbSession) -> PushSubscriptionOut:
    """Keep a browser's subscription for the caller (subscribing the same endpoint again renews it)."""
    row = _door(user, session).subscribe(body.endpoint, body.keys.p256dh, body.keys.auth,
                                         request.headers.get("user-agent", ""))
    return _out(row)


@router.delete("/subscriptions/{subscriptionId}", status_code=204, **declared_by(PushSubscriptions.remove))
def remove_subscription(subscription_id: SubscriptionId, user: CurrentUser, session: DbSession) -> Response:
    """Stop pushing to one of the caller's browsers (404 for anybody else's)."""
    _door(user, session).remove(subscription_id)
    return Response(status_code=204)
