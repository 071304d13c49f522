"""The pure parts of the AI gateway: price table and cost, circuit breaker on a hand-moved
clock, POWERON_AI_PROVIDERS parsing and its messages, restoring placeholders in a stream,
checking chat requests."""

from __future__ import annotations

import json

import pytest

from backend.ai.breaker import CircuitBreaker
from backend.ai.client import AiError, StreamRestorer, make_request
from backend.ai.pricing import DEFAULT_PRICES, USD_TO_CHF, ModelPrice, cost_chf, price_for
from backend.config import AiProviderSettings, _ai_providers, get_settings, reset_settings_cache

# --- prices ---------------------------------------------------------------------------------


def test_prices_of_known_models_and_their_snapshots():
    assert price_for("gpt-4o-mini") == ModelPrice(0.15 * USD_TO_CHF, 0.60 * USD_TO_CHF)
    assert price_for("gpt-4o-mini-2024-07-18") == DEFAULT_PRICES["gpt-4o-mini"]
    assert price_for("gpt-4o-2024-08-06") == DEFAULT_PRICES["gpt-4o"]
    assert price_for("gpt-4-0613") == DEFAULT_PRICES["gpt-4"]
    assert price_for("gpt-4o-audio-preview") is None  # no guessing from a prefix
    assert price_for("llama3") is None and price_for(None) is None


def test_cost_is_none_when_unknown_and_overrides_win():
    usage = {"prompt_tokens": 500_000, "completion_tokens": 250_000, "total_tokens": 750_000}
    price = DEFAULT_PRICES["gpt-4.1-mini"]
    assert cost_chf("gpt-4.1-mini", usage) == pytest.approx(0.5 * price.input_chf_per_million
                                                            + 0.25 * price.output_chf_per_million)
    assert cost_chf("mistral-large", usage) is None
    assert cost_chf("gpt-4o", {}) is None  # no token counts: unknown, not 0
    assert cost_chf("gpt-4o", {"prompt_tokens": 0, "completion_tokens": 0}) == 0
    overrides = {"gpt-4o": ModelPrice(1.0, 2.0), "mistral-large": ModelPrice(2.0, 6.0)}
    assert cost_chf("gpt-4o", usage, overrides) == pytest.approx(0.5 + 0.5)
    assert cost_chf("mistral-large", usage, overrides) == pytest.approx(1.0 + 1.5)


# --- circuit breaker ------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_breaker_opens_after_the_threshold_and_lets_one_trial_through():
    clock = Clock()
    breaker = CircuitBreaker(failure_threshold=3, cooldown_seconds=30, clock=clock)
    for _ in range(2):
        assert breaker.allow()
        breaker.record_failure()
    assert breaker.state == "closed" and breaker.allow()
    breaker.record_failure()
    assert breaker.state == "open" and not breaker.allow() and breaker.retry_in() == 30
    clock.now = 29.9
    assert not breaker.allow()
    clock.now = 30
    assert breaker.state == "half_open"
    assert breaker.allow()  # the trial
    assert not breaker.allow() and not breaker.allow()  # only one at a time
    breaker.record_success()
    assert breaker.state == "closed" and breaker.consecutive_failures == 0 and breaker.allow()


def test_a_failed_trial_opens_the_circuit_again_at_once():
    clock = Clock()
    breaker = CircuitBreaker(failure_threshold=3, cooldown_seconds=10, clock=clock)
    for _ in range(3):
        breaker.record_failure()
    clock.now = 10
    assert breaker.allow()
    breaker.record_failure()
    assert breaker.state == "open" and breaker.retry_in() == 10 and not breaker.allow()


def test_a_trial_that_never_reports_back_does_not_block_forever():
    clock = Clock()
    breaker = CircuitBreaker(failure_threshold=1, cooldown_seconds=5, clock=clock)
    breaker.record_failure()
    clock.now = 5
    assert breaker.allow()  # the trial's caller vanishes
    clock.now = 9
    assert not breaker.allow()
    clock.now = 10
    assert breaker.allow()


def test_breaker_arguments_are_checked():
    with pytest.raises(ValueError):
        CircuitBreaker(failure_threshold=0)
    with pytest.raises(ValueError):
        CircuitBreaker(cooldown_seconds=-1)


# --- POWERON_AI_PROVIDERS -------------------------------------------------------------------


def parse(monkeypatch, value) -> tuple[AiProviderSettings, ...] | None:
    monkeypatch.setenv("POWERON_AI_PROVIDERS", value if isinstance(value, str) else json.dumps(value))
    return _ai_providers("POWERON_AI_PROVIDERS", 60.0)


