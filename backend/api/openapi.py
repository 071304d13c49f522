"""Makes the OpenAPI document tell the whole truth about what each operation can answer.

FastAPI documents the success answer and its own request validation; the errors our handlers
answer (backend/api/app.py) are not in the generated document. `install()` replaces
`app.openapi` with a version that adds, to every operation, the error answers it can produce,
derived centrally from its `x-permission` declaration, its parameters and its method, plus a
short table of answers single operations add (throttling, body limits). Every error answer has
the body `ErrorOut`: `{"detail": str, "errors"?: [{nodeId, field, message}]}`.

Rules (the status codes an operation gets):

- 400: it takes a request body or changes state (backend/api/input_guard.py refuses a body that is
  not valid UTF-8 before any route; webhooks are not guarded: their raw body is signed);
- 401: it is not public (no valid bearer token);
- 403: its permission is sysadmin, UI, RESOURCE or DATA (the caller's roles refuse it);
- 404: it has path parameters or query parameters naming an object (`…Id`): unknown objects
  and objects the caller may not see;
- 409: it changes state under a UI/RESOURCE/DATA/sysadmin permission that is not a read
  (lifecycle transitions, names taken, a draft changed meanwhile);
- 422: it takes a body or parameters (the `errors` list names each field);
- EXTRA_STATUSES: 401/403/405/410/413/429 of webhooks (HOOK_ERRORS), 413/429 of public forms,
  401/429 of login, 413 of uploads, 429 of events, and a few single answers named there.

A path of the API called with a method it does not serve answers 405 with `Allow`, any other
path under /api 404 (`answer_wrong_methods`), also when the API runs in front of the Reflex app:
Reflex mounts its own app at "" behind the API's routes, and that mount would otherwise take
every request the API's routes match only by path, answering 404 for a wrong method.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, HTTPException
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Receive, Scope, Send

ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}
SCHEMAS: dict[str, dict[str, Any]] = {
    "FieldErrorOut": {
        "title": "FieldErrorOut",
        "type": "object",
        "description": "One problem with the input, named by where it is.",
        "properties": {
            "nodeId": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Nodeid"},
            "field": {"type": "string", "title": "Field"},
            "message": {"type": "string", "title": "Message"},
        },
        "required": ["nodeId", "field", "message"],
    },
    "ErrorOut": {
        "title": "ErrorOut",
        "type": "object",
        "description": "Every error answer of the API.",
        "properties": {
            "detail": {"type": "string", "title": "Detail"},
            "errors": {"type": "array", "items": {"$ref": "#/components/schemas/FieldErrorOut"},
                       "title": "Errors"},
        },
        "required": ["detail"],
    },
}
BEARER = {"bearerAuth": {"type": "http", "scheme": "bearer",
                         "description": "a token of POST /api/auth/login or a personal API token"},
          "startTicket": {"type": "apiKey", "in": "query", "name": "ticket",
                          "description": "a one-time ticket of POST /api/connections/oauth/{type}/tickets (a browser "
                                         "navigation carries no bearer header)"}}
# Operations a caller may authenticate otherwise than with the bearer token.
ALTERNATIVE_SECURITY: dict[tuple[str, str], list[dict[str, list]]] = {
    ("get", "/api/connections/oauth/{type}/start"): [{"bearerAuth": []}, {"startTicket": []}],
}
RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before trying again",
                               "schema": {"type": "string"}}}
DESCRIPTIONS = {
    400: "The body is not valid UTF-8; `detail` names the body.",
    401: "Missing, expired or revoked bearer token (or, for public triggers, bad credentials).",
    403: "The caller's roles do not allow this.",
    404: "Unknown object, or one the caller may not see (the answer is the same).",
    405: "The method is not accepted here.",
    409: "The request clashes with the current state (lifecycle, a name taken, changed meanwhile).",
    410: "Gone for now: the workflow is published but switched off (inactive); `detail` says so.",
    413: "The body is larger than allowed.",
    422: "Invalid input; `errors` names each field.",
    429: "Too many requests; try again after Retry-After seconds.",
}
FORBIDDEN_KINDS = ("sysadmin", "UI", "RESOURCE", "DATA")
STATE_CHANGING = ("post", "put", "patch", "delete")
HOOK = "/api/hooks/{workflowId}/{path}"
PROBED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
UNGUARDED = "/api/hooks/"  # input_guard.UNGUARDED_PREFIXES
# Webhook calls: 401 signature, 403 the workflow's creator may no longer run it, 404 unknown workflow
# or (named) no published version / no webhook on that path, 405 other method, 410 switched off
# (inactive), 413 body too large, 422 webhook-id or JSON body beyond the limits, 429 overloaded.
HOOK_ERRORS = (401, 403, 404, 405, 410, 413, 422, 429)
EXTRA_STATUSES: dict[tuple[str, str], tuple[int, ...]] = {
    ("post", "/api/auth/login"): (401, 429),
    ("get", "/api/auth/oidc/callback"): (404,),  # single sign-on is off
    ("post", "/api/me/tokens"): (409,),  # a token of that name exists
    **{(method, HOOK): HOOK_ERRORS for method in ("get", "post", "put", "patch", "delete")},
    # ClickUp's and Jira's deliveries: 401 signature, 404 unknown address, 413 too large, 422 not JSON, 429.
    ("post", "/api/hooks/remote/{token}"): (401, 404, 413, 422, 429),
    ("post", "/api/forms/{workflowId}"): (413, 429),
    ("post", "/api/events"): (429,),
    ("post", "/api/workspace/{instanceId}/files"): (413,),
    ("post", "/api/chatbot/{instanceId}/tables"): (413,),
    # the Chatbot's public embed: 404 wrong, rotated or revoked token; 429 rate limit per token and address
    ("post", "/api/chatbot/embed/{token}/messages"): (404, 429),
    # declared "authenticated" (the Inbox checks assignee and roles itself): may refuse, may be late
    ("post", "/api/tasks/{taskId}/complete"): (403, 409),
    ("post", "/api/tasks/{taskId}/cancel"): (403, 409),
}
# Extra answers by the end of the path, for routes every agent feature has.
EXTRA_BY_SUFFIX: dict[tuple[str, str], tuple[int, ...]] = {
    ("post", "/agent/runs/{agentRunId}/cancel"): (409,),  # the run has already finished
    # the run waits for no approval, or it was decided already; only the user it acts for decides
    ("post", "/agent/runs/{agentRunId}/approval"): (403, 409),
}


def install(api: FastAPI) -> None:
    """Let `api.openapi()` answer the generated document with every error answer documented.

    Args:
        api: the application, after every router is included (its routes are probed for 405).
    """
    generate: Callable[[], dict[str, Any]] = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            api.openapi_schema = document_errors(generate())
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
    answer_wrong_methods(api)


def answer_wrong_methods(api: FastAPI) -> None:
    """End the API's routes with /api/{rest}: 405 with Allow where another method is served, else 404."""
    api.router.routes.append(Route("/api/{rest:path}", NotServed(list(api.router.routes)), include_in_schema=False))


