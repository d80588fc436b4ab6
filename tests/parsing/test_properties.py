"""Property tests over every format in FORMATS.

- Outputs rendered in the format (content, reasoning, calls) parse back to what was
  rendered, and any split of them gives the same result as the whole text.
- Random text built from the format's own markers never makes feed/finish raise, and
  any split of it still gives the whole-text result.
- JSON argument values that contain marker strings come back intact.
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from toolwire.parsing import FORMATS, ParsedOutput, assemble, parse_output, parser_for

Args = dict[str, Any]
Call = tuple[str, Args]

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True, kw_only=True)
class Output:
    content: str | None
    reasoning: str | None
    calls: list[Call]


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _raw(value: Any) -> str:
    """A value as the raw-text formats write it: strings bare, the rest as JSON."""
    return value if isinstance(value, str) else _j(value)


def _think(out: Output) -> str:
    return f"<think>\n{out.reasoning}\n</think>\n\n" if out.reasoning else ""


def _text(out: Output, sep: str = "\n") -> str:
    return out.content + sep if out.content else ""


def _objects(out: Output, key: str = "arguments") -> list[dict[str, Any]]:
    return [{"name": n, key: a} for n, a in out.calls]


def _hermes(out: Output) -> str:
    blocks = "".join(f"<tool_call>\n{_j(o)}\n</tool_call>\n" for o in _objects(out))
    return _think(out) + _text(out) + blocks


def _container(open_: str, close: str) -> Callable[[Output], str]:
    def render(out: Output) -> str:
        objs = _objects(out)
        body = "" if not objs else open_ + _j(objs[0] if len(objs) == 1 else objs) + close
        return _think(out) + _text(out) + body

    return render


def _tool_request(out: Output) -> str:
    if not out.calls:
        return _think(out) + (out.content or "")
    name, args = out.calls[0]
    return _think(out) + _j({"tool_request": {"name": name, "arguments": args}})


def _qwen_xml(out: Output) -> str:
    blocks = ""
    for name, args in out.calls:
        params = "".join(f"<parameter={k}>\n{_raw(v)}\n</parameter>\n" for k, v in args.items())
        blocks += f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>\n"
    return _think(out) + _text(out) + blocks


def _llama3(out: Output) -> str:
    return _j(_objects(out, "parameters")[0]) if out.calls else out.content or ""


def _pythonic(out: Output) -> str:
    if not out.calls:
        return out.content or ""
    # repr() writes Python literals: True/False, quoted strings with escapes, ints.
    calls = [f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in out.calls]
    return "[" + ", ".join(calls) + "]"


def _mistral_v3(out: Output) -> str:
    return _text(out, "") + ("[TOOL_CALLS] " + _j(_objects(out)) if out.calls else "")


def _mistral_v11(out: Output) -> str:
    think = f"[THINK]{out.reasoning}[/THINK]" if out.reasoning else ""
    calls = "".join(f"[TOOL_CALLS]{n}[ARGS]{_j(a)}" for n, a in out.calls)
    return think + _text(out, "") + calls


def _harmony(out: Output) -> str:
    messages = []
    if out.reasoning:
        messages.append(f"<|channel|>analysis<|message|>{out.reasoning}<|end|>")
    if out.calls:
        name, args = out.calls[0]
        messages.append(
            f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{_j(args)}"
        )
    elif out.content:
        messages.append(f"<|channel|>final<|message|>{out.content}")
    return "<|start|>assistant".join(messages)


def _deepseek_v3(out: Output) -> str:
    if not out.calls:
        return out.content or ""
    calls = "".join(
        f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{_j(a)}\n```<｜tool▁call▁end｜>"
        for n, a in out.calls
    )
    return _text(out, "") + f"<｜tool▁calls▁begin｜>{calls}<｜tool▁calls▁end｜>"


def _deepseek_v31(out: Output) -> str:
    if not out.calls:
        return out.content or ""
    calls = "".join(
        f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{_j(a)}<｜tool▁call▁end｜>" for n, a in out.calls
    )
    return _text(out, "") + f"<｜tool▁calls▁begin｜>{calls}<｜tool▁calls▁end｜>"


def _dsml(prefix: str, block: str) -> Callable[[Output], str]:
    def render(out: Output) -> str:
        if not out.calls:
            return out.content or ""
        body = ""
        for name, args in out.calls:
            params = "".join(
                f'<{prefix}parameter name="{k}" string="{str(isinstance(v, str)).lower()}">'
                f"{_raw(v)}</{prefix}parameter>\n"
                for k, v in args.items()
            )
            body += f'<{prefix}invoke name="{name}">\n{params}</{prefix}invoke>\n'
        return _text(out, "\n\n") + f"<{prefix}{block}>\n{body}</{prefix}{block}>"

    return render


def _kimi_k2(out: Output) -> str:
    if not out.calls:
        return out.content or ""
    calls = "".join(
        f"<|tool_call_begin|>functions.{n}:{i}<|tool_call_argument_begin|>{_j(a)}<|tool_call_end|>"
        for i, (n, a) in enumerate(out.calls)
    )
    return _text(out, "") + f"<|tool_calls_section_begin|>{calls}<|tool_calls_section_end|>"


def _kimi_k2_thinking(out: Output) -> str:
    # With no prompt given, the thinking models' default prompt has opened <think>.
    return f"{out.reasoning or ''}</think>" + _kimi_k2(out)


def _k3_type(value: Any) -> str:
    return (
        "boolean" if isinstance(value, bool) else "number" if isinstance(value, int) else "string"
    )


def _kimi_k3(out: Output) -> str:
    text = f"{out.reasoning or ''}<|close|>think<|sep|><|open|>response<|sep|>{out.content or ''}"
    text += "<|close|>response<|sep|>"
    if out.calls:
        text += "<|open|>tools<|sep|>"
        for i, (name, args) in enumerate(out.calls, 1):
            text += f'<|open|>call tool="{name}" index="{i}"<|sep|>'
            for k, v in args.items():
                text += f'<|open|>argument key="{k}" type="{_k3_type(v)}"<|sep|>{_raw(v)}'
                text += "<|close|>argument<|sep|>"
            text += "<|close|>call<|sep|>"
        text += "<|close|>tools<|sep|>"
    return text + "<|close|>message<|sep|>"


def _glm(compact: bool) -> Callable[[Output], str]:
    nl = "" if compact else "\n"

    def render(out: Output) -> str:
        calls = ""
        for name, args in out.calls:
            pairs = "".join(
                f"<arg_key>{k}</arg_key>{nl}<arg_value>{_raw(v)}</arg_value>{nl}"
                for k, v in args.items()
            )
            calls += f"<tool_call>{name}{nl}{pairs}</tool_call>"
        if compact:  # GLM-4.7+ templates pre-fill <think>: the output starts in reasoning
            return f"{out.reasoning or ''}</think>{out.content or ''}{calls}"
        think = f"<think>{out.reasoning}</think>\n" if out.reasoning else ""
        return think + _text(out) + calls

    return render


def _gemma_value(value: Any) -> str:
    return f'<|"|>{value}<|"|>' if isinstance(value, str) else _j(value)


def _gemma(out: Output) -> str:
    calls = "".join(
        f"<|tool_call>call:{n}{{{','.join(f'{k}:{_gemma_value(v)}' for k, v in a.items())}}}"
        "<tool_call|>"
        for n, a in out.calls
    )
    return _text(out, "") + calls


@dataclass(frozen=True, kw_only=True)
class Spec:
    render: Callable[[Output], str]
    markers: tuple[str, ...]
    prompt_suffix: str = ""
    reasoning: bool = False
    content_with_calls: bool = True
    max_calls: int = 3
    json_args: bool = False
    """Arguments are JSON text, so any string value (markers included) must survive."""


_THINK = ("<think>", "</think>")
_DS = (
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "｜DSML｜",
    *_THINK,
    "<｜end▁of▁sentence｜>",
)
_GEN = ("<pre>", "</pre>", "```json", "```", *_THINK, '{"tool_request": ', '{"name": "', "[")

SPECS: dict[str, Spec] = {
    "hermes": Spec(
        render=_hermes,
        markers=("<tool_call>", "</tool_call>", *_THINK, "<|im_end|>"),
        reasoning=True,
        json_args=True,
    ),
    "pre_json": Spec(
        render=_container("<pre>", "</pre>"), markers=_GEN, reasoning=True, json_args=True
    ),
    "json_fence": Spec(
        render=_container("```json\n", "\n```"), markers=_GEN, reasoning=True, json_args=True
    ),
    "json": Spec(render=_container("", ""), markers=_GEN, reasoning=True, json_args=True),
    "tool_request": Spec(
        render=_tool_request,
        markers=_GEN,
        reasoning=True,
        content_with_calls=False,
        max_calls=1,
        json_args=True,
    ),
    "qwen3_xml": Spec(
        render=_qwen_xml,
        markers=(
            "<tool_call>",
            "</tool_call>",
            "<function=",
            "</function>",
            "<parameter=",
            "</parameter>",
            *_THINK,
        ),
        reasoning=True,
    ),
    "llama3_json": Spec(
        render=_llama3,
        markers=("<|python_tag|>", "<|eom_id|>", "<|eot_id|>", '{"name": "', "; "),
        content_with_calls=False,
        max_calls=1,
        json_args=True,
    ),
    "pythonic": Spec(
        render=_pythonic,
        markers=("[", "]", "(", ")", "=", "<|python_start|>", "<|python_end|>", "<|eom|>"),
        content_with_calls=False,
    ),
    "mistral_v3": Spec(
        render=_mistral_v3, markers=("[TOOL_CALLS]", "</s>", "[", "{"), json_args=True
    ),
    "mistral_v11": Spec(
        render=_mistral_v11,
        markers=("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]", "</s>"),
        reasoning=True,
        json_args=True,
    ),
    "harmony": Spec(
        render=_harmony,
        markers=(
            "<|start|>",
            "<|end|>",
            "<|message|>",
            "<|channel|>",
            "<|constrain|>",
            "<|call|>",
            "<|return|>",
            "assistant",
            "analysis",
            "commentary",
            "final",
            " to=functions.",
        ),
        reasoning=True,
        content_with_calls=False,
        max_calls=1,
        json_args=True,
    ),
    "deepseek_v3": Spec(
        render=_deepseek_v3, markers=_DS, prompt_suffix="<｜Assistant｜>", json_args=True
    ),
    "deepseek_v31": Spec(
        render=_deepseek_v31, markers=_DS, prompt_suffix="<｜Assistant｜></think>", json_args=True
    ),
    "deepseek_v32": Spec(
        render=_dsml("｜DSML｜", "function_calls"),
        markers=_DS,
        prompt_suffix="<｜Assistant｜></think>",
    ),
    "deepseek_v4": Spec(
        render=_dsml("｜DSML｜", "tool_calls"),
        markers=_DS,
        prompt_suffix="<｜Assistant｜></think>",
    ),
    "deepseek_v41": Spec(
        render=_dsml("｜DSML｜ ", "calls"),
        markers=(*_DS, "｜DSML｜ "),
        prompt_suffix="<｜Assistant｜></think>",
    ),
    "kimi_k2": Spec(
        render=_kimi_k2,
        markers=(
            "<|tool_calls_section_begin|>",
            "<|tool_calls_section_end|>",
            "<|tool_call_begin|>",
            "<|tool_call_end|>",
            "<|tool_call_argument_begin|>",
            *_THINK,
            "<|im_end|>",
        ),
        json_args=True,
    ),
    "kimi_k2_thinking": Spec(
        render=_kimi_k2_thinking,
        markers=(
            "<|tool_calls_section_begin|>",
            "<|tool_call_begin|>",
            "<|tool_call_end|>",
            "<|tool_call_argument_begin|>",
            *_THINK,
        ),
        reasoning=True,
        json_args=True,
    ),
    "kimi_k3": Spec(
        render=_kimi_k3,
        markers=("<|open|>", "<|close|>", "<|sep|>", "think", "response", "tools", "call"),
        reasoning=True,
    ),
    "glm45": Spec(
        render=_glm(compact=False),
        markers=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", *_THINK),
        reasoning=True,
    ),
    "glm47": Spec(
        render=_glm(compact=True),
        markers=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", *_THINK),
        prompt_suffix="<|assistant|><think>",
        reasoning=True,
    ),
    "gemma4": Spec(
        render=_gemma,
        markers=("<|tool_call>", "<tool_call|>", '<|"|>', "<|channel>", "<channel|>", "<turn|>"),
        prompt_suffix="<|turn>model\n<|channel>thought\n<channel|>",
    ),
}


def test_every_format_has_a_spec() -> None:
    assert set(SPECS) == set(FORMATS)


# ----------------------------------------------------------------------------- strategies

_PLAIN = "abcxyzABC019 .,!?'-_/:;éü東🌸"
_plain_text = st.text(alphabet=_PLAIN, min_size=1, max_size=24).map(str.strip).filter(bool)
_keys = st.text(alphabet="abcdefghij_", min_size=1, max_size=6).filter(
    lambda k: k != "_" and not keyword.iskeyword(k)  # pythonic calls need identifiers
)
_scalars = st.one_of(_plain_text, st.integers(-(10**6), 10**6), st.booleans())


def _outputs(spec: Spec) -> st.SearchStrategy[Output]:
    @st.composite
    def build(draw: st.DrawFn) -> Output:
        calls = [
            (f"tool_{i}", draw(st.dictionaries(_keys, _scalars, max_size=3)))
            for i in range(draw(st.integers(0, spec.max_calls)))
        ]
        content = draw(st.none() | _plain_text)
        if calls and not spec.content_with_calls:
            content = None
        if not calls and content is None:
            content = draw(_plain_text)
        reasoning = draw(st.none() | _plain_text) if spec.reasoning else None
        return Output(content=content, reasoning=reasoning, calls=calls)

    return build()


def _tools(calls: list[Call]) -> list[dict[str, Any]]:
    def kind(v: Any) -> str:
        return "boolean" if isinstance(v, bool) else "integer" if isinstance(v, int) else "string"

    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "parameters": {
                    "type": "object",
                    "properties": {k: {"type": kind(v)} for k, v in args.items()},
                },
            },
        }
        for name, args in calls
    ]


def _cuts(text: str) -> st.SearchStrategy[list[str]]:
    return st.lists(st.integers(0, len(text)), max_size=12).map(
        lambda points: [
            text[a:b]
            for a, b in zip([0, *sorted(points)], [*sorted(points), len(text)], strict=True)
        ]
    )


def _summary(out: ParsedOutput) -> tuple[Any, ...]:
    calls = [(c.name, c.arguments_json) for c in out.tool_calls]
    return out.content, out.reasoning, calls, [(f.reason, f.text) for f in out.failures]


def _stream(
    fmt: str, pieces: list[str], tools: Any, suffix: str, truncated: bool = False
) -> ParsedOutput:
    parser = parser_for("property-model", tools, format=fmt, prompt_suffix=suffix)
    events = []
    for piece in pieces:
        events.extend(parser.feed(piece))
    events.extend(parser.finish(truncated=truncated))
    return assemble(events)


def _strip(text: str | None) -> str | None:
    return (text or "").strip() or None


# ----------------------------------------------------------------------------- properties


@pytest.mark.parametrize("fmt", FORMATS)
def test_rendered_output_round_trips_under_any_split(fmt: str) -> None:
    spec = SPECS[fmt]

    @SETTINGS
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        out = data.draw(_outputs(spec))
        text = spec.render(out)
        tools = _tools(out.calls)
        whole = parse_output(
            text, "property-model", tools, format=fmt, prompt_suffix=spec.prompt_suffix
        )
        assert [(c.name, c.arguments) for c in whole.tool_calls] == out.calls, text
        assert _strip(whole.content) == out.content, text
        assert _strip(whole.reasoning) == out.reasoning, text
        assert whole.failures == [], text
        pieces = data.draw(_cuts(text))
        assert _summary(_stream(fmt, pieces, tools, spec.prompt_suffix)) == _summary(whole)

    check()


@pytest.mark.parametrize("fmt", FORMATS)
def test_random_text_never_raises_and_splits_agree(fmt: str) -> None:
    spec = SPECS[fmt]
    alphabet = st.sampled_from([*spec.markers, *'{}[]"\\:,<>|= \nabc1'])

    @SETTINGS
    @given(data=st.data(), truncated=st.booleans())
    def check(data: st.DataObject, truncated: bool) -> None:
        text = "".join(data.draw(st.lists(alphabet, max_size=40)))
        whole = _stream(fmt, [text], None, spec.prompt_suffix, truncated)
        for call in whole.tool_calls:
            assert isinstance(json.loads(call.arguments_json), dict)
        pieces = data.draw(_cuts(text))
        got = _stream(fmt, pieces, None, spec.prompt_suffix, truncated)
        assert _summary(got) == _summary(whole), text

    check()


_JSON_ARG_FORMATS = [f for f, s in SPECS.items() if s.json_args]


@pytest.mark.parametrize("fmt", _JSON_ARG_FORMATS)
def test_marker_strings_inside_json_arguments_survive(fmt: str) -> None:
    spec = SPECS[fmt]
    tricky = st.lists(
        st.sampled_from([*spec.markers, '"', "\\", "\n", "}", "]", "{", "x", " "]),
        min_size=1,
        max_size=8,
    ).map("".join)

    @SETTINGS
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        args = data.draw(st.dictionaries(_keys, tricky, min_size=1, max_size=3))
        out = Output(content=None, reasoning=None, calls=[("tool_0", args)])
        text = spec.render(out)
        tools = _tools(out.calls)
        whole = parse_output(
            text, "property-model", tools, format=fmt, prompt_suffix=spec.prompt_suffix
        )
        assert [(c.name, c.arguments) for c in whole.tool_calls] == out.calls, text
        pieces = data.draw(_cuts(text))
        assert _summary(_stream(fmt, pieces, tools, spec.prompt_suffix)) == _summary(whole)

    check()


@pytest.mark.parametrize("fmt", FORMATS)
def test_text_that_holds_no_call_comes_back_whole(fmt: str) -> None:
    """Garbage made of brackets, quotes and letters (none of the format's markers): no call
    is invented, and not a character of it is lost."""
    spec = SPECS[fmt]
    alphabet = st.sampled_from(list("{}[]()\"'`\\:,.<>|= \nabc1"))

    @SETTINGS
    @given(text=st.text(alphabet=alphabet, max_size=40))
    def check(text: str) -> None:
        assume(not any(marker in text for marker in spec.markers))
        out = parse_output(
            text, "property-model", None, format=fmt, prompt_suffix=spec.prompt_suffix
        )
        if out.tool_calls:
            return  # the garbage happened to spell a call
        kept = (out.content or "") + (out.reasoning or "")
        assert kept.strip() == text.strip(), text

    check()
