"""The Monitor page: what runs, what failed and what waits, across the user's Graphical Editor instances."""

import reflex as rx

from components.shell import PHONE, TAP, empty_state, gated, page_shell
from components.tables import data_table
from state.monitor import (
    ALL,
    KINDS,
    PRODUCTION,
    RANGES,
    STATUSES,
    TEST,
    CostLine,
    FailureRow,
    HistoryRow,
    LiveRow,
    MonitorState,
    UpcomingView,
)

REFRESH_MS = 3000
STATUS_COLORS = {"running": "blue", "paused": "amber", "completed": "green", "failed": "red", "cancelled": "gray"}
CHART_COLORS = {"completed": "var(--green-9)", "failed": "var(--red-9)", "cancelled": "var(--gray-8)"}
NO_RUNS = "No runs in this range"
NO_TEST_SCHEDULES = ("Schedules start production runs: choose \u201cProduction runs\u201d or \u201cAll runs\u201d "
                     "to see them.")
# Under the default "Production runs", an empty card says where the editor's test runs are.
NO_PRODUCTION_RUNS = "No production runs in this range. Test runs from the editor are under \u201cTest runs\u201d."


def status_badge(status) -> rx.Component:
    return rx.badge(
        status,
        color_scheme=rx.match(status, *[(s, c) for s, c in STATUS_COLORS.items()], "gray"),
        variant="soft",
        class_name="status-badge",
    )


def test_badge(is_test) -> rx.Component:
    """Marks a test run (of a draft) where test and production runs are listed together."""
    return rx.cond(is_test, rx.badge("test", color_scheme="violet", variant="outline", size="1",
                                     class_name="test-run-badge"))


def nothing(text, element_id: str) -> rx.Component:
    return rx.text(text, color_scheme="gray", size="2", id=element_id, padding_y="0.5em")


def no_runs(element_id: str) -> rx.Component:
    """The empty text of a card counting runs in the range: under "Production runs" it points to the test runs."""
    return nothing(rx.cond(MonitorState.kind_filter == PRODUCTION, NO_PRODUCTION_RUNS, NO_RUNS), element_id)


def section(title: str, icon: str, *children, **props) -> rx.Component:
    return rx.card(
        rx.vstack(
            rx.hstack(rx.icon(icon, size=18), rx.heading(title, size="3"), align="center", spacing="2"),
            *children,
            spacing="3",
            width="100%",
        ),
        width="100%",
        **props,
    )


# --- filters -----------------------------------------------------------------------------------------


def _select(element_id: str, value, on_change, items, placeholder: str, width: str = "14em") -> rx.Component:
    return rx.select.root(
        rx.select.trigger(placeholder=placeholder, id=element_id, width=width),
        rx.select.content(*items) if isinstance(items, list) else rx.select.content(items),
        value=value,
        on_change=on_change,
    )


def filters() -> rx.Component:
    return rx.hstack(
        _select("monitor-kind", MonitorState.kind_filter, MonitorState.set_kind_filter,
                [rx.select.item(label, value=key) for key, label in KINDS.items()], "Runs", width="11em"),
        _select("monitor-instance", MonitorState.instance_filter, MonitorState.set_instance_filter,
                rx.fragment(rx.select.item("All instances", value=ALL),
                            rx.foreach(MonitorState.instances, lambda o: rx.select.item(o["label"], value=o["id"]))),
                "Instance"),
        _select("monitor-workflow", MonitorState.workflow_filter, MonitorState.set_workflow_filter,
                rx.fragment(rx.select.item("All workflows", value=ALL),
                            rx.foreach(MonitorState.workflow_choices,
                                       lambda o: rx.select.item(o["label"], value=o["id"]))),
                "Workflow", width="18em"),
        _select("monitor-status", MonitorState.status_filter, MonitorState.set_status_filter,
                [rx.select.item("All statuses", value=ALL), *[rx.select.item(s, value=s) for s in STATUSES]],
                "Status", width="10em"),
        _select("monitor-range", MonitorState.range_filter, MonitorState.set_range_filter,
                [rx.select.item(label, value=key) for key, (label, _back, _days) in RANGES.items()],
                "Time range", width="11em"),
        spacing="3",
        wrap="wrap",
        align="center",
        id="monitor-filters",
    )


