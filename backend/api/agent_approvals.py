"""REST adapter of the ApprovalPolicies door (issue 21): /api/mandates/{mandateId}/agent-approvals …

Which consequences of tool calls (send, write, delete, external) wait for a person's approval in
the agent runs of each profile in the mandate. The door (backend/agent/approvals.py) owns the
rights (reading: any member; changing: resource.mandate.manageAgentApprovals); these routes only
translate.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path

from backend.agent.approvals import ApprovalPolicies
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import CamelModel, StrictCamelModel
from backend.rbac.access import AccessContext

router = APIRouter(prefix="/api/mandates/{mandateId}/agent-approvals", tags=["agent-approvals"])
MandateId = Annotated[str, Path(alias="mandateId", max_length=32)]
ProfileName = Annotated[str, Path(alias="profile", max_length=64)]
Consequence = Literal["send", "write", "delete", "external"]


class ApprovalPolicyOut(CamelModel):
    """One agent profile's setting: the consequences that need approval now, the profile's
    default, and whether the mandate chose otherwise."""

    profile: str
    consequences: list[str]
    default: list[str]
    customised: bool


class ApprovalPolicyIn(StrictCamelModel):
    consequences: list[Consequence]


def _door(user: CurrentUser, session: DbSession, mandate_id: str) -> ApprovalPolicies:
    return ApprovalPolicies(AccessContext(session, user), mandate_id)


@router.get("", response_model=list[ApprovalPolicyOut], **declared_by(ApprovalPolicies.list))
def list_policies(mandate_id: MandateId, user: CurrentUser, session: DbSession) -> list[ApprovalPolicyOut]:
    """Every agent profile's approval setting in the mandate."""
    return [ApprovalPolicyOut.model_validate(p) for p in _door(user, session, mandate_id).list()]


@router.put("/{profile}", response_model=ApprovalPolicyOut, **declared_by(ApprovalPolicies.set))
def set_policy(mandate_id: MandateId, profile_name: ProfileName, body: ApprovalPolicyIn, user: CurrentUser,
               session: DbSession) -> ApprovalPolicyOut:
    """Choose which consequences need approval in the profile's runs (an empty list: none)."""
    return ApprovalPolicyOut.model_validate(_door(user, session, mandate_id).set(profile_name, body.consequences))


@router.delete("/{profile}", response_model=ApprovalPolicyOut, **declared_by(ApprovalPolicies.reset))
def reset_policy(mandate_id: MandateId, profile_name: ProfileName, user: CurrentUser,
                 session: DbSession) -> ApprovalPolicyOut:
    """Back to the profile's default."""
    return ApprovalPolicyOut.model_validate(_door(user, session, mandate_id).reset(profile_name))
