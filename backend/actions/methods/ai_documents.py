"""AI toolbox: documents and charts from content the agent or a workflow has produced.

- `ai.renderDocument`: Markdown (headings, paragraphs, bold/italic, lists, tables, code blocks,
  quotes, links) → PDF or DOCX.
- `ai.createChart`: tabular data → PNG chart (bar, line, pie, scatter).

The result is saved in the file store of the caller's feature instance (folder and name
chosen by the caller) and described by id and path. Where no file store is available — no
feature instance in the context, or `backend.files.service` not installed — the bytes come
back base64-encoded in `contentBase64` instead. Rendering lives in `backend/documents/`.
"""

from __future__ import annotations

import base64
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from backend.actions.base import ActionContext, ActionError, ActionParams, action
from backend.documents.blocks import DocumentError, first_heading, parse_markdown
from backend.documents.charts import CHART_TYPES, MAX_CHART_POINTS, MAX_PIXELS, MIN_PIXELS, ChartSpec

MAX_MARKDOWN_CHARS = 200_000
PDF_TYPE = "application/pdf"
DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PNG_TYPE = "image/png"
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]+")

Cell = bool | int | float | str | None  # bool first: smart unions keep True a bool, rejected later by name


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class GeneratedFile(_Output):
    """A file an action produced: stored in the file store, or returned inline."""

    name: str = Field(description="File name, extension included.")
    mime_type: str
    size_bytes: int
    stored: bool = Field(description="True when the file was saved in the file store.")
    file_id: str | None = Field(None, description="Id of the stored file (read it with readFile).")
    path: str | None = Field(None, description="Path of the stored file in the file store.")
    content_base64: str | None = Field(None, description="The bytes, base64-encoded, when not stored.")


class DocumentOutput(GeneratedFile):
    format: Literal["pdf", "docx"]
    title: str | None = None


class ChartOutput(GeneratedFile):
    chart_type: str
    width: int
    height: int
    series: list[str] = Field(description="The columns drawn as series.")
    points: int = Field(description="How many data points were drawn.")


class _SaveParams(ActionParams):
    file_name: str | None = Field(
        None, max_length=200,
        description="Name of the file to create (the extension is added when missing); default from the title.")
    folder: str | None = Field(
        None, max_length=1000,
        description="Folder of the file store to save into, e.g. '/reports/2026' (created when missing); "
                    "default the top folder.")
    overwrite: bool = Field(False, description="Replace a file of the same name; otherwise that is an error.")


# --- renderDocument -------------------------------------------------------------------------


class RenderDocumentParams(_SaveParams):
    markdown: str = Field(
        max_length=MAX_MARKDOWN_CHARS,
        description="The document as Markdown: # headings, paragraphs, **bold**, *italic*, `code`, "
                    "- bullet and 1. numbered lists, | tables |, ``` code blocks ```, > quotes, links.")
    format: Literal["pdf", "docx"] = Field("pdf", description="Output format: 'pdf' (default) or 'docx' (Word).")
    title: str | None = Field(None, max_length=300,
                              description="Document title (metadata and default file name); default the first heading.")

    @field_validator("markdown")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the Markdown text is empty")
        return value


@action(
    "ai.renderDocument",
    toolbox="ai",
    label="Render document",
    description="Turn Markdown (headings, paragraphs, bold/italic, lists, tables, code blocks) into a PDF or "
                "Word (DOCX) document and save it in the file store. Returns the file's id, path and size.",
    params=RenderDocumentParams,
    output=DocumentOutput,
    graph_node=True,
    capabilities=("write",),
)
def render_document(params: RenderDocumentParams, context: ActionContext) -> DocumentOutput:
    try:
        blocks = parse_markdown(params.markdown)
        title = (params.title or "").strip() or first_heading(blocks)
        if params.format == "pdf":
            from backend.documents.pdf_render import render_pdf

            content, mime_type = render_pdf(blocks, title), PDF_TYPE
        else:
            from backend.documents.docx_render import render_docx

            content, mime_type = render_docx(blocks, title), DOCX_TYPE
    except DocumentError as exc:
        raise ActionError(str(exc)) from None
    name = _file_name(params.file_name, title, "document", "." + params.format)
    saved = _deliver(context, params, name, content, mime_type)
    return DocumentOutput(**saved, format=params.format, title=title)


# --- createChart ----------------------------------------------------------------------------


