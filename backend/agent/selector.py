"""Automatic toolbox preselection before an agent's first round (issue 21, seed 004's Auto Tool
Selector) and seed 004's marketplace budget rule.

The user's request (its message, the last user turns of the chat, attached file names) is ranked
with BM25 (``bm25s``, no model download) against one document per toolbox: its label and
description, its tools' names, labels and descriptions, and its example requests in German and
English (:class:`backend.actions.toolboxes.Toolbox.examples`; an MCP toolbox has its tools only).
Every toolbox of the catalogue is a document, so that the words of the request are weighed
against all of them, but only *requestable* toolboxes (already filtered by rights and connections)
can be selected: at most ``max_preselected``, each scoring at least :data:`MIN_SCORE` and at least
:data:`RELATIVE_SCORE` of the best score. The selector never refuses anything: whatever it does
not select stays requestable with requestToolbox.

A pseudo-document of purchase, offer, price and shipping requests detects a marketplace search
(no site-specific rule); such a run may make at most 3 web searches (all web-search tools
together) and 5 page fetches (:data:`MARKETPLACE_LIMITS`).

Only a bounded part of a long message is read (:func:`request_text`), so a message of 100,000
characters is ranked as fast as a short one; a request in a language without examples simply
scores lower and selects less.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import bm25s

from backend.actions.base import Action
from backend.actions.openai_tools import tool_name
from backend.actions.toolboxes import TOOLBOXES, Toolbox

MIN_SCORE = 1.0  # a toolbox scoring less is never selected (smalltalk selects nothing)
RELATIVE_SCORE = 0.7  # … nor one scoring less than this share of the best document's score
MARKETPLACE_MIN_SCORE = 2.0
MARKETPLACE = "marketplace"
# Seed 004: a marketplace search ends after about 3 searches (both engines together) and 5 fetches.
MARKETPLACE_LIMITS = {"webSearch": 3, "pageFetch": 5}

HEAD_CHARS = 4_000  # of a long message, its beginning …
TAIL_CHARS = 1_500  # … and its end are read
HISTORY_TURNS = 2  # the last user turns of the chat that count, besides the message
HISTORY_CHARS = 600  # of each
MAX_QUERY_TOKENS = 400
EXCERPT_CHARS = 200

MARKETPLACE_EXAMPLES = (
    "Where can I buy this printer cheapest, with price and shipping costs?",
    "Find offers for a used road bike for sale under 500 francs",
    "Compare prices in online shops and order the best deal",
    "Is there an offer or auction for this lens on a marketplace?",
    "What does delivery cost, and which dealer has it in stock?",
    "Second-hand sofa for sale, buy used or new",
    "Wo kann ich diesen Drucker am günstigsten kaufen, mit Preis und Versandkosten?",
    "Finde Angebote für ein gebrauchtes Velo, das zum Verkauf steht",
    "Vergleiche die Preise in Onlineshops und bestelle das billigste Angebot",
    "Gibt es ein Inserat oder eine Auktion für dieses Objektiv?",
    "Was kostet der Versand, und welcher Händler hat es an Lager und lieferbar?",
    "Schnäppchen: gebraucht oder neu kaufen",
    "Où acheter au meilleur prix, avec livraison? Dove comprare al miglior prezzo, con spedizione?",
)

STOPWORDS = frozenset("""
a an and are as at be been but by can could do does did for from have has had how i if in into is it its
me my of on or our please so that the their them then there these this those to us was we were what
when where which who why will with would you your yours hi hello hey thanks thank ok okay yes no
aber alle als also am an auch auf aus bei bin bis bitte da dann das dass dein deine dem den der des die
doch du ein eine einem einen einer es für gibt habe haben hallo hat ich ihr im in ist ja kann kannst
mal man mich mir mit nach nein nicht noch nur oder schon sehr sein sich sie sind so und uns unser
vom von vor war was wenn wer wie wir wird zu zum zur danke hey guten tag
""".split())
# Word forms that mean the same here (after lower-casing; before the suffix is trimmed).
SYNONYMS = {"email": "mail", "emails": "mail", "mails": "mail", "todo": "task", "todos": "task", "tasks": "task",
            "aufgabe": "task", "aufgaben": "task", "ticket": "issue", "tickets": "issue", "vorgang": "issue",
            "bug": "issue", "bugs": "issue", "inbox": "posteingang", "chart": "diagramm", "charts": "diagramm"}
SUFFIXES = ("ungen", "ung", "en", "er", "es", "e", "s", "n")
STEM_LENGTH = 20  # tokens are cut to this many characters after trimming one suffix
COMPOUND_PART = 5  # a German compound unknown to the index counts as its known head or tail this long at least
EXAMPLE_WEIGHT = 2  # the example requests count this many times (tool descriptions once, first sentence only)
K1, B = 1.2, 0.75  # BM25 parameters (the usual ones)
_WORD = re.compile(r"[^\W_]+")
_AMERICAN = re.compile(r"iz(e|ed|es|ing|ation)$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _stem(token: str) -> str:
    """A light German/English stem: one common suffix trimmed, then at most STEM_LENGTH characters."""
    token = SYNONYMS.get(token, token)
    token = _AMERICAN.sub(r"is\1", token)  # summarize → summarise
    for suffix in SUFFIXES:
        if token.endswith(suffix) and len(token) - len(suffix) >= 4:
            token = token[: -len(suffix)]
            break
    return token[:STEM_LENGTH]


def tokens(text: str) -> list[str]:
    """Lower-cased Unicode word tokens (camelCase split), stop words dropped, lightly stemmed."""
    words = _WORD.findall(_CAMEL.sub(" ", text).lower())
    return [_stem(w) for w in words if len(w) > 1 and w not in STOPWORDS and not w.isdigit()]


def request_text(prompt: str, history: Sequence[dict[str, Any]] = (), files: Iterable[str] = ()) -> str:
    """What the selector reads: the beginning and end of the message, the last user turns of the
    chat and attached file names, each bounded (so a long message costs no more than a short one)."""
    parts = [prompt if len(prompt) <= HEAD_CHARS + TAIL_CHARS else f"{prompt[:HEAD_CHARS]}\n{prompt[-TAIL_CHARS:]}"]
    turns = [m.get("content") for m in history if m.get("role") == "user" and isinstance(m.get("content"), str)]
    parts += [turn[:HISTORY_CHARS] for turn in turns[-HISTORY_TURNS:]]
    parts += [name[:200] for name in files]
    return "\n".join(parts)


def _document(box: Toolbox, tools: Sequence[Action]) -> list[str]:
    """The tokens of one toolbox's document: label, description, examples and its tools."""
    texts = [box.label, box.description, *box.examples] * EXAMPLE_WEIGHT
    for tool in tools:  # an MCP toolbox has no examples: its tools say what it is for
        texts += [tool_name(tool.id).replace("_", " "), tool.label, _first_sentence(tool.description)]
    return tokens("\n".join(texts))


