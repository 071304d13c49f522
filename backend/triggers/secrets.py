"""Webhook secrets: sealed at rest, shown only to those who may change the workflow.

The trigger.webhook `secret` lives in the graph (DESIGN §4). Every graph is stored with its
webhook secrets sealed (backend/crypto.py) — saving a draft or creating a workflow seals them,
and a MASK sent back in place of a secret keeps the stored one, so a graph fetched and saved
again loses nothing. Answers show the clear secret only to callers who may update the workflow
(they configure the sender with it); everybody else, and every agent tool, gets MASK. The
secret is never logged (backend/triggers/webhooks.py) and step logs mask keys named like
secrets (backend/engine/steps.py).

The editor never holds a secret in clear: its graph carries MASK for a stored secret (valid for
validation: it stands for the stored one), and a secret replaced or generated there enters the
graph already sealed (`sealed_new_secret`). `generate` makes a new Standard Webhooks secret.
"""

from __future__ import annotations

import base64
import copy
import secrets
from collections.abc import Callable
from typing import Any

from backend.crypto import seal, unseal

MASK = "********"
WEBHOOK = "trigger.webhook"
PREFIX = "whsec_"
GENERATED_BYTES = 32  # Standard Webhooks asks for 24 to 64 random bytes
EXPECTED_FORM = "whsec_ followed by base64 (e.g. a secret made with Generate)"


def _with_secrets(graph: Any, change: Callable[[dict[str, Any], str], str | None]) -> Any:
    """A copy of `graph` whose webhook secrets are replaced by change(node, secret) (None drops it)."""
    if not isinstance(graph, dict) or not any(
            isinstance(n, dict) and n.get("type") == WEBHOOK for n in graph.get("nodes") or []):
        return graph
    graph = copy.deepcopy(graph)
    for node in graph.get("nodes") or []:
        parameters = node.get("parameters") if isinstance(node, dict) else None
        if node.get("type") == WEBHOOK and isinstance(parameters, dict) and parameters.get("secret"):
            replaced = change(node, parameters["secret"])
            if replaced is None:
                parameters.pop("secret")
            else:
                parameters["secret"] = replaced
    return graph


def redact(graph: Any) -> Any:
    """A copy of `graph` with the secret of every trigger.webhook node replaced by MASK."""
    return _with_secrets(graph, lambda node, secret: MASK)


def reveal(graph: Any) -> Any:
    """A copy of `graph` with its webhook secrets in clear (for those who may change it)."""
    return _with_secrets(graph, lambda node, secret: unseal(secret) if isinstance(secret, str) else secret)


def seal_secrets(graph: Any, previous: Any = None) -> Any:
    """`graph` as it is stored: webhook secrets sealed; MASK keeps the secret the node with the
    same id has in `previous` (the graph being replaced), or none when it had none."""
    kept: dict[str, Any] = {}
    if isinstance(previous, dict):
        for node in previous.get("nodes") or []:
            if isinstance(node, dict) and node.get("type") == WEBHOOK:
                kept[node.get("id")] = (node.get("parameters") or {}).get("secret")

    def sealed(node: dict[str, Any], secret: Any) -> str | None:
        if secret == MASK:
            return kept.get(node.get("id"))
        return seal(secret) if isinstance(secret, str) else secret

    return _with_secrets(graph, sealed)


def secret_of(parameters: dict[str, Any]) -> str | None:
    """The clear secret of a trigger.webhook's parameters, or None."""
    secret = parameters.get("secret")
    return unseal(secret) if isinstance(secret, str) and secret else None


def generate() -> str:
    """A new Standard Webhooks secret: ``whsec_<base64 of GENERATED_BYTES random bytes>``."""
    return PREFIX + base64.b64encode(secrets.token_bytes(GENERATED_BYTES)).decode("ascii")


def usable(secret: Any) -> bool:
    """Whether `secret` (clear or sealed) is a key the Standard Webhooks library can sign and verify with."""
    from standardwebhooks.webhooks import Webhook

    if not isinstance(secret, str) or not secret.strip():
        return False
    try:
        Webhook(unseal(secret))
    except Exception:  # noqa: BLE001 - bad base64, a seal of another key: never show the value
        return False
    return True


def sealed_new_secret(text: Any) -> str:
    """A secret a person typed, checked and sealed for the graph (never stored or shown in clear).

    Raises:
        ValueError: naming the expected form (the value itself is never repeated).
    """
    clear = text.strip() if isinstance(text, str) else ""
    if not clear.startswith(PREFIX) or not usable(clear):
        raise ValueError(f"must be a Standard Webhooks secret: {EXPECTED_FORM}")
    return seal(clear)
