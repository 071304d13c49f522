"""The script.python sandbox: normal runs, error reporting, limits and a corpus of escape attempts.

Every escape attempt must fail safely: the host's files, database, network, processes and
environment stay out of reach, and the run ends within its time limit with a clear error. If
bubblewrap is unavailable these tests fail (not skip): `make test` installs it.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from backend.sandbox import Limits, probe, python_runner, reset_probe, run_python

PROJECT_ROOT = Path(__file__).resolve().parents[2]
MB = 1024 * 1024


@pytest.fixture(autouse=True, scope="module")
def _sandbox_available() -> None:
    status = probe()
    if not status.available:
        pytest.fail(f"the script.python sandbox is unavailable: {status.reason}")


@pytest.fixture(autouse=True)
def _no_leftovers() -> Iterator[None]:
    yield
    assert python_runner.sandbox_processes() == [], "sandbox processes outlived their run"
    assert subprocess.run(["true"], timeout=10).returncode == 0, "the host can no longer start processes"


def everything(result) -> str:
    """All that came back from a run, as text (to search for leaked secrets)."""
    return json.dumps([result.output, result.stdout, result.stderr, result.error, result.traceback], default=str)


# --------------------------------------------------------------------------------- normal runs


def test_probe_reports_a_working_isolated_sandbox() -> None:
    status = probe()
    assert status.available
    assert "network cut" in status.reason and "bwrap" in status.reason.lower()


def test_output_variable_receives_input_and_returns_json() -> None:
    result = run_python(
        "total = sum(item['price'] * item['qty'] for item in input['items'])\n"
        "print('computing', len(input['items']))\n"
        "output = {'total': total, 'names': [i['name'] for i in input['items']], 'none': None}\n",
        {"items": [{"name": "a", "price": 2.5, "qty": 2}, {"name": "ü", "price": 1, "qty": 3}]},
        timeout_seconds=10,
    )
    assert result.ok, result
    assert result.output == {"total": 8.0, "names": ["a", "ü"], "none": None}
    assert result.stdout == "computing 2\n"
    assert result.error is None and result.error_kind is None
    assert 0 < result.duration_ms < 10_000


def test_main_function_is_called_with_input() -> None:
    result = run_python("import math\n\ndef main(data):\n    return [math.isqrt(n) for n in data]\n", [4, 10, 81], 10)
    assert result.ok, result
    assert result.output == [2, 3, 9]


def test_output_unset_is_none_and_stderr_is_captured() -> None:
    result = run_python("import sys\nsys.stderr.write('warning\\n')\n", None, 10)
    assert result.ok and result.output is None
    assert result.stderr == "warning\n"


def test_syntax_error_names_the_line() -> None:
    result = run_python("x = 1\ny = (\n", {}, 10)
    assert not result.ok
    assert result.error_kind == "syntax"
    assert "SyntaxError" in result.error and "line 2" in result.error
    assert "script.py" in result.traceback


def test_exception_reports_message_line_and_traceback() -> None:
    code = "def helper(n):\n    return 10 / n\n\ndef main(data):\n    return helper(data['n'])\n"
    result = run_python(code, {"n": 0}, 10)
    assert not result.ok
    assert result.error_kind == "exception"
    assert result.error == "ZeroDivisionError: division by zero (script.py, line 2)"
    assert 'File "script.py", line 5, in main' in result.traceback
    assert 'File "script.py", line 2, in helper' in result.traceback
    assert "runner.py" not in result.traceback and "/sandbox" not in result.traceback


def test_non_json_output_is_a_clear_error() -> None:
    for code in ("output = {1, 2}", "output = float('nan')", "import datetime\noutput = datetime.date.today()"):
        result = run_python(code, None, 10)
        assert not result.ok
        assert result.error_kind == "serialization", code
        assert "not JSON-serialisable" in result.error


def test_non_json_input_is_refused_without_running() -> None:
    result = run_python("output = 1", {"when": object()}, 10)
    assert not result.ok and result.error_kind == "input"
    assert "not JSON-serialisable" in result.error


def test_oversized_output_is_refused() -> None:
    result = run_python("output = 'x' * (2 * 1024 * 1024)", None, 10, Limits(output_bytes=1 * MB))
    assert not result.ok and result.error_kind == "output"


def test_sys_exit_is_an_error() -> None:
    result = run_python("import sys\nsys.exit(3)", None, 10)
    assert not result.ok and result.error_kind == "exit"
    assert "exit(3)" in result.error


def test_print_flood_is_capped() -> None:
    result = run_python("for _ in range(20000):\n    print('y' * 100)\noutput = 'done'", None, 20)
    assert result.ok, result
    assert result.output == "done"
    assert len(result.stdout) < 70 * 1024
    assert "more bytes dropped" in result.stdout


def test_concurrent_runs_are_independent() -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda n: run_python("output = input * input", n, 20), range(8)))
    assert [r.output for r in results] == [n * n for n in range(8)]


def test_probe_disables_the_node_when_bwrap_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_runner, "_find_bwrap", lambda: None)
    reset_probe()
    try:
        status = probe()
        assert not status.available
        assert "bubblewrap" in status.reason and "apt-get install bubblewrap" in status.reason
        result = run_python("output = 1", None, 5)
        assert not result.ok and result.error_kind == "unavailable"
        assert result.error.startswith("script.python is disabled: bubblewrap")
    finally:
        monkeypatch.undo()
        reset_probe()
    assert probe().available


# ---------------------------------------------------------------------------------- time limits


def test_infinite_loop_stops_at_the_timeout() -> None:
    started = time.monotonic()
    result = run_python("while True:\n    pass\n", None, timeout_seconds=2)
    elapsed = time.monotonic() - started
    assert not result.ok and result.error_kind == "timeout"
    assert result.error == "the script exceeded the time limit of 2 s"
    assert elapsed < 20  # stopped by the limit (generous: CI runs test groups side by side)


def test_sleeping_script_stops_at_the_timeout() -> None:
    started = time.monotonic()
    result = run_python("import time\ntime.sleep(60)\n", None, timeout_seconds=1.5)
    assert not result.ok and result.error_kind == "timeout"
    assert time.monotonic() - started < 30  # stopped by the timeout, not after the script's 60 s


def test_cpu_limit_applies_per_process() -> None:
    result = run_python("while True:\n    pass\n", None, timeout_seconds=10, limits=Limits(cpu_seconds=1))
    assert not result.ok and result.error_kind == "cpu"
    assert "CPU-time limit of 1 s" in result.error
    assert result.duration_ms < 10_000  # ended by the CPU limit, before the 10 s wall-clock timeout


# ----------------------------------------------------------------------------- escape corpus


def test_escape_read_etc_passwd() -> None:
    host_passwd = Path("/etc/passwd").read_text()
    assert "root:" in host_passwd
    result = run_python("output = open('/etc/passwd').read()", None, 10)
    assert not result.ok
    assert result.error_kind == "exception"
    assert "FileNotFoundError" in result.error
    assert "root:" not in everything(result)
    result = run_python("import os\noutput = sorted(os.listdir('/'))", None, 10)
    assert result.ok
    assert "etc" not in result.output and "root" not in result.output and "home" not in result.output


def test_escape_read_the_app_database_and_project(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    database = data_dir / "poweron.db"
    with sqlite3.connect(database) as conn:
        conn.execute("create table secrets (value text)")
        conn.execute("insert into secrets values ('db-secret-4711')")
    targets = [
        str(database), str(data_dir), str(PROJECT_ROOT), str(PROJECT_ROOT / "data" / "poweron.db"),
        str(PROJECT_ROOT / "data"), str(PROJECT_ROOT / "pyproject.toml"), str(PROJECT_ROOT / "backend" / "config.py"),
        str(PROJECT_ROOT / ".venv"), "/root", "/work/main", "/proc/1/root/work/main",
    ]
    assert (PROJECT_ROOT / "pyproject.toml").exists()
    code = """
