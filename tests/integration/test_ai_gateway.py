"""The AI gateway against scripted OpenAI-compatible servers on 127.0.0.1.

Real HTTP and SSE, the real `openai` client, one scripted server per provider: failover order
and its limits, the circuit breaker on an injected clock, streaming of text and tool calls,
tools in plain calls, cost, keys kept out of messages, neutralisation, and the configuration
through POWERON_AI_PROVIDERS with the AI actions on top.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from backend.ai import get_ai_client
from backend.ai.client import (
    AiProviderError,
    AiReply,
    ChatDone,
    OpenAICompatibleClient,
    TextDelta,
    ToolCallDelta,
)
from backend.ai.gateway import AiGateway
from backend.ai.pricing import DEFAULT_PRICES, ModelPrice
from backend.config import get_settings, reset_settings_cache
from tests.ai_server import RecordedRequest, Reply, ScriptedAiServer, unreachable_url

NAMES = ("primary", "backup", "third")


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def servers() -> Iterator[list[ScriptedAiServer]]:
    """Three scripted providers, each with a key of its own."""
    started = [ScriptedAiServer(api_key=f"sk-secret-{name}-0123456789").start() for name in NAMES]
    try:
        yield started
    finally:
        for server in started:
            server.stop()


def provider(server_or_url: ScriptedAiServer | str, name: str, *, key: str | None = None, timeout: float = 5.0,
             model: str = "test-model", **options) -> OpenAICompatibleClient:
    if isinstance(server_or_url, ScriptedAiServer):
        url, key = server_or_url.base_url, key or server_or_url.api_key
    else:
        url, key = server_or_url, key or "sk-secret-unreachable-0123456789"
    return OpenAICompatibleClient(key, url, model, timeout_seconds=timeout, name=name,
                                  source=f"POWERON_AI_PROVIDERS[{NAMES.index(name)}]", **options)


def gateway_over(servers: list[ScriptedAiServer], clock: Callable[[], float] | None = None,
                 **options) -> AiGateway:
    providers = [provider(server, name) for server, name in zip(servers, NAMES, strict=False)]
    return AiGateway(providers, clock=clock or FakeClock(), **options)


def chats(server: ScriptedAiServer) -> int:
    return len(server.chat_requests)


def collect(events) -> tuple[list, AiReply]:
    """All events, and the reply of the final ChatDone (which must be the last event)."""
    seen = list(events)
    assert isinstance(seen[-1], ChatDone) and not any(isinstance(e, ChatDone) for e in seen[:-1])
    return seen[:-1], seen[-1].reply


def assert_no_key(text: str, servers: list[ScriptedAiServer]) -> None:
    for server in servers:
        assert server.api_key not in text
    assert "0123456789" not in text


# --- failover -------------------------------------------------------------------------------


def test_a_healthy_first_provider_answers_alone(servers):
    servers[0].reply("from primary", usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
    reply = gateway_over(servers).chat("Hi")
    assert reply.text == "from primary" and reply.provider == "primary" and reply.failovers == ()
    assert reply.usage == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert [chats(s) for s in servers] == [1, 0, 0]


@pytest.mark.parametrize("failure", ["500", "503", "429", "timeout", "refused"])
def test_failover_to_the_next_provider(servers, failure):
    primary, backup = servers[0], servers[1]
    first: OpenAICompatibleClient
    if failure == "refused":
        first = provider(unreachable_url(), "primary")
    elif failure == "timeout":
        primary.stall(10)
        first = provider(primary, "primary", timeout=0.4)
    else:
        primary.fail(int(failure), "scripted trouble")
        first = provider(primary, "primary")
    backup.reply("from backup")
    gateway = AiGateway([first, provider(backup, "backup")], clock=FakeClock())
    reply = gateway.chat("Hi")
    assert reply.text == "from backup" and reply.provider == "backup"
    assert len(reply.failovers) == 1 and "'primary'" in reply.failovers[0]
    expected = {"500": "answered HTTP 500", "503": "answered HTTP 503", "429": "answered HTTP 429",
                "timeout": "did not answer within 0.4 s", "refused": "could not be reached"}[failure]
    assert expected in reply.failovers[0]
    assert chats(backup) == 1 and backup.last_chat.user_text == "Hi"
    if failure != "refused":
        assert chats(primary) == 1
    assert gateway.breakers["primary"].consecutive_failures == 1


def test_providers_are_tried_in_their_order(servers):
    servers[0].fail(500, "down")
    servers[1].fail(502, "bad gateway")
    servers[2].reply("third time lucky")
    reply = gateway_over(servers).chat("Hi")
    assert reply.provider == "third" and reply.text == "third time lucky"
    assert ["'primary'" in reply.failovers[0], "'backup'" in reply.failovers[1]] == [True, True]
    assert [chats(s) for s in servers] == [1, 1, 1]


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_no_failover_on_a_refusal_of_the_request(servers, status):
    servers[0].fail(status, "you did it wrong")
    with pytest.raises(AiProviderError) as caught:
        gateway_over(servers).chat("Hi")
    error = caught.value
    assert error.status == status and error.provider == "primary" and not error.retryable
    assert f"the AI provider 'primary' at {servers[0].base_url} answered HTTP {status}: you did it wrong" \
        in str(error)
    assert [chats(s) for s in servers] == [1, 0, 0]


def test_a_wrong_key_is_reported_with_the_setting_to_fix_and_without_the_key(servers):
    primary = provider(servers[0], "primary", key="sk-secret-wrong-0123456789")
    gateway = AiGateway([primary, provider(servers[1], "backup")], clock=FakeClock())
    with pytest.raises(AiProviderError) as caught:
        gateway.chat("Hi")
    message = str(caught.value)
    assert "answered HTTP 401" in message and "check apiKey of POWERON_AI_PROVIDERS[0]" in message
    assert "sk-secret-wrong" not in message and "0123456789" not in message
    assert chats(servers[1]) == 0  # the caller's problem: no failover
    assert gateway.breakers["primary"].consecutive_failures == 0  # it answered


def test_a_refusal_after_a_failover_says_what_happened_before(servers):
    servers[0].fail(500, "down")
    servers[1].fail(404, "no such model")
    with pytest.raises(AiProviderError) as caught:
        gateway_over(servers).chat("Hi")
    message = str(caught.value)
    assert caught.value.status == 404 and caught.value.provider == "backup"
    assert "'backup'" in message and "answered HTTP 404: no such model" in message
    assert "after:" in message and "'primary'" in message and "HTTP 500: down" in message
    assert chats(servers[2]) == 0


def test_when_every_provider_fails_the_error_names_each_and_why(servers):
    servers[0].fail(500, "primary is down")
    servers[1].stall(10)
    gateway = AiGateway([provider(servers[0], "primary"), provider(servers[1], "backup", timeout=0.3),
                         provider(unreachable_url(), "third")], clock=FakeClock())
    with pytest.raises(AiProviderError) as caught:
        gateway.chat("Hi")
    error = caught.value
    message = str(error)
    assert message.startswith("AI chat: no AI provider could answer — ")
    assert f"'primary' at {servers[0].base_url} answered HTTP 500: primary is down" in message
    assert f"'backup' at {servers[1].base_url} did not answer within 0.3 s " \
           "(POWERON_AI_PROVIDERS[1].timeoutSeconds)" in message
    assert "'third' at http://127.0.0.1:" in message and "could not be reached" in message
    assert len(error.attempts) == 3 and error.retryable is False
    assert_no_key(message, servers)
    assert_no_key(repr(gateway) + repr(gateway.providers), servers)


def test_model_aliases_per_provider(servers):
    servers[0].fail(500)
    servers[1].reply("ok")
    gateway = AiGateway([provider(servers[0], "primary"),
                         provider(servers[1], "backup", models={"gpt-4o": "backup-large"})], clock=FakeClock())
    reply = gateway.chat("Hi", model="gpt-4o")
    assert servers[0].last_chat.model == "gpt-4o"
    assert servers[1].last_chat.model == "backup-large" and reply.model == "backup-large"
    gateway.chat("Hi")  # no model: each provider's own default
    assert servers[0].last_chat.model == "test-model"


def test_images_and_audio_fail_over_too(servers):
    servers[0].fail(503, "busy", path="/v1/images/generations")
    servers[0].fail(429, "slow down", path="/v1/audio/speech")
    gateway = gateway_over(servers[:2])
    assert gateway.generate_image("a square").startswith(b"\x89PNG")
    assert gateway.text_to_speech("hello") == servers[1].speech_bytes
    assert gateway.speech_to_text(b"RIFF", "a.wav") == "scripted transcript"
    assert len(servers[1].requests_to("/v1/images/generations")) == 1
    assert len(servers[0].requests_to("/v1/audio/transcriptions")) == 1  # primary healthy again


# --- circuit breaker ------------------------------------------------------------------------


def test_the_circuit_opens_after_three_failures_and_half_opens_after_the_cool_down(servers):
    primary = servers[0]
    clock = FakeClock()
    gateway = gateway_over(servers[:2], clock=clock)
    primary.fail(500, "down", times=3)
    for _ in range(3):
        assert gateway.chat("Hi").provider == "backup"
    assert chats(primary) == 3 and gateway.breakers["primary"].state == "open"

    # Open: primary is skipped without a request.
    reply = gateway.chat("Hi")
    assert reply.provider == "backup" and chats(primary) == 3
    assert "'primary'" in reply.failovers[0] and "skipped" in reply.failovers[0]
    assert "paused for 30 s more" in reply.failovers[0]
    clock.advance(29.5)
    assert gateway.chat("Hi").provider == "backup" and chats(primary) == 3

    # Half-open after 30 s: one trial; it fails, so the circuit opens again at once.
    clock.advance(0.5)
    assert gateway.breakers["primary"].state == "half_open"
    primary.fail(500, "still down")
    assert gateway.chat("Hi").provider == "backup" and chats(primary) == 4
    assert gateway.breakers["primary"].state == "open"
    assert gateway.chat("Hi").provider == "backup" and chats(primary) == 4

    # The next trial succeeds: closed again, primary answers from now on.
    clock.advance(30)
    primary.reply("primary is back")
    assert gateway.chat("Hi").text == "primary is back" and chats(primary) == 5
    assert gateway.breakers["primary"].state == "closed"
    assert gateway.chat("Hi").provider == "primary"
    assert [s["state"] for s in gateway.status()] == ["closed", "closed"]


def test_a_success_resets_the_count_of_failures(servers):
    gateway = gateway_over(servers[:2])
    for _ in range(2):
        servers[0].fail(500)
        gateway.chat("Hi")
    gateway.chat("Hi")  # primary answers
    servers[0].fail(500)
    gateway.chat("Hi")
    assert gateway.breakers["primary"].state == "closed"
    assert gateway.breakers["primary"].consecutive_failures == 1


def test_with_every_circuit_open_the_soonest_provider_is_tried_anyway(servers):
    clock = FakeClock()
    gateway = gateway_over(servers[:1], clock=clock)
    servers[0].fail(500, "down", times=3)
    for _ in range(3):
        with pytest.raises(AiProviderError):
            gateway.chat("Hi")
    assert gateway.breakers["primary"].state == "open"
    servers[0].reply("up again")
    reply = gateway.chat("Hi")  # no other provider: a trial rather than a refusal
    assert reply.text == "up again" and chats(servers[0]) == 4
    assert gateway.breakers["primary"].state == "closed"


def test_the_cool_down_and_threshold_are_settable(servers):
    clock = FakeClock()
    gateway = gateway_over(servers[:2], clock=clock, failure_threshold=1, cooldown_seconds=5)
    servers[0].fail(500)
    gateway.chat("Hi")
    assert gateway.breakers["primary"].state == "open"
    clock.advance(5)
    assert gateway.chat("Hi").provider == "primary"


# --- streaming ------------------------------------------------------------------------------


TOOLS = [
    {"type": "function", "function": {"name": "lookup", "description": "Look a word up",
                                      "parameters": {"type": "object", "properties": {"word": {"type": "string"}},
                                                     "required": ["word"]}}},
    {"type": "function", "function": {"name": "requestToolbox", "description": "Ask for a toolbox",
                                      "parameters": {"type": "object",
                                                     "properties": {"toolboxId": {"type": "string"},
                                                                    "reason": {"type": "string"}}}}},
]


def test_streamed_text_arrives_in_pieces_and_assembled(servers):
    servers[0].reply("The quick brown fox jumps", model="gpt-4o-mini-2024-07-18",
                     usage={"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500})
    deltas, reply = collect(gateway_over(servers).chat_stream("Tell me", system="Be brief"))
    assert [d.text for d in deltas] == ["The ", "quick ", "brown ", "fox ", "jumps"]
    assert all(isinstance(d, TextDelta) for d in deltas)
    assert reply.text == "The quick brown fox jumps" and reply.finish_reason == "stop"
    assert reply.model == "gpt-4o-mini-2024-07-18" and reply.provider == "primary"
    assert reply.usage == {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
    price = DEFAULT_PRICES["gpt-4o-mini"]
    assert reply.cost_chf == pytest.approx((1000 * price.input_chf_per_million + 500 * price.output_chf_per_million)
                                           / 1e6)
    sent = servers[0].last_chat.json
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]


def test_streamed_tool_calls_arrive_in_fragments_and_assembled(servers):
    long_reason = "the user wants to send an e-mail about the quarterly report"
    servers[0].reply("Let me check.", tool_calls=[
        {"id": "call_abc", "name": "lookup", "arguments": {"word": "gateway"}},
        {"id": "call_def", "name": "requestToolbox", "arguments": {"toolboxId": "email", "reason": long_reason}},
    ], fragment=5)
    events, reply = collect(gateway_over(servers).chat_stream("Hi", tools=TOOLS, tool_choice="auto"))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert text == "Let me check."
    firsts = [c for c in calls if c.id]
    assert [(c.index, c.id, c.name) for c in firsts] == [(0, "call_abc", "lookup"), (1, "call_def", "requestToolbox")]
    assert all(c.name is None for c in calls if not c.id)
    assert len([c for c in calls if c.index == 1]) > 5  # really fragmented
    assembled = {i: "".join(c.arguments for c in calls if c.index == i) for i in (0, 1)}
    assert json.loads(assembled[0]) == {"word": "gateway"}
    assert json.loads(assembled[1]) == {"toolboxId": "email", "reason": long_reason}
    assert [c.to_dict() for c in reply.tool_calls] == [
        {"id": "call_abc", "name": "lookup", "arguments": assembled[0]},
        {"id": "call_def", "name": "requestToolbox", "arguments": assembled[1]}]
    assert reply.finish_reason == "tool_calls" and reply.text == "Let me check."
    sent = servers[0].last_chat.json
    assert sent["tools"] == TOOLS and sent["tool_choice"] == "auto"
    assert ChatDone(reply).to_dict()["tool_calls"][1]["name"] == "requestToolbox"


def test_a_stream_fails_over_before_its_first_piece(servers):
    servers[0].fail(500, "down")
    servers[1].reply("hello", cut_after=0)  # only the role chunk, then the line goes dead
    servers[2].reply("from third")
    deltas, reply = collect(gateway_over(servers).chat_stream("Hi"))
    assert [d.text for d in deltas] == ["from ", "third"] and reply.provider == "third"
    assert "HTTP 500" in reply.failovers[0] and "ended the answer's stream before it was complete" \
        in reply.failovers[1]


def test_a_stream_that_breaks_off_after_a_piece_is_an_error_without_failover(servers):
    servers[0].reply("one two three four", cut_after=2)
    events = gateway_over(servers).chat_stream("Hi")
    received = []
    with pytest.raises(AiProviderError) as caught:
        for event in events:
            received.append(event)
    assert [e.text for e in received] == ["one ", "two "]
    assert "broke off after it had begun; no failover" in str(caught.value)
    assert caught.value.provider == "primary" and chats(servers[1]) == 0


def test_a_stream_that_hangs_times_out(servers):
    servers[0].reply("one two three", hang_after=1)
    gateway = AiGateway([provider(servers[0], "primary", timeout=0.4), provider(servers[1], "backup")],
                        clock=FakeClock())
    with pytest.raises(AiProviderError) as caught:
        list(gateway.chat_stream("Hi"))
    assert "did not answer within 0.4 s" in str(caught.value) and chats(servers[1]) == 0


def test_a_stream_refusal_is_not_failed_over(servers):
    servers[0].fail(401, "bad key")
    events = gateway_over(servers).chat_stream("Hi")
    with pytest.raises(AiProviderError) as caught:
        next(iter(events))
    assert caught.value.status == 401 and chats(servers[1]) == 0


def test_closing_a_stream_early_is_not_a_provider_failure(servers):
    servers[0].reply("a b c d e f")
    gateway = gateway_over(servers)
    events = gateway.chat_stream("Hi")
    assert next(events).text == "a "
    events.close()
    assert gateway.breakers["primary"].consecutive_failures == 0


# --- tools in plain calls, cost -------------------------------------------------------------


def test_a_plain_call_with_tools_returns_the_tool_calls(servers):
    servers[0].reply(None, tool_calls=[{"id": "call_1", "name": "lookup", "arguments": {"word": "x"}},
                                       {"id": "call_2", "name": "lookup", "arguments": "{broken"}])
    reply = gateway_over(servers).chat([{"role": "user", "content": "Hi"}], tools=TOOLS, tool_choice="lookup")
    assert reply.text == "" and reply.finish_reason == "tool_calls"
    assert [c.to_dict() for c in reply.tool_calls] == [
        {"id": "call_1", "name": "lookup", "arguments": '{"word": "x"}'},
        {"id": "call_2", "name": "lookup", "arguments": "{broken"}]
    assert reply.tool_calls[0].parsed_arguments() == {"word": "x"}
    with pytest.raises(Exception, match="not valid JSON"):
        reply.tool_calls[1].parsed_arguments()
    sent = servers[0].last_chat.json
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}

    # The history of the next round: the assistant message and the tool results.
    servers[0].reply("The word is x.")
    history = [{"role": "user", "content": "Hi"}, reply.assistant_message(),
               {"role": "tool", "tool_call_id": "call_1", "content": "x means y"},
               {"role": "tool", "tool_call_id": "call_2", "content": "bad arguments"}]
    final = gateway_over(servers).chat(history, tools=TOOLS)
    assert final.text == "The word is x."
    assert servers[0].last_chat.messages[1]["tool_calls"][0]["function"] == {"name": "lookup",
                                                                           "arguments": '{"word": "x"}'}


def test_cost_from_the_price_table_and_none_for_an_unknown_model(servers):
    usage = {"prompt_tokens": 2_000_000, "completion_tokens": 1_000_000, "total_tokens": 3_000_000}
    servers[0].reply("a", model="gpt-4o", usage=usage)
    servers[0].reply("b", model="someone-elses-model", usage=usage)
    servers[0].reply("c", model="someone-elses-model", usage=usage)
    gateway = gateway_over(servers)
    price = DEFAULT_PRICES["gpt-4o"]
    assert gateway.chat("Hi").cost_chf == pytest.approx(2 * price.input_chf_per_million
                                                        + price.output_chf_per_million)
    assert gateway.chat("Hi").cost_chf is None  # unknown: not 0
    priced = AiGateway([provider(servers[0], "primary", prices={"someone-elses-model": ModelPrice(0.5, 1.5)})],
                       clock=FakeClock())
    assert priced.chat("Hi").cost_chf == pytest.approx(2 * 0.5 + 1.5)


# --- neutralisation -------------------------------------------------------------------------


def _echo_placeholders(request: RecordedRequest) -> Reply:
    """Answers with the placeholders it received, in text and in a tool call."""
    user = request.user_text
    return Reply(content=f"I got: {user}", tool_calls=[{"id": "call_n", "name": "lookup",
                                                         "arguments": {"word": user}}], fragment=3)


def test_neutralisation_round_trip_in_a_plain_call(servers):
    servers[0].responder = _echo_placeholders
    text = "Mail anna.meier@example.ch or call +41 79 123 45 67."
    reply = gateway_over(servers).chat(text, system="Helper for Anna Meier", neutralize=True)
    sent = servers[0].last_chat
    assert "anna.meier@example.ch" not in json.dumps(sent.json) and "123 45 67" not in json.dumps(sent.json)
    assert sent.user_text == "Mail [EMAIL_1] or call [PHONE_1]."
    assert reply.text == f"I got: {text}"
    assert reply.tool_calls[0].parsed_arguments() == {"word": text}
    plain = gateway_over(servers).chat(text)  # off by default
    assert plain.text == f"I got: {text}" and servers[0].last_chat.user_text == text


def test_neutralisation_round_trip_in_a_stream_with_placeholders_cut_in_pieces(servers):
    servers[0].responder = _echo_placeholders
    text = "Write to anna.meier@example.ch, IBAN CH93 0076 2011 6238 5295 7."
    events, reply = collect(gateway_over(servers).chat_stream(text, neutralize=True))
    assert servers[0].last_chat.user_text == "Write to [EMAIL_1], IBAN [IBAN_1]."
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    arguments = "".join(e.arguments for e in events if isinstance(e, ToolCallDelta))
    assert streamed == f"I got: {text}" and reply.text == streamed
    assert json.loads(arguments) == {"word": text} and reply.tool_calls[0].arguments == arguments
    assert not any("[" in e.arguments for e in events if isinstance(e, ToolCallDelta))


def test_neutralisation_of_history_and_images(servers):
    servers[0].reply("ok")
    history = [{"role": "user", "content": [{"type": "text", "text": "Who is anna@example.ch?"},
                                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "lookup",
                                                                 "arguments": '{"word": "anna@example.ch"}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "anna@example.ch is Anna"}]
    gateway_over(servers).chat(history, neutralize=True)
    sent = servers[0].last_chat.messages
    assert sent[0]["content"][0]["text"] == "Who is [EMAIL_1]?"
    assert sent[0]["content"][1]["image_url"]["url"] == "data:image/png;base64,AA"
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == '{"word": "[EMAIL_1]"}'
    assert sent[2]["content"] == "[EMAIL_1] is Anna"
    assert history[0]["content"][0]["text"] == "Who is anna@example.ch?"  # the caller's list is untouched


# --- configuration: POWERON_AI_PROVIDERS and the AI actions ---------------------------------


@pytest.fixture
def configured(servers, monkeypatch) -> list[ScriptedAiServer]:
    """POWERON_AI_PROVIDERS pointing at the three servers (OPENAI_* set too, and ignored)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ignored")
    monkeypatch.setenv("OPENAI_BASE_URL", unreachable_url())
    monkeypatch.setenv("BACKUP_KEY", servers[1].api_key)
    monkeypatch.setenv("POWERON_AI_PROVIDERS", json.dumps([
        {"name": "primary", "baseUrl": servers[0].base_url, "apiKey": servers[0].api_key, "model": "test-model"},
        {"name": "backup", "baseUrl": servers[1].base_url, "apiKeyEnv": "BACKUP_KEY", "model": "backup-model",
         "timeoutSeconds": 2, "prices": {"backup-model": {"input": 1.0, "output": 2.0}}},
        {"name": "third", "baseUrl": servers[2].base_url, "apiKey": servers[2].api_key},
    ]))
    monkeypatch.delenv("POWERON_AI_NEUTRALIZE", raising=False)
    reset_settings_cache()
    yield servers
    reset_settings_cache()


