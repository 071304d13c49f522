"""A ClickUp API v2 stand-in on 127.0.0.1 for the ClickUp tests (starlette, served by uvicorn in a thread).

It speaks ClickUp's protocol on its real paths, with its payload shapes and error bodies
(`{"err": "…", "ECODE": "…"}`):

- OAuth app flow: `GET /api?client_id&redirect_uri&state` (ClickUp's consent page, "Authorization
  URL"): a page listing the user's workspaces with checkboxes and "Connect Workspace" / "Cancel";
  its POST redirects back with `code` and `state` (cancel: `error=access_denied`); `deny = True`
  refuses at once. `POST /api/v2/oauth/token` (client_id, client_secret, code; in the query as
  ClickUp documents, or a form) answers `{"access_token": …}`: tokens that never expire, no refresh
  token. A token is authorized for the workspaces chosen on the consent page only.
- Auth: a personal token is sent as it is (`Authorization: pk_…`), an OAuth access token as
  `Authorization: Bearer …`. No header: 401 OAUTH_017; an unknown token: 401 OAUTH_025 ("Token
  invalid"); a workspace, space, folder, list or task the token may not see (or that does not exist):
  401 OAUTH_027 ("Team not authorized"); a deleted task: 404 ITEM_013.
- `/user`, `/team` (workspaces with members), `/team/{id}/space`, `/space/{id}/folder` (with their
  lists), `/space/{id}/list` (folderless lists), `/folder/{id}/list`, `/team/{id}/task` and
  `/list/{id}/task` (GET: filters `statuses[]`, `assignees[]`, `tags[]`, `list_ids[]`, `space_ids[]`,
  `due_date_gt`/`due_date_lt` (ms), `custom_fields` (ClickUp's JSON filter), `include_closed`,
  `archived`, `page` (0-based, `page_size` tasks a page, `last_page`); POST creates), `/task/{id}` (GET,
  PUT with `assignees: {add, rem}`), `/task/{id}/tag/{name}` (POST, DELETE), `/task/{id}/field/{id}`
  (POST), `/task/{id}/comment` (GET, POST), `/task/{id}/attachment` (multipart `attachment`),
  `/team/{id}/webhook` (GET, POST), `/webhook/{id}` (DELETE).
- Rate limit: `fail_next(n, reset_in)` answers the next n API calls with 429 and `X-RateLimit-Limit`,
  `X-RateLimit-Remaining: 0`, `X-RateLimit-Reset` (epoch seconds, `reset_in` from now).
- Webhooks: a registration answers `{id, webhook: {…, secret}}`; creating, updating, commenting or
  deleting a task POSTs `{"event", "task_id", "webhook_id", "history_items"}` to every matching
  webhook (its team, and its space/list when set) with `X-Signature` = hex HMAC-SHA256(secret, body),
  from a background thread (`auto_deliver = False` stops that); :meth:`ClickUpServer.deliver` sends
  one at once. Each delivery is recorded in `deliveries`.

Use it as ``with serve(ClickUpServer(CLIENT_ID, CLIENT_SECRET, CALLBACK)) as clickup:``; then
`clickup.api_url` is POWERON_CLICKUP_API_URL, `clickup.auth_url` POWERON_CLICKUP_AUTH_URL and
`clickup.personal_token` Anna's personal token. :meth:`ClickUpServer.reset` gives the default
workspace (TEAM_ID "Acme") with space SPACE_ID "Engineering": the folderless list BACKLOG_ID
"Backlog" and, in folder FOLDER_ID "Sprints", the list SPRINT_ID "Sprint 12".
"""

from __future__ import annotations

import hashlib
import hmac
import html
import itertools
import json
import re
import secrets
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.mcp_test_servers import serve_stand_in

TEAM_ID = "9015001"
SPACE_ID = "90150101"
FOLDER_ID = "90150201"
BACKLOG_ID = "901500301"
SPRINT_ID = "901500302"
ANNA = {"id": 81726354, "username": "Anna Meier", "email": "anna.meier@acme.example", "color": "#7b68ee",
        "initials": "AM", "profilePicture": None}
BERT = {"id": 81726355, "username": "Bert Keller", "email": "bert.keller@acme.example", "color": "#e04f44",
        "initials": "BK", "profilePicture": None}
DEFAULT_STATUSES = (("to do", "open", "#d3d3d3"), ("in progress", "custom", "#4194f6"),
                    ("review", "custom", "#a875ff"), ("complete", "closed", "#6bc950"))
PRIORITIES = {1: ("urgent", "#f50000"), 2: ("high", "#f8ae00"), 3: ("normal", "#6fddff"), 4: ("low", "#d8d8d8")}
RATE_LIMIT = 100
FILTER_OPERATORS = ("=", "!=", "<", "<=", ">", ">=", "IS NULL", "IS NOT NULL", "ANY", "ALL", "NOT ANY",
                    "NOT ALL", "RANGE")


def _ms(moment: float | None = None) -> int:
    return int((time.time() if moment is None else moment) * 1000)


class ClickUpFault(Exception):
    """An error answer: HTTP status, ClickUp's `err` and `ECODE` (and headers)."""

    def __init__(self, status: int, err: str, ecode: str, headers: dict[str, str] | None = None):
        super().__init__(err)
        self.status, self.err, self.ecode, self.headers = status, err, ecode, headers or {}


def not_authorized() -> ClickUpFault:
    return ClickUpFault(401, "Team not authorized", "OAUTH_027")


@dataclass
class Token:
    """Who a token is and which workspaces it may use (None: every workspace of the user)."""

    user_id: int
    teams: set[str] | None = None
    oauth: bool = False


