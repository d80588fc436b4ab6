"""`Policy`: the knobs of `ToolRunner`, and the `Approver` protocol for destructive tools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from toolwire.tools import Tool, ToolCall, ToolContext

__all__ = ["ApprovalMode", "Approver", "Policy"]

ApprovalMode = Literal["ask", "auto", "deny"]
"""How destructive tools are approved: ask the approver, run without asking, or never run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """Limits and safety rules applied by `ToolRunner` to every call."""

    max_concurrency: int = 32
    """How many calls `exec_many` runs at the same time. Tools are mostly I/O-bound, so
    the bound is there to protect the process and upstream APIs, not the CPU."""
    default_timeout: float = 30.0
    """Seconds a tool may run when it declares no `timeout` of its own."""
    max_result_bytes: int = 256 * 1024
    """Largest result, measured as serialized JSON, that may reach the model."""
    truncate_large_results: bool = False
    """Cut an oversized result to a string with a note instead of `result_too_large`."""
    require_allowlist: bool = False
    """Strict mode: refuse dict results from tools with no result allowlist (`allow=` or a
    declared return type), so no undeclared field can leak to the model."""
    approval: ApprovalMode = "ask"
    """Destructive tools: `"ask"` the approver, `"auto"` run them, `"deny"` never run them."""
    repair_arguments: bool = True
    """Repair common encoding mistakes in arguments (numbers sent as strings, objects sent as
    JSON strings) before validating strictly."""
    max_invalid_attempts: int = 3
    """Invalid-argument calls allowed per tool per run before the model is told to stop."""

    def __post_init__(self) -> None:
        problems = []
        if self.max_concurrency < 1:
            problems.append(f"max_concurrency must be at least 1 (got {self.max_concurrency})")
        if self.default_timeout <= 0:
            problems.append(f"default_timeout must be positive (got {self.default_timeout})")
        if self.max_result_bytes < 256:
            problems.append(f"max_result_bytes must be at least 256 (got {self.max_result_bytes})")
        if self.approval not in ("ask", "auto", "deny"):
            problems.append(f"approval must be 'ask', 'auto' or 'deny' (got {self.approval!r})")
        if self.max_invalid_attempts < 0:
            problems.append(
                f"max_invalid_attempts must be 0 or more (got {self.max_invalid_attempts})"
            )
        if problems:
            raise ValueError("Invalid Policy: " + "; ".join(problems) + ".")


class Approver(Protocol):
    """Decides whether a destructive tool call may run.

    Return `True` to approve, `False` to deny (the model gets a `denied` result), or `None`
    when no decision is available yet (the result has code `awaiting_approval`, so an agent
    can pause the run until a person decides).
    """

    async def __call__(self, call: ToolCall, tool: Tool, ctx: ToolContext) -> bool | None:
        """Decide on `call`; its `arguments` are the validated arguments as JSON.

        Args:
            call: The call to approve, with the arguments that will actually be used.
            tool: The destructive tool it calls.
            ctx: The caller's context.
        """
        ...
