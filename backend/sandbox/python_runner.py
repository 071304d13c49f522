"""Run untrusted Python (``script.python`` nodes) outside the app process, in a bubblewrap sandbox.

Every call of :func:`run_python` starts a fresh, short-lived ``bwrap`` process:

* **Namespaces**: ``--unshare-all --unshare-user --disable-userns``: no network (an own, empty
  network namespace: only its own ``lo``, so even 127.0.0.1 of the host is unreachable), own PID,
  IPC, UTS and cgroup namespaces, and no nested user namespaces. ``--die-with-parent`` and
  ``--new-session``.
* **Filesystem**: an empty root (read-only tmpfs) with read-only binds of ``/usr/bin``,
  ``/usr/lib`` and ``/usr/lib64`` (the interpreter and its libraries; ``/bin``, ``/lib`` and
  ``/lib64`` as on the host), a fresh ``/proc`` of the sandbox's own PID namespace, a minimal
  ``/dev``, size-capped tmpfs scratch space at ``/work`` (the working directory), ``/tmp`` and
  ``/dev/shm``, and the run's host temp dir read-only at ``/sandbox`` (``script.py``,
  ``input.json``, ``runner.py``). Nothing else: no ``/etc`` (so no ``/etc/passwd``), no ``/root``,
  no ``/home``, no project directory, no database, no ``/usr/local``.
* **Identity**: as root, ``bwrap`` itself is started as an unprivileged host uid taken from a
  dedicated pool (``SANDBOX_UID_BASE`` + n, no supplementary groups), because root ignores
  ``RLIMIT_NPROC`` and would keep owner access to root-owned files; inside, the code runs as uid/gid
  65534 without capabilities.
* **System calls**: on x86-64 a small seccomp filter (``--seccomp``) makes ptrace, keyrings, eBPF,
  perf, userfaultfd, io_uring, module/kexec, mount and namespace calls fail with EPERM.
* **Environment**: ``--clearenv`` plus ``PATH``, ``HOME``, ``LANG`` and ``TMPDIR``; ``bwrap``
  itself also gets an empty environment, so no secret of the app's environment reaches the code.
* **Limits** (:class:`Limits`): set by the in-sandbox wrapper as hard limits before any user code
  runs (CPU, address space, file size, process count, open files, no core dumps;
  ``oom_score_adj`` 1000), plus a wall-clock deadline enforced by the host, which then kills the
  ``bwrap`` process group (the sandbox's PID namespace dies with it) and every leftover process of
  the run's uid. The limits are applied inside rather than in a ``preexec_fn`` because
  ``preexec_fn`` is unsafe in a multi-threaded app; nothing user-controlled runs before they are in
  force.

**The script contract**: the code runs as a module with ``input`` bound to the decoded input
JSON. If it defines a callable ``main``, the result of ``main(input)`` is the output; otherwise
the value of the global ``output`` after the module has run (``None`` when unset). The output must
be JSON-serialisable (no NaN/Infinity) and at most ``Limits.output_bytes`` once encoded. Only the
standard library of the system ``python3`` is available; ``print`` output comes back as
``stdout``/``stderr`` (capped).

**What the host trusts**: nothing. The result comes back through a dedicated pipe as one JSON
envelope, read with a size cap, parsed with ``json.loads`` and validated; it is never executed.

:func:`probe` (cached) checks once per process that ``bwrap`` exists and that a trivial sandboxed
run works with the network really cut and the project invisible. When it fails, ``script.python``
must be disabled with ``probe().reason``; :func:`run_python` then refuses to run (error kind
``unavailable``) rather than run code unsafely.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import json
import logging
import math
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

KB = 1024
MB = 1024 * 1024

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
RUNNER_SOURCE = Path(__file__).with_name("_runner_script.py")

#: Host uids used for sandboxed runs when the app runs as root: one per run, round robin.
SANDBOX_UID_BASE = 1_500_000_000
SANDBOX_UID_POOL = 4096
#: The uid/gid the code sees inside the sandbox ("nobody").
INNER_UID = 65534

SYSTEM_PYTHON = "/usr/bin/python3"
SANDBOX_PATH = "/usr/bin:/bin"
ALLOWED_ENV = {"PATH", "HOME", "LANG", "TMPDIR", "PWD"}

#: Error kinds of a failed :class:`SandboxResult`.
ERROR_KINDS = {
    "unavailable",  # no working sandbox on this machine (see probe().reason)
    "input",  # the input is not JSON-serialisable
    "syntax",  # the script does not compile
    "exception",  # the script raised
    "exit",  # the script called sys.exit()
    "serialization",  # the output is not JSON-serialisable
    "output",  # the output is too large
    "memory",  # memory limit
    "cpu",  # CPU-time limit
    "timeout",  # wall-clock limit
    "crashed",  # killed by a signal (segfault, file-size limit, ...) or exited without a result
    "sandbox",  # bwrap itself failed
}


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run.

    Attributes:
        memory_bytes: RLIMIT_AS of every process in the sandbox.
        file_size_bytes: RLIMIT_FSIZE: largest file the code may write.
        max_processes: RLIMIT_NPROC: processes/threads in the sandbox (bwrap's own init and the
            interpreter count too). With ``memory_bytes`` it bounds the run's total memory.
        open_files: RLIMIT_NOFILE.
        cpu_seconds: RLIMIT_CPU per process; None: the wall-clock timeout rounded up, plus 1.
        scratch_bytes: Size of the writable tmpfs at ``/work``; ``/tmp`` and ``/dev/shm`` get a
            quarter each.
        output_bytes: Largest encoded JSON output.
        stream_bytes: How much of stdout and of stderr is kept (the rest is counted and dropped).
    """

    memory_bytes: int = 512 * MB
    file_size_bytes: int = 10 * MB
    max_processes: int = 32
    open_files: int = 256
    cpu_seconds: int | None = None
    scratch_bytes: int = 64 * MB
    output_bytes: int = 4 * MB
    stream_bytes: int = 64 * KB


