"""Web search for `core.webSearch`: one registry of engines, results deduplicated by URL.

Engines (:data:`ENGINES`, chosen by POWERON_SEARCH_ENGINE, see :class:`SearchConfig`):

- ``ddgs``: the metasearch library ddgs (DuckDuckGo, Bing, Brave, Mojeek, Wikipedia … scraped,
  no key). The default: web search works without any configuration.
- ``searxng``: a SearXNG-compatible JSON API, ``GET {POWERON_SEARCH_URL}/search?q=…&format=json``.
- ``brave``: the Brave Search API, ``GET {base}/res/v1/web/search`` with POWERON_SEARCH_API_KEY in
  ``X-Subscription-Token`` (base: POWERON_SEARCH_URL or https://api.search.brave.com).
- ``tavily``: Tavily, ``POST {base}/search`` ``{query, max_results}`` with ``Bearer`` key
  (base: POWERON_SEARCH_URL or https://api.tavily.com).

``auto`` (the default) is ``searxng`` when POWERON_SEARCH_URL is set, else ``ddgs``. Every engine
goes through POWERON_SEARCH_PROXY when set and trusts POWERON_SEARCH_CA_FILE (else SSL_CERT_FILE).
Results with the same URL (see :func:`url_key`) come back once. Failures raise
:class:`~backend.web.safe_fetch.WebError` with a message that names the engine, what went wrong
(not configured, refused key, rate limit, unreachable, time-out) and, where it helps, the setting.
"""

from __future__ import annotations

import importlib.util
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from backend.web.safe_fetch import USER_AGENT, WebError

SEARCH_URL_SETTING = "POWERON_SEARCH_URL"
ENGINE_SETTING = "POWERON_SEARCH_ENGINE"
API_KEY_SETTING = "POWERON_SEARCH_API_KEY"
NOT_CONFIGURED = (f"web search is not configured: set {SEARCH_URL_SETTING} to the URL of a SearXNG-compatible "
                  "search API (e.g. http://localhost:8888)")
_TIMEOUT = httpx.Timeout(15.0, connect=5.0)
_DDGS_TIMEOUT_SECONDS = 10
_EXTRA = 5  # results asked for beyond `limit`, so that duplicates dropped still leave `limit`


@dataclass(frozen=True)
class SearchHit:
    """One search result."""

    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class SearchConfig:
    """How to search (from the POWERON_SEARCH_* settings, see backend/config.py).

    Attributes:
        engine: auto, ddgs, searxng, brave or tavily.
        url: SearXNG's base URL; for brave and tavily their API's base URL (None: the public one).
        api_key: The Brave or Tavily key (never in `repr` or messages).
        proxy: A proxy for every search request, or None.
        ca_file: A PEM file of trusted certificate authorities, or None for the built-in ones.
        backends: The engines ddgs asks ("auto" or names joined by commas).
    """

    engine: str = "auto"
    url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    proxy: str | None = None
    ca_file: str | None = None
    backends: str = "auto"

    @classmethod
    def from_settings(cls, settings: Any) -> SearchConfig:
        """The configuration of `settings` (backend.config.Settings)."""
        return cls(engine=settings.search_engine, url=settings.search_url, api_key=settings.search_api_key,
                   proxy=settings.search_proxy, ca_file=settings.search_ca_file, backends=settings.search_backends)

    @property
    def resolved(self) -> str:
        """The engine asked: ``auto`` is searxng when a URL is set, else ddgs."""
        if self.engine == "auto":
            return "searxng" if self.url else "ddgs"
        return self.engine


@dataclass(frozen=True)
class Engine:
    """One search engine of :data:`ENGINES`.

    Attributes:
        id: What POWERON_SEARCH_ENGINE names.
        label: As messages name it.
        problem: None when this configuration can use it, else why not and how to fix it
            ("not configured here: set …").
        search: (config, query, how many, language or None) → hits in the engine's order,
            duplicates included; raises WebError.
    """

    id: str
    label: str
    problem: Callable[[SearchConfig], str | None]
    search: Callable[[SearchConfig, str, int, str | None], list[SearchHit]]


