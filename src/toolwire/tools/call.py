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
    "too_many_calls",
    "unavailable",
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


class ToolErrorInfo(str):
    """The error of a failed `ToolResult`: it reads as its message and carries a `code`.

    A `str`, so code written against the provider-protocol seed (`error: str`) keeps
    working: `print(f"Error: {result.error}")` prints the message. `error.code` says which
    kind of failure it was (see `ErrorCode`); `error.message` is the plain text.

    Args:
        message: Written for the model: what went wrong and what to do instead.
        code: The kind of failure; a provider's plain-text error is an `execution_error`.
    """

    code: ErrorCode  # in __dict__: a str subclass cannot have a non-empty __slots__

    def __new__(cls, message: str = "", *, code: ErrorCode = "execution_error") -> ToolErrorInfo:
        self = super().__new__(cls, message)
        self.code = code
        return self

    @classmethod
    def of(cls, error: str, code: ErrorCode = "execution_error") -> ToolErrorInfo:
        """`error` as a `ToolErrorInfo`: kept when it is one, else `code` with that message."""
        return error if isinstance(error, ToolErrorInfo) else cls(str(error), code=code)

    @property
    def message(self) -> str:
        """The message as a plain `str`."""
        return str.__str__(self)

    def __eq__(self, other: object) -> bool:
        # Equal to the plain message, and to another error only when the codes match too.
        if isinstance(other, ToolErrorInfo) and other.code != self.code:
            return False
        return str.__eq__(self, other)

    __hash__ = str.__hash__  # equal errors have equal messages, so equal hashes

    def __repr__(self) -> str:
        return f"ToolErrorInfo(code={self.code!r}, message={self.message!r})"

    def __getnewargs_ex__(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # pickle and copy rebuild the code too, not just the text.
        return (self.message,), {"code": self.code}


@dataclass(slots=True, kw_only=True, init=False)
class ToolResult:
    """The outcome of one `ToolCall`: a JSON-able `result`, or an `error`.

    A provider builds it as the provider-protocol seed does, without a call id or name —
    `ToolResult(success=True, result={...})` or `ToolResult(success=False, error="City
    'X' not found")` — and the runner fills them in. A plain-text `error` becomes a
    `ToolErrorInfo` with code `execution_error`.
    """

    call_id: str
    """The id of the call this answers; the runner sets it."""
    name: str
    """The tool's name; the runner sets it."""
    success: bool
    result: Any
    error: ToolErrorInfo | None
    """`None` on success; reads as its message, and has a `code`."""
    duration_ms: float
    """Time the runner spent on the call, without `approval_wait_ms`."""
    approval_wait_ms: float = 0.0
    """Time spent waiting for a person (or an approver) to decide on the call."""
    repaired: list[str] = field(default_factory=list)
    """Argument encodings the runner repaired before validation (e.g. `'count': str -> int`)."""
    cached: bool = False

    def __init__(
        self,
        *,
        success: bool,
        result: Any = None,
        error: str | None = None,
        call_id: str = "",
        name: str = "",
        duration_ms: float = 0.0,
        approval_wait_ms: float = 0.0,
        repaired: list[str] | None = None,
        cached: bool = False,
    ) -> None:
        self.call_id = call_id
        self.name = name
        self.success = success
        self.result = result
        self.error = ToolErrorInfo.of(error) if error is not None else None
        self.duration_ms = duration_ms
        self.approval_wait_ms = approval_wait_ms
        self.repaired = repaired if repaired is not None else []
        self.cached = cached

    @classmethod
    def ok(cls, call_id: str, name: str, result: Any, **kw: Any) -> ToolResult:
        return cls(call_id=call_id, name=name, success=True, result=result, **kw)

    @classmethod
    def fail(cls, call_id: str, name: str, code: ErrorCode, message: str, **kw: Any) -> ToolResult:
        return cls(
            call_id=call_id,
            name=name,
            success=False,
            error=ToolErrorInfo(message, code=code),
            **kw,
        )

    def to_model_text(self) -> str:
        """The text a model sees as this call's result."""
        import orjson

        if self.success:
            if isinstance(self.result, str):
                return self.result
            return orjson.dumps(self.result).decode()
        error = self.error or ToolErrorInfo(f"Tool {self.name!r} failed.")
        return orjson.dumps({"error": {"code": error.code, "message": error.message}}).decode()
