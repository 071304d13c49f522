"""Which feature instance a page opens, and remembering the one a user chose (backend.instance_choice).

A new session opens the instance the user used last, else the first of the Default mandate —
never one an administrator just created because its name sorts first. Choosing an instance
writes the signed-in user's own row only; an instance they may not open is refused like an id
that does not exist, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlmodel import Session, select

from backend.bootstrap import DEFAULT_INSTANCES, DEFAULT_MANDATE
from backend.db import session_scope
from backend.db.models import FeatureInstance, Mandate, User
from backend.errors import NotFound
from backend.instance_choice import InstanceChoice, choose_instance
from backend.rbac.access import AccessContext
from backend.tenancy import create_feature_instance, create_mandate, grant_instance_roles, grant_mandate_roles
from tests.integration.test_tenant_isolation import changed_tables, snapshot

GE, WS = "graphicalEditor", "workspace"


@contextmanager
def signed_in(username: str) -> Iterator[AccessContext]:
    """A fresh request of `username`: a new transaction and AccessContext (nothing cached)."""
    with session_scope() as session:
        yield AccessContext(session, session.exec(select(User).where(User.username == username)).one())


def current(username: str, feature: str = GE, chosen_id: str = "") -> tuple[str | None, list[tuple[str, str]]]:
    """(id of the instance a page opens for `username`, [(mandate, label) of every option])."""
    with signed_in(username) as access:
        found = InstanceChoice(access).current(feature, chosen_id)
        return (found.chosen.id if found.chosen else None,
                [(o.mandate_name, o.label) for o in found.options])


def default_instance(feature: str = GE) -> str:
    """The bootstrap's instance of `feature` in the Default mandate."""
    label = dict(DEFAULT_INSTANCES)[feature]
    with session_scope() as session:
        mandate = session.exec(select(Mandate).where(Mandate.name == DEFAULT_MANDATE)).one()
        return session.exec(select(FeatureInstance.id).where(FeatureInstance.mandate_id == mandate.id,
                                                             FeatureInstance.feature_code == feature,
                                                             FeatureInstance.label == label)).one()


def recent_of(username: str) -> dict | None:
    with session_scope() as session:
        return session.exec(select(User).where(User.username == username)).one().recent_instances


def add_user(session: Session, username: str, mandates: dict[str, list[str]],
             instances: list[tuple[FeatureInstance, str]]) -> User:
    """A user in `mandates` ({mandate name: mandate roles}) with instance roles."""
    user = User(username=username, display_name=username)
    session.add(user)
    session.flush()
    for name, roles in mandates.items():
        grant_mandate_roles(session, user, session.exec(select(Mandate).where(Mandate.name == name)).one(), roles)
    for instance, role in instances:
        grant_instance_roles(session, user, instance, [role])
    return user


def new_instance(session: Session, mandate_name: str, feature: str, label: str) -> FeatureInstance:
    mandate = (session.exec(select(Mandate).where(Mandate.name == mandate_name)).first()
               or create_mandate(session, mandate_name))
    return create_feature_instance(session, mandate, feature, label)


def test_a_new_session_opens_the_default_mandates_instance_not_one_an_admin_just_created(api):
    """The admin creates a mandate whose name sorts first, with its own instances, and a second
    editor in Default whose label sorts first: their next session still opens Default's first."""
    mandate = api.client.post("/api/mandates", headers=api.auth, json={"name": "Aardvark AG"})
    assert mandate.status_code == 201, mandate.text
    for feature, label in ((GE, "Aardvark Flows"), (WS, "Aardvark Chats")):
        created = api.client.post(f"/api/mandates/{mandate.json()['id']}/instances", headers=api.auth,
                                  json={"featureCode": feature, "label": label})
        assert created.status_code == 201, created.text
    default_id = next(m["id"] for m in api.client.get("/api/mandates", headers=api.auth).json()
                      if m["name"] == DEFAULT_MANDATE)
    created = api.client.post(f"/api/mandates/{default_id}/instances", headers=api.auth,
                              json={"featureCode": GE, "label": "Accounting"})
    assert created.status_code == 201, created.text

    api.login("admin", "admin-pass-123")  # a new session: no page choice, nothing remembered yet
    chosen, options = current("admin")
    assert chosen == default_instance(GE)
    assert options == [("Aardvark AG", "Aardvark Flows"), (DEFAULT_MANDATE, "Accounting"),
                       (DEFAULT_MANDATE, "Graphical Editor")]
    assert current("admin", WS)[0] == default_instance(WS)
    assert recent_of("admin") is None  # looking wrote nothing


def test_the_chosen_instance_is_remembered_per_user_and_feature(app_config):
    with session_scope() as session:
        other = new_instance(session, "Beta GmbH", GE, "Beta Flows").id
    with signed_in("admin") as access:
        remembered = choose_instance(access, other, GE)
        assert (remembered.mandate_name, remembered.label) == ("Beta GmbH", "Beta Flows")

    assert recent_of("admin") == {GE: other}
    assert current("admin")[0] == other  # the next session opens it again
    assert current("admin", WS)[0] == default_instance(WS)  # the Workspace keeps its own
    # A page's own choice comes first while the user may open it; an unknown one is ignored.
    assert current("admin", chosen_id=default_instance(GE))[0] == default_instance(GE)
    assert current("admin", chosen_id="0" * 32)[0] == other
    assert current("admin", chosen_id=default_instance(WS))[0] == other  # another feature's id

    with signed_in("admin") as access:
        choose_instance(access, default_instance(WS), WS)
    assert recent_of("admin") == {GE: other, WS: default_instance(WS)}