def test_providers_are_parsed_in_order(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-from-env-0000")
    providers = parse(monkeypatch, [
        {"name": "openai", "baseUrl": "https://api.openai.com/v1/", "apiKey": "sk-one-0000", "model": "gpt-4o-mini",
         "imageModel": "gpt-image-1", "timeoutSeconds": 20,
         "models": {"gpt-4o": "gpt-4o-2024-08-06"}, "prices": {"gpt-4o-mini": {"input": 0.2, "output": 0.5}}},
        {"name": "local", "baseUrl": "http://127.0.0.1:11434/v1", "apiKeyEnv": "MY_KEY", "model": "llama3"},
    ])
    first, second = providers
    assert (first.name, first.base_url, first.api_key, first.model) == \
        ("openai", "https://api.openai.com/v1", "sk-one-0000", "gpt-4o-mini")
    assert first.image_model == "gpt-image-1" and first.timeout_seconds == 20
    assert first.models == (("gpt-4o", "gpt-4o-2024-08-06"),) and first.prices == (("gpt-4o-mini", 0.2, 0.5),)
    assert first.source == "POWERON_AI_PROVIDERS[0]"
    assert second.api_key == "sk-from-env-0000" and second.timeout_seconds == 60.0
    assert "sk-one" not in repr(providers) and "sk-from-env" not in repr(providers)
    assert parse(monkeypatch, "  ") is None


@pytest.mark.parametrize(("value", "message"), [
    ("[{", "POWERON_AI_PROVIDERS is not valid JSON"),
    ({"name": "x"}, "POWERON_AI_PROVIDERS must be a non-empty JSON list"),
    ([], "POWERON_AI_PROVIDERS must be a non-empty JSON list"),
    (["x"], "POWERON_AI_PROVIDERS[0] must be an object"),
    ([{"name": "a", "apiKey": "k"}, {"apiKey": "k"}], "POWERON_AI_PROVIDERS[1].name must be a non-empty string"),
    ([{"name": "a", "apiKey": "k"}, {"name": "a", "apiKey": "k"}], "POWERON_AI_PROVIDERS[1].name 'a' is used twice"),
    ([{"name": "a", "apiKey": "k", "baseURL": "http://x"}], "POWERON_AI_PROVIDERS[0]: unknown field 'baseURL'"),
    ([{"name": "a", "apiKey": "k", "baseUrl": "ftp://x"}], "POWERON_AI_PROVIDERS[0].baseUrl must start with http"),
    ([{"name": "a"}], "POWERON_AI_PROVIDERS[0]: give exactly one of apiKey and apiKeyEnv"),
    ([{"name": "a", "apiKey": "k", "apiKeyEnv": "K"}], "POWERON_AI_PROVIDERS[0]: give exactly one of apiKey"),
    ([{"name": "a", "apiKeyEnv": "POWERON_TEST_UNSET_KEY"}],
     "POWERON_AI_PROVIDERS[0].apiKeyEnv names POWERON_TEST_UNSET_KEY, which is not set"),
    ([{"name": "a", "apiKey": "k", "model": 4}], "POWERON_AI_PROVIDERS[0].model must be a non-empty string, not 4"),
    ([{"name": "a", "apiKey": "k", "timeoutSeconds": 0}], "POWERON_AI_PROVIDERS[0].timeoutSeconds must be a positive"),
    ([{"name": "a", "apiKey": "k", "timeoutSeconds": "5"}], "POWERON_AI_PROVIDERS[0].timeoutSeconds must be"),
    ([{"name": "a", "apiKey": "k", "models": ["x"]}], "POWERON_AI_PROVIDERS[0].models must be an object"),
    ([{"name": "a", "apiKey": "k", "prices": {"m": 1}}], "POWERON_AI_PROVIDERS[0].prices.m must be"),
    ([{"name": "a", "apiKey": "k", "prices": {"m": {"input": -1, "output": 1}}}],
     "POWERON_AI_PROVIDERS[0].prices.m.input must be a number of CHF >= 0"),
])
def test_malformed_providers_are_refused_naming_variable_index_and_field(monkeypatch, value, message):
    monkeypatch.delenv("POWERON_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ValueError) as caught:
        parse(monkeypatch, value)
    assert message in str(caught.value)


def test_a_malformed_key_is_not_repeated_in_the_message(monkeypatch):
    with pytest.raises(ValueError) as caught:
        parse(monkeypatch, [{"name": "a", "apiKey": ["sk-secret-0000"]}])
    assert "POWERON_AI_PROVIDERS[0].apiKey must be a non-empty string" in str(caught.value)
    assert "sk-secret" not in str(caught.value)
    with pytest.raises(ValueError) as caught:
        parse(monkeypatch, '[{"name": "a", "apiKey": "sk-secret-0000",}]')
    assert "sk-secret" not in str(caught.value)


def test_without_the_list_the_openai_variables_make_one_provider(monkeypatch):
    monkeypatch.setenv("POWERON_AI_PROVIDERS", "")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-single-0000")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9999/v1/")
    monkeypatch.setenv("POWERON_AI_MODEL", "m1")
    monkeypatch.setenv("POWERON_AI_TIMEOUT_SECONDS", "7")
    reset_settings_cache()
    try:
        (single,) = get_settings().ai_providers
        assert (single.name, single.base_url, single.model, single.timeout_seconds, single.source) == \
            ("default", "http://127.0.0.1:9999/v1", "m1", 7.0, "OPENAI_API_KEY")
        monkeypatch.setenv("OPENAI_API_KEY", "")
        reset_settings_cache()
        assert get_settings().ai_providers == ()
    finally:
        reset_settings_cache()


# --- restoring placeholders in a stream, checking requests ----------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 5, 100])
def test_placeholders_cut_anywhere_are_restored(size):
    mapping = {"[EMAIL_1]": "anna@example.ch", "[PERSON_12]": "Anna Meier"}
    text = "To [EMAIL_1] from [PERSON_12], see [Note] and [EMAIL_9] and [x"
    restorer = StreamRestorer(mapping)
    out = "".join(restorer.feed(text[i:i + size]) for i in range(0, len(text), size)) + restorer.flush()
    assert out == "To anna@example.ch from Anna Meier, see [Note] and [EMAIL_9] and [x"


def test_chat_requests_are_checked():
    request = make_request("Hi", system="Be brief", tools=[{"type": "function", "function": {"name": "f"}}],
                           tool_choice="f")
    assert [m["role"] for m in request.messages] == ["system", "user"]
    assert request.tool_choice == {"type": "function", "function": {"name": "f"}}
    assert make_request("Hi", tools=[], tool_choice="none").tools is None
    for bad in ({"messages": []}, {"messages": "x", "response_format": "xml"},
                {"messages": "x", "tools": "f"}, {"messages": "x", "tool_choice": "required"}):
        with pytest.raises(AiError):
            make_request(**bad)
