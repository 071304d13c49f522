"""The Admin page's "Agent approvals" tab (issue 21): which consequences of tool calls wait for a
person's approval in the agent runs of each profile of a mandate.

Every read and change goes through the door `backend.agent.approvals.ApprovalPolicies`, which
checks the signed-in user's rights itself; this mixin of AdminState only keeps what the tab shows.
"""

from __future__ import annotations

from typing import TypedDict

import reflex as rx

from backend.actions.base import CONSEQUENCES
from backend.agent.approvals import ApprovalPolicies, PolicyView
from backend.features.registry import get_features
from backend.rbac.access import AccessContext
from state.permissions import requires_door

CONSEQUENCE_LABELS = {"send": "Send (mail leaves)", "write": "Write (data here changes)",
                      "delete": "Delete", "external": "External (outside systems change)"}


class ApprovalChoice(TypedDict):
    consequence: str
    label: str
    checked: bool


class ApprovalRow(TypedDict):
    profile: str
    label: str
    choices: list[ApprovalChoice]
    customised: bool
    default: str


def _row(view: PolicyView) -> ApprovalRow:
    feature = get_features().get(view.profile)
    return ApprovalRow(
        profile=view.profile, label=feature.label if feature else view.profile,
        choices=[ApprovalChoice(consequence=c, label=CONSEQUENCE_LABELS[c], checked=c in view.consequences)
                 for c in CONSEQUENCES],
        customised=view.customised, default=", ".join(view.default) or "none")


class AgentApprovalsMixin(rx.State, mixin=True):
    """`approval_rows`: one row per agent profile with a checkbox per consequence."""

    approval_rows: list[ApprovalRow] = []

    def _load_approvals(self, access: AccessContext, mandate_id: str) -> None:
        self.approval_rows = [_row(view) for view in ApprovalPolicies(access, mandate_id).list()]

    @rx.event
    @requires_door(ApprovalPolicies.set)
    def toggle_approval(self, profile: str, consequence: str, checked: bool):
        """Tick or untick one consequence for one profile (saved at once)."""
        row = next((r for r in self.approval_rows if r["profile"] == profile), None)
        if row is None:
            return None
        chosen = {c["consequence"] for c in row["choices"] if c["checked"]}
        chosen = chosen | {consequence} if checked else chosen - {consequence}
        mandate_id, consequences = self.mandate_id, [c for c in CONSEQUENCES if c in chosen]
        _ok, event = self._attempt(
            lambda session, user: ApprovalPolicies(AccessContext(session, user), mandate_id).set(profile, consequences),
            f"Saved: agent runs of {row['label']} now ask before {', '.join(consequences) or 'nothing'}.")
        return event

    @rx.event
    @requires_door(ApprovalPolicies.reset)
    def reset_approvals(self, profile: str):
        """Back to the profile's default."""
        mandate_id = self.mandate_id
        _ok, event = self._attempt(
            lambda session, user: ApprovalPolicies(AccessContext(session, user), mandate_id).reset(profile),
            "Back to the default.")
        return event
