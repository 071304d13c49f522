"""ClickUp (DESIGN §8: connection type `clickup`): tasks of ClickUp workspaces through ClickUp's API v2.

A connection is made either way:

- with a personal API token (`pk_…`, typed on the Connections page, sealed): sent as
  `Authorization: pk_…`, as ClickUp documents for personal tokens (no "Bearer");
- by consent at ClickUp (its OAuth app flow; POWERON_CLICKUP_CLIENT_ID / _SECRET): the user picks
  the workspaces the app may use at `{POWERON_CLICKUP_AUTH_URL}?client_id&redirect_uri&state`, the
  code is traded at `{POWERON_CLICKUP_API_URL}/oauth/token`; ClickUp's access tokens do not expire
  and come without a refresh token (OAuthProvider.lasting_tokens). They are sent as
  `Authorization: Bearer <token>`, as ClickUp documents for OAuth access tokens.

:class:`ClickUp` is the small API client (backend.connectors.rest.RestClient underneath): paging of
task searches by `page` (0-based, `last_page`), ClickUp's rate limit (429 with `X-RateLimit-Reset`,
epoch seconds) waited out within POWERON_CONNECTOR_MAX_WAIT_SECONDS, and ClickUp's error bodies
(`{"err": …, "ECODE": …}`) in the messages. An id the account cannot see — ClickUp answers 404, or
401 "Team not authorized" (OAUTH_023, OAUTH_026 …) — becomes "list 123 was not found or the
connection's account cannot see it", never "reconnect".

:data:`WEBHOOKS` lets workflows start on ClickUp events (`POST /team/{id}/webhook`, deliveries signed
with `X-Signature`: the hex HMAC-SHA256 of the raw body with the webhook's secret).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import quote

import httpx
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from backend.config import get_settings
from backend.connectors.oauth import Identity, OAuthClientConfig, OAuthProvider, redirect_uri
from backend.connectors.rest import ApiError, RestClient, retry_after
from backend.connectors.types import (
    ConnectionFailed,
    ConnectionType,
    Credentials,
    RemoteHook,
    WebhookSupport,
    register_connection_type,
)

TYPE_ID = "clickup"
LABEL = "ClickUp"
SERVICE = "ClickUp"
PAGE_SIZE = 100  # ClickUp's page of a task search
MAX_PAGES = 10  # most pages one search follows
MIN_WAIT_SECONDS = 0.5  # shortest wait after a 429
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
OAUTH_SETTINGS = ("POWERON_CLICKUP_CLIENT_ID", "POWERON_CLICKUP_CLIENT_SECRET")
# ClickUp's ECODEs for "this workspace is not authorized for the token" (its common-errors page):
# an id of a workspace, space, list or task the account cannot see is answered with one of them.
TEAM_NOT_AUTHORIZED = frozenset({"OAUTH_023", "OAUTH_026", "OAUTH_027",
                                 *(f"OAUTH_{n:03d}" for n in range(29, 46))})
WEBHOOK_EXISTS = "OAUTH_171"
EVENTS = ("taskCreated", "taskUpdated", "taskStatusUpdated", "taskCommentPosted", "taskDeleted",
          "taskAssigneeUpdated", "taskDueDateUpdated", "taskPriorityUpdated", "taskTagUpdated", "taskMoved",
          "taskCommentUpdated", "listCreated", "listUpdated", "listDeleted")
Event = Literal[EVENTS]  # typing flattens the tuple: one of EVENTS


# --- settings and the two ways to connect ----------------------------------------------------------


class ClickUpSettings(BaseModel):
    """What a user types to connect ClickUp with a personal token (camelCase in the API)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    api_token: str = Field(..., min_length=4, max_length=200, title="Personal API token",
                           description="your ClickUp personal API token (pk_…; ClickUp: Settings → Apps → API Token)",
                           json_schema_extra={"format": "password", "writeOnly": True})

    @field_validator("api_token")
    @classmethod
    def _personal_token(cls, value: str) -> str:
        value = value.strip()
        if not value.startswith("pk_") or any(c.isspace() for c in value):
            raise ValueError("a ClickUp personal API token starts with pk_ (ClickUp: Settings → Apps → API Token)")
        return value


