"""Markdown → a small block model that the PDF and DOCX writers share.

Parsed with markdown-it-py (CommonMark plus GitHub tables and strikethrough). Raw HTML is not
interpreted: it stays visible as text, so a document never runs markup it was handed.
Images are not fetched; their alternative text is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode


class DocumentError(ValueError):
    """Input that cannot become a document or chart; the message names the field at fault."""


@dataclass(frozen=True)
class Run:
    """A piece of inline text with one formatting; `text == "\\n"` is a hard line break."""

    text: str
    bold: bool = False
    italic: bool = False
    code: bool = False
    strike: bool = False
    link: str | None = None


@dataclass
class Heading:
    level: int
    runs: list[Run]


@dataclass
class Paragraph:
    runs: list[Run]


@dataclass
class CodeBlock:
    text: str
    language: str = ""


@dataclass
class ListBlock:
    """A bullet or numbered list; every item is a list of blocks (nested lists included)."""

    ordered: bool
    items: list[list[Block]]
    start: int = 1


@dataclass
class Table:
    header: list[list[Run]]
    rows: list[list[list[Run]]]
    aligns: list[str | None] = field(default_factory=list)  # "left" | "center" | "right" | None per column


@dataclass
class Quote:
    blocks: list[Block]


@dataclass
class Rule:
    pass


Block = Heading | Paragraph | CodeBlock | ListBlock | Table | Quote | Rule

MAX_NESTING = 40  # lists and quotes nested deeper than this are cut by the parser (it guards recursion)
_PARSER = MarkdownIt("commonmark", {"html": False, "maxNesting": MAX_NESTING}).enable(["table", "strikethrough"])


def plain_text(runs: list[Run]) -> str:
    """The text of some runs without formatting."""
    return "".join(r.text for r in runs)


def parse_markdown(source: str) -> list[Block]:
    """Parse Markdown into blocks.

    Raises:
        DocumentError: the text is empty or holds nothing that can be rendered.
    """
    if not source or not source.strip():
        raise DocumentError("markdown: the text is empty")
    blocks = _blocks(SyntaxTreeNode(_PARSER.parse(source)).children)
    if not blocks:
        raise DocumentError("markdown: the text holds nothing to render")
    return blocks


def _blocks(nodes: list[SyntaxTreeNode]) -> list[Block]:
    out: list[Block] = []
    for node in nodes:
        kind = node.type
        if kind == "heading":
            runs = _inline_of(node)
            if plain_text(runs).strip():
                out.append(Heading(int(node.tag[1:]), runs))
        elif kind == "paragraph":
            runs = _inline_of(node)
            if plain_text(runs).strip():
                out.append(Paragraph(runs))
        elif kind in ("fence", "code_block"):
            out.append(CodeBlock(node.content.rstrip("\n"), (node.info or "").strip()))
        elif kind in ("bullet_list", "ordered_list"):
            start = node.attrs.get("start", 1) if kind == "ordered_list" else 1
            items = [_blocks(item.children) for item in node.children if item.type == "list_item"]
            out.append(ListBlock(kind == "ordered_list", items, int(start)))
        elif kind == "table":
            out.append(_table(node))
        elif kind == "blockquote":
            out.append(Quote(_blocks(node.children)))
        elif kind == "hr":
            out.append(Rule())
        elif kind == "html_block":  # only with html enabled; kept as text for safety
            out.append(Paragraph([Run(node.content.rstrip("\n"))]))
    return out


def _inline_of(node: SyntaxTreeNode) -> list[Run]:
    inline = next((c for c in node.children if c.type == "inline"), None)
    return _merge(_runs(inline.children, Run(""))) if inline is not None else []


def _runs(nodes: list[SyntaxTreeNode], style: Run) -> list[Run]:
    out: list[Run] = []
    for node in nodes:
        kind = node.type
        if kind == "text" or kind == "html_inline":
            out.append(_styled(style, node.content))
        elif kind == "code_inline":
            out.append(Run(node.content, style.bold, style.italic, True, style.strike, style.link))
        elif kind == "softbreak":
            out.append(_styled(style, " "))
        elif kind == "hardbreak":
            out.append(Run("\n"))
        elif kind == "strong":
            out.extend(_runs(node.children, Run("", True, style.italic, False, style.strike, style.link)))
        elif kind == "em":
            out.extend(_runs(node.children, Run("", style.bold, True, False, style.strike, style.link)))
        elif kind == "s":
            out.extend(_runs(node.children, Run("", style.bold, style.italic, False, True, style.link)))
        elif kind == "link":
            href = str(node.attrs.get("href", "")) or None
            out.extend(_runs(node.children, Run("", style.bold, style.italic, False, style.strike, href)))
        elif kind == "image":
            alt = "".join(c.content for c in node.children if c.type == "text") or str(node.attrs.get("alt", ""))
            if alt:
                out.append(_styled(style, f"[{alt}]"))
        else:
            out.extend(_runs(node.children, style))
    return out


def _styled(style: Run, text: str) -> Run:
    return Run(text, style.bold, style.italic, style.code, style.strike, style.link)


def _merge(runs: list[Run]) -> list[Run]:
    """Join neighbouring runs of the same formatting (fewer, longer runs render better)."""
    merged: list[Run] = []
    for run in runs:
        if not run.text:
            continue
        last = merged[-1] if merged else None
        if last is not None and run.text != "\n" and last.text != "\n" and _same_style(last, run):
            merged[-1] = Run(last.text + run.text, run.bold, run.italic, run.code, run.strike, run.link)
        else:
            merged.append(run)
    return merged


def _same_style(a: Run, b: Run) -> bool:
    return (a.bold, a.italic, a.code, a.strike, a.link) == (b.bold, b.italic, b.code, b.strike, b.link)


def _table(node: SyntaxTreeNode) -> Table:
    header: list[list[Run]] = []
    rows: list[list[list[Run]]] = []
    aligns: list[str | None] = []
    for section in node.children:
        for tr in section.children:
            cells = [_inline_of(cell) for cell in tr.children]
            if section.type == "thead":
                header = cells
                aligns = [_align(cell.attrs.get("style")) for cell in tr.children]
            else:
                rows.append(cells)
    return Table(header, rows, aligns)


def _align(style: object) -> str | None:
    text = str(style or "")
    for value in ("left", "center", "right"):
        if f"text-align:{value}" in text:
            return value
    return None


def first_heading(blocks: list[Block]) -> str | None:
    """The text of the first heading, used as a default title."""
    for block in blocks:
        if isinstance(block, Heading):
            text = plain_text(block.runs).strip()
            if text:
                return text
    return None
