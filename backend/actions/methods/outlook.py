"""Toolbox email, Outlook (Microsoft 365, DESIGN §8): read, search, draft and send mail through one of
the caller's connections of type `msft` (backend/connectors/kinds/msft.py).

Every action takes `connectionId`: a connection the caller may use (their own, or one shared in
their mandate); any other id is "not found". Attachments of read mails can be saved into the
feature instance's file store; attachments of drafts are files of that store. Failures of Microsoft
365 (expired connection, throttling, a missing mail) come back as clear messages, never a token.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from backend.actions.base import ActionContext, ActionParams, action
from backend.actions.connected import connected
from backend.connectors.access import OutgoingMail
from backend.connectors.kinds.msft import TYPE_ID, GraphMail, Message
from backend.connectors.types import ConnectionFailed
from backend.files import service as files

CONNECTION_HELP = "Id of the Microsoft 365 connection to use (the Connections page lists the caller's connections)"
FOLDER_HELP = "Mail folder: inbox, sentitems, drafts, deleteditems, archive, junkemail, or a folder's name"
SUBFOLDER_MAX = 80
Address = Annotated[str, Field(min_length=3, max_length=320, pattern=r"^[^@\s<>,;]+@[^@\s<>,;]+$")]


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class ConnectionParams(ActionParams):
    connection_id: str = Field(min_length=1, max_length=32, description=CONNECTION_HELP)


def _mailbox(context: ActionContext, connection_id: str) -> AbstractContextManager[GraphMail]:
    """The Outlook mailbox of a connection the caller may use; Microsoft 365's refusals as ActionError."""
    return connected(context, connection_id, [TYPE_ID], GraphMail)


# --- reading ----------------------------------------------------------------------------------------


class AttachmentOut(_Output):
    id: str
    name: str
    mime_type: str
    size: int
    saved_path: str | None = Field(None, description="Where it was saved in the file store (saveAttachments)")


class MailOut(_Output):
    id: str
    folder: str
    sender: str = Field(alias="from", description="Who sent it: 'Name <address>'")
    to: list[str]
    cc: list[str]
    subject: str
    body: str
    body_truncated: bool
    received_at: datetime
    is_read: bool
    web_link: str = Field(description="Opens the mail in Outlook on the web")
    attachments: list[AttachmentOut]


class SkippedAttachment(_Output):
    mail_id: str
    name: str
    reason: str


class MailListOutput(_Output):
    connection: str
    folder: str | None
    count: int
    mails: list[MailOut]
    saved_files: list[str] = Field(description="File-store paths of the attachments saved")
    skipped_attachments: list[SkippedAttachment] = Field(description="Attachments not saved, and why")


class _ReadingParams(ConnectionParams):
    body_chars: int = Field(4000, ge=0, le=100_000,
                            description="Longest body text returned per mail (default 4000); longer bodies are cut")
    save_attachments: bool = Field(False, description="Save the mails' attachments into this workspace's file store "
                                                      "(each mail in a subfolder of attachmentFolder)")
    attachment_folder: str = Field("/mail-attachments", min_length=1, max_length=500,
                                   description="File-store folder for saved attachments (default /mail-attachments)")


class ReadEmailsParams(_ReadingParams):
    folder: str = Field("inbox", min_length=1, max_length=200, description=FOLDER_HELP)
    top: int = Field(10, ge=1, le=100, description="At most this many mails, newest first (1–100, default 10)")
    unread_only: bool = Field(False, description="Only unread mails")
    since: datetime | None = Field(None, description="Only mails received at or after this moment, ISO 8601 "
                                                     "(e.g. 2025-03-01T08:00:00Z)")


def _safe_part(text: str, fallback: str) -> str:
    """Text usable as one file-store name (no slashes or control characters, not too long)."""
    cleaned = re.sub(r"[\x00-\x1f\x7f/\\]+", " ", text).strip().strip(".")
    return (re.sub(r"\s+", " ", cleaned)[:SUBFOLDER_MAX].strip() or fallback)


def _save(context: ActionContext, mailbox: GraphMail, message: Message, folder: str, saved: list[str],
          skipped: list[SkippedAttachment]) -> dict[str, str]:
    """Store a mail's attachments in the file store: {attachment id: path}."""
    paths: dict[str, str] = {}
    mail = message.mail
    subfolder = _safe_part(f"{mail.received_at:%Y-%m-%d %H%M} {mail.subject}", "mail")
    for attachment in mail.attachments:
        try:
            name, mime_type, data = mailbox.attachment(mail.id, attachment.id)
        except ConnectionFailed as exc:
            skipped.append(SkippedAttachment(mail_id=mail.id, name=attachment.name, reason=str(exc)))
            continue
        path = f"{folder.rstrip('/')}/{subfolder}/{_safe_part(name, 'attachment')}"
        entry = files.store_file(context, path, data, mime_type, overwrite=True)
        paths[attachment.id] = entry.path
        saved.append(entry.path)
    return paths


def _mail_out(message: Message, body_chars: int, saved: dict[str, str]) -> MailOut:
    mail = message.mail
    return MailOut(id=mail.id, folder=mail.folder, sender=mail.sender, to=list(mail.to), cc=list(mail.cc),
                   subject=mail.subject, body=mail.body[:body_chars], body_truncated=len(mail.body) > body_chars,
                   received_at=mail.received_at, is_read=message.is_read, web_link=message.web_link,
                   attachments=[AttachmentOut(id=a.id, name=a.name, mime_type=a.mime_type, size=a.size,
                                              saved_path=saved.get(a.id)) for a in mail.attachments])


