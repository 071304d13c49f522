"""A Jira Cloud (REST v3) + Jira Data Center (REST v2) + Atlassian identity stand-in on 127.0.0.1.

It speaks the real paths and payload shapes, with Jira's error bodies
(`{"errorMessages": [...], "errors": {field: message}}`):

- Jira's REST API at `/rest/api/3/…` (Cloud: descriptions and comments in Atlassian Document
  Format, users by `accountId`) and `/rest/api/2/…` (Data Center: plain text, users by `name`):
  `myself`; `project/search` (paged by startAt, `isLast`), `project` (Data Center's whole list),
  `project/{key}` (with its issue types); `priority`; `field`; `user`, `user/search`;
  `search/jql` (POST or GET, Cloud's enhanced search paged by an opaque `nextPageToken`, `isLast`;
  an unbounded JQL is refused as Cloud does), `search` (POST or GET, Data Center's, paged by
  `startAt` / `total`); `issue` create, `issue/{key}` get / edit / delete,
  `issue/{key}/transitions` GET / POST, `issue/{key}/comment` GET / POST.
- A small JQL: `field op value` joined by AND / OR with parentheses, the operators = != > >= < <= ~ IN,
  NOT IN, IS [NOT] EMPTY, on project, status, labels, created, updated, key, issuetype, priority,
  assignee (also `currentUser()`), summary (~), text (~); dates as 'yyyy-MM-dd [HH:mm]' or '-5d';
  `ORDER BY created|updated|key|priority|summary [ASC|DESC]`. Anything else answers 400 with
  Jira's wording ("Error in the JQL Query: …", "Field 'x' does not exist …", "The value 'X' does not
  exist for the field 'project'.").
- Authentication: HTTP Basic `email:apiToken` or `Authorization: Bearer <personal access token>` on
  the site's paths; a refusal answers 401 "Client must be authenticated to access this resource."
- `fail_next(n, 429, "2")`: the next n Jira calls answer 429 with that Retry-After.
- Webhooks: `POST /rest/webhooks/1.0/webhook` (name, url, events, filters
  {"issue-related-events-section": jql}, excludeBody, secret; Jira administrators only: `admin =
  False` refuses with 403), GET, DELETE. Issues created, edited, transitioned, deleted or commented
  through the API are delivered to every webhook whose events and JQL filter match — a POST of
  Jira's webhook JSON with `X-Hub-Signature: sha256=<HMAC-SHA256 of the body>` when it has a secret —
  on a thread of their own (`deliveries` records each, `wait_for_deliveries` polls); a test can
  also call :meth:`JiraServer.deliver` or take a signed body with :meth:`JiraServer.signed_delivery`.
- Atlassian OAuth 2.0 (3LO): `GET /authorize` (client id, redirect URI, `audience=api.atlassian.com`
  checked) shows a consent page whose form POSTs back and redirects with `code` and `state`
  (`deny = True` or its Cancel button: `error=access_denied`); `POST /oauth/token` (JSON or form)
  trades a code (single use, redirect URI checked, PKCE S256 when a challenge was sent) and rotates
  refresh tokens (a used one answers 403 invalid_grant); `GET /oauth/token/accessible-resources`,
  `GET /me`, and the gateway `/ex/jira/{cloudId}/rest/api/3/…` (and `/rest/webhooks/1.0/…`) with
  the Bearer access token (expired or unknown: 401 `{"code": 401, "message": "Unauthorized"}`).

Start it with ``with serve_jira(JiraServer(...)) as jira:`` (it sets `jira.url`; use it as siteUrl,
POWERON_ATLASSIAN_AUTH_URL and POWERON_ATLASSIAN_API_URL alike).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.mcp_test_servers import serve_stand_in

CLOUD_ID = "9c3c7a3e-1b2f-4d6e-8a11-0f5e2d7c4b90"
ANNA = {"accountId": "5b10ac8d82e05b22cc7d4ef5", "name": "anna", "key": "JIRAUSER10000", "displayName": "Anna Meier",
        "emailAddress": "anna@example.com", "active": True, "timeZone": "Europe/Zurich"}
BERT = {"accountId": "5b10a2844c20165700ede21g", "name": "bert", "key": "JIRAUSER10001", "displayName": "Bert Keller",
        "emailAddress": "bert@example.com", "active": True, "timeZone": "Europe/Zurich"}
STATUSES = {"To Do": ("10000", "new", "To Do"), "In Progress": ("3", "indeterminate", "In Progress"),
            "Done": ("10001", "done", "Done")}
TRANSITIONS = (("11", "Reopen", "To Do"), ("21", "Start Progress", "In Progress"), ("31", "Resolve", "Done"))
PRIORITIES = ("Highest", "High", "Medium", "Low", "Lowest")
ISSUE_TYPES = (("10001", "Task"), ("10002", "Bug"), ("10003", "Story"))
CUSTOM_FIELDS = {"customfield_10016": ("Story Points", "number"), "customfield_10050": ("Team", "string")}
SYSTEM_FIELDS = ("summary", "description", "status", "assignee", "reporter", "priority", "issuetype", "project",
                 "labels", "created", "updated", "comment")
NOT_AUTHENTICATED = "Client must be authenticated to access this resource."
NO_ISSUE = "Issue does not exist or you do not have permission to see it."
OPERATORS = "The valid operators are '=', '!=', '<', '>', '<=', '>=', '~', '!~', 'IN', 'NOT IN', 'IS' and 'IS NOT'."
SEARCH_PAGE_MAX = 100
DC_SEARCH_MAX = 1000


class Fault(Exception):
    """An error answer: status and JSON body (or text), and headers."""

    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None):
        super().__init__(str(body))
        self.status, self.body, self.headers = status, body, headers or {}


def jira_error(status: int, *messages: str, **errors: str) -> Fault:
    return Fault(status, {"errorMessages": list(messages), "errors": errors})


class JqlError(Exception):
    """Invalid JQL; the message is Jira's."""


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def jira_time(moment: datetime) -> str:
    """Jira's timestamp format: 2024-05-01T10:00:00.000+0000."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000+0000")


def _adf(text: str) -> dict[str, Any]:
    paragraphs = [{"type": "paragraph", "content": [{"type": "text", "text": line}]}
                  for line in (text or "").splitlines() if line.strip()]
    return {"type": "doc", "version": 1, "content": paragraphs}


def _adf_text(node: Any) -> str:
    """The text of an ADF document: paragraphs separated by a blank line, hard breaks as newlines."""
    if not isinstance(node, dict):
        return ""
    if node.get("type") == "text":
        return str(node.get("text") or "")
    if node.get("type") == "hardBreak":
        return "\n"
    parts = [_adf_text(child) for child in node.get("content") or []]
    return ("\n\n" if node.get("type") == "doc" else "").join(parts)


def _is_adf(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "doc" and value.get("version") == 1 and \
        isinstance(value.get("content"), list)


@dataclass
class Issue:
    id: str
    key: str
    project: str
    summary: str
    description: dict[str, Any] | None
    status: str
    issuetype: str
    priority: str
    labels: list[str]
    assignee: str | None
    reporter: str
    created: datetime
    updated: datetime
    custom: dict[str, Any] = field(default_factory=dict)
    comments: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Webhook:
    id: str
    name: str
    url: str
    events: list[str]
    jql: str
    secret: str = field(repr=False)
    exclude_body: bool = False


@dataclass
class JiraServer:
    """The stand-in's data and switches: one site with users Anna (the token's and consent's account,
    an administrator) and Bert.

    Switches (plain attributes, set by tests; `reset()` restores them): `admin` (False: webhook
    registration answers 403), `deny` (the consent answers access_denied), `access_token_lifetime`
    (seconds), `extra_sites` (listed before the Jira site in accessible-resources), `me` (the account
    every credential signs in as); methods `fail_next`, `expire_access_tokens`,
    `revoke_refresh_tokens`, `add_project`, `add_issue`, `deliver`, `signed_delivery`,
    `wait_for_deliveries`, `calls`. Read `issues`, `webhooks`, `deliveries`, `requests`,
    `token_requests`, `consents`, `issued` (every token handed out).

    Args:
        email: The Cloud account's e-mail address (Basic auth).
        api_token: Its API token.
        pat: Data Center's personal access token of the same account.
        client_id, client_secret, redirect_uri: The only Atlassian OAuth app it knows.
    """

    email: str = ANNA["emailAddress"]
    api_token: str = "ATATT3xFfGF0-cloud-api-token"
    pat: str = "NjQ5MTM2-dc-personal-access-token"
    client_id: str = "poweron-jira-client"
    client_secret: str = field(default="jira-client-secret/with+chars=", repr=False)
    redirect_uri: str = ""
    url: str = ""  # set by serve_jira
    cloud_id: str = CLOUD_ID
    lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """No projects, issues or webhooks; default switches."""
        with self.lock:
            self.users = {u["accountId"]: dict(u) for u in (ANNA, BERT)}
            self.me = ANNA["accountId"]
            self.admin = True
            self.deny = False
            self.access_token_lifetime = 3600
            self.extra_sites: list[dict[str, Any]] = []  # listed before the Jira site in accessible-resources
            self.projects: dict[str, dict[str, Any]] = {}
            self.issues: dict[str, Issue] = {}
            self.next_issue_id = 10000
            self.next_comment_id = 10100
            self.failures: deque[tuple[int, str | None]] = deque()
            self.requests: list[tuple[str, str, str]] = []  # Jira calls: (method, full path, auth scheme)
            self.webhooks: dict[str, Webhook] = {}
            self.next_webhook_id = 1
            self.deliveries: list[dict[str, Any]] = []
            self.codes: dict[str, dict[str, Any]] = {}
            self.access_tokens: dict[str, float] = {}
            self.refresh_tokens: dict[str, str] = {}  # token → valid | used | revoked
            self.issued: list[str] = []
            self.token_requests: list[dict[str, str]] = []
            self.consents: list[dict[str, str]] = []
            self.page_tokens: dict[str, tuple[str, int]] = {}

    # --- switches and data for tests ------------------------------------------------------------

    def fail_next(self, count: int, status: int = 429, retry_after: str | None = "1") -> None:
        """The next `count` Jira calls answer `status` (429 or 503) with this Retry-After."""
        with self.lock:
            self.failures.extend([(status, retry_after)] * count)

    def expire_access_tokens(self) -> None:
        with self.lock:
            self.access_tokens = dict.fromkeys(self.access_tokens, 0.0)

    def revoke_refresh_tokens(self) -> None:
        with self.lock:
            self.refresh_tokens = dict.fromkeys(self.refresh_tokens, "revoked")

    def add_project(self, key: str, name: str) -> dict[str, Any]:
        with self.lock:
            project = {"id": str(10000 + len(self.projects)), "key": key, "name": name, "counter": 0}
            self.projects[key] = project
            return project

    def add_issue(self, project: str, summary: str, *, status: str = "To Do", labels: tuple[str, ...] = (),
                  description: str = "", issuetype: str = "Task", priority: str = "Medium",
                  assignee: str | None = None, created: datetime | None = None, **custom: Any) -> str:
        """An issue made directly (no webhook delivery); returns its key."""
        with self.lock:
            return self._new_issue(project, summary, _adf(description) if description else None, status, issuetype,
                                   priority, list(labels), assignee, created or _now(), custom).key

    def issue(self, key: str) -> Issue:
        with self.lock:
            return self.issues[key]

    def description_text(self, key: str) -> str:
        with self.lock:
            return _adf_text(self.issues[key].description or {})

    def calls(self, method: str = "", contains: str = "") -> int:
        with self.lock:
            return sum(1 for m, p, _a in self.requests if (not method or m == method) and contains in p)

    def _new_issue(self, project: str, summary: str, description: dict[str, Any] | None, status: str,
                   issuetype: str, priority: str, labels: list[str], assignee: str | None, created: datetime,
                   custom: dict[str, Any]) -> Issue:
        entry = self.projects[project]
        entry["counter"] += 1
        self.next_issue_id += 1
        issue = Issue(id=str(self.next_issue_id), key=f"{project}-{entry['counter']}", project=project,
                      summary=summary, description=description, status=status, issuetype=issuetype,
                      priority=priority, labels=labels, assignee=assignee, reporter=self.me, created=created,
                      updated=created, custom=dict(custom))
        self.issues[issue.key] = issue
        return issue

    # --- webhook deliveries ---------------------------------------------------------------------

    def signed_delivery(self, event: str, issue_key: str, secret: str | None = None,
                        comment: str | None = None) -> tuple[bytes, dict[str, str]]:
        """The body and headers Jira would POST for `event` on an issue, signed with `secret`."""
        with self.lock:
            body = json.dumps(self._event_body(event, self.issues[issue_key], comment)).encode()
        headers = {"Content-Type": "application/json; charset=utf-8",
                   "X-Atlassian-Webhook-Identifier": str(secrets.randbelow(10 ** 9))}
        if secret:
            headers["X-Hub-Signature"] = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        return body, headers

    def deliver(self, event: str, issue_key: str, comment: str | None = None) -> list[dict[str, Any]]:
        """POST `event` now to every registered webhook it matches (events and JQL filter); what happened."""
        with self.lock:
            issue = self.issues[issue_key]
            targets = [hook for hook in self.webhooks.values() if self._matches(hook, event, issue)]
        return [self._post(hook, event, issue_key, comment) for hook in targets]

    def wait_for_deliveries(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The deliveries once at least `count` happened (polls; AssertionError after `timeout`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.deliveries) >= count:
                    return list(self.deliveries)
            time.sleep(0.02)
        raise AssertionError(f"expected {count} webhook deliveries, got {len(self.deliveries)}")

    def _matches(self, hook: Webhook, event: str, issue: Issue) -> bool:
        if event not in hook.events:
            return False
        if not hook.jql:
            return True
        try:
            where, _order = parse_jql(hook.jql, self)
        except JqlError:
            return False
        return where(issue)

    def _post(self, hook: Webhook, event: str, issue_key: str, comment: str | None) -> dict[str, Any]:
        body, headers = self.signed_delivery(event, issue_key, hook.secret or None, comment)
        record = {"webhook": hook.id, "url": hook.url, "event": event, "issue": issue_key, "body": body,
                  "headers": headers}
        try:
            record["status"] = httpx.post(hook.url, content=body, headers=headers, timeout=10).status_code
        except httpx.HTTPError as exc:
            record["status"] = type(exc).__name__
        with self.lock:
            self.deliveries.append(record)
        return record

    def _announce(self, event: str, issue: Issue, comment: str | None = None) -> None:
        """Deliver an API change to the matching webhooks, on a thread (Jira sends asynchronously)."""
        targets = [hook for hook in self.webhooks.values() if self._matches(hook, event, issue)]
        if targets:
            threading.Thread(target=lambda: [self._post(h, event, issue.key, comment) for h in targets],
                             name="jira-webhook-delivery", daemon=True).start()

    def _event_body(self, event: str, issue: Issue, comment: str | None) -> dict[str, Any]:
        user = self._user_json(self.users[self.me], "2")
        body: dict[str, Any] = {"timestamp": int(time.time() * 1000), "webhookEvent": event, "user": user,
                                "issue": self._issue_json(issue, "2", None)}
        if event.startswith("jira:issue_"):
            body["issue_event_type_name"] = event.split(":", 1)[1]
        if event == "jira:issue_updated":
            body["changelog"] = {"id": str(secrets.randbelow(10 ** 6)), "items": []}
        if event == "comment_created":
            last = issue.comments[-1] if issue.comments else {"id": "0", "body": _adf(comment or "")}
            body["comment"] = {"id": last["id"], "body": _adf_text(last["body"]), "author": user}
        return body

    # --- JSON of things -------------------------------------------------------------------------

    def _user_json(self, user: dict[str, Any], version: str) -> dict[str, Any]:
        shown = {"self": f"{self.url}/rest/api/{version}/user?accountId={user['accountId']}",
                 "accountId": user["accountId"], "accountType": "atlassian", "emailAddress": user["emailAddress"],
                 "displayName": user["displayName"], "active": user["active"], "timeZone": user["timeZone"]}
        if version == "2":
            shown.update(name=user["name"], key=user["key"])
        return shown

    def _project_json(self, project: dict[str, Any], version: str, with_types: bool = False) -> dict[str, Any]:
        shown = {"self": f"{self.url}/rest/api/{version}/project/{project['id']}", "id": project["id"],
                 "key": project["key"], "name": project["name"], "projectTypeKey": "software", "simplified": False,
                 "style": "classic", "isPrivate": False}
        if with_types:
            shown["issueTypes"] = [{"self": f"{self.url}/rest/api/{version}/issuetype/{tid}", "id": tid, "name": name,
                                    "subtask": False, "description": ""} for tid, name in ISSUE_TYPES]
        return shown

    def _status_json(self, name: str) -> dict[str, Any]:
        sid, category, _ = STATUSES[name]
        return {"self": f"{self.url}/rest/api/3/status/{sid}", "name": name, "id": sid,
                "statusCategory": {"key": category, "name": {"new": "To Do", "indeterminate": "In Progress",
                                                             "done": "Done"}[category]}}

    def _field_values(self, issue: Issue, version: str) -> dict[str, Any]:
        def user(account: str | None) -> dict[str, Any] | None:
            return self._user_json(self.users[account], version) if account else None

        description = issue.description if version == "3" else (_adf_text(issue.description) if
                                                                  issue.description else None)
        values: dict[str, Any] = {
            "summary": issue.summary, "description": description, "status": self._status_json(issue.status),
            "assignee": user(issue.assignee), "reporter": user(issue.reporter),
            "priority": {"self": f"{self.url}/rest/api/{version}/priority/{PRIORITIES.index(issue.priority) + 1}",
                         "id": str(PRIORITIES.index(issue.priority) + 1), "name": issue.priority},
            "issuetype": {"id": dict((n, i) for i, n in ISSUE_TYPES)[issue.issuetype], "name": issue.issuetype,
                          "subtask": False},
            "project": self._project_json(self.projects[issue.project], version), "labels": list(issue.labels),
            "created": jira_time(issue.created), "updated": jira_time(issue.updated),
            "comment": {"comments": [self._comment_json(c, version) for c in issue.comments],
                        "maxResults": len(issue.comments), "total": len(issue.comments), "startAt": 0}}
        for field_id in CUSTOM_FIELDS:
            values[field_id] = issue.custom.get(field_id)
        return values

    def _issue_json(self, issue: Issue, version: str, fields: list[str] | None) -> dict[str, Any]:
        values = self._field_values(issue, version)
        if fields is not None:
            wanted = set(fields)
            if not wanted & {"*all", "*navigable"}:
                values = {k: v for k, v in values.items() if k in wanted}
            elif "*all" not in wanted:
                values.pop("comment", None)
        shown: dict[str, Any] = {"expand": "renderedFields,names,schema,operations,editmeta,changelog",
                                 "id": issue.id, "self": f"{self.url}/rest/api/{version}/issue/{issue.id}",
                                 "key": issue.key}
        if values or fields is None:
            shown["fields"] = values
        return shown

    def _comment_json(self, comment: dict[str, Any], version: str) -> dict[str, Any]:
        body = comment["body"] if version == "3" else _adf_text(comment["body"])
        author = self._user_json(self.users[comment["author"]], version)
        return {"self": f"{self.url}/rest/api/{version}/issue/{comment['issue']}/comment/{comment['id']}",
                "id": comment["id"], "author": author, "body": body, "updateAuthor": author,
                "created": jira_time(comment["created"]), "updated": jira_time(comment["created"])}


# --- JQL ------------------------------------------------------------------------------------------------

TOKEN = re.compile(r"""\s*(?:(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?P<op>!=|>=|<=|!~|=|>|<|~)"""
                   r"""|(?P<punct>[(),])|(?P<word>[^\s(),=!<>~"']+)|(?P<open>["'][^"']*))""")
FIELDS = {"project": "project", "status": "status", "labels": "labels", "label": "labels", "created": "created",
          "createddate": "created", "updated": "updated", "updateddate": "updated", "key": "key",
          "issuekey": "key", "id": "key", "issuetype": "issuetype", "type": "issuetype", "priority": "priority",
          "assignee": "assignee", "summary": "summary", "text": "text"}
ORDERABLE = {"created", "updated", "key", "priority", "summary"}
PERIOD = re.compile(r"^([-+]?)(\d+)([mhdw])$")


@dataclass
class _Token:
    kind: str
    text: str
    at: int


def _tokens(jql: str) -> list[_Token]:
    found, at = [], 0
    while jql[at:].strip():
        match = TOKEN.match(jql, at)
        if match is None or match.end() == at:
            bad = jql[at:].lstrip()[0]
            where = len(jql) - len(jql[at:].lstrip()) + 1
            raise JqlError(f"Error in the JQL Query: The character '{bad}' is a reserved JQL character. You must "
                           f"enclose it in a string or use the escape '\\u{ord(bad):04x}' instead. "
                           f"(line 1, character {where})")
        kind = match.lastgroup or ""
        text, start = match.group(kind), match.start(kind)
        if kind == "open":
            raise JqlError(f"Error in the JQL Query: The quoted string '{text[1:]}' has not been completed. "
                           f"(line 1, character {start + 1})")
        found.append(_Token(kind, text, start + 1))
        at = match.end()
    return found


def _value_of(token: _Token) -> str:
    if token.kind == "string":
        return re.sub(r"\\(.)", r"\1", token.text[1:-1])
    return token.text


def _when(text: str, field_name: str) -> datetime:
    match = PERIOD.match(text.strip())
    if match:
        sign = -1 if match.group(1) == "-" else 1
        unit = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1),
                "w": timedelta(weeks=1)}[match.group(3)]
        return _now() + sign * int(match.group(2)) * unit
    for shape in ("%Y-%m-%d %H:%M", "%Y/%m/%d %H:%M", "%Y-%m-%d", "%Y/%m/%d"):
        try:
            return datetime.strptime(text.strip(), shape).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise JqlError(f"Date value '{text}' for field '{field_name}' is invalid. Valid formats include: "
                   "'yyyy/MM/dd HH:mm', 'yyyy-MM-dd HH:mm', 'yyyy/MM/dd', 'yyyy-MM-dd', or a period format "
                   "e.g. '-5d', '4w 2d'.")


class _Parser:
    """Recursive descent over the JQL subset; builds a predicate over issues."""

    def __init__(self, jql: str, server: JiraServer):
        self.tokens = _tokens(jql)
        self.position = 0
        self.server = server
        self.end = len(jql) + 1

    def peek(self, offset: int = 0) -> _Token | None:
        index = self.position + offset
        return self.tokens[index] if index < len(self.tokens) else None

    def take(self) -> _Token | None:
        token = self.peek()
        self.position += 1
        return token

    def keyword(self, *words: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "word" and token.text.lower() in words:
            self.position += 1
            return True
        return False

    def at_order(self) -> bool:
        first, second = self.peek(), self.peek(1)
        return bool(first and second and first.kind == "word" and first.text.lower() == "order"
                    and second.kind == "word" and second.text.lower() == "by")

    def query(self) -> tuple[Callable[[Issue], bool] | None, list[tuple[str, bool]]]:
        where = None if self.peek() is None or self.at_order() else self.expression()
        order: list[tuple[str, bool]] = []
        if self.at_order():
            self.position += 2
            order = self.order()
        leftover = self.peek()
        if leftover is not None:
            raise JqlError(f"Error in the JQL Query: Expecting either 'OR' or 'AND' but got '{leftover.text}'. "
                           f"(line 1, character {leftover.at})")
        return where, order

    def order(self) -> list[tuple[str, bool]]:
        order = []
        while True:
            token = self.take()
            if token is None:
                raise JqlError("Error in the JQL Query: Expecting a field name at the end of the query.")
            name = FIELDS.get(_value_of(token).lower(), "")
            if name not in ORDERABLE:
                raise JqlError(f"Field '{_value_of(token)}' does not exist or you do not have permission to view it.")
            descending = False
            if self.keyword("desc"):
                descending = True
            else:
                self.keyword("asc")
            order.append((name, descending))
            if not (self.peek() and self.peek().kind == "punct" and self.peek().text == ","):
                return order
            self.position += 1

    def expression(self) -> Callable[[Issue], bool]:
        terms = [self.term()]
        while self.keyword("or"):
            terms.append(self.term())
        return terms[0] if len(terms) == 1 else (lambda issue: any(t(issue) for t in terms))

    def term(self) -> Callable[[Issue], bool]:
        factors = [self.factor()]
        while self.keyword("and"):
            factors.append(self.factor())
        return factors[0] if len(factors) == 1 else (lambda issue: all(f(issue) for f in factors))

    def factor(self) -> Callable[[Issue], bool]:
        if self.keyword("not"):
            inner = self.factor()
            return lambda issue: not inner(issue)
        token = self.peek()
        if token is not None and token.kind == "punct" and token.text == "(":
            self.position += 1
            inner = self.expression()
            closing = self.take()
            if closing is None or closing.text != ")":
                raise JqlError(f"Error in the JQL Query: Expecting ')' before the end of the query. "
                               f"(line 1, character {self.end})")
            return inner
        return self.clause()

    def clause(self) -> Callable[[Issue], bool]:
        token = self.take()
        if token is None or token.kind not in ("word", "string"):
            got = "the end of the query" if token is None else f"'{token.text}'"
            raise JqlError(f"Error in the JQL Query: Expecting a field name but got {got}. "
                           f"(line 1, character {token.at if token else self.end})")
        name = FIELDS.get(_value_of(token).lower())
        if name is None:
            raise JqlError(f"Field '{_value_of(token)}' does not exist or you do not have permission to view it.")
        operator = self.operator()
        if operator in ("is", "is not"):
            value = self.take()
            if value is None or value.text.lower() not in ("empty", "null"):
                raise JqlError("Error in the JQL Query: Expecting 'EMPTY' or 'NULL' after 'IS'.")
            empty = _emptiness(name)
            return empty if operator == "is" else (lambda issue: not empty(issue))
        values = self.values(operator)
        return _predicate(self.server, name, operator, values)

    def operator(self) -> str:
        token = self.take()
        if token is None:
            raise JqlError("Error in the JQL Query: Expecting operator before the end of the query. " + OPERATORS)
        if token.kind == "op":
            return token.text
        word = token.text.lower() if token.kind == "word" else ""
        if word == "in":
            return "in"
        if word == "is":
            return "is not" if self.keyword("not") else "is"
        if word == "not" and self.keyword("in"):
            return "not in"
        raise JqlError(f"Error in the JQL Query: Expecting operator but got '{token.text}'. {OPERATORS} "
                       f"(line 1, character {token.at})")

    def values(self, operator: str) -> list[str]:
        if operator in ("in", "not in"):
            opening = self.take()
            if opening is None or opening.text != "(":
                raise JqlError("Error in the JQL Query: Expecting '(' after 'IN'.")
            values = []
            while True:
                values.append(self.value())
                separator = self.take()
                if separator is not None and separator.text == ")":
                    return values
                if separator is None or separator.text != ",":
                    raise JqlError("Error in the JQL Query: Expecting ',' or ')' in the list of values.")
        return [self.value()]

    def value(self) -> str:
        token = self.take()
        if token is None or token.kind not in ("word", "string"):
            got = "the end of the query" if token is None else f"'{token.text}'"
            raise JqlError(f"Error in the JQL Query: Expecting either a value, list or function but got {got}. "
                           f"(line 1, character {token.at if token else self.end})")
        following = self.peek()
        if token.kind == "word" and following is not None and following.text == "(":
            self.position += 1
            closing = self.take()
            if closing is None or closing.text != ")":
                raise JqlError(f"Error in the JQL Query: Expecting ')' after '{token.text}('.")
            if token.text.lower() != "currentuser":
                raise JqlError(f"Unable to find JQL function '{token.text}()'.")
            return "\0currentUser"
        return _value_of(token)


def _emptiness(name: str) -> Callable[[Issue], bool]:
    return lambda issue: not _attribute(issue, name)


def _attribute(issue: Issue, name: str) -> Any:
    return {"project": issue.project, "status": issue.status, "labels": issue.labels, "created": issue.created,
            "updated": issue.updated, "key": issue.key, "issuetype": issue.issuetype, "priority": issue.priority,
            "assignee": issue.assignee, "summary": issue.summary,
            "text": f"{issue.summary} {_adf_text(issue.description or {})}"}[name]


def _predicate(server: JiraServer, name: str, operator: str, values: list[str]) -> Callable[[Issue], bool]:
    """What `name operator values` means for an issue (values checked as Jira checks them)."""
    if name in ("summary", "text"):
        if operator not in ("~", "!~"):
            raise JqlError(f"The operator '{operator}' is not supported by the '{name}' field.")
        word = values[0].lower().strip("*")
        def found(issue: Issue) -> bool:
            return word in str(_attribute(issue, name)).lower()

        return found if operator == "~" else (lambda issue: not found(issue))
    if operator in ("~", "!~"):
        raise JqlError(f"The operator '{operator}' is not supported by the '{name}' field.")
    if name in ("created", "updated"):
        moments = [_when(v, name) for v in values]
        compare = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b, ">": lambda a, b: a > b,
                   ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}.get(operator)
        if compare is None:
            raise JqlError(f"The operator '{operator}' is not supported by the '{name}' field.")
        return lambda issue: compare(_attribute(issue, name), moments[0])
    normalized = [_normalize(server, name, v) for v in values]

    def matches(issue: Issue) -> bool:
        have = _attribute(issue, name)
        if name == "labels":
            return any(v in have for v in normalized)
        return str(have or "").lower() in normalized

    if operator in ("=", "in"):
        return matches
    if operator in ("!=", "not in"):
        return lambda issue: not matches(issue)
    raise JqlError(f"The operator '{operator}' is not supported by the '{name}' field.")


def _normalize(server: JiraServer, name: str, value: str) -> str:
    """A JQL value as the stored attribute compares (lower case; labels exact), checked as Jira does."""
    if name == "project":
        found = next((p for p in server.projects.values()
                      if value.lower() in (p["key"].lower(), p["name"].lower(), p["id"])), None)
        if found is None:
            raise JqlError(f"The value '{value}' does not exist for the field 'project'.")
        return found["key"].lower()
    if name == "status" and value.lower() not in {s.lower() for s in STATUSES}:
        raise JqlError(f"The value '{value}' does not exist for the field 'status'.")
    if name == "priority" and value.lower() not in {p.lower() for p in PRIORITIES}:
        raise JqlError(f"The value '{value}' does not exist for the field 'priority'.")
    if name == "issuetype" and value.lower() not in {n.lower() for _i, n in ISSUE_TYPES}:
        raise JqlError(f"The value '{value}' does not exist for the field 'issuetype'.")
    if name == "assignee":
        if value == "\0currentUser":
            return server.me.lower()
        user = next((u for u in server.users.values() if value.lower() in
                     (u["accountId"].lower(), u["name"], u["emailAddress"], u["displayName"].lower())), None)
        if user is None:
            raise JqlError(f"The value '{value}' does not exist for the field 'assignee'.")
        return user["accountId"].lower()
    return value if name == "labels" else value.lower()


def parse_jql(jql: str, server: JiraServer) -> tuple[Callable[[Issue], bool] | None, list[tuple[str, bool]]]:
    """(the predicate or None for no restriction, the order) of a JQL query; JqlError in Jira's words."""
    where, order = _Parser(jql, server).query()
    return where, order


