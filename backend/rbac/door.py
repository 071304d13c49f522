"""The door of a feature: permissions declared once, on the method that enforces them.

A feature's interface (``backend/features/<code>/interface.py``) — or any service object that
is the only path to some data (the file store, agent chats, the Inbox, administration) — marks
each public method with :func:`guarded`. The decorator both

- **enforces** the permission every time the method is called, in the door's scope (its
  mandate and feature instance), raising :class:`~backend.errors.Forbidden`; and
- **exposes** it, so REST routes (``backend.api.permissions.declared_by``) and Reflex event
  handlers (``state.permissions.requires_door``) read the declaration from the method instead
  of spelling the item again.

Row-level own/all decisions stay inside the method, through
:meth:`backend.rbac.access.AccessContext.visible` and :meth:`~AccessContext.may` (or the door's
:meth:`Door.visible` / :meth:`Door.may`, which add its scope).

A door that serves the instances of every feature (the file store, agent chats) declares an
item of "the door's feature" with :class:`FeatureItem`: ``FeatureItem.data("file")`` is declared
as ``data.feature.{featureCode}.file`` and checked, per door, with the door's ``feature_code``
put in (the file item of the Workspace for a Workspace instance, and so on).

Example::

    class WorkflowsDoor(Door):
        @guarded("DATA", WORKFLOW_DATA, "read")
        def list_workflows(self): ...

        @guarded("RESOURCE", PUBLISH)
        @guarded("DATA", WORKFLOW_DATA, "update")
        def publish(self, workflow): ...
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from backend.errors import Forbidden
from backend.rbac.rights import DATA, OPERATIONS, RESOURCE, UI, Level

KINDS = ("public", "authenticated", "sysadmin", UI, RESOURCE, DATA)
ATTRIBUTE = "__poweron_permissions__"
FEATURE_PLACEHOLDER = "{featureCode}"

F = TypeVar("F", bound=Callable[..., Any])


class FeatureItem(str):
    """An item of whichever feature the door's instance belongs to, in pattern form.

    It is a string (``data.feature.{featureCode}.file``), so declarations, OpenAPI documents and
    UI markers carry it as they are; a door resolves it with :meth:`Door.item_of`.
    """

    @classmethod
    def data(cls, table: str) -> FeatureItem:
        """``data.feature.{featureCode}.<table>``, as FeatureDefinition.data_item builds it."""
        return cls(f"data.feature.{FEATURE_PLACEHOLDER}.{table}")

    @classmethod
    def resource(cls, name: str) -> FeatureItem:
        """``resource.feature.{featureCode}.<name>``."""
        return cls(f"resource.feature.{FEATURE_PLACEHOLDER}.{name}")

    @classmethod
    def ui(cls, name: str) -> FeatureItem:
        """``ui.feature.{featureCode}.<name>``."""
        return cls(f"ui.feature.{FEATURE_PLACEHOLDER}.{name}")

    def of(self, feature_code: str) -> str:
        """The item of one feature: the placeholder replaced by `feature_code`."""
        return str.replace(self, FEATURE_PLACEHOLDER, feature_code)


@dataclass(frozen=True)
class Permission:
    """One declared permission: a kind and, for UI/RESOURCE/DATA, the item (and DATA operation)."""

    kind: str
    item: str | None = None
    operation: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"permission kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if self.kind in (UI, RESOURCE, DATA) and not self.item:
            raise ValueError(f"a {self.kind} permission must name its item")
        if self.kind == DATA and self.operation not in OPERATIONS:
            raise ValueError(f"a DATA permission must name its operation, one of {', '.join(OPERATIONS)}")

    def as_dict(self) -> dict[str, str]:
        """The declaration as it appears in the OpenAPI document (`x-permission`)."""
        declared = {"kind": self.kind}
        if self.item:
            declared["item"] = self.item
        if self.operation:
            declared["operation"] = self.operation
        return declared


class Door:
    """Base of an object that is the only path to some data, authorised as one user.

    Subclasses set ``access`` (an AccessContext) and say in which mandate and feature instance
    their checks are made (``scope``). Methods marked with :func:`guarded` are checked there.
    A :class:`FeatureItem` is resolved for the door's ``feature_code`` (its instance's feature).
    """

    access: Any  # backend.rbac.access.AccessContext (not imported: it imports this module)

    @property
    def scope(self) -> tuple[str | None, str | None]:
        """(mandate id, feature instance id) where this door's rights are resolved."""
        instance = getattr(self, "instance", None)
        if instance is not None:
            return instance.mandate_id, instance.id
        return getattr(self, "mandate_id", None), None

    @property
    def feature_code(self) -> str | None:
        """The feature whose items a :class:`FeatureItem` names here (the instance's feature)."""
        instance = getattr(self, "instance", None)
        return getattr(instance, "feature_code", None)

    def item_of(self, item: str) -> str:
        """`item` as checked by this door: a FeatureItem becomes the item of `feature_code`."""
        if isinstance(item, FeatureItem):
            if not self.feature_code:
                raise ValueError(f"{type(self).__name__} has no feature_code to resolve {item}")
            return item.of(self.feature_code)
        return item

    def call_scope(self, method: str, arguments: dict[str, Any]) -> tuple[str | None, str | None] | None:
        """The (mandate id, instance id) one call of the guarded `method` is checked in.

        None by default: the door's own `scope`. A door whose methods name what they act on (the
        administration is called with a mandate id, the Inbox with a task id) overrides this and
        resolves the scope from the call's `arguments` (by parameter name, without ``self``); its
        ``enforce`` then takes that scope as second argument. It raises NotFound for an object the
        caller may not see, before any permission is checked, so a foreign id answers 404 exactly
        like a missing one. Only such doors pay for binding the arguments.
        """
        return None

    def enforce(self, permission: Permission, scope: tuple[str | None, str | None] | None = None) -> None:
        """Raise Forbidden unless the user holds `permission` in `scope` (default: this door's)."""
        if isinstance(permission.item, FeatureItem):
            permission = Permission(permission.kind, self.item_of(permission.item), permission.operation)
        enforce(self.access, permission, *(self.scope if scope is None else scope))

    def may_call(self, method: Callable[..., Any]) -> bool:
        """Whether the user holds every permission `method` (a guarded method) declares, here.

        For flags of what a page offers (an upload button, a chat bar) without calling it.
        """
        try:
            for declared in permissions_of(method):
                self.enforce(declared)
        except Forbidden:
            return False
        return True

    def visible(self, query: Any, model: Any, item: str, operation: str = "read") -> Any:
        """`query` narrowed to the rows of DATA `item` the user may `operation` in this door's scope."""
        return self.access.visible(query, model, self.item_of(item), *self.scope, operation=operation)

    def may(self, operation: str, item: str, row: Any) -> bool:
        """Whether the user may `operation` this `row` of DATA `item`, in this door's scope."""
        mandate_id, instance_id = self.scope
        return self.access.may(operation, self.item_of(item), row, mandate_id, instance_id)