@dataclass
class ClickUpServer:
    """The stand-in's data and knobs (see the module docstring).

    Args:
        client_id: The only OAuth app it knows.
        client_secret: Its secret.
        redirect_uri: The redirect URL registered for it.
    """

    client_id: str = "clickup-test-client"
    client_secret: str = "clickup-test-secret"
    redirect_uri: str = ""
    url: str = ""  # set by serve
    page_size: int = 100
    auto_deliver: bool = True
    deny: bool = False
    lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self.reset()

    @property
    def api_url(self) -> str:
        return self.url + "/api/v2"

    @property
    def auth_url(self) -> str:
        return self.url + "/api"

    # --- state ------------------------------------------------------------------------------------

    def reset(self) -> None:
        """The default workspace (Acme: Anna and Bert; space Engineering with lists Backlog and, in
        folder Sprints, Sprint 12), Anna's personal token, no tasks, default knobs."""
        with self.lock:
            self.page_size, self.auto_deliver, self.deny = 100, True, False
            self.users: dict[int, dict[str, Any]] = {ANNA["id"]: dict(ANNA), BERT["id"]: dict(BERT)}
            self.me = ANNA["id"]
            self.personal_token = f"pk_{ANNA['id']}_" + secrets.token_hex(16).upper()
            self.tokens: dict[str, Token] = {self.personal_token: Token(ANNA["id"])}
            self.issued: list[str] = [self.personal_token]
            self.codes: dict[str, dict[str, Any]] = {}
            self.teams: dict[str, dict[str, Any]] = {}
            self.spaces: dict[str, dict[str, Any]] = {}
            self.folders: dict[str, dict[str, Any]] = {}
            self.lists: dict[str, dict[str, Any]] = {}
            self.tasks: dict[str, dict[str, Any]] = {}
            self.webhooks: dict[str, dict[str, Any]] = {}
            self.deliveries: list[dict[str, Any]] = []
            self.requests: list[tuple[str, str, list[tuple[str, str]]]] = []
            self.token_requests: list[dict[str, str]] = []
            self.consents: list[dict[str, str]] = []
            self.failures: deque[float] = deque()
            self.add_team("Acme", [ANNA["id"], BERT["id"]], team_id=TEAM_ID)
            self.add_space(TEAM_ID, "Engineering", space_id=SPACE_ID)
            self.add_list(SPACE_ID, "Backlog", list_id=BACKLOG_ID)
            self.add_folder(SPACE_ID, "Sprints", folder_id=FOLDER_ID)
            self.add_list(SPACE_ID, "Sprint 12", folder_id=FOLDER_ID, list_id=SPRINT_ID)

    def _id(self, prefix: str = "") -> str:
        return f"{prefix}{next(self._ids):06d}"

    def add_user(self, username: str, email: str, team_id: str = TEAM_ID) -> int:
        with self.lock:
            user_id = 81726400 + len(self.users)
            self.users[user_id] = {"id": user_id, "username": username, "email": email, "color": "#000000",
                                   "initials": "".join(w[0] for w in username.split())[:2].upper(),
                                   "profilePicture": None}
            self.teams[team_id]["members"].append(user_id)
            return user_id

    def add_team(self, name: str, members: list[int] | None = None, team_id: str | None = None) -> str:
        with self.lock:
            team_id = team_id or "90" + self._id()
            self.teams[team_id] = {"id": team_id, "name": name, "color": "#536cfe", "avatar": None,
                                   "members": list(members if members is not None else [self.me])}
            return team_id

    def add_space(self, team_id: str, name: str, statuses: tuple = DEFAULT_STATUSES, space_id: str | None = None
                  ) -> str:
        with self.lock:
            space_id = space_id or "91" + self._id()
            self.spaces[space_id] = {"id": space_id, "team": team_id, "name": name, "private": False,
                                     "archived": False,
                                     "statuses": [{"status": s, "type": t, "color": c, "orderindex": i}
                                                  for i, (s, t, c) in enumerate(statuses)]}
            return space_id

    def add_folder(self, space_id: str, name: str, folder_id: str | None = None) -> str:
        with self.lock:
            folder_id = folder_id or "92" + self._id()
            self.folders[folder_id] = {"id": folder_id, "space": space_id, "name": name, "archived": False}
            return folder_id

    def add_list(self, space_id: str, name: str, folder_id: str | None = None, list_id: str | None = None,
                 archived: bool = False) -> str:
        with self.lock:
            list_id = list_id or "93" + self._id()
            self.lists[list_id] = {"id": list_id, "space": space_id, "folder": folder_id, "name": name,
                                   "archived": archived, "fields": {}}
            return list_id

    def add_custom_field(self, list_id: str, name: str, type_: str = "short_text") -> str:
        """A custom field of a list (types: short_text, number, checkbox, date …); its id."""
        with self.lock:
            field_id = str(uuid.uuid4())
            self.lists[list_id]["fields"][field_id] = {"id": field_id, "name": name, "type": type_,
                                                       "type_config": {}, "required": False,
                                                       "hide_from_guests": False}
            return field_id

    def add_task(self, list_id: str, name: str, *, status: str = "to do", assignees: list[int] = (),
                 tags: list[str] = (), due: int | None = None, priority: int | None = None,
                 description: str = "", fields: dict[str, Any] | None = None, created: int | None = None) -> str:
        """A task made directly (no webhook delivery); `due` in ms."""
        with self.lock:
            task_id = "86" + secrets.token_hex(4)[:7]
            now = created or _ms()
            self.tasks[task_id] = {"id": task_id, "list": list_id, "name": name, "description": description,
                                   "markdown": description, "status": status, "assignees": list(assignees),
                                   "tags": list(tags), "due": due, "due_time": False, "priority": priority,
                                   "fields": dict(fields or {}), "created": now, "updated": now, "closed": None,
                                   "creator": self.me, "archived": False, "deleted": False, "comments": [],
                                   "attachments": [], "order": next(self._ids)}
            return task_id

    def task_named(self, name: str) -> dict[str, Any] | None:
        with self.lock:
            return next((t for t in self.tasks.values() if t["name"] == name and not t["deleted"]), None)

    def delete_task(self, task_id: str) -> None:
        """Delete a task (ClickUp answers 404 ITEM_013 for it afterwards) and announce taskDeleted."""
        with self.lock:
            self.tasks[task_id]["deleted"] = True
        self._announce("taskDeleted", task_id)

    def fail_next(self, count: int, reset_in: float = 1.0) -> None:
        """The next `count` API calls answer 429 (rate limit), resetting `reset_in` seconds from then."""
        with self.lock:
            self.failures.extend([reset_in] * count)

    def calls(self, method: str = "GET", contains: str = "") -> list[tuple[str, str, list[tuple[str, str]]]]:
        """The API calls made so far (method, path, query items)."""
        with self.lock:
            return [r for r in self.requests if r[0] == method and contains in r[1]]

    # --- webhook deliveries -----------------------------------------------------------------------

    def _matching_hooks(self, event: str, task: dict[str, Any] | None) -> list[dict[str, Any]]:
        if task is None:
            return [h for h in self.webhooks.values() if event in h["events"] or "*" in h["events"]]
        lst = self.lists.get(task["list"], {})
        space = self.spaces.get(lst.get("space"), {})
        found = []
        for hook in self.webhooks.values():
            if event not in hook["events"] and "*" not in hook["events"]:
                continue
            if hook["team_id"] != space.get("team"):
                continue
            if hook["space_id"] and str(hook["space_id"]) != lst.get("space"):
                continue
            if hook["list_id"] and str(hook["list_id"]) != task["list"]:
                continue
            found.append(hook)
        return found

    def deliver(self, event: str, task_id: str | None = None, payload: dict[str, Any] | None = None,
                tamper: bool = False) -> list[int]:
        """POST `event` (about `task_id`) to every matching webhook now; the HTTP statuses they answered
        (an unreachable endpoint: 0). `tamper`: the body is changed after signing."""
        with self.lock:
            task = self.tasks.get(task_id) if task_id else None
            hooks = [dict(h) for h in self._matching_hooks(event, task)]
        return [self._post(hook, event, task_id, payload, tamper) for hook in hooks]

    def _post(self, hook: dict[str, Any], event: str, task_id: str | None, payload: dict[str, Any] | None,
              tamper: bool) -> int:
        body: dict[str, Any] = {"event": event, "webhook_id": hook["id"]}
        if task_id:
            body["task_id"] = task_id
        body["history_items"] = [{"id": str(uuid.uuid4().int)[:19], "type": 1, "date": str(_ms()),
                                  "field": event, "parent_id": None, "user": self.users.get(self.me)}]
        body.update(payload or {})
        raw = json.dumps(body, separators=(",", ":")).encode()
        signature = hmac.new(hook["secret"].encode(), raw, hashlib.sha256).hexdigest()
        if tamper:
            raw = raw.replace(b'"event"', b'"event" ', 1)
        try:
            answer = httpx.post(hook["endpoint"], content=raw, timeout=10,
                                headers={"Content-Type": "application/json", "X-Signature": signature})
            status = answer.status_code
        except httpx.HTTPError:
            status = 0
        with self.lock:
            self.deliveries.append({"url": hook["endpoint"], "event": event, "task_id": task_id, "status": status,
                                    "webhook_id": hook["id"], "body": body})
        return status

    def _announce(self, event: str, task_id: str, *more: str) -> None:
        """Deliver `event` (and `more` events) about a task in a background thread."""
        if not self.auto_deliver:
            return
        for name in (event, *more):
            thread = threading.Thread(target=self.deliver, args=(name, task_id), name="clickup-delivery", daemon=True)
            thread.start()

    # --- JSON of ClickUp's objects ----------------------------------------------------------------

    def user_json(self, user_id: int) -> dict[str, Any]:
        return dict(self.users[user_id])

    def team_json(self, team: dict[str, Any]) -> dict[str, Any]:
        members = [{"user": {**self.user_json(u), "role": 1 if i == 0 else 3}} for i, u in enumerate(team["members"])]
        return {"id": team["id"], "name": team["name"], "color": team["color"], "avatar": team["avatar"],
                "members": members}

    def space_json(self, space: dict[str, Any]) -> dict[str, Any]:
        return {"id": space["id"], "name": space["name"], "private": space["private"], "color": None,
                "avatar": None, "admin_can_manage": True, "archived": space["archived"], "members": [],
                "statuses": space["statuses"], "multiple_assignees": True,
                "features": {"due_dates": {"enabled": True}, "tags": {"enabled": True},
                             "custom_fields": {"enabled": True}}}

    def list_json(self, lst: dict[str, Any]) -> dict[str, Any]:
        folder = self.folders.get(lst["folder"]) if lst["folder"] else None
        space = self.spaces[lst["space"]]
        count = sum(1 for t in self.tasks.values() if t["list"] == lst["id"] and not t["deleted"])
        return {"id": lst["id"], "name": lst["name"], "orderindex": 0, "content": "", "status": None,
                "priority": None, "assignee": None, "task_count": count, "due_date": None, "start_date": None,
                "folder": {"id": folder["id"], "name": folder["name"], "hidden": False, "access": True} if folder
                else {"id": "h" + lst["space"], "name": "hidden", "hidden": True, "access": True},
                "space": {"id": space["id"], "name": space["name"], "access": True}, "archived": lst["archived"],
                "override_statuses": False, "permission_level": "create"}

    def folder_json(self, folder: dict[str, Any]) -> dict[str, Any]:
        lists = [self.list_json(lst) for lst in self.lists.values() if lst["folder"] == folder["id"]
                 and not lst["archived"]]
        space = self.spaces[folder["space"]]
        return {"id": folder["id"], "name": folder["name"], "orderindex": 0, "override_statuses": False,
                "hidden": False, "space": {"id": space["id"], "name": space["name"]},
                "task_count": str(sum(lst["task_count"] for lst in lists)), "archived": folder["archived"],
                "lists": lists}

    def _status_json(self, task: dict[str, Any]) -> dict[str, Any]:
        space = self.spaces[self.lists[task["list"]]["space"]]
        found = next((s for s in space["statuses"] if s["status"] == task["status"]), space["statuses"][0])
        return {"id": f"p{space['id']}_{found['orderindex']}", "status": found["status"], "color": found["color"],
                "orderindex": found["orderindex"], "type": found["type"]}

    def task_json(self, task: dict[str, Any], markdown: bool = False) -> dict[str, Any]:
        lst = self.lists[task["list"]]
        space = self.spaces[lst["space"]]
        folder = self.folders.get(lst["folder"]) if lst["folder"] else None
        priority = PRIORITIES.get(task["priority"]) if task["priority"] else None
        fields = [{**definition, "date_created": "1700000000000",
                   **({"value": task["fields"][fid]} if fid in task["fields"] else {})}
                  for fid, definition in lst["fields"].items()]
        answer = {
            "id": task["id"], "custom_id": None, "custom_item_id": 0, "name": task["name"],
            "text_content": re.sub(r"[*_`#>]", "", task["description"] or ""), "description": task["description"],
            "status": self._status_json(task), "orderindex": f"{task['order']}.00000000000000000000000000000000",
            "date_created": str(task["created"]), "date_updated": str(task["updated"]),
            "date_closed": str(task["closed"]) if task["closed"] else None,
            "date_done": str(task["closed"]) if task["closed"] else None, "archived": task["archived"],
            "creator": self.user_json(task["creator"]),
            "assignees": [self.user_json(u) for u in task["assignees"] if u in self.users],
            "group_assignees": [], "watchers": [], "checklists": [],
            "tags": [{"name": t, "tag_fg": "#800000", "tag_bg": "#ff7800", "creator": self.me} for t in task["tags"]],
            "parent": None, "top_level_parent": None,
            "priority": {"color": priority[1], "id": str(task["priority"]), "orderindex": str(task["priority"]),
                         "priority": priority[0]} if priority else None,
            "due_date": str(task["due"]) if task["due"] is not None else None, "start_date": None, "points": None,
            "time_estimate": None, "time_spent": 0, "custom_fields": fields, "dependencies": [], "linked_tasks": [],
            "locations": [], "team_id": space["team"], "url": f"https://app.clickup.com/t/{task['id']}",
            "sharing": {"public": False}, "permission_level": "create",
            "list": {"id": lst["id"], "name": lst["name"], "access": True},
            "project": {"id": folder["id"] if folder else "h" + space["id"],
                        "name": folder["name"] if folder else "hidden", "hidden": folder is None, "access": True},
            "folder": {"id": folder["id"] if folder else "h" + space["id"],
                       "name": folder["name"] if folder else "hidden", "hidden": folder is None, "access": True},
            "space": {"id": space["id"]},
            "attachments": [dict(a) for a in task["attachments"]],
        }
        if markdown:
            answer["markdown_description"] = task["markdown"]
        return answer


