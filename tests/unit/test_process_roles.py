"""POWERON_ROLE: which processes may do what (backend/config.py, backend/worker.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from backend.config import get_settings, reset_settings_cache
from tests.conftest import PROJECT_ROOT


@pytest.fixture
def settings_env(monkeypatch, tmp_path):
    monkeypatch.setenv("POWERON_DATA_DIR", str(tmp_path))
    yield monkeypatch
    reset_settings_cache()


def roles_on(env, db_url: str, role: str | None):
    env.setenv("POWERON_DB_URL", db_url)
    if role is None:
        env.delenv("POWERON_ROLE", raising=False)
    else:
        env.setenv("POWERON_ROLE", role)
    reset_settings_cache()
    return get_settings()


def test_the_default_role_does_everything_and_postgresql_shares_the_queue(settings_env, tmp_path):
    sqlite = roles_on(settings_env, f"sqlite:///{tmp_path}/x.db", None)
    assert (sqlite.role, sqlite.shared_queue) == ("all", False)
    postgres = roles_on(settings_env, "postgresql+psycopg://u@127.0.0.1:5/db", "Worker")
    assert (postgres.role, postgres.shared_queue) == ("worker", True)


@pytest.mark.parametrize("role", ["api", "worker"])
def test_api_and_worker_roles_need_postgresql(settings_env, tmp_path, role):
    with pytest.raises(ValueError, match=f"POWERON_ROLE={role} needs PostgreSQL"):
        roles_on(settings_env, f"sqlite:///{tmp_path}/x.db", role)


def test_an_unknown_role_is_named(settings_env, tmp_path):
    with pytest.raises(ValueError, match="POWERON_ROLE must be one of all, api, worker, not 'scheduler'"):
        roles_on(settings_env, f"sqlite:///{tmp_path}/x.db", "scheduler")


def test_a_worker_process_on_sqlite_refuses_to_start_and_says_why(tmp_path):
    env = {**os.environ, "POWERON_DB_URL": f"sqlite:///{tmp_path}/x.db", "POWERON_DATA_DIR": str(tmp_path)}
    env.pop("POWERON_ROLE", None)
    done = subprocess.run([sys.executable, "-m", "backend.worker"], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "POWERON_ROLE=worker needs PostgreSQL" in done.stderr
