"""What a model asks for (`ToolCall`) and what it gets back (`ToolResult`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ErrorCode", "ToolCall", "ToolErrorInfo", "ToolResult", "new_call_id"]

ErrorCode = Literal[
    "unknown_tool",
    "invalid_json",
    "invalid_arguments",
    "forbidden",
    "denied",
    "timeout",
    "execution_error",
    "result_too_large",
    "awaiting_approval",
    "retry_budget_exhausted",
]
"""Error codes of a failed `ToolResult`. Messages under every code are safe to show a model."""


def new_call_id() -> str:
    """A fresh tool-call id in the OpenAI style (`call_` + 24 hex characters)."""
    return "call_" + uuid.uuid4().hex[:24]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call as the model made it."""

    id: str
    """Stable from the model's request to the result sent back."""
    name: str
    arguments: str
    """The raw JSON text the model sent; it may be invalid JSON."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolErrorInfo:
    code: ErrorCode
    message: str
    """Written for the model: what went wrong and what to do instead."""


@dataclass(slots=True, kw_only=True)
class ToolResult:
    """The outcome of one `ToolCall`: a JSON-able `result`, or an `error`."""

    call_id: str
    name: str
    success: bool
    result: Any = None
    error: ToolErrorInfo | None = None
    duration_ms: float = 0.0
    repaired: list[str] = field(default_factory=list)
    """Argument encodings the runner repaired before validation (e.g. `'count': str -> int`)."""
    cached: bool = False

    @classmethod
    def ok(cls, call_id: str, name: str, result: Any, **kw: Any) -> ToolResult:
        return cls(call_id=call_id, name=name, success=True, result=result, **kw)

    @classmethod
    def fail(cls, call_id: str, name: str, code: ErrorCode, message: str, **kw: Any) -> ToolResult:
        return cls(
            call_id=call_id,
            name=name,
            success=False,
            error=ToolErrorInfo(code=code, message=message),
            **kw,
        )

    def to_model_text(self) -> str:
        """The text a model sees as this call's result."""
        import orjson

        if self.success:
            if isinstance(self.result, str):
                return self.result
            return orjson.dumps(self.result).decode()
        assert self.error is not None
        return orjson.dumps(
            {"error": {"code": self.error.code, "message": self.error.message}}
        ).decode()
