"""Tenant isolation, walked generically over the OpenAPI document of create_api().

Two mandates A and B are set up alike: an admin, a plain user with mandate role `viewer` and
the `<featureCode>-viewer` role in each of the mandate's feature instances (one per feature), a
workflow with an archived and a published version, a run, a human task and a personal API
token. Every route of the API is then called with ids taken from PATH_IDS:

(a) A's admin with B's ids in the path (each non-empty combination, A's ids elsewhere) gets
    404, exactly what a random missing id gets;
(b) A's viewer gets 403 from every route declaring x-permission sysadmin, RESOURCE, or DATA with
    create/update/delete, called on A's own objects with a body built from the route's schema;
(c) A's admin, on A's own objects, naming one of B's objects in a body property or query
    parameter ending in "Id" is refused (never 2xx), and nothing in the database changes;
(d) every GET A's admin may call on A's objects answers 200 and mentions nothing of B.

New routes are covered without editing this file, unless they use a parameter name PATH_IDS
does not know: then the test fails and asks for it to be added.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlmodel import SQLModel, select

from backend.agent.config import PROFILES as AGENT_PROFILES
from backend.auth import create_api_token, issue_token
from backend.connectors.store import seal_secret
from backend.crypto import seal
from backend.db import get_engine, session_scope
from backend.db.models import (
    AgentChat,
    AgentRun,
    Connection,
    FeatureInstance,
    HumanTask,
    McpServer,
    Notification,
    Role,
    User,
    WorkflowRun,
)
from backend.features.registry import get_features
from backend.files import service as files
from backend.tenancy import create_feature_instance, create_mandate, grant_instance_roles, grant_mandate_roles
from backend.workflows import service
from backend.workflows.graph import default_graph

METHODS = ("get", "post", "put", "patch", "delete")
EDITOR = "graphicalEditor"
WORKSPACE = "workspace"
# Public routes that take ids would need a walk of their own (e.g. signed webhooks); list each
# here with the reason it is safe, or the walk fails. Public routes without any id parameter
# are skipped: they have no caller to isolate and name no object to cross over to.
_WEBHOOK = ("signed webhook: no signed-in caller to isolate; the Standard Webhooks signature made with the "
            "trigger's own secret authenticates the call, and unknown, inactive or unpublished workflows all "
            "answer 404 alike (tests/integration/test_webhooks.py)")
_FORM = ("public form: only active workflows whose published version starts with trigger.form are shown or "
         "started, anything else answers 404 alike; the run runs as the workflow's creator "
         "(tests/integration/test_forms.py)")
PUBLIC_ROUTES_WITH_IDS: dict[tuple[str, str], str] = {
    **{(method, "/api/hooks/{workflowId}/{path}"): _WEBHOOK for method in ("POST", "GET", "PUT", "PATCH", "DELETE")},
    ("POST", "/api/hooks/remote/{token}"): (
        "delivery of ClickUp or Jira: no signed-in caller; the token is a random address made when a workflow "
        "with that trigger was published, the service's signature with the registration's own secret "
        "authenticates the call, unknown addresses answer 404 (tests/integration/test_remote_triggers.py)"),
    ("GET", "/api/forms/{workflowId}"): _FORM,
    ("POST", "/api/forms/{workflowId}"): _FORM,
    ("GET", "/api/connections/oauth/{type}/callback"): (
        "OAuth callback: the browser the provider sends back carries no bearer token; the consent it finishes was "
        "started by a signed-in user, is single use, expires, and must come with the HttpOnly cookie that start "
        "set in that browser; it answers only a redirect to the UI (tests/integration/test_msft_oauth.py)"),
    ("POST", "/api/chatbot/embed/{token}/messages"): (
        "Chatbot embed: no signed-in caller; the token is a random secret made when an instance's manager enabled "
        "the embed (only its hash is kept), wrong, rotated or revoked tokens answer 404 alike, the run acts as that "
        "manager in that one instance with the chatbot toolbox only (tests/integration/test_chatbot_embed.py)"),
    **{key: ("task mail link: the token is a random secret mailed to one recipient of one task (only its hash is "
             "kept); unknown or altered tokens show 'not valid' alike and name nothing; deciding takes a signed-in "
             "user who may complete that task, or the recipient where a mandate admin allowed one-click for the "
             "workflow (tests/integration/test_task_mail.py)")
       for key in (("GET", "/api/task-links/{token}"), ("POST", "/api/task-links/{token}/decision"))},
}
# Routes that answer A's viewer with something else than 403 for a reason; none so far.
VIEWER_EXCEPTIONS: dict[tuple[str, str], str] = {}
# GET routes that answer A's admin with something else than 200 on purpose (the leak check still applies).
GET_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("GET", "/api/connections/oauth/{type}/start"): (
        "starts a consent: a redirect to the provider, or 422 naming the missing POWERON_MSFT_* settings here"),
}


@dataclass
class Tenant:
    """The objects of one mandate and the bearer headers of its two users."""

    name: str
    mandate_id: str
    admin_id: str
    viewer_id: str
    admin: dict[str, str]
    viewer: dict[str, str]
    instances: dict[str, str]
    workflow_id: str
    archived_version_id: str
    published_version_id: str
    run_id: str
    task_id: str
    token_id: str
    file_id: str
    chat_ids: dict[str, str]
    agent_run_ids: dict[str, str]
    notification_id: str
    connection_id: str
    role_ids: list[str] = field(default_factory=list)
    mcp_server_id: str = ""

    @property
    def receipt_id(self) -> str:
        """The receipt of the tenant's Trustee instance (made in build_tenant)."""
        from backend.features.trustee.models import TrusteeReceipt

        with session_scope() as session:
            return session.exec(select(TrusteeReceipt.id).where(
                TrusteeReceipt.feature_instance_id == self.instances["trustee"])).one()

    @property
    def position_id(self) -> str:
        """The booking line of that receipt."""
        from backend.features.trustee.models import TrusteePosition

        with session_scope() as session:
            return session.exec(select(TrusteePosition.id).where(
                TrusteePosition.feature_instance_id == self.instances["trustee"])).one()

    @property
    def push_subscription_id(self) -> str:
        """The admin's browser push subscription (made in build_tenant)."""
        from backend.db.models import PushSubscription

        with session_scope() as session:
            return session.exec(select(PushSubscription.id).where(PushSubscription.user_id == self.admin_id)).one()

    def instance_for(self, path: str) -> str:
        """The instance of the feature serving `path` (/api/<featureCode>/…), else the editor."""
        code = path.split("/")[2]
        return self.instances.get(code, self.instances[EDITOR])

    def all_ids(self) -> set[str]:
        return {self.mandate_id, self.admin_id, self.viewer_id, *self.instances.values(), self.workflow_id,
                self.archived_version_id, self.published_version_id, self.run_id, self.task_id, self.token_id,
                self.file_id, *self.chat_ids.values(), *self.agent_run_ids.values(), self.notification_id,
                self.connection_id, *self.role_ids, self.mcp_server_id}