# --- counters and live runs --------------------------------------------------------------------------


def counter(label: str, value, element_id: str, color: str = "gray") -> rx.Component:
    return rx.card(
        rx.vstack(
            rx.text(label, size="1", color_scheme="gray"),
            rx.text(value, size="6", weight="bold", color_scheme=color, id=element_id),
            spacing="1",
        ),
        min_width="10em",
    )


def counters() -> rx.Component:
    return rx.hstack(
        counter("Running now", MonitorState.running_count, "count-running", "blue"),
        counter("Waiting", MonitorState.paused_count, "count-paused", "amber"),
        counter("Runs in range", MonitorState.range_total, "count-total"),
        counter("Failed in range", MonitorState.range_failed, "count-failed", "red"),
        counter("Error rate", MonitorState.range_error_rate, "count-error-rate"),
        counter("Cost in range", MonitorState.cost_total, "count-cost"),
        spacing="3",
        wrap="wrap",
        width="100%",
        id="monitor-counters",
    )


def live_run(row: LiveRow) -> rx.Component:
    return rx.hstack(
        status_badge(row["status"]),
        rx.link(row["workflow"], href=row["href"], weight="medium", class_name="live-workflow"),
        test_badge(row["test"]),
        rx.text(row["instance"], size="1", color_scheme="gray"),
        rx.spacer(),
        rx.cond(row["pause_reason"] != "",
                rx.text(row["pause_reason"], size="2", color_scheme="amber", class_name="live-pause-reason")),
        rx.text("started ", row["started"], size="2", color_scheme="gray"),
        rx.text(row["running_for"], size="2", weight="medium", class_name="live-duration", min_width="5em",
                text_align="right"),
        width="100%",
        align="center",
        spacing="3",
        padding="0.4em 0.6em",
        border_radius="6px",
        background_color=rx.color("gray", 2),
        class_name="live-run",
    )


def live_card() -> rx.Component:
    return section(
        "Running now", "activity",
        rx.cond(
            MonitorState.live.length() > 0,
            rx.vstack(rx.foreach(MonitorState.live, live_run), width="100%", spacing="2"),
            nothing("Nothing runs or waits right now.", "live-empty"),
        ),
        # A client-side timer: it exists only while the page is open, so the polling stops with it.
        rx.moment(interval=REFRESH_MS, format="HH:mm:ss", on_change=MonitorState.tick, display="none"),
        id="live-runs",
    )


# --- upcoming runs -----------------------------------------------------------------------------------


def upcoming_row(row: UpcomingView) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.link(row["workflow"], href="/editor/" + row["workflow_id"]),
                      rx.text(row["instance"], size="1", color_scheme="gray")),
        rx.table.cell(row["next_run"]),
        rx.table.cell(rx.code(row["schedule"], variant="ghost")),
        rx.table.cell(rx.badge(row["registered"], color_scheme=rx.cond(row["registered"] == "yes", "green", "orange"),
                               variant="soft")),
        class_name="upcoming-row",
    )


def upcoming_card() -> rx.Component:
    return section(
        "Next scheduled runs", "calendar-clock",
        rx.cond(
            MonitorState.upcoming.length() > 0,
            data_table(("Workflow", "Next run", "Schedule", "Registered"), MonitorState.upcoming, upcoming_row,
                       "upcoming-table"),
            nothing(rx.cond(MonitorState.kind_filter == TEST, NO_TEST_SCHEDULES, "No scheduled runs ahead."),
                    "upcoming-empty"),
        ),
        id="upcoming-runs",
    )


# --- charts --------------------------------------------------------------------------------------------