def _first_sentence(text: str) -> str:
    return re.split(r"(?<=[.;])\s", text, maxsplit=1)[0]


def _compound_parts(token: str, known: set[str]) -> list[str]:
    """For a token the index does not know (often a German compound such as `liniendiagramm`): its
    longest known head and tail of at least COMPOUND_PART characters (`diagramm`)."""
    if token in known or len(token) < COMPOUND_PART + 2:
        return [token]
    head = next((token[:n] for n in range(len(token) - 1, COMPOUND_PART - 1, -1) if token[:n] in known), None)
    tail = next((token[n:] for n in range(1, len(token) - COMPOUND_PART + 1) if token[n:] in known), None)
    return [part for part in (head, tail) if part] or [token]


@functools.cache
def _static_documents() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The documents of the spec's toolboxes with agent tools (and the marketplace set), built once."""
    from backend.actions import get_registry

    registry = get_registry()
    documents = []
    for box in TOOLBOXES:
        tools = registry.agent_tools([box.id])
        if tools and box.id != "featureData":
            documents.append((box.id, tuple(_document(box, tools))))
    documents.append((MARKETPLACE, tuple(tokens("\n".join(MARKETPLACE_EXAMPLES)))))
    return tuple(documents)


@dataclass
class Selection:
    """What the selector found for one request (the trace entry's detail).

    Attributes:
        scores: BM25 score of every requestable toolbox (and of `marketplace`), rounded.
        selected: The toolboxes attached in addition to the initial ones, best first.
        marketplace: Whether the request is a purchase/offer/price/shipping search.
        limits: The budgets this request's run gets (by tool group: webSearch, pageFetch).
        query: The beginning of what was read.
    """

    scores: dict[str, float]
    selected: list[str]
    marketplace: bool = False
    limits: dict[str, int] = field(default_factory=dict)
    query: str = ""

    def detail(self) -> dict[str, Any]:
        return {"scores": self.scores, "selected": self.selected, "marketplace": self.marketplace,
                "limits": self.limits, "query": self.query}


