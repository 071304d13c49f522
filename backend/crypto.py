"""Secrets at rest: sealed with POWERON_SECRET_KEY (Fernet: AES-128-CBC + HMAC-SHA256).

A sealed value is text, `sealed:v1:<token>`, so it can live inside JSON such as a workflow
graph. Who holds the database but not the key learns nothing from it.
"""

from __future__ import annotations

import base64
import functools
import hashlib

from cryptography.fernet import Fernet, InvalidToken

from backend.config import get_settings

PREFIX = "sealed:v1:"


@functools.lru_cache(maxsize=4)
def _fernet(secret_key: str) -> Fernet:
    # Fernet wants 32 url-safe base64 bytes; the configured key may be any text.
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(secret_key.encode("utf-8")).digest()))


def is_sealed(value: object) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def seal(text: str) -> str:
    """`text` encrypted with the configured key (a sealed value stays as it is)."""
    if is_sealed(text):
        return text
    return PREFIX + _fernet(get_settings().secret_key).encrypt(text.encode("utf-8")).decode("ascii")


def unseal(value: str) -> str:
    """The clear text of a sealed value (any other text is returned as it is).

    Raises:
        ValueError: the value was sealed with another key or altered.
    """
    if not is_sealed(value):
        return value
    try:
        return _fernet(get_settings().secret_key).decrypt(value[len(PREFIX):].encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError):
        raise ValueError("a sealed secret cannot be opened with this server's POWERON_SECRET_KEY") from None
