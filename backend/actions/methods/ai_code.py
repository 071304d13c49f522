"""`ai.executeCode` (spec §5.2, the ai toolbox): an agent runs Python in the engine's sandbox.

The same bubblewrap sandbox as the `script.python` node (backend/sandbox/): standard library only,
no network, no files outside its scratch folder, memory, process and time limits. The graph keeps
its own node for code (script.python), so this action is an agent tool only.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from backend.actions.base import ActionContext, ActionError, ActionParams, action

MAX_CODE = 100_000  # characters
STREAM_SHOWN = 4_000  # characters of stdout/stderr an agent sees in the answer


class ExecuteCodeParams(ActionParams):
    code: str = Field(min_length=1, max_length=MAX_CODE,
                      description="Python 3 source. The variable `input` holds the input; the result is "
                                  "main(input)'s return value when you define main, else the global `output`. "
                                  "Standard library only, no network. print() output is returned too.")
    input: Any = Field(None, description="Any JSON value the code receives as `input`")
    timeout_seconds: int = Field(10, ge=1, le=60, description="Wall-clock limit in seconds (1-60)")


class ExecuteCodeOutput(BaseModel):
    output: Any = None
    stdout: str = ""
    stderr: str = ""
    duration_ms: int = Field(0, serialization_alias="durationMs")


def _shown(text: str) -> str:
    if len(text) <= STREAM_SHOWN:
        return text
    return text[:STREAM_SHOWN] + f"\n[… {len(text) - STREAM_SHOWN:,} characters cut]"


@action("ai.executeCode", toolbox="ai", label="Execute code",
        description="Run a short Python 3 program in an isolated sandbox (standard library only, no network) "
                    "to calculate, parse or transform data; returns its result and what it printed.",
        params=ExecuteCodeParams, output=ExecuteCodeOutput, capabilities=("codeExec",), needs=("sandbox",))
def execute_code(params: ExecuteCodeParams, context: ActionContext) -> ExecuteCodeOutput:
    from backend.sandbox import probe, run_python

    status = probe()
    if not status.available:
        raise ActionError(f"code execution is not available on this server: {status.reason}")
    result = run_python(params.code, params.input, float(params.timeout_seconds))
    if not result.ok:
        parts = [result.error or "the code failed"]
        if result.traceback:
            parts.append(result.traceback.strip())
        if result.stdout:
            parts.append("stdout:\n" + _shown(result.stdout))
        raise ActionError("\n".join(parts))
    return ExecuteCodeOutput(output=result.output, stdout=_shown(result.stdout), stderr=_shown(result.stderr),
                             duration_ms=result.duration_ms)