# Parameter name (path, query or body property ending in "Id") → the tenant's object for a route.
PATH_IDS: dict[str, Callable[[Tenant, str], str]] = {
    "mandateId": lambda t, path: t.mandate_id,
    "instanceId": lambda t, path: t.instance_for(path),
    "featureInstanceId": lambda t, path: t.instance_for(path),
    "userId": lambda t, path: t.admin_id,  # a user other than the viewer, who acts in (b)
    "workflowId": lambda t, path: t.workflow_id,
    "versionId": lambda t, path: t.archived_version_id,
    "runId": lambda t, path: t.run_id,
    "taskId": lambda t, path: t.task_id,
    "tokenId": lambda t, path: t.token_id,
    "fileId": lambda t, path: t.file_id,
    "chatId": lambda t, path: t.chat_ids.get(path.split("/")[2], t.chat_ids[WORKSPACE]),
    "agentRunId": lambda t, path: t.agent_run_ids.get(path.split("/")[2], t.agent_run_ids[WORKSPACE]),
    "notificationId": lambda t, path: t.notification_id,
    "connectionId": lambda t, path: t.connection_id,
    "serverId": lambda t, path: t.mcp_server_id,  # an external MCP server (/api/mandates/{mandateId}/mcp-servers)
    "baseVersionId": lambda t, path: t.published_version_id,  # the version a draft save is based on
    "templateId": lambda t, path: "expense-approval",
    "type": lambda t, path: "msft",  # a connection type (/api/connections/oauth/{type}/…)
    "clientId": lambda t, path: "walk-client",  # an OAuth client of an external MCP server (oauth.clientId)
    "profile": lambda t, path: "workspace",  # an agent profile (/api/mandates/{mandateId}/agent-approvals/{profile})
    "receiptId": lambda t, path: t.receipt_id,  # a Trustee receipt (/api/trustee/{instanceId}/receipts/{receiptId})
    "positionId": lambda t, path: t.position_id,  # its booking line (/api/trustee/{instanceId}/positions/…)
    "subscriptionId": lambda t, path: t.push_subscription_id,  # a browser's push subscription (/api/push/…)
}
# Id parameters of objects every tenant shares (no tenant's data): the foreign-id walk skips them.
SHARED_IDS: dict[str, str] = {
    "templateId": "workflow templates are built in, the same for every tenant (backend/workflows/templates.py)",
    "type": "connection types are built in, the same for every tenant (backend/connectors/types.py)",
    "clientId": "the OAuth client id an external MCP server's token endpoint knows, no object of PowerOn",
    "profile": "agent profiles are built in, the same for every tenant (backend/agent/config.py)",
}
# Values for body properties that must look right for the route to reach its checks.
EXAMPLES: dict[str, Any] = {
    "password": "walk-password-1",
    "featureCode": EDITOR,
    "graph": {"nodes": [], "edges": []},
}


