"""Toolbox jira (spec §5.2): issues of Jira Cloud or Data Center through one of the caller's connections
of type `jira` (backend/connectors/kinds/jira.py).

Every action takes `connectionId`: a connection the caller may use (their own, or one shared in their
mandate); any other id is "not found". Jira's refusals come back in Jira's words (an invalid JQL as
"Error in the JQL Query: …", a missing field by name), a rate limit is waited out (Retry-After).

Fields are named by their id (`summary`, `customfield_10016`) or their name as Jira shows it
("Story Points"); `key`, `id` and `url` name the issue itself. Descriptions and comments are plain
text: Jira Cloud gets them as Atlassian Document Format, Data Center as text.

Import (`jira.importTickets`) is idempotent by an external key: each row's `externalKey` is kept on
its issue as the label `ext-<externalKey>`, so a second import finds the issue (JQL `labels in (…)`)
and updates what differs instead of creating it again. Every row is checked before anything is
written; a run with bad rows imports nothing and names each row's problem (`dryRun` lists what would
be created, updated or left unchanged).
"""

from __future__ import annotations

import csv
import io
import json
import re
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from backend.actions.base import ActionContext, ActionError, ActionParams, action
from backend.actions.connected import connected
from backend.connectors.kinds.jira import TYPE_ID, JiraClient, from_adf, is_oauth
from backend.connectors.rest import ApiError
from backend.connectors.types import ConnectionFailed
from backend.files import service as files

CONNECTION_HELP = "Id of the Jira connection to use (the Connections page lists the caller's connections)"
ISSUE_HELP = "The issue's key, e.g. OPS-12"
FIELDS_HELP = ("Fields by id or by name as Jira shows them, e.g. ['priority', 'labels', 'Story Points']; `key`, `id` "
               "and `url` name the issue itself")
PROJECT_PICKER = {"x-options": {"action": "jira.connect", "items": "projects", "value": "key", "label": "name",
                                "args": {}}}
ISSUE_KEY = r"^[A-Za-z][A-Za-z0-9_]*-[0-9]+$|^[0-9]+$"
BASE_FIELDS = ["summary", "status", "assignee", "created", "updated", "priority", "issuetype", "labels", "project"]
ISSUE_ITSELF = {"key", "id", "url"}
SYSTEM_FIELDS = {"summary", "status", "assignee", "reporter", "created", "updated", "priority", "issuetype", "labels",
                 "project", "description", "resolution", "resolutiondate", "duedate", "components", "fixVersions",
                 "environment", "comment", "parent", "timetracking"}
EXPORT_DEFAULT = ["key", "summary", "status", "assignee", "priority", "labels", "created", "updated"]
EXPORT_MAX = 10_000
IMPORT_MAX_ROWS = 1000
PROBLEMS_SHOWN = 50
EXTERNAL_PREFIX = "ext-"
EXTERNAL_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
LOOKUP_CHUNK = 50
COMMENTS_SHOWN = 20


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class ConnectionParams(ActionParams):
    # Empty is a valid graph (a template's node before one is chosen): the run's start says it is missing.
    connection_id: str = Field(max_length=32, description=CONNECTION_HELP)


def _jira(context: ActionContext, connection_id: str) -> AbstractContextManager[JiraClient]:
    """The Jira of a connection the caller may use; Jira's refusals as ActionError."""
    return connected(context, connection_id, [TYPE_ID], JiraClient)


# --- values -----------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A field's value as people read it: a user's or option's name, a document's text, lists of those."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        if value.get("type") == "doc":
            return from_adf(value)
        for key in ("displayName", "name", "value", "key"):
            if value.get(key) is not None:
                return value[key]
        return json.dumps(value, ensure_ascii=False)
    return value


def _name(value: Any) -> str | None:
    shown = _plain(value)
    return None if shown is None else str(shown)


class FieldMap:
    """Field names as a user wrote them → Jira's field ids (`/field` read once, when needed)."""

    def __init__(self, client: JiraClient):
        self.client = client
        self._all: list[dict[str, Any]] | None = None

    def all(self) -> list[dict[str, Any]]:
        if self._all is None:
            self._all = self.client.fields()
        return self._all

    def find(self, name: str) -> dict[str, Any] | None:
        """The field `name` names (its id, or its name in any case), else None."""
        wanted = name.strip().lower()
        return next((f for f in self.all() if str(f.get("id", "")).lower() == wanted), None) or \
            next((f for f in self.all() if str(f.get("name", "")).lower() == wanted), None)

    def id_of(self, name: str, what: str = "fields") -> str:
        """Jira's id of a field named by id or name.

        Raises:
            ActionError: no such field (naming the parameter `what`).
        """
        if name in ISSUE_ITSELF or name in SYSTEM_FIELDS:
            return name
        found = self.find(name)
        if found is None:
            raise ActionError(f"{what}: Jira has no field '{name}' (name it by its id, e.g. customfield_10016, or "
                              "by its name as Jira shows it)")
        return str(found["id"])


