"""email.checkEmail (DESIGN §4): waiting for a matching mail in a connection's folder, over
MailAccess.since (backend/connectors/access.py), whatever the connector (IMAP, Microsoft 365 …).

When the node runs (:func:`start_waiting`) it opens the connection as the run's starter — a
connection of another user or mandate is "not found", an inactive one fails the step with its
reason — and asks the mailbox for a cursor marking now. The node then waits; its waiting output,
kept in the run's persisted context (``context.suspended[<node>].output``), holds the connection,
folder, filter and that cursor, so the wait survives a restart.

:func:`poll_mailboxes` (every POWERON_TIMER_INTERVAL_SECONDS, from backend.engine.timers) asks,
for every run paused at such a node, for the mails received after its cursor (at most
POWERON_MAIL_MAX_MESSAGES a time, oldest first). The first matching mail resumes the node: its
attachments are saved into the run's feature-instance file store (under
``/mail/<run id>/<node id>/``) in the transaction that resumes the run, so a mail is delivered
once and nothing is half-written; the node's output is the mail (Mail.to_output) with each
attachment's `path` and a `files` list of the paths. Mails that do not match move the cursor on
(remembered in the context). A connection that fails (expired, refused login, unreachable) or a
mail that cannot be delivered (an attachment over POWERON_FILE_MAX_BYTES) fails the step with the
reason; its onError applies.

The node's ``filter`` (every part given must hold; text comparisons ignore case):

- ``None`` or ``{}``: any mail matches;
- a dict with any of ``from`` (part of the sender), ``subjectContains``, ``bodyContains`` (parts
  of subject and body), ``hasAttachment`` (true: only mails with attachments; false: only
  without) and ``folder`` (the folder to watch, instead of the node's `folder`); empty values
  are ignored;
- a string: a part of the subject or the body.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlmodel import Session

from backend.connectors import store
from backend.connectors.access import Mail, MailAccess
from backend.connectors.mail import open_mail
from backend.connectors.types import ConnectionFailed
from backend.db import session_scope
from backend.db.models import RunStepLog, User, WorkflowRun, utcnow
from backend.engine import queue as run_queue
from backend.engine import steps
from backend.engine.timers import claim_waiting, paused_runs, resume_suspended, waiting_nodes
from backend.errors import DomainError, FieldError, InvalidInput
from backend.statemachines import workflow_run as run_lifecycle

log = logging.getLogger(__name__)

FILTER_KEYS = ("from", "subjectContains", "bodyContains", "hasAttachment", "folder")
DEFAULT_FOLDER = "Inbox"
ATTACHMENT_ROOT = "/mail"


# --- the filter -----------------------------------------------------------------------------------


def check_filter(filter: Any) -> None:  # noqa: A002
    """InvalidInput naming each problem of a node's filter (see the module documentation)."""
    if filter is None or isinstance(filter, str):
        return
    if not isinstance(filter, dict):
        raise InvalidInput([FieldError("filter", "must be an object (from, subjectContains, bodyContains, "
                                                 "hasAttachment, folder) or a text")])
    errors = [FieldError(f"filter.{key}", f"unknown; known: {', '.join(FILTER_KEYS)}")
              for key in filter if key not in FILTER_KEYS]
    wanted = filter.get("hasAttachment")
    if wanted not in (None, "") and not isinstance(wanted, bool):
        errors.append(FieldError("filter.hasAttachment", "must be true or false"))
    errors += [FieldError(f"filter.{key}", "must be a text") for key in ("from", "subjectContains",
                                                                          "bodyContains", "folder")
               if filter.get(key) is not None and not isinstance(filter.get(key), str | int | float)]
    if errors:
        raise InvalidInput(errors)


def watched_folder(folder: Any, filter: Any) -> str:  # noqa: A002
    """The folder a node watches: the filter's `folder`, else the node's, else Inbox."""
    if isinstance(filter, dict) and isinstance(filter.get("folder"), str) and filter["folder"].strip():
        return filter["folder"].strip()
    return folder.strip() if isinstance(folder, str) and folder.strip() else DEFAULT_FOLDER


def matches(mail: Mail, filter: Any) -> bool:  # noqa: A002
    """Whether `mail` satisfies a node's filter (see the module documentation)."""
    if not filter:
        return True
    subject, body = mail.subject.casefold(), mail.body.casefold()
    if isinstance(filter, str):
        needle = filter.casefold()
        return needle in subject or needle in body
    if not isinstance(filter, dict):
        return False
    texts = {key: str(filter[key]).casefold() for key in ("from", "subjectContains", "bodyContains", "folder")
             if filter.get(key) not in (None, "")}
    wanted = filter.get("hasAttachment")
    return (("from" not in texts or texts["from"] in mail.sender.casefold())
            and ("subjectContains" not in texts or texts["subjectContains"] in subject)
            and ("bodyContains" not in texts or texts["bodyContains"] in body)
            and ("folder" not in texts or texts["folder"].strip() == mail.folder.casefold())
            and (not isinstance(wanted, bool) or wanted == bool(mail.attachments)))


