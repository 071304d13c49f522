"""The trustee toolbox through the action executor (as a workflow in a Graphical Editor calls it), and the
Workspace agent answering from Trustee data through its Feature Data Agent (queryFeatureInstance)."""

from __future__ import annotations

import json
from datetime import date

import pytest
from sqlmodel import select

from backend.actions import ActionContext, execute_action
from backend.db import session_scope
from backend.db.models import FeatureInstance, Mandate, User
from backend.features.trustee.models import TrusteePosition, TrusteeReceipt
from backend.files import service as files
from backend.tenancy import grant_instance_roles
from tests.integration.test_agent import call, of, stream, tool_results
from tests.integration.trustee_support import PASSWORD, SBB, TrusteeWorld, extraction, make_world, receipt_pdf

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def world(api) -> TrusteeWorld:
    return make_world()


def run(action_id: str, params: dict, instance_id: str, username: str = "admin"):
    with session_scope() as session:
        user = session.exec(select(User).where(User.username == username)).one()
        instance = session.get(FeatureInstance, instance_id)
        return execute_action(action_id, params, ActionContext(session, user, instance.mandate_id, instance.id))


def editor_file(world: TrusteeWorld, path: str, data: bytes, instance_id: str | None = None) -> str:
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        files.store_file(files.FileScope(session, admin, world.mandate_id, instance_id or world.editor_id), path, data,
                         "application/pdf")
    return path


def test_a_workflow_step_extracts_books_and_exports_a_mail_attachment(world, ai_server):
    path = editor_file(world, "/mail/2025-08-12/sbb.pdf", SBB)
    ai_server.reply_json(extraction())
    extracted = run("trustee.extract", {"files": [path], "trusteeInstanceId": world.instance_id}, world.editor_id)
    assert extracted.ok, extracted.error
    receipt = extracted.output["receipt"]
    assert (receipt["supplier"], receipt["total"], receipt["extraction_status"], receipt["file_name"]) == (
        "SBB", 108.1, "done", "sbb.pdf")
    assert "Billett" in receipt["text"] and receipt["confidence"]["supplier"] == 0.98

    ai_server.reply_json({"account": "6640", "reason": "train ticket"})
    proposed = run("trustee.process", {"receiptId": receipt["id"], "trusteeInstanceId": world.instance_id},
                   world.editor_id)
    assert proposed.ok, proposed.error
    assert [(p["debit_account"], p["amount"], p["status"]) for p in proposed.output["positions"]] == [
        ("6640", 100.0, "proposed"), ("1170", 8.1, "proposed")]
    assert proposed.output["booked"] is False

    booked = run("trustee.process", {"receiptId": receipt["id"], "trusteeInstanceId": world.instance_id,
                                     "book": True}, world.editor_id)
    assert booked.ok, booked.error
    assert booked.output["booked"] is True and booked.output["receipt"]["checked_by"] == "System administrator"
    assert {p["status"] for p in booked.output["positions"]} == {"booked"}

    exported = run("trustee.syncAccounting", {"trusteeInstanceId": world.instance_id, "exportFormat": "csv"},
                   world.editor_id)
    assert exported.ok, exported.error
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        _, data = files.read_bytes(files.FileScope(session, admin, world.mandate_id, world.editor_id),
                                   exported.output["exportPath"])
    assert "6640;2000;100.00" in data.decode("utf-8-sig")


def test_the_tools_refuse_foreign_instances_closed_periods_and_missing_instances(world, ai_server):
    foreign = run("trustee.extract", {"files": ["/x.pdf"], "trusteeInstanceId": world.foreign_instance_id},
                  world.editor_id)  # the admin may open it (system administrator), but not from this mandate
    assert (foreign.ok, foreign.error_kind) == (False, "not_found")
    # Without trusteeInstanceId the mandate's only Trustee is used (the foreign one is in another mandate).
    unnamed = run("trustee.extract", {"files": ["/x.pdf"]}, world.editor_id)
    assert (unnamed.ok, unnamed.error) == (False, "file /x.pdf not found")
    with session_scope() as session:
        from backend.tenancy import create_feature_instance

        create_feature_instance(session, session.get(Mandate, world.mandate_id), "trustee", "Second Trustee")
    unnamed = run("trustee.extract", {"files": ["/x.pdf"]}, world.editor_id)
    assert not unnamed.ok and "trusteeInstanceId" in unnamed.error and "2 Trustee instances" in unnamed.error
    missing = run("trustee.extract", {"files": ["/mail/none.pdf"], "trusteeInstanceId": world.instance_id},
                  world.editor_id)
    assert (missing.ok, missing.error_kind) == (False, "not_found")
    ai_server.reply_json(extraction(day="2025-03-31"))
    path = editor_file(world, "/inbox/old.pdf", receipt_pdf("Old receipt"), world.instance_id)
    old = run("trustee.extract", {"files": [path]}, world.instance_id)  # run in the Trustee itself: its default
    assert old.ok, old.error
    with session_scope() as session:
        instance = session.get(FeatureInstance, world.instance_id)
        instance.settings = {"closedUntil": "2025-06-30"}
        session.add(instance)
    refused = run("trustee.process", {"receiptId": old.output["receipt"]["id"], "book": True}, world.instance_id)
    assert not refused.ok and "period up to 2025-06-30 is closed" in refused.error


