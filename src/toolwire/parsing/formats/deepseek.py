"""DeepSeek's tool-call formats: V3/R1, V3.1 and the DSML family (V3.2, V4, V4.1).

All five put the calls of a turn in one section after the content; each call inside it is
emitted as soon as its own end marker arrives.

- `deepseek_v3` (V3, R1): `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`
  then the arguments in a ```json fence, `<｜tool▁call▁end｜>` … `<｜tool▁calls▁end｜>`.
- `deepseek_v31` (V3.1, V3.2-Exp): the same tokens, `NAME<｜tool▁sep｜>{json}` inside a call.
  Both shapes are accepted by both names: which one a call uses is plain from its text.
- `deepseek_v32`, `deepseek_v4`, `deepseek_v41` (DSML): `<｜DSML｜function_calls>` (V3.2),
  `<｜DSML｜tool_calls>` (V4) or `<｜DSML｜ calls>` (V4.1, every DSML tag spelled with a space
  after `｜DSML｜`), holding `<｜DSML｜invoke name="f">` elements whose
  `<｜DSML｜parameter name="p" string="true|false">` values are raw text (`true`) or JSON
  (`false`). The three spellings are accepted by all three names. A zero-argument invoke
  may be self-closing (`<｜DSML｜invoke name="f"/>`, seen from V4).

Reasoning is `<think>…</think>`; the prompt usually pre-fills `<think>` (thinking) or
`</think>` (not thinking), given as `prompt_suffix`. Marker text inside a JSON string
(V3, V3.1) or inside a DSML parameter value is data.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

from toolwire.parsing._base import RawCall, StreamParser, TextSink, ToolSpecs, left_open
from toolwire.parsing._json import loads, loads_object
from toolwire.parsing._machine import JSON_QUOTE, JSON_STRING, MarkerMachine
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.events import ContentDelta, ParseEvent, ReasoningDelta

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
END_OF_SENTENCE = "<｜end▁of▁sentence｜>"

_CONTENT, _REASONING, _SECTION = range(3)
"""States every dialect shares; the call states of a dialect are numbered from 10."""


class _SectionParser(MarkerMachine):
    """Content, `<think>` reasoning and a section of calls; subclasses parse the calls.

    A call whose text is not a valid call comes back verbatim as content, as does
    anything but whitespace between calls (held until the next marker); either is a
    `ParseFailure`. A section that holds no call at all comes back whole, its markers with
    it.
    """

    SECTION_OPENS: tuple[str, ...]
    SECTION_CLOSES: tuple[str, ...]
    CALL_OPENS: tuple[str, ...]
    SECTION_CALL_OPENS: tuple[str, ...] = ()
    """Section openers that open the section's first call too (no call marker after)."""

    def __init__(self, prompt_suffix: str) -> None:
        super().__init__()
        self._content = TextSink(ContentDelta)
        self._reasoning = TextSink(ReasoningDelta)
        self._mode = _REASONING if left_open(prompt_suffix, THINK_OPEN, THINK_CLOSE) else _CONTENT
        self._gap: list[str] = []  # whitespace between calls, dropped unless text follows
        self._raw: list[str] = []  # the current call as written, from its open marker
        # A failed call's text goes back as content with the section's markers around it
        # (never half the markup): the opener until a call succeeds, then the closer.
        self._section_opener = ""
        self._section_failed = False
        self._junk: list[str] = []  # text in the section outside calls, held
        self._base_scanners = {
            _CONTENT: MarkerScanner(
                [
                    *self.SECTION_OPENS,
                    *self.SECTION_CALL_OPENS,
                    THINK_OPEN,
                    THINK_CLOSE,
                    END_OF_SENTENCE,
                ]
            ),
            _REASONING: MarkerScanner([THINK_CLOSE, END_OF_SENTENCE]),
            _SECTION: MarkerScanner([*self.CALL_OPENS, *self.SECTION_CLOSES]),
        }

    # -- what a dialect provides

    @abstractmethod
    def _call_scanner(self) -> MarkerScanner:
        """The markers of the current call state."""

    @abstractmethod
    def _begin_call(self, marker: str) -> None:
        """A call opened with `marker`; enter the dialect's first call state."""

    @abstractmethod
    def _call_text(self, text: str) -> None: ...

    @abstractmethod
    def _call_marker(self, marker: str, out: list[ParseEvent]) -> None:
        """A marker inside a call; ends it with `_complete` when it is the call's end."""

    @abstractmethod
    def _call_at_end(self, out: list[ParseEvent]) -> RawCall | None:
        """The output ended (not truncated) inside a call: the call, if it is whole."""

    # -- the machine

    def _scanner(self) -> MarkerScanner:
        scan = self._base_scanners.get(self._mode)
        return scan if scan is not None else self._call_scanner()

    def _text(self, text: str, out: list[ParseEvent]) -> None:
        state = self._mode
        if state == _CONTENT:
            self._content.write(text, out)
        elif state == _REASONING:
            self._reasoning.write(text, out)
        elif state == _SECTION:
            body = text.rstrip()
            if body:
                self._junk += self._gap
                self._junk.append(body)
                self._gap.clear()
            self._gap.append(text[len(body) :])
        else:
            self._raw.append(text)
            self._call_text(text)

    def _marker(self, marker: str, out: list[ParseEvent]) -> None:
        state = self._mode
        if state == _CONTENT:
            if marker in self.SECTION_OPENS or marker in self.SECTION_CALL_OPENS:
                self._mode = _SECTION
                self._section_opener = marker
                self._section_failed = False
                if marker in self.SECTION_CALL_OPENS:
                    self._raw = [""]  # the opener is the section's, given back with it
                    self._begin_call(marker)
            elif marker == THINK_OPEN:
                self._mode = _REASONING
            # a stray </think> or end-of-sentence token is dropped
        elif state == _REASONING:
            if marker == THINK_CLOSE:
                self._mode = _CONTENT
        elif state == _SECTION:
            self._gap.clear()
            self._junk_done(out, ends_section=marker in self.SECTION_CLOSES)
            if marker in self.CALL_OPENS:
                self._raw = [marker]
                self._begin_call(marker)
            else:
                if self._section_failed:
                    self._content.write(marker, out)
                self._mode = _CONTENT
        else:
            self._raw.append(marker)
            self._call_marker(marker, out)

    def _junk_done(self, out: list[ParseEvent], *, ends_section: bool) -> None:
        """A marker (or the end of output) ends text written in the section outside calls:
        it comes back as content, a failure. When it ends the section and no call came
        before, the section's opener comes back with it, and its closer too."""
        if not self._junk:
            return
        text = "".join(self._junk)
        self._junk.clear()
        if self._section_opener and ends_section:
            text = self._section_opener + text
            self._section_opener = ""
            self._section_failed = True
        self._content.write(text, out)
        self._failed("invalid", text, out)

    def _complete(
        self, call: RawCall | None, out: list[ParseEvent], *, section_closed: bool = False
    ) -> None:
        """The current call ended: emit it, or its text as content when it is not valid."""
        raw, self._raw = self._raw, []
        if call is not None:
            out.extend(self._call_events(call))
            self._section_opener = ""
        else:
            text = self._section_opener + "".join(raw)
            # The closer goes back too only when the opener did: a pair, never half.
            self._section_failed = self._section_failed or bool(self._section_opener)
            self._section_opener = ""
            self._content.write(text, out)
            self._failed("invalid", text, out)
        self._mode = _CONTENT if section_closed else _SECTION

    # -- the end of output

    def finish(self, *, truncated: bool = False) -> list[ParseEvent]:
        out: list[ParseEvent] = []
        self._release(out)
        self._finish_state(truncated, out)
        return out

    def _finish_state(self, truncated: bool, out: list[ParseEvent]) -> None:
        if self._mode not in (_CONTENT, _REASONING, _SECTION):
            if truncated:
                self._raw = []  # the model never finished this call
            else:
                call = self._call_at_end(out)
                if self._raw:
                    self._complete(call, out)
        self._gap.clear()
        self._junk_done(out, ends_section=True)
        self._mode = _CONTENT


