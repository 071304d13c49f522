"""The page of a task mail's link: /act/[token] — no sign-in needed to see it, no app shell, made
for a phone (one column, large buttons). Opening it decides nothing; the person confirms."""

from __future__ import annotations

import reflex as rx

from state.task_link import TaskLinkState

TAP = {"min_height": "48px", "width": "100%", "size": "3"}


def _task() -> rx.Component:
    return rx.vstack(
        rx.text(TaskLinkState.context, size="2", color_scheme="gray", id="link-context"),
        rx.heading(TaskLinkState.title, size="6", id="link-title", style={"overflow_wrap": "anywhere"}),
        rx.cond(TaskLinkState.message != "",
                rx.text(TaskLinkState.message, white_space="pre-wrap", id="link-message",
                        style={"overflow_wrap": "anywhere"})),
        rx.cond(TaskLinkState.due != "", rx.text("Due: ", TaskLinkState.due, size="2", color_scheme="gray")),
        spacing="2", width="100%",
    )


def _decide() -> rx.Component:
    reject_first = TaskLinkState.requested == "reject"
    return rx.vstack(
        rx.text_area(placeholder="Comment (optional)", value=TaskLinkState.comment,
                     on_change=TaskLinkState.set_comment, id="link-comment", width="100%", rows="3",
                     max_length=1000),
        rx.button(rx.icon("check", size=18), "Approve", color_scheme="green", id="link-approve",
                  variant=rx.cond(reject_first, "soft", "solid"),
                  on_click=TaskLinkState.decide(True), **TAP),
        rx.button(rx.icon("x", size=18), "Reject", color_scheme="red", id="link-reject",
                  variant=rx.cond(reject_first, "solid", "soft"),
                  on_click=TaskLinkState.decide(False), **TAP),
        spacing="3", width="100%",
    )


def _open_inbox(label: str = "Open the Inbox") -> rx.Component:
    return rx.link(rx.button(rx.icon("inbox", size=18), label, variant="outline", **TAP),
                   href=TaskLinkState.inbox_href, id="link-open-inbox", width="100%")


def _actions() -> rx.Component:
    return rx.match(
        TaskLinkState.link_state,
        ("open", rx.cond(TaskLinkState.kind == "approval", _decide(), _open_inbox("Answer it in the Inbox"))),
        ("signIn", rx.vstack(
            rx.button(rx.icon("log-in", size=18), "Sign in to decide", id="link-sign-in",
                      on_click=TaskLinkState.sign_in, **TAP),
            spacing="3", width="100%")),
        _open_inbox(),
    )


def _reason() -> rx.Component:
    colour = rx.match(TaskLinkState.link_state, ("open", "blue"), ("signIn", "blue"), ("finished", "green"), "amber")
    icon = rx.match(TaskLinkState.link_state, ("finished", rx.icon("circle-check")), ("open", rx.icon("info")),
                    ("signIn", rx.icon("info")), rx.icon("triangle-alert"))
    return rx.callout.root(rx.callout.icon(icon), rx.callout.text(TaskLinkState.reason, id="link-reason"),
                           color_scheme=colour, width="100%",
                           custom_attrs={"data-state": TaskLinkState.link_state}, id="link-state")


def task_link_page() -> rx.Component:
    return rx.box(
        rx.vstack(
            rx.hstack(rx.icon("zap", size=18), rx.text("PowerOn", weight="bold"), align="center", spacing="2"),
            rx.cond(
                TaskLinkState.link_state == "loading",
                rx.center(rx.spinner(), width="100%", padding="2em"),
                rx.vstack(
                    rx.cond(TaskLinkState.valid, _task()),
                    _reason(),
                    rx.cond(TaskLinkState.error != "",
                            rx.callout(TaskLinkState.error, icon="triangle-alert", color_scheme="red",
                                       id="link-error", width="100%")),
                    _actions(),
                    spacing="4", width="100%",
                ),
            ),
            spacing="4", width="100%",
        ),
        padding="1.25em", max_width="34em", margin="0 auto", width="100%", box_sizing="border-box",
    )
