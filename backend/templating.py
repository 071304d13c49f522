"""The one hardened Jinja2 sandbox: workflow expressions (backend.engine.expressions) and context.transform.

Two environments share one sandbox class, one set of filters and one set of limits:

- the expression environment knows only `{{ … }}` (`{%` and `{#` are plain text). A text is split
  into literal pieces and expressions; each expression is compiled on its own (LRU-cached), so an
  error names the exact expression. A text that is one whole expression yields its native value.
- the template environment is full Jinja (loops, conditions, `namespace`) for context.transform.

Sandbox (on top of ImmutableSandboxedEnvironment: no attribute starting with `_`, no mutation of
lists and dicts, `str.format` sandboxed):

- `.name` on a dict is its key first (`input.items` is the field, not `dict.items`).
- Amplifiers are checked *before* they run and charged to a per-evaluation work budget:
  `+` on texts and lists (both sides measured deeply: a loop doubling a list stops at the
  limit), `*` (sequence × count, measured deeply, so `[big] * n` counts big n times), `**` and `*` on
  integers (result ≤ MAX_INT_BITS), `%`/`format`/`str.format` (widths, `*`, placeholders × the
  size of the arguments), `range` (≤ MAX_RANGE), str.ljust/rjust/center/zfill/expandtabs/
  replace/join/translate, int.to_bytes, dict.fromkeys, the filters center, indent, wordwrap,
  replace, join, sum, slice, batch, format and tojson; turning a list or dict into text (output,
  `~`, string-like filters) is charged by its size. No single value may exceed `max_size`.
- A wall-clock deadline is checked at every attribute, item, call, filter, test, `~` and loop
  iteration; loop iterations are charged to the budget (templates only: expressions have no loops).
- Globals: `range` (checked) and `dict`; templates also `namespace`, `cycler`, `joiner`. No `lipsum`.
  The filter `urlize` is removed. No constant folding at compile time (a folded constant would
  live in the compile cache).
- Expressions: at most MAX_EXPRESSION_CHARS characters, nesting at most MAX_DEPTH, no `self`.

Errors come out as TemplatingError with a message meant for the workflow author.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime as dt
import functools
import itertools
import json
import operator
import re
import string
import time
import types
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.environment import Template
from jinja2.exceptions import SecurityError, TemplateError
from jinja2.filters import (
    do_batch,
    do_center,
    do_format,
    do_indent,
    do_replace,
    do_wordwrap,
    sync_do_join,
    sync_do_slice,
    sync_do_sum,
)
from jinja2.parser import Parser
from jinja2.runtime import Context, Undefined, missing
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Cycler, Joiner, Namespace, _PassArg, pass_environment, pass_eval_context

MAX_RANGE = 100_000  # numbers one range() may produce
MAX_INT_BITS = 4_096  # largest integer `*` and `**` may build (about 1,233 digits)
MAX_EXPRESSION_CHARS = 10_000  # characters of one {{ … }} expression
MAX_DEPTH = 64  # nesting of one expression (brackets, operators, filters)
MAX_JSON_INDENT = 16


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """What one evaluation may do: the biggest value or text it may build, the total it may build
    (characters, items, loop iterations), and its wall-clock time."""

    max_size: int = 1_000_000
    max_work: int = 10_000_000
    max_seconds: float = 1.0


EXPRESSION_LIMITS = Limits()


class LimitExceeded(SecurityError):
    """A sandbox limit (size, work, time, nesting) was hit."""


class MissingValue(UndefinedError):
    """An undefined name, key, attribute or index was used; `obj` is what it was looked up on
    (`missing` for a top-level name), `name` what was looked up."""

    def __init__(self, message: str | None, obj: Any, name: Any) -> None:
        super().__init__(message)
        self.obj = obj
        self.name = name


class FilterError(ValueError):
    """A filter given a value it cannot handle; the message is shown as it is."""


class TemplatingError(Exception):
    """An expression or template that cannot be compiled or evaluated.

    `expression` is the failing `{{ … }}` source (None for a whole template), `message` is for
    people, `cause` is the original exception.
    """

    def __init__(self, message: str, expression: str | None = None, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.expression = expression
        self.cause = cause


# --- budget ------------------------------------------------------------------------------------


class _Budget:
    __slots__ = ("limits", "deadline", "work_left", "ticks")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.max_seconds
        self.work_left = limits.max_work
        self.ticks = 0


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("templating_budget", default=None)


@contextlib.contextmanager
def limited(limits: Limits) -> Iterator[None]:
    """Run the evaluations inside with one fresh budget (size, work, deadline)."""
    token = _BUDGET.set(_Budget(limits))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _max_size() -> int:
    budget = _BUDGET.get()
    return (budget.limits if budget else EXPRESSION_LIMITS).max_size


def _tick() -> None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.ticks += 1
        if budget.ticks & 63 == 0 and time.monotonic() > budget.deadline:
            raise LimitExceeded(f"took longer than {budget.limits.max_seconds:g} s")


def _charge(amount: int, what: str) -> None:
    """Account for `amount` characters/items about to be built; refuse it above the limits."""
    budget = _BUDGET.get()
    limits = budget.limits if budget else EXPRESSION_LIMITS
    if amount > limits.max_size:
        raise LimitExceeded(f"{what} would be {amount:,} characters or items long; the limit is {limits.max_size:,}")
    if budget is not None:
        budget.work_left -= amount
        if budget.work_left < 0:
            raise LimitExceeded(f"builds more than {limits.max_work:,} characters or items in all")
        if time.monotonic() > budget.deadline:
            raise LimitExceeded(f"took longer than {limits.max_seconds:g} s")


def deep_size(value: Any, limit: int) -> int:
    """Characters and items in `value`, counting nested containers; stops counting above `limit`."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is bytes:
            total += len(item)
        elif kind is list or kind is tuple:
            total += 1
            if len(item) > limit - total:
                return limit + 1
            stack.extend(item)
        elif kind is dict:
            total += 1
            if 2 * len(item) > limit - total:
                return limit + 1
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, str | bytes):
            total += len(item)
        else:
            total += 1
        if total > limit:
            return total
    return total


