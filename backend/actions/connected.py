"""How a connection-bound action reaches its outside system (outlook.*, sharepoint.* …)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from backend.actions.base import ActionContext, ActionError
from backend.connectors import store
from backend.connectors.types import ConnectionFailed, Credentials

Client = TypeVar("Client")


@contextmanager
def connected(context: ActionContext, connection_id: Any, type_ids: Iterable[str],
              factory: Callable[[Credentials], Client]) -> Iterator[Client]:
    """`factory`'s client of a connection the caller may use (one of `type_ids`), closed afterwards;
    the outside system's refusals (ConnectionFailed) become the action's error."""
    try:
        client = factory(store.open_connection(context.session, context.user, connection_id, type_ids))
    except ConnectionFailed as exc:
        raise ActionError(str(exc)) from None
    try:
        yield client
    except ConnectionFailed as exc:
        raise ActionError(str(exc)) from None
    finally:
        client.close()