# ----------------------------------------------------------------------------- V3, V3.1

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, TOOL_SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"

_ARGS, _ARGS_STRING = 10, 11
_ENDS_SCAN = MarkerScanner([CALL_END, CALLS_END])
_ARGS_SCAN = MarkerScanner([JSON_QUOTE, *_ENDS_SCAN.markers])


def parse_tool_call(inner: str) -> RawCall | None:
    """One V3 (`function<sep>NAME\\n```json\\n{…}\\n````) or V3.1 (`NAME<sep>{…}`) call."""
    head, sep, rest = inner.partition(TOOL_SEP)
    if not sep:
        return None
    rest = rest.strip()
    if rest.startswith("{"):
        name, payload = head.strip(), rest
    else:
        first, _, payload = rest.partition("\n")
        name, payload = first.strip(), payload.strip()
        if payload.startswith("```"):
            payload = payload[3:].removeprefix("json")
            payload = payload.removesuffix("```")
    args = loads_object(payload.strip())
    if not name or args is None:
        return None
    return RawCall(name, args)


class ToolCallsParser(_SectionParser):
    """`deepseek_v3` and `deepseek_v31`: the `<｜tool▁calls▁begin｜>` section."""

    SECTION_OPENS = (CALLS_BEGIN,)
    SECTION_CLOSES = (CALLS_END,)
    CALL_OPENS = (CALL_BEGIN,)
    # R1 distills sometimes write `<｜tool▁calls｜>` and leave out the first call's marker
    # (llama.cpp reads it).
    SECTION_CALL_OPENS = ("<｜tool▁calls｜>",)

    def _call_scanner(self) -> MarkerScanner:
        return JSON_STRING if self._mode == _ARGS_STRING else _ARGS_SCAN

    def _begin_call(self, marker: str) -> None:
        self._mode = _ARGS

    def _call_text(self, text: str) -> None:
        pass  # kept in self._raw

    def _call_marker(self, marker: str, out: list[ParseEvent]) -> None:
        if self._mode == _ARGS_STRING:
            if marker == '"':
                self._mode = _ARGS
        elif marker == '"':
            self._mode = _ARGS_STRING
        else:
            call = parse_tool_call("".join(self._raw[1:-1]))
            self._complete(call, out, section_closed=marker == CALLS_END)

    def _call_at_end(self, out: list[ParseEvent]) -> RawCall | None:
        inner = "".join(self._raw[1:])
        call = parse_tool_call(inner)
        if call is not None:
            return call
        hit = _ENDS_SCAN.search(inner)
        if hit is None:
            return None
        # An unbalanced quote hid the end marker; split at it as written.
        cut, marker = hit.start(), hit.group()
        self._raw = [self._raw[0], inner[:cut], marker]
        self._complete(parse_tool_call(inner[:cut]), out, section_closed=marker == CALLS_END)
        self._replay(inner[cut + len(marker) :], out)
        self._finish_state(False, out)
        return None


