"""The editor's Versions tab helpers: version rows and the draft row after a save (the schedule
status line is backend/scheduler/preview.py's: tests/unit/test_scheduler_preview.py)."""

from __future__ import annotations

from datetime import datetime

from backend.features.graphical_editor.interface import VersionView
from state.editor_versions import version_rows, with_draft

AUTHORS = {"u1": "alice", "u2": "bob"}


def _version(number: int, status: str, by: str | None = "u1", published: datetime | None = None) -> VersionView:
    """A version as the interface hands it out (its author's username resolved)."""
    created = datetime(2026, 1, number, 8, 30)
    return VersionView(id=f"v{number}", workflow_id="w", version_number=number, status=status, graph={},
                       sys_created_by=by, sys_created_at=created, sys_modified_at=created, published_at=published,
                       lock_version=0, author=AUTHORS.get(by or "", ""))


# --- version rows ------------------------------------------------------------------------------


def test_version_rows_are_newest_first_with_dates_and_author():
    rows = version_rows([_version(1, "archived", published=datetime(2026, 1, 2, 9, 0)), _version(3, "draft", by=None),
                         _version(2, "published", by="u2", published=datetime(2026, 1, 3, 10, 5))])
    assert [r["number"] for r in rows] == [3, 2, 1]
    assert rows[0] == {"id": "v3", "number": 3, "status": "draft", "created": "2026-01-03 08:30 UTC",
                       "published": "", "author": ""}
    assert rows[1]["published"] == "2026-01-03 10:05 UTC" and rows[1]["author"] == "bob"
    assert rows[2]["status"] == "archived" and rows[2]["author"] == "alice"


def test_a_saved_draft_updates_its_row_or_is_added_on_top():
    rows = version_rows([_version(1, "published"), _version(2, "draft")])
    same = with_draft(rows, _version(2, "draft"), "carol")
    assert same == rows  # known draft: stays where it is, author kept
    # After publishing v2, the first save starts draft v3.
    rows = version_rows([_version(1, "archived"), _version(2, "published")])
    added = with_draft(rows, _version(3, "draft", by="u9"), "carol")
    assert [(r["number"], r["status"], r["author"]) for r in added] == [
        (3, "draft", "carol"), (2, "published", "alice"), (1, "archived", "alice")]
    assert rows[0]["number"] == 2  # the input list is not changed
