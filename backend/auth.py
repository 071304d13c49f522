"""Local accounts: password hashing, login with throttling per client address, bearer tokens.

Passwords are hashed with Argon2id. Tokens are random strings handed out once; only their
SHA-256 digest is stored, so a database leak yields no usable token.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import secrets
from dataclasses import dataclass
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import case, delete
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, select

from backend.config import get_settings
from backend.db.models import AuthToken, LoginFailure, User, utcnow
from backend.errors import Conflict, FieldError, InvalidInput, NotFound
from backend.names import clean_name

LOGIN_FAILED_MESSAGE = "Unknown user or wrong password."
THROTTLE_FREE_FAILURES = 5  # per (username, client address)
ADDRESS_FREE_FAILURES = 30  # per client address, over all usernames
THROTTLE_MAX_SECONDS = 15 * 60
ADDRESS_ROW = ""  # LoginFailure.username of a client address's own counter
UNKNOWN_CLIENT = "unknown"
USERNAME_KEY_MAX = 150  # LoginFailure.username
CLIENT_KEY_MAX = 64  # LoginFailure.client_address
TOKEN_PREFIX = "pon_"

# POWERON_TEST_FAST_PASSWORD_HASHING=1 (set by the test suite only, tests/conftest.py): argon2id with
# the least time and memory, so thousands of test sign-ins do not spend minutes hashing; never in
# production. Hashes carry their parameters: either kind verifies under either setting.
FAST_HASHING_FOR_TESTS = os.environ.get("POWERON_TEST_FAST_PASSWORD_HASHING") == "1"
_hasher = (PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1) if FAST_HASHING_FOR_TESTS
           else PasswordHasher())
# Verifying against this keeps the time of "unknown user" equal to "wrong password".
_DUMMY_HASH = _hasher.hash(secrets.token_hex(16))
# Databases whose INSERT … ON CONFLICT counts a failure atomically (concurrent failures add up).
_UPSERTS = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}


class LoginFailed(Exception):
    """Credentials were refused; the message never tells which part was wrong."""


class LoginThrottled(LoginFailed):
    """Too many recent failures for this username from this address, or from this address."""

    def __init__(self, retry_after_seconds: int):
        self.retry_after_seconds = retry_after_seconds
        super().__init__(
            f"Too many failed sign-in attempts. Try again in {retry_after_seconds} seconds."
        )


@dataclass(frozen=True)
class IssuedToken:
    """A token as handed to the client once, with the user it belongs to."""

    token: str
    user_id: str


def hash_password(password: str) -> str:
    """Argon2id hash of `password`."""
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """True if `password` matches; also spends the time of a check when there is no hash."""
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password) and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False


def token_digest(token: str) -> str:
    """The stored form of a bearer token."""
    return hashlib.sha256(token.encode()).hexdigest()


def client_key(address: str | None) -> str:
    """The throttling key of a client address.

    IPv4 addresses (also IPv4-mapped IPv6) stand for themselves; IPv6 addresses count per /64
    network, the block one customer line usually gets, so rotating through it gains nothing.
    Anything else (a test client's name) is kept as given, cut to the column's length; no
    address at all is "unknown".

    Args:
        address: the peer address as the server saw it, or None.

    Returns:
        The value stored in `LoginFailure.client_address`.
    """
    address = (address or "").strip()
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:CLIENT_KEY_MAX] or UNKNOWN_CLIENT
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def _throttle_seconds_left(failure: LoginFailure | None, free_failures: int) -> int:
    if failure is None or failure.failures < free_failures:
        return 0
    lock = min(2 ** (failure.failures - free_failures) * 30, THROTTLE_MAX_SECONDS)
    left = (failure.last_failure_at + timedelta(seconds=lock) - utcnow()).total_seconds()
    return max(0, int(left) + (1 if left % 1 else 0))


def _seconds_to_wait(session: Session, username: str, client: str) -> int:
    """The longer of the waits of this (username, address) pair and of the address alone."""
    pair = session.get(LoginFailure, (username, client)) if username else None
    own = session.get(LoginFailure, (ADDRESS_ROW, client))
    return max(_throttle_seconds_left(pair, THROTTLE_FREE_FAILURES),
               _throttle_seconds_left(own, ADDRESS_FREE_FAILURES))


def _count_failure(session: Session, username: str, client: str) -> None:
    """Add one failure to the row (username, client), starting over after a quiet window."""
    now = utcnow()
    cutoff = now - timedelta(seconds=THROTTLE_MAX_SECONDS)
    dialect = session.get_bind().dialect.name
    if dialect not in _UPSERTS:  # other databases: read and write (a concurrent twin may conflict)
        row = session.get(LoginFailure, (username, client))
        if row is None:
            row = LoginFailure(username=username, client_address=client, failures=0, last_failure_at=now)
        row.failures = 1 if row.last_failure_at < cutoff else row.failures + 1
        row.last_failure_at = now
        session.add(row)
        return
    table = LoginFailure.__table__
    statement = _UPSERTS[dialect](table).values(
        username=username, client_address=client, failures=1, last_failure_at=now)
    session.execute(statement.on_conflict_do_update(
        index_elements=[table.c.username, table.c.client_address],
        set_={"failures": case((table.c.last_failure_at < cutoff, 1), else_=table.c.failures + 1),
              "last_failure_at": now},
    ))


def _record_failure(session: Session, username: str, client: str) -> None:
    """Count a failure for the pair and for the address, and forget rows past the window."""
    cutoff = utcnow() - timedelta(seconds=THROTTLE_MAX_SECONDS)
    session.execute(delete(LoginFailure).where(LoginFailure.last_failure_at < cutoff))
    if username:
        _count_failure(session, username, client)
    _count_failure(session, ADDRESS_ROW, client)
    session.commit()


def login(session: Session, username: str, password: str, *, client_address: str | None) -> IssuedToken:
    """Check credentials and issue a login token.

    Throttling counts failures per (username, client address) and per client address (see
    `client_key`), never per username alone: strangers guessing from other addresses cannot
    lock an account out. After THROTTLE_FREE_FAILURES failures for one username from one
    address, or ADDRESS_FREE_FAILURES from one address over all usernames, further attempts
    from there wait 30 s, doubling per failure up to THROTTLE_MAX_SECONDS; a throttled attempt
    checks no password and counts nothing. A successful login clears its pair's counter, not
    the address's (signing in to an own account does not buy more guesses at others).
    Unknown users cost the same Argon2 verification and count the same as wrong passwords.

    Args:
        session: the database session; failures are committed at once, a success by the caller.
        username: as typed (surrounding blanks ignored).
        password: as typed.
        client_address: the peer address the request came from (None when not known).

    Returns:
        The issued login token.

    Raises:
        LoginThrottled: after too many recent failures for this username from this address,
            or from this address over all usernames.
        LoginFailed: for an unknown user, a wrong password or a disabled account, with one
            message for all three.
    """
    username = (username or "").strip()
    key = username[:USERNAME_KEY_MAX]
    client = client_key(client_address)
    wait = _seconds_to_wait(session, key, client)
    if wait:
        raise LoginThrottled(wait)
    user = session.exec(select(User).where(User.username == username)).first() if username else None
    ok = verify_password(user.password_hash if user else None, password or "")
    if not ok or user is None or user.disabled:
        _record_failure(session, key, client)
        raise LoginFailed(LOGIN_FAILED_MESSAGE)
    session.execute(delete(LoginFailure).where(LoginFailure.username == key, LoginFailure.client_address == client))
    return issue_token(session, user, kind="login")


def issue_token(session: Session, user: User, kind: str = "login", name: str | None = None) -> IssuedToken:
    """Create a token for `user`; login tokens expire, personal API tokens do not."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    expires = utcnow() + timedelta(hours=get_settings().login_token_hours) if kind == "login" else None
    session.add(
        AuthToken(token_hash=token_digest(token), user_id=user.id, kind=kind, name=name, expires_at=expires)
    )
    return IssuedToken(token=token, user_id=user.id)


def token_and_user(session: Session, token: str | None) -> tuple[AuthToken, User] | None:
    """The row of a valid, unexpired, unrevoked token and its active user, else None.

    The row tells the token's narrowing (``instance_id``, ``read_only``) to callers that honour
    it, like the MCP server (backend/mcp/server.py).
    """
    if not token:
        return None
    row = session.exec(select(AuthToken).where(AuthToken.token_hash == token_digest(token))).first()
    if row is None or row.revoked or (row.expires_at is not None and row.expires_at < utcnow()):
        return None
    user = session.get(User, row.user_id)
    if user is None or user.disabled:
        return None
    return row, user


def user_for_token(session: Session, token: str | None) -> User | None:
    """The active user a valid, unexpired, unrevoked token belongs to, else None."""
    found = token_and_user(session, token)
    return found[1] if found is not None else None


def revoke_token(session: Session, token: str) -> None:
    """Invalidate a token (logout)."""
    row = session.exec(select(AuthToken).where(AuthToken.token_hash == token_digest(token))).first()
    if row is not None:
        row.revoked = True
        session.add(row)


def list_api_tokens(session: Session, user: User) -> list[AuthToken]:
    """The user's personal API tokens that are not revoked, newest first."""
    return list(session.exec(
        select(AuthToken).where(AuthToken.user_id == user.id, AuthToken.kind == "api", AuthToken.revoked.is_(False))
        .order_by(AuthToken.sys_created_at.desc())
    ).all())


def create_api_token(session: Session, user: User, name: str, instance_id: str | None = None,
                     read_only: bool = False) -> tuple[AuthToken, str]:
    """A named personal API token; the token text is returned once and only its hash is kept.

    Args:
        session: the database session (flushed, not committed).
        user: the token's owner.
        name: unique among the user's tokens.
        instance_id: narrows the token to this feature instance (the caller checks that the
            user may open it), None for all the user's instances.
        read_only: offer only read tools at /mcp with this token.

    Returns:
        The stored row and the token text.
    """
    name = clean_name(name or "", "name", 200)
    if not name:
        raise InvalidInput([FieldError("name", "must not be empty")])
    if any(t.name == name for t in list_api_tokens(session, user)):
        raise Conflict(f"name: you already have a token named '{name}'")
    issued = issue_token(session, user, kind="api", name=name)
    session.flush()
    row = session.exec(select(AuthToken).where(AuthToken.token_hash == token_digest(issued.token))).one()
    row.instance_id = instance_id
    row.read_only = bool(read_only)
    session.add(row)
    session.flush()
    return row, issued.token


def revoke_api_token(session: Session, user: User, token_id: str) -> None:
    """Revoke one of the user's own API tokens; anybody else's is not found."""
    row = session.get(AuthToken, token_id)
    if row is None or row.user_id != user.id or row.kind != "api" or row.revoked:
        raise NotFound(f"token {token_id} not found")
    row.revoked = True
    session.add(row)
