"""Persistent data model (plain SQLModel; Alembic owns the schema).

Attribute names are snake_case; the REST layer turns them into the spec's camelCase names.
Every object that goes through a state machine carries `lock_version`: a transition only
wins when nobody else wrote the row since it was read (see `backend.statemachines.base`).
Times are timezone-aware UTC.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Index,
    LargeBinary,
    Text,
    UniqueConstraint,
    event,
    inspect,
    text,
)
from sqlmodel import Field, SQLModel

EXECUTION_LOG_LIMIT = 50


def utcnow() -> datetime:
    """Current time, timezone-aware UTC (SQLModel's UTCDateTime stores and returns that)."""
    return datetime.now(UTC)


def new_id() -> str:
    """A fresh object id (32 hex characters)."""
    return uuid.uuid4().hex


def _json_column(nullable: bool = True) -> Any:
    return Field(default=None, sa_column=Column(JSON, nullable=nullable))


# --- identity and tenancy (the RBAC issue completes these) -------------------------------


class User(SQLModel, table=True):
    """A person or service account that signs in."""

    __tablename__ = "user_account"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    username: str = Field(max_length=150, unique=True, index=True)
    email: str | None = Field(default=None, max_length=320)
    display_name: str | None = Field(default=None, max_length=200)
    password_hash: str | None = Field(default=None, max_length=255)
    is_sysadmin: bool = False
    disabled: bool = False
    sys_created_at: datetime = Field(default_factory=utcnow)
    # The feature instance this user worked in last, per feature code ({"graphicalEditor": "<id>"}):
    # a new session opens it again (never silently another one).
    recent_instances: dict[str, str] | None = _json_column()


class Mandate(SQLModel, table=True):
    """A tenant: owns feature instances, roles and all data created in them."""

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    name: str = Field(max_length=200, unique=True)
    sys_created_at: datetime = Field(default_factory=utcnow)


class FeatureInstance(SQLModel, table=True):
    """One configured instance of a feature (e.g. a Graphical Editor) in a mandate."""

    __tablename__ = "feature_instance"
    __table_args__ = (UniqueConstraint("mandate_id", "label", name="uq_feature_instance_label"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    feature_code: str = Field(max_length=64, index=True)
    label: str = Field(max_length=200)
    # The instance's own configuration, as its feature defines it (a Chatbot's prompt and data source).
    settings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, server_default="{}"))
    sys_created_at: datetime = Field(default_factory=utcnow)


class Feature(SQLModel, table=True):
    """The global feature catalogue, synced from backend/features at start-up."""

    code: str = Field(primary_key=True, max_length=64)
    label: str = Field(max_length=200)
    icon: str = Field(default="box", max_length=64)


class Role(SQLModel, table=True):
    """A role: system or feature template (no mandate) or a mandate's / instance's copy."""

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    role_label: str = Field(max_length=100)
    is_system_role: bool = False
    mandate_id: str | None = Field(default=None, foreign_key="mandate.id", index=True, max_length=32)
    feature_instance_id: str | None = Field(
        default=None, foreign_key="feature_instance.id", index=True, max_length=32
    )
    feature_code: str | None = Field(default=None, max_length=64)


class AccessRule(SQLModel, table=True):
    """What a role may do with one item (or a prefix of items, or everything) in one context.

    `view` answers UI and RESOURCE checks; read/create/update/delete (none | own | all)
    answer DATA checks, `own` meaning rows the user created (sysCreatedBy).
    """

    __tablename__ = "access_rule"
    __table_args__ = (UniqueConstraint("role_id", "context", "item", name="uq_access_rule_item"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    role_id: str = Field(foreign_key="role.id", index=True, max_length=32)
    context: str = Field(max_length=16)
    item: str = Field(default="*", max_length=300)
    view: bool = False
    read: str = Field(default="none", max_length=8)
    create: str = Field(default="none", max_length=8)
    update: str = Field(default="none", max_length=8)
    delete: str = Field(default="none", max_length=8)


class UserMandate(SQLModel, table=True):
    """Membership of a user in a mandate."""

    __tablename__ = "user_mandate"
    __table_args__ = (UniqueConstraint("user_id", "mandate_id", name="uq_user_mandate"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    user_id: str = Field(foreign_key="user_account.id", index=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)


class UserMandateRole(SQLModel, table=True):
    """A mandate role held through a membership."""

    __tablename__ = "user_mandate_role"
    __table_args__ = (UniqueConstraint("user_mandate_id", "role_id", name="uq_user_mandate_role"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    user_mandate_id: str = Field(foreign_key="user_mandate.id", index=True, max_length=32)
    role_id: str = Field(foreign_key="role.id", max_length=32)


class FeatureAccess(SQLModel, table=True):
    """Access of a user to one feature instance."""

    __tablename__ = "feature_access"
    __table_args__ = (
        UniqueConstraint("user_id", "feature_instance_id", name="uq_feature_access"),
    )

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    user_id: str = Field(foreign_key="user_account.id", index=True, max_length=32)
    feature_instance_id: str = Field(foreign_key="feature_instance.id", index=True, max_length=32)


class FeatureAccessRole(SQLModel, table=True):
    """An instance role held through a feature access."""

    __tablename__ = "feature_access_role"
    __table_args__ = (
        UniqueConstraint("feature_access_id", "role_id", name="uq_feature_access_role"),
    )

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    feature_access_id: str = Field(foreign_key="feature_access.id", index=True, max_length=32)
    role_id: str = Field(foreign_key="role.id", max_length=32)


class AuthToken(SQLModel, table=True):
    """A bearer token: a login token with expiry, or a named personal API token."""

    __tablename__ = "auth_token"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    token_hash: str = Field(max_length=64, unique=True, index=True)
    user_id: str = Field(foreign_key="user_account.id", index=True, max_length=32)
    kind: str = Field(default="login", max_length=16)
    name: str | None = Field(default=None, max_length=200)
    expires_at: datetime | None = None
    revoked: bool = False
    # A personal API token may be narrowed: to one feature instance (REST and /mcp act only there)
    # and to read-only tools (MCP offers only actions whose capabilities are all `read`).
    instance_id: str | None = Field(default=None, max_length=32)
    read_only: bool = False
    sys_created_at: datetime = Field(default_factory=utcnow)


class LoginFailure(SQLModel, table=True):
    """Recent failed logins, for throttling across worker processes (see `backend.auth`).

    One row per (username, client address) and one per client address alone (username "").
    """

    __tablename__ = "login_failure"

    username: str = Field(primary_key=True, max_length=150)
    client_address: str = Field(primary_key=True, max_length=64)
    failures: int = 0
    last_failure_at: datetime = Field(default_factory=utcnow, index=True)


# --- workflows -----------------------------------------------------------------------------


class Workflow(SQLModel, table=True):
    """An automation in a Graphical Editor instance; its graphs live in versions."""

    __table_args__ = (
        UniqueConstraint("feature_instance_id", "name", name="uq_workflow_name"),
    )

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    feature_instance_id: str = Field(foreign_key="feature_instance.id", index=True, max_length=32)
    name: str = Field(max_length=200)
    description: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    active: bool = False
    event_id: str | None = Field(default=None, max_length=200)
    execution_logs: list[dict[str, Any]] = Field(
        default_factory=list, sa_column=Column(JSON, nullable=False)
    )
    # The editor's test input (the JSON a Test run gives its trigger as `input`); a template's
    # sampleInput to begin with. None: none set.
    test_input: Any = _json_column()
    # "Expose as MCP tool": the published version is offered as a tool at /mcp (issue 19).
    mcp_tool: bool = False
    # A mandate admin allows deciding this workflow's tasks from the mail's link without signing in.
    mail_one_click: bool = False
    sys_created_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    sys_created_at: datetime = Field(default_factory=utcnow)
    sys_modified_at: datetime = Field(default_factory=utcnow)
    lock_version: int = 1

    def append_execution_log(self, entry: dict[str, Any]) -> None:
        """Add an audit entry, keeping only the newest EXECUTION_LOG_LIMIT."""
        self.execution_logs = [*(self.execution_logs or []), entry][-EXECUTION_LOG_LIMIT:]


class WorkflowVersion(SQLModel, table=True):
    """A numbered graph of a workflow: draft, published (immutable) or archived."""

    __tablename__ = "workflow_version"
    __table_args__ = (
        UniqueConstraint("workflow_id", "version_number", name="uq_workflow_version_number"),
        # At most one draft and one published version per workflow, enforced by the database.
        Index(
            "uq_workflow_one_draft",
            "workflow_id",
            unique=True,
            sqlite_where=text("status = 'draft'"),
            postgresql_where=text("status = 'draft'"),
        ),
        Index(
            "uq_workflow_one_published",
            "workflow_id",
            unique=True,
            sqlite_where=text("status = 'published'"),
            postgresql_where=text("status = 'published'"),
        ),
    )

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    workflow_id: str = Field(foreign_key="workflow.id", index=True, max_length=32)
    version_number: int
    status: str = Field(default="draft", max_length=16)
    graph: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    sys_created_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    sys_created_at: datetime = Field(default_factory=utcnow)
    sys_modified_at: datetime = Field(default_factory=utcnow)
    sys_modified_by: str | None = Field(default=None, max_length=32)  # who saved the draft last (a user id)
    published_at: datetime | None = None
    lock_version: int = 1


class WorkflowGraphSnapshot(SQLModel, table=True):
    """A graph exactly as runs of a workflow started with it, stored once per distinct content.

    The id is the SHA-256 of the workflow id and the graph's canonical JSON
    (backend.engine.executor.store_graph), so every run of unchanged content shares one row, a row
    never changes, and no row is shared between workflows (deleting a workflow deletes its own).
    Kept out of the workflow_run row on purpose: a run's context is rewritten after every step,
    and SQLite rewrites the whole row each time.
    """

    __tablename__ = "workflow_graph_snapshot"

    id: str = Field(primary_key=True, max_length=64)
    workflow_id: str = Field(foreign_key="workflow.id", index=True, max_length=32)
    graph: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    sys_created_at: datetime = Field(default_factory=utcnow)


class WorkflowRun(SQLModel, table=True):
    """One execution of a workflow version."""

    __tablename__ = "workflow_run"
    __table_args__ = (
        # The monitor: runs of some instances newest first, and their counts and costs per day
        # (covering: those read the index alone), and runs of one status by time.
        Index("ix_workflow_run_instance_started", "feature_instance_id", "started_at", "status", "workflow_id",
              "cost_chf", "test"),
        Index("ix_workflow_run_status_started", "status", "started_at"),
        Index("ix_workflow_run_workflow_started", "workflow_id", "started_at"),
    )

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    workflow_id: str = Field(foreign_key="workflow.id", index=True, max_length=32)
    version_id: str = Field(foreign_key="workflow_version.id", max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    feature_instance_id: str = Field(foreign_key="feature_instance.id", index=True, max_length=32)
    status: str = Field(default="running", max_length=16, index=True)
    pause_reason: str | None = Field(default=None, max_length=16)
    mode: str = Field(default="full", max_length=8)
    trigger: str = Field(default="manual", max_length=32)
    input: Any = _json_column()
    output: Any = _json_column()
    error: str | None = Field(default=None, sa_column=Column(Text))
    context: Any = _json_column()
    sys_created_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    lock_version: int = 1
    # The sum of its steps' cost_chf, kept by engine.steps.write_steps (None: no priced AI call yet).
    cost_chf: float | None = None
    # The graph the run executes (a WorkflowGraphSnapshot id): its version's graph as it was when
    # the run started, so a later save of the draft never changes a run under way (None: a run
    # from before migration 0009, which reads its version's graph).
    graph_id: str | None = Field(default=None, max_length=64)
    # The failed run this one retries from its failed node (backend/engine/recovery.py), if any.
    retry_of: str | None = Field(default=None, max_length=32, index=True)
    # A test run: one of a draft (the editor's Test run, step mode, REST runs of the draft) and its
    # retries. The Monitor shows production runs unless asked for test runs.
    test: bool = Field(default=False, sa_column_kwargs={"server_default": text("false")})
    # The execution that may write the run's steps now (a token each RunEngine.execute claims as it
    # starts): an execution superseded by a later one (its worker was taken for dead and the run
    # continued elsewhere) finds its next step refused and stops without writing it.
    execution: str | None = Field(default=None, max_length=32)


class RunStepLog(SQLModel, table=True):
    """The trace of one node execution (one row per attempt).

    status: running → completed | failed, or running → waiting (a suspended node: human task,
    mail, flow.wait) → completed when resumed | cancelled when its run is cancelled first.
    """

    __tablename__ = "run_step_log"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    run_id: str = Field(foreign_key="workflow_run.id", index=True, max_length=32)
    node_id: str = Field(max_length=200)
    node_type: str = Field(max_length=200)
    status: str = Field(default="running", max_length=16)
    attempt: int = 1
    input: Any = _json_column()
    output: Any = _json_column()
    error: str | None = Field(default=None, sa_column=Column(Text))
    duration_ms: int | None = None
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    cost_chf: float | None = None  # what the attempt's AI calls cost (None: no priced call)


class HumanTask(SQLModel, table=True):
    """A step that waits for a person: a form to fill or an approval to give."""

    __tablename__ = "human_task"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    # A task of a workflow run (run_id, node_id = the waiting node) or an agent run's approval of a
    # consequential tool call (agent_run_id, node_id = the tool call's id; issue 21).
    run_id: str | None = Field(default=None, foreign_key="workflow_run.id", index=True, max_length=32)
    agent_run_id: str | None = Field(default=None, foreign_key="agent_run.id", index=True, max_length=32)
    node_id: str = Field(max_length=200)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    feature_instance_id: str = Field(foreign_key="feature_instance.id", index=True, max_length=32)
    kind: str = Field(default="approval", max_length=16)
    title: str = Field(default="", max_length=500)
    message: str | None = Field(default=None, sa_column=Column(Text))
    fields: Any = _json_column()
    assignee: Any = _json_column()
    status: str = Field(default="pending", max_length=16, index=True)
    data: Any = _json_column()
    due_at: datetime | None = None
    on_timeout: str | None = Field(default=None, max_length=16)
    completed_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    # How the answer came (issue 23): "app" (Inbox, REST) or "mail" (a link of the task's mail).
    decided_via: str | None = Field(default=None, max_length=16)
    # When the reminder before `due_at` was sent (once per task).
    reminded_at: datetime | None = None
    sys_created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    lock_version: int = 1


class TaskLink(SQLModel, table=True):
    """The link of a task's mail to one recipient (issue 23): only the SHA-256 of its token is kept;
    it decides once (`used_at`), until `expires_at`, for that task only."""

    __tablename__ = "task_link"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    token_hash: str = Field(max_length=64, unique=True, index=True)
    task_id: str = Field(foreign_key="human_task.id", index=True, max_length=32)
    user_id: str = Field(foreign_key="user_account.id", index=True, max_length=32)
    expires_at: datetime
    used_at: datetime | None = None
    sys_created_at: datetime = Field(default_factory=utcnow)


class ImmutableVersionError(Exception):
    """Raised when code tries to change the graph of a version that is not a draft."""


@event.listens_for(WorkflowVersion, "before_update")
def _freeze_non_draft_graph(_mapper, _connection, target: WorkflowVersion) -> None:
    # The last line of defence: services edit drafts only, but no code path may alter a
    # published or archived graph, which scheduled runs rely on.
    if target.status != "draft" and inspect(target).attrs.graph.history.has_changes():
        raise ImmutableVersionError(
            f"WorkflowVersion {target.id} is '{target.status}': its graph cannot change; "
            "edit the draft instead"
        )


# --- single sign-on (OpenID Connect) -------------------------------------------------------


class OidcLogin(SQLModel, table=True):
    """A sign-in started at the OpenID Connect provider and not finished yet (single use).

    Only the SHA-256 digest of `state` is stored; nonce and PKCE verifier are needed in clear
    to check the provider's answer. Rows live ten minutes.
    """

    __tablename__ = "oidc_login"

    state_hash: str = Field(primary_key=True, max_length=64)
    nonce: str = Field(max_length=128)
    code_verifier: str = Field(max_length=128)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime = Field(index=True)


class SsoExchange(SQLModel, table=True):
    """A one-time code (stored as SHA-256 digest) that the UI trades for a login token."""

    __tablename__ = "sso_exchange"

    code_hash: str = Field(primary_key=True, max_length=64)
    user_id: str = Field(foreign_key="user_account.id", index=True, max_length=32)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime = Field(index=True)


# --- file store (one per feature instance) -------------------------------------------------


class FileFolder(SQLModel, table=True):
    """A folder in the file store of one feature instance; names are unique within a parent.

    `parent_id` None means the folder sits at the root. The partial index makes root names
    unique too (a plain unique constraint treats NULL parents as all different).
    """

    __tablename__ = "file_folder"
    __table_args__ = (
        UniqueConstraint("feature_instance_id", "parent_id", "name", name="uq_file_folder_name"),
        Index(
            "uq_file_folder_root_name",
            "feature_instance_id",
            "name",
            unique=True,
            sqlite_where=text("parent_id IS NULL"),
            postgresql_where=text("parent_id IS NULL"),
        ),
    )

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    feature_instance_id: str = Field(foreign_key="feature_instance.id", index=True, max_length=32)
    parent_id: str | None = Field(default=None, foreign_key="file_folder.id", index=True, max_length=32)
    name: str = Field(max_length=255)
    sys_created_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    sys_created_at: datetime = Field(default_factory=utcnow)
    sys_modified_at: datetime = Field(default_factory=utcnow)


class StoredFile(SQLModel, table=True):
    """A file in the file store of one feature instance (metadata; bytes in StoredFileData)."""

    __tablename__ = "stored_file"
    __table_args__ = (
        UniqueConstraint("feature_instance_id", "folder_id", "name", name="uq_stored_file_name"),
        Index(
            "uq_stored_file_root_name",
            "feature_instance_id",
            "name",
            unique=True,
            sqlite_where=text("folder_id IS NULL"),
            postgresql_where=text("folder_id IS NULL"),
        ),
    )

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    feature_instance_id: str = Field(foreign_key="feature_instance.id", index=True, max_length=32)
    folder_id: str | None = Field(default=None, foreign_key="file_folder.id", index=True, max_length=32)
    name: str = Field(max_length=255)
    mime_type: str = Field(default="application/octet-stream", max_length=255)
    size_bytes: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    sha256: str = Field(max_length=64)
    has_text: bool = False
    sys_created_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    sys_created_at: datetime = Field(default_factory=utcnow)
    sys_modified_at: datetime = Field(default_factory=utcnow)


class StoredFileData(SQLModel, table=True):
    """The bytes of a stored file and the text extracted from them for full-text search.

    Kept apart from StoredFile so that listings never load contents. The search index
    follows `text_content` (NULL for binary files, which are not indexed): an FTS5 table kept
    by triggers on SQLite, a generated tsvector column with a GIN index on PostgreSQL — both
    created by migration 0004_files, outside this model.
    """

    __tablename__ = "stored_file_data"

    file_id: str = Field(foreign_key="stored_file.id", primary_key=True, max_length=32, ondelete="CASCADE")
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    text_content: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


# --- AI agent (issue 6) ----------------------------------------------------------------------


class AgentChat(SQLModel, table=True):
    """A conversation with the agent of one feature instance; its runs are its turns."""

    __tablename__ = "agent_chat"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    feature_instance_id: str = Field(foreign_key="feature_instance.id", index=True, max_length=32)
    title: str = Field(default="", max_length=200)
    # What the conversation came to, saved by features that keep one (a Coach's session summary).
    summary: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    sys_created_by: str = Field(foreign_key="user_account.id", index=True, max_length=32)
    sys_created_at: datetime = Field(default_factory=utcnow)
    sys_modified_at: datetime = Field(default_factory=utcnow)


class AgentRun(SQLModel, table=True):
    """One agent run (a user prompt answered in rounds of model calls and tool calls), or a
    sub-agent run (parent_run_id set). status follows the agent run state machine (DESIGN §5)."""

    __tablename__ = "agent_run"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    chat_id: str | None = Field(default=None, foreign_key="agent_chat.id", index=True, max_length=32)
    parent_run_id: str | None = Field(default=None, foreign_key="agent_run.id", index=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    feature_instance_id: str = Field(foreign_key="feature_instance.id", index=True, max_length=32)
    profile: str = Field(max_length=64)
    prompt: str = Field(sa_column=Column(Text, nullable=False))
    status: str = Field(default="idle", max_length=32, index=True)
    answer: str | None = Field(default=None, sa_column=Column(Text))
    error: str | None = Field(default=None, sa_column=Column(Text))
    config: Any = _json_column()
    toolboxes: Any = _json_column()
    # While waiting_approval: what the run continues from (messages, the calls of the batch still
    # to run, budget counters); cleared when it goes on (backend/agent/approvals.py).
    resume_state: Any = _json_column()
    rounds: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_chf: float | None = None
    sys_created_by: str = Field(foreign_key="user_account.id", index=True, max_length=32)
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    lock_version: int = 1


class AgentStep(SQLModel, table=True):
    """One entry of an agent run's trace: a model round (tools offered, tokens, cost), a tool
    call (arguments, result), a toolbox escalation, a sub-agent call, a guard intervention."""

    __tablename__ = "agent_step"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    run_id: str = Field(foreign_key="agent_run.id", index=True, max_length=32)
    seq: int
    round: int
    kind: str = Field(max_length=32)
    name: str | None = Field(default=None, max_length=200)
    call_id: str | None = Field(default=None, max_length=200)
    arguments: Any = _json_column()
    result: str | None = Field(default=None, sa_column=Column(Text))
    ok: bool | None = None
    detail: Any = _json_column()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_chf: float | None = None
    duration_ms: int | None = None
    created_at: datetime = Field(default_factory=utcnow)


class AgentApprovalPolicy(SQLModel, table=True):
    """Which consequences of tool calls need a person's approval in agent runs of one profile in
    one mandate (issue 21); without a row the profile's default holds."""

    __tablename__ = "agent_approval_policy"
    __table_args__ = (UniqueConstraint("mandate_id", "profile", name="uq_agent_approval_policy"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    profile: str = Field(max_length=64)
    consequences: Any = _json_column(nullable=False)
    sys_modified_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    sys_modified_at: datetime = Field(default_factory=utcnow)


# --- scheduler, webhooks, notifications (issue 7) -----------------------------------------------


class SchedulerLease(SQLModel, table=True):
    """Who runs the scheduler: one row per lease name, held by one process until it expires.

    The holder renews it well before `expires_at`; another process takes it over only once it
    has expired (a guarded UPDATE), so exactly one scheduler acts on a shared database.
    """

    __tablename__ = "scheduler_lease"

    name: str = Field(primary_key=True, max_length=64)
    holder: str = Field(max_length=200)
    expires_at: datetime
    renewed_at: datetime = Field(default_factory=utcnow)


class WebhookDelivery(SQLModel, table=True):
    """A received webhook call, by its `webhook-id`: a repeated id is answered as before and
    starts nothing new (Standard Webhooks)."""

    __tablename__ = "webhook_delivery"
    __table_args__ = (UniqueConstraint("workflow_id", "webhook_id", name="uq_webhook_delivery"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    workflow_id: str = Field(foreign_key="workflow.id", index=True, max_length=32)
    webhook_id: str = Field(max_length=200)
    run_id: str | None = Field(default=None, foreign_key="workflow_run.id", max_length=32)
    received_at: datetime = Field(default_factory=utcnow, index=True)
    # The path and method it was called on (None: received before migration 0012): the accepted
    # calls of the editor's webhook help are these rows, the refused ones WebhookCall's.
    path: str | None = Field(default=None, max_length=200)
    method: str | None = Field(default=None, max_length=8)


class WebhookCall(SQLModel, table=True):
    """One call received on a workflow's webhook path that started no run (refused, or a repeated
    webhook-id), with the answer it got: the editor's webhook help shows the last ones beside the
    accepted calls (WebhookDelivery). backend/triggers/webhooks.py keeps WEBHOOK_CALLS_KEPT per
    workflow; calls to unknown workflows are not recorded."""

    __tablename__ = "webhook_call"
    __table_args__ = (Index("ix_webhook_call_workflow_received", "workflow_id", "received_at"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    workflow_id: str = Field(foreign_key="workflow.id", max_length=32)
    path: str = Field(default="", max_length=200)
    method: str = Field(default="POST", max_length=8)
    status_code: int = 0
    message: str = Field(default="", max_length=500)
    run_id: str | None = Field(default=None, max_length=32)
    received_at: datetime = Field(default_factory=utcnow)


class Notification(SQLModel, table=True):
    """Something a user should know (e.g. a scheduled run failed), shown in the app's shell."""

    __tablename__ = "notification"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    user_id: str = Field(foreign_key="user_account.id", index=True, max_length=32)
    mandate_id: str | None = Field(default=None, foreign_key="mandate.id", max_length=32)
    kind: str = Field(max_length=64)
    title: str = Field(max_length=300)
    message: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    workflow_id: str | None = Field(default=None, max_length=32)
    run_id: str | None = Field(default=None, max_length=32)
    task_id: str | None = Field(default=None, max_length=32)
    read_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow, index=True)


class NotificationSetting(SQLModel, table=True):
    """A user's choice for one event on one channel (issue 23); without a row the default holds."""

    __tablename__ = "notification_setting"
    __table_args__ = (UniqueConstraint("user_id", "event", "channel", name="uq_notification_setting"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    user_id: str = Field(foreign_key="user_account.id", index=True, max_length=32)
    event: str = Field(max_length=64)
    channel: str = Field(max_length=16)
    enabled: bool = True


class PushSubscription(SQLModel, table=True):
    """A browser's Web Push subscription of one user (issue 23): where to push and its keys."""

    __tablename__ = "push_subscription"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    user_id: str = Field(foreign_key="user_account.id", index=True, max_length=32)
    endpoint: str = Field(sa_column=Column(Text, nullable=False))
    endpoint_hash: str = Field(max_length=64, unique=True, index=True)
    p256dh: str = Field(max_length=200)
    auth: str = Field(max_length=100)
    user_agent: str = Field(default="", max_length=300)
    last_error: str | None = Field(default=None, max_length=500)
    sys_created_at: datetime = Field(default_factory=utcnow)


class PlatformSecret(SQLModel, table=True):
    """A secret the platform generates once for itself (the Web Push VAPID key), sealed."""

    __tablename__ = "platform_secret"

    name: str = Field(primary_key=True, max_length=64)
    value: str = Field(sa_column=Column(Text, nullable=False))
    sys_created_at: datetime = Field(default_factory=utcnow)


# --- connections to outside systems (spec §3.1; DESIGN §8) ------------------------------------


class Connection(SQLModel, table=True):
    """An outside account a user connected in a mandate (Microsoft 365, a mailbox …).

    `settings` holds what may be shown (host, username, the account's address); `secret` the
    credentials (password, OAuth tokens) as one sealed JSON text (backend/crypto.py), never
    returned. `status` follows backend/statemachines/connection.py; `last_error` says why it is
    not active. A connection is its owner's; `shared` lends it to every member of the mandate.
    """

    __tablename__ = "connection"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    owner_id: str = Field(foreign_key="user_account.id", index=True, max_length=32)
    type: str = Field(max_length=32)
    label: str = Field(max_length=200)
    status: str = Field(default="active", max_length=16)
    last_error: str | None = Field(default=None, sa_column=Column(Text))
    shared: bool = False
    settings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    secret: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    # When the stored access token stops working (OAuth types); None: it does not expire.
    expires_at: datetime | None = None
    sys_created_at: datetime = Field(default_factory=utcnow)
    sys_modified_at: datetime = Field(default_factory=utcnow)
    lock_version: int = 1


class RemoteWebhook(SQLModel, table=True):
    """A webhook registered at an outside system (ClickUp, Jira …) for a trigger node of a
    workflow's published version (backend/triggers/remote.py): deliveries arrive at
    `/api/hooks/remote/{token}`; `secret` (sealed, never returned) verifies their signature.
    `fingerprint` identifies what was registered (type, connection, events, filters), so a new
    publication keeps a registration that did not change."""

    __tablename__ = "remote_webhook"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    token: str = Field(max_length=64, unique=True)
    workflow_id: str = Field(foreign_key="workflow.id", index=True, max_length=32)
    node_id: str = Field(max_length=100)
    type: str = Field(max_length=32)
    connection_id: str = Field(max_length=32)
    remote_id: str = Field(max_length=300)
    secret: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    fingerprint: str = Field(max_length=64)
    events: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    last_delivery_at: datetime | None = None


class McpServer(SQLModel, table=True):
    """An external MCP server a mandate admin registered (issue 19); a toolbox `mcp:<name>`.

    `url` is its Streamable HTTP endpoint. `secret` holds the credentials as one sealed JSON text
    (backend/crypto.py), never returned: `{"headers": {...}}` and/or `{"oauth": {"tokenUrl",
    "clientId", "clientSecret", "scope"}}` (OAuth 2.0 client credentials). `tools` is the tool list
    as the server last answered it (listed at registration, refreshed on demand): a list of
    `{name, description, inputSchema, annotations?}`. `roles` names the mandate roles that may use it
    (written as RESOURCE rules on `resource.toolbox.mcp:<name>.*`).
    """

    __tablename__ = "mcp_server"
    __table_args__ = (UniqueConstraint("mandate_id", "name", name="uq_mcp_server_name"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    name: str = Field(max_length=40)
    url: str = Field(max_length=2000)
    description: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    auth_kind: str = Field(default="none", max_length=16)
    secret: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    tools: Any = _json_column()
    tools_refreshed_at: datetime | None = None
    status: str = Field(default="active", max_length=16)
    last_error: str | None = Field(default=None, sa_column=Column(Text))
    sys_created_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    sys_created_at: datetime = Field(default_factory=utcnow)
    sys_modified_at: datetime = Field(default_factory=utcnow)
    lock_version: int = 1


class ConnectionOAuthState(SQLModel, table=True):
    """An OAuth consent started by a user and not finished yet (single use, ten minutes).

    Only the SHA-256 digest of the `state` parameter is stored, and that of the browser cookie
    the start set (the callback must come from the same browser); the PKCE verifier is sealed.
    """

    __tablename__ = "connection_oauth_state"

    state_hash: str = Field(primary_key=True, max_length=64)
    browser_hash: str = Field(default="", max_length=64)
    user_id: str = Field(foreign_key="user_account.id", index=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", max_length=32)
    type: str = Field(max_length=32)
    label: str = Field(max_length=200)
    # Re-consent of an existing (expired) connection, else a new one.
    connection_id: str | None = Field(default=None, max_length=32)
    code_verifier: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime = Field(index=True)