def _field_value(issue: dict[str, Any], field_id: str, url: str) -> Any:
    if field_id == "key":
        return issue.get("key")
    if field_id == "id":
        return issue.get("id")
    if field_id == "url":
        return url
    return _plain((issue.get("fields") or {}).get(field_id))


# --- outputs ----------------------------------------------------------------------------------------


class ProjectOut(_Output):
    key: str
    name: str
    id: str


class IssueOut(_Output):
    key: str
    id: str
    summary: str
    status: str | None
    assignee: str | None = Field(description="The assignee's display name (none: unassigned)")
    created: str | None
    updated: str | None
    url: str = Field(description="Opens the issue in Jira")
    issue_type: str | None = None
    priority: str | None = None
    labels: list[str] = Field(default_factory=list)
    project: str | None = Field(None, description="The project's key")
    fields: dict[str, Any] = Field(default_factory=dict, description="The other fields asked for, by the name given")


def _issue_out(client: JiraClient, issue: dict[str, Any], extra: dict[str, str] | None = None) -> IssueOut:
    values = issue.get("fields") or {}
    key = str(issue.get("key") or "")
    project = values.get("project") if isinstance(values.get("project"), dict) else {}
    url = client.browse_url(key)
    return IssueOut(key=key, id=str(issue.get("id") or ""), summary=str(values.get("summary") or ""),
                    status=_name(values.get("status")), assignee=_name(values.get("assignee")),
                    created=values.get("created"), updated=values.get("updated"), url=url,
                    issue_type=_name(values.get("issuetype")), priority=_name(values.get("priority")),
                    labels=[str(label) for label in values.get("labels") or []], project=project.get("key"),
                    fields={name: _field_value(issue, field_id, url) for name, field_id in (extra or {}).items()})


def _extra_fields(fields: FieldMap, names: list[str]) -> dict[str, str]:
    """The asked-for fields beyond the base ones: {name as given: field id}."""
    return {name: fields.id_of(name) for name in names if name not in BASE_FIELDS}


# --- connect ----------------------------------------------------------------------------------------


class ConnectOutput(_Output):
    connection: str
    site: str
    account: str
    deployment: Literal["cloud", "datacenter"]
    message: str
    projects: list[ProjectOut]


@action("jira.connect", toolbox="jira", label="Connect to Jira",
        description="Check a Jira connection (signs in) and list the projects its account can see, each with the "
                    "key the other Jira actions take.",
        params=ConnectionParams, output=ConnectOutput, graph_node=True, capabilities=("read",),
        connection_type=TYPE_ID)
def connect(params: ConnectionParams, context: ActionContext) -> ConnectOutput:
    with _jira(context, params.connection_id) as client:
        me = client.myself()
        projects = client.projects()
    account = str(me.get("displayName") or me.get("emailAddress") or me.get("name") or "")
    count = len(projects)
    return ConnectOutput(
        connection=client.credentials.label, site=client.site_url, account=account,
        deployment="cloud" if client.cloud else "datacenter",
        message=f"signed in to {client.site_url} as {account}" + (" (Atlassian sign-in)" if is_oauth(
            client.credentials) else "") + f": {count} project{'' if count == 1 else 's'}",
        projects=[ProjectOut(key=str(p.get("key") or ""), name=str(p.get("name") or ""), id=str(p.get("id") or ""))
                  for p in projects])


# --- search and read --------------------------------------------------------------------------------


class SearchParams(ConnectionParams):
    jql: str = Field(min_length=1, max_length=4000, description="A JQL query, e.g. project = OPS AND status = "
                                                               "\"In Progress\" ORDER BY created DESC")
    fields: list[str] = Field(default_factory=list, max_length=30, description="More fields to return. " + FIELDS_HELP)
    max_results: int = Field(25, ge=1, le=100, description="At most this many issues per page (default 25)")
    page_token: str | None = Field(None, max_length=2000, description="The nextPageToken of the previous page")
    start_at: int | None = Field(None, ge=0, description="Jira Data Center: the index of the first issue (instead "
                                                        "of pageToken)")


class SearchOutput(_Output):
    jql: str
    issues: list[IssueOut]
    next_page_token: str | None = Field(description="Pass it as pageToken for the next page; none: this was the "
                                                    "last")
    total: int | None = Field(None, description="How many issues match (Jira Data Center only)")


@action("jira.searchIssues", toolbox="jira", label="Search Jira issues",
        description="Find Jira issues with a JQL query, one page at a time (key, summary, status, assignee, dates, "
                    "link, and any fields asked for); nextPageToken leads to the next page.",
        params=SearchParams, output=SearchOutput, graph_node=True, capabilities=("read",), connection_type=TYPE_ID)
def search_issues(params: SearchParams, context: ActionContext) -> SearchOutput:
    with _jira(context, params.connection_id) as client:
        extra = _extra_fields(FieldMap(client), params.fields)
        token = params.page_token if params.page_token else (str(params.start_at) if params.start_at else None)
        if token and params.start_at is not None and client.cloud and not params.page_token:
            raise ActionError("startAt: Jira Cloud pages by pageToken (the nextPageToken of the previous page)")
        issues, following, total = client.search(params.jql, BASE_FIELDS + list(extra.values()), params.max_results,
                                                 token)
        return SearchOutput(jql=params.jql, issues=[_issue_out(client, i, extra) for i in issues],
                            next_page_token=following, total=total)