def test_the_configured_providers_are_used_in_order(configured):
    settings = get_settings()
    assert [p.name for p in settings.ai_providers] == ["primary", "backup", "third"]
    assert_no_key(repr(settings), configured)
    client = get_ai_client()
    assert isinstance(client, AiGateway) and client is get_ai_client()  # one gateway: breakers keep state
    configured[0].fail(500, "down")
    configured[1].reply("from backup", usage={"prompt_tokens": 1_000_000, "completion_tokens": 0,
                                              "total_tokens": 1_000_000})
    reply = client.chat("Hi")
    assert reply.provider == "backup" and reply.model == "backup-model" and reply.cost_chf == pytest.approx(1.0)
    assert configured[1].last_chat.headers["authorization"] == f"Bearer {configured[1].api_key}"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_ai_actions_fail_over_through_the_gateway(configured, action_context):
    from backend.actions import execute_action

    configured[0].fail(503, "overloaded")
    configured[1].reply("Rain, then sun.")
    result = execute_action("ai.summarize", {"text": "A long forecast."}, action_context)
    assert result.ok, result.error
    assert result.output["summary"] == "Rain, then sun." and result.output["model"] == "backup-model"

    for server in configured:
        server.fail(500, "all down")
    result = execute_action("ai.summarize", {"text": "A long forecast."}, action_context)
    assert not result.ok and "no AI provider could answer" in result.error
    assert all(f"'{name}'" in result.error for name in NAMES)
    assert_no_key(result.error, configured)


def test_neutralisation_by_setting(configured, monkeypatch):
    monkeypatch.setenv("POWERON_AI_NEUTRALIZE", "1")
    reset_settings_cache()
    configured[0].responder = _echo_placeholders
    reply = get_ai_client().chat("Mail anna@example.ch")
    assert configured[0].last_chat.user_text == "Mail [EMAIL_1]" and reply.text == "I got: Mail anna@example.ch"
    get_ai_client().chat("Mail anna@example.ch", neutralize=False)  # a call can refuse it
    assert configured[0].last_chat.user_text == "Mail anna@example.ch"
