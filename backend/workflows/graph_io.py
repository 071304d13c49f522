"""Import and export of workflow graphs as JSON files.

An export is ``{"poweronWorkflow": 1, "name": …, "exportedAt": …, "graph": {…}}`` with every
webhook secret replaced by the mask (backend/triggers/secrets.py): secrets never leave in a
file. An import accepts such a document or a bare graph ``{"nodes": […], "edges": […]}`` and
checks the limits of any JSON from outside (backend/json_limits.py: at most 64 levels deep, no
lone surrogate, no NaN) and its structure (graph.require_valid_structure); the full rules of DESIGN §4 apply when the
draft is validated or published, as for any draft. A masked secret in an imported graph keeps
the secret the workflow has for that node, or none.
"""

from __future__ import annotations

import json
from typing import Any

from backend.db.models import utcnow
from backend.errors import FieldError, InvalidInput
from backend.json_limits import loads as load_checked
from backend.triggers.secrets import redact
from backend.workflows.graph import require_valid_structure

FORMAT_KEY = "poweronWorkflow"
FORMAT_VERSION = 1
SHAPES = (f"a graph {{\"nodes\": […], \"edges\": […]}} or a PowerOn export "
          f"{{\"{FORMAT_KEY}\": {FORMAT_VERSION}, \"name\": …, \"graph\": {{…}}}}")


def _invalid(field: str, message: str) -> InvalidInput:
    return InvalidInput([FieldError(field, message)])


def _decode(raw: bytes | str) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8-sig")  # a byte order mark is tolerated
    except UnicodeDecodeError as exc:
        raise _invalid("file", f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} at position {exc.start} "
                               "cannot be read); save it as UTF-8 JSON") from None


def parse_import(raw: bytes | str) -> dict[str, Any]:
    """The graph of an imported file; see parse_import_named."""
    return parse_import_named(raw)[0]


def parse_import_named(raw: bytes | str) -> tuple[dict[str, Any], str]:
    """The graph of an imported file (an export document or a bare graph), structure checked, and
    the workflow name an export document carries ("" for a bare graph).

    Raises InvalidInput naming the problem: not UTF-8, not JSON (with line and column), beyond
    the JSON limits (with its path), not an object, neither shape, an unknown export version, or
    each structural problem of the graph (with its node id and field).
    """
    text = _decode(raw)
    if not text.strip():
        raise _invalid("file", f"is empty; expected {SHAPES}")
    try:
        data = load_checked(text, "file")
    except json.JSONDecodeError as exc:
        raise _invalid("file", f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    if not isinstance(data, dict):
        raise _invalid("file", f"holds a JSON {type(data).__name__ if data is not None else 'null'}, not an "
                               f"object; expected {SHAPES}")
    name = ""
    if FORMAT_KEY in data:
        name = data["name"].strip()[:200] if isinstance(data.get("name"), str) else ""
        if data[FORMAT_KEY] != FORMAT_VERSION or isinstance(data[FORMAT_KEY], bool):
            raise _invalid(FORMAT_KEY, f"version {json.dumps(data[FORMAT_KEY])} is not supported; this server "
                                       f"reads version {FORMAT_VERSION}")
        if "graph" not in data:
            raise _invalid("graph", "is missing: the export holds no graph")
        graph = data["graph"]
    elif "nodes" in data:
        graph = data
    else:
        keys = ", ".join(sorted(data)) or "none"
        raise _invalid("file", f"is neither a graph nor a PowerOn export (its keys: {keys}); expected {SHAPES}")
    return require_valid_structure(graph), name


def export_document(workflow_name: str, graph: dict[str, Any]) -> str:
    """The export file of a workflow's graph: pretty JSON, webhook secrets masked."""
    document = {FORMAT_KEY: FORMAT_VERSION, "name": workflow_name, "exportedAt": utcnow().isoformat(),
                "graph": redact(graph)}
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
