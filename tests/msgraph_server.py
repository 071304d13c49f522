"""A Microsoft identity platform + Microsoft Graph stand-in on 127.0.0.1 for the Microsoft 365 tests.

It speaks the real protocol on the real paths, with Graph's payload shapes and error bodies:

- identity platform: `GET /{tenant}/oauth2/v2.0/authorize` shows a consent page (a real form with
  "Accept" and "Cancel" buttons a browser test clicks; `deny = True` refuses at once with
  `error=access_denied`), the form's POST redirects back with `code` and `state`;
  `POST /{tenant}/oauth2/v2.0/token` takes `authorization_code` (PKCE S256 verified, redirect URI
  checked, single use) and `refresh_token` (rotated: a refresh token works once), with the client
  authenticated by id + secret (form or Basic); refused grants answer `invalid_grant`. A token is for
  one resource: Graph, or Outlook's mail servers (`https://outlook.office.com/IMAP.AccessAsUser.All`,
  `…/SMTP.Send`, issued on a refresh grant asking for those consented scopes: XOAUTH2 for IMAP and
  SMTP); scopes of two resources in one token request answer AADSTS28000, scopes never consented
  AADSTS65001. Graph refuses Outlook tokens; the test mail servers check theirs with
  :meth:`MsGraph.outlook_user` (in process) or `POST /test/outlook-tokens` (another process; a
  test-only route: Exchange checks its tokens itself).
- Graph v1.0: `/me`; mail folders; messages of a folder or the mailbox with `$filter`
  (receivedDateTime ge/gt/le/lt, isRead, hasAttachments; the `$orderby` property must come first,
  as Graph's InefficientFilter rule wants), `$search`, `$top`, `$skip`, `$orderby`, `$select`,
  `$expand=attachments(...)`, `@odata.nextLink`; delta (`…/messages/delta`, `Prefer:
  odata.maxpagesize`, `@odata.deltaLink`, 410 for an outdated sync state); `Prefer:
  outlook.body-content-type="text"`; `/me/sendMail`; drafts (`POST /me/messages`, `…/send`);
  attachments (`contentBytes`, `/$value`); sites (`/sites?search=`), drives, children, items by
  path, `…/content` (GET answers 302 to a pre-authenticated download URL; PUT uploads with
  `@microsoft.graph.conflictBehavior`), `search(q='…')`.
- Bearer tokens are checked: an expired one (a short `access_token_lifetime`, or
  `expire_access_tokens()`) answers 401 InvalidAuthenticationToken. `fail_next(n, 429, "1")` makes
  the next n Graph calls answer 429 (or 503) with Retry-After.

Tests fill it with `add_mail`, `add_mails`, `add_site`, `add_library`, `add_file`, read what happened
from `requests`, `token_requests`, `sent` and `consents`, and run it with :func:`serve`.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import secrets
import threading
import uuid
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

TENANT = "contoso-test"
WELL_KNOWN = {"inbox": "Inbox", "drafts": "Drafts", "sentitems": "Sent Items", "deleteditems": "Deleted Items",
              "junkemail": "Junk Email", "archive": "Archive"}
DEFAULT_USER = {"id": "5f2c5e6a-1b2c-4d3e-8f90-0a1b2c3d4e5f", "displayName": "Anna Meier", "givenName": "Anna",
                "surname": "Meier", "mail": "anna.meier@contoso.example",
                "userPrincipalName": "anna.meier@contoso.example"}
MESSAGES_PAGE = 10
DELTA_PAGE = 10
CHILDREN_PAGE = 200
REQUEST_MAX = 4 * 1024 * 1024  # Graph refuses larger request bodies with 413
ATTACHMENT_PROPS = ("id", "lastModifiedDateTime", "name", "contentType", "size", "isInline", "contentId",
                    "contentBytes")


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


OIDC_SCOPES = frozenset({"openid", "profile", "email", "offline_access"})
OUTLOOK = "https://outlook.office.com/"


def _resource(scope: str) -> str:
    """The resource a scope belongs to: Outlook's for `https://outlook.office.com/…`, else Graph."""
    return OUTLOOK if scope.startswith(OUTLOOK) else "https://graph.microsoft.com/"


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _token(payload: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")


def _untoken(text: str) -> dict[str, Any] | None:
    try:
        return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, TypeError):
        return None


def _graph_id(prefix: str = "AAMkAG") -> str:
    return prefix + base64.urlsafe_b64encode(secrets.token_bytes(24)).decode().rstrip("=")


