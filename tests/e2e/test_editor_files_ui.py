"""The Editor's Files tab (spec "UDB in the editor: pick files or sources into node parameters"):
a file uploaded there lands in the Graphical Editor instance's own file store (the one its runs'
file actions use), is previewed, and is picked into the selected node's `path` parameter, which
the field shows and the draft stores; undo takes it out again.
"""

from __future__ import annotations

import uuid

import httpx
from playwright.sync_api import Page, expect
from sqlmodel import Session
from sqlmodel import select as sql_select

from backend.db.engine import make_engine
from backend.db.models import User
from backend.files import service
from backend.files.service import FileScope
from backend.rbac.access import AccessContext
from tests.ai_server import tiny_png
from tests.e2e.conftest import RunningApp
from tests.e2e.test_editor_ui import api, new_workflow, open_editor, saved, select
from tests.e2e.test_workspace_files_ui import file_item, upload

pytestmark = __import__("pytest").mark.e2e


def stored_graph(running_app: RunningApp, workflow_id: str) -> dict:
    headers, instance = api(running_app)
    answer = httpx.get(f"{running_app.api_url}/api/graphicalEditor/{instance}/workflows/{workflow_id}",
                       headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()["graph"]


def parameters_of(graph: dict, node_id: str) -> dict:
    return next(n for n in graph["nodes"] if n["id"] == node_id).get("parameters") or {}


def editor_store_has(running_app: RunningApp, instance_id: str, path: str) -> bool:
    """Whether the Graphical Editor instance's own file store holds `path` (as the admin sees it)."""
    engine = make_engine(f"sqlite:///{running_app.log.parent / 'e2e.db'}")
    try:
        with Session(engine) as session:
            admin = session.exec(sql_select(User).where(User.username == "admin")).one()
            access = AccessContext(session, admin)
            instance = access.require_instance(instance_id)
            scope = FileScope(session, admin, instance.mandate_id, instance.id, access)
            return any(f.path == path for f in service.list_files(scope, "/"))
    finally:
        engine.dispose()


def test_a_file_uploaded_in_the_editor_is_picked_into_a_nodes_path(page: Page, running_app: RunningApp):
    tag = uuid.uuid4().hex[:6]
    image = f"receipt-{tag}.png"
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}},
                       {"id": "look", "type": "ai.describeImage", "parameters": {"prompt": "What is the total?"},
                        "position": {"x": 300, "y": 0}}],
             "edges": [{"source": "start", "target": "look"}]}
    workflow_id, _name = new_workflow(running_app, "Files picked", graph)
    open_editor(page, workflow_id)

    # Upload in the Files tab: it lands in this instance's store, and previews.
    page.locator("#tab-files").click()
    expect(page.locator("#current-folder")).to_have_text("/")
    upload(page, image, "image/png", tiny_png())
    expect(page.locator("#files-notice")).to_contain_text(f"/{image}")
    row = file_item(page, image)
    expect(row).to_have_count(1)
    expect(row.locator(".file-attach")).to_have_count(0)  # attaching is the Workspace's
    expect(row.locator(".use-file")).to_have_count(0)  # no node selected: nothing to pick into
    _headers, instance = api(running_app)
    assert editor_store_has(running_app, instance, f"/{image}")
    row.locator(".file-name").click()
    expect(page.locator("#file-preview-image")).to_be_visible()
    page.locator("#file-preview-close").click()
    expect(page.locator("#file-preview")).to_have_count(0)

    # Select the node, pick the file into its path.
    select(page, "look")
    page.locator("#tab-files").click()
    row.locator(".use-file").click()
    expect(page.locator("#use-file-imageBase64")).to_have_count(0)  # only the fields taking a path
    page.locator("#use-file-path").click()
    expect(page.locator("#files-notice")).to_contain_text(f"/{image} is now the node's path")
    expect(saved(page)).to_have_attribute("data-state", "saved")
    page.locator("#tab-parameters").click()
    expect(page.locator("#param-path")).to_have_value(f"/{image}")
    stored = parameters_of(stored_graph(running_app, workflow_id), "look")
    assert stored["path"] == f"/{image}"
    assert stored["prompt"] == "What is the total?"

    # Undoable like any edit.
    page.locator("#undo").click()
    expect(saved(page)).to_have_attribute("data-state", "saved")
    expect(page.locator("#param-path")).to_have_value("")
    assert "path" not in parameters_of(stored_graph(running_app, workflow_id), "look")