def runs_chart() -> rx.Component:
    return section(
        "Runs per day", "chart-column",
        rx.cond(
            MonitorState.range_total > 0,
            rx.recharts.bar_chart(
                rx.recharts.cartesian_grid(stroke_dasharray="3 3"),
                rx.recharts.x_axis(data_key="day"),
                rx.recharts.y_axis(allow_decimals=False),
                rx.recharts.graphing_tooltip(),
                rx.recharts.legend(),
                *[rx.recharts.bar(data_key=key, stack_id="runs", fill=color, name=key)
                  for key, color in CHART_COLORS.items()],
                data=MonitorState.days,
                width="100%",
                height=240,
            ),
            no_runs("runs-per-day-empty"),
        ),
        id="runs-per-day",
        min_width="0",
    )


def error_chart() -> rx.Component:
    return section(
        "Error rate per day (%)", "chart-line",
        rx.cond(
            MonitorState.range_total > 0,
            rx.recharts.line_chart(
                rx.recharts.cartesian_grid(stroke_dasharray="3 3"),
                rx.recharts.x_axis(data_key="day"),
                rx.recharts.y_axis(domain=[0, 100], unit="%"),
                rx.recharts.graphing_tooltip(),
                rx.recharts.line(data_key="error_rate", stroke="var(--red-9)", name="error rate %",
                                 type_="monotone"),
                data=MonitorState.days,
                width="100%",
                height=240,
            ),
            no_runs("error-rate-empty"),
        ),
        id="error-rate",
        min_width="0",
    )


# --- costs ---------------------------------------------------------------------------------------------


def cost_row(row: CostLine) -> rx.Component:
    return rx.table.row(
        rx.table.cell(row["label"]),
        rx.table.cell(row["runs"], text_align="right"),
        rx.table.cell(row["cost"], text_align="right"),
        class_name="cost-row",
    )


def costs_card() -> rx.Component:
    return section(
        "Cost in CHF", "coins",
        rx.hstack(rx.text("Total in range:", size="2", color_scheme="gray"),
                  rx.text(MonitorState.cost_total, weight="bold", id="cost-total"), spacing="2", align="center"),
        rx.cond(
            MonitorState.costs_by_workflow.length() > 0,
            rx.grid(
                rx.box(
                    rx.text("Per workflow (top 10)", size="2", weight="medium"),
                    data_table(("Workflow", "Runs", "Cost"), MonitorState.costs_by_workflow, cost_row,
                               "costs-by-workflow"),
                ),
                rx.box(
                    rx.text("Per day", size="2", weight="medium"),
                    rx.recharts.bar_chart(
                        rx.recharts.cartesian_grid(stroke_dasharray="3 3"),
                        rx.recharts.x_axis(data_key="day"),
                        rx.recharts.y_axis(),
                        rx.recharts.graphing_tooltip(),
                        rx.recharts.bar(data_key="cost", fill="var(--accent-9)", name="CHF"),
                        data=MonitorState.costs_by_day,
                        width="100%",
                        height=220,
                    ),
                    id="costs-by-day",
                    min_width="0",
                ),
                columns=rx.breakpoints(initial="1", lg="2"),
                spacing="4",
                width="100%",
            ),
            no_runs("costs-empty"),
        ),
        id="costs",
    )


# --- failures and history -------------------------------------------------------------------------------


def failure_row(row: FailureRow) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.hstack(rx.text(row["workflow"], weight="medium"), test_badge(row["test"]), spacing="2",
                                align="center")),
        rx.table.cell(rx.text(row["when"], size="2", white_space="nowrap")),
        rx.table.cell(rx.text(row["error"], size="2", color_scheme="red", class_name="failure-error")),
        rx.table.cell(rx.link(rx.icon("square-arrow-out-up-right", size=14), "Open trace", href=row["href"],
                              class_name="open-trace", size="2", white_space="nowrap")),
        class_name="failure-row",
    )


def failures_card() -> rx.Component:
    return section(
        "Recent failures", "triangle-alert",
        rx.cond(
            MonitorState.failures.length() > 0,
            data_table(("Workflow", "When", "Error", ""), MonitorState.failures, failure_row, "failures-table"),
            nothing("No failures in this range.", "failures-empty"),
        ),
        id="recent-failures",
    )


