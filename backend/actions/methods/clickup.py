"""Toolbox clickup (spec §3.1, §5.2): ClickUp workspaces, spaces, lists and tasks through one of the
caller's connections of type `clickup` (backend/connectors/kinds/clickup.py).

Every action is an agent tool and a graph node. Ids are ClickUp's (a workspace is ClickUp's "team");
the listing actions feed the editor's pickers (`x-options` on teamId, spaceId and listId). Dates are
ISO 8601 (`2025-03-31`, `2025-03-31T17:00:00+01:00`; a date alone is that day in UTC) and become
ClickUp's milliseconds. Assignees are ClickUp user ids or the e-mail address / user name of a member
of the connection's workspaces. An id the connection's account cannot see is named as such; another
user's connection is "not found".
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

from backend.actions.base import ActionContext, ActionError, ActionParams, action
from backend.actions.connected import connected
from backend.connectors.kinds.clickup import ID_PATTERN, PAGE_SIZE, TYPE_ID, ClickUp, client_for
from backend.files import service as files

TOOLBOX = "clickup"
CONNECTION_HELP = "Id of the ClickUp connection to use (the Connections page lists the caller's connections)"
PRIORITIES = {"urgent": 1, "high": 2, "normal": 3, "low": 4}
SEARCH_DESCRIPTION_CHARS = 2_000
LIST_MAX = 20


def _picker(action_id: str, items: str, label: str = "name", **args: str) -> dict[str, Any]:
    """The editor's picker of a field: the listing action, where its items are, and its arguments
    (listing parameter → this node's parameter)."""
    return {"x-options": {"action": action_id, "items": items, "value": "id", "label": label, "args": args}}


def _blank_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _parse_value(value: Any) -> Any:
    """A custom field's value: JSON text of a list or object is parsed; anything else stays as it is."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _moment(text: str) -> str:
    """An ISO 8601 date or date-time, checked (a date-time without offset is UTC)."""
    try:
        parsed = date.fromisoformat(text) if len(text) == 10 else \
            datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("must be an ISO 8601 date (2025-03-31) or date-time (2025-03-31T17:00:00Z)") from None
    if not 1970 <= parsed.year <= 9000:
        raise ValueError("must be a date between the years 1970 and 9000")
    return text


Id = Annotated[str, Field(min_length=1, max_length=64, pattern=ID_PATTERN)]
ChosenId = Annotated[str, Field(max_length=64, pattern=f"^$|{ID_PATTERN}")]
OptionalId = Annotated[Annotated[str, Field(max_length=64, pattern=ID_PATTERN)] | None, BeforeValidator(_blank_none)]
Moment = Annotated[str, Field(min_length=10, max_length=40), AfterValidator(_moment)]
Assignee = Annotated[int | str, Field(description="a ClickUp user id, or the e-mail address or user name of a "
                                                  "workspace member")]
Value = Annotated[Any, BeforeValidator(_parse_value),
                  WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]})]
Priority = Literal["urgent", "high", "normal", "low"]


def _ms(text: str, end_of_day: bool = False) -> int:
    """ClickUp's milliseconds of an ISO date or date-time (`end_of_day`: a date's next midnight)."""
    if len(text) == 10:
        day = date.fromisoformat(text) + timedelta(days=1 if end_of_day else 0)
        moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
    else:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _iso(value: Any) -> str | None:
    """ISO 8601 (UTC) of ClickUp's milliseconds (a number or its text), None without one."""
    try:
        return datetime.fromtimestamp(int(value) / 1000, UTC).isoformat().replace("+00:00", "Z")
    except (TypeError, ValueError, OverflowError, OSError):
        return None


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class ConnectionParams(ActionParams):
    # Empty is a valid graph (a template's node before one is chosen): the run's start says it is missing.
    connection_id: str = Field(max_length=32, description=CONNECTION_HELP)


