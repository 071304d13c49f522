"""The monitoring dashboard's backend (issue 10): backend/monitoring and /api/monitor.

Rights (another mandate sees nothing, OWN sees only own runs, foreign filters are 404), filters,
keyset paging, daily counts with zero-filled days and the error rate, AI cost sums, upcoming
schedules, test runs kept apart from production runs in every figure (the `kind` filter), and
the AI cost the engine records per run step (ai.prompt against the scripted OpenAI-compatible
server). On SQLite and PostgreSQL.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlmodel import select

from backend.auth import issue_token
from backend.db import session_scope
from backend.db.models import (
    AccessRule,
    FeatureAccess,
    FeatureAccessRole,
    FeatureInstance,
    Role,
    RunStepLog,
    User,
    Workflow,
    WorkflowRun,
    WorkflowVersion,
)
from backend.errors import InvalidInput, NotFound
from backend.monitoring import (
    MonitorFilter,
    costs,
    daily,
    instance_options,
    list_runs,
    live_runs,
    recent_failures,
    upcoming,
    workflow_options,
)
from backend.rbac.access import AccessContext
from backend.rbac.rights import DATA, RESOURCE, UI
from backend.tenancy import create_feature_instance, create_mandate, grant_instance_roles, grant_mandate_roles

EDITOR = "graphicalEditor"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
MANUAL = {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}}], "edges": []}


def _schedule(**parameters) -> dict:
    return {"nodes": [{"id": "clock", "type": "trigger.schedule", "parameters": parameters}], "edges": []}


@dataclass
class World:
    acme: str
    other: str
    editor_a: str
    editor_b: str
    editor_x: str
    users: dict[str, str]
    workflows: dict[str, str]
    runs: dict[str, str]


def _user(session, name: str) -> User:
    user = User(username=f"{name}-{uuid.uuid4().hex[:6]}", display_name=name.title())
    session.add(user)
    session.flush()
    return user


def _own_runs_role(session, instance) -> Role:
    """An instance role that reads only the runs its holder started."""
    role = Role(role_label="own-runs", mandate_id=instance.mandate_id, feature_instance_id=instance.id,
                feature_code=EDITOR)
    session.add(role)
    session.flush()
    session.add_all([
        AccessRule(role_id=role.id, context=UI, item=f"ui.feature.{EDITOR}.*", view=True),
        AccessRule(role_id=role.id, context=RESOURCE, item=f"resource.feature.{EDITOR}.execute", view=True),
        AccessRule(role_id=role.id, context=DATA, item=f"data.feature.{EDITOR}.workflow", read="all"),
        AccessRule(role_id=role.id, context=DATA, item=f"data.feature.{EDITOR}.workflow_run", read="own",
                   create="all"),
    ])
    return role


def _workflow(session, instance, owner: User, name: str, graph: dict, active: bool = False,
              event_id: str | None = None, published_at: datetime | None = None) -> tuple[str, str]:
    workflow = Workflow(mandate_id=instance.mandate_id, feature_instance_id=instance.id, name=name, active=active,
                        event_id=event_id, sys_created_by=owner.id)
    session.add(workflow)
    session.flush()
    version = WorkflowVersion(workflow_id=workflow.id, version_number=1, status="published", graph=graph,
                              sys_created_by=owner.id, published_at=published_at or NOW - timedelta(days=30))
    session.add(version)
    session.flush()
    return workflow.id, version.id


def _run(session, workflow: tuple[str, str], instance, by: User, status: str, started: datetime,
         seconds: int | None = None, error: str | None = None, costs_chf: tuple[float | None, ...] = (),
         trigger: str = "manual", test: bool = False) -> str:
    run = WorkflowRun(workflow_id=workflow[0], version_id=workflow[1], mandate_id=instance.mandate_id,
                      feature_instance_id=instance.id, status=status, trigger=trigger, error=error, test=test,
                      pause_reason="humanTask" if status == "paused" else None, sys_created_by=by.id,
                      started_at=started, cost_chf=sum(c for c in costs_chf if c is not None) if costs_chf else None,
                      finished_at=started + timedelta(seconds=seconds) if seconds is not None else None)
    session.add(run)
    session.flush()
    for index, cost in enumerate(costs_chf):
        session.add(RunStepLog(run_id=run.id, node_id=f"n{index}", node_type="ai.prompt", status="completed",
                               started_at=started, finished_at=started, duration_ms=5, cost_chf=cost))
    return run.id


@pytest.fixture
def world(app_config) -> World:
    """Mandate Acme (editors A and B) and mandate Other (editor X), with:

    alice: Acme user, editor-user in A and B (reads every run);  carol: reads only her own runs in A;
    dave: Acme member without instance access;  bob: Other's user in X.
    """
    with session_scope() as session:
        acme, other = create_mandate(session, f"Acme {uuid.uuid4().hex[:6]}"), create_mandate(session, "Other")
        a = create_feature_instance(session, acme, EDITOR, "Editor A")
        b = create_feature_instance(session, acme, EDITOR, "Editor B")
        x = create_feature_instance(session, other, EDITOR, "Editor X")
        alice, carol, dave, bob = (_user(session, n) for n in ("alice", "carol", "dave", "bob"))
        for user in (alice, carol, dave):
            grant_mandate_roles(session, user, acme, ["user"])
        grant_mandate_roles(session, bob, other, ["user"])
        grant_instance_roles(session, alice, a, [f"{EDITOR}-user"])
        grant_instance_roles(session, alice, b, [f"{EDITOR}-user"])
        grant_instance_roles(session, bob, x, [f"{EDITOR}-user"])
        access = FeatureAccess(user_id=carol.id, feature_instance_id=a.id)
        session.add(access)
        session.flush()
        session.add(FeatureAccessRole(feature_access_id=access.id, role_id=_own_runs_role(session, a).id))

        wf = {
            "report": _workflow(session, a, alice, "Report", _schedule(cron="0 7 * * *", timezone="UTC"),
                                active=True, event_id="wf:report:clock"),
            "carols": _workflow(session, a, carol, "Carol's", _schedule(cron="0 6 * * *", timezone="UTC"),
                                active=True),
            "sync": _workflow(session, b, alice, "Sync", _schedule(intervalSeconds=900),
                              active=True, published_at=datetime(2026, 11, 1, 0, 5, tzinfo=UTC)),
            "idle": _workflow(session, b, alice, "Idle", _schedule(cron="0 5 * * *"), active=False),
            "foreign": _workflow(session, x, bob, "Foreign", MANUAL),
        }
        day = timedelta(days=1)
        runs = {
            # today (2026-11-20)
            "r_live": _run(session, wf["report"], a, alice, "running", NOW - timedelta(minutes=5)),
            "r_paused": _run(session, wf["report"], a, alice, "paused", NOW - timedelta(minutes=30)),
            "r_ok": _run(session, wf["report"], a, alice, "completed", NOW - timedelta(hours=1), 3,
                         costs_chf=(0.25, None, 0.5), trigger="schedule"),
            "r_fail": _run(session, wf["report"], a, alice, "failed", NOW - timedelta(hours=2), 1,
                           error="node 'x' failed: boom\n--- stack ---\nTraceback ..."),
            "c_ok": _run(session, wf["carols"], a, carol, "completed", NOW - timedelta(hours=3), 2, costs_chf=(1.0,)),
            "c_by_alice": _run(session, wf["carols"], a, alice, "completed", NOW - timedelta(hours=4), 2),
            # yesterday
            "s_ok": _run(session, wf["sync"], b, alice, "completed", NOW - day, 1, costs_chf=(0.125,)),
            "s_cancel": _run(session, wf["sync"], b, alice, "cancelled", NOW - day - timedelta(hours=1), 1),
            "c_fail": _run(session, wf["carols"], a, carol, "failed", NOW - day - timedelta(hours=2), 1,
                           error="nope"),
            # three days ago, and far outside a 14-day window
            "r_old": _run(session, wf["report"], a, alice, "completed", NOW - 3 * day, 10, costs_chf=(2.0,)),
            "r_ancient": _run(session, wf["report"], a, alice, "failed", NOW - 40 * day, 1, error="old"),
            # the other mandate
            "x_ok": _run(session, wf["foreign"], x, bob, "completed", NOW - timedelta(hours=1), 1, costs_chf=(9.0,)),
            "x_live": _run(session, wf["foreign"], x, bob, "running", NOW - timedelta(minutes=1)),
        }
        return World(acme.id, other.id, a.id, b.id, x.id,
                     {"alice": alice.id, "carol": carol.id, "dave": dave.id, "bob": bob.id},
                     {k: v[0] for k, v in wf.items()}, runs)


def _as(session, world: World, name: str) -> AccessContext:
    return AccessContext(session, session.get(User, world.users[name]))


def _ids(rows) -> list[str]:
    return [r.id for r in rows]


def _names(world: World, ids) -> set[str]:
    by_id = {v: k for k, v in world.runs.items()}
    return {by_id[i] for i in ids}


def _all_pages(access, filt: MonitorFilter, limit: int) -> list[str]:
    seen, before = [], None
    while True:
        page = list_runs(access, filt, limit=limit, before=before)
        seen.extend(_ids(page.rows))
        if page.next_before is None:
            return seen
        before = page.next_before


# --- rights ---------------------------------------------------------------------------------------


def test_each_user_sees_only_the_runs_they_may_read(world):
    with session_scope() as session:
        alice, carol, dave, bob = (_as(session, world, n) for n in ("alice", "carol", "dave", "bob"))
        everything = MonitorFilter()
        acme = {"r_live", "r_paused", "r_ok", "r_fail", "c_ok", "c_by_alice", "s_ok", "s_cancel", "c_fail", "r_old",
                "r_ancient"}
        assert _names(world, _all_pages(alice, everything, 50)) == acme
        # OWN: carol reads only the runs she started, even of her own workflow
        assert _names(world, _all_pages(carol, everything, 50)) == {"c_ok", "c_fail"}
        assert _names(world, _all_pages(bob, everything, 50)) == {"x_ok", "x_live"}
        assert list_runs(dave, everything).rows == [] and instance_options(dave) == []
        assert workflow_options(dave) == [] and upcoming(dave, everything, now=NOW) == []
        assert all(d.total == 0 for d in daily(dave, everything, now=NOW))
        assert costs(dave, everything, now=NOW).total_chf == 0

        assert instance_options(alice) == [(world.editor_a, "Editor A"), (world.editor_b, "Editor B")]
        assert instance_options(carol) == [(world.editor_a, "Editor A")]
        assert instance_options(bob) == [(world.editor_x, "Editor X")]
        assert [w[1] for w in workflow_options(alice)] == ["Carol's", "Idle", "Report", "Sync"]
        assert [w[1] for w in workflow_options(alice, world.editor_b)] == ["Idle", "Sync"]
        assert {w[2] for w in workflow_options(carol)} == {world.editor_a}

        # what the user may not read is not found, like what does not exist
        for filt in (MonitorFilter(instance_id=world.editor_x), MonitorFilter(workflow_id=world.workflows["foreign"]),
                     MonitorFilter(instance_id="missing"), MonitorFilter(workflow_id="missing")):
            for call in (list_runs, live_runs, recent_failures):
                with pytest.raises(NotFound):
                    call(alice, filt)
            with pytest.raises(NotFound):
                daily(alice, filt)
        with pytest.raises(NotFound):
            list_runs(carol, MonitorFilter(workflow_id=world.workflows["sync"]))
        with pytest.raises(NotFound):
            workflow_options(carol, world.editor_b)
        with pytest.raises(InvalidInput) as invalid:
            list_runs(alice, MonitorFilter(status="done"))
        assert invalid.value.errors[0].field == "status"
        with pytest.raises(InvalidInput) as invalid:
            list_runs(alice, MonitorFilter(), limit=0)
        assert invalid.value.errors[0].field == "limit"


# --- runs -----------------------------------------------------------------------------------------


def test_filters_paging_and_run_rows(world):
    with session_scope() as session:
        alice = _as(session, world, "alice")
        newest_first = _all_pages(alice, MonitorFilter(), 50)
        assert newest_first[:4] == [world.runs[k] for k in ("r_live", "r_paused", "r_ok", "r_fail")]
        assert newest_first[-1] == world.runs["r_ancient"]
        # any page size gives the same runs in the same order, none twice
        for size in (1, 2, 3, 4):
            assert _all_pages(alice, MonitorFilter(), size) == newest_first

        first = list_runs(alice, MonitorFilter(), limit=3)
        assert len(first.rows) == 3 and first.next_before and first.next_before.endswith(f"|{first.rows[-1].id}")
        ok = next(r for r in list_runs(alice, MonitorFilter(), limit=10).rows if r.id == world.runs["r_ok"])
        assert (ok.workflow_name, ok.instance_label, ok.status, ok.trigger) == ("Report", "Editor A", "completed",
                                                                                 "schedule")
        assert ok.cost_chf == pytest.approx(0.75) and ok.duration_ms == 3000 and ok.started_at.tzinfo is not None
        failed = next(r for r in list_runs(alice, MonitorFilter(status="failed")).rows if r.id == world.runs["r_fail"])
        assert failed.error == "node 'x' failed: boom" and failed.cost_chf == 0.0
        paused = list_runs(alice, MonitorFilter(status="paused")).rows
        assert _ids(paused) == [world.runs["r_paused"]] and paused[0].pause_reason == "humanTask"
        assert paused[0].duration_ms is None and paused[0].finished_at is None

        by_instance = _names(world, _all_pages(alice, MonitorFilter(instance_id=world.editor_b), 50))
        assert by_instance == {"s_ok", "s_cancel"}
        by_workflow = _names(world, _all_pages(alice, MonitorFilter(workflow_id=world.workflows["carols"]), 50))
        assert by_workflow == {"c_ok", "c_by_alice", "c_fail"}
        window = MonitorFilter(since=NOW - timedelta(days=2), until=NOW - timedelta(hours=12))
        assert _names(world, _all_pages(alice, window, 50)) == {"s_ok", "s_cancel", "c_fail"}
        naive = MonitorFilter(since=(NOW - timedelta(hours=1, minutes=1)).replace(tzinfo=None))
        assert _names(world, _all_pages(alice, naive, 50)) == {"r_live", "r_paused", "r_ok"}
        # a plain ISO time as the cursor: runs started before it
        assert _names(world, _ids(list_runs(alice, MonitorFilter(), before=(NOW - timedelta(days=2)).isoformat())
                                  .rows)) == {"r_old", "r_ancient"}


def test_live_runs_and_recent_failures(world):
    with session_scope() as session:
        alice, carol = _as(session, world, "alice"), _as(session, world, "carol")
        assert _ids(live_runs(alice, MonitorFilter())) == [world.runs["r_live"], world.runs["r_paused"]]
        assert live_runs(carol, MonitorFilter()) == []
        assert live_runs(alice, MonitorFilter(status="failed")) == []
        assert _ids(live_runs(alice, MonitorFilter(status="paused"))) == [world.runs["r_paused"]]
        failures = recent_failures(alice, MonitorFilter())
        assert _ids(failures) == [world.runs[k] for k in ("r_fail", "c_fail", "r_ancient")]
        assert _ids(recent_failures(alice, MonitorFilter(), limit=1)) == [world.runs["r_fail"]]
        assert _ids(recent_failures(carol, MonitorFilter())) == [world.runs["c_fail"]]
        assert recent_failures(alice, MonitorFilter(status="completed")) == []


# --- aggregates -----------------------------------------------------------------------------------


def test_daily_counts_are_zero_filled_with_the_error_rate(world):
    with session_scope() as session:
        alice, carol = _as(session, world, "alice"), _as(session, world, "carol")
        days = daily(alice, MonitorFilter(), days=5, now=NOW)
        assert [d.day for d in days] == [date(2026, 11, 16) + timedelta(days=n) for n in range(5)]
        by_day = {d.day: d for d in days}
        today, yesterday = by_day[date(2026, 11, 20)], by_day[date(2026, 11, 19)]
        assert (today.total, today.completed, today.failed, today.cancelled) == (6, 3, 1, 0)
        assert today.error_rate == pytest.approx(1 / 4)
        assert (yesterday.total, yesterday.completed, yesterday.failed, yesterday.cancelled) == (3, 1, 1, 1)
        assert yesterday.error_rate == pytest.approx(1 / 3)
        assert by_day[date(2026, 11, 17)].total == 1 and by_day[date(2026, 11, 17)].error_rate == 0
        assert by_day[date(2026, 11, 16)].total == 0 and by_day[date(2026, 11, 18)].total == 0
        assert [d.total for d in daily(carol, MonitorFilter(), days=2, now=NOW)] == [1, 1]
        only_b = daily(alice, MonitorFilter(instance_id=world.editor_b), days=2, now=NOW)
        assert [(d.total, d.cancelled) for d in only_b] == [(2, 1), (0, 0)]
        # `until` ends the window on its day
        ended = daily(alice, MonitorFilter(until=datetime(2026, 11, 20, tzinfo=UTC)), days=2, now=NOW)
        assert [(d.day, d.total) for d in ended] == [(date(2026, 11, 18), 0), (date(2026, 11, 19), 3)]
        assert len(daily(alice, MonitorFilter(), now=NOW)) == 14
        with pytest.raises(InvalidInput):
            daily(alice, MonitorFilter(), days=0)


def test_costs_are_summed_per_workflow_and_day(world):
    with session_scope() as session:
        alice, carol = _as(session, world, "alice"), _as(session, world, "carol")
        report = costs(alice, MonitorFilter(), days=7, now=NOW)
        assert report.total_chf == pytest.approx(0.75 + 1.0 + 0.125 + 2.0)
        by_workflow = {r.key: r for r in report.by_workflow}
        assert by_workflow[world.workflows["report"]].cost_chf == pytest.approx(2.75)
        assert by_workflow[world.workflows["report"]].runs == 5  # r_ancient is outside the window
        assert by_workflow[world.workflows["report"]].label == "Report"
        assert (by_workflow[world.workflows["carols"]].cost_chf, by_workflow[world.workflows["carols"]].runs) == (
            pytest.approx(1.0), 3)
        assert report.by_workflow[0].key == world.workflows["report"]  # the most expensive first
        assert world.workflows["foreign"] not in by_workflow
        assert [r.key for r in report.by_day] == [(date(2026, 11, 14) + timedelta(days=n)).isoformat()
                                                  for n in range(7)]
        day = {r.key: r for r in report.by_day}
        assert (day["2026-11-20"].cost_chf, day["2026-11-20"].runs) == (pytest.approx(1.75), 6)
        assert (day["2026-11-19"].cost_chf, day["2026-11-19"].runs) == (pytest.approx(0.125), 3)
        assert (day["2026-11-17"].cost_chf, day["2026-11-18"].cost_chf) == (pytest.approx(2.0), 0.0)
        own = costs(carol, MonitorFilter(), days=7, now=NOW)
        assert own.total_chf == pytest.approx(1.0) and [r.runs for r in own.by_workflow] == [2]
        assert costs(alice, MonitorFilter(status="failed"), days=7, now=NOW).total_chf == 0


def test_upcoming_scheduled_runs_soonest_first(world):
    with session_scope() as session:
        alice, carol = _as(session, world, "alice"), _as(session, world, "carol")
        rows = upcoming(alice, MonitorFilter(), now=NOW)
        # Sync every 15 min from 00:05 → 12:05; Report 07:00 and Carol's 06:00 tomorrow; Idle is inactive
        assert [(r.workflow_name, r.next_run) for r in rows] == [
            ("Sync", datetime(2026, 11, 20, 12, 5, tzinfo=UTC)),
            ("Carol's", datetime(2026, 11, 21, 6, 0, tzinfo=UTC)),
            ("Report", datetime(2026, 11, 21, 7, 0, tzinfo=UTC)),
        ]
        assert [r.registered for r in rows] == [False, False, True]
        assert rows[0].schedule == "every 15 min (UTC)" and rows[0].instance_label == "Editor B"
        assert rows[2].schedule == "every day 07:00 (0 7 * * *, UTC)"
        assert [r.workflow_name for r in upcoming(alice, MonitorFilter(), limit=1, now=NOW)] == ["Sync"]
        assert [r.workflow_name for r in upcoming(alice, MonitorFilter(instance_id=world.editor_a), now=NOW)] == [
            "Carol's", "Report"]
        # OWN: only the schedules of workflows carol created (their runs are hers)
        assert [r.workflow_name for r in upcoming(carol, MonitorFilter(), now=NOW)] == ["Carol's"]


# --- test runs and production runs -----------------------------------------------------------------


def _add_test_runs(world: World) -> dict[str, str]:
    """Test runs (of a draft, or retries of one) beside the world's production runs: today three
    finished ones of Report (two failed, one with an AI cost) and a live one; yesterday Carol's own."""
    with session_scope() as session:
        a = session.get(FeatureInstance, world.editor_a)
        alice, carol = session.get(User, world.users["alice"]), session.get(User, world.users["carol"])

        def version(key: str) -> tuple[str, str]:
            workflow_id = world.workflows[key]
            return workflow_id, session.exec(select(WorkflowVersion.id).where(
                WorkflowVersion.workflow_id == workflow_id)).first()

        report, carols = version("report"), version("carols")
        return {
            "t_fail": _run(session, report, a, alice, "failed", NOW - timedelta(minutes=10), 1, error="tried",
                           test=True),
            "t_fail2": _run(session, report, a, alice, "failed", NOW - timedelta(minutes=20), 1, error="again",
                            test=True),
            "t_ok": _run(session, report, a, alice, "completed", NOW - timedelta(minutes=15), 2, costs_chf=(4.0,),
                         test=True),
            "t_live": _run(session, report, a, alice, "running", NOW - timedelta(minutes=2), test=True),
            "c_test": _run(session, carols, a, carol, "failed", NOW - timedelta(days=1, minutes=5), 1, error="x",
                           test=True),
        }


