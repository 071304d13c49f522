"""ai.renderDocument and ai.createChart, run through execute_action as the bootstrap admin.

Rendered documents are read back with independent libraries: PDFs with pypdf (text and
bookmarks), DOCX with python-docx (styles, list items, table cells), charts with Pillow
(PNG, size, colours). Files land in the file store of the Workspace instance; without a
feature instance the bytes come back base64-encoded.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import docx
import pytest
from PIL import Image
from pypdf import PdfReader
from sqlmodel import func, select

from backend.actions import ActionContext, execute_action, get_registry
from backend.actions.openai_tools import execute_tool_call, to_tool_definition
from backend.db.models import StoredFile
from backend.files import service as files

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

REPORT = """\
# Quarterly Report

This quarter was **strong** and *steady*, with `inline code` and a [source](https://example.org/q3).
Unicode survives: Zürich, 12 €, naïve — “quotes”.

## Highlights

- Revenue grew in the north
- Costs fell with **discipline**
  - Nested detail alpha
  - Nested detail beta
- Hiring paused

3. Third step first
4. Fourth step next

## Figures

| Region | Revenue | Growth |
|:-------|--------:|:------:|
| North  | 1200    | 5%     |
| South  | 950     | -2%    |

```python
def total(values):
    return sum(values)
```

> Quoted remark from the board.

---

Closing paragraph.
"""


def _run(context: ActionContext, action_id: str, params: dict[str, Any]) -> dict[str, Any]:
    result = execute_action(action_id, params, context)
    assert result.ok, result.error
    return result.output


def _bytes(context: ActionContext, output: dict[str, Any]) -> bytes:
    """The produced file: from the file store when stored, else from the inline base64."""
    if output["stored"]:
        entry, content = files.read_bytes(context, file_id=output["fileId"])
        assert entry.path == output["path"]
        assert entry.mime_type == output["mimeType"]
        return content
    return base64.b64decode(output["contentBase64"])


def _file_count(context: ActionContext) -> int:
    return context.session.exec(select(func.count()).select_from(StoredFile)).one()


def _failure(context: ActionContext, action_id: str, params: dict[str, Any]) -> str:
    before = _file_count(context)
    result = execute_action(action_id, params, context)
    assert not result.ok, result.output
    assert result.error_kind in {"invalid", "failed"}, result.error
    assert _file_count(context) == before, "a failed call must not write a file"
    return result.error


# --- registry -------------------------------------------------------------------------------


def test_both_actions_are_agent_tools_and_graph_nodes_of_the_ai_toolbox(db_url):
    registry = get_registry()
    for action_id in ("ai.renderDocument", "ai.createChart"):
        found = registry.get(action_id)
        assert found is not None and found.toolbox == "ai"
        assert found.agent_tool and found.graph_node
        assert "write" in found.capabilities
        definition = to_tool_definition(found)
        assert definition["function"]["name"] == action_id.replace(".", "_")
        assert "markdown" in definition["function"]["parameters"]["properties"] or \
            "chartType" in definition["function"]["parameters"]["properties"]


# --- renderDocument: PDF --------------------------------------------------------------------


def test_markdown_becomes_a_pdf_in_the_file_store_with_all_its_text(action_context):
    output = _run(action_context, "ai.renderDocument",
                  {"markdown": REPORT, "format": "pdf", "folder": "/reports/2026"})
    assert output["stored"] is True
    assert output["path"] == "/reports/2026/Quarterly Report.pdf"
    assert output["mimeType"] == "application/pdf" and output["format"] == "pdf"
    assert output["title"] == "Quarterly Report"
    content = _bytes(action_context, output)
    assert content.startswith(b"%PDF-") and output["sizeBytes"] == len(content)

    reader = PdfReader(io.BytesIO(content))
    text = " ".join(" ".join(page.extract_text().split()) for page in reader.pages)
    for expected in ("Quarterly Report", "This quarter was strong and steady", "inline code", "source",
                     "Zürich, 12 €, naïve — “quotes”", "Highlights", "Revenue grew in the north",
                     "Nested detail beta", "3. Third step first", "4. Fourth step next", "Region", "Revenue",
                     "Growth", "North", "1200", "-2%", "def total(values):", "return sum(values)",
                     "Quoted remark from the board.", "Closing paragraph."):
        assert expected in text, f"{expected!r} missing from the PDF text: {text}"
    assert "**" not in text and "```" not in text and "|" not in text  # markup was rendered, not copied
    assert reader.metadata.title == "Quarterly Report"
    outline = [item["/Title"] for item in _flatten(reader.outline)]
    assert outline == ["Quarterly Report", "Highlights", "Figures"]


def _flatten(outline: list[Any]) -> list[Any]:
    flat = []
    for item in outline:
        flat.extend(_flatten(item) if isinstance(item, list) else [item])
    return flat


def test_a_long_document_flows_over_several_pages(action_context):
    paragraphs = "\n\n".join(f"Paragraph number {i} " + "with filler words " * 30 for i in range(60))
    output = _run(action_context, "ai.renderDocument", {"markdown": paragraphs, "fileName": "long"})
    reader = PdfReader(io.BytesIO(_bytes(action_context, output)))
    assert output["name"] == "long.pdf"
    assert len(reader.pages) > 3
    assert "Paragraph number 59" in reader.pages[-1].extract_text()


# --- renderDocument: DOCX -------------------------------------------------------------------


def test_markdown_becomes_a_docx_with_headings_lists_and_table_cells(action_context):
    output = _run(action_context, "ai.renderDocument",
                  {"markdown": REPORT, "format": "docx", "title": "Q3", "fileName": "board pack"})
    assert output["name"] == "board pack.docx" and output["path"] == "/board pack.docx"
    assert output["mimeType"] == "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    document = docx.Document(io.BytesIO(_bytes(action_context, output)))
    assert document.core_properties.title == "Q3"

    by_style: dict[str, list[str]] = {}
    for paragraph in document.paragraphs:
        by_style.setdefault(paragraph.style.name, []).append(paragraph.text)
    assert by_style["Heading 1"] == ["Quarterly Report"]
    assert by_style["Heading 2"] == ["Highlights", "Figures"]
    assert by_style["List Bullet"] == ["Revenue grew in the north", "Costs fell with discipline", "Hiring paused"]
    assert by_style["List Bullet 2"] == ["Nested detail alpha", "Nested detail beta"]
    assert by_style["List Number"] == ["Third step first", "Fourth step next"]
    assert by_style["Quote"] == ["Quoted remark from the board."]
    body = "\n".join(p.text for p in document.paragraphs)
    assert "This quarter was strong and steady, with inline code and a source." in body
    assert 'def total(values):\n    return sum(values)' in body
    assert "**" not in body and "```" not in body

    strong = [r.text for p in document.paragraphs for r in p.runs if r.bold]
    assert "strong" in strong and "discipline" in strong
    assert any(r.italic and r.text == "steady" for p in document.paragraphs for r in p.runs)
    assert [h.url for p in document.paragraphs for h in p.hyperlinks] == ["https://example.org/q3"]

    (table,) = document.tables
    cells = [[cell.text for cell in row.cells] for row in table.rows]
    assert cells == [["Region", "Revenue", "Growth"], ["North", "1200", "5%"], ["South", "950", "-2%"]]
    assert all(run.bold for cell in table.rows[0].cells for run in cell.paragraphs[0].runs)


def test_each_numbered_list_in_a_docx_starts_at_its_own_number(action_context):
    output = _run(action_context, "ai.renderDocument",
                  {"markdown": "1. one\n2. two\n\nbreak\n\n7. seven\n8. eight\n", "format": "docx"})
    document = docx.Document(io.BytesIO(_bytes(action_context, output)))
    numbered = [p for p in document.paragraphs if p.style.name == "List Number"]
    assert [p.text for p in numbered] == ["one", "two", "seven", "eight"]
    num_ids = [p._p.pPr.numPr.numId.val for p in numbered]
    assert num_ids[0] == num_ids[1] != num_ids[2] == num_ids[3]
    numbering = document.part.numbering_part.element
    starts = [numbering.num_having_numId(n).xpath("./w:lvlOverride/w:startOverride/@w:val")
              for n in (num_ids[0], num_ids[2])]
    assert starts == [["1"], ["7"]]
    assert output["name"] == "document.docx"  # no heading, no title


# --- renderDocument: where the file goes ----------------------------------------------------


def test_without_a_feature_instance_the_document_comes_back_inline(action_context):
    inline = ActionContext(action_context.session, action_context.user, action_context.mandate_id, None)
    before = _file_count(action_context)
    output = _run(inline, "ai.renderDocument", {"markdown": "# Inline\n\nNo store here.", "format": "pdf"})
    assert output["stored"] is False and output["fileId"] is None and output["path"] is None
    content = base64.b64decode(output["contentBase64"])
    assert output["sizeBytes"] == len(content) and output["name"] == "Inline.pdf"
    assert "No store here." in PdfReader(io.BytesIO(content)).pages[0].extract_text()
    assert _file_count(action_context) == before


def test_a_taken_name_is_refused_unless_overwrite_is_set(action_context):
    first = _run(action_context, "ai.renderDocument", {"markdown": "# First", "fileName": "same.pdf"})
    error = _failure(action_context, "ai.renderDocument", {"markdown": "# Second", "fileName": "same.pdf"})
    assert "same.pdf" in error and "already exists" in error
    second = _run(action_context, "ai.renderDocument",
                  {"markdown": "# Second", "fileName": "same.pdf", "overwrite": True})
    assert second["fileId"] == first["fileId"]
    assert "Second" in PdfReader(io.BytesIO(_bytes(action_context, second))).pages[0].extract_text()


def test_a_rendered_pdf_is_found_by_full_text_search(action_context):
    _run(action_context, "ai.renderDocument", {"markdown": "# Memo\n\nThe zeppelin arrives on Friday."})
    hits = files.search_files(action_context, "zeppelin")
    assert [h.file.path for h in hits] == ["/Memo.pdf"]


# --- createChart ----------------------------------------------------------------------------

SALES = {"columns": ["month", "north", "south"],
         "rows": [["Jan", 10, 12.5], ["Feb", 14, 9], ["Mar", 8, "15"], ["Apr", 20, 11]]}
POINTS = {"columns": ["height", "weight"], "rows": [[150 + i, 50 + (i * 7) % 30] for i in range(40)]}


def _png(context: ActionContext, output: dict[str, Any]) -> Image.Image:
    image = Image.open(io.BytesIO(_bytes(context, output)))
    assert image.format == "PNG"
    image.load()
    return image


def _colours(image: Image.Image) -> set[tuple[int, int, int]]:
    return {colour for _, colour in image.convert("RGB").getcolors(maxcolors=image.width * image.height)}


@pytest.mark.parametrize(("chart_type", "data", "series"), [
    ("bar", SALES, ["north", "south"]),
    ("line", SALES, ["north", "south"]),
    ("pie", {"columns": ["region", "share"], "rows": [["North", 5], ["South", 3], ["East", 2]]}, ["share"]),
    ("scatter", POINTS, ["weight"]),
])
def test_every_chart_type_draws_a_png(action_context, chart_type, data, series):
    output = _run(action_context, "ai.createChart",
                  {"chartType": chart_type, **data, "title": f"{chart_type} in $", "folder": "/charts"})
    assert output["stored"] is True and output["mimeType"] == "image/png"
    assert output["path"] == f"/charts/{chart_type} in $.png"
    assert output["series"] == series and output["points"] == len(data["rows"]) * len(series)
    image = _png(action_context, output)
    assert image.size == (800, 500) == (output["width"], output["height"])
    assert image.mode in {"RGB", "RGBA"}
    colours = _colours(image)
    assert len(colours) > 20, "the chart looks blank"
    assert (255, 255, 255) in colours  # the background
    assert _coloured_pixels(image) > 200, "no data drawn in colour"


def _coloured_pixels(image: Image.Image) -> int:
    """Pixels that are clearly not grey: the drawn series (text and axes are black and grey)."""
    counts = image.convert("RGB").getcolors(maxcolors=image.width * image.height)
    return sum(n for n, (r, g, b) in counts if max(r, g, b) - min(r, g, b) > 60)


def test_records_give_the_same_chart_as_columns_and_rows(action_context):
    records = [dict(zip(SALES["columns"], row, strict=True)) for row in SALES["rows"]]
    from_rows = _run(action_context, "ai.createChart", {"chartType": "bar", **SALES, "fileName": "a"})
    from_records = _run(action_context, "ai.createChart", {"chartType": "bar", "records": records, "fileName": "b"})
    assert _bytes(action_context, from_rows) == _bytes(action_context, from_records)


def test_size_series_choice_and_inline_output(action_context):
    inline = ActionContext(action_context.session, action_context.user, action_context.mandate_id, None)
    output = _run(inline, "ai.createChart", {"chartType": "line", **SALES, "y": ["south"], "width": 400,
                                             "height": 300, "xLabel": "Month", "yLabel": "CHF"})
    assert output["stored"] is False and output["name"] == "chart.png"
    assert output["series"] == ["south"] and output["points"] == 4
    image = Image.open(io.BytesIO(base64.b64decode(output["contentBase64"])))
    assert image.format == "PNG" and image.size == (400, 300)


def test_a_chart_through_the_openai_tool_adapter(action_context):
    arguments = {"chartType": "bar", "columns": ["team", "tickets"], "rows": [["A", 3], ["B", 7]],
                 "records": None, "x": None, "y": None, "title": None, "xLabel": None, "yLabel": None,
                 "width": None, "height": None, "fileName": "tickets", "folder": None, "overwrite": None}
    result = execute_tool_call("ai_createChart", json.dumps(arguments), action_context)
    assert result.ok, result.error
    assert result.output["path"] == "/tickets.png"
    assert len(_colours(_png(action_context, result.output))) > 20


def test_the_limit_is_ten_thousand_points(action_context):
    rows = [[i, i % 17] for i in range(10_000)]
    output = _run(action_context, "ai.createChart", {"chartType": "scatter", "columns": ["i", "v"], "rows": rows})
    assert output["points"] == 10_000
    error = _failure(action_context, "ai.createChart",
                     {"chartType": "scatter", "columns": ["i", "v"], "rows": [*rows, [10_000, 1]]})
    assert "rows" in error and "10,001" in error and "10,000" in error
    error = _failure(action_context, "ai.createChart",
                     {"chartType": "line", "columns": ["i", "a", "b"], "rows": [[i, i, i] for i in range(6000)]})
    assert "12,000 data points" in error and "10,000" in error


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(("params", "field"), [
    ({"markdown": ""}, "markdown"),
    ({"markdown": "   \n\t\n"}, "markdown"),
    ({}, "markdown"),
    ({"markdown": "# x", "format": "odt"}, "format"),
    ({"markdown": "# x", "folder": "/a/../b"}, "folder"),
    ({"markdown": "# x", "colour": "red"}, "colour"),
    ({"markdown": "x" * 200_001}, "markdown"),
])
def test_bad_document_input_is_refused_naming_the_field(action_context, params, field):
    error = _failure(action_context, "ai.renderDocument", params)
    assert f"{field}:" in error or f"{field} " in error, error


def test_markdown_with_nothing_to_render_is_refused(action_context):
    error = _failure(action_context, "ai.renderDocument", {"markdown": "[ref]: https://example.org\n"})
    assert "markdown" in error and "nothing to render" in error


@pytest.mark.parametrize(("params", "expected"), [
    ({"chartType": "radar", **SALES}, ["chartType"]),
    ({**SALES}, ["chartType"]),
    ({"chartType": "bar"}, ["columns", "rows"]),
    ({"chartType": "bar", "columns": ["a", "b"], "rows": []}, ["rows", "no data"]),
    ({"chartType": "bar", "columns": ["a", "b", "c"], "rows": [[1, 2, 3], [4, 5]]},
     ["rows[1]", "2 values", "3"]),
    ({"chartType": "bar", "columns": ["a", "a"], "rows": [[1, 2]]}, ["columns", "duplicate", "'a'"]),
    ({"chartType": "bar", "columns": ["month", "sales"], "rows": [["Jan", 3], ["Feb", "lots"]]},
     ["rows[1] column 'sales'", "'lots' is not a number"]),
    ({"chartType": "line", "columns": ["month", "sales"], "rows": [["Jan", 1], ["Feb", True]]},
     ["rows[1] column 'sales'", "True is not a number"]),
    ({"chartType": "bar", "records": [{"m": "Jan", "v": 1}, {"m": "Feb", "w": 2}]},
     ["records[1]", "lacks 'v'", "unknown 'w'"]),
    ({"chartType": "bar", "records": [{"m": "Jan", "v": 1}, {"m": "Feb", "v": "x"}]},
     ["records[1].v", "'x' is not a number"]),
    ({"chartType": "bar", **SALES, "records": [{"a": 1}]}, ["records", "not both"]),
    ({"chartType": "bar", **SALES, "x": "week"}, ["x:", "'week'", "month, north, south"]),
    ({"chartType": "bar", **SALES, "y": ["east"]}, ["y:", "'east'"]),
    ({"chartType": "bar", **SALES, "y": []}, ["y:"]),
    ({"chartType": "bar", "columns": ["name", "city"], "rows": [["Ann", "Bern"]]}, ["y:", "no column with numbers"]),
    ({"chartType": "pie", **SALES}, ["y:", "one series", "north, south"]),
    ({"chartType": "pie", "columns": ["k", "v"], "rows": [["a", 3], ["b", -1]]},
     ["rows[1] column 'v'", "negative"]),
    ({"chartType": "pie", "columns": ["k", "v"], "rows": [["a", 0], ["b", 0]]}, ["add up to zero"]),
    ({"chartType": "scatter", **SALES}, ["rows[0] column 'month'", "'Jan' is not a number", "scatter"]),
    ({"chartType": "bar", **SALES, "width": 50}, ["width"]),
    ({"chartType": "bar", **SALES, "height": 9000}, ["height"]),
])
def test_bad_chart_input_is_refused_naming_the_field(action_context, params, expected):
    error = _failure(action_context, "ai.createChart", params)
    for part in expected:
        assert part in error, f"{part!r} not in {error!r}"


def test_a_user_without_the_ai_toolbox_may_not_render(action_context):
    from backend.db.models import User

    stranger = User(username="stranger")  # no roles anywhere
    action_context.session.add(stranger)
    action_context.session.flush()
    context = ActionContext(action_context.session, stranger, action_context.mandate_id,
                            action_context.feature_instance_id)
    result = execute_action("ai.renderDocument", {"markdown": "# Hi"}, context)
    assert not result.ok and result.error_kind == "forbidden"
