"""Template roles and their copies (spec §4.2), and how fast role changes take effect.

Templates live in the database as the code declares them; a new mandate gets copies of the
system templates, a new feature instance copies of its feature's templates. Copies are made
only at creation; the single exception is `sync_ui_objects`, which adds UI rules of a template
to existing copies with the same label.
"""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from backend.auth import issue_token
from backend.bootstrap import sync_catalog
from backend.db import session_scope
from backend.db.models import AccessRule, FeatureInstance, Mandate, Role, User
from backend.features.registry import get_features
from backend.rbac.rights import DATA, UI
from backend.rbac.templates import SYSTEM_TEMPLATE_ROLES, TemplateRole, sync_ui_objects
from backend.tenancy import create_feature_instance, create_mandate, grant_instance_roles, grant_mandate_roles

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

RULE_FIELDS = ("context", "item", "view", "read", "create", "update", "delete")


def rules_of(session: Session, role: Role) -> set[tuple]:
    rows = session.exec(select(AccessRule).where(AccessRule.role_id == role.id)).all()
    return {tuple(getattr(r, f) for f in RULE_FIELDS) for r in rows}


def declared(template: TemplateRole) -> set[tuple]:
    return {tuple(getattr(s, f) for f in RULE_FIELDS) for s in template.rules}


def template(session: Session, label: str, feature_code: str | None = None) -> Role:
    query = select(Role).where(Role.mandate_id.is_(None), Role.role_label == label)
    query = query.where(Role.feature_code == feature_code if feature_code else Role.feature_code.is_(None))
    return session.exec(query).one()


def copies(session: Session, **scope) -> dict[str, Role]:
    query = select(Role)
    for name, value in scope.items():
        column = getattr(Role, name)
        query = query.where(column.is_(None) if value is None else column == value)
    return {r.role_label: r for r in session.exec(query).all()}


def wanted_templates() -> dict[tuple[str, str | None], TemplateRole]:
    wanted = {(t.label, None): t for t in SYSTEM_TEMPLATE_ROLES}
    for code, feature in get_features().items():
        wanted.update({(t.label, code): t for t in feature.template_roles})
    return wanted


def test_template_roles_in_the_database_equal_the_code_and_bootstrap_repairs_drift(app_config):
    with session_scope() as session:
        rows = session.exec(select(Role).where(Role.mandate_id.is_(None))).all()
        stored = {(r.role_label, r.feature_code): r for r in rows}
        wanted = wanted_templates()
        assert len(rows) == len(stored) and set(stored) == set(wanted)
        for key, role in stored.items():
            assert rules_of(session, role) == declared(wanted[key]), key
            assert role.is_system_role is (key[1] is None), key
            assert role.feature_instance_id is None

        # Drift in the database (a changed, an extra and a deleted rule) is undone by the next sync.
        admin = template(session, "admin")
        changed = session.exec(select(AccessRule).where(AccessRule.role_id == admin.id,
                                                        AccessRule.context == DATA)).one()
        changed.delete = "none"
        session.add(changed)
        session.add(AccessRule(role_id=admin.id, context=UI, item="ui.rogue", view=True))
        viewer = template(session, "graphicalEditor-viewer", "graphicalEditor")
        for rule in session.exec(select(AccessRule).where(AccessRule.role_id == viewer.id)).all():
            session.delete(rule)
        session.flush()
        sync_catalog(session)
        assert rules_of(session, admin) == declared(wanted[("admin", None)])
        assert rules_of(session, viewer) == declared(wanted[("graphicalEditor-viewer", "graphicalEditor")])


def test_a_new_mandate_gets_copies_of_the_system_templates_with_their_rules(app_config):
    with session_scope() as session:
        mandate = create_mandate(session, "Copy Corp")
        mandate_roles = copies(session, mandate_id=mandate.id)
        assert sorted(mandate_roles) == ["admin", "user", "viewer"]
        for label, role in mandate_roles.items():
            assert role.is_system_role is False
            assert role.mandate_id == mandate.id and role.feature_instance_id is None and role.feature_code is None
            source = template(session, label)
            assert role.id != source.id
            assert rules_of(session, role) == rules_of(session, source) != set()