# --- the ASGI app ------------------------------------------------------------------------------------


def _fault_response(fault: ClickUpFault) -> JSONResponse:
    return JSONResponse({"err": fault.err, "ECODE": fault.ecode}, status_code=fault.status, headers=fault.headers)


class _Api:
    """The request handlers over one ClickUpServer."""

    def __init__(self, state: ClickUpServer):
        self.s = state

    # --- auth and lookups -------------------------------------------------------------------------

    def token(self, request: Request) -> Token:
        header = request.headers.get("authorization", "").strip()
        if not header:
            raise ClickUpFault(401, "Authorization header required", "OAUTH_017")
        with self.s.lock:
            if header.startswith("Bearer "):
                found = self.s.tokens.get(header[7:].strip())
                found = found if found is not None and found.oauth else None
            else:
                found = self.s.tokens.get(header)
                found = found if found is not None and not found.oauth else None
        if found is None:
            raise ClickUpFault(401, "Token invalid", "OAUTH_025")
        return found

    def teams_of(self, token: Token) -> list[dict[str, Any]]:
        return [t for t in self.s.teams.values() if token.user_id in t["members"]
                and (token.teams is None or t["id"] in token.teams)]

    def team(self, token: Token, team_id: str) -> dict[str, Any]:
        found = next((t for t in self.teams_of(token) if t["id"] == team_id), None)
        if found is None:
            raise not_authorized()
        return found

    def space(self, token: Token, space_id: str) -> dict[str, Any]:
        found = self.s.spaces.get(space_id)
        if found is None:
            raise not_authorized()
        self.team(token, found["team"])
        return found

    def folder(self, token: Token, folder_id: str) -> dict[str, Any]:
        found = self.s.folders.get(folder_id)
        if found is None:
            raise not_authorized()
        self.space(token, found["space"])
        return found

    def list_(self, token: Token, list_id: str) -> dict[str, Any]:
        found = self.s.lists.get(list_id)
        if found is None:
            raise not_authorized()
        self.space(token, found["space"])
        return found

    def task(self, token: Token, task_id: str) -> dict[str, Any]:
        found = self.s.tasks.get(task_id)
        if found is None:
            raise not_authorized()
        self.list_(token, found["list"])
        if found["deleted"]:
            raise ClickUpFault(404, "Task not found, deleted", "ITEM_013")
        return found

    # --- account and hierarchy --------------------------------------------------------------------

    async def user(self, request: Request, token: Token) -> Response:
        return JSONResponse({"user": {**self.s.user_json(token.user_id), "week_start_day": 1,
                                      "global_font_support": False, "timezone": "Europe/Zurich"}})

    async def teams(self, request: Request, token: Token) -> Response:
        return JSONResponse({"teams": [self.s.team_json(t) for t in self.teams_of(token)]})

    async def spaces(self, request: Request, token: Token) -> Response:
        team = self.team(token, request.path_params["team_id"])
        archived = request.query_params.get("archived") == "true"
        return JSONResponse({"spaces": [self.s.space_json(s) for s in self.s.spaces.values()
                                        if s["team"] == team["id"] and s["archived"] == archived]})

    async def folders(self, request: Request, token: Token) -> Response:
        space = self.space(token, request.path_params["space_id"])
        archived = request.query_params.get("archived") == "true"
        return JSONResponse({"folders": [self.s.folder_json(f) for f in self.s.folders.values()
                                         if f["space"] == space["id"] and f["archived"] == archived]})

    async def space_lists(self, request: Request, token: Token) -> Response:
        space = self.space(token, request.path_params["space_id"])
        archived = request.query_params.get("archived") == "true"
        return JSONResponse({"lists": [self.s.list_json(lst) for lst in self.s.lists.values()
                                       if lst["space"] == space["id"] and not lst["folder"]
                                       and lst["archived"] == archived]})

    async def folder_lists(self, request: Request, token: Token) -> Response:
        folder = self.folder(token, request.path_params["folder_id"])
        archived = request.query_params.get("archived") == "true"
        return JSONResponse({"lists": [self.s.list_json(lst) for lst in self.s.lists.values()
                                       if lst["folder"] == folder["id"] and lst["archived"] == archived]})

    # --- task search ------------------------------------------------------------------------------

    async def team_tasks(self, request: Request, token: Token) -> Response:
        team = self.team(token, request.path_params["team_id"])
        lists = {lid for lid, lst in self.s.lists.items() if self.s.spaces[lst["space"]]["team"] == team["id"]}
        return self._search(request, lists)

    async def list_tasks(self, request: Request, token: Token) -> Response:
        if request.method == "POST":
            return await self.create_task(request, token)
        lst = self.list_(token, request.path_params["list_id"])
        return self._search(request, {lst["id"]})

    def _search(self, request: Request, lists: set[str]) -> Response:
        query = request.query_params
        try:
            page = int(query.get("page", "0"))
        except ValueError:
            raise ClickUpFault(400, "Page must be a number", "PUBAPITASK_011") from None
        if page < 0:
            raise ClickUpFault(400, "Page must be a positive number", "PUBAPITASK_011")
        conditions = self._filters(query, lists)
        tasks = sorted((t for t in self.s.tasks.values() if all(c(t) for c in conditions)),
                       key=lambda t: t["order"])
        size = self.s.page_size
        window = tasks[page * size:(page + 1) * size]
        return JSONResponse({"tasks": [self.s.task_json(t) for t in window],
                             "last_page": (page + 1) * size >= len(tasks)})

    def _filters(self, query, lists: set[str]) -> list:
        def number(name: str) -> int | None:
            value = query.get(name)
            if value is None:
                return None
            try:
                return int(value)
            except ValueError:
                raise ClickUpFault(400, f"{name} must be a number", "PUBAPITASK_012") from None

        wanted_lists = set(query.getlist("list_ids[]")) or lists
        spaces = set(query.getlist("space_ids[]"))
        statuses = {s.lower() for s in query.getlist("statuses[]")}
        tags = {t.lower() for t in query.getlist("tags[]")}
        assignees = set(query.getlist("assignees[]"))
        gt, lt = number("due_date_gt"), number("due_date_lt")
        include_closed = query.get("include_closed") == "true"
        archived = query.get("archived") == "true"
        fields = self._field_filters(query.get("custom_fields"))
        conditions = [
            lambda t: not t["deleted"] and t["list"] in lists and t["list"] in wanted_lists,
            lambda t: t["archived"] == archived,
            lambda t: not spaces or self.s.lists[t["list"]]["space"] in spaces,
            lambda t: (t["status"].lower() in statuses) if statuses else (
                include_closed or self.s._status_json(t)["type"] != "closed"),
            lambda t: not tags or bool(tags & {x.lower() for x in t["tags"]}),
            lambda t: not assignees or bool(assignees & {str(a) for a in t["assignees"]}),
            lambda t: gt is None or (t["due"] is not None and t["due"] > gt),
            lambda t: lt is None or (t["due"] is not None and t["due"] < lt),
        ]
        conditions += fields
        return conditions

    def _field_filters(self, text: str | None) -> list:
        if text is None:
            return []
        try:
            filters = json.loads(text)
        except ValueError:
            raise ClickUpFault(400, "Custom field filter must be valid JSON", "FIELD_033") from None
        if not isinstance(filters, list) or not all(isinstance(f, dict) for f in filters):
            raise ClickUpFault(400, "Custom field filter must be an array of objects", "FIELD_033")
        conditions = []
        for entry in filters:
            operator = entry.get("operator", "=")
            if operator not in FILTER_OPERATORS:
                raise ClickUpFault(400, f"Invalid operator {operator}", "FIELD_034")
            conditions.append(_field_condition(str(entry.get("field_id")), operator, entry.get("value")))
        return conditions

    # --- tasks ------------------------------------------------------------------------------------

    async def _json_body(self, request: Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            raise ClickUpFault(400, "Body must be valid JSON", "INPUT_001") from None
        if not isinstance(body, dict):
            raise ClickUpFault(400, "Body must be a JSON object", "INPUT_001")
        return body

    def _check_assignees(self, lst: dict[str, Any], ids: Any) -> list[int]:
        team = self.s.teams[self.s.spaces[lst["space"]]["team"]]
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise ClickUpFault(400, "Assignees must be an array of user ids", "INPUT_002")
        for user_id in ids:
            if user_id not in team["members"]:
                raise ClickUpFault(400, f"Assignee {user_id} is not a member of the Workspace", "ASSIGN_003")
        return list(ids)

    def _check_status(self, lst: dict[str, Any], status: Any) -> str:
        names = [s["status"] for s in self.s.spaces[lst["space"]]["statuses"]]
        if not isinstance(status, str) or status.lower() not in names:
            raise ClickUpFault(400, "Status does not exist", "CRTSK_001")
        return status.lower()

    def _check_priority(self, value: Any) -> int | None:
        if value is None:
            return None
        if not isinstance(value, int) or value not in PRIORITIES:
            raise ClickUpFault(400, "Priority invalid", "INPUT_003")
        return value

    def _check_fields(self, lst: dict[str, Any], entries: Any) -> dict[str, Any]:
        if not isinstance(entries, list):
            raise ClickUpFault(400, "custom_fields must be an array", "FIELD_001")
        values = {}
        for entry in entries:
            field_id = str((entry or {}).get("id")) if isinstance(entry, dict) else ""
            if field_id not in lst["fields"]:
                raise ClickUpFault(400, "Custom field id does not exist", "FIELD_010")
            values[field_id] = entry.get("value")
        return values

    async def create_task(self, request: Request, token: Token) -> Response:
        lst = self.list_(token, request.path_params["list_id"])
        body = await self._json_body(request)
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ClickUpFault(400, "Task name invalid", "INPUT_005")
        with self.s.lock:
            status = self._check_status(lst, body["status"]) if body.get("status") is not None else \
                self.s.spaces[lst["space"]]["statuses"][0]["status"]
            assignees = self._check_assignees(lst, body.get("assignees", []))
            priority = self._check_priority(body.get("priority"))
            fields = self._check_fields(lst, body.get("custom_fields", []))
            tags = body.get("tags", [])
            if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
                raise ClickUpFault(400, "Tags must be an array of names", "INPUT_006")
            markdown = body.get("markdown_description") or body.get("markdown_content")
            task_id = self.s.add_task(lst["id"], name.strip(), status=status, assignees=assignees,
                                      tags=[t.lower() for t in tags], due=body.get("due_date"), priority=priority,
                                      description=markdown or body.get("description") or "", fields=fields)
            task = self.s.tasks[task_id]
            task["due_time"] = bool(body.get("due_date_time"))
            task["creator"] = token.user_id
            answer = self.s.task_json(task)
        self.s._announce("taskCreated", task_id)
        return JSONResponse(answer)

    async def get_task(self, request: Request, token: Token) -> Response:
        if request.method == "PUT":
            return await self.update_task(request, token)
        task = self.task(token, request.path_params["task_id"])
        markdown = request.query_params.get("include_markdown_description") == "true"
        return JSONResponse(self.s.task_json(task, markdown))

    async def update_task(self, request: Request, token: Token) -> Response:
        task = self.task(token, request.path_params["task_id"])
        body = await self._json_body(request)
        lst = self.s.lists[task["list"]]
        events = []
        with self.s.lock:
            if "name" in body:
                if not isinstance(body["name"], str) or not body["name"].strip():
                    raise ClickUpFault(400, "Task name invalid", "INPUT_005")
                task["name"] = body["name"].strip()
            markdown = body.get("markdown_description") or body.get("markdown_content")
            if markdown is not None or "description" in body:
                task["description"] = task["markdown"] = markdown or body.get("description") or ""
            if "status" in body:
                task["status"] = self._check_status(lst, body["status"])
                closed = self.s._status_json(task)["type"] == "closed"
                task["closed"] = _ms() if closed else None
                events.append("taskStatusUpdated")
            if "priority" in body:
                task["priority"] = self._check_priority(body["priority"])
                events.append("taskPriorityUpdated")
            if "due_date" in body:
                task["due"] = body["due_date"]
                task["due_time"] = bool(body.get("due_date_time"))
                events.append("taskDueDateUpdated")
            if "assignees" in body:
                change = body["assignees"] if isinstance(body["assignees"], dict) else {}
                add = self._check_assignees(lst, change.get("add", []))
                rem = set(change.get("rem", []))
                task["assignees"] = [a for a in task["assignees"] if a not in rem] + \
                    [a for a in add if a not in task["assignees"]]
                events.append("taskAssigneeUpdated")
            task["updated"] = _ms()
            answer = self.s.task_json(task)
        self.s._announce("taskUpdated", task["id"], *events)
        return JSONResponse(answer)

    async def tag(self, request: Request, token: Token) -> Response:
        task = self.task(token, request.path_params["task_id"])
        name = request.path_params["tag_name"].lower()
        with self.s.lock:
            if request.method == "POST" and name not in task["tags"]:
                task["tags"].append(name)
            elif request.method == "DELETE":
                task["tags"] = [t for t in task["tags"] if t != name]
            task["updated"] = _ms()
        self.s._announce("taskTagUpdated", task["id"])
        return JSONResponse({})

    async def set_field(self, request: Request, token: Token) -> Response:
        task = self.task(token, request.path_params["task_id"])
        body = await self._json_body(request)
        field_id = request.path_params["field_id"]
        with self.s.lock:
            if field_id not in self.s.lists[task["list"]]["fields"]:
                raise ClickUpFault(400, "Custom field id does not exist", "FIELD_010")
            if "value" not in body:
                raise ClickUpFault(400, "Value must be provided", "FIELD_011")
            task["fields"][field_id] = body["value"]
            task["updated"] = _ms()
        self.s._announce("taskUpdated", task["id"])
        return JSONResponse({})

    async def comments(self, request: Request, token: Token) -> Response:
        task = self.task(token, request.path_params["task_id"])
        if request.method == "GET":
            return JSONResponse({"comments": [dict(c) for c in reversed(task["comments"])]})
        body = await self._json_body(request)
        text = body.get("comment_text")
        if not isinstance(text, str) or not text.strip():
            raise ClickUpFault(400, "Comment text invalid", "INPUT_007")
        now = _ms()
        comment_id = str(90000000000 + next(self.s._ids))
        with self.s.lock:
            task["comments"].append({"id": comment_id, "comment": [{"text": text}], "comment_text": text,
                                     "user": self.s.user_json(token.user_id), "date": str(now),
                                     "notify_all": bool(body.get("notify_all"))})
        self.s._announce("taskCommentPosted", task["id"])
        return JSONResponse({"id": int(comment_id), "hist_id": str(uuid.uuid4()), "date": now})

    async def attachment(self, request: Request, token: Token) -> Response:
        task = self.task(token, request.path_params["task_id"])
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            raise ClickUpFault(400, "No attachment supplied", "UPLOAD_002")
        form = await request.form()
        upload = form.get("attachment")
        if upload is None or isinstance(upload, str):
            raise ClickUpFault(400, "No attachment supplied", "UPLOAD_002")
        data = await upload.read()
        name = upload.filename or "attachment"
        extension = name.rsplit(".", 1)[-1] if "." in name else ""
        attachment_id = f"{uuid.uuid4()}.{extension}" if extension else str(uuid.uuid4())
        now = _ms()
        entry = {"id": attachment_id, "version": "0", "date": now, "title": name, "extension": extension,
                 "size": len(data), "mimetype": upload.content_type or "application/octet-stream",
                 "thumbnail_small": None, "thumbnail_large": None,
                 "url": f"https://t9015001.p.clickup-attachments.com/t9015001/{attachment_id}/{name}"}
        with self.s.lock:
            task["attachments"].append({**entry, "data": data})
        return JSONResponse({k: v for k, v in entry.items() if k not in ("size", "mimetype")})

    # --- webhooks ---------------------------------------------------------------------------------

    async def team_webhooks(self, request: Request, token: Token) -> Response:
        team = self.team(token, request.path_params["team_id"])
        if request.method == "GET":
            return JSONResponse({"webhooks": [_hook_json(h) for h in self.s.webhooks.values()
                                              if h["team_id"] == team["id"]]})
        body = await self._json_body(request)
        endpoint, events = body.get("endpoint"), body.get("events")
        if not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://")):
            raise ClickUpFault(400, "Endpoint must be a valid URL", "WH_001")
        if events != "*" and (not isinstance(events, list) or not events
                              or not all(isinstance(e, str) for e in events)):
            raise ClickUpFault(400, "Events must be an array of event names", "WH_002")
        for key, lookup in (("space_id", self.space), ("list_id", self.list_)):
            if body.get(key) is not None:
                lookup(token, str(body[key]))
        with self.s.lock:
            events = ["*"] if events == "*" else list(events)
            for hook in self.s.webhooks.values():
                if (hook["endpoint"], hook["events"], hook["space_id"], hook["list_id"]) == (
                        endpoint, events, body.get("space_id"), body.get("list_id")):
                    raise ClickUpFault(400, "Webhook configuration already exists", "OAUTH_171")
            hook_id = str(uuid.uuid4())
            hook = {"id": hook_id, "userid": token.user_id, "team_id": team["id"], "endpoint": endpoint,
                    "client_id": secrets.token_hex(16).upper(), "events": events, "task_id": None,
                    "list_id": body.get("list_id"), "folder_id": body.get("folder_id"),
                    "space_id": body.get("space_id"), "health": {"status": "active", "fail_count": 0},
                    "secret": secrets.token_hex(32).upper()}
            self.s.webhooks[hook_id] = hook
            self.s.issued.append(hook["secret"])
        return JSONResponse({"id": hook_id, "webhook": _hook_json(hook)})

    async def webhook(self, request: Request, token: Token) -> Response:
        hook_id = request.path_params["webhook_id"]
        with self.s.lock:
            hook = self.s.webhooks.get(hook_id)
            if hook is None:
                raise ClickUpFault(404, "Webhook not found", "WH_404")
            self.team(token, hook["team_id"])
            del self.s.webhooks[hook_id]
        return JSONResponse({})

    # --- OAuth ------------------------------------------------------------------------------------

    async def authorize(self, request: Request) -> Response:
        if request.method == "POST":
            form = await request.form()
            query = {k: str(v) for k, v in form.items() if k != "team"}
            decision, chosen = query.pop("decision", ""), {str(v) for v in form.getlist("team")}
        else:
            query, decision, chosen = dict(request.query_params), "", set()
        if query.get("client_id") != self.s.client_id:
            return _error_page("OAUTH_010: Client not found")
        if not query.get("redirect_uri") or query.get("redirect_uri") != self.s.redirect_uri:
            return _error_page("OAUTH_007: Redirect uri does not match the redirect uri registered for this app")
        back, state = query["redirect_uri"], query.get("state", "")
        if self.s.deny or decision == "cancel":
            return RedirectResponse(f"{back}?{urlencode({'error': 'access_denied', 'state': state})}", 302)
        if decision != "connect":
            return self._consent_page(query)
        teams = [t["id"] for t in self.s.teams.values() if self.s.me in t["members"]]
        allowed = (chosen & set(teams)) or set(teams)
        code = secrets.token_hex(20).upper()
        with self.s.lock:
            self.s.codes[code] = {"redirect_uri": back, "teams": allowed, "user": self.s.me, "issued": time.time()}
            self.s.consents.append(dict(query))
        return RedirectResponse(f"{back}?{urlencode({'code': code, 'state': state})}", 302)

    def _consent_page(self, query: dict[str, str]) -> Response:
        hidden = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                         for k, v in query.items())
        teams = "".join(f'<label><input type="checkbox" name="team" value="{html.escape(t["id"])}" checked> '
                        f'{html.escape(t["name"])}</label>' for t in self.s.teams.values()
                        if self.s.me in t["members"])
        page = ("<!doctype html><html><head><title>ClickUp: Connect Workspaces</title></head><body>"
                f"<h1>Connect Workspaces</h1><p>{html.escape(self.s.users[self.s.me]['email'])}</p>"
                f'<form method="post" action="/api">{hidden}{teams}'
                '<button type="submit" name="decision" value="cancel">Cancel</button> '
                '<button type="submit" name="decision" value="connect">Connect Workspace</button></form>'
                "</body></html>")
        return HTMLResponse(page)

    async def oauth_token(self, request: Request) -> Response:
        values = dict(request.query_params)
        if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            values.update({k: str(v) for k, v in (await request.form()).items()})
        elif request.headers.get("content-type", "").startswith("application/json"):
            values.update(await self._json_body(request))
        with self.s.lock:
            self.s.token_requests.append({"client_id": str(values.get("client_id", "")),
                                          "grant_type": str(values.get("grant_type", ""))})
        if values.get("client_id") != self.s.client_id:
            raise ClickUpFault(400, "Client not found", "OAUTH_010")
        if values.get("client_secret") != self.s.client_secret:
            raise ClickUpFault(400, "Client secret invalid", "OAUTH_011")
        with self.s.lock:
            grant = self.s.codes.pop(str(values.get("code", "")), None)
        if grant is None or time.time() - grant["issued"] > 600:
            raise ClickUpFault(400, "Code not found", "OAUTH_014")
        token = f"{grant['user']}_" + secrets.token_hex(20).upper()
        with self.s.lock:
            self.s.tokens[token] = Token(grant["user"], set(grant["teams"]), oauth=True)
            self.s.issued.append(token)
        return JSONResponse({"access_token": token})