def id_for(name: str, tenant: Tenant, path: str) -> str:
    if name not in PATH_IDS:
        pytest.fail(f"route {path} takes the id parameter '{name}' which the isolation walk does not know: add "
                    f"'{name}' to PATH_IDS in tests/integration/test_tenant_isolation.py (and create such an "
                    "object in build_tenant)", pytrace=False)
    return PATH_IDS[name](tenant, path)


def build_tenant(name: str) -> Tenant:
    with session_scope() as session:
        mandate = create_mandate(session, f"Tenant-{name}-Corp")
        admin = User(username=f"admin-{name}", display_name=f"Admin {name}")
        viewer = User(username=f"viewer-{name}", display_name=f"Viewer {name}")
        session.add_all([admin, viewer])
        session.flush()
        grant_mandate_roles(session, admin, mandate, ["admin"])
        grant_mandate_roles(session, viewer, mandate, ["viewer"])
        instances: dict[str, FeatureInstance] = {}
        for code in sorted(get_features()):
            instances[code] = create_feature_instance(session, mandate, code, f"{code} of {name}")
            grant_instance_roles(session, viewer, instances[code], [f"{code}-viewer"])
        editor = instances[EDITOR]
        workflow = service.create_workflow(session, admin, editor, f"Workflow of {name}")
        archived = service.publish(session, admin, workflow)
        service.save_draft(session, admin, workflow, default_graph())
        published = service.publish(session, admin, workflow)
        run = WorkflowRun(workflow_id=workflow.id, version_id=published.id, mandate_id=mandate.id,
                          feature_instance_id=editor.id, status="paused", sys_created_by=admin.id)
        session.add(run)
        session.flush()
        task = HumanTask(run_id=run.id, node_id="approve", mandate_id=mandate.id, feature_instance_id=editor.id,
                         title=f"Approve for {name}")
        session.add(task)
        token_row, _ = create_api_token(session, admin, f"token of {name}")
        workspace = instances[WORKSPACE]
        stored = files.write_text(files.FileScope(session, admin, mandate.id, workspace.id),
                                  f"/notes/{name}.txt", f"Notes of tenant {name}")
        chats: dict[str, AgentChat] = {}
        agent_runs: dict[str, AgentRun] = {}
        for code in (WORKSPACE, EDITOR):  # the features with an agent
            chats[code] = AgentChat(mandate_id=mandate.id, feature_instance_id=instances[code].id,
                                    title=f"Chat of {name}", sys_created_by=admin.id)
            session.add(chats[code])
            session.flush()
            agent_runs[code] = AgentRun(chat_id=chats[code].id, mandate_id=mandate.id,
                                        feature_instance_id=instances[code].id, profile=code,
                                        prompt=f"Question of {name}", status="completed",
                                        answer=f"Answer of {name}", sys_created_by=admin.id)
            session.add(agent_runs[code])
        # Every further feature with an agent profile (chatbot, …) gets a chat and a run as well.
        for code in sorted(set(AGENT_PROFILES) & set(instances) - {WORKSPACE, EDITOR}):
            chats[code] = AgentChat(mandate_id=mandate.id, feature_instance_id=instances[code].id,
                                    title=f"Chat of {name}", sys_created_by=admin.id)
            session.add(chats[code])
            session.flush()
            agent_runs[code] = AgentRun(chat_id=chats[code].id, mandate_id=mandate.id,
                                        feature_instance_id=instances[code].id, profile=code,
                                        prompt=f"Question of {name}", status="completed",
                                        answer=f"Answer of {name}", sys_created_by=admin.id)
            session.add(agent_runs[code])
        notification = Notification(user_id=admin.id, mandate_id=mandate.id, kind="run.failed",
                                    title=f"Workflow of {name} failed", message=f"Error of {name}",
                                    workflow_id=workflow.id, run_id=run.id)
        session.add(notification)
        # The admin's own mailbox (its credentials sealed, never shown; not shared: other members
        # do not see it).
        connection = Connection(mandate_id=mandate.id, owner_id=admin.id, type="imap", label=f"Connection of {name}",
                                settings={"host": "127.0.0.1", "port": 1, "security": "none",
                                                       "username": f"mail-{name}"},
                                secret=seal_secret({"password": f"password of {name}"}))
        session.add(connection)
        # An external MCP server of the mandate (nothing listens there: a test or refresh fails).
        mcp_server = McpServer(mandate_id=mandate.id, name=f"server-{name.lower()}", url="http://127.0.0.1:1/mcp",
                               auth_kind="headers", secret=seal(json.dumps({"headers": {"X-Key": f"key of {name}"}})),
                               tools=[{"name": "echo", "description": f"Echo of {name}",
                                       "inputSchema": {"type": "object"}}], sys_created_by=admin.id)
        session.add(mcp_server)
        # A Trustee receipt with its file and a proposed booking line.
        from datetime import date as _date

        from backend.features.trustee.models import TrusteePosition, TrusteeReceipt

        trustee = instances["trustee"]
        receipt_file = files.write_text(files.FileScope(session, admin, mandate.id, trustee.id),
                                        f"/receipts/receipt-{name}.txt", f"Receipt of tenant {name}")
        receipt = TrusteeReceipt(mandate_id=mandate.id, feature_instance_id=trustee.id, file_id=receipt_file.id,
                                 file_name=receipt_file.name, supplier=f"Supplier of {name}",
                                 receipt_date=_date(2025, 8, 1), total=108.1, vat_amount=8.1, vat_code="VM81",
                                 sys_created_by=admin.id)
        session.add(receipt)
        session.flush()
        session.add(TrusteePosition(mandate_id=mandate.id, feature_instance_id=trustee.id, receipt_id=receipt.id,
                                    booking_date=_date(2025, 8, 1), debit_account="6640", credit_account="2000",
                                    amount=108.1, text=f"Booking of {name}", sys_created_by=admin.id))
        # The admin's browser subscribed to Web Push (its endpoint and keys are the admin's own).
        from backend.db.models import PushSubscription

        push_endpoint = f"https://push.example.com/send/{name}-{uuid.uuid4().hex}"
        session.add(PushSubscription(user_id=admin.id, endpoint=push_endpoint,
                                     endpoint_hash=uuid.uuid4().hex + uuid.uuid4().hex,
                                     p256dh="B" + "A" * 86, auth="A" * 22))
        admin_token = issue_token(session, admin).token
        viewer_token = issue_token(session, viewer).token
        session.flush()
        roles = session.exec(select(Role.id).where(Role.mandate_id == mandate.id)).all()
        return Tenant(
            name=name, mandate_id=mandate.id, admin_id=admin.id, viewer_id=viewer.id,
            admin={"Authorization": f"Bearer {admin_token}"}, viewer={"Authorization": f"Bearer {viewer_token}"},
            instances={code: i.id for code, i in instances.items()}, workflow_id=workflow.id,
            archived_version_id=archived.id, published_version_id=published.id, run_id=run.id, task_id=task.id,
            token_id=token_row.id, file_id=stored.id, chat_ids={code: c.id for code, c in chats.items()},
            agent_run_ids={code: r.id for code, r in agent_runs.items()}, notification_id=notification.id,
            connection_id=connection.id, role_ids=list(roles), mcp_server_id=mcp_server.id,
        )


