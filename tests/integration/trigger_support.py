"""Helpers shared by the webhook, event and form trigger tests."""

from __future__ import annotations

import base64
import os
import shlex
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from standardwebhooks.webhooks import Webhook


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


def sign(secret: str, body: bytes, webhook_id: str | None = None, timestamp: int | None = None) -> dict[str, str]:
    """Standard Webhooks headers for `body`, signed by the reference implementation."""
    webhook_id = webhook_id or f"msg_{uuid.uuid4().hex}"
    timestamp = int(time.time()) if timestamp is None else timestamp
    signature = Webhook(secret).sign(webhook_id, datetime.fromtimestamp(timestamp, tz=UTC), body.decode())
    return {"webhook-id": webhook_id, "webhook-timestamp": str(timestamp), "webhook-signature": signature,
            "content-type": "application/json"}


def echo_graph(trigger: dict[str, Any]) -> dict[str, Any]:
    """trigger → a context.transform that renders the run input as text."""
    return {"nodes": [{"id": "start", **trigger},
                      {"id": "echo", "type": "context.transform",
                       "parameters": {"data": "{{ input }}", "template": "{{ body | tojson }}"}}],
            "edges": [{"source": "start", "target": "echo"}]}


def create_published(api, graph: dict[str, Any], active: bool = True, publish: bool = True) -> str:
    """A workflow with `graph` created through the REST API, published and (de)activated; its id."""
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex}", "graph": graph},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    workflow_id = created.json()["id"]
    if publish:
        published = api.client.post(f"{api.base()}/workflows/{workflow_id}/publish", headers=api.auth)
        assert published.status_code == 200, published.text
    if active:
        patched = api.client.patch(f"{api.base()}/workflows/{workflow_id}", json={"active": True}, headers=api.auth)
        assert patched.status_code == 200, patched.text
    return workflow_id


def wait_for_run(api, run_id: str, statuses: tuple[str, ...] = ("completed", "failed", "cancelled"),
                 timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        response = api.client.get(f"{api.base()}/runs/{run_id}", headers=api.auth)
        assert response.status_code == 200, response.text
        run = response.json()
        if run["status"] in statuses or time.monotonic() > deadline:
            return run
        time.sleep(0.05)


def runs_of(workflow_id: str) -> list[Any]:
    from sqlmodel import select

    from backend.db import session_scope
    from backend.db.models import WorkflowRun

    with session_scope() as session:
        return list(session.exec(select(WorkflowRun).where(WorkflowRun.workflow_id == workflow_id)).all())


def curl_parts(command: str) -> tuple[str, str, dict[str, str], bytes]:
    """(method, url, headers, body) of the example curl command, as a shell would split it."""
    words = shlex.split(command.replace("\\\n", " "))
    assert words[0] == "curl" and words[1] == "-X"
    method, url, headers, body = words[2], words[3], {}, b""
    rest = iter(words[4:])
    for word in rest:
        if word == "-H":
            name, _, value = next(rest).partition(": ")
            headers[name] = value
        elif word == "--data-raw":
            body = next(rest).encode()
    return method, url, headers, body