class GraphFault(Exception):
    """An error answer of Graph: status, code, message (and headers)."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def _not_found(what: str = "The resource could not be found.", code: str = "itemNotFound") -> GraphFault:
    return GraphFault(404, code, what)


@dataclass
class StoredMail:
    id: str
    folder: str
    subject: str
    body: str
    body_type: str
    sender: tuple[str, str]
    to: list[tuple[str, str]]
    cc: list[tuple[str, str]]
    received: datetime
    is_read: bool
    is_draft: bool
    attachments: list[dict[str, Any]]
    seq: int


@dataclass
class DriveNode:
    id: str
    drive: str
    name: str
    parent: str | None
    folder: bool
    data: bytes = b""
    mime: str = "application/octet-stream"
    created: datetime = field(default_factory=_now)
    modified: datetime = field(default_factory=_now)


@dataclass
class MsGraph:
    """The stand-in's data and switches (one Microsoft 365 tenant, one user).

    Args:
        client_id: The only app registration it knows.
        client_secret: Its secret.
        redirect_uri: The only redirect URI registered for it.
    """

    client_id: str
    client_secret: str
    redirect_uri: str
    tenant: str = TENANT
    url: str = ""  # set by serve
    user: dict[str, Any] = field(default_factory=dict)
    access_token_lifetime: int = 3600
    deny: bool = False
    lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Empty mailbox and sites, the default user (Anna Meier), default switches."""
        with self.lock:
            self.user = dict(DEFAULT_USER)
            self.deny = False
            self.access_token_lifetime = 3600
            self.codes: dict[str, dict[str, Any]] = {}
            self.access_tokens: dict[str, float] = {}  # token → expiry (epoch)
            self.refresh_tokens: dict[str, str] = {}  # token → "valid" | "used" | "revoked"
            self.grants: dict[str, str] = {}  # refresh token → the scopes consented (space-separated)
            self.outlook_tokens: dict[str, tuple[float, str]] = {}  # Outlook token → (expiry, user principal)
            self.issued: list[str] = []  # every token handed out (tests look for leaks)
            self.issued_codes: list[str] = []  # authorization codes (in the callback URL by design)
            self.token_requests: list[dict[str, str]] = []
            self.requests: list[tuple[str, str, dict[str, str]]] = []
            self.consents: list[dict[str, str]] = []
            self.failures: deque[tuple[int, str | None]] = deque()
            self.folders: dict[str, dict[str, Any]] = {
                key: {"id": _graph_id("AQMkAD"), "displayName": name, "wellKnown": key}
                for key, name in WELL_KNOWN.items()}
            self.mails: dict[str, StoredMail] = {}
            self.seq = 0
            self.delta_generation = 1
            self.sent: list[dict[str, Any]] = []
            self.sites: dict[str, dict[str, Any]] = {}
            self.drives: dict[str, dict[str, Any]] = {}
            self.nodes: dict[str, DriveNode] = {}
            self.downloads: dict[str, str] = {}

    # --- switches for tests ---------------------------------------------------------------------

    def fail_next(self, count: int, status: int = 429, retry_after: str | None = "1") -> None:
        """The next `count` Graph calls answer `status` (429 or 503) with this Retry-After."""
        with self.lock:
            self.failures.extend([(status, retry_after)] * count)

    def expire_access_tokens(self) -> None:
        """Every access token issued so far is expired (Graph answers 401)."""
        with self.lock:
            for token in self.access_tokens:
                self.access_tokens[token] = 0
            self.outlook_tokens = {token: (0, user) for token, (_expiry, user) in self.outlook_tokens.items()}

    def consent_without(self, *scopes: str) -> None:
        """Every refresh token so far carries a consent without `scopes` (one given before the app asked
        for them)."""
        with self.lock:
            self.grants = {token: " ".join(s for s in granted.split() if s not in scopes)
                           for token, granted in self.grants.items()}

    def outlook_user(self, token: str) -> str | None:
        """The user principal an unexpired Outlook (IMAP/SMTP) access token was issued to, else None."""
        with self.lock:
            expiry, user = self.outlook_tokens.get(token, (0.0, ""))
        return user if expiry > _now().timestamp() else None

    def revoke_refresh_tokens(self) -> None:
        """Every refresh token stops working (the user revoked the app, changed the password …)."""
        with self.lock:
            for token in self.refresh_tokens:
                self.refresh_tokens[token] = "revoked"

    def invalidate_delta(self) -> None:
        """Delta links handed out so far answer 410 (the sync state is gone)."""
        with self.lock:
            self.delta_generation += 1

    def graph_calls(self, method: str = "GET", contains: str = "") -> int:
        with self.lock:
            return sum(1 for m, path, _q in self.requests if m == method and contains in path)

    # --- mail data ------------------------------------------------------------------------------

    def folder_key(self, folder: str) -> str:
        wanted = folder.lower()
        if wanted in self.folders:
            return wanted
        for key, value in self.folders.items():
            if value["id"] == folder:
                return key
        raise _not_found("The specified folder could not be found in the store.", "ErrorItemNotFound")

    def add_mail(self, subject: str = "Hello", body: str = "Hi there", folder: str = "inbox",
                 sender: tuple[str, str] = ("Bob Sender", "bob@fabrikam.example"),
                 to: list[tuple[str, str]] | None = None, received: datetime | None = None, is_read: bool = False,
                 attachments: list[tuple[str, str, bytes]] | None = None, body_type: str = "html",
                 inline: list[tuple[str, str, bytes]] | None = None) -> str:
        """Deliver a mail (attachments as (name, type, bytes); `inline` ones are embedded images)."""
        with self.lock:
            self.seq += 1
            mail = StoredMail(
                id=_graph_id(), folder=self.folder_key(folder), subject=subject,
                body=f"<html><body><p>{html.escape(body)}</p></body></html>" if body_type == "html" else body,
                body_type=body_type, sender=sender, to=to or [(self.user["displayName"], self.user["mail"])], cc=[],
                received=(received or _now()).astimezone(UTC).replace(microsecond=0), is_read=is_read,
                is_draft=False, attachments=[], seq=self.seq)
            for name, kind, data in attachments or []:
                mail.attachments.append(self._attachment(name, kind, data, False))
            for name, kind, data in inline or []:
                mail.attachments.append(self._attachment(name, kind, data, True))
            self.mails[mail.id] = mail
            return mail.id

    @staticmethod
    def _attachment(name: str, kind: str, data: bytes, inline: bool) -> dict[str, Any]:
        return {"id": _graph_id("AAMkAGAtt"), "name": name, "contentType": kind, "data": data, "isInline": inline,
                "lastModifiedDateTime": _iso(_now())}

    def add_mails(self, count: int, folder: str = "inbox", start: datetime | None = None) -> None:
        """`count` plain mails, one a minute before `start` (default: now), newest last."""
        start = start or _now()
        for index in range(count):
            self.add_mail(subject=f"Bulk mail {index + 1}", body=f"Bulk body {index + 1}", folder=folder,
                          received=start - timedelta(minutes=count - index), body_type="text")

    def mark_read(self, mail_id: str) -> None:
        """A change Outlook reports in the next delta (the mail is not new)."""
        with self.lock:
            self.seq += 1
            self.mails[mail_id].is_read = True
            self.mails[mail_id].seq = self.seq

    # --- SharePoint data ------------------------------------------------------------------------

    def add_site(self, display_name: str, name: str | None = None, description: str = "") -> str:
        with self.lock:
            url_name = name or display_name.replace(" ", "")
            site_id = f"contoso.sharepoint.com,{uuid.uuid4()},{uuid.uuid4()}"
            self.sites[site_id] = {
                "id": site_id, "name": url_name, "displayName": display_name, "description": description,
                "webUrl": f"https://contoso.sharepoint.com/sites/{url_name}", "createdDateTime": _iso(_now()),
                "lastModifiedDateTime": _iso(_now())}
            return site_id

    def add_library(self, site_id: str, name: str = "Documents", url_name: str = "Shared Documents") -> str:
        with self.lock:
            drive_id = "b!" + base64.urlsafe_b64encode(secrets.token_bytes(30)).decode().rstrip("=")
            root = DriveNode(id=_graph_id("01BYE5RZ"), drive=drive_id, name="root", parent=None, folder=True)
            self.nodes[root.id] = root
            self.drives[drive_id] = {"id": drive_id, "name": name, "driveType": "documentLibrary", "site": site_id,
                                     "root": root.id, "webUrl": f"{self.sites[site_id]['webUrl']}/{quote(url_name)}",
                                     "createdDateTime": _iso(_now()), "lastModifiedDateTime": _iso(_now())}
            return drive_id

    def add_folder(self, drive_id: str, path: str) -> str:
        with self.lock:
            return self._folder_at(drive_id, [p for p in path.split("/") if p], create=True).id

    def add_file(self, drive_id: str, path: str, data: bytes, mime: str = "application/octet-stream") -> str:
        with self.lock:
            parts = [p for p in path.split("/") if p]
            parent = self._folder_at(drive_id, parts[:-1], create=True)
            node = DriveNode(id=_graph_id("01BYE5RZ"), drive=drive_id, name=parts[-1], parent=parent.id, folder=False,
                             data=data, mime=mime)
            self.nodes[node.id] = node
            return node.id

    def file_at(self, drive_id: str, path: str) -> DriveNode | None:
        with self.lock:
            try:
                return self._node_at(drive_id, [p for p in path.split("/") if p])
            except GraphFault:
                return None

    def _children(self, parent_id: str) -> list[DriveNode]:
        return sorted((n for n in self.nodes.values() if n.parent == parent_id), key=lambda n: n.name.lower())

    def _folder_at(self, drive_id: str, parts: list[str], create: bool = False) -> DriveNode:
        node = self.nodes[self.drives[drive_id]["root"]]
        for part in parts:
            found = next((c for c in self._children(node.id) if c.name.lower() == part.lower()), None)
            if found is None:
                if not create:
                    raise _not_found()
                found = DriveNode(id=_graph_id("01BYE5RZ"), drive=drive_id, name=part, parent=node.id, folder=True)
                self.nodes[found.id] = found
            if not found.folder:
                raise _not_found()
            node = found
        return node

    def _node_at(self, drive_id: str, parts: list[str]) -> DriveNode:
        if drive_id not in self.drives:
            raise _not_found()
        node = self.nodes[self.drives[drive_id]["root"]]
        for part in parts:
            node = next((c for c in self._children(node.id) if c.name.lower() == part.lower()), None)
            if node is None:
                raise _not_found()
        return node

    def _path_of(self, node: DriveNode) -> str:
        parts = []
        current = node
        while current.parent is not None:
            parts.append(current.name)
            current = self.nodes[current.parent]
        return "/" + "/".join(reversed(parts))