def rank(text: str, extra: Sequence[tuple[Toolbox, Sequence[Action]]] = ()) -> dict[str, float]:
    """BM25 score of every toolbox document (the spec's toolboxes, `marketplace` and `extra`,
    e.g. a mandate's MCP toolboxes) for `text`."""
    if extra:
        documents = (*_static_documents(), *((box.id, tuple(_document(box, tools))) for box, tools in extra))
        index, known = _index(documents)
    else:  # the usual case: the catalogue's index, built once
        documents = _static_documents()
        index, known = _static_index()
    query = [part for token in dict.fromkeys(tokens(text)) for part in _compound_parts(token, known)]
    query = [token for token in dict.fromkeys(query) if token in known][:MAX_QUERY_TOKENS]
    if not query:
        return {box: 0.0 for box, _ in documents}
    scores = index.get_scores(query)
    return {box: float(score) for (box, _), score in zip(documents, scores, strict=True)}


def _index(documents: Sequence[tuple[str, tuple[str, ...]]]) -> tuple[bm25s.BM25, frozenset[str]]:
    """A BM25 index of `documents` and the tokens they know."""
    index = bm25s.BM25(k1=K1, b=B)
    index.index([list(doc) or ["∅"] for _, doc in documents], show_progress=False)
    return index, frozenset(token for _, doc in documents for token in doc)


@functools.cache
def _static_index() -> tuple[bm25s.BM25, frozenset[str]]:
    return _index(_static_documents())


def select(text: str, requestable: Sequence[tuple[Toolbox, Sequence[Action]]], limit: int) -> Selection:
    """Rank `requestable` (toolbox, its usable tools) for `text` and choose at most `limit` of them.

    Args:
        text: The request as :func:`request_text` builds it.
        requestable: The toolboxes the agent could request now, with their usable tools.
        limit: How many to attach at most (0: none; the marketplace rule is still detected).

    Returns:
        The selection: scores, the chosen toolboxes (best first), the marketplace rule.
    """
    static = {box for box, _ in _static_documents()}
    extra = [(box, tools) for box, tools in requestable if box.id not in static]
    scores = rank(text, extra)
    best = max(scores.values(), default=0.0)
    floor = max(MIN_SCORE, RELATIVE_SCORE * best)
    candidates = sorted((box.id for box, _ in requestable), key=lambda b: -scores.get(b, 0.0))
    selected = [box for box in candidates if scores.get(box, 0.0) >= floor][:limit]
    market = scores.get(MARKETPLACE, 0.0)
    marketplace = market >= max(MARKETPLACE_MIN_SCORE, RELATIVE_SCORE * best)
    shown = {box: round(scores.get(box, 0.0), 3) for box in candidates}
    shown[MARKETPLACE] = round(market, 3)
    shown.setdefault("core", round(scores.get("core", 0.0), 3))  # the reference: web, files, language
    return Selection(scores=shown, selected=selected, marketplace=marketplace,
                     limits=dict(MARKETPLACE_LIMITS) if marketplace else {},
                     query=" ".join(text.split())[:EXCERPT_CHARS])


# --- the tool groups the marketplace limits count ------------------------------------------------

_SEARCH_NAME = re.compile(r"search", re.IGNORECASE)
_FETCH_NAME = re.compile(r"readurl|fetch|scrape", re.IGNORECASE)
_WEB_WORDS = re.compile(r"\b(web|internet|url|urls|website|web page)\b", re.IGNORECASE)


def tool_group(action: Action) -> str | None:
    """`webSearch` for a tool that searches the web (core.webSearch, or any other tool that says it
    searches the web, e.g. of an MCP server), `pageFetch` for one that fetches a page, else None."""
    name = tool_name(action.id)
    if "webSearch" in action.needs or (_SEARCH_NAME.search(name) and _WEB_WORDS.search(action.description)):
        return "webSearch"
    if action.id == "core.readUrl" or (_FETCH_NAME.search(name) and _WEB_WORDS.search(action.description)):
        return "pageFetch"
    return None


def group_limits(limits: dict[str, int], actions: Iterable[Action]) -> dict[str, tuple[frozenset[str], int]]:
    """The limits of a selection as Budget takes them: group → (its tool names, calls at most)."""
    members: dict[str, set[str]] = {group: set() for group in limits}
    for action in actions:
        group = tool_group(action)
        if group in members:
            members[group].add(tool_name(action.id))
    return {group: (frozenset(members[group]), limit) for group, limit in limits.items() if members[group]}
