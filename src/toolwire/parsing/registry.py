"""Which format a model writes, and building parsers for it.

Format modules are imported lazily: `toolwire.parsing.formats.<module>` exposes
`make_parser(tools, prompt_suffix) -> StreamParser`.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from functools import cache, lru_cache
from typing import cast

from toolwire.parsing._base import StreamParser, ToolSpecs, tool_names
from toolwire.parsing.events import ParsedOutput, assemble

__all__ = [
    "DEFAULT_FORMAT",
    "FORMATS",
    "UnknownFormatError",
    "format_for",
    "parse_output",
    "parser_for",
]

# format name -> module in toolwire.parsing.formats
_MODULES: dict[str, str] = {
    # prompted / generic formats
    "hermes": "hermes",
    "pre_json": "generic",
    "json_fence": "generic",
    "json": "generic",
    "tool_request": "generic",
    # model families
    "qwen3_xml": "qwen_xml",
    "llama3_json": "llama",
    "pythonic": "llama",
    "mistral_v3": "mistral",
    "mistral_v11": "mistral",
    "harmony": "harmony",
    "deepseek_v3": "deepseek",
    "deepseek_v31": "deepseek",
    "deepseek_v32": "deepseek",
    "deepseek_v4": "deepseek",
    "deepseek_v41": "deepseek",
    "kimi_k2": "kimi",
    "kimi_k2_thinking": "kimi",
    "kimi_k3": "kimi",
    "glm45": "glm",
    "glm47": "glm",
    "gemma4": "gemma",
}

FORMATS: tuple[str, ...] = tuple(_MODULES)
"""Every format name `format=` accepts."""

DEFAULT_FORMAT = "hermes"
"""Used for model ids no rule below recognises: the most widely trained tool-call format."""

# (pattern on the model id, format); first match wins. Matching is case-insensitive and
# looks at the last path component too, so "Qwen/Qwen3-8B" and "qwen3-8b" both match.
_MODEL_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p, re.IGNORECASE), f)
    for p, f in [
        # DeepSeek first: its R1 distills (…-Distill-Qwen-32B, …-R1-0528-Qwen3-8B) ship
        # DeepSeek's chat template, whatever their base. V3.2-Exp kept V3.1's format; DSML
        # came with V3.2.
        (r"deepseek.*v4\.[1-9]", "deepseek_v41"),
        (r"deepseek.*v4", "deepseek_v4"),
        (r"deepseek.*v3\.2[-_.]?exp", "deepseek_v31"),
        (r"deepseek.*v3\.[2-9]", "deepseek_v32"),
        (r"deepseek.*v3\.1", "deepseek_v31"),
        (r"deepseek", "deepseek_v3"),
        (r"qwen3[-_.]?coder", "qwen3_xml"),
        (r"qwen3\.[5-9]|qwen[4-9]", "qwen3_xml"),
        (r"qwen", "hermes"),
        (r"hermes|nous", "hermes"),
        (r"llama[-_.]?4", "pythonic"),
        (r"llama[-_.]?3", "llama3_json"),
        (r"gpt[-_]?oss", "harmony"),
        (r"kimi[-_.]?k[3-9]", "kimi_k3"),
        (r"kimi[-_.]?k2[-_.]?(thinking|\.[1-9])", "kimi_k2_thinking"),
        (r"kimi", "kimi_k2"),
        (r"glm[-_.]?(4\.[7-9]|[5-9])", "glm47"),
        (r"glm", "glm45"),
        (r"gemma[-_.]?4", "gemma4"),
        # Mistral: the tokenizer version decides. v3/v7 tokenizers write a JSON array;
        # v11+ (from mid-2025: Small 3.2, Magistral, Devstral 2507+, Ministral 3, Medium
        # 3.x, Large 3, Small 4) write `name[ARGS]{…}`. Older models with those names first.
        (r"ministral[-_]8b|devstral[-_]small[-_]2505|mistral[-_]small[-_](3\.1|24b)", "mistral_v3"),
        (
            r"magistral|devstral|ministral"
            r"|mistral[-_](small|medium|large)[-_](3\.[2-9]|[4-9]|3(?![\d.]))",
            "mistral_v11",
        ),
        (r"mistral|mixtral|codestral|pixtral", "mistral_v3"),
    ]
]


class UnknownFormatError(ValueError):
    """`format=` names no known format."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown tool-call format {name!r}. Known formats: {', '.join(FORMATS)}.")


def format_for(model: str, *, format: str | None = None) -> str:
    """The format name for a model id (`DEFAULT_FORMAT` when no family matches), or the
    explicit `format` after checking it."""
    if format is not None:
        if format not in _MODULES:
            raise UnknownFormatError(format)
        return format
    return match_format(model) or DEFAULT_FORMAT


@lru_cache(maxsize=256)  # a gateway asks for the same few model ids on every request
def match_format(model: str) -> str | None:
    """The format of the model family `model` belongs to, or `None` when none matches."""
    for pattern, name in _MODEL_RULES:
        if pattern.search(model):
            return name
    return None


@cache  # an import by name goes through the import system's locks every time
def _factory(name: str) -> Callable[[str, ToolSpecs, str], StreamParser]:
    module = importlib.import_module(f"toolwire.parsing.formats.{_MODULES[name]}")
    return cast(Callable[[str, ToolSpecs, str], StreamParser], module.make_parser)


def parser_for(
    model: str, tools: ToolSpecs = None, *, format: str | None = None, prompt_suffix: str = ""
) -> StreamParser:
    """A fresh stream parser for one output of `model` (one parser per generation)."""
    name = format_for(model, format=format)
    return _factory(name)(name, tools, prompt_suffix)


def parse_output(
    text: str,
    model: str,
    tools: ToolSpecs = None,
    *,
    format: str | None = None,
    prompt_suffix: str = "",
    truncated: bool = False,
) -> ParsedOutput:
    """Parse one complete model output: content, reasoning and tool calls."""
    parser = parser_for(model, tools, format=format, prompt_suffix=prompt_suffix)
    events = parser.feed(text)
    events += parser.finish(truncated=truncated)
    return assemble(events, tool_names(tools) if tools is not None else None)
