"""Stand-ins for the web search engines of `core.webSearch`: real HTTP on 127.0.0.1, in threads.

- :class:`DuckDuckGoProxy`: an HTTP CONNECT proxy (what POWERON_SEARCH_PROXY names) that ends the
  TLS of every tunnel itself, with a certificate for the tunnel's host issued by a throw-away
  test CA (:class:`TestCA`, whose PEM file POWERON_SEARCH_CA_FILE names), and answers
  DuckDuckGo's HTML endpoint as ddgs's `duckduckgo` engine asks it:
  `POST https://html.duckduckgo.com/html/` with the form fields q, b, l (and s, df) — with a
  result page in DuckDuckGo's markup (`div.result__body` > `h2 > a.result__a`, `a.result__snippet`),
  an ad (`duckduckgo.com/y.js?…`, which ddgs drops) and the same pages under several spellings.
  `status` scripts DuckDuckGo refusing (e.g. 429 when it limits a client); `refuse_tunnels`
  makes the proxy close every tunnel (an engine that cannot be reached).
- :class:`BraveStandIn`: the Brave Search API, `GET /res/v1/web/search?q=&count=` with the key in
  `X-Subscription-Token` → `{"web": {"results": [{title, url, description}]}}`.
- :class:`TavilyStandIn`: Tavily's API, `POST /search` `{query, max_results}` with
  `Authorization: Bearer <key>` → `{"results": [{title, url, content, score}]}`.

Every server records what it received (`seen`) so tests assert on what the backend sent.

    with TestCA() as ca, DuckDuckGoProxy(ca) as ddg:
        env(POWERON_SEARCH_ENGINE="ddgs", POWERON_SEARCH_PROXY=ddg.url, POWERON_SEARCH_CA_FILE=ca.pem_path)
"""

from __future__ import annotations

import datetime
import html
import json
import socket
import socketserver
import ssl
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Seen:
    """One request a stand-in received.

    Attributes:
        host: The host the request was for (the CONNECT target for the proxy, else "127.0.0.1").
        method, path: e.g. "POST", "/html/".
        headers: Request headers (lower-case names).
        query: The URL's query parameters.
        form: The form fields of an urlencoded body.
        json: The body parsed as JSON, when it was JSON.
    """

    host: str
    method: str
    path: str
    headers: dict[str, str]
    query: dict[str, list[str]] = field(default_factory=dict)
    form: dict[str, list[str]] = field(default_factory=dict)
    json: Any = None


# --- a throw-away certificate authority --------------------------------------------------------


