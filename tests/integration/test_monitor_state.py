"""The Monitor page's state against the database: what it loads through backend.monitoring for
the filters chosen, the live list the timer refreshes, the history's pages, and a user without
an instance seeing an honest empty page.

The handlers run on a plain object holding MonitorState's vars (no Reflex app): its
`_user_session` is the named user's session; the page's own loading methods do the rest.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from types import FunctionType
from typing import Any

import pytest
from sqlmodel import select

import state.monitor as monitor_state
from backend.db import session_scope
from backend.db.models import User
from state.instance_choice import InstanceChoiceMixin
from state.monitor import ALL, DEFAULT_KIND, DEFAULT_RANGE, MonitorState
from state.page import PageMixin

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

START = {"id": "start", "type": "trigger.manual", "parameters": {}}
CODE = ("def main(input):\n    if input['input'].get('fail'):\n        raise ValueError('boom on purpose')\n"
        "    return {'ok': True}\n")
PYTHON_GRAPH = {"nodes": [START, {"id": "python", "type": "script.python", "parameters": {"code": CODE}}],
                "edges": [{"source": "start", "target": "python"}]}
QUICK_GRAPH = {"nodes": [START, {"id": "echo", "type": "context.transform",
                                 "parameters": {"data": "{{ input }}", "template": "hi"}}],
               "edges": [{"source": "start", "target": "echo"}]}


def _approval_graph(user_id: str) -> dict[str, Any]:
    return {"nodes": [START, {"id": "ok", "type": "input.approval",
                              "parameters": {"title": "Approve it", "assignee": {"user": user_id}}}],
            "edges": [{"source": "start", "target": "ok"}]}


class FakeMonitor:
    """MonitorState's vars with its loading methods and handlers, on a plain object."""

    def __init__(self, username: str):
        self.username = username
        for name, field in MonitorState.get_fields().items():
            if name in MonitorState.base_vars and not name.startswith("_"):
                setattr(self, name, field.default_factory() if field.default_factory else field.default)
        self.instance_filter = self.workflow_filter = self.status_filter = ALL
        self.range_filter = DEFAULT_RANGE
        self.kind_filter = DEFAULT_KIND
        self.error = self.notice = ""
        self.loaded = False

    @contextmanager
    def _user_session(self):
        with session_scope() as session:
            yield session, session.exec(select(User).where(User.username == self.username)).one()

    def _load_navigation(self, session, user):
        self.nav_loaded = True

    def _signed_out(self):
        raise AssertionError("signed out")

    def __getattr__(self, name: str):
        handler = MonitorState.event_handlers.get(name)
        if handler is not None:
            return handler.fn.__get__(self)
        raise AttributeError(name)


for _source in (InstanceChoiceMixin, MonitorState):  # the header's instance choice, then the page's own
    for _name, _member in _source.__dict__.items():
        if _name.startswith("_") and not _name.startswith("__") and isinstance(_member, FunctionType):
            setattr(FakeMonitor, _name, _member)
FakeMonitor._reload = PageMixin.__dict__["_reload"]


def _create(api, graph: dict, prefix: str, publish: bool = True) -> tuple[str, str]:
    """A new workflow; published (its runs are production runs) unless `publish` is False (runs of
    its draft are test runs)."""
    name = f"{prefix} {uuid.uuid4().hex[:6]}"
    created = api.client.post(f"{api.base()}/workflows", json={"name": name, "graph": graph}, headers=api.auth)
    assert created.status_code == 201, created.text
    if publish:
        published = api.client.post(f"{api.base()}/workflows/{created.json()['id']}/publish", headers=api.auth)
        assert published.status_code == 200, published.text
    return created.json()["id"], name


def _run(api, workflow_id: str, payload: Any = None) -> dict:
    response = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs", json={"input": payload},
                               headers=api.auth)
    assert response.status_code == 201, response.text
    return response.json()


def _me(api) -> str:
    return api.client.get("/api/me", headers=api.auth).json()["id"]


