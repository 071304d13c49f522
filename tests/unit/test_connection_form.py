"""The add form of a password connection type is generated from its settings schema: the IMAP form
offers the sign-in choice and, for XOAUTH2, a select of the user's own active Microsoft 365
connections (state/connections.py)."""

from __future__ import annotations

from backend.connectors.types import connection_type
from state.connections import setting_fields


def row(connection_id: str, label: str, type_id: str = "msft", mine: bool = True, status: str = "active") -> dict:
    return {"id": connection_id, "label": label, "type": type_id, "mine": mine, "status": status}


def imap_form(connections: list[dict]) -> dict[str, dict]:
    kind = connection_type("imap")
    schema = kind.settings_model.model_json_schema(by_alias=True)
    return {f["name"]: f for f in setting_fields(schema, {"password"}, connections)}


def test_the_imap_form_offers_xoauth2_with_a_select_of_own_active_microsoft_connections():
    form = imap_form([row("m1", "Microsoft 365 (anna@contoso.example)"), row("m2", "Bert's", mine=False),
                      row("m3", "Expired one", status="expired"), row("i1", "A mailbox", type_id="imap")])
    assert (form["auth"]["kind"], form["auth"]["options"], form["auth"]["default"]) == \
        ("select", ["password", "xoauth2"], "password")
    token = form["tokenConnectionId"]
    assert (token["title"], token["kind"], token["required"]) == ("Microsoft 365 connection", "select", False)
    assert token["options"] == ["", "m1"]
    assert token["labels"] == ["— choose one —", "Microsoft 365 (anna@contoso.example)"]
    assert form["password"]["kind"] == "password" and form["password"]["required"] is False


def test_without_a_microsoft_connection_the_select_says_to_add_one():
    token = imap_form([])["tokenConnectionId"]
    assert (token["options"], token["labels"]) == ([""], ["— none yet: add one first —"])
