"""Replay of the `canitoolcall` conformance fixtures against toolwire's parsers.

The suite's own runner streams token ids through an engine; this machine has no
tokenizers, so the replay works on `raw_output` text instead: one non-streaming parse and
streaming parses split in one piece, per character, at the family's markers and in five
seeded random pieces of 1-8 characters. The checks follow the suite's spec
(`canitoolcall/_data/spec/README.md`, normalisation `soft-v1`), with one deliberate
tightening: a stream must equal the non-streaming parse exactly, not only after
whitespace normalisation, because `parser_for` promises exactly that.

Used by tests/parsing/test_conformance.py and scripts/conformance_report.py.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from toolwire.parsing import ParsedOutput, assemble, parse_output, parser_for

PASS, SOFT_PASS, FAIL = "pass", "soft_pass", "fail"
_RANK = {PASS: 0, SOFT_PASS: 1, FAIL: 2}
RANDOM_SEEDS = (1, 2, 3, 4, 5)


@dataclass(frozen=True, kw_only=True)
class Fixture:
    id: str
    family: str
    model: str
    raw_output: str
    tools: list[dict[str, Any]]
    prompt_suffix: str
    truncated: bool
    expected: dict[str, Any] | None
    expected_error: dict[str, Any] | None
    markers: tuple[str, ...]


@dataclass(kw_only=True)
class CaseResult:
    fixture: Fixture
    status: str = PASS
    _seen: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)

    def add(self, status: str, check: str, label: str, detail: str = "") -> None:
        if _RANK[status] > _RANK[self.status]:
            self.status = status
        if status != PASS:
            self._seen.setdefault((check, status, detail), []).append(label)

    @property
    def problems(self) -> list[str]:
        """One line per distinct problem, naming the parses that showed it."""
        return [
            f"{check}[{','.join(labels)}] {status}: {detail}"
            for (check, status, detail), labels in self._seen.items()
        ]


def _fixture_root() -> Any:
    return resources.files("canitoolcall") / "_data" / "fixtures"


@cache
def load_fixtures() -> tuple[Fixture, ...]:
    """Every fixture of every family, in directory and file order."""
    out: list[Fixture] = []
    for family_dir in sorted(_fixture_root().iterdir(), key=lambda p: p.name):
        if not family_dir.is_dir():
            continue
        family = json.loads((family_dir / "family.json").read_text(encoding="utf-8"))
        markers = tuple(family.get("markers", ()))
        files = sorted((p for p in family_dir.iterdir() if p.name.endswith(".jsonl")), key=str)
        for path in files:
            for line in path.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                raw = json.loads(line)
                out.append(
                    Fixture(
                        id=raw["id"],
                        family=raw["family"],
                        model=raw["models"][0],
                        raw_output=raw["raw_output"],
                        tools=raw.get("tools") or [],
                        prompt_suffix=raw.get("generation_prompt") or "",
                        truncated="truncated" in raw.get("tags", ()),
                        expected=raw.get("expected"),
                        expected_error=raw.get("expected_error"),
                        markers=markers,
                    )
                )
    return tuple(out)


def families() -> list[str]:
    return sorted({f.family for f in load_fixtures()})


# ----------------------------------------------------------------------------- splits


def marker_split(text: str, markers: tuple[str, ...]) -> list[str]:
    """Every marker its own piece, the text between markers as pieces."""
    if not markers:
        return [text]
    pattern = re.compile("|".join(re.escape(m) for m in sorted(markers, key=len, reverse=True)))
    pieces: list[str] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() > pos:
            pieces.append(text[pos : m.start()])
        pieces.append(m.group())
        pos = m.end()
    if pos < len(text):
        pieces.append(text[pos:])
    return pieces


def random_split(text: str, seed: int, max_size: int = 8) -> list[str]:
    rng = random.Random(seed)
    pieces: list[str] = []
    pos = 0
    while pos < len(text):
        size = rng.randint(1, max_size)
        pieces.append(text[pos : pos + size])
        pos += size
    return pieces


def splits(fx: Fixture) -> dict[str, list[str]]:
    out = {
        "one": [fx.raw_output],
        "char": list(fx.raw_output),
        "markers": marker_split(fx.raw_output, fx.markers),
    }
    for seed in RANDOM_SEEDS:
        out[f"rand:{seed}:8"] = random_split(fx.raw_output, seed)
    return out


# ----------------------------------------------------------------------------- parsing


def parse_whole(fx: Fixture) -> ParsedOutput:
    return parse_output(
        fx.raw_output,
        fx.model,
        fx.tools,
        prompt_suffix=fx.prompt_suffix,
        truncated=fx.truncated,
    )


def parse_pieces(fx: Fixture, pieces: list[str]) -> ParsedOutput:
    parser = parser_for(fx.model, fx.tools, prompt_suffix=fx.prompt_suffix)
    events = []
    for piece in pieces:
        events.extend(parser.feed(piece))
    events.extend(parser.finish(truncated=fx.truncated))
    return assemble(events)


# ----------------------------------------------------------------------------- comparison


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def decode_arguments(text: str) -> Any:
    """Strict decoding as the suite does it: no NaN/Infinity, no duplicate keys."""
    return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)


def _canon(value: Any) -> Any:
    """Hashable, type-tagged JSON value: `true != 1`, `1 == 1.0`."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return ("num", int(value))
        return ("num", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, Mapping):
        return ("obj", tuple(sorted((str(k), _canon(v)) for k, v in value.items())))
    return ("arr", tuple(_canon(v) for v in value))


