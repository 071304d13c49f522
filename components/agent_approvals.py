"""The Admin page's "Agent approvals" tab (issue 21): per agent profile, which consequences of a
tool call wait for a person's approval (state/agent_approvals.py)."""

from __future__ import annotations

import reflex as rx

from state.admin import AdminState


def _choice(row, choice) -> rx.Component:
    return rx.checkbox(choice["label"], checked=choice["checked"], size="2",
                       on_change=lambda checked: AdminState.toggle_approval(row["profile"], choice["consequence"],
                                                                            checked),
                       class_name="approval-choice", custom_attrs={"data-consequence": choice["consequence"]})


def _row(row) -> rx.Component:
    return rx.card(
        rx.vstack(
            rx.hstack(rx.text(row["label"], weight="bold"),
                      rx.cond(row["customised"],
                              rx.button("Back to default (", row["default"], ")", size="1", variant="ghost",
                                        on_click=AdminState.reset_approvals(row["profile"]),
                                        class_name="approval-reset"),
                              rx.badge("default", variant="soft", color_scheme="gray")),
                      justify="between", width="100%", align="center"),
            rx.hstack(rx.foreach(row["choices"], lambda choice: _choice(row, choice)), spacing="4", wrap="wrap"),
            spacing="2", width="100%",
        ),
        class_name="approval-profile", custom_attrs={"data-profile": row["profile"]}, width="100%",
    )


def agent_approvals_tab() -> rx.Component:
    return rx.vstack(
        rx.text("When the agent wants to call a tool with one of the ticked consequences, the run waits and the "
                "user it acts for approves or declines the call in the chat or the Inbox.", size="2",
                color_scheme="gray"),
        rx.foreach(AdminState.approval_rows, _row),
        id="agent-approvals", width="100%", spacing="3",
    )