class IssueParams(ConnectionParams):
    issue_key: str = Field(min_length=1, max_length=100, pattern=ISSUE_KEY, description=ISSUE_HELP)


class GetIssueParams(IssueParams):
    fields: list[str] = Field(default_factory=list, max_length=30, description="More fields to return. " + FIELDS_HELP)


class CommentOut(_Output):
    id: str
    author: str | None
    created: str | None
    text: str


class IssueDetail(IssueOut):
    description: str = Field(description="The description as plain text")
    reporter: str | None = None
    comments: list[CommentOut] = Field(description=f"The newest {COMMENTS_SHOWN} comments, oldest first")


@action("jira.getIssue", toolbox="jira", label="Read Jira issue",
        description="Read one Jira issue by key: summary, status, assignee, description as text, the newest "
                    "comments, and any fields asked for.",
        params=GetIssueParams, output=IssueDetail, graph_node=True, capabilities=("read",), connection_type=TYPE_ID)
def get_issue(params: GetIssueParams, context: ActionContext) -> IssueDetail:
    with _jira(context, params.connection_id) as client:
        extra = _extra_fields(FieldMap(client), params.fields)
        issue = client.issue(params.issue_key, [*BASE_FIELDS, "description", "reporter", "comment",
                                                *extra.values()])
        base = _issue_out(client, issue, extra)
    values = issue.get("fields") or {}
    comments = ((values.get("comment") or {}).get("comments") or [])[-COMMENTS_SHOWN:]
    return IssueDetail(**base.model_dump(), description=from_adf(values.get("description")),
                       reporter=_name(values.get("reporter")),
                       comments=[CommentOut(id=str(c.get("id") or ""), author=_name(c.get("author")),
                                            created=c.get("created"), text=from_adf(c.get("body")))
                                 for c in comments if isinstance(c, dict)])


# --- create and change ------------------------------------------------------------------------------


class FieldValue(ActionParams):
    """One more field to set."""

    name: str = Field(min_length=1, max_length=200, description="The field's id or name, e.g. 'Story Points'")
    value: str | float | bool | list[str] | None = Field(description="Its value (a number, text, yes/no, a list of "
                                                                     "texts; none clears it)")


class CreateParams(ConnectionParams):
    project_key: str = Field(min_length=1, max_length=100, description="The project's key, e.g. OPS",
                             json_schema_extra=PROJECT_PICKER)
    issue_type: str = Field("Task", min_length=1, max_length=100, description="Task, Bug, Story … (default Task)")
    summary: str = Field(min_length=1, max_length=255)
    description: str | None = Field(None, max_length=32_000, description="Plain text")
    labels: list[str] = Field(default_factory=list, max_length=50, description="Labels (no spaces)")
    assignee: str | None = Field(None, max_length=320, description="Jira Cloud: an account id or e-mail address; "
                                                                  "Data Center: a username or e-mail address")
    priority: str | None = Field(None, max_length=100, description="e.g. High, Medium, Low")
    fields: list[FieldValue] = Field(default_factory=list, max_length=50,
                                     description="Other fields to set, e.g. [{\"name\": \"Story Points\", "
                                                 "\"value\": 3}]")


class CreatedOut(_Output):
    key: str
    id: str
    url: str


def _assignee(client: JiraClient, text: str, where: str = "assignee") -> dict[str, Any]:
    found = client.find_user(text.strip())
    if found is None:
        raise ActionError(f"{where}: no Jira user matches '{text}'")
    return client.user_ref(found)