def _figures(access: AccessContext, filt: MonitorFilter) -> tuple:
    """Everything the Monitor shows for `filt`: runs, live runs, failures, runs per day, costs, schedules."""
    return (_all_pages(access, filt, 50), _ids(live_runs(access, filt)), _ids(recent_failures(access, filt)),
            daily(access, filt, days=5, now=NOW), costs(access, filt, days=7, now=NOW),
            [r.workflow_name for r in upcoming(access, filt, now=NOW)])


def test_test_runs_are_kept_apart_from_production_runs_in_every_figure(world):
    with session_scope() as session:
        production_before = _figures(_as(session, world, "alice"), MonitorFilter())
        carol_before = _figures(_as(session, world, "carol"), MonitorFilter())
    test_runs = _add_test_runs(world)
    with session_scope() as session:
        alice, carol = _as(session, world, "alice"), _as(session, world, "carol")
        # The default is production: trying things out changes no figure (error rate included).
        assert MonitorFilter().kind == "production"
        assert _figures(alice, MonitorFilter()) == production_before
        assert _figures(alice, MonitorFilter(kind="production")) == production_before
        assert _figures(carol, MonitorFilter()) == carol_before
        assert not any(r.test for r in list_runs(alice, MonitorFilter()).rows)

        # "test": only the test runs, in every figure
        test = MonitorFilter(kind="test")
        runs, live, failures, days, report, schedules = _figures(alice, test)
        assert runs == [test_runs[k] for k in ("t_live", "t_fail", "t_ok", "t_fail2", "c_test")]  # newest first
        assert all(r.test for r in list_runs(alice, test).rows)
        assert live == [test_runs["t_live"]]
        assert failures == [test_runs[k] for k in ("t_fail", "t_fail2", "c_test")]
        today, yesterday = days[-1], days[-2]
        assert (today.total, today.completed, today.failed) == (4, 1, 2)
        assert today.error_rate == pytest.approx(2 / 3)
        assert (yesterday.total, yesterday.failed) == (1, 1) and sum(d.total for d in days) == 5
        assert report.total_chf == pytest.approx(4.0)
        assert {(r.label, r.runs) for r in report.by_workflow} == {("Report", 4), ("Carol's", 1)}
        assert schedules == []  # schedules start production runs
        # OWN holds for test runs too: carol reads her own test run, not alice's
        assert _all_pages(carol, test, 50) == [test_runs["c_test"]]
        # narrowed further by status and workflow like any filter
        assert _ids(list_runs(alice, MonitorFilter(kind="test", status="failed")).rows) == [
            test_runs[k] for k in ("t_fail", "t_fail2", "c_test")]
        assert list_runs(alice, MonitorFilter(kind="test", workflow_id=world.workflows["sync"])).rows == []

        # "all": both, added up
        everything = MonitorFilter(kind="all")
        runs, live, failures, days, report, schedules = _figures(alice, everything)
        assert set(runs) == set(production_before[0]) | set(test_runs.values())
        assert live == [test_runs["t_live"], *production_before[1]]
        assert failures[:2] == [test_runs["t_fail"], test_runs["t_fail2"]]
        before_today = production_before[3][-1]
        assert days[-1].total == before_today.total + 4 and days[-1].failed == before_today.failed + 2
        assert report.total_chf == pytest.approx(production_before[4].total_chf + 4.0)
        assert schedules == production_before[5]
        assert {r.id for r in list_runs(alice, everything, limit=100).rows if r.test} == set(test_runs.values())

        with pytest.raises(InvalidInput) as invalid:
            list_runs(alice, MonitorFilter(kind="drafts"))
        assert invalid.value.errors[0].field == "kind"


