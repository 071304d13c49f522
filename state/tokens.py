"""State of the API tokens page: the signed-in user's personal API tokens, through the door
backend.tokens.ApiTokens."""

from __future__ import annotations

from typing import TypedDict

import reflex as rx

from backend.config import get_settings
from backend.rbac.access import AccessContext
from backend.tokens import ApiTokens
from state.auth import AuthState
from state.page import PageMixin
from state.permissions import requires, requires_door


def _door(session, user) -> ApiTokens:
    return ApiTokens(AccessContext(session, user))


ALL_INSTANCES = "-"  # the instance select's "not narrowed" choice (a select item cannot be "")


class TokenRow(TypedDict):
    id: str
    name: str
    created: str
    scope: str


class InstanceOption(TypedDict):
    value: str
    label: str


def _scope_text(token, labels: dict[str, str]) -> str:
    where = labels.get(token.instance_id, "an instance you can no longer open") if token.instance_id else "everywhere"
    return where + (" · read-only" if token.read_only else "")


class TokensState(PageMixin, AuthState):
    """The user's own tokens; a new token's text is held only until the page is left."""

    tokens: list[TokenRow] = []
    instance_options: list[InstanceOption] = []
    new_instance: str = ALL_INSTANCES
    new_read_only: bool = False
    mcp_url: str = ""
    new_name: str = ""
    created_token: str = ""
    created_name: str = ""
    revoke_id: str = ""
    revoke_name: str = ""

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            self._load_navigation(session, user)
            door = _door(session, user)
            instances = door.instances()
            labels = {i.id: f"{i.label} ({i.feature_code})" for i in instances}
            self.instance_options = [InstanceOption(value=i.id, label=labels[i.id]) for i in instances]
            self.tokens = [
                TokenRow(id=t.id, name=t.name or "", created=t.sys_created_at.strftime("%Y-%m-%d %H:%M UTC"),
                         scope=_scope_text(t, labels))
                for t in door.list()
            ]
        self.mcp_url = get_settings().api_url + "/mcp"
        self.loaded = True

    @rx.event
    @requires_door(ApiTokens.list)
    def load(self):
        """on_load: check the sign-in and list the tokens; a token shown before is gone."""
        self.error = ""
        self.notice = ""
        self.created_token = ""
        self.created_name = ""
        self.revoke_id = ""
        return self._reload()

    @rx.event
    @requires("ui")
    def set_new_name(self, value: str):
        self.new_name = value

    @rx.event
    @requires("ui")
    def set_new_instance(self, value: str):
        self.new_instance = value

    @rx.event
    @requires("ui")
    def set_new_read_only(self, value: bool):
        self.new_read_only = bool(value)

    @rx.event
    @requires_door(ApiTokens.create)
    def create_token(self, form_data: dict):
        """Create a token with the typed name (narrowed as chosen) and show its text once."""
        name = (form_data.get("name") or self.new_name or "").strip()
        instance_id = None if self.new_instance == ALL_INSTANCES else self.new_instance
        read_only = self.new_read_only
        self.created_token = ""
        created: dict[str, str] = {}

        def create(session, user):
            created["text"] = _door(session, user).create(name, instance_id, read_only)[1]

        ok, event = self._attempt(create)
        if ok:
            self.created_token = created["text"]
            self.created_name = name
            self.new_name = ""
            self.new_instance = ALL_INSTANCES
            self.new_read_only = False
        return event

    @rx.event
    @requires("ui")
    def dismiss_created(self):
        """Forget the shown token text (the user has copied it)."""
        self.created_token = ""
        self.created_name = ""

    @rx.event
    @requires("ui")
    def copy_created(self):
        """Copy the new token's text to the clipboard."""
        return [rx.set_clipboard(self.created_token), rx.toast.success("Token copied to the clipboard.")]

    @rx.event
    @requires("ui")
    def ask_revoke(self, token_id: str, name: str):
        self.revoke_id = token_id
        self.revoke_name = name

    @rx.event
    @requires("ui")
    def revoke_open_change(self, is_open: bool):
        if not is_open:
            self.revoke_id = ""

    @rx.event
    @requires_door(ApiTokens.revoke)
    def confirm_revoke(self):
        """Revoke the token the dialog asked about; calls with it fail from now on."""
        token_id, name = self.revoke_id, self.revoke_name
        self.revoke_id = ""
        ok, event = self._attempt(lambda session, user: _door(session, user).revoke(token_id),
                                  success=f"Revoked '{name}'; it no longer works.")
        if ok and name == self.created_name:
            self.created_token = ""
            self.created_name = ""
        return event