def _option_id(options: list[dict], label_part: str) -> str:
    return next(o["id"] for o in options if label_part in o["label"])


def test_the_monitor_loads_runs_failures_and_what_waits(api):
    workflow_id, name = _create(api, PYTHON_GRAPH, "Monitored")
    ok, failed = _run(api, workflow_id, {"fail": False}), _run(api, workflow_id, {"fail": True})
    assert (ok["status"], failed["status"]) == ("completed", "failed")
    waiting_id, waiting_name = _create(api, _approval_graph(_me(api)), "Waiting")
    paused = _run(api, waiting_id)
    assert paused["status"] == "paused"

    page = FakeMonitor("admin")
    page.load()
    assert page.error == "" and page.loaded and page.has_instances
    assert api.instance_id in {o["id"] for o in page.instances}
    assert {workflow_id, waiting_id} <= {o["id"] for o in page.workflow_choices}

    live = [row for row in page.live if row["id"] == paused["id"]]
    assert live and live[0]["workflow"] == waiting_name and live[0]["status"] == "paused"
    assert live[0]["pause_reason"] == "waits for a person (Inbox)" and live[0]["running_for"]
    assert live[0]["href"] == f"/editor/{waiting_id}?run={paused['id']}"
    assert page.paused_count >= 1

    mine = {row["id"]: row for row in page.history}
    assert {ok["id"], failed["id"], paused["id"]} <= set(mine)
    assert mine[ok["id"]]["status"] == "completed" and mine[ok["id"]]["duration"].endswith(("ms", " s"))
    assert mine[failed["id"]]["href"] == f"/editor/{workflow_id}?run={failed['id']}"
    assert mine[paused["id"]]["duration"] == "running"
    failure = next(row for row in page.failures if row["id"] == failed["id"])
    assert "boom on purpose" in failure["error"] and failure["workflow"] == name

    assert page.range_total >= 3 and page.range_failed >= 1 and page.range_error_rate.endswith("%")
    assert len(page.days) == 7 and page.days[-1]["failed"] >= 1
    assert page.cost_total == "CHF 0.00" and len(page.costs_by_day) == 7
    assert any(line["key"] == workflow_id and line["runs"] == 2 for line in page.costs_by_workflow)

    page.set_workflow_filter(workflow_id)
    assert [row["id"] for row in page.history] == [failed["id"], ok["id"]]
    assert page.live == [] and [row["id"] for row in page.failures] == [failed["id"]]
    page.set_status_filter("completed")
    assert [row["id"] for row in page.history] == [ok["id"]]
    assert [row["id"] for row in page.failures] == [failed["id"]]  # the status narrows the history only
    page.set_status_filter(ALL)
    page.set_range_filter("24h")
    assert len(page.days) == 2 and len(page.history) == 2 and page.error == ""

    page.set_workflow_filter(ALL)
    page.set_instance_filter(api.instance_id)
    assert page.workflow_filter == ALL and page.error == ""
    assert workflow_id in {o["id"] for o in page.workflow_choices}

    # The timer reloads the live list only: a cancelled run leaves it, the history waits for a reload.
    cancelled = api.client.post(f"{api.base()}/runs/{paused['id']}/cancel", headers=api.auth)
    assert cancelled.status_code == 200, cancelled.text
    page.tick("12:00:03")
    assert paused["id"] not in {row["id"] for row in page.live}
    assert next(row for row in page.history if row["id"] == paused["id"])["status"] == "paused"
    page.load()
    assert next(row for row in page.history if row["id"] == paused["id"])["status"] == "cancelled"