def oauth_unavailable() -> str | None:
    """None when ClickUp's consent can be used here, else which settings are missing (connections
    with a personal token work without them)."""
    settings = get_settings()
    values = (settings.clickup_client_id, settings.clickup_client_secret)
    missing = [name for name, value in zip(OAUTH_SETTINGS, values, strict=True) if not value]
    if not missing:
        return None
    return (f"signing in at ClickUp is not set up on this server: set {', '.join(missing)} (a ClickUp OAuth app "
            f"whose redirect URL is {redirect_uri(TYPE_ID)}); connect with a personal API token instead")


def client_config() -> OAuthClientConfig:
    """ClickUp's consent page and token endpoint, and this installation's OAuth app."""
    settings = get_settings()
    return OAuthClientConfig(settings.clickup_auth_url, settings.clickup_api_url.rstrip("/") + "/oauth/token",
                             settings.clickup_client_id or "", settings.clickup_client_secret or "")


def _account(user: Mapping[str, Any]) -> str:
    return str(user.get("email") or user.get("username") or user.get("id") or "")


def identify(access_token: str) -> Identity:
    """Whose ClickUp account a fresh OAuth access token is for (`GET /user`)."""
    with ClickUp("Bearer " + access_token) as clickup:
        user = clickup.user()
    account = _account(user)
    return Identity(subject=str(user.get("id") or account), account=account,
                    settings={"account": account, "displayName": str(user.get("username") or account),
                              "accountId": str(user.get("id") or account)})


PROVIDER = OAuthProvider(name=LABEL, scopes=(), client=client_config, identify=identify,
                         unavailable=oauth_unavailable, lasting_tokens=True)


def authorization(credentials: Credentials) -> str:
    """The `Authorization` header of a connection: its personal token as it is, an OAuth access
    token as `Bearer <token>`.

    Raises:
        ConnectionFailed: the connection holds neither.
    """
    secret = credentials.secret
    if secret.get("apiToken"):
        return str(secret["apiToken"])
    if secret.get("accessToken"):
        return "Bearer " + str(secret["accessToken"])
    raise ConnectionFailed(f"connection '{credentials.label}' holds no ClickUp token: connect it again")


def client_for(credentials: Credentials) -> ClickUp:
    """The API client of a connection (a personal token or a consent)."""
    return ClickUp(authorization(credentials))


def check(credentials: Credentials) -> str:
    """Read the account (`GET /user`) and count its workspaces (`GET /team`)."""
    with client_for(credentials) as clickup:
        user = clickup.user()
        teams = clickup.teams()
    count = len(teams)
    return f"signed in as {_account(user)}: {count} workspace{'' if count == 1 else 's'}"


# --- the API client --------------------------------------------------------------------------------


def reset_wait(response: httpx.Response) -> float | None:
    """Seconds ClickUp's rate limit asks to wait: until `X-RateLimit-Reset` (epoch seconds; at least
    MIN_WAIT_SECONDS, so a reset already past cannot retry without pause for ever), else Retry-After,
    else None (RestClient backs off)."""
    value = (response.headers.get("X-RateLimit-Reset") or "").strip()
    try:
        return max(MIN_WAIT_SECONDS, float(value) - time.time())
    except ValueError:
        return retry_after(response)


def _segment(value: Any) -> str:
    """One path segment, percent-encoded (ids come from people and models)."""
    return quote(str(value), safe="")


@dataclass(frozen=True)
class TaskPage:
    """Tasks of a search, and where it may go on.

    Attributes:
        tasks: ClickUp's task objects, in its order.
        next_page: The `page` to continue with (None: the search is complete).
    """

    tasks: list[dict[str, Any]]
    next_page: int | None