def _charge_text_of(value: Any, what: str) -> None:
    """Charge turning a container into text by its size (strings and scalars cost nothing extra)."""
    if type(value) in (list, tuple, dict):
        _charge(deep_size(value, _max_size()), what)


# --- checked operations ------------------------------------------------------------------------


def checked_range(*args: int) -> range:
    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise LimitExceeded(f"range() of {len(numbers):,} numbers; the limit is {MAX_RANGE:,}")
    _charge(len(numbers), "range()")
    return numbers


def _int_bits(value: Any) -> int:
    return abs(value).bit_length() if isinstance(value, int) else 0


def _checked_mul(left: Any, right: Any) -> Any:
    if isinstance(left, int) and isinstance(right, int) and not isinstance(left, bool) \
            and _int_bits(left) + _int_bits(right) > MAX_INT_BITS:
        raise LimitExceeded(f"the product would have more than {MAX_INT_BITS:,} bits")
    for sequence, count in ((left, right), (right, left)):
        if isinstance(sequence, str | bytes | list | tuple) and isinstance(count, int) and count > 1:
            size = deep_size(sequence, _max_size())
            _charge(size * count if size else count, "repeating a sequence with *")
    return operator.mul(left, right)


def _checked_add(left: Any, right: Any) -> Any:
    if isinstance(left, str | bytes | list | tuple) and isinstance(right, str | bytes | list | tuple):
        limit = _max_size()
        _charge(deep_size(left, limit) + deep_size(right, limit), "joining with +")
    return operator.add(left, right)


def _checked_pow(left: Any, right: Any) -> Any:
    if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1 \
            and (right > MAX_INT_BITS or _int_bits(left) * right > MAX_INT_BITS):
        raise LimitExceeded(f"the power would have more than {MAX_INT_BITS:,} bits")
    return operator.pow(left, right)


def _number_arg(text: str) -> int:
    if len(text) > 9:
        raise LimitExceeded(f"the format width {text[:12]}… is too big")
    return int(text)


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?(.)", re.DOTALL)


def _values_size(args: Any, kwargs: Mapping[str, Any] | None = None) -> int:
    values = list(args.values()) if isinstance(args, Mapping) else (list(args) if isinstance(args, tuple | list)
                                                                     else [args])
    values += list((kwargs or {}).values())
    limit = _max_size()
    return max((deep_size(value, limit) if not isinstance(value, int | float) else 32 for value in values),
               default=0)


def _check_percent_format(fmt: str | bytes, args: Any, kwargs: Mapping[str, Any] | None = None) -> None:
    text = fmt.decode("latin-1") if isinstance(fmt, bytes) else fmt
    fields = widths = 0
    for match in _PERCENT_SPEC.finditer(text):
        if match.group(3) == "%":
            continue
        fields += 1
        for number in (match.group(1), match.group(2)):
            if number == "*":
                raise LimitExceeded("'*' widths are not allowed in % formats")
            if number:
                widths += _number_arg(number)
    if fields:
        _charge(len(text) + fields * _values_size(args, kwargs) + widths, "the formatted text")


