"""The editor's side panels: the palette (left) and the run trace (the parameters: editor_params.py).

They take the page's state class, so the page module only arranges them.
"""

from __future__ import annotations

import reflex as rx


def _palette_entry(state, entry) -> rx.Component:
    return rx.box(
        rx.text(entry["label"], size="2", weight="medium"),
        rx.text(entry["type"], size="1", color_scheme="gray", font_family="monospace"),
        # A plain draggable element: components/flow_canvas.jsx reads data-node-type on dragstart.
        custom_attrs={"data-node-type": entry["type"], "draggable": "true"},
        title=entry["description"],
        on_click=state.add_from_palette(entry["type"]),
        id="palette-" + entry["type"].replace(".", "-"),
        class_name="palette-entry",
        padding="0.35em 0.6em",
        border_radius="6px",
        border=f"1px solid {rx.color('gray', 5)}",
        background=rx.color("gray", 2),
        cursor="grab",
        width="100%",
    )


def palette_panel(state) -> rx.Component:
    """Node types from /api/node-types' registry, grouped by toolbox, searchable; drag or click to add."""
    return rx.vstack(
        rx.input(placeholder="Search nodes…", value=state.palette_query, on_change=state.set_palette_query,
                 id="palette-search", width="100%", size="2"),
        rx.cond(~state.can_edit | (state.viewing_version != ""),
                rx.text("Read only: nodes cannot be added here.", size="1", color_scheme="gray")),
        rx.vstack(
            rx.foreach(
                state.palette_groups,
                lambda group: rx.vstack(
                    rx.text(group["name"], size="1", weight="bold", color_scheme="gray", text_transform="uppercase"),
                    rx.foreach(group["entries"], lambda entry: _palette_entry(state, entry)),
                    spacing="1", width="100%",
                ),
            ),
            spacing="3", width="100%", overflow_y="auto", flex="1", id="palette",
        ),
        width="15em", flex_shrink="0", height="100%", spacing="2", id="palette-panel",
        display=rx.cond(state.palette_open, "flex", "none"),
    )


# --- trace -------------------------------------------------------------------------------------


def _data_block(title: str, text, css_class: str) -> rx.Component:
    """A step's input or output, under its name."""
    return rx.cond(
        text != "",
        rx.box(rx.text(title, size="1", weight="bold", color_scheme="gray"),
               rx.code_block(text, language="json", font_size="11px"),
               width="100%", class_name=css_class),
    )


def _trace_row(state, row) -> rx.Component:
    return rx.box(
        rx.hstack(
            rx.badge(row["status"], color_scheme=rx.match(row["status"], ("completed", "green"), ("failed", "red"),
                                                          ("running", "blue"), ("waiting", "orange"), "gray")),
            rx.text(row["label"], weight="bold", size="2", class_name="trace-label", flex_shrink="0",
                    max_width="55%", overflow="hidden", text_overflow="ellipsis", white_space="nowrap",
                    title=row["label"]),
            rx.text(row["node_id"], " · ", row["node_type"], size="1", color_scheme="gray", font_family="monospace",
                    min_width="0", overflow="hidden", text_overflow="ellipsis", white_space="nowrap"),
            rx.spacer(),
            rx.text(f"#{row['attempt']}", size="1", color_scheme="gray", title="attempt"),
            rx.text(row["duration"], size="1", color_scheme="gray", white_space="nowrap"),
            width="100%", align="center", spacing="2",
        ),
        rx.cond(row["error"] != "", rx.text(row["error"], size="1", color_scheme="red", class_name="trace-error")),
        rx.cond(
            (row["input"] != "") | (row["output"] != ""),
            rx.accordion.root(
                rx.accordion.item(
                    header=rx.text("Input and output", size="1"),
                    content=rx.vstack(_data_block("Input", row["input"], "trace-input"),
                                      _data_block("Output", row["output"], "trace-output"),
                                      width="100%", spacing="2")),
                collapsible=True, type="single", variant="ghost", width="100%",
                key=row["key"],  # a new run's step opens closed, whatever was open in the last run
            ),
        ),
        on_click=state.show_step(row["node_id"]),
        class_name="trace-row", custom_attrs={"data-node": row["node_id"], "data-status": row["status"]},
        padding="0.4em", border_bottom=f"1px solid {rx.color('gray', 4)}", width="100%", cursor="pointer",
    )


def trace_panel(state) -> rx.Component:
    """The run's steps with input, output, duration, error and attempt; retry and ask the AI."""
    return rx.vstack(
        rx.text("Test input (JSON, given to the trigger as `input`)", size="2", weight="medium"),
        rx.text_area(value=state.run_input, on_change=state.set_run_input, id="run-input", rows="3",
                     placeholder='{"amount": 1500}', font_family="monospace", width="100%"),
        rx.cond(state.run_input_error != "", rx.text(state.run_input_error, size="1", color_scheme="red",
                                                     id="run-input-error")),
        rx.cond(state.run_id != "", rx.hstack(
            rx.text(state.run_summary, size="2", id="run-summary", weight="medium"),
            rx.cond(state.watching, rx.spinner(size="1")),
            align="center", spacing="2")),
        rx.cond(state.run_error != "", rx.callout(state.run_error, icon="circle-x", color_scheme="red",
                                                  size="1", id="run-error", width="100%")),
        rx.hstack(
            # A run that failed as it started (e.g. a missing AI provider) has no failed node to retry or ask about.
            rx.cond((state.run_status == "failed") & (state.failed_node != "") & state.can_execute,
                    rx.button(rx.icon("rotate-ccw", size=14), "Retry from failed node", size="1",
                              on_click=state.retry_failed, id="retry-failed")),
            rx.cond((state.run_status == "failed") & (state.failed_node != "") & state.ai_help_offered,
                    rx.button(rx.icon("sparkles", size=14), "Ask AI about this error", size="1", variant="soft",
                              on_click=state.ask_ai_about_error, id="ask-ai-error")),
            rx.cond((state.run_status == "paused") & (state.run_pause_reason != "step"),
                    rx.button(rx.icon("refresh-cw", size=14), "Refresh", size="1", variant="soft",
                              on_click=state.refresh_run, id="refresh-run")),
            wrap="wrap", spacing="2",
        ),
        rx.cond((state.run_status == "failed") & (state.ai_help_note != ""),
                rx.text(state.ai_help_note, size="1", color_scheme="gray", id="ask-ai-unavailable")),
        rx.cond(
            state.trace.length() > 0,
            rx.vstack(rx.foreach(state.trace, lambda row: _trace_row(state, row)), spacing="0", width="100%",
                      id="trace"),
            rx.text(rx.cond(state.run_id != "", "No node ran in this run.",
                            "No run yet: press Test run or Step by step."),
                    size="2", color_scheme="gray", id="trace-empty"),
        ),
        spacing="2", width="100%",
    )
