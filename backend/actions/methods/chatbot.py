"""Toolbox chatbot (spec §5.2): read-only SQL over a Chatbot instance's database.

`chatbot.queryDatabase` runs one SELECT: checked by backend.sqlguard against the instance's allowed
tables and row limit before anything reaches a database (a write or another table is refused,
naming why), then executed read only within the time limit. `chatbot.listTables` describes the
tables. Both work in the calling Chatbot instance, or in the one `chatbotInstanceId` names (a graph
node in the Graphical Editor), through the Chatbot's door (backend/features/chatbot/interface.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from backend.actions.base import ActionContext, ActionError, ActionParams, action
from backend.db.models import FeatureInstance
from backend.features.chatbot.interface import ChatbotInterface, QueryFailed, open_interface
from backend.features.chatbot.main import FEATURE_CODE
from backend.sqlguard import MAX_SQL_CHARS

TOOLBOX = "chatbot"
INSTANCE_HELP = "Id of the Chatbot instance whose database to query (default: the Chatbot this runs in)"


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class QueryParams(ActionParams):
    sql: str = Field(..., max_length=MAX_SQL_CHARS,
                     description="One read-only SELECT over the chatbot's tables (WITH, JOIN, GROUP BY, ORDER BY are "
                                 "fine); writes, other tables and several statements are refused")
    chatbot_instance_id: str | None = Field(None, max_length=32, description=INSTANCE_HELP)


class QueryOutput(_Output):
    sql: str = Field(description="the query as it ran (with the row limit)")
    columns: list[str]
    rows: list[list[Any]]
    row_count: int
    truncated: bool = Field(description="true when more rows existed than the row limit lets through")
    note: str | None = None


class ListParams(ActionParams):
    chatbot_instance_id: str | None = Field(None, max_length=32, description=INSTANCE_HELP)


class ColumnOut(_Output):
    name: str
    type: str


class TableOut(_Output):
    name: str
    columns: list[ColumnOut]
    row_count: int | None = None


class ListOutput(_Output):
    tables: list[TableOut]


def _door(context: ActionContext, instance_id: str | None) -> ChatbotInterface:
    """The door of the named Chatbot instance, else of the calling one (NotFound when not the caller's)."""
    if instance_id:
        return open_interface(context.access, instance_id)
    calling = context.session.get(FeatureInstance, context.feature_instance_id) if context.feature_instance_id \
        else None
    if calling is None or calling.feature_code != FEATURE_CODE:
        raise ActionError("this runs outside a Chatbot: name the Chatbot instance whose database to query "
                          "(chatbotInstanceId)")
    return open_interface(context.access, calling.id)


@action("chatbot.queryDatabase", toolbox=TOOLBOX, label="Query the database",
        description="Run one read-only SQL SELECT on the chatbot's database and get columns and rows (cut to the "
                    "chatbot's row limit). Only the chatbot's tables can be read; nothing can be changed.",
        params=QueryParams, output=QueryOutput, agent_tool=True, graph_node=True, capabilities=("read",))
def query_database(params: QueryParams, context: ActionContext) -> QueryOutput:
    door = _door(context, params.chatbot_instance_id)
    try:
        answer = door.query(params.sql)
    except QueryFailed as exc:
        raise ActionError(str(exc)) from None
    return QueryOutput.model_validate(answer, from_attributes=True)


@action("chatbot.listTables", toolbox=TOOLBOX, label="List the database's tables",
        description="List the tables the chatbot may query, with their columns and types.",
        params=ListParams, output=ListOutput, agent_tool=True, graph_node=False, capabilities=("read",))
def list_tables(params: ListParams, context: ActionContext) -> ListOutput:
    door = _door(context, params.chatbot_instance_id)
    try:
        tables = door.list_tables()
    except QueryFailed as exc:
        raise ActionError(str(exc)) from None
    return ListOutput(tables=[TableOut(name=t.name, columns=[ColumnOut(name=c, type=k) for c, k in t.columns],
                                       row_count=t.row_count) for t in tables])