class ClickUp:
    """ClickUp's API v2 for one connection.

    Args:
        authorization: The `Authorization` header (see :func:`authorization`).
        transport: An httpx transport (None: the network).
    """

    def __init__(self, authorization: str, transport: httpx.BaseTransport | None = None):
        self._code: str | None = None
        self._said: str = ""
        # ClickUp's tokens do not expire: fixed headers, so a 401 is final (not sent again).
        self.rest = RestClient(SERVICE, get_settings().clickup_api_url, {"Authorization": authorization},
                               error_text=self._error_text, wait_hint=reset_wait, transport=transport)

    def close(self) -> None:
        self.rest.close()

    def __enter__(self) -> ClickUp:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def last_code(self) -> str | None:
        """ClickUp's ECODE of the last refused call (None: none, or it named none)."""
        return self._code

    def _error_text(self, response: httpx.Response) -> str:
        """ClickUp's `err` and `ECODE` of a failed answer (kept for :meth:`call`)."""
        try:
            body = response.json()
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else {}
        self._code = str(body.get("ECODE") or "") or None
        self._said = str(body.get("err") or "").strip()
        if self._said and self._code:
            return f"{self._said} ({self._code})"
        return self._said or (self._code or "")

    def call(self, method: str, path: str, what: str, thing: str | None = None, **kwargs: Any) -> Any:
        """One call and its JSON answer.

        Args:
            what: What the call does, for messages ("listing the tasks of list 7").
            thing: The object the path names ("list 7"): ClickUp's "not found" and "team not
                authorized" then say that it was not found or cannot be seen.

        Raises:
            ConnectionFailed: ClickUp refused (its own words in the message), or could not be reached.
        """
        self._code, self._said = None, ""
        try:
            return self.rest.json(method, path, what, **kwargs)
        except ApiError as exc:
            if thing and self._hidden(exc):
                said = f" (ClickUp: {self._said or exc.status})"
                raise ConnectionFailed(f"{thing} was not found or the connection's account cannot see it{said}") \
                    from None
            raise

    def _hidden(self, exc: ApiError) -> bool:
        code = self._code or ""
        return exc.status == 404 or (exc.status in (400, 401, 403) and (
            code in TEAM_NOT_AUTHORIZED or code.startswith("ACCESS_")))

    # --- account and hierarchy --------------------------------------------------------------------

    def user(self) -> dict[str, Any]:
        return dict((self.call("GET", "/user", "reading the signed-in account") or {}).get("user") or {})

    def teams(self) -> list[dict[str, Any]]:
        """The workspaces ("teams") the token may use."""
        return list((self.call("GET", "/team", "listing the workspaces") or {}).get("teams") or [])

    def spaces(self, team_id: str, archived: bool = False) -> list[dict[str, Any]]:
        answer = self.call("GET", f"/team/{_segment(team_id)}/space", f"listing the spaces of workspace {team_id}",
                           f"workspace {team_id}", params={"archived": _flag(archived)})
        return list((answer or {}).get("spaces") or [])

    def folders(self, space_id: str, archived: bool = False) -> list[dict[str, Any]]:
        answer = self.call("GET", f"/space/{_segment(space_id)}/folder", f"listing the folders of space {space_id}",
                           f"space {space_id}", params={"archived": _flag(archived)})
        return list((answer or {}).get("folders") or [])

    def folderless_lists(self, space_id: str, archived: bool = False) -> list[dict[str, Any]]:
        answer = self.call("GET", f"/space/{_segment(space_id)}/list", f"listing the lists of space {space_id}",
                           f"space {space_id}", params={"archived": _flag(archived)})
        return list((answer or {}).get("lists") or [])

    def folder_lists(self, folder_id: str, archived: bool = False) -> list[dict[str, Any]]:
        answer = self.call("GET", f"/folder/{_segment(folder_id)}/list", f"listing the lists of folder {folder_id}",
                           f"folder {folder_id}", params={"archived": _flag(archived)})
        return list((answer or {}).get("lists") or [])

    def space_lists(self, space_id: str) -> list[dict[str, Any]]:
        """Every list of a space: those outside folders first, then each folder's."""
        lists = self.folderless_lists(space_id)
        for folder in self.folders(space_id):
            if folder.get("id") is not None:
                lists += self.folder_lists(str(folder["id"]))
        return lists

    # --- tasks ------------------------------------------------------------------------------------

    def search_tasks(self, query: list[tuple[str, str]], team_id: str | None = None, list_id: str | None = None,
                     page: int = 0, limit: int = PAGE_SIZE) -> TaskPage:
        """Tasks of a workspace (`GET /team/{id}/task`) or a list (`GET /list/{id}/task`) matching
        `query` (ClickUp's parameters, e.g. ("tags[]", "urgent")), from `page` on until `limit` tasks,
        the last page or MAX_PAGES pages.

        A page cut by `limit` is where the search goes on (`next_page`): its tasks that were returned
        come again then.
        """
        if list_id:
            path, thing = f"/list/{_segment(list_id)}/task", f"list {list_id}"
        elif team_id:
            path, thing = f"/team/{_segment(team_id)}/task", f"workspace {team_id}"
        else:
            raise ConnectionFailed("name the workspace (teamId) or the list (listId) to search in")
        tasks: list[dict[str, Any]] = []
        current = page
        for _ in range(MAX_PAGES):
            answer = self.call("GET", path, f"searching the tasks of {thing} (page {current})", thing,
                               params=[*query, ("page", str(current))]) or {}
            found = [t for t in answer.get("tasks") or [] if isinstance(t, dict)]
            last = bool(answer.get("last_page", len(found) < PAGE_SIZE)) or not found
            room = limit - len(tasks)
            tasks += found[:room]
            if len(found) > room:
                return TaskPage(tasks, current)
            if last:
                return TaskPage(tasks, None)
            current += 1
            if len(tasks) >= limit:
                return TaskPage(tasks, current)
        return TaskPage(tasks, current)

    def task(self, task_id: str) -> dict[str, Any]:
        return self.call("GET", f"/task/{_segment(task_id)}", f"reading task {task_id}", f"task {task_id}",
                         params={"include_markdown_description": "true"}) or {}

    def create_task(self, list_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.call("POST", f"/list/{_segment(list_id)}/task", f"creating a task in list {list_id}",
                         f"list {list_id}", json=body) or {}

    def update_task(self, task_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.call("PUT", f"/task/{_segment(task_id)}", f"updating task {task_id}", f"task {task_id}",
                         json=body) or {}

    def add_tag(self, task_id: str, tag: str) -> None:
        self.call("POST", f"/task/{_segment(task_id)}/tag/{_segment(tag)}", f"tagging task {task_id} '{tag}'",
                  f"task {task_id}")

    def remove_tag(self, task_id: str, tag: str) -> None:
        self.call("DELETE", f"/task/{_segment(task_id)}/tag/{_segment(tag)}",
                  f"removing tag '{tag}' from task {task_id}", f"task {task_id}")

    def set_field(self, task_id: str, field_id: str, value: Any) -> None:
        self.call("POST", f"/task/{_segment(task_id)}/field/{_segment(field_id)}",
                  f"setting custom field {field_id} of task {task_id}", f"task {task_id}", json={"value": value})

    def comment(self, task_id: str, text: str, notify_all: bool = False) -> dict[str, Any]:
        return self.call("POST", f"/task/{_segment(task_id)}/comment", f"commenting on task {task_id}",
                         f"task {task_id}", json={"comment_text": text, "notify_all": notify_all}) or {}

    def attach(self, task_id: str, name: str, data: bytes, mime_type: str) -> dict[str, Any]:
        """Upload a file to a task (multipart, field `attachment`)."""
        return self.call("POST", f"/task/{_segment(task_id)}/attachment", f"attaching '{name}' to task {task_id}",
                         f"task {task_id}",
                         files={"attachment": (name, data, mime_type or "application/octet-stream")}) or {}

    # --- webhooks ---------------------------------------------------------------------------------

    def create_webhook(self, team_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.call("POST", f"/team/{_segment(team_id)}/webhook", f"registering a webhook in workspace {team_id}",
                         f"workspace {team_id}", json=body) or {}

    def delete_webhook(self, webhook_id: str) -> None:
        self.call("DELETE", f"/webhook/{_segment(webhook_id)}", f"removing webhook {webhook_id}")


def _flag(value: bool) -> str:
    return "true" if value else "false"


# --- webhooks (trigger.clickup) ---------------------------------------------------------------------


def _blank_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


OptionalId = Annotated[Annotated[str, Field(max_length=64, pattern=ID_PATTERN)] | None, BeforeValidator(_blank_none)]


class WebhookParams(BaseModel):
    """The parameters of a ClickUp trigger node: which workspace (and space or list) and events."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    connection_id: str = Field(max_length=32, description="Id of the ClickUp connection that registers the webhook")
    events: list[Event] = Field(["taskCreated"], min_length=1, max_length=len(EVENTS),
                                description="The ClickUp events that start the workflow")
    team_id: str = Field(min_length=1, max_length=64, pattern=ID_PATTERN, title="Workspace",
                         description="The ClickUp workspace whose events start the workflow",
                         json_schema_extra={"x-options": {"action": "clickup.listWorkspaces", "items": "workspaces",
                                                          "value": "id", "label": "name", "args": {}}})
    space_id: OptionalId = Field(None, title="Space",
                                 description="Only events of this space (optional)",
                                 json_schema_extra={"x-options": {"action": "clickup.listSpaces", "items": "spaces",
                                                                  "value": "id", "label": "name",
                                                                  "args": {"teamId": "teamId"}}})
    list_id: OptionalId = Field(None, title="List",
                                description="Only events of this list (optional)",
                                json_schema_extra={"x-options": {"action": "clickup.listLists", "items": "lists",
                                                                 "value": "id", "label": "path",
                                                                 "args": {"teamId": "teamId", "spaceId": "spaceId"}}})


def _number(value: Any) -> Any:
    """ClickUp's ids in a webhook's body are numbers where they are digits."""
    text = str(value)
    return int(text) if text.isdigit() else text


def register_webhook(credentials: Credentials, url: str, events: tuple[str, ...], params: dict[str, Any],
                     secret: str) -> RemoteHook:
    """`POST /team/{teamId}/webhook` for `events` (narrowed to the node's space or list); ClickUp
    chooses the signing secret and answers it (`secret` is not used)."""
    del secret  # ClickUp signs with a secret of its own choosing
    team_id = params.get("teamId") or params.get("team_id")
    if not team_id:
        raise ConnectionFailed("teamId: name the ClickUp workspace whose events start the workflow")
    body: dict[str, Any] = {"endpoint": url, "events": list(events or EVENTS[:1])}
    for key, name in (("space_id", "spaceId"), ("list_id", "listId")):
        value = params.get(name) or params.get(key)
        if value:
            body[key] = _number(value)
    with client_for(credentials) as clickup:
        try:
            answer = clickup.create_webhook(str(team_id), body)
        except ApiError as exc:
            if clickup.last_code == WEBHOOK_EXISTS:
                raise ConnectionFailed(f"ClickUp already has a webhook for these events and place in workspace "
                                       f"{team_id} ({exc}); remove it in ClickUp or choose other events") from None
            raise
    webhook = answer.get("webhook") if isinstance(answer.get("webhook"), dict) else {}
    remote_id, signing = answer.get("id") or webhook.get("id"), webhook.get("secret")
    if not remote_id or not signing:
        raise ConnectionFailed("ClickUp registered the webhook without its id or secret")
    return RemoteHook(str(remote_id), str(signing))


def unregister_webhook(credentials: Credentials, remote_id: str) -> None:
    """`DELETE /webhook/{id}`; a webhook ClickUp no longer has is no error."""
    with client_for(credentials) as clickup:
        try:
            clickup.delete_webhook(remote_id)
        except ApiError as exc:
            if exc.status != 404:
                raise


def verify_delivery(headers: Any, body: bytes, secret: str) -> bool:
    """Whether `X-Signature` is the hex HMAC-SHA256 of the raw body with the webhook's secret."""
    given = headers.get("x-signature") if headers is not None else None
    if not isinstance(given, str) or not given or not secret:
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, given.strip().lower())


def event_of(body: Any) -> str | None:
    """The event of a delivery (`{"event": "taskCreated", "task_id": …, "webhook_id": …}`)."""
    if isinstance(body, (bytes, str)):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    event = body.get("event") if isinstance(body, dict) else None
    return event if isinstance(event, str) and event else None


def delivery_id(_headers: Any, body: Any) -> str | None:
    """ClickUp's id of a delivery: its webhook and the history item it reports (the same on a retry)."""
    items = body.get("history_items") if isinstance(body, dict) else None
    first = items[0] if isinstance(items, list) and items and isinstance(items[0], dict) else {}
    if not first.get("id") or not body.get("webhook_id"):
        return None
    return f"{body['webhook_id']}:{first['id']}"


WEBHOOKS = WebhookSupport(events=EVENTS, params_model=WebhookParams, register=register_webhook,
                          unregister=unregister_webhook, verify=verify_delivery, event_of=event_of,
                          delivery_id=delivery_id)


CLICKUP = register_connection_type(ConnectionType(
    id=TYPE_ID, label=LABEL,
    description="Tasks, lists and comments of ClickUp workspaces, connected with a personal API token (pk_…) or "
                "by signing in at ClickUp; the token is sealed and never shown again.",
    auth="password", check=check, settings_model=ClickUpSettings, secret_fields=("api_token",),
    oauth=PROVIDER, webhooks=WEBHOOKS,
))
