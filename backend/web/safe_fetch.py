"""Fetch one web page with the guards a tool that reads arbitrary URLs needs.

Only http and https; the host name is resolved here and every resolved address is checked
before anything is sent (link-local — the cloud metadata address 169.254.169.254 —, multicast,
reserved and unspecified addresses always refused, private and loopback ones unless allowed);
the connection then goes to exactly the address that was checked (the host name travels in the
Host header and TLS SNI), so a second DNS answer cannot swap in another target. Redirects are
followed by hand, each hop checked the same way, at most five. The body is streamed and reading
stops at the size limit; the whole fetch has a time limit.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from dataclasses import dataclass

import httpx

MAX_BYTES = 5 * 1024 * 1024
MAX_REDIRECTS = 5
TIMEOUT_SECONDS = 20.0
ALLOW_PRIVATE_SETTING = "POWERON_READURL_ALLOW_PRIVATE"
USER_AGENT = "PowerOnUnified/0.1 (+readUrl)"
_TIMEOUT = httpx.Timeout(10.0, connect=5.0)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class WebError(Exception):
    """A web request that failed or was refused, said in plain words."""


@dataclass(frozen=True)
class FetchedPage:
    """What a fetch brought back.

    Attributes:
        url: The final URL, after redirects.
        status: Its HTTP status code.
        content_type: Media type in lower case without parameters ("" when none was sent).
        charset: The charset the server declared, if any.
        body: The bytes read (at most the size limit).
        truncated: The body was longer than the limit; only its start was read.
        redirects: The URLs that redirected, in order.
    """

    url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool
    redirects: tuple[str, ...] = ()


def _short(url: object, limit: int = 200) -> str:
    text = str(url)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _embedded_ipv4(ip: IPAddress) -> IPAddress:
    """The IPv4 address inside an IPv4-mapped, 6to4 or NAT64 IPv6 address, else `ip` itself."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
    return ip


def address_refusal(ip: IPAddress, *, allow_private: bool = False) -> str | None:
    """Why a page must not be fetched from `ip` ("a loopback address", …), or None when it may.

    Unspecified, link-local, multicast and reserved addresses are always refused; private,
    loopback and other non-public ones (e.g. 100.64.0.0/10) only while `allow_private` is off.
    """
    ip = _embedded_ipv4(ip)
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_loopback:
        kind = "a loopback address"
    elif ip.is_reserved:
        return "a reserved address"
    elif ip.is_private:
        kind = "a private address"
    elif not ip.is_global:
        kind = "a non-public address"
    else:
        return None
    return None if allow_private else kind


def check_url(url: str) -> httpx.URL:
    """Parse `url` and refuse anything but an http(s) URL with a host."""
    text = (url or "").strip()
    try:
        parsed = httpx.URL(text)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise WebError(f"'{_short(text)}' is not a valid URL: {exc}") from exc
    scheme = parsed.scheme.lower()
    if not scheme:
        raise WebError(f"'{_short(text)}' is not a full URL: it must start with http:// or https://")
    if scheme not in ("http", "https"):
        raise WebError(f"only http and https URLs can be read; {scheme}: URLs are refused ('{_short(text)}')")
    if not parsed.host:
        raise WebError(f"'{_short(text)}' has no host name")
    return parsed


def _host(url: httpx.URL) -> str:
    return url.raw_host.decode("ascii")


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (an IP literal stands for itself)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise WebError(f"the host name '{host}' could not be resolved ({exc})") from exc
    addresses: list[IPAddress] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])  # drop an IPv6 zone
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise WebError(f"the host name '{host}' resolves to no address")
    return addresses


def vetted_addresses(url: httpx.URL, *, allow_private: bool) -> list[IPAddress]:
    """The addresses of `url`'s host, after checking that every one of them may be contacted."""
    host = _host(url)
    addresses = resolve(host, url.port or (443 if url.scheme == "https" else 80))
    for ip in addresses:
        reason = address_refusal(ip, allow_private=allow_private)
        if reason:
            named = f"{host} is {reason}" if host == str(ip) else f"{host} resolves to {ip}, {reason}"
            hint = ""
            if not allow_private and address_refusal(ip, allow_private=True) is None:
                hint = f" (set {ALLOW_PRIVATE_SETTING}=1 to allow private and loopback addresses)"
            raise WebError(f"refused to read {_short(url)}: {named}{hint}")
    return addresses


