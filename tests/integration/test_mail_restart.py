"""A run waiting at email.checkEmail survives the SIGKILL of the application process (issue 17,
item 4), with the real process as in tests/integration/test_engine_crash_points.py: its timer
thread polls pymap every 0.2 s. Killed while waiting, killed while resuming with the mail before
the commit, or right after it: the restarted process delivers the mail exactly once — one
completed e-mail step, one saved attachment, the run completed once."""

from __future__ import annotations

from typing import Any

import pytest
from sqlmodel import select

from backend.db import session_scope
from backend.db.models import StoredFile
from tests.integration.test_engine_crash_points import (
    assert_finished_once,
    completed_steps,
    create,
    poll_finished,
    read_run,
    start_app,  # noqa: F401 - the fixture
    start_run,
)
from tests.integration.test_mail_check import check_graph
from tests.mail_servers import imap_server, mail, minimal_pdf, smtp_server

PDF = minimal_pdf("Invoice 77")


@pytest.fixture
def connection(api):
    """pymap and aiosmtpd, and the admin's `imap` connection to them."""
    with imap_server() as imap, smtp_server() as smtp:
        created = api.client.post("/api/connections", json={"type": "imap", "label": "Invoices",
                                                            "settings": imap.settings(smtp)}, headers=api.auth)
        assert created.status_code == 201, created.text
        yield imap, created.json()["id"]


def saved_files() -> list[str]:
    with session_scope() as session:
        return [row.name for row in session.exec(select(StoredFile)).all()]


@pytest.mark.parametrize(("crash_at", "status_after_kill"), [
    (None, "paused"),  # killed while waiting
    ("resume_before_commit:mail", "paused"),  # the mail's delivery was not committed: delivered again
    ("resume_after_commit:mail", "running"),  # delivered and committed: the restart finishes the run
])
def test_a_run_waiting_for_mail_survives_a_sigkill_and_gets_its_mail_once(api, start_app, connection,  # noqa: F811
                                                                          crash_at, status_after_kill):
    imap, connection_id = connection
    workflow_id = create(api, check_graph(connection_id, {"subjectContains": "invoice"}))
    first = start_app(crash_at)
    run: dict[str, Any] = start_run(first, api, workflow_id)
    assert (run["status"], run["pauseReason"]) == ("paused", "email"), run
    if crash_at is None:
        first.end()  # SIGKILL to the whole process group, while the run waits
        imap.deliver(mail("Invoice 77", attachments=[("invoice-77.pdf", "application/pdf", PDF)]))
    else:
        imap.deliver(mail("Invoice 77", attachments=[("invoice-77.pdf", "application/pdf", PDF)]))
        first.wait_killed()  # its timer thread found the mail and reached the crash point

    before = read_run(api, run["id"])
    assert before["status"] == status_after_kill, before
    assert saved_files() == ([] if status_after_kill == "paused" else ["invoice-77.pdf"])
    assert completed_steps(before).get("mail", 0) == (0 if status_after_kill == "paused" else 1)

    second = start_app()
    final = poll_finished(second, api, run["id"])
    assert_finished_once(final, before, {"start": 1, "mail": 1, "after": 1})
    path = f"/mail/{run['id']}/mail/invoice-77.pdf"
    assert final["output"] == {"after": {"result": f"got Invoice 77 with {path}", "missing": []}}
    assert saved_files() == ["invoice-77.pdf"]