def _text(value: str | None, *, soft: bool) -> str | None:
    if value is None:
        return None
    if soft:
        value = value.strip()
    return value or None


def _canon_args(text: str) -> Any:
    try:
        return _canon(decode_arguments(text))
    except ValueError:
        return ("invalid", text)


def canonical(out: ParsedOutput, *, soft: bool) -> tuple[Any, ...]:
    return (
        _text(out.content, soft=soft),
        _text(out.reasoning, soft=soft),
        tuple((c.name, _canon_args(c.arguments_json)) for c in out.tool_calls),
    )


def canonical_expected(expected: Mapping[str, Any], *, soft: bool) -> tuple[Any, ...]:
    return (
        _text(expected.get("content"), soft=soft),
        _text(expected.get("reasoning_content"), soft=soft),
        tuple((c["name"], _canon(c.get("arguments", {}))) for c in expected.get("tool_calls", [])),
    )


def _show(out: ParsedOutput) -> str:
    calls = [(c.name, c.arguments_json) for c in out.tool_calls]
    text = f"content={out.content!r} reasoning={out.reasoning!r} calls={calls!r}"
    return text if len(text) < 400 else text[:397] + "..."


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


# ----------------------------------------------------------------------------- checks


def _check_expected(fx: Fixture, label: str, got: ParsedOutput, res: CaseResult) -> None:
    assert fx.expected is not None
    if canonical(got, soft=False) == canonical_expected(fx.expected, soft=False):
        return
    want = fx.expected
    status = SOFT_PASS if canonical(got, soft=True) == canonical_expected(want, soft=True) else FAIL
    res.add(status, "expected_match", label, f"got {_show(got)}; expected {want!r}"[:900])


def _check_error(fx: Fixture, label: str, got: ParsedOutput, res: CaseResult) -> None:
    assert fx.expected_error is not None
    accept = set(fx.expected_error.get("accept", ()))
    if got.tool_calls:
        names = [c.name for c in got.tool_calls]
        res.add(FAIL, "expected_error", label, f"returned calls {names}")
        return
    outcomes = {"no_tool_calls"}
    soft_only = False
    if _text(got.content, soft=False) == _text(fx.raw_output, soft=False):
        outcomes.add("content_passthrough")
    elif _text(got.content, soft=True) == _text(fx.raw_output, soft=True):
        outcomes.add("content_passthrough")
        soft_only = True
    matched = outcomes & accept
    if not matched:
        res.add(FAIL, "expected_error", label, f"outcome {sorted(outcomes)}; accepted {accept}")
    elif matched == {"content_passthrough"} and soft_only:
        res.add(SOFT_PASS, "expected_error", label, "content passthrough differs in whitespace")


