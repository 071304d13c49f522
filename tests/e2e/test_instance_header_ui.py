"""The current instance is visible and chosen deliberately (issue 16, item 6), in the browser.

The page header of Workflows, Editor and Workspace names the mandate and the feature instance
("Default › Graphical Editor") and switches them; a new session opens the instance used last (or
the Default mandate's), never the newly created one whose name sorts first; a workflow created
and a file uploaded go where the header says (checked over REST); the header stays whole on
screen with long names at 1366×768 and 1920×1080.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect
from sqlmodel import Session, select

from backend.auth import hash_password
from backend.bootstrap import DEFAULT_INSTANCES, DEFAULT_MANDATE
from backend.db.engine import make_engine
from backend.db.models import FeatureInstance, Mandate, User
from backend.tenancy import grant_instance_roles, grant_mandate_roles
from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_admin_ui import choose, sign_out
from tests.e2e.test_workflows_ui import sign_in

pytestmark = pytest.mark.e2e

GE, WS = "graphicalEditor", "workspace"
PASSWORD = "header-pass-42"
FIRST_VISIT = 90_000  # ms: the dev server compiles a page on its first visit
VIEWPORTS = ({"width": 1366, "height": 768}, {"width": 1920, "height": 1080})


@dataclass
class World:
    """A second mandate (its name sorts before "Default") with its own instances, and a user who
    may open those and the Default mandate's."""

    username: str
    display_name: str
    mandate: str
    editor: str  # label of the mandate's Graphical Editor instance
    files: str  # label of its Workspace instance
    ids: dict[str, str]  # "editor", "files", "default-editor", "default-files" → instance id
    admin: dict[str, str]  # the admin's bearer header


def admin_headers(running_app: RunningApp) -> dict[str, str]:
    token = httpx.post(f"{running_app.api_url}/api/auth/login",
                       json={"username": "admin", "password": ADMIN_PASSWORD}).json()["token"]
    return {"Authorization": f"Bearer {token}"}


@contextmanager
def app_database(running_app: RunningApp) -> Iterator[Session]:
    engine = make_engine(f"sqlite:///{running_app.log.parent / 'e2e.db'}")
    try:
        with Session(engine, expire_on_commit=False) as session:
            yield session
            session.commit()
    finally:
        engine.dispose()


def make_world(running_app: RunningApp, mandate: str, editor: str, files: str) -> World:
    """The admin creates `mandate` with the instances `editor` and `files` over REST; a new user
    gets roles in them and in the Default mandate's two instances."""
    api, headers = running_app.api_url, admin_headers(running_app)
    created = httpx.post(f"{api}/api/mandates", headers=headers, json={"name": mandate})
    assert created.status_code == 201, created.text
    ids = {}
    for key, feature, label in (("editor", GE, editor), ("files", WS, files)):
        instance = httpx.post(f"{api}/api/mandates/{created.json()['id']}/instances", headers=headers,
                              json={"featureCode": feature, "label": label})
        assert instance.status_code == 201, instance.text
        ids[key] = instance.json()["id"]
    username = f"ivy{uuid.uuid4().hex[:6]}"
    with app_database(running_app) as session:
        default = session.exec(select(Mandate).where(Mandate.name == DEFAULT_MANDATE)).one()
        labels = dict(DEFAULT_INSTANCES)
        for key, feature in (("default-editor", GE), ("default-files", WS)):
            ids[key] = session.exec(select(FeatureInstance.id).where(
                FeatureInstance.mandate_id == default.id, FeatureInstance.feature_code == feature,
                FeatureInstance.label == labels[feature])).one()
        user = User(username=username, display_name=f"Ivy {username[3:]}", password_hash=hash_password(PASSWORD))
        session.add(user)
        session.flush()
        for mandate_id in (default.id, created.json()["id"]):
            grant_mandate_roles(session, user, session.get(Mandate, mandate_id), ["user"])
        for key in ("editor", "default-editor"):
            grant_instance_roles(session, user, session.get(FeatureInstance, ids[key]), [f"{GE}-user"])
        for key in ("files", "default-files"):
            grant_instance_roles(session, user, session.get(FeatureInstance, ids[key]), [f"{WS}-user"])
    return World(username, user.display_name, mandate, editor, files, ids, headers)


@pytest.fixture
def world(running_app: RunningApp) -> World:
    tag = uuid.uuid4().hex[:6]
    return make_world(running_app, f"Aardvark {tag}", f"Aardvark Flows {tag}", f"Aardvark Files {tag}")


def sign_in_as(page: Page, world: World) -> None:
    sign_in(page, world.username, PASSWORD)
    expect(page.locator("#current-user")).to_have_text(world.display_name)


