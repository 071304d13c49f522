"""Webhook secrets in API answers: shown only to those who may change the workflow.

The trigger.webhook `secret` lives in the graph (DESIGN §4). Whoever may update the workflow
sees and edits it; everybody else (read-only roles) gets the graph with every webhook secret
replaced by MASK. The secret is never logged (backend/triggers/webhooks.py) and step logs mask
keys named like secrets (backend/engine/steps.py).
"""

from __future__ import annotations

import copy
from typing import Any

MASK = "********"


def redact(graph: dict[str, Any] | None) -> dict[str, Any] | None:
    """A copy of `graph` with the secret of every trigger.webhook node replaced by MASK."""
    if not isinstance(graph, dict) or not any(
            isinstance(n, dict) and n.get("type") == "trigger.webhook" for n in graph.get("nodes", [])):
        return graph
    graph = copy.deepcopy(graph)
    for node in graph.get("nodes", []):
        parameters = node.get("parameters") if isinstance(node, dict) else None
        if node.get("type") == "trigger.webhook" and isinstance(parameters, dict) and parameters.get("secret"):
            parameters["secret"] = MASK
    return graph