def test_rest_counts_production_runs_unless_asked_for_test_runs(api, world):
    test_runs = _add_test_runs(world)
    with session_scope() as session:
        token = issue_token(session, session.get(User, world.users["alice"])).token
    headers = {"Authorization": f"Bearer {token}"}

    def runs(**params) -> list[dict]:
        answer = api.client.get("/api/monitor/runs", params={"limit": 100, **params}, headers=headers)
        assert answer.status_code == 200, answer.text
        return answer.json()["items"]

    production = runs()
    assert production and not any(item["test"] for item in production)
    assert runs(kind="production") == production
    tested = runs(kind="test")
    assert {item["id"] for item in tested} == set(test_runs.values())
    assert all(item["test"] for item in tested)
    assert len(runs(kind="all")) == len(production) + len(tested)

    def overview(**params) -> dict:
        # the window ends on the world's day, NOW
        until = datetime.combine(NOW.date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC).isoformat()
        answer = api.client.get("/api/monitor/overview", params={"days": 3, "until": until, **params},
                                headers=headers)
        assert answer.status_code == 200, answer.text
        return answer.json()

    default, test = overview(), overview(kind="test")
    assert [i["id"] for i in test["live"]] == [test_runs["t_live"]]
    assert test["recentFailures"][0]["id"] == test_runs["t_fail"] and test["upcoming"] == []
    assert test["daily"][-1]["total"] == 4 and test["daily"][-1]["errorRate"] == pytest.approx(2 / 3)
    assert test["daily"][-2]["total"] == 1 and test["costs"]["totalChf"] == pytest.approx(4.0)
    assert test_runs["t_fail"] not in {i["id"] for i in default["recentFailures"]}
    assert default["daily"][-1]["total"] == overview(kind="all")["daily"][-1]["total"] - 4

    for path in ("/api/monitor/runs", "/api/monitor/overview"):
        bad = api.client.get(path, params={"kind": "drafts"}, headers=headers)
        assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "kind", bad.text
    document = api.client.get("/api/openapi.json").json()
    for path in ("/api/monitor/runs", "/api/monitor/overview"):
        parameter = next(p for p in document["paths"][path]["get"]["parameters"] if p["name"] == "kind")
        assert parameter["in"] == "query" and not parameter.get("required", False)
        assert parameter["schema"]["enum"] == ["production", "test", "all"]
        assert parameter["schema"]["default"] == "production"


