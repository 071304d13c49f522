"""The administration REST routes with bad input, and the guards that protect a mandate.

Mandates, users, instances and access grants; the last-admin and not-yourself guards;
passwords; personal API tokens; and the permissions "why" view.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from sqlmodel import select

from backend.auth import issue_token, token_digest
from backend.db import session_scope
from backend.db.models import AuthToken, User

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

PASSWORD = "long-enough-1"


@dataclass
class Mandate:
    """A mandate made through the API, with its first admin signed in."""

    id: str
    admin_id: str
    admin: dict
    editor_id: str  # its Graphical Editor instance
    workspace_id: str


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def signed_in(username: str) -> dict:
    """Headers with a fresh login token (as /api/auth/login issues, without paying for Argon2)."""
    with session_scope() as session:
        user = session.exec(select(User).where(User.username == username)).one()
        return bearer(issue_token(session, user).token)


def make_mandate(api, name: str, admin_name: str) -> Mandate:
    """A mandate, an admin (created by the system administrator) and one instance per feature."""
    created = api.client.post("/api/mandates", json={"name": name}, headers=api.auth)
    assert created.status_code == 201, created.text
    mandate_id = created.json()["id"]
    user = api.client.post(f"/api/mandates/{mandate_id}/users",
                           json={"username": admin_name, "password": PASSWORD, "roles": ["admin"]}, headers=api.auth)
    assert user.status_code == 201, user.text
    instances = {}
    for code, label in (("graphicalEditor", "Editor"), ("workspace", "Workspace")):
        instance = api.client.post(f"/api/mandates/{mandate_id}/instances",
                                   json={"featureCode": code, "label": label}, headers=api.auth)
        assert instance.status_code == 201, instance.text
        instances[code] = instance.json()["id"]
    return Mandate(mandate_id, user.json()["id"], signed_in(admin_name),
                   instances["graphicalEditor"], instances["workspace"])


def add_user(api, mandate: Mandate, username: str, roles: list[str], headers: dict | None = None) -> str:
    response = api.client.post(f"/api/mandates/{mandate.id}/users",
                               json={"username": username, "password": PASSWORD, "roles": roles},
                               headers=headers or mandate.admin)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def error_fields(response) -> set[str]:
    return {e["field"] for e in response.json().get("errors", [])}


@pytest.fixture
def acme(api) -> Mandate:
    return make_mandate(api, "Acme", "alice")


# --- input and duplicates ----------------------------------------------------------------------------


def test_unknown_role_labels_are_refused_naming_them(api, acme):
    users = f"/api/mandates/{acme.id}/users"
    response = api.client.post(users, json={"username": "bob", "password": PASSWORD,
                                            "roles": ["viewer", "superuser", "root"]}, headers=acme.admin)
    assert response.status_code == 422
    assert error_fields(response) == {"roles"}
    assert "superuser" in response.text and "root" in response.text and "known: admin, user, viewer" in response.text
    bob = add_user(api, acme, "bob", ["viewer"])
    patched = api.client.patch(f"{users}/{bob}", json={"roles": ["graphicalEditor-admin"]}, headers=acme.admin)
    assert patched.status_code == 422 and "graphicalEditor-admin" in patched.text
    listed = {m["username"]: m["roles"] for m in api.client.get(users, headers=acme.admin).json()}
    assert listed == {"alice": ["admin"], "bob": ["viewer"]}


def test_duplicates_answer_409(api, acme):
    assert api.client.post("/api/mandates", json={"name": "Acme"}, headers=api.auth).status_code == 409
    add_user(api, acme, "bob", ["user"])
    for name in ("bob", "BOB", "alice", "admin"):
        response = api.client.post(f"/api/mandates/{acme.id}/users",
                                   json={"username": name, "password": PASSWORD, "roles": []}, headers=acme.admin)
        assert response.status_code == 409, name
        assert "username" in response.json()["detail"]
    instance = api.client.post(f"/api/mandates/{acme.id}/instances",
                               json={"featureCode": "workspace", "label": "Editor"}, headers=acme.admin)
    assert instance.status_code == 409 and "Editor" in instance.json()["detail"]
    # The same label in another mandate is fine.
    other = make_mandate(api, "Globex", "gina")
    assert api.client.post(f"/api/mandates/{other.id}/instances", json={"featureCode": "workspace",
                                                                     "label": "Second"},
                           headers=other.admin).status_code == 201


def test_bad_mandate_and_instance_input_names_the_field(api, acme):
    empty = api.client.post("/api/mandates", json={"name": "  "}, headers=api.auth)
    assert empty.status_code == 422 and error_fields(empty) == {"name"}
    unknown = api.client.post(f"/api/mandates/{acme.id}/instances", json={"featureCode": "nope", "label": "X"},
                              headers=acme.admin)
    assert unknown.status_code == 422 and error_fields(unknown) == {"featureCode"}
    assert "graphicalEditor" in unknown.text  # names the known feature codes
    missing = api.client.post(f"/api/mandates/{acme.id}/instances", json={"label": "X"}, headers=acme.admin)
    assert missing.status_code == 422 and error_fields(missing) == {"featureCode"}


def test_passwords_shorter_than_eight_characters_are_refused_naming_password(api, acme):
    short = api.client.post(f"/api/mandates/{acme.id}/users",
                            json={"username": "bob", "password": "short", "roles": ["user"]}, headers=acme.admin)
    assert short.status_code == 422 and error_fields(short) == {"password"}
    assert all(m["username"] != "bob" for m in api.client.get(f"/api/mandates/{acme.id}/users",
                                                                headers=acme.admin).json())
    bob = add_user(api, acme, "bob", ["user"])
    reset = api.client.post(f"/api/mandates/{acme.id}/users/{bob}/password", json={"password": "1234567"},
                            headers=acme.admin)
    assert reset.status_code == 422 and error_fields(reset) == {"password"}
    api.login("bob", PASSWORD)  # unchanged


def test_an_empty_member_patch_of_an_unknown_or_foreign_user_is_not_found(api, acme):
    # Regression: an empty patch reached no check and failed with StopIteration (500).
    globex = make_mandate(api, "Globex", "gina")
    users = f"/api/mandates/{acme.id}/users"
    for user_id in ("0" * 32, globex.admin_id):
        response = api.client.patch(f"{users}/{user_id}", json={}, headers=acme.admin)
        assert response.status_code == 404, response.text
    same = api.client.patch(f"{users}/{acme.admin_id}", json={}, headers=acme.admin)
    assert same.status_code == 200 and same.json()["roles"] == ["admin"]


# --- guards -------------------------------------------------------------------------------------------


def test_only_a_system_administrator_grants_system_administration(api, acme):
    users = f"/api/mandates/{acme.id}/users"
    response = api.client.post(users, json={"username": "eve", "password": PASSWORD, "roles": ["admin"],
                                            "isSysadmin": True}, headers=acme.admin)
    assert response.status_code == 403
    with session_scope() as session:
        assert session.exec(select(User).where(User.username == "eve")).first() is None
    # The member patch has no such field at all.
    bob = add_user(api, acme, "bob", ["user"])
    assert api.client.patch(f"{users}/{bob}", json={"isSysadmin": True}, headers=acme.admin).status_code == 422
    # The system administrator may.
    root = api.client.post(users, json={"username": "root2", "password": PASSWORD, "roles": [], "isSysadmin": True},
                           headers=api.auth)
    assert root.status_code == 201 and root.json()["isSysadmin"] is True
    # Only the system administrator creates mandates.
    assert api.client.post("/api/mandates", json={"name": "Mine"}, headers=acme.admin).status_code == 403


def test_users_cannot_change_their_own_roles_access_or_account(api, acme):
    users = f"/api/mandates/{acme.id}/users"
    me = f"{users}/{acme.admin_id}"
    for response in (
        api.client.patch(me, json={"roles": ["admin", "user"]}, headers=acme.admin),
        api.client.patch(me, json={"roles": ["viewer"]}, headers=acme.admin),
        api.client.patch(me, json={"disabled": True}, headers=acme.admin),
        api.client.delete(me, headers=acme.admin),
        api.client.post(f"/api/instances/{acme.editor_id}/access",
                        json={"userId": acme.admin_id, "roles": ["graphicalEditor-viewer"]}, headers=acme.admin),
    ):
        assert response.status_code == 403, response.text
        assert "yourself" in response.json()["detail"]
    assert {m["username"]: m["roles"] for m in api.client.get(users, headers=acme.admin).json()} == {
        "alice": ["admin"]}


def test_the_last_admin_of_a_mandate_cannot_be_demoted_disabled_or_removed(api, acme):
    users = f"/api/mandates/{acme.id}/users"
    alice = f"{users}/{acme.admin_id}"
    # The system administrator is not stopped by "not yourself", only by "last admin".
    for response in (
        api.client.patch(alice, json={"roles": ["user"]}, headers=api.auth),
        api.client.patch(alice, json={"disabled": True}, headers=api.auth),
        api.client.delete(alice, headers=api.auth),
    ):
        assert response.status_code == 409, response.text
        assert "last admin" in response.json()["detail"] and "Acme" in response.json()["detail"]

    # A second admin who is disabled does not count.
    bob = add_user(api, acme, "bob", ["admin"])
    assert api.client.patch(f"{users}/{bob}", json={"disabled": True}, headers=acme.admin).status_code == 200
    assert api.client.patch(alice, json={"roles": ["user"]}, headers=api.auth).status_code == 409
    # Once he is enabled again, alice may go.
    assert api.client.patch(f"{users}/{bob}", json={"disabled": False}, headers=acme.admin).status_code == 200
    assert api.client.patch(alice, json={"roles": ["user"]}, headers=api.auth).status_code == 200
    bob_headers = signed_in("bob")
    assert api.client.patch(f"{users}/{bob}", json={"roles": ["user"]}, headers=api.auth).status_code == 409
    assert api.client.delete(f"{users}/{bob}", headers=api.auth).status_code == 409
    assert api.client.delete(alice, headers=bob_headers).status_code == 204


def test_disabled_users_cannot_sign_in_and_their_tokens_stop_working(api, acme):
    bob = add_user(api, acme, "bob", ["user"])
    bob_headers = signed_in("bob")
    assert api.client.get("/api/me", headers=bob_headers).status_code == 200
    assert api.client.patch(f"/api/mandates/{acme.id}/users/{bob}", json={"disabled": True},
                            headers=acme.admin).json()["disabled"] is True
    assert api.client.get("/api/me", headers=bob_headers).status_code == 401
    assert api.client.post("/api/auth/login", json={"username": "bob", "password": PASSWORD}).status_code == 401


def test_account_wide_changes_need_the_right_in_every_mandate_of_the_user(api, acme):
    globex = make_mandate(api, "Globex", "gina")
    bob = add_user(api, acme, "bob", ["user"])
    # The system administrator adds bob to Globex as well (an existing username joins).
    with session_scope() as session:
        from backend.db.models import Mandate as MandateRow
        from backend.tenancy import grant_mandate_roles

        grant_mandate_roles(session, session.get(User, bob), session.get(MandateRow, globex.id), ["user"])
    for response in (
        api.client.patch(f"/api/mandates/{acme.id}/users/{bob}", json={"disabled": True}, headers=acme.admin),
        api.client.post(f"/api/mandates/{acme.id}/users/{bob}/password", json={"password": "new-password-9"},
                        headers=acme.admin),
    ):
        assert response.status_code == 403 and "do not administer" in response.json()["detail"]
    api.login("bob", PASSWORD)


# --- instance access ---------------------------------------------------------------------------------


def test_granting_instance_roles_checks_the_roles_and_the_membership(api, acme):
    bob = add_user(api, acme, "bob", ["user"])
    access = f"/api/instances/{acme.editor_id}/access"
    for roles in (["admin"], ["workspace-user"], ["graphicalEditor-viewer", "graphicalEditor-owner"]):
        response = api.client.post(access, json={"userId": bob, "roles": roles}, headers=acme.admin)
        assert response.status_code == 422, roles
        assert error_fields(response) == {"roles"} and roles[-1] in response.text
    assert api.client.get(access, headers=acme.admin).json() == []

    # Roles of the mandate's other instance are not roles of this one.
    ws = api.client.post(f"/api/instances/{acme.workspace_id}/access",
                         json={"userId": bob, "roles": ["graphicalEditor-user"]}, headers=acme.admin)
    assert ws.status_code == 422

    # A user who is not a member of the instance's mandate is not found.
    globex = make_mandate(api, "Globex", "gina")
    outsider = api.client.post(access, json={"userId": globex.admin_id, "roles": ["graphicalEditor-viewer"]},
                               headers=acme.admin)
    assert outsider.status_code == 404
    nobody = api.client.post(access, json={"userId": "0" * 32, "roles": ["graphicalEditor-viewer"]},
                             headers=acme.admin)
    assert nobody.status_code == 404

    granted = api.client.post(access, json={"userId": bob, "roles": ["graphicalEditor-user", "graphicalEditor-user"]},
                              headers=acme.admin)
    assert granted.status_code == 200 and granted.json() == {"userId": bob, "username": "bob",
                                                             "roles": ["graphicalEditor-user"]}
    assert api.client.get(access, headers=acme.admin).json() == [granted.json()]


def test_an_instance_admin_manages_access_of_that_instance_only(api, acme):
    carol = add_user(api, acme, "carol", ["user"])
    bob = add_user(api, acme, "bob", ["viewer"])
    api.client.post(f"/api/instances/{acme.editor_id}/access",
                    json={"userId": carol, "roles": ["graphicalEditor-admin"]}, headers=acme.admin)
    carol_headers = signed_in("carol")
    grant = api.client.post(f"/api/instances/{acme.editor_id}/access",
                            json={"userId": bob, "roles": ["graphicalEditor-viewer"]}, headers=carol_headers)
    assert grant.status_code == 200
    # The workspace instance she cannot open does not exist for her.
    assert api.client.get(f"/api/instances/{acme.workspace_id}/access", headers=carol_headers).status_code == 404
    # She is no mandate administrator.
    assert api.client.get(f"/api/mandates/{acme.id}/users", headers=carol_headers).status_code == 403
    # A graphicalEditor-user may open the instance but not manage its access.
    api.client.post(f"/api/instances/{acme.editor_id}/access",
                    json={"userId": bob, "roles": ["graphicalEditor-user"]}, headers=carol_headers)
    bob_headers = signed_in("bob")
    assert api.client.get(f"/api/instances/{acme.editor_id}/access", headers=bob_headers).status_code == 403


# --- passwords and tokens ----------------------------------------------------------------------------


def test_reset_password_revokes_the_users_login_tokens(api, acme):
    bob = add_user(api, acme, "bob", ["user"])
    sessions = [signed_in("bob") for _ in range(2)]
    alice_before = api.client.get("/api/me", headers=acme.admin).status_code
    reset = api.client.post(f"/api/mandates/{acme.id}/users/{bob}/password", json={"password": "brand-new-pass"},
                            headers=acme.admin)
    assert reset.status_code == 204
    for headers in sessions:
        assert api.client.get("/api/me", headers=headers).status_code == 401
    assert api.client.post("/api/auth/login", json={"username": "bob", "password": PASSWORD}).status_code == 401
    assert api.client.get("/api/me", headers=bearer(api.login("bob", "brand-new-pass"))).status_code == 200
    # Other users' sessions are untouched.
    assert alice_before == api.client.get("/api/me", headers=acme.admin).status_code == 200


def test_personal_api_tokens_create_list_use_and_revoke(api, acme):
    tokens = "/api/me/tokens"
    created = api.client.post(tokens, json={"name": "ci"}, headers=acme.admin)
    assert created.status_code == 201
    body = created.json()
    assert set(body) == {"id", "name", "sysCreatedAt", "token", "instanceId", "readOnly"}
    assert body["token"].startswith("pon_")
    assert body["instanceId"] is None and body["readOnly"] is False
    assert api.client.post(tokens, json={"name": "ci"}, headers=acme.admin).status_code == 409
    assert api.client.post(tokens, json={"name": " "}, headers=acme.admin).status_code == 422

    listed = api.client.get(tokens, headers=acme.admin).json()
    assert [(t["id"], t["name"]) for t in listed] == [(body["id"], "ci")]
    assert all("token" not in t for t in listed)

    # It works as a bearer token and is stored only as a digest.
    assert api.client.get("/api/me", headers=bearer(body["token"])).json()["username"] == "alice"
    with session_scope() as session:
        row = session.get(AuthToken, body["id"])
        assert (row.kind, row.name, row.expires_at) == ("api", "ci", None)
        assert row.token_hash == token_digest(body["token"]) != body["token"]
        stored = [str(v) for t in session.exec(select(AuthToken)).all() for v in t.model_dump().values()]
        assert not any(body["token"] in v for v in stored)

    # Somebody else's token id is not found, and stays valid.
    bob = add_user(api, acme, "bob", ["user"])
    assert bob
    bob_headers = signed_in("bob")
    assert api.client.delete(f"{tokens}/{body['id']}", headers=bob_headers).status_code == 404
    assert api.client.delete(f"{tokens}/{'0' * 32}", headers=bob_headers).status_code == 404
    assert api.client.get(tokens, headers=bob_headers).json() == []
    assert api.client.get("/api/me", headers=bearer(body["token"])).status_code == 200
    # Neither is a login token id (only API tokens can be revoked here).
    with session_scope() as session:
        login_id = session.exec(select(AuthToken.id).where(AuthToken.kind == "login",
                                                           AuthToken.user_id == acme.admin_id)).first()
    assert api.client.delete(f"{tokens}/{login_id}", headers=acme.admin).status_code == 404

    assert api.client.delete(f"{tokens}/{body['id']}", headers=acme.admin).status_code == 204
    assert api.client.get("/api/me", headers=bearer(body["token"])).status_code == 401
    assert api.client.get(tokens, headers=acme.admin).json() == []
    assert api.client.delete(f"{tokens}/{body['id']}", headers=acme.admin).status_code == 404
    # A password reset ends login sessions, not personal API tokens.
    again = api.client.post(tokens, json={"name": "ci"}, headers=acme.admin).json()
    assert api.client.post(f"/api/mandates/{acme.id}/users/{acme.admin_id}/password",
                           json={"password": "another-pass-1"}, headers=api.auth).status_code == 204
    assert api.client.get("/api/me", headers=acme.admin).status_code == 401
    assert api.client.get("/api/me", headers=bearer(again["token"])).status_code == 200


# --- the permissions "why" view ----------------------------------------------------------------------


def test_permissions_view_names_the_deciding_role_level_and_rule_for_a_viewer(api, acme):
    vera = add_user(api, acme, "vera", ["viewer"])
    api.client.post(f"/api/instances/{acme.editor_id}/access",
                    json={"userId": vera, "roles": ["graphicalEditor-viewer"]}, headers=acme.admin)
    url = f"/api/mandates/{acme.id}/users/{vera}/permissions"

    in_instance = api.client.get(url, params={"instanceId": acme.editor_id}, headers=acme.admin)
    assert in_instance.status_code == 200
    why = {(d["context"], d["item"]): d for d in in_instance.json()}
    assert all(item.startswith(("ui.feature.graphicalEditor", "resource.feature.graphicalEditor",
                                "data.feature.graphicalEditor")) for _, item in why)

    def decided(context, item):
        d = why[(context, item)]
        return d["rights"], d["level"], [(r["role"], r["level"], r["item"]) for r in d["rules"]]

    viewer = [("graphicalEditor-viewer", "instance", "ui.feature.graphicalEditor.*")]
    assert decided("UI", "ui.feature.graphicalEditor.editor")[1:] == ("instance", viewer)
    assert decided("UI", "ui.feature.graphicalEditor.editor")[0]["view"] is True
    create = decided("UI", "ui.feature.graphicalEditor.workflows.create")
    assert create[0]["view"] is False
    assert create[2] == [("graphicalEditor-viewer", "instance", "ui.feature.graphicalEditor.workflows.create")]
    rights, level, rules = decided("DATA", "data.feature.graphicalEditor.workflow")
    assert (rights["read"], rights["create"], rights["update"], rights["delete"]) == ("all", "none", "none", "none")
    assert (level, rules) == ("instance", [("graphicalEditor-viewer", "instance", "data.feature.graphicalEditor.*")])
    publish = why[("RESOURCE", "resource.feature.graphicalEditor.publish")]
    assert publish["rights"]["view"] is False and publish["level"] is None and publish["rules"] == []
    assert "nothing is allowed" in publish["explanation"]

    # Without an instance: the platform's items and every feature's, decided by her mandate role.
    mandate_wide = {(d["context"], d["item"]): d for d in api.client.get(url, headers=acme.admin).json()}
    assert ("UI", "ui.admin") in mandate_wide and ("DATA", "data.feature.workspace.chat") in mandate_wide
    data = mandate_wide[("DATA", "data.feature.graphicalEditor.workflow")]
    assert (data["level"], data["rules"][0]["role"], data["rules"][0]["item"]) == ("mandate", "viewer", "*")
    assert mandate_wide[("UI", "ui.admin")]["rules"] == []

    # One item only, and the explanation in words.
    one = api.client.get(url, params={"instanceId": acme.editor_id, "context": "DATA",
                                      "item": "data.feature.graphicalEditor.workflow"}, headers=acme.admin).json()
    assert len(one) == 1 and "graphicalEditor-viewer" in one[0]["explanation"]

    # She may see her own, not others'; an instance of another mandate is not found.
    vera_headers = signed_in("vera")
    assert api.client.get(url, headers=vera_headers).status_code == 200
    assert api.client.get(f"/api/mandates/{acme.id}/users/{acme.admin_id}/permissions",
                          headers=vera_headers).status_code == 403
    default_editor = api.instance_id
    assert api.client.get(url, params={"instanceId": default_editor}, headers=acme.admin).status_code == 404


# --- the administration door -------------------------------------------------------------------------


def test_the_administration_door_declares_checks_in_the_called_mandate_and_answers_what_pages_show(api, acme):
    from backend.admin import MANAGE_ACCESS, Administration
    from backend.errors import Forbidden, NotFound
    from backend.rbac.access import AccessContext
    from backend.rbac.door import permissions_of
    from backend.rbac.templates import MANAGE_USERS

    assert [(p.kind, p.item) for p in permissions_of(Administration.list_members)] == [("RESOURCE", MANAGE_USERS)]
    assert [p.item for p in permissions_of(Administration.set_access)] == [MANAGE_ACCESS]
    vera = add_user(api, acme, "vera", ["viewer"])
    other = make_mandate(api, "Other", "olga")
    with session_scope() as session:
        alice = Administration(AccessContext(session, session.get(User, acme.admin_id)))
        viewer = Administration(AccessContext(session, session.get(User, vera)))
        assert alice.navigation_rights() and not viewer.navigation_rights()
        assert [m.id for m in alice.admin_mandates()] == [acme.id] and viewer.admin_mandates() == []
        tabs = alice.tabs(acme.id)
        assert (tabs.mandates, tabs.users, tabs.instances, tabs.permissions) == (False, True, True, True)
        with pytest.raises(Forbidden):
            viewer.tabs(acme.id)
        with pytest.raises(Forbidden):  # a visible mandate the viewer may not administer
            viewer.list_members(acme.id)
        with pytest.raises(NotFound):  # another mandate is not found, before any right is checked
            alice.list_members(other.id)
        with pytest.raises(NotFound):
            alice.list_access(other.editor_id)
        with pytest.raises(NotFound):  # an instance the viewer may not open
            viewer.list_access(acme.editor_id)
        assert isinstance(alice.list_access(acme.editor_id), list)  # manageInstances of the mandate
        # Anybody may read their own rights; another member's need viewPermissions.
        assert viewer.explain(acme.id, vera, context="UI", item="ui.admin")[0].allowed is False
        with pytest.raises(Forbidden):
            viewer.explain(acme.id, acme.admin_id)
