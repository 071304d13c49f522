"""Mails about human tasks (issue 23): "waiting for you" when a task is created, and a reminder
before it expires, to each person who may complete it, with Approve / Reject / Open links.

Each mail carries links of its own (backend/engine/task_links.py: bound to the task and the
recipient, single use, expiring). Rows (notifications, links) are added to the caller's session so
they are written with the task or not at all; the mails leave only after that commit
(backend/db/after_commit.py), on the mail thread (backend/notifications/mailer.py). Without
POWERON_SMTP_URL no links are made and nothing is mailed; a recipient without an e-mail address or
who switched the channel off (backend/notifications/preferences.py) gets none either.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from backend.config import get_settings
from backend.db.after_commit import call_after_commit
from backend.db.models import HumanTask, User
from backend.engine import task_links
from backend.notifications import mailer, preferences

BUTTON = ("display:inline-block;padding:12px 22px;margin:4px 8px 4px 0;border-radius:6px;"
          "font:600 16px sans-serif;text-decoration:none;color:#ffffff;background:{colour}")


@dataclass(frozen=True)
class TaskMail:
    """One mail, ready to send."""

    to: str
    subject: str
    body: str
    html: str


def _links(token: str, kind: str) -> list[tuple[str, str, str]]:
    """(label, url, colour) of the mail's buttons: Approve and Reject for an approval, then Open."""
    base = f"{get_settings().ui_url.rstrip('/')}/act/{token}"
    decide = [("Approve", f"{base}?do=approve", "#1f883d"), ("Reject", f"{base}?do=reject", "#cf222e")]
    return [*(decide if kind == "approval" else []), ("Open", f"{base}?do=open", "#0969da")]


def _due(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment else ""


def compose(task: HumanTask, recipient: User, token: str, context: str, reminder: bool = False) -> TaskMail:
    """The mail telling `recipient` about `task` (or reminding them before it expires)."""
    what = "Approval" if task.kind == "approval" else "Task"
    title = task.title or "untitled"
    subject = f"PowerOn: {'Reminder: ' if reminder else ''}{what} waiting for you: {title}"
    name = recipient.display_name or recipient.username
    due = _due(task.due_at)
    lead = (f"the task below expires on {due} and is still waiting for an answer."
            if reminder else f"{context} waits for your {'approval' if task.kind == 'approval' else 'answer'}.")
    links = _links(token, task.kind)
    lines = [f"Hello {name},", "", lead, "", title]
    if task.message:
        lines += ["", task.message]
    lines += ["", f"From: {context}"] + ([f"Due: {due}"] if due else [])
    lines += [""] + [f"{label}: {url}" for label, url, _ in links]
    lines += ["", "The buttons open a page where you confirm; each link works once, for you, and expires.",
              "You receive this mail because you may complete this task."]
    buttons = "".join(f'<a href="{html.escape(url)}" style="{BUTTON.format(colour=colour)}">{label}</a>'
                      for label, url, colour in links)
    message = (f'<p style="white-space:pre-wrap;margin:12px 0">{html.escape(task.message)}</p>'
               if task.message else "")
    page = (
        '<div style="font:16px/1.5 sans-serif;max-width:560px;color:#1f2328">'
        f"<p>Hello {html.escape(name)},</p><p>{html.escape(lead)}</p>"
        f'<h2 style="font-size:20px;margin:16px 0 4px">{html.escape(title)}</h2>{message}'
        f'<p style="color:#59636e;font-size:14px">From: {html.escape(context)}'
        f"{'<br>Due: ' + html.escape(due) if due else ''}</p>"
        f'<p style="margin:20px 0">{buttons}</p>'
        '<p style="color:#59636e;font-size:13px">The buttons open a page where you confirm; each link works '
        "once, for you, and expires. You receive this mail because you may complete this task.</p></div>"
    )
    return TaskMail(recipient.email or "", subject, "\n".join(lines) + "\n", page)


def mail_recipients(session: Session, task: HumanTask, recipients: list[User], event: str,
                    reminder: bool = False) -> list[TaskMail]:
    """Mail `task` to each of `recipients` who has an address and wants `event` by mail, once the
    caller's transaction commits (their links are added to it). Returns the mails (none without SMTP)."""
    if mailer.configured_target() is None:
        return []
    context, _workflow = task_links.task_context(session, task)
    mails = []
    for user in recipients:
        if not user.email or not preferences.wants(session, user.id, event, preferences.MAIL):
            continue
        token = task_links.issue_link(session, task, user)
        mails.append(compose(task, user, token, context, reminder))
    if mails:
        call_after_commit(session, lambda: [mailer.send_in_background(m.to, m.subject, m.body, m.html)
                                            for m in mails])
    return mails
