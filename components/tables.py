"""A plain data table: header cells, one row per item of a list var; on a phone, one card per row."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import reflex as rx

from components.shell import PHONE


def _as_cards(headers: Sequence[str]) -> dict[str, Any]:
    """The phone style of a table: no header row, each row a card; its first cell is the card's
    title, every further cell a line led by its column's name (from `headers`; a column without a
    name gets no label)."""
    labels = {
        f"& td:nth-of-type({index})::before": {"content": json.dumps(header), "flex": "0 0 6.5em",
                                               "color": "var(--gray-11)", "font_size": "var(--font-size-1)",
                                               "line_height": "var(--line-height-2)"}
        for index, header in enumerate(headers, start=1) if header and index > 1
    }
    return {PHONE: {
        # Radix gives the table height 0 and each cell a fixed height (which a table treats as least ones).
        "& table, & tbody, & tr, & td": {"display": "block", "width": "100%", "height": "auto"},
        "& thead": {"display": "none"},
        "& tr": {"border": "1px solid var(--gray-a5)", "border_radius": "var(--radius-3)", "margin_bottom": "0.6em",
                 "padding": "0.4em 0"},
        "& td": {"box_shadow": "none", "padding": "0.2em 0.8em", "overflow_wrap": "anywhere", "text_align": "left",
                 "display": "flex", "align_items": "baseline", "gap": "0.5em", "flex_wrap": "wrap"},
        "& td:first-of-type": {"display": "block", "padding_bottom": "0.35em"},
        "& td:empty, & td:has(> :only-child:empty)": {"display": "none"},
        "& a": {"min_height": "44px", "display": "inline-flex", "align_items": "center"},
        **labels,
    }}


def data_table(headers: Sequence[str], rows: rx.Var, render_row: Callable, table_id: str) -> rx.Component:
    """A full-width table with `headers` and `render_row(item)` for each item of `rows`.

    Long words (a 200-character name without spaces) wrap inside their cell instead of pushing
    the table, and the buttons of its last column, off the screen. On a phone each row is a card
    whose cells stand one under the other, each labelled with its column's header.
    """
    return rx.table.root(
        rx.table.header(rx.table.row(*[rx.table.column_header_cell(h) for h in headers])),
        rx.table.body(rx.foreach(rows, render_row)),
        width="100%",
        id=table_id,
        # The first column holds the names; buttons keep their words whole.
        style={"& td:first-of-type": {"overflow_wrap": "anywhere"}, "& button": {"white_space": "nowrap"},
               **_as_cards(headers)},
    )
