"""Audit records of tool executions: who ran what, with which outcome.

The runner writes a `started` record before a write or destructive tool runs (committed
before the side effect) and a `finished` record after every call, so a crash between the
two leaves a `started` without its `finished`. Records hold the arguments' hash and the
arguments a tool allows to be logged; never a key, a caller token or a secret-looking
argument.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import orjson

from toolwire.store.base import AuditEvent, AuditRecord, arguments_hash, canonical_json
from toolwire.tools import Tool, ToolCall, ToolContext, ToolResult

__all__ = [
    "REDACTED",
    "AuditLog",
    "Grant",
    "audit_record",
    "redact_arguments",
    "redact_arguments_json",
]

_SECRET: Final = re.compile(
    r"pass(word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth|bearer|"
    r"credential|private[_-]?key|signing[_-]?key|session|cookie|jwt",
    re.IGNORECASE,
)
"""Argument names that look like they hold a secret, at any depth."""
_SECRET_VALUE: Final = re.compile(r"^\s*(bearer|basic|token)\s+\S", re.IGNORECASE)
"""A credential sent under a harmless name (`{"name": "Authorization", "value": …}`)."""
REDACTED: Final = "[redacted]"
_MAX_DEPTH: Final = 32
"""Deeper values are redacted whole: no argument is worth a `RecursionError`."""


class AuditLog(Protocol):
    """Where audit records go (every `Store` is one)."""

    async def append_audit(self, record: AuditRecord) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """The approval a call runs under, for its audit record."""

    approval_id: str
    approved_by: str | None
    approved_at: float | None
    requested_at: float | None = None
    """When the approval was asked for: with `approved_at`, the time a person took."""

    @property
    def wait_ms(self) -> float:
        """Milliseconds between the request and the decision (0 when either is unknown)."""
        if self.requested_at is None or self.approved_at is None:
            return 0.0
        return max(0.0, (self.approved_at - self.requested_at) * 1000.0)


def redact_arguments(tool: Tool | None, arguments: object) -> dict[str, Any] | None:
    """The arguments as any record or answer may show them; `None` when they are not a
    JSON object (nothing in them can be told apart from a secret).

    Names are checked at every depth of nested objects and arrays: an object key that looks
    like a secret (`password`, `api_key`, `authorization`, `token`, …) has its value
    replaced by `[redacted]`, and so has a string that is a credential (`Bearer …`).

    When the tool declares `audit_arguments`, only the values at those paths are kept.
    A path is a dotted list of object keys (`settings.region`); arrays add no segment,
    so `hosts.name` keeps the `name` of every object in the array `hosts`. A listed path
    keeps its whole value (secret-looking keys inside it are still redacted); everything
    else reads `[redacted]`. Never raises, whatever `arguments` holds.
    """
    if type(arguments) is not dict and not isinstance(arguments, Mapping):
        return None
    allowed = tool.audit_arguments if tool is not None else None
    shown: dict[str, Any]
    if allowed is None:
        shown = _by_name(arguments, 0)
    else:
        paths = {tuple(p.split(".")) for p in allowed}
        prefixes = {path[:i] for path in paths for i in range(1, len(path))}
        shown = _by_path(arguments, (), paths, prefixes, 0)
    return shown


def redact_arguments_json(tool: Tool | None, text: str) -> str:
    """`redact_arguments` for arguments kept as JSON text (approvals, calls in a run):
    the text itself when nothing in it is redacted, else canonical JSON; `"[redacted]"`
    (a JSON string) for text that is not an object."""
    if not text.strip():
        return "{}"
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        parsed = None
    shown = redact_arguments(tool, parsed)
    if shown is None:
        return canonical_json(REDACTED)
    # Unchanged text stays as it was written (what clients compare against).
    return text if shown == parsed else canonical_json(shown)


def _by_name(value: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return REDACTED
    # JSON's own types first, by exact type: `isinstance` against `Mapping` is a call
    # into the ABC machinery for every value, and most values are strings and numbers.
    kind = type(value)
    if kind is str:
        return REDACTED if _SECRET_VALUE.match(value) else value
    if kind in _SCALARS:
        return value
    if kind is dict or isinstance(value, Mapping):
        return {
            str(k): REDACTED if _secret_name(str(k)) else _by_name(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_by_name(v, depth + 1) for v in value]
    if isinstance(value, str) and _SECRET_VALUE.match(value):
        return REDACTED
    return value


_SCALARS: Final = frozenset({int, float, bool, type(None)})


@functools.lru_cache(maxsize=1024)
def _secret_name(key: str) -> bool:
    """Whether an argument's name looks like it holds a secret; remembered, since the
    same few names come back call after call (bounded: a model may invent any name)."""
    return _SECRET.search(key) is not None


def _by_path(
    value: Any,
    path: tuple[str, ...],
    paths: set[tuple[str, ...]],
    prefixes: set[tuple[str, ...]],
    depth: int,
) -> Any:
    """Keep what the allowlist names; `path` is a prefix of an allowed path."""
    if depth > _MAX_DEPTH:
        return REDACTED
    if isinstance(value, list | tuple):
        return [_by_path(v, path, paths, prefixes, depth + 1) for v in value]
    if not isinstance(value, Mapping):
        return REDACTED  # the listed paths go deeper than this value
    out: dict[str, Any] = {}
    for k, v in value.items():
        key = str(k)
        inner = (*path, key)
        if inner in paths:
            # Named by the tool's author: kept even if its name looks secret.
            out[key] = _by_name(v, depth + 1)
        elif inner in prefixes:
            out[key] = _by_path(v, inner, paths, prefixes, depth + 1)
        else:
            out[key] = REDACTED
    return out


def audit_record(
    event: AuditEvent,
    call: ToolCall,
    tool: Tool | None,
    arguments: dict[str, Any] | None,
    ctx: ToolContext,
    *,
    result: ToolResult | None = None,
    grant: Grant | None = None,
) -> AuditRecord:
    outcome: str | None = None
    if result is not None:
        outcome = "ok" if result.success or result.error is None else result.error.code
    return AuditRecord(
        time=time.time(),
        event=event,
        tool=tool.name if tool is not None else call.name,
        effects=tool.effects if tool is not None else "unknown",
        arguments_hash=arguments_hash(arguments) if arguments is not None else "",
        arguments=redact_arguments(tool, arguments) if arguments is not None else None,
        call_id=call.id,
        outcome=outcome,
        duration_ms=round(result.duration_ms, 3) if result is not None else None,
        approval_wait_ms=(
            round(result.approval_wait_ms, 3)
            if result is not None and result.approval_wait_ms
            else None
        ),
        request_id=ctx.metadata.get("request_id"),
        run_id=ctx.run_id,
        key_name=ctx.principal,
        approval_id=grant.approval_id if grant is not None else None,
        approved_by=grant.approved_by if grant is not None else None,
        approved_at=grant.approved_at if grant is not None else None,
    )