def _sorted(issues: list[Issue], order: list[tuple[str, bool]]) -> list[Issue]:
    """Issues in the JQL's order (ties by issue id in the same direction); none given: newest first."""
    order = order or [("created", True)]
    ordered = list(issues)
    for name, descending in reversed(order):
        if name == "priority":
            key: Callable[[Issue], Any] = lambda i: (-PRIORITIES.index(i.priority), int(i.id))  # noqa: E731
        elif name == "key":
            key = lambda i: (i.project, int(i.key.rsplit("-", 1)[1]))  # noqa: E731
        else:
            key = lambda i, n=name: (_attribute(i, n), int(i.id))  # noqa: E731
        ordered.sort(key=key, reverse=descending)
    return ordered


# --- the HTTP side ----------------------------------------------------------------------------------------


@dataclass
class Call:
    """One request as the handlers see it."""

    method: str
    path: str
    query: dict[str, str]
    headers: Any
    body: bytes
    version: str = "3"
    user: str = ""
    via_gateway: bool = False
    full_path: str = ""

    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except ValueError:
            raise jira_error(400, "Unexpected character ('x' (code 120)): expected a valid value") from None


def _response(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Response:
    if body is None:
        return Response(status_code=status, headers=headers)
    if isinstance(body, str):
        return Response(body, status_code=status, media_type="text/plain;charset=UTF-8", headers=headers)
    return Response(json.dumps(body), status_code=status, media_type="application/json;charset=UTF-8",
                    headers=headers)


class _Handlers:  # noqa: PLR0904 - one class per API, like the service
    """The routes of the stand-in."""

    def __init__(self, server: JiraServer):
        self.server = server
        routes = [
            ("GET", r"/myself", self.myself), ("GET", r"/project/search", self.project_search),
            ("GET", r"/project", self.project_list), ("GET", r"/project/(?P<key>[^/]+)", self.project),
            ("GET", r"/priority", self.priorities), ("GET", r"/field", self.fields),
            ("GET", r"/user", self.user), ("GET", r"/user/search", self.user_search),
            ("POST", r"/search/jql", self.search_jql), ("GET", r"/search/jql", self.search_jql),
            ("POST", r"/search", self.search_dc), ("GET", r"/search", self.search_dc),
            ("POST", r"/issue", self.create_issue), ("GET", r"/issue/(?P<key>[^/]+)", self.get_issue),
            ("PUT", r"/issue/(?P<key>[^/]+)", self.edit_issue), ("DELETE", r"/issue/(?P<key>[^/]+)", self.delete_issue),
            ("GET", r"/issue/(?P<key>[^/]+)/transitions", self.transitions),
            ("POST", r"/issue/(?P<key>[^/]+)/transitions", self.do_transition),
            ("GET", r"/issue/(?P<key>[^/]+)/comment", self.comments),
            ("POST", r"/issue/(?P<key>[^/]+)/comment", self.add_comment),
        ]
        self.api_routes = [(m, re.compile(p + "$"), f) for m, p, f in routes]
        self.hook_routes = [(m, re.compile(p + "$"), f) for m, p, f in [
            ("POST", r"", self.register_hook), ("GET", r"", self.list_hooks),
            ("GET", r"/(?P<hook>\d+)", self.get_hook), ("DELETE", r"/(?P<hook>\d+)", self.delete_hook)]]

    # --- dispatch ---------------------------------------------------------------------------------

    async def handle(self, request: Request) -> Response:
        call = Call(request.method, request.url.path, dict(request.query_params), request.headers,
                    await request.body(), full_path=request.url.path)
        try:
            return self.dispatch(call)
        except Fault as fault:
            return _response(fault.status, fault.body, fault.headers)

    def dispatch(self, call: Call) -> Response:
        path = call.path
        if path == "/authorize":
            return self.authorize(call)
        if path == "/oauth/token" and call.method == "POST":
            return self.token(call)
        if path == "/oauth/token/accessible-resources" and call.method == "GET":
            self.oauth_user(call)
            return self.accessible_resources()
        if path == "/me" and call.method == "GET":
            return self.atlassian_me(call)
        gateway = re.match(r"^/ex/jira/(?P<cloud>[^/]+)(?P<rest>/rest/.*)$", path)
        if gateway:
            if gateway.group("cloud") != self.server.cloud_id:
                raise Fault(404, {"code": 404, "message": "Not Found"})
            call.user, call.via_gateway, call.path = self.oauth_user(call), True, gateway.group("rest")
            return self.jira(call)
        if path.startswith("/rest/"):
            call.user = self.site_user(call)
            return self.jira(call)
        raise Fault(404, "Not Found")

    def jira(self, call: Call) -> Response:
        scheme = (call.headers.get("authorization") or "-").split(" ", 1)[0]
        with self.server.lock:
            self.server.requests.append((call.method, call.full_path, scheme))
            failure = self.server.failures.popleft() if self.server.failures else None
        if failure is not None:
            status, retry_after = failure
            raise Fault(status, {"errorMessages": ["Rate limit exceeded." if status == 429 else
                                                   "Service temporarily unavailable."], "errors": {}},
                        {"Retry-After": retry_after} if retry_after is not None else {})
        api = re.match(r"^/rest/api/(?P<version>[23])(?P<rest>/.*)$", call.path)
        hooks = re.match(r"^/rest/webhooks/1\.0/webhook(?P<rest>.*)$", call.path)
        if api:
            call.version = api.group("version")
            return self.route(self.api_routes, call, api.group("rest"))
        if hooks:
            return self.route(self.hook_routes, call, hooks.group("rest"))
        raise jira_error(404, "null for uri: " + call.path)

    def route(self, routes: list, call: Call, rest: str) -> Response:
        known = False
        for method, pattern, handler in routes:
            match = pattern.match(rest)
            if match:
                known = True
                if method == call.method:
                    with self.server.lock:
                        return handler(call, **match.groupdict())
        if known:
            raise Fault(405, "Method Not Allowed")
        raise jira_error(404, "null for uri: " + call.path)

    # --- authentication ---------------------------------------------------------------------------

    def site_user(self, call: Call) -> str:
        header = call.headers.get("authorization", "")
        server = self.server
        if header.startswith("Basic "):
            try:
                email, _, token = base64.b64decode(header[6:]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                email, token = "", ""
            if email.lower() == server.email.lower() and hmac.compare_digest(token, server.api_token):
                return server.me
        elif header.startswith("Bearer ") and hmac.compare_digest(header[7:], server.pat):
            return server.me
        raise Fault(401, NOT_AUTHENTICATED, {"WWW-Authenticate": 'OAuth realm="https%3A%2F%2Fjira"'})

    def oauth_user(self, call: Call) -> str:
        header = call.headers.get("authorization", "")
        token = header[7:] if header.startswith("Bearer ") else ""
        with self.server.lock:
            expiry = self.server.access_tokens.get(token)
        if expiry is None or expiry <= time.time():
            raise Fault(401, {"code": 401, "message": "Unauthorized"})
        return self.server.me

    # --- Atlassian identity -----------------------------------------------------------------------

    def authorize(self, call: Call) -> Response:
        server = self.server
        if call.method == "POST":
            form = {k: v[0] for k, v in parse_qs(call.body.decode(), keep_blank_values=True).items()}
            query, decision = form, form.get("consent", "")
        else:
            query, decision = call.query, ""
        if query.get("client_id") != server.client_id:
            return _page(400, "Something went wrong", "Invalid client_id: the app is not registered.")
        if query.get("redirect_uri") != server.redirect_uri:
            return _page(400, "Something went wrong", "The redirect_uri does not match the app's callback URL.")
        if query.get("audience") != "api.atlassian.com":
            return _page(400, "Something went wrong", "The audience parameter is missing or invalid.")
        back, state = query["redirect_uri"], query.get("state", "")
        if query.get("response_type") != "code":
            return _redirect(f"{back}?{urlencode({'error': 'unsupported_response_type', 'state': state})}")
        if server.deny or decision == "deny":
            return _redirect(f"{back}?" + urlencode({"error": "access_denied", "error_description":
                                                     "User did not authorize the request", "state": state}))
        if decision != "accept":
            return _consent_page(server, query)
        code = secrets.token_urlsafe(32)
        with server.lock:
            server.codes[code] = {"redirect_uri": back, "challenge": query.get("code_challenge"),
                                  "scope": query.get("scope", ""), "issued": time.time()}
            server.consents.append(dict(query))
        return _redirect(f"{back}?{urlencode({'code': code, 'state': state})}")

    def token(self, call: Call) -> Response:
        server = self.server
        kind = call.headers.get("content-type", "")
        if "json" in kind:
            form = {k: str(v) for k, v in (call.json() or {}).items()}
        else:
            form = {k: v[0] for k, v in parse_qs(call.body.decode(), keep_blank_values=True).items()}
        with server.lock:
            server.token_requests.append({"grant_type": form.get("grant_type", ""), "content_type": kind})
        if form.get("client_id") != server.client_id or form.get("client_secret") != server.client_secret:
            raise Fault(401, {"error": "access_denied", "error_description": "Unauthorized"})
        grant = form.get("grant_type")
        if grant == "authorization_code":
            return self._redeem_code(form)
        if grant == "refresh_token":
            return self._redeem_refresh(form)
        raise Fault(400, {"error": "unsupported_grant_type", "error_description": "Unsupported grant type"})

    def _redeem_code(self, form: dict[str, str]) -> Response:
        with self.server.lock:
            grant = self.server.codes.pop(form.get("code", ""), None)
        if grant is None or time.time() - grant["issued"] > 600:
            raise Fault(403, {"error": "invalid_grant", "error_description": "Invalid authorization code"})
        if form.get("redirect_uri") != grant["redirect_uri"]:
            raise Fault(403, {"error": "invalid_grant", "error_description": "Invalid redirect_uri"})
        if grant["challenge"]:
            verifier = form.get("code_verifier", "")
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if digest != grant["challenge"]:
                raise Fault(403, {"error": "invalid_grant", "error_description": "Invalid code_verifier"})
        return self._grant_tokens(grant["scope"])

    def _redeem_refresh(self, form: dict[str, str]) -> Response:
        token = form.get("refresh_token", "")
        with self.server.lock:
            state = self.server.refresh_tokens.get(token)
            if state == "valid":
                self.server.refresh_tokens[token] = "used"
        if state != "valid":
            raise Fault(403, {"error": "invalid_grant", "error_description": "Unknown or invalid refresh token."})
        return self._grant_tokens(" ".join(s for s in form.get("scope", "").split()) or "offline_access")

    def _grant_tokens(self, scope: str) -> Response:
        server = self.server
        access = "eyJraWQiOiJhdXRoLmF0bGFzc2lhbi5jb20t." + secrets.token_urlsafe(40)
        answer = {"access_token": access, "expires_in": server.access_token_lifetime, "token_type": "Bearer",
                  "scope": scope}
        with server.lock:
            server.access_tokens[access] = time.time() + server.access_token_lifetime
            server.issued.append(access)
            if "offline_access" in scope.split():
                refresh = "eyJhbGciOiJIUzI1NiJ9.refresh." + secrets.token_urlsafe(40)
                server.refresh_tokens[refresh] = "valid"
                server.issued.append(refresh)
                answer["refresh_token"] = refresh
        return _response(200, answer)

    def accessible_resources(self) -> Response:
        server = self.server
        site = {"id": server.cloud_id, "url": server.url, "name": "acme",
                "scopes": ["read:jira-work", "write:jira-work", "read:jira-user", "manage:jira-webhook"],
                "avatarUrl": "https://site-admin-avatar-cdn.prod.public.atl-paas.net/avatars/240/rocket.png"}
        return _response(200, [*server.extra_sites, site])

    def atlassian_me(self, call: Call) -> Response:
        user = self.server.users[self.oauth_user(call)]
        return _response(200, {"account_type": "atlassian", "account_id": user["accountId"],
                               "email": user["emailAddress"], "name": user["displayName"],
                               "picture": "https://avatar-management.services.atlassian.com/default/48",
                               "account_status": "active", "nickname": user["name"], "zoneinfo": user["timeZone"],
                               "locale": "en-US", "extended_profile": {}})

    # --- Jira: account, projects, fields ----------------------------------------------------------

    def myself(self, call: Call) -> Response:
        return _response(200, self.server._user_json(self.server.users[call.user], call.version))

    def project_search(self, call: Call) -> Response:
        projects = sorted(self.server.projects.values(), key=lambda p: p["key"])
        start, size = _int(call.query, "startAt", 0), min(_int(call.query, "maxResults", 50), 100)
        window = projects[start:start + size]
        last = start + len(window) >= len(projects)
        base = f"{self.server.url}/rest/api/{call.version}/project/search"
        page = {"self": f"{base}?startAt={start}&maxResults={size}", "maxResults": size, "startAt": start,
                "total": len(projects), "isLast": last,
                "values": [self.server._project_json(p, call.version) for p in window]}
        if not last:
            page["nextPage"] = f"{base}?startAt={start + size}&maxResults={size}"
        return _response(200, page)

    def project_list(self, call: Call) -> Response:
        projects = sorted(self.server.projects.values(), key=lambda p: p["key"])
        return _response(200, [self.server._project_json(p, call.version) for p in projects])

    def project(self, call: Call, key: str) -> Response:
        found = self._project_by(key)
        if found is None:
            raise jira_error(404, f"No project could be found with key '{key}'.")
        return _response(200, self.server._project_json(found, call.version, with_types=True))

    def _project_by(self, key: str) -> dict[str, Any] | None:
        return next((p for p in self.server.projects.values() if key in (p["key"], p["id"])), None)

    def priorities(self, call: Call) -> Response:
        return _response(200, [{"self": f"{self.server.url}/rest/api/{call.version}/priority/{n + 1}", "id": str(n + 1),
                                "name": name, "statusColor": "#ffab00", "description": name}
                               for n, name in enumerate(PRIORITIES)])

    def fields(self, call: Call) -> Response:
        system = [{"id": f, "key": f, "name": f.capitalize() if f != "issuetype" else "Issue Type", "custom": False,
                   "orderable": True, "navigable": True, "searchable": True, "clauseNames": [f]}
                  for f in SYSTEM_FIELDS]
        custom = [{"id": fid, "key": fid, "name": name, "custom": True, "orderable": True, "navigable": True,
                   "searchable": True, "clauseNames": [f"cf[{fid.rsplit('_', 1)[1]}]", name],
                   "schema": {"type": kind, "custom": "com.atlassian.jira.plugin.system.customfieldtypes:float",
                              "customId": int(fid.rsplit("_", 1)[1])}}
                  for fid, (name, kind) in CUSTOM_FIELDS.items()]
        return _response(200, system + custom)

    def user(self, call: Call) -> Response:
        wanted = call.query.get("accountId") or call.query.get("username") or call.query.get("key") or ""
        found = next((u for u in self.server.users.values() if wanted in (u["accountId"], u["name"], u["key"])), None)
        if found is None:
            raise jira_error(404, "Specified user does not exist or you do not have required permissions")
        return _response(200, self.server._user_json(found, call.version))

    def user_search(self, call: Call) -> Response:
        wanted = (call.query.get("query") or call.query.get("username") or "").lower()
        if not wanted:
            raise jira_error(400, "The query parameter 'query' is required.")
        found = [u for u in self.server.users.values()
                 if any(wanted in str(u[k]).lower() for k in ("emailAddress", "displayName", "name"))]
        return _response(200, [self.server._user_json(u, call.version) for u in found])

    # --- Jira: search -----------------------------------------------------------------------------

    def _search_args(self, call: Call) -> dict[str, Any]:
        if call.method == "POST":
            body = call.json()
            if not isinstance(body, dict):
                raise jira_error(400, "The request body is not a JSON object.")
            return body
        args: dict[str, Any] = dict(call.query)
        if "fields" in args:
            args["fields"] = [f for f in args["fields"].split(",") if f]
        return args

    def _matching(self, jql: str, bounded: bool) -> list[Issue]:
        try:
            where, order = parse_jql(jql, self.server)
        except JqlError as exc:
            raise jira_error(400, str(exc)) from None
        if bounded and where is None:
            raise jira_error(400, "Unbounded JQL queries are not allowed here. Please add a search restriction to "
                                  "your query.")
        issues = [i for i in self.server.issues.values() if where is None or where(i)]
        return _sorted(issues, order)

    def search_jql(self, call: Call) -> Response:
        args = self._search_args(call)
        jql = str(args.get("jql") or "")
        fields = args.get("fields") or ["id"]
        size = max(1, min(_int(args, "maxResults", 50), SEARCH_PAGE_MAX if fields != ["id"] else 5000))
        offset = 0
        token = args.get("nextPageToken")
        if token:
            known = self.server.page_tokens.get(str(token))
            if known is None or known[0] != jql:
                raise jira_error(400, "The provided next page token is invalid or expired.")
            offset = known[1]
        issues = self._matching(jql, bounded=True)
        window = issues[offset:offset + size]
        page: dict[str, Any] = {"issues": [self.server._issue_json(i, call.version, list(fields)) for i in window],
                                "isLast": offset + len(window) >= len(issues)}
        if not page["isLast"]:
            following = base64.urlsafe_b64encode(secrets.token_bytes(24)).decode().rstrip("=")
            self.server.page_tokens[following] = (jql, offset + len(window))
            page["nextPageToken"] = following
        return _response(200, page)

    def search_dc(self, call: Call) -> Response:
        args = self._search_args(call)
        jql = str(args.get("jql") or "")
        start = _int(args, "startAt", 0)
        size = max(0, min(_int(args, "maxResults", 50), DC_SEARCH_MAX))
        fields = args.get("fields") or ["*navigable"]
        issues = self._matching(jql, bounded=False)
        window = issues[start:start + size]
        return _response(200, {"expand": "schema,names", "startAt": start, "maxResults": size, "total": len(issues),
                               "issues": [self.server._issue_json(i, call.version, list(fields)) for i in window]})

    # --- Jira: issues -----------------------------------------------------------------------------

    def _issue(self, key: str) -> Issue:
        found = self.server.issues.get(key) or next((i for i in self.server.issues.values() if i.id == key), None)
        if found is None:
            raise jira_error(404, NO_ISSUE)
        return found

    def get_issue(self, call: Call, key: str) -> Response:
        fields = call.query.get("fields")
        return _response(200, self.server._issue_json(self._issue(key), call.version,
                                                      fields.split(",") if fields else None))

    def _user_of(self, value: Any, version: str) -> str | None:
        if value is None:
            return None
        wanted = value.get("accountId") or (value.get("name") if version == "2" else None) \
            if isinstance(value, dict) else None
        found = next((u for u in self.server.users.values() if wanted in (u["accountId"], u["name"])), None)
        if found is None:
            raise ValueError("Specified user does not exist or you do not have required permissions")
        return found["accountId"]

    def _fields_of(self, raw: Any, version: str, creating: bool) -> dict[str, Any]:
        """Issue fields from a request, checked as Jira checks them (errors by field)."""
        if not isinstance(raw, dict):
            raise jira_error(400, "Can not deserialize instance of java.util.LinkedHashMap out of START_ARRAY token")
        errors: dict[str, str] = {}
        taken: dict[str, Any] = {}
        for name, value in raw.items():
            try:
                taken[name] = self._field(name, value, version)
            except ValueError as exc:
                errors[name] = str(exc)
        if creating:
            if "project" not in raw:
                errors["project"] = "Specify a valid project ID or key"
            if "issuetype" not in raw:
                errors["issuetype"] = "Specify an issue type"
            if not str(raw.get("summary") or "").strip() and "summary" not in errors:
                errors["summary"] = "You must specify a summary of the issue."
        if errors:
            raise Fault(400, {"errorMessages": [], "errors": errors})
        return taken

    def _field(self, name: str, value: Any, version: str) -> Any:  # noqa: C901 - one branch per field
        if name == "project":
            wanted = value.get("key") or value.get("id") if isinstance(value, dict) else None
            found = self._project_by(str(wanted)) if wanted else None
            if found is None:
                raise ValueError("valid project is required")
            return found["key"]
        if name == "issuetype":
            wanted = value.get("name") or value.get("id") if isinstance(value, dict) else None
            found = next((n for i, n in ISSUE_TYPES if wanted in (i, n)), None)
            if found is None:
                raise ValueError("Specify a valid issue type")
            return found
        if name == "summary":
            if not isinstance(value, str):
                raise ValueError("Operation value must be a string")
            if len(value) > 255:
                raise ValueError("Summary must be less than 255 characters.")
            return value
        if name == "description":
            if value is None:
                return None
            if version == "3":
                if not _is_adf(value):
                    raise ValueError("Operation value must be an Atlassian Document (see the Atlassian Document "
                                     "Format)")
                return value
            if not isinstance(value, str):
                raise ValueError("Operation value must be a string")
            return _adf(value)
        if name == "labels":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError("Operation value must be a list of strings")
            for label in value:
                if " " in label:
                    raise ValueError(f"The label '{label}' contains spaces which is invalid.")
                if len(label) > 255:
                    raise ValueError("The label must be less than 255 characters.")
            return list(value)
        if name == "priority":
            wanted = value.get("name") or value.get("id") if isinstance(value, dict) else None
            found = next((p for n, p in enumerate(PRIORITIES) if wanted in (p, str(n + 1))), None)
            if found is None:
                raise ValueError(f"Priority name '{wanted}' is not valid")
            return found
        if name == "assignee":
            return self._user_of(value, version)
        if name in CUSTOM_FIELDS:
            if CUSTOM_FIELDS[name][1] == "number" and value is not None and not isinstance(value, int | float):
                raise ValueError("Operation value must be a number")
            return value
        raise ValueError(f"Field '{name}' cannot be set. It is not on the appropriate screen, or unknown.")

    def create_issue(self, call: Call) -> Response:
        body = call.json()
        fields = self._fields_of((body or {}).get("fields") if isinstance(body, dict) else None, call.version, True)
        custom = {k: v for k, v in fields.items() if k in CUSTOM_FIELDS}
        issue = self.server._new_issue(fields["project"], fields["summary"], fields.get("description"), "To Do",
                                       fields["issuetype"], fields.get("priority") or "Medium",
                                       fields.get("labels") or [], fields.get("assignee"), _now(), custom)
        self.server._announce("jira:issue_created", issue)
        return _response(201, {"id": issue.id, "key": issue.key,
                               "self": f"{self.server.url}/rest/api/{call.version}/issue/{issue.id}"})

    def edit_issue(self, call: Call, key: str) -> Response:
        issue = self._issue(key)
        body = call.json()
        if not isinstance(body, dict):
            raise jira_error(400, "The request body is not a JSON object.")
        fields = self._fields_of(body.get("fields") or {}, call.version, False)
        for name, operations in (body.get("update") or {}).items():
            if name != "labels":
                raise Fault(400, {"errorMessages": [], "errors": {name: f"Field '{name}' cannot be set."}})
            labels = list(fields.get("labels", issue.labels))
            for operation in operations:
                if "add" in operation and operation["add"] not in labels:
                    labels.append(operation["add"])
                if "remove" in operation and operation["remove"] in labels:
                    labels.remove(operation["remove"])
            fields["labels"] = self._field("labels", labels, call.version)
        if "project" in fields or "issuetype" in fields:
            raise Fault(400, {"errorMessages": [], "errors": {"project": "Field 'project' cannot be set."}})
        for name, value in fields.items():
            if name in CUSTOM_FIELDS:
                issue.custom[name] = value
            else:
                setattr(issue, name, value)
        issue.updated = _now()
        self.server._announce("jira:issue_updated", issue)
        return _response(204)

    def delete_issue(self, call: Call, key: str) -> Response:
        issue = self._issue(key)
        self.server._announce("jira:issue_deleted", issue)
        del self.server.issues[issue.key]
        return _response(204)

    def _available(self, issue: Issue) -> list[tuple[str, str, str]]:
        return [t for t in TRANSITIONS if t[2] != issue.status]

    def transitions(self, call: Call, key: str) -> Response:
        issue = self._issue(key)
        return _response(200, {"expand": "transitions", "transitions": [
            {"id": tid, "name": name, "to": self.server._status_json(target), "hasScreen": False, "isGlobal": True,
             "isInitial": False, "isAvailable": True, "isConditional": False, "isLooped": False}
            for tid, name, target in self._available(issue)]})

    def do_transition(self, call: Call, key: str) -> Response:
        issue = self._issue(key)
        body = call.json()
        wanted = str(((body or {}).get("transition") or {}).get("id") or "") if isinstance(body, dict) else ""
        found = next((t for t in self._available(issue) if t[0] == wanted), None)
        if found is None:
            raise jira_error(400, f"Transition id '{wanted}' is not valid for this issue.")
        issue.status = found[2]
        issue.updated = _now()
        self.server._announce("jira:issue_updated", issue)
        return _response(204)

    def comments(self, call: Call, key: str) -> Response:
        issue = self._issue(key)
        shown = [self.server._comment_json(c, call.version) for c in issue.comments]
        return _response(200, {"startAt": 0, "maxResults": len(shown), "total": len(shown), "comments": shown})

    def add_comment(self, call: Call, key: str) -> Response:
        issue = self._issue(key)
        body = call.json()
        text = body.get("body") if isinstance(body, dict) else None
        if call.version == "3" and not _is_adf(text):
            raise Fault(400, {"errorMessages": [], "errors": {"comment": "Comment body is not valid!"}})
        if call.version == "2" and not (isinstance(text, str) and text.strip()):
            raise Fault(400, {"errorMessages": [], "errors": {"comment": "Comment body can not be empty!"}})
        self.server.next_comment_id += 1
        comment = {"id": str(self.server.next_comment_id), "issue": issue.id, "author": call.user,
                   "body": text if call.version == "3" else _adf(text), "created": _now()}
        issue.comments.append(comment)
        self.server._announce("comment_created", issue)
        return _response(201, self.server._comment_json(comment, call.version))

    # --- webhooks ---------------------------------------------------------------------------------

    def _admin_only(self) -> None:
        if not self.server.admin:
            raise Fault(403, {"errorMessages": ["Only Jira administrators can manage webhooks."], "errors": {}})

    def _hook_json(self, hook: Webhook) -> dict[str, Any]:
        return {"self": f"{self.server.url}/rest/webhooks/1.0/webhook/{hook.id}", "name": hook.name, "url": hook.url,
                "events": hook.events, "filters": {"issue-related-events-section": hook.jql},
                "excludeBody": hook.exclude_body, "enabled": True, "lastUpdatedUser": self.server.me,
                "lastUpdatedDisplayName": self.server.users[self.server.me]["displayName"],
                "lastUpdated": int(time.time() * 1000)}

    def register_hook(self, call: Call) -> Response:
        self._admin_only()
        body = call.json()
        if not isinstance(body, dict):
            raise jira_error(400, "The request body is not a JSON object.")
        url, name = str(body.get("url") or ""), str(body.get("name") or "")
        if not name:
            raise jira_error(400, "Webhook name must not be empty.")
        if urlsplit(url).scheme not in ("http", "https"):
            raise jira_error(400, "Webhook URL must be a valid http or https URL.")
        events = body.get("events") or []
        jql = str((body.get("filters") or {}).get("issue-related-events-section") or "")
        if jql:
            try:
                parse_jql(jql, self.server)
            except JqlError as exc:
                raise jira_error(400, f"Invalid JQL filter: {exc}") from None
        hook = Webhook(str(self.server.next_webhook_id), name, url, [str(e) for e in events], jql,
                       str(body.get("secret") or ""), bool(body.get("excludeBody")))
        self.server.next_webhook_id += 1
        self.server.webhooks[hook.id] = hook
        return _response(201, self._hook_json(hook))

    def list_hooks(self, call: Call) -> Response:
        self._admin_only()
        return _response(200, [self._hook_json(h) for h in self.server.webhooks.values()])

    def get_hook(self, call: Call, hook: str) -> Response:
        self._admin_only()
        if hook not in self.server.webhooks:
            raise jira_error(404, "Webhook not found.")
        return _response(200, self._hook_json(self.server.webhooks[hook]))

    def delete_hook(self, call: Call, hook: str) -> Response:
        self._admin_only()
        if self.server.webhooks.pop(hook, None) is None:
            raise jira_error(404, "Webhook not found.")
        return _response(204)


def _int(values: dict[str, Any], name: str, default: int) -> int:
    try:
        return int(values.get(name, default))
    except (TypeError, ValueError):
        raise jira_error(400, f"The value '{values.get(name)}' is not a valid number for '{name}'.") from None


def _page(status: int, title: str, text: str) -> Response:
    return Response(f"<!doctype html><html><body><h1>{html.escape(title)}</h1><p>{html.escape(text)}</p></body></html>",
                    status_code=status, media_type="text/html; charset=utf-8")


def _redirect(url: str) -> Response:
    return Response(status_code=302, headers={"Location": url})


def _consent_page(server: JiraServer, query: dict[str, str]) -> Response:
    hidden = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                     for k, v in query.items())
    scopes = "".join(f"<li>{html.escape(s)}</li>" for s in query.get("scope", "").split())
    page = ("<!doctype html><html><head><title>Authorize access</title></head><body>"
            f"<h1>PowerOn is requesting access to your Atlassian account</h1><p>{html.escape(server.email)}</p>"
            f"<p>Use app on: acme ({html.escape(server.url)})</p><ul>{scopes}</ul>"
            f'<form method="post" action="/authorize">{hidden}'
            '<button type="submit" name="consent" value="deny">Cancel</button> '
            '<button type="submit" name="consent" value="accept">Accept</button></form></body></html>')
    return Response(page, media_type="text/html; charset=utf-8")


def app_of(server: JiraServer) -> Starlette:
    """The ASGI app of the stand-in (one catch-all route; the handlers route by Jira's paths)."""
    handlers = _Handlers(server)
    methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
    return Starlette(routes=[Route("/{path:path}", handlers.handle, methods=methods)])


def serve_jira(server: JiraServer):
    """Run the stand-in on a free port of 127.0.0.1 (sets `server.url`) until the block ends."""
    return serve_stand_in(server, app_of)


def accept_consent(authorize_url: str, decision: str = "accept") -> str:
    """What a browser does at Atlassian's consent page: open it, press Accept (or Cancel); where it is
    sent back to."""
    page = httpx.get(authorize_url, follow_redirects=False)
    if page.status_code == 302:
        return page.headers["location"]
    assert page.status_code == 200, page.text
    fields = dict(re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', page.text))
    fields = {html.unescape(k): html.unescape(v) for k, v in fields.items()}
    base = urlsplit(authorize_url)
    answer = httpx.post(f"{base.scheme}://{base.netloc}/authorize", data={**fields, "consent": decision},
                        follow_redirects=False)
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]