def _clickup(context: ActionContext, connection_id: str) -> AbstractContextManager[ClickUp]:
    """ClickUp through a connection the caller may use; ClickUp's refusals as ActionError."""
    return connected(context, connection_id, [TYPE_ID], client_for)


# --- outputs ------------------------------------------------------------------------------------------


class PersonOut(_Output):
    id: int | str
    username: str | None = None
    email: str | None = None

    @classmethod
    def of(cls, raw: dict[str, Any]) -> PersonOut:
        return cls(id=raw.get("id") or "", username=raw.get("username"), email=raw.get("email"))


class RefOut(_Output):
    id: str
    name: str


class FieldOut(_Output):
    id: str
    name: str
    type: str
    value: Any = None


class TaskOut(_Output):
    id: str
    name: str
    status: str | None = Field(None, description="The status name, e.g. 'in progress'")
    status_type: str | None = Field(None, description="open, custom or closed")
    url: str | None = None
    description: str = Field("", description="The description as plain text")
    markdown_description: str | None = Field(None, description="The description as Markdown (getTask)")
    due_date: str | None = Field(None, description="ISO 8601, UTC")
    priority: str | None = Field(None, description="urgent, high, normal or low")
    assignees: list[PersonOut] = []
    tags: list[str] = []
    in_list: RefOut | None = Field(None, alias="list")
    folder: RefOut | None = None
    space_id: str | None = None
    team_id: str | None = None
    creator: PersonOut | None = None
    date_created: str | None = None
    date_updated: str | None = None
    date_closed: str | None = None
    custom_fields: list[FieldOut] = []

    @classmethod
    def of(cls, raw: dict[str, Any], description_chars: int | None = None) -> TaskOut:
        status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
        priority = raw.get("priority") if isinstance(raw.get("priority"), dict) else {}
        folder = raw.get("folder") if isinstance(raw.get("folder"), dict) else {}
        listed = raw.get("list") if isinstance(raw.get("list"), dict) else {}
        text = str(raw.get("text_content") or raw.get("description") or "")
        if description_chars is not None and len(text) > description_chars:
            text = text[:description_chars] + "…"
        return cls(
            id=str(raw.get("id") or ""), name=str(raw.get("name") or ""), status=status.get("status"),
            status_type=status.get("type"), url=raw.get("url"), description=text,
            markdown_description=raw.get("markdown_description"), due_date=_iso(raw.get("due_date")),
            priority=priority.get("priority"),
            assignees=[PersonOut.of(a) for a in raw.get("assignees") or [] if isinstance(a, dict)],
            tags=[str(t.get("name")) for t in raw.get("tags") or [] if isinstance(t, dict) and t.get("name")],
            in_list=RefOut(id=str(listed["id"]), name=str(listed.get("name") or "")) if listed.get("id") else None,
            folder=RefOut(id=str(folder["id"]), name=str(folder.get("name") or ""))
            if folder.get("id") and not folder.get("hidden") else None,
            space_id=str((raw.get("space") or {}).get("id") or "") or None, team_id=raw.get("team_id"),
            creator=PersonOut.of(raw["creator"]) if isinstance(raw.get("creator"), dict) else None,
            date_created=_iso(raw.get("date_created")), date_updated=_iso(raw.get("date_updated")),
            date_closed=_iso(raw.get("date_closed")),
            custom_fields=[FieldOut(id=str(f.get("id")), name=str(f.get("name") or ""), type=str(f.get("type") or ""),
                                    value=f.get("value")) for f in raw.get("custom_fields") or []
                           if isinstance(f, dict) and f.get("id")])


# --- listing (the pickers) ----------------------------------------------------------------------------


class WorkspaceOut(_Output):
    id: str
    name: str
    members: int


class WorkspacesOutput(_Output):
    workspaces: list[WorkspaceOut]


@action("clickup.listWorkspaces", toolbox=TOOLBOX, label="List ClickUp workspaces",
        description="List the ClickUp workspaces (ClickUp calls them teams) the connection may use, with the "
                    "teamId the other ClickUp actions take.",
        params=ConnectionParams, output=WorkspacesOutput, graph_node=True, capabilities=("read",),
        connection_type=TYPE_ID)
