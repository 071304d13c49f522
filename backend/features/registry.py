"""Discovers the feature containers under backend/features/ (spec §4.4).

A feature is a package `backend/features/<name>/` with:

- `main.py`: FEATURE_CODE, LABEL, ICON, UI_OBJECTS, RESOURCE_OBJECTS, DATA_TABLES,
  TEMPLATE_ROLES, REQUIRED_SERVICES, `get_feature_definition()` and
  `register_feature(catalog)`;
- `routes.py` (optional): `router`, an APIRouter mounted automatically under
  `/api/<featureCode>`;
- `interface.py` (optional): `get_interface(user, mandate_id, feature_instance_id, session)`,
  the feature's data access with its DATA rights applied;
- `models.py` (optional): its data model.

Adding a folder is all it takes: nothing else is edited.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import backend.features as features_package
from backend.rbac.templates import TemplateRole


@dataclass(frozen=True)
class FeatureDefinition:
    """What the platform knows about one feature."""

    code: str
    label: str
    icon: str = "box"
    ui_objects: tuple[tuple[str, str], ...] = ()
    resource_objects: tuple[tuple[str, str], ...] = ()
    data_tables: tuple[str, ...] = ()
    template_roles: tuple[TemplateRole, ...] = ()
    required_services: tuple[str, ...] = ()
    package: str = ""

    @property
    def root_ui_item(self) -> str:
        """The UI item whose view right means "may open this feature at all"."""
        return f"ui.feature.{self.code}"

    def data_item(self, table: str) -> str:
        """The DATA item of one of the feature's tables (table name + featureCode)."""
        return f"data.feature.{self.code}.{table}"

    @property
    def data_objects(self) -> tuple[tuple[str, str], ...]:
        return tuple((self.data_item(t), f"table {t}") for t in self.data_tables)

    def _optional_module(self, name: str) -> ModuleType | None:
        try:
            return importlib.import_module(f"{self.package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{self.package}.{name}":
                return None
            raise

    @property
    def router(self) -> Any:
        """The feature's APIRouter (from routes.py), if it has one."""
        module = self._optional_module("routes")
        return getattr(module, "router", None) if module else None

    @property
    def interface_factory(self) -> Callable[..., Any] | None:
        """`get_interface` from interface.py, if the feature has one."""
        module = self._optional_module("interface")
        return getattr(module, "get_interface", None) if module else None


@dataclass
class FeatureCatalog:
    """Collects the definitions that features register."""

    features: dict[str, FeatureDefinition] = field(default_factory=dict)

    def register(self, definition: FeatureDefinition) -> None:
        if definition.code in self.features:
            raise ValueError(f"feature code '{definition.code}' is declared twice")
        self.features[definition.code] = definition


def discover(package: ModuleType = features_package) -> FeatureCatalog:
    """Import every `<package>/<name>/main.py` and let it register itself."""
    catalog = FeatureCatalog()
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        try:
            main = importlib.import_module(f"{package.__name__}.{info.name}.main")
        except ModuleNotFoundError as exc:
            if exc.name == f"{package.__name__}.{info.name}.main":
                continue
            raise
        main.register_feature(catalog)
    return catalog


@functools.cache
def get_features() -> dict[str, FeatureDefinition]:
    """Every feature found under backend/features, by feature code."""
    return discover().features


def reset_feature_cache() -> None:
    """Forget discovered features (a test that adds a feature folder calls this)."""
    get_features.cache_clear()


def get_feature(code: str) -> FeatureDefinition:
    """The feature with `code`, or KeyError naming the known ones."""
    features = get_features()
    if code not in features:
        raise KeyError(f"unknown featureCode '{code}'; known: {', '.join(sorted(features))}")
    return features[code]


def definition_from_module(main: ModuleType) -> FeatureDefinition:
    """Build a FeatureDefinition from a main.py's module-level declarations."""
    return FeatureDefinition(
        code=main.FEATURE_CODE,
        label=getattr(main, "LABEL", main.FEATURE_CODE),
        icon=getattr(main, "ICON", "box"),
        ui_objects=tuple(getattr(main, "UI_OBJECTS", ())),
        resource_objects=tuple(getattr(main, "RESOURCE_OBJECTS", ())),
        data_tables=tuple(getattr(main, "DATA_TABLES", ())),
        template_roles=tuple(getattr(main, "TEMPLATE_ROLES", ())),
        required_services=tuple(getattr(main, "REQUIRED_SERVICES", ())),
        package=main.__name__.rsplit(".", 1)[0],
    )
