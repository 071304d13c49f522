"""Microsoft 365 (DESIGN §8: connection type `msft`): Outlook mail and SharePoint/OneDrive files
through Microsoft Graph, connected by consent at the Microsoft identity platform.

The consent (OAuth 2.0 authorization code with PKCE) and the tokens are backend.connectors.oauth's;
this module says where Microsoft's endpoints are (POWERON_MSFT_AUTHORITY/{POWERON_MSFT_TENANT}/
oauth2/v2.0/…), which scopes it asks for, and how to read the account (`GET /me`). Graph calls go
through backend.connectors.msgraph.GraphClient (paging, throttling, errors).

:class:`GraphMail` is the MailAccess of a connection (folders, newest mails with filters and
search, new mails since a cursor by Graph's delta query, one mail, attachments limited by
POWERON_FILE_MAX_BYTES, sending through /me/sendMail, drafts); :class:`GraphFiles` its FileAccess
over SharePoint (sites → document libraries → folders → files, search, download limited by
POWERON_FILE_MAX_BYTES, upload that refuses to replace a file unless asked). Ids handed out are
opaque: a Graph message or attachment id; `site:<siteId>`, `drive:<driveId>`,
`folder:<driveId>:<itemId>` and `file:<driveId>:<itemId>` for files.
"""

from __future__ import annotations

import base64
import email.utils
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit

from backend.config import get_settings
from backend.connectors.access import (
    Attachment,
    FileAccess,
    Mail,
    MailAccess,
    MailPage,
    OutgoingMail,
    SourceItem,
)
from backend.connectors.msgraph import GraphClient, GraphError
from backend.connectors.oauth import Identity, OAuthClientConfig, OAuthProvider, OAuthTokens, redirect_uri
from backend.connectors.types import (
    ConnectionFailed,
    ConnectionType,
    Credentials,
    register_connection_type,
)

TYPE_ID = "msft"
LABEL = "Microsoft 365"
SCOPES = ("User.Read", "Mail.ReadWrite", "Mail.Send", "Files.ReadWrite.All", "Sites.Read.All", "offline_access")
# Consented too, for IMAP/SMTP connections signed in with XOAUTH2 (kinds/imap.py): Microsoft issues
# the token of that other resource from the same refresh token (OAuthTokens.token_for).
MAIL_SERVER_SCOPES = ("https://outlook.office.com/IMAP.AccessAsUser.All", "https://outlook.office.com/SMTP.Send")
CONSENT_MISSING = "AADSTS65001"  # the identity platform's "not consented" (a consent older than these scopes)
REQUIRED_SETTINGS = ("POWERON_MSFT_TENANT", "POWERON_MSFT_CLIENT_ID", "POWERON_MSFT_CLIENT_SECRET")
ME_SELECT = "id,displayName,mail,userPrincipalName"
MESSAGE_SELECT = ("id,subject,from,toRecipients,ccRecipients,receivedDateTime,isRead,hasAttachments,body,"
                  "parentFolderId,webLink,isDraft")
ATTACHMENT_SELECT = "id,name,contentType,size,isInline"
TEXT_BODY = 'outlook.body-content-type="text"'
PAGE_SIZE = 100
DELTA_PAGE_SIZE = 50
CHILDREN_PAGE_SIZE = 200
SEND_ATTACHMENTS_MAX = 3 * 1024 * 1024  # what Graph takes inline in one request; more needs an upload session
SIMPLE_UPLOAD_MAX = 250 * 1024 * 1024  # Graph's limit of PUT …/content
EVER = "1900-01-01T00:00:00Z"
WELL_KNOWN_FOLDERS = frozenset({"inbox", "drafts", "sentitems", "deleteditems", "junkemail", "archive", "outbox",
                                "conversationhistory", "scheduled", "msgfolderroot"})
FORBIDDEN_NAME_CHARS = set('"*:<>?/\\|')


# --- configuration and the consent ------------------------------------------------------------------


def unavailable() -> str | None:
    """None when Microsoft 365 connections can be made here, else which settings are missing."""
    settings = get_settings()
    values = (settings.msft_tenant, settings.msft_client_id, settings.msft_client_secret)
    missing = [name for name, value in zip(REQUIRED_SETTINGS, values, strict=True) if not value]
    if not missing:
        return None
    return (f"Microsoft 365 is not set up on this server: set {', '.join(missing)} (an app registration in "
            f"Microsoft Entra ID whose redirect URI is {redirect_uri(TYPE_ID)})")


def client_config() -> OAuthClientConfig:
    """The identity platform of the configured tenant and this installation's app registration."""
    settings = get_settings()
    base = f"{settings.msft_authority}/{quote(settings.msft_tenant or '', safe='')}/oauth2/v2.0"
    return OAuthClientConfig(base + "/authorize", base + "/token", settings.msft_client_id or "",
                             settings.msft_client_secret or "")