# ----------------------------------------------------------------------------- DSML

_DSML_PREFIXES = ("<｜DSML｜", "<｜DSML｜ ")
_SECTION_NAMES = ("function_calls", "tool_calls", "calls")


def _tags(names: tuple[str, ...], *, close: bool = False) -> tuple[str, ...]:
    slash = "/" if close else ""
    return tuple(f"<{slash}{p[1:]}{n}" for p in _DSML_PREFIXES for n in names)


DSML_SECTION_OPENS = tuple(t + ">" for t in _tags(_SECTION_NAMES))
DSML_SECTION_CLOSES = tuple(t + ">" for t in _tags(_SECTION_NAMES, close=True))
INVOKE_OPENS = _tags(("invoke",))
INVOKE_CLOSES = tuple(t + ">" for t in _tags(("invoke",), close=True))
PARAM_OPENS = _tags(("parameter",))
PARAM_CLOSES = tuple(t + ">" for t in _tags(("parameter",), close=True))

_INVOKE_TAG, _INVOKE_BODY, _PARAM_TAG, _PARAM_VALUE = 20, 21, 22, 23
_TAG_END = MarkerScanner([">", "/>"])
_DSML_SCANNERS = {
    _INVOKE_TAG: _TAG_END,
    _INVOKE_BODY: MarkerScanner([*PARAM_OPENS, *INVOKE_CLOSES, *DSML_SECTION_CLOSES]),
    _PARAM_TAG: _TAG_END,
    _PARAM_VALUE: MarkerScanner(PARAM_CLOSES),
}
_ATTR = re.compile(r'([\w-]+)\s*=\s*"([^"]*)"')