import os, sqlite3
seen = {}
for path in input:
    try:
        with open(path, "rb") as handle:
            seen[path] = handle.read(100).decode("latin-1")
    except OSError as exc:
        seen[path] = type(exc).__name__
try:
    sqlite3.connect("file:" + input[0] + "?mode=ro", uri=True).execute("select * from secrets").fetchall()
    seen["sqlite"] = "opened"
except Exception as exc:
    seen["sqlite"] = type(exc).__name__
output = {"exists": [p for p in input if os.path.exists(p)], "seen": seen}
"""
    result = run_python(code, targets, 10)
    assert result.ok, result
    assert result.output["exists"] == []
    assert set(result.output["seen"].values()) <= {"FileNotFoundError", "OperationalError", "ModuleNotFoundError"}
    assert "db-secret-4711" not in everything(result)


class _Listener:
    """A TCP server on the host that records whatever reaches it."""

    def __init__(self, host: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.settimeout(1)
            try:
                self.received.append(conn.recv(1024))
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
        self.sock.close()


def _host_address() -> str | None:
    probe_socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe_socket.connect(("192.0.2.1", 9))  # no packet is sent; picks the outgoing interface
        address = probe_socket.getsockname()[0]
    except OSError:
        return None
    finally:
        probe_socket.close()
    return None if address.startswith("127.") else address


def test_escape_open_a_socket_to_the_host() -> None:
    listener = _Listener("0.0.0.0")
    try:
        # Sanity check: the host itself can reach the server.
        with socket.create_connection(("127.0.0.1", listener.port), timeout=2) as client:
            client.sendall(b"from-host")
        time.sleep(0.3)
        assert listener.connections == 1
        targets = ["127.0.0.1", "localhost"] + ([_host_address()] if _host_address() else [])
        code = """
