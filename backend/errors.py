"""Domain errors that every entry point (REST, UI state, engine) maps the same way."""

from __future__ import annotations

from dataclasses import dataclass


class DomainError(Exception):
    """Base of the errors below."""


class NotFound(DomainError):
    """Unknown object, or one the caller may not see (the answer is the same)."""


class Forbidden(DomainError):
    """The caller sees the object but may not do this."""


class Conflict(DomainError):
    """The request clashes with the current data (duplicate name, wrong lifecycle state)."""


@dataclass(frozen=True)
class FieldError:
    """One problem with input, named by where it is."""

    field: str
    message: str
    node_id: str | None = None

    def as_dict(self) -> dict:
        """JSON form used by the REST API: {nodeId, field, message}."""
        return {"nodeId": self.node_id, "field": self.field, "message": self.message}

    def __str__(self) -> str:
        # A message that names its node already ("node 'x' (flow.ifElse) has no handle 'y'") is not
        # prefixed with it again.
        named = self.node_id and f"node '{self.node_id}'" not in self.message
        where = f"node '{self.node_id}', " if named else ""
        return f"{where}{self.field}: {self.message}"


class InvalidInput(DomainError):
    """Input that cannot be accepted; carries every problem found."""

    def __init__(self, errors: list[FieldError]):
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))
