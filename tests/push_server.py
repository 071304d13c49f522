"""A stand-in Web Push service on 127.0.0.1, speaking the protocol browsers' push services speak.

RFC 8030 (push), RFC 8291/8188 (aes128gcm message encryption), RFC 8292 (VAPID): a push is a
``POST`` to the subscription's endpoint with the encrypted payload as body,
``Content-Encoding: aes128gcm``, a ``TTL`` header and ``Authorization: vapid t=<JWT>, k=<key>``
where the JWT (ES256) is signed with the application server's key, names the push service's
origin as ``aud``, expires within 24 hours and carries a ``sub`` contact.

The server checks all of that (401/400 with the reason otherwise), records every accepted push
and answers 201. Endpoints are ``/push/<token>``; the test decides how a token answers:
``gone`` tokens 410 (the subscription expired), ``busy`` tokens 429 with Retry-After. When
`expected_key` is set, only that application server key is accepted (403 otherwise), as a real
push service refuses a key other than the one the browser subscribed with.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

MAX_BODY = 4096 + 100  # RFC 8030: a push service must accept 4096 bytes of payload


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class ReceivedPush:
    """One accepted push: its endpoint token, encrypted body, headers and the VAPID claims."""

    token: str
    body: bytes
    headers: dict[str, str]  # names in lower case
    claims: dict
    vapid_key: str


@dataclass
class PushService:
    """The running stand-in: its origin, the accepted pushes and the refusals it gave."""

    host: str = "127.0.0.1"
    port: int = 0
    gone: set[str] = field(default_factory=set)
    busy: set[str] = field(default_factory=set)
    expected_key: str | None = None
    received: list[ReceivedPush] = field(default_factory=list)
    refused: list[tuple[str, int, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    def endpoint(self, token: str) -> str:
        return f"{self.origin}/push/{token}"

    def wait_for(self, count: int, timeout: float = 15.0) -> list[ReceivedPush]:
        """The pushes received once there are `count` of them (AssertionError after `timeout`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.received) >= count:
                    return list(self.received)
            time.sleep(0.02)
        raise AssertionError(f"expected {count} push(es), got {len(self.received)}; refused: {self.refused}")


def _verify_vapid(header: str, origin: str) -> tuple[dict, str]:
    """The claims and key of a valid ``vapid t=…, k=…`` header; ValueError saying what is wrong."""
    scheme, _, params = header.partition(" ")
    if scheme.lower() != "vapid":
        raise ValueError(f"Authorization scheme must be vapid, not {scheme!r}")
    parts = dict(item.strip().split("=", 1) for item in params.split(",") if "=" in item)
    token, key = parts.get("t"), parts.get("k")
    if not token or not key:
        raise ValueError("Authorization needs t= (the JWT) and k= (the public key)")
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), _unb64url(key))
    header_b64, claims_b64, signature_b64 = token.split(".")
    jwt_header = json.loads(_unb64url(header_b64))
    if jwt_header.get("alg") != "ES256":
        raise ValueError(f"JWT alg must be ES256, not {jwt_header.get('alg')!r}")
    raw = _unb64url(signature_b64)
    if len(raw) != 64:
        raise ValueError("JWT signature must be the 64-byte r||s of ES256")
    signature = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    try:
        public.verify(signature, f"{header_b64}.{claims_b64}".encode("ascii"), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise ValueError("JWT signature does not match the key k") from None
    claims = json.loads(_unb64url(claims_b64))
    if claims.get("aud") != origin:
        raise ValueError(f"JWT aud must be the push service's origin {origin}, not {claims.get('aud')!r}")
    now = time.time()
    if not now < int(claims.get("exp", 0)) <= now + 24 * 3600 + 60:
        raise ValueError("JWT exp must lie within the next 24 hours")
    if not str(claims.get("sub", "")).startswith(("mailto:", "https://")):
        raise ValueError("JWT sub must be a mailto: or https: contact")
    return claims, key


def _handler(service: PushService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):  # noqa: A002 - quiet
            pass

        def _answer(self, status: int, reason: str = "", headers: dict[str, str] | None = None) -> None:
            body = json.dumps({"code": status, "message": reason}).encode() if reason else b""
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _refuse(self, token: str, status: int, reason: str, headers: dict[str, str] | None = None) -> None:
            with service.lock:
                service.refused.append((token, status, reason))
            self._answer(status, reason, headers)

        def do_POST(self):  # noqa: N802 - http.server's name
            if not self.path.startswith("/push/"):
                return self._answer(404, "no such subscription")
            token = self.path[len("/push/"):]
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if length > MAX_BODY:
                return self._refuse(token, 413, "payload too large")
            try:
                claims, key = _verify_vapid(self.headers.get("Authorization", ""), service.origin)
            except ValueError as exc:
                return self._refuse(token, 401, str(exc))
            if service.expected_key and key != service.expected_key:
                return self._refuse(token, 403, "the key is not the one the subscription was made with")
            if self.headers.get("TTL") is None or not self.headers["TTL"].isdigit():
                return self._refuse(token, 400, "TTL header missing")
            if body and self.headers.get("Content-Encoding") != "aes128gcm":
                return self._refuse(token, 415, "Content-Encoding must be aes128gcm")
            if token in service.gone:
                return self._refuse(token, 410, "subscription expired")
            if token in service.busy:
                return self._refuse(token, 429, "too many requests", {"Retry-After": "30"})
            headers = {name.lower(): value for name, value in self.headers.items()}
            with service.lock:
                service.received.append(ReceivedPush(token, body, headers, claims, key))
            self._answer(201, headers={"Location": f"{service.origin}/message/{len(service.received)}"})

    return Handler


class RunningPushService:
    """Context manager: the stand-in push service on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        self.service = PushService()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.service))
        self.service.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="push-service", daemon=True)

    def __enter__(self) -> PushService:
        self.thread.start()
        return self.service

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