def list_workspaces(params: ConnectionParams, context: ActionContext) -> WorkspacesOutput:
    with _clickup(context, params.connection_id) as clickup:
        return WorkspacesOutput(workspaces=[
            WorkspaceOut(id=str(t["id"]), name=str(t.get("name") or t["id"]), members=len(t.get("members") or []))
            for t in clickup.teams() if t.get("id") is not None])


class ListSpacesParams(ConnectionParams):
    team_id: OptionalId = Field(None, title="Workspace", description="The workspace (teamId); empty: every "
                                "workspace of the connection", json_schema_extra=_picker(
                                    "clickup.listWorkspaces", "workspaces"))


class SpaceOut(_Output):
    id: str
    name: str
    private: bool = False
    team_id: str


class SpacesOutput(_Output):
    spaces: list[SpaceOut]


def _team_ids(clickup: ClickUp, team_id: str | None) -> list[str]:
    return [team_id] if team_id else [str(t["id"]) for t in clickup.teams() if t.get("id") is not None]


@action("clickup.listSpaces", toolbox=TOOLBOX, label="List ClickUp spaces",
        description="List the spaces of a ClickUp workspace (or of every workspace of the connection), with the "
                    "spaceId the other ClickUp actions take.",
        params=ListSpacesParams, output=SpacesOutput, graph_node=True, capabilities=("read",),
        connection_type=TYPE_ID)
def list_spaces(params: ListSpacesParams, context: ActionContext) -> SpacesOutput:
    with _clickup(context, params.connection_id) as clickup:
        spaces = [SpaceOut(id=str(s["id"]), name=str(s.get("name") or s["id"]), private=bool(s.get("private")),
                           team_id=team_id)
                  for team_id in _team_ids(clickup, params.team_id) for s in clickup.spaces(team_id)
                  if s.get("id") is not None]
        return SpacesOutput(spaces=spaces)


class ListListsParams(ConnectionParams):
    team_id: OptionalId = Field(None, title="Workspace", description="The workspace (teamId); empty: every "
                                "workspace of the connection", json_schema_extra=_picker(
                                    "clickup.listWorkspaces", "workspaces"))
    space_id: OptionalId = Field(None, title="Space", description="Only the lists of this space (spaceId)",
                                 json_schema_extra=_picker("clickup.listSpaces", "spaces", teamId="teamId"))


class ListOut(_Output):
    id: str
    name: str
    path: str = Field(description="Space / folder / list, for people")
    folder: RefOut | None = Field(None, description="The folder holding it; none for a list outside folders")
    space_id: str | None = None
    task_count: int | None = None


class ListsOutput(_Output):
    lists: list[ListOut]


def _list_out(raw: dict[str, Any]) -> ListOut:
    folder = raw.get("folder") if isinstance(raw.get("folder"), dict) else {}
    space = raw.get("space") if isinstance(raw.get("space"), dict) else {}
    in_folder = folder.get("id") and not folder.get("hidden")
    parts = [str(space.get("name") or ""), str(folder.get("name") or "") if in_folder else "", str(raw.get("name"))]
    try:
        count = int(raw["task_count"]) if raw.get("task_count") is not None else None
    except (TypeError, ValueError):
        count = None
    return ListOut(id=str(raw["id"]), name=str(raw.get("name") or raw["id"]), path=" / ".join(p for p in parts if p),
                   folder=RefOut(id=str(folder["id"]), name=str(folder.get("name") or "")) if in_folder else None,
                   space_id=str(space.get("id")) if space.get("id") is not None else None, task_count=count)


@action("clickup.listLists", toolbox=TOOLBOX, label="List ClickUp lists",
        description="List the lists of a ClickUp space — those outside folders and those in its folders — or of "
                    "every space of a workspace (or of the connection), with the listId tasks are created in.",
        params=ListListsParams, output=ListsOutput, graph_node=True, capabilities=("read",),
        connection_type=TYPE_ID)
