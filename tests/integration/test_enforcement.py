"""Enforcement, not declarations: every REST route and every Reflex event handler refuses a user
who lacks the right it declares, and writes nothing.

Generated from the app itself, so a new route or handler is covered without editing this file:

- REST: every operation of the OpenAPI document is called with tenant A's real ids (seeded by
  the tenant-isolation walk) as a user who lacks what its `x-permissions` declare:
  * DATA or RESOURCE → "bare", a member of A who may open every instance (UI `*`) but holds no
    RESOURCE and no DATA right anywhere: refused with 403 or 404;
  * UI → "outsider", a member of A without any role: refused with 403 or 404;
  * sysadmin → A's mandate administrator (not a system administrator): 403;
  * anything but public → no token: 401.
  Nothing in the database changes, and no GET answer of the bare user names A's data objects.
- UI: every event handler of every state class whose declaration (state.permissions) names a
  UI/RESOURCE/DATA/sysadmin right is driven on the real state class, its id vars set to A's
  objects as the page would hold them, as the user who lacks the right: nothing in the database
  changes and nothing of A's data reaches the state's vars.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlmodel import select

from backend.auth import issue_token
from backend.db import session_scope
from backend.db.models import AccessRule, FeatureAccess, FeatureAccessRole, Mandate, Role, User
from backend.features.registry import get_features
from backend.tenancy import grant_mandate_roles
from tests.integration.test_tenant_isolation import (
    Route,
    Tenant,
    build_tenant,
    changed_tables,
    id_for,
    reached_the_route,
    request_body,
    routes,
    snapshot,
)
from tests.unit.test_permission_declarations import _state_classes as app_state_classes

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
DATA_KINDS = ("DATA", "RESOURCE")
REFUSED = (403, 404)
# Tables a refused request may still touch: sign-in bookkeeping, not data.
BOOKKEEPING = {"auth_token", "login_failure"}


@dataclass
class Strangers:
    """Users of tenant A who lack rights, and their bearer headers."""

    bare: dict[str, str]
    outsider: dict[str, str]
    bare_token: str
    outsider_token: str
    admin_token: str
    viewer_token: str


def _member(session, mandate: Mandate, username: str) -> User:
    user = User(username=username, display_name=username)
    session.add(user)
    session.flush()
    grant_mandate_roles(session, user, mandate, [])
    return user


def _open_only_role(session, user: User, mandate_id: str, instance_id: str, code: str) -> None:
    """An instance role that opens the instance and shows its UI, with no RESOURCE or DATA right."""
    role = Role(role_label=f"open-only-{code}", mandate_id=mandate_id, feature_instance_id=instance_id,
                feature_code=code)
    session.add(role)
    session.flush()
    session.add(AccessRule(role_id=role.id, context="UI", item="*", view=True))
    access = FeatureAccess(user_id=user.id, feature_instance_id=instance_id)
    session.add(access)
    session.flush()
    session.add(FeatureAccessRole(feature_access_id=access.id, role_id=role.id))


def add_strangers(tenant: Tenant) -> Strangers:
    with session_scope() as session:
        mandate = session.get(Mandate, tenant.mandate_id)
        bare = _member(session, mandate, "bare-A")
        outsider = _member(session, mandate, "outsider-A")
        for code, instance_id in tenant.instances.items():
            _open_only_role(session, bare, mandate.id, instance_id, code)
        tokens = {name: issue_token(session, user).token for name, user in (("bare", bare), ("outsider", outsider))}
        admin = session.get(User, tenant.admin_id)
        viewer = session.get(User, tenant.viewer_id)
        admin_token, viewer_token = issue_token(session, admin).token, issue_token(session, viewer).token
    return Strangers(bare={"Authorization": f"Bearer {tokens['bare']}"},
                     outsider={"Authorization": f"Bearer {tokens['outsider']}"},
                     bare_token=tokens["bare"], outsider_token=tokens["outsider"],
                     admin_token=admin_token, viewer_token=viewer_token)


def declared(route: Route) -> list[dict]:
    return route.operation.get("x-permissions") or [route.permission]


def data_ids(tenant: Tenant) -> set[str]:
    """Ids of A's data objects (not the mandate, users or instances a member may know of)."""
    return {tenant.workflow_id, tenant.archived_version_id, tenant.published_version_id, tenant.run_id,
            tenant.task_id, tenant.file_id, *tenant.chat_ids.values(), *tenant.agent_run_ids.values(),
            tenant.notification_id, tenant.token_id, tenant.connection_id}


