"""Tabular data → a PNG chart (bar, line, pie, scatter) with matplotlib's Agg backend.

The data is a table: column names plus rows of values, or a list of records (objects with the
same keys). One column gives the categories or x values (`x`, default the first column), the
others the series (`y`, default every other column that holds numbers). Everything is checked
before drawing; a problem raises `DocumentError` naming the field, row and column.

Figures are built with `matplotlib.figure.Figure` on an Agg canvas, never through pyplot, so
no global state or GUI backend is involved and concurrent calls do not interfere.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any

from backend.documents.blocks import DocumentError

CHART_TYPES = ("bar", "line", "pie", "scatter")
MAX_CHART_POINTS = 10_000
MAX_SERIES = 20
MAX_PIE_SLICES = 60
MIN_PIXELS, MAX_PIXELS = 200, 3000
DPI = 100
_LABEL_CHARS = 40


@dataclass(frozen=True)
class ChartSpec:
    """What to draw. `rows` or `records` holds the data (exactly one of them)."""

    chart_type: str
    columns: list[str] | None = None
    rows: list[list[Any]] | None = None
    records: list[dict[str, Any]] | None = None
    x: str | None = None
    y: list[str] | None = None
    title: str | None = None
    x_label: str | None = None
    y_label: str | None = None
    width: int = 800
    height: int = 500


@dataclass(frozen=True)
class RenderedChart:
    """A drawn chart: the PNG bytes, the series drawn and how many data points they hold."""

    png: bytes
    series: list[str]
    points: int


@dataclass(frozen=True)
class _Table:
    columns: list[str]
    rows: list[list[Any]]
    source: str  # "rows" or "records", for messages

    def where(self, index: int, column: str) -> str:
        return f"{self.source}[{index}] column '{column}'" if self.source == "rows" else \
            f"records[{index}].{column}"


@dataclass(frozen=True)
class _Plot:
    """Checked data, ready to draw."""

    x_name: str | None  # the x column, None for row numbers
    labels: list[str]  # x as text (categories, pie slices)
    x_numbers: list[float] | None  # x as numbers when every x value is one
    series: dict[str, list[float]]  # name → values (NaN for a missing value)


# --- checking ------------------------------------------------------------------------------

def _table(spec: ChartSpec) -> _Table:
    if spec.records is not None and (spec.rows is not None or spec.columns is not None):
        raise DocumentError("records: give either records or columns with rows, not both")
    if spec.records is not None:
        if not spec.records:
            raise DocumentError("records: no data to chart")
        _check_size(len(spec.records), "records")
        columns = [str(k) for k in spec.records[0]]
        if not columns:
            raise DocumentError("records[0]: the record has no fields")
        rows = []
        for i, record in enumerate(spec.records):
            keys = [str(k) for k in record]
            if set(keys) != set(columns):
                missing = [c for c in columns if c not in keys]
                extra = [k for k in keys if k not in columns]
                detail = "; ".join(part for part in (
                    f"lacks {', '.join(repr(c) for c in missing)}" if missing else "",
                    f"has unknown {', '.join(repr(k) for k in extra)}" if extra else "") if part)
                raise DocumentError(f"records[{i}]: every record needs the same fields as records[0] "
                                    f"({', '.join(columns)}); this one {detail}")
            rows.append([record[c] for c in columns])
        return _Table(columns, rows, "records")
    if spec.columns is None or spec.rows is None:
        raise DocumentError("columns: give the column names and rows (or records instead)")
    columns = [str(c) for c in spec.columns]
    if not columns:
        raise DocumentError("columns: no column names given")
    duplicates = sorted({c for c in columns if columns.count(c) > 1})
    if duplicates:
        raise DocumentError(f"columns: duplicate column names {', '.join(repr(d) for d in duplicates)}")
    if not spec.rows:
        raise DocumentError("rows: no data to chart")
    _check_size(len(spec.rows), "rows")
    for i, row in enumerate(spec.rows):
        if len(row) != len(columns):
            raise DocumentError(f"rows[{i}]: has {_count(len(row), 'value')} but columns names "
                                f"{len(columns)} ({', '.join(columns)})")
    return _Table(columns, [list(r) for r in spec.rows], "rows")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _check_size(count: int, field: str) -> None:
    if count > MAX_CHART_POINTS:
        raise DocumentError(f"{field}: {count:,} rows exceed the limit of {MAX_CHART_POINTS:,} data points")


def _number(value: Any) -> float | None:
    """The value as a finite number, None when missing; raises ValueError when not a number."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        number = float(value.strip().replace("_", "").replace("'", ""))
    else:
        raise ValueError(value)
    if not math.isfinite(number):
        raise ValueError(value)
    return number


