"""Shared pieces of the Chatbot tests: an instance made through REST, users with roles, the agent's stream."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from sqlmodel import select

from backend.auth import issue_token
from backend.db import session_scope
from backend.db.models import FeatureInstance, Mandate, User
from backend.tenancy import grant_instance_roles, grant_mandate_roles


def default_mandate_id(api) -> str:
    me = api.client.get("/api/me", headers=api.auth).json()
    return next(i["mandateId"] for i in me["instances"] if i["featureCode"] == "workspace")


def create_chatbot(api, label: str = "Shop bot", mandate_id: str | None = None, headers: dict | None = None) -> str:
    response = api.client.post(f"/api/mandates/{mandate_id or default_mandate_id(api)}/instances",
                               json={"featureCode": "chatbot", "label": label}, headers=headers or api.auth)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def add_user(username: str, mandate_id: str, mandate_roles: list[str], instance_id: str | None = None,
             instance_roles: tuple[str, ...] = ()) -> dict[str, str]:
    """A user with roles; their bearer header."""
    with session_scope() as session:
        user = User(username=username, display_name=username.title())
        session.add(user)
        session.flush()
        grant_mandate_roles(session, user, session.get(Mandate, mandate_id), mandate_roles)
        if instance_id:
            grant_instance_roles(session, user, session.get(FeatureInstance, instance_id), list(instance_roles))
        return {"Authorization": f"Bearer {issue_token(session, user).token}"}


def admin_id() -> str:
    with session_scope() as session:
        return session.exec(select(User).where(User.username == "admin")).one().id


def shop_database(path: Path) -> Path:
    """A SQLite file with `products` (the allowed table) and `salaries` (not allowed)."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE products (name TEXT, price REAL, stock INTEGER)")
        db.executemany("INSERT INTO products VALUES (?, ?, ?)",
                       [("Lamp", 42.5, 7), ("Chair", 120.0, 3), ("Desk", 380.0, 1)])
        db.execute("CREATE TABLE salaries (person TEXT, amount INTEGER)")
        db.execute("INSERT INTO salaries VALUES ('Anna', 9000)")
    return path


def sqlite_rows(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute(sql).fetchall()


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def stream(api, instance_id: str, prompt: str, headers: dict | None = None) -> list[tuple[str, dict[str, Any]]]:
    """POST the prompt to the chatbot's agent; the server-sent events as (type, data)."""
    events: list[tuple[str, dict[str, Any]]] = []
    with api.client.stream("POST", f"/api/chatbot/{instance_id}/agent", json={"prompt": prompt},
                           headers=headers or api.auth) as response:
        assert response.status_code == 200, response.read()
        kind = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line[len("event: "):]
            elif line.startswith("data: "):
                events.append((kind, json.loads(line[len("data: "):])))
    return events


def final_text(events) -> str:
    finals = [data["text"] for kind, data in events if kind == "final"]
    assert finals, f"no final answer: {events}"
    return finals[-1]


def tool_results(request) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request.messages if m.get("role") == "tool"}


def tool_names(request) -> list[str]:
    return [t["function"]["name"] for t in request.json.get("tools") or []]