def _attrs(tag: str) -> dict[str, str]:
    return dict(_ATTR.findall(tag))


def _param_types(tools: ToolSpecs) -> dict[str, dict[str, Any]]:
    """tool name -> parameter name -> its JSON Schema `type`, where the tools say."""
    out: dict[str, dict[str, Any]] = {}
    for t in tools or ():
        fn = t.get("function", t)
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            continue
        props = (fn.get("parameters") or {}).get("properties") or {}
        if isinstance(props, Mapping):
            out[fn["name"]] = {k: v.get("type") for k, v in props.items() if isinstance(v, Mapping)}
    return out


class DsmlParser(_SectionParser):
    """`deepseek_v32`, `deepseek_v4` and `deepseek_v41`: DSML invoke elements."""

    SECTION_OPENS = DSML_SECTION_OPENS
    SECTION_CLOSES = DSML_SECTION_CLOSES
    CALL_OPENS = INVOKE_OPENS

    def __init__(self, tools: ToolSpecs, prompt_suffix: str) -> None:
        super().__init__(prompt_suffix)
        self._types = _param_types(tools)
        self._tag: list[str] = []
        self._body: list[str] = []
        self._ptag: list[str] = []
        self._value: list[str] = []
        self._params: dict[str, Any] = {}

    def _call_scanner(self) -> MarkerScanner:
        return _DSML_SCANNERS[self._mode]

    def _begin_call(self, marker: str) -> None:
        self._tag, self._body, self._params = [], [], {}
        self._mode = _INVOKE_TAG

    def _call_text(self, text: str) -> None:
        state = self._mode
        if state == _INVOKE_TAG:
            self._tag.append(text)
        elif state == _INVOKE_BODY:
            self._body.append(text)
        elif state == _PARAM_TAG:
            self._ptag.append(text)
        else:
            self._value.append(text)

    def _call_marker(self, marker: str, out: list[ParseEvent]) -> None:
        state = self._mode
        if state == _INVOKE_TAG:
            if marker == "/>":
                self._complete(self._invoke(), out)
            else:
                self._mode = _INVOKE_BODY
        elif state == _INVOKE_BODY:
            if marker in PARAM_OPENS:
                self._ptag = []
                self._mode = _PARAM_TAG
            else:
                section_closed = marker in DSML_SECTION_CLOSES
                self._complete(self._invoke(), out, section_closed=section_closed)
        elif state == _PARAM_TAG:
            self._value = []
            if marker == "/>":
                self._add_param()
                self._mode = _INVOKE_BODY
            else:
                self._mode = _PARAM_VALUE
        else:
            self._add_param()
            self._mode = _INVOKE_BODY

    def _add_param(self) -> None:
        attrs = _attrs("".join(self._ptag))
        name = attrs.get("name")
        if not name:
            return
        raw = "".join(self._value)
        string = attrs.get("string")
        if string is None:
            # Not marked: the tool's schema says whether the value is raw text.
            tool = _attrs("".join(self._tag)).get("name", "")
            string = "true" if self._types.get(tool, {}).get(name) == "string" else "false"
        if string == "true":
            self._params[name] = raw
            return
        try:
            self._params[name] = loads(raw.strip())
        except ValueError:
            self._params[name] = raw  # marked as JSON but is not: keep the text

    def _invoke(self) -> RawCall | None:
        name = _attrs("".join(self._tag)).get("name")
        if not name:
            return None
        if self._params:
            return RawCall(name, self._params)
        body = "".join(self._body).strip()
        if not body:
            return RawCall(name, {})
        # Some engines report the arguments as one JSON object instead of parameters.
        args = loads_object(body)
        return None if args is None else RawCall(name, args)

    def _call_at_end(self, out: list[ParseEvent]) -> RawCall | None:
        return self._invoke() if self._mode == _INVOKE_BODY else None


def make_parser(name: str, tools: ToolSpecs, prompt_suffix: str) -> StreamParser:
    if name in ("deepseek_v3", "deepseek_v31"):
        return ToolCallsParser(prompt_suffix)
    return DsmlParser(tools, prompt_suffix)