def list_lists(params: ListListsParams, context: ActionContext) -> ListsOutput:
    with _clickup(context, params.connection_id) as clickup:
        if params.space_id:
            space_ids = [params.space_id]
        else:
            space_ids = [str(s["id"]) for team_id in _team_ids(clickup, params.team_id)
                         for s in clickup.spaces(team_id) if s.get("id") is not None]
        lists = [_list_out(raw) for space_id in space_ids for raw in clickup.space_lists(space_id)
                 if raw.get("id") is not None]
        return ListsOutput(lists=lists)


# --- assignees ----------------------------------------------------------------------------------------


class _Members:
    """The members of the connection's workspaces, to name assignees by e-mail or user name."""

    def __init__(self, clickup: ClickUp):
        self.clickup = clickup
        self._known: list[dict[str, Any]] | None = None

    def ids(self, wanted: list[int | str], field: str) -> list[int]:
        return [self.id(value, field) for value in wanted]

    def id(self, value: int | str, field: str) -> int:
        if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
            return int(value)
        text = value.strip().lower()
        for user in self._members():
            if text in (str(user.get("email") or "").lower(), str(user.get("username") or "").lower()):
                return int(user["id"])
        raise ActionError(f"{field}: '{value}' is no member of the connection's ClickUp workspaces (give a user id, "
                          "or a member's e-mail address or user name)")

    def _members(self) -> list[dict[str, Any]]:
        if self._known is None:
            self._known = [m["user"] for team in self.clickup.teams() for m in team.get("members") or []
                           if isinstance(m, dict) and isinstance(m.get("user"), dict) and m["user"].get("id")]
        return self._known


# --- searching and reading ----------------------------------------------------------------------------

Operator = Literal["=", "!=", "<", "<=", ">", ">=", "IS NULL", "IS NOT NULL", "ANY", "ALL", "NOT ANY", "NOT ALL",
                   "RANGE"]


class FieldFilter(ActionParams):
    field_id: str = Field(min_length=1, max_length=64, pattern=ID_PATTERN, description="The custom field's id")
    operator: Operator = Field("=", description="ClickUp's filter operator")
    value: Value = Field(None, description="The value to compare with (a list as JSON text for ANY, ALL, RANGE)")


class SearchTasksParams(ConnectionParams):
    team_id: OptionalId = Field(None, title="Workspace", description="Search the whole workspace (teamId)",
                                json_schema_extra=_picker("clickup.listWorkspaces", "workspaces"))
    space_id: OptionalId = Field(None, title="Space", description="With teamId: only tasks of this space",
                                 json_schema_extra=_picker("clickup.listSpaces", "spaces", teamId="teamId"))
    list_id: OptionalId = Field(None, title="List", description="Search one list (listId) instead of a workspace",
                                json_schema_extra=_picker("clickup.listLists", "lists", "path", teamId="teamId",
                                                          spaceId="spaceId"))
    assignees: list[Assignee] = Field([], max_length=LIST_MAX, description="Tasks assigned to any of these")
    statuses: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        [], max_length=LIST_MAX, description="Tasks in any of these statuses (e.g. 'to do', 'in progress')")
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        [], max_length=LIST_MAX, description="Tasks with any of these tags")
    due_date_from: Moment | None = Field(None, description="Due on or after this date (ISO 8601)")
    due_date_to: Moment | None = Field(None, description="Due on or before this date (ISO 8601; a date includes "
                                                        "that whole day)")
    overdue_only: bool = Field(False, description="Only tasks whose due date has passed")
    custom_fields: list[FieldFilter] = Field([], max_length=10, description="Filters on custom fields")
    include_closed: bool = Field(False, description="Also closed tasks (done, complete)")
    page: int = Field(0, ge=0, le=10_000, description="ClickUp's page to start at (0: the first; nextPage of an "
                                                      "earlier search goes on)")
    limit: int = Field(PAGE_SIZE, ge=1, le=1_000, description=f"At most this many tasks (ClickUp pages hold "
                                                              f"{PAGE_SIZE})")


