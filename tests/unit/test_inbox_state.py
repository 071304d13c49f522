"""The Inbox state's pure helpers: form fields for the shared renderer, the submitted browser form
as a task answer, the backend's field errors by field, and the row texts (state/inbox.py)."""

from __future__ import annotations

from datetime import datetime

from backend.db.models import HumanTask, Workflow
from backend.errors import FieldError
from state.inbox import assignee_text, field_errors, form_rows, form_values, outcome_text, task_row

FIELDS = [
    {"name": "amount", "type": "number", "required": True, "label": "Amount"},
    {"name": "urgent", "type": "boolean", "default": True},
    {"name": "size", "type": "select", "options": ["small", "large"], "default": "small"},
    {"name": "offer", "type": "file"},
    {"name": ""},  # no name: left out
    "not a field",
]


def test_form_rows_take_every_named_field_including_files():
    rows = form_rows(FIELDS)
    assert [r["name"] for r in rows] == ["amount", "urgent", "size", "offer"]
    assert rows[0] == {"name": "amount", "label": "Amount", "type": "number", "required": True, "options": [],
                       "default": "", "checked": False, "error": ""}
    assert rows[1]["checked"] is True and rows[1]["default"] == ""
    assert rows[2]["options"] == ["small", "large"] and rows[2]["default"] == "small"
    assert rows[3]["type"] == "file" and rows[3]["label"] == "offer"
    assert form_rows(None) == []


def test_form_values_turn_checkboxes_into_booleans_and_leave_blank_fields_out():
    rows = form_rows(FIELDS)
    assert form_values(rows, {"amount": " 42 ", "urgent": "on", "size": "", "offer": "/uploads/a.pdf"}) == \
        {"amount": " 42 ", "urgent": True, "offer": "/uploads/a.pdf"}
    assert form_values(rows, {"amount": "  "}) == {"urgent": False}
    assert form_values(rows, {"amount": "1", "stray": "x"}) == {"amount": "1", "urgent": False}


def test_field_errors_map_data_fields_to_the_form_and_keep_the_others():
    errors = [FieldError("data.amount", "required"), FieldError("data.amount", "must be a number"),
              FieldError("data.size", "must be one of: small, large"), FieldError("data", "must be an object")]
    by_field, others = field_errors(errors, {"amount", "size"})
    assert by_field == {"amount": "required", "size": "must be one of: small, large"}
    assert others == ["data: must be an object"]


def test_row_texts():
    assert assignee_text({"user": "u1"}, {"u1": "alice"}) == "alice"
    assert assignee_text({"user": "u9"}, {}) == "u9"
    assert assignee_text({"role": "graphicalEditor-admin"}, {}) == "role graphicalEditor-admin"
    assert assignee_text(None, {}) == "anyone who may update tasks"
    assert outcome_text("approval", "completed", {"approved": True}) == "Approved"
    assert outcome_text("approval", "completed", {"approved": False}) == "Rejected"
    assert outcome_text("form", "completed", {}) == "Submitted"
    assert outcome_text("form", "cancelled", None) == "Cancelled"
    assert outcome_text("approval", "expired", None) == "Expired"


def test_task_row_links_the_run_and_shows_the_cancel_reason():
    task = HumanTask(id="t1", run_id="r1", node_id="ask", mandate_id="m", feature_instance_id="i", kind="approval",
                     title="Pay", status="cancelled", data={"cancelReason": "duplicate"}, completed_by="u1",
                     sys_created_at=datetime(2024, 5, 1, 14, 2), finished_at=datetime(2024, 5, 1, 15, 0))
    row = task_row(task, False, True, Workflow(id="w1", name="Payments", mandate_id="m", feature_instance_id="i"),
                   "Editor", {"u1": "bob"})
    assert row["run_link"] == "/editor/w1?run=r1" and row["workflow_name"] == "Payments"
    assert (row["outcome"], row["by"], row["reason"]) == ("Cancelled", "bob", "duplicate")
    assert row["created"] == "2024-05-01 14:02 UTC" and row["finished"] == "2024-05-01 15:00 UTC"
    assert row["may_cancel"] is False  # only pending tasks can be cancelled
