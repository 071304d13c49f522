"""The mailbox interface of email.checkEmail (DESIGN §4) and the poller that resumes waiting runs.

A connector (Outlook later) implements :class:`Mailbox` and is installed with :func:`set_mailbox`.
:func:`poll_mailboxes` asks it, for every run paused at an email.checkEmail node, for the mails of
the node's connection and folder received since the node started waiting (`since`), and resumes
the node with the first matching mail as its output (:meth:`MailMessage.to_output`).

The node's ``filter`` (all parts must hold; text comparisons ignore case):

- ``None`` or ``{}``: any mail matches;
- a dict with any of ``from`` (substring of the sender address), ``subjectContains`` and
  ``bodyContains`` (substrings of subject and body);
- a string: a substring of the subject or the body.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from backend.db import session_scope
from backend.db.models import WorkflowRun
from backend.engine.timers import paused_runs, resume_suspended, waiting_nodes

FILTER_KEYS = ("from", "subjectContains", "bodyContains")


@dataclass(frozen=True)
class MailMessage:
    """One received mail, as a connector reports it."""

    id: str
    sender: str
    subject: str
    body: str
    received_at: datetime
    to: tuple[str, ...] = ()

    def to_output(self) -> dict[str, Any]:
        """The node's output for this mail."""
        return {"id": self.id, "from": self.sender, "to": list(self.to), "subject": self.subject,
                "body": self.body, "receivedAt": _aware(self.received_at).isoformat()}


class Mailbox(ABC):
    """Where email.checkEmail reads mail from (one implementation per connector)."""

    @abstractmethod
    def fetch(self, connection_id: str, folder: str, since: datetime) -> list[MailMessage]:
        """The mails of `connection_id`'s `folder` received after `since` (aware UTC), oldest first."""


_mailbox: Mailbox | None = None


def set_mailbox(mailbox: Mailbox | None) -> None:
    """Install the mailbox implementation the poller uses (None: no mailbox, nothing is polled)."""
    global _mailbox  # noqa: PLW0603 - the process-wide registry of one implementation
    _mailbox = mailbox


def get_mailbox() -> Mailbox | None:
    """The installed mailbox implementation, if any."""
    return _mailbox


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def matches(mail: MailMessage, filter: Any) -> bool:  # noqa: A002
    """Whether `mail` satisfies a node's filter (see the module documentation)."""
    if not filter:
        return True
    subject, body = mail.subject.casefold(), mail.body.casefold()
    if isinstance(filter, str):
        needle = filter.casefold()
        return needle in subject or needle in body
    if not isinstance(filter, dict):
        return False
    wanted = {key: str(filter[key]).casefold() for key in FILTER_KEYS if filter.get(key) not in (None, "")}
    return (("from" not in wanted or wanted["from"] in mail.sender.casefold())
            and ("subjectContains" not in wanted or wanted["subjectContains"] in subject)
            and ("bodyContains" not in wanted or wanted["bodyContains"] in body))


def poll_mailboxes(now: datetime | None = None) -> int:  # noqa: ARG001 - same signature as the other due work
    """Resume every email.checkEmail node for which a matching mail arrived; returns how many."""
    mailbox = get_mailbox()
    if mailbox is None:
        return 0
    with session_scope() as session:
        waiting = [(run.id, node_id, entry["output"]) for run in paused_runs(session)
                   for node_id, entry in waiting_nodes(run, "email").items()]
    resumed = 0
    for run_id, node_id, wait in waiting:
        since = _aware(datetime.fromisoformat(wait["since"]))
        mails = mailbox.fetch(str(wait.get("connectionId")), wait.get("folder") or "Inbox", since)
        mail = next((m for m in mails if _aware(m.received_at) > since and matches(m, wait.get("filter"))), None)
        if mail is None:
            continue
        with session_scope() as session:
            run = session.get(WorkflowRun, run_id)
            if run is not None and resume_suspended(session, run, node_id, mail.to_output()) is not None:
                resumed += 1
    return resumed
