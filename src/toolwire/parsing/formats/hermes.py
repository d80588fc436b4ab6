"""Hermes-style calls (Qwen3, Qwen2.5, Hermes): `<tool_call>{"name", "arguments"}</tool_call>`.

Qwen3 thinking models open with `<think>`; the 2507 thinking models get `<think>\\n`
pre-filled by the template, so their output starts inside reasoning (`prompt_suffix`).
Some fine-tunes write `"parameters"` instead of `"arguments"`.
"""

from __future__ import annotations

from typing import Any

from toolwire.parsing._base import RawCall, StreamParser, ToolSpecs
from toolwire.parsing._blocks import CallParser, Reasoning, ToolRegion
from toolwire.parsing._json import loads, loads_object

THINK = Reasoning(open="<think>", close="</think>")

# End-of-turn tokens and stray closers never belong in content.
_DROP = ("</think>", "</tool_call>", "<|im_start|>", "<|im_end|>", "<|endoftext|>")


def call_from_object(obj: Any, *, require_arguments: bool = False) -> RawCall | None:
    """A call from `{"name": …, "arguments" | "parameters": {…}}`, or None if it is not one.

    Arguments given as a JSON-encoded string (the OpenAI wire habit) are decoded. Missing
    arguments mean a no-argument call unless `require_arguments`.
    """
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    key = "arguments" if "arguments" in obj else "parameters" if "parameters" in obj else None
    if key is None:
        if require_arguments:
            return None
        args: Any = {}
    else:
        args = obj[key]
    if isinstance(args, str):
        try:
            args = loads(args) if args.strip() else {}
        except ValueError:
            return None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return None
    return RawCall(name.strip(), args)


def _parse_block(inner: str, closed: bool, truncated: bool) -> list[RawCall] | None:
    if truncated:
        # Cut off inside the block: the model never finished this call. Dropping it (not
        # passing the markup through) keeps the opener out of the content.
        return []
    call = call_from_object(loads_object(inner.strip()))
    return None if call is None else [call]


def make_parser(name: str, tools: ToolSpecs, prompt_suffix: str) -> StreamParser:
    return CallParser(
        regions=[
            ToolRegion(
                open="<tool_call>", close="</tool_call>", parse=_parse_block, json_aware=True
            )
        ],
        reasoning=[THINK],
        prompt_suffix=prompt_suffix,
        drop=_DROP,
        calls_end_reasoning=True,
    )
