"""Login throttling counts per (username, client address) and per client address (issue 15).

Strangers guessing wrong passwords from one address must not lock the account for its owner
at another address; an address guessing many usernames is throttled as a whole; unknown users
answer exactly like wrong passwords.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from backend.api.app import create_api
from backend.auth import ADDRESS_FREE_FAILURES, THROTTLE_FREE_FAILURES, client_key, hash_password
from backend.db import session_scope
from backend.db.models import User

PASSWORD = "alice-right-password"
ADDRESS_A = "10.0.0.5"
ADDRESS_B = "10.0.0.6"


@pytest.fixture
def clients(app_config: str) -> Iterator[dict[str, TestClient]]:
    """REST clients of the same app seen from different addresses, and the user alice."""
    with session_scope() as session:
        session.add(User(username="alice", password_hash=hash_password(PASSWORD)))
    app = create_api()
    addresses = {"A": ADDRESS_A, "B": ADDRESS_B, "C": "10.0.0.7", "D": "2001:db8::1", "E": "2001:db8::2"}
    opened = {name: TestClient(app, client=(host, 5000)) for name, host in addresses.items()}
    try:
        yield opened
    finally:
        for client in opened.values():
            client.close()


def _login(client: TestClient, username: str, password: str):
    return client.post("/api/auth/login", json={"username": username, "password": password})


def test_guesses_from_one_address_do_not_lock_the_owner_out_elsewhere(clients):
    answers = [_login(clients["A"], "alice", f"guess-{n}").status_code for n in range(20)]
    assert answers == [401] * THROTTLE_FREE_FAILURES + [429] * (20 - THROTTLE_FREE_FAILURES)

    throttled = _login(clients["A"], "alice", PASSWORD)
    assert throttled.status_code == 429
    assert int(throttled.headers["Retry-After"]) > 0
    assert "Too many failed sign-in attempts" in throttled.json()["detail"]

    signed_in = _login(clients["B"], "alice", PASSWORD)
    assert signed_in.status_code == 200, signed_in.text
    me = clients["B"].get("/api/me", headers={"Authorization": f"Bearer {signed_in.json()['token']}"})
    assert me.json()["username"] == "alice"


def test_an_address_guessing_many_usernames_is_throttled_as_a_whole(clients):
    for n in range(ADDRESS_FREE_FAILURES):
        assert _login(clients["C"], f"user-{n}", "guess").status_code == 401, n
    refused = _login(clients["C"], "alice", PASSWORD)
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert _login(clients["B"], "alice", PASSWORD).status_code == 200


def test_unknown_users_answer_like_wrong_passwords(clients):
    def answers(username: str) -> list[tuple[int, str]]:
        results = []
        for n in range(THROTTLE_FREE_FAILURES + 1):
            response = _login(clients["A"], username, f"guess-{n}")
            results.append((response.status_code, response.json()["detail"]))
        return results

    wrong, unknown = answers("alice"), answers("ghost")
    assert [status for status, _ in wrong] == [401] * THROTTLE_FREE_FAILURES + [429]
    assert [status for status, _ in unknown] == [status for status, _ in wrong]
    assert [detail for _, detail in unknown[:-1]] == [detail for _, detail in wrong[:-1]]


def test_a_successful_login_clears_its_own_counter_only(clients):
    for n in range(THROTTLE_FREE_FAILURES - 1):
        assert _login(clients["A"], "alice", f"guess-{n}").status_code == 401
    assert _login(clients["A"], "alice", PASSWORD).status_code == 200
    for n in range(THROTTLE_FREE_FAILURES):
        assert _login(clients["A"], "alice", f"again-{n}").status_code == 401, n
    assert _login(clients["A"], "alice", PASSWORD).status_code == 429


def test_ipv6_addresses_of_one_network_share_their_counter(clients):
    for n in range(THROTTLE_FREE_FAILURES):
        assert _login(clients["D"], "alice", f"guess-{n}").status_code == 401
    assert _login(clients["E"], "alice", PASSWORD).status_code == 429
    assert _login(clients["A"], "alice", PASSWORD).status_code == 200


@pytest.mark.parametrize(("address", "key"), [
    ("10.0.0.5", "10.0.0.5"),
    ("::ffff:10.0.0.5", "10.0.0.5"),
    ("2001:db8::1", "2001:db8::/64"),
    ("2001:db8:0:0:ffff::9", "2001:db8::/64"),
    ("2001:db8:0:1::1", "2001:db8:0:1::/64"),
    ("testclient", "testclient"),
    ("", "unknown"),
    (None, "unknown"),
])
def test_client_keys(address, key):
    assert client_key(address) == key


def _browser(client_ip: str):
    """The sign-in state of a browser connected from `client_ip` (as Reflex fills it in)."""
    from reflex.istate.data import SessionData

    from state.auth import AuthState

    root = AuthState.get_root_state()(_reflex_internal_init=True)
    root.rx_router_session = SessionData(client_ip=client_ip)
    return root.get_substate(AuthState.get_full_name().split(".")[1:])


def _sign_in(browser, password: str) -> str:
    """Submit the login form as `alice`; the error shown, or "" when signed in."""
    browser.login({"username": "alice", "password": password})
    return browser.login_error if not browser.token else ""


def test_the_login_page_counts_per_browser_address(clients):
    guesser, owner = _browser("10.0.0.9"), _browser("10.0.0.10")
    errors = [_sign_in(guesser, f"guess-{n}") for n in range(THROTTLE_FREE_FAILURES)]
    assert errors == ["Unknown user or wrong password."] * THROTTLE_FREE_FAILURES
    assert _sign_in(guesser, PASSWORD).startswith("Too many failed sign-in attempts")
    assert _sign_in(owner, PASSWORD) == "" and owner.username == "alice"
    assert _login(clients["A"], "alice", PASSWORD).status_code == 200


def test_an_unknown_user_costs_the_same_argon2_work_as_a_known_one():
    from argon2 import extract_parameters

    from backend import auth

    # An unknown user is verified against this stand-in hash: same algorithm, memory, time, lanes.
    assert extract_parameters(auth._DUMMY_HASH) == extract_parameters(hash_password("any password"))
