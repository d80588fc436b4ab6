"""Redaction: only the result fields a tool declares may reach the model."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["RedactionError", "redact", "to_plain"]

_PLAIN = frozenset({str, int, float, bool, type(None), list, dict})


class RedactionError(Exception):
    """A result cannot be shown to the model under the policy; the message says why."""


def to_plain(value: Any) -> Any:
    """Turn a pydantic model, dataclass or mapping result (or a list of them) into dicts.

    Only the top level and list items are converted, which is where redaction looks;
    deeper values are left to serialization.
    """
    if type(value) is list:
        if all(type(v) in _PLAIN for v in value):
            return value
        return [_plain_one(v) for v in value]
    if type(value) in _PLAIN:
        return value
    plain = _plain_one(value)
    if isinstance(plain, (tuple, set, frozenset)):
        return [_plain_one(v) for v in plain]
    return plain


def _plain_one(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def redact(
    value: Any,
    *,
    tool_name: str,
    allowed: frozenset[str] | None,
    require_allowlist: bool,
) -> Any:
    """Keep only the `allowed` keys of a dict result (or of each dict in a list result).

    Args:
        value: The tool's result, already passed through `to_plain`.
        tool_name: Used in the error message.
        allowed: The tool's result allowlist; `None` when it has none.
        require_allowlist: Refuse dict results when there is no allowlist.

    Raises:
        RedactionError: A dict result without an allowlist under `require_allowlist`.
    """
    if allowed is None:
        if require_allowlist and _has_dict(value):
            raise RedactionError(
                f"Tool {tool_name!r} returned an untyped dict and has no allow=[...]; "
                "declare a return type (a pydantic model, TypedDict or dataclass) or pass "
                "allow=[...] listing the fields the model may see."
            )
        return value
    if type(value) is dict:
        return _filter(value, allowed)
    if type(value) is list:
        return [_filter(v, allowed) if type(v) is dict else v for v in value]
    return value


def _filter(value: dict[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k in allowed}


def _has_dict(value: Any) -> bool:
    if type(value) is dict:
        return True
    return type(value) is list and any(isinstance(v, dict) for v in value)
