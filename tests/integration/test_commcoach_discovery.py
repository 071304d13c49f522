"""A feature is added by adding a folder (spec §4.4, issue 22 part 4).

CommCoach was added as backend/features/commcoach/ plus its profile and page; nothing in the
registry, the API app or the bootstrap names it. This walk proves what the folder alone gives:
the catalogue entry with its UI/RESOURCE/DATA objects, its template roles synced into the
database at start, its routes mounted under /api/commcoach, and copies of the template roles for
a new instance. The Trustee and the Chatbot (other parts of issue 22) are checked only when their
folders exist, so this test does not depend on them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import select

import backend.features as features_package
from backend.db import session_scope
from backend.db.models import AccessRule, Feature, Role
from backend.features.registry import discover

FEATURES_DIR = Path(features_package.__file__).parent
ROLES = ("commcoach-admin", "commcoach-user", "commcoach-viewer")


def test_the_catalogue_discovers_commcoach_with_its_objects_and_template_roles():
    catalogue = discover().features
    coach = catalogue["commcoach"]
    assert (coach.label, coach.icon, coach.package) == ("CommCoach", "messages-square", "backend.features.commcoach")
    assert {item for item, _ in coach.ui_objects} == {"ui.feature.commcoach", "ui.feature.commcoach.chat"}
    assert {item for item, _ in coach.resource_objects} == {
        "resource.feature.commcoach.useAgent", "resource.feature.commcoach.configure",
        "resource.feature.commcoach.manageAccess"}
    assert [item for item, _ in coach.data_objects] == ["data.feature.commcoach.chat"]
    assert tuple(r.label for r in coach.template_roles) == ROLES
    assert coach.router is not None and coach.interface_factory is not None
    for other in ("trustee", "chatbot"):  # issue 22's other features, once their folders are there
        if (FEATURES_DIR / other / "main.py").exists():
            assert catalogue[other].code == other and catalogue[other].template_roles


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_at_start_the_feature_row_template_roles_and_routes_are_there(api):
    with session_scope() as session:
        assert session.get(Feature, "commcoach").label == "CommCoach"
        templates = {r.role_label: r for r in session.exec(
            select(Role).where(Role.feature_code == "commcoach", Role.mandate_id.is_(None))).all()}
        assert set(templates) == set(ROLES)
        user_rules = {(r.context, r.item): r.view for r in session.exec(
            select(AccessRule).where(AccessRule.role_id == templates["commcoach-user"].id)).all()}
        assert user_rules[("RESOURCE", "resource.feature.commcoach.*")] is True
        assert user_rules[("RESOURCE", "resource.feature.commcoach.configure")] is False  # the persona is the admins'
    assert {"code": "commcoach", "label": "CommCoach", "icon": "messages-square"} in \
        api.client.get("/api/features", headers=api.auth).json()
    paths = api.client.get("/api/openapi.json").json()["paths"]
    assert {"/api/commcoach/{instanceId}/agent", "/api/commcoach/{instanceId}/settings",
            "/api/commcoach/{instanceId}/agent/chats/{chatId}/summary"} <= set(paths)

    me = api.client.get("/api/me", headers=api.auth).json()
    mandate_id = next(m["id"] for m in me["mandates"] if m["name"] == "Default")
    created = api.client.post(f"/api/mandates/{mandate_id}/instances",
                              json={"featureCode": "commcoach", "label": "Coach"}, headers=api.auth)
    assert created.status_code == 201, created.text
    roles = api.client.get(f"/api/mandates/{mandate_id}/roles", headers=api.auth).json()
    copies = {r["roleLabel"] for r in roles if r["featureInstanceId"] == created.json()["id"]}
    assert copies == set(ROLES)