# --- shared helpers -------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def url_key(url: str) -> str:
    """The URL as duplicates share it: scheme (http and https alike) and host in lower case,
    no default port, no trailing slash, no fragment, no ``utm_*`` tracking parameters."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    scheme = "https" if scheme == "http" else scheme
    host = (parts.hostname or "").lower()
    if parts.port and parts.port not in (80, 443):
        host = f"{host}:{parts.port}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                       if not k.lower().startswith("utm_")])
    return urlunsplit((scheme, host, parts.path.rstrip("/"), query, ""))


def deduplicate(hits: list[SearchHit], limit: int) -> list[SearchHit]:
    """At most `limit` hits, each URL (by :func:`url_key`) once, the first of each kept."""
    kept: list[SearchHit] = []
    seen: set[str] = set()
    for hit in hits:
        key = url_key(hit.url)
        if key in seen:
            continue
        seen.add(key)
        kept.append(hit)
        if len(kept) >= limit:
            break
    return kept


def _hit(title: Any, url: Any, snippet: Any) -> SearchHit | None:
    """A hit from an engine's fields; None without a usable URL."""
    if not isinstance(url, str) or not url.strip():
        return None
    return SearchHit(title=_one_line(str(title or url)), url=url.strip(), snippet=_one_line(str(snippet or "")))


def _verify(config: SearchConfig) -> ssl.SSLContext | bool:
    if not config.ca_file:
        return True
    try:
        return ssl.create_default_context(cafile=config.ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise WebError(f"web search cannot use the CA file {config.ca_file} (POWERON_SEARCH_CA_FILE or "
                       f"SSL_CERT_FILE): {exc}") from exc


def _request_json(name: str, method: str, url: str, config: SearchConfig, *, hints: dict[int, str],
                  **kwargs: Any) -> Any:
    """`method url` answered with JSON, or WebError naming `name` ("web search at …"), the status
    and the hint for it (e.g. 429: rate limited)."""
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **kwargs.pop("headers", {})}
    try:
        with httpx.Client(timeout=_TIMEOUT, follow_redirects=True, headers=headers, proxy=config.proxy,
                          verify=_verify(config)) as client:
            response = client.request(method, url, **kwargs)
    except httpx.TimeoutException as exc:
        raise WebError(f"{name} did not answer in time") from exc
    except (httpx.HTTPError, ValueError) as exc:  # ValueError: e.g. a POWERON_SEARCH_PROXY httpx cannot use
        raise WebError(f"{name} could not be reached: {exc}") from exc
    if response.status_code >= 400:
        detail = _error_detail(response)
        hint = hints.get(response.status_code, "")
        raise WebError(f"{name} answered HTTP {response.status_code} {response.reason_phrase}"
                       f"{f': {detail}' if detail else ''}{hint}".rstrip())
    try:
        return response.json()
    except ValueError as exc:
        content_type = response.headers.get("content-type", "no content type")
        raise WebError(f"{name} did not answer with JSON ({content_type})") from exc


def _error_detail(response: httpx.Response) -> str:
    """The reason a JSON error answer gives (Brave: error.detail; Tavily: detail.error), else ''."""
    try:
        data = response.json()
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    error, detail = data.get("error"), data.get("detail")
    for candidate in ((error or {}).get("detail") if isinstance(error, dict) else error,
                      (detail or {}).get("error") if isinstance(detail, dict) else detail):
        if isinstance(candidate, str) and candidate.strip():
            return _one_line(candidate)[:300]
    return ""


def _rate_limited(label: str) -> str:
    return f" — {label} is limiting requests (rate limit or quota reached); try again later"


# --- SearXNG --------------------------------------------------------------------------------


def search_endpoint(base_url: str) -> str:
    """`{base}/search`, accepting a base that already ends in /search."""
    base = base_url.strip().rstrip("/")
    return base if base.endswith("/search") else base + "/search"


def _searxng_problem(config: SearchConfig) -> str | None:
    if config.url:
        return None
    return f"not configured here: set {SEARCH_URL_SETTING} to the URL of a SearXNG-compatible search API"


