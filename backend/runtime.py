"""What an application process starts besides answering requests, without any web framework.

:func:`start_background_services` is the one start-up sequence of a PowerOn process: migrations
and bootstrap, the notifier, the recovery of runs a stopped process left `running`, the timer
thread (flow.wait, task timeouts, mailbox polls) and the scheduler. The Reflex lifespan
(``poweron_app/poweron_app.py``) calls it, and so does :func:`create_app`, the REST API served on
its own with the same start-up: ``python -m backend.runtime --port 8001`` serves it with granian
(the kill-and-restart tests start the application this way, tests/integration/test_engine_crash_points.py).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

log = logging.getLogger(__name__)


def start_background_services() -> None:
    """Prepare the database and start the background services of this process's role (once per
    start): POWERON_ROLE `all` starts everything, `api` all but run execution, `worker` only run
    execution (and the notifier of the runs it executes)."""
    from backend.agent.approvals import resume_decided
    from backend.bootstrap import prepare
    from backend.config import get_settings
    from backend.engine import queue as run_queue
    from backend.engine.recovery import start_recovery_thread
    from backend.engine.timers import start_timer_thread
    from backend.notifications.notifier import start_notifier
    from backend.scheduler.scheduler import start_scheduler

    settings = get_settings()
    # Idempotent: `make run` has usually done this already; a bare `reflex run` still works.
    # Several processes starting at once on PostgreSQL take turns (an advisory lock).
    prepare()
    # Tells workflow owners about failed scheduled, webhook and event runs, in the app and by
    # mail when POWERON_SMTP_URL is set (backend/notifications/), for the runs this process
    # executes or refuses; first, so a run that recovery fails at once is told too.
    start_notifier()
    if settings.role in ("all", "worker"):
        if settings.shared_queue:
            # Execute runs from the shared queue; the jobs of a worker that went silent are taken
            # over after POWERON_WORKER_TIMEOUT_SECONDS (backend/engine/queue.py).
            run_queue.start_consumer()
        else:
            # Continue runs a stopped process left in `running`, in the background so start-up
            # is not held up (backend/engine/recovery.py).
            start_recovery_thread()
    if settings.role in ("all", "api"):
        # Wakes due flow.wait runs, expires due human tasks and polls mailboxes every
        # POWERON_TIMER_INTERVAL_SECONDS in the process that leads the scheduler
        # (backend/engine/timers.py).
        start_timer_thread()
        # Agent runs whose approval was decided (or expired) while no process acted on it go on
        # (backend/agent/approvals.py).
        resume_decided()
        # trigger.schedule jobs (APScheduler), led by one process per database through a lease;
        # its first sync comes POWERON_SCHEDULER_STARTUP_DELAY_SECONDS later (backend/scheduler/).
        start_scheduler()


def stop_background_services() -> None:
    """Stop what :func:`start_background_services` started (a clean process exit): a worker
    finishes the step it is in and hands its runs back to the queue."""
    from backend.config import get_settings
    from backend.engine import queue as run_queue
    from backend.engine.timers import stop_timer_thread
    from backend.notifications.notifier import stop_notifier
    from backend.scheduler.scheduler import stop_scheduler

    stop_scheduler()
    stop_timer_thread()
    # On PostgreSQL wait for the runs in progress to reach a step boundary and go back to the queue;
    # on SQLite a run cut short continues at the next start (recovery).
    run_queue.stop_queue(wait=get_settings().shared_queue)
    stop_notifier()


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    await asyncio.to_thread(start_background_services)
    try:
        async with app.state.mcp.run():  # the MCP server at /mcp (backend/mcp/server.py)
            yield
    finally:
        await asyncio.to_thread(stop_background_services)


def create_app() -> FastAPI:
    """The REST API (/api) with the background services started and stopped by its lifespan."""
    from backend.api.app import create_api

    api = create_api()
    api.router.lifespan_context = _lifespan
    return api


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m backend.runtime``: serve :func:`create_app` with granian."""
    from granian import Granian
    from granian.constants import Interfaces

    parser = argparse.ArgumentParser(description="Serve the PowerOn REST API with its background services.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    Granian("backend.runtime:create_app", address=options.host, port=options.port, interface=Interfaces.ASGI,
            factory=True, workers=1).serve()


if __name__ == "__main__":
    main()
