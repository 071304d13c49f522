"""core.webSearch through each engine: ddgs (out of the box), Brave and Tavily.

ddgs asks DuckDuckGo's real HTML endpoint; here its requests go through a CONNECT proxy on
127.0.0.1 (POWERON_SEARCH_PROXY) that ends their TLS with a throw-away CA (POWERON_SEARCH_CA_FILE)
and answers as DuckDuckGo does (tests/search_servers.py). Brave and Tavily are stand-ins of their
APIs whose base URL is POWERON_SEARCH_URL. No traffic leaves the machine. SearXNG is tested in
test_web_actions.py.
"""

from __future__ import annotations

import time

import pytest

from backend.actions import execute_action
from backend.config import reset_settings_cache
from backend.workflows import requirements
from tests.search_servers import BraveStandIn, DuckDuckGoProxy, Hit, TavilyStandIn, TestCA, free_port

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

SEARCH_SETTINGS = ("POWERON_SEARCH_ENGINE", "POWERON_SEARCH_URL", "POWERON_SEARCH_API_KEY", "POWERON_SEARCH_PROXY",
                   "POWERON_SEARCH_CA_FILE", "POWERON_SEARCH_BACKENDS", "SSL_CERT_FILE", "DDGS_PROXY")

# What an engine lists for "glacier express": the same pages under other spellings (scheme and
# host case, trailing slash, fragment, utm_* parameters), and two pages that differ in a real parameter.
GLACIER = [
    Hit("Glacier Express – the slowest express train", "https://www.glacierexpress.ch/en/",
        "Glacier Express: from Zermatt to St. Moritz in eight hours."),
    Hit("Glacier Express – Wikipedia", "https://en.wikipedia.org/wiki/Glacier_Express",
        "The Glacier Express is an express train connecting Zermatt and St. Moritz."),
    Hit("Glacier Express timetable", "http://WWW.GlacierExpress.ch/en?utm_source=newsletter&utm_medium=email#times",
        "Glacier Express timetable and seats."),
    Hit("Glacier Express | MySwitzerland", "https://www.myswitzerland.com/en-ch/experiences/glacier-express/",
        "Glacier Express: a panoramic journey through the Alps."),
    Hit("Glacier Express (Wikipedia, mobile)", "https://en.wikipedia.org/wiki/Glacier_Express/",
        "The Glacier Express is an express train."),
    Hit("Glacier Express – RhB (English)", "https://www.rhb.ch/en/panoramic-trains/glacier-express?lang=en",
        "Glacier Express on the Rhaetian Railway."),
    Hit("Glacier Express – RhB (Deutsch)", "https://www.rhb.ch/en/panoramic-trains/glacier-express?lang=de",
        "Der Glacier Express der Rhätischen Bahn."),
]
UNIQUE_URLS = ["https://www.glacierexpress.ch/en/", "https://en.wikipedia.org/wiki/Glacier_Express",
               "https://www.myswitzerland.com/en-ch/experiences/glacier-express/",
               "https://www.rhb.ch/en/panoramic-trains/glacier-express?lang=en",
               "https://www.rhb.ch/en/panoramic-trains/glacier-express?lang=de"]


@pytest.fixture
def search_env(monkeypatch: pytest.MonkeyPatch):
    """Set the search settings of one test; all others (and a CA or proxy of the shell) unset."""

    def apply(**values: str) -> None:
        for name in SEARCH_SETTINGS:
            monkeypatch.delenv(name, raising=False)
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        reset_settings_cache()

    yield apply
    reset_settings_cache()


@pytest.fixture
def duckduckgo():
    with TestCA() as ca, DuckDuckGoProxy(ca) as proxy:
        proxy.hits = list(GLACIER)
        yield proxy