def _send(client: httpx.Client, url: httpx.URL, addresses: list[IPAddress], timeout_seconds: float) -> httpx.Response:
    """GET `url` from the first of the checked `addresses` that accepts a connection."""
    host = _host(url)
    last_error: Exception | None = None
    for ip in addresses:
        pinned = url.copy_with(host=str(ip))
        extensions = {"sni_hostname": host} if url.scheme == "https" else {}
        request = client.build_request("GET", pinned, headers={"Host": url.netloc.decode("ascii")},
                                       extensions=extensions)
        try:
            return client.send(request, stream=True)
        except httpx.ConnectError as exc:
            last_error = exc
        except httpx.TimeoutException as exc:
            raise WebError(f"{_short(url)} did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise WebError(f"{_short(url)} could not be read: {exc}") from exc
    raise WebError(f"could not connect to {host}: {last_error}")


def _read_limited(response: httpx.Response, url: httpx.URL, max_bytes: int, deadline: float,
                  timeout_seconds: float) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_bytes():
            if time.monotonic() > deadline:
                raise WebError(f"reading {_short(url)} took longer than {timeout_seconds:g} seconds")
            remaining = max_bytes - size
            if len(chunk) > remaining:
                chunks.append(chunk[:remaining])
                return b"".join(chunks), True
            chunks.append(chunk)
            size += len(chunk)
    except httpx.TimeoutException as exc:
        raise WebError(f"{_short(url)} stopped sending data (time limit reached)") from exc
    except httpx.HTTPError as exc:
        raise WebError(f"reading {_short(url)} failed: {exc}") from exc
    return b"".join(chunks), False


def fetch(
    url: str,
    *,
    allow_private: bool = False,
    max_bytes: int = MAX_BYTES,
    max_redirects: int = MAX_REDIRECTS,
    timeout_seconds: float = TIMEOUT_SECONDS,
) -> FetchedPage:
    """GET one page under the guards described in the module docstring.

    Raises:
        WebError: refused URL or address, too many redirects, HTTP error status, network
            failure or time limit.
    """
    current = check_url(url)
    deadline = time.monotonic() + timeout_seconds
    redirects: list[str] = []
    headers = {"User-Agent": USER_AGENT, "Accept": "text/html,application/xhtml+xml,text/*;q=0.9,*/*;q=0.5",
               "Accept-Encoding": "identity"}
    # trust_env off: no proxy from the environment, the connection goes to the checked address.
    with httpx.Client(timeout=_TIMEOUT, follow_redirects=False, trust_env=False, headers=headers) as client:
        while True:
            if time.monotonic() > deadline:
                raise WebError(f"reading {_short(url)} took longer than {timeout_seconds:g} seconds")
            addresses = vetted_addresses(current, allow_private=allow_private)
            response = _send(client, current, addresses, timeout_seconds)
            try:
                if response.is_redirect:
                    if len(redirects) >= max_redirects:
                        raise WebError(f"{_short(url)} redirects more than {max_redirects} times; giving up")
                    redirects.append(str(current))
                    location = response.headers["location"]
                    try:
                        target = str(current.join(location))
                    except (httpx.InvalidURL, ValueError, TypeError) as exc:
                        raise WebError(f"{_short(current)} redirects to an invalid URL '{_short(location)}'") from exc
                    current = check_url(target)
                    continue
                if response.status_code >= 400:
                    raise WebError(f"{_short(current)} answered HTTP {response.status_code} "
                                   f"{response.reason_phrase}".rstrip())
                body, truncated = _read_limited(response, current, max_bytes, deadline, timeout_seconds)
                content_type = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
                return FetchedPage(url=str(current), status=response.status_code, content_type=content_type,
                                   charset=response.charset_encoding, body=body, truncated=truncated,
                                   redirects=tuple(redirects))
            finally:
                response.close()
