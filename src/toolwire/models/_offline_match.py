"""How `OfflineModel` picks a tool: word overlap between a request and tool definitions.

Deliberately simple and deterministic: lower-cased words, a crude suffix-stripping stemmer,
a stop-word list, a handful of synonyms for common tool topics, and weights that favour
words in a tool's name over words in its description, and rare words over common ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from toolwire.models._offline_args import find_expression
from toolwire.tools.tool import Tool

__all__ = ["Match", "best_tool", "split_clauses", "stem", "words"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CLAUSE = re.compile(r"[?!;\n]|\.(?:\s|$)|,?\s+\b(?:and|also|then|plus what|as well as)\b\s+", re.I)

_STOP_WORDS = """a an the is are was were be been am do does did can could would should will
    shall may might must i me my we our you your it its this that these those there here
    what what's whats which who whom whose when where why how please tell show give let
    know find get set in on at for of to from by with about into over under up down out
    and or but if so than too very just also then now some any all each every much many
    more most other s t d ll re ve m current currently like want need use using make run
    call thing things hi hello hey thanks thank ok okay yes no not"""
_STOP = frozenset(_STOP_WORDS.split())

# A few topics almost every demo or tutorial tool covers: request words that should count
# as the key word even though they are not in the tool's name or description.
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "weather": (
        "temperature",
        "forecast",
        "rain",
        "raining",
        "sunny",
        "snow",
        "snowing",
        "wind",
        "windy",
        "humid",
        "humidity",
        "hot",
        "cold",
        "warm",
        "umbrella",
        "climate",
        "degrees",
    ),
    "time": ("clock", "hour", "date", "today", "day", "o'clock", "timezone", "zone"),
    "calculate": (
        "compute",
        "math",
        "sum",
        "add",
        "plus",
        "minus",
        "subtract",
        "multiply",
        "times",
        "divide",
        "divided",
        "product",
        "arithmetic",
        "evaluate",
        "solve",
        "square",
        "root",
        "percent",
        "equals",
        "total",
    ),
    "search": ("find", "look", "lookup", "query"),
    "email": ("mail", "message", "inbox"),
    "delete": ("remove", "erase", "drop"),
    "create": ("add", "new", "make"),
    "list": ("show", "all", "enumerate"),
}
_SUFFIXES = (
    "ations",
    "ation",
    "ating",
    "ated",
    "ates",
    "ate",
    "ings",
    "ing",
    "ied",
    "ies",
    "ed",
    "es",
    "s",
    "ly",
    "e",
)


def stem(word: str) -> str:
    """A crude stem: `calculation`, `calculating` and `calculate` all become `calcul`."""
    w = word.lower()
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            if suffix == "s" and w.endswith("ss"):
                continue
            return w[: -len(suffix)]
    return w


def words(text: str) -> list[str]:
    """The content words of `text` (camelCase and snake_case split), lower-cased."""
    out: list[str] = []
    for raw in _WORD.findall(text):
        for part in _CAMEL.split(raw):
            w = part.lower()
            if w not in _STOP and not w.isdigit():
                out.append(w)
    return out


_SYNONYM_STEMS: dict[str, set[str]] = {}
for _key, _alts in _SYNONYMS.items():
    for _alt in _alts:
        _SYNONYM_STEMS.setdefault(stem(_alt), set()).add(stem(_key))


def split_clauses(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of the parts of a request that may each ask for another tool."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _CLAUSE.finditer(text):
        if text[start : m.start()].strip():
            spans.append((start, m.start()))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


@dataclass(frozen=True, slots=True)
class _Profile:
    tool: Tool
    name: frozenset[str]
    description: frozenset[str]
    params: frozenset[str]
    wants_expression: bool


@dataclass(frozen=True, slots=True)
class Match:
    tool: Tool
    score: float


_NAME, _DESCRIPTION, _PARAM, _SYNONYM = 3.0, 1.0, 0.5, 0.7
_THRESHOLD = 2.0
_EXPRESSION_BOOST = 4.0


def _profile(tool: Tool) -> _Profile:
    props = tool.input_schema.get("properties") or {}
    param_words: set[str] = set()
    param_text: list[str] = []
    for pname, pschema in props.items():
        param_words.update(stem(w) for w in words(pname))
        if isinstance(pschema, dict):
            param_text.append(str(pschema.get("description", "")))
    name = frozenset(stem(w) for w in words(tool.name))
    expressionish = {"express", "formula", "expr", "equat", "calcul", "math", "comput", "arithmet"}
    return _Profile(
        tool=tool,
        name=name,
        description=frozenset(stem(w) for w in words(tool.description)),
        params=frozenset(param_words),
        wants_expression=bool((name | param_words) & expressionish),
    )


def _scores(clause: str, profiles: Sequence[_Profile]) -> list[float]:
    stems = {stem(w) for w in words(clause)}
    expanded = {s2 for s in stems for s2 in _SYNONYM_STEMS.get(s, ())} - stems
    # A word shared by every tool says little about which one is meant.
    df: dict[str, int] = {}
    for p in profiles:
        for s in p.name | p.description | p.params:
            df[s] = df.get(s, 0) + 1
    has_expression = find_expression(clause) is not None
    scores: list[float] = []
    for p in profiles:
        score = 0.0
        for group, factor in ((stems, 1.0), (expanded, _SYNONYM)):
            for s in group:
                weight = factor / df.get(s, 1)
                if s in p.name:
                    score += _NAME * weight
                elif s in p.description:
                    score += _DESCRIPTION * weight
                elif s in p.params:
                    score += _PARAM * weight
        if has_expression and p.wants_expression:
            score += _EXPRESSION_BOOST
        scores.append(score)
    return scores


def best_tool(text: str, tools: Iterable[Tool], *, force: bool = False) -> Match | None:
    """The tool that best fits `text`, if any fits well enough (or at all, with `force`)."""
    profiles = [_profile(t) for t in tools]
    if not profiles:
        return None
    scores = _scores(text, profiles)
    # Ties go to the tool listed first, so the choice never depends on anything else.
    best = max(range(len(profiles)), key=lambda i: (scores[i], -i))
    if scores[best] >= _THRESHOLD or force:
        return Match(profiles[best].tool, scores[best])
    return None
