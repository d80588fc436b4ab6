"""How `OfflineModel` fills a tool's arguments from the request text and the JSON schema.

Each property gets a value only when the text (or the schema) gives one: a place after
"in"/"for"/"at" for location-like strings, an arithmetic expression for expression-like
strings, an enum value the text mentions, a number near the property's name, a quoted
string. Optional properties the text says nothing about are left out (the tool's defaults
apply); a required one falls back to its schema default.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["fill_arguments", "fill_calls", "find_expression", "find_place", "find_places"]

_WORD_OPS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p, re.I), r)
    for p, r in [
        (r"(\d),(\d{3})\b", r"\1\2"),
        (r"\b(?:the\s+)?square\s+root\s+of\s+([\d.]+)", r"sqrt(\1)"),
        (r"\bsqrt\s+of\s+([\d.]+)", r"sqrt(\1)"),
        (r"\bto\s+the\s+power\s+of\b", "**"),
        (r"\bsquared\b", "**2"),
        (r"\bcubed\b", "**3"),
        (r"\bplus\b", "+"),
        (r"\bminus\b", "-"),
        (r"\b(?:times|multiplied\s+by)\b", "*"),
        (r"\bdivided\s+by\b", "/"),
        (r"\bmod(?:ulo)?\b", "%"),
        (r"(?<=\d)\s*[x×]\s*(?=\d)", "*"),
        (r"÷", "/"),
    ]
]
_EXPR_RUN = re.compile(
    r"(?:sqrt|abs|round|floor|ceil|exp|log10|log2|log|sin|cos|tan|min|max|pi|tau"
    r"|\d+(?:\.\d+)?|\.\d+|\*\*|[-+*/%^(),]|[ \t])+",
    re.I,
)
_OPERATOR = re.compile(r"[-+*/%^]|\*\*|sqrt|abs|round|floor|ceil|exp|log|sin|cos|tan|min|max")

# A lookahead, so "going to rain in Rio" yields both "rain in Rio" and "Rio".
_PLACE_AFTER = re.compile(
    r"\b(?:in|at|for|near|of|from|to)\s+"
    r"(?=((?:[^\W\d_][\w'’.-]*)(?:\s+(?:(?:de|da|do|del|la|le|los|las|upon|on|am|sur)\s+)?"
    r"[^\W\d_][\w'’.-]*){0,3}))",
    re.UNICODE,
)
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|'([^']{2,})'")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_NOT_PLACE_WORDS = """the a an me my you your it its this that today tomorrow tonight now here
there right currently celsius fahrenheit kelvin metric imperial please in at for near of from
to on with and or but is be will what how when time weather"""
_NOT_PLACES = frozenset(_NOT_PLACE_WORDS.split())
_PLACE_KEYS = (
    "city",
    "location",
    "place",
    "town",
    "country",
    "region",
    "address",
    "destination",
    "where",
    "timezone",
    "zone",
    "tz",
)
_EXPRESSION_KEYS = ("expression", "expr", "formula", "equation", "calculation", "math")
_TEXT_KEYS = (
    "query",
    "q",
    "text",
    "search",
    "message",
    "prompt",
    "input",
    "content",
    "question",
    "topic",
    "keywords",
    "term",
)


def find_expression(text: str) -> str | None:
    """The arithmetic expression in `text` ("what is 17 times 23?" -> "17 * 23"), if any."""
    s = text
    for pattern, replacement in _WORD_OPS:
        s = pattern.sub(replacement, s)
    best: str | None = None
    for m in _EXPR_RUN.finditer(s):
        candidate = _trim_expression(m.group(0))
        usable = any(c.isdigit() for c in candidate) and _OPERATOR.search(candidate)
        if usable and (best is None or len(candidate) > len(best)):
            best = candidate
    if best is None:
        return None
    # Normalise spacing around binary operators for a readable call.
    best = re.sub(r"\s*(\*\*|//|[-+*/%^])\s*", r" \1 ", best)
    best = re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", best))
    best = re.sub(r"(^|[(,]|[-+*/%^]\s)\s*-\s+(?=[\d(])", r"\1-", best)
    return " ".join(best.split())


def _trim_expression(s: str) -> str:
    s = s.strip().strip(",").strip()
    # Drop dangling operators and unbalanced parentheses at the ends.
    while s and s[-1] in "+-*/%^(,":
        s = s[:-1].rstrip()
    while s and s[0] in "+*/%^),":
        s = s[1:].lstrip()
    while s.count("(") > s.count(")") and s.startswith("("):
        s = s[1:].lstrip()
    while s.count(")") > s.count("(") and s.endswith(")"):
        s = s[:-1].rstrip()
    return s if s.count("(") == s.count(")") else ""


def find_place(text: str) -> str | None:
    """A place named in `text`: the words after "in", "for", "at"...; capitalised ones first."""
    found = _place_at(text)
    return found[1] if found is not None else None


def find_places(text: str) -> list[str]:
    """Every place of a list that `text` names: "in Paris and London", "for Rio, Tokyo and
    New York", "in Lisbon and in Porto". Places after the first must be capitalised, so
    "in Paris and tell me" names one."""
    found = _place_at(text)
    if found is None:
        return []
    start, place = found
    places = [place]
    end = start + _span_length(text, start, place)
    while (m := _NEXT_PLACE.match(text, end)) is not None:
        phrase = m.group("place")
        if not phrase[0].isupper() or phrase.split()[0].lower() in _NOT_PLACES:
            break
        following = _capitalised_prefix(phrase.rstrip(".'’"))
        if following in places:
            break
        places.append(following)
        end = m.start("place") + _span_length(text, m.start("place"), following)
    return places


_NEXT_PLACE = re.compile(
    r"\s*(?:,\s*(?:and\s+|&\s*)?|\s+(?:and|&|or|vs\.?|versus)\s+)"
    r"(?:(?:in|at|for)\s+)?"
    r"(?P<place>[^\W\d_][\w'’.-]*(?:\s+(?:(?:de|da|do|del|la|le|los|las|upon|on|am|sur)\s+)?"
    r"[^\W\d_][\w'’.-]*){0,3})",
    re.UNICODE,
)


def _place_at(text: str) -> tuple[int, str] | None:
    """Where the chosen place starts in `text`, and the place."""
    found: list[tuple[int, str]] = []
    for m in _PLACE_AFTER.finditer(text):
        phrase = m.group(1).rstrip(".'’")
        kept: list[str] = []
        for word in phrase.split():
            if word.lower() in _NOT_PLACES:
                break
            kept.append(word)
        if kept:
            found.append((m.start(1), " ".join(kept)))
    for start, phrase in found:
        if phrase[0].isupper():
            return start, _capitalised_prefix(phrase)
    return found[0] if found else None


def _span_length(text: str, start: int, phrase: str) -> int:
    """How many characters of `text` from `start` the words of `phrase` take."""
    m = re.compile(r"\s+".join(re.escape(w) for w in phrase.split())).match(text, start)
    return len(m.group(0)) if m is not None else len(phrase)


def _capitalised_prefix(phrase: str) -> str:
    small = {"de", "da", "do", "del", "la", "le", "los", "las", "upon", "on", "am", "sur"}
    words = phrase.split()
    kept = [words[0]]
    for i, w in enumerate(words[1:], start=1):
        if w[0].isupper() or (w in small and i + 1 < len(words) and words[i + 1][0].isupper()):
            kept.append(w)
        else:
            break
    return " ".join(kept)


def fill_arguments(schema: dict[str, Any], text: str, context: str) -> dict[str, Any]:
    """Arguments for a tool with JSON Schema `schema`, from `text` (the clause that asked
    for it), falling back to `context` (the whole request) for values the clause lacks."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    args: dict[str, Any] = {}
    numbers = _Numbers(text)
    for name, prop in props.items():
        if not isinstance(prop, dict):
            continue
        value = _value_for(name, prop, text, numbers)
        if value is None and context != text:
            value = _value_for(name, prop, context, _Numbers(context))
        if value is None and name in required:
            value = _fallback(name, prop, text, numbers)
        if value is not None:
            args[name] = value
    return args


