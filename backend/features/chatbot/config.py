"""A Chatbot instance's configuration, kept in `feature_instance.settings` (migration 0019).

Stored as camelCase JSON: `systemPrompt`, `dataSource` ("tables" | "connection"), `connectionId`,
`allowedTables`, `rowLimit`, `timeLimitSeconds`, plus what the platform records itself:
`configuredBy` (whose `sql` connection the instance uses) and `embed` (`tokenHash`, `enabledBy`,
`enabledAt`) for the public embed. The embed token itself is never stored, only its SHA-256.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from backend.errors import FieldError, InvalidInput

DEFAULT_ROW_LIMIT = 200
MAX_ROW_LIMIT = 1000
DEFAULT_TIME_LIMIT = 5.0
MAX_TIME_LIMIT = 60.0
PROMPT_CHARS = 20_000
MAX_ALLOWED_TABLES = 100
TABLES_FOLDER = "/tables"
TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}(\.[A-Za-z_][A-Za-z0-9_$]{0,62})?$")
CONFIGURED_BY = "configuredBy"
EMBED = "embed"


class ChatbotConfig(BaseModel):
    """What the configuring user chooses (camelCase in JSON)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    system_prompt: str = Field("", max_length=PROMPT_CHARS,
                               description="Instructions the chatbot follows (its role, tone, what it may answer)")
    data_source: Literal["tables", "connection"] = Field(
        "tables", description=f"tables: the CSV/XLSX files uploaded into {TABLES_FOLDER}; connection: an SQL "
                              "connection")
    connection_id: str | None = Field(None, max_length=32, description="the `sql` connection (dataSource "
                                                                       "connection)")
    allowed_tables: list[str] = Field(default_factory=list, max_length=MAX_ALLOWED_TABLES,
                                      description="the tables of the connection's database it may read, as table "
                                                  "or schema.table (dataSource connection)")
    row_limit: int = Field(DEFAULT_ROW_LIMIT, ge=1, le=MAX_ROW_LIMIT, description="most rows one query returns")
    time_limit_seconds: float = Field(DEFAULT_TIME_LIMIT, ge=0.1, le=MAX_TIME_LIMIT,
                                      description="longest time one query may run")

    @field_validator("allowed_tables")
    @classmethod
    def _table_names(cls, names: list[str]) -> list[str]:
        cleaned: list[str] = []
        for name in names:
            name = name.strip() if isinstance(name, str) else name
            if not isinstance(name, str) or not TABLE_NAME.match(name):
                raise ValueError(f"{name!r} is not a table name (expected table or schema.table: letters, digits, _)")
            if name.lower() not in (n.lower() for n in cleaned):
                cleaned.append(name)
        return cleaned


def parse_config(raw: Any) -> ChatbotConfig:
    """`raw` (a JSON object) as a configuration, else InvalidInput naming each wrong field."""
    if not isinstance(raw, dict):
        raise InvalidInput([FieldError("body", "expected a JSON object with the chatbot's settings")])
    try:
        return ChatbotConfig.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInput([FieldError(".".join(str(p) for p in error["loc"]) or "body",
                                       error["msg"].removeprefix("Value error, "))
                            for error in exc.errors(include_url=False, include_input=False)]) from None


def stored_config(settings: dict[str, Any] | None) -> ChatbotConfig:
    """The configuration an instance's settings hold (defaults where nothing was chosen)."""
    known = {k: v for k, v in (settings or {}).items() if k in _FIELD_ALIASES}
    try:
        return ChatbotConfig.model_validate(known)
    except ValidationError:
        return ChatbotConfig()


_FIELD_ALIASES = {field.alias for field in ChatbotConfig.model_fields.values()}
