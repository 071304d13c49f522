"""The block model as a PDF (fpdf2, pure Python).

Text is set in DejaVu Sans / DejaVu Sans Mono, the TrueType fonts that ship with matplotlib,
so any Unicode text the fonts cover renders (core PDF fonts only know Latin-1). Without those
files the writer falls back to the core fonts and replaces what Latin-1 cannot hold.
Headings become PDF bookmarks; pages are numbered in the footer.
"""

from __future__ import annotations

from pathlib import Path

from backend.documents.blocks import (
    Block,
    CodeBlock,
    DocumentError,
    Heading,
    ListBlock,
    Paragraph,
    Quote,
    Rule,
    Run,
    Table,
    plain_text,
)

SANS, MONO = "DocSans", "DocMono"
BODY_PT = 11
HEADING_PT = {1: 20, 2: 16, 3: 14, 4: 12, 5: 11, 6: 11}
LIST_INDENT = 7.0  # mm per list level
QUOTE_INDENT = 6.0
MAX_INDENT = 60.0  # mm
LINK_RGB = (20, 80, 190)
QUOTE_RGB = (90, 90, 90)
CODE_FILL_RGB = (242, 242, 242)
TABLE_HEAD_RGB = (228, 228, 228)
TABLE_PT = 9.5


def _font_files() -> dict[tuple[str, str], Path] | None:
    """DejaVu files shipped with matplotlib, or None when they cannot be found."""
    try:
        import matplotlib
    except ImportError:  # pragma: no cover - matplotlib is a pinned dependency
        return None
    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    files = {
        (SANS, ""): "DejaVuSans.ttf", (SANS, "B"): "DejaVuSans-Bold.ttf",
        (SANS, "I"): "DejaVuSans-Oblique.ttf", (SANS, "BI"): "DejaVuSans-BoldOblique.ttf",
        (MONO, ""): "DejaVuSansMono.ttf", (MONO, "B"): "DejaVuSansMono-Bold.ttf",
        (MONO, "I"): "DejaVuSansMono-Oblique.ttf", (MONO, "BI"): "DejaVuSansMono-BoldOblique.ttf",
    }
    paths = {key: folder / name for key, name in files.items()}
    return paths if all(p.is_file() for p in paths.values()) else None


def _line_height(size_pt: float) -> float:
    return size_pt * 0.3528 * 1.35  # points → mm, with leading


