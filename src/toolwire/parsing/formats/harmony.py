"""OpenAI Harmony (gpt-oss): messages on channels.

Output is a run of messages, each `<|start|>ROLE HEADER<|message|>BODY` closed by
`<|end|>`, `<|call|>` or `<|return|>`; the generation prompt already wrote
`<|start|>assistant`, so output usually begins inside the first header. The header names
a channel (`<|channel|>analysis`) and maybe a recipient, in the role part
(`assistant to=functions.x<|channel|>commentary`) or after the channel
(`<|channel|>commentary to=functions.x <|constrain|>json`); both spellings are in the
spec. What a message becomes:

- recipient `functions.NAME` (on any channel): a tool call whose body is its JSON
  arguments. The stop token `<|call|>` is cut from output, so the end of a finished
  output also ends the call; a truncated one never yields it.
- another recipient (built-in `python`, `browser.*`): not a function call; dropped.
- `analysis`: reasoning. `final`, and `commentary` without recipient (a preamble shown to
  the user): content. An out-of-spec channel: dropped.

Malformed headers (no `<|message|>` before the next `<|start|>` / end token) are skipped,
but text after the channel name of one an end token closes (`<|channel|>analysis I must
refuse<|end|>`) is that channel's, as openai-harmony's non-strict parser reads it.
Text the output starts with that no header marker follows (`Let me check.<|start|>…`,
`I must refuse<|end|>…`) was never a header: it is content, as openai-harmony's non-strict
parser and SGLang read it. Inside a message only its end tokens count; marker text inside a
call's JSON strings or in reasoning is data.
"""

from __future__ import annotations

import re

from toolwire.parsing._base import RawCall, StreamParser, TextSink, ToolSpecs, tool_names
from toolwire.parsing._json import loads_object
from toolwire.parsing._machine import JSON_QUOTE, JSON_STRING, MarkerMachine
from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.events import ContentDelta, ParseEvent, ReasoningDelta

START, END, CALL, RETURN = "<|start|>", "<|end|>", "<|call|>", "<|return|>"
MESSAGE, CHANNEL, CONSTRAIN = "<|message|>", "<|channel|>", "<|constrain|>"
MARKERS = (START, END, CALL, RETURN, MESSAGE, CHANNEL, CONSTRAIN)

_HEADER, _REASONING, _CONTENT, _CALL, _STRING, _SKIP = range(6)

_CALL_ENDS = MarkerScanner([CALL, END, RETURN])
_SCANNERS = {
    _HEADER: MarkerScanner(MARKERS),
    _REASONING: MarkerScanner([END, RETURN]),
    _CONTENT: MarkerScanner([END, RETURN]),
    _CALL: MarkerScanner([JSON_QUOTE, *_CALL_ENDS.markers]),
    _STRING: JSON_STRING,
    _SKIP: _CALL_ENDS,
}
_RECIPIENT = re.compile(r"(?:^|\s)to=(\S+)")
_CONTENT_CHANNELS = ("final", "commentary", "")  # a message in one of these is content
_PLAIN_ENDS = (START, END, CALL, RETURN)  # markers that end a message, not a header part
_FUNCTIONS = "functions."