# --- JSON shapes ---------------------------------------------------------------------------------------


def _text_of(body: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", body)).strip()


def _address(name_address: tuple[str, str]) -> dict[str, Any]:
    return {"emailAddress": {"name": name_address[0], "address": name_address[1]}}


def _select(obj: dict[str, Any], select: str | None) -> dict[str, Any]:
    if not select:
        return obj
    wanted = {s.strip() for s in select.split(",") if s.strip()} | {"id", "@odata.type", "@odata.etag"}
    return {k: v for k, v in obj.items() if k in wanted}


def _attachment_json(att: dict[str, Any], select: str | None, with_bytes: bool = True) -> dict[str, Any]:
    full = {"@odata.type": "#microsoft.graph.fileAttachment", "@odata.mediaContentType": att["contentType"],
            "id": att["id"], "lastModifiedDateTime": att["lastModifiedDateTime"], "name": att["name"],
            "contentType": att["contentType"], "size": len(att["data"]) + 200, "isInline": att["isInline"],
            "contentId": None, "contentLocation": None}
    if with_bytes and (not select or "contentBytes" in select):
        full["contentBytes"] = base64.b64encode(att["data"]).decode()
    return _select(full, select) if select else full


# --- the HTTP handler ----------------------------------------------------------------------------------

# Graph paths after /v1.0 (percent-encoded, as sent) → the handler method; groups are its arguments.
ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("GET", re.compile(r"/me"), "me"),
    ("GET", re.compile(r"/me/mailFolders"), "mail_folders"),
    ("GET", re.compile(r"/me/mailFolders/([^/]+)"), "mail_folder"),
    ("GET", re.compile(r"/me/mailFolders/([^/]+)/messages"), "messages"),
    ("GET", re.compile(r"/me/mailFolders/([^/]+)/messages/delta"), "delta"),
    ("GET", re.compile(r"/me/messages"), "messages"),
    ("GET", re.compile(r"/me/messages/([^/]+)"), "message"),
    ("GET", re.compile(r"/me/messages/([^/]+)/attachments"), "attachments"),
    ("GET", re.compile(r"/me/messages/([^/]+)/attachments/([^/]+)"), "attachment"),
    ("GET", re.compile(r"/me/messages/([^/]+)/attachments/([^/]+)/\$value"), "attachment_value"),
    ("POST", re.compile(r"/me/sendMail"), "send_mail"),
    ("POST", re.compile(r"/me/messages"), "create_draft"),
    ("POST", re.compile(r"/me/messages/([^/]+)/send"), "send_draft"),
    ("POST", re.compile(r"/me/messages/([^/]+)/attachments"), "add_attachment"),
    ("GET", re.compile(r"/sites"), "sites"),
    ("GET", re.compile(r"/sites/([^/]+)"), "site"),
    ("GET", re.compile(r"/sites/([^/]+)/drives"), "site_drives"),
    ("GET", re.compile(r"/sites/([^/]+)/drive"), "site_drive"),
    ("GET", re.compile(r"/drives/([^/]+)"), "drive"),
    ("GET", re.compile(r"/drives/([^/]+)/(root|items/[^/:]+)/search\(q='(.*)'\)"), "search"),
    ("GET", re.compile(r"/drives/([^/]+)/root/children"), "children"),
    ("GET", re.compile(r"/drives/([^/]+)/items/([^/:]+)/children"), "children"),
    ("GET", re.compile(r"/drives/([^/]+)/items/([^/:]+)/content"), "content"),
    ("GET", re.compile(r"/drives/([^/]+)/root:/(.+?):/children"), "children_by_path"),
    ("GET", re.compile(r"/drives/([^/]+)/root:/(.+?):/content"), "content_by_path"),
    ("GET", re.compile(r"/drives/([^/]+)/root:/(.+?):?"), "item_by_path"),
    ("GET", re.compile(r"/drives/([^/]+)/items/([^/:]+)"), "item"),
    ("PUT", re.compile(r"/drives/([^/]+)/root:/(.+?):/content"), "upload_by_path"),
    ("PUT", re.compile(r"/drives/([^/]+)/items/([^/:]+):/(.+?):/content"), "upload_into"),
)