def expect_header(page: Page, mandate: str, instance: str) -> None:
    """The header names `mandate › instance` (the instance in the switcher). The first visit of a
    page compiles it in the dev server: that may take a while."""
    expect(page.locator("#current-mandate")).to_have_text(mandate, timeout=FIRST_VISIT)
    expect(page.locator("#instance-select")).to_have_text(instance)
    expect(page.locator("#instance-header")).to_have_attribute("aria-label", f"{mandate} › {instance}")


def names_in(running_app: RunningApp, world: World, instance_key: str, what: str) -> list[str]:
    """Names of the workflows (or files) instance `instance_key` holds, read over REST."""
    feature = GE if what == "workflows" else WS
    answer = httpx.get(f"{running_app.api_url}/api/{feature}/{world.ids[instance_key]}/{what}",
                       headers=world.admin, params={"recursive": "true"} if what == "files" else None)
    assert answer.status_code == 200, answer.text
    return [row["name"] for row in answer.json()]


def eventually(check: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    """Poll `check` until it holds (the UI's event commits after the click returns)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.2)


def test_a_new_session_opens_the_default_instance_and_a_new_workflow_lands_where_the_header_says(
        page: Page, running_app: RunningApp, world: World):
    sign_in_as(page, world)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    # The new mandate sorts first, but nothing was chosen yet: the Default mandate's instance opens.
    expect_header(page, DEFAULT_MANDATE, "Graphical Editor")

    # The switcher lists the instances grouped by mandate.
    page.locator("#instance-select").click()
    expect(page.locator(".instance-mandate-label")).to_have_text([world.mandate, DEFAULT_MANDATE])
    expect(page.locator(".instance-option")).to_have_text([world.editor, "Graphical Editor"])
    page.get_by_role("option", name=world.editor, exact=True).click()
    expect_header(page, world.mandate, world.editor)
    expect(page.locator("#empty-state")).to_be_visible()

    name = f"Where the header says {uuid.uuid4().hex[:6]}"
    page.locator("#new-workflow-name").fill(name)
    page.locator("#create-workflow").click()
    expect(page).to_have_url(re.compile(r"/(workflows|editor/\w+)$"), timeout=FIRST_VISIT)  # may open the editor
    eventually(lambda: name in names_in(running_app, world, "editor", "workflows"), f"{name} in {world.editor}")
    assert name not in names_in(running_app, world, "default-editor", "workflows")

    # A new session opens the instance used last.
    page.goto("/workflows")
    sign_out(page)
    sign_in_as(page, world)
    expect_header(page, world.mandate, world.editor)
    expect(page.locator(".workflow-name", has_text=name)).to_have_count(1)

    # The editor names the workflow's instance; switching there opens the Workflows page of the choice.
    page.locator(".workflow-name", has_text=name).click()
    expect(page).to_have_url(re.compile(r"/editor/\w+$"), timeout=FIRST_VISIT)
    editor_url = page.url
    expect_header(page, world.mandate, world.editor)
    choose(page, "instance-select", "Graphical Editor")
    expect(page).to_have_url(re.compile(r"/workflows$"), timeout=FIRST_VISIT)
    expect_header(page, DEFAULT_MANDATE, "Graphical Editor")
    expect(page.locator(".workflow-name", has_text=name)).to_have_count(0)

    # Opening a workflow of the other instance makes that one current again.
    page.goto(editor_url)
    expect_header(page, world.mandate, world.editor)
    page.locator("#nav-workflows").click()
    expect(page).to_have_url(re.compile(r"/workflows$"), timeout=FIRST_VISIT)
    expect_header(page, world.mandate, world.editor)
    expect(page.locator(".workflow-name", has_text=name)).to_have_count(1)


def test_a_workspace_upload_lands_in_the_instance_the_header_names(page: Page, running_app: RunningApp,
                                                                    world: World):
    sign_in_as(page, world)
    page.locator("#nav-workspace").click()
    expect(page).to_have_url(re.compile(r"/workspace$"), timeout=FIRST_VISIT)
    expect_header(page, DEFAULT_MANDATE, "Workspace")

    choose(page, "instance-select", world.files)
    expect_header(page, world.mandate, world.files)
    page.locator("#udb-tab-files").click()
    expect(page.locator("#current-folder")).to_have_text("/")
    name = f"header-{uuid.uuid4().hex[:6]}.txt"
    page.locator("#file-upload-area input[type=file]").set_input_files(
        files=[{"name": name, "mimeType": "text/plain", "buffer": b"Uploaded where the header says.\n"}])
    expect(page.locator("#files-notice")).to_contain_text(f"/{name}")
    eventually(lambda: name in names_in(running_app, world, "files", "files"), f"{name} in {world.files}")
    assert name not in names_in(running_app, world, "default-files", "files")

    # Back in the Default mandate's Workspace the file is not there.
    choose(page, "instance-select", "Workspace")
    expect_header(page, DEFAULT_MANDATE, "Workspace")
    page.locator("#udb-tab-files").click()
    expect(page.locator("#current-folder")).to_have_text("/")
    expect(page.locator(".file-name", has_text=name)).to_have_count(0)
    # The Workflows page keeps its own feature's choice.
    page.locator("#nav-workflows").click()
    expect_header(page, DEFAULT_MANDATE, "Graphical Editor")


def test_one_instance_is_named_without_a_switcher(page: Page, running_app: RunningApp):
    username = f"solo{uuid.uuid4().hex[:6]}"
    with app_database(running_app) as session:
        default = session.exec(select(Mandate).where(Mandate.name == DEFAULT_MANDATE)).one()
        editor = session.exec(select(FeatureInstance).where(
            FeatureInstance.mandate_id == default.id, FeatureInstance.label == dict(DEFAULT_INSTANCES)[GE])).one()
        user = User(username=username, display_name=username, password_hash=hash_password(PASSWORD))
        session.add(user)
        session.flush()
        grant_mandate_roles(session, user, default, ["viewer"])
        grant_instance_roles(session, user, editor, [f"{GE}-viewer"])
    sign_in(page, username, PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    expect(page.locator("#current-mandate")).to_have_text(DEFAULT_MANDATE)
    expect(page.locator("#instance-label")).to_have_text("Graphical Editor")
    expect(page.locator("#instance-select")).to_have_count(0)


def _within_viewport(page: Page, selector: str) -> None:
    """`selector` is whole on screen and takes a click (nothing covers it)."""
    size = page.viewport_size
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not rendered"
    assert box["x"] >= 0 and box["y"] >= 0, f"{selector} starts off screen: {box}"
    assert box["x"] + box["width"] <= size["width"] and box["y"] + box["height"] <= size["height"], (
        f"{selector} does not fit into {size}: {box}")
    page.locator(selector).click(trial=True)


def _check_header(page: Page, shots: Path, name: str) -> None:
    expect(page.locator("#instance-header")).to_be_visible()
    for selector in ("#page-title", "#instance-select", "#notifications-bell", "#logout-button"):
        _within_viewport(page, selector)
    header = page.locator("#instance-header").bounding_box()
    bell = page.locator("#notifications-bell").bounding_box()
    assert header["x"] + header["width"] <= bell["x"], "the instance overlaps the bell"
    # The page's own width: no part of the top bar pushes the page sideways.
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    page.screenshot(path=str(shots / f"{name}.png"))


def test_the_header_stays_whole_with_long_names_at_1366_and_1920(page: Page, running_app: RunningApp,
                                                                  tmp_path: Path):
    tag = uuid.uuid4().hex[:4]
    mandate = f"Genossenschaft für erneuerbare Energien und nachhaltige Mobilität Graubünden {tag}"
    editor = f"Kreditorenbuchhaltung Freigaben und Rechnungseingang Ostschweiz und Fürstentum {tag}"
    files = f"Dokumentenablage Verwaltungsrat, Geschäftsleitung und Revisionsstelle {tag}"
    world = make_world(running_app, mandate, editor, files)
    sign_in_as(page, world)
    choose(page, "instance-select", editor)
    expect_header(page, mandate, editor)
    workflow = httpx.post(f"{running_app.api_url}/api/graphicalEditor/{world.ids['editor']}/workflows",
                          headers=world.admin, json={"name": f"Long names {tag}"})
    assert workflow.status_code == 201, workflow.text
    page.goto("/workspace")
    choose(page, "instance-select", files)

    for viewport in VIEWPORTS:
        page.set_viewport_size(viewport)
        width = viewport["width"]
        page.goto("/workflows")
        expect_header(page, mandate, editor)
        _check_header(page, tmp_path, f"workflows-{width}")
        page.goto(f"/editor/{workflow.json()['id']}")
        expect_header(page, mandate, editor)
        _check_header(page, tmp_path, f"editor-{width}")
        page.goto("/workspace")
        expect_header(page, mandate, files)
        _check_header(page, tmp_path, f"workspace-{width}")
        # The full names are there for whoever hovers.
        expect(page.locator("#current-mandate")).to_have_attribute("title", mandate)
        expect(page.locator("#instance-select")).to_have_attribute("title", f"{mandate} › {files}")

    page.locator("#notifications-bell").click()
    expect(page).to_have_url(re.compile(r"/notifications$"), timeout=FIRST_VISIT)
    page.goto("/workflows")
    expect_header(page, mandate, editor)
    page.locator("#logout-button").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    print(f"header screenshots: {tmp_path}")