# --- the OpenAPI document ------------------------------------------------------------------------------


@dataclass
class Route:
    method: str
    path: str
    operation: dict
    doc: dict

    @property
    def key(self) -> tuple[str, str]:
        return (self.method.upper(), self.path)

    @property
    def permission(self) -> dict:
        return self.operation.get("x-permission", {})

    @property
    def public(self) -> bool:
        return self.permission.get("kind") == "public"

    def params(self, where: str) -> list[dict]:
        return [p for p in self.operation.get("parameters", []) if p["in"] == where]

    @property
    def path_names(self) -> list[str]:
        return [p["name"] for p in self.params("path")]

    @property
    def id_queries(self) -> list[str]:
        return [p["name"] for p in self.params("query") if p["name"].endswith("Id")]

    @property
    def body_schema(self) -> dict | None:
        content = self.operation.get("requestBody", {}).get("content", {})
        return content.get("application/json", {}).get("schema")

    def url(self, values: dict[str, str]) -> str:
        url = self.path
        for name, value in values.items():
            url = url.replace("{" + name + "}", value)
        return url

    def __str__(self) -> str:
        return f"{self.method.upper()} {self.path}"


def routes(doc: dict) -> list[Route]:
    found = [Route(method, path, op, doc) for path, ops in doc["paths"].items()
             for method, op in ops.items() if method in METHODS]
    for route in found:
        if route.public and (route.path_names or route.id_queries) and route.key not in PUBLIC_ROUTES_WITH_IDS:
            pytest.fail(f"public route {route} takes ids {route.path_names + route.id_queries}: the walk cannot "
                        "check it as a signed-in user; add it with a reason to PUBLIC_ROUTES_WITH_IDS or "
                        "give it a walk of its own", pytrace=False)
        for query in route.params("query"):
            if query.get("required") and not query["name"].endswith("Id"):
                pytest.fail(f"{route} requires the query parameter '{query['name']}': teach the walk a value for it",
                            pytrace=False)
    return [r for r in found if not r.public]


