"""What a model asks for (`ToolCall`) and what it gets back (`ToolResult`)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import ItemsView, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field
from typing import Any, Literal, SupportsIndex, overload

import orjson

from toolwire.tools.errors import ToolParameterError

__all__ = [
    "ErrorCode",
    "ToolArguments",
    "ToolCall",
    "ToolErrorInfo",
    "ToolResult",
    "new_call_id",
]

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


class ToolArguments(str):
    """A call's arguments as the raw JSON text, that also answers the reads of a dict.

    What `ModelResponse.tool_calls` gives a call's `arguments`, so that the provider-protocol
    seed's loop, `provider.execute_tool(call.name, call.arguments)` with a provider that
    reads `parameters.get("city")`, runs as written. It *is* the text: a `str` equal to
    it, sent and encoded as a JSON string, parsed by the runner as any other (so invalid
    JSON still comes back to the model as `invalid_json`). The reads a `str` lacks read the
    parsed object instead: `get(key, default)`, `arguments[key]` with a `str` key,
    `keys()`, `values()`, `items()`, and so `dict(arguments)` and `**arguments`. `in`,
    `len()`, iteration and slicing stay the text's. It equals a mapping holding the same
    object, as well as its text.

    A type checker sees a `str`; typed code that needs the `dict` calls `to_dict()`.

    Args:
        text: The JSON text the model sent; empty means no arguments.
        tool: The tool called, named in error messages.

    Raises:
        ToolParameterError: On a dict read, when the text is not a JSON object (the
            message says what is wrong without repeating the text).
    """

    tool: str | None  # in __dict__, as for ToolErrorInfo
    _object: dict[str, Any] | None

    def __new__(cls, text: str = "", tool: str | None = None) -> ToolArguments:
        self = super().__new__(cls, text)
        self.tool = tool
        self._object = None
        return self

    def to_dict(self) -> dict[str, Any]:
        """The arguments parsed into a new `dict` (the runner's reading, without its schema
        checks): empty text is `{}`, and an object encoded twice as a JSON string is read
        through, as the runner repairs it."""
        text = str.__str__(self)  # orjson reads exact `str`s only
        if not text or text.isspace():
            return {}
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise ToolParameterError(
                f"The arguments{self._for_tool()} are not valid JSON ({exc.msg} at line "
                f"{exc.lineno} column {exc.colno}). Send them as one JSON object."
            ) from None
        if isinstance(value, str):
            with contextlib.suppress(orjson.JSONDecodeError):
                value = orjson.loads(value)
        if type(value) is not dict:
            raise ToolParameterError(
                f"The arguments{self._for_tool()} must be a JSON object, not {_json_kind(value)}."
            )
        return value

    def get(self, key: str, default: Any = None) -> Any:
        """The argument `key`, or `default` when the model did not send it."""
        return self._read().get(key, default)

    def keys(self) -> KeysView[str]:
        return self._read().keys()

    def values(self) -> ValuesView[Any]:
        return self._read().values()

    def items(self) -> ItemsView[str, Any]:
        return self._read().items()

    @overload
    def __getitem__(self, key: SupportsIndex | slice) -> str: ...
    @overload
    def __getitem__(self, key: str) -> Any: ...
    def __getitem__(self, key: SupportsIndex | slice | str) -> Any:
        if isinstance(key, str):
            return self._read()[key]
        return str.__getitem__(self, key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            try:
                return self._read() == other
            except ToolParameterError:
                return False
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        # str's own __ne__ would not consult __eq__ for a mapping.
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__  # equal texts hash alike; a dict is never hashed

    def __reduce__(self) -> tuple[type[ToolArguments], tuple[str, str | None]]:
        return ToolArguments, (str.__str__(self), self.tool)

    def _read(self) -> dict[str, Any]:
        if self._object is None:
            self._object = self.to_dict()
        return self._object

    def _for_tool(self) -> str:
        return f" for tool {self.tool!r}" if self.tool else ""


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "null" if value is None else "a number"


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
