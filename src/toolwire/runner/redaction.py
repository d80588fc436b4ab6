"""Redaction: only the result fields a tool declares may reach the model.

What an allowlist means for each result shape:

- an object (a dict, or a pydantic model / dataclass / mapping turned into one): only the
  listed top-level keys are kept;
- a list: the rule applies to each item (so each object in it is filtered, at any depth
  of nested lists);
- text or a scalar (string, number, boolean, null): there are no fields to filter, so it
  passes unchanged. Declaring an allowlist, even `allow=[]`, is the tool author's
  statement that the tool's output was reviewed for the model.

A tool with no allowlist (neither `allow=` nor a declared result type) passes its result
unchanged, unless `Policy(require_allowlist=True)`: then it is an error whatever it
returns (the runner refuses such a tool before running it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["RedactionError", "missing_allowlist", "redact", "to_plain"]

_PLAIN = frozenset({str, int, float, bool, type(None), list, dict})


class RedactionError(Exception):
    """A result cannot be shown to the model under the policy; the message says why."""


def missing_allowlist(tool_name: str) -> str:
    """The developer's message for a tool without an allowlist under a strict policy."""
    return (
        f"Tool {tool_name!r} has no result allowlist, which Policy(require_allowlist=True) "
        "requires for every result, text included. Pass allow=[...] listing the fields the "
        "model may see (allow=[] for a tool that returns text or a number), or declare a "
        "return type (a pydantic model, TypedDict or dataclass)."
    )


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
    """Apply the tool's allowlist to its result (see the module's docstring per shape).

    Args:
        value: The tool's result, already passed through `to_plain`.
        tool_name: Used in the error message.
        allowed: The tool's result allowlist; `None` when it has none.
        require_allowlist: Refuse every result of a tool without an allowlist.

    Raises:
        RedactionError: No allowlist under `require_allowlist`, whatever the result.
    """
    if allowed is None:
        if require_allowlist:
            raise RedactionError(missing_allowlist(tool_name))
        return value
    return _apply(value, allowed)


def _apply(value: Any, allowed: frozenset[str]) -> Any:
    if type(value) is dict:
        return {k: v for k, v in value.items() if k in allowed}
    if type(value) is list:
        return [_apply(v, allowed) for v in value]
    return value  # text or a scalar: nothing to filter