@pytest.mark.parametrize("feature_code", sorted(get_features()))
def test_a_new_instance_gets_copies_of_its_feature_templates_with_their_rules(app_config, feature_code):
    with session_scope() as session:
        mandate = create_mandate(session, "Instance Corp")
        instance = create_feature_instance(session, mandate, feature_code, "First")
        roles = copies(session, feature_instance_id=instance.id)
        assert sorted(roles) == sorted(f"{feature_code}-{s}" for s in ("admin", "user", "viewer"))
        for label, role in roles.items():
            assert role.is_system_role is False
            assert (role.mandate_id, role.feature_code) == (mandate.id, feature_code)
            assert rules_of(session, role) == rules_of(session, template(session, label, feature_code)) != set()
        # The mandate's own roles are untouched by the instance.
        assert sorted(copies(session, mandate_id=mandate.id, feature_instance_id=None)) == ["admin", "user", "viewer"]


def test_copies_are_made_only_at_creation(app_config):
    with session_scope() as session:
        old_mandate = create_mandate(session, "Old Corp")
        old_instance = create_feature_instance(session, old_mandate, "graphicalEditor", "Old editor")
        old_user = copies(session, mandate_id=old_mandate.id, feature_instance_id=None)["user"]
        old_editor_user = copies(session, feature_instance_id=old_instance.id)["graphicalEditor-user"]
        before = (rules_of(session, old_user), rules_of(session, old_editor_user))

        # An administrator changes the templates in the database (a DATA and a RESOURCE rule).
        user_template = template(session, "user")
        data_rule = session.exec(select(AccessRule).where(AccessRule.role_id == user_template.id)).one()
        data_rule.delete = "all"
        session.add(data_rule)
        editor_template = template(session, "graphicalEditor-user", "graphicalEditor")
        session.add(AccessRule(role_id=editor_template.id, context="RESOURCE",
                               item="resource.feature.graphicalEditor.experimental", view=True))
        session.flush()

        assert (rules_of(session, old_user), rules_of(session, old_editor_user)) == before
        new_mandate = create_mandate(session, "New Corp")
        new_instance = create_feature_instance(session, new_mandate, "graphicalEditor", "New editor")
        new_user = copies(session, mandate_id=new_mandate.id, feature_instance_id=None)["user"]
        new_editor_user = copies(session, feature_instance_id=new_instance.id)["graphicalEditor-user"]
        assert ("DATA", "*", False, "all", "all", "own", "all") in rules_of(session, new_user)
        assert ("RESOURCE", "resource.feature.graphicalEditor.experimental", True, "none", "none", "none",
                "none") in rules_of(session, new_editor_user)
        # A new instance in the old mandate gets the new rule too; the old copies still do not.
        another = create_feature_instance(session, old_mandate, "graphicalEditor", "Another editor")
        assert rules_of(session, copies(session, feature_instance_id=another.id)["graphicalEditor-user"]) == \
            rules_of(session, new_editor_user)
        assert (rules_of(session, old_user), rules_of(session, old_editor_user)) == before


def test_sync_ui_objects_adds_new_ui_rules_to_copies_with_the_same_label_but_no_data_rules(app_config):
    with session_scope() as session:
        mandate = create_mandate(session, "Sync Corp")
        create_feature_instance(session, mandate, "graphicalEditor", "Synced editor")
        default = session.exec(select(Mandate).where(Mandate.name == "Default")).one()
        mandate_viewers = [copies(session, mandate_id=m.id, feature_instance_id=None)["viewer"]
                           for m in (mandate, default)]
        editor_viewers = [r for r in session.exec(select(Role).where(
            Role.role_label == "graphicalEditor-viewer", Role.mandate_id.is_not(None))).all()]
        assert len(editor_viewers) == 2  # the Default mandate's instance and ours
        others = [r for r in session.exec(select(Role).where(Role.mandate_id.is_not(None))).all()
                  if r.role_label not in ("viewer", "graphicalEditor-viewer")]
        before_others = {r.id: rules_of(session, r) for r in others}

        # A new version of the code declares new UI objects (and a new DATA rule) on templates.
        viewer_template = template(session, "viewer")
        editor_viewer_template = template(session, "graphicalEditor-viewer", "graphicalEditor")
        session.add(AccessRule(role_id=viewer_template.id, context=UI, item="ui.reports", view=True))
        session.add(AccessRule(role_id=viewer_template.id, context=DATA, item="data.reports.*", read="all"))
        session.add(AccessRule(role_id=editor_viewer_template.id, context=UI,
                               item="ui.feature.graphicalEditor.history", view=False))
        session.flush()

        assert sync_ui_objects(session) == 4
        for role in mandate_viewers:
            rules = rules_of(session, role)
            assert ("UI", "ui.reports", True, "none", "none", "none", "none") in rules
            assert not any(r[0] == DATA and r[1] == "data.reports.*" for r in rules)
        for role in editor_viewers:
            assert ("UI", "ui.feature.graphicalEditor.history", False, "none", "none", "none", "none") \
                in rules_of(session, role)
        assert {r.id: rules_of(session, r) for r in others} == before_others
        assert sync_ui_objects(session) == 0  # idempotent