class _FixedToken:
    """A token source for one fresh access token (reading the account right after the consent)."""

    def __init__(self, token: str):
        self.token = token

    def access_token(self) -> str:
        return self.token

    def renew(self, refused: str) -> str:
        raise ConnectionFailed("Microsoft Graph refused the access token Microsoft had just issued")


def _identity(me: dict[str, Any]) -> Identity:
    account = str(me.get("mail") or me.get("userPrincipalName") or me.get("id") or "")
    return Identity(subject=str(me.get("id") or account), account=account,
                    settings={"account": account, "displayName": str(me.get("displayName") or account),
                              "accountId": str(me.get("id") or account), "tenant": get_settings().msft_tenant})


def identify(access_token: str) -> Identity:
    """Whose Microsoft 365 account a fresh access token is for (`GET /me`)."""
    with GraphClient(_FixedToken(access_token)) as graph:
        return _identity(graph.get("/me", "reading the signed-in account", {"$select": ME_SELECT}))


PROVIDER = OAuthProvider(name="Microsoft", scopes=SCOPES + MAIL_SERVER_SCOPES, token_scopes=SCOPES,
                         client=client_config, identify=identify, authorize_params=(("prompt", "select_account"),))


def graph_for(credentials: Credentials, mark_expired: bool = True) -> GraphClient:
    """A Graph client with the connection's tokens (kept fresh; see OAuthTokens)."""
    return GraphClient(OAuthTokens(credentials, PROVIDER, mark_expired=mark_expired))


def check(credentials: Credentials) -> str:
    """Read the signed-in account (`GET /me`), refreshing the token when needed."""
    with graph_for(credentials, mark_expired=False) as graph:
        me = graph.get("/me", "reading the signed-in account", {"$select": ME_SELECT})
    return f"signed in as {_identity(me).account}"


