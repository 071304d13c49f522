"""Web search through a SearXNG-compatible JSON API (GET {base}/search?q=…&format=json)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import httpx

from backend.web.safe_fetch import USER_AGENT, WebError

SEARCH_URL_SETTING = "POWERON_SEARCH_URL"
NOT_CONFIGURED = (f"web search is not configured: set {SEARCH_URL_SETTING} to the URL of a SearXNG-compatible "
                  "search API (e.g. http://localhost:8888)")
_TIMEOUT = httpx.Timeout(15.0, connect=5.0)


@dataclass(frozen=True)
class SearchHit:
    """One search result."""

    title: str
    url: str
    snippet: str


def search_endpoint(base_url: str) -> str:
    """`{base}/search`, accepting a base that already ends in /search."""
    base = base_url.strip().rstrip("/")
    return base if base.endswith("/search") else base + "/search"


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def web_search(base_url: str | None, query: str, *, limit: int = 5, language: str | None = None) -> list[SearchHit]:
    """Ask the search API and return at most `limit` results (duplicates by URL dropped).

    Raises:
        WebError: not configured, unreachable, an HTTP error status or an answer that is not
            the JSON such an API gives.
    """
    if not base_url:
        raise WebError(NOT_CONFIGURED)
    endpoint = search_endpoint(base_url)
    params = {"q": query, "format": "json", "language": language or "all"}
    try:
        with httpx.Client(timeout=_TIMEOUT, follow_redirects=True, headers={"User-Agent": USER_AGENT,
                                                                            "Accept": "application/json"}) as client:
            response = client.get(endpoint, params=params)
    except httpx.TimeoutException as exc:
        raise WebError(f"web search at {endpoint} did not answer in time") from exc
    except httpx.HTTPError as exc:
        raise WebError(f"web search at {endpoint} could not be reached: {exc}") from exc
    if response.status_code >= 400:
        hint = (" (SearXNG answers 403 when the json format is not enabled under search.formats in its settings)"
                if response.status_code == 403 else "")
        raise WebError(f"web search at {endpoint} answered HTTP {response.status_code} "
                       f"{response.reason_phrase}{hint}".rstrip())
    try:
        data = response.json()
    except ValueError as exc:
        content_type = response.headers.get("content-type", "no content type")
        raise WebError(f"web search at {endpoint} did not answer with JSON ({content_type}); is {SEARCH_URL_SETTING} "
                       "a SearXNG-compatible API?") from exc
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise WebError(f"web search at {endpoint} answered JSON without a 'results' list; is {SEARCH_URL_SETTING} "
                       "a SearXNG-compatible API?")
    hits: list[SearchHit] = []
    seen: set[str] = set()
    for item in results:
        if len(hits) >= limit:
            break
        url = item.get("url") if isinstance(item, dict) else None
        if not isinstance(url, str) or not url.strip() or url in seen:
            continue
        seen.add(url)
        hits.append(SearchHit(title=_one_line(str(item.get("title") or url)), url=url.strip(),
                              snippet=_one_line(str(item.get("content") or ""))))
    return hits
