"""Toolbox `email`: sending mail through any mail connection (`email.sendMail`).

The action is generic over MailAccess.send (backend/connectors/access.py): an `imap` connection
sends through its SMTP server, a Microsoft 365 one through Graph. Attachments are files of the
caller's feature instance (their DATA rights apply); together they may be at most
POWERON_FILE_MAX_BYTES. Waiting for mail is the built-in node email.checkEmail
(backend/engine/mailbox.py); the Outlook actions live with the `msft` connector.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from backend.actions.base import ActionContext, ActionError, ActionParams, action
from backend.config import get_settings
from backend.connectors.access import OutgoingMail
from backend.connectors.mail import open_mail
from backend.connectors.types import ConnectionFailed
from backend.errors import FieldError, InvalidInput
from backend.files import service

MAIL_TYPES = ("imap", "msft")
MAX_RECIPIENTS = 100
MAX_ATTACHMENTS = 20
BODY_MAX_CHARS = 1_000_000


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


def _addresses(value: Any) -> Any:
    """A list of addresses; a text with several separated by commas or semicolons is split."""
    if isinstance(value, str):
        return [part.strip() for part in re.split(r"[,;]", value) if part.strip()]
    return value


class SendMailParams(ActionParams):
    # Empty is a valid graph (a template's node before one is chosen): the run's start says it is missing.
    connection_id: str = Field(max_length=32, description="The mail connection to send from (its id, from the "
                                                          "Connections page): a mailbox (IMAP/SMTP) or Microsoft 365")
    to: list[str] = Field(min_length=1, max_length=MAX_RECIPIENTS,
                          description="Recipients' e-mail addresses, e.g. [\"anna@example.com\"]")
    cc: list[str] = Field(default_factory=list, max_length=MAX_RECIPIENTS, description="Copy recipients")
    subject: str = Field(max_length=998, description="Subject line")
    body: str = Field(max_length=BODY_MAX_CHARS, description="The message text (HTML when html is true)")
    html: bool = Field(False, description="The body is HTML (a plain-text version is added)")
    attachments: list[str] = Field(default_factory=list, max_length=MAX_ATTACHMENTS,
                                   description="Paths of files in this workspace's file store to attach, "
                                               "e.g. [\"/reports/summary.pdf\"]")

    _split = field_validator("to", "cc", mode="before")(_addresses)


class SentMail(_Output):
    connection_id: str
    to: list[str]
    cc: list[str]
    subject: str
    attachments: list[str] = Field(description="Paths of the attached files")
    status: str = Field(description="What the mail server said it did")


def _attachments(context: ActionContext, paths: list[str]) -> tuple[tuple[str, str, bytes], ...]:
    """The files to attach, read with the caller's rights; together at most POWERON_FILE_MAX_BYTES."""
    files, total = [], 0
    limit = get_settings().file_max_bytes
    for index, path in enumerate(paths):
        entry, content = service.read_bytes(context, path)
        total += len(content)
        if total > limit:
            raise InvalidInput([FieldError(f"attachments[{index}]", (
                f"the attachments come to {service.human_size(total)} with {entry.path}; a mail's attachments "
                f"may be at most {service.human_size(limit)} together (POWERON_FILE_MAX_BYTES)"))])
        files.append((entry.name, entry.mime_type, content))
    return tuple(files)


@action("email.sendMail", toolbox="email", label="Send e-mail",
        description="Send an e-mail from a connected mailbox (IMAP/SMTP or Microsoft 365) to recipients, "
                    "optionally as HTML and with files of the workspace attached.",
        params=SendMailParams, output=SentMail, graph_node=True, capabilities=("read", "externalSend"),
        consequences=("send",),
        connection_types=MAIL_TYPES, needs=("mail",))
def send_mail(params: SendMailParams, context: ActionContext) -> SentMail:
    if not params.connection_id.strip():
        raise ActionError("connectionId: choose the mail connection to send from (the Connections page lists yours)")
    _credentials, mailbox = _open(context, params.connection_id)
    outgoing = OutgoingMail(to=tuple(params.to), cc=tuple(params.cc), subject=params.subject, body=params.body,
                            html=params.html, attachments=_attachments(context, params.attachments))
    try:
        status = mailbox.send(outgoing)
    except ConnectionFailed as exc:
        raise ActionError(str(exc)) from None
    return SentMail(connection_id=params.connection_id, to=params.to, cc=params.cc, subject=params.subject,
                    attachments=list(params.attachments), status=status)


def _open(context: ActionContext, connection_id: str) -> Any:
    try:
        return open_mail(context.session, context.user, connection_id)
    except ConnectionFailed as exc:
        raise ActionError(str(exc)) from None
