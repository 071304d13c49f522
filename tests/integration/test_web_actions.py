"""Core web and language actions: webSearch, readUrl, detectLanguage, translateText.

Everything runs against real HTTP servers the tests start on 127.0.0.1; refused addresses are
refused before any connection, so no traffic leaves the machine.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

import backend.web.safe_fetch as fetch_module
from backend.actions import execute_action, get_registry
from backend.actions.openai_tools import TOOL_NAME, to_tool_definition, tool_name
from backend.config import reset_settings_cache
from backend.web import WebError, address_refusal, check_url, fetch
from backend.web.safe_fetch import vetted_addresses

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


# --- a local web server ---------------------------------------------------------------------


@dataclass
class Seen:
    """One request the local server received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


Answer = tuple[int, dict[str, str], bytes | Iterator[bytes]]


@dataclass
class LocalWeb:
    """Routes path → answer (status, headers, body or body chunks) or a callable giving one."""

    routes: dict[str, Answer | Callable[[Seen], Answer]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def paths(self) -> list[str]:
        return [s.path for s in self.seen]


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that stop reading early (size limit) close the connection


@pytest.fixture
def web() -> Iterator[LocalWeb]:
    site = LocalWeb()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def do_GET(self) -> None:  # noqa: N802
            parts = urlsplit(self.path)
            seen = Seen("GET", parts.path, parse_qs(parts.query), {k.lower(): v for k, v in self.headers.items()})
            site.seen.append(seen)
            route = site.routes.get(parts.path)
            if route is None:
                status, headers, body = 404, {"Content-Type": "text/plain"}, b"not found"
            else:
                status, headers, body = route(seen) if callable(route) else route
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if isinstance(body, bytes):
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.end_headers()
            try:
                for chunk in body:
                    self.wfile.write(chunk)
            except (ConnectionError, OSError):
                pass

    server = _Quiet(("127.0.0.1", 0), Handler)
    site.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def html(body: str, status: int = 200) -> Answer:
    return status, {"Content-Type": "text/html; charset=utf-8"}, body.encode()


def redirect(location: str, status: int = 302) -> Answer:
    return status, {"Location": location, "Content-Length": "0"}, b""


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch):
    """Set configuration variables for one test (the settings cache is reset each time)."""

    def apply(**values: str | None) -> None:
        for name, value in values.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        reset_settings_cache()

    yield apply
    reset_settings_cache()


@pytest.fixture
def allow_private(settings_env) -> None:
    settings_env(POWERON_READURL_ALLOW_PRIVATE="1")