class NotServed:
    """An ASGI app (so that its Route matches every method) answering what no route of the API serves."""

    def __init__(self, served: list[BaseRoute]):
        self.served = served

    async def __call__(self, scope: Scope, _receive: Receive, _send: Send) -> None:
        allowed = [method for method in PROBED_METHODS if _matches(self.served, {**scope, "method": method})]
        if allowed:
            raise HTTPException(status_code=405, detail="Method Not Allowed", headers={"Allow": ", ".join(allowed)})
        raise HTTPException(status_code=404, detail="Not Found")


def _matches(routes: list[BaseRoute], scope: dict[str, Any]) -> bool:
    return any(route.matches(scope)[0] == Match.FULL for route in routes)


def document_errors(doc: dict[str, Any]) -> dict[str, Any]:
    """Add the error answers, ErrorOut and the bearer scheme to `doc` (in place) and return it.

    Args:
        doc: an OpenAPI document as FastAPI generates it, with `x-permission` on each operation.
    """
    components = doc.setdefault("components", {})
    components.setdefault("schemas", {}).update(SCHEMAS)
    components.setdefault("securitySchemes", {}).update(BEARER)
    for path, operations in doc.get("paths", {}).items():
        for method, operation in operations.items():
            if method in (*STATE_CHANGING, "get"):
                _document_operation(method, path, operation)
    _drop_unused_validation_schemas(doc)
    return doc


def error_statuses(method: str, path: str, operation: dict[str, Any]) -> set[int]:
    """The error status codes an operation can answer, by the rules of the module docstring.

    Args:
        method: the operation's method, lower case.
        path: its path as the document names it.
        operation: its operation object.
    """
    declared = operation.get("x-permission", {})
    kind = declared.get("kind")
    parameters = operation.get("parameters", [])
    statuses = set(EXTRA_STATUSES.get((method, path), ()))
    for (extra_method, suffix), extra in EXTRA_BY_SUFFIX.items():
        if method == extra_method and path.endswith(suffix):
            statuses.update(extra)
    if "requestBody" in operation:
        statuses.add(422)
    if ("requestBody" in operation or method in STATE_CHANGING) and not path.startswith(UNGUARDED):
        statuses.add(400)
    if parameters:
        statuses.add(422)
    if kind != "public":
        statuses.add(401)
    if kind in FORBIDDEN_KINDS:
        statuses.add(403)
        if method in STATE_CHANGING and declared.get("operation") != "read":
            statuses.add(409)
    if any(p.get("in") == "path" or (p.get("in") == "query" and p["name"].endswith("Id")) for p in parameters):
        statuses.add(404)
    return statuses


def _document_operation(method: str, path: str, operation: dict[str, Any]) -> None:
    responses = operation.setdefault("responses", {})
    for status in sorted(error_statuses(method, path, operation)):
        answer = responses.setdefault(str(status), {})
        if status == 422:  # FastAPI documents its own validation body, not the one we answer
            answer.clear()
        answer.setdefault("description", DESCRIPTIONS[status])
        if status == 429:
            answer["headers"] = RETRY_AFTER
    for status, answer in responses.items():
        if status.startswith("4") and "content" not in answer:
            answer["content"] = {"application/json": {"schema": ERROR_REF}}
    if operation.get("x-permission", {}).get("kind") != "public":
        operation["security"] = ALTERNATIVE_SECURITY.get((method, path), [{"bearerAuth": []}])


def _drop_unused_validation_schemas(doc: dict[str, Any]) -> None:
    """Remove FastAPI's HTTPValidationError/ValidationError once no answer refers to them."""
    schemas = doc["components"]["schemas"]
    text = repr(doc["paths"])
    if "#/components/schemas/HTTPValidationError" not in text:
        schemas.pop("HTTPValidationError", None)
        if "#/components/schemas/ValidationError" not in text + repr(schemas):
            schemas.pop("ValidationError", None)