class HarmonyParser(MarkerMachine):
    """Stream parser for Harmony output.

    Args:
        tools: the offered tools; a bare recipient naming one of them (without the
            `functions.` namespace) is taken as a call too.
        prompt_suffix: the end of the generation prompt; by default output starts inside
            an assistant header, as after `<|start|>assistant`.
    """

    def __init__(self, tools: ToolSpecs = None, prompt_suffix: str = "") -> None:
        super().__init__()
        self._tools = tool_names(tools)
        self._mode = _HEADER
        self._role: list[str] = []
        self._channel: list[str] | None = None  # None until the header names a channel
        self._body: list[str] = []
        self._name = ""
        self._plain: list[str] | None = None
        self._content = TextSink(ContentDelta)
        self._reasoning = TextSink(ReasoningDelta)
        if START in prompt_suffix:
            # Only the last message of the prompt can still be open; replay it to learn
            # where output starts (the events belong to the prompt, not the output).
            self.feed(prompt_suffix[prompt_suffix.rindex(START) :])
            self._content = TextSink(ContentDelta)
            self._reasoning = TextSink(ReasoningDelta)
            self._call_index = 0
        # Text before any marker, kept in case the output is not Harmony at all.
        self._plain = [] if self._mode == _HEADER else None

    # -- the machine

    def _scanner(self) -> MarkerScanner:
        return _SCANNERS[self._mode]

    def _text(self, text: str, out: list[ParseEvent]) -> None:
        state = self._mode
        if state == _CONTENT:
            self._content.write(text, out)
        elif state == _REASONING:
            self._reasoning.write(text, out)
        elif state in (_CALL, _STRING):
            self._body.append(text)
        elif state == _HEADER:
            (self._role if self._channel is None else self._channel).append(text)
            if self._plain is not None:
                self._plain.append(text)

    def _marker(self, marker: str, out: list[ParseEvent]) -> None:
        if self._plain is not None:
            plain, self._plain = "".join(self._plain), None
            if marker in _PLAIN_ENDS and _RECIPIENT.search(plain) is None:
                # The output began with plain text, not a header: keep it as content.
                self._content.write(plain, out)
        state = self._mode
        if state == _HEADER:
            self._header_marker(marker, out)
        elif state == _STRING:
            self._body.append(marker)
            if marker == '"':
                self._mode = _CALL
        elif state == _CALL and marker == '"':
            self._body.append(marker)
            self._mode = _STRING
        elif state == _CALL:
            self._end_call(closed=True, out=out)
        else:  # the end of a text or skipped message
            self._new_header()

    def _header_marker(self, marker: str, out: list[ParseEvent]) -> None:
        if marker == MESSAGE:
            self._open_body()
        elif marker == CHANNEL:
            if self._channel is not None:
                # A second channel: the first header was stray; the later one counts.
                self._role = []
            self._channel = []
        elif marker == CONSTRAIN:
            (self._role if self._channel is None else self._channel).append(" ")
        else:
            # <|start|> begins a new message; an end token here closes a header that
            # never reached <|message|>: text after its channel name is that channel's.
            if marker != START:
                self._headless_text(out)
            self._new_header()

    def _headless_text(self, out: list[ParseEvent]) -> None:
        """`<|channel|>analysis I must refuse<|end|>`: the text after the channel name of a
        header that an end token closed is kept in that channel (openai-harmony's
        non-strict reading), not lost; a header with a recipient is no text."""
        if self._channel is None:
            return
        text = "".join(self._channel).strip()
        if _RECIPIENT.search("".join(self._role) + " " + text) is not None:
            return
        channel, _, body = text.partition(" ")
        body = body.strip()
        if not body:
            return
        if channel == "analysis":
            self._reasoning.new_paragraph()
            self._reasoning.write(body, out)
        elif channel in _CONTENT_CHANNELS:
            self._content.new_paragraph()
            self._content.write(body, out)

    def _new_header(self) -> None:
        self._mode = _HEADER
        self._role = []
        self._channel = None

    def _open_body(self) -> None:
        channel_text = "".join(self._channel) if self._channel is not None else ""
        header = "".join(self._role) + " " + channel_text
        words = [w for w in channel_text.split() if not w.startswith("to=")]
        channel = words[0] if words else ""
        found = _RECIPIENT.search(header)
        self._role, self._channel = [], None
        if found is not None:
            recipient = found.group(1)
            if recipient.startswith(_FUNCTIONS) and len(recipient) > len(_FUNCTIONS):
                self._name = recipient[len(_FUNCTIONS) :]
            elif recipient in self._tools:
                self._name = recipient
            else:
                self._mode = _SKIP  # a built-in tool (python, browser.*) or nonsense
                return
            self._body = []
            self._mode = _CALL
        elif channel == "analysis":
            self._reasoning.new_paragraph()  # two analysis messages stay apart too
            self._mode = _REASONING
        elif channel in _CONTENT_CHANNELS:
            # A preamble and the final answer are two messages: keep them apart.
            self._content.new_paragraph()
            self._mode = _CONTENT
        else:
            self._mode = _SKIP

    def _end_call(self, *, closed: bool, out: list[ParseEvent]) -> None:
        body = "".join(self._body)
        self._body = []
        self._new_header()
        # An empty body is a call without arguments (`<|message|><|call|>`).
        args = loads_object(body.strip()) if body.strip() else {}
        if args is not None:
            out.extend(self._call_events(RawCall(self._name, args)))
            return
        if not closed:
            cut = _CALL_ENDS.search(body)
            if cut is not None:
                # An unbalanced quote hid the end token; split at it as written.
                self._content.write(body[: cut.start()], out)
                self._replay(body[cut.end() :], out)
                self._finish_state(truncated=False, out=out)
                return
        self._content.write(body, out)  # malformed arguments degrade to content
        self._failed("invalid", body, out)

    # -- the end of output

    def finish(self, *, truncated: bool = False) -> list[ParseEvent]:
        out: list[ParseEvent] = []
        self._release(out)
        self._finish_state(truncated=truncated, out=out)
        return out

    def _finish_state(self, *, truncated: bool, out: list[ParseEvent]) -> None:
        state = self._mode
        if state in (_CALL, _STRING):
            if truncated:
                self._body = []  # the model never finished this call
                self._new_header()
            else:
                self._end_call(closed=False, out=out)
        elif state == _HEADER and self._plain is not None:
            # No marker at all: this output is not Harmony; it is plain content.
            text, self._plain = "".join(self._plain), None
            self._content.write(text, out)
        self._mode = _SKIP


def make_parser(name: str, tools: ToolSpecs, prompt_suffix: str) -> StreamParser:
    return HarmonyParser(tools, prompt_suffix)
