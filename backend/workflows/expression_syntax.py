"""What a `{{ … }}` parameter looks like, decided by Jinja2's own parser (no evaluation).

DESIGN §4: a parameter string may contain sandboxed Jinja2 expressions; a string that is one
whole `{{ … }}` (surrounding white space aside) yields the expression's native value, any other
string with `{{`/`{%` is a template that yields a string. Validation needs to tell the two
apart and to find syntax errors before a run; evaluation lives in the engine.
"""

from __future__ import annotations

from functools import lru_cache

from jinja2 import Environment, TemplateSyntaxError, nodes

_PARSER = Environment(autoescape=False)
MARKERS = ("{{", "{%", "{#")


def looks_templated(value: object) -> bool:
    """True for a string that Jinja2 would treat as more than plain text."""
    return isinstance(value, str) and any(marker in value for marker in MARKERS)


@lru_cache(maxsize=4096)
def _parse(text: str) -> nodes.Template | str:
    try:
        return _PARSER.parse(text)
    except TemplateSyntaxError as error:
        return f"{error.message} (line {error.lineno})" if error.lineno and "\n" in text else str(error.message)


def syntax_error(value: object) -> str | None:
    """Jinja2's message if `value` is a string with template markers that does not parse."""
    if not looks_templated(value):
        return None
    parsed = _parse(value)  # type: ignore[arg-type]
    return parsed if isinstance(parsed, str) else None


def is_whole_expression(value: object) -> bool:
    """True for a string that is exactly one `{{ … }}` expression (white space around allowed)."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    if not (text.startswith("{{") and text.endswith("}}")):
        return False
    parsed = _parse(text)
    if isinstance(parsed, str) or len(parsed.body) != 1:
        return False
    output = parsed.body[0]
    return (isinstance(output, nodes.Output) and len(output.nodes) == 1
            and not isinstance(output.nodes[0], nodes.TemplateData))