import socket
attempts = {}
for host in input["hosts"]:
    try:
        with socket.create_connection((host, input["port"]), timeout=2) as conn:
            conn.sendall(b"escaped")
        attempts[host] = "connected"
    except OSError as exc:
        attempts[host] = type(exc).__name__ + ": " + str(exc)
try:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.sendto(b"escaped", ("8.8.8.8", 53))
    attempts["udp"] = "sent"
except OSError as exc:
    attempts["udp"] = type(exc).__name__
try:
    socket.getaddrinfo("example.com", 80)
    attempts["dns"] = "resolved"
except OSError as exc:
    attempts["dns"] = type(exc).__name__
output = {"attempts": attempts, "interfaces": [name for _, name in socket.if_nameindex()]}
"""
        result = run_python(code, {"hosts": targets, "port": listener.port}, 15)
        time.sleep(0.5)
        assert result.ok, result
        attempts = result.output["attempts"]
        assert all(value != "connected" for value in attempts.values()), attempts
        assert attempts["udp"] != "sent"
        assert attempts["dns"] != "resolved"
        assert result.output["interfaces"] == ["lo"]
        assert listener.connections == 1 and listener.received == [b"from-host"]
    finally:
        listener.close()


def test_escape_fork_bomb_is_contained() -> None:
    started = time.monotonic()
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    result = run_python(code, None, timeout_seconds=3)
    elapsed = time.monotonic() - started
    assert not result.ok
    assert result.error_kind in {"timeout", "cpu", "crashed"}
    assert elapsed < 30  # contained by the limits, not running on


def test_escape_process_count_is_limited() -> None:
    code = """
import os, time
children = []
error = None
try:
    for _ in range(500):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children.append(pid)
except OSError as exc:
    error = type(exc).__name__
output = {"forked": len(children), "error": error}
"""
    started = time.monotonic()
    result = run_python(code, None, timeout_seconds=10, limits=Limits(max_processes=16))
    assert result.ok, result
    assert result.output["error"] == "BlockingIOError"
    assert result.output["forked"] < 16
    # The sleeping children die with the sandbox instead of holding the run open (60 s).
    assert time.monotonic() - started < 30


def test_escape_huge_allocation() -> None:
    result = run_python("block = bytearray(8 * 1024 ** 3)\noutput = len(block)", None, 10)
    assert not result.ok and result.error_kind == "memory"
    assert "memory limit of 512 MB" in result.error
    result = run_python("chunks = []\nwhile True:\n    chunks.append(bytearray(32 * 1024 * 1024))", None, 10)
    assert not result.ok and result.error_kind == "memory"


def test_escape_write_a_1gb_file() -> None:
    code = "chunk = b'x' * 2**20\nwith open('big.bin', 'wb') as f:\n    for _ in range(1024):\n        f.write(chunk)"
    result = run_python(code, None, 15)
    assert not result.ok and result.error_kind == "exception"
    assert "File too large" in result.error
    # Many files just under the size limit fill the capped scratch space instead of the host disk.
    code = """
