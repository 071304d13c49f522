"""The block model as a Word document (python-docx).

Uses the built-in styles of python-docx's default template — Heading 1–6, List Bullet /
List Number (levels 1–3), Quote, Table Grid — so the result looks native in Word and
LibreOffice. Every numbered list restarts at its own first number; links are real hyperlinks.
"""

from __future__ import annotations

import io
from typing import Any

from backend.documents.blocks import (
    Block,
    CodeBlock,
    Heading,
    ListBlock,
    Paragraph,
    Quote,
    Rule,
    Run,
    Table,
)

MONO_FONT = "Courier New"
CODE_FILL = "F2F2F2"
HEAD_FILL = "E4E4E4"
LINK_RGB = (0x14, 0x50, 0xBE)
# Children of w:pPr that come after w:pBdr / w:shd in the schema's order.
_AFTER_SHD = ("w:tabs", "w:suppressAutoHyphens", "w:kinsoku", "w:wordWrap", "w:overflowPunct", "w:topLinePunct",
              "w:autoSpaceDE", "w:autoSpaceDN", "w:bidi", "w:adjustRightInd", "w:snapToGrid", "w:spacing", "w:ind",
              "w:contextualSpacing", "w:mirrorIndents", "w:suppressOverlap", "w:jc", "w:textDirection",
              "w:textAlignment", "w:textboxTightWrap", "w:outlineLvl", "w:divId", "w:cnfStyle", "w:rPr",
              "w:sectPr", "w:pPrChange")
_ALIGN = {"left": 0, "center": 1, "right": 2}  # WD_PARAGRAPH_ALIGNMENT values