# --- revocation takes effect at the next request ---------------------------------------------------


def _user_with_token(username: str, mandate_id: str, mandate_roles: list[str],
                     instance_id: str | None = None, instance_roles: list[str] = ()) -> tuple[str, dict]:
    with session_scope() as session:
        user = User(username=username)
        session.add(user)
        session.flush()
        grant_mandate_roles(session, user, session.get(Mandate, mandate_id), mandate_roles)
        if instance_id:
            grant_instance_roles(session, user, session.get(FeatureInstance, instance_id), list(instance_roles))
        token = issue_token(session, user).token
        return user.id, {"Authorization": f"Bearer {token}"}


def test_granting_and_revoking_instance_roles_takes_effect_at_the_next_request(api):
    mandate_id = api.client.get("/api/me", headers=api.auth).json()["mandates"][0]["id"]
    vera_id, vera = _user_with_token("vera", mandate_id, ["viewer"], api.instance_id, ["graphicalEditor-viewer"])
    workflows = f"{api.base()}/workflows"
    access = f"/api/instances/{api.instance_id}/access"

    assert api.client.get(workflows, headers=vera).status_code == 200
    assert api.client.post(workflows, json={"name": "Mine"}, headers=vera).status_code == 403

    granted = api.client.post(access, json={"userId": vera_id, "roles": ["graphicalEditor-admin"]}, headers=api.auth)
    assert granted.status_code == 200 and granted.json()["roles"] == ["graphicalEditor-admin"]
    assert api.client.post(workflows, json={"name": "Mine"}, headers=vera).status_code == 201

    api.client.post(access, json={"userId": vera_id, "roles": ["graphicalEditor-viewer"]}, headers=api.auth)
    assert api.client.post(workflows, json={"name": "Second"}, headers=vera).status_code == 403

    assert api.client.delete(f"{access}/{vera_id}", headers=api.auth).status_code == 204
    assert api.client.get(workflows, headers=vera).status_code == 404
    assert api.instance_id not in {i["id"] for i in api.client.get("/api/me", headers=vera).json()["instances"]}


def test_granting_and_revoking_mandate_roles_takes_effect_at_the_next_request(api):
    mandate_id = api.client.get("/api/me", headers=api.auth).json()["mandates"][0]["id"]
    vera_id, vera = _user_with_token("vera", mandate_id, ["viewer"])
    users = f"/api/mandates/{mandate_id}/users"

    assert api.client.get(users, headers=vera).status_code == 403
    promoted = api.client.patch(f"{users}/{vera_id}", json={"roles": ["admin"]}, headers=api.auth)
    assert promoted.status_code == 200 and promoted.json()["roles"] == ["admin"]
    assert api.client.get(users, headers=vera).status_code == 200
    # As mandate admin she may now open every instance of the mandate (mandate-level UI rule).
    assert api.client.post(f"{api.base()}/workflows", json={"name": "Hers"}, headers=vera).status_code == 201

    demoted = api.client.patch(f"{users}/{vera_id}", json={"roles": ["viewer"]}, headers=api.auth)
    assert demoted.status_code == 200
    assert api.client.get(users, headers=vera).status_code == 403
    assert api.client.get(f"{api.base()}/workflows", headers=vera).status_code == 404

    assert api.client.delete(f"{users}/{vera_id}", headers=api.auth).status_code == 204
    assert api.client.get(f"/api/mandates/{mandate_id}/instances", headers=vera).status_code == 404
    assert api.client.get("/api/mandates", headers=vera).json() == []
