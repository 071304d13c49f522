"""Single sign-on in the browser, against the app's OpenID Connect provider on 127.0.0.1.

The provider (tests/oidc_provider.py, started with the app in conftest.py) signs in whoever its
`claims` describe, at once, without a login form; `deny` makes it refuse instead. The browser
goes login page → API /api/auth/oidc/login → provider /authorize → API callback → UI /sso?code=…,
which trades the one-time code for a login token and opens /workflows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import Page, Request, expect

from tests.e2e.conftest import ADMIN_PASSWORD, SSO_MANDATE, RunningApp
from tests.oidc_provider import Provider

pytestmark = pytest.mark.e2e

REDIRECTS = 30_000  # ms: a chain of full page loads through three servers


@pytest.fixture
def admin_api(running_app: RunningApp) -> Iterator[httpx.Client]:
    """The REST API with the bootstrap administrator's token."""
    with httpx.Client(base_url=running_app.api_url, timeout=15) as client:
        answer = client.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
        assert answer.status_code == 200, answer.text
        client.headers["Authorization"] = f"Bearer {answer.json()['token']}"
        yield client


def mandate_id(api: httpx.Client, name: str, create: bool = False) -> str | None:
    """The id of the mandate `name` (created first when asked to and missing)."""
    answer = api.get("/api/mandates")
    assert answer.status_code == 200, answer.text
    found = next((m["id"] for m in answer.json() if m["name"] == name), None)
    if found is None and create:
        answer = api.post("/api/mandates", json={"name": name})
        assert answer.status_code == 201, answer.text
        found = answer.json()["id"]
    return found


def members(api: httpx.Client, mandate: str) -> dict[str, dict]:
    answer = api.get(f"/api/mandates/{mandate}/users")
    assert answer.status_code == 200, answer.text
    return {m["username"]: m for m in answer.json()}


def record_page_loads(page: Page) -> list[str]:
    """The URLs of the main frame's document requests from now on, redirect hops included."""
    loads: list[str] = []

    def on_request(request: Request) -> None:
        if request.is_navigation_request() and request.frame == page.main_frame:
            loads.append(request.url)

    page.on("request", on_request)
    return loads


def where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def test_single_sign_on_creates_a_member_of_the_configured_mandate_and_opens_the_app(
    page: Page, running_app: RunningApp, oidc_provider: Provider, admin_api: httpx.Client
):
    sso_mandate = mandate_id(admin_api, SSO_MANDATE, create=True)
    assert "nora" not in members(admin_api, sso_mandate)
    oidc_provider.claims.update(sub="u-2002", email="nora.north@example.com", preferred_username="nora",
                                name="Nora North")

    page.goto("/login")
    button = page.locator("#sso-login")
    expect(button).to_be_visible()
    expect(button).to_have_text("Sign in with single sign-on")
    expect(page.locator("#sso-error")).to_have_count(0)
    loads = record_page_loads(page)
    button.click()

    expect(page).to_have_url(re.compile(r"/workflows$"), timeout=REDIRECTS)
    expect(page.locator("#current-user")).to_have_text("Nora North", timeout=REDIRECTS)

    # The hops: API start → provider → API callback → UI /sso with a one-time code (no token).
    assert [where(url) for url in loads[:4]] == [
        f"{running_app.api_url}/api/auth/oidc/login",
        f"{oidc_provider.issuer}/authorize",
        f"{running_app.api_url}/api/auth/oidc/callback",
        f"{running_app.ui_url}/sso",
    ], loads
    landing = parse_qs(urlsplit(loads[3]).query)
    assert list(landing) == ["code"], loads[3]
    assert not any("token" in url.lower() for url in loads), loads
    assert [call["method"] for call in oidc_provider.token_calls] == ["client_secret_basic"]

    # The new user is a member of the configured mandate with the configured role, nowhere else.
    nora = members(admin_api, sso_mandate)["nora"]
    assert (nora["email"], nora["displayName"], nora["roles"], nora["disabled"], nora["isSysadmin"]) == (
        "nora.north@example.com", "Nora North", ["user"], False, False)
    assert "nora" not in members(admin_api, mandate_id(admin_api, "Default"))

    # The sign-in lasts: a reload stays in the app as Nora.
    page.reload()
    expect(page).to_have_url(re.compile(r"/workflows$"))
    expect(page.locator("#current-user")).to_have_text("Nora North")

    # The one-time code is spent: opening the /sso link again only shows why it fails.
    page.goto(loads[3])
    expect(page.locator("#sso-error")).to_have_text(
        "Single sign-on failed: the sign-in code is invalid, expired or was already used; please sign in again.",
        timeout=REDIRECTS,
    )
    expect(page.locator("#sso-back")).to_be_visible()


def test_a_refusal_by_the_provider_brings_the_browser_back_to_login_with_the_reason(
    page: Page, running_app: RunningApp, oidc_provider: Provider
):
    oidc_provider.deny = True

    page.goto("/login")
    loads = record_page_loads(page)
    page.locator("#sso-login").click()

    expect(page).to_have_url(re.compile(r"/login\?sso_error="), timeout=REDIRECTS)
    expect(page.locator("#sso-error")).to_have_text(
        "the identity provider refused the sign-in (access_denied)", timeout=REDIRECTS
    )
    assert f"{oidc_provider.issuer}/authorize" in [where(url) for url in loads], loads
    assert oidc_provider.token_calls == []  # no code was issued, none redeemed

    # Nobody is signed in: the form is still there and the app stays closed.
    expect(page.locator("#login-username")).to_be_visible()
    expect(page.locator("#sso-login")).to_be_visible()
    page.goto("/workflows")
    expect(page).to_have_url(re.compile(r"/login$"))
