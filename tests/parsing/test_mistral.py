"""Mistral `[TOOL_CALLS]`: v3 JSON arrays, v11+ `name[ARGS]{…}`, `[THINK]` reasoning."""

from __future__ import annotations

import pytest
from streaming import calls, parse_all_ways

from toolwire.parsing import ToolCallStart, format_for, parse_output, parser_for


@pytest.mark.parametrize(
    ("model", "fmt"),
    [
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral_v3"),
        ("mistralai/Mixtral-8x22B-Instruct-v0.1", "mistral_v3"),
        ("mistralai/Ministral-8B-Instruct-2410", "mistral_v3"),
        ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistral_v3"),
        ("mistralai/Devstral-Small-2505", "mistral_v3"),
        ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistral_v11"),
        ("mistralai/Devstral-Small-2507", "mistral_v11"),
        ("mistralai/Magistral-Small-2506", "mistral_v11"),
        ("mistralai/Magistral-Small-2509", "mistral_v11"),
        ("mistralai/Ministral-3-14B-Reasoning-2512", "mistral_v11"),
        ("mistralai/Mistral-Medium-3.5-128B", "mistral_v11"),
        ("mistralai/Mistral-Large-3-675B-Instruct-2512", "mistral_v11"),
        ("mistralai/Mistral-Small-4-119B-2603", "mistral_v11"),
    ],
)
def test_model_ids_select_the_tokenizer_version(model: str, fmt: str) -> None:
    assert format_for(model) == fmt


def test_v3_array_with_content_before_and_arguments_before_name() -> None:
    text = 'Hi [TOOL_CALLS] [{"arguments": {"name": "Ann"}, "name": "age"}, {"name": "t"}]'
    out = parse_all_ways(text, "mistral_v3")
    assert out.content == "Hi"
    assert calls(out) == [("age", {"name": "Ann"}), ("t", {})]


def test_v3_keeps_the_models_call_id() -> None:
    out = parse_output(
        '[TOOL_CALLS][{"name": "f", "arguments": {}, "id": "a1B2c3D4e"}]', "m", format="mistral_v3"
    )
    assert out.tool_calls[0].id == "a1B2c3D4e"


def test_v11_parallel_calls_with_call_ids() -> None:
    text = (
        '[TOOL_CALLS]add[CALL_ID]000000001[ARGS]{"a": 3.5}[TOOL_CALLS]mul[CALL_ID]x2[ARGS]{"b": 6}'
    )
    out = parse_all_ways(text, "mistral_v11")
    assert calls(out) == [("add", {"a": 3.5}), ("mul", {"b": 6})]
    assert [c.id for c in out.tool_calls] == ["000000001", "x2"]
    assert out.content is None


def test_v11_without_call_id_gets_a_generated_id() -> None:
    out = parse_output("[TOOL_CALLS]get_time[ARGS]{}", "m", format="mistral_v11")
    assert calls(out) == [("get_time", {})]
    assert out.tool_calls[0].id.startswith("call_")


def test_think_reasoning_ignores_marker_text_inside_it() -> None:
    text = '[THINK]About [TOOL_CALLS]f[ARGS]{"a":1} and more[/THINK][TOOL_CALLS]f[ARGS]{"a": 2}'
    out = parse_all_ways(text, "mistral_v11")
    assert out.reasoning == 'About [TOOL_CALLS]f[ARGS]{"a":1} and more'
    assert calls(out) == [("f", {"a": 2})]


def test_plain_text_think_of_magistral_2506() -> None:
    out = parse_all_ways("<think>r</think>c", "mistral_v11")
    assert (out.reasoning, out.content) == ("r", "c")


def test_prompt_prefilled_with_think_starts_in_reasoning() -> None:
    out = parse_all_ways("plan[/THINK]answer", "mistral_v11", prompt_suffix="[/INST][THINK]")
    assert (out.reasoning, out.content) == ("plan", "answer")


def test_markers_and_braces_inside_arguments_are_data() -> None:
    text = '[TOOL_CALLS]w[ARGS]{"c": "x [TOOL_CALLS]n[ARGS]{\\"a\\": 1} [THINK]}{ ]["}'
    out = parse_all_ways(text, "mistral_v11")
    assert calls(out) == [("w", {"c": 'x [TOOL_CALLS]n[ARGS]{"a": 1} [THINK]}{ ]['})]
    assert out.content is None


def test_either_version_reads_the_other_shape() -> None:
    v3 = '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}]'
    v11 = '[TOOL_CALLS]f[ARGS]{"a": 1}'
    assert calls(parse_all_ways(v3, "mistral_v11")) == [("f", {"a": 1})]
    assert calls(parse_all_ways(v11, "mistral_v3")) == [("f", {"a": 1})]


def test_content_between_and_after_calls_stays_in_order() -> None:
    out = parse_all_ways('A[TOOL_CALLS]f[ARGS]{} B [TOOL_CALLS]g[ARGS]{"x": null} C', "mistral_v11")
    assert out.content == "A B  C"
    assert calls(out) == [("f", {}), ("g", {"x": None})]


def test_call_is_emitted_only_when_its_json_closes() -> None:
    text = '[TOOL_CALLS]f[ARGS]{"a": {"b": "}"}}'
    parser = parser_for("m", format="mistral_v11")
    for i, ch in enumerate(text):
        events = parser.feed(ch)
        started = any(isinstance(e, ToolCallStart) for e in events)
        assert started == (i == len(text) - 1)


def test_text_that_is_not_a_call_comes_back_verbatim() -> None:
    out = parse_all_ways("[TOOL_CALLS] not json at all", "mistral_v3")
    assert (out.content, out.tool_calls) == ("[TOOL_CALLS] not json at all", [])
    out = parse_all_ways('[TOOL_CALLS]f[ARGS]["a"]', "mistral_v11")
    assert out.tool_calls == []


def test_truncated_inside_arguments_keeps_earlier_calls_only() -> None:
    text = '[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[ARGS]{"path": "/tmp/x", "content": "rm -rf /'
    out = parse_all_ways(text, "mistral_v11", truncated=True)
    assert calls(out) == [("f", {"a": 1})]
    assert out.content is None


def test_output_ending_right_after_the_marker_does_not_leak_it() -> None:
    out = parse_all_ways("[THINK]r[/THINK]Let me check.[TOOL_CALLS]", "mistral_v11", truncated=True)
    assert (out.reasoning, out.content, out.tool_calls) == ("r", "Let me check.", [])


def test_unclosed_think_is_reasoning() -> None:
    out = parse_all_ways("[THINK]The user wants", "mistral_v11", truncated=True)
    assert (out.reasoning, out.content) == ("The user wants", None)


def test_control_tokens_never_reach_content() -> None:
    out = parse_all_ways("Done.</s>[INST]", "mistral_v11")
    assert out.content == "Done."


def test_absurdly_deep_arguments_degrade_to_content() -> None:
    deep = '{"a":' * 50_000 + "1" + "}" * 50_000
    out = parse_output("[TOOL_CALLS]f[ARGS]" + deep, "m", format="mistral_v11")
    assert out.tool_calls == []
    assert out.content is not None