def resolve(schema: dict, doc: dict) -> dict:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            options = [s for s in schema[combinator] if s.get("type") != "null"]
            return resolve(options[0], doc) if options else {}
    return schema


def id_fields(schema: dict, doc: dict, at: tuple = ()) -> list[tuple]:
    """Paths of every property ending in "Id" in a request schema ("[]" stands for array items)."""
    schema = resolve(schema, doc)
    found = []
    for name, prop in schema.get("properties", {}).items():
        if name.endswith("Id"):
            found.append((*at, name))
        found += id_fields(prop, doc, (*at, name))
    if schema.get("type") == "array" and "items" in schema:
        found += id_fields(schema["items"], doc, (*at, "[]"))
    return found


def example(schema: dict, doc: dict, ids: Callable[[str], str], overrides: dict[tuple, Any],
            name: str = "", at: tuple = ()) -> Any:
    """A valid value for `schema`: required properties only, ids from `ids`, `overrides` by path."""
    if at in overrides:
        return overrides[at]
    schema = resolve(schema, doc)
    kind = schema.get("type")
    if "properties" in schema or kind == "object":
        required = set(schema.get("required", []))
        wanted = [p for p in schema.get("properties", {})
                  if p in required or any(path[:len(at) + 1] == (*at, p) for path in overrides)]
        return {p: example(schema["properties"][p], doc, ids, overrides, p, (*at, p)) for p in wanted}
    if name.endswith("Id"):
        return ids(name)
    if name in EXAMPLES:
        return EXAMPLES[name]
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "array":
        through = any(path[:len(at) + 1] == (*at, "[]") for path in overrides)
        return [example(schema.get("items", {}), doc, ids, overrides, name, (*at, "[]"))] if through else []
    if kind == "string":
        return f"walk-{uuid.uuid4().hex[:10]}"
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return 1
    return {}