def test_runs_of_a_draft_and_their_retries_are_test_runs_published_ones_production(api):
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}},
                       {"id": "echo", "type": "context.transform",
                        "parameters": {"data": "{{ input }}", "template": "hi"}}],
             "edges": [{"source": "start", "target": "echo"}]}
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex}", "graph": graph},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    workflow_id = created.json()["id"]
    draft_run = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs", json={}, headers=api.auth).json()
    assert draft_run["status"] == "completed", draft_run
    published = api.client.post(f"{api.base()}/workflows/{workflow_id}/publish", headers=api.auth)
    assert published.status_code == 200, published.text
    live_run = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs", json={}, headers=api.auth).json()
    assert live_run["status"] == "completed", live_run

    def listed(kind: str) -> list[str]:
        answer = api.client.get("/api/monitor/runs", params={"workflowId": workflow_id, "kind": kind},
                                headers=api.auth)
        assert answer.status_code == 200, answer.text
        return [item["id"] for item in answer.json()["items"]]

    assert listed("production") == [live_run["id"]]
    assert listed("test") == [draft_run["id"]]
    assert listed("all") == [live_run["id"], draft_run["id"]]
    with session_scope() as session:
        assert session.get(WorkflowRun, draft_run["id"]).test is True
        assert session.get(WorkflowRun, live_run["id"]).test is False


