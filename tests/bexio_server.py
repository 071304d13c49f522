"""A Bexio API stand-in on 127.0.0.1 for the Trustee's sync tests (starlette, served by uvicorn in a thread).

It speaks Bexio's protocol on its real paths with its payload shapes:

- Auth: `Authorization: Bearer <token>`; no or another token: 401 `{"error_code": 401, "message": …}`.
- `GET /2.0/accounts?limit&offset`: the Swiss SME chart's accounts `{id, uuid, account_no, name,
  account_type, is_active, is_locked}`, paged by limit (at most 2000) and offset.
- `GET /3.0/taxes`: the current Swiss VAT codes `{id, uuid, name, code, digit, type, account_id,
  value, is_active, display_name}` (VM81, VI81, VM26, VM38, UN81, UR26, UB38 …).
- `POST /3.0/accounting/manual_entries`: validates `type` (manual_single_entry — exactly one entry —
  or manual_compound_entry), `date` (YYYY-MM-DD) and `entries` (each `debit_account_id`,
  `credit_account_id` of known accounts, positive `amount`, optional `tax_id` of a known tax,
  `description`); 422 `{"error_code": 422, "message": …, "errors": [...]}` on bad data; answers the
  entry with its `id`. Every accepted entry is kept in `entries`.
- Knobs: `rate_limit(n, retry_after)` answers the next n calls 429 with `Retry-After`;
  `token` (change it and the app's token is refused: 401). Every call is recorded in `requests`.

Use it as ``with serve(BexioServer()) as bexio:``; `bexio.url` is POWERON_BEXIO_URL.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.features.trustee.accounts import SME_CHART, SWISS_VAT_CODES
from tests.mcp_test_servers import serve_stand_in

MAX_LIMIT = 2000
ACCOUNT_TYPES = {"asset": 3, "liability": 4, "equity": 4, "revenue": 1, "expense": 2}


class BexioFault(Exception):
    def __init__(self, status: int, message: str, errors: list[str] | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.errors, self.headers = status, message, errors or [], headers or {}


@dataclass
class BexioServer:
    """The stand-in's data and knobs (see the module docstring)."""

    url: str = ""  # set by serve
    lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """The SME chart and the Swiss VAT codes with fresh ids, a new token, nothing received."""
        with self.lock:
            self.token = "bexio-" + secrets.token_hex(16)
            ids = itertools.count(101)
            self.accounts = [{"id": next(ids), "uuid": str(uuid.uuid4()), "account_no": number, "name": name,
                              "account_type": ACCOUNT_TYPES[kind], "fibu_account_group_id": 1, "tax_id": None,
                              "is_active": True, "is_locked": False} for number, name, kind in SME_CHART]
            tax_ids = itertools.count(11)
            self.taxes = [{"id": next(tax_ids), "uuid": str(uuid.uuid4()), "name": v.label, "code": v.code,
                           "digit": "400" if v.code.startswith("V") else "302",
                           "type": "pre_tax" if v.code.startswith("V") else "sales_tax",
                           "account_id": None, "tax_settlement_type": "none", "value": v.rate,
                           "net_tax_value": None, "start_year": 2024, "end_year": None, "is_active": True,
                           "display_name": f"{v.code} - {v.rate:.2f}%"}
                          for v in SWISS_VAT_CODES if v.rate]
            self.entries: list[dict[str, Any]] = []
            self.requests: list[tuple[str, str, dict[str, str]]] = []
            self.limited: deque[float] = deque()
            self._entry_ids = itertools.count(5001)

    def rate_limit(self, count: int, retry_after: float = 0.2) -> None:
        """The next `count` calls answer 429 with `Retry-After: retry_after`."""
        with self.lock:
            self.limited.extend([retry_after] * count)

    def account_id(self, number: str) -> int:
        return next(a["id"] for a in self.accounts if a["account_no"] == number)

    def tax_id(self, code: str) -> int:
        return next(t["id"] for t in self.taxes if t["code"] == code)

    def calls(self, method: str, path: str) -> list[dict[str, str]]:
        """The query parameters of the calls of `method` on `path` so far."""
        with self.lock:
            return [q for m, p, q in self.requests if m == method and p == path]


