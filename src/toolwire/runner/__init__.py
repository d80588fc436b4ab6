"""The tool runner: the one path through which tools execute."""

from toolwire.runner.approvals import DecisionApprover, approve_all, deny_all
from toolwire.runner.arguments import ArgumentError, ArgumentSpec
from toolwire.runner.cache import MemoryResultCache, ResultCache
from toolwire.runner.policy import ApprovalMode, Approver, Policy
from toolwire.runner.runner import ToolRunner

__all__ = [
    "ApprovalMode",
    "Approver",
    "ArgumentError",
    "ArgumentSpec",
    "DecisionApprover",
    "MemoryResultCache",
    "Policy",
    "ResultCache",
    "ToolRunner",
    "approve_all",
    "deny_all",
]
