"""Request and response bodies: camelCase JSON, as DESIGN §6 fixes."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class CamelModel(BaseModel):
    """Serialises snake_case attributes as camelCase; accepts either on input."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, from_attributes=True)


class StrictCamelModel(CamelModel):
    """A request body that refuses unknown fields instead of ignoring them."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, from_attributes=True, extra="forbid",
        strict=True,  # 0 is not false, "1" is not 1: what the document says is what is accepted
    )


class LoginRequest(StrictCamelModel):
    username: str
    password: str


class LoginResponse(CamelModel):
    token: str
    user_id: str


class HealthResponse(CamelModel):
    status: str
    db: str
    version: str
    features: list[str]
    pid: int


class WorkflowCreate(StrictCamelModel):
    """A new workflow: its first draft is `graph`, or the graph of template `templateId` (not both),
    else a lone manual trigger."""

    name: str
    description: str = ""
    graph: dict[str, Any] | None = None
    template_id: str | None = None


class WorkflowPatch(StrictCamelModel):
    """Only the fields given change; `testInput: null` clears the test input; `mcpTool` switches
    "expose as MCP tool" (the published version becomes a tool at /mcp)."""

    name: str | None = None
    description: str | None = None
    active: bool | None = None
    test_input: Any = None
    mcp_tool: bool | None = None


class MailDecisions(StrictCamelModel):
    """Whether the workflow's approvals may be decided from the mail's link without signing in."""

    one_click: bool


class DraftPut(StrictCamelModel):
    """PUT …/draft. `baseVersionId` and `baseLockVersion` (both or neither) name the version the
    editor opened (WorkflowDetail.editedVersionId / editedLockVersion): 409 when it changed since."""

    graph: Any
    base_version_id: str | None = None
    base_lock_version: int | None = None


class RestoreRequest(StrictCamelModel):
    version_id: str | None = None


class VersionOut(CamelModel):
    id: str
    workflow_id: str
    version_number: int
    status: str
    graph: dict[str, Any]
    sys_created_by: str | None
    sys_created_at: datetime
    sys_modified_at: datetime
    published_at: datetime | None
    lock_version: int


class FieldErrorOut(CamelModel):
    node_id: str | None
    field: str
    message: str


class ValidationReport(CamelModel):
    valid: bool
    errors: list[FieldErrorOut]


class WorkflowOut(CamelModel):
    id: str
    mandate_id: str
    feature_instance_id: str
    name: str
    description: str
    active: bool
    event_id: str | None
    sys_created_by: str | None
    sys_created_at: datetime
    sys_modified_at: datetime
    draft_version: int | None = None
    published_version: int | None = None
    mcp_tool: bool = False
    mail_one_click: bool = False


class WorkflowDetail(WorkflowOut):
    """`graph` is the graph of `editedVersionId` (the draft, else the published version; both None
    when the workflow has neither); send editedVersionId / editedLockVersion back as the base of
    the next draft save."""

    graph: dict[str, Any]
    execution_logs: list[dict[str, Any]]
    test_input: Any = None
    edited_version_id: str | None = None
    edited_lock_version: int | None = None


class TemplateNeedOut(CamelModel):
    """One thing a template's nodes need (`id`: ai, webSearch, mail, sandbox) and whether this
    installation has it; `text` says both as the template card does."""

    id: str
    label: str
    nodes: list[str]
    built_in: bool
    available: bool
    text: str


class TemplateOut(CamelModel):
    """A workflow template. `connections`: what it needs beyond the embedded default, derived from
    its nodes ([]: runs as it is after `make run`); `needs`: everything its nodes need, each with
    whether this installation has it; `runsAsItIs`: nothing is missing here; `sampleInput`: the
    test input a workflow made from it starts with."""

    id: str
    name: str
    description: str
    category: str
    connections: list[str]
    node_count: int
    sample_input: Any = None
    needs: list[TemplateNeedOut] = []
    runs_as_it_is: bool = True


class RunStart(StrictCamelModel):
    """POST {base}/workflows/{workflowId}/runs: version defaults to the draft, else the published one."""

    input: Any = None
    version: Literal["draft", "published"] | None = None
    mode: Literal["full", "step"] = "full"


class StepOut(CamelModel):
    """One attempt of one node (DESIGN §6)."""

    id: str
    node_id: str
    node_type: str
    status: str
    attempt: int
    input: Any = None
    output: Any = None
    error: str | None = None
    stack: str | None = None
    duration_ms: int | None = None
    started_at: datetime
    finished_at: datetime | None = None
    cost_chf: float | None = None  # the attempt's AI cost in CHF; None without a priced AI call


class RunOut(CamelModel):
    """A workflow run (DESIGN §6); `steps` only in the single-run answer."""

    id: str
    workflow_id: str
    version_id: str
    status: str
    pause_reason: str | None = None
    mode: str
    trigger: str
    input: Any = None
    output: Any = None
    error: str | None = None
    sys_created_by: str | None = None
    started_at: datetime
    finished_at: datetime | None = None
    steps: list[StepOut] | None = None


class ApiTokenCreate(StrictCamelModel):
    """`instanceId` narrows the token to one feature instance you may open (REST and /mcp act only
    there); `readOnly` offers only read tools at /mcp."""

    name: str
    instance_id: str | None = None
    read_only: bool = False


class ApiTokenOut(CamelModel):
    id: str
    name: str | None
    sys_created_at: datetime
    instance_id: str | None = None
    read_only: bool = False


class ApiTokenCreated(ApiTokenOut):
    token: str


class MandateCreate(StrictCamelModel):
    name: str


class MandateOut(CamelModel):
    id: str
    name: str


class UserCreate(StrictCamelModel):
    username: str
    password: str
    roles: list[str] = []
    email: str | None = None
    display_name: str | None = None
    is_sysadmin: bool = False


class MemberPatch(StrictCamelModel):
    roles: list[str] | None = None
    disabled: bool | None = None


class PasswordReset(StrictCamelModel):
    password: str


class MemberOut(CamelModel):
    id: str
    username: str
    display_name: str | None
    email: str | None
    disabled: bool
    is_sysadmin: bool
    roles: list[str]


class InstanceCreate(StrictCamelModel):
    feature_code: str
    label: str


class InstanceOut(CamelModel):
    id: str
    mandate_id: str
    feature_code: str
    label: str


class AccessGrant(StrictCamelModel):
    user_id: str
    roles: list[str]


class AccessOut(CamelModel):
    user_id: str
    username: str
    roles: list[str]


class RuleOut(CamelModel):
    context: str
    item: str
    view: bool
    read: str
    create: str
    update: str
    delete: str


class RoleOut(CamelModel):
    id: str
    role_label: str
    feature_instance_id: str | None
    feature_code: str | None
    rules: list[RuleOut]


class DecisionOut(CamelModel):
    context: str
    item: str
    rights: dict[str, Any]
    level: str | None
    rules: list[dict[str, Any]]
    explanation: str


class TaskComplete(StrictCamelModel):
    """POST /api/tasks/{taskId}/complete: approval `{"approved": bool, "comment"?}`, form: its fields."""

    data: Any = None


class TaskCancel(StrictCamelModel):
    """POST /api/tasks/{taskId}/cancel (body optional): why the task is withdrawn."""

    reason: str | None = Field(default=None, max_length=1000)


class TaskOut(CamelModel):
    """A human task of an input.approval or input.form node (run_id), or an agent's request to
    approve a tool call (agent_run_id; node_id is the tool call's id, data names the tool, its
    arguments and the agent's reason)."""

    id: str
    run_id: str | None = None
    agent_run_id: str | None = None
    node_id: str
    mandate_id: str
    feature_instance_id: str
    kind: str
    title: str
    message: str | None = None
    fields: Any = None
    assignee: Any = None
    status: str
    data: Any = None
    due_at: datetime | None = None
    on_timeout: str | None = None
    completed_by: str | None = None
    decided_via: str | None = None
    sys_created_at: datetime
    finished_at: datetime | None = None


class TaskResult(CamelModel):
    """The task after the change, and its run's state after resuming or cancelling (none for an
    agent's approval: its agent run goes on in the background)."""

    task: TaskOut
    run: RunOut | None = None


class RunHistoryItem(CamelModel):
    """One run in a workflow's history: no input, output or context, the error without its stack."""

    id: str
    workflow_id: str
    version_id: str
    status: str
    pause_reason: str | None = None
    mode: str
    trigger: str
    error: str | None = None
    sys_created_by: str | None = None
    started_at: datetime
    finished_at: datetime | None = None
    duration_ms: int | None = None


class RunHistoryPage(CamelModel):
    """A page of a workflow's runs, newest first; `next_before` fetches the next (older) page."""

    items: list[RunHistoryItem]
    next_before: str | None = None


class RunSummaryOut(CamelModel):
    """The monitor's figures of one workflow: counts over the last `days` days, last run and failure."""

    workflow_id: str
    days: int
    since: datetime
    total: int
    by_status: dict[str, int]
    by_trigger: dict[str, int]
    last_run: RunHistoryItem | None = None
    last_failure: RunHistoryItem | None = None
    average_duration_ms: int | None = None


class NotificationOut(CamelModel):
    id: str
    kind: str
    title: str
    message: str
    mandate_id: str | None = None
    workflow_id: str | None = None
    run_id: str | None = None
    read_at: datetime | None = None
    created_at: datetime


class UnreadCount(CamelModel):
    unread: int


class ReadAllResult(CamelModel):
    marked: int
    unread: int


# --- monitoring dashboard (issue 10) -----------------------------------------------------------


class MonitorRunOut(CamelModel):
    """A run as the monitor lists it: no input, output or context; the error without its stack."""

    id: str
    workflow_id: str
    workflow_name: str
    instance_id: str
    instance_label: str
    status: str
    pause_reason: str | None = None
    trigger: str | None = None
    started_at: datetime
    finished_at: datetime | None = None
    duration_ms: int | None = None
    error: str | None = None
    cost_chf: float = 0.0
    test: bool = False  # a test run: of a draft (or a retry of one)


class MonitorRunPage(CamelModel):
    """A page of runs, newest first; `next_before` fetches the next (older) page."""

    items: list[MonitorRunOut]
    next_before: str | None = None


class MonitorUpcomingOut(CamelModel):
    workflow_id: str
    workflow_name: str
    instance_label: str
    next_run: datetime
    schedule: str
    registered: bool


class MonitorDayOut(CamelModel):
    day: date
    total: int
    completed: int
    failed: int
    cancelled: int
    error_rate: float


class MonitorCostOut(CamelModel):
    key: str
    label: str
    cost_chf: float
    runs: int


class MonitorCostsOut(CamelModel):
    by_workflow: list[MonitorCostOut]
    by_day: list[MonitorCostOut]
    total_chf: float


class MonitorOverview(CamelModel):
    """The dashboard at a glance: live runs, upcoming schedules, daily figures, costs, failures."""

    live: list[MonitorRunOut]
    upcoming: list[MonitorUpcomingOut]
    daily: list[MonitorDayOut]
    costs: MonitorCostsOut
    recent_failures: list[MonitorRunOut]


# --- connections (DESIGN §8) -------------------------------------------------------------------


class ConnectionTypeOut(CamelModel):
    """A connection type: `settingsSchema` is what POST /api/connections takes for password types
    (None: made by consent, GET /api/connections/oauth/{type}/start); `unavailable` says why this
    installation cannot make one (None: it can)."""

    id: str
    label: str
    description: str
    auth: Literal["password", "oauth"]
    settings_schema: dict[str, Any] | None
    unavailable: str | None
    consent: bool = Field(False, description="Also (or only) made by consent at the provider "
                                             "(GET /api/connections/oauth/{type}/start), available here")


class ConnectionOut(CamelModel):
    """A connection as its users see it; its credentials are never returned."""

    id: str
    type: str
    type_label: str
    label: str
    status: Literal["active", "expired", "error", "revoked"]
    mandate_id: str
    mandate_name: str
    shared: bool
    last_error: str | None
    owner_id: str
    owner_name: str
    mine: bool
    settings: dict[str, Any]
    created_at: datetime
    may_share: bool
    may_delete: bool


class ConnectionCreate(StrictCamelModel):
    """A connection of a password type (e.g. imap); it is tested before it is stored."""

    type: str
    label: str
    mandate_id: str | None = None
    settings: dict[str, Any]


class ConnectionPatch(StrictCamelModel):
    """Rename (the owner) or share / stop sharing (who may share in its mandate)."""

    label: str | None = None
    shared: bool | None = None


class ConnectionTestOut(CamelModel):
    ok: bool
    message: str
    status: Literal["active", "expired", "error", "revoked"]


class OAuthTicketCreate(StrictCamelModel):
    """A consent to start in the browser: a new connection (in `mandateId`, default the caller's
    only mandate or Default, named `label`, default the type and the account) or the renewal of
    the caller's connection `connectionId`."""

    mandate_id: str | None = Field(None, max_length=32)
    label: str | None = Field(None, max_length=200)
    connection_id: str | None = Field(None, max_length=32)


class OAuthTicketOut(CamelModel):
    """A one-time start of a consent: send the browser to `url` (it holds `ticket`) before
    `expiresAt`; the ticket works once."""

    ticket: str
    url: str
    expires_at: datetime