def data_texts(tenant: Tenant) -> set[str]:
    """Texts only A's data holds (names, titles, contents) that a page might show."""
    name = tenant.name
    return {f"Workflow of {name}", f"Approve for {name}", f"Notes of tenant {name}", f"Chat of {name}",
            f"Question of {name}", f"Answer of {name}", f"Error of {name}", f"token of {name}",
            f"password of {name}"}


# --- REST ---------------------------------------------------------------------------------------------


@dataclass
class Walk:
    client: Any
    a: Tenant
    strangers: Strangers
    routes: list[Route]

    def call(self, route: Route, headers: dict | None, body: Any = None):
        values = {n: id_for(n, self.a, route.path) for n in route.path_names}
        query = {n: id_for(n, self.a, route.path) for n in route.id_queries}
        kwargs: dict[str, Any] = {"headers": headers or {}, "params": query}
        if body is not None:
            kwargs["json"] = body
        return self.client.request(route.method.upper(), route.url(values), **kwargs)


@pytest.fixture
def walk(api) -> Iterator[Walk]:
    doc = api.client.get("/api/openapi.json").json()
    a = build_tenant("A")
    build_tenant("B")
    yield Walk(api.client, a, add_strangers(a), routes(doc))


def _refusals(walk: Walk, targets: list[Route], headers: dict, expected: tuple[int, ...]) -> list[str]:
    wrong = []
    for route in targets:
        response = walk.call(route, headers, request_body(route, walk.a))
        if not reached_the_route(response):
            wrong.append(f"{route}: the walk's body was refused by validation ({response.text[:200]}); teach "
                         "tests/integration/test_tenant_isolation.py EXAMPLES a value")
        elif response.status_code == 200 and route.method == "get" and "instanceId" not in route.path_names:
            continue  # a list across instances refuses row by row: the leak test checks it shows nothing
        elif response.status_code not in expected:
            wrong.append(f"{route} {declared(route)}: {response.status_code} {response.text[:200]}")
    return wrong


@SQLITE
def test_a_user_without_the_data_or_resource_right_is_refused_by_every_route(walk):
    targets = [r for r in walk.routes if any(p.get("kind") in DATA_KINDS for p in declared(r))]
    assert len(targets) >= 30
    before = snapshot()
    wrong = _refusals(walk, targets, walk.strangers.bare, REFUSED)
    assert not wrong, ("a user who may open the instances but holds no RESOURCE or DATA right was not "
                       "refused:\n" + "\n".join(wrong))
    assert [t for t in changed_tables(before, snapshot()) if t not in BOOKKEEPING] == []


@SQLITE
def test_a_user_without_the_ui_right_is_refused_by_every_route_declaring_one(walk):
    targets = [r for r in walk.routes if any(p.get("kind") == "UI" for p in declared(r))]
    before = snapshot()
    wrong = _refusals(walk, targets, walk.strangers.outsider, REFUSED)
    assert not wrong, "a member without any role was not refused:\n" + "\n".join(wrong)
    assert [t for t in changed_tables(before, snapshot()) if t not in BOOKKEEPING] == []


@SQLITE
def test_a_mandate_admin_is_refused_every_sysadmin_route(walk):
    targets = [r for r in walk.routes if any(p.get("kind") == "sysadmin" for p in declared(r))]
    assert targets, "no route declares sysadmin (POST /api/mandates should)"
    before = snapshot()
    wrong = _refusals(walk, targets, walk.a.admin, (403,))
    assert not wrong, "a mandate administrator reached a system administrator's route:\n" + "\n".join(wrong)
    assert [t for t in changed_tables(before, snapshot()) if t not in BOOKKEEPING] == []


@SQLITE
def test_every_route_but_the_public_ones_wants_a_token(walk):
    before = snapshot()
    wrong = []
    for route in walk.routes:
        response = walk.call(route, None, request_body(route, walk.a))
        if response.status_code != 401:
            wrong.append(f"{route}: {response.status_code} {response.text[:150]}")
    assert not wrong, "answered without a bearer token:\n" + "\n".join(wrong)
    assert [t for t in changed_tables(before, snapshot()) if t not in BOOKKEEPING] == []


