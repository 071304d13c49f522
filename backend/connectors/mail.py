"""Mail through any connection that offers it (a connection type with a `mail` factory: `imap`,
`msft` …): what generic code — email.sendMail, email.checkEmail's poller — opens a mailbox with,
and the limits every mail connector applies (POWERON_MAIL_MAX_MESSAGES per call, attachments up to
POWERON_FILE_MAX_BYTES), refused in the same words whichever connector.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from backend.config import get_settings
from backend.connectors.access import MailAccess
from backend.connectors.store import open_connection
from backend.connectors.types import MAIL, Credentials, connection_type, connection_types
from backend.db.models import User
from backend.errors import FieldError, InvalidInput


def mail_type_ids() -> list[str]:
    """The ids of the connection types that offer mail, in registration order."""
    return [kind.id for kind in connection_types() if MAIL in kind.offers]


def open_mail(session: Session, user: User, connection_id: Any) -> tuple[Credentials, MailAccess]:
    """The mailbox of connection `connection_id` for `user` to use now.

    Raises:
        NotFound: no such connection, or not theirs to use.
        ConnectionFailed: it offers no mail, or it is not active (the message says what to do).
    """
    credentials = open_connection(session, user, connection_id, mail_type_ids())
    return credentials, connection_type(credentials.type).mail(credentials)


def max_messages() -> int:
    """POWERON_MAIL_MAX_MESSAGES: the most mails one call reads."""
    return get_settings().mail_max_messages


def check_limit(limit: Any) -> int:
    """`limit` when it is a whole number from 1 to POWERON_MAIL_MAX_MESSAGES, else InvalidInput
    naming the limit."""
    most = max_messages()
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput([FieldError("limit", "must be a whole number of at least 1")])
    if limit > most:
        raise InvalidInput([FieldError("limit", f"at most {most} mails per call (POWERON_MAIL_MAX_MESSAGES); "
                                                f"{limit} were asked for")])
    return limit


def attachment_too_large(name: str, size: int) -> InvalidInput:
    """The refusal of an attachment over POWERON_FILE_MAX_BYTES."""
    from backend.files.service import human_size

    limit = get_settings().file_max_bytes
    return InvalidInput([FieldError("attachmentId", (
        f"the attachment '{name}' is {human_size(size)}; files may be at most {human_size(limit)} "
        "(POWERON_FILE_MAX_BYTES)"))])