@dataclass(frozen=True)
class SandboxStatus:
    """Whether ``script.python`` can run on this machine, and why (not)."""

    available: bool
    reason: str


@dataclass(frozen=True)
class SandboxResult:
    """The outcome of one sandboxed run.

    Attributes:
        ok: The script finished and produced a JSON-serialisable output.
        output: That output (None when not ok).
        stdout: What the script printed (capped at ``Limits.stream_bytes``, with a note).
        stderr: What it wrote to stderr (capped likewise).
        error: One-line message when not ok, e.g. ``ZeroDivisionError: division by zero
            (script.py, line 3)`` or ``the script exceeded the time limit of 5 s``.
        error_kind: One of :data:`ERROR_KINDS` when not ok.
        traceback: The last lines of the script's own traceback (exceptions and syntax errors).
        duration_ms: Wall-clock time of the run.
    """

    ok: bool
    output: Any = None
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    error_kind: str | None = None
    traceback: str | None = None
    duration_ms: int = 0


@dataclass(frozen=True)
class _Setup:
    bwrap: str
    python: str
    binds: tuple[str, ...]
    seccomp: bytes | None


# ----------------------------------------------------------------------------------------- probe

_probe_lock = threading.Lock()
_probe_status: SandboxStatus | None = None
_setup: _Setup | None = None


def probe() -> SandboxStatus:
    """Check once per process (cached) that sandboxed runs work here; see :func:`reset_probe`."""
    global _probe_status, _setup
    with _probe_lock:
        if _probe_status is None:
            try:
                _setup, _probe_status = _probe()
            except Exception as exc:  # the probe must never take the app down
                log.exception("sandbox probe failed")
                _setup, _probe_status = None, SandboxStatus(False, f"the sandbox probe failed: {exc}")
            level = logging.INFO if _probe_status.available else logging.WARNING
            log.log(level, "script.python sandbox: %s", _probe_status.reason)
        return _probe_status