def _check_leakage(fx: Fixture, label: str, got: ParsedOutput, res: CaseResult) -> None:
    markers = fx.markers
    exp = fx.expected
    if exp is not None:
        content, reasoning = exp.get("content") or "", exp.get("reasoning_content") or ""
        arg_strings = [s for c in exp.get("tool_calls", []) for s in _strings(c.get("arguments"))]
        ok_content = {m for m in markers if m in content}
        ok_reasoning = {m for m in markers if m in reasoning}
        ok_args = {m for m in markers if any(m in s for s in arg_strings)}
    else:
        ok_content, ok_reasoning, ok_args = set(markers), set(), set()
    leaks: list[str] = []

    def scan(where: str, text: str | None, allowed: set[str]) -> None:
        if text:
            leaks.extend(f"{where} has {m!r}" for m in markers if m not in allowed and m in text)

    scan("content", got.content, ok_content)
    scan("reasoning", got.reasoning, ok_reasoning)
    for i, call in enumerate(got.tool_calls):
        scan(f"calls[{i}].name", call.name, set())
        try:
            strings = list(_strings(decode_arguments(call.arguments_json)))
        except ValueError:
            strings = [call.arguments_json]
        for s in strings:
            scan(f"calls[{i}].arguments", s, ok_args)
    if leaks:
        res.add(FAIL, "no_leakage", label, "; ".join(dict.fromkeys(leaks)))


def _check_arguments(label: str, got: ParsedOutput, res: CaseResult) -> None:
    for i, call in enumerate(got.tool_calls):
        try:
            value = decode_arguments(call.arguments_json)
        except ValueError as e:
            res.add(FAIL, "arguments_json", label, f"calls[{i}] not JSON: {e}")
            continue
        if not isinstance(value, dict):
            res.add(FAIL, "arguments_json", label, f"calls[{i}] is {type(value).__name__}")


def _check_order(fx: Fixture, label: str, got: ParsedOutput, res: CaseResult) -> None:
    if fx.expected is None or len(fx.expected.get("tool_calls", [])) < 2:
        return
    want = [c["name"] for c in fx.expected["tool_calls"]]
    names = [c.name for c in got.tool_calls]
    if names != want:
        res.add(FAIL, "parallel_order", label, f"expected {want}, got {names}")


def _check_parse(fx: Fixture, label: str, got: ParsedOutput, res: CaseResult) -> None:
    if fx.expected is not None:
        _check_expected(fx, label, got, res)
    if fx.expected_error is not None:
        _check_error(fx, label, got, res)
    _check_leakage(fx, label, got, res)
    _check_arguments(label, got, res)
    _check_order(fx, label, got, res)


def run_fixture(fx: Fixture) -> CaseResult:
    """Parse `fx` every way and apply every check; never raises on parser errors."""
    res = CaseResult(fixture=fx)
    try:
        whole = parse_whole(fx)
    except Exception as e:  # a parser must never raise: that is a failure, not a crash
        res.add(FAIL, "raised", "nonstream", repr(e))
        return res
    _check_parse(fx, "nonstream", whole, res)
    reference = canonical(whole, soft=False)
    for label, pieces in splits(fx).items():
        try:
            got = parse_pieces(fx, pieces)
        except Exception as e:
            res.add(FAIL, "raised", label, repr(e))
            continue
        if canonical(got, soft=False) != reference:
            res.add(FAIL, "stream_equals_nonstream", label, f"{_show(got)} vs {_show(whole)}")
        _check_parse(fx, label, got, res)
    return res


def summary(results: list[CaseResult]) -> dict[str, dict[str, list[str]]]:
    """family -> status -> fixture ids."""
    table: dict[str, dict[str, list[str]]] = {}
    for r in results:
        row = table.setdefault(r.fixture.family, {PASS: [], SOFT_PASS: [], FAIL: []})
        row[r.status].append(r.fixture.id)
    return table