def _has_numbers(table: _Table, index: int) -> bool:
    """Whether any value of the column is a number (a series candidate when y is not given)."""
    for row in table.rows:
        try:
            if _number(row[index]) is not None:
                return True
        except (ValueError, TypeError):
            continue
    return False


def _is_complete_numeric(table: _Table, index: int) -> bool:
    try:
        return all(_number(row[index]) is not None for row in table.rows)
    except (ValueError, TypeError):
        return False


def _numbers(table: _Table, column: str, purpose: str) -> list[float]:
    index = table.columns.index(column)
    out = []
    for i, row in enumerate(table.rows):
        try:
            number = _number(row[index])
        except (ValueError, TypeError):
            raise DocumentError(f"{table.where(i, column)}: {_show(row[index])} is not a number "
                                f"({purpose})") from None
        out.append(math.nan if number is None else number)
    return out


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "…"


def _prepare(spec: ChartSpec) -> _Plot:
    if spec.chart_type not in CHART_TYPES:
        raise DocumentError(f"chartType: unknown chart type '{spec.chart_type}' (use {', '.join(CHART_TYPES)})")
    table = _table(spec)
    if spec.x is not None and spec.x not in table.columns:
        raise DocumentError(f"x: no column named '{spec.x}' (columns: {', '.join(table.columns)})")
    for name in spec.y or ():
        if name not in table.columns:
            raise DocumentError(f"y: no column named '{name}' (columns: {', '.join(table.columns)})")
    if spec.y is not None and not spec.y:
        raise DocumentError("y: name at least one column to plot")
    if spec.y and len(set(spec.y)) != len(spec.y):
        raise DocumentError("y: a column is named twice")

    # x: the named column, else the first one when there are others, else the row numbers.
    x = spec.x if spec.x is not None else (table.columns[0] if len(table.columns) > 1 else None)
    if spec.y is not None:
        y = list(spec.y)
    else:
        candidates = [c for c in table.columns if c != x]
        y = [c for c in candidates if _has_numbers(table, table.columns.index(c))]
        if not y:
            raise DocumentError(f"y: no column with numbers to plot besides x ('{x}'); "
                                f"columns: {', '.join(table.columns)}")
    if x is not None and x in y:
        raise DocumentError(f"y: column '{x}' is already the x column")
    if len(y) > MAX_SERIES:
        raise DocumentError(f"y: {len(y)} series exceed the limit of {MAX_SERIES}")
    points = len(table.rows) * len(y)
    if points > MAX_CHART_POINTS:
        raise DocumentError(f"{table.source}: {points:,} data points ({len(table.rows):,} rows × {len(y)} series) "
                            f"exceed the limit of {MAX_CHART_POINTS:,}")

    series = {name: _numbers(table, name, "the y values must be numbers") for name in y}
    if x is None:
        labels = [str(i + 1) for i in range(len(table.rows))]
        x_numbers: list[float] | None = [float(i + 1) for i in range(len(table.rows))]
    else:
        index = table.columns.index(x)
        labels = ["" if row[index] is None else str(row[index]) for row in table.rows]
        if spec.chart_type == "scatter":  # numbers required: the first bad cell is named
            x_numbers = _numbers(table, x, "a scatter chart needs numbers on the x axis")
            gaps = [i for i, v in enumerate(x_numbers) if math.isnan(v)]
            if gaps:
                raise DocumentError(f"{table.where(gaps[0], x)}: empty, but a scatter chart needs an x value "
                                    f"in every row")
        else:
            x_numbers = _numbers(table, x, "") if _is_complete_numeric(table, index) else None
    if spec.chart_type == "pie":
        _check_pie(table, y, series)
    return _Plot(x, labels, x_numbers, series)