def wait_for(condition, seconds: float = 5.0) -> bool:
    """Whether `condition()` comes true within `seconds` (the proxy's threads finish after the client)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def search(action_context, **params):
    return execute_action("core.webSearch", {"query": "glacier express", **params}, action_context)


def search_need() -> str:
    """What a workflow card says about a web search node here."""
    graph = {"nodes": [{"id": "find", "type": "core.webSearch", "parameters": {"query": "news"}}], "edges": []}
    (need,) = requirements.graph_needs(graph)
    return need.text


# --- ddgs: no configuration -----------------------------------------------------------------


@SQLITE
def test_without_configuration_ddgs_searches_duckduckgo_and_each_page_comes_once(
        action_context, duckduckgo, search_env):
    # Nothing chosen (auto, no SearXNG URL): ddgs. Proxy and CA only because the test stands in for DuckDuckGo.
    search_env(POWERON_SEARCH_PROXY=duckduckgo.url, POWERON_SEARCH_CA_FILE=duckduckgo.ca.pem_path,
               POWERON_SEARCH_BACKENDS="duckduckgo")
    assert search_need() == "Needs web search — available here"

    result = search(action_context, limit=10, language="de-CH")

    assert result.ok, result.error
    assert sorted(r["url"] for r in result.output["results"]) == sorted(UNIQUE_URLS)  # the ad left out
    first = next(r for r in result.output["results"] if r["url"] == "https://www.glacierexpress.ch/en/")
    assert first == {"title": "Glacier Express – the slowest express train", "url": "https://www.glacierexpress.ch/en/",
                     "snippet": "Glacier Express: from Zermatt to St. Moritz in eight hours."}
    assert duckduckgo.tunnels == ["html.duckduckgo.com:443"] and duckduckgo.tls_errors == []
    (request,) = duckduckgo.seen
    assert (request.method, request.path) == ("POST", "/html/")
    assert request.form["q"] == ["glacier express"] and request.form["l"] == ["ch-de"]

    assert len(search(action_context, limit=2).output["results"]) == 2
    assert duckduckgo.seen[-1].form["l"] == ["wt-wt"]  # no language: any region


@SQLITE
def test_ddgs_failures_say_what_happened(action_context, duckduckgo, search_env):
    search_env(POWERON_SEARCH_ENGINE="ddgs", POWERON_SEARCH_PROXY=duckduckgo.url,
               POWERON_SEARCH_CA_FILE=duckduckgo.ca.pem_path, POWERON_SEARCH_BACKENDS="duckduckgo")
    duckduckgo.status = 429  # DuckDuckGo limiting this address
    limited = search(action_context)
    assert not limited.ok and limited.error_kind == "failed"
    assert "got no results" in limited.error and "limit requests" in limited.error
    assert "try again later" in limited.error and "POWERON_SEARCH_ENGINE" in limited.error

    duckduckgo.status, duckduckgo.refuse_tunnels = 200, True
    unreachable = search(action_context)
    assert not unreachable.ok and "could not be reached" in unreachable.error

    # The test CA not trusted: the TLS handshake fails, and the message says the engines were not reached.
    duckduckgo.refuse_tunnels, asked = False, len(duckduckgo.seen)
    search_env(POWERON_SEARCH_ENGINE="ddgs", POWERON_SEARCH_PROXY=duckduckgo.url, POWERON_SEARCH_BACKENDS="duckduckgo")
    untrusted = search(action_context)
    assert not untrusted.ok and "could not be reached" in untrusted.error
    assert len(duckduckgo.seen) == asked  # no request got through
    assert wait_for(lambda: duckduckgo.tls_errors), "the proxy saw no failed handshake"


# --- Brave Search API and Tavily ----------------------------------------------------------------


@SQLITE
def test_brave_search_api(action_context, search_env):
    with BraveStandIn(key="BSA-test-key") as brave:
        brave.hits = list(GLACIER)
        search_env(POWERON_SEARCH_ENGINE="brave", POWERON_SEARCH_URL=brave.url)
        assert search_need() == ("Needs web search — not configured here: POWERON_SEARCH_ENGINE=brave needs "
                                 "POWERON_SEARCH_API_KEY (a Brave Search API key)")
        missing = search(action_context)
        assert not missing.ok and "POWERON_SEARCH_API_KEY" in missing.error and brave.seen == []

        search_env(POWERON_SEARCH_ENGINE="brave", POWERON_SEARCH_URL=brave.url, POWERON_SEARCH_API_KEY="BSA-test-key")
        assert search_need() == "Needs web search — available here"
        result = search(action_context, limit=4, language="fr-CH")
        assert result.ok, result.error
        assert [r["url"] for r in result.output["results"]] == [
            "https://www.glacierexpress.ch/en/", "https://en.wikipedia.org/wiki/Glacier_Express",
            "https://www.myswitzerland.com/en-ch/experiences/glacier-express/",
            "https://www.rhb.ch/en/panoramic-trains/glacier-express?lang=en"]
        assert result.output["results"][1]["snippet"].startswith("The Glacier Express is an express train")
        request = brave.seen[-1]
        assert request.path == "/res/v1/web/search" and request.headers["x-subscription-token"] == "BSA-test-key"
        assert request.query["q"] == ["glacier express"] and request.query["search_lang"] == ["fr"]
        assert request.query["country"] == ["CH"] and int(request.query["count"][0]) > 4  # room for duplicates

        brave.status = 429
        limited = search(action_context)
        assert not limited.ok and "HTTP 429" in limited.error and "rate limit" in limited.error
        assert "Request rate limit exceeded" in limited.error

        search_env(POWERON_SEARCH_ENGINE="brave", POWERON_SEARCH_URL=brave.url, POWERON_SEARCH_API_KEY="wrong-key")
        refused = search(action_context)
        assert not refused.ok and "HTTP 401" in refused.error and "check POWERON_SEARCH_API_KEY" in refused.error
        assert "wrong-key" not in refused.error


@SQLITE
def test_tavily(action_context, search_env):
    with TavilyStandIn(key="tvly-test-key") as tavily:
        tavily.hits = list(GLACIER)
        search_env(POWERON_SEARCH_ENGINE="tavily", POWERON_SEARCH_URL=tavily.url,
                   POWERON_SEARCH_API_KEY="tvly-test-key")
        result = search(action_context)
        assert result.ok, result.error
        assert [r["url"] for r in result.output["results"]] == UNIQUE_URLS
        assert result.output["results"][3]["snippet"] == "Glacier Express on the Rhaetian Railway."
        request = tavily.seen[-1]
        assert (request.method, request.path) == ("POST", "/search")
        assert request.headers["authorization"] == "Bearer tvly-test-key"
        assert request.json["query"] == "glacier express" and request.json["max_results"] > 5

        tavily.status = 429
        limited = search(action_context)
        assert not limited.ok and "HTTP 429" in limited.error and "rate limit" in limited.error
        assert "excessive requests" in limited.error

        search_env(POWERON_SEARCH_ENGINE="tavily", POWERON_SEARCH_URL=f"http://127.0.0.1:{free_port()}",
                   POWERON_SEARCH_API_KEY="tvly-test-key")
        unreachable = search(action_context)
        assert not unreachable.ok and "Tavily web search" in unreachable.error
        assert "could not be reached" in unreachable.error
