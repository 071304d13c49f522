"""A webhook run keeps the call's ordinary headers but none of the sender's credentials (issue 15)."""

from __future__ import annotations

import json

import pytest

from backend.triggers.webhooks import is_credential_header
from tests.integration.trigger_support import create_published, new_secret, sign, wait_for_run

CREDENTIALS = {
    "Authorization": "Bearer secret-bearer-1",
    "Cookie": "session=secret-cookie-2",
    "X-Api-Key": "secret-api-key-3",
    "X-Github-Token": "secret-gh-token-4",
    "X-Hub-Signature-256": "sha256=secret-hub-sig-5",
}
ORDINARY = {"User-Agent": "shop-bot/1.0", "X-Request-Id": "req-77"}


def _graph(secret: str) -> dict:
    """trigger.webhook → a step that reads the trigger's headers (so the step log has them)."""
    return {"nodes": [{"id": "start", "type": "trigger.webhook",
                       "parameters": {"path": "orders", "method": "POST", "secret": secret}},
                      {"id": "echo", "type": "context.transform",
                       "parameters": {"data": "{{ nodes.start.output.headers }}",
                                      "template": "{{ data | tojson }}"}}],
            "edges": [{"source": "start", "target": "echo"}]}


def test_credential_headers_never_reach_the_run_its_steps_or_viewers(api):
    secret = new_secret()
    workflow_id = create_published(api, _graph(secret))
    body = json.dumps({"order": 7}).encode()
    signed = sign(secret, body)
    response = api.client.post(f"/api/hooks/{workflow_id}/orders", content=body,
                               headers={**signed, **CREDENTIALS, **ORDINARY})
    assert response.status_code == 202, response.text
    run = wait_for_run(api, response.json()["runId"])
    assert run["status"] == "completed", run

    headers = run["input"]["headers"]
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == "shop-bot/1.0" and headers["x-request-id"] == "req-77"
    assert headers["webhook-id"] == signed["webhook-id"]
    for name in (*CREDENTIALS, "webhook-signature"):
        assert name.lower() not in headers, name

    shown = api.client.get(f"{api.base()}/runs/{run['id']}", headers=api.auth)
    assert {step["nodeId"] for step in shown.json()["steps"]} >= {"start", "echo"}
    assert "req-77" in shown.text and "req-77" in run["output"]["echo"]["result"]
    for value in (*CREDENTIALS.values(), signed["webhook-signature"]):
        assert value not in shown.text, value


@pytest.mark.parametrize(("name", "dropped"), [
    ("Authorization", True), ("proxy-authorization", True), ("Cookie", True), ("Set-Cookie", True),
    ("X-Api-Key", True), ("api-key", True), ("apikey", True), ("X-Github-Token", True),
    ("X-Gitlab-Token", True), ("x-webhook-secret", True), ("X-Slack-Signature", True),
    ("X-Hub-Signature-256", True), ("X-Shopify-Hmac-Sha256", True), ("X_Auth_Token", True),
    ("x-accesstoken", True), ("webhook-signature", True),
    ("content-type", False), ("user-agent", False), ("x-request-id", False), ("webhook-id", False),
    ("webhook-timestamp", False), ("x-forwarded-for", False), ("accept", False), ("x-github-event", False),
])
def test_which_headers_count_as_credentials(name, dropped):
    assert is_credential_header(name) is dropped