def _handler_for(graph: MsGraph) -> type[BaseHTTPRequestHandler]:  # noqa: C901 - one router for one server
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args) -> None:
            pass

        # --- answers ------------------------------------------------------------------------

        def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("request-id", str(uuid.uuid4()))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            self._send(status, json.dumps(body).encode(), "application/json; odata.metadata=minimal", headers)

        def _empty(self, status: int) -> None:
            self._send(status, b"", "text/plain")

        def _fault(self, fault: GraphFault) -> None:
            self._json(fault.status, {"error": {"code": fault.code, "message": fault.message, "innerError": {
                "date": _iso(_now()), "request-id": str(uuid.uuid4()), "client-request-id": str(uuid.uuid4())}}},
                fault.headers)

        def _redirect(self, url: str) -> None:
            self._send(302, b"", "text/plain", {"Location": url})

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or "0")
            return self.rfile.read(length) if length else b""

        def _query(self) -> dict[str, str]:
            return {k: v[0] for k, v in parse_qs(urlsplit(self.path).query, keep_blank_values=True).items()}

        # --- dispatch -----------------------------------------------------------------------

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._dispatch("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._dispatch("POST")

        def do_PUT(self) -> None:  # noqa: N802
            self._dispatch("PUT")

        def do_PATCH(self) -> None:  # noqa: N802
            self._dispatch("PATCH")

        def do_DELETE(self) -> None:  # noqa: N802
            self._dispatch("DELETE")

        def _dispatch(self, method: str) -> None:
            raw_path = urlsplit(self.path).path
            identity = f"/{graph.tenant}/oauth2/v2.0/"
            try:
                if raw_path.startswith("/v1.0/"):
                    self._graph(method, raw_path[len("/v1.0"):])
                elif raw_path.startswith("/download/") and method == "GET":
                    self._download(raw_path[len("/download/"):])
                elif raw_path == identity + "authorize" and method in ("GET", "POST"):
                    self._authorize(method)
                elif raw_path == identity + "token" and method == "POST":
                    self._token_endpoint()
                elif raw_path == "/test/outlook-tokens" and method == "POST":
                    form = {k: v[0] for k, v in parse_qs(self._body().decode()).items()}
                    user = graph.outlook_user(form.get("token", ""))
                    self._json(200, {"active": user is not None, "upn": user or ""})
                elif raw_path.endswith("/oauth2/v2.0/authorize") or raw_path.endswith("/oauth2/v2.0/token"):
                    self._send(400, b"AADSTS90002: Tenant not found.", "text/plain")
                else:
                    self._fault(GraphFault(404, "UnknownPath", f"no such path {raw_path}"))
            except GraphFault as fault:
                self._fault(fault)

        # --- identity platform --------------------------------------------------------------

        def _error_page(self, text: str) -> None:
            page = ("<html><body><h1>Sorry, but we're having trouble signing you in.</h1>"
                    f"<p>{html.escape(text)}</p></body></html>")
            self._send(400, page.encode(), "text/html; charset=utf-8")

        def _authorize(self, method: str) -> None:
            if method == "POST":
                form = {k: v[0] for k, v in parse_qs(self._body().decode(), keep_blank_values=True).items()}
                query, decision = form, form.get("consent", "")
            else:
                query, decision = self._query(), ""
            if query.get("client_id") != graph.client_id:
                self._error_page(f"AADSTS700016: Application with identifier '{query.get('client_id')}' was not "
                                 f"found in the directory '{graph.tenant}'.")
                return
            if query.get("redirect_uri") != graph.redirect_uri:
                self._error_page("AADSTS50011: The redirect URI specified in the request does not match the redirect "
                                 "URIs configured for the application.")
                return
            back, state = query["redirect_uri"], query.get("state", "")

            def refuse(error: str, description: str) -> None:
                answer = {"error": error, "error_description": description, "state": state}
                self._redirect(f"{back}?{urlencode(answer)}")

            if query.get("response_type") != "code":
                refuse("unsupported_response_type", "AADSTS700054: response_type 'id_token' is not enabled.")
                return
            if not query.get("code_challenge") or query.get("code_challenge_method") != "S256":
                refuse("invalid_request", "AADSTS9002325: Proof Key for Code Exchange is required for cross-origin "
                                          "authorization code redemption.")
                return
            if graph.deny or decision == "deny":
                refuse("access_denied", "AADSTS65004: User declined to consent to access the app.")
                return
            if decision != "accept":
                self._consent_page(query)
                return
            code = "0.AX" + secrets.token_urlsafe(48)
            with graph.lock:
                graph.codes[code] = {"redirect_uri": back, "challenge": query["code_challenge"],
                                     "scope": query.get("scope", ""), "issued": _now()}
                graph.issued_codes.append(code)
                graph.consents.append(dict(query))
            self._redirect(f"{back}?{urlencode({'code': code, 'state': state, 'session_state': str(uuid.uuid4())})}")

        def _consent_page(self, query: dict[str, str]) -> None:
            hidden = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                             for k, v in query.items())
            scopes = "".join(f"<li>{html.escape(s)}</li>" for s in query.get("scope", "").split())
            page = (f"<!doctype html><html><head><title>Permissions requested</title></head><body>"
                    f"<h1>Permissions requested</h1><p>{html.escape(graph.user['mail'])}</p>"
                    f"<p>This app would like to:</p><ul>{scopes}</ul>"
                    f'<form method="post" action="/{graph.tenant}/oauth2/v2.0/authorize">{hidden}'
                    '<button type="submit" name="consent" value="deny">Cancel</button> '
                    '<button type="submit" name="consent" value="accept">Accept</button></form></body></html>')
            self._send(200, page.encode(), "text/html; charset=utf-8")

        def _token_error(self, status: int, error: str, description: str) -> None:
            self._json(status, {"error": error, "error_description": description, "error_codes": [
                int(re.search(r"AADSTS(\d+)", description).group(1)) if "AADSTS" in description else 0],
                "timestamp": _iso(_now()).replace("T", " "), "trace_id": str(uuid.uuid4()),
                "correlation_id": str(uuid.uuid4())})

        def _token_endpoint(self) -> None:
            form = {k: v[0] for k, v in parse_qs(self._body().decode(), keep_blank_values=True).items()}
            auth = self.headers.get("Authorization", "")
            if auth.startswith("Basic "):
                client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
                client_id, secret = unquote(client_id), unquote(secret)
            else:
                client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
            with graph.lock:
                graph.token_requests.append({"grant_type": form.get("grant_type", ""), "scope": form.get("scope", "")})
            if client_id != graph.client_id:
                self._token_error(400, "unauthorized_client", f"AADSTS700016: Application with identifier "
                                                              f"'{client_id}' was not found.")
                return
            if secret != graph.client_secret:
                self._token_error(401, "invalid_client", "AADSTS7000215: Invalid client secret provided. Ensure the "
                                                         "secret being sent in the request is the client secret value.")
                return
            grant = form.get("grant_type")
            if grant == "authorization_code":
                self._redeem_code(form)
            elif grant == "refresh_token":
                self._redeem_refresh(form)
            else:
                self._token_error(400, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported "
                                                                 "grant type.")

        def _redeem_code(self, form: dict[str, str]) -> None:
            with graph.lock:
                grant = graph.codes.pop(form.get("code", ""), None)
            if grant is None or _now() - grant["issued"] > timedelta(minutes=10):
                self._token_error(400, "invalid_grant", "AADSTS54005: OAuth2 Authorization code was already "
                                                        "redeemed, please retry with a new valid code.")
                return
            if form.get("redirect_uri") != grant["redirect_uri"]:
                self._token_error(400, "invalid_grant", "AADSTS500112: The reply address does not match the reply "
                                                        "address provided when requesting the authorization code.")
                return
            if _s256(form.get("code_verifier", "")) != grant["challenge"]:
                self._token_error(400, "invalid_grant", "AADSTS50148: The code_verifier does not match the "
                                                        "code_challenge supplied in the authorization request "
                                                        "for PKCE.")
                return
            # The token is for the resource of the scopes asked for here, else of the first one consented.
            consented = grant["scope"].split()
            first = next((s for s in consented if s not in OIDC_SCOPES), "")
            asked = form.get("scope") or " ".join(s for s in consented if _resource(s) == _resource(first))
            self._issue(asked, grant["scope"])

        def _redeem_refresh(self, form: dict[str, str]) -> None:
            token = form.get("refresh_token", "")
            with graph.lock:
                state = graph.refresh_tokens.get(token)
                consented = graph.grants.get(token, "")
            asked = form.get("scope") or consented
            if state == "valid" and len({_resource(s) for s in asked.split() if s not in OIDC_SCOPES}) > 1:
                self._token_error(400, "invalid_scope", "AADSTS28000: Provided value for the input parameter scope "
                                                        "is not valid because it contains more than one resource.")
                return
            missing = [s for s in asked.split() if s not in OIDC_SCOPES and s not in consented.split()]
            if state == "valid" and missing:
                self._token_error(400, "invalid_grant", "AADSTS65001: The user or administrator has not consented "
                                                        f"to use the application for {' '.join(missing)}.")
                return
            with graph.lock:
                if state == "valid":
                    graph.refresh_tokens[token] = "used"
            if state == "revoked":
                self._token_error(400, "invalid_grant", "AADSTS50173: The provided grant has expired due to it being "
                                                        "revoked, a fresh auth token is needed.")
                return
            if state != "valid":
                self._token_error(400, "invalid_grant", "AADSTS70000: The provided value for the 'refresh_token' is "
                                                        "not valid.")
                return
            self._issue(asked, consented)

        def _issue(self, scope: str, consented: str) -> None:
            access = "eyJ0eXAiOiJKV1QiLCJub25jZSI6." + secrets.token_urlsafe(40)
            refresh = "0.AQ4A" + secrets.token_urlsafe(60)
            outlook = any(_resource(s) == OUTLOOK for s in scope.split())
            with graph.lock:
                expiry = _now().timestamp() + graph.access_token_lifetime
                if outlook:
                    graph.outlook_tokens[access] = (expiry, graph.user["userPrincipalName"])
                else:
                    graph.access_tokens[access] = expiry
                graph.refresh_tokens[refresh] = "valid"
                graph.grants[refresh] = consented
                graph.issued += [access, refresh]
                lifetime = graph.access_token_lifetime
            granted = " ".join(s for s in scope.split() if s != "offline_access") or "User.Read"
            self._json(200, {"token_type": "Bearer", "scope": granted, "expires_in": lifetime,
                             "ext_expires_in": lifetime, "access_token": access, "refresh_token": refresh})

        # --- Graph --------------------------------------------------------------------------

        def _authenticate(self) -> None:
            header = self.headers.get("Authorization", "")
            token = header[7:] if header.startswith("Bearer ") else ""
            with graph.lock:
                expiry = graph.access_tokens.get(token)
            challenge = {"WWW-Authenticate": 'Bearer realm="", authorization_uri="https://login.microsoftonline.com'
                                             '/common/oauth2/authorize", '
                                             'client_id="00000003-0000-0000-c000-000000000000"'}
            if not token:
                raise GraphFault(401, "InvalidAuthenticationToken", "Access token is empty.", challenge)
            if expiry is None:
                raise GraphFault(401, "InvalidAuthenticationToken", "IDX14100: JWT is not well formed.", challenge)
            if expiry <= _now().timestamp():
                raise GraphFault(401, "InvalidAuthenticationToken", "Access token has expired or is not yet valid.",
                                 challenge)

        def _graph(self, method: str, path: str) -> None:
            query = self._query()
            with graph.lock:
                graph.requests.append((method, unquote(path), query))
                failure = graph.failures.popleft() if graph.failures else None
            if failure is not None:
                status, retry_after = failure
                code, message = ("TooManyRequests", "Too many requests from Identifier:anna under category:"
                                 "throttle.outlook. Please try again later.") if status == 429 else \
                    ("serviceNotAvailable", "The service is temporarily unavailable. Please try again later.")
                raise GraphFault(status, code, message, {"Retry-After": retry_after} if retry_after else {})
            self._authenticate()
            body = self._body() if method in ("POST", "PUT", "PATCH") else b""
            if len(body) > REQUEST_MAX:
                raise GraphFault(413, "RequestEntityTooLarge", "The request is larger than 4 MB.")
            for route_method, pattern, name in ROUTES:
                match = pattern.fullmatch(path) if route_method == method else None
                if match:
                    getattr(self, name)(query, body, *[unquote(g) for g in match.groups()])
                    return
            raise GraphFault(400, "BadRequest", f"Resource not found for the segment '{path.rsplit('/', 1)[-1]}'.")

        # me and mail

        def me(self, query, _body) -> None:
            body = {"@odata.context": f"{graph.url}/v1.0/$metadata#users/$entity", "businessPhones": [],
                    "jobTitle": None, "mobilePhone": None, "officeLocation": None, "preferredLanguage": "en-US",
                    **graph.user}
            self._json(200, _select(body, query.get("$select")))

        def mail_folders(self, query, _body) -> None:
            with graph.lock:
                values = [self._folder_json(key) for key in graph.folders]
            self._page(values, query, "mailFolders")

        def mail_folder(self, query, _body, folder) -> None:
            with graph.lock:
                self._json(200, _select(self._folder_json(graph.folder_key(folder)), query.get("$select")))

        def _folder_json(self, key: str) -> dict[str, Any]:
            folder = graph.folders[key]
            mails = [m for m in graph.mails.values() if m.folder == key]
            return {"id": folder["id"], "displayName": folder["displayName"], "parentFolderId": "AQMkADroot",
                    "childFolderCount": 0, "unreadItemCount": sum(1 for m in mails if not m.is_read),
                    "totalItemCount": len(mails), "sizeInBytes": 0, "isHidden": False}

        def _message_json(self, mail: StoredMail, query: dict[str, str]) -> dict[str, Any]:
            text = "text" in (self.headers.get("Prefer") or "") and 'outlook.body-content-type="text"' in \
                (self.headers.get("Prefer") or "")
            body_type = "text" if text or mail.body_type == "text" else "html"
            content = _text_of(mail.body) if text and mail.body_type == "html" else mail.body
            full = {
                "@odata.etag": f'W/"CQAAABYAAAA{mail.seq}"', "id": mail.id, "createdDateTime": _iso(mail.received),
                "lastModifiedDateTime": _iso(mail.received), "receivedDateTime": _iso(mail.received),
                "sentDateTime": _iso(mail.received), "hasAttachments": any(not a["isInline"] for a in mail.attachments),
                "internetMessageId": f"<{mail.id[:20]}@contoso.example>", "subject": mail.subject,
                "bodyPreview": _text_of(mail.body)[:255], "importance": "normal",
                "parentFolderId": graph.folders[mail.folder]["id"], "conversationId": "AAQkAG" + mail.id[6:20],
                "isRead": mail.is_read, "isDraft": mail.is_draft,
                "webLink": f"https://outlook.office365.com/owa/?ItemID={quote(mail.id)}&exvsurl=1&viewmodel=ReadMessageItem",
                "body": {"contentType": body_type, "content": content},
                "sender": _address(mail.sender), "from": _address(mail.sender),
                "toRecipients": [_address(a) for a in mail.to], "ccRecipients": [_address(a) for a in mail.cc],
                "bccRecipients": [], "replyTo": []}
            shown = _select(full, query.get("$select"))
            expand = query.get("$expand") or ""
            if expand.startswith("attachments"):
                inner = re.fullmatch(r"attachments(?:\(\$select=([^)]*)\))?", expand)
                if inner is None:
                    raise GraphFault(400, "BadRequest", f"Parsing OData Select and Expand failed: {expand}")
                shown["attachments"] = [_attachment_json(a, inner.group(1)) for a in mail.attachments]
            return shown

        def _filter(self, text: str, mails: list[StoredMail]) -> tuple[list[StoredMail], str | None]:
            """Mails matching a $filter of Graph's simple form; the first property named."""
            clauses = [c.strip() for c in re.split(r"\s+and\s+", text, flags=re.IGNORECASE) if c.strip()]
            first = None
            for clause in clauses:
                match = re.fullmatch(r"(receivedDateTime)\s+(ge|gt|le|lt)\s+(\S+)", clause) or \
                    re.fullmatch(r"(isRead|hasAttachments)\s+(eq|ne)\s+(true|false)", clause)
                if match is None:
                    raise GraphFault(400, "BadRequest", f"Invalid filter clause: {clause}")
                name, op, value = match.groups()
                first = first or name
                if name == "receivedDateTime":
                    try:
                        moment = _parse_iso(value)
                    except ValueError:
                        raise GraphFault(400, "BadRequest", f"Invalid filter clause: {clause}") from None
                    compare = {"ge": lambda a, b: a >= b, "gt": lambda a, b: a > b, "le": lambda a, b: a <= b,
                               "lt": lambda a, b: a < b}[op]
                    mails = [m for m in mails if compare(m.received, moment)]
                else:
                    flag = value == "true"
                    if name == "isRead":
                        mails = [m for m in mails if (m.is_read == flag) == (op == "eq")]
                    else:
                        mails = [m for m in mails if (any(not a["isInline"] for a in m.attachments) == flag)
                                 == (op == "eq")]
            return mails, first

        def messages(self, query, _body, folder=None) -> None:
            with graph.lock:
                key = graph.folder_key(folder) if folder is not None else None
                mails = [m for m in graph.mails.values() if key is None or m.folder == key]
                search = query.get("$search")
                if search is not None:
                    if "$filter" in query or "$orderby" in query:
                        raise GraphFault(400, "BadRequest", "The query parameter '$orderby' or '$filter' is not "
                                                            "supported with '$search'.")
                    words = [w.lower() for w in re.findall(r"\w+", search)]
                    mails = [m for m in mails if self._matches(m, words)]
                order = query.get("$orderby", "receivedDateTime desc")
                if "$filter" in query:
                    mails, first = self._filter(query["$filter"], mails)
                    if "$orderby" in query and first != order.split()[0]:
                        raise GraphFault(400, "InefficientFilter", "The restriction or sort order is too complex "
                                                                   "for this operation.")
                if not re.fullmatch(r"receivedDateTime( (asc|desc))?", order):
                    raise GraphFault(400, "BadRequest", f"Could not find a property named '{order}'.")
                mails.sort(key=lambda m: (m.received, m.seq), reverse=not order.endswith("asc"))
                values = [self._message_json(m, query) for m in self._window(mails, query, MESSAGES_PAGE, 1000)]
                total = len(mails)
            self._paged(values, query, total, MESSAGES_PAGE)

        @staticmethod
        def _matches(mail: StoredMail, words: list[str]) -> bool:
            """Outlook's search: every word of the query starts a word of subject, body, sender or an
            attachment's name."""
            text = " ".join([mail.subject, _text_of(mail.body), *mail.sender, *[a["name"] for a in mail.attachments]])
            found = set(re.findall(r"\w+", text.lower()))
            return all(any(f.startswith(w) for f in found) for w in words)

        def _window(self, items: list[Any], query: dict[str, str], default: int, most: int) -> list[Any]:
            top, skip = self._top(query, default, most), int(query.get("$skip") or 0)
            return items[skip:skip + top]

        @staticmethod
        def _top(query: dict[str, str], default: int, most: int) -> int:
            try:
                top = int(query.get("$top") or default)
            except ValueError:
                raise GraphFault(400, "BadRequest", "Invalid value for $top.") from None
            if top < 1 or top > most:
                raise GraphFault(400, "BadRequest", f"The limit of '{most}' for Top query has been exceeded.")
            return top

        def _paged(self, values: list[Any], query: dict[str, str], total: int, default: int) -> None:
            top, skip = self._top(query, default, 1000), int(query.get("$skip") or 0)
            body: dict[str, Any] = {"@odata.context": f"{graph.url}/v1.0/$metadata#collection", "value": values}
            if skip + top < total:
                following = {**query, "$skip": str(skip + top), "$top": str(top)}
                body["@odata.nextLink"] = f"{graph.url}{urlsplit(self.path).path}?{urlencode(following)}"
            self._json(200, body)

        def _page(self, values: list[Any], query: dict[str, str], what: str) -> None:
            shown = self._window(values, query, CHILDREN_PAGE, 1000)
            self._paged(shown, query, len(values), CHILDREN_PAGE)

        def message(self, query, _body, mail_id) -> None:
            with graph.lock:
                mail = self._mail(mail_id)
                self._json(200, self._message_json(mail, query))

        @staticmethod
        def _mail(mail_id: str) -> StoredMail:
            found = graph.mails.get(mail_id)
            if found is None:
                raise _not_found("The specified object was not found in the store.", "ErrorItemNotFound")
            return found

        def delta(self, query, _body, folder) -> None:
            prefer = self.headers.get("Prefer") or ""
            size_match = re.search(r"odata\.maxpagesize=(\d+)", prefer)
            size = int(size_match.group(1)) if size_match else DELTA_PAGE
            with graph.lock:
                key = graph.folder_key(folder)
                if "$skiptoken" in query or "$deltatoken" in query:
                    state = _untoken(query.get("$skiptoken") or query.get("$deltatoken") or "")
                    if state is None or state.get("g") != graph.delta_generation or state.get("f") != key:
                        raise GraphFault(410, "SyncStateNotFound", "The sync state generation is not found or the "
                                                                   "sync state has expired.")
                    if "$deltatoken" in query:
                        state = {**state, "from": state["upto"], "upto": graph.seq, "off": 0}
                else:
                    if "$search" in query or "$orderby" in query and query["$orderby"] != "receivedDateTime desc":
                        raise GraphFault(400, "BadRequest", "The query is not supported by delta.")
                    flt = query.get("$filter") or ""
                    if flt and not re.fullmatch(r"receivedDateTime (ge|gt) \S+", flt):
                        raise GraphFault(400, "BadRequest", "Delta supports only $filter=receivedDateTime ge|gt.")
                    state = {"g": graph.delta_generation, "f": key, "flt": flt, "sel": query.get("$select") or "",
                             "from": 0, "upto": graph.seq, "off": 0}
                mails = [m for m in graph.mails.values() if m.folder == key and state["from"] < m.seq <= state["upto"]]
                if state["flt"]:
                    mails, _first = self._filter(state["flt"], mails)
                mails.sort(key=lambda m: m.seq)
                window = mails[state["off"]:state["off"] + size]
                values = [self._message_json(m, {"$select": state["sel"]}) for m in window]
                more = state["off"] + size < len(mails)
            base = f"{graph.url}/v1.0/me/mailFolders/{quote(folder)}/messages/delta"
            body: dict[str, Any] = {"@odata.context": f"{graph.url}/v1.0/$metadata#Collection(message)",
                                    "value": values}
            if more:
                following = _token({**state, "off": state["off"] + size})
                body["@odata.nextLink"] = f"{base}?{urlencode({'$skiptoken': following})}"
            else:
                body["@odata.deltaLink"] = f"{base}?{urlencode({'$deltatoken': _token({**state, 'off': 0})})}"
            self._json(200, body)

        def attachments(self, query, _body, mail_id) -> None:
            with graph.lock:
                mail = self._mail(mail_id)
                values = [_attachment_json(a, query.get("$select")) for a in mail.attachments]
            self._json(200, {"@odata.context": f"{graph.url}/v1.0/$metadata#attachments", "value": values})

        def attachment(self, query, _body, mail_id, attachment_id) -> None:
            with graph.lock:
                att = self._attachment_of(mail_id, attachment_id)
                self._json(200, _attachment_json(att, query.get("$select")))

        def attachment_value(self, _query, _body, mail_id, attachment_id) -> None:
            with graph.lock:
                att = self._attachment_of(mail_id, attachment_id)
            self._send(200, att["data"], att["contentType"])

        def _attachment_of(self, mail_id: str, attachment_id: str) -> dict[str, Any]:
            mail = self._mail(mail_id)
            found = next((a for a in mail.attachments if a["id"] == attachment_id), None)
            if found is None:
                raise _not_found("The specified object was not found in the store.", "ErrorItemNotFound")
            return found

        def _outgoing(self, message: dict[str, Any]) -> dict[str, Any]:
            def people(key: str) -> list[tuple[str, str]]:
                found = []
                for entry in message.get(key) or []:
                    address = ((entry or {}).get("emailAddress") or {}).get("address") or ""
                    if "@" not in address:
                        raise GraphFault(400, "ErrorInvalidRecipients", "At least one recipient isn't valid., "
                                                                        "A message can't be sent because it "
                                                                        "contains no recipients.")
                    found.append(((entry["emailAddress"].get("name") or ""), address))
                return found

            attachments = []
            for att in message.get("attachments") or []:
                if att.get("@odata.type") != "#microsoft.graph.fileAttachment":
                    raise GraphFault(400, "BadRequest", "Only file attachments are supported here.")
                try:
                    data = base64.b64decode(att.get("contentBytes") or "", validate=True)
                except ValueError:
                    raise GraphFault(400, "BadRequest", "Invalid base64 in contentBytes.") from None
                attachments.append((att.get("name") or "", att.get("contentType") or "", data))
            body = message.get("body") or {}
            return {"subject": message.get("subject") or "", "body": body.get("content") or "",
                    "bodyType": (body.get("contentType") or "text").lower(), "to": people("toRecipients"),
                    "cc": people("ccRecipients"), "attachments": attachments}

        def send_mail(self, _query, body) -> None:
            payload = json.loads(body or b"{}")
            message = payload.get("message")
            if not isinstance(message, dict):
                raise GraphFault(400, "ErrorInvalidParameter", "The value of the parameter 'Message' is empty.")
            outgoing = self._outgoing(message)
            if not outgoing["to"]:
                raise GraphFault(400, "ErrorInvalidRecipients", "At least one recipient isn't valid., A message "
                                                                "can't be sent because it contains no recipients.")
            with graph.lock:
                graph.sent.append(outgoing)
                if payload.get("saveToSentItems", True):
                    self._store_outgoing(outgoing, "sentitems", draft=False)
            self._empty(202)

        def _store_outgoing(self, outgoing: dict[str, Any], folder: str, draft: bool) -> StoredMail:
            graph.seq += 1
            mail = StoredMail(id=_graph_id(), folder=folder, subject=outgoing["subject"], body=outgoing["body"],
                              body_type="html" if outgoing["bodyType"] == "html" else "text",
                              sender=(graph.user["displayName"], graph.user["mail"]), to=outgoing["to"],
                              cc=outgoing["cc"], received=_now(), is_read=True, is_draft=draft,
                              attachments=[graph._attachment(n, t, d, False) for n, t, d in outgoing["attachments"]],
                              seq=graph.seq)
            graph.mails[mail.id] = mail
            return mail

        def create_draft(self, query, body) -> None:
            outgoing = self._outgoing(json.loads(body or b"{}"))
            with graph.lock:
                mail = self._store_outgoing(outgoing, "drafts", draft=True)
                self._json(201, self._message_json(mail, query))

        def send_draft(self, _query, _body, mail_id) -> None:
            with graph.lock:
                mail = self._mail(mail_id)
                if not mail.is_draft:
                    raise GraphFault(400, "ErrorInvalidOperation", "Only drafts can be sent.")
                if not mail.to:
                    raise GraphFault(400, "ErrorInvalidRecipients", "A message can't be sent because it contains "
                                                                    "no recipients.")
                graph.seq += 1
                mail.is_draft, mail.folder, mail.seq = False, "sentitems", graph.seq
                graph.sent.append({"subject": mail.subject, "body": mail.body, "bodyType": mail.body_type,
                                   "to": mail.to, "cc": mail.cc,
                                   "attachments": [(a["name"], a["contentType"], a["data"]) for a in mail.attachments]})
            self._empty(202)

        def add_attachment(self, _query, body, mail_id) -> None:
            att = json.loads(body or b"{}")
            with graph.lock:
                mail = self._mail(mail_id)
                if not mail.is_draft:
                    raise GraphFault(400, "ErrorInvalidOperation", "Attachments can be added to drafts only.")
                data = base64.b64decode(att.get("contentBytes") or "")
                stored = graph._attachment(att.get("name") or "", att.get("contentType") or "", data, False)
                mail.attachments.append(stored)
                self._json(201, _attachment_json(stored, None, with_bytes=False))

        # SharePoint

        def _site_json(self, site: dict[str, Any]) -> dict[str, Any]:
            return {"@odata.context": f"{graph.url}/v1.0/$metadata#sites/$entity", **site}

        def _drive_json(self, drive: dict[str, Any]) -> dict[str, Any]:
            return {"id": drive["id"], "name": drive["name"], "driveType": drive["driveType"],
                    "webUrl": drive["webUrl"], "createdDateTime": drive["createdDateTime"],
                    "lastModifiedDateTime": drive["lastModifiedDateTime"], "description": "",
                    "owner": {"group": {"displayName": graph.sites[drive["site"]]["displayName"] + " Owners"}}}

        def _item_json(self, node: DriveNode, with_path: bool = True) -> dict[str, Any]:
            drive = graph.drives[node.drive]
            body: dict[str, Any] = {
                "id": node.id, "name": node.name, "createdDateTime": _iso(node.created),
                "lastModifiedDateTime": _iso(node.modified), "eTag": f'"{{{node.id[-8:]}}},1"',
                "webUrl": drive["webUrl"] + quote(graph._path_of(node)), "size": len(node.data)}
            if node.parent is not None:
                parent = graph.nodes[node.parent]
                reference = {"driveType": "documentLibrary", "driveId": node.drive, "id": parent.id,
                             "siteId": drive["site"]}
                if with_path:
                    inside = graph._path_of(parent)
                    reference["path"] = f"/drives/{node.drive}/root:" + (inside if inside != "/" else "")
                body["parentReference"] = reference
            else:
                body["root"] = {}
            if node.folder:
                body["folder"] = {"childCount": len(graph._children(node.id))}
                body["size"] = sum(len(c.data) for c in graph._children(node.id))
            else:
                key = graph.downloads.setdefault(node.id, secrets.token_urlsafe(16))
                body["@microsoft.graph.downloadUrl"] = f"{graph.url}/download/{key}"
                body["file"] = {"mimeType": node.mime, "hashes": {"quickXorHash": base64.b64encode(
                    hashlib.sha1(node.data).digest()[:20]).decode()}}
            return body

        def sites(self, query, _body) -> None:
            search = query.get("search")
            if search is None:
                raise GraphFault(400, "invalidRequest", "Listing sites needs search=.")
            with graph.lock:
                found = [s for s in graph.sites.values() if search == "*" or any(
                    search.lower() in str(s.get(k) or "").lower() for k in ("displayName", "name", "description"))]
                values = [self._site_json(s) for s in found]
            self._page(values, query, "sites")

        def site(self, query, _body, site_id) -> None:
            with graph.lock:
                site = graph.sites.get(site_id)
                if site is None:
                    raise _not_found("Requested site could not be found")
                self._json(200, _select(self._site_json(site), query.get("$select")))

        def site_drives(self, query, _body, site_id) -> None:
            with graph.lock:
                if site_id not in graph.sites:
                    raise _not_found("Requested site could not be found")
                values = [self._drive_json(d) for d in graph.drives.values() if d["site"] == site_id]
            self._page(values, query, "drives")

        def site_drive(self, query, _body, site_id) -> None:
            with graph.lock:
                drive = next((d for d in graph.drives.values() if d["site"] == site_id), None)
                if drive is None:
                    raise _not_found()
                self._json(200, _select(self._drive_json(drive), query.get("$select")))

        def drive(self, query, _body, drive_id) -> None:
            with graph.lock:
                if drive_id not in graph.drives:
                    raise _not_found()
                self._json(200, _select(self._drive_json(graph.drives[drive_id]), query.get("$select")))

        def _node(self, drive_id: str, item_id: str) -> DriveNode:
            if drive_id not in graph.drives:
                raise _not_found()
            if item_id == "root":
                return graph.nodes[graph.drives[drive_id]["root"]]
            node = graph.nodes.get(item_id)
            if node is None or node.drive != drive_id:
                raise _not_found()
            return node

        def item(self, query, _body, drive_id, item_id) -> None:
            with graph.lock:
                self._json(200, _select(self._item_json(self._node(drive_id, item_id)), query.get("$select")))

        def item_by_path(self, query, _body, drive_id, path) -> None:
            with graph.lock:
                node = graph._node_at(drive_id, [p for p in path.split("/") if p])
                self._json(200, _select(self._item_json(node), query.get("$select")))

        def children(self, query, _body, drive_id, item_id="root") -> None:
            with graph.lock:
                node = self._node(drive_id, item_id)
                if not node.folder:
                    raise GraphFault(400, "invalidRequest", "The item is not a folder.")
                values = [self._item_json(c) for c in graph._children(node.id)]
            self._skiptoken_page(values, query)

        def children_by_path(self, query, _body, drive_id, path) -> None:
            with graph.lock:
                node = graph._node_at(drive_id, [p for p in path.split("/") if p])
                values = [self._item_json(c) for c in graph._children(node.id)]
            self._skiptoken_page(values, query)

        def _skiptoken_page(self, values: list[Any], query: dict[str, str]) -> None:
            top = self._top(query, CHILDREN_PAGE, 1000)
            offset = int((_untoken(query.get("$skiptoken") or "") or {}).get("off", 0))
            body: dict[str, Any] = {"@odata.context": f"{graph.url}/v1.0/$metadata#Collection(driveItem)",
                                    "value": values[offset:offset + top]}
            if offset + top < len(values):
                following = {k: v for k, v in query.items() if k != "$skiptoken"}
                following["$skiptoken"] = _token({"off": offset + top})
                body["@odata.nextLink"] = f"{graph.url}{urlsplit(self.path).path}?{urlencode(following)}"
            self._json(200, body)

        def content(self, _query, _body, drive_id, item_id) -> None:
            with graph.lock:
                node = self._node(drive_id, item_id)
                if node.folder:
                    raise GraphFault(400, "invalidRequest", "The item is a folder.")
                key = graph.downloads.setdefault(node.id, secrets.token_urlsafe(16))
            self._redirect(f"{graph.url}/download/{key}")

        def content_by_path(self, query, body, drive_id, path) -> None:
            with graph.lock:
                node = graph._node_at(drive_id, [p for p in path.split("/") if p])
            self.content(query, body, drive_id, node.id)

        def _download(self, key: str) -> None:
            with graph.lock:
                node_id = next((n for n, k in graph.downloads.items() if k == key), None)
                node = graph.nodes.get(node_id) if node_id else None
            if node is None:
                self._send(404, b"", "text/plain")
                return
            self._send(200, node.data, node.mime)

        def upload_by_path(self, query, body, drive_id, path) -> None:
            parts = [p for p in path.split("/") if p]
            with graph.lock:
                if drive_id not in graph.drives:
                    raise _not_found()
                parent = graph._folder_at(drive_id, parts[:-1], create=True)
                self._upload(query, body, parent, parts[-1])

        def upload_into(self, query, body, drive_id, parent_id, name) -> None:
            with graph.lock:
                parent = self._node(drive_id, parent_id)
                if not parent.folder:
                    raise GraphFault(400, "invalidRequest", "The parent is not a folder.")
                self._upload(query, body, parent, name)

        def _upload(self, query: dict[str, str], body: bytes, parent: DriveNode, name: str) -> None:
            behaviour = query.get("@microsoft.graph.conflictBehavior", "replace")
            existing = next((c for c in graph._children(parent.id) if c.name.lower() == name.lower()), None)
            kind = (self.headers.get("Content-Type") or "application/octet-stream").split(";")[0]
            if existing is not None and behaviour == "fail":
                raise GraphFault(409, "nameAlreadyExists", "The specified item name already exists. Copy")
            if existing is not None and behaviour == "replace":
                existing.data, existing.mime, existing.modified = body, kind, _now()
                self._json(200, self._item_json(existing))
                return
            if existing is not None:  # rename
                stem, dot, ext = name.rpartition(".")
                name = f"{stem} 1.{ext}" if dot else f"{name} 1"
            node = DriveNode(id=_graph_id("01BYE5RZ"), drive=parent.drive, name=name, parent=parent.id, folder=False,
                             data=body, mime=kind)
            graph.nodes[node.id] = node
            self._json(201, self._item_json(node))

        def search(self, query, _body, drive_id, where, term) -> None:
            with graph.lock:
                start = self._node(drive_id, "root" if where == "root" else where[len("items/"):])
                words = term.replace("''", "'").lower()
                found, stack = [], [start]
                while stack:
                    node = stack.pop()
                    for child in graph._children(node.id):
                        if child.folder:
                            stack.append(child)
                        text = child.data.decode("utf-8", "ignore").lower() if child.mime.startswith("text/") else ""
                        if words in child.name.lower() or words in text:
                            found.append(child)
                values = [self._item_json(n, with_path=False) for n in sorted(found, key=lambda n: n.name.lower())]
            self._skiptoken_page(values, query)

    return Handler


@contextmanager
def serve(graph: MsGraph) -> Iterator[MsGraph]:
    """Run the stand-in on a free port of 127.0.0.1 (sets `graph.url`) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(graph))
    server.daemon_threads = True
    graph.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="msgraph-stand-in", daemon=True)
    thread.start()
    try:
        yield graph
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def accept_consent(authorize_url: str, decision: str = "accept") -> str:
    """What a browser does at the consent page: open it, press Accept (or Cancel); the URL the
    identity platform sends the browser back to."""
    import httpx

    page = httpx.get(authorize_url, follow_redirects=False)
    if page.status_code == 302:  # refused at once (deny mode, bad request)
        return page.headers["location"]
    assert page.status_code == 200, page.text
    fields = dict(re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', page.text))
    fields = {html.unescape(k): html.unescape(v) for k, v in fields.items()}
    action = re.search(r'<form method="post" action="([^"]+)"', page.text).group(1)
    base = urlsplit(authorize_url)
    answer = httpx.post(f"{base.scheme}://{base.netloc}{action}", data={**fields, "consent": decision},
                        follow_redirects=False)
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]
