"""Discovers the feature containers under backend/features/.

A feature package declares at least FEATURE_CODE and LABEL; it may declare ROUTER (a FastAPI
APIRouter mounted under /api/<featureCode>/{instanceId}) and TEMPLATE_ROLES.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import backend.features as features_package

DEFAULT_TEMPLATE_ROLES = ("admin", "user", "viewer")


@dataclass(frozen=True)
class FeatureDefinition:
    """What the platform knows about one feature."""

    code: str
    label: str
    icon: str
    module: ModuleType
    template_roles: tuple[str, ...] = field(default=DEFAULT_TEMPLATE_ROLES)

    @property
    def router(self) -> Any:
        """The feature's APIRouter, if it has one."""
        return getattr(self.module, "ROUTER", None)

    def role_label(self, suffix: str) -> str:
        """The instance role label for a template suffix, e.g. graphicalEditor-admin."""
        return f"{self.code}-{suffix}"


@functools.cache
def get_features() -> dict[str, FeatureDefinition]:
    """Every feature found under backend/features, by feature code."""
    found: dict[str, FeatureDefinition] = {}
    for info in pkgutil.iter_modules(features_package.__path__):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"{features_package.__name__}.{info.name}")
        code = getattr(module, "FEATURE_CODE", None)
        if not code:
            continue
        found[code] = FeatureDefinition(
            code=code,
            label=getattr(module, "LABEL", code),
            icon=getattr(module, "ICON", "box"),
            module=module,
            template_roles=tuple(getattr(module, "TEMPLATE_ROLES", DEFAULT_TEMPLATE_ROLES)),
        )
    return found


def get_feature(code: str) -> FeatureDefinition:
    """The feature with `code`, or KeyError naming the known ones."""
    features = get_features()
    if code not in features:
        raise KeyError(f"unknown featureCode '{code}'; known: {', '.join(sorted(features))}")
    return features[code]
