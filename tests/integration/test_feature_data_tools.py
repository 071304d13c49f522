"""The featureData toolbox (spec §5.4, Feature Data Agents): listTables, browseTable, queryTable and
describe_tables, called the way an agent calls them (execute_tool_call with JSON arguments, strict
mode's explicit nulls included) and through execute_action.

One mandate holds two Graphical Editor instances (E1, E2) and a Workspace:

- alice: graphicalEditor-user in E1 and E2, workspace-user (read all);
- olga: a custom E1 role "own-reader" (read own, workflow_version none);
- otto: a mandate role that allows the toolboxes but opens no instance;
- rows in E2 that must never show when E1 is read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from sqlmodel import select

from backend.actions import ActionContext, execute_action
from backend.actions.openai_tools import execute_tool_call, strict_parameters, to_tool_definition, tool_name
from backend.actions.registry import get_registry
from backend.auth import create_api_token
from backend.db import session_scope
from backend.db.models import AccessRule, HumanTask, Role, StoredFile, StoredFileData, User, Workflow, WorkflowRun
from backend.errors import NotFound
from backend.features.data_access import TOOL_NAMES, DataTable, describe_tables
from backend.files import service as files
from backend.rbac.rights import DATA, RESOURCE, UI
from backend.tenancy import create_feature_instance, create_mandate, grant_instance_roles, grant_mandate_roles
from backend.workflows import service

EDITOR = "graphicalEditor"
PASSWORD_HASH = "pbkdf2_sha256$600000$SALTSALT$NEVER-SHOW-THIS-HASH"
SECRET_WORDS = ("password_hash", "token_hash", "NEVER-SHOW-THIS-HASH", "stored_file_data", "text_content")
LONG_DESCRIPTION = "Checks invoices. " * 200  # 3,400 characters


@dataclass
class World:
    mandate_id: str
    e1: str
    e2: str
    workspace: str
    other_mandate_instance: str
    e1_workflows: set[str]
    e2_workflows: set[str]
    alice_runs: set[str]
    olga_runs: set[str]
    token_hash: str


def _role(session, label, mandate_id, instance_id, rules) -> None:
    role = Role(role_label=label, mandate_id=mandate_id, feature_instance_id=instance_id,
                feature_code=EDITOR if instance_id else None)
    session.add(role)
    session.flush()
    for context, item, view, read in rules:
        session.add(AccessRule(role_id=role.id, context=context, item=item, view=view, read=read))
    session.flush()


def _run(session, workflow: Workflow, user: User, status: str, started: datetime, **extra) -> WorkflowRun:
    version = service.list_versions(session, workflow)[0]
    run = WorkflowRun(workflow_id=workflow.id, version_id=version.id, mandate_id=workflow.mandate_id,
                      feature_instance_id=workflow.feature_instance_id, status=status, started_at=started,
                      sys_created_by=user.id, **extra)
    session.add(run)
    session.flush()
    return run


@pytest.fixture
def world(app_config) -> World:
    with session_scope() as session:
        mandate = create_mandate(session, "Data-Corp")
        e1 = create_feature_instance(session, mandate, EDITOR, "Editor one")
        e2 = create_feature_instance(session, mandate, EDITOR, "Editor two")
        workspace = create_feature_instance(session, mandate, "workspace", "Data workspace")
        elsewhere = create_feature_instance(session, create_mandate(session, "Other-Corp"), EDITOR, "Foreign")
        alice = User(username="alice", password_hash=PASSWORD_HASH)
        olga = User(username="olga")
        otto = User(username="otto")
        session.add_all([alice, olga, otto])
        session.flush()
        for user in (alice, olga, otto):
            grant_mandate_roles(session, user, mandate, ["user"])
        grant_instance_roles(session, alice, e1, [f"{EDITOR}-user"])
        grant_instance_roles(session, alice, e2, [f"{EDITOR}-user"])
        grant_instance_roles(session, alice, workspace, ["workspace-user"])
        _role(session, "own-reader", mandate.id, e1.id, [
            (UI, f"ui.feature.{EDITOR}.*", True, "none"),
            (RESOURCE, "resource.toolbox.*", True, "none"),
            (DATA, f"data.feature.{EDITOR}.*", False, "own"),
            (DATA, f"data.feature.{EDITOR}.workflow_version", False, "none"),
        ])
        grant_instance_roles(session, olga, e1, ["own-reader"])
        _role(session, "toolbox-user", mandate.id, None, [(RESOURCE, "resource.toolbox.*", True, "none")])
        grant_mandate_roles(session, otto, mandate, ["toolbox-user"])

        invoice = service.create_workflow(session, alice, e1, "Invoice approval", LONG_DESCRIPTION)
        service.publish(session, alice, invoice)
        service.save_draft(session, alice, invoice, service.current_graph(session, invoice))
        onboarding = service.create_workflow(session, olga, e1, "Onboarding 100% done", "New staff")
        e1_workflows = {invoice.id, onboarding.id}
        for number in range(10):
            e1_workflows.add(service.create_workflow(session, alice, e1, f"Batch {number:02d}").id)
        secret = service.create_workflow(session, alice, e2, "Secret plan of E2", "only in E2")
        foreign = service.create_workflow(session, alice, elsewhere, "Foreign mandate workflow")

        day = lambda month: datetime(2024, month, 1, 12, tzinfo=UTC)  # noqa: E731
        first = _run(session, invoice, alice, "completed", day(1), input={"customer": "ACME Corp"},
                     finished_at=day(1), output={"total": 1200})
        second = _run(session, invoice, alice, "failed", day(2), error="mail server down", finished_at=day(2))
        third = _run(session, onboarding, olga, "running", day(3), input={"person": "Nina"})
        fourth = _run(session, onboarding, olga, "paused", day(4))
        _run(session, secret, alice, "failed", day(2), error="E2 failure")
        _run(session, foreign, alice, "failed", day(2))
        session.add_all([
            HumanTask(run_id=first.id, node_id="approve", mandate_id=mandate.id, feature_instance_id=e1.id,
                      title="Approve ACME invoice"),
            HumanTask(run_id=fourth.id, node_id="approve", mandate_id=mandate.id, feature_instance_id=e1.id,
                      title="Approve Nina's laptop"),
            HumanTask(run_id=second.id, node_id="review", mandate_id=mandate.id, feature_instance_id=e2.id,
                      title="E2 task"),
        ])
        files.write_text(files.FileScope(session, alice, mandate.id, workspace.id), "/notes/plan.md",
                         "The plan: file contents never show in feature data")
        token_row, _ = create_api_token(session, alice, "alice's token")
        session.flush()
        return World(mandate.id, e1.id, e2.id, workspace.id, elsewhere.id, e1_workflows, {secret.id},
                     {first.id, second.id}, {third.id, fourth.id}, token_row.token_hash)


def context_for(session, username: str, instance_id: str, mandate_id: str) -> ActionContext:
    user = session.exec(select(User).where(User.username == username)).one()
    return ActionContext(session, user, mandate_id, instance_id)


def strict_call(context: ActionContext, action_id: str, **given):
    """Call like a model in strict mode: every parameter present, null when not given."""
    names = strict_parameters(get_registry().get(action_id))["properties"]
    arguments = {name: given.get(name) for name in names}
    assert set(given) <= set(names), set(given) - set(names)
    return execute_tool_call(tool_name(action_id), json.dumps(arguments), context)


def ok(result):
    assert result.ok, result.error
    text = json.dumps(result.output)
    for word in SECRET_WORDS:
        assert word not in text, word
    return result.output


def query(context, **given):
    return strict_call(context, "featureData.queryTable", **given)


def names(output) -> set[str]:
    return {row["name"] for row in output["rows"]}


# --- listing and describing --------------------------------------------------------------------------


def test_the_toolbox_holds_three_read_only_strict_tools():
    box = get_registry().in_toolbox("featureData")
    assert {a.id for a in box} == {"featureData.listTables", "featureData.browseTable", "featureData.queryTable"}
    for found in box:
        assert found.capabilities == frozenset({"read"}) and found.agent_tool and not found.graph_node
        definition = to_tool_definition(found)["function"]
        assert definition["strict"] is True and definition["parameters"]["additionalProperties"] is False
    where = strict_parameters(get_registry().get("featureData.queryTable"))["properties"]["where"]
    ops = where["anyOf"][0]["items"]["properties"]["op"]["enum"]
    assert ops == ["=", "!=", "<", "<=", ">", ">=", "contains", "startsWith", "in", "isNull"]
    assert set(TOOL_NAMES) == {tool_name(a.id) for a in box}  # the names describe_tables tells the agent


def test_list_tables_shows_readable_tables_with_columns_and_visible_counts(world):
    with session_scope() as session:
        alice = ok(strict_call(context_for(session, "alice", world.e1, world.mandate_id), "featureData.listTables"))
        assert alice["featureCode"] == EDITOR and alice["instanceLabel"] == "Editor one"
        tables = {t["name"]: t for t in alice["tables"]}
        assert list(tables) == ["workflow", "workflow_version", "workflow_run", "human_task", "chat", "file"]
        assert tables["chat"]["rowCount"] == 0
        assert tables["workflow"]["rowCount"] == 12 and tables["workflow"]["access"] == "all"
        assert tables["workflow_run"]["rowCount"] == 4 and tables["human_task"]["rowCount"] == 2
        assert tables["workflow_version"]["rowCount"] == 13  # invoice has v1 published and v2 draft
        columns = {c["name"]: c for c in tables["workflow_run"]["columns"]}
        assert columns["status"]["type"] == "string" and "failed" in columns["status"]["description"]
        assert columns["started_at"]["type"] == "datetime" and columns["input"]["type"] == "json"
        assert "mandate_id" not in columns and "feature_instance_id" not in columns and "lock_version" not in columns

        olga = ok(execute_action("featureData.listTables", {}, context_for(session, "olga", world.e1,
                                                                                world.mandate_id)))
        tables = {t["name"]: t for t in olga["tables"]}
        assert list(tables) == ["workflow", "workflow_run", "human_task", "chat", "file"]  # workflow_version: read none
        assert {t["access"] for t in tables.values()} == {"own"}
        assert tables["workflow"]["rowCount"] == 1 and tables["workflow_run"]["rowCount"] == 2
        assert tables["human_task"]["rowCount"] == 1  # the task of her own run

        workspace = ok(strict_call(context_for(session, "alice", world.workspace, world.mandate_id),
                                   "featureData.listTables"))
        listed = {t["name"]: t for t in workspace["tables"]}
        assert "file" in listed and set(listed) <= {"chat", "file"}  # the Workspace's DATA_TABLES
        file_columns = [c["name"] for c in listed["file"]["columns"]]
        assert {"name", "mime_type", "size_bytes", "sha256"} <= set(file_columns)


def test_describe_tables_renders_the_readable_schema_for_a_system_prompt(world):
    with session_scope() as session:
        alice = session.exec(select(User).where(User.username == "alice")).one()
        text = describe_tables(session, alice, world.mandate_id, world.e1)
        assert 'Feature instance "Editor one"' in text and f"your own user id is {alice.id}" in text
        assert "featureData_browseTable" in text
        for heading in ("## workflow:", "## workflow_version:", "## workflow_run:", "## human_task:"):
            assert heading in text
        assert "- status (string): running, paused, completed, failed or cancelled" in text
        assert "(12 rows visible to you)" in text
        assert not any(word in text for word in SECRET_WORDS) and "mandate_id" not in text

        olga = session.exec(select(User).where(User.username == "olga")).one()
        text = describe_tables(session, olga, world.mandate_id, world.e1)
        assert "## workflow_version" not in text
        assert "(1 row visible to you; you may read only the rows you created)" in text

        otto = session.exec(select(User).where(User.username == "otto")).one()
        with pytest.raises(NotFound):
            describe_tables(session, otto, world.mandate_id, world.e1)
        with pytest.raises(NotFound):
            describe_tables(session, alice, world.mandate_id, world.other_mandate_instance)


# --- browsing ----------------------------------------------------------------------------------------


def test_browse_pages_through_all_rows_and_shortens_long_cells(world):
    with session_scope() as session:
        context = context_for(session, "alice", world.e1, world.mandate_id)
        seen, offset, pages = [], 0, 0
        while offset is not None:
            page = ok(strict_call(context, "featureData.browseTable", table="workflow", limit=5, offset=offset,
                                  orderBy="name"))
            assert page["total"] == 12 and len(page["rows"]) <= 5
            seen += [row["id"] for row in page["rows"]]
            offset, pages = page["nextOffset"], pages + 1
        assert pages == 3 and len(seen) == len(set(seen)) == 12 and set(seen) == world.e1_workflows

        first = ok(strict_call(context, "featureData.browseTable", table="workflow", orderBy="name"))
        invoice = next(row for row in first["rows"] if row["name"] == "Invoice approval")
        assert invoice["description"].startswith("Checks invoices.") and "[shortened: 3,400 characters" in \
            invoice["description"] and len(invoice["description"]) < 400
        assert "shortened" in first["note"]
        assert isinstance(invoice["execution_logs"], list | str) and invoice["sys_created_at"].endswith("+00:00")
        wider = ok(strict_call(context, "featureData.browseTable", table="workflow", orderBy="name", limit=1,
                               maxCellChars=4000))
        assert wider["rows"][0]["name"] == "Batch 00"
        desc = ok(strict_call(context, "featureData.browseTable", table="workflow", orderBy="name",
                              descending=True, limit=1))
        assert desc["rows"][0]["name"] == "Onboarding 100% done" and desc["nextOffset"] == 1

        versions = ok(strict_call(context, "featureData.browseTable", table="workflow_version", limit=100))
        assert versions["total"] == 13 and {r["workflow_id"] for r in versions["rows"]} == world.e1_workflows
        assert {r["status"] for r in versions["rows"]} == {"draft", "published"}
        past_end = ok(strict_call(context, "featureData.browseTable", table="workflow", offset=50))
        assert past_end["rows"] == [] and past_end["nextOffset"] is None and past_end["total"] == 12


# --- querying ----------------------------------------------------------------------------------------


def test_every_filter_operator(world):
    with session_scope() as session:
        context = context_for(session, "alice", world.e1, world.mandate_id)

        def run_ids(*where, **more):
            out = ok(query(context, table="workflow_run", where=list(where), **more))
            return {row["status"] for row in out["rows"]}

        assert run_ids({"column": "status", "op": "=", "value": "failed"}) == {"failed"}
        assert run_ids({"column": "status", "op": "!=", "value": "failed"}) == {"completed", "running", "paused"}
        assert run_ids({"column": "started_at", "op": "<", "value": "2024-02-01T12:00:00Z"}) == {"completed"}
        assert run_ids({"column": "started_at", "op": "<=", "value": "2024-02-01T12:00:00+00:00"}) == {
            "completed", "failed"}
        assert run_ids({"column": "started_at", "op": ">", "value": "2024-03-01T12:00:00"}) == {"paused"}
        assert run_ids({"column": "started_at", "op": ">=", "value": "2024-03-01"}) == {"running", "paused"}
        assert run_ids({"column": "error", "op": "contains", "value": "SERVER"}) == {"failed"}
        assert run_ids({"column": "input", "op": "contains", "value": "acme"}) == {"completed"}  # json cell
        assert run_ids({"column": "status", "op": "startsWith", "value": "PA"}) == {"paused"}
        assert run_ids({"column": "status", "op": "in", "value": ["running", "paused", "nope"]}) == {
            "running", "paused"}
        assert run_ids({"column": "finished_at", "op": "isNull", "value": True}) == {"running", "paused"}
        assert run_ids({"column": "finished_at", "op": "isNull", "value": False}) == {"completed", "failed"}
        assert run_ids({"column": "finished_at", "op": "isNull", "value": None}) == {"running", "paused"}
        # Conditions combine with AND; camelCase column names are accepted too.
        assert run_ids({"column": "status", "op": "in", "value": ["failed", "completed"]},
                       {"column": "finishedAt", "op": ">", "value": "2024-01-15"}) == {"failed"}

        versions = ok(query(context, table="workflow_version", columns=["version_number", "status"],
                            where=[{"column": "version_number", "op": ">=", "value": 2}]))
        assert versions["rows"] == [{"version_number": 2, "status": "draft"}] and versions["total"] == 1
        assert versions["columns"] == ["version_number", "status"]
        active = ok(query(context, table="workflow", where=[{"column": "active", "op": "=", "value": False}],
                          limit=0))
        assert active["total"] == 12 and active["rows"] == [] and active["nextOffset"] is None

        workflows = ok(query(context, table="workflow", columns=["name"],
                             where=[{"column": "name", "op": "startsWith", "value": "inv"}]))
        assert workflows["rows"] == [{"name": "Invoice approval"}]
        # LIKE wildcards and quotes are literal text, never SQL.
        percent = ok(query(context, table="workflow", where=[{"column": "name", "op": "contains", "value": "%"}]))
        assert names(percent) == {"Onboarding 100% done"}
        underscore = ok(query(context, table="workflow", where=[{"column": "name", "op": "contains", "value": "_"}]))
        assert underscore["total"] == 0
        injection = ok(query(context, table="workflow",
                             where=[{"column": "name", "op": "=", "value": "x' OR '1'='1"}]))
        assert injection["total"] == 0
        paged = ok(query(context, table="workflow", columns=["name"], orderBy="name", limit=4, offset=4,
                         where=[{"column": "name", "op": "startsWith", "value": "Batch"}]))
        assert [r["name"] for r in paged["rows"]] == ["Batch 04", "Batch 05", "Batch 06", "Batch 07"]
        assert paged["total"] == 10 and paged["nextOffset"] == 8


def test_bad_tables_columns_operators_and_values_are_named(world):
    with session_scope() as session:
        context = context_for(session, "alice", world.e1, world.mandate_id)

        def error(**given):
            result = query(context, **given)
            assert not result.ok
            return result.error

        message = error(table="workflows")
        assert "table 'workflows' not found" in message and "workflow, workflow_version, workflow_run" in message
        message = error(table="workflow", where=[{"column": "owner", "op": "=", "value": "x"}])
        assert "where[0].column" in message and "unknown column 'owner'" in message and "columns: id, name" in message
        message = error(table="workflow", columns=["name", "colour"])
        assert "columns[1]" in message and "'colour'" in message and "description" in message
        message = error(table="workflow", orderBy="size")
        assert "orderBy" in message and "'size'" in message
        message = error(table="workflow", where=[{"column": "name", "op": "like", "value": "x"}])
        assert "where.0.op" in message and "'contains'" in message and "'isNull'" in message
        assert "unknown column 'mandate_id'" in error(table="workflow", columns=["mandate_id"])
        message = error(table="workflow_version", where=[{"column": "version_number", "op": "=", "value": "two"}])
        assert "where[0].value" in message and "version_number" in message and "integer" in message
        message = error(table="workflow_run", where=[{"column": "started_at", "op": ">", "value": "yesterday"}])
        assert "ISO 8601" in message and "started_at" in message
        assert "non-empty list" in error(table="workflow_run", where=[{"column": "status", "op": "in", "value": "x"}])
        assert "needs a value" in error(table="workflow_run", where=[{"column": "status", "op": "=", "value": None}])
        assert "only contains and isNull" in error(table="workflow_run",
                                                   where=[{"column": "input", "op": "=", "value": "x"}])
        assert "json column" in error(table="workflow_run", orderBy="context")
        assert "boolean" in error(table="workflow", where=[{"column": "active", "op": "<", "value": True}])
        limit = strict_call(context, "featureData.browseTable", table="workflow", limit=1000)
        assert not limit.ok and "limit" in limit.error


# --- rights and scope --------------------------------------------------------------------------------


def test_own_read_level_sees_only_rows_the_user_created(world):
    with session_scope() as session:
        context = context_for(session, "olga", world.e1, world.mandate_id)
        workflows = ok(strict_call(context, "featureData.browseTable", table="workflow"))
        assert names(workflows) == {"Onboarding 100% done"} and workflows["total"] == 1
        runs = ok(query(context, table="workflow_run", columns=["id"]))
        assert {r["id"] for r in runs["rows"]} == world.olga_runs
        failed = ok(query(context, table="workflow_run", where=[{"column": "status", "op": "=", "value": "failed"}]))
        assert failed["total"] == 0  # alice's failed run exists but is not hers
        by_id = ok(query(context, table="workflow_run",
                         where=[{"column": "id", "op": "in", "value": sorted(world.alice_runs)}]))
        assert by_id["total"] == 0
        tasks = ok(strict_call(context, "featureData.browseTable", table="human_task"))
        assert [t["title"] for t in tasks["rows"]] == ["Approve Nina's laptop"]
        # A table her roles do not let her read is answered like a table that does not exist.
        hidden = strict_call(context, "featureData.browseTable", table="workflow_version")
        missing = strict_call(context, "featureData.browseTable", table="no_such_table")
        assert not hidden.ok and not missing.ok
        assert hidden.error.replace("workflow_version", "X") == missing.error.replace("no_such_table", "X")
        assert "workflow_version" not in hidden.error.replace("'workflow_version'", "")


def test_a_user_without_access_to_the_instance_gets_not_found(world):
    with session_scope() as session:
        otto = context_for(session, "otto", world.e1, world.mandate_id)
        for action_id, given in (("featureData.listTables", {}), ("featureData.browseTable", {"table": "workflow"}),
                                 ("featureData.queryTable", {"table": "workflow"})):
            result = strict_call(otto, action_id, **given)
            assert not result.ok and result.error == f"feature instance {world.e1} not found", result.error
        ghost = strict_call(context_for(session, "otto", "0" * 32, world.mandate_id), "featureData.listTables")
        assert ghost.error == f"feature instance {'0' * 32} not found"
        # A context naming another mandate's instance: not found, even for a system administrator.
        admin = session.exec(select(User).where(User.is_sysadmin.is_(True))).first()
        cross = ActionContext(session, admin, world.mandate_id, world.other_mandate_instance)
        result = strict_call(cross, "featureData.browseTable", table="workflow")
        assert not result.ok and "not found" in result.error
        # The toolbox's RESOURCE right is still needed: a plain mandate user is refused before anything runs.
        viewer = User(username="vic")
        session.add(viewer)
        session.flush()
        refused = strict_call(ActionContext(session, viewer, world.mandate_id, world.e1), "featureData.listTables")
        assert not refused.ok and refused.error_kind == "forbidden"


def test_rows_of_another_instance_never_appear(world):
    with session_scope() as session:
        context = context_for(session, "alice", world.e1, world.mandate_id)
        everything = []
        for table in ("workflow", "workflow_version", "workflow_run", "human_task"):
            page = ok(strict_call(context, "featureData.browseTable", table=table, limit=100, maxCellChars=4000))
            everything.append(json.dumps(page))
        text = "\n".join(everything)
        assert "Secret plan of E2" not in text and "E2 failure" not in text and "E2 task" not in text
        assert "Foreign mandate workflow" not in text
        assert not any(workflow_id in text for workflow_id in world.e2_workflows)
        by_name = ok(query(context, table="workflow", where=[{"column": "name", "op": "contains", "value": "E2"}]))
        assert by_name["total"] == 0
        by_id = ok(query(context, table="workflow_version",
                         where=[{"column": "workflow_id", "op": "in", "value": sorted(world.e2_workflows)}]))
        assert by_id["total"] == 0
        # The same user in E2 sees E2's rows only.
        e2 = ok(strict_call(context_for(session, "alice", world.e2, world.mandate_id), "featureData.browseTable",
                            table="workflow"))
        assert names(e2) == {"Secret plan of E2"}


def test_secret_columns_never_appear(world):
    with session_scope() as session:
        context = context_for(session, "alice", world.workspace, world.mandate_id)
        listed = ok(strict_call(context, "featureData.listTables"))
        assert world.token_hash not in json.dumps(listed)
        stored = ok(strict_call(context, "featureData.browseTable", table="file", maxCellChars=4000))
        assert [row["name"] for row in stored["rows"]] == ["plan.md"]
        assert "file contents never show" not in json.dumps(stored)
        assert "content" not in stored["columns"]
        refused = query(context, table="file", columns=["content"])
        assert not refused.ok and "unknown column 'content'" in refused.error

    # The rules that keep secrets out apply to any table a feature might declare.
    users = DataTable("users", User, "accounts", instance_column=None)
    assert "password_hash" not in [c.name for c in users.columns()] and "username" in [c.name for c in users.columns()]
    from backend.db.models import AuthToken, OidcLogin, SsoExchange

    assert "token_hash" not in [c.name for c in DataTable("t", AuthToken, "").columns()]
    assert {c.name for c in DataTable("o", OidcLogin, "", owner_column=None).columns()} == {"created_at", "expires_at"}
    assert [c.name for c in DataTable("s", SsoExchange, "", owner_column=None).columns()] == [
        "user_id", "created_at", "expires_at"]
    assert [c.name for c in DataTable("d", StoredFileData, "", owner_column=None).columns()] == ["file_id"]
    assert StoredFile.__tablename__ == "stored_file"