class _Writer:
    def __init__(self, title: str | None) -> None:
        import docx

        self.doc = docx.Document()
        if title:
            self.doc.core_properties.title = title
        self.doc.core_properties.author = "PowerOn Unified"

    # --- blocks -----------------------------------------------------------------------------

    def blocks(self, blocks: list[Block], depth: int = 0, quote: bool = False) -> None:
        for block in blocks:
            self.block(block, depth, quote)

    def block(self, block: Block, depth: int, quote: bool) -> None:
        if isinstance(block, Heading):
            self.runs(self.doc.add_heading("", level=min(max(block.level, 1), 9)), block.runs)
        elif isinstance(block, Paragraph):
            self.runs(self.doc.add_paragraph(style="Quote" if quote else None), block.runs)
        elif isinstance(block, ListBlock):
            self.list(block, depth)
        elif isinstance(block, Table):
            self.table(block)
        elif isinstance(block, CodeBlock):
            self.code(block)
        elif isinstance(block, Quote):
            self.blocks(block.blocks, depth, quote=True)
        elif isinstance(block, Rule):
            self.rule()

    def runs(self, paragraph: Any, runs: list[Run]) -> None:
        for run in runs:
            if run.text == "\n":
                paragraph.add_run().add_break()
                continue
            added = paragraph.add_run(run.text)
            added.bold = run.bold or None
            added.italic = run.italic or None
            if run.strike:
                added.font.strike = True
            if run.code:
                added.font.name = MONO_FONT
            if run.link:
                self._hyperlink(paragraph, added, run.link)

    def _hyperlink(self, paragraph: Any, run: Any, url: str) -> None:
        from docx.opc.constants import RELATIONSHIP_TYPE
        from docx.oxml import OxmlElement
        from docx.oxml.ns import qn
        from docx.shared import RGBColor

        run.font.underline = True
        run.font.color.rgb = RGBColor(*LINK_RGB)
        link = OxmlElement("w:hyperlink")
        link.set(qn("r:id"), paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True))
        paragraph._p.append(link)
        link.append(run._r)  # moves the run inside the hyperlink

    def list(self, block: ListBlock, depth: int) -> None:
        level = min(depth, 2)
        suffix = "" if level == 0 else f" {level + 1}"
        style = ("List Number" if block.ordered else "List Bullet") + suffix
        num_id = self._restarted_numbering(style, block.start) if block.ordered else None
        for item in block.items:
            first, rest = (item[0], item[1:]) if item and isinstance(item[0], Paragraph) else (None, item)
            paragraph = self.doc.add_paragraph(style=style)
            if num_id is not None:
                num_pr = paragraph._p.get_or_add_pPr().get_or_add_numPr()
                num_pr.get_or_add_ilvl().val = 0
                num_pr.get_or_add_numId().val = num_id
            if first is not None:
                self.runs(paragraph, first.runs)
            for extra in rest:
                if isinstance(extra, Paragraph):
                    self.runs(self.doc.add_paragraph(style="List Continue" + suffix), extra.runs)
                else:
                    self.block(extra, depth + 1, False)

    def _restarted_numbering(self, style_name: str, start: int) -> int | None:
        """A new numbering instance of the style's list that starts at `start`."""
        style = self.doc.styles[style_name]
        p_pr = style.element.pPr
        if p_pr is None or p_pr.numPr is None or p_pr.numPr.numId is None:
            return None
        numbering = self.doc.part.numbering_part.element
        current = numbering.num_having_numId(p_pr.numPr.numId.val)
        num = numbering.add_num(current.abstractNumId.val)
        num.add_lvlOverride(ilvl=0).add_startOverride(start)
        return num.numId

    def table(self, block: Table) -> None:
        from docx.shared import Pt

        columns = max([len(block.header), *(len(r) for r in block.rows)])
        if columns == 0:
            return
        rows = [block.header, *block.rows] if block.header else block.rows
        table = self.doc.add_table(rows=len(rows), cols=columns)
        table.style = self.doc.styles["Table Grid"]
        for r, cells in enumerate(rows):
            for c in range(columns):
                cell = table.cell(r, c)
                paragraph = cell.paragraphs[0]
                align = block.aligns[c] if c < len(block.aligns) else None
                if align:
                    paragraph.alignment = _ALIGN[align]
                runs = cells[c] if c < len(cells) else []
                if r == 0 and block.header:
                    runs = [Run(x.text, True, x.italic, x.code, x.strike, x.link) for x in runs]
                    _shade(cell._tc.get_or_add_tcPr(), HEAD_FILL)
                self.runs(paragraph, runs)
                for run in paragraph.runs:
                    run.font.size = Pt(10)
        if block.header:
            from docx.oxml import OxmlElement

            table.rows[0]._tr.get_or_add_trPr().append(OxmlElement("w:tblHeader"))  # repeat on each page
        self.doc.add_paragraph()

    def code(self, block: CodeBlock) -> None:
        from docx.shared import Pt

        paragraph = self.doc.add_paragraph(style="No Spacing")
        _shade(paragraph._p.get_or_add_pPr(), CODE_FILL, successors=_AFTER_SHD)
        lines = block.text.replace("\t", "    ").split("\n")
        for i, line in enumerate(lines):
            run = paragraph.add_run(line)
            run.font.name = MONO_FONT
            run.font.size = Pt(9)
            if i < len(lines) - 1:
                run.add_break()
        paragraph.paragraph_format.space_after = Pt(8)

    def rule(self) -> None:
        from docx.oxml import OxmlElement
        from docx.oxml.ns import qn

        paragraph = self.doc.add_paragraph()
        borders = OxmlElement("w:pBdr")
        bottom = OxmlElement("w:bottom")
        for key, value in (("w:val", "single"), ("w:sz", "6"), ("w:space", "1"), ("w:color", "AAAAAA")):
            bottom.set(qn(key), value)
        borders.append(bottom)
        paragraph._p.get_or_add_pPr().insert_element_before(borders, "w:shd", *_AFTER_SHD)


def _shade(properties: Any, fill: str, successors: tuple[str, ...] = ()) -> None:
    """Give a paragraph (w:pPr) or table cell (w:tcPr) a background colour."""
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    shd = OxmlElement("w:shd")
    shd.set(qn("w:val"), "clear")
    shd.set(qn("w:color"), "auto")
    shd.set(qn("w:fill"), fill)
    if successors:
        properties.insert_element_before(shd, *successors)
    else:
        properties.append(shd)


def render_docx(blocks: list[Block], title: str | None = None) -> bytes:
    """Write blocks as a .docx document and return its bytes."""
    writer = _Writer(title)
    writer.blocks(blocks)
    buffer = io.BytesIO()
    writer.doc.save(buffer)
    return buffer.getvalue()
