"""The parameter panel's fields come from the node registry's JSON Schemas: a webhook secret is a
secret field that never carries its value, an assignee is a picker of roles and users, and nothing
the panel shows cites design documents (issue 16, items 4 and 7)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.triggers.secrets import MASK
from backend.triggers.webhook_help import CallView, WebhookHelp
from backend.workflows.assignees import AssigneeChoices, AssigneeUser
from backend.workflows.node_types import node_type, palette
from state.editor_params import assignee_parameter, call_rows, picker_options
from state.param_fields import NO_ASSIGNEE, SECRET_HINT, fields_of, parse_value


def field(type_id: str, name: str, parameters: dict | None = None) -> dict:
    schema = node_type(type_id).params_model.model_json_schema()
    return next(f for f in fields_of(schema, parameters or {}) if f["name"] == name)


@pytest.mark.parametrize("stored", [MASK, "sealed:v1:abc", "whsec_c2VjcmV0LWJ5dGVz"])
def test_a_stored_webhook_secret_shows_as_set_and_never_its_value(stored):
    secret = field("trigger.webhook", "secret", {"path": "in", "secret": stored})
    assert (secret["kind"], secret["value"], secret["checked"]) == ("secret", "", True)
    assert stored not in repr(secret)


def test_a_missing_secret_shows_as_not_set_and_typing_one_into_the_field_is_refused():
    secret = field("trigger.webhook", "secret", {"path": "in"})
    assert (secret["kind"], secret["checked"]) == ("secret", False)
    assert parse_value("secret", "whsec_c2VjcmV0") == (None, SECRET_HINT)


def test_secret_fields_come_from_the_schema_marker_not_the_name():
    kinds = {(t.type, f["name"]): f["kind"] for t in palette()
             for f in fields_of(t.params_model.model_json_schema(), {})}
    assert [key for key, kind in kinds.items() if kind == "secret"] == [("trigger.webhook", "secret")]
    schema = {"properties": {"secret": {"type": "string"}, "token": {"type": "string", "format": "password"}}}
    assert [f["kind"] for f in fields_of(schema, {})] == ["text", "secret"]


@pytest.mark.parametrize("type_id", ["input.approval", "input.form"])
def test_the_assignee_is_a_picker_storing_what_the_inbox_matches(type_id):
    assert field(type_id, "assignee")["kind"] == "assignee"
    assert field(type_id, "assignee")["value"] == NO_ASSIGNEE
    assert field(type_id, "assignee", {"title": "t", "assignee": {"role": "graphicalEditor-admin"}})["value"] == \
        "role:graphicalEditor-admin"
    assert field(type_id, "assignee", {"title": "t", "assignee": {"user": "u1"}})["value"] == "user:u1"
    assert parse_value("assignee", "role:graphicalEditor-admin") == ({"role": "graphicalEditor-admin"}, "")
    assert parse_value("assignee", "user:u1") == ({"user": "u1"}, "")
    assert parse_value("assignee", NO_ASSIGNEE) == (None, "")
    assert parse_value("assignee", "boss")[1] == "choose a role or a user from the list"


def test_only_human_steps_have_an_assignee_picker():
    assert {t.type for t in palette() if assignee_parameter(t)} == {"input.approval", "input.form"}


def test_an_assignee_written_as_an_expression_stays_editable_as_written():
    shown = field("input.approval", "assignee", {"title": "t", "assignee": "{{ input.approver }}"})
    assert (shown["kind"], shown["value"]) == ("any", "{{ input.approver }}")


def test_no_field_of_any_node_type_cites_design_documents():
    for known in palette():
        for row in fields_of(known.params_model.model_json_schema(), {}):
            text = " ".join((row["title"], row["description"], row["placeholder"]))
            assert "DESIGN" not in text and "§" not in text, (known.type, row["name"], text)


CHOICES = AssigneeChoices(roles=["admin", "graphicalEditor-user"], users=[AssigneeUser("u1", "Anna (anna)")])


def test_the_picker_offers_roles_and_users_and_flags_a_stored_one_that_is_gone():
    roles, users, extra, problem = picker_options(CHOICES, {"role": "admin"})
    assert [o["label"] for o in roles] == ["admin", "graphicalEditor-user"]
    assert users == [{"value": "user:u1", "label": "Anna (anna)"}]
    assert (extra, problem) == ([], "")
    _roles, _users, extra, problem = picker_options(CHOICES, {"user": "u9"})
    assert extra == [{"value": "user:u9", "label": "user u9 (no longer exists here)"}]
    assert "no longer exists" in problem
    _roles, _users, extra, problem = picker_options(CHOICES, {"role": "old-role"})
    assert extra[0]["value"] == "role:old-role" and "old-role" in problem
    # Read only (no choices loaded): the stored assignee is shown as it is, without a verdict.
    roles, users, extra, problem = picker_options(None, {"role": "admin"})
    assert (roles, users, problem) == ([], [], "") and extra == [{"value": "role:admin", "label": "role admin"}]


def test_call_rows_link_runs_into_the_editor():
    moment = datetime(2026, 12, 2, 9, 30, 5, tzinfo=UTC)
    shown = WebhookHelp(url="u", method="POST", state="live", state_text="", draft_differs=False, secret_set=True,
                        example="", signed_with="", valid_until=None,
                        calls=[CallView(202, moment, "POST", "in", "accepted: run started", "r1"),
                               CallView(401, moment, "POST", "in", "webhook signature not accepted", None)])
    rows = call_rows("wf1", shown)
    assert [(r["status"], r["ok"], r["run_link"]) for r in rows] == [("202", True, "/editor/wf1?run=r1"),
                                                                      ("401", False, "")]
    assert rows[0]["time"] == "2026-12-02 09:30:05 UTC" and rows[1]["request"] == "POST /in"


def test_a_list_of_a_fixed_set_is_ticked_not_typed():
    events = field("trigger.jira", "events", {"events": ["comment_created", "jira:issue_created"]})
    assert events["kind"] == "choices"
    assert events["options"] == ["jira:issue_created", "jira:issue_updated", "jira:issue_deleted", "comment_created"]
    assert events["chosen"] == ["comment_created", "jira:issue_created"]
    assert field("trigger.jira", "events")["chosen"] == ["jira:issue_created"]  # the default
    written = field("trigger.jira", "events", {"events": "{{ input.events }}"})
    assert written["kind"] == "json" and written["value"] == '"{{ input.events }}"'
    assert parse_value("choices", '["comment_created"]') == (["comment_created"], "")