class SearchOutput(_Output):
    tasks: list[TaskOut]
    count: int
    more: bool = Field(description="True when more tasks match: search again with page = nextPage")
    next_page: int | None = Field(None, description="The page to continue with (tasks of a page cut by limit come "
                                                    "again)")


def _search_query(params: SearchTasksParams, members: _Members) -> list[tuple[str, str]]:
    """ClickUp's query parameters of a search (without the page)."""
    query: list[tuple[str, str]] = [("order_by", "created"), ("reverse", "false"),
                                    ("include_closed", "true" if params.include_closed else "false")]
    if params.space_id and not params.list_id:
        query.append(("space_ids[]", params.space_id))
    query += [("statuses[]", s) for s in params.statuses]
    query += [("tags[]", t) for t in params.tags]
    query += [("assignees[]", str(i)) for i in members.ids(list(params.assignees), "assignees")]
    if params.due_date_from:
        query.append(("due_date_gt", str(_ms(params.due_date_from) - 1)))
    before = [_ms(params.due_date_to, end_of_day=True) + (0 if len(params.due_date_to) == 10 else 1)] \
        if params.due_date_to else []
    if params.overdue_only:
        before.append(int(datetime.now(UTC).timestamp() * 1000))
    if before:
        query.append(("due_date_lt", str(min(before))))
    if params.custom_fields:
        query.append(("custom_fields", json.dumps([
            {"field_id": f.field_id, "operator": f.operator, **({"value": f.value} if f.value is not None else {})}
            for f in params.custom_fields], separators=(",", ":"))))
    return query


@action("clickup.searchTasks", toolbox=TOOLBOX, label="Search ClickUp tasks",
        description="Find ClickUp tasks of a workspace (teamId, optionally one space) or of one list (listId), "
                    "filtered by assignees, statuses, tags, due dates (ISO), overdue, custom fields; closed tasks "
                    "only with includeClosed. Pages of 100 are followed up to limit; nextPage goes on.",
        params=SearchTasksParams, output=SearchOutput, graph_node=True, capabilities=("read",),
        connection_type=TYPE_ID)
def search_tasks(params: SearchTasksParams, context: ActionContext) -> SearchOutput:
    # Checked here, not by the model: a template's node names neither until the user picks one.
    if not params.team_id and not params.list_id:
        raise ActionError("name the workspace (teamId) or the list (listId) to search in")
    with _clickup(context, params.connection_id) as clickup:
        query = _search_query(params, _Members(clickup))
        found = clickup.search_tasks(query, params.team_id, params.list_id, params.page, params.limit)
    tasks = [TaskOut.of(raw, SEARCH_DESCRIPTION_CHARS) for raw in found.tasks]
    return SearchOutput(tasks=tasks, count=len(tasks), more=found.next_page is not None, next_page=found.next_page)


class TaskParams(ConnectionParams):
    task_id: Id = Field(description="The task's id (e.g. 86abc1234, from searchTasks or a task's URL)")


@action("clickup.getTask", toolbox=TOOLBOX, label="Read a ClickUp task",
        description="Read one ClickUp task by id: name, status, description (text and Markdown), due date, "
                    "priority, assignees, tags, list, custom fields and its URL.",
        params=TaskParams, output=TaskOut, graph_node=True, capabilities=("read",), connection_type=TYPE_ID)
def get_task(params: TaskParams, context: ActionContext) -> TaskOut:
    with _clickup(context, params.connection_id) as clickup:
        return TaskOut.of(clickup.task(params.task_id))


# --- changing -----------------------------------------------------------------------------------------


class FieldValue(ActionParams):
    id: str = Field(min_length=1, max_length=64, pattern=ID_PATTERN, description="The custom field's id")
    value: Value = Field(description="Its value (a list or object as JSON text)")