def reset_probe() -> None:
    """Forget the cached probe result (tests; after installing bubblewrap)."""
    global _probe_status, _setup
    with _probe_lock:
        _probe_status, _setup = None, None


def _find_bwrap() -> str | None:
    return shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")


def _find_python() -> tuple[str, tuple[str, ...]] | None:
    """The interpreter for sandboxed code and any extra read-only bind it needs."""
    if os.access(SYSTEM_PYTHON, os.X_OK):
        return SYSTEM_PYTHON, ()
    base = Path(sys.base_prefix).resolve()
    candidate = base / "bin" / "python3"
    if os.access(candidate, os.X_OK) and not base.is_relative_to(PROJECT_ROOT):
        return str(candidate), ("--ro-bind", str(base), str(base))
    return None


def _system_binds() -> tuple[str, ...]:
    binds: list[str] = []
    for path in ("/usr/bin", "/usr/lib", "/usr/lib64"):
        if os.path.isdir(path) and not os.path.islink(path):
            binds += ["--ro-bind", path, path]
    for path in ("/bin", "/lib", "/lib64"):
        if os.path.islink(path):
            binds += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            binds += ["--ro-bind", path, path]
    return tuple(binds)


# Syscalls the sandboxed code never needs and that widen the kernel's attack surface or reach
# outside the sandbox's own processes (ptrace of the sandbox's init, keyrings, eBPF, perf,
# userfaultfd, io_uring, modules, kexec, mounts, namespaces, clocks, reboot, ...): they fail with
# EPERM. x86-64 numbers; x32 and foreign-architecture (e.g. int 0x80) calls are refused outright.
_DENIED_SYSCALLS_X86_64 = (
    101,  # ptrace
    103,  # syslog
    135,  # personality
    153,  # vhangup
    155,  # pivot_root
    159,  # adjtimex
    163,  # acct
    164,  # settimeofday
    165, 166,  # mount, umount2
    167, 168,  # swapon, swapoff
    169,  # reboot
    172, 173,  # iopl, ioperm
    175, 176, 313,  # init_module, delete_module, finit_module
    179,  # quotactl
    212,  # lookup_dcookie
    227, 305,  # clock_settime, clock_adjtime
    246, 320,  # kexec_load, kexec_file_load
    248, 249, 250,  # add_key, request_key, keyctl
    272, 308,  # unshare, setns
    298,  # perf_event_open
    303, 304,  # name_to_handle_at, open_by_handle_at
    310, 311,  # process_vm_readv, process_vm_writev
    321,  # bpf
    323,  # userfaultfd
    425, 426, 427,  # io_uring_setup, io_uring_enter, io_uring_register
    428, 429, 430, 431, 432, 433, 442,  # open_tree, move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr
)
_AUDIT_ARCH_X86_64 = 0xC000003E


def _seccomp_program() -> bytes | None:
    """A classic-BPF seccomp filter (the form ``bwrap --seccomp`` reads), or None on other CPUs."""
    if os.uname().machine != "x86_64":
        return None
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | errno.EPERM  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO(EPERM)
    count = len(_DENIED_SYSCALLS_X86_64)
    deny_at = 6 + count  # index of the final "deny" instruction
    program = [
        (ld_abs, 0, 0, 4),  # A = seccomp_data.arch
        (jeq, 1, 0, _AUDIT_ARCH_X86_64),
        (ret, 0, 0, deny),
        (ld_abs, 0, 0, 0),  # A = seccomp_data.nr
        (jge, deny_at - 4 - 1, 0, 0x40000000),  # x32 ABI
    ]
    for number in _DENIED_SYSCALLS_X86_64:
        program.append((jeq, deny_at - len(program) - 1, 0, number))
    program += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    assert len(program) == deny_at + 1
    return b"".join(struct.pack("HBBI", *instruction) for instruction in program)


