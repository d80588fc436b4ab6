"""Hermes-style calls (Qwen3, Hermes): `<tool_call>{"name": …, "arguments": {…}}</tool_call>`."""

from __future__ import annotations

from toolwire.parsing._base import RawCall, StreamParser, ToolSpecs
from toolwire.parsing._json import loads_object
from toolwire.parsing._regions import ReasoningRegion, RegionParser, ToolRegion

THINK = ReasoningRegion(open="<think>", close="</think>")


def _parse_block(inner: str, closed: bool, truncated: bool) -> list[RawCall] | None:
    if truncated:
        return None
    obj = loads_object(inner.strip())
    if obj is None:
        return None
    name = obj.get("name")
    args = obj.get("arguments", obj.get("parameters", {}))
    if not isinstance(name, str) or not name or not isinstance(args, dict):
        return None
    return [RawCall(name, args)]


def make_parser(name: str, tools: ToolSpecs, prompt_suffix: str) -> StreamParser:
    return RegionParser(
        tools=[
            ToolRegion(
                open="<tool_call>", close="</tool_call>", parse=_parse_block, json_aware=True
            )
        ],
        reasoning=[THINK],
        start_in_reasoning=prompt_suffix.rstrip().endswith("<think>"),
        drop=["</think>", "<|im_end|>", "<|endoftext|>"],
    )