@SQLITE
def test_no_get_answer_of_a_user_without_rights_names_the_mandates_data(walk):
    hidden = data_ids(walk.a) | data_texts(walk.a)
    wrong = []
    for route in (r for r in walk.routes if r.method == "get"):
        for who, headers in (("bare", walk.strangers.bare), ("outsider", walk.strangers.outsider)):
            text = walk.call(route, headers).text
            leaked = sorted(h for h in hidden if h in text and h not in route.url(
                {n: id_for(n, walk.a, route.path) for n in route.path_names}))
            if leaked:
                wrong.append(f"{route} as {who}: shows {leaked}")
    assert not wrong, "\n".join(wrong)


# --- Reflex event handlers ----------------------------------------------------------------------------


def _state_classes() -> list[type]:
    """The app's state classes that can be instantiated (mixins are not)."""
    return [c for c in app_state_classes() if not c._mixin]


def _declaration(handler) -> dict:
    from state.permissions import ATTRIBUTE

    return getattr(handler.fn, ATTRIBUTE, None) or {}


def _kinds(declaration: dict) -> set[str]:
    return {p.get("kind") for p in declaration.get("all") or [declaration]}


def _ids_by_name(tenant: Tenant) -> dict[str, str]:
    """State vars and handler arguments that hold an id, by a name fragment → A's object."""
    return {
        "workflow": tenant.workflow_id, "version": tenant.archived_version_id, "run": tenant.run_id,
        "task": tenant.task_id, "file": tenant.file_id, "chat": tenant.chat_ids["workspace"],
        "token": tenant.token_id, "notification": tenant.notification_id, "mandate": tenant.mandate_id,
        "user": tenant.admin_id, "instance": tenant.instances["graphicalEditor"],
        "connection": tenant.connection_id,
    }


def _id_for_name(name: str, tenant: Tenant, state_cls: type) -> str | None:
    lowered = name.lower()
    if not (lowered.endswith("_id") or lowered.endswith("id") or lowered == "key"):
        return None
    ids = _ids_by_name(tenant)
    if "instance" in lowered and "workspace" in state_cls.__module__:
        return tenant.instances["workspace"]
    if "instance" in lowered and state_cls.__module__ == "state.coach":  # the Coach page: A's CommCoach
        return tenant.instances["commcoach"]
    if "chat" in lowered and state_cls.__module__ == "state.coach":
        return tenant.chat_ids["commcoach"]
    for fragment, value in ids.items():
        if fragment in lowered:
            return value
    return ids["workflow"] if lowered == "key" else None


def _argument(name: str, annotation: Any, tenant: Tenant, state_cls: type) -> Any:
    """A plausible argument for a handler parameter: ids by name, else a value of its type."""
    found = _id_for_name(name, tenant, state_cls)
    if found is not None:
        return found
    text = str(annotation).lower()
    if "list" in text:
        return []
    if "dict" in text:
        return {"name": "walk", "id": tenant.workflow_id}
    if "bool" in text:
        return True
    if "int" in text or "float" in text:
        return 1
    return "walk"


