"""REST routes for mandates, users, feature instances, access grants, roles and permissions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Response

from backend.admin import Administration
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import (
    AccessGrant,
    AccessOut,
    DecisionOut,
    InstanceCreate,
    InstanceOut,
    MandateCreate,
    MandateOut,
    MemberOut,
    MemberPatch,
    PasswordReset,
    RoleOut,
    RuleOut,
    UserCreate,
)
from backend.db.models import User
from backend.errors import NotFound
from backend.rbac.access import AccessContext

router = APIRouter(prefix="/api", tags=["administration"])

MandateId = Annotated[str, Path(alias="mandateId")]
UserId = Annotated[str, Path(alias="userId")]
InstanceId = Annotated[str, Path(alias="instanceId")]


def administration(user: CurrentUser, session: DbSession) -> Administration:
    return Administration(AccessContext(session, user))


Admin = Annotated[Administration, Depends(administration)]


def member_out(user: User, roles: list[str]) -> MemberOut:
    return MemberOut(id=user.id, username=user.username, display_name=user.display_name, email=user.email,
                     disabled=user.disabled, is_sysadmin=user.is_sysadmin, roles=roles)


@router.get("/mandates", response_model=list[MandateOut], **declared_by(Administration.list_mandates))
def list_mandates(admin: Admin) -> list[MandateOut]:
    """The mandates the caller belongs to (all of them for a system administrator)."""
    return [MandateOut.model_validate(m) for m in admin.list_mandates()]


@router.post("/mandates", status_code=201, response_model=MandateOut, **declared_by(Administration.create_mandate))
def create_mandate(body: MandateCreate, admin: Admin) -> MandateOut:
    return MandateOut.model_validate(admin.create_mandate(body.name))


@router.get("/mandates/{mandateId}/users", response_model=list[MemberOut],
            **declared_by(Administration.list_members))
def list_users(mandate_id: MandateId, admin: Admin) -> list[MemberOut]:
    return [member_out(m.user, m.roles) for m in admin.list_members(mandate_id)]


@router.post("/mandates/{mandateId}/users", status_code=201, response_model=MemberOut,
             **declared_by(Administration.create_user))
def create_user(mandate_id: MandateId, body: UserCreate, admin: Admin) -> MemberOut:
    user = admin.create_user(mandate_id, body.username, body.password, body.roles, body.email,
                             body.display_name, body.is_sysadmin)
    return member_out(user, sorted(set(body.roles)))


@router.patch("/mandates/{mandateId}/users/{userId}", response_model=MemberOut,
              **declared_by(Administration.set_member_roles))
def patch_user(mandate_id: MandateId, user_id: UserId, body: MemberPatch, admin: Admin) -> MemberOut:
    if body.roles is not None:
        admin.set_member_roles(mandate_id, user_id, body.roles)
    if body.disabled is not None:
        admin.set_disabled(mandate_id, user_id, body.disabled)
    member = next((m for m in admin.list_members(mandate_id) if m.user.id == user_id), None)
    if member is None:  # an empty patch changed nothing, so nothing checked the user yet
        raise NotFound(f"user {user_id} not found in this mandate")
    return member_out(member.user, member.roles)


@router.post("/mandates/{mandateId}/users/{userId}/password", status_code=204,
             **declared_by(Administration.reset_password))
def reset_password(mandate_id: MandateId, user_id: UserId, body: PasswordReset, admin: Admin) -> Response:
    admin.reset_password(mandate_id, user_id, body.password)
    return Response(status_code=204)


@router.delete("/mandates/{mandateId}/users/{userId}", status_code=204,
               **declared_by(Administration.remove_member))
def remove_user(mandate_id: MandateId, user_id: UserId, admin: Admin) -> Response:
    admin.remove_member(mandate_id, user_id)
    return Response(status_code=204)


@router.get("/mandates/{mandateId}/instances", response_model=list[InstanceOut],
            **declared_by(Administration.list_instances))
def list_instances(mandate_id: MandateId, admin: Admin) -> list[InstanceOut]:
    return [InstanceOut.model_validate(i) for i in admin.list_instances(mandate_id)]


@router.post("/mandates/{mandateId}/instances", status_code=201, response_model=InstanceOut,
             **declared_by(Administration.create_instance))
def create_instance(mandate_id: MandateId, body: InstanceCreate, admin: Admin) -> InstanceOut:
    return InstanceOut.model_validate(admin.create_instance(mandate_id, body.feature_code, body.label))


@router.get("/instances/{instanceId}/access", response_model=list[AccessOut],
            **declared_by(Administration.list_access))
def list_access(instance_id: InstanceId, admin: Admin) -> list[AccessOut]:
    return [AccessOut(user_id=a.user.id, username=a.user.username, roles=a.roles)
            for a in admin.list_access(instance_id)]


@router.post("/instances/{instanceId}/access", response_model=AccessOut, **declared_by(Administration.set_access))
def grant_access(instance_id: InstanceId, body: AccessGrant, admin: Admin) -> AccessOut:
    """Set the caller-chosen instance roles of a member of the instance's mandate ([] removes access)."""
    roles = admin.set_access(instance_id, body.user_id, body.roles)
    user = admin.session.get(User, body.user_id)
    return AccessOut(user_id=user.id, username=user.username, roles=roles)


@router.delete("/instances/{instanceId}/access/{userId}", status_code=204,
               **declared_by(Administration.set_access))
def revoke_access(instance_id: InstanceId, user_id: UserId, admin: Admin) -> Response:
    admin.set_access(instance_id, user_id, [])
    return Response(status_code=204)


@router.get("/mandates/{mandateId}/roles", response_model=list[RoleOut], **declared_by(Administration.list_roles))
def list_roles(mandate_id: MandateId, admin: Admin) -> list[RoleOut]:
    return [
        RoleOut(id=r.id, role_label=r.role_label, feature_instance_id=r.feature_instance_id,
                feature_code=r.feature_code, rules=[RuleOut.model_validate(rule) for rule in rules])
        for r, rules in admin.list_roles(mandate_id)
    ]


@router.get("/mandates/{mandateId}/users/{userId}/permissions", response_model=list[DecisionOut],
            **declared_by(Administration.explain_member))
def explain_permissions(
    mandate_id: MandateId,
    user_id: UserId,
    admin: Admin,
    instance_id: Annotated[str | None, Query(alias="instanceId")] = None,
    context: Annotated[str | None, Query()] = None,
    item: Annotated[str | None, Query()] = None,
) -> list[DecisionOut]:
    """The resolved right of the user for each item, and which role, level and rule decided it."""
    decisions = admin.explain(mandate_id, user_id, instance_id, context, item)
    return [DecisionOut(**d.as_dict()) for d in decisions]
