"""A worker process: `python -m backend.worker` (`make worker`) executes runs and serves nothing.

It needs PostgreSQL (POWERON_DB_URL): it takes runs from the shared run queue that API processes
fill (backend/engine/queue.py), POWERON_RUN_THREADS at a time, heartbeating every
POWERON_WORKER_HEARTBEAT_SECONDS. SIGTERM or Ctrl-C stops it gracefully: the runs in progress finish
the step they are in and go back to the queue for another worker; a worker killed outright is
taken for dead after POWERON_WORKER_TIMEOUT_SECONDS and its runs continue elsewhere.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading


def main() -> int:
    """Run a worker until SIGTERM/SIGINT; returns the exit status."""
    os.environ.setdefault("POWERON_ROLE", "worker")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from backend.config import get_settings
    from backend.runtime import start_background_services, stop_background_services

    try:
        settings = get_settings()
    except ValueError as exc:
        sys.stderr.write(f"PowerOn worker: {exc}\n")
        return 2
    if settings.role != "worker":
        sys.stderr.write(f"PowerOn worker: POWERON_ROLE is {settings.role!r}; a worker process needs 'worker'\n")
        return 2
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    start_background_services()
    print(f"PowerOn worker ready (pid {os.getpid()}, {settings.run_threads} run threads)", flush=True)
    stopping.wait()
    print("PowerOn worker stopping: runs in progress finish their step and go back to the queue", flush=True)
    stop_background_services()
    return 0


if __name__ == "__main__":
    sys.exit(main())
