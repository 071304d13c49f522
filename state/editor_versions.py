"""The editor's Versions tab: the workflow's versions, the active switch and the schedule status.

Versions follow DESIGN §5: draft → publish → published → unpublish → draft; published → archive
→ archived → restore → published; at most one published version, and editing never changes it
(edits go to the draft). Any version can be opened read-only on the canvas (`viewing_version`).

The schedule status says what the scheduler does with the published version's trigger.schedule
nodes: they run only while the workflow is active, and `Workflow.event_id` is the handle of the
registered jobs (the scheduler writes it; it reacts to publish and the switch by itself through
backend/workflows/changes.py). Next fire times come from the scheduler's own triggers
(backend/scheduler/cron.py), never from a second cron translation.

The pure helpers (`version_rows`, and `schedule_text` … from backend/scheduler/preview.py, which
the monitor shares) hold the logic; the mixin only loads and
assigns. It is mixed into EditorState (state/editor.py), which provides `_graph`, `_publish()`,
`save_status`, `fit_revision`, `selected_ids`, `can_edit`, `workflow_id` and `_reload()`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from datetime import datetime
from typing import Any, TypedDict

import reflex as rx
from sqlmodel import Session

from backend.db.models import User, Workflow
from backend.errors import DomainError, Forbidden, InvalidInput
from backend.features.graphical_editor.interface import GraphicalEditorInterface as Door
from backend.features.graphical_editor.interface import VersionView
from backend.scheduler.preview import (  # noqa: F401 - re-exported for the page and its tests
    NO_SCHEDULE,
    NOT_REGISTERED,
    cron_words,
    describe_schedule,
    interval_words,
    next_fire_time,
    schedule_text,
)
from state.auth import NotSignedIn
from state.editor_runs import named_once
from state.page import user_message
from state.permissions import requires, requires_door

TIME_FORMAT = "%Y-%m-%d %H:%M UTC"
ACTION_WORDS = {"publish": "Published", "unpublish": "Unpublished", "archive": "Archived", "restore": "Restored"}


class VersionRow(TypedDict):
    id: str
    number: int
    status: str
    created: str
    published: str
    author: str


# --- pure helpers ---------------------------------------------------------------------------------


def _stamp(moment: datetime | None) -> str:
    return moment.strftime(TIME_FORMAT) if moment else ""


def version_row(version: VersionView, author: str) -> VersionRow:
    return VersionRow(id=version.id, number=version.version_number, status=version.status,
                      created=_stamp(version.sys_created_at), published=_stamp(version.published_at),
                      author=author)


def version_rows(versions: Iterable[VersionView]) -> list[VersionRow]:
    """The rows of the versions list, newest first, each with its author's username."""
    ordered = sorted(versions, key=lambda v: v.version_number, reverse=True)
    return [version_row(v, v.author) for v in ordered]


def with_draft(rows: list[VersionRow], draft: VersionView, author: str) -> list[VersionRow]:
    """`rows` after the draft `draft` was saved: its row updated in place, or added on top when new."""
    for index, row in enumerate(rows):
        if row["id"] == draft.id:
            updated = VersionRow(**{**row, "status": draft.status})
            return [*rows[:index], updated, *rows[index + 1:]]
    return sorted([version_row(draft, author), *rows], key=lambda r: r["number"], reverse=True)


def _moment(text: str) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


# --- the mixin ------------------------------------------------------------------------------------


