"""The vocabulary of access rules: contexts, levels and a set of rights."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

UI, RESOURCE, DATA = "UI", "RESOURCE", "DATA"
CONTEXTS = (UI, RESOURCE, DATA)
OPERATIONS = ("read", "create", "update", "delete")
GENERIC_ITEM = "*"


class Level(IntEnum):
    """How far a DATA right reaches; ordered so that max() is the more permissive."""

    NONE = 0
    OWN = 1
    ALL = 2

    @classmethod
    def parse(cls, value: str | Level) -> Level:
        if isinstance(value, Level):
            return value
        try:
            return cls[value.upper()]
        except KeyError:
            raise ValueError(f"a right must be one of none, own, all, not {value!r}") from None

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Rights:
    """The outcome of a check: `view` for UI/RESOURCE, CRUD levels for DATA."""

    view: bool = False
    read: Level = Level.NONE
    create: Level = Level.NONE
    update: Level = Level.NONE
    delete: Level = Level.NONE

    def union(self, other: Rights) -> Rights:
        """Rights of holding both (view OR-ed, each operation the more permissive)."""
        return Rights(
            self.view or other.view,
            *(max(getattr(self, op), getattr(other, op)) for op in OPERATIONS),
        )

    def level(self, operation: str) -> Level:
        if operation not in OPERATIONS:
            raise ValueError(f"operation must be one of {', '.join(OPERATIONS)}, not {operation!r}")
        return getattr(self, operation)

    def as_dict(self) -> dict[str, object]:
        return {"view": self.view, **{op: str(getattr(self, op)) for op in OPERATIONS}}


NO_RIGHTS = Rights()
ALL_RIGHTS = Rights(True, Level.ALL, Level.ALL, Level.ALL, Level.ALL)


def specificity(rule_item: str, item: str) -> tuple[int, int] | None:
    """How specifically `rule_item` matches `item`: exact > prefix (longer first) > generic.

    Returns None when the rule does not cover the item. A prefix rule is written `a.b.*` and
    covers `a.b` itself and everything below it.
    """
    if rule_item == item:
        return (3, len(rule_item))
    if rule_item in (GENERIC_ITEM, "", None):
        return (1, 0)
    if rule_item.endswith(".*"):
        stem = rule_item[:-2]
        if item == stem or item.startswith(stem + "."):
            return (2, len(stem))
    return None