def test_the_history_pages_through_the_cursor(api, monkeypatch):
    monkeypatch.setattr(monitor_state, "HISTORY_PAGE_SIZE", 2)
    workflow_id, _name = _create(api, QUICK_GRAPH, "Paged")
    runs = [_run(api, workflow_id, {"n": n})["id"] for n in range(5)]
    page = FakeMonitor("admin")
    page.load()
    page.set_workflow_filter(workflow_id)
    seen = [row["id"] for row in page.history]
    assert len(seen) == 2 and page.history_page == 1 and page.history_next
    page.next_history_page()
    seen += [row["id"] for row in page.history]
    page.next_history_page()
    seen += [row["id"] for row in page.history]
    assert page.history_page == 3 and page.history_next == ""
    assert sorted(seen) == sorted(runs) and len(set(seen)) == 5
    page.next_history_page()  # nothing further: stays
    assert page.history_page == 3
    page.first_history_page()
    assert page.history_page == 1 and [row["id"] for row in page.history] == seen[:2]


def test_stale_filters_fall_back_and_an_unknown_status_means_all(api):
    workflow_id, _name = _create(api, QUICK_GRAPH, "Stale")
    _run(api, workflow_id)
    page = FakeMonitor("admin")
    page.instance_filter, page.workflow_filter = "no-such-instance", "no-such-workflow"
    page.load()
    assert page.error == "" and (page.instance_filter, page.workflow_filter) == (ALL, ALL)
    page.set_status_filter("bogus")
    assert page.status_filter == ALL and page.error == ""
    page.set_range_filter("forever")
    assert page.range_filter == DEFAULT_RANGE


def test_a_user_without_an_instance_sees_an_empty_monitor(api):
    _run(api, _create(api, QUICK_GRAPH, "Hidden")[0])
    with session_scope() as session:
        stranger = User(username=f"stranger-{uuid.uuid4().hex[:6]}", display_name="Stranger")
        session.add(stranger)
        username = stranger.username
    page = FakeMonitor(username)
    page.load()
    assert page.error == "" and page.loaded and not page.has_instances
    assert page.instances == [] and page.workflow_choices == []
    assert page.history == [] and page.live == [] and page.failures == [] and page.upcoming == []
    assert page.range_total == 0 and page.cost_total == "CHF 0.00"
    page.tick("12:00:00")  # the timer does nothing without an instance
    assert page.live == [] and page.error == ""


def test_test_runs_stay_out_of_the_production_view_and_show_under_test(api):
    """A failed try-out of a draft raises no production figure; "Test runs" shows it, "All runs" both."""
    production_id, _name = _create(api, PYTHON_GRAPH, "Live")
    draft_id, draft_name = _create(api, PYTHON_GRAPH, "Trying", publish=False)
    ok = _run(api, production_id, {"fail": False})
    tried = _run(api, draft_id, {"fail": True})
    assert (ok["status"], tried["status"]) == ("completed", "failed")

    page = FakeMonitor("admin")
    page.load()
    assert page.kind_filter == "production" and page.error == ""
    history = {row["id"]: row for row in page.history}
    assert ok["id"] in history and tried["id"] not in history and not history[ok["id"]]["test"]
    assert tried["id"] not in {row["id"] for row in page.failures}
    production = (page.range_total, page.range_failed, page.range_error_rate)
    assert page.days[-1]["failed"] == 0 and page.range_error_rate == "0.0 %"

    page.set_kind_filter("test")
    assert page.kind_filter == "test" and page.error == ""
    assert [row["id"] for row in page.history] == [tried["id"]] and page.history[0]["test"]
    assert [row["id"] for row in page.failures] == [tried["id"]] and page.failures[0]["workflow"] == draft_name
    assert (page.range_total, page.range_failed, page.range_error_rate) == (1, 1, "100.0 %")
    assert page.upcoming == []

    page.set_kind_filter("all")
    assert {ok["id"], tried["id"]} <= {row["id"] for row in page.history}
    assert {row["id"]: row["test"] for row in page.history} == {ok["id"]: False, tried["id"]: True}
    assert (page.range_total, page.range_failed) == (production[0] + 1, production[1] + 1)
    page.set_workflow_filter(production_id)  # the other filters still narrow
    assert [row["id"] for row in page.history] == [ok["id"]]

    page.set_kind_filter("bogus")  # an unknown choice is the default
    assert page.kind_filter == "production" and page.error == ""
    assert [row["id"] for row in page.history] == [ok["id"]]