# --- small conversions ------------------------------------------------------------------------------


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _iso(moment: datetime) -> str:
    """A Graph date-time literal (UTC, seconds)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _address(value: Any) -> str:
    entry = (value or {}).get("emailAddress") if isinstance(value, dict) else None
    entry = entry if isinstance(entry, dict) else {}
    name, address = str(entry.get("name") or "").strip(), str(entry.get("address") or "").strip()
    return f"{name} <{address}>" if name and address and name != address else (address or name)


def _recipient(text: str) -> dict[str, Any]:
    name, address = email.utils.parseaddr(text)
    if "@" not in address:
        raise ConnectionFailed(f"'{text}' is not an e-mail address")
    return {"emailAddress": {"address": address, **({"name": name} if name else {})}}


def _q(value: str) -> str:
    """One path segment, percent-encoded (Graph ids hold '=', '-', '_' …)."""
    return quote(value, safe="")


def _human(size: int) -> str:
    from backend.files.service import human_size

    return human_size(size)


def _too_large(what: str, size: int | None = None) -> str:
    limit = get_settings().file_max_bytes
    is_size = f" is {_human(size)};" if size is not None else " is larger than allowed;"
    return f"{what}{is_size} files may be at most {_human(limit)} (POWERON_FILE_MAX_BYTES)"


# --- mail -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """A mail with what Outlook adds (read flag, link to open it)."""

    mail: Mail
    is_read: bool
    web_link: str
    is_draft: bool = False


@dataclass
class _Cursor:
    """Where `since` goes on: a delta link (None: start a round), the watermark of mails already
    reported (received at or before `after`; `seen`: ids received exactly then) and the newest mail
    reported in the round under way (`top`, `top_ids`)."""

    folder: str
    link: str | None
    after: str
    seen: list[str]
    top: str
    top_ids: list[str]

    def dump(self) -> str:
        return json.dumps({"v": 1, "f": self.folder, "l": self.link, "a": self.after, "s": self.seen, "t": self.top,
                           "ti": self.top_ids}, separators=(",", ":"))

    @classmethod
    def load(cls, text: str | None) -> _Cursor | None:
        if not text:
            return None
        try:
            raw = json.loads(text)
            return cls(str(raw["f"]), raw.get("l"), str(raw["a"]), list(raw.get("s") or []), str(raw.get("t") or
                       raw["a"]), list(raw.get("ti") or []))
        except (ValueError, KeyError, TypeError):
            return None

    def report(self, received: str, mail_id: str) -> bool:
        """Whether a mail received then is new to this cursor (and remember it for the round)."""
        if received < self.after or (received == self.after and mail_id in self.seen):
            return False
        if received > self.top:
            self.top, self.top_ids = received, [mail_id]
        elif received == self.top and mail_id not in self.top_ids:
            self.top_ids.append(mail_id)
        return True

    def end_round(self, link: str) -> None:
        if self.top > self.after:
            self.after, self.seen = self.top, list(self.top_ids)
        elif self.top == self.after:
            self.seen = sorted(set(self.seen) | set(self.top_ids))
        self.top, self.top_ids, self.link = self.after, [], link


class GraphMail(MailAccess):
    """The Outlook mailbox of one Microsoft 365 connection."""

    def __init__(self, credentials: Credentials, graph: GraphClient | None = None):
        self.credentials = credentials
        self.graph = graph or graph_for(credentials)
        self._folders: list[SourceItem] | None = None

    def close(self) -> None:
        self.graph.close()

    @property
    def account(self) -> str:
        return str(self.credentials.settings.get("account") or self.credentials.label)

    # --- folders ----------------------------------------------------------------------------------

    def folders(self) -> list[SourceItem]:
        """The top-level mail folders."""
        if self._folders is None:
            listing = self.graph.listing("/me/mailFolders", "listing the mail folders", {"$top": PAGE_SIZE})
            self._folders = [SourceItem(id=str(f["id"]), name=str(f.get("displayName") or f["id"]),
                                        kind="mailFolder", container=True, path=str(f.get("displayName") or ""))
                             for f in listing.items if f.get("id")]
        return self._folders

    def folder_id(self, folder: str | None) -> str:
        """A folder as Graph names it: a well-known name (inbox, sentitems …), a display name
        ("Sent Items", "Projects") or an id."""
        wanted = (folder or "inbox").strip() or "inbox"
        compact = wanted.lower().replace(" ", "")
        if compact in WELL_KNOWN_FOLDERS:
            return compact
        named = next((f for f in self.folders() if f.name.lower() == wanted.lower()), None)
        return named.id if named is not None else wanted

    # --- reading ----------------------------------------------------------------------------------

    def _message(self, raw: dict[str, Any], folder: str) -> Message:
        attachments = tuple(
            Attachment(id=str(a["id"]), name=str(a.get("name") or "attachment"),
                       mime_type=str(a.get("contentType") or "application/octet-stream"), size=int(a.get("size") or 0))
            for a in raw.get("attachments") or []
            if isinstance(a, dict) and a.get("id") and not a.get("isInline")
            and a.get("@odata.type") != "#microsoft.graph.referenceAttachment")
        body = raw.get("body") if isinstance(raw.get("body"), dict) else {}
        mail = Mail(id=str(raw["id"]), folder=folder or str(raw.get("parentFolderId") or ""),
                    sender=_address(raw.get("from")), to=tuple(_address(r) for r in raw.get("toRecipients") or []),
                    cc=tuple(_address(r) for r in raw.get("ccRecipients") or []), subject=str(raw.get("subject") or ""),
                    body=str(body.get("content") or ""),
                    received_at=_when(raw.get("receivedDateTime")) or datetime.fromtimestamp(0, UTC),
                    attachments=attachments)
        return Message(mail, bool(raw.get("isRead")), str(raw.get("webLink") or ""), bool(raw.get("isDraft")))

    def messages(self, folder: str | None = "inbox", limit: int = 25, query: str | None = None,
                 unread_only: bool = False, since: datetime | None = None) -> list[Message]:
        """The newest mails of `folder` (None: the whole mailbox), newest first, at most `limit`.

        Args:
            query: Words to search for (Outlook's search: subject, body, sender, attachment names).
            unread_only: Only unread mails.
            since: Only mails received at or after this moment.
        """
        folder_id = self.folder_id(folder) if folder else None
        path = f"/me/mailFolders/{_q(folder_id)}/messages" if folder_id else "/me/messages"
        params: dict[str, Any] = {"$select": MESSAGE_SELECT, "$expand": f"attachments($select={ATTACHMENT_SELECT})",
                                  "$top": min(max(limit, 10), PAGE_SIZE)}
        keep: Callable[[dict[str, Any]], bool] = lambda _raw: True  # noqa: E731
        if query:
            # Graph takes $search without $filter or $orderby (its results come newest first):
            # the other conditions are applied here.
            params["$search"] = '"' + query.replace('"', " ").replace("\\", " ") + '"'
            keep = lambda raw: (not unread_only or not raw.get("isRead")) and (  # noqa: E731
                since is None or (_when(raw.get("receivedDateTime")) or since) >= since)
        else:
            # With $orderby, Graph wants the sorted property first in $filter.
            conditions = [f"receivedDateTime ge {_iso(since) if since else EVER}"]
            if unread_only:
                conditions.append("isRead eq false")
            params["$filter"] = " and ".join(conditions)
            params["$orderby"] = "receivedDateTime desc"
        what = f"listing the mails of '{folder}'" if folder else "searching the mailbox"
        found: list[Message] = []
        for page in self.graph.pages(path, what, params, {"Prefer": TEXT_BODY}):
            for raw in page.get("value") or []:
                if isinstance(raw, dict) and raw.get("id") and keep(raw):
                    found.append(self._message(raw, folder or ""))
                    if len(found) >= limit:
                        return found
        return found

    def list(self, folder: str, limit: int = 25, query: str | None = None) -> list[Mail]:
        return [m.mail for m in self.messages(folder, limit, query)]

    def message(self, mail_id: str) -> Message:
        """One mail (NotFound-like ConnectionFailed naming it when Outlook has no such mail)."""
        try:
            raw = self.graph.get(f"/me/messages/{_q(mail_id)}", "reading a mail",
                                 {"$select": MESSAGE_SELECT, "$expand": f"attachments($select={ATTACHMENT_SELECT})"},
                                 {"Prefer": TEXT_BODY})
        except GraphError as exc:
            if exc.not_found:
                raise ConnectionFailed(f"there is no mail {mail_id} in {self.account}'s mailbox") from None
            raise
        return self._message(raw, "")

    def get(self, mail_id: str) -> Mail:
        return self.message(mail_id).mail

    def attachment(self, mail_id: str, attachment_id: str) -> tuple[str, str, bytes]:
        """Name, type and content of one attachment; one over POWERON_FILE_MAX_BYTES is refused
        before any of it is downloaded."""
        base = f"/me/messages/{_q(mail_id)}/attachments/{_q(attachment_id)}"
        try:
            meta = self.graph.get(base, "reading an attachment", {"$select": "id,name,contentType,size"})
        except GraphError as exc:
            if exc.not_found:
                raise ConnectionFailed(f"mail {mail_id} has no attachment {attachment_id}") from None
            raise
        name = str(meta.get("name") or "attachment")
        size = int(meta.get("size") or 0)
        if size > get_settings().file_max_bytes:
            raise ConnectionFailed(_too_large(f"the attachment '{name}'", size))
        data = self.graph.content(base + "/$value", f"downloading the attachment '{name}'",
                                  get_settings().file_max_bytes, _too_large(f"the attachment '{name}'"))
        return name, str(meta.get("contentType") or "application/octet-stream"), data

    # --- new mail since a cursor (Graph delta query) ----------------------------------------------

    def since(self, folder: str, cursor: str | None) -> MailPage:
        folder_id = self.folder_id(folder)
        state = _Cursor.load(cursor)
        if state is None:
            now = _iso(self._server_now(folder_id))
            return MailPage([], _Cursor(folder_id, None, now, [], now, []).dump())
        if state.folder != folder_id:  # the folder changed: start over there from the watermark
            state = _Cursor(folder_id, None, state.after, state.seen, state.after, [])
        found: list[dict[str, Any]] = []
        restarted = state.link is None
        link = state.link or self._delta_start(folder_id, state.after)
        pages = 0
        while True:
            try:
                page = self.graph.get(link, f"looking for new mail in '{folder}'", None, self._delta_headers())
            except GraphError as exc:
                if restarted or exc.status not in (400, 404, 410):
                    raise
                # The delta link expired (410 syncStateNotFound …): a new round from the watermark.
                restarted, link = True, self._delta_start(folder_id, state.after)
                continue
            pages += 1
            for raw in page.get("value") or []:
                if isinstance(raw, dict) and raw.get("id") and "@removed" not in raw and \
                        state.report(str(raw.get("receivedDateTime") or ""), str(raw["id"])):
                    found.append(raw)
            delta, following = page.get("@odata.deltaLink"), page.get("@odata.nextLink")
            if isinstance(delta, str):
                state.end_round(delta)
                break
            if not isinstance(following, str) or pages >= get_settings().graph_max_pages:
                state.link = following if isinstance(following, str) else None
                break
            link = following
        found.sort(key=lambda r: (str(r.get("receivedDateTime") or ""), str(r["id"])))
        return MailPage([self._with_attachments(raw, folder) for raw in found], state.dump())

    def _delta_headers(self) -> dict[str, str]:
        return {"Prefer": f"odata.maxpagesize={DELTA_PAGE_SIZE}, {TEXT_BODY}"}

    def _delta_start(self, folder_id: str, after: str) -> str:
        """The first request of a delta round over mails received from `after` on (as a URL)."""
        query = urlencode({"$filter": f"receivedDateTime ge {after}", "$select": MESSAGE_SELECT})
        return f"{self.graph.base}/me/mailFolders/{_q(folder_id)}/messages/delta?{query}"

    def _server_now(self, folder_id: str) -> datetime:
        """Graph's clock (the Date of its answer), so that a mail is never missed for a skewed clock;
        the request also proves the folder exists."""
        try:
            response = self.graph.request("GET", f"/me/mailFolders/{_q(folder_id)}",
                                          f"opening the mail folder '{folder_id}'", params={"$select": "id"})
        except GraphError as exc:
            if exc.not_found:
                raise ConnectionFailed(f"{self.account}'s mailbox has no folder '{folder_id}'") from None
            raise
        date = response.headers.get("Date")
        parsed = email.utils.parsedate_to_datetime(date) if date else None
        return parsed if parsed is not None else datetime.now(UTC)

    def _with_attachments(self, raw: dict[str, Any], folder: str) -> Mail:
        if raw.get("hasAttachments") and "attachments" not in raw:  # delta answers expand nothing
            listing = self.graph.listing(f"/me/messages/{_q(str(raw['id']))}/attachments",
                                         "listing the attachments of a mail", {"$select": ATTACHMENT_SELECT})
            raw = {**raw, "attachments": listing.items}
        return self._message(raw, folder).mail

    # --- writing ----------------------------------------------------------------------------------

    def _payload(self, mail: OutgoingMail) -> dict[str, Any]:
        total = sum(len(data) for _n, _t, data in mail.attachments)
        if total > SEND_ATTACHMENTS_MAX:
            raise ConnectionFailed(f"the attachments come to {_human(total)}; Microsoft Graph takes at most "
                                   f"{_human(SEND_ATTACHMENTS_MAX)} of attachments with one mail")
        if not mail.to:
            raise ConnectionFailed("the mail has no recipient")
        return {
            "subject": mail.subject,
            "body": {"contentType": "HTML" if mail.html else "Text", "content": mail.body},
            "toRecipients": [_recipient(t) for t in mail.to],
            "ccRecipients": [_recipient(c) for c in mail.cc],
            "attachments": [{"@odata.type": "#microsoft.graph.fileAttachment", "name": name, "contentType": kind,
                             "contentBytes": base64.b64encode(data).decode("ascii")}
                            for name, kind, data in mail.attachments],
        }

    def send(self, mail: OutgoingMail) -> str:
        """Send through Outlook (`POST /me/sendMail`, saved to Sent Items)."""
        payload = self._payload(mail)
        self.graph.post("/me/sendMail", "sending the mail", {"message": payload, "saveToSentItems": True})
        count = len(mail.to) + len(mail.cc)
        return f"sent to {count} recipient{'s' if count != 1 else ''} through Microsoft 365 as {self.account}"

    def draft(self, mail: OutgoingMail) -> Message:
        """Save a draft in the Drafts folder (`POST /me/messages`)."""
        raw = self.graph.post("/me/messages", "saving the draft", self._payload(mail)) or {}
        if not raw.get("id"):
            raise ConnectionFailed("Microsoft Graph saved the draft without telling its id")
        return self._message(raw, "drafts")

    def send_draft(self, draft_id: str) -> str:
        """Send a saved draft (`POST /me/messages/{id}/send`)."""
        found = self.message(draft_id)
        if not found.is_draft:
            raise ConnectionFailed(f"mail {draft_id} ('{found.mail.subject}') is not a draft: it was sent already")
        self.graph.post(f"/me/messages/{_q(draft_id)}/send", "sending the draft")
        count = len(found.mail.to) + len(found.mail.cc)
        return (f"sent '{found.mail.subject}' to {count} recipient{'s' if count != 1 else ''} through "
                f"Microsoft 365 as {self.account}")


# --- files (SharePoint) -----------------------------------------------------------------------------


def _split_id(item_id: str) -> tuple[str, str, str]:
    """(kind, drive or site id, item id) of an id this connector handed out."""
    kind, _, rest = (item_id or "").partition(":")
    if kind == "site" and rest:
        return kind, rest, ""
    if kind == "drive" and rest:
        return kind, rest, ""
    drive, _, item = rest.partition(":")
    if kind in ("folder", "file") and drive and item:
        return kind, drive, item
    raise ConnectionFailed(f"'{item_id}' is not a SharePoint id of this connection (ids look like site:…, drive:…, "
                           "folder:… or file:…, as listings return them)")


def _check_name(name: str) -> str:
    cleaned = (name or "").strip()
    bad = sorted({c for c in cleaned if c in FORBIDDEN_NAME_CHARS or ord(c) < 32})
    if not cleaned or cleaned in (".", "..") or bad:
        shown = " ".join(repr(c) for c in bad)
        raise ConnectionFailed(f"'{name}' cannot be a SharePoint file name" + (f" (it holds {shown})" if bad else ""))
    return cleaned


class GraphFiles(FileAccess):
    """The SharePoint sites, document libraries and files one Microsoft 365 connection reaches."""

    def __init__(self, credentials: Credentials, graph: GraphClient | None = None):
        self.credentials = credentials
        self.graph = graph or graph_for(credentials)
        self._drive_names: dict[str, str] = {}
        self._web_urls: dict[str, str] = {}
        self._sites: dict[str, dict[str, Any]] = {}

    def close(self) -> None:
        self.graph.close()

    # --- conversions ------------------------------------------------------------------------------

    @staticmethod
    def site_item(raw: dict[str, Any]) -> SourceItem:
        name = str(raw.get("displayName") or raw.get("name") or raw.get("id"))
        return SourceItem(id=f"site:{raw['id']}", name=name, kind="site", container=True,
                          modified=_when(raw.get("lastModifiedDateTime")), path=f"/{name}")

    def drive_item(self, raw: dict[str, Any]) -> SourceItem:
        self._drive_names[str(raw["id"])] = str(raw.get("name") or "")
        self._web_urls[str(raw["id"])] = str(raw.get("webUrl") or "")
        return SourceItem(id=f"drive:{raw['id']}", name=str(raw.get("name") or raw["id"]), kind="drive",
                          container=True, modified=_when(raw.get("lastModifiedDateTime")), path=f"/{raw.get('name')}")

    def item(self, raw: dict[str, Any], drive_id: str) -> SourceItem:
        """A file or folder of a document library."""
        is_folder = "folder" in raw or "package" in raw
        parent = raw.get("parentReference") if isinstance(raw.get("parentReference"), dict) else {}
        drive_id = str(parent.get("driveId") or drive_id)
        where = str(parent.get("path") or "")
        inside = unquote(where.split("root:", 1)[1]) if "root:" in where else ""
        parts = [self._drive_name(drive_id), *[p for p in inside.split("/") if p], str(raw.get("name") or "")]
        file = raw.get("file") if isinstance(raw.get("file"), dict) else {}
        return SourceItem(id=f"{'folder' if is_folder else 'file'}:{drive_id}:{raw['id']}",
                          name=str(raw.get("name") or raw["id"]), kind="folder" if is_folder else "file",
                          container=is_folder, size=None if is_folder else int(raw.get("size") or 0),
                          modified=_when(raw.get("lastModifiedDateTime")),
                          mime_type=None if is_folder else str(file.get("mimeType") or "application/octet-stream"),
                          path="/" + "/".join(p for p in parts if p))

    def _drive_name(self, drive_id: str) -> str:
        if drive_id not in self._drive_names:
            try:
                raw = self.graph.get(f"/drives/{_q(drive_id)}", "reading a document library", {"$select": "id,name"})
                self._drive_names[drive_id] = str(raw.get("name") or "")
            except GraphError:
                self._drive_names[drive_id] = ""
        return self._drive_names[drive_id]

    # --- sites and paths --------------------------------------------------------------------------

    def sites(self, query: str | None = None, limit: int | None = None) -> list[SourceItem]:
        """The sites the account reaches whose name matches `query` (None: all)."""
        listing = self.graph.listing("/sites", "listing the SharePoint sites", {"search": query or "*"}, limit)
        for raw in listing.items:
            self._sites[str(raw.get("id"))] = raw
        return [self.site_item(raw) for raw in listing.items if raw.get("id")]

    def site(self, reference: str) -> dict[str, Any]:
        """A site by its id (`site:…` or Graph's `host,guid,guid`) or its name."""
        wanted = (reference or "").strip()
        if not wanted:
            raise ConnectionFailed("name a SharePoint site (its name or id)")
        site_id = wanted[len("site:"):] if wanted.startswith("site:") else wanted if "," in wanted else None
        if site_id is not None:
            if site_id not in self._sites:
                try:
                    self._sites[site_id] = self.graph.get(f"/sites/{_q(site_id)}", "reading a SharePoint site")
                except GraphError as exc:
                    if exc.not_found:
                        raise ConnectionFailed(f"there is no SharePoint site {site_id} (or the account may not "
                                               "open it)") from None
                    raise
            return self._sites[site_id]
        found = self.graph.listing("/sites", "looking for a SharePoint site", {"search": wanted}).items
        exact = [s for s in found if wanted.lower() in (str(s.get("displayName") or "").lower(),
                                                       str(s.get("name") or "").lower())]
        matches = exact or found
        if len(matches) == 1:
            self._sites[str(matches[0]["id"])] = matches[0]
            return matches[0]
        if not matches:
            raise ConnectionFailed(f"no SharePoint site matches '{wanted}'")
        names = ", ".join(str(s.get("displayName") or s.get("name")) for s in matches[:10])
        raise ConnectionFailed(f"several SharePoint sites match '{wanted}' ({names}): name one exactly or use its id")

    def libraries(self, site: dict[str, Any]) -> list[SourceItem]:
        listing = self.graph.listing(f"/sites/{_q(str(site['id']))}/drives", "listing the document libraries")
        return [self.drive_item(raw) for raw in listing.items if raw.get("id")]

    def resolve(self, site_reference: str, path: str | None) -> SourceItem:
        """The site, library, folder or file at `path` in a site: "/" is the site (its libraries),
        "/Documents/Reports" a folder of its library "Documents"; a path whose first part names no
        library is looked up in the site's only library.

        Raises:
            ConnectionFailed: no such site, library or item (saying which part is missing).
        """
        site = self.site(site_reference)
        site_name = str(site.get("displayName") or site.get("name") or site["id"])
        parts = [p for p in (path or "").replace("\\", "/").split("/") if p.strip()]
        if not parts:
            return self.site_item(site)
        libraries = self.libraries(site)
        library = next((lib for lib in libraries if parts[0].lower() in (lib.name.lower(),
                        self._library_url_name(lib).lower())), None)
        if library is not None:
            parts = parts[1:]
        elif len(libraries) == 1:
            library = libraries[0]
        else:
            names = ", ".join(lib.name for lib in libraries) or "none"
            raise ConnectionFailed(f"site '{site_name}' has no document library '{parts[0]}' (its libraries: {names})")
        drive_id = _split_id(library.id)[1]
        if not parts:
            return library
        inside = "/".join(_q(p.strip()) for p in parts)
        try:
            raw = self.graph.get(f"/drives/{_q(drive_id)}/root:/{inside}", f"opening '{path}' in site '{site_name}'")
        except GraphError as exc:
            if exc.not_found:
                raise ConnectionFailed(f"'{path}' does not exist in site '{site_name}' (library '{library.name}')") \
                    from None
            raise
        return self.item(raw, drive_id)

    def _library_url_name(self, library: SourceItem) -> str:
        """The library's name in its web address ("Shared Documents" for "Documents")."""
        web = self._web_urls.get(_split_id(library.id)[1], "")
        return unquote(urlsplit(web).path.rstrip("/").rsplit("/", 1)[-1]) if web else library.name

    # --- FileAccess -------------------------------------------------------------------------------

    def browse(self, container_id: str | None = None) -> list[SourceItem]:
        """Sites (None), a site's libraries, or a library's or folder's files and folders."""
        return self.browse_listing(container_id)[0]

    def browse_listing(self, container_id: str | None = None) -> tuple[list[SourceItem], bool]:
        """As browse, and whether more entries exist than POWERON_GRAPH_MAX_PAGES pages held."""
        if not container_id:
            listing = self.graph.listing("/sites", "listing the SharePoint sites", {"search": "*"})
            return [self.site_item(r) for r in listing.items if r.get("id")], listing.more
        kind, owner, item = _split_id(container_id)
        if kind == "site":
            return self.libraries(self.site("site:" + owner)), False
        if kind == "file":
            raise ConnectionFailed(f"'{container_id}' is a file, not a folder")
        path = f"/drives/{_q(owner)}/root/children" if kind == "drive" else \
            f"/drives/{_q(owner)}/items/{_q(item)}/children"
        try:
            listing = self.graph.listing(path, "listing a SharePoint folder", {"$top": CHILDREN_PAGE_SIZE})
        except GraphError as exc:
            if exc.not_found:
                raise ConnectionFailed(f"the SharePoint folder {container_id} does not exist (any more)") from None
            raise
        return [self.item(r, owner) for r in listing.items if r.get("id")], listing.more

    def search(self, query: str, container_id: str | None = None, limit: int = 25) -> list[SourceItem]:
        """Files and folders whose name or content match `query`: in a library or folder, in every
        library of a site, or (None) in every site's libraries (at most POWERON_GRAPH_MAX_PAGES
        libraries are searched)."""
        if not (query or "").strip():
            raise ConnectionFailed("say what to search for")
        term = _q(query.strip().replace("'", "''"))
        if container_id:
            kind, owner, item = _split_id(container_id)
        else:
            kind, owner, item = "all", "", ""
        if kind in ("drive", "folder"):
            where = "root" if kind == "drive" else f"items/{_q(item)}"
            return self._search_drive(owner, where, term, limit)
        if kind == "file":
            raise ConnectionFailed(f"'{container_id}' is a file: search in its folder or library")
        sites = [self.site("site:" + owner)] if kind == "site" else \
            self.graph.listing("/sites", "listing the SharePoint sites", {"search": "*"}).items
        found: list[SourceItem] = []
        searched = 0
        for site in sites:
            for library in self.libraries(site):
                if len(found) >= limit or searched >= get_settings().graph_max_pages:
                    return found[:limit]
                searched += 1
                found += self._search_drive(_split_id(library.id)[1], "root", term, limit - len(found))
        return found[:limit]

    def _search_drive(self, drive_id: str, where: str, term: str, limit: int) -> list[SourceItem]:
        listing = self.graph.listing(f"/drives/{_q(drive_id)}/{where}/search(q='{term}')",
                                     "searching SharePoint", {"$top": min(max(limit, 10), PAGE_SIZE)}, limit)
        return [self.item(self._located(r, drive_id), drive_id) for r in listing.items if r.get("id")]

    def _located(self, raw: dict[str, Any], drive_id: str) -> dict[str, Any]:
        """A search hit with its folder: Graph's search answers often lack `parentReference.path`."""
        parent = raw.get("parentReference") if isinstance(raw.get("parentReference"), dict) else {}
        if parent.get("path"):
            return raw
        try:
            return self.graph.get(f"/drives/{_q(str(parent.get('driveId') or drive_id))}/items/{_q(str(raw['id']))}",
                                  "locating a search hit", {"$select": "id,name,size,file,folder,parentReference,"
                                                                       "lastModifiedDateTime"})
        except GraphError:
            return raw

    def describe(self, item_id: str) -> dict[str, Any]:
        """The Graph driveItem of a file or folder id."""
        kind, drive, item = _split_id(item_id)
        if kind not in ("file", "folder"):
            raise ConnectionFailed(f"'{item_id}' is a {kind}, not a file")
        try:
            return self.graph.get(f"/drives/{_q(drive)}/items/{_q(item)}", "reading a SharePoint file")
        except GraphError as exc:
            if exc.not_found:
                raise ConnectionFailed(f"the SharePoint file {item_id} does not exist (any more)") from None
            raise

    def download(self, item_id: str) -> tuple[str, str, bytes]:
        """Name, type and content of a file; one over POWERON_FILE_MAX_BYTES is refused before any
        of it is downloaded."""
        raw = self.describe(item_id)
        name = str(raw.get("name") or "file")
        if "folder" in raw:
            raise ConnectionFailed(f"'{name}' is a folder, not a file")
        size = int(raw.get("size") or 0)
        if size > get_settings().file_max_bytes:
            raise ConnectionFailed(_too_large(f"the file '{name}'", size))
        _kind, drive, item = _split_id(item_id)
        data = self.graph.content(f"/drives/{_q(drive)}/items/{_q(item)}/content", f"downloading '{name}'",
                                  get_settings().file_max_bytes, _too_large(f"the file '{name}'"))
        file = raw.get("file") if isinstance(raw.get("file"), dict) else {}
        return name, str(file.get("mimeType") or "application/octet-stream"), data

    def upload(self, container_id: str, name: str, content: bytes, mime_type: str, overwrite: bool = False
               ) -> SourceItem:
        """Store a file in a library or folder; an existing name is refused unless `overwrite`."""
        kind, drive, item = _split_id(container_id)
        if kind not in ("drive", "folder"):
            raise ConnectionFailed(f"'{container_id}' is a {kind}: upload into a library or folder")
        cleaned = _check_name(name)
        if len(content) > SIMPLE_UPLOAD_MAX:
            raise ConnectionFailed(f"'{cleaned}' is {_human(len(content))}; Microsoft Graph takes at most "
                                   f"{_human(SIMPLE_UPLOAD_MAX)} in one upload")
        parent = "root" if kind == "drive" else _q(item)
        try:
            raw = self.graph.put(f"/drives/{_q(drive)}/items/{parent}:/{_q(cleaned)}:/content",
                                 f"uploading '{cleaned}'", content, mime_type or "application/octet-stream",
                                 {"@microsoft.graph.conflictBehavior": "replace" if overwrite else "fail"})
        except GraphError as exc:
            if exc.status == 409 or exc.code == "nameAlreadyExists":
                raise ConnectionFailed(f"a file named '{cleaned}' already exists there: upload with overwrite to "
                                       "replace it") from None
            if exc.not_found:
                raise ConnectionFailed(f"the SharePoint folder {container_id} does not exist (any more)") from None
            raise
        return self.item(raw, drive)


def _renew_due(credentials: Credentials) -> None:
    """Refresh the connection's access token now if it expires within five minutes."""
    OAuthTokens(credentials, PROVIDER).access_token()


def _mail(credentials: Credentials) -> GraphMail:
    return GraphMail(credentials)


def _files(credentials: Credentials) -> GraphFiles:
    return GraphFiles(credentials)


MSFT = register_connection_type(ConnectionType(
    id=TYPE_ID, label=LABEL,
    description="Outlook mail and SharePoint files of a Microsoft 365 account, connected by signing in at "
                "Microsoft (consent); nothing but the granted tokens is stored.",
    auth="oauth", check=check, unavailable=unavailable, mail=_mail, files=_files, oauth=PROVIDER,
    renew_due=_renew_due,
))