def _searxng(config: SearchConfig, query: str, count: int, language: str | None) -> list[SearchHit]:
    if not config.url:
        raise WebError(NOT_CONFIGURED)
    endpoint = search_endpoint(config.url)
    params = {"q": query, "format": "json", "language": language or "all"}
    hints = {403: " (SearXNG answers 403 when the json format is not enabled under search.formats in its settings)",
             429: _rate_limited("SearXNG")}
    try:
        data = _request_json(f"web search at {endpoint}", "GET", endpoint, config, hints=hints, params=params)
    except WebError as exc:
        if "did not answer with JSON" in str(exc):
            raise WebError(f"{exc}; is {SEARCH_URL_SETTING} a SearXNG-compatible API?") from None
        raise
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise WebError(f"web search at {endpoint} answered JSON without a 'results' list; is {SEARCH_URL_SETTING} "
                       "a SearXNG-compatible API?")
    return [hit for item in results if isinstance(item, dict)
            and (hit := _hit(item.get("title"), item.get("url"), item.get("content"))) is not None]


# --- Brave Search API and Tavily ------------------------------------------------------------


def _key_problem(label: str, engine: str) -> Callable[[SearchConfig], str | None]:
    def problem(config: SearchConfig) -> str | None:
        if config.api_key:
            return None
        return f"not configured here: {ENGINE_SETTING}={engine} needs {API_KEY_SETTING} (a {label} API key)"

    return problem


def _require_key(config: SearchConfig, label: str, engine: str) -> str:
    if not config.api_key:
        raise WebError(f"web search is not configured: {ENGINE_SETTING}={engine} needs {API_KEY_SETTING} "
                       f"(a {label} API key)")
    return config.api_key


def _brave(config: SearchConfig, query: str, count: int, language: str | None) -> list[SearchHit]:
    key = _require_key(config, "Brave Search", "brave")
    endpoint = (config.url or "https://api.search.brave.com").rstrip("/") + "/res/v1/web/search"
    params: dict[str, Any] = {"q": query, "count": min(count, 20)}
    if language and language not in ("all", "auto"):
        lang, _, country = language.partition("-")
        params["search_lang"] = lang.lower()
        if country:
            params["country"] = country.upper()
    refused = f" — check {API_KEY_SETTING}"
    data = _request_json(f"Brave web search at {endpoint}", "GET", endpoint, config, params=params,
                         headers={"X-Subscription-Token": key},
                         hints={401: refused, 403: refused, 429: _rate_limited("Brave Search")})
    results = (data.get("web") or {}).get("results") if isinstance(data, dict) else None
    if results is None and isinstance(data, dict) and "web" not in data:
        return []  # Brave leaves `web` out when nothing was found
    if not isinstance(results, list):
        raise WebError(f"Brave web search at {endpoint} answered JSON without a 'web.results' list")
    return [hit for item in results if isinstance(item, dict)
            and (hit := _hit(item.get("title"), item.get("url"), item.get("description"))) is not None]


def _tavily(config: SearchConfig, query: str, count: int, language: str | None) -> list[SearchHit]:
    key = _require_key(config, "Tavily", "tavily")
    endpoint = (config.url or "https://api.tavily.com").rstrip("/") + "/search"
    refused = f" — check {API_KEY_SETTING}"
    limited = _rate_limited("Tavily")
    data = _request_json(f"Tavily web search at {endpoint}", "POST", endpoint, config,
                         json={"query": query, "max_results": min(count, 20)},
                         headers={"Authorization": f"Bearer {key}"},
                         hints={401: refused, 403: refused, 429: limited, 432: limited, 433: limited})
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise WebError(f"Tavily web search at {endpoint} answered JSON without a 'results' list")
    return [hit for item in results if isinstance(item, dict)
            and (hit := _hit(item.get("title"), item.get("url"), item.get("content"))) is not None]


# --- ddgs -----------------------------------------------------------------------------------

# ddgs regions are country-language; where the language code is no country code.
_REGION_OF = {"en": "us-en", "ja": "jp-jp", "ko": "kr-kr", "zh": "cn-zh", "sv": "se-sv", "da": "dk-da",
              "cs": "cz-cs", "el": "gr-el", "uk": "ua-uk", "he": "il-he", "et": "ee-et", "vi": "vn-vi"}


