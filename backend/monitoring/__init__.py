"""The monitoring dashboard's backend (issue 10): runs, live runs, schedules, daily figures, AI costs."""

from backend.monitoring.service import (
    ALL_RUNS,
    KINDS,
    PRODUCTION,
    TEST,
    CostReport,
    CostRow,
    DayRow,
    MonitorFilter,
    Overview,
    RunPage,
    RunRow,
    UpcomingRow,
    costs,
    daily,
    instance_options,
    list_runs,
    live_runs,
    overview,
    recent_failures,
    upcoming,
    workflow_options,
)

__all__ = [
    "ALL_RUNS", "KINDS", "PRODUCTION", "TEST",
    "CostReport", "CostRow", "DayRow", "MonitorFilter", "Overview", "RunPage", "RunRow", "UpcomingRow", "costs",
    "daily", "instance_options", "list_runs", "live_runs", "overview", "recent_failures", "upcoming",
    "workflow_options",
]
