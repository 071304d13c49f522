"""Password hashing, token handling and the structural graph checks, without a server."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import Session, select

from backend import auth
from backend.db.engine import make_engine, migrate
from backend.db.models import AuthToken, User, utcnow
from backend.errors import InvalidInput
from backend.workflows.graph import default_graph, require_valid_structure, structural_errors


@pytest.fixture
def session(tmp_path):
    url = f"sqlite:///{tmp_path / 'auth.db'}"
    migrate(url)
    engine = make_engine(url)
    with Session(engine) as session:
        yield session
    engine.dispose()


def test_passwords_are_hashed_with_argon2():
    hashed = auth.hash_password("correct horse")
    assert hashed.startswith("$argon2id$") and "correct horse" not in hashed
    assert auth.verify_password(hashed, "correct horse")
    assert not auth.verify_password(hashed, "wrong")
    assert not auth.verify_password(None, "anything")
    assert not auth.verify_password("not-a-hash", "anything")


def test_tokens_are_stored_hashed_and_stop_working_when_expired_revoked_or_disabled(session):
    user = User(username="ada", password_hash=auth.hash_password("pw"))
    session.add(user)
    session.commit()
    issued = auth.login(session, "ada", "pw", client_address="10.0.0.1")
    session.commit()
    row = session.exec(select(AuthToken)).one()
    assert row.token_hash == auth.token_digest(issued.token) and issued.token not in row.token_hash
    assert auth.user_for_token(session, issued.token).id == user.id
    assert auth.user_for_token(session, issued.token + "x") is None
    assert auth.user_for_token(session, None) is None

    row.expires_at = utcnow() - timedelta(seconds=1)
    session.commit()
    assert auth.user_for_token(session, issued.token) is None

    second = auth.login(session, "ada", "pw", client_address="10.0.0.1")
    session.commit()
    auth.revoke_token(session, second.token)
    session.commit()
    assert auth.user_for_token(session, second.token) is None

    third = auth.login(session, "ada", "pw", client_address="10.0.0.1")
    user.disabled = True
    session.commit()
    assert auth.user_for_token(session, third.token) is None
    with pytest.raises(auth.LoginFailed, match="Unknown user or wrong password"):
        auth.login(session, "ada", "pw", client_address="10.0.0.1")


def test_a_successful_login_clears_earlier_failures(session):
    session.add(User(username="bo", password_hash=auth.hash_password("pw")))
    session.commit()
    for _ in range(auth.THROTTLE_FREE_FAILURES - 1):
        with pytest.raises(auth.LoginFailed):
            auth.login(session, "bo", "bad", client_address="10.0.0.1")
    auth.login(session, "bo", "pw", client_address="10.0.0.1")
    session.commit()
    for _ in range(auth.THROTTLE_FREE_FAILURES - 1):
        with pytest.raises(auth.LoginFailed) as failed:
            auth.login(session, "bo", "bad", client_address="10.0.0.1")
        assert not isinstance(failed.value, auth.LoginThrottled)


def test_default_graph_is_valid():
    assert structural_errors(default_graph()) == []


@pytest.mark.parametrize(
    ("graph", "field"),
    [
        (None, "graph"),
        ({"nodes": "x"}, "nodes"),
        ({"nodes": [], "edges": {}}, "edges"),
        ({"nodes": [5]}, "nodes[0]"),
        ({"nodes": [{"id": "", "type": "trigger.manual"}]}, "nodes[0].id"),
        ({"nodes": [{"id": "a", "type": "t", "parameters": []}]}, "nodes[0].parameters"),
        ({"nodes": [{"id": "a", "type": "t", "colour": 1}]}, "nodes[0]"),
        ({"nodes": [{"id": "a", "type": "t"}], "edges": [{"source": "a", "target": "a",
                                                          "sourceHandle": 3}]}, "edges[0].sourceHandle"),
        ({"nodes": [], "extra": 1}, "graph"),
    ],
)
def test_structural_errors_name_the_path(graph, field):
    with pytest.raises(InvalidInput) as raised:
        require_valid_structure(graph)
    assert field in [e.field for e in raised.value.errors]
    assert field in str(raised.value)


def test_missing_edges_default_to_empty():
    assert require_valid_structure({"nodes": []})["edges"] == []