def ddgs_region(language: str | None) -> str:
    """ddgs's region for a language code: 'de' → 'de-de', 'fr-CH' → 'ch-fr', none → 'wt-wt' (any)."""
    if not language or language in ("all", "auto"):
        return "wt-wt"
    lang, _, country = language.lower().partition("-")
    if country:
        return f"{country}-{lang}"
    return _REGION_OF.get(lang, f"{lang}-{lang}")


def _ddgs_problem(_config: SearchConfig) -> str | None:
    if importlib.util.find_spec("ddgs") is not None:
        return None
    return (f"not available here: the ddgs package is not installed (pip install -r requirements.txt), or set "
            f"{ENGINE_SETTING} to searxng, brave or tavily")


def _ddgs(config: SearchConfig, query: str, count: int, language: str | None) -> list[SearchHit]:
    problem = _ddgs_problem(config)
    if problem is not None:
        raise WebError(f"web search is {problem}")
    from ddgs import DDGS
    from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

    name = f"web search through ddgs ({config.backends})"
    verify: bool | str = config.ca_file or True
    try:
        found = DDGS(proxy=config.proxy, timeout=_DDGS_TIMEOUT_SECONDS, verify=verify).text(
            query, region=ddgs_region(language), max_results=count, backend=config.backends)
    except RatelimitException as exc:
        raise WebError(f"{name} failed{_rate_limited('the search engine')} ({exc})") from exc
    except TimeoutException as exc:
        raise WebError(f"{name} did not answer in time: the search engines took too long ({exc})") from exc
    except DDGSException as exc:
        raise WebError(_ddgs_failure(name, str(exc))) from exc
    except Exception as exc:  # noqa: BLE001 - a scraper of foreign pages can fail in many ways
        raise WebError(f"{name} failed: {type(exc).__name__}: {exc}") from exc
    return [hit for item in found if isinstance(item, dict)
            and (hit := _hit(item.get("title"), item.get("href"), item.get("body"))) is not None]


def _ddgs_failure(name: str, reason: str) -> str:
    """ddgs's last error in words: no results at all (engines refusing or limiting, or really
    nothing), or an engine that could not be reached."""
    if not reason or reason == "No results found.":
        return (f"{name} got no results: the search engines answered without results or refused the request "
                f"(they limit requests from one address — try again later, or set {ENGINE_SETTING} to searxng, "
                "brave or tavily)")
    wrapped = re.search(r"\w+\((['\"])(.*)\1\)\s*$", reason)  # "RequestError('error sending …')"
    text = _one_line((wrapped.group(2) if wrapped else reason).replace("\\r\\n", " ").replace("\\n", " "))
    hint = (" — if a proxy inspects TLS here, name its CA in POWERON_SEARCH_CA_FILE"
            if "certificate" in text.lower() else "")
    return f"{name} failed: the search engines could not be reached ({text[:300]}){hint}"


# --- the registry and the entry point -------------------------------------------------------

ENGINES: dict[str, Engine] = {engine.id: engine for engine in (
    Engine("ddgs", "ddgs (DuckDuckGo and other engines)", _ddgs_problem, _ddgs),
    Engine("searxng", "SearXNG", _searxng_problem, _searxng),
    Engine("brave", "Brave Search API", _key_problem("Brave Search", "brave"), _brave),
    Engine("tavily", "Tavily", _key_problem("Tavily", "tavily"), _tavily),
)}


def search_problem(config: SearchConfig) -> str | None:
    """None when web search works with `config`, else what is missing and how to fix it."""
    return ENGINES[config.resolved].problem(config)


def web_search(config: SearchConfig, query: str, *, limit: int = 5, language: str | None = None) -> list[SearchHit]:
    """Ask the configured engine and return at most `limit` results, each URL once.

    Raises:
        WebError: not configured, unreachable, a refused key, a rate limit, an HTTP error status
            or an answer that is not what the engine gives.
    """
    engine = ENGINES[config.resolved]
    return deduplicate(engine.search(config, query, limit + _EXTRA, language), limit)
