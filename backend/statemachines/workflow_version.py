"""WorkflowVersion lifecycle (spec §7.1, DESIGN §5).

    draft --publish--> published --unpublish--> draft
    published --archive--> archived --restore--> published
"""

from __future__ import annotations

from sqlmodel import Session

from backend.db.models import WorkflowVersion, utcnow
from backend.statemachines.base import StateMachine, Transition

DRAFT, PUBLISHED, ARCHIVED = "draft", "published", "archived"

MACHINE = StateMachine(
    "WorkflowVersion",
    [
        Transition("publish", (DRAFT,), PUBLISHED),
        Transition("unpublish", (PUBLISHED,), DRAFT),
        Transition("archive", (PUBLISHED,), ARCHIVED),
        Transition("restore", (ARCHIVED,), PUBLISHED),
    ],
)


def publish(session: Session, version: WorkflowVersion) -> WorkflowVersion:
    """Make a draft the published version (its graph is frozen from now on)."""
    return MACHINE.apply(session, version, "publish", published_at=utcnow(), sys_modified_at=utcnow())


def unpublish(session: Session, version: WorkflowVersion) -> WorkflowVersion:
    """Take a published version back to draft."""
    return MACHINE.apply(session, version, "unpublish", sys_modified_at=utcnow())


def archive(session: Session, version: WorkflowVersion) -> WorkflowVersion:
    """Retire a published version (reversible)."""
    return MACHINE.apply(session, version, "archive", sys_modified_at=utcnow())


def restore(session: Session, version: WorkflowVersion) -> WorkflowVersion:
    """Bring an archived version back as the published one."""
    return MACHINE.apply(session, version, "restore", published_at=utcnow(), sys_modified_at=utcnow())
