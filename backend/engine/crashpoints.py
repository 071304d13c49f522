"""Named crash points: a documented test seam for the kill-and-restart tests (issue 5, item 7).

Setting ``POWERON_ENGINE_CRASH_AT="<point>:<nodeId>"`` makes the engine kill its own process with
SIGKILL when it reaches `point` for node `nodeId` — exactly what a power cut or an OOM kill does,
so the tests can check that a restarted process (:func:`backend.engine.recovery.recover_runs`)
continues the run from its persisted context. ``*`` as the node id matches every node (and every
run, for ``before_handoff``). The engine reads the variable once per run (when a
:class:`~backend.engine.executor.RunEngine` is created); unset, every check is a no-op.

Points of the engine's loop:

- ``node_started``: the node was taken from the frontier; nothing of it is committed yet;
- ``before_step_commit``: the node ran; its step row and the new context are not committed;
- ``after_step_commit``: the node's step row and the context holding its output are committed;
- ``retry_wait``: an attempt of the node failed, is logged and committed; the next one is due;
- ``branch_finished``: the node, one of several independent slow nodes executing at the same
  time, finished on its branch thread (its own work committed) while the others still run;
  its step row and output are not committed yet, so after a restart it runs again. The engine
  commits each such node's step as soon as it gets it (then ``after_step_commit`` is reached
  for it while the others still run), keeping the others ready in the stored frontier.

Resuming a suspended node (a completed human task, a due flow.wait, a timed-out task, an
arrived e-mail), keyed by the suspended node:

- ``resume_before_commit``: the task's completion and the node's resumption are written, not
  committed: after a restart the task is still pending (the run paused) and may be completed
  again, or the timer wakes the node again;
- ``resume_after_commit``: committed (task completed, node finished in the context, run
  `running`); the run has not executed on yet: recovery continues it.

Starting a run on SQLite (backend/engine/queue.py, ThreadQueue), keyed by run id:

- ``before_handoff``: the run is committed in `running`, not yet handed to the run threads;
  recovery executes it, and a repeated webhook delivery is answered with the same run.
"""

from __future__ import annotations

import os
import signal

ENV = "POWERON_ENGINE_CRASH_AT"
POINTS = ("node_started", "before_step_commit", "after_step_commit", "retry_wait", "branch_finished",
          "resume_before_commit", "resume_after_commit", "before_handoff")
ANY_NODE = "*"


def configured() -> tuple[str, str] | None:
    """(point, nodeId) from the environment, or None when no crash is asked for."""
    value = (os.environ.get(ENV) or "").strip()
    point, _, node_id = value.partition(":")
    if point not in POINTS or not node_id:
        return None
    return point, node_id


def reach(wanted: tuple[str, str] | None, point: str, node_id: str) -> None:
    """Kill this process with SIGKILL when (`point`, `node_id`) is the configured crash point."""
    if wanted is not None and wanted[0] == point and wanted[1] in (node_id, ANY_NODE):
        os.kill(os.getpid(), signal.SIGKILL)