# --- REST -----------------------------------------------------------------------------------------


def test_rest_runs_and_overview(api, world):
    with session_scope() as session:
        token = issue_token(session, session.get(User, world.users["alice"])).token
    headers = {"Authorization": f"Bearer {token}"}
    first = api.client.get("/api/monitor/runs", params={"limit": 2}, headers=headers)
    assert first.status_code == 200, first.text
    body = first.json()
    assert [i["id"] for i in body["items"]] == [world.runs["r_live"], world.runs["r_paused"]]
    assert body["nextBefore"] and {"workflowName", "instanceLabel", "costChf", "durationMs", "pauseReason"} <= set(
        body["items"][0])
    second = api.client.get("/api/monitor/runs", params={"limit": 2, "before": body["nextBefore"]}, headers=headers)
    assert [i["id"] for i in second.json()["items"]] == [world.runs["r_ok"], world.runs["r_fail"]]
    assert second.json()["items"][0]["costChf"] == pytest.approx(0.75)
    filtered = api.client.get("/api/monitor/runs", headers=headers, params={
        "instanceId": world.editor_b, "status": "cancelled", "since": (NOW - timedelta(days=3)).isoformat()})
    assert [i["id"] for i in filtered.json()["items"]] == [world.runs["s_cancel"]]

    bad = api.client.get("/api/monitor/runs", params={"status": "done"}, headers=headers)
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "status"
    for params in ({"instanceId": world.editor_x}, {"workflowId": world.workflows["foreign"]}):
        assert api.client.get("/api/monitor/runs", params=params, headers=headers).status_code == 404
        assert api.client.get("/api/monitor/overview", params=params, headers=headers).status_code == 404
    assert api.client.get("/api/monitor/runs").status_code == 401

    overview = api.client.get("/api/monitor/overview", params={"days": 3}, headers=headers)
    assert overview.status_code == 200, overview.text
    data = overview.json()
    assert set(data) == {"live", "upcoming", "daily", "costs", "recentFailures"}
    assert [i["id"] for i in data["live"]] == [world.runs["r_live"], world.runs["r_paused"]]
    assert len(data["daily"]) == 3 and {"errorRate", "day", "total"} <= set(data["daily"][0])
    assert {"byWorkflow", "byDay", "totalChf"} <= set(data["costs"]) and len(data["costs"]["byDay"]) == 3
    assert {u["workflowName"] for u in data["upcoming"]} == {"Sync", "Carol's", "Report"}
    assert [i["id"] for i in data["recentFailures"]][:1] == [world.runs["r_fail"]]