chunk = b"x" * (1024 * 1024)
written, error = 0, None
try:
    for n in range(200):
        with open(f"part{n}.bin", "wb") as f:
            for _ in range(9):
                f.write(chunk)
                written += 1
except OSError as exc:
    error = str(exc)
output = {"written_mb": written, "error": error}
"""
    result = run_python(code, None, 15)
    assert result.ok, result
    assert "No space left on device" in result.output["error"]
    assert result.output["written_mb"] <= 64


def test_escape_ctypes_and_libc() -> None:
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
output = {
    "getuid": libc.getuid(),
    "setuid0": libc.setuid(0),
    "unshare_user": libc.unshare(0x10000000),
    "unshare_net": libc.unshare(0x40000000),
    "mount": libc.mount(b"tmpfs", b"/usr", b"tmpfs", 0, None),
    "chroot": libc.chroot(b"/"),
    "reboot": libc.reboot(0x4321FEDC),
    "ptrace_init": libc.ptrace(16, 1, None, None),
}
"""
    result = run_python(code, None, 10)
    assert result.ok, result
    assert result.output["getuid"] == 65534
    assert all(value == -1 for key, value in result.output.items() if key != "getuid"), result.output
    # A crash through ctypes takes down only the sandbox.
    result = run_python("import ctypes\nctypes.string_at(0)", None, 10)
    assert not result.ok and result.error_kind == "crashed"
    assert "SIGSEGV" in result.error


def test_escape_kill_everything_reaches_only_the_sandbox() -> None:
    sentinel = subprocess.Popen(["sleep", "30"])
    try:
        result = run_python(
            "import os, signal\n"
            "try:\n    os.kill(input['host_pid'], signal.SIGKILL)\n    hit = 'killed'\n"
            "except OSError as exc:\n    hit = type(exc).__name__\n"
            "print(hit, flush=True)\nos.kill(-1, signal.SIGKILL)\n",
            {"host_pid": sentinel.pid}, 10,
        )
        assert not result.ok
        assert result.stdout.strip() == "ProcessLookupError"
        assert sentinel.poll() is None, "a host process was killed from inside the sandbox"
    finally:
        sentinel.kill()
        sentinel.wait()


def test_escape_read_environment_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-fake-secret-9f8e7d6c"
    monkeypatch.setenv("POWERON_FAKE_SECRET", secret)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    code = """
import os
environs = {}
for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
    try:
        environs[pid] = open(f"/proc/{pid}/environ", "rb").read().decode("latin-1")
    except OSError as exc:
        environs[pid] = type(exc).__name__
output = {"env": dict(os.environ), "proc": environs}
"""
    result = run_python(code, None, 10)
    assert result.ok, result
    assert set(result.output["env"]) <= {"PATH", "HOME", "LANG", "TMPDIR", "PWD"}
    assert secret not in everything(result)
    assert "POWERON" not in everything(result)


def test_escape_no_host_file_descriptors_are_inherited() -> None:
    code = """
import os
links = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        links[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
output = links
"""
    result = run_python(code, None, 10)
    assert result.ok, result
    for fd, target in result.output.items():
        assert target.startswith(("pipe:", "/dev/null", "/proc/", "/sandbox/")), (fd, target)


def test_escape_subprocess_shell_cannot_get_out() -> None:
    code = """
import subprocess
script = "id -u; cat /etc/passwd; ls /; ls /work/main /root; cat /proc/1/environ; echo; echo end"
proc = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=5)
output = {"stdout": proc.stdout, "stderr": proc.stderr, "rc": proc.returncode}
"""
    result = run_python(code, None, 10)
    assert result.ok, result
    lines = result.output["stdout"].splitlines()
    assert lines[0] == "65534"
    assert lines[-1] == "end"
    assert "root:" not in result.output["stdout"]
    assert "etc" not in lines and "home" not in lines
    assert "No such file or directory" in result.output["stderr"]
