"""Mail through any connection that offers it (a connection type with a `mail` factory: `imap`,
`msft` …): what generic code — email.sendMail, email.checkEmail's poller — opens a mailbox with.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from backend.connectors.access import MailAccess
from backend.connectors.store import open_connection
from backend.connectors.types import MAIL, Credentials, connection_type, connection_types
from backend.db.models import User


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