# --- AI cost per run step -----------------------------------------------------------------------


def test_the_engine_records_each_steps_ai_cost(api, ai_server):
    ai_server.reply("Hello there.", usage={"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500})
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}},
                       {"id": "ask", "type": "ai.prompt", "parameters": {"prompt": "Say hi", "model": "gpt-4o-mini"}}],
             "edges": [{"source": "start", "target": "ask"}]}
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex}", "graph": graph},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    run = api.client.post(f"{api.base()}/workflows/{created.json()['id']}/runs", json={}, headers=api.auth).json()
    assert run["status"] == "completed", run
    steps = {s["nodeId"]: s for s in run["steps"]}
    expected = (1000 * 0.15 + 500 * 0.60) * 0.80 / 1_000_000  # gpt-4o-mini list price in CHF
    assert steps["ask"]["costChf"] == pytest.approx(expected) and steps["ask"]["costChf"] > 0
    assert steps["start"]["costChf"] is None
    with session_scope() as session:
        stored = session.exec(select(RunStepLog).where(RunStepLog.run_id == run["id"],
                                                       RunStepLog.node_id == "ask")).one()
        assert stored.cost_chf == pytest.approx(expected)
    # a REST run of the draft is a test run
    listed = api.client.get("/api/monitor/runs", params={"workflowId": created.json()["id"], "kind": "test"},
                            headers=api.auth).json()
    assert listed["items"][0]["costChf"] == pytest.approx(expected)


def test_parallel_ai_branches_each_record_their_cost_and_the_run_adds_them_up(api, ai_server):
    usage = {"prompt_tokens": 2000, "completion_tokens": 1000, "total_tokens": 3000}
    ai_server.reply("one", usage=usage).reply("two", usage=usage)
    ask = {"type": "ai.prompt", "parameters": {"prompt": "Say hi", "model": "gpt-4o-mini"}}
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}}, {"id": "a", **ask},
                       {"id": "b", **ask}],
             "edges": [{"source": "start", "target": "a"}, {"source": "start", "target": "b"}]}
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex}", "graph": graph},
                              headers=api.auth).json()
    run = api.client.post(f"{api.base()}/workflows/{created['id']}/runs", json={}, headers=api.auth).json()
    assert run["status"] == "completed", run
    each = (2000 * 0.15 + 1000 * 0.60) * 0.80 / 1_000_000
    steps = {s["nodeId"]: s for s in run["steps"]}
    assert steps["a"]["costChf"] == pytest.approx(each) and steps["b"]["costChf"] == pytest.approx(each)
    with session_scope() as session:
        assert session.get(WorkflowRun, run["id"]).cost_chf == pytest.approx(2 * each)