def history_row(row: HistoryRow) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.hstack(rx.link(row["workflow"], href=row["href"], class_name="history-trace"),
                                test_badge(row["test"]), spacing="2", align="center"),
                      rx.text(row["instance"], size="1", color_scheme="gray")),
        rx.table.cell(status_badge(row["status"])),
        rx.table.cell(row["trigger"]),
        rx.table.cell(rx.text(row["started"], white_space="nowrap")),
        rx.table.cell(row["duration"], class_name="history-duration"),
        rx.table.cell(row["cost"], text_align="right"),
        class_name="history-row",
        custom_attrs={"data-run-id": row["id"], "data-test": rx.cond(row["test"], "true", "false")},
    )


def history_card() -> rx.Component:
    return section(
        "Run history", "history",
        rx.cond(
            MonitorState.history.length() > 0,
            data_table(("Workflow", "Status", "Trigger", "Started", "Duration", "Cost"), MonitorState.history,
                       history_row, "history-table"),
            no_runs("history-empty"),
        ),
        rx.hstack(
            rx.text("Page ", MonitorState.history_page, size="2", color_scheme="gray", id="history-page"),
            rx.spacer(),
            rx.button(rx.icon("chevrons-left", size=14), "First page", size="1", variant="soft",
                      on_click=MonitorState.first_history_page, disabled=MonitorState.history_page <= 1,
                      id="history-first"),
            rx.button("Next page", rx.icon("chevron-right", size=14), size="1", variant="soft",
                      on_click=MonitorState.next_history_page, disabled=MonitorState.history_next == "",
                      id="history-next"),
            width="100%",
            align="center",
        ),
        id="run-history",
    )


def messages() -> rx.Component:
    return rx.fragment(
        rx.cond(MonitorState.error != "",
                rx.callout(MonitorState.error, icon="triangle-alert", color_scheme="red", id="monitor-error",
                           width="100%")),
    )


# On a phone: filters and counters two to a line, a live run's parts wrap, the tables are cards
# (components/tables.py) and what is tapped is at least `TAP` high.
PHONE_LAYOUT = {PHONE: {
    "& #monitor-filters": {"width": "100%"},
    "& #monitor-filters > button": {"flex": "1 1 calc(50% - 0.75em)", "width": "auto", "min_width": "0",
                                    "min_height": TAP},
    "& #monitor-counters > *": {"flex": "1 1 calc(50% - 0.75em)", "min_width": "0"},
    "& .live-run": {"flex_wrap": "wrap", "row_gap": "0.25em"},
    "& .live-run > .rt-Text": {"min_width": "0", "overflow_wrap": "anywhere"},
    "& .live-run a": {"min_height": TAP, "display": "inline-flex", "align_items": "center"},
    "& #history-first, & #history-next": {"min_height": TAP},
    "& .failure-error": {"overflow_wrap": "anywhere"},
}}


def dashboard() -> rx.Component:
    return rx.vstack(
        filters(),
        messages(),
        counters(),
        live_card(),
        upcoming_card(),
        rx.grid(runs_chart(), error_chart(), columns=rx.breakpoints(initial="1", lg="2"), spacing="4",
                width="100%"),
        costs_card(),
        failures_card(),
        history_card(),
        width="100%",
        spacing="4",
        style=PHONE_LAYOUT,
    )


def monitor_page() -> rx.Component:
    return page_shell(
        "Monitor",
        gated(
            "nav_graphical_editor", "the Monitor page",
            rx.cond(
                MonitorState.loaded & ~MonitorState.has_instances,
                empty_state("lock", "No runs you may see",
                            "None of your Graphical Editor instances lets you read its runs, so there is nothing "
                            "to monitor. Ask an administrator of your mandate for a role that does."),
                dashboard(),
            ),
        ),
        instance=MonitorState,
    )