# --- starting to wait -----------------------------------------------------------------------------


def start_waiting(session: Session, user: User, parameters: dict[str, Any]) -> dict[str, Any]:
    """What a checkEmail node waits with (its waiting output): connection, folder, filter and the
    mailbox's cursor marking now.

    Raises:
        InvalidInput: the filter is malformed (naming the field).
        NotFound: the connection does not exist or is not the starter's to use; the folder does
            not exist.
        ConnectionFailed: the connection is not active or the mailbox cannot be reached.
    """
    wanted = parameters.get("filter")
    check_filter(wanted)
    folder = watched_folder(parameters.get("folder"), wanted)
    _credentials, mailbox = open_mail(session, user, parameters.get("connectionId"))
    page = mailbox.since(folder, None)
    return {"connectionId": parameters.get("connectionId"), "folder": folder, "filter": wanted,
            "cursor": page.cursor, "since": utcnow().isoformat()}


# --- polling --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Waiting:
    """One checkEmail node waiting in a paused run, as the poller read it."""

    run_id: str
    node_id: str
    lock_version: int
    starter_id: str
    wait: dict[str, Any]


@dataclass
class _Found:
    """What one poll of a node found: the mail and its attachments' content, or nothing (then the
    cursor to remember), or why the step fails."""

    cursor: str | None = None
    mail: Mail | None = None
    files: list[tuple[str, str, bytes]] | None = None
    error: str | None = None


def poll_mailboxes(now: Any = None) -> int:  # noqa: ARG001 - same signature as the other due work
    """Resume every waiting email.checkEmail node for which a matching mail arrived, fail those
    whose connection fails; returns how many were resumed."""
    with session_scope() as session:
        waiting = [_Waiting(run.id, node_id, run.lock_version, run.sys_created_by, dict(entry.get("output") or {}))
                   for run in paused_runs(session) for node_id, entry in waiting_nodes(run, "email").items()]
    resumed = 0
    for node in waiting:
        try:
            resumed += _poll(node)
        except Exception:  # noqa: BLE001 - one node's trouble (a database hiccup) must not stop the others
            log.exception("polling the mailbox of run %s, node %s failed", node.run_id, node.node_id)
    return resumed


def _poll(node: _Waiting) -> int:
    found = _look(node)
    if found.error is not None:
        with session_scope() as session:
            run = session.get(WorkflowRun, node.run_id)
            if run is not None:
                fail_suspended(session, run, node.node_id, found.error)
        return 0
    if found.mail is None:
        if found.cursor is not None and found.cursor != node.wait.get("cursor"):
            _remember_cursor(node, found.cursor)
        return 0
    return 1 if _deliver(node, found.mail, found.files or []) else 0


def _look(node: _Waiting) -> _Found:
    """Ask the node's mailbox for mails after its cursor (no database session is held meanwhile)."""
    wait = node.wait
    try:
        with session_scope() as session:
            user = session.get(User, node.starter_id)
            if user is None:
                return _Found(error="the user who started this run no longer exists")
            credentials, mailbox = open_mail(session, user, wait.get("connectionId"))
    except (ConnectionFailed, DomainError) as exc:  # not found, not active, not a mail connection
        return _Found(error=str(exc))
    try:
        page = mailbox.since(watched_folder(wait.get("folder"), wait.get("filter")), wait.get("cursor"))
        mail = next((m for m in page.mails if matches(m, wait.get("filter"))), None)
        if mail is None:
            return _Found(cursor=page.cursor)
        return _Found(mail=mail, files=_download(mailbox, mail))
    except ConnectionFailed as exc:  # the mailbox failed now: the connection shows it too
        (store.mark_expired if exc.expired else store.mark_failed)(credentials.connection_id, str(exc))
        return _Found(error=str(exc))
    except DomainError as exc:  # the folder is gone, an attachment over the limit
        return _Found(error=str(exc))


def _download(mailbox: MailAccess, mail: Mail) -> list[tuple[str, str, bytes]]:
    """The attachments of `mail` (each checked against POWERON_FILE_MAX_BYTES by the connector)."""
    return [mailbox.attachment(mail.id, attachment.id) for attachment in mail.attachments]


