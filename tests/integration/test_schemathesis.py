"""Schemathesis over /api/openapi.json: no 5xx, and no answer that contradicts the document.

The app (create_api(), in process over ASGI, SQLite) gets a seeded mandate (tests/fuzz_world.py):
a mandate admin who signs in through POST /api/auth/login, a second member, both feature
instances, a workflow with a published version and a draft, a paused run with a pending task,
a file, chats and agent runs, a personal API token and a notification. Path parameters always
carry these real ids, so the operations reach their code instead of stopping at 404.

Every operation runs the examples, coverage and fuzzing phases with a fixed seed
(derandomized, at most MAX_EXAMPLES fuzzed cases) and every case is checked by CHECKS: a
5xx, an undocumented status code, a body or header that does not match the declared
response, a wrong content type, invalid input that is accepted, a wrong method that is not
405, or an operation that works without a token, fails the test.

Nothing is excluded: the agent routes' text/event-stream answers are documented without a body
schema (no AI provider is configured, so each stream ends at once with its error event), and
the login throttle's 429 is documented. The run uses the engine (as `schemathesis run` does)
rather than `schemathesis.pytest.from_fixture`, whose subtests need `Function._nodeid`, which
pytest 9.2 no longer has. Not checked: positive_data_acceptance (schema-valid input refused with
422): names must be non-empty and free of control characters, `since` before `until`, … rules
the document does not state yet.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from schemathesis.engine import Status, events, from_schema
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from backend.api.app import create_api
from tests.fuzz_world import FuzzWorld, seed_world

MAX_EXAMPLES = 8
SEED = 20261201
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_headers_conformance", "response_schema_conformance", "negative_data_rejection",
          "unsupported_method", "ignored_auth")


def fuzz_config(world: FuzzWorld) -> schemathesis.Config:
    """Seeded, derandomized, bounded, the world's ids in path parameters; no stateful phase
    (the document declares no links)."""
    return schemathesis.Config.from_dict({
        **world.parameter_config(),
        "seed": SEED,
        "suppress-health-check": ["too_slow", "filter_too_much", "data_too_large", "large_base_example"],
        "workers": 1,
        "cache": {"enabled": False},
        "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
        "phases": {"stateful": {"enabled": False}},
        "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
    })


def load_schema(world: FuzzWorld):
    """The app's document over ASGI, with the world's ids in path parameters and its token."""
    loaded = schemathesis.openapi.from_asgi("/api/openapi.json", world.app, config=fuzz_config(world))

    @loaded.hook
    def map_path_parameters(context, path_parameters):
        return world.path_values(context.operation.method, context.operation.path, path_parameters)

    @loaded.auth()
    class AdminToken:
        def get(self, case, context):
            return world.token

        def set(self, case, data, context):
            case.headers = {**(case.headers or {}),
                            **world.headers_for(case.operation.method, case.operation.path)}

    return loaded


def failures_of(stream) -> tuple[list[str], int]:
    """Every failed check and engine error of a run, and how many cases were sent."""
    found, cases = [], 0
    for event in stream:
        if isinstance(event, events.FatalError):
            raise event.exception
        if isinstance(event, events.NonFatalError):
            found.append(f"{event.label}: error {event.info.title}: {event.info.message}")
        if isinstance(event, events.ScenarioFinished):
            cases += len(event.recorder.cases)
            found += [_describe(event.recorder, case_id, check)
                      for case_id, checks in event.recorder.checks.items()
                      for check in checks if check.status == Status.FAILURE and check.failure_info]
    return sorted(set(found)), cases


def _describe(recorder: Any, case_id: str, check: Any) -> str:
    failure = check.failure_info.failure
    response = recorder.interactions.get(case_id)
    answer = response.response.status_code if response and response.response else "-"
    return (f"{recorder.label}: {check.name} ({answer}): {failure.title}: {failure.message[:300]}\n"
            f"    {check.failure_info.code_sample.splitlines()[-1][:400]}")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_every_answer_matches_the_openapi_document(app_config: str, monkeypatch):
    world = seed_world(monkeypatch)
    # Bounded by MAX_EXAMPLES per operation (about 80 s here); no timing assert: a loaded machine
    # must not fail a correct run.
    found, cases = failures_of(from_schema(load_schema(world)).execute())
    assert not found, f"{len(found)} answers contradict the OpenAPI document:\n" + "\n".join(found)
    assert cases > 500, cases


ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}
PUBLIC_WITH_401 = ("/api/auth/login", "/api/hooks/{workflowId}/{path}",  # wrong password, bad signature
                   "/api/hooks/remote/{token}")


def operations(doc: dict) -> list[tuple[str, str, dict]]:
    return [(method, path, op) for path, ops in doc["paths"].items() for method, op in ops.items()]


def test_every_operation_documents_its_errors_with_one_body_shape():
    doc = create_api().openapi()
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    assert doc["components"]["schemas"]["ErrorOut"]["required"] == ["detail"]
    for method, path, op in operations(doc):
        kind = op["x-permission"]["kind"]
        responses = op["responses"]
        where = f"{method.upper()} {path}"
        assert ("401" in responses) == (kind != "public" or path in PUBLIC_WITH_401), where
        assert ("security" in op) == (kind != "public"), where
        if kind in ("sysadmin", "UI", "RESOURCE", "DATA"):
            assert "403" in responses, where
        if "{" in path:
            assert "404" in responses, where
        if "requestBody" in op:
            assert "422" in responses, where
        assert ("400" in responses) == (not path.startswith("/api/hooks/")
                                        and ("requestBody" in op or method != "get")), where
        for status, answer in responses.items():
            if status.startswith("4"):
                assert answer["content"]["application/json"]["schema"] == ERROR_REF, (where, status)


@pytest.mark.parametrize("behind_reflex", [False, True], ids=["create_api", "mounted-like-reflex"])
def test_a_path_called_with_a_method_it_does_not_serve_answers_405(behind_reflex: bool):
    api = create_api()
    if behind_reflex:  # what rx.App(api_transformer=…) does: the Reflex app mounted at "" behind the API
        api.mount("", Starlette(routes=[Route("/{rest:path}", PlainTextResponse("reflex", 404),
                                              methods=["GET", "POST", "PUT", "PATCH", "DELETE"])]))
    client = TestClient(api)
    for method, path, allowed in (("POST", "/api/health", "GET"), ("DELETE", "/api/me", "GET"),
                                  ("PUT", "/api/graphicalEditor/some-id/workflows", "GET, POST"),
                                  ("TRACE", "/api/me/tokens", "GET, POST")):
        answer = client.request(method, path)
        assert (answer.status_code, answer.headers.get("allow")) == (405, allowed), (method, path)
        assert answer.json() == {"detail": "Method Not Allowed"}
    missing = client.get("/api/no-such-route")
    assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found"})
    if behind_reflex:
        assert client.get("/editor").text == "reflex"  # pages outside /api still reach the UI
