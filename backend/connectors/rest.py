"""A small JSON REST client over httpx for the connectors of outside work systems (ClickUp, Jira …).

One :class:`RestClient` per connection and call: the connector gives the base URL, how requests are
signed (`auth`: headers from the connection's credentials, renewed once when the service answers
401, e.g. an OAuth access token), how long a rate limit asks to wait (`wait_hint`: ClickUp's
X-RateLimit-Reset, Jira's Retry-After) and how the service words its errors (`error_text`).

429 (and 503) are retried after the service's hint (else a short backoff) until
POWERON_CONNECTOR_MAX_WAIT_SECONDS would be exceeded; then the call fails naming the rate limit. Any
other error becomes :class:`ApiError` (a ConnectionFailed, so actions show its message) with the
service's own error text; no answer within POWERON_CONNECTOR_TIMEOUT_SECONDS fails saying so.
Credentials never reach a message or the log.
"""

from __future__ import annotations

import email.utils
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from backend.config import get_settings
from backend.connectors.types import ConnectionFailed

log = logging.getLogger(__name__)

RETRYABLE = (429, 503)
BACKOFF_MAX_SECONDS = 30.0
MESSAGE_MAX = 400


class ApiError(ConnectionFailed):
    """The service answered an error; `status` is the HTTP status."""

    def __init__(self, message: str, status: int, expired: bool = False):
        super().__init__(message, expired=expired)
        self.status = status

    @property
    def not_found(self) -> bool:
        return self.status == 404


@functools.lru_cache(maxsize=4)
def shared_http(timeout: float) -> httpx.Client:
    """One pooled, thread-safe httpx client per process and timeout (connections to a service reused)."""
    return httpx.Client(timeout=httpx.Timeout(timeout), follow_redirects=False)


def retry_after(response: httpx.Response) -> float | None:
    """Seconds a `Retry-After` header asks to wait (seconds or an HTTP date), None without one."""
    value = (response.headers.get("Retry-After") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, parsed.timestamp() - time.time())


def wait_seconds(asked: float | None, retries: int) -> float:
    """How long to wait before retry number `retries + 1`: what the service asked, else an exponential backoff."""
    return min(BACKOFF_MAX_SECONDS, 2.0 ** retries) if asked is None else asked


def short(text: str) -> str:
    """One line of at most MESSAGE_MAX characters."""
    text = " ".join(str(text).split())
    return text[:MESSAGE_MAX] + ("…" if len(text) > MESSAGE_MAX else "")


class RestClient:
    """JSON over HTTP to one service for one connection.

    Args:
        service: The service as messages name it ("ClickUp", "Jira").
        base_url: Every relative path is appended to it.
        auth: The headers that sign every request (a token that cannot be renewed: a 401 is final), or
            a callable returning them, called with True after a 401 to renew them once (OAuth).
        error_text: The service's error message of a failed answer (None: the HTTP reason).
        wait_hint: Seconds a 429 asks to wait (None: Retry-After, else an exponential backoff).
        transport: An httpx transport (None: the network, through one pooled client per process).
    """

    def __init__(self, service: str, base_url: str, auth: Mapping[str, str] | Callable[[bool], Mapping[str, str]],
                 error_text: Callable[[httpx.Response], str] | None = None,
                 wait_hint: Callable[[httpx.Response], float | None] | None = None,
                 transport: httpx.BaseTransport | None = None):
        self.service = service
        self.base_url = base_url.rstrip("/")
        self.auth = auth
        self.error_text = error_text
        self.wait_hint = wait_hint or retry_after
        settings = get_settings()
        self.max_wait = settings.connector_max_wait_seconds
        self.timeout = settings.connector_timeout_seconds
        self._own = transport is not None
        self.http = httpx.Client(timeout=httpx.Timeout(self.timeout), follow_redirects=False, transport=transport) \
            if self._own else shared_http(self.timeout)

    def close(self) -> None:
        if self._own:
            self.http.close()

    def __enter__(self) -> RestClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def url(self, path: str) -> str:
        """The absolute URL of `path`; a full URL only on the service's own host (credentials go along)."""
        if path.startswith(("http://", "https://")):
            if urlsplit(path).netloc.lower() != urlsplit(self.base_url).netloc.lower():
                raise ConnectionFailed(f"{self.service} sent a link to another host; it was not followed")
            return path
        return self.base_url + ("" if path.startswith("/") else "/") + path

    def request(self, method: str, path: str, what: str, *, params: Any = None, json: Any = None,
                content: bytes | None = None, files: Any = None, headers: Mapping[str, str] | None = None
                ) -> httpx.Response:
        """One call (its body read). 401 renews the credentials once; 429/503 wait and retry.

        Args:
            what: What the call does, for messages ("listing the lists of space 7").

        Raises:
            ApiError: the service answered an error (also once the rate limit's wait ran out).
            ConnectionFailed: no answer in time, or the service unreachable.
        """
        url = self.url(path)
        renewed, retries, waited = False, 0, 0.0
        while True:
            signed = self.auth(renewed) if callable(self.auth) else self.auth
            sent = {"Accept": "application/json", **(headers or {}), **signed}
            try:
                response = self.http.request(method, url, params=params, json=json, content=content, files=files,
                                             headers=sent)
            except httpx.TimeoutException:
                raise ConnectionFailed(f"{self.service} did not answer within {self.timeout:g} s while {what}") \
                    from None
            except httpx.HTTPError as exc:
                raise ConnectionFailed(f"cannot reach {self.service} while {what}: {type(exc).__name__}") from None
            status = response.status_code
            if status == 401 and not renewed and callable(self.auth):
                renewed = True
                continue
            if status in RETRYABLE:
                delay = wait_seconds(self.wait_hint(response), retries)
                if waited + delay > self.max_wait:
                    raise ApiError(f"{self.service} is rate-limiting these requests (HTTP {status}) while {what}; "
                                   f"it asked to wait {delay:.0f} s more than the {self.max_wait:g} s allowed "
                                   "(POWERON_CONNECTOR_MAX_WAIT_SECONDS): try again later", status)
                log.info("%s: %s %s answered %s; retry %d in %.3g s", self.service, method, urlsplit(url).path,
                         status, retries + 1, delay)
                time.sleep(delay)
                waited += delay
                retries += 1
                continue
            if status >= 400:
                raise self._error(response, what)
            return response

    def _error(self, response: httpx.Response, what: str) -> ApiError:
        detail = short(self.error_text(response)) if self.error_text else ""
        detail = detail or (response.reason_phrase or "").strip()
        status = response.status_code
        hint = {401: " (the credentials were refused: check or reconnect the connection)",
                403: " (the connection's account may not do this)", 404: " (not found)"}.get(status, "")
        return ApiError(f"{self.service} answered {status} while {what}: {detail}{hint}", status,
                        expired=status == 401)

    def json(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        """`request` and its JSON body (None for an empty answer)."""
        response = self.request(method, path, what, **kwargs)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ApiError(f"{self.service} answered something that is not JSON while {what}",
                           response.status_code) from None