class TestCA:
    """A CA made for one test: its certificate as a PEM file, and leaf certificates it issues."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "PowerOn test CA")])
        now = datetime.datetime.now(datetime.UTC)
        self._name = name
        self.cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self._dir = tempfile.TemporaryDirectory(prefix="poweron-test-ca-")
        self.pem_path = str(Path(self._dir.name) / "ca.pem")
        Path(self.pem_path).write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def server_context(self, host: str) -> ssl.SSLContext:
        """A TLS server context presenting a certificate for `host` (made once per host)."""
        with self._lock:
            if host not in self._contexts:
                self._contexts[host] = self._issue(host)
            return self._contexts[host]

    def _issue(self, host: str) -> ssl.SSLContext:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
            .issuer_name(self._name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                           critical=False)
            .sign(self._key, hashes.SHA256())
        )
        folder = Path(self._dir.name)
        (folder / f"{host}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (folder / f"{host}.key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(folder / f"{host}.pem", folder / f"{host}.key")
        context.set_alpn_protocols(["http/1.1"])
        return context

    def close(self) -> None:
        self._dir.cleanup()

    def __enter__(self) -> TestCA:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


# --- DuckDuckGo behind a CONNECT proxy ---------------------------------------------------------

DDG_HOST = "html.duckduckgo.com"


@dataclass(frozen=True)
class Hit:
    """One result a stand-in lists: title, URL and snippet."""

    title: str
    url: str
    snippet: str


def ddg_result_page(query: str, hits: list[Hit]) -> str:
    """A result page in the markup of DuckDuckGo's HTML endpoint, with an ad before the results."""
    ad = ('<div class="result results_links results_links_deep result--ad "><div class="links_main links_deep '
          'result__body"><h2 class="result__title"><a class="result__a" href="https://duckduckgo.com/y.js?ad_domain='
          'shop.example&amp;u3=1">Buy trains cheap</a></h2><a class="result__snippet" href="https://duckduckgo.com/'
          'y.js?ad_domain=shop.example&amp;u3=1">Ad · Trains at low prices</a></div></div>')
    items = []
    for hit in hits:
        url = html.escape(hit.url)
        shown = html.escape(urlsplit(hit.url).netloc + urlsplit(hit.url).path)
        items.append(
            '<div class="result results_links results_links_deep web-result ">\n'
            '  <div class="links_main links_deep result__body">\n'
            f'    <h2 class="result__title"><a rel="nofollow" class="result__a" href="{url}">'
            f'{html.escape(hit.title)}</a></h2>\n'
            '    <div class="result__extras"><div class="result__extras__url">'
            f'<a class="result__url" href="{url}">{shown}</a></div></div>\n'
            f'    <a class="result__snippet" href="{url}">{html.escape(hit.snippet)}</a>\n'
            '    <div class="clear"></div>\n'
            '  </div>\n'
            '</div>')
    q = html.escape(query)
    return ('<!DOCTYPE html><html lang="en-US"><head><meta charset="UTF-8">'
            f'<title>{q} at DuckDuckGo</title></head><body class="body--html">'
            '<div class="header"><form id="search_form" action="/html/" method="post">'
            f'<input class="search__input" type="text" name="q" value="{q}"></form></div>'
            '<div id="links" class="results">' + ad + "\n".join(items) +
            '<div class="nav-link"><form action="/html/" method="post"><input type="submit" class="btn" '
            'value="Next"><input type="hidden" name="s" value="10"></form></div></div></body></html>')


