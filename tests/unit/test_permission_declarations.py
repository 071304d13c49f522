"""Meta-tests: every REST route and every UI event handler declares the permission it relies on,
and a feature folder dropped under backend/features/ is discovered, given roles and routed.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import shutil
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI, routing
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlmodel import Session, select

import backend.features
from backend.api.app import create_api
from backend.api.permissions import KINDS
from backend.rbac.rights import OPERATIONS


def api_routes(app: FastAPI) -> list[tuple[str, APIRoute]]:
    """(full path, route) of every API route, including those of included routers."""
    iterate = getattr(routing, "iter_route_contexts", None)
    if iterate is None:  # FastAPI versions that copy included routes into app.routes
        return [(r.path, r) for r in app.routes if isinstance(r, APIRoute)]
    return [(c.path, c.original_route) for c in iterate(app.routes) if isinstance(c.original_route, APIRoute)]


def test_every_route_declares_a_valid_permission():
    problems = []
    routes = api_routes(create_api())
    for path, route in routes:
        where = f"{','.join(sorted(route.methods))} {path}"
        declared = (route.openapi_extra or {}).get("x-permission")
        if not isinstance(declared, dict):
            problems.append(f"{where}: no x-permission (use **permission(...) from backend.api.permissions)")
            continue
        kind = declared.get("kind")
        if kind not in KINDS:
            problems.append(f"{where}: kind {kind!r} is not one of {KINDS}")
        if kind in ("UI", "RESOURCE", "DATA") and not declared.get("item"):
            problems.append(f"{where}: a {kind} permission must name its item")
        if kind == "DATA" and declared.get("operation") not in OPERATIONS:
            problems.append(f"{where}: a DATA permission must name its operation, one of {OPERATIONS}")
    assert not problems, "\n".join(problems)
    assert len(routes) >= 20
    # The declaration reaches the OpenAPI document, where the isolation walk reads it.
    document = create_api().openapi()
    operations = [op for ops in document["paths"].values() for op in ops.values()]
    assert all("x-permission" in op for op in operations)


# --- UI event handlers -------------------------------------------------------------------------------


def _state_classes() -> list[type]:
    import reflex as rx

    import state

    for info in pkgutil.walk_packages(state.__path__, "state."):
        importlib.import_module(info.name)

    def subclasses(cls: type) -> Iterator[type]:
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    return [c for c in set(subclasses(rx.State)) if c.__module__.split(".")[0] == "state"]


def test_every_event_handler_of_the_app_states_declares_its_permission():
    import reflex as rx

    from state.permissions import ATTRIBUTE

    built_in = set(rx.State.event_handlers)  # Reflex's own (setvar, hydrate, …)
    allowed = (*KINDS, "ui")
    classes = _state_classes()
    assert {c.__name__ for c in classes} >= {"AuthState", "WorkflowsState"}
    problems, checked = [], 0
    for cls in sorted(classes, key=lambda c: (c.__module__, c.__name__)):
        for name, handler in cls.event_handlers.items():
            if name in built_in:
                continue
            checked += 1
            declared = getattr(handler.fn, ATTRIBUTE, None)
            where = f"{cls.__module__}.{cls.__name__}.{name}"
            if declared is None:
                problems.append(f"{where}: no @requires(...) from state.permissions (put it below @rx.event)")
            elif declared.get("kind") not in allowed:
                problems.append(f"{where}: kind {declared.get('kind')!r} is not one of {allowed}")
            elif declared["kind"] in ("UI", "RESOURCE", "DATA") and not declared.get("item"):
                problems.append(f"{where}: a {declared['kind']} permission must name its item")
    assert not problems, "\n".join(problems)
    assert checked >= 10


# --- the items: in the catalogue, spelled once, never in state/ ------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _catalogue() -> set[tuple[str, str]]:
    from backend.actions.registry import get_registry
    from backend.admin import catalogue_items

    actions = {("RESOURCE", a.resource_item) for a in get_registry().actions.values()}
    return set(catalogue_items()) | actions


def _door_classes() -> list[type]:
    from backend.rbac.door import Door

    for package in ("backend.features", "backend.files", "backend.agent", "backend.engine", "backend.monitoring",
                    "backend.notifications"):
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, f"{package}."):
            if ".zz_throwaway_" not in info.name and not info.name.endswith(".migrations"):
                importlib.import_module(info.name)
    importlib.import_module("backend.admin")

    def subclasses(cls: type) -> Iterator[type]:
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    return list(set(subclasses(Door)))


def _declared_items() -> list[tuple[str, str, str]]:
    """(where, context, item) of every permission declared by a route, a UI handler or a door method."""
    import reflex as rx

    from backend.rbac.door import declared_methods
    from state.permissions import ATTRIBUTE

    found = []
    for path, route in api_routes(create_api()):
        for declared in (route.openapi_extra or {}).get("x-permissions", []):
            found.append((f"{path}", declared["kind"], declared.get("item")))
    built_in = set(rx.State.event_handlers)
    for cls in _state_classes():
        for name, handler in cls.event_handlers.items():
            declared = getattr(handler.fn, ATTRIBUTE, None) or {}
            for one in declared.get("all") or [declared] if name not in built_in else []:
                found.append((f"{cls.__name__}.{name}", one.get("kind"), one.get("item")))
    for cls in _door_classes():
        for name, permissions in declared_methods(cls).items():
            found += [(f"{cls.__name__}.{name}", p.kind, p.item) for p in permissions]
    return [(w, k, i) for w, k, i in found if k in ("UI", "RESOURCE", "DATA")]


def _known(context: str, item: str, catalogue: set[tuple[str, str]]) -> bool:
    if (context, item) in catalogue:
        return True
    pattern = re.escape(item).replace(r"\*", ".*")
    pattern = re.sub(r"\\\{[^}]*\\\}", "[^.]+", pattern)
    return any(c == context and re.fullmatch(pattern, known) for c, known in catalogue)


def test_every_declared_item_is_in_the_catalogue():
    catalogue = _catalogue()
    declared = _declared_items()
    assert len(declared) >= 40
    unknown = sorted({f"{where}: {context} {item}" for where, context, item in declared
                      if not _known(context, item, catalogue)})
    assert not unknown, "declared items the catalogue does not have:\n" + "\n".join(unknown)


def _python_files(*folders: str) -> list[Path]:
    return [p for folder in folders for p in (ROOT / folder).rglob("*.py") if "migrations" not in p.parts]


def test_each_permission_item_is_spelled_once_in_backend_and_never_in_the_ui_code():
    from backend.admin import catalogue_items

    items = sorted({item for _, item in catalogue_items()})
    backend_text = {p: p.read_text() for p in _python_files("backend")}
    ui_text = {p: p.read_text() for p in _python_files("state", "components", "poweron_app")}
    wrong = []
    for item in items:
        literal = re.compile(rf"[\"']{re.escape(item)}[\"']")
        places = [f"{p.relative_to(ROOT)}" for p, text in backend_text.items() for _ in literal.finditer(text)]
        if len(places) != 1:
            wrong.append(f"{item}: spelled {len(places)} times in backend/ ({', '.join(places) or 'never'})")
        places = [f"{p.relative_to(ROOT)}" for p, text in ui_text.items() if literal.search(text)]
        if places:
            wrong.append(f"{item}: spelled in the UI code ({', '.join(places)}); read it from the door")
    assert not wrong, "\n".join(wrong)


def test_state_holds_no_sql_and_no_rbac_logic():
    wrong = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in _python_files("state")
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if "select(" in line or "Level." in line]
    assert not wrong, "state/ must call a door instead:\n" + "\n".join(wrong)


def test_a_feature_item_is_declared_in_pattern_form_and_checked_for_the_doors_feature():
    from types import SimpleNamespace

    from backend.rbac.door import Door, FeatureItem, guarded, permissions_of

    item = FeatureItem.data("file")
    assert item == "data.feature.{featureCode}.file" and isinstance(item, str)
    assert item.of("workspace") == "data.feature.workspace.file"
    assert FeatureItem.resource("useAgent").of("graphicalEditor") == "resource.feature.graphicalEditor.useAgent"
    checked = []

    class Store(Door):
        def __init__(self, code: str | None):
            self.instance = SimpleNamespace(id="i1", mandate_id="m1", feature_code=code) if code else None
            self.access = SimpleNamespace(resolve=lambda context, item, mandate, instance: checked.append(
                (context, item, mandate, instance)) or SimpleNamespace(allowed=True))

        @guarded("RESOURCE", FeatureItem.resource("useAgent"))
        def run(self) -> str:
            return "ran"

    assert permissions_of(Store.run)[0].as_dict() == {"kind": "RESOURCE",
                                                       "item": "resource.feature.{featureCode}.useAgent"}
    assert Store("workspace").run() == "ran" and Store("workspace").may_call(Store.run)
    assert checked[0] == ("RESOURCE", "resource.feature.workspace.useAgent", "m1", "i1")
    with pytest.raises(ValueError, match="no feature_code"):
        Store(None).run()


# --- a throw-away feature folder ---------------------------------------------------------------------

MAIN = '''
"""A feature that exists only while a test runs."""

import sys

from backend.features.registry import FeatureCatalog, FeatureDefinition, definition_from_module
from backend.rbac.templates import standard_feature_roles

FEATURE_CODE = "{code}"
LABEL = "Throw-away"
ICON = "trash"
UI_OBJECTS = (("ui.feature.{code}", "Open it"),)
RESOURCE_OBJECTS = (("resource.feature.{code}.manageAccess", "Grant access"),)
DATA_TABLES = ("thing",)
TEMPLATE_ROLES = standard_feature_roles(FEATURE_CODE)
REQUIRED_SERVICES = ()


def get_feature_definition() -> FeatureDefinition:
    return definition_from_module(sys.modules[__name__])


def register_feature(catalog: FeatureCatalog) -> None:
    catalog.register(get_feature_definition())
'''

ROUTES = '''
from fastapi import APIRouter

from backend.api.permissions import permission

router = APIRouter()


@router.get("/ping", **permission("public"))
def ping() -> dict:
    return {{"pong": "{code}"}}
'''


@pytest.fixture
def throwaway_feature() -> Iterator[tuple[str, str]]:
    """A feature package under backend/features/, removed (with its modules) afterwards."""
    from backend.features.registry import reset_feature_cache

    suffix = uuid.uuid4().hex[:8]
    package = f"zz_throwaway_{suffix}"
    code = f"zzThrowaway{suffix}"
    folder = Path(backend.features.__file__).parent / package
    try:
        folder.mkdir()
        (folder / "__init__.py").write_text('"""Throw-away test feature."""\n')
        (folder / "main.py").write_text(textwrap.dedent(MAIN).format(code=code))
        (folder / "routes.py").write_text(textwrap.dedent(ROUTES).format(code=code))
        importlib.invalidate_caches()
        reset_feature_cache()
        yield package, code
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        for name in [m for m in sys.modules if m.startswith(f"backend.features.{package}")]:
            del sys.modules[name]
        importlib.invalidate_caches()
        reset_feature_cache()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_new_feature_folder_is_discovered_given_template_roles_and_routed(throwaway_feature, engine):
    from backend.bootstrap import sync_catalog
    from backend.db.models import AccessRule, Feature, Role
    from backend.features.registry import get_features

    package, code = throwaway_feature
    features = get_features()
    assert code in features and {"graphicalEditor", "workspace"} <= set(features)
    feature = features[code]
    assert (feature.label, feature.icon, feature.package) == ("Throw-away", "trash", f"backend.features.{package}")
    assert feature.data_objects == ((f"data.feature.{code}.thing", "table thing"),)

    with Session(engine) as session:
        sync_catalog(session)
        assert session.get(Feature, code).label == "Throw-away"
        templates = session.exec(select(Role).where(Role.feature_code == code, Role.mandate_id.is_(None))).all()
        assert sorted(r.role_label for r in templates) == [f"{code}-admin", f"{code}-user", f"{code}-viewer"]
        for role in templates:
            declared = next(t for t in feature.template_roles if t.label == role.role_label)
            stored = session.exec(select(AccessRule.context, AccessRule.item).where(AccessRule.role_id == role.id))
            assert set(stored.all()) == {(s.context, s.item) for s in declared.rules}

    api = create_api()
    assert f"/api/{code}/ping" in api.openapi()["paths"]
    with TestClient(api) as client:
        response = client.get(f"/api/{code}/ping")
        assert response.status_code == 200 and response.json() == {"pong": code}


def test_the_throwaway_feature_is_gone_afterwards():
    from backend.features.registry import get_features

    assert not any(code.startswith("zzThrowaway") for code in get_features())
    folder = Path(backend.features.__file__).parent
    assert not list(folder.glob("zz_throwaway_*"))
