"""Local accounts: password hashing, login with throttling, bearer tokens.

Passwords are hashed with Argon2id. Tokens are random strings handed out once; only their
SHA-256 digest is stored, so a database leak yields no usable token.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlmodel import Session, select

from backend.config import get_settings
from backend.db.models import AuthToken, LoginFailure, User, utcnow
from backend.errors import Conflict, FieldError, InvalidInput, NotFound

LOGIN_FAILED_MESSAGE = "Unknown user or wrong password."
THROTTLE_FREE_FAILURES = 5
THROTTLE_MAX_SECONDS = 15 * 60
TOKEN_PREFIX = "pon_"

_hasher = PasswordHasher()
# Verifying against this keeps the time of "unknown user" equal to "wrong password".
_DUMMY_HASH = _hasher.hash(secrets.token_hex(16))


class LoginFailed(Exception):
    """Credentials were refused; the message never tells which part was wrong."""


class LoginThrottled(LoginFailed):
    """Too many recent failures for this username."""

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


def _throttle_seconds_left(failure: LoginFailure | None) -> int:
    if failure is None or failure.failures < THROTTLE_FREE_FAILURES:
        return 0
    lock = min(2 ** (failure.failures - THROTTLE_FREE_FAILURES) * 30, THROTTLE_MAX_SECONDS)
    left = (failure.last_failure_at + timedelta(seconds=lock) - utcnow()).total_seconds()
    return max(0, int(left) + (1 if left % 1 else 0))


def _record_failure(session: Session, username: str) -> None:
    failure = session.get(LoginFailure, username)
    if failure is None:
        session.add(LoginFailure(username=username, failures=1))
    else:
        if (utcnow() - failure.last_failure_at) > timedelta(seconds=THROTTLE_MAX_SECONDS):
            failure.failures = 0
        failure.failures += 1
        failure.last_failure_at = utcnow()
        session.add(failure)


def login(session: Session, username: str, password: str) -> IssuedToken:
    """Check credentials and issue a login token.

    Raises:
        LoginThrottled: after too many recent failures for this username.
        LoginFailed: for an unknown user, a wrong password or a disabled account, with one
            message for all three.
    """
    username = (username or "").strip()
    failure = session.get(LoginFailure, username)
    wait = _throttle_seconds_left(failure)
    if wait:
        raise LoginThrottled(wait)
    user = session.exec(select(User).where(User.username == username)).first()
    ok = verify_password(user.password_hash if user else None, password or "")
    if not ok or user is None or user.disabled:
        _record_failure(session, username)
        session.commit()
        raise LoginFailed(LOGIN_FAILED_MESSAGE)
    if failure is not None:
        session.delete(failure)
    return issue_token(session, user, kind="login")


def issue_token(session: Session, user: User, kind: str = "login", name: str | None = None) -> IssuedToken:
    """Create a token for `user`; login tokens expire, personal API tokens do not."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    expires = utcnow() + timedelta(hours=get_settings().login_token_hours) if kind == "login" else None
    session.add(
        AuthToken(token_hash=token_digest(token), user_id=user.id, kind=kind, name=name, expires_at=expires)
    )
    return IssuedToken(token=token, user_id=user.id)


def user_for_token(session: Session, token: str | None) -> User | None:
    """The active user a valid, unexpired, unrevoked token belongs to, else None."""
    if not token:
        return None
    row = session.exec(select(AuthToken).where(AuthToken.token_hash == token_digest(token))).first()
    if row is None or row.revoked or (row.expires_at is not None and row.expires_at < utcnow()):
        return None
    user = session.get(User, row.user_id)
    if user is None or user.disabled:
        return None
    return user


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


def create_api_token(session: Session, user: User, name: str) -> tuple[AuthToken, str]:
    """A named personal API token; the token text is returned once and only its hash is kept."""
    name = (name or "").strip()
    if not name:
        raise InvalidInput([FieldError("name", "must not be empty")])
    if any(t.name == name for t in list_api_tokens(session, user)):
        raise Conflict(f"name: you already have a token named '{name}'")
    issued = issue_token(session, user, kind="api", name=name)
    session.flush()
    row = session.exec(select(AuthToken).where(AuthToken.token_hash == token_digest(issued.token))).one()
    return row, issued.token


def revoke_api_token(session: Session, user: User, token_id: str) -> None:
    """Revoke one of the user's own API tokens; anybody else's is not found."""
    row = session.get(AuthToken, token_id)
    if row is None or row.user_id != user.id or row.kind != "api" or row.revoked:
        raise NotFound(f"token {token_id} not found")
    row.revoked = True
    session.add(row)