def _check_brace_format(fmt: str, args: Any, kwargs: Mapping[str, Any]) -> None:
    fields = widths = 0
    for _literal, field, spec, _conversion in string.Formatter().parse(fmt):
        if field is None:
            continue
        fields += 1
        if spec:
            if "{" in spec:
                raise LimitExceeded("nested {…} inside a format spec is not allowed")
            widths += sum(_number_arg(number) for number in re.findall(r"\d+", spec))
    if fields:
        _charge(len(fmt) + fields * _values_size(args, kwargs) + widths, "the formatted text")


def _checked_mod(left: Any, right: Any) -> Any:
    if isinstance(left, str | bytes):
        _check_percent_format(left, right)
    return operator.mod(left, right)


def _arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], position: int, name: str, default: Any) -> Any:
    return args[position] if len(args) > position else kwargs.get(name, default)


def _guard_method(owner: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Check a call of an amplifying method of str/bytes/int/dict; returns a replacement result or
    `missing` to let the call run as it is."""
    if isinstance(owner, str | bytes):
        if name in ("ljust", "rjust", "center", "zfill"):
            width = _arg(args, kwargs, 0, "width", 0)
            if isinstance(width, int):
                _charge(max(width, len(owner)), f"{name}()")
        elif name == "expandtabs":
            tabsize = _arg(args, kwargs, 0, "tabsize", 8)
            if isinstance(tabsize, int):
                tab = "\t" if isinstance(owner, str) else b"\t"
                _charge(len(owner) + owner.count(tab) * max(tabsize, 0), "expandtabs()")
        elif name == "replace":
            _check_replace(owner, _arg(args, kwargs, 0, "old", ""), _arg(args, kwargs, 1, "new", ""),
                           _arg(args, kwargs, 2, "count", -1))
        elif name == "join" and args:
            items = list(itertools.islice(args[0], _max_size() + 1))
            limit = _max_size()
            _charge(sum(deep_size(item, limit) for item in items) + len(owner) * max(len(items) - 1, 0), "join()")
            return owner.join(items)
        elif name == "translate" and isinstance(owner, str) and args and isinstance(args[0], Mapping):
            longest = max((len(value) for value in args[0].values() if isinstance(value, str)), default=1)
            _charge(len(owner) * max(longest, 1), "translate()")
    elif isinstance(owner, int) and name == "to_bytes":
        length = _arg(args, kwargs, 0, "length", 1)
        if isinstance(length, int):
            _charge(length, "to_bytes()")
    elif owner is dict and name == "fromkeys" and args:
        keys = list(itertools.islice(args[0], _max_size() + 1))
        value = _arg(args, kwargs, 1, "value", None)
        _charge(len(keys) * max(deep_size(value, _max_size()), 1), "dict.fromkeys()")
        return dict.fromkeys(keys, value)
    elif isinstance(owner, dt.date | dt.time) and name == "strftime" and args and isinstance(args[0], str) \
            and len(args[0]) > 1_000:
        raise LimitExceeded("strftime formats are limited to 1,000 characters")
    return missing


def _check_replace(text: Any, old: Any, new: Any, count: Any = None) -> None:
    if not isinstance(text, str | bytes) or not isinstance(old, str | bytes) or not isinstance(new, str | bytes):
        return
    occurrences = len(text) + 1 if not old else text.count(old)
    if isinstance(count, int) and count >= 0:
        occurrences = min(occurrences, count)
    if len(new) > len(old):
        _charge(len(text) + occurrences * (len(new) - len(old)), "replace()")


# --- filters -----------------------------------------------------------------------------------


def _center(value: Any, width: int = 80) -> str:
    if isinstance(width, int):
        _charge(width, "center")
    return do_center(value, width)


def _indent(value: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    text = str(value)
    unit = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    _charge(len(text) + (text.count("\n") + 1) * max(unit, 0), "indent")
    return do_indent(text, width, first, blank)


@pass_environment
def _wordwrap(environment: Any, value: Any, width: int = 79, break_long_words: bool = True,
              wrapstring: str | None = None, break_on_hyphens: bool = True) -> str:
    text = str(value)
    separator = len(wrapstring) if isinstance(wrapstring, str) else 1
    lines = len(text) // max(width, 1) + text.count(" ") + text.count("\n") + 1 if isinstance(width, int) else 1
    _charge(len(text) + lines * separator, "wordwrap")
    return do_wordwrap(environment, text, width, break_long_words, wrapstring, break_on_hyphens)


@pass_eval_context
def _replace(eval_ctx: Any, value: Any, old: Any, new: Any, count: int | None = None) -> str:
    _charge_text_of(value, "replace")
    _check_replace(str(value), str(old), str(new), count)
    return do_replace(eval_ctx, value, old, new, count)


@pass_eval_context
def _join(eval_ctx: Any, value: Any, d: str = "", attribute: str | int | None = None) -> str:
    items = list(itertools.islice(value, _max_size() + 1))
    limit = _max_size()
    _charge(sum(deep_size(item, limit) for item in items) + len(str(d)) * max(len(items) - 1, 0), "join")
    return sync_do_join(eval_ctx, items, d, attribute)


@pass_environment
def _sum(environment: Any, iterable: Any, attribute: str | int | None = None, start: Any = 0) -> Any:
    items = list(iterable)
    if isinstance(start, list | tuple):
        if attribute is not None:
            items = [environment.getitem(item, attribute) if isinstance(attribute, int)
                     else environment.getattr(item, attribute) for item in items]
        _charge(sum(len(item) for item in items if isinstance(item, list | tuple)) + len(start), "sum")
        result = list(start)
        for item in items:
            result.extend(item)
        return type(start)(result) if isinstance(start, tuple) else result
    return sync_do_sum(environment, items, attribute, start)


def _slice(value: Any, slices: int, fill_with: Any = None) -> Any:
    if isinstance(slices, int):
        _charge(slices * (1 if fill_with is None else max(deep_size(fill_with, _max_size()), 1)), "slice")
    return sync_do_slice(value, slices, fill_with)


def _batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
    if fill_with is not None and isinstance(linecount, int):
        _charge(linecount * max(deep_size(fill_with, _max_size()), 1), "batch")
    return do_batch(value, linecount, fill_with)


def _format(value: Any, *args: Any, **kwargs: Any) -> str:
    _check_percent_format(str(value), args, kwargs)
    return do_format(value, *args, **kwargs)


def _tojson(value: Any, indent: int | str | None = None) -> str:
    if isinstance(indent, int) and indent > MAX_JSON_INDENT or isinstance(indent, str) and \
            len(indent) > MAX_JSON_INDENT:
        raise LimitExceeded(f"tojson indents by at most {MAX_JSON_INDENT}")
    _charge_text_of(value, "tojson")
    return json.dumps(json_value(value), ensure_ascii=False, indent=indent)


def _fromjson(value: Any) -> Any:
    if not isinstance(value, str | bytes):
        raise FilterError(f"fromjson expects text, not {_type_name(value)}")
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise FilterError(f"fromjson: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None


def _isoformat(value: Any) -> str:
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, str):
        return _todatetime(value).isoformat()
    raise FilterError(f"isoformat expects a date or time, not {_type_name(value)}")


def _todatetime(value: Any) -> dt.datetime:
    """An ISO 8601 text, a Unix timestamp or a datetime → a timezone-aware datetime (naive = UTC)."""
    if isinstance(value, dt.datetime):
        result = value
    elif isinstance(value, dt.date):
        result = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(value, dt.UTC)
    elif isinstance(value, str):
        try:
            result = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise FilterError(f"todatetime: {value[:60]!r} is not an ISO 8601 date or time") from None
    else:
        raise FilterError(f"todatetime expects an ISO 8601 text or a timestamp, not {_type_name(value)}")
    return result if result.tzinfo else result.replace(tzinfo=dt.UTC)


#: filters whose first argument is turned into text (so a list or dict there is charged by its size)
_STRINGIFYING = frozenset({"string", "upper", "lower", "title", "capitalize", "trim", "striptags", "wordcount",
                           "truncate", "urlencode", "escape", "e", "forceescape", "safe", "pprint", "center",
                           "indent", "wordwrap", "format", "xmlattr"})

_OVERRIDES: dict[str, Any] = {
    "center": _center, "indent": _indent, "wordwrap": _wordwrap, "replace": _replace, "join": _join,
    "sum": _sum, "slice": _slice, "batch": _batch, "format": _format, "tojson": _tojson, "json": _tojson,
    "fromjson": _fromjson, "isoformat": _isoformat, "todatetime": _todatetime,
}


def _guarded(name: str, function: Any, stringifies: bool) -> Any:
    offset = 1 if _PassArg.from_obj(function) is not None else 0

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        _tick()
        if stringifies and len(args) > offset:
            _charge_text_of(args[offset], f"the filter {name}")
        return function(*args, **kwargs)

    return guarded


# --- code generation: checked `~` and loops -----------------------------------------------------


class _CodeGenerator(CodeGenerator):
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:  # noqa: N802 - Jinja visitor name
        self.write("environment.checked_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def visit_For(self, node: nodes.For, frame: Frame) -> None:  # noqa: N802 - Jinja visitor name
        if not getattr(node, "_checked", False):
            node.iter = nodes.Call(nodes.EnvironmentAttribute("checked_iter"), [node.iter], [], None, None,
                                   lineno=node.lineno)
            node._checked = True  # type: ignore[attr-defined]
        super().visit_For(node, frame)


# --- the sandbox -------------------------------------------------------------------------------


class _Undefined(StrictUndefined):
    """Strict: using it raises MissingValue, which keeps what was looked up on and the name."""

    __slots__ = ()

    def __init__(self, hint: str | None = None, obj: Any = missing, name: str | None = None,
                 exc: type[TemplateError] = UndefinedError) -> None:
        super().__init__(hint, obj, name, exc)
        if exc is UndefinedError:
            self._undefined_exception = self._missing  # type: ignore[assignment]

    def _missing(self, message: str | None = None) -> MissingValue:
        return MissingValue(message, self._undefined_obj, self._undefined_name)


class Sandbox(ImmutableSandboxedEnvironment):
    """ImmutableSandboxedEnvironment with size, work and time limits (see the module docstring)."""

    code_generator_class = _CodeGenerator
    intercepted_binops = frozenset({"+", "*", "**", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(undefined=_Undefined, autoescape=False, optimized=False, **options)
        self.globals.clear()
        self.globals.update(range=checked_range, dict=dict)
        self.filters.pop("urlize", None)
        self.filters.update(_OVERRIDES)
        self.filters = {name: _guarded(name, function, name in _STRINGIFYING) for name, function in
                        self.filters.items()}
        self.tests = {name: _guarded(name, function, False) for name, function in self.tests.items()}
        self.binop_table = {**self.binop_table, "+": _checked_add, "*": _checked_mul, "**": _checked_pow,
                            "%": _checked_mod}

    def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
        _tick()
        return self.binop_table[op](left, right)

    def getattr(self, obj: Any, attribute: str) -> Any:
        _tick()
        if isinstance(obj, Undefined):
            obj._fail_with_undefined_error()  # say what is undefined rather than "unsafe attribute"
        if type(obj) is dict or isinstance(obj, Mapping):
            try:
                return obj[attribute]
            except KeyError:
                pass
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _tick()
        if isinstance(obj, Undefined):
            obj._fail_with_undefined_error()
        return super().getitem(obj, argument)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        _tick()
        owner = getattr(__obj, "__self__", None)
        if owner is not None and isinstance(__obj, types.BuiltinMethodType):
            replaced = _guard_method(owner, __obj.__name__, args, kwargs)
            if replaced is not missing:
                return replaced
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Any:
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        fmt = value.__self__

        @functools.wraps(wrapper)
        def checked(*args: Any, **kwargs: Any) -> str:
            _tick()
            if value.__name__ == "format_map":
                _check_brace_format(fmt, (), args[0] if args and isinstance(args[0], Mapping) else {})
            else:
                _check_brace_format(fmt, args, kwargs)
            return wrapper(*args, **kwargs)

        return checked

    def checked_concat(self, parts: tuple[Any, ...]) -> str:
        _tick()
        for part in parts:
            _charge_text_of(part, "the text built with ~")
        text = "".join(map(str, parts))
        _charge(len(text), "the text built with ~")
        return text

    def checked_iter(self, iterable: Any) -> Iterator[Any]:
        budget = _BUDGET.get()
        for item in iterable:
            if budget is not None:
                budget.work_left -= 1
                if budget.work_left < 0:
                    raise LimitExceeded(f"more than {budget.limits.max_work:,} loop iterations and built items")
                budget.ticks += 1
                if budget.ticks & 63 == 0 and time.monotonic() > budget.deadline:
                    raise LimitExceeded(f"took longer than {budget.limits.max_seconds:g} s")
            yield item


def _template_finalize(environment: Any, value: Any) -> Any:
    _tick()
    _charge_text_of(value, "the output")
    return value


@functools.cache
def expression_environment() -> Sandbox:
    """For single expressions (compile_text finds the `{{ … }}` and compiles each on its own)."""
    return Sandbox(keep_trailing_newline=True)


@functools.cache
def template_environment() -> Sandbox:
    """Full templates (loops, conditions, namespace) for context.transform."""
    env = Sandbox(keep_trailing_newline=True, finalize=pass_environment(_template_finalize))
    env.globals.update(namespace=Namespace, cycler=Cycler, joiner=Joiner)
    return env


# --- values ------------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a text", list: "a list",
            tuple: "a list", dict: "an object"}.get(type(value), f"a {type(value).__name__}")


_SCALARS = (str, int, float, bool, type(None))
_SEQUENCES = (list, tuple, set, frozenset, range, types.GeneratorType, Iterator, KeysView, ValuesView, ItemsView)


def json_value(value: Any) -> Any:
    """The value as plain JSON data: new dicts and lists (so callers cannot change what they came
    from), generators/tuples/sets as lists, dates as ISO 8601 text, durations as seconds.
    An undefined value raises MissingValue; functions and other objects raise TypeError."""
    if type(value) in _SCALARS:
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, parent, key = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is float or kind is bool or item is None:
            parent[key] = item
        elif isinstance(item, Undefined):
            item._fail_with_undefined_error()
        elif isinstance(item, Mapping):
            new: dict[str, Any] = {}
            parent[key] = new
            for name, child in item.items():
                name = name if isinstance(name, str) else _text(name)
                new[name] = None
                stack.append((child, new, name))
        elif isinstance(item, _SEQUENCES):
            children = list(item)
            new_list: list[Any] = [None] * len(children)
            parent[key] = new_list
            stack.extend((child, new_list, index) for index, child in enumerate(children))
        elif isinstance(item, str):  # Markup and other str subclasses
            parent[key] = str(item)
        elif isinstance(item, int | float):
            parent[key] = item if not isinstance(item, bool) else bool(item)
        elif isinstance(item, dt.date | dt.time):
            parent[key] = item.isoformat()
        elif isinstance(item, dt.timedelta):
            parent[key] = item.total_seconds()
        else:
            raise TypeError(f"the value is {_type_name(item)}, which is not data")
    return root[0]


def _text(value: Any) -> str:
    """How a value reads inside a text: as is for text, empty for null, true/false, numbers as
    usual, dates as ISO 8601, lists and objects as JSON."""
    kind = type(value)
    if kind is str:
        return value
    if value is None:
        return ""
    if kind is bool:
        return "true" if value else "false"
    if kind is int or kind is float:
        return str(value)
    if isinstance(value, Undefined):
        value._fail_with_undefined_error()
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value.total_seconds())
    _charge(deep_size(value, _max_size()), "the text of a list or object")
    return json.dumps(json_value(value), ensure_ascii=False)


# --- compiling ---------------------------------------------------------------------------------


def _syntax_message(exc: TemplateSyntaxError, source: str = "") -> str:
    message = exc.message or "syntax error"
    if message == "chunk after expression":
        return "unexpected text after the expression"
    return message.replace("'end of template'", "end of expression").replace("end of template", "end of expression")


def _depth(node: nodes.Node) -> int:
    deepest = 0
    stack = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in current.iter_child_nodes())
    return deepest


@functools.lru_cache(maxsize=4096)
def compile_expression(source: str) -> Template:
    """Compile one expression (the text between `{{` and `}}`); raises TemplatingError."""
    env = expression_environment()
    shown = source.strip()
    if not shown:
        raise TemplatingError("the expression is empty", shown)
    if len(source) > MAX_EXPRESSION_CHARS:
        raise TemplatingError(f"the expression is longer than {MAX_EXPRESSION_CHARS:,} characters", shown[:60] + "…")
    try:
        parser = Parser(env, source, state="variable")
        expr = parser.parse_expression()
        if not parser.stream.eos:
            raise TemplateSyntaxError(f"unexpected '{parser.stream.current.value}' after the expression",
                                      parser.stream.current.lineno)
    except TemplateSyntaxError as exc:
        raise TemplatingError(_syntax_message(exc), shown, exc) from None
    except RecursionError as exc:
        raise TemplatingError("the expression is nested too deeply", shown, exc) from None
    if _depth(expr) > MAX_DEPTH:
        raise TemplatingError(f"the expression is nested more than {MAX_DEPTH} levels deep", shown)
    if any(name.name == "self" for name in [expr, *expr.find_all(nodes.Name)] if isinstance(name, nodes.Name)):
        raise TemplatingError("'self' is not available in expressions", shown)
    expr.set_environment(env)
    body = [nodes.Assign(nodes.Name("result", "store"), expr, lineno=1)]
    try:
        return env.from_string(nodes.Template(body, lineno=1))
    except (TemplateError, SyntaxError, RecursionError) as exc:
        raise TemplatingError(describe(exc), shown, exc) from None


@dataclasses.dataclass(frozen=True, slots=True)
class Expression:
    source: str  # between {{ and }}, stripped
    template: Template  # `result = <expression>`

    def __call__(self, parent: dict[str, Any]) -> Any:
        """The raw value (may be a generator) over `parent` (names and globals); raises TemplatingError."""
        try:
            context = Context(self.template.environment, parent, None, {})
            for _ in self.template.root_render_func(context):
                pass
            value = context.vars["result"]
            if isinstance(value, Undefined):
                value._fail_with_undefined_error()
            return value
        except Exception as exc:  # noqa: BLE001 - undefined names, type errors, sandbox refusals
            raise TemplatingError(describe(exc, parent), self.source, exc) from None


@dataclasses.dataclass(frozen=True, slots=True)
class CompiledText:
    """A text with `{{ … }}` expressions: literal strings and Expressions in order; `whole` is the
    expression when the text is exactly one (whitespace around allowed)."""

    parts: tuple[str | Expression, ...]
    whole: Expression | None

    def evaluate(self, names: Mapping[str, Any]) -> Any:
        """The native value of a whole expression, else the rendered text. Call inside `limited`."""
        names = {**expression_environment().globals, **names}
        whole = self.whole
        if whole is not None:
            value = whole(names)
            try:
                return json_value(value)
            except Exception as exc:  # noqa: BLE001
                raise TemplatingError(describe(exc, names), whole.source, exc) from None
        pieces: list[str] = []
        size = 0
        limit = _max_size()
        for part in self.parts:
            if isinstance(part, Expression):
                value = part(names)
                try:
                    piece = _text(value)
                except Exception as exc:  # noqa: BLE001
                    raise TemplatingError(describe(exc, names), part.source, exc) from None
            else:
                piece = part
            size += len(piece)
            if size > limit:
                raise TemplatingError(f"the text would be longer than {limit:,} characters")
            pieces.append(piece)
        return "".join(pieces)


def _original_length(text: str, normalized: int) -> int:
    """How many characters of `text` make `normalized` characters once \\r\\n and \\r become \\n."""
    if "\r" not in text[:normalized]:
        return normalized
    position = 0
    for _ in range(normalized):
        position += 2 if text.startswith("\r\n", position) else 1
    return position


def _excerpt(text: str) -> str:
    return text[:40] + ("…" if len(text) > 40 else "")


def _next_expression(source: str, start: int) -> tuple[str, int, bool]:
    """Lex the expression that opens at `start`: (its source, where the text goes on, strip before)."""
    window = source[start:start + MAX_EXPRESSION_CHARS + 64]
    inner: list[str] = []
    consumed = 0
    strip_before = False
    try:
        for _line, token, value in expression_environment().lexer.tokeniter(window, None):
            consumed += len(value)
            if token == "variable_begin":
                strip_before = value.endswith("-")
            elif token == "variable_end":
                return "".join(inner), start + _original_length(window, consumed), strip_before
            else:
                inner.append(value)
    except TemplateSyntaxError as exc:
        if "}}" in source[start + 2:] and len(window) == len(source) - start:
            raise TemplatingError(_syntax_message(exc), _excerpt(window), exc) from None
    if len(window) < len(source) - start:
        raise TemplatingError(f"the expression is longer than {MAX_EXPRESSION_CHARS:,} characters",
                              _excerpt(window))
    raise TemplatingError("'{{' is not closed by '}}' (for a literal '{{' write {{ '{{' }})", _excerpt(window))


MAX_CACHED_TEXT = 20_000  # longer texts are split on every use (their expressions stay cached)


def compile_text(source: str) -> CompiledText:
    """Split a text into literal pieces and compiled expressions (LRU-cached); raises TemplatingError.

    Only `{{ … }}` is special (`{%` and `{#` are plain text); `{{-` and `-}}` strip the whitespace
    next to them. Literal text is kept exactly (line endings included).
    """
    return _compile_text_cached(source) if len(source) <= MAX_CACHED_TEXT else _compile_text(source)


def _compile_text(source: str) -> CompiledText:
    parts: list[str | Expression] = []
    position = 0
    while (start := source.find("{{", position)) >= 0:
        expression, position_after, strip_before = _next_expression(source, start)
        literal = source[position:start]
        if strip_before:
            literal = literal.rstrip()
        if literal:
            parts.append(literal)
        parts.append(Expression(expression.strip(), compile_expression(expression)))
        position = position_after
    if position < len(source):
        parts.append(source[position:])
    expressions = [part for part in parts if isinstance(part, Expression)]
    whole = expressions[0] if len(expressions) == 1 and all(
        isinstance(part, Expression) or not part.strip() for part in parts) else None
    return CompiledText(tuple(parts), whole)


_compile_text_cached = functools.lru_cache(maxsize=4096)(_compile_text)


@functools.lru_cache(maxsize=512)
def compile_template(source: str) -> Template:
    """A full template (context.transform); raises TemplatingError."""
    try:
        return template_environment().from_string(source)
    except TemplateSyntaxError as exc:
        raise TemplatingError(f"line {exc.lineno}: {_syntax_message(exc)}", None, exc) from None
    except (TemplateError, SyntaxError, RecursionError) as exc:
        raise TemplatingError(describe(exc), None, exc) from None


def render_template(source: str, names: Mapping[str, Any], limits: Limits) -> str:
    """Render a full template with a fresh budget; the output is capped at limits.max_size."""
    template = compile_template(source)
    pieces: list[str] = []
    size = 0
    with limited(limits):
        try:
            for piece in template.root_render_func(template.new_context(dict(names))):
                size += len(piece)
                if size > limits.max_size:
                    raise LimitExceeded(f"the output would be longer than {limits.max_size:,} characters")
                pieces.append(piece)
        except Exception as exc:  # noqa: BLE001
            raise TemplatingError(describe(exc, names), None, exc) from None
    return "".join(pieces)


def evaluate_text(source: str, names: Mapping[str, Any], limits: Limits = EXPRESSION_LIMITS) -> Any:
    """Compile (cached) and evaluate one text with a fresh budget."""
    compiled = compile_text(source)
    with limited(limits):
        return compiled.evaluate(names)


# --- messages ----------------------------------------------------------------------------------


def _step(name: Any) -> str:
    if isinstance(name, str) and name.isidentifier():
        return f".{name}"
    return f"[{name!r}]"


def locate(names: Mapping[str, Any], target: Any, limit: int = 20_000) -> str | None:
    """The path (`nodes.fetch.output.rows[3]`) at which `target` (by identity) sits in `names`."""
    queue: list[tuple[Any, str]] = [(value, name) for name, value in names.items()]
    seen = 0
    while queue and seen < limit:
        next_queue: list[tuple[Any, str]] = []
        for value, path in queue:
            if value is target:
                return path
            seen += 1
            if isinstance(value, Mapping):
                next_queue.extend((child, path + _step(key)) for key, child in value.items())
            elif isinstance(value, list | tuple):
                next_queue.extend((child, f"{path}[{index}]") for index, child in enumerate(value))
        queue = next_queue
    return None


def _fields(mapping: Mapping[Any, Any]) -> str:
    keys = [str(key) for key in itertools.islice(mapping.keys(), 11)]
    return ", ".join(keys[:10]) + (", …" if len(keys) > 10 else "") if keys else "none"


def describe_missing(exc: MissingValue, names: Mapping[str, Any]) -> str:
    if exc.obj is missing:
        return f"'{exc.name}' is undefined"
    path = locate(names, exc.obj)
    if path is None:
        return exc.message or "undefined value"
    what = f"{path}{_step(exc.name) if not isinstance(exc.name, int) else f'[{exc.name}]'} is undefined"
    if isinstance(exc.obj, Mapping):
        return f"{what} — {path} has no field {exc.name!r} (its fields: {_fields(exc.obj)})"
    if isinstance(exc.obj, list | tuple | str) and isinstance(exc.name, int):
        return f"{what} — {path} has {len(exc.obj)} {'characters' if isinstance(exc.obj, str) else 'items'}"
    return f"{what} — {path} is {_type_name(exc.obj)}"


def describe(exc: BaseException, names: Mapping[str, Any] | None = None) -> str:
    """A message for the workflow author, never a traceback."""
    if isinstance(exc, TemplatingError):
        return exc.message
    if isinstance(exc, MissingValue):
        return describe_missing(exc, names or {})
    if isinstance(exc, TemplateSyntaxError):
        return _syntax_message(exc)
    if isinstance(exc, TemplateError):
        return exc.message or type(exc).__name__
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, MemoryError):
        return "out of memory"
    if isinstance(exc, OverflowError):
        return f"number too big ({exc.args[-1] if exc.args else exc})"
    if isinstance(exc, FilterError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