def request_body(route: Route, tenant: Tenant, overrides: dict[tuple, Any] | None = None) -> Any:
    if route.body_schema is None:
        return None
    return example(route.body_schema, route.doc, lambda n: id_for(n, tenant, route.path), overrides or {})


def snapshot() -> dict[str, list[str]]:
    """Every row of every table, to prove a refused request wrote nothing."""
    with get_engine().connect() as connection:
        return {t.name: sorted(map(repr, connection.execute(t.select()).all()))
                for t in SQLModel.metadata.sorted_tables}


def changed_tables(before: dict, after: dict) -> list[str]:
    return [name for name in before if before[name] != after.get(name)]


def reached_the_route(response) -> bool:
    """False for a 422 of request validation: the walk built a bad body, the check proves nothing."""
    return not (response.status_code == 422 and response.json().get("detail", "").startswith("invalid input:"))


# --- the world -----------------------------------------------------------------------------------------


@dataclass
class World:
    client: Any
    a: Tenant
    b: Tenant
    routes: list[Route]

    def call(self, route: Route, headers: dict, values: dict[str, str], query: dict | None = None,
             body: Any = None):
        kwargs: dict[str, Any] = {"headers": headers, "params": query or {}}
        if body is not None:
            kwargs["json"] = body
        return self.client.request(route.method.upper(), route.url(values), **kwargs)


@pytest.fixture
def world(api) -> Iterator[World]:
    doc = api.client.get("/api/openapi.json").json()
    yield World(api.client, build_tenant("A"), build_tenant("B"), routes(doc))


def test_every_id_parameter_of_every_route_is_known_to_the_walk(world):
    names = set()
    for route in world.routes:
        names.update(route.path_names, route.id_queries)
        if route.body_schema is not None:
            names.update(path[-1] for path in id_fields(route.body_schema, route.doc))
    for name in sorted(names):
        id_for(name, world.a, "/api/?")
    assert {"mandateId", "instanceId", "workflowId", "userId", "tokenId"} <= names
    # The walk covers routes of every feature that has a router.
    served = {r.path.split("/")[2] for r in world.routes}
    assert {code for code, f in get_features().items() if f.router is not None} <= served


