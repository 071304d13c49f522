"""Bexio (DESIGN §8: connection type `bexio`): the Trustee's accounting system, through Bexio's REST API.

A connection holds a Bexio API token (Bexio: Settings → API tokens / personal access token), sealed
and sent as `Authorization: Bearer <token>`. The API's base URL is POWERON_BEXIO_URL (default
https://api.bexio.com; tests point it at a stand-in on 127.0.0.1).

What the Trustee uses (trustee.syncAccounting, backend/features/trustee/interface.py `sync`):

- `GET /2.0/accounts?limit&offset`: the chart of accounts (paged), to find Bexio's account id of
  each account number (`account_no`);
- `GET /3.0/taxes`: the VAT codes, to find the tax id of each code (`code`, e.g. VM81);
- `POST /3.0/accounting/manual_entries`: one manual entry per receipt (`manual_single_entry` for
  one line, `manual_compound_entry` for several), answered with the entry and its `id`.

Errors become clear messages: 401 (the token was refused), 422 (Bexio's validation message), 429
(waited out after Retry-After within POWERON_CONNECTOR_MAX_WAIT_SECONDS, else "rate-limiting").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from backend.connectors.rest import ApiError, RestClient
from backend.connectors.types import ConnectionFailed, ConnectionType, Credentials, register_connection_type

TYPE_ID = "bexio"
LABEL = "Bexio"
SERVICE = "Bexio"
DEFAULT_URL = "https://api.bexio.com"
PAGE_SIZE = 25  # accounts a page (Bexio allows up to 2000; small pages keep answers short)
MAX_PAGES = 200


def base_url() -> str:
    """Bexio's API root: POWERON_BEXIO_URL, else the public API."""
    return (os.environ.get("POWERON_BEXIO_URL") or DEFAULT_URL).rstrip("/")


class BexioSettings(BaseModel):
    """What a user types to connect Bexio (camelCase in the API)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    api_token: str = Field(..., min_length=8, max_length=4000, title="API token",
                           description="your Bexio API token (Bexio: Settings → Security → API tokens)",
                           json_schema_extra={"format": "password", "writeOnly": True})

    @field_validator("api_token")
    @classmethod
    def _one_token(cls, value: str) -> str:
        value = value.strip().removeprefix("Bearer ").strip()
        if not value or any(c.isspace() for c in value):
            raise ValueError("a Bexio API token is one word without spaces")
        return value


class NotInBexio(ConnectionFailed):
    """An account number or VAT code of a receipt that Bexio's books do not have."""


@dataclass(frozen=True)
class Books:
    """Bexio's ids of the account numbers and VAT codes."""

    accounts: dict[str, int]
    taxes: dict[str, int]


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict):
        message = body.get("message") or body.get("error") or ""
        errors = body.get("errors")
        if isinstance(errors, list) and errors:
            message = f"{message} ({'; '.join(str(e) for e in errors[:5])})".strip()
        return str(message)
    return str(body)[:300]


class Bexio(RestClient):
    """Bexio's API for one connection."""

    def __init__(self, token: str):
        super().__init__(SERVICE, base_url(), {"Authorization": f"Bearer {token}"}, error_text=_error_text)

    def _error(self, response: httpx.Response, what: str) -> ApiError:
        if response.status_code == 401:
            return ApiError(f"Bexio refused the API token (401) while {what}: check or replace the token of the "
                            "connection on the Connections page", 401, expired=True)
        if response.status_code == 422:
            return ApiError(f"Bexio did not accept the data (422) while {what}: {_error_text(response)}", 422)
        return super()._error(response, what)

    def accounts(self) -> list[dict[str, Any]]:
        """Every account of Bexio's chart (`GET /2.0/accounts`, paged by limit/offset)."""
        found: list[dict[str, Any]] = []
        for page in range(MAX_PAGES):
            batch = self.json("GET", "/2.0/accounts", "listing the accounts",
                              params={"limit": PAGE_SIZE, "offset": page * PAGE_SIZE}) or []
            if not isinstance(batch, list):
                raise ApiError("Bexio answered the account list with something that is not a list", 200)
            found += batch
            if len(batch) < PAGE_SIZE:
                break
        return found

    def taxes(self) -> list[dict[str, Any]]:
        """Bexio's VAT codes (`GET /3.0/taxes`)."""
        taxes = self.json("GET", "/3.0/taxes", "listing the VAT codes", params={"scope": "active"}) or []
        if not isinstance(taxes, list):
            raise ApiError("Bexio answered the VAT codes with something that is not a list", 200)
        return taxes

    def books(self) -> Books:
        """Bexio's account ids by number and tax ids by code."""
        accounts = {str(a.get("account_no")): int(a["id"]) for a in self.accounts() if a.get("id") is not None}
        taxes = {str(t.get("code")): int(t["id"]) for t in self.taxes() if t.get("id") is not None}
        return Books(accounts, taxes)

    def post_manual_entry(self, entry: dict[str, Any]) -> str:
        """Create a manual entry; Bexio's id of it."""
        answer = self.json("POST", "/3.0/accounting/manual_entries", f"booking {entry.get('reference_nr') or ''}",
                           json=entry)
        if not isinstance(answer, dict) or answer.get("id") is None:
            raise ApiError("Bexio answered the manual entry without an id", 200)
        return str(answer["id"])


def manual_entry(receipt: Any, lines: list[Any], books: Books, codes: dict[str, Any]) -> dict[str, Any]:
    """Bexio's manual entry of a booked receipt: one entry line per booking line.

    Raises:
        NotInBexio: an account number or VAT code the Bexio books lack.
    """
    entries = []
    for line in lines:
        ids = {}
        for side, number in (("debit_account_id", line.debit_account), ("credit_account_id", line.credit_account)):
            if number not in books.accounts:
                raise NotInBexio(f"account {number} does not exist in Bexio: add it to Bexio's chart of accounts")
            ids[side] = books.accounts[number]
        entry: dict[str, Any] = {**ids, "amount": round(line.amount, 2), "description": line.text[:255]}
        code = codes.get(line.vat_code) if line.vat_code else None
        if code is not None and code.rate:
            if line.vat_code not in books.taxes:
                raise NotInBexio(f"VAT code {line.vat_code} does not exist in Bexio")
            entry["tax_id"] = books.taxes[line.vat_code]
        entries.append(entry)
    if not entries:
        raise NotInBexio("the receipt has no booked lines")
    kind = "manual_single_entry" if len(entries) == 1 else "manual_compound_entry"
    return {"type": kind, "date": lines[0].booking_date.isoformat(),
            "reference_nr": (receipt.file_name or receipt.id)[:50], "entries": entries}


def client_for(credentials: Credentials) -> Bexio:
    """The API client of a connection."""
    token = credentials.secret.get("apiToken")
    if not token:
        raise ConnectionFailed(f"connection '{credentials.label}' holds no Bexio API token: connect it again")
    return Bexio(str(token))


def check(credentials: Credentials) -> str:
    """Read one account (`GET /2.0/accounts?limit=1`): the token works."""
    with client_for(credentials) as bexio:
        bexio.json("GET", "/2.0/accounts", "testing the connection", params={"limit": 1, "offset": 0})
    return f"connected to Bexio at {base_url()}"


BEXIO = register_connection_type(ConnectionType(
    id=TYPE_ID, label=LABEL,
    description="Bookkeeping in Bexio: the Trustee sends booked receipts there as manual entries. Connected "
                "with a Bexio API token, which is sealed and never shown again.",
    auth="password", check=check, settings_model=BexioSettings, secret_fields=("api_token",),
))