def _other_fields(fields: FieldMap, given: list[FieldValue]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in given:
        field_id = fields.id_of(item.name, "fields")
        value = item.value
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        values[field_id] = value
    return values


def _check_labels(labels: list[str], where: str = "labels") -> list[str]:
    cleaned = [label.strip() for label in labels if label.strip()]
    for label in cleaned:
        if re.search(r"\s", label):
            raise ActionError(f"{where}: '{label}' holds a space; Jira labels cannot")
    return cleaned


@action("jira.createIssue", toolbox="jira", label="Create Jira issue",
        description="Create a Jira issue in a project: type, summary, plain-text description, labels, assignee, "
                    "priority and other fields by name; returns its key and link.",
        params=CreateParams, output=CreatedOut, graph_node=True, capabilities=("read", "externalSend"),
        connection_type=TYPE_ID)
def create_issue(params: CreateParams, context: ActionContext) -> CreatedOut:
    with _jira(context, params.connection_id) as client:
        values: dict[str, Any] = {"project": {"key": params.project_key}, "issuetype": {"name": params.issue_type},
                                  "summary": params.summary}
        if params.description:
            values["description"] = client.rich(params.description)
        if params.labels:
            values["labels"] = _check_labels(params.labels)
        if params.priority:
            values["priority"] = {"name": params.priority}
        if params.assignee:
            values["assignee"] = _assignee(client, params.assignee)
        values.update(_other_fields(FieldMap(client), params.fields))
        client.project(params.project_key)  # an unknown project is named as such, not as a field error
        made = client.create_issue(values)
        key = str(made.get("key") or "")
        return CreatedOut(key=key, id=str(made.get("id") or ""), url=client.browse_url(key))


class UpdateParams(IssueParams):
    summary: str | None = Field(None, min_length=1, max_length=255)
    description: str | None = Field(None, max_length=32_000, description="Plain text; replaces the description")
    labels: list[str] | None = Field(None, max_length=50, description="Replaces every label")
    add_labels: list[str] = Field(default_factory=list, max_length=50, description="Labels to add")
    assignee: str | None = Field(None, max_length=320, description="Who to assign (account id, username or e-mail); "
                                                                  "'none' unassigns")
    priority: str | None = Field(None, max_length=100)
    fields: list[FieldValue] = Field(default_factory=list, max_length=50, description="Other fields to set (name "
                                                                                     "and value)")


class UpdatedOut(_Output):
    key: str
    url: str
    changed: list[str] = Field(description="The fields sent to Jira")


@action("jira.updateIssue", toolbox="jira", label="Update Jira issue",
        description="Change fields of a Jira issue: summary, description (plain text), labels (replace or add), "
                    "assignee ('none' unassigns), priority, other fields by name.",
        params=UpdateParams, output=UpdatedOut, graph_node=True, capabilities=("read", "externalSend"),
        connection_type=TYPE_ID)
def update_issue(params: UpdateParams, context: ActionContext) -> UpdatedOut:
    with _jira(context, params.connection_id) as client:
        values: dict[str, Any] = {}
        if params.summary is not None:
            values["summary"] = params.summary
        if params.description is not None:
            values["description"] = client.rich(params.description) if params.description.strip() else None
        if params.labels is not None:
            values["labels"] = _check_labels(params.labels)
        if params.priority:
            values["priority"] = {"name": params.priority}
        if params.assignee is not None:
            unassign = params.assignee.strip().lower() in ("", "none", "unassigned")
            values["assignee"] = None if unassign else _assignee(client, params.assignee)
        values.update(_other_fields(FieldMap(client), params.fields))
        update = {"labels": [{"add": label} for label in _check_labels(params.add_labels, "addLabels")]} \
            if params.add_labels else None
        if not values and not update:
            raise ActionError("name at least one field to change (summary, description, labels, addLabels, assignee, "
                              "priority or fields)")
        client.edit_issue(params.issue_key, values, update)
        return UpdatedOut(key=params.issue_key, url=client.browse_url(params.issue_key),
                          changed=sorted(set(values) | ({"labels"} if update else set())))


class TransitionParams(IssueParams):
    transition: str = Field(min_length=1, max_length=200, description="The transition's name (e.g. 'Start "
                                                                     "Progress') or the status to move to (e.g. "
                                                                     "'Done')")


class TransitionOut(_Output):
    key: str
    transition: str
    from_status: str | None
    status: str
    url: str


@action("jira.transitionIssue", toolbox="jira", label="Move Jira issue",
        description="Move a Jira issue through its workflow, by the transition's name or the status to reach; "
                    "when none fits, the error lists the transitions available now.",
        params=TransitionParams, output=TransitionOut, graph_node=True, capabilities=("read", "externalSend"),
        connection_type=TYPE_ID)
def transition_issue(params: TransitionParams, context: ActionContext) -> TransitionOut:
    wanted = params.transition.strip().lower()
    with _jira(context, params.connection_id) as client:
        current = _name((client.issue(params.issue_key, ["status"]).get("fields") or {}).get("status"))
        available = client.transitions(params.issue_key)
        found = next((t for t in available if str(t.get("name") or "").lower() == wanted), None) or \
            next((t for t in available if str((t.get("to") or {}).get("name") or "").lower() == wanted), None)
        if found is None:
            offered = ", ".join(f"'{t.get('name')}' → {(t.get('to') or {}).get('name')}" for t in available)
            raise ActionError(f"issue {params.issue_key} (status '{current}') has no transition '{params.transition}' "
                              f"now; available: {offered or 'none'}")
        client.transition(params.issue_key, str(found.get("id")))
        return TransitionOut(key=params.issue_key, transition=str(found.get("name") or ""), from_status=current,
                             status=str((found.get("to") or {}).get("name") or ""),
                             url=client.browse_url(params.issue_key))


class CommentParams(IssueParams):
    text: str = Field(min_length=1, max_length=32_000, description="The comment, plain text")


class CommentedOut(_Output):
    id: str
    issue_key: str
    created: str | None
    url: str


@action("jira.addComment", toolbox="jira", label="Comment on Jira issue",
        description="Add a plain-text comment to a Jira issue.",
        params=CommentParams, output=CommentedOut, graph_node=True, capabilities=("read", "externalSend"),
        connection_type=TYPE_ID)
def add_comment(params: CommentParams, context: ActionContext) -> CommentedOut:
    with _jira(context, params.connection_id) as client:
        client.issue(params.issue_key, ["summary"])  # a missing issue is named as such
        made = client.add_comment(params.issue_key, params.text)
        return CommentedOut(id=str(made.get("id") or ""), issue_key=params.issue_key, created=made.get("created"),
                            url=client.browse_url(params.issue_key))


# --- export -----------------------------------------------------------------------------------------


class ExportParams(ConnectionParams):
    jql: str = Field(min_length=1, max_length=4000, description="Which issues, e.g. project = OPS ORDER BY created")
    fields: list[str] = Field(default_factory=lambda: list(EXPORT_DEFAULT), min_length=1, max_length=50,
                              description="The columns, in order. " + FIELDS_HELP)
    format: Literal["csv", "json"] = Field("csv", description="csv (a header row, then one row per issue) or json "
                                                              "(a list of objects)")
    path: str | None = Field(None, max_length=1000, description="Where in the file store, e.g. /exports/ops.csv "
                                                               "(default /jira/export-<time>.<format>)")
    max_issues: int = Field(1000, ge=1, le=EXPORT_MAX, description="At most this many issues (every page up to it)")
    overwrite: bool = Field(False, description="Replace a file of that path (default: refuse)")


class ExportOutput(_Output):
    path: str
    count: int
    format: str
    fields: list[str]
    truncated: bool = Field(description="More issues matched than maxIssues")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ";".join(_cell(v) for v in value)
    return str(value)


@action("jira.exportTickets", toolbox="jira", label="Export Jira tickets",
        description="Export the Jira issues of a JQL query (every page, up to maxIssues) with chosen fields into a "
                    "CSV or JSON file of the workspace's file store; returns its path and how many issues it holds.",
        params=ExportParams, output=ExportOutput, graph_node=True, capabilities=("read", "write"),
        connection_type=TYPE_ID)
def export_tickets(params: ExportParams, context: ActionContext) -> ExportOutput:
    with _jira(context, params.connection_id) as client:
        columns = _columns(client, params.fields)
        wanted = sorted({f for f in columns.values() if f not in ISSUE_ITSELF})
        issues = list(client.search_all(params.jql, wanted or ["summary"], params.max_issues + 1))
        url_of = client.browse_url
    truncated = len(issues) > params.max_issues
    rows = [{name: _field_value(issue, field_id, url_of(str(issue.get("key") or "")))
             for name, field_id in columns.items()} for issue in issues[:params.max_issues]]
    data = _csv(list(columns), rows) if params.format == "csv" else \
        json.dumps(rows, ensure_ascii=False, indent=2).encode("utf-8")
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = params.path or f"/jira/export-{stamp}.{params.format}"
    mime = "text/csv" if params.format == "csv" else "application/json"
    entry = files.store_file(context, path, data, mime, overwrite=params.overwrite)
    return ExportOutput(path=entry.path, count=len(rows), format=params.format, fields=list(columns),
                        truncated=truncated)


def _columns(client: JiraClient, names: list[str]) -> dict[str, str]:
    fields = FieldMap(client)
    columns: dict[str, str] = {}
    for name in names:
        if name in columns:
            raise ActionError(f"fields: '{name}' is named twice")
        columns[name] = name if name in ISSUE_ITSELF else fields.id_of(name)
    return columns


def _csv(header: list[str], rows: list[dict[str, Any]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([_cell(row.get(name)) for name in header])
    return buffer.getvalue().encode("utf-8")


# --- import -----------------------------------------------------------------------------------------


class ImportParams(ConnectionParams):
    file: str = Field(min_length=1, max_length=1000, description="A CSV or JSON file of the workspace's file store, "
                                                                "e.g. /imports/tickets.csv")
    project_key: str = Field(min_length=1, max_length=100, description="The project the issues go to",
                             json_schema_extra=PROJECT_PICKER)
    issue_type: str = Field("Task", min_length=1, max_length=100, description="The type of rows without an "
                                                                             "issueType column (default Task)")
    dry_run: bool = Field(False, description="Only check the file and list what would be created, updated or left "
                                             "unchanged; nothing is written to Jira")


class RowOut(_Output):
    row: int = Field(description="The row of the file (CSV: its line, the header being row 1; JSON: its position)")
    external_key: str
    key: str | None = Field(description="The Jira issue (none for one still to create)")
    summary: str
    changes: list[str] = Field(default_factory=list, description="The fields that differ(ed)")


class ImportOutput(_Output):
    dry_run: bool
    file: str
    project_key: str
    rows: int
    created: list[RowOut]
    updated: list[RowOut]
    unchanged: list[RowOut]
    problems: list[str] = Field(description="Each bad row and what is wrong with it (a dry run lists them; a real "
                                            "run with problems imports nothing)")


IMPORT_COLUMNS = {"externalkey": "externalKey", "summary": "summary", "description": "description",
                  "issuetype": "issueType", "labels": "labels", "priority": "priority", "assignee": "assignee"}
# Columns an export writes that an import cannot set: read and left alone.
INFORMATIONAL = {"key", "id", "url", "status", "created", "updated", "reporter", "project", "resolution"}


class _Row:
    """One row of an import file, checked."""

    def __init__(self, number: int, external_key: str, values: dict[str, Any]):
        self.number = number
        self.external_key = external_key
        self.values = values  # summary, description, issueType, labels, priority, assignee, fields
        self.label = EXTERNAL_PREFIX + external_key


def _read_rows(context: ActionContext, path: str) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    """(row number, raw values) of a CSV or JSON file of the store, and file-level problems."""
    entry, data = files.read_bytes(context, path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ActionError(f"file: '{entry.path}' is not UTF-8 text (save it as CSV UTF-8 or JSON)") from None
    if entry.name.lower().endswith(".json") or entry.mime_type == "application/json":
        return _json_rows(text, entry.path)
    return _csv_rows(text, entry.path)


def _json_rows(text: str, path: str) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    try:
        loaded = json.loads(text)
    except ValueError as exc:
        raise ActionError(f"file: '{path}' is not valid JSON ({exc})") from None
    items = loaded.get("issues") if isinstance(loaded, dict) else loaded
    if not isinstance(items, list):
        raise ActionError(f"file: '{path}' must hold a list of objects (or {{\"issues\": [...]}})")
    rows, problems = [], []
    for number, item in enumerate(items, start=1):
        if isinstance(item, dict):
            rows.append((number, item))
        else:
            problems.append(f"row {number}: not an object")
    return rows, problems


def _csv_rows(text: str, path: str) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO(text), dialect)
    try:
        header = next(reader)
    except StopIteration:
        raise ActionError(f"file: '{path}' is empty") from None
    except csv.Error as exc:
        raise ActionError(f"file: '{path}' is not readable CSV ({exc})") from None
    header = [h.strip() for h in header]
    rows, problems = [], []
    line = reader.line_num
    try:
        for cells in reader:
            number, line = line + 1, reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(cells) > len(header):
                problems.append(f"row {number}: {len(cells)} cells but the header names {len(header)} columns")
                continue
            rows.append((number, dict(zip(header, cells, strict=False))))
    except csv.Error as exc:
        problems.append(f"row {line + 1}: not readable CSV ({exc})")
    return rows, problems


class _Checker:
    """Checks rows against the project: issue types, priorities, users, fields; every problem named."""

    def __init__(self, client: JiraClient, project: dict[str, Any], default_type: str):
        self.client = client
        self.types = {str(t.get("name") or "").lower(): str(t.get("name")) for t in project.get("issueTypes") or []}
        self.default_type = default_type
        self._priorities: dict[str, str] | None = None
        self.fields = FieldMap(client)
        self.users: dict[str, dict[str, Any] | None] = {}
        self.columns: dict[str, dict[str, Any]] = {}
        self.unknown_columns: list[str] = []  # named once for the file, not in every row

    def priorities(self) -> dict[str, str]:
        if self._priorities is None:
            self._priorities = {str(p.get("name") or "").lower(): str(p.get("name")) for p in self.client.priorities()}
        return self._priorities

    def user(self, text: str) -> dict[str, Any] | None:
        if text not in self.users:
            self.users[text] = self.client.find_user(text)
        return self.users[text]

    def column(self, name: str) -> dict[str, Any] | None:
        if name not in self.columns:
            self.columns[name] = self.fields.find(name) or {}
        return self.columns[name] or None

    def check(self, number: int, raw: dict[str, Any]) -> tuple[_Row | None, list[str]]:
        problems: list[str] = []
        values: dict[str, Any] = {"fields": {}}
        for name, value in raw.items():
            self._take(str(name or "").strip(), value, values, problems)
        external = str(values.get("externalKey") or "").strip()
        if not external:
            problems.append("externalKey: missing")
        elif not EXTERNAL_KEY.fullmatch(external):
            problems.append(f"externalKey: '{external[:60]}' may hold only letters, digits and _ . : - "
                            "(at most 100, no spaces)")
        summary = str(values.get("summary") or "").strip()
        if not summary:
            problems.append("summary: missing")
        elif len(summary) > 255 or "\n" in summary:
            problems.append("summary: must be one line of at most 255 characters")
        values["summary"] = summary
        self._check_type(values, problems)
        self._check_priority(values, problems)
        self._check_assignee(values, problems)
        self._check_labels(values, problems)
        if problems:
            return None, [f"row {number}: {p}" for p in problems]
        return _Row(number, external, values), []

    def _take(self, name: str, value: Any, values: dict[str, Any], problems: list[str]) -> None:
        known = IMPORT_COLUMNS.get(name.lower())
        if known:
            values[known] = value
            return
        if not name or name.lower() in INFORMATIONAL:
            return
        found = self.column(name)
        if found is None:
            if name not in self.unknown_columns:
                self.unknown_columns.append(name)
            return
        if value in (None, ""):
            return
        kind = (found.get("schema") or {}).get("type")
        if kind == "number" and not isinstance(value, int | float):
            try:
                value = float(str(value).replace(",", "."))
                value = int(value) if value.is_integer() else value
            except ValueError:
                problems.append(f"{name}: '{value}' is not a number")
                return
        values["fields"][str(found["id"])] = value

    def _check_type(self, values: dict[str, Any], problems: list[str]) -> None:
        wanted = str(values.get("issueType") or "").strip() or self.default_type
        found = self.types.get(wanted.lower())
        if found is None:
            problems.append(f"issueType: '{wanted}' is not a type of this project ({', '.join(self.types.values())})")
        values["issueType"] = found

    def _check_priority(self, values: dict[str, Any], problems: list[str]) -> None:
        wanted = str(values.get("priority") or "").strip()
        if not wanted:
            values["priority"] = None
            return
        found = self.priorities().get(wanted.lower())
        if found is None:
            problems.append(f"priority: '{wanted}' is not a Jira priority ({', '.join(self.priorities().values())})")
        values["priority"] = found

    def _check_assignee(self, values: dict[str, Any], problems: list[str]) -> None:
        wanted = str(values.get("assignee") or "").strip()
        values["assignee"] = None
        if wanted:
            found = self.user(wanted)
            if found is None:
                problems.append(f"assignee: no Jira user matches '{wanted}'")
            values["assignee"] = found

    def _check_labels(self, values: dict[str, Any], problems: list[str]) -> None:
        raw = values.get("labels")
        labels = [str(v).strip() for v in raw] if isinstance(raw, list) else \
            [v.strip() for v in re.split(r"[;,]", str(raw or ""))]
        labels = [label for label in labels if label]
        for label in labels:
            if re.search(r"\s", label):
                problems.append(f"labels: '{label}' holds a space; Jira labels cannot")
            elif label.lower().startswith(EXTERNAL_PREFIX):
                problems.append(f"labels: '{label}' starts with '{EXTERNAL_PREFIX}', which marks the external key")
        values["labels"] = labels


def _existing(client: JiraClient, project_key: str, rows: list[_Row], field_ids: list[str]
              ) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The issues already imported (by their `ext-` label), and rows that match more than one issue."""
    found: dict[str, list[dict[str, Any]]] = {}
    wanted = sorted({row.label for row in rows})
    fields = ["summary", "description", "labels", "priority", "assignee", "issuetype", *field_ids]
    for start in range(0, len(wanted), LOOKUP_CHUNK):
        chunk = wanted[start:start + LOOKUP_CHUNK]
        jql = f"project = {_quoted(project_key)} AND labels in ({', '.join(_quoted(x) for x in chunk)})"
        for issue in client.search_all(jql, fields, LOOKUP_CHUNK * 4):
            for label in (issue.get("fields") or {}).get("labels") or []:
                if label in chunk:
                    found.setdefault(label, []).append(issue)
    problems = [f"row {row.number}: externalKey '{row.external_key}' is on several issues "
                f"({', '.join(str(i.get('key')) for i in found[row.label])}); keep it on one"
                for row in rows if len(found.get(row.label, [])) > 1]
    return {label: issues[0] for label, issues in found.items()}, problems


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _user_matches(client: JiraClient, current: Any, wanted: dict[str, Any]) -> bool:
    if not isinstance(current, dict):
        return False
    key = "accountId" if client.cloud else "name"
    return current.get(key) == wanted.get(key)


def _changes(client: JiraClient, row: _Row, issue: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The fields to send so `issue` says what `row` says (blank cells leave a field alone), and their names."""
    have = issue.get("fields") or {}
    values = row.values
    send: dict[str, Any] = {}
    if values["summary"] != (have.get("summary") or ""):
        send["summary"] = values["summary"]
    description = str(values.get("description") or "").strip()
    if description and description != from_adf(have.get("description")).strip():
        send["description"] = client.rich(description)
    if values["priority"] and values["priority"] != _name(have.get("priority")):
        send["priority"] = {"name": values["priority"]}
    if values["assignee"] and not _user_matches(client, have.get("assignee"), values["assignee"]):
        send["assignee"] = client.user_ref(values["assignee"])
    labels = list(have.get("labels") or [])
    missing = [label for label in [*values["labels"], row.label] if label not in labels]
    if missing:
        send["labels"] = labels + missing
    for field_id, value in values["fields"].items():
        if _plain(have.get(field_id)) != value:
            send[field_id] = value
    return send, sorted(send)


def _new_fields(client: JiraClient, project_key: str, row: _Row) -> dict[str, Any]:
    values = row.values
    made: dict[str, Any] = {"project": {"key": project_key}, "issuetype": {"name": values["issueType"]},
                            "summary": values["summary"], "labels": [*values["labels"], row.label]}
    description = str(values.get("description") or "").strip()
    if description:
        made["description"] = client.rich(description)
    if values["priority"]:
        made["priority"] = {"name": values["priority"]}
    if values["assignee"]:
        made["assignee"] = client.user_ref(values["assignee"])
    made.update(values["fields"])
    return made


def _summed_problems(problems: list[str]) -> str:
    shown = "; ".join(problems[:PROBLEMS_SHOWN])
    more = len(problems) - PROBLEMS_SHOWN
    return shown + (f"; and {more} more" if more > 0 else "")


@action("jira.importTickets", toolbox="jira", label="Import Jira tickets",
        description="Create or update Jira issues from a CSV or JSON file of the workspace's file store (columns "
                    "externalKey, summary, description, issueType, labels, priority, assignee, other fields by name). "
                    "Idempotent: each issue carries the label ext-<externalKey>, so importing again updates only what "
                    "differs. Every row is checked first; with bad rows nothing is imported and each row's problem is "
                    "named. dryRun lists what would be created, updated or left unchanged.",
        params=ImportParams, output=ImportOutput, graph_node=True, capabilities=("read", "externalSend"),
        connection_type=TYPE_ID)
def import_tickets(params: ImportParams, context: ActionContext) -> ImportOutput:
    raw_rows, problems = _read_rows(context, params.file)
    total = len(raw_rows) + len(problems)  # the rows that could not be read are named in `problems`
    if not raw_rows and not problems:
        raise ActionError(f"file: '{params.file}' holds no rows to import")
    if len(raw_rows) > IMPORT_MAX_ROWS:
        raise ActionError(f"file: {len(raw_rows)} rows; import at most {IMPORT_MAX_ROWS} at a time")
    with _jira(context, params.connection_id) as client:
        try:
            project = client.project(params.project_key)
        except ConnectionFailed as exc:
            if isinstance(exc, ApiError):
                raise
            raise ActionError(f"projectKey: {exc}") from None
        checker = _Checker(client, project, params.issue_type)
        rows = _checked(checker, raw_rows, problems)
        field_ids = sorted({f for row in rows for f in row.values["fields"]})
        existing, ambiguous = _existing(client, params.project_key, rows, field_ids)
        problems += ambiguous
        plan = _plan(client, rows, existing)
        output = ImportOutput(dry_run=params.dry_run, file=params.file, project_key=params.project_key,
                              rows=total,
                              created=[], updated=[], unchanged=[], problems=problems)
        if params.dry_run:
            return _listed(output, plan)
        if problems:
            raise ActionError(f"nothing was imported: {len(problems)} problem{'s' if len(problems) > 1 else ''} in "
                              f"'{params.file}': {_summed_problems(problems)}")
        return _apply(client, params.project_key, plan, output)


def _checked(checker: _Checker, raw_rows: list[tuple[int, dict[str, Any]]], problems: list[str]) -> list[_Row]:
    rows: list[_Row] = []
    seen: dict[str, int] = {}
    for number, raw in raw_rows:
        row, found = checker.check(number, raw)
        problems += found
        if row is None:
            continue
        if row.external_key in seen:
            problems.append(f"row {number}: externalKey '{row.external_key}' repeats row {seen[row.external_key]}")
            continue
        seen[row.external_key] = number
        rows.append(row)
    problems += [f"column '{name}': Jira has no such field (name fields by their id or their name as Jira shows "
                 "them)" for name in checker.unknown_columns]
    problems.sort(key=lambda p: int(re.match(r"row (\d+)", p).group(1)) if re.match(r"row (\d+)", p) else 0)
    return rows


def _plan(client: JiraClient, rows: list[_Row], existing: dict[str, dict[str, Any]]
          ) -> list[tuple[_Row, dict[str, Any] | None, dict[str, Any], list[str]]]:
    """(row, its issue or None, the fields to send, their names) for every row."""
    plan = []
    for row in rows:
        issue = existing.get(row.label)
        if issue is None:
            plan.append((row, None, {}, []))
        else:
            send, names = _changes(client, row, issue)
            plan.append((row, issue, send, names))
    return plan


def _row_out(row: _Row, key: str | None, changes: list[str]) -> RowOut:
    return RowOut(row=row.number, external_key=row.external_key, key=key, summary=row.values["summary"],
                  changes=changes)


def _listed(output: ImportOutput, plan: list) -> ImportOutput:
    for row, issue, _send, names in plan:
        if issue is None:
            output.created.append(_row_out(row, None, []))
        elif names:
            output.updated.append(_row_out(row, str(issue.get("key")), names))
        else:
            output.unchanged.append(_row_out(row, str(issue.get("key")), []))
    return output


def _apply(client: JiraClient, project_key: str, plan: list, output: ImportOutput) -> ImportOutput:
    """Create and update in file order; a refusal stops the import naming the row and what was done."""
    for row, issue, send, names in plan:
        try:
            if issue is None:
                made = client.create_issue(_new_fields(client, project_key, row))
                output.created.append(_row_out(row, str(made.get("key") or ""), []))
            elif names:
                client.edit_issue(str(issue.get("key")), send)
                output.updated.append(_row_out(row, str(issue.get("key")), names))
            else:
                output.unchanged.append(_row_out(row, str(issue.get("key")), []))
        except ConnectionFailed as exc:
            done = [r.key for r in output.created + output.updated if r.key]
            raise ActionError(f"row {row.number} (externalKey '{row.external_key}'): {exc}. Done before it: "
                              f"{', '.join(done) or 'nothing'}; importing the file again continues (rows already "
                              "imported are recognised by their external key)") from None
    return output
