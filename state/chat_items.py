"""The items a chat shows (components/chat.py renders them), built from agent events as they
stream and from a run's persisted trace when a chat is reopened.

Pure functions over plain dicts, so every page with an agent (Workspace, the Editor's sidebar)
builds its chat the same way.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

RESULT_SHOWN = 800  # characters of a tool result a card shows
ARGUMENTS_SHOWN = 2_000


class ChatItem(TypedDict):
    """One entry of a chat.

    kind: user, assistant, tool, escalation, subagent, guard, approval, preselected, usage, error,
        cancelled.
    text: the item's text; for a tool card, how long the call took ("42 ms"); for an approval
        card, the agent's reason.
    status: running, ok or failed (tool, escalation and sub-agent cards); pending, approved,
        declined, cancelled or expired (approval cards); else "".
    """

    kind: str
    text: str
    name: str
    detail: str
    result: str
    status: str
    call_id: str
    run_id: str


def item(kind: str, text: str = "", *, name: str = "", detail: str = "", result: str = "", status: str = "",
         call_id: str = "", run_id: str = "") -> ChatItem:
    return ChatItem(kind=kind, text=text, name=name, detail=detail, result=result, status=status,
                    call_id=call_id, run_id=run_id)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" … ({len(text) - limit:,} more characters)"


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return _shorten(value, ARGUMENTS_SHOWN)
    return _shorten(json.dumps(value, indent=2, ensure_ascii=False, default=str), ARGUMENTS_SHOWN)


def _status(ok: Any) -> str:
    return "ok" if ok else "failed"


def usage_text(prompt_tokens: int | None, completion_tokens: int | None, cost_chf: float | None) -> str:
    tokens = f"{prompt_tokens or 0:,} tokens in · {completion_tokens or 0:,} out"
    return tokens + (f" · CHF {cost_chf:.4f}" if cost_chf is not None else "")


def _last_index(items: list[ChatItem], call_id: str, kind: str) -> int | None:
    for index in range(len(items) - 1, -1, -1):
        if items[index]["call_id"] == call_id and items[index]["kind"] == kind:
            return index
    return None


def apply_event(items: list[ChatItem], kind: str, data: dict[str, Any]) -> list[ChatItem]:
    """`items` with one agent event (type `kind`, its data) applied; a new list."""
    items = list(items)
    run_id = str(data.get("runId") or "")
    sub = " (sub-agent)" if data.get("subAgentRunId") else ""
    if kind == "text.delta":
        last = items[-1] if items else None
        if last is not None and last["kind"] == "assistant" and last["run_id"] == run_id:
            items[-1] = {**last, "text": last["text"] + str(data.get("text") or "")}
        else:
            items.append(item("assistant", str(data.get("text") or ""), run_id=run_id))
    elif kind == "tool.started":
        items.append(item("tool", name=str(data.get("name") or "") + sub, detail=_json_text(data.get("arguments")),
                          status="running", call_id=str(data.get("callId") or ""), run_id=run_id))
    elif kind == "tool.finished":
        index = _last_index(items, str(data.get("callId") or ""), "tool")
        result = _shorten(str(data.get("result") or ""), RESULT_SHOWN)
        took = _duration(data.get("durationMs"))
        if index is None:
            items.append(item("tool", took, name=str(data.get("name") or "") + sub, result=result,
                              status=_status(data.get("ok")), call_id=str(data.get("callId") or ""), run_id=run_id))
        else:
            items[index] = {**items[index], "text": took, "result": result, "status": _status(data.get("ok"))}
    elif kind == "toolbox.escalated":
        items.append(item("escalation", str(data.get("reason") or ""),
                          name=str(data.get("label") or data.get("toolboxId") or ""),
                          detail=", ".join(data.get("tools") or []), status="ok", run_id=run_id))
    elif kind == "toolbox.refused":
        items.append(item("escalation", str(data.get("reason") or ""), name=str(data.get("toolboxId") or ""),
                          status="failed", run_id=run_id))
    elif kind == "subagent.started":
        items.append(item("subagent", str(data.get("question") or ""),
                          name=f"{data.get('featureCode') or ''} {data.get('instanceId') or ''}".strip(),
                          status="running", call_id=str(data.get("callId") or ""), run_id=run_id))
    elif kind == "subagent.finished":
        index = _last_index(items, str(data.get("callId") or ""), "subagent")
        if index is not None:
            items[index] = {**items[index], "status": _status(data.get("ok")),
                            "result": _shorten(str(data.get("answer") or ""), RESULT_SHOWN)}
    elif kind == "subagent.refused":
        items.append(item("subagent", str(data.get("reason") or ""), name=str(data.get("instanceId") or ""),
                          status="failed", run_id=run_id))
    elif kind == "guard":
        items.append(item("guard", str(data.get("message") or ""), name=str(data.get("kind") or "") + sub,
                          run_id=run_id))
    elif kind == "toolbox.preselected":
        text = _preselection_text(data.get("labels") or data.get("toolboxIds") or [], data.get("limits") or {})
        if text:
            items.append(item("preselected", text, run_id=run_id))
    elif kind == "approval.required":
        items.append(_approval(str(data.get("reason") or ""), data.get("label"), data.get("name"),
                               data.get("arguments"), str(data.get("callId") or ""), run_id))
    elif kind == "approval.decided":
        items = _decided(items, str(data.get("callId") or ""), str(data.get("outcome") or ""), data.get("by"))
    elif kind == "final":
        if not any(i["kind"] == "assistant" and i["run_id"] == run_id for i in items) and data.get("text"):
            items.append(item("assistant", str(data["text"]), run_id=run_id))
        usage = data.get("usage") or {}
        items.append(item("usage", usage_text(usage.get("promptTokens"), usage.get("completionTokens"),
                                              data.get("costChf")), run_id=run_id))
    elif kind == "error":
        items.append(item("error", str(data.get("message") or "the run failed"), run_id=run_id))
    elif kind == "cancelled":
        items.append(item("cancelled", str(data.get("message") or "the run was cancelled"), run_id=run_id))
    return _settle(items) if kind in ("final", "error", "cancelled") else items


def _preselection_text(toolboxes: list[Any], limits: dict[str, Any]) -> str:
    """What the selector chose before round 1, in a line ("" when it chose nothing)."""
    parts = []
    if toolboxes:
        parts.append("Tools chosen for this request: " + ", ".join(str(t) for t in toolboxes))
    if limits:
        parts.append("a shopping request: at most " + " and ".join(
            f"{n} {'web searches' if g == 'webSearch' else 'page reads' if g == 'pageFetch' else g}"
            for g, n in limits.items()))
    return " · ".join(parts)


def _approval(reason: str, label: Any, tool: Any, arguments: Any, call_id: str, run_id: str) -> ChatItem:
    """A pending approval card: the tool (label and name), its arguments, the agent's reason."""
    name = f"{label} ({tool})" if label and tool else str(label or tool or "")
    return item("approval", reason, name=name, detail=_json_text(arguments), status="pending", call_id=call_id,
                run_id=run_id)