def _hook_json(hook: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in hook.items()}


def _error_page(text: str) -> Response:
    return HTMLResponse(f"<html><body><h1>Something went wrong</h1><p>{html.escape(text)}</p></body></html>",
                        status_code=400)


def _field_condition(field_id: str, operator: str, value: Any):
    def compare(task: dict[str, Any]) -> bool:
        present = field_id in task["fields"] and task["fields"][field_id] not in (None, "")
        if operator == "IS NULL":
            return not present
        if operator == "IS NOT NULL":
            return present
        if not present:
            return False
        actual = task["fields"][field_id]
        if operator in ("ANY", "NOT ANY", "ALL", "NOT ALL"):
            have = set(actual if isinstance(actual, list) else [actual])
            want = set(value if isinstance(value, list) else [value])
            return {"ANY": bool(have & want), "NOT ANY": not have & want, "ALL": want <= have,
                    "NOT ALL": not want <= have}[operator]
        if operator == "RANGE":
            low, high = (value or [None, None])[:2] if isinstance(value, list) else (None, None)
            return _num(low) <= _num(actual) <= _num(high)
        if operator in ("=", "!="):
            same = str(actual).lower() == str(value).lower()
            return same if operator == "=" else not same
        left, right = _num(actual), _num(value)
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[operator]

    return compare


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


