"""The Chatbot page in real Chromium (issue 22 part 2): an administrator creates a Chatbot instance and
uploads its table through the REST API, checks its settings on the page, and a question typed on the
chat page is answered by the scripted model from a value the chatbot queried from that table."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from playwright.sync_api import Page, expect

from tests.ai_server import RecordedRequest
from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_workflows_ui import sign_in

pytestmark = __import__("pytest").mark.e2e

QUERY = "SELECT city, SUM(amount) AS total FROM sales GROUP BY city ORDER BY total DESC LIMIT 1"


@contextmanager
def _api(app: RunningApp) -> Iterator[httpx.Client]:
    """The REST API as the administrator."""
    with httpx.Client(base_url=app.api_url, timeout=30) as client:
        login = client.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
        client.headers["Authorization"] = f"Bearer {login.json()['token']}"
        yield client


def _chatbot_with_table(app: RunningApp, label: str) -> str:
    with _api(app) as api:
        me = api.get("/api/me").json()
        mandate_id = next(i["mandateId"] for i in me["instances"] if i["featureCode"] == "workspace")
        created = api.post(f"/api/mandates/{mandate_id}/instances", json={"featureCode": "chatbot", "label": label})
        assert created.status_code == 201, created.text
        instance_id = created.json()["id"]
        csv_text = "city,amount\nZurich,1200.25\nBern,800\nZurich,300.5\n"
        uploaded = api.post(f"/api/chatbot/{instance_id}/tables", files={"file": ("sales.csv", csv_text, "text/csv")})
        assert uploaded.status_code == 201, uploaded.text
        configured = api.put(f"/api/chatbot/{instance_id}/settings",
                             json={"systemPrompt": "You answer questions about our sales.", "dataSource": "tables"})
        assert configured.status_code == 200, configured.text
        return instance_id


def _answer_from_the_tool_result(request: RecordedRequest) -> str:
    """The model's last turn: it quotes the row the query returned."""
    result = next(m["content"] for m in reversed(request.messages) if m.get("role") == "tool")
    city, total = json.loads(result)["rows"][0]
    return f"{city} sold the most: {total} CHF."


def test_a_question_on_the_chatbot_page_is_answered_from_the_table(page: Page, running_app: RunningApp):
    label = f"Sales bot {uuid.uuid4().hex[:6]}"
    instance_id = _chatbot_with_table(running_app, label)
    ai = running_app.ai
    ai.clear()
    ai.reply(None, tool_calls=[{"id": "q1", "name": "chatbot_queryDatabase", "arguments": {"sql": QUERY}}])
    ai.responder = _answer_from_the_tool_result
    try:
        sign_in(page, "admin", ADMIN_PASSWORD)
        expect(page).to_have_url(re.compile(r"/workflows$"))
        page.goto("/chatbot")
        expect(page.locator("#page-title")).to_have_text("Chatbot", timeout=30_000)
        expect(page.locator("#chat-input")).to_be_enabled()
        expect(page.locator("#instance-header")).to_be_visible()
        if page.locator("#instance-select").count():  # other Chatbot instances exist: choose this one
            page.locator("#instance-select").click()
            page.get_by_role("option", name=label).click()
        expect(page.locator("#instance-header")).to_contain_text(label)

        # The settings panel shows what was configured through REST.
        page.locator("#chatbot-settings-toggle").click()
        expect(page.locator("#chatbot-system-prompt")).to_have_value("You answer questions about our sales.")
        expect(page.locator("#chatbot-settings")).to_contain_text("sales.csv → sales")
        page.locator("#chatbot-table-upload input[type=file]").set_input_files(files=[{
            "name": "Stock.csv", "mimeType": "text/csv", "buffer": b"product,stock\nLamp,7\n"}])
        expect(page.locator("#chatbot-notice")).to_contain_text("Uploaded Stock.csv.")
        expect(page.locator("#chatbot-settings")).to_contain_text("Stock.csv → stock")
        page.locator("#chatbot-row-limit").fill("50")
        page.locator("#chatbot-save-settings").click()
        expect(page.locator("#chatbot-notice")).to_contain_text("Settings saved.")
        page.locator("#chatbot-settings-toggle").click()

        box = page.locator("#chat-input")
        box.click()
        box.type("Which city sold the most?")
        box.press("Enter")
        expect(page.locator(".user-message").last).to_contain_text("Which city sold the most?")
        expect(page.get_by_text("Zurich sold the most: 1500.75 CHF.")).to_be_visible(timeout=30_000)
        expect(page.locator("#chat-list")).to_contain_text("Which city sold the most?")
    finally:
        ai.responder = None
    with _api(running_app) as api:
        settings = api.get(f"/api/chatbot/{instance_id}/settings").json()
        assert settings["rowLimit"] == 50  # saved from the page
        tables = {t["name"] for t in api.get(f"/api/chatbot/{instance_id}/schema").json()}
        assert tables == {"sales", "stock"}  # the one uploaded through the REST API and the one from the page
        runs = api.get(f"/api/chatbot/{instance_id}/agent/runs").json()
        assert runs[0]["profile"] == "chatbot" and runs[0]["answer"] == "Zurich sold the most: 1500.75 CHF."

    # The chats list is the Workspace's and the Coach's: the chat is renamed and deleted from it.
    title = f"Best city {uuid.uuid4().hex[:4]}"
    page.locator(".chat-item", has_text="Which city sold the most?").locator(".chat-rename").click()
    page.locator("#chat-rename-input").fill(title)
    page.locator("#chat-rename-save").click()
    expect(page.locator("#chatbot-notice")).to_contain_text(f"Renamed to '{title}'")
    expect(page.locator("#chat-heading")).to_have_text(title)
    page.locator(".chat-item", has_text=title).locator(".chat-delete").click()
    page.locator("#confirm-chat-delete").click()
    expect(page.locator("#chatbot-notice")).to_contain_text(f"Deleted '{title}'")
    expect(page.locator(".chat-item", has_text=title)).to_have_count(0)
    with _api(running_app) as api:
        assert api.get(f"/api/chatbot/{instance_id}/agent/chats").json() == []


def test_a_visitor_asks_on_the_public_embed_page_without_signing_in(page: Page, running_app: RunningApp):
    instance_id = _chatbot_with_table(running_app, f"Public bot {uuid.uuid4().hex[:6]}")
    with _api(running_app) as api:
        token = api.post(f"/api/chatbot/{instance_id}/embed").json()["token"]
    ai = running_app.ai
    ai.clear()
    ai.reply(None, tool_calls=[{"id": "q1", "name": "chatbot_queryDatabase", "arguments": {"sql": QUERY}}])
    ai.responder = _answer_from_the_tool_result
    try:
        page.goto(f"/embed/chatbot/{token}")
        expect(page.locator("#page-title")).to_contain_text("Public bot", timeout=30_000)
        page.locator("#embed-input").fill("Which city sold the most?")
        page.locator("#embed-send").click()
        expect(page.locator(".embed-user-message")).to_contain_text("Which city sold the most?")
        expect(page.locator(".embed-answer")).to_contain_text("Zurich sold the most: 1500.75 CHF.", timeout=30_000)
        # Only the chatbot's own tools were offered to the embed's run.
        offered = {t["function"]["name"] for t in ai.chat_requests[0].json.get("tools") or []}
        assert offered == {"chatbot_queryDatabase", "chatbot_listTables"}
    finally:
        ai.responder = None
    page.goto("/embed/chatbot/not-a-valid-token-at-all-xxxxxxxx")
    expect(page.locator("#embed-unavailable")).to_be_visible(timeout=30_000)