class EditorVersionsMixin(rx.State, mixin=True):
    """Versions, publishing, the read-only view of a version, the active switch, the schedule status."""

    versions: list[VersionRow] = []
    # "" = editing the draft; else the number of the version shown read-only.
    viewing_version: str = ""
    viewing_status: str = ""
    workflow_active: bool = False
    can_publish: bool = False
    has_draft: bool = False
    has_published: bool = False
    schedule_text: str = NO_SCHEDULE

    _viewed_graph: dict[str, Any] = {}
    # The schedule facts apart from the draft (so a draft save can update the text without a query).
    _published_graph: dict[str, Any] = {}
    _published_at: str = ""  # ISO
    _event_id: str = ""

    # --- loading (called by EditorState) --------------------------------------------------------

    def _load_versions(self, iface: Any, workflow: Workflow) -> None:
        """Fill the Versions tab from the database (inside the page's session)."""
        self.workflow_active = bool(workflow.active)
        self.can_publish = iface.editor_rights(workflow).can_publish
        try:
            versions = iface.list_versions(workflow, masked=True)
        except Forbidden:
            versions = []
        self.versions = version_rows(versions)
        published = next((v for v in versions if v.status == "published"), None)
        draft = next((v for v in versions if v.status == "draft"), None)
        self.has_draft, self.has_published = draft is not None, published is not None
        self._published_graph = copy.deepcopy(published.graph) if published else {}
        self._published_at = published.published_at.isoformat() if published and published.published_at else ""
        self._event_id = workflow.event_id or ""
        self.schedule_text = schedule_text(self._published_graph, draft.graph if draft else None,
                                           self.workflow_active, self._event_id, _moment(self._published_at))
        if self.viewing_version:
            row = next((r for r in self.versions if str(r["number"]) == self.viewing_version), None)
            if row is None:
                self.viewing_version, self.viewing_status, self._viewed_graph = "", "", {}
            else:
                self.viewing_status = row["status"]

    def _note_draft_saved(self, version: VersionView) -> None:
        """After a draft save: show the draft row (new or updated) without asking the database."""
        self.versions = with_draft(list(self.versions), version, self.username)
        self.has_draft = True
        self.schedule_text = schedule_text(self._published_graph, version.graph, self.workflow_active,
                                           self._event_id, _moment(self._published_at))

    def _editor_interface(self, session: Session, user: User) -> tuple[Any, Workflow]:
        """The page's workflow with its instance's interface (state.editor.editor_interface)."""
        from state.editor import editor_interface  # state.editor imports this module

        return editor_interface(session, user, self.workflow_id)

    def _keep_readonly(self) -> None:
        """The page reload resets the save status; a version being viewed stays read only."""
        if self.viewing_version:
            self.save_status = "readonly"

    def _change_version(self, action: str, version_id: str | None = None):
        changed: list[int] = []

        def work(session: Session, user: User) -> None:
            iface, workflow = self._editor_interface(session, user)
            try:
                changed.append(iface.change_version(workflow, action, version_id).version_number)
            except InvalidInput as exc:  # each problem names its node once
                raise named_once(exc) from None

        ok, event = self._attempt(work, "")
        if ok:
            self.notice = f"{ACTION_WORDS[action]} version {changed[0]}."
        elif self.error:
            self.error = f"{action.capitalize()} refused: {self.error}"
        self._keep_readonly()
        return event

    # --- version actions ------------------------------------------------------------------------

    @rx.event
    @requires_door(Door.change_version)
    def publish_draft(self):
        """Publish the draft (an invalid graph is refused with its problems); the old published one is archived."""
        return self._change_version("publish")

    @rx.event
    @requires_door(Door.change_version)
    def unpublish(self):
        """Take the published version back to draft (refused while another draft exists)."""
        return self._change_version("unpublish")

    @rx.event
    @requires_door(Door.change_version)
    def archive_published(self):
        """Archive the published version: the workflow then has none (its schedule stops)."""
        return self._change_version("archive")

    @rx.event
    @requires_door(Door.change_version)
    def restore_version(self, version_id: str):
        """Publish an archived version again (the published one, if any, is archived)."""
        return self._change_version("restore", version_id)

    # --- read-only view -------------------------------------------------------------------------

    @rx.event
    @requires_door(Door.get_version)
    def open_version(self, version_id: str):
        """Show a version read-only on the canvas (webhook secrets masked)."""
        self.error = ""
        try:
            with self._user_session() as (session, user):
                iface, workflow = self._editor_interface(session, user)
                version = iface.get_version(workflow, version_id, masked=True)
                self._viewed_graph = copy.deepcopy(version.graph)
                self._viewed_graph.setdefault("nodes", [])
                self._viewed_graph.setdefault("edges", [])
                self.viewing_version = str(version.version_number)
                self.viewing_status = version.status
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
            return None
        self.save_status = "readonly"
        self.selected_ids = []
        self.fit_revision += 1
        self.form_revision += 1
        self._publish()
        return None

    @rx.event
    @requires("ui")
    def back_to_draft(self):
        """Leave the read-only view: the canvas shows the graph being edited again."""
        self.viewing_version, self.viewing_status, self._viewed_graph = "", "", {}
        self.save_status = "saved" if self.can_edit else "readonly"
        self.selected_ids = []
        self.fit_revision += 1
        self.form_revision += 1
        self._publish()

    # --- the active switch ----------------------------------------------------------------------

    @rx.event
    @requires_door(Door.update_workflow)
    def set_active(self, checked: bool):
        """Switch the workflow (in)active; the scheduler (un)registers its jobs by itself."""
        def work(session: Session, user: User) -> None:
            iface, workflow = self._editor_interface(session, user)
            iface.update_workflow(workflow, active=bool(checked))

        ok, event = self._attempt(work, "Workflow switched active." if checked else "Workflow switched inactive.")
        if not ok and self.error:
            self.error = f"Switching {'on' if checked else 'off'} refused: {self.error}"
        self._keep_readonly()
        return event