def _listing(context: ActionContext, mailbox: GraphMail, messages: list[Message], params: _ReadingParams,
             folder: str | None) -> MailListOutput:
    saved_files: list[str] = []
    skipped: list[SkippedAttachment] = []
    out = []
    for message in messages:
        saved = _save(context, mailbox, message, params.attachment_folder, saved_files, skipped) \
            if params.save_attachments and message.mail.attachments else {}
        out.append(_mail_out(message, params.body_chars, saved))
    return MailListOutput(connection=mailbox.credentials.label, folder=folder, count=len(out), mails=out,
                          saved_files=saved_files, skipped_attachments=skipped)


@action("outlook.readEmails", toolbox="email", label="Read e-mails (Outlook)",
        description="Read the newest e-mails of a Microsoft 365 (Outlook) mail folder, newest first: sender, "
                    "recipients, subject, body text, attachments. Filter by unread or by a start date; optionally "
                    "save the attachments into the workspace's file store.",
        params=ReadEmailsParams, output=MailListOutput, graph_node=True, capabilities=("read", "write"),
        connection_type=TYPE_ID)
def read_emails(params: ReadEmailsParams, context: ActionContext) -> MailListOutput:
    with _mailbox(context, params.connection_id) as mailbox:
        messages = mailbox.messages(params.folder, params.top, unread_only=params.unread_only, since=params.since)
        return _listing(context, mailbox, messages, params, params.folder)


class SearchEmailsParams(_ReadingParams):
    query: str = Field(min_length=1, max_length=200, description="Words to find in subject, body, sender or "
                                                                 "attachment names (Outlook's search)")
    folder: str | None = Field(None, max_length=200, description=FOLDER_HELP + "; empty: the whole mailbox")
    top: int = Field(10, ge=1, le=50, description="At most this many mails (1–50, default 10)")


@action("outlook.searchEmails", toolbox="email", label="Search e-mails (Outlook)",
        description="Search a Microsoft 365 (Outlook) mailbox, or one folder of it, for words in subject, body, "
                    "sender or attachment names; returns the matching mails newest first, optionally saving their "
                    "attachments into the workspace's file store.",
        params=SearchEmailsParams, output=MailListOutput, graph_node=True, capabilities=("read", "write"),
        connection_type=TYPE_ID)
def search_emails(params: SearchEmailsParams, context: ActionContext) -> MailListOutput:
    with _mailbox(context, params.connection_id) as mailbox:
        messages = mailbox.messages(params.folder, params.top, query=params.query)
        return _listing(context, mailbox, messages, params, params.folder)


# --- writing ----------------------------------------------------------------------------------------


class DraftEmailParams(ConnectionParams):
    to: list[Address] = Field(min_length=1, max_length=100, description="Recipients' e-mail addresses")
    cc: list[Address] = Field(default_factory=list, max_length=100, description="Copy recipients' addresses")
    subject: str = Field(max_length=998, description="The subject line")
    body: str = Field(max_length=200_000, description="The text of the mail")
    html: bool = Field(False, description="The body is HTML (default: plain text)")
    attachments: list[str] = Field(default_factory=list, max_length=20,
                                   description="Files of this workspace's file store to attach, by path "
                                               "(e.g. /reports/summary.pdf); together at most 3 MB")


class DraftOutput(_Output):
    draft_id: str = Field(description="Send it with outlook.sendDraft")
    subject: str
    to: list[str]
    cc: list[str]
    attachments: list[str]
    web_link: str = Field(description="Opens the draft in Outlook on the web")


@action("outlook.draftEmail", toolbox="email", label="Draft e-mail (Outlook)",
        description="Save an e-mail as a draft in the Drafts folder of a Microsoft 365 (Outlook) mailbox, with "
                    "files of the workspace's file store attached; nothing is sent until outlook.sendDraft.",
        params=DraftEmailParams, output=DraftOutput, graph_node=True, capabilities=("read", "externalSend"),
        connection_type=TYPE_ID)
def draft_email(params: DraftEmailParams, context: ActionContext) -> DraftOutput:
    with _mailbox(context, params.connection_id) as mailbox:
        attached = []
        for path in params.attachments:
            entry, data = files.read_bytes(context, path)
            attached.append((entry.name, entry.mime_type, data))
        draft = mailbox.draft(OutgoingMail(to=tuple(params.to), cc=tuple(params.cc), subject=params.subject,
                                           body=params.body, html=params.html, attachments=tuple(attached)))
    return DraftOutput(draft_id=draft.mail.id, subject=draft.mail.subject, to=list(draft.mail.to),
                       cc=list(draft.mail.cc), attachments=[a[0] for a in attached], web_link=draft.web_link)


class SendDraftParams(ConnectionParams):
    draft_id: str = Field(min_length=1, max_length=1000, description="The draftId of outlook.draftEmail")


class SentOutput(_Output):
    draft_id: str
    message: str


@action("outlook.sendDraft", toolbox="email", label="Send draft (Outlook)",
        description="Send a draft saved with outlook.draftEmail from the Microsoft 365 (Outlook) mailbox; it moves "
                    "to Sent Items.",
        params=SendDraftParams, output=SentOutput, graph_node=True, capabilities=("externalSend",),
        consequences=("send",),
        connection_type=TYPE_ID)
def send_draft(params: SendDraftParams, context: ActionContext) -> SentOutput:
    with _mailbox(context, params.connection_id) as mailbox:
        return SentOutput(draft_id=params.draft_id, message=mailbox.send_draft(params.draft_id))