_PROBE_SCRIPT = """
import os, resource, socket
hidden = [path for path in input["hidden"] if os.path.exists(path)]
try:
    socket.create_connection(("127.0.0.1", input["port"]), timeout=2).close()
    connect = "connected"
except OSError as exc:
    connect = type(exc).__name__
output = {
    "uid": os.getuid(),
    "hidden": hidden,
    "connect": connect,
    "interfaces": sorted(name for _, name in socket.if_nameindex()),
    "env": sorted(os.environ),
    "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
}
"""


def _hidden_paths() -> list[str]:
    paths = {str(PROJECT_ROOT), "/etc/passwd", "/root", "/home"}
    if os.environ.get("POWERON_DATA_DIR"):
        paths.add(str(Path(os.environ["POWERON_DATA_DIR"]).resolve()))
    return sorted(paths)


def _probe() -> tuple[_Setup | None, SandboxStatus]:
    if not sys.platform.startswith("linux"):
        return None, SandboxStatus(False, f"script.python needs Linux namespaces (bubblewrap); this is {sys.platform}")
    bwrap = _find_bwrap()
    if bwrap is None:
        return None, SandboxStatus(
            False, "bubblewrap (bwrap) is not installed; install it with `apt-get install bubblewrap`")
    found = _find_python()
    if found is None:
        return None, SandboxStatus(False, f"no Python interpreter for the sandbox ({SYSTEM_PYTHON} is missing)")
    python, extra = found
    setup = _Setup(bwrap=bwrap, python=python, binds=_system_binds() + extra, seccomp=_seccomp_program())
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        result = _run(setup, _PROBE_SCRIPT, {"port": port, "hidden": _hidden_paths()}, 20.0, Limits())
        try:
            listener.accept()[0].close()
            reached = True
        except BlockingIOError:
            reached = False
    finally:
        listener.close()
    if not result.ok:
        detail = result.error or ""
        if result.stderr.strip():
            detail += f"; stderr: {result.stderr.strip()[-500:]}"
        return None, SandboxStatus(False, f"a trivial sandboxed run failed: {detail}")
    facts = result.output
    problems = []
    if reached or facts.get("connect") == "connected":
        problems.append("the network is not cut (a test connection to the host succeeded)")
    if set(facts.get("interfaces", [])) - {"lo"}:
        problems.append(f"network interfaces are visible: {facts['interfaces']}")
    if facts.get("hidden"):
        problems.append(f"host paths are visible: {facts['hidden']}")
    if set(facts.get("env", [])) - ALLOWED_ENV:
        problems.append(f"host environment variables leak: {sorted(set(facts['env']) - ALLOWED_ENV)}")
    if facts.get("uid") == 0:
        problems.append("the code runs as uid 0")
    if problems:
        return None, SandboxStatus(False, "the sandbox is not isolated: "
                                   + "; ".join(problems))
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    filtered = "seccomp filter on" if setup.seccomp else "no seccomp filter on this CPU"
    return setup, SandboxStatus(True, f"{version or 'bwrap'} at {bwrap}, interpreter {python}; "
                                f"network cut, project invisible, {filtered} ({result.duration_ms} ms)")


# ------------------------------------------------------------------------------------------- run

_uid_counter = itertools.count(os.getpid() * 7919)
_uid_lock = threading.Lock()
UID_LEASE_DIR = Path(tempfile.gettempdir()) / "poweron-sandbox-uids"