def _arguments(fn, tenant: Tenant, state_cls: type) -> list[Any]:
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - a forward reference the test cannot resolve: fall back to text
        hints = {}
    parameters = list(inspect.signature(fn).parameters.values())[1:]
    return [_argument(p.name, hints.get(p.name, p.annotation), tenant, state_cls)
            for p in parameters if p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _point_at_tenant(state: Any, tenant: Tenant) -> None:
    """Set the state's own id-like string vars to A's objects, as a page showing them would."""
    for name in _own_fields(type(state)):
        value = _id_for_name(name, tenant, type(state))
        if value is not None and isinstance(getattr(state, name, None), str):
            setattr(state, name, value)


def _drive(result: Any) -> None:
    """Run what a handler returned to the end: a coroutine, a generator or an async generator."""
    async def exhaust(value: Any) -> None:
        if inspect.iscoroutine(value):
            value = await value
        if inspect.isasyncgen(value):
            async for _ in value:
                pass
        elif inspect.isgenerator(value):
            for _ in value:
                pass

    outcome: dict[str, BaseException] = {}

    def run() -> None:  # its own thread: pytest-playwright or another loop may own this one
        try:
            asyncio.run(exhaust(result))
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    if "error" in outcome:
        raise outcome["error"]


def _own_fields(cls: type) -> list[str]:
    """The page's own vars (frontend and backend), not those of AuthState or Reflex's root."""
    import reflex as rx

    from state.auth import AuthState

    return sorted(set(cls.__fields__) - set(AuthState.__fields__) - set(rx.State.__fields__))


def _shown(state: Any) -> str:
    return repr({name: getattr(state, name, None) for name in _own_fields(type(state))})


@dataclass
class Ui:
    a: Tenant
    strangers: Strangers
    root: Any

    def state_of(self, cls: type) -> Any:
        def walk(node: Any) -> Iterator[Any]:
            yield node
            for sub in node.substates.values():
                yield from walk(sub)

        return next(s for s in walk(self.root) if type(s) is cls)


@pytest.fixture
def ui(app_config, monkeypatch) -> Iterator[Ui]:
    import reflex as rx

    monkeypatch.setenv("PYTEST_CURRENT_TEST", "enforcement")  # Reflex lets tests build states directly
    _state_classes()
    a = build_tenant("A")
    build_tenant("B")
    yield Ui(a, add_strangers(a), rx.State(_reflex_internal_init=True))


def _stranger_token(ui: Ui, kinds: set[str]) -> str:
    if "sysadmin" in kinds:
        return ui.strangers.admin_token
    if kinds & {"DATA", "RESOURCE"}:
        return ui.strangers.bare_token
    return ui.strangers.outsider_token


GUARDED = ("UI", "DATA", "RESOURCE", "sysadmin")


@SQLITE
def test_every_guarded_event_handler_refuses_a_user_without_the_right(ui):
    import reflex as rx

    built_in = set(rx.State.event_handlers)
    hidden = data_texts(ui.a)
    checked, wrong = 0, []
    for cls in sorted(_state_classes(), key=lambda c: (c.__module__, c.__name__)):
        for name, handler in sorted(cls.event_handlers.items()):
            kinds = _kinds(_declaration(handler))
            if name in built_in or not kinds & set(GUARDED):
                continue
            state = ui.state_of(cls)
            state.token = _stranger_token(ui, kinds)
            _point_at_tenant(state, ui.a)
            before = snapshot()
            where = f"{cls.__module__}.{cls.__name__}.{name} {sorted(kinds)}"
            try:
                _drive(handler.fn(state, *_arguments(handler.fn, ui.a, cls)))
            except Exception as exc:  # noqa: BLE001 - a refusal may surface as the door's error
                from backend.errors import DomainError

                if not isinstance(exc, DomainError):
                    wrong.append(f"{where}: raised {type(exc).__name__}: {exc}"[:300])
            checked += 1
            changed = [t for t in changed_tables(before, snapshot()) if t not in BOOKKEEPING]
            if changed:
                wrong.append(f"{where}: changed {changed} for a user without the right")
            leaked = sorted(h for h in hidden if h in _shown(state))
            if leaked:
                wrong.append(f"{where}: shows {leaked} to a user without the right")
    assert not wrong, "\n".join(wrong)
    assert checked >= 50


def test_every_feature_is_seeded_for_the_walks():
    assert {"graphicalEditor", "workspace"} <= set(get_features())


def test_the_open_only_role_gives_no_data_right(app_config):
    from backend.rbac.access import AccessContext

    a = build_tenant("A")
    add_strangers(a)
    with session_scope() as session:
        bare = session.exec(select(User).where(User.username == "bare-A")).one()
        access = AccessContext(session, bare)
        instance = access.require_instance(a.instances["graphicalEditor"])
        assert access.can_open_instance(instance)
        for table in get_features()["graphicalEditor"].data_tables:
            item = get_features()["graphicalEditor"].data_item(table)
            assert str(access.data_level(item, "read", instance.mandate_id, instance.id)) == "none"


@SQLITE
def test_the_harness_reaches_the_backend_when_the_user_holds_the_right(ui):
    """Control: the same generated calls made as A's admin do change data, so the refusals above
    come from the checks and not from calls that never reach the backend."""
    import reflex as rx

    built_in = set(rx.State.event_handlers)
    changed_by = []
    for cls in sorted(_state_classes(), key=lambda c: (c.__module__, c.__name__)):
        for name, handler in sorted(cls.event_handlers.items()):
            kinds = _kinds(_declaration(handler))
            if name in built_in or not kinds & {"DATA", "RESOURCE"} or name.startswith("delete"):
                continue
            state = ui.state_of(cls)
            state.token = ui.strangers.admin_token
            _point_at_tenant(state, ui.a)
            before = snapshot()
            try:
                _drive(handler.fn(state, *_arguments(handler.fn, ui.a, cls)))
            except Exception:  # noqa: BLE001, S112 - only whether data changed matters here
                continue
            if [t for t in changed_tables(before, snapshot()) if t not in BOOKKEEPING]:
                changed_by.append(f"{cls.__name__}.{name}")
    assert len(changed_by) >= 5, changed_by