def test_a_remembered_instance_the_user_may_no_longer_open_is_passed_over(api):
    with session_scope() as session:
        beta = new_instance(session, "Beta GmbH", GE, "Beta Flows")
        default = session.get(FeatureInstance, default_instance(GE))
        mia = add_user(session, "mia", {DEFAULT_MANDATE: ["user"], "Beta GmbH": ["user"]},
                       [(default, f"{GE}-user"), (beta, f"{GE}-user")])
        beta_id, mia_id = beta.id, mia.id
    with signed_in("mia") as access:
        choose_instance(access, beta_id, GE)
    assert current("mia")[0] == beta_id

    revoked = api.client.delete(f"/api/instances/{beta_id}/access/{mia_id}", headers=api.auth)
    assert revoked.status_code == 204, revoked.text
    chosen, options = current("mia")
    assert chosen == default_instance(GE) and options == [(DEFAULT_MANDATE, "Graphical Editor")]


def test_an_instance_the_user_may_not_open_is_refused_like_a_missing_one_and_nothing_is_written(app_config):
    with session_scope() as session:
        foreign = new_instance(session, "Beta GmbH", GE, "Beta Flows").id
        default = session.get(FeatureInstance, default_instance(GE))
        no_role = new_instance(session, DEFAULT_MANDATE, GE, "Locked Flows").id  # mia holds no role here
        add_user(session, "mia", {DEFAULT_MANDATE: ["user"]}, [(default, f"{GE}-user")])
    before = snapshot()
    for instance_id, feature in ((foreign, GE), (no_role, GE), ("0" * 32, GE), (default_instance(WS), GE),
                                 (default_instance(GE), WS)):
        with pytest.raises(NotFound, match=f"feature instance {instance_id} not found"):
            with signed_in("mia") as access:
                choose_instance(access, instance_id, feature)
    assert changed_tables(before, snapshot()) == []
    assert recent_of("mia") is None
    assert current("mia") == (default_instance(GE), [(DEFAULT_MANDATE, "Graphical Editor")])


def test_choosing_writes_the_signed_in_users_own_row_only(app_config):
    with session_scope() as session:
        default = session.get(FeatureInstance, default_instance(GE))
        add_user(session, "mia", {DEFAULT_MANDATE: ["user"]}, [(default, f"{GE}-user")])
        add_user(session, "noah", {DEFAULT_MANDATE: ["user"]}, [(default, f"{GE}-user")])
    with signed_in("admin") as access:
        choose_instance(access, default.id, GE)
    before = snapshot()
    with signed_in("mia") as access:
        choose_instance(access, default.id, GE)
    assert changed_tables(before, snapshot()) == ["user_account"]
    assert (recent_of("mia"), recent_of("noah"), recent_of("admin")) == ({GE: default.id}, None, {GE: default.id})
    before = snapshot()
    with signed_in("mia") as access:  # the same choice again writes nothing
        choose_instance(access, default.id, GE)
    assert changed_tables(before, snapshot()) == []


def test_outside_the_default_mandate_the_first_by_mandate_name_then_label_opens(app_config):
    """Not whichever sorts first over all mandates ("Alpha Flows"), nor the oldest: mandate name,
    then label."""
    with session_scope() as session:
        first_created = new_instance(session, "Beta GmbH", GE, "Alpha Flows")
        zeta = new_instance(session, "Alpha AG", GE, "Zeta")
        omega = new_instance(session, "Alpha AG", GE, "Omega")
        add_user(session, "zed", {"Alpha AG": ["user"], "Beta GmbH": ["user"]},
                 [(first_created, f"{GE}-viewer"), (zeta, f"{GE}-viewer"), (omega, f"{GE}-viewer")])
        omega_id = omega.id
    chosen, options = current("zed")
    assert chosen == omega_id
    assert options == [("Alpha AG", "Omega"), ("Alpha AG", "Zeta"), ("Beta GmbH", "Alpha Flows")]


def test_a_user_without_any_instance_gets_none_and_cannot_choose_one(app_config):
    with session_scope() as session:
        add_user(session, "nora", {DEFAULT_MANDATE: []}, [])
    assert current("nora") == (None, [])
    assert current("nora", WS) == (None, [])
    with pytest.raises(NotFound):
        with signed_in("nora") as access:
            choose_instance(access, default_instance(GE), GE)
    assert recent_of("nora") is None


def test_the_editor_entry_opens_the_newest_workflow_of_the_current_instance(app_config):
    from backend.features.graphical_editor.interface import GraphicalEditorInterface, last_changed_workflow

    with session_scope() as session:
        other = new_instance(session, "Gamma AG", GE, "Gamma Flows")
        admin = session.exec(select(User).where(User.username == "admin")).one()
        access = AccessContext(session, admin)
        in_default = GraphicalEditorInterface(access, session.get(FeatureInstance, default_instance(GE))
                                              ).create_workflow("Default's")
        newest_elsewhere = GraphicalEditorInterface(access, other).create_workflow("Gamma's")
        in_default_id, elsewhere_id = in_default.id, newest_elsewhere.id
    with signed_in("admin") as access:  # the header names Default's editor: its newest, not Gamma's
        assert last_changed_workflow(access.user, access.session).id == in_default_id
    with signed_in("admin") as access:
        choose_instance(access, other.id, GE)
    with signed_in("admin") as access:
        assert last_changed_workflow(access.user, access.session).id == elsewhere_id