ROUTES = (
    ("/user", "user", ("GET",)), ("/team", "teams", ("GET",)),
    ("/team/{team_id}/space", "spaces", ("GET",)), ("/space/{space_id}/folder", "folders", ("GET",)),
    ("/space/{space_id}/list", "space_lists", ("GET",)), ("/folder/{folder_id}/list", "folder_lists", ("GET",)),
    ("/team/{team_id}/task", "team_tasks", ("GET",)), ("/list/{list_id}/task", "list_tasks", ("GET", "POST")),
    ("/task/{task_id}", "get_task", ("GET", "PUT")), ("/task/{task_id}/tag/{tag_name}", "tag", ("POST", "DELETE")),
    ("/task/{task_id}/field/{field_id}", "set_field", ("POST",)),
    ("/task/{task_id}/comment", "comments", ("GET", "POST")), ("/task/{task_id}/attachment", "attachment", ("POST",)),
    ("/team/{team_id}/webhook", "team_webhooks", ("GET", "POST")), ("/webhook/{webhook_id}", "webhook", ("DELETE",)),
)


def build_app(state: ClickUpServer) -> Starlette:
    """The stand-in as an ASGI app."""
    api = _Api(state)

    def guarded(name: str):
        handler = getattr(api, name)

        async def endpoint(request: Request) -> Response:
            query = list(request.query_params.multi_items())
            with state.lock:
                state.requests.append((request.method, request.url.path.removeprefix("/api/v2"), query))
                reset_in = state.failures.popleft() if state.failures else None
            try:
                if reset_in is not None:
                    raise ClickUpFault(429, "Rate limit reached", "APP_002", {
                        "X-RateLimit-Limit": str(RATE_LIMIT), "X-RateLimit-Remaining": "0",
                        "X-RateLimit-Reset": str(int(time.time() + reset_in))})
                return await handler(request, api.token(request))
            except ClickUpFault as fault:
                return _fault_response(fault)

        return endpoint

    def plain(handler):
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request)
            except ClickUpFault as fault:
                return _fault_response(fault)

        return endpoint

    routes = [Route("/api/v2" + path, guarded(name), methods=list(methods)) for path, name, methods in ROUTES]
    routes += [Route("/api/v2/oauth/token", plain(api.oauth_token), methods=["POST"]),
               Route("/api", plain(api.authorize), methods=["GET", "POST"])]

    async def unknown(request: Request, _exc: Exception) -> Response:
        return JSONResponse({"err": "Route not found", "ECODE": "APP_001"}, status_code=404)

    return Starlette(routes=routes, exception_handlers={404: unknown, 405: unknown})


def serve(state: ClickUpServer):
    """Run the stand-in on a free port of 127.0.0.1 (sets `state.url`) until the block ends."""
    return serve_stand_in(state, build_app)


def accept_consent(authorize_url: str, decision: str = "connect", teams: list[str] | None = None) -> str:
    """What a browser does at ClickUp's consent page: open it, keep the workspaces `teams` (default:
    all) ticked and press "Connect Workspace" (or "Cancel"); the URL ClickUp sends the browser back to."""
    page = httpx.get(authorize_url, follow_redirects=False)
    if page.status_code == 302:
        return page.headers["location"]
    assert page.status_code == 200, page.text
    fields = dict(re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', page.text))
    fields = {html.unescape(k): html.unescape(v) for k, v in fields.items()}
    ticked = teams if teams is not None else re.findall(r'name="team" value="([^"]*)"', page.text)
    base = urlsplit(authorize_url)
    answer = httpx.post(f"{base.scheme}://{base.netloc}/api",
                        data={**fields, "decision": decision, "team": list(ticked)},
                        follow_redirects=False)
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]
