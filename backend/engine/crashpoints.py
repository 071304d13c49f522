"""Named crash points: a documented test seam for the kill-and-restart tests (issue 5, item 7).

Setting ``POWERON_ENGINE_CRASH_AT="<point>:<nodeId>"`` makes the engine kill its own process with
SIGKILL when it reaches `point` for node `nodeId` — exactly what a power cut or an OOM kill does,
so the tests can check that a restarted process (:func:`backend.engine.recovery.recover_runs`)
continues the run from its persisted context. The variable is read once per run (when a
:class:`~backend.engine.executor.RunEngine` is created); unset, every check is a no-op.

Points:

- ``node_started``: the node was taken from the frontier; nothing of it is committed yet;
- ``before_step_commit``: the node ran; its step row and the new context are not committed;
- ``after_step_commit``: the node's step row and the context holding its output are committed;
- ``retry_wait``: an attempt of the node failed, is logged and committed; the next one is due.
"""

from __future__ import annotations

import os
import signal

ENV = "POWERON_ENGINE_CRASH_AT"
POINTS = ("node_started", "before_step_commit", "after_step_commit", "retry_wait")


def configured() -> tuple[str, str] | None:
    """(point, nodeId) from the environment, or None when no crash is asked for."""
    value = (os.environ.get(ENV) or "").strip()
    point, _, node_id = value.partition(":")
    if point not in POINTS or not node_id:
        return None
    return point, node_id


def reach(wanted: tuple[str, str] | None, point: str, node_id: str) -> None:
    """Kill this process with SIGKILL when (`point`, `node_id`) is the configured crash point."""
    if wanted is not None and wanted == (point, node_id):
        os.kill(os.getpid(), signal.SIGKILL)