def _lease_uid() -> tuple[int, int]:
    """A sandbox uid no other run, in any process, is using; returns (uid, lease fd).

    Each run kills whatever is left under its uid afterwards, so two runs must never share
    one: the lease is an exclusive lock on a file per uid, held until the run is swept.
    """
    UID_LEASE_DIR.mkdir(mode=0o700, exist_ok=True)
    for _ in range(SANDBOX_UID_POOL):
        with _uid_lock:
            uid = SANDBOX_UID_BASE + next(_uid_counter) % SANDBOX_UID_POOL
        fd = os.open(UID_LEASE_DIR / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return uid, fd
    raise RuntimeError(f"all {SANDBOX_UID_POOL} sandbox uids are in use")


def run_python(code: str, input: Any = None, timeout_seconds: float = 10.0,
               limits: Limits | None = None) -> SandboxResult:
    """Run ``code`` in the sandbox with ``input`` bound (see the module doc for the contract).

    Blocking (call it from a worker thread in async code). Never raises for anything the code
    does; every failure is a result with ``ok=False``, ``error`` and ``error_kind``. When
    :func:`probe` found no working sandbox the code is not run (``error_kind="unavailable"``).
    """
    status = probe()
    if not status.available or _setup is None:
        return SandboxResult(ok=False, error=f"script.python is disabled: {status.reason}", error_kind="unavailable")
    return _run(_setup, code, input, timeout_seconds, limits or Limits())


def _bwrap_argv(setup: _Setup, workdir: str, result_fd: int, seccomp_fd: int | None, limits: Limits,
                cpu_seconds: int) -> list[str]:
    cfg = {
        "cpu_seconds": cpu_seconds,
        "memory_bytes": limits.memory_bytes,
        "file_size_bytes": limits.file_size_bytes,
        "max_processes": limits.max_processes,
        "open_files": limits.open_files,
        "output_bytes": limits.output_bytes,
    }
    small = str(max(limits.scratch_bytes // 4, MB))
    return [
        setup.bwrap,
        "--unshare-all", "--unshare-user", "--disable-userns",
        "--die-with-parent", "--new-session",
        "--uid", str(INNER_UID), "--gid", str(INNER_UID), "--hostname", "sandbox",
        "--clearenv", "--setenv", "PATH", SANDBOX_PATH, "--setenv", "HOME", "/work",
        "--setenv", "LANG", "C.UTF-8", "--setenv", "TMPDIR", "/tmp",
        *setup.binds,
        "--proc", "/proc",
        "--dev", "/dev", "--size", small, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
        "--size", small, "--tmpfs", "/tmp",
        "--size", str(limits.scratch_bytes), "--tmpfs", "/work",
        "--ro-bind", workdir, "/sandbox",
        "--remount-ro", "/",
        "--chdir", "/work",
        *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
        setup.python, "-I", "-S", "-B", "/sandbox/runner.py", str(result_fd), json.dumps(cfg),
    ]


def _run(setup: _Setup, code: str, input: Any, timeout_seconds: float, limits: Limits) -> SandboxResult:
    started = time.monotonic()

    def failed(kind: str, error: str, **extra: Any) -> SandboxResult:
        return SandboxResult(ok=False, error=error, error_kind=kind,
                             duration_ms=int((time.monotonic() - started) * 1000), **extra)

    if not isinstance(code, str):
        return failed("input", "the script must be a string")
    if not timeout_seconds or timeout_seconds <= 0 or not math.isfinite(timeout_seconds):
        return failed("input", f"invalid timeout: {timeout_seconds!r}")
    try:
        input_text = json.dumps(input, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return failed("input", f"the input is not JSON-serialisable: {type(exc).__name__}: {exc}")
    cpu_seconds = limits.cpu_seconds or math.ceil(timeout_seconds) + 1
    as_root = os.geteuid() == 0
    uid, lease = _lease_uid() if as_root else (None, -1)

    workdir = tempfile.mkdtemp(prefix="poweron-sandbox-")
    result_r = result_w = seccomp_fd = -1
    proc: subprocess.Popen[bytes] | None = None
    try:
        files = {"script.py": code, "input.json": input_text, "runner.py": RUNNER_SOURCE.read_text(encoding="utf-8")}
        for name, text in files.items():
            path = os.path.join(workdir, name)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(path, 0o400)
            if uid is not None:
                os.chown(path, uid, uid)
        os.chmod(workdir, 0o500)
        if uid is not None:
            os.chown(workdir, uid, uid)

        result_r, result_w = os.pipe()
        passed = [result_w]
        if setup.seccomp is not None:
            seccomp_fd, seccomp_w = os.pipe()
            os.write(seccomp_w, setup.seccomp)  # a few hundred bytes: fits the pipe buffer
            os.close(seccomp_w)
            passed.append(seccomp_fd)
        credentials: dict[str, Any] = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
        try:
            proc = subprocess.Popen(
                _bwrap_argv(setup, workdir, result_w, seccomp_fd if seccomp_fd >= 0 else None, limits, cpu_seconds),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=tuple(passed), env={"PATH": SANDBOX_PATH}, cwd="/", process_group=0,
                **credentials,
            )
        except OSError as exc:
            return failed("sandbox", f"could not start the sandbox: {exc}")
        os.close(result_w)
        result_w = -1
        deadline = started + timeout_seconds
        collected = _collect(proc, result_r, deadline, limits)
        result_r = -1  # closed by _collect
    finally:
        if proc is not None and proc.poll() is None:
            _kill(proc)
        if uid is not None:
            _sweep(uid)
        for fd in (result_r, result_w, seccomp_fd, lease):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)

    duration_ms = int((time.monotonic() - started) * 1000)
    stdout = _text(collected.stdout, collected.stdout_dropped)
    stderr = _text(collected.stderr, collected.stderr_dropped)
    common = {"stdout": stdout, "stderr": stderr, "duration_ms": duration_ms}
    if collected.timed_out:
        return SandboxResult(ok=False, error=f"the script exceeded the time limit of {timeout_seconds:g} s",
                             error_kind="timeout", **common)
    if collected.result_overflow:
        return SandboxResult(ok=False, error=f"the output is larger than the limit of {limits.output_bytes} bytes",
                             error_kind="output", **common)
    envelope = _envelope(collected.result)
    if envelope is not None:
        if envelope["ok"]:
            return SandboxResult(ok=True, output=envelope.get("output"), **common)
        return SandboxResult(ok=False, error=envelope["error"], error_kind=envelope["kind"],
                             traceback=envelope.get("traceback"), **common)
    kind, error = _explain_exit(proc.returncode, collected.stderr, limits, cpu_seconds)
    return SandboxResult(ok=False, error=error, error_kind=kind, **common)


@dataclass
class _Collected:
    stdout: bytes = b""
    stderr: bytes = b""
    result: bytes = b""
    stdout_dropped: int = 0
    stderr_dropped: int = 0
    timed_out: bool = False
    result_overflow: bool = False


def _collect(proc: subprocess.Popen[bytes], result_fd: int, deadline: float, limits: Limits) -> _Collected:
    """Drain stdout, stderr and the result pipe until EOF and exit, or until the deadline."""
    out = _Collected()
    buffers = {"stdout": bytearray(), "stderr": bytearray(), "result": bytearray()}
    dropped = {"stdout": 0, "stderr": 0, "result": 0}
    caps = {"stdout": limits.stream_bytes, "stderr": limits.stream_bytes, "result": limits.output_bytes + 64 * KB}
    assert proc.stdout is not None and proc.stderr is not None
    fds = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr", result_fd: "result"}
    selector = selectors.DefaultSelector()
    try:
        for fd, name in fds.items():
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ, name)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                out.timed_out = True
                break
            for key, _ in selector.select(timeout=min(remaining, 0.5)):
                name = key.data
                try:
                    chunk = os.read(key.fd, 64 * KB)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                room = caps[name] - len(buffers[name])
                buffers[name] += chunk[: max(room, 0)]
                dropped[name] += max(len(chunk) - max(room, 0), 0)
            if dropped["result"]:
                out.result_overflow = True
                break
        if not out.timed_out and not out.result_overflow:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                out.timed_out = True
    finally:
        selector.close()
        if proc.poll() is None:
            _kill(proc)
        proc.stdout.close()
        proc.stderr.close()
        os.close(result_fd)
    out.stdout, out.stderr, out.result = bytes(buffers["stdout"]), bytes(buffers["stderr"]), bytes(buffers["result"])
    out.stdout_dropped, out.stderr_dropped = dropped["stdout"], dropped["stderr"]
    return out


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the bwrap process group; the sandbox's PID namespace dies with bwrap."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        log.error("sandbox process %s did not exit after SIGKILL", proc.pid)


def _processes_of(uids: range) -> list[int]:
    """PIDs of live (not zombie) host processes whose real uid is in ``uids``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="ascii", errors="replace") as handle:
                fields = dict(line.split(":", 1) for line in handle if line.startswith(("State:", "Uid:")))
            if not fields["State"].strip().startswith("Z") and int(fields["Uid"].split()[0]) in uids:
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError, KeyError):
            continue
    return found


def _sweep(uid: int) -> None:
    """Kill anything still running under the run's dedicated uid (defence in depth; normally only
    the sandbox's own init, which outlives the outer bwrap by a moment)."""
    for _ in range(50):
        pids = _processes_of(range(uid, uid + 1))
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    log.error("sandbox processes of uid %s survived SIGKILL", uid)


def sandbox_processes() -> list[int]:
    """PIDs of processes left over under a sandbox uid: one no run holds the lease of any more
    (tests assert there are none; runs of other processes, still holding theirs, do not count)."""
    found = []
    for pid in _processes_of(range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + SANDBOX_UID_POOL)):
        uid = _uid_of(pid)
        if uid is not None and not _leased(uid):
            found.append(pid)
    return found


def _uid_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            return next(int(line.split()[1]) for line in handle if line.startswith("Uid:"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None  # gone meanwhile


def _leased(uid: int) -> bool:
    """Whether a run (of any process) holds the lease of `uid` now."""
    try:
        fd = os.open(UID_LEASE_DIR / str(uid), os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _text(data: bytes, dropped: int) -> str:
    text = data.decode("utf-8", errors="replace")
    if dropped:
        text += f"\n[... {dropped} more bytes dropped]"
    return text


def _envelope(raw: bytes) -> dict[str, Any] | None:
    """The wrapper's result, validated; None when absent or malformed."""
    if not raw:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("ok"), bool):
        return None
    if data["ok"]:
        return {"ok": True, "output": data.get("output")}
    kind = data.get("kind") if data.get("kind") in ERROR_KINDS else "exception"
    error = data.get("error") if isinstance(data.get("error"), str) else "the script failed"
    trace = data.get("traceback") if isinstance(data.get("traceback"), str) else None
    return {"ok": False, "kind": kind, "error": error[:2000], "traceback": trace[-8000:] if trace else None}


def _explain_exit(returncode: int | None, stderr: bytes, limits: Limits, cpu_seconds: int) -> tuple[str, str]:
    """Error kind and message for a run that produced no result."""
    code = returncode if returncode is not None else -1
    sig = code - 128 if code > 128 else (-code if code < 0 else 0)
    if sig:
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        if sig == signal.SIGXCPU:
            return "cpu", f"the script exceeded the CPU-time limit of {cpu_seconds} s ({name})"
        if sig == signal.SIGKILL:
            return "crashed", f"the script was killed by {name} (a resource limit or the kernel's out-of-memory killer)"
        if sig == signal.SIGXFSZ:
            return "crashed", f"the script exceeded the file-size limit of {limits.file_size_bytes} bytes ({name})"
        return "crashed", f"the script was killed by {name}"
    tail = stderr.decode("utf-8", errors="replace").strip().splitlines()[-3:]
    if code != 0 and tail and tail[-1].startswith("bwrap:"):
        return "sandbox", f"the sandbox failed to start: {tail[-1]}"
    detail = f"; stderr: {' | '.join(tail)}" if tail else ""
    return "crashed", f"the script ended (exit code {code}) without producing a result{detail}"