def enforce(access: Any, permission: Permission, mandate_id: str | None, instance_id: str | None) -> None:
    """Raise Forbidden unless `access.user` holds `permission` in (mandate, instance)."""
    kind = permission.kind
    if kind in ("public", "authenticated"):
        return
    if kind == "sysadmin":
        if not access.user.is_sysadmin:
            raise Forbidden("only system administrators may do this")
    elif kind == DATA:
        if access.data_level(permission.item, permission.operation, mandate_id, instance_id) == Level.NONE:
            table = permission.item.rsplit(".", 1)[-1]
            raise Forbidden(f"your roles allow no {permission.operation} on {table} here")
    elif not access.resolve(kind, permission.item, mandate_id, instance_id).allowed:
        raise Forbidden(f"your roles do not allow {permission.item}")


def guarded(kind: str, item: str | None = None, operation: str | None = None) -> Callable[[F], F]:
    """Declare and enforce a permission on a :class:`Door` method (stackable).

    Args:
        kind: public, authenticated, sysadmin, UI, RESOURCE or DATA.
        item: the AccessRule item (a constant of the feature's main.py).
        operation: read/create/update/delete for DATA.
    """
    permission = Permission(kind, item, operation)

    def wrap(fn: F) -> F:
        inner_permissions = getattr(fn, ATTRIBUTE, ())
        target = getattr(fn, "__wrapped_door__", fn)
        signature = inspect.signature(target)

        @functools.wraps(fn)
        def checked(self: Door, *args: Any, **kwargs: Any) -> Any:
            scope = None
            if type(self).call_scope is not Door.call_scope:
                arguments = signature.bind(self, *args, **kwargs).arguments
                arguments.pop(next(iter(signature.parameters)), None)
                scope = self.call_scope(target.__name__, dict(arguments))
            for declared in (permission, *inner_permissions):
                if scope is None:
                    self.enforce(declared)
                else:
                    self.enforce(declared, scope)
            return target(self, *args, **kwargs)

        setattr(checked, ATTRIBUTE, (permission, *inner_permissions))
        checked.__wrapped_door__ = target  # type: ignore[attr-defined]
        return checked  # type: ignore[return-value]

    return wrap


def permissions_of(method: Callable[..., Any]) -> tuple[Permission, ...]:
    """Every permission declared on `method` (outermost first); () when it declares none."""
    return tuple(getattr(method, ATTRIBUTE, ()))


def declared_methods(cls: type) -> dict[str, tuple[Permission, ...]]:
    """The guarded methods of a door class, by name."""
    return {name: permissions_of(member) for name in dir(cls)
            if permissions_of(member := getattr(cls, name, None))}