class CreateTaskParams(ConnectionParams):
    # Empty is a valid graph (a template's node before the list is chosen): the step says it is missing.
    list_id: ChosenId = Field(title="List", description="The list to create the task in (listId)",
                              json_schema_extra=_picker("clickup.listLists", "lists", "path"))
    name: str = Field(min_length=1, max_length=1_000, description="The task's name")
    description: str | None = Field(None, max_length=100_000, description="The task's description")
    markdown: bool = Field(False, description="The description is Markdown (ClickUp renders it)")
    assignees: list[Assignee] = Field([], max_length=LIST_MAX, description="Who does it")
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field([], max_length=LIST_MAX)
    status: str | None = Field(None, min_length=1, max_length=100, description="A status of the list (default: "
                                                                              "its first, e.g. 'to do')")
    priority: Priority | None = None
    due_date: Moment | None = Field(None, description="ISO 8601 date or date-time")
    custom_fields: list[FieldValue] = Field([], max_length=50, description="Values of the list's custom fields")
    notify_all: bool = Field(False, description="Notify assignees and watchers")


def _due(text: str) -> dict[str, Any]:
    return {"due_date": _ms(text), "due_date_time": len(text) > 10}


def _description(text: str, markdown: bool) -> dict[str, Any]:
    return {"markdown_description": text} if markdown else {"description": text}


@action("clickup.createTask", toolbox=TOOLBOX, label="Create a ClickUp task",
        description="Create a task in a ClickUp list with name, description (text or Markdown), assignees, tags, "
                    "status, priority, due date and custom field values; returns the task with its URL.",
        params=CreateTaskParams, output=TaskOut, graph_node=True, capabilities=("read", "write"),
        consequences=("external",),
        connection_type=TYPE_ID)
def create_task(params: CreateTaskParams, context: ActionContext) -> TaskOut:
    if not params.list_id:
        raise ActionError("listId: choose the list to create the task in (clickup.listLists lists them)")
    with _clickup(context, params.connection_id) as clickup:
        body: dict[str, Any] = {"name": params.name, "notify_all": params.notify_all, "tags": list(params.tags)}
        if params.description:
            body.update(_description(params.description, params.markdown))
        if params.assignees:
            body["assignees"] = _Members(clickup).ids(list(params.assignees), "assignees")
        if params.status:
            body["status"] = params.status
        if params.priority:
            body["priority"] = PRIORITIES[params.priority]
        if params.due_date:
            body.update(_due(params.due_date))
        if params.custom_fields:
            body["custom_fields"] = [{"id": f.id, "value": f.value} for f in params.custom_fields]
        return TaskOut.of(clickup.create_task(params.list_id, body))


class UpdateTaskParams(TaskParams):
    name: str | None = Field(None, min_length=1, max_length=1_000)
    description: str | None = Field(None, max_length=100_000, description="A new description")
    markdown: bool = Field(False, description="The new description is Markdown")
    status: str | None = Field(None, min_length=1, max_length=100, description="A status of the task's list")
    priority: Literal["urgent", "high", "normal", "low", "none"] | None = Field(None, description="'none' clears it")
    due_date: Moment | None = Field(None, description="A new due date (ISO 8601)")
    clear_due_date: bool = Field(False, description="Remove the due date")
    add_assignees: list[Assignee] = Field([], max_length=LIST_MAX)
    remove_assignees: list[Assignee] = Field([], max_length=LIST_MAX)
    add_tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field([], max_length=LIST_MAX)
    remove_tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field([], max_length=LIST_MAX)
    custom_fields: list[FieldValue] = Field([], max_length=50, description="Custom field values to set")