def _decided(items: list[ChatItem], call_id: str, outcome: str, by: Any) -> list[ChatItem]:
    """`items` with the approval card of `call_id` showing its outcome (and who decided)."""
    index = _last_index(items, call_id, "approval")
    if index is not None:
        items[index] = {**items[index], "status": outcome or "declined",
                        "result": f"{outcome} by {by}" if by and outcome in ("approved", "declined") else outcome}
    return items


def _toolbox_label(box: str) -> str:
    from backend.actions import get_registry

    toolbox = get_registry().toolbox(box)
    return toolbox.label if toolbox is not None else box


def _settle(items: list[ChatItem]) -> list[ChatItem]:
    """Cards still `running` when the run ended did not finish."""
    return [{**i, "status": "failed"} if i["status"] == "running" else i for i in items]


def _duration(milliseconds: Any) -> str:
    if not isinstance(milliseconds, int):
        return ""
    return f"{milliseconds} ms" if milliseconds < 10_000 else f"{milliseconds / 1000:.1f} s"


def items_of_run(run: Any, steps: list[Any]) -> list[ChatItem]:
    """A persisted run (AgentRun) and its trace (AgentStep rows) as chat items."""
    items = [item("user", run.prompt, run_id=run.id)]
    for step in steps:
        detail = step.detail if isinstance(step.detail, dict) else {}
        if step.kind == "round" and detail.get("text"):
            items.append(item("assistant", str(detail["text"]), run_id=run.id))
        elif step.kind == "tool_call":
            items.append(item("tool", _duration(step.duration_ms), name=step.name or "",
                              detail=_json_text(step.arguments),
                              result=_shorten(step.result or "", RESULT_SHOWN), status=_status(step.ok),
                              call_id=step.call_id or "", run_id=run.id))
        elif step.kind == "escalation":
            reason = detail.get("reason") if step.ok else detail.get("refused")
            items.append(item("escalation", str(reason or ""), name=step.name or "",
                              detail=", ".join(detail.get("tools") or []), status=_status(step.ok), run_id=run.id))
        elif step.kind == "sub_agent":
            args = step.arguments if isinstance(step.arguments, dict) else {}
            items.append(item("subagent", str(args.get("question") or ""),
                              name=f"{args.get('featureCode') or ''} {args.get('instanceId') or ''}".strip(),
                              result=_shorten(step.result or "", RESULT_SHOWN), status=_status(step.ok),
                              call_id=step.call_id or "", run_id=run.id))
        elif step.kind == "guard":
            items.append(item("guard", step.result or "", name=step.name or "", run_id=run.id))
        elif step.kind == "selection":
            text = _preselection_text([_toolbox_label(box) for box in detail.get("selected") or []],
                                      detail.get("limits") or {})
            if text:
                items.append(item("preselected", text, run_id=run.id))
        elif step.kind == "approval":
            items.append(_approval(str(detail.get("reason") or ""), detail.get("label"), step.name, step.arguments,
                                   step.call_id or "", run.id))
        elif step.kind == "approval_decided":
            items = _decided(items, step.call_id or "", str(detail.get("outcome") or ""), detail.get("by"))
        elif step.kind == "error":
            items.append(item("error", step.result or "the run failed", run_id=run.id))
    if run.status == "completed":
        items.append(item("usage", usage_text(run.prompt_tokens, run.completion_tokens, run.cost_chf), run_id=run.id))
    elif run.status == "cancelled":
        items.append(item("cancelled", run.error or "the run was cancelled", run_id=run.id))
    elif run.status == "failed" and not any(i["kind"] == "error" for i in items):
        items.append(item("error", run.error or "the run failed", run_id=run.id))
    return _settle(items) if run.status in ("completed", "failed", "cancelled") else items
