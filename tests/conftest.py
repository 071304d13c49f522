"""Shared fixtures for the whole test suite.

Sections (add new fixtures to the section they belong to, or start a new one):

1. Import path and markers.
2. PostgreSQL server: ``postgres_url`` starts a private, throw-away PostgreSQL server for the
   test session (installing Debian's ``postgresql`` when missing and running as root).
   If no server can be had the PostgreSQL tests FAIL with the reason; set
   ``POWERON_SKIP_POSTGRES=1`` to skip them instead (without trying).
3. Databases: ``db_url`` is parametrized over SQLite and PostgreSQL and gives each test a fresh,
   migrated, empty database; ``engine`` is ``make_engine(db_url)``. Restrict a test to one
   database with ``@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)``; deselect
   the PostgreSQL half with ``-m "not postgres"``.
4. Data helpers: ``make_parents`` creates the rows a workflow run hangs off (user, mandate,
   feature instance, workflow, version, run).
5. Scripted AI provider: ``ai_server`` starts tests/ai_server.py's OpenAI-compatible server on
   127.0.0.1 and points OPENAI_BASE_URL / OPENAI_API_KEY / POWERON_AI_MODEL at it.
6. Redis server: ``redis_url`` starts a private, throw-away ``redis-server`` (no persistence) on a
   free 127.0.0.1 port for the test session, installing Debian's ``redis-server`` when missing and
   running as root; the tests that need it are skipped, saying why, when it cannot be had.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# --- 1. import path and markers -------------------------------------------------------------

PROJECT_ROOT = Path(__file__).resolve().parent.parent
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

# Tests never search the internet: web search out of the box (ddgs) would. Without a SearXNG URL
# core.webSearch is "not configured"; a test that wants an engine sets POWERON_SEARCH_ENGINE itself
# (tests/integration/test_web_search_engines.py). Apps the e2e tests start inherit this.
os.environ["POWERON_SEARCH_ENGINE"] = "searxng"
# Password hashes with argon2's least cost (backend/auth.py): the suite signs in thousands of times.
os.environ["POWERON_TEST_FAST_PASSWORD_HASHING"] = "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres: the test runs against the PostgreSQL server")


# --- 2. PostgreSQL server -------------------------------------------------------------------

PG_USER = "postgres"
PG_DATABASE = "poweron_test"
PG_TEMPLATE = "poweron_template"  # migrated once per session, cloned for every test database


def _skip_postgres() -> bool:
    return os.environ.get("POWERON_SKIP_POSTGRES", "").strip().lower() in {"1", "true", "yes"}


def _find_pg_bindir() -> Path | None:
    """The bin folder of the newest installed PostgreSQL that has initdb and pg_ctl."""

    def major(path: str) -> float:
        try:
            return float(Path(path).parent.name)
        except ValueError:
            return 0.0

    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=major, reverse=True):
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    on_path = shutil.which("pg_ctl")
    if on_path and (Path(on_path).parent / "initdb").exists():
        return Path(on_path).parent
    return None


def _apt_install(*arguments: str) -> str:
    """apt-get install `arguments` (updating the package lists when needed); returns a log."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", *arguments]
    result = subprocess.run(install, capture_output=True, text=True, env=env)
    if result.returncode == 0:
        return result.stdout
    update = subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True, env=env)
    result = subprocess.run(install, capture_output=True, text=True, env=env)
    return update.stdout + update.stderr + result.stdout + result.stderr


def _install_postgres() -> str:
    """apt-get install postgresql; returns a log."""
    return _apt_install("postgresql")


def _as_pg_user(args: list[str]) -> list[str]:
    """Run `args` as the postgres user when we are root (initdb refuses to run as root)."""
    if os.geteuid() != 0:
        return args
    if shutil.which("runuser"):
        return ["runuser", "-u", PG_USER, "--", *args]
    return ["su", PG_USER, "-s", "/bin/sh", "-c", subprocess.list2cmdline(args)]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(args: list[str], what: str) -> None:
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")


