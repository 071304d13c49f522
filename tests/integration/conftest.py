"""Fixtures for tests that use the configured application: settings, database, REST client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from backend.api.app import create_api
from backend.bootstrap import prepare
from backend.config import reset_settings_cache
from backend.db import reset_engine
from backend.engine.queue import stop_queue

ADMIN_PASSWORD = "admin-pass-123"


@dataclass
class Api:
    """A REST client for the app plus the admin's token and Graphical Editor instance."""

    client: TestClient
    token: str
    instance_id: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def login(self, username: str, password: str) -> str:
        response = self.client.post("/api/auth/login", json={"username": username, "password": password})
        assert response.status_code == 200, response.text
        return response.json()["token"]

    def base(self, instance_id: str | None = None) -> str:
        return f"/api/graphicalEditor/{instance_id or self.instance_id}"


@pytest.fixture
def app_config(db_url: str, tmp_path, monkeypatch) -> Iterator[str]:
    """Point the application's configuration at the test database and a temp data folder."""
    monkeypatch.setenv("POWERON_DB_URL", db_url)
    monkeypatch.setenv("POWERON_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("POWERON_ADMIN_USER", "admin")
    monkeypatch.setenv("POWERON_ADMIN_PASSWORD", ADMIN_PASSWORD)
    reset_settings_cache()
    reset_engine()
    prepare()
    yield db_url
    stop_queue()
    reset_engine()
    reset_settings_cache()


@pytest.fixture
def api(app_config: str) -> Iterator[Api]:
    """The REST API over the test database, with the bootstrap admin signed in."""
    with TestClient(create_api()) as client:
        token = client.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}).json()["token"]
        me = client.get("/api/me", headers={"Authorization": f"Bearer {token}"}).json()
        instance_id = next(i["id"] for i in me["instances"] if i["featureCode"] == "graphicalEditor")
        yield Api(client, token, instance_id)


@pytest.fixture
def action_context(app_config: str):
    """An ActionContext for the bootstrap admin in the default Workspace instance.

    The session stays open for the test; changes are committed when the test ends.
    """
    from sqlmodel import select

    from backend.actions import ActionContext
    from backend.db import session_scope
    from backend.db.models import FeatureInstance, User

    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")).one()
        yield ActionContext(session, admin, instance.mandate_id, instance.id)