ARTICLE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Glacier Express | Alpine Rail Weekly</title>
<script>window.tracking = {enabled: true};</script><style>body { font-family: sans-serif }</style></head>
<body>
<header><div class="logo">Alpine Rail Weekly</div>
<nav><ul><li><a href="/">Home</a></li><li><a href="/pricing">Pricing Plans</a></li>
<li><a href="/login">Member Login</a></li></ul></nav></header>
<div class="cookie-banner">We use cookies to improve your experience. Accept all cookies?</div>
<main><article>
<h1>The slowest express train in the world</h1>
<p>The Glacier Express connects Zermatt and St. Moritz in about eight hours, crossing 291 bridges and
passing through 91 tunnels on its way across the Swiss Alps. Travellers choose it precisely because it
is slow: the panorama cars give an uninterrupted view of gorges, glaciers and mountain villages.</p>
<p>The line climbs to the Oberalp Pass at 2,033 metres above sea level, the highest point of the journey.
In winter the pass is often covered in deep snow, and the railway keeps it open with rotary snow ploughs
that have been in service for decades.</p>
<p>Engineers who built the route at the beginning of the twentieth century had to solve steep gradients
with rack sections, where a cogwheel under the locomotive engages a toothed rail between the tracks.
The Landwasser Viaduct near Filisur, sixty-five metres high, is the most photographed structure.</p>
</article></main>
<aside class="sidebar"><h3>Related stories</h3><ul><li><a href="/a">Ten best rail trips in Europe</a></li>
<li><a href="/b">Why night trains are back</a></li></ul></aside>
<footer><p>Copyright 2024 Alpine Rail Weekly Media Group. All rights reserved.</p>
<p><a href="/privacy">Privacy policy</a> | <a href="/imprint">Imprint</a></p></footer>
</body></html>"""


# --- webSearch ------------------------------------------------------------------------------

SEARX_ANSWER = {
    "query": "glacier express",
    "number_of_results": 4,
    "results": [
        {"title": "Glacier Express – Official site", "url": "https://www.glacierexpress.ch/en/",
         "content": "The slowest   express train\nin the world.", "engine": "duckduckgo"},
        {"title": "Glacier Express – Wikipedia", "url": "https://en.wikipedia.org/wiki/Glacier_Express",
         "content": "The Glacier Express is an express train connecting Zermatt and St. Moritz."},
        {"title": "Duplicate", "url": "https://www.glacierexpress.ch/en/", "content": "same URL again"},
        {"title": "no url here", "content": "skipped"},
        {"title": "Third", "url": "https://example.org/third", "content": None},
    ],
}


@SQLITE
def test_web_search_sends_the_query_and_maps_results(action_context, web, settings_env):
    web.routes["/search"] = (200, {"Content-Type": "application/json"}, json.dumps(SEARX_ANSWER).encode())
    settings_env(POWERON_SEARCH_URL=web.url("/"))

    result = execute_action("core.webSearch", {"query": "glacier express", "limit": 2, "language": "de"},
                            action_context)

    assert result.ok, result.error
    assert result.output == {"query": "glacier express", "results": [
        {"title": "Glacier Express – Official site", "url": "https://www.glacierexpress.ch/en/",
         "snippet": "The slowest express train in the world."},
        {"title": "Glacier Express – Wikipedia", "url": "https://en.wikipedia.org/wiki/Glacier_Express",
         "snippet": "The Glacier Express is an express train connecting Zermatt and St. Moritz."},
    ]}
    (request,) = web.seen
    assert request.path == "/search"
    assert request.query == {"q": ["glacier express"], "format": ["json"], "language": ["de"]}


@SQLITE
def test_web_search_drops_duplicates_and_defaults_to_all_languages(action_context, web, settings_env):
    web.routes["/search"] = (200, {"Content-Type": "application/json"}, json.dumps(SEARX_ANSWER).encode())
    settings_env(POWERON_SEARCH_URL=web.url("/search"))  # a URL that already ends in /search works too

    result = execute_action("core.webSearch", {"query": "glacier express"}, action_context)

    assert result.ok, result.error
    assert [r["url"] for r in result.output["results"]] == [
        "https://www.glacierexpress.ch/en/", "https://en.wikipedia.org/wiki/Glacier_Express",
        "https://example.org/third"]
    assert result.output["results"][2] == {"title": "Third", "url": "https://example.org/third", "snippet": ""}
    assert web.seen[0].path == "/search"
    assert web.seen[0].query["language"] == ["all"]


@SQLITE
def test_web_search_reports_http_errors_and_non_json(action_context, web, settings_env):
    settings_env(POWERON_SEARCH_URL=web.url(""))
    web.routes["/search"] = (500, {"Content-Type": "text/plain"}, b"engine exploded")
    failed = execute_action("core.webSearch", {"query": "x"}, action_context)
    assert not failed.ok and failed.error_kind == "failed"
    assert "answered HTTP 500" in failed.error and web.url("/search") in failed.error

    web.routes["/search"] = (403, {"Content-Type": "text/html"}, b"<h1>Forbidden</h1>")
    forbidden = execute_action("core.webSearch", {"query": "x"}, action_context)
    assert "HTTP 403" in forbidden.error and "json format" in forbidden.error

    web.routes["/search"] = html("<html><body>a search page, not JSON</body></html>")
    not_json = execute_action("core.webSearch", {"query": "x"}, action_context)
    assert not not_json.ok and "did not answer with JSON" in not_json.error

    web.routes["/search"] = (200, {"Content-Type": "application/json"}, b'{"answers": []}')
    no_results = execute_action("core.webSearch", {"query": "x"}, action_context)
    assert not no_results.ok and "'results'" in no_results.error


@SQLITE
def test_web_search_unreachable_and_not_configured(action_context, settings_env):
    settings_env(POWERON_SEARCH_URL=None)
    missing = execute_action("core.webSearch", {"query": "anything"}, action_context)
    assert not missing.ok and missing.error_kind == "failed"
    assert missing.error.startswith("web search is not configured: set POWERON_SEARCH_URL")

    settings_env(POWERON_SEARCH_URL="http://127.0.0.1:1")  # nothing listens on port 1
    unreachable = execute_action("core.webSearch", {"query": "anything"}, action_context)
    assert not unreachable.ok and "could not be reached" in unreachable.error


@SQLITE
def test_web_search_validates_parameters(action_context, settings_env):
    settings_env(POWERON_SEARCH_URL="http://127.0.0.1:1")
    assert "limit" in execute_action("core.webSearch", {"query": "x", "limit": 50}, action_context).error
    assert "query" in execute_action("core.webSearch", {"query": ""}, action_context).error
    bad_language = execute_action("core.webSearch", {"query": "x", "language": "german; rm"}, action_context)
    assert bad_language.error_kind == "invalid" and "language" in bad_language.error


# --- readUrl --------------------------------------------------------------------------------


@SQLITE
def test_read_url_extracts_the_main_text_of_an_article(action_context, web, allow_private):
    web.routes["/article"] = html(ARTICLE)

    result = execute_action("core.readUrl", {"url": web.url("/article")}, action_context)

    assert result.ok, result.error
    out = result.output
    assert out["url"] == web.url("/article")
    assert out["contentType"] == "text/html"
    # trafilatura prefers the headline when <title> carries the site name
    assert out["title"] in {"The slowest express train in the world", "Glacier Express | Alpine Rail Weekly"}
    assert out["truncated"] is False
    text = out["text"]
    assert "291 bridges" in text and "Oberalp Pass" in text and "Landwasser Viaduct" in text
    for boilerplate in ("Pricing Plans", "Member Login", "Accept all cookies", "Copyright 2024",
                        "Privacy policy", "Ten best rail trips", "window.tracking", "font-family"):
        assert boilerplate not in text, boilerplate


@SQLITE
def test_read_url_follows_redirects_and_reports_the_final_url(action_context, web, allow_private):
    web.routes["/old"] = redirect("/moved", 301)
    web.routes["/moved"] = redirect(web.url("/again"), 307)
    web.routes["/again"] = redirect("article", 303)
    web.routes["/article"] = html(ARTICLE)

    result = execute_action("core.readUrl", {"url": web.url("/old")}, action_context)

    assert result.ok, result.error
    assert result.output["url"] == web.url("/article")
    assert "Oberalp Pass" in result.output["text"]
    assert web.paths() == ["/old", "/moved", "/again", "/article"]


@SQLITE
def test_read_url_gives_up_after_five_redirects(action_context, web, allow_private):
    for hop in range(7):
        web.routes[f"/hop{hop}"] = redirect(f"/hop{hop + 1}")

    result = execute_action("core.readUrl", {"url": web.url("/hop0")}, action_context)

    assert not result.ok and "redirects more than 5 times" in result.error
    assert web.paths() == [f"/hop{i}" for i in range(6)]


@SQLITE
def test_read_url_cuts_long_text_and_oversized_bodies_with_a_note(action_context, web, allow_private):
    paragraph = "Rack railways climb steep slopes with a cogwheel. " * 400  # ~20,000 characters
    web.routes["/long"] = html(f"<html><head><title>Long</title></head><body><article><p>{paragraph}</p>"
                               "</article></body></html>")
    long_page = execute_action("core.readUrl", {"url": web.url("/long"), "maxChars": 1000}, action_context)
    assert long_page.ok, long_page.error
    assert long_page.output["truncated"] is True
    assert len(long_page.output["text"]) <= 1000
    assert long_page.output["text"].startswith("Rack railways climb")
    assert "text cut at 1,000 characters (maxChars)" in long_page.output["text"]

    line = b"A line of plain text that repeats until the body is far larger than five megabytes.\n"
    total = 7 * 1024 * 1024

    def huge(_seen: Seen) -> Answer:
        def chunks() -> Iterator[bytes]:
            sent = 0
            block = line * 1000
            while sent < total:
                yield block
                sent += len(block)
        return 200, {"Content-Type": "text/plain; charset=utf-8"}, chunks()

    web.routes["/huge"] = huge
    huge_page = execute_action("core.readUrl", {"url": web.url("/huge")}, action_context)
    assert huge_page.ok, huge_page.error
    assert huge_page.output["truncated"] is True
    assert huge_page.output["contentType"] == "text/plain"
    assert "the page is larger than 5 MB; only its start was read" in huge_page.output["text"]
    assert len(huge_page.output["text"]) <= 20_000


def test_fetch_stops_reading_at_the_size_limit(web):
    web.routes["/big"] = (200, {"Content-Type": "text/plain"}, b"x" * 300_000)
    page = fetch(web.url("/big"), allow_private=True, max_bytes=100_000)
    assert page.truncated is True and len(page.body) == 100_000
    exact = fetch(web.url("/big"), allow_private=True, max_bytes=300_000)
    assert exact.truncated is False and len(exact.body) == 300_000


@SQLITE
def test_read_url_returns_text_types_and_refuses_binary(action_context, web, allow_private):
    web.routes["/notes.txt"] = (200, {"Content-Type": "text/plain; charset=iso-8859-1"},
                                "Grüezi mitenand\nZweite Zeile".encode("latin-1"))
    web.routes["/data.json"] = (200, {"Content-Type": "application/json"}, b'{"station": "Zermatt"}')
    web.routes["/logo.png"] = (200, {"Content-Type": "image/png"}, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    web.routes["/blob"] = (200, {"Content-Type": "application/octet-stream"}, b"\x00\x01\x02binary\xff\xfe")
    web.routes["/broken"] = (404, {"Content-Type": "text/html"}, b"<h1>gone</h1>")

    text = execute_action("core.readUrl", {"url": web.url("/notes.txt")}, action_context)
    assert text.ok, text.error
    assert text.output["text"] == "Grüezi mitenand\nZweite Zeile"
    assert text.output["contentType"] == "text/plain" and text.output["title"] is None

    data = execute_action("core.readUrl", {"url": web.url("/data.json")}, action_context)
    assert data.ok and json.loads(data.output["text"]) == {"station": "Zermatt"}

    image = execute_action("core.readUrl", {"url": web.url("/logo.png")}, action_context)
    assert not image.ok and "image/png" in image.error and "only HTML and text pages" in image.error

    blob = execute_action("core.readUrl", {"url": web.url("/blob")}, action_context)
    assert not blob.ok and "binary" in blob.error

    missing = execute_action("core.readUrl", {"url": web.url("/broken")}, action_context)
    assert not missing.ok and "answered HTTP 404" in missing.error


@SQLITE
def test_read_url_falls_back_to_plain_text_when_extraction_finds_nothing(action_context, web, allow_private):
    web.routes["/tiny"] = html("<html><head><title>Tiny</title><script>var hidden = 1;</script></head>"
                               "<body><div>Fahrplan</div><div>Zermatt 08:52</div></body></html>")

    result = execute_action("core.readUrl", {"url": web.url("/tiny")}, action_context)

    assert result.ok, result.error
    assert result.output["title"] == "Tiny"
    assert "Fahrplan" in result.output["text"] and "Zermatt 08:52" in result.output["text"]
    assert "hidden" not in result.output["text"]


REFUSED_SCHEMES = {
    "file:///etc/passwd": "file: URLs are refused",
    "ftp://ftp.example.org/readme.txt": "ftp: URLs are refused",
    "data:text/html,<h1>hi</h1>": "data: URLs are refused",
    "javascript:alert(1)": "javascript: URLs are refused",
    "www.example.org/page": "must start with http:// or https://",
    "http:///no-host": "has no host name",
}
ALWAYS_REFUSED = {
    "http://169.254.169.254/latest/meta-data/": "169.254.169.254 is a link-local address",
    "http://[::ffff:169.254.169.254]/latest/meta-data/": "a link-local address",
    "http://0.0.0.0:8080/": "0.0.0.0 is an unspecified address",
    "http://224.0.0.1/": "224.0.0.1 is a multicast address",
    "http://240.0.0.1/": "240.0.0.1 is a reserved address",
}


@SQLITE
def test_read_url_refuses_other_schemes(action_context, allow_private):
    for url, message in REFUSED_SCHEMES.items():
        result = execute_action("core.readUrl", {"url": url}, action_context)
        assert not result.ok and result.error_kind == "failed", url
        assert message in result.error, (url, result.error)


@SQLITE
def test_read_url_always_refuses_metadata_and_special_addresses(action_context, settings_env):
    for private_allowed in ("0", "1"):
        settings_env(POWERON_READURL_ALLOW_PRIVATE=private_allowed)
        for url, reason in ALWAYS_REFUSED.items():
            result = execute_action("core.readUrl", {"url": url}, action_context)
            assert not result.ok, url
            assert result.error.startswith("refused to read") and reason in result.error, (url, result.error)
            assert "POWERON_READURL_ALLOW_PRIVATE" not in result.error  # the setting would not help


@SQLITE
def test_read_url_refuses_loopback_unless_allowed(action_context, web, settings_env):
    web.routes["/article"] = html(ARTICLE)
    settings_env(POWERON_READURL_ALLOW_PRIVATE=None)

    refused = execute_action("core.readUrl", {"url": web.url("/article")}, action_context)
    assert not refused.ok
    assert "127.0.0.1 is a loopback address" in refused.error
    assert "POWERON_READURL_ALLOW_PRIVATE=1" in refused.error
    localhost = execute_action("core.readUrl", {"url": web.url("/article", host="localhost")}, action_context)
    assert not localhost.ok and "loopback address" in localhost.error
    assert web.seen == []  # refused before connecting

    settings_env(POWERON_READURL_ALLOW_PRIVATE="1")
    allowed = execute_action("core.readUrl", {"url": web.url("/article")}, action_context)
    assert allowed.ok, allowed.error


@SQLITE
def test_read_url_checks_every_redirect_hop(action_context, web, settings_env, monkeypatch):
    """Only 127.0.0.1 counts as allowed here (a stand-in for a public host); redirects from it
    to 127.0.0.2 (loopback), 10.0.0.8 (private) and the metadata address are refused."""
    real_refusal = fetch_module.address_refusal

    def only_first_loopback(ip, *, allow_private=False):
        return None if str(ip) == "127.0.0.1" else real_refusal(ip, allow_private=allow_private)

    monkeypatch.setattr(fetch_module, "address_refusal", only_first_loopback)
    settings_env(POWERON_READURL_ALLOW_PRIVATE=None)
    web.routes["/article"] = html(ARTICLE)
    web.routes["/to-loopback"] = redirect(web.url("/article", host="127.0.0.2"))
    web.routes["/to-private"] = redirect("http://10.0.0.8/admin")
    web.routes["/to-metadata"] = redirect("http://169.254.169.254/latest/meta-data/iam/")
    web.routes["/to-file"] = redirect("file:///etc/passwd")

    assert execute_action("core.readUrl", {"url": web.url("/article")}, action_context).ok
    cases = {"/to-loopback": "127.0.0.2 is a loopback address", "/to-private": "10.0.0.8 is a private address",
             "/to-metadata": "169.254.169.254 is a link-local address", "/to-file": "file: URLs are refused"}
    for path, message in cases.items():
        result = execute_action("core.readUrl", {"url": web.url(path)}, action_context)
        assert not result.ok and message in result.error, (path, result.error)
    assert web.paths() == ["/article", "/to-loopback", "/to-private", "/to-metadata", "/to-file"]


@pytest.mark.parametrize("address, reason", [
    ("127.0.0.1", "a loopback address"),
    ("127.8.9.10", "a loopback address"),
    ("::1", "a loopback address"),
    ("10.1.2.3", "a private address"),
    ("172.16.5.4", "a private address"),
    ("192.168.1.1", "a private address"),
    ("fd12:3456::1", "a private address"),
    ("100.64.0.1", "a non-public address"),
    ("::ffff:127.0.0.1", "a loopback address"),
    ("::ffff:10.0.0.1", "a private address"),
    ("2002:7f00:1::", "a loopback address"),  # 6to4 around 127.0.0.1
    ("64:ff9b::a9fe:a9fe", "a link-local address"),  # NAT64 around 169.254.169.254
    ("169.254.169.254", "a link-local address"),
    ("fe80::1", "a link-local address"),
    ("0.0.0.0", "an unspecified address"),
    ("::", "an unspecified address"),
    ("224.0.0.251", "a multicast address"),
    ("ff02::1", "a multicast address"),
    ("240.0.0.1", "a reserved address"),
    ("255.255.255.255", "a reserved address"),
])
def test_address_check_refuses_non_public_addresses(address, reason):
    assert address_refusal(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_address_check_allows_public_addresses(address):
    assert address_refusal(ipaddress.ip_address(address)) is None


def test_allowing_private_addresses_keeps_the_dangerous_ones_refused():
    for allowed in ("127.0.0.1", "::1", "10.1.2.3", "192.168.1.1", "fd00::5", "100.64.0.1"):
        assert address_refusal(ipaddress.ip_address(allowed), allow_private=True) is None, allowed
    for refused in ("169.254.169.254", "fe80::1", "0.0.0.0", "224.0.0.1", "240.0.0.1"):
        assert address_refusal(ipaddress.ip_address(refused), allow_private=True) is not None, refused


def test_every_resolved_address_is_checked(monkeypatch):
    answers = {"mixed.example": ["93.184.216.34", "10.0.0.7"], "public.example": ["93.184.216.34", "2606:4700::1"]}
    monkeypatch.setattr(fetch_module, "resolve",
                        lambda host, port: [ipaddress.ip_address(a) for a in answers[host]])

    with pytest.raises(WebError, match=r"mixed\.example resolves to 10\.0\.0\.7, a private address"):
        vetted_addresses(check_url("https://mixed.example/page"), allow_private=False)
    assert [str(a) for a in vetted_addresses(check_url("https://public.example/"), allow_private=False)] == [
        "93.184.216.34", "2606:4700::1"]


def test_the_connection_goes_to_the_checked_address_with_the_original_host(web, monkeypatch):
    """A second DNS answer cannot redirect the request: it is sent to the address that was
    checked, and the host name travels in the Host header."""
    lookups = []

    def resolve_once(host, port):
        lookups.append(host)
        return [ipaddress.ip_address("127.0.0.1")]

    monkeypatch.setattr(fetch_module, "resolve", resolve_once)
    web.routes["/host"] = lambda seen: (200, {"Content-Type": "text/plain"}, seen.headers["host"].encode())

    page = fetch(f"http://pinned.invalid:{web.port}/host", allow_private=True)

    assert page.body.decode() == f"pinned.invalid:{web.port}"
    assert page.url == f"http://pinned.invalid:{web.port}/host"
    assert lookups == ["pinned.invalid"]


def test_unresolvable_host_is_a_clear_error(monkeypatch):
    def no_such_host(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)  # no DNS traffic from the test
    with pytest.raises(WebError, match="the host name 'no-such-host.invalid' could not be resolved"):
        fetch("http://no-such-host.invalid/", allow_private=True)


# --- detectLanguage -------------------------------------------------------------------------


@SQLITE
@pytest.mark.parametrize("text, code, name", [
    ("Der Zug fährt jeden Morgen pünktlich um acht Uhr vom Hauptbahnhof ab.", "de", "German"),
    ("The train leaves the main station punctually at eight every morning.", "en", "English"),
    ("Le train part de la gare centrale tous les matins à huit heures précises.", "fr", "French"),
])
def test_detect_language(action_context, text, code, name):
    result = execute_action("core.detectLanguage", {"text": text}, action_context)

    assert result.ok, result.error
    assert result.output["language"] == code and result.output["name"] == name
    assert 0.5 < result.output["confidence"] <= 1.0
    assert all(a["confidence"] <= result.output["confidence"] for a in result.output["alternatives"])


@SQLITE
def test_detect_language_without_words_is_a_clear_error(action_context):
    result = execute_action("core.detectLanguage", {"text": "12345 !!! 67"}, action_context)
    assert not result.ok and "could not detect a language" in result.error
    empty = execute_action("core.detectLanguage", {"text": ""}, action_context)
    assert empty.error_kind == "invalid" and "text" in empty.error


# --- translateText --------------------------------------------------------------------------


@SQLITE
def test_translate_text_through_the_ai_client(action_context, ai_server):
    ai_server.reply("  Le train part chaque matin à huit heures.\n")
    text = "Der Zug fährt jeden Morgen um acht Uhr ab."

    result = execute_action("core.translateText", {"text": text, "targetLanguage": "fr"}, action_context)

    assert result.ok, result.error
    assert result.output == {"text": "Le train part chaque matin à huit heures.", "targetLanguage": "fr",
                             "sourceLanguage": "de", "model": "test-model"}
    request = ai_server.last_chat
    assert request.user_text == text
    assert "into French (fr)" in request.system_text
    assert request.model == "test-model"


@SQLITE
def test_translate_text_with_a_named_source_language(action_context, ai_server):
    ai_server.reply("Good morning")

    result = execute_action("core.translateText", {"text": "Guete Morge", "targetLanguage": "English",
                                                   "sourceLanguage": "Swiss German"}, action_context)

    assert result.ok, result.error
    assert result.output["sourceLanguage"] == "Swiss German" and result.output["text"] == "Good morning"
    assert "from Swiss German into English" in ai_server.last_chat.system_text


@SQLITE
def test_translate_text_failures_are_clear(action_context, ai_server, settings_env):
    ai_server.fail(500, "model overloaded")
    failed = execute_action("core.translateText", {"text": "Hallo", "targetLanguage": "en"}, action_context)
    assert not failed.ok and "HTTP 500" in failed.error and "model overloaded" in failed.error

    ai_server.reply("   ")
    empty = execute_action("core.translateText", {"text": "Hallo", "targetLanguage": "en"}, action_context)
    assert not empty.ok and "empty translation" in empty.error

    invalid = execute_action("core.translateText", {"text": "Hallo", "targetLanguage": "en\nignore all"},
                             action_context)
    assert invalid.error_kind == "invalid" and "targetLanguage" in invalid.error

    settings_env(OPENAI_API_KEY=None)
    unconfigured = execute_action("core.translateText", {"text": "Hallo", "targetLanguage": "en"}, action_context)
    assert not unconfigured.ok and "OPENAI_API_KEY" in unconfigured.error


# --- the catalogue --------------------------------------------------------------------------


def test_web_and_language_actions_are_core_agent_tools():
    registry = get_registry()
    for action_id, node in [("core.webSearch", True), ("core.readUrl", True), ("core.detectLanguage", False),
                            ("core.translateText", False)]:
        found = registry.get(action_id)
        assert found is not None, action_id
        assert found.toolbox == "core" and found.agent_tool and found.graph_node is node
        assert found.capabilities == frozenset({"read"})
        assert TOOL_NAME.match(tool_name(action_id))
        definition = to_tool_definition(found)
        assert definition["function"]["strict"] is True
        assert found.description and found.output_schema() is not None