def _update_body(params: UpdateTaskParams, members: _Members) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if params.name is not None:
        body["name"] = params.name
    if params.description is not None:
        body.update(_description(params.description, params.markdown))
    if params.status:
        body["status"] = params.status
    if params.priority:
        body["priority"] = None if params.priority == "none" else PRIORITIES[params.priority]
    if params.due_date and params.clear_due_date:
        raise ActionError("dueDate: give a new due date or clearDueDate, not both")
    if params.due_date:
        body.update(_due(params.due_date))
    elif params.clear_due_date:
        body.update({"due_date": None, "due_date_time": False})
    if params.add_assignees or params.remove_assignees:
        body["assignees"] = {"add": members.ids(list(params.add_assignees), "addAssignees"),
                             "rem": members.ids(list(params.remove_assignees), "removeAssignees")}
    return body


@action("clickup.updateTask", toolbox=TOOLBOX, label="Update a ClickUp task",
        description="Change a ClickUp task: name, description, status, priority, due date, add or remove "
                    "assignees and tags, set custom field values; returns the task as it is then.",
        params=UpdateTaskParams, output=TaskOut, graph_node=True, capabilities=("read", "write"),
        consequences=("external",),
        connection_type=TYPE_ID)
def update_task(params: UpdateTaskParams, context: ActionContext) -> TaskOut:
    with _clickup(context, params.connection_id) as clickup:
        body = _update_body(params, _Members(clickup))
        if not (body or params.add_tags or params.remove_tags or params.custom_fields):
            raise ActionError("nothing to change: give at least one of name, description, status, priority, dueDate, "
                              "clearDueDate, assignees, tags or customFields")
        if body:
            clickup.update_task(params.task_id, body)
        for tag in params.add_tags:
            clickup.add_tag(params.task_id, tag)
        for tag in params.remove_tags:
            clickup.remove_tag(params.task_id, tag)
        for value in params.custom_fields:
            clickup.set_field(params.task_id, value.id, value.value)
        return TaskOut.of(clickup.task(params.task_id))


class CommentParams(TaskParams):
    text: str = Field(min_length=1, max_length=50_000, description="The comment")
    notify_all: bool = Field(False, description="Notify assignees and watchers")


class CommentOut(_Output):
    id: str
    task_id: str
    date: str | None = None


@action("clickup.addComment", toolbox=TOOLBOX, label="Comment on a ClickUp task",
        description="Post a comment on a ClickUp task.",
        params=CommentParams, output=CommentOut, graph_node=True, capabilities=("read", "write"),
        consequences=("external",),
        connection_type=TYPE_ID)
def add_comment(params: CommentParams, context: ActionContext) -> CommentOut:
    with _clickup(context, params.connection_id) as clickup:
        answer = clickup.comment(params.task_id, params.text, params.notify_all)
    return CommentOut(id=str(answer.get("id") or ""), task_id=params.task_id, date=_iso(answer.get("date")))


class AttachParams(TaskParams):
    file: str = Field(min_length=1, max_length=2_000, description="Path of the file in this workspace's file store, "
                                                                  "e.g. /reports/summary.pdf")
    name: str | None = Field(None, min_length=1, max_length=255, description="Its name in ClickUp (default: the "
                                                                            "file's name)")


class AttachmentOut(_Output):
    id: str
    task_id: str
    title: str
    url: str | None = None
    size: int


@action("clickup.attachFile", toolbox=TOOLBOX, label="Attach a file to a ClickUp task",
        description="Upload a file of this workspace's file store to a ClickUp task as an attachment.",
        params=AttachParams, output=AttachmentOut, graph_node=True, capabilities=("read", "write", "externalSend"),
        consequences=("external",),
        connection_type=TYPE_ID)
def attach_file(params: AttachParams, context: ActionContext) -> AttachmentOut:
    with _clickup(context, params.connection_id) as clickup:
        entry, data = files.read_bytes(context, params.file)
        name = params.name or entry.name
        answer = clickup.attach(params.task_id, name, data, entry.mime_type)
    return AttachmentOut(id=str(answer.get("id") or ""), task_id=params.task_id, title=str(answer.get("title") or name),
                         url=answer.get("url"), size=len(data))
