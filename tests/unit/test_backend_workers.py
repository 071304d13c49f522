"""How many backend worker processes `make run` starts (rxconfig.py): Reflex's GRANIAN_WORKERS, kept at
one unless PostgreSQL and Redis hold what several workers must share, with a line saying why."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT

POSTGRES = "postgresql+psycopg://u@127.0.0.1:1/db"
REDIS = "redis://127.0.0.1:1"


def workers_with(**settings: str) -> tuple[str | None, str]:
    """(GRANIAN_WORKERS after rxconfig.py ran, what it printed) in a process with only these settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("POWERON_", "REFLEX_", "GRANIAN_"))}
    env.update(settings)
    code = "import os, rxconfig; print(os.environ.get('GRANIAN_WORKERS'))"
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    value = done.stdout.strip().splitlines()[-1]
    return (None if value == "None" else value), done.stderr


@pytest.mark.parametrize("settings", [
    {"GRANIAN_WORKERS": "4"},
    {"REFLEX_REDIS_URL": REDIS},
    {"REFLEX_REDIS_URL": REDIS, "GRANIAN_WORKERS": "3"},
    {"POWERON_DB_URL": POSTGRES, "GRANIAN_WORKERS": "2"},
], ids=["sqlite", "sqlite-with-redis", "sqlite-with-redis-asked", "postgres-without-redis"])
def test_more_workers_than_one_need_postgres_and_redis(settings):
    workers, said = workers_with(**settings)
    assert workers == "1"
    assert "serving with one backend worker" in said
    if "POWERON_DB_URL" not in settings:
        assert "PostgreSQL (POWERON_DB_URL)" in said
    if "REFLEX_REDIS_URL" not in settings:
        assert "Redis (REFLEX_REDIS_URL)" in said


def test_one_worker_by_default_says_nothing():
    assert workers_with() == ("1", "")


def test_postgres_and_redis_keep_the_asked_count_or_reflex_default():
    assert workers_with(POWERON_DB_URL=POSTGRES, REFLEX_REDIS_URL=REDIS, GRANIAN_WORKERS="2") == ("2", "")
    assert workers_with(POWERON_DB_URL=POSTGRES, REFLEX_REDIS_URL=REDIS) == (None, "")  # Reflex decides
