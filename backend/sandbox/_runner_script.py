"""The wrapper that runs *inside* the sandbox (copied there as ``runner.py``; never imported by the app).

It lowers its own resource limits (hard and soft, so the user's code cannot raise them again),
reads ``/sandbox/input.json`` and ``/sandbox/script.py``, runs the script with ``input`` bound and
writes one JSON envelope to the result descriptor named on its command line:

    {"ok": true, "output": ...}
    {"ok": false, "kind": "syntax" | "exception" | "memory" | "exit" | "serialization" | "output",
     "error": "one-line message", "traceback": "last lines of the user's traceback" | null}

Only the standard library is used and nothing is imported from the app. The host treats the
envelope as untrusted data (size-capped, parsed as JSON, validated) and never executes anything
from it.
"""

import gc
import json
import os
import resource
import sys
import traceback

SCRIPT = "/sandbox/script.py"
INPUT = "/sandbox/input.json"
TRACEBACK_LINES = 30
TRACEBACK_CHARS = 4000


def _set_limits(cfg):
    pairs = [
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_CPU, cfg["cpu_seconds"], cfg["cpu_seconds"] + 1),
        (resource.RLIMIT_AS, cfg["memory_bytes"], cfg["memory_bytes"]),
        (resource.RLIMIT_FSIZE, cfg["file_size_bytes"], cfg["file_size_bytes"]),
        (resource.RLIMIT_NPROC, cfg["max_processes"], cfg["max_processes"]),
        (resource.RLIMIT_NOFILE, cfg["open_files"], cfg["open_files"]),
    ]
    for which, soft, hard in pairs:
        resource.setrlimit(which, (soft, hard))
    try:  # if memory runs out on the host, the kernel kills sandboxed processes first
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass


def _user_traceback(exc):
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != SCRIPT:
        tb = tb.tb_next
    lines = "".join(traceback.format_exception(type(exc), exc, tb)).rstrip("\n").splitlines()
    text = "\n".join(lines[-TRACEBACK_LINES:])
    return text[-TRACEBACK_CHARS:].replace(SCRIPT, "script.py")


def _line_of(exc):
    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == SCRIPT:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _summary(exc):
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    message = (text[-1] if text else type(exc).__name__).replace(SCRIPT, "script.py")
    line = _line_of(exc)
    return f"{message} (script.py, line {line})" if line else message


def _run(cfg):
    with open(INPUT, encoding="utf-8") as handle:
        data = json.load(handle)
    with open(SCRIPT, encoding="utf-8") as handle:
        source = handle.read()
    try:
        code = compile(source, SCRIPT, "exec")
    except SyntaxError as exc:
        where = f" (script.py, line {exc.lineno})" if exc.lineno else ""
        detail = "".join(traceback.format_exception_only(type(exc), exc)).replace(SCRIPT, "script.py")
        return {"ok": False, "kind": "syntax", "error": f"{type(exc).__name__}: {exc.msg}{where}",
                "traceback": detail.rstrip()[-TRACEBACK_CHARS:]}
    except ValueError as exc:  # e.g. NUL bytes in the source
        return {"ok": False, "kind": "syntax", "error": f"the script cannot be compiled: {exc}", "traceback": None}
    scope = {"__name__": "script", "__file__": "script.py", "__builtins__": __builtins__, "input": data}
    try:
        exec(code, scope)
        main = scope.get("main")
        output = main(data) if callable(main) else scope.get("output")
    except MemoryError as exc:
        scope.clear()
        exc.__traceback__ = None
        gc.collect()
        return {"ok": False, "kind": "memory", "traceback": None,
                "error": f"MemoryError: the script exceeded the memory limit of {cfg['memory_bytes'] // 2**20} MB"}
    except SystemExit as exc:
        return {"ok": False, "kind": "exit", "traceback": None,
                "error": f"the script called exit({exc.code!r}); set `output` or return from main() instead"}
    except BaseException as exc:  # everything the script raises is reported
        return {"ok": False, "kind": "exception", "error": _summary(exc), "traceback": _user_traceback(exc)}
    scope.clear()
    try:
        text = json.dumps(output, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return {"ok": False, "kind": "serialization", "traceback": None,
                "error": f"the output is not JSON-serialisable: {type(exc).__name__}: {exc}"}
    if len(text.encode("utf-8")) > cfg["output_bytes"]:
        return {"ok": False, "kind": "output", "traceback": None,
                "error": f"the output is larger than the limit of {cfg['output_bytes']} bytes"}
    return {"ok": True, "output": output, "_encoded": text}


def main():
    result_fd = int(sys.argv[1])
    cfg = json.loads(sys.argv[2])
    os.set_inheritable(result_fd, False)  # subprocesses of the script do not get it
    _set_limits(cfg)
    try:
        envelope = _run(cfg)
    except MemoryError:
        envelope = {"ok": False, "kind": "memory", "traceback": None,
                    "error": f"MemoryError: the script exceeded the memory limit of {cfg['memory_bytes'] // 2**20} MB"}
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # the script may have closed its streams
            pass
    if envelope.get("ok"):
        payload = '{"ok": true, "output": ' + envelope["_encoded"] + "}"
    else:
        payload = json.dumps(envelope, ensure_ascii=False)
    data = payload.encode("utf-8")
    while data:
        written = os.write(result_fd, data)
        data = data[written:]
    os.close(result_fd)


if __name__ == "__main__":
    main()
