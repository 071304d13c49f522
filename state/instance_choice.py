"""The current mandate and feature instance of a page, as its header names and switches them.

A page state that shows one instance of a feature (Workflows, Editor, Workspace, Monitor) mixes
:class:`InstanceChoiceMixin` in next to PageMixin and AuthState, calls one of the `_…instance…`
methods below while it loads, and implements `_instance_switched` (what switching does there).
`components.shell.page_shell(title, …, instance=ThatState)` renders the header from these vars.

Which instance is current, and remembering a choice, is backend.instance_choice's (a door): this
mixin only shows what it answers.
"""

from __future__ import annotations

from typing import TypedDict

import reflex as rx
from sqlmodel import Session

from backend.db.models import User
from backend.errors import DomainError
from backend.instance_choice import InstanceChoice, InstanceOption, choose_instance
from backend.rbac.access import AccessContext
from state.auth import GRAPHICAL_EDITOR, NotSignedIn
from state.page import user_message
from state.permissions import requires_door

ALL_INSTANCES = "all"  # the switcher's value for "every instance" (Radix selects refuse "")
SEPARATOR = " › "


class InstanceEntry(TypedDict):
    id: str
    label: str


class InstanceGroup(TypedDict):
    mandate: str
    instances: list[InstanceEntry]


def _groups(options: list[InstanceOption]) -> list[InstanceGroup]:
    """The options grouped by mandate, in the order given (mandate name, then label)."""
    groups: list[InstanceGroup] = []
    for option in options:
        if not groups or groups[-1]["mandate"] != option.mandate_name:
            groups.append(InstanceGroup(mandate=option.mandate_name, instances=[]))
        groups[-1]["instances"].append(InstanceEntry(id=option.id, label=option.label))
    return groups


class InstanceChoiceMixin(rx.State, mixin=True):
    """The header's instance: `class XState(InstanceChoiceMixin, PageMixin, AuthState)`.

    The page may override `_instance_feature_code` (default: the Graphical Editor),
    `_instance_switched` (default: go to the Workflows page) and `_instance_switch_blocked`.
    """

    # The instance the header names ("" while none, or all of them on the Monitor).
    header_instance_id: str = ""
    header_instance_label: str = ""
    header_mandate: str = ""
    header_title: str = ""  # "Default › Graphical Editor": the header's tooltip
    instance_groups: list[InstanceGroup] = []
    instance_count: int = 0
    # Non-empty where the header offers every instance at once (the Monitor's "All instances").
    instance_all_label: str = ""

    def _instance_feature_code(self) -> str:
        return GRAPHICAL_EDITOR

    def _instance_switched(self, instance_id: str):
        """Show instance `instance_id` ("" = all of them) after the header switched to it; the
        event for the handler to return.

        By default the Workflows page, which opens the instance just remembered (the Editor's
        way: it shows one workflow, of the instance it belongs to).
        """
        return rx.redirect("/workflows")

    def _instance_switch_blocked(self) -> str:
        """Why the page cannot switch now ("" when it can)."""
        return ""

    def _show_instances(self, chosen: InstanceOption | None, options: list[InstanceOption],
                        all_label: str = "") -> None:
        self.instance_groups = _groups(options)
        self.instance_count = len(options)
        self.instance_all_label = all_label
        self.header_instance_id = chosen.id if chosen else ""
        self.header_instance_label = chosen.label if chosen else ""
        self.header_mandate = chosen.mandate_name if chosen else ""
        if chosen is not None:
            self.header_title = f"{chosen.mandate_name}{SEPARATOR}{chosen.label}"
        else:
            self.header_title = all_label

    def _current_instance(self, session: Session, user: User, chosen_id: str = "") -> InstanceOption | None:
        """The instance the page shows — `chosen_id` while the user may open it, else the one
        they used last, else the Default mandate's — named in the header; None when there is none."""
        current = InstanceChoice(AccessContext(session, user)).current(self._instance_feature_code(), chosen_id)
        self._show_instances(current.chosen, current.options)
        return current.chosen

    def _open_instance(self, session: Session, user: User, instance_id: str) -> InstanceOption:
        """Show instance `instance_id`, which the page opened (the editor's workflow's), and
        remember it as the user's current one (NotFound when they may not open it)."""
        access = AccessContext(session, user)
        chosen = choose_instance(access, instance_id, self._instance_feature_code())
        self._show_instances(chosen, InstanceChoice(access).options(self._instance_feature_code()))
        return chosen

    def _show_all_instances(self, session: Session, user: User, chosen_id: str, all_label: str,
                            only: set[str] | None = None) -> None:
        """The header of a page that may show every instance at once (the Monitor).

        Args:
            session: The open transaction.
            user: The signed-in user.
            chosen_id: The instance the page shows; "" or ALL_INSTANCES: all of them.
            all_label: What the header calls all of them ("All instances").
            only: The ids of the instances the page can show, when not every one the user may open.
        """
        options = InstanceChoice(AccessContext(session, user)).options(self._instance_feature_code())
        if only is not None:
            options = [o for o in options if o.id in only]
        chosen = next((o for o in options if o.id == chosen_id), None)
        self._show_instances(chosen, options, all_label)

    @rx.event
    @requires_door(InstanceChoice.remember)
    def switch_instance(self, instance_id: str):
        """The header's switcher: remember the instance as the user's current one, then show it.

        The one shown already is no switch: Radix's select also reports a value the page set
        itself (its hidden native select echoes every change), which must not switch or redirect.
        """
        if instance_id == (self.header_instance_id or ALL_INSTANCES):
            return None
        if instance_id == ALL_INSTANCES and self.instance_all_label:
            return self._instance_switched("")
        blocked = self._instance_switch_blocked()
        if blocked:
            self.error = blocked
            return None
        self.error = self.notice = ""
        try:
            with self._user_session() as (session, user):
                chosen = choose_instance(AccessContext(session, user), instance_id, self._instance_feature_code())
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
            return None
        return self._instance_switched(chosen.id)
