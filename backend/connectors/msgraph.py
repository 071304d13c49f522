"""A small Microsoft Graph client over httpx (DESIGN §8: connection type `msft`).

Every request carries the connection's access token (backend.connectors.oauth.OAuthTokens: refreshed
before it expires, and once more when Graph answers 401). Listings follow `@odata.nextLink` up to
POWERON_GRAPH_MAX_PAGES pages, and only on Graph's own host (a link elsewhere would take the token
along). 429 and 503/504 are retried after Retry-After (or a short backoff) at most
POWERON_GRAPH_MAX_RETRIES times and POWERON_GRAPH_MAX_WAIT_SECONDS in all; then the call fails naming
the throttling. Any other error becomes :class:`GraphError` (a ConnectionFailed) with Graph's error
code and message; a request that takes longer than POWERON_GRAPH_TIMEOUT_SECONDS fails saying so.
Content is read in a stream and cut off above the caller's limit. Tokens never reach a message or
the log.

Why not the Microsoft Graph SDK: it brings Kiota, azure-identity and an async stack for the dozen
REST calls used here, and hides the paging, throttling and token refresh this module must control
(a refresh has to be stored under the connection's lock).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from backend.config import Settings, get_settings
from backend.connectors.rest import retry_after, shared_http, wait_seconds
from backend.connectors.types import ConnectionFailed

log = logging.getLogger(__name__)

RETRYABLE = (429, 503, 504)
NOT_FOUND_CODES = frozenset({"itemNotFound", "ErrorItemNotFound", "ResourceNotFound", "ErrorInvalidIdMalformed",
                             "Request_ResourceNotFound"})
MESSAGE_MAX = 300


class TokenSource(Protocol):
    """Where the client gets bearer tokens (backend.connectors.oauth.OAuthTokens)."""

    def access_token(self) -> str: ...

    def renew(self, refused: str) -> str: ...


class GraphError(ConnectionFailed):
    """Graph answered an error: `status` (HTTP) and `code` (Graph's error code) say which."""

    def __init__(self, message: str, status: int, code: str):
        super().__init__(message)
        self.status = status
        self.code = code

    @property
    def not_found(self) -> bool:
        return self.status == 404 or self.code in NOT_FOUND_CODES


@dataclass(frozen=True)
class Listing:
    """Items of a paged listing; `more` when POWERON_GRAPH_MAX_PAGES (or the caller's limit) cut it."""

    items: list[dict[str, Any]]
    more: bool


def _error_body(response: httpx.Response) -> tuple[str, str]:
    """(code, message) of Graph's error answer `{"error": {"code", "message"}}`."""
    try:
        body = response.json()
    except ValueError:
        return f"HTTP{response.status_code}", (response.reason_phrase or "").strip()
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code, message = str(error.get("code") or f"HTTP{response.status_code}"), str(error.get("message") or "")
    elif isinstance(error, str):  # OAuth-style answers
        code, message = error, str(body.get("error_description") or "")
    else:
        code, message = f"HTTP{response.status_code}", ""
    message = " ".join(message.split())
    return code, message[:MESSAGE_MAX] + ("…" if len(message) > MESSAGE_MAX else "")


def _retry_after(response: httpx.Response, retries: int) -> float:
    """Seconds Graph asks to wait (Retry-After: seconds or an HTTP date), else an exponential backoff."""
    return wait_seconds(retry_after(response), retries)


def _read(response: httpx.Response) -> None:
    try:
        response.read()
    except httpx.HTTPError:
        pass


class GraphClient:
    """Microsoft Graph v1.0 for one connection.

    Args:
        tokens: Where bearer tokens come from.
        settings: The configuration (default: the process's).
        transport: An httpx transport (None: the network).
    """

    def __init__(self, tokens: TokenSource, settings: Settings | None = None,
                 transport: httpx.BaseTransport | None = None):
        self.tokens = tokens
        self.settings = settings or get_settings()
        self.base = self.settings.msft_graph_url.rstrip("/") + "/v1.0"
        origin = urlsplit(self.base)
        self.origin = (origin.scheme, origin.netloc.lower())
        # One pooled, thread-safe httpx client per process (and timeout): access objects need not be
        # closed by generic code, and connections to Graph are reused.
        self._own = transport is not None
        timeout = self.settings.graph_timeout_seconds
        self.http = httpx.Client(timeout=httpx.Timeout(timeout), follow_redirects=False, transport=transport) \
            if self._own else shared_http(timeout)

    def close(self) -> None:
        """Close the HTTP client when it is this object's own (the shared one stays open)."""
        if self._own:
            self.http.close()

    def __enter__(self) -> GraphClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- requests -------------------------------------------------------------------------------

    def url(self, path: str) -> str:
        """The absolute URL of `path` ("/me/…"), or `path` itself when it is a link on Graph's host."""
        if path.startswith(("http://", "https://")):
            parts = urlsplit(path)
            if (parts.scheme, parts.netloc.lower()) != self.origin:
                raise ConnectionFailed("Microsoft Graph sent a link to another host; it was not followed")
            return path
        return self.base + path

    def request(self, method: str, path: str, what: str, *, params: dict[str, Any] | None = None,
                json: Any = None, content: bytes | None = None, headers: dict[str, str] | None = None,
                stream: bool = False) -> httpx.Response:
        """One Graph call with the bearer token: 401 renews the token once, 429/503/504 wait and retry.

        Args:
            what: What the call does, for messages ("listing the messages of 'inbox'").
            stream: Leave the body unread (the caller reads and closes it).

        Raises:
            GraphError: Graph answered an error (also after the retries ran out).
            ConnectionFailed: no answer in time, or Graph unreachable.
        """
        url = self.url(path)
        renewed, retries, waited = False, 0, 0.0
        while True:
            token = self.tokens.access_token()
            sent = {**(headers or {}), "Authorization": f"Bearer {token}"}
            sent.setdefault("Accept", "application/json")
            request = self.http.build_request(method, url, params=params, json=json, content=content, headers=sent)
            response = self._send(request, what, stream)
            status = response.status_code
            if status == 401 and not renewed:
                _read(response)
                response.close()
                self.tokens.renew(token)
                renewed = True
                continue
            if status in RETRYABLE:
                delay = _retry_after(response, retries)
                if retries >= self.settings.graph_max_retries or waited + delay > self.settings.graph_max_wait_seconds:
                    _read(response)
                    response.close()
                    raise self._throttled(response, what, retries, waited)
                response.close()
                log.info("graph: %s %s answered %s; retry %d in %.3g s", method, urlsplit(url).path, status,
                         retries + 1, delay)
                time.sleep(delay)
                waited += delay
                retries += 1
                continue
            if status >= 400:
                _read(response)
                response.close()
                raise self._error(response, what)
            return response

    def _send(self, request: httpx.Request, what: str, stream: bool) -> httpx.Response:
        try:
            return self.http.send(request, stream=stream)
        except httpx.TimeoutException:
            raise ConnectionFailed(f"Microsoft Graph did not answer within {self.settings.graph_timeout_seconds:g} s "
                                   f"({what})") from None
        except httpx.HTTPError as exc:
            raise ConnectionFailed(f"Microsoft Graph cannot be reached ({what}): {type(exc).__name__}") from None

    def _throttled(self, response: httpx.Response, what: str, retries: int, waited: float) -> GraphError:
        code, message = _error_body(response)
        kind = "throttled the requests (too many)" if response.status_code == 429 else "was unavailable"
        said = f"{response.status_code} {code}" + (f": {message}" if message else "")
        return GraphError(f"Microsoft Graph {kind} while {what} and still did after {retries} retries and "
                          f"{waited:.3g} s of waiting ({said}); try again in a few minutes",
                          response.status_code, code)

    def _error(self, response: httpx.Response, what: str) -> GraphError:
        code, message = _error_body(response)
        said = f"{code}: {message}" if message else code
        log.info("graph: %s answered %s %s", what, response.status_code, code)
        return GraphError(f"Microsoft Graph refused {what} ({response.status_code} {said})", response.status_code,
                          code)

    def get(self, path: str, what: str, params: dict[str, Any] | None = None,
            headers: dict[str, str] | None = None) -> dict[str, Any]:
        """GET a JSON object."""
        return self._json(self.request("GET", path, what, params=params, headers=headers), what)

    def post(self, path: str, what: str, json: Any = None) -> dict[str, Any] | None:
        """POST JSON; the answer's JSON object, or None for an empty answer (202 Accepted …)."""
        response = self.request("POST", path, what, json=json if json is not None else {})
        return self._json(response, what) if response.content else None

    def put(self, path: str, what: str, content: bytes, content_type: str,
            params: dict[str, Any] | None = None) -> dict[str, Any]:
        """PUT bytes; the answer's JSON object."""
        return self._json(self.request("PUT", path, what, params=params, content=content,
                                       headers={"Content-Type": content_type}), what)

    @staticmethod
    def _json(response: httpx.Response, what: str) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            raise ConnectionFailed(f"Microsoft Graph answered {what} with something that is not JSON") from None
        if not isinstance(body, dict):
            raise ConnectionFailed(f"Microsoft Graph answered {what} with an unexpected answer")
        return body

    # --- paging ---------------------------------------------------------------------------------

    def pages(self, path: str, what: str, params: dict[str, Any] | None = None,
              headers: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
        """The pages of a listing, following `@odata.nextLink` (at most POWERON_GRAPH_MAX_PAGES)."""
        url: str | None = path
        first = True
        for _ in range(self.settings.graph_max_pages):
            if url is None:
                return
            page = self.get(url, what, params if first else None, headers)
            first = False
            yield page
            url = page.get("@odata.nextLink") if isinstance(page.get("@odata.nextLink"), str) else None

    def listing(self, path: str, what: str, params: dict[str, Any] | None = None, limit: int | None = None,
                headers: dict[str, str] | None = None) -> Listing:
        """The items (`value`) of a listing, at most `limit`, fetching no page more than needed."""
        items: list[dict[str, Any]] = []
        more = False
        for page in self.pages(path, what, params, headers):
            values = [v for v in page.get("value") or [] if isinstance(v, dict)]
            items.extend(values)
            more = isinstance(page.get("@odata.nextLink"), str)
            if limit is not None and len(items) >= limit:
                return Listing(items[:limit], more or len(items) > limit)
        return Listing(items, more)

    # --- content --------------------------------------------------------------------------------

    def content(self, path: str, what: str, limit: int, too_large: str) -> bytes:
        """The bytes at `path`, following a redirect to a pre-authenticated download URL (without
        the token when it leads to another host), read in a stream.

        Args:
            limit: The most bytes accepted.
            too_large: The message when the content is longer.
        """
        response = self.request("GET", path, what, stream=True, headers={"Accept": "*/*"})
        try:
            if response.status_code in (301, 302, 303, 307, 308) and response.headers.get("Location"):
                location = str(response.url.join(response.headers["Location"]))
                response.close()
                response = self._download(location, what)
            return self._capped(response, limit, too_large)
        finally:
            response.close()

    def _download(self, url: str, what: str) -> httpx.Response:
        parts = urlsplit(url)
        if (parts.scheme, parts.netloc.lower()) == self.origin:
            return self.request("GET", url, what, stream=True, headers={"Accept": "*/*"})
        response = self._send(self.http.build_request("GET", url), what, stream=True)
        if response.status_code >= 400:
            _read(response)
            response.close()
            raise self._error(response, what)
        return response

    @staticmethod
    def _capped(response: httpx.Response, limit: int, too_large: str) -> bytes:
        declared = response.headers.get("Content-Length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise ConnectionFailed(too_large)
        chunks, total = [], 0
        for chunk in response.iter_bytes():
            total += len(chunk)
            if total > limit:
                raise ConnectionFailed(too_large)
            chunks.append(chunk)
        return b"".join(chunks)
