"""The Chatbot's public embed (issue 22 part 2): a link token, no sign-in, the stricter profile,
a rate limit per token and client address, and 404 for a wrong, rotated or revoked token."""

from __future__ import annotations

import io

import pytest

from tests.integration.chatbot_helpers import (
    add_user,
    call,
    create_chatbot,
    default_mandate_id,
    tool_names,
    tool_results,
)

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def bot(api) -> str:
    instance_id = create_chatbot(api, "Public bot")
    csv_text = "product,price\nLamp,42.5\nChair,120\n"
    uploaded = api.client.post(f"/api/chatbot/{instance_id}/tables",
                               files={"file": ("prices.csv", io.BytesIO(csv_text.encode()), "text/csv")},
                               headers=api.auth)
    assert uploaded.status_code == 201, uploaded.text
    return instance_id


def message(api, token: str, prompt: str, chat_key: str | None = None):
    body = {"prompt": prompt, **({"chatKey": chat_key} if chat_key else {})}
    return api.client.post(f"/api/chatbot/embed/{token}/messages", json=body)


def test_a_visitor_asks_through_the_embed_link_without_signing_in(api, ai_server, bot):
    enabled = api.client.post(f"/api/chatbot/{bot}/embed", headers=api.auth)
    assert enabled.status_code == 201, enabled.text
    token = enabled.json()["token"]
    assert enabled.json()["path"] == f"/api/chatbot/embed/{token}/messages"
    settings = api.client.get(f"/api/chatbot/{bot}/settings", headers=api.auth).json()
    assert settings["embedEnabled"] is True and token not in str(settings)

    ai_server.reply(None, tool_calls=[call("chatbot_queryDatabase",
                                           {"sql": "SELECT price FROM prices WHERE product = 'Lamp'"}, "e1")])
    ai_server.reply("The lamp costs 42.5.")
    answered = message(api, token, "How much is the lamp?")
    assert answered.status_code == 200, answered.text
    assert answered.json()["answer"] == "The lamp costs 42.5." and answered.json()["error"] is None
    # Only the chatbot's own tools: no files, no web, no escalation.
    assert set(tool_names(ai_server.chat_requests[0])) == {"chatbot_queryDatabase", "chatbot_listTables"}
    assert "42.5" in tool_results(ai_server.chat_requests[1])["e1"]

    # The conversation goes on with its chat key; a forged key is not found.
    ai_server.reply("You asked about the lamp.")
    again = message(api, token, "What did I ask?", answered.json()["chatKey"])
    assert again.status_code == 200 and again.json()["chatKey"] == answered.json()["chatKey"]
    assert "How much is the lamp?" in ai_server.chat_requests[-1].user_text
    chat_id = answered.json()["chatKey"].split(".")[0]
    assert message(api, token, "Hi", f"{chat_id}.forged").status_code == 404


def test_wrong_rotated_and_revoked_tokens_answer_404(api, ai_server, bot):
    assert message(api, "x" * 43, "Hi").status_code == 404
    first = api.client.post(f"/api/chatbot/{bot}/embed", headers=api.auth).json()["token"]
    second = api.client.post(f"/api/chatbot/{bot}/embed", headers=api.auth).json()["token"]
    assert first != second
    assert message(api, first, "Hi").status_code == 404
    ai_server.reply("Hello!")
    assert message(api, second, "Hi").status_code == 200
    assert api.client.delete(f"/api/chatbot/{bot}/embed", headers=api.auth).status_code == 204
    revoked = message(api, second, "Hi")
    assert revoked.status_code == 404 and "not valid" in revoked.text
    assert api.client.get(f"/api/chatbot/{bot}/settings", headers=api.auth).json()["embedEnabled"] is False


def test_messages_are_rate_limited_per_token_and_address(api, ai_server, bot, monkeypatch):
    monkeypatch.setenv("POWERON_CHATBOT_EMBED_LIMIT", "2")
    token = api.client.post(f"/api/chatbot/{bot}/embed", headers=api.auth).json()["token"]
    for n in range(2):
        ai_server.reply(f"Answer {n}")
        assert message(api, token, f"Question {n}").status_code == 200
    limited = message(api, token, "One more")
    assert limited.status_code == 429
    assert 1 <= int(limited.headers["Retry-After"]) <= 600
    assert "at most 2" in limited.json()["detail"]
    assert len(ai_server.chat_requests) == 2  # the limited message never reached the model
    # Another token (another instance) has its own budget.
    other = create_chatbot(api, "Other bot")
    other_token = api.client.post(f"/api/chatbot/{other}/embed", headers=api.auth).json()["token"]
    ai_server.reply("Fine.")
    assert message(api, other_token, "Hi").status_code == 200


def test_only_those_who_manage_the_embed_enable_it(api, bot):
    user = add_user("uma", default_mandate_id(api), [], bot, ("chatbot-user",))
    assert api.client.post(f"/api/chatbot/{bot}/embed", headers=user).status_code == 403
    assert api.client.delete(f"/api/chatbot/{bot}/embed", headers=user).status_code == 403
    empty = message(api, api.client.post(f"/api/chatbot/{bot}/embed", headers=api.auth).json()["token"], "  ")
    assert empty.status_code == 422 and "prompt" in empty.text


def test_the_link_dies_with_the_enabling_users_right(api, ai_server, bot):
    """The embed runs as the user who enabled it: when they lose the chatbot, visitors get 404."""
    from sqlmodel import select

    from backend.db import session_scope
    from backend.db.models import FeatureAccess, FeatureAccessRole, User

    mandate_id = default_mandate_id(api)
    manager = add_user("mona", mandate_id, [], bot, ("chatbot-admin",))
    token = api.client.post(f"/api/chatbot/{bot}/embed", headers=manager).json()["token"]
    ai_server.reply("Hello from the bot.")
    assert message(api, token, "Hi").json()["answer"] == "Hello from the bot."
    with session_scope() as session:
        mona = session.exec(select(User).where(User.username == "mona")).one()
        for access in session.exec(select(FeatureAccess).where(FeatureAccess.user_id == mona.id)).all():
            for role in session.exec(select(FeatureAccessRole)
                                     .where(FeatureAccessRole.feature_access_id == access.id)).all():
                session.delete(role)
            session.flush()
            session.delete(access)
    assert message(api, token, "Hi again").status_code == 404