def _booked(session, world: TrusteeWorld, admin: User, day: date, account: str, amount: float, text: str) -> None:
    receipt = TrusteeReceipt(mandate_id=world.mandate_id, feature_instance_id=world.instance_id, supplier=text,
                             receipt_date=day, total=amount, status="booked", sys_created_by=admin.id)
    session.add(receipt)
    session.flush()
    session.add(TrusteePosition(mandate_id=world.mandate_id, feature_instance_id=world.instance_id,
                                receipt_id=receipt.id, booking_date=day, debit_account=account, credit_account="2000",
                                amount=amount, text=text, status="booked", source="rule", sys_created_by=admin.id))


def test_the_workspace_agent_answers_travel_spending_from_trustee_data(api, world, ai_server):
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        _booked(session, world, admin, date(2025, 7, 3), "6640", 120.5, "SBB Zurich - Geneva")
        _booked(session, world, admin, date(2025, 9, 28), "6640", 79.5, "Hotel Bern")
        _booked(session, world, admin, date(2025, 6, 30), "6640", 500.0, "Flight in Q2")
        _booked(session, world, admin, date(2025, 8, 1), "6570", 60.0, "Software licence")
    question = "What did we spend on travel (account 6640) from 2025-07-01 to 2025-09-30?"
    ai_server.reply(None, tool_calls=[call("queryFeatureInstance", {"featureCode": "trustee",
                                                                   "instanceId": world.instance_id,
                                                                   "question": question}, "q1")])
    ai_server.reply(None, tool_calls=[call("featureData_queryTable", {
        "table": "position", "columns": ["booking_date", "amount", "text"], "orderBy": None, "descending": None,
        "where": [{"column": "debit_account", "op": "=", "value": "6640"},
                  {"column": "booking_date", "op": ">=", "value": "2025-07-01"},
                  {"column": "booking_date", "op": "<=", "value": "2025-09-30"},
                  {"column": "status", "op": "in", "value": ["booked", "synced"]}],
        "limit": 50, "offset": None, "maxCellChars": None, "sum": ["amount"]}, "d1")])
    ai_server.reply("Travel (6640) in Q3 2025: CHF 200.00 in 2 bookings.")
    ai_server.reply("In Q3 you spent CHF 200.00 on travel.")

    events = stream(api, "What did we spend on travel in Q3?")

    assert of(events, "final")[0]["text"] == "In Q3 you spent CHF 200.00 on travel."
    main_first, child_first, child_second, main_second = ai_server.chat_requests
    assert "## position" in child_first.system_text and "Reisespesen" in child_first.system_text
    result = json.loads(tool_results(child_second)["d1"])
    assert result["sums"] == {"amount": 200.0} and result["total"] == 2
    assert sorted(r["text"] for r in result["rows"]) == ["Hotel Bern", "SBB Zurich - Geneva"]
    assert tool_results(main_second)["q1"] == "Travel (6640) in Q3 2025: CHF 200.00 in 2 bookings."
    run_id = events[0][1]["runId"]
    workspace = next(i for i in api.client.get("/api/me", headers=api.auth).json()["instances"]
                     if i["featureCode"] == "workspace")["id"]
    (sub,) = api.client.get(f"/api/workspace/{workspace}/agent/runs/{run_id}", headers=api.auth).json()["subRuns"]
    assert sub["status"] == "completed" and sub["config"]["maxRounds"] == 5
    assert len([s for s in sub["steps"] if s["kind"] == "round"]) <= 5


def test_a_user_without_read_rights_on_the_trustee_gets_not_found(api, world, ai_server):
    with session_scope() as session:
        nora = session.exec(select(User).where(User.username == "nora")).one()
        mandate = session.get(Mandate, world.mandate_id)
        workspace = session.exec(select(FeatureInstance).where(FeatureInstance.mandate_id == mandate.id,
                                                               FeatureInstance.feature_code == "workspace")).one()
        grant_instance_roles(session, nora, workspace, ["workspace-user"])
    headers = {"Authorization": f"Bearer {api.login('nora', PASSWORD)}"}
    ai_server.reply(None, tool_calls=[call("queryFeatureInstance", {"featureCode": "trustee",
                                                                   "instanceId": world.instance_id,
                                                                   "question": "Travel in Q3?"}, "q1")])
    ai_server.reply("I cannot see that bookkeeping.")
    events = stream(api, "What did we spend on travel in Q3?", headers=headers)
    assert of(events, "subagent.refused")[0]["instanceId"] == world.instance_id
    assert "was not found" in json.loads(tool_results(ai_server.chat_requests[1])["q1"])["error"]
    assert len(ai_server.chat_requests) == 2