def _check_pie(table: _Table, y: list[str], series: dict[str, list[float]]) -> None:
    if len(y) != 1:
        raise DocumentError(f"y: a pie chart shows one series; got {len(y)} ({', '.join(y)})")
    values = series[y[0]]
    if len(values) > MAX_PIE_SLICES:
        raise DocumentError(f"{table.source}: a pie chart takes at most {MAX_PIE_SLICES} slices; got {len(values)}")
    for i, value in enumerate(values):
        if math.isnan(value):
            raise DocumentError(f"{table.where(i, y[0])}: a pie slice needs a value")
        if value < 0:
            raise DocumentError(f"{table.where(i, y[0])}: a pie slice cannot be negative ({value:g})")
    if sum(values) <= 0:
        raise DocumentError(f"{table.source}: the pie values of '{y[0]}' add up to zero")


# --- drawing -------------------------------------------------------------------------------

def _text(value: str | None) -> str:
    """User text for matplotlib: `$` would start mathtext, so it is escaped."""
    return (value or "").replace("$", r"\$")


def _short(label: str) -> str:
    return label if len(label) <= _LABEL_CHARS else label[: _LABEL_CHARS - 1] + "…"


def _category_ticks(ax: Any, labels: list[str]) -> None:
    count = len(labels)
    step = max(1, math.ceil(count / 30))  # at most ~30 labels on the axis
    positions = list(range(0, count, step))
    ax.set_xticks(positions, [_text(_short(labels[i])) for i in positions])
    if count > 6 or any(len(label) > 10 for label in labels):
        for tick in ax.get_xticklabels():
            tick.set_rotation(35)
            tick.set_horizontalalignment("right")


def render_chart(spec: ChartSpec) -> RenderedChart:
    """Draw the chart as a PNG of exactly `width` × `height` pixels.

    Raises:
        DocumentError: the data or options are not usable (the field is named).
    """
    for field, value in (("width", spec.width), ("height", spec.height)):
        if not MIN_PIXELS <= value <= MAX_PIXELS:
            raise DocumentError(f"{field}: {value} px is outside {MIN_PIXELS}–{MAX_PIXELS}")
    plot = _prepare(spec)

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(spec.width / DPI, spec.height / DPI), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    names = list(plot.series)
    if spec.chart_type == "bar":
        count = len(names)
        width = 0.8 / count
        for k, name in enumerate(names):
            offsets = [i - 0.4 + width * (k + 0.5) for i in range(len(plot.labels))]
            ax.bar(offsets, plot.series[name], width=width, label=_text(name))
        _category_ticks(ax, plot.labels)
        ax.axhline(0, color="#555555", linewidth=0.8)
    elif spec.chart_type == "line":
        xs = plot.x_numbers if plot.x_numbers is not None else list(range(len(plot.labels)))
        marker = "o" if len(plot.labels) <= 50 else None
        for name in names:
            ax.plot(xs, plot.series[name], marker=marker, markersize=4, label=_text(name))
        if plot.x_numbers is None:
            _category_ticks(ax, plot.labels)
    elif spec.chart_type == "scatter":
        assert plot.x_numbers is not None
        size = 28 if len(plot.labels) <= 500 else 8
        for name in names:
            ax.scatter(plot.x_numbers, plot.series[name], s=size, alpha=0.8, label=_text(name))
    else:  # pie
        values = plot.series[names[0]]
        show_percent = len(values) <= 12
        ax.pie(values, labels=[_text(_short(label)) for label in plot.labels],
               autopct="%1.1f%%" if show_percent else None, startangle=90, counterclock=False,
               wedgeprops={"linewidth": 1, "edgecolor": "white"})
        ax.set_aspect("equal")
    if spec.chart_type != "pie":
        ax.grid(True, axis="y", color="#dddddd", linewidth=0.8)
        ax.set_axisbelow(True)
        ax.set_xlabel(_text(spec.x_label if spec.x_label is not None else plot.x_name))
        ax.set_ylabel(_text(spec.y_label if spec.y_label is not None else (names[0] if len(names) == 1 else "")))
        if len(names) > 1:
            ax.legend()
    if spec.title:
        ax.set_title(_text(spec.title))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, facecolor="white")
    return RenderedChart(buffer.getvalue(), names, len(plot.labels) * len(names))