def _fault(fault: BexioFault) -> Response:
    body = {"error_code": fault.status, "message": fault.message}
    if fault.errors:
        body["errors"] = fault.errors
    return JSONResponse(body, status_code=fault.status, headers=fault.headers)


def _integer(query: Any, name: str, default: int) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BexioFault(422, f"{name} must be an integer") from None
    if value < 0:
        raise BexioFault(422, f"{name} must not be negative")
    return value


def build_app(state: BexioServer) -> Starlette:
    """The stand-in as an ASGI app."""

    def guarded(handler):
        async def endpoint(request: Request) -> Response:
            with state.lock:
                state.requests.append((request.method, request.url.path, dict(request.query_params)))
                wait = state.limited.popleft() if state.limited else None
            try:
                if wait is not None:
                    raise BexioFault(429, "Too Many Requests", headers={"Retry-After": f"{wait:g}"})
                if request.headers.get("authorization", "") != f"Bearer {state.token}":
                    raise BexioFault(401, "The access token is invalid or has expired")
                return await handler(request)
            except BexioFault as fault:
                return _fault(fault)

        return endpoint

    async def accounts(request: Request) -> Response:
        limit = min(_integer(request.query_params, "limit", MAX_LIMIT), MAX_LIMIT)
        offset = _integer(request.query_params, "offset", 0)
        with state.lock:
            return JSONResponse(state.accounts[offset:offset + limit])

    async def taxes(_request: Request) -> Response:
        with state.lock:
            return JSONResponse(state.taxes)

    async def manual_entries(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            raise BexioFault(422, "the body is not JSON") from None
        errors = _validate(state, body)
        if errors:
            raise BexioFault(422, "Validation failed", errors)
        with state.lock:
            entry_id = next(state._entry_ids)
            kept = {"id": entry_id, "type": body["type"], "date": body["date"],
                    "reference_nr": body.get("reference_nr"), "is_locked": False,
                    "entries": [{"id": entry_id * 10 + i, **e} for i, e in enumerate(body["entries"])]}
            state.entries.append(kept)
        return JSONResponse(kept, status_code=201)

    return Starlette(routes=[
        Route("/2.0/accounts", guarded(accounts), methods=["GET"]),
        Route("/3.0/taxes", guarded(taxes), methods=["GET"]),
        Route("/3.0/accounting/manual_entries", guarded(manual_entries), methods=["POST"]),
    ])


def _validate(state: BexioServer, body: Any) -> list[str]:
    if not isinstance(body, dict):
        return ["the body must be an object"]
    errors = []
    kind = body.get("type")
    if kind not in ("manual_single_entry", "manual_compound_entry"):
        errors.append("type must be manual_single_entry or manual_compound_entry")
    try:
        date.fromisoformat(str(body.get("date")))
    except ValueError:
        errors.append("date must be a date (YYYY-MM-DD)")
    entries = body.get("entries")
    if not isinstance(entries, list) or not entries:
        return [*errors, "entries must be a non-empty list"]
    if kind == "manual_single_entry" and len(entries) != 1:
        errors.append("a manual_single_entry has exactly one entry")
    with state.lock:
        account_ids = {a["id"] for a in state.accounts}
        tax_ids = {t["id"] for t in state.taxes}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            errors.append(f"entries[{index}] must be an object")
            continue
        for side in ("debit_account_id", "credit_account_id"):
            if entry.get(side) not in account_ids:
                errors.append(f"entries[{index}].{side}: account {entry.get(side)!r} does not exist")
        amount = entry.get("amount")
        if isinstance(amount, bool) or not isinstance(amount, int | float) or amount <= 0:
            errors.append(f"entries[{index}].amount must be a positive number")
        if entry.get("tax_id") is not None and entry["tax_id"] not in tax_ids:
            errors.append(f"entries[{index}].tax_id: tax {entry['tax_id']!r} does not exist")
        if not isinstance(entry.get("description", ""), str):
            errors.append(f"entries[{index}].description must be text")
    return errors


def serve(state: BexioServer):
    """Run the stand-in on a free port of 127.0.0.1 (sets `state.url`) until the block ends."""
    return serve_stand_in(state, build_app)