class CreateChartParams(_SaveParams):
    chart_type: Literal["bar", "line", "pie", "scatter"] = Field(
        description="Kind of chart: bar, line, pie or scatter.")
    columns: list[str] | None = Field(
        None, max_length=50, description="Column names of the table; give them with rows (or use records instead).")
    rows: list[list[Cell]] | None = Field(
        None, description="The table's rows, each a list with one value per column, in column order.")
    records: list[dict[str, Cell]] | None = Field(
        None, description="Instead of columns and rows, e.g. for workflow data: a list of objects that all have "
                          "the same keys. Tool calls should use columns and rows.")
    x: str | None = Field(None, description="Column with the categories or x values; default the first column.")
    y: list[str] | None = Field(
        None, max_length=20, description="Columns with the numbers to plot, one series each; default every other "
                                         "numeric column (a pie chart takes exactly one).")
    title: str | None = Field(None, max_length=200, description="Chart title.")
    x_label: str | None = Field(None, max_length=200, description="Label of the x axis; default the x column's name.")
    y_label: str | None = Field(None, max_length=200, description="Label of the y axis.")
    width: int = Field(800, ge=MIN_PIXELS, le=MAX_PIXELS, description="Width in pixels (200–3000, default 800).")
    height: int = Field(500, ge=MIN_PIXELS, le=MAX_PIXELS, description="Height in pixels (200–3000, default 500).")


@action(
    "ai.createChart",
    toolbox="ai",
    label="Create chart",
    description=f"Draw a {', '.join(CHART_TYPES)} chart as a PNG image from a table (columns with rows, or a list "
                f"of records; at most {MAX_CHART_POINTS:,} data points) and save it in the file store. "
                f"Returns the file's id, path and size.",
    params=CreateChartParams,
    output=ChartOutput,
    graph_node=True,
    capabilities=("write",),
)
def create_chart(params: CreateChartParams, context: ActionContext) -> ChartOutput:
    from backend.documents.charts import render_chart

    spec = ChartSpec(
        chart_type=params.chart_type, columns=params.columns, rows=params.rows, records=params.records,
        x=params.x, y=params.y, title=params.title, x_label=params.x_label, y_label=params.y_label,
        width=params.width, height=params.height,
    )
    try:
        chart = render_chart(spec)
    except DocumentError as exc:
        raise ActionError(str(exc)) from None
    name = _file_name(params.file_name, params.title, "chart", ".png")
    saved = _deliver(context, params, name, chart.png, PNG_TYPE)
    return ChartOutput(**saved, chart_type=params.chart_type, width=params.width, height=params.height,
                       series=chart.series, points=chart.points)


# --- saving ---------------------------------------------------------------------------------


def _file_name(given: str | None, title: str | None, fallback: str, extension: str) -> str:
    """A safe file name: no folders or control characters, with the expected extension."""
    base = _UNSAFE_NAME.sub(" ", (given or "").strip()).strip(" .")
    if not base:
        base = _UNSAFE_NAME.sub(" ", (title or "").strip()).strip(" .")[:80].strip() or fallback
    base = re.sub(r"\s+", " ", base)
    if not base.lower().endswith(extension):
        base += extension
    return base


def _deliver(context: ActionContext, params: _SaveParams, name: str, content: bytes,
             mime_type: str) -> dict[str, Any]:
    """Save the bytes in the file store when there is one, else return them base64-encoded."""
    entry = _save_in_file_store(context, params, name, content, mime_type)
    if entry is not None:
        return {"name": entry.name, "mime_type": entry.mime_type, "size_bytes": entry.size_bytes, "stored": True,
                "file_id": entry.id, "path": entry.path}
    return {"name": name, "mime_type": mime_type, "size_bytes": len(content), "stored": False,
            "content_base64": base64.b64encode(content).decode("ascii")}


def _save_in_file_store(context: ActionContext, params: _SaveParams, name: str, content: bytes,
                        mime_type: str) -> Any | None:
    """Write into the file store of the caller's feature instance and return its FileEntry;
    None when there is no store to write into (no instance, or no file store installed).

    Store errors (a name taken without `overwrite`, a full quota, missing rights) are
    DomainErrors that `execute_action` reports as they are; nothing is written then.
    """
    if context.feature_instance_id is None:
        return None
    try:
        from backend.files import service
    except ImportError:  # the file store is optional for these actions
        return None
    folder = service.split_path(params.folder or "/", "folder")
    path = service.join_path([*folder, name])
    return service.store_file(context, path, content, mime_type=mime_type, overwrite=params.overwrite)