class _TunnelledHandler(BaseHTTPRequestHandler):
    """Answers the requests that come through one TLS tunnel (as DuckDuckGo would)."""

    protocol_version = "HTTP/1.1"
    proxy: DuckDuckGoProxy
    host: str

    def log_message(self, *_args: Any) -> None:
        pass

    def _answer(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        self._record({})
        self._answer(404, "text/plain", b"not found")

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        self._record(form)
        proxy = self.proxy
        if self.host != DDG_HOST or urlsplit(self.path).path != "/html/":
            self._answer(404, "text/plain", b"not found")
        elif proxy.status != 200:
            self._answer(proxy.status, "text/html", b"<html><body>If this error persists, please let us know: "
                                                    b"ops@duckduckgo.com</body></html>")
        else:
            page = ddg_result_page(form.get("q", [""])[0], proxy.hits)
            self._answer(200, "text/html; charset=UTF-8", page.encode())

    def _record(self, form: dict[str, list[str]]) -> None:
        self.proxy.seen.append(Seen(host=self.host, method=self.command, path=self.path,
                                    headers={k.lower(): v for k, v in self.headers.items()},
                                    query=parse_qs(urlsplit(self.path).query), form=form))


class _ConnectHandler(socketserver.StreamRequestHandler):
    """`CONNECT host:443` → 200, then TLS with a certificate for host, then HTTP inside."""

    server: _ProxyServer

    def handle(self) -> None:
        proxy = self.server.owner
        request_line = self.rfile.readline(65537).decode("latin-1").strip()
        while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
            pass  # the proxy request's headers
        method, _, rest = request_line.partition(" ")
        target = rest.split(" ")[0]
        host = target.rsplit(":", 1)[0]
        proxy.tunnels.append(target)
        if method != "CONNECT" or proxy.refuse_tunnels:
            self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self.wfile.flush()
        try:
            tls = proxy.ca.server_context(host).wrap_socket(self.connection, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            proxy.tls_errors.append(f"{host}: {exc}")
            return
        handler = type("Handler", (_TunnelledHandler,), {"proxy": proxy, "host": host})
        try:
            handler(tls, self.client_address, self.server)
        except (ssl.SSLError, ConnectionError):
            pass
        finally:
            try:
                tls.close()
            except OSError:
                pass


class _ProxyServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: DuckDuckGoProxy


class DuckDuckGoProxy:
    """A CONNECT proxy on 127.0.0.1 whose tunnels end at a DuckDuckGo stand-in (see the module doc).

    Attributes:
        hits: The results the next result pages list, in order.
        status: The HTTP status the endpoint answers (200: the result page).
        refuse_tunnels: Answer every CONNECT with 502 (the engine cannot be reached).
        seen: The requests that came through the tunnels.
        tunnels: Every CONNECT target asked for ("html.duckduckgo.com:443").
        tls_errors: Handshakes that failed (a client that did not trust the test CA).
    """

    def __init__(self, ca: TestCA) -> None:
        self.ca = ca
        self.hits: list[Hit] = []
        self.status = 200
        self.refuse_tunnels = False
        self.seen: list[Seen] = []
        self.tunnels: list[str] = []
        self.tls_errors: list[str] = []
        self._server = _ProxyServer(("127.0.0.1", 0), _ConnectHandler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The proxy's URL, as POWERON_SEARCH_PROXY takes it."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> DuckDuckGoProxy:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


# --- Brave Search API and Tavily -----------------------------------------------------------------


class _ApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    stand_in: _ApiStandIn

    def log_message(self, *_args: Any) -> None:
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        seen = Seen(host="127.0.0.1", method=self.command, path=urlsplit(self.path).path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    query=parse_qs(urlsplit(self.path).query), json=parsed)
        self.stand_in.seen.append(seen)
        status, answer = self.stand_in.answer(seen)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _serve  # noqa: N815


class _ApiStandIn:
    """A JSON search API on 127.0.0.1: `hits` to list, `key` to accept, `status` to script a failure."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.hits: list[Hit] = []
        self.status = 200
        self.seen: list[Seen] = []
        handler = type("Handler", (_ApiHandler,), {"stand_in": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        """The base URL, as POWERON_SEARCH_URL takes it."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def answer(self, seen: Seen) -> tuple[int, Any]:
        raise NotImplementedError

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> _ApiStandIn:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class BraveStandIn(_ApiStandIn):
    """The Brave Search API's web search (`GET /res/v1/web/search`)."""

    def answer(self, seen: Seen) -> tuple[int, Any]:
        if seen.method != "GET" or seen.path != "/res/v1/web/search":
            return 404, {"type": "ErrorResponse", "error": {"code": "NOT_FOUND", "detail": "Not found"}}
        if seen.headers.get("x-subscription-token") != self.key:
            return 401, {"type": "ErrorResponse", "error": {
                "code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The provided subscription token is invalid.",
                "status": 401}}
        if self.status == 429:
            return 429, {"type": "ErrorResponse", "error": {
                "code": "RATE_LIMITED", "detail": "Request rate limit exceeded for plan.", "status": 429}}
        if self.status != 200:
            return self.status, {"type": "ErrorResponse", "error": {"detail": "Internal error", "status": self.status}}
        count = int(seen.query.get("count", ["20"])[0])
        results = [{"type": "search_result", "title": h.title, "url": h.url, "description": h.snippet,
                    "language": "en", "family_friendly": True} for h in self.hits[:count]]
        return 200, {"type": "search", "query": {"original": seen.query.get("q", [""])[0]},
                     "web": {"type": "search", "results": results}}


class TavilyStandIn(_ApiStandIn):
    """Tavily's search API (`POST /search`)."""

    def answer(self, seen: Seen) -> tuple[int, Any]:
        if seen.method != "POST" or seen.path != "/search":
            return 404, {"detail": "Not Found"}
        if seen.headers.get("authorization") != f"Bearer {self.key}":
            return 401, {"detail": {"error": "Unauthorized: missing or invalid API key."}}
        if self.status == 429:
            return 429, {"detail": {"error": "Your request has been blocked due to excessive requests."}}
        if self.status != 200:
            return self.status, {"detail": {"error": "Internal server error"}}
        body = seen.json if isinstance(seen.json, dict) else {}
        results = [{"title": h.title, "url": h.url, "content": h.snippet, "score": round(0.9 - i / 100, 2),
                    "raw_content": None} for i, h in enumerate(self.hits[: int(body.get("max_results") or 5)])]
        return 200, {"query": body.get("query"), "answer": None, "images": [], "results": results,
                     "response_time": 0.42}


def free_port() -> int:
    """A TCP port on 127.0.0.1 where nothing listens (for "cannot be reached")."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
