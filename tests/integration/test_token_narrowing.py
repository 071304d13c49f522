"""Narrowed API tokens on the REST API (issue 19): a token limited to one feature instance reaches
that instance's routes and /api/me only; a read-only token only reads."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def token(api, **narrowing) -> dict[str, str]:
    created = api.client.post("/api/me/tokens", json={"name": f"t{len(narrowing)}{sorted(narrowing)}", **narrowing},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    return {"Authorization": f"Bearer {created.json()['token']}"}


def workspace_id(api) -> str:
    me = api.client.get("/api/me", headers=api.auth).json()
    return next(i["id"] for i in me["instances"] if i["featureCode"] == "workspace")


def test_an_instance_token_reaches_its_instance_and_nothing_else(api):
    narrowed = token(api, instanceId=api.instance_id)
    assert api.client.get(f"{api.base()}/workflows", headers=narrowed).status_code == 200
    created = api.client.post(f"{api.base()}/workflows", json={"name": "Through a narrowed token"}, headers=narrowed)
    assert created.status_code == 201, created.text
    assert api.client.get("/api/me", headers=narrowed).status_code == 200

    other = api.client.get(f"/api/workspace/{workspace_id(api)}/files", headers=narrowed)
    assert other.status_code == 403 and api.instance_id in other.json()["detail"]
    assert api.client.get("/api/connections", headers=narrowed).status_code == 403
    mandate = api.client.post("/api/mandates", json={"name": "Not through this token"}, headers=narrowed)
    assert mandate.status_code == 403
    # The user's own (unnarrowed) token still reaches everything.
    assert api.client.get("/api/connections", headers=api.auth).status_code == 200


def test_a_read_only_token_reads_and_changes_nothing(api):
    reader = token(api, readOnly=True)
    assert api.client.get(f"{api.base()}/workflows", headers=reader).status_code == 200
    refused = api.client.post(f"{api.base()}/workflows", json={"name": "Not written"}, headers=reader)
    assert refused.status_code == 403 and "read-only" in refused.json()["detail"]
    names = [w["name"] for w in api.client.get(f"{api.base()}/workflows", headers=api.auth).json()]
    assert "Not written" not in names


def test_a_token_cannot_be_narrowed_to_an_instance_the_user_cannot_open(api):
    refused = api.client.post("/api/me/tokens", json={"name": "elsewhere", "instanceId": "nope"}, headers=api.auth)
    assert refused.status_code == 404
