"""A plain data table: header cells, one row per item of a list var."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import reflex as rx


def data_table(headers: Sequence[str], rows: rx.Var, render_row: Callable, table_id: str) -> rx.Component:
    """A full-width table with `headers` and `render_row(item)` for each item of `rows`.

    Long words (a 200-character name without spaces) wrap inside their cell instead of pushing
    the table, and the buttons of its last column, off the screen.
    """
    return rx.table.root(
        rx.table.header(rx.table.row(*[rx.table.column_header_cell(h) for h in headers])),
        rx.table.body(rx.foreach(rows, render_row)),
        width="100%",
        id=table_id,
        # The first column holds the names; buttons keep their words whole.
        style={"& td:first-of-type": {"overflow_wrap": "anywhere"}, "& button": {"white_space": "nowrap"}},
    )
