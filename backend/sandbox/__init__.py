"""Sandboxed execution of untrusted code: ``script.python`` nodes (see :mod:`.python_runner`).

For the engine:

* At start-up (and when listing node types) call :func:`probe`. It is cached per process. When
  ``probe().available`` is False, mark ``script.python`` as disabled and show ``probe().reason``
  (e.g. "bubblewrap (bwrap) is not installed; install it with `apt-get install bubblewrap`");
  validation/publish may refuse graphs using it with that reason.
* For each ``script.python`` step call
  ``run_python(code, input, timeout_seconds, limits)`` with the node's code, the step's evaluated
  input (any JSON value) and the node's timeout. It blocks (~50 ms overhead plus the script's
  run time), so from async code use ``await asyncio.to_thread(run_python, ...)``. It never raises
  for anything the script does and never runs code when the probe failed.
* ``result.ok`` → the step's output is ``result.output`` (keep ``result.stdout``/``stderr`` in the
  step log). Otherwise fail the step (or apply onError/retries) with ``result.error`` as the
  message and ``result.traceback`` as the stack; ``result.error_kind`` (one of
  :data:`ERROR_KINDS`) tells a timeout from an exception, a limit or ``unavailable``.
  ``result.duration_ms`` is the wall-clock time.
* The script contract to document on the node: ``input`` is bound to the step's input; the
  output is ``main(input)``'s return value when the script defines ``main``, otherwise the global
  ``output`` (None when unset); it must be JSON-serialisable. Standard library only, no network,
  no files outside its scratch ``/work``.
"""

from backend.sandbox.python_runner import (
    ERROR_KINDS,
    Limits,
    SandboxResult,
    SandboxStatus,
    probe,
    reset_probe,
    run_python,
)

__all__ = ["ERROR_KINDS", "Limits", "SandboxResult", "SandboxStatus", "probe", "reset_probe", "run_python"]