@dataclass
class PostgresServer:
    """A private PostgreSQL server living in a temporary folder."""

    bindir: Path
    root: Path
    port: int = 0
    _admin: Any = None

    def execute(self, *statements: str) -> None:
        """Run statements on the `postgres` database, outside a transaction.

        One connection is kept for the session: a fresh connection per CREATE DATABASE
        makes each one wait a few hundred milliseconds for the previous backend to go.
        """
        import psycopg

        if self._admin is None or self._admin.closed:
            self._admin = psycopg.connect(
                host="127.0.0.1", port=self.port, user=PG_USER, dbname="postgres", autocommit=True
            )
        for statement in statements:
            self._admin.execute(statement)

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def logfile(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, PG_USER, PG_USER)
        _run(
            _as_pg_user([str(self.bindir / "initdb"), "-A", "trust", "-U", PG_USER,
                         "-E", "UTF8", "--locale=C", "-D", str(self.datadir)]),
            "initdb",
        )
        last_error: Exception | None = None
        for _attempt in range(3):  # the free port may be taken between probing and binding
            self.port = _free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c autovacuum=off"
            )
            try:
                _run(
                    _as_pg_user([str(self.bindir / "pg_ctl"), "start", "-w", "-t", "60",
                                 "-D", str(self.datadir), "-l", str(self.logfile), "-o", options]),
                    "pg_ctl start",
                )
                return
            except RuntimeError as error:
                last_error = error
        log = self.logfile.read_text(errors="replace") if self.logfile.exists() else ""
        raise RuntimeError(f"{last_error}\nserver log:\n{log}")

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
        if self.datadir.exists():
            subprocess.run(
                _as_pg_user([str(self.bindir / "pg_ctl"), "stop", "-m", "fast", "-w",
                             "-D", str(self.datadir)]),
                capture_output=True, timeout=120,
            )
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A running private PostgreSQL server for the whole test session."""
    if _skip_postgres():
        pytest.skip("PostgreSQL tests skipped: POWERON_SKIP_POSTGRES is set")
    bindir = _find_pg_bindir()
    install_log = ""
    if bindir is None and os.geteuid() == 0 and shutil.which("apt-get"):
        install_log = _install_postgres()
        bindir = _find_pg_bindir()
    if bindir is None:
        pytest.fail(
            "PostgreSQL is required for these tests but initdb/pg_ctl were not found under "
            "/usr/lib/postgresql/*/bin or on PATH"
            + (" and `apt-get install postgresql` did not provide them:\n" + install_log[-3000:]
               if install_log else " (install Debian's `postgresql` package, or run as root)")
            + ". Set POWERON_SKIP_POSTGRES=1 to skip the PostgreSQL tests instead.",
            pytrace=False,
        )
    server = PostgresServer(bindir=bindir, root=Path(tempfile.mkdtemp(prefix="poweron-pg-")))
    try:
        server.start()
    except Exception as error:
        server.stop()
        pytest.fail(
            f"could not start a PostgreSQL server from {bindir}: {error}\n"
            "Set POWERON_SKIP_POSTGRES=1 to skip the PostgreSQL tests instead.",
            pytrace=False,
        )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """URL of the (empty, unmigrated) database `poweron_test` on the private server."""
    postgres_server.execute(f'CREATE DATABASE "{PG_DATABASE}"')
    return postgres_server.url(PG_DATABASE)


# --- 3. databases ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to the newest schema once; tests get copies of it."""
    from backend.db.engine import migrate

    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    migrate(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def _postgres_template(postgres_url: str, postgres_server: PostgresServer) -> str:
    """A PostgreSQL database migrated to the newest schema once; tests get clones of it."""
    from backend.db.engine import migrate

    postgres_server.execute(f'CREATE DATABASE "{PG_TEMPLATE}"')
    migrate(postgres_server.url(PG_TEMPLATE))
    return PG_TEMPLATE


@pytest.fixture(
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, migrated, empty database for one test, on SQLite and on PostgreSQL.

    Every copy comes from a template that `backend.db.engine.migrate` brought to the newest
    schema once per session, which is the same as migrating each database but much faster.
    """
    if request.param == "sqlite":
        path = tmp_path / "poweron.db"
        shutil.copyfile(request.getfixturevalue("_sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    if request.param != "postgresql":
        raise ValueError(f"unknown database kind {request.param!r}")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    template = request.getfixturevalue("_postgres_template")
    name = f"t_{uuid.uuid4().hex[:16]}"
    server.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield server.url(name)
    finally:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db_kind(db_url: str) -> str:
    """"sqlite" or "postgresql": which database the current test runs against."""
    return "sqlite" if db_url.startswith("sqlite") else "postgresql"


@pytest.fixture
def engine(db_url: str):
    """`make_engine(db_url)`, disposed after the test."""
    from backend.db.engine import make_engine

    created = make_engine(db_url)
    try:
        yield created
    finally:
        created.dispose()


# --- 4. data helpers ------------------------------------------------------------------------


@dataclass
class Parents:
    """Ids of a minimal chain of rows: user → mandate → feature instance → workflow → version → run."""

    user_id: str
    mandate_id: str
    feature_instance_id: str
    workflow_id: str
    version_id: str
    run_id: str


def create_parents(
    session,
    *,
    label: str | None = None,
    version_status: str = "published",
    run_status: str = "running",
) -> Parents:
    """Add (and flush, not commit) a user, mandate, feature instance, workflow, version and run."""
    from backend.db.models import FeatureInstance, Mandate, User, Workflow, WorkflowRun, WorkflowVersion

    label = label or uuid.uuid4().hex[:8]
    user = User(username=f"user-{label}", email=f"{label}@example.com")
    mandate = Mandate(name=f"mandate-{label}")
    session.add_all([user, mandate])
    session.flush()
    instance = FeatureInstance(mandate_id=mandate.id, feature_code="graphicalEditor",
                               label=f"editor-{label}")
    session.add(instance)
    session.flush()
    workflow = Workflow(mandate_id=mandate.id, feature_instance_id=instance.id,
                        name=f"workflow-{label}", sys_created_by=user.id)
    session.add(workflow)
    session.flush()
    version = WorkflowVersion(workflow_id=workflow.id, version_number=1, status=version_status,
                              graph={"nodes": [], "edges": []}, sys_created_by=user.id)
    session.add(version)
    session.flush()
    run = WorkflowRun(workflow_id=workflow.id, version_id=version.id, mandate_id=mandate.id,
                      feature_instance_id=instance.id, status=run_status, sys_created_by=user.id)
    session.add(run)
    session.flush()
    return Parents(user.id, mandate.id, instance.id, workflow.id, version.id, run.id)


@pytest.fixture
def make_parents(engine) -> Callable[..., Parents]:
    """Create and commit a parent chain in `engine`'s database (keywords as `create_parents`)."""
    from sqlmodel import Session

    def make(**options) -> Parents:
        with Session(engine) as session:
            parents = create_parents(session, **options)
            session.commit()
            return parents

    return make


# --- 5. scripted AI provider ----------------------------------------------------------------


@pytest.fixture
def ai_server(monkeypatch: pytest.MonkeyPatch):
    """A scripted OpenAI-compatible server on 127.0.0.1 (tests/ai_server.py), configured as the
    AI provider: OPENAI_BASE_URL, OPENAI_API_KEY and POWERON_AI_MODEL=test-model are set
    (POWERON_AI_PROVIDERS and POWERON_AI_NEUTRALIZE are emptied, so a .env cannot interfere)."""
    from backend.config import reset_settings_cache
    from tests.ai_server import ScriptedAiServer

    server = ScriptedAiServer(api_key="test-key").start()
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
    monkeypatch.setenv("POWERON_AI_MODEL", "test-model")
    monkeypatch.setenv("POWERON_AI_PROVIDERS", "")
    monkeypatch.setenv("POWERON_AI_NEUTRALIZE", "")
    reset_settings_cache()
    try:
        yield server
    finally:
        server.stop()
        reset_settings_cache()


# --- 6. Redis server ------------------------------------------------------------------------


def _install_redis() -> str:
    """apt-get install redis-server; returns a log."""
    return _apt_install("--no-install-recommends", "redis-server")


def _redis_binary() -> tuple[str | None, str]:
    """The redis-server executable (installed when missing and root), or None and why not."""
    found = shutil.which("redis-server")
    if found:
        return found, ""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, "redis-server is not installed (install Debian's `redis-server` package, or run as root)"
    log = _install_redis()
    found = shutil.which("redis-server")
    return found, "" if found else f"`apt-get install redis-server` did not provide it:\n{log[-2000:]}"


def _start_redis(binary: str, root: Path) -> tuple[subprocess.Popen, int]:
    """redis-server on a free 127.0.0.1 port, answering PING; raises RuntimeError with its log."""
    import redis

    log = root / "redis.log"
    for _attempt in range(3):  # the free port may be taken between probing and binding
        port = _free_port()
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(root), "--logfile", str(log), "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if client.ping():
                    return process, port
            except redis.RedisError:
                time.sleep(0.1)
        process.kill()
        process.wait()
    raise RuntimeError(log.read_text(errors="replace") if log.exists() else "no log")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """`redis://127.0.0.1:<port>` of a private redis-server living as long as the test session."""
    binary, why = _redis_binary()
    if binary is None:
        pytest.skip(f"Redis tests skipped: {why}")
    root = Path(tempfile.mkdtemp(prefix="poweron-redis-"))
    try:
        process, port = _start_redis(binary, root)
    except RuntimeError as error:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start redis-server ({binary}): {error}", pytrace=False)
    try:
        yield f"redis://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(root, ignore_errors=True)