def fill_calls(schema: dict[str, Any], text: str, context: str) -> list[dict[str, Any]]:
    """One or several argument sets: a tool that takes one place, asked about several
    ("weather in Paris and London"), gets one call per place, as a model would make them;
    so does a tool that takes one string, given several quoted values."""
    args = fill_arguments(schema, text, context)
    props = schema.get("properties") or {}
    strings = [  # free-text strings: an enum ("unit") names a choice, not the subject
        n
        for n, p in props.items()
        if isinstance(p, dict) and p.get("type") == "string" and "enum" not in p
    ]
    if len(strings) != 1 or strings[0] not in args:
        return [args]
    name = strings[0]
    hint = f"{name} {props[name].get('description', '')}".lower()
    values: list[str] = []
    for source in (text, context):
        if any(k in name.lower() for k in _PLACE_KEYS) or "city" in hint:
            values = find_places(source)
        else:
            values = _all_quoted(source)
        if args[name] in values:
            break
    if len(values) < 2 or args[name] != values[0]:
        return [args]
    return [{**args, name: value} for value in values]


class _Numbers:
    """The numbers in a text, each handed out at most once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.found = [(m.start(), m.group(0)) for m in _NUMBER.finditer(text)]
        self.used: set[int] = set()

    def near(self, key: str, integer: bool) -> int | float | None:
        parts = [p for p in re.split(r"[_\W]+", key) if p]
        # One- or two-letter names ("a", "x") would match inside ordinary words.
        if not parts or len("".join(parts)) < 3:
            return None
        label = r"[\s_-]*".join(re.escape(p) for p in parts)
        for pattern in (
            rf"(-?\d+(?:\.\d+)?)\s*{label}",
            rf"{label}\w*\D{{0,12}}?(-?\d+(?:\.\d+)?)",
        ):
            for m in re.finditer(pattern, self.text, re.I):
                if m.start(1) not in self.used:
                    self.used.add(m.start(1))
                    return _to_number(m.group(1), integer)
        return None

    def next_unused(self, integer: bool) -> int | float | None:
        for pos, raw in self.found:
            if pos not in self.used:
                self.used.add(pos)
                return _to_number(raw, integer)
        return None


def _value_for(name: str, prop: dict[str, Any], text: str, numbers: _Numbers) -> Any:
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return _enum_value(enum, text)
    kind = prop.get("type")
    key = name.lower()
    hint = f"{key} {prop.get('description', '')}".lower()
    if kind == "string":
        if any(k in key for k in _EXPRESSION_KEYS):
            return find_expression(text)
        if any(k in key for k in _PLACE_KEYS) or "city" in hint:
            return find_place(text)
        quoted = _quoted(text)
        if quoted is not None:
            return quoted
        if key in _TEXT_KEYS:
            return text.strip().rstrip("?.!")
        return None
    if kind in ("integer", "number"):
        return numbers.near(key, kind == "integer")
    if kind == "boolean":
        return _flag(key, text)
    if kind == "array":
        items = prop.get("items") or {}
        if isinstance(items, dict) and items.get("type") in ("integer", "number"):
            values = [float(n) for n in _NUMBER.findall(text)]
            if items.get("type") == "integer":
                return [int(n) for n in values if n.is_integer()] or None
            return values or None
        return None
    return None


def _fallback(name: str, prop: dict[str, Any], text: str, numbers: _Numbers) -> Any:
    if "default" in prop:
        return prop["default"]
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    if prop.get("type") in ("integer", "number"):
        return numbers.next_unused(prop.get("type") == "integer")
    if prop.get("type") == "string" and not any(k in name.lower() for k in _PLACE_KEYS):
        # The span the property names ("delete the application demo-app" -> "demo-app"),
        # else an identifier-looking word, else the whole request: better a best guess
        # the tool can reject with a clear message than no call at all. Not for places:
        # "weather?" must not become the city "weather?"; leaving it out lets the runner
        # tell the model the argument is required.
        return _named_span(name, text) or text.strip().rstrip("?.!")
    return None


_TOKEN = re.compile(r"[^\W_][\w.\-/:@]*", re.UNICODE)
_FILLER = frozenset({"called", "named", "is", "the", "a", "an", "=", "of", "with", "id"})


def _named_span(name: str, text: str) -> str | None:
    """The word after one that names the property ("application" for `app_name`), or the
    first identifier-looking word (with a digit, `-`, `_`, `.` or `/` inside)."""
    parts = [p for p in re.split(r"[_\W]+", name.lower()) if len(p) >= 2 and p != "name"]
    words = [m.group(0).rstrip(".,;:!?'’") for m in _TOKEN.finditer(text)]
    for i, word in enumerate(words):
        lowered = word.lower()
        if not any(
            lowered.startswith(p) or (len(lowered) >= 3 and p.startswith(lowered)) for p in parts
        ):
            continue
        for following in words[i + 1 : i + 4]:
            if following.lower() not in _FILLER:
                return following
    for word in words[1:]:  # the first word is usually the verb ("delete", "show")
        if re.search(r"[-_\d./]", word) and not re.fullmatch(r"[\d.]+", word):
            return word
    return None


def _enum_value(enum: list[Any], text: str) -> Any:
    lowered = text.lower()
    for option in enum:
        if isinstance(option, str) and re.search(rf"\b{re.escape(option.lower())}\b", lowered):
            return option
    return None


def _quoted(text: str) -> str | None:
    m = _QUOTED.search(text)
    if m is None:
        return None
    return next(g for g in m.groups() if g is not None)


def _all_quoted(text: str) -> list[str]:
    found: list[str] = []
    for m in _QUOTED.finditer(text):
        value = next(g for g in m.groups() if g is not None)
        if value not in found:
            found.append(value)
    return found


def _to_number(raw: str, integer: bool) -> int | float:
    value = float(raw)
    if integer or value.is_integer():
        return int(value)
    return value


def _flag(key: str, text: str) -> bool | None:
    label = key.replace("_", " ")
    negation = r"(\b(?:no|not|without|don'?t|never)\b\W+(?:\w+\W+)?)?"
    m = re.search(rf"{negation}\b{re.escape(label)}", text, re.I)
    if m is None:
        return None
    return m.group(1) is None
