# ruff: noqa: F811 - the fixtures of test_clickup are imported by name, and tests take them as arguments
"""ClickUp webhooks (issue 20): the connection type's WebhookSupport registers and removes webhooks at
the ClickUp stand-in, which POSTs signed deliveries (X-Signature: hex HMAC-SHA256 of the body) to a
receiver on 127.0.0.1 when tasks are created, changed or commented on; verify tells genuine
deliveries from tampered ones."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from backend.connectors.kinds.clickup import WEBHOOKS, WebhookParams
from backend.connectors.store import credentials_of
from backend.connectors.types import ConnectionFailed, connection_type
from backend.db import session_scope
from backend.db.models import Connection
from tests.clickup_server import BACKLOG_ID, SPACE_ID, SPRINT_ID, TEAM_ID
from tests.integration.test_clickup import (  # noqa: F401 - fixtures
    _clickup_stand_in,
    clickup,
    connection,
    ok,
)
from tests.mcp_test_servers import free_port, serve_in_thread

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here


class Receiver:
    """An endpoint that keeps what was POSTed to it (headers by lower-case name, raw body)."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        self.url = ""

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        with self.lock:
            self.received.append(({k.lower(): v for k, v in request.headers.items()}, body))
        return Response(status_code=204)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[tuple[dict[str, str], bytes]]:
        """The first `count` deliveries, polling until they arrived (or failing after `timeout`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.received) >= count:
                    return list(self.received[:count])
            time.sleep(0.02)
        raise AssertionError(f"{count} deliveries expected, {len(self.received)} arrived")


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    port = free_port()
    with serve_in_thread(Starlette(routes=[Route("/hooks/{name}", found.hook, methods=["POST"])]), port):
        found.url = f"http://127.0.0.1:{port}/hooks"
        yield found


@pytest.fixture
def credentials(connection):
    with session_scope() as session:
        return credentials_of(session.get(Connection, connection))


@SQLITE
def test_the_type_declares_its_webhooks(clickup):
    kind = connection_type("clickup")
    assert kind.webhooks is WEBHOOKS and WEBHOOKS.events[0] == "taskCreated"
    assert {"taskUpdated", "taskStatusUpdated", "taskCommentPosted", "taskDeleted"} <= set(WEBHOOKS.events)
    params = WebhookParams.model_validate({"connectionId": "c1", "teamId": TEAM_ID, "spaceId": ""})
    assert (params.events, params.space_id, params.list_id) == (["taskCreated"], None, None)
    with pytest.raises(ValidationError) as missing:
        WebhookParams.model_validate({"connectionId": "c1"})
    assert missing.value.errors()[0]["loc"] == ("teamId",)
    with pytest.raises(ValidationError):
        WebhookParams.model_validate({"connectionId": "c1", "teamId": TEAM_ID, "events": ["issueCreated"]})
    schema = WebhookParams.model_json_schema(by_alias=True)["properties"]
    assert schema["teamId"]["x-options"]["action"] == "clickup.listWorkspaces"
    assert schema["listId"]["x-options"]["args"] == {"teamId": "teamId", "spaceId": "spaceId"}


@SQLITE
def test_register_deliver_verify_and_unregister(clickup, connection, credentials, receiver):
    receiver.received.clear()
    url = f"{receiver.url}/backlog"
    hook = WEBHOOKS.register(credentials, url, ("taskCreated", "taskCommentPosted"),
                             {"connectionId": connection, "teamId": TEAM_ID, "listId": BACKLOG_ID}, "ours-unused")
    registered = clickup.webhooks[hook.remote_id]
    assert (registered["endpoint"], registered["events"], registered["list_id"]) == \
        (url, ["taskCreated", "taskCommentPosted"], int(BACKLOG_ID))
    assert hook.secret == registered["secret"] and hook.secret != "ours-unused"

    created = ok("clickup.createTask", {"connectionId": connection, "listId": BACKLOG_ID, "name": "Hooked"})
    headers, body = receiver.wait_for(1)[0]
    delivery = json.loads(body)
    assert (delivery["event"], delivery["task_id"], delivery["webhook_id"]) == ("taskCreated", created["id"],
                                                                                hook.remote_id)
    assert WEBHOOKS.event_of(delivery) == "taskCreated"
    assert WEBHOOKS.verify(headers, body, hook.secret) is True
    assert WEBHOOKS.verify(headers, body + b" ", hook.secret) is False
    assert WEBHOOKS.verify(headers, body, "ANOTHER-SECRET") is False
    assert WEBHOOKS.verify({k: v for k, v in headers.items() if k != "x-signature"}, body, hook.secret) is False

    ok("clickup.addComment", {"connectionId": connection, "taskId": created["id"], "text": "Seen"})
    commented = receiver.wait_for(2)[1]
    assert WEBHOOKS.event_of(json.loads(commented[1])) == "taskCommentPosted"
    assert WEBHOOKS.verify(*commented, hook.secret)

    # A tampered delivery fails; a task of another list reaches no webhook of this list.
    assert clickup.deliver("taskCreated", created["id"], tamper=True) == [204]
    tampered = receiver.wait_for(3)[2]
    assert WEBHOOKS.verify(*tampered, hook.secret) is False
    elsewhere = clickup.add_task(SPRINT_ID, "Not for this hook")
    assert clickup.deliver("taskCreated", elsewhere) == []

    WEBHOOKS.unregister(credentials, hook.remote_id)
    assert hook.remote_id not in clickup.webhooks
    WEBHOOKS.unregister(credentials, hook.remote_id)  # gone already: no error
    assert clickup.deliver("taskCreated", created["id"]) == []


@SQLITE
def test_registration_refusals_are_named(clickup, connection, credentials, receiver):
    params = {"connectionId": connection, "teamId": TEAM_ID, "spaceId": SPACE_ID}
    first = WEBHOOKS.register(credentials, f"{receiver.url}/space", ("taskUpdated",), params, "")
    assert clickup.webhooks[first.remote_id]["space_id"] == int(SPACE_ID)
    with pytest.raises(ConnectionFailed) as twice:
        WEBHOOKS.register(credentials, f"{receiver.url}/space", ("taskUpdated",), params, "")
    assert "already has a webhook" in str(twice.value) and "OAUTH_171" in str(twice.value)
    with pytest.raises(ConnectionFailed) as hidden:
        WEBHOOKS.register(credentials, f"{receiver.url}/x", ("taskCreated",), {**params, "teamId": "777"}, "")
    assert str(hidden.value).startswith("workspace 777 was not found or the connection's account cannot see it")
    with pytest.raises(ConnectionFailed) as no_team:
        WEBHOOKS.register(credentials, f"{receiver.url}/x", ("taskCreated",), {"connectionId": connection}, "")
    assert str(no_team.value).startswith("teamId:")
    assert WEBHOOKS.event_of({"no": "event"}) is None and WEBHOOKS.event_of(b"not json") is None
