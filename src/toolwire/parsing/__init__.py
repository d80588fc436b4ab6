"""Model output → content, reasoning and tool calls, for every major model family.

Streaming-safe: `parser_for(...)` gives a parser whose events, for any split of the
output, assemble to exactly `parse_output(...)` of the whole text.
"""

from toolwire.parsing._base import RawCall, StreamParser
from toolwire.parsing.events import (
    ContentDelta,
    ParsedOutput,
    ParsedToolCall,
    ParseEvent,
    ParseFailure,
    ReasoningDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    assemble,
)
from toolwire.parsing.registry import (
    DEFAULT_FORMAT,
    FORMATS,
    UnknownFormatError,
    format_for,
    match_format,
    parse_output,
    parser_for,
)
from toolwire.parsing.render import (
    RENDER_FORMATS,
    default_instructions,
    render_calls,
    render_results,
    render_tool_prompt,
    render_tools,
)

__all__ = [
    "DEFAULT_FORMAT",
    "FORMATS",
    "RENDER_FORMATS",
    "ContentDelta",
    "ParseEvent",
    "ParseFailure",
    "ParsedOutput",
    "ParsedToolCall",
    "RawCall",
    "ReasoningDelta",
    "StreamParser",
    "ToolCallArgsDelta",
    "ToolCallStart",
    "UnknownFormatError",
    "assemble",
    "default_instructions",
    "format_for",
    "match_format",
    "parse_output",
    "parser_for",
    "render_calls",
    "render_results",
    "render_tool_prompt",
    "render_tools",
]