class _Writer:
    def __init__(self, title: str | None) -> None:
        from fpdf import FPDF

        class _Pdf(FPDF):
            def footer(self) -> None:  # noqa: N802 - fpdf2's hook name
                self.set_y(-12)
                self.set_font(self.footer_family, "", 8)
                self.set_text_color(120, 120, 120)
                self.cell(0, 5, f"{self.page_no()} / {{nb}}", align="C")

        self.pdf = _Pdf(format="A4", unit="mm")
        # Fonts are added on first use: parsing a TrueType file is the slow part of a small PDF.
        self.font_files = _font_files()
        self.added_fonts: set[tuple[str, str]] = set()
        self.unicode = self.font_files is not None
        self.sans, self.mono = (SANS, MONO) if self.unicode else ("helvetica", "courier")
        self.need_font(self.sans, "")  # the footer's
        self.pdf.footer_family = self.sans
        self.pdf.set_margins(20, 20, 20)
        self.pdf.set_auto_page_break(True, margin=18)
        self.pdf.set_creator("PowerOn Unified")
        if title:
            self.pdf.set_title(title)
        self.pdf.add_page()
        self.base_margin = self.pdf.l_margin
        self.outline_level = -1
        self.color = (0, 0, 0)

    def need_font(self, family: str, style: str) -> None:
        """Add the font file of a family and style (B, I, BI) unless it is added already."""
        key = (family, ("B" if "B" in style else "") + ("I" if "I" in style else ""))
        if self.font_files is not None and key not in self.added_fonts:
            self.pdf.add_font(family, key[1], str(self.font_files[key]))
            self.added_fonts.add(key)

    def font(self, family: str, style: str, size: float) -> None:
        self.need_font(family, style)
        self.pdf.set_font(family, style, size)

    def text(self, value: str) -> str:
        value = value.replace("\t", "    ")
        return value if self.unicode else value.encode("latin-1", "replace").decode("latin-1")

    # --- blocks -----------------------------------------------------------------------------

    def blocks(self, blocks: list[Block], indent: float) -> None:
        for block in blocks:
            self.block(block, indent)

    def block(self, block: Block, indent: float) -> None:
        indent = min(indent, MAX_INDENT)  # deep nesting stops moving right: the text keeps its room
        self.pdf.set_left_margin(self.base_margin + indent)
        self.pdf.set_x(self.pdf.l_margin)
        if isinstance(block, Heading):
            self.heading(block)
        elif isinstance(block, Paragraph):
            self.runs(block.runs, BODY_PT)
            self.pdf.ln(2)
        elif isinstance(block, ListBlock):
            self.list(block, indent)
        elif isinstance(block, Table):
            self.table(block)
        elif isinstance(block, CodeBlock):
            self.code(block)
        elif isinstance(block, Quote):
            previous, self.color = self.color, QUOTE_RGB
            self.blocks(block.blocks, indent + QUOTE_INDENT)
            self.color = previous
            self.pdf.set_left_margin(self.base_margin + indent)
        elif isinstance(block, Rule):
            y = self.pdf.get_y() + 2
            self.pdf.set_draw_color(170, 170, 170)
            self.pdf.line(self.pdf.l_margin, y, self.pdf.w - self.pdf.r_margin, y)
            self.pdf.set_y(y + 4)

    def heading(self, block: Heading) -> None:
        size = HEADING_PT.get(block.level, BODY_PT)
        if self.pdf.get_y() > self.pdf.t_margin + 1:
            self.pdf.ln(size * 0.25)
        # Keep a heading with the first lines that follow it.
        if self.pdf.will_page_break(_line_height(size) + 3 * _line_height(BODY_PT)):
            self.pdf.add_page()
        name = plain_text(block.runs).strip()
        if name:
            level = min(block.level - 1, self.outline_level + 1)
            self.pdf.start_section(self.text(name), level, strict=False)
            self.outline_level = level
        self.runs(block.runs, size, bold=True)
        self.pdf.ln(1.5)

    def runs(self, runs: list[Run], size: float, bold: bool = False) -> None:
        """Flow runs from the current position; wrapped lines start at the left margin."""
        height = _line_height(size)
        for run in runs:
            if run.text == "\n":
                self.pdf.ln(height)
                continue
            style = ("B" if bold or run.bold else "") + ("I" if run.italic else "") + ("S" if run.strike else "")
            family = self.mono if run.code else self.sans
            if run.link:
                style += "U"
                self.pdf.set_text_color(*LINK_RGB)
            else:
                self.pdf.set_text_color(*self.color)
            self.font(family, style, size * 0.92 if run.code else size)
            self.pdf.write(height, self.text(run.text), link=run.link or "")
        self.pdf.set_text_color(*self.color)
        self.pdf.ln(height)

    def list(self, block: ListBlock, indent: float) -> None:
        for number, item in enumerate(block.items, start=block.start):
            marker = f"{number}." if block.ordered else "•"
            inner = indent + LIST_INDENT
            self.pdf.set_left_margin(self.base_margin + inner)
            self.pdf.set_x(self.base_margin + inner - LIST_INDENT + 1)
            self.font(self.sans, "", BODY_PT)
            self.pdf.set_text_color(*self.color)
            self.pdf.write(_line_height(BODY_PT), self.text(marker))
            self.pdf.set_x(max(self.pdf.get_x() + 1, self.pdf.l_margin))
            rest = item
            if item and isinstance(item[0], Paragraph):
                self.runs(item[0].runs, BODY_PT)
                rest = item[1:]
            else:  # an empty item, or one that starts with a nested list or code
                self.pdf.ln(_line_height(BODY_PT))
            self.blocks(rest, inner)
            self.pdf.ln(0.8)
        self.pdf.set_left_margin(self.base_margin + indent)
        self.pdf.ln(1.5 if self.pdf.l_margin == self.base_margin else 0)

    def table(self, block: Table) -> None:
        from fpdf.errors import FPDFException
        from fpdf.fonts import FontFace

        columns = max([len(block.header), *(len(r) for r in block.rows)])
        if columns == 0:
            return
        aligns = tuple((block.aligns[i] or "left").upper() if i < len(block.aligns) else "LEFT"
                       for i in range(columns))
        # Wide tables get smaller type and tighter cells before they stop fitting at all.
        size = TABLE_PT if columns <= 6 else max(5.0, TABLE_PT - (columns - 6) * 0.35)
        self.font(self.sans, "", size)
        self.need_font(self.sans, "B")  # the header row
        self.pdf.set_text_color(*self.color)
        self.pdf.set_draw_color(160, 160, 160)
        head = FontFace(emphasis="BOLD", fill_color=TABLE_HEAD_RGB)
        rows = [block.header, *block.rows] if block.header else block.rows
        self.pdf.ln(1)
        try:
            with self.pdf.table(width=self.pdf.epw, align="LEFT", text_align=aligns, line_height=_line_height(size),
                                padding=1.2 if columns <= 10 else 0.5, headings_style=head,
                                first_row_as_headings=bool(block.header)) as table:
                for cells in rows:
                    row = table.row()
                    for i in range(columns):
                        row.cell(self.text(plain_text(cells[i]) if i < len(cells) else ""))
        except FPDFException as exc:
            raise DocumentError(f"markdown: a table with {columns} columns does not fit the width of a PDF page "
                                f"({exc}); split it, shorten its words, or render as 'docx'") from None
        self.pdf.ln(3)

    def code(self, block: CodeBlock) -> None:
        self.font(self.mono, "", 9)
        self.pdf.set_text_color(30, 30, 30)
        self.pdf.set_fill_color(*CODE_FILL_RGB)
        self.pdf.multi_cell(0, _line_height(9), self.text(block.text or " "), fill=True, align="L",
                            new_x="LMARGIN", new_y="NEXT", padding=2)
        self.pdf.set_text_color(*self.color)
        self.pdf.ln(2.5)


def render_pdf(blocks: list[Block], title: str | None = None) -> bytes:
    """Write blocks as an A4 PDF and return its bytes.

    Raises:
        DocumentError: the content cannot be laid out (e.g. a table too wide for the page).
    """
    from fpdf.errors import FPDFException

    writer = _Writer(title)
    try:
        writer.blocks(blocks, 0.0)
        return bytes(writer.pdf.output())
    except DocumentError:
        raise
    except (FPDFException, ValueError) as exc:
        raise DocumentError(f"markdown: the PDF could not be laid out: {exc}") from exc
    finally:
        for font in writer.pdf.fonts.values():  # fontTools keeps the font files open
            ttfont = getattr(font, "ttfont", None)
            if ttfont is not None:
                ttfont.close()
