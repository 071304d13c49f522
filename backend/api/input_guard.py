"""The REST input guard (issue 15): every JSON request body is checked once, before any route.

A pure ASGI middleware over the API. For a request under ``/api/`` that carries a body the
routes read as JSON (content type ``application/json``, ``application/…+json`` or none, as
FastAPI treats them) it reads the body, then answers itself when

- the body is not UTF-8: 400 ``{"detail": "request body is not valid UTF-8 …"}``;
- the body is not JSON: 422 naming ``body`` with the parser's line and column;
- the value breaks backend/json_limits.py (deeper than 64 levels, a lone UTF-16 surrogate,
  NaN or Infinity): 422 ``{detail, errors: [{nodeId: null, field, message}]}`` naming its path
  (``input.note``), like every other invalid input.

Otherwise the body is handed on unchanged to the route, which reads it as before. Nothing is
written for a refused request: it never reaches a route.

Webhooks (``/api/hooks/…``) are not guarded here: their raw body is what the Standard Webhooks
signature covers, and a caller that has not proven the secret learns nothing about the
workflow before the 404/405/401 checks. backend/triggers/webhooks.py applies the same limits to
the parsed body after the signature check (422, nothing stored).
"""

from __future__ import annotations

import json
from email.message import Message

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from backend import json_limits
from backend.api.asgi_body import read_body, replay
from backend.errors import FieldError, InvalidInput

API_PREFIX = "/api/"
UNGUARDED_PREFIXES = ("/api/hooks/",)
BODYLESS_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def is_json_content_type(value: str | None) -> bool:
    """Whether FastAPI would parse a body of this content type as JSON (none counts as JSON)."""
    if not value:
        return True
    message = Message()
    message["content-type"] = value
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _guarded(scope: Scope) -> bool:
    if scope["type"] != "http" or scope.get("method", "GET") in BODYLESS_METHODS:
        return False
    path = scope.get("path", "")
    if not path.startswith(API_PREFIX) or path.startswith(UNGUARDED_PREFIXES):
        return False
    return is_json_content_type(_header(scope, b"content-type"))


def _invalid(error: FieldError) -> JSONResponse:
    return JSONResponse({"detail": f"invalid input: {error}", "errors": [error.as_dict()]}, status_code=422)


def refusal(body: bytes) -> JSONResponse | None:
    """The answer to a JSON request body the API must not accept, or None when it is fine."""
    try:
        json_limits.loads(body)
    except UnicodeDecodeError as exc:
        return JSONResponse({"detail": f"request body is not valid UTF-8 (byte 0x{body[exc.start]:02x} at "
                                       f"offset {exc.start}); send JSON encoded as UTF-8"}, status_code=400)
    except json.JSONDecodeError as exc:
        return _invalid(FieldError("body", f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"))
    except InvalidInput as exc:
        return _invalid(exc.errors[0])
    return None


class InputGuard:
    """ASGI middleware applying `refusal` to the JSON request bodies of the API (see module doc)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the body of a guarded request; answer a refusal or pass the request on."""
        if not _guarded(scope):
            await self.app(scope, receive, send)
            return
        body, disconnect = await read_body(receive)
        if disconnect is not None:  # the client is gone: nothing to check, nothing to answer
            return
        answer = refusal(body) if body.strip() else None
        if answer is not None:
            await answer(scope, receive, send)
            return
        await self.app(scope, replay(body, receive), send)
