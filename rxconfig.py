"""Reflex configuration.

Ports: `reflex run --env prod` (make run) serves UI and API on one port (`--frontend-port P
--backend-port P`, 3000 by default); `reflex run` in dev (make dev) serves the UI on 3000 and the
API on 8000. REFLEX_* variables override both.

Backend workers: in prod mode Reflex 0.10 starts GRANIAN_WORKERS backend worker processes
(reflex/utils/exec.py, `run_granian_backend_prod`); unset, it starts one without REFLEX_REDIS_URL
and 2 x CPUs + 1 (at most 8) with it (reflex/utils/processes.py, `get_num_workers`). Every worker
runs PowerOn's background services; the UI state is shared between them only through Redis and the
runs only through PostgreSQL, so `_one_worker_unless_shared` keeps a single worker otherwise.
"""

import os
import sys
from pathlib import Path

import reflex as rx
from dotenv import load_dotenv

WORKERS = "GRANIAN_WORKERS"

# The project's .env counts as environment for Reflex too (REFLEX_REDIS_URL, GRANIAN_WORKERS), as it does
# for backend/config.py; variables already set win.
load_dotenv(Path(__file__).resolve().parent / ".env", override=False)


def _setting(name: str) -> str:
    """A variable from the environment (which holds the .env file's too)."""
    return (os.environ.get(name) or "").strip()


def _one_worker_unless_shared() -> None:
    """Set GRANIAN_WORKERS=1 unless PostgreSQL (POWERON_DB_URL) and Redis (REFLEX_REDIS_URL) are set.

    With SQLite one process must do everything, and without Redis each worker would keep its own UI
    state; more workers asked for (GRANIAN_WORKERS, or Reflex's default once REFLEX_REDIS_URL is set)
    are served by one, and a line on stderr says why.
    """
    postgres = _setting("POWERON_DB_URL").startswith("postgres")
    redis = bool(_setting("REFLEX_REDIS_URL"))
    if postgres and redis:
        return
    asked = os.environ.get(WORKERS, "").strip()
    if asked not in ("", "1") or (redis and not asked):
        missing = " and ".join(
            name for name, ok in (("PostgreSQL (POWERON_DB_URL)", postgres), ("Redis (REFLEX_REDIS_URL)", redis))
            if not ok)
        instead = f"{WORKERS}={asked} ignored" if asked else "not Reflex's default for REFLEX_REDIS_URL"
        print(f"PowerOn: serving with one backend worker ({instead}): several need {missing}.", file=sys.stderr)
    os.environ[WORKERS] = "1"


_one_worker_unless_shared()

config = rx.Config(
    app_name="poweron_app",
    telemetry_enabled=False,
    frontend_port=3000,
    backend_port=8000,
    show_built_with_reflex=False,
    disable_plugins=[rx.plugins.SitemapPlugin],
    plugins=[rx.plugins.RadixThemesPlugin(theme=rx.theme(accent_color="indigo", radius="medium"))],
)