def test_a_foreign_id_in_the_path_answers_404_like_a_missing_one(world):
    a, b = world.a, world.b
    checked, wrong = 0, []
    before = snapshot()
    for route in world.routes:
        names = [n for n in route.path_names if n not in SHARED_IDS]
        if not names:
            continue
        own = {n: id_for(n, a, route.path) for n in route.path_names}
        body = request_body(route, a)
        for size in range(1, len(names) + 1):
            for foreign in itertools.combinations(names, size):
                with_b = {**own, **{n: id_for(n, b, route.path) for n in foreign}}
                missing = {**own, **{n: uuid.uuid4().hex for n in foreign}}
                answer_b = world.call(route, a.admin, with_b, body=body)
                answer_missing = world.call(route, a.admin, missing, body=body)
                checked += 1
                if not (answer_b.status_code == answer_missing.status_code == 404):
                    wrong.append(f"{route} with B's {', '.join(foreign)}: {answer_b.status_code} "
                                 f"{answer_b.text[:150]} (a missing id: {answer_missing.status_code})")
    assert not wrong, "A's admin could tell B's objects from missing ones:\n" + "\n".join(wrong)
    assert checked >= 20
    assert changed_tables(before, snapshot()) == []


def test_a_viewer_is_refused_every_modifying_route_on_their_own_mandate(world):
    a = world.a
    targets = [r for r in world.routes
               if r.permission.get("kind") in ("sysadmin", "RESOURCE")
               or (r.permission.get("kind") == "DATA" and r.permission.get("operation") in ("create", "update",
                                                                                            "delete"))]
    wrong = []
    before = snapshot()
    for route in targets:
        values = {n: id_for(n, a, route.path) for n in route.path_names}
        response = world.call(route, a.viewer, values, body=request_body(route, a))
        if route.key in VIEWER_EXCEPTIONS:
            continue
        if response.status_code != 403:
            wrong.append(f"{route} ({route.permission}): {response.status_code} {response.text[:150]}")
    assert not wrong, ("A's viewer was not refused (list a route in VIEWER_EXCEPTIONS with the reason if it "
                       "answers otherwise on purpose):\n" + "\n".join(wrong))
    assert len(targets) >= 15
    assert changed_tables(before, snapshot()) == []


def test_foreign_ids_in_bodies_and_queries_are_refused_and_change_nothing(world):
    a, b = world.a, world.b
    checked, wrong = [], []
    for route in world.routes:
        values = {n: id_for(n, a, route.path) for n in route.path_names}
        cases: list[tuple[str, dict, Any]] = []
        for name in route.id_queries:
            cases.append((f"query {name}", {name: id_for(name, b, route.path)}, request_body(route, a)))
        if route.body_schema is not None:
            for path in id_fields(route.body_schema, route.doc):
                if path[-1] in SHARED_IDS:
                    continue
                foreign = id_for(path[-1], b, route.path)
                cases.append((f"body {'.'.join(path)}", {}, request_body(route, a, {path: foreign})))
        for what, query, body in cases:
            before = snapshot()
            response = world.call(route, a.admin, values, query=query, body=body)
            checked.append(f"{route} {what}")
            changed = changed_tables(before, snapshot())
            if 200 <= response.status_code < 300 or changed or not reached_the_route(response):
                wrong.append(f"{route} with B's id in {what}: {response.status_code} {response.text[:150]}"
                             + (f"; changed tables {changed}" if changed else ""))
    assert not wrong, "a foreign id in a request was accepted:\n" + "\n".join(wrong)
    assert len(checked) >= 3, checked


def test_nothing_of_b_shows_in_anything_a_can_read(world):
    a, b = world.a, world.b
    secrets = b.all_ids() | {f"Tenant-{b.name}-Corp", f"admin-{b.name}", f"viewer-{b.name}"}
    wrong = []
    gets = [r for r in world.routes if r.method == "get"]
    for route in gets:
        values = {n: id_for(n, a, route.path) for n in route.path_names}
        for who, headers in (("admin", a.admin), ("viewer", a.viewer)):
            response = world.call(route, headers, values)
            if who == "admin" and response.status_code != 200 and route.key not in GET_EXCEPTIONS:
                wrong.append(f"{route} as A's admin: {response.status_code} {response.text[:150]}")
            leaked = sorted(s for s in secrets if s in response.text)
            if leaked:
                wrong.append(f"{route} as A's {who} shows B's {leaked}")
    assert not wrong, "\n".join(wrong)
    assert len(gets) >= 8