def _remember_cursor(node: _Waiting, cursor: str) -> None:
    """Move the node's cursor on, unless the run changed since it was read (then it was resumed,
    cancelled or the context rewritten: the next poll reads it anew). The run's lock_version is
    left as it is: this is no transition of the run."""
    with session_scope() as session:
        run = session.get(WorkflowRun, node.run_id)
        if run is None or run.status != run_lifecycle.PAUSED or run.lock_version != node.lock_version:
            return
        context = dict(run.context or {})
        suspended = dict(context.get("suspended") or {})
        entry = suspended.get(node.node_id)
        if not isinstance(entry, dict) or entry.get("reason") != "email":
            return
        suspended[node.node_id] = {**entry, "output": {**(entry.get("output") or {}), "cursor": cursor}}
        context["suspended"] = suspended
        session.execute(update(WorkflowRun)
                        .where(WorkflowRun.id == run.id, WorkflowRun.lock_version == node.lock_version,
                               WorkflowRun.status == run_lifecycle.PAUSED)
                        .values(context=context).execution_options(synchronize_session=False))


def _deliver(node: _Waiting, mail: Mail, files: list[tuple[str, str, bytes]]) -> bool:
    """Save the attachments and resume the node with the mail, in one transaction; False when
    another process resumed (or someone cancelled) the run first — then nothing is kept."""
    from backend.files.service import FileScope, store_file

    with session_scope() as session:
        if not _claim(session, node):
            return False
        run = session.get(WorkflowRun, node.run_id)
        user = session.get(User, node.starter_id)
        if run is None or user is None:
            return False
        output = mail.to_output()
        try:
            scope = FileScope(session, user, run.mandate_id, run.feature_instance_id)
            folder = f"{ATTACHMENT_ROOT}/{run.id}/{node.node_id}"
            paths = []
            for entry, (name, mime_type, content) in zip(output["attachments"], files, strict=True):
                saved = store_file(scope, f"{folder}/{_unique(name, paths)}", content, mime_type)
                entry.update(path=saved.path, fileId=saved.id)
                paths.append(saved.path)
            output["files"] = paths
        except DomainError as exc:  # no right to write files there, the instance's quota is full
            session.rollback()
            fail_suspended(session, run, node.node_id, f"mail '{mail.subject}' arrived, but its attachments "
                                                       f"could not be saved: {exc}")
            return False
        if resume_suspended(session, run, node.node_id, output) is None:
            session.rollback()
            return False
        return True


def _claim(session: Session, node: _Waiting) -> bool:
    """Begin the delivery's transaction by locking the run's row, if it is still as the poller
    read it (paused, same lock_version; nothing is changed). Another process delivering the same
    mail waits here and then finds the run changed. It also makes the transaction's first
    statement a write: on SQLite (pysqlite) a savepoint opened first — as the file store does —
    would otherwise commit on its release, before the run is resumed."""
    claimed = session.execute(update(WorkflowRun)
                              .where(WorkflowRun.id == node.run_id, WorkflowRun.lock_version == node.lock_version,
                                     WorkflowRun.status == run_lifecycle.PAUSED)
                              .values(lock_version=WorkflowRun.lock_version)
                              .execution_options(synchronize_session=False))
    return claimed.rowcount == 1


def _unique(name: str, taken: list[str]) -> str:
    """`name`, or "name (2).ext" … when an earlier attachment of the mail has it."""
    names = {path.rsplit("/", 1)[-1] for path in taken}
    if name not in names:
        return name
    stem, dot, extension = name.rpartition(".")
    stem, extension = (stem, f".{extension}") if dot and stem else (name, "")
    number = 2
    while f"{stem} ({number}){extension}" in names:
        number += 1
    return f"{stem} ({number}){extension}"


# --- failing a waiting node -----------------------------------------------------------------------


def fail_suspended(session: Session, run: WorkflowRun, node_id: str, message: str) -> WorkflowRun | None:
    """Fail the waiting node `node_id` with `message`: its waiting step row becomes failed, its
    onError applies (fail, continue, route) and the run goes on from there. None when the run no
    longer waits at that node (resumed or finished elsewhere)."""
    engine = claim_waiting(session, run, node_id)
    if engine is None:
        return None
    waiting = engine.suspended.pop(node_id)
    step = session.get(RunStepLog, waiting.get("stepId"))
    if step is not None:
        started = step.started_at if step.started_at.tzinfo else step.started_at.replace(tzinfo=utcnow().tzinfo)
        step.status = "failed"
        step.error = message
        step.finished_at = utcnow()
        step.duration_ms = max(0, int((step.finished_at - started).total_seconds() * 1000))
        session.add(step)
        steps.publish_finished(session, step, run.workflow_id)
    engine.on_node_failure(node_id, message)
    if engine.run.status == run_lifecycle.RUNNING:
        run_queue.enqueue(session, run.id)
    engine.persist()
    return engine.run
