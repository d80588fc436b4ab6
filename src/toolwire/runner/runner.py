"""`ToolRunner`: the one path through which tools run.

resolve → parse arguments → repair → validate (+ defaults) → scopes → approval → cache →
execute with a timeout → redact → cap the size → record the duration. Every problem on the
way becomes a failed `ToolResult` whose message is safe to show the model; `exec` never
raises for a tool's or a model's mistake.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from time import perf_counter
from typing import Any, Final, Protocol

import orjson
from pydantic import BaseModel

from toolwire import tracing
from toolwire.runner.approvals import decide
from toolwire.runner.arguments import ArgumentError, ArgumentSpec
from toolwire.runner.audit import AuditLog, Grant, audit_record
from toolwire.runner.cache import MemoryResultCache, ResultCache, cache_key
from toolwire.runner.late import LateRecords
from toolwire.runner.policy import Approver, Policy
from toolwire.runner.redaction import RedactionError, missing_allowlist, redact, to_plain
from toolwire.store.base import StoreError
from toolwire.tools import (
    ErrorCode,
    Tool,
    ToolCall,
    ToolContext,
    ToolErrorInfo,
    ToolExecutionError,
    ToolNotFoundError,
    ToolParameterError,
    ToolProvider,
    ToolResult,
)
from toolwire.tools.provider import AnyToolProvider, as_provider
from toolwire.tools.threads import Execution, current_execution

__all__ = ["ToolGate", "ToolRunner"]

logger = logging.getLogger("toolwire.runner")

_background: set[asyncio.Task[Any]] = set()
"""Late audit writes in flight (kept referenced until done)."""

_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_DUMP_OPTIONS: Final = orjson.OPT_NON_STR_KEYS


@dataclass(slots=True)
class _Trace:
    """What one call resolved to, for its audit record."""

    grant: Grant | None = None
    tool: Tool | None = None
    arguments: dict[str, Any] | None = None
    approval_wait: float = 0.0
    """Seconds the approver took to decide, kept out of the call's duration."""
    started: bool = False
    """A write or destructive tool was handed the call: its effect may have happened."""


@dataclass(slots=True)
class _Entry:
    """A tool and what the runner precomputes for it."""

    tool: Tool
    allowed: frozenset[str] | None
    scopes: frozenset[str]
    spec: ArgumentSpec | None = None
    """Compiled on first use, so unused tools cost nothing."""


class ToolGate(Protocol):
    """Decides, before a call runs, whether it may (see `ToolRunner`'s `gate`)."""

    async def __call__(self, tool_name: str, ctx: ToolContext) -> str | None: ...


class ToolRunner:
    """Runs tool calls from a model against a `ToolProvider`, safely.

    Args:
        provider: Lists and executes the tools (a `Toolbox`, `MockTools`, any object with
            `list_tools` and `execute_tool`, with or without the context argument).
        policy: Limits and safety rules.
        approver: Decides on destructive calls when `policy.approval == "ask"`.
        cache: Where results of read tools with `cache_ttl` are kept (in memory by default).
        audit: Where every call's audit record goes (a `Store`); none by default.
        gate: Asked before each permitted call runs (a rate limit, say): a message refuses
            the call with `too_many_calls`, `None` lets it run.

    Raises:
        ToolDefinitionError: The provider does not fit the protocol (see `as_provider`).
    """

    def __init__(
        self,
        provider: AnyToolProvider,
        *,
        policy: Policy | None = None,
        approver: Approver | None = None,
        cache: ResultCache | None = None,
        audit: AuditLog | None = None,
        gate: ToolGate | None = None,
    ) -> None:
        self.gate = gate
        # Adapted once here: a seed-style `execute_tool(name, arguments)` gets no context.
        self.provider: ToolProvider = as_provider(provider)
        self.audit = audit
        self.late = LateRecords(audit) if audit is not None else None
        """Audit records written late: a store failure after a side effect (see `exec`)."""
        self.policy = policy if policy is not None else Policy()
        self.approver = approver
        self.cache: ResultCache = cache if cache is not None else MemoryResultCache()
        self._entries: dict[str, _Entry] | None = None
        self._inflight: dict[str, asyncio.Future[ToolResult]] = {}
        """Calls of cached tools running now, by cache key (single flight)."""
        self._generation = 0
        self._refresh_lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    # --- tools ----------------------------------------------------------------------------

    async def list_tools(self) -> list[Tool]:
        """The provider's tools (listed once, then cached; see `refresh_tools`)."""
        entries = self._entries if self._entries is not None else await self._refresh()
        return [e.tool for e in entries.values()]

    async def get_tool(self, name: str) -> Tool | None:
        """The tool called `name`, asking the provider again once if it is not known yet."""
        entry = await self._lookup(name)
        return entry.tool if entry is not None else None

    async def refresh_tools(self) -> list[Tool]:
        """List the provider's tools again (after tools were added or removed)."""
        return [e.tool for e in (await self._refresh()).values()]

    async def _lookup(self, name: str) -> _Entry | None:
        entries = self._entries
        if entries is not None:
            entry = entries.get(name)
            if entry is not None:
                return entry
        return (await self._refresh()).get(name)

    async def _refresh(self) -> dict[str, _Entry]:
        seen = self._generation
        # One lock per event loop: a runner may outlive the loop it was first used on
        # (a CLI that calls asyncio.run once per turn), and asyncio locks bind to a loop.
        loop = asyncio.get_running_loop()
        if self._refresh_lock is None or self._lock_loop is not loop:
            self._refresh_lock, self._lock_loop = asyncio.Lock(), loop
        async with self._refresh_lock:
            # Another caller refreshed while this one waited: its listing is fresh enough.
            if self._generation != seen and self._entries is not None:
                return self._entries
            tools = await self.provider.list_tools()
            old = self._entries or {}
            entries: dict[str, _Entry] = {}
            for tool in tools:
                prev = old.get(tool.name)
                entries[tool.name] = (
                    prev if prev is not None and prev.tool is tool else _entry(tool)
                )
            self._entries = entries
            self._generation += 1
            return entries

    # --- execution ------------------------------------------------------------------------

    async def exec(
        self,
        call: ToolCall,
        ctx: ToolContext | None = None,
        *,
        approver: Approver | None = None,
        grant: Grant | None = None,
    ) -> ToolResult:
        """Run one call and return its result; never raises for tool or argument problems.

        Args:
            call: The model's call; `arguments` is the raw JSON text.
            ctx: The caller's context (scopes, auth token, per-run retry budget).
            approver: Overrides the runner's approver for this call.
            grant: The approval the call runs under (recorded in the audit log).

        Raises:
            StoreError: The audit log could not be written and nothing happened: the
                call did not run, or it only reads. Once a write or destructive tool has
                run, a failing audit write never raises (a retry would run it twice): its
                record is written late (`self.late`) and the result returned.
        """
        result, _ = await self._run_one(call, ctx, approver, grant)
        return result

    async def _run_one(
        self,
        call: ToolCall,
        ctx: ToolContext | None,
        approver: Approver | None,
        grant: Grant | None,
    ) -> tuple[ToolResult, bool]:
        """`exec`, and whether a write or destructive tool was handed the call."""
        start = perf_counter()
        if type(call.arguments) is not str:
            # A `ToolArguments` (seed 002's loop passes `ModelResponse.tool_calls`): from here
            # on the text is read with orjson, which refuses `str` subclasses as invalid JSON.
            call = replace(call, arguments=str.__str__(call.arguments))
        if ctx is None:
            ctx = ToolContext()
        trace = _Trace(grant=grant)
        approver = approver if approver is not None else self.approver
        try:
            if tracing.enabled():
                attributes = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": call.name,
                    "gen_ai.tool.call.id": call.id,
                }
                with tracing.span(f"execute_tool {call.name}", attributes) as current:
                    result = await self._exec(call, ctx, approver, trace)
                    if result.error is not None:
                        tracing.set_attributes(current, {"error.type": result.error.code})
            else:
                # No span, no attributes to build for it: every call passes here.
                result = await self._exec(call, ctx, approver, trace)
        except StoreError:
            raise
        except Exception:
            logger.exception("Tool runner failed on call %s to %r", call.id, call.name)
            result = ToolResult.fail(
                call.id,
                call.name,
                "execution_error",
                f"Tool {call.name!r} failed: internal error in the tool runner.",
            )
        # A person's decision is not the tool's time: reported apart, as approval_wait_ms.
        waited = trace.approval_wait * 1000.0
        result.duration_ms = (perf_counter() - start) * 1000.0 - waited
        result.approval_wait_ms = waited + (grant.wait_ms if grant is not None else 0.0)
        if self.audit is not None:
            record = audit_record(
                "finished", call, trace.tool, trace.arguments, ctx, result=result, grant=grant
            )
            try:
                await self.audit.append_audit(record)
            except StoreError as exc:
                if not trace.started:
                    raise
                assert self.late is not None
                self.late.add(record, exc)
        if logger.isEnabledFor(logging.DEBUG):
            outcome = "ok" if result.error is None else result.error.code
            logger.debug(
                "tool %s (call %s): %s in %.2f ms%s",
                call.name,
                call.id,
                outcome,
                result.duration_ms,
                " (cached)" if result.cached else "",
            )
        return result, trace.started

    async def exec_many(
        self,
        calls: Iterable[ToolCall],
        ctx: ToolContext | None = None,
        *,
        approver: Approver | None = None,
    ) -> list[ToolResult]:
        """Run calls concurrently (at most `policy.max_concurrency` at once).

        Returns:
            One result per call, in the order of `calls`.
        """
        calls = list(calls)
        if ctx is None:
            ctx = ToolContext()
        if len(calls) <= 1:
            # Through `exec`, which a subclass may override (to record what it runs, say).
            return [await self.exec(c, ctx, approver=approver) for c in calls]
        gate = asyncio.Semaphore(self.policy.max_concurrency)

        async def bounded(call: ToolCall) -> tuple[ToolResult, bool]:
            async with gate:
                return await self._run_one(call, ctx, approver, None)

        # Every call ends before this returns, whatever another one met: a store failure on
        # one call must not leave the others running behind a turn that has failed.
        outcomes = await asyncio.gather(*(bounded(c) for c in calls), return_exceptions=True)
        failed: StoreError | None = None
        changed = False
        for outcome in outcomes:
            if isinstance(outcome, StoreError):
                failed = failed or outcome
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                changed = changed or outcome[1]
        if failed is not None and not changed:
            raise failed  # nothing happened anywhere: the turn can be retried as a whole
        # Something did happen: the turn stands, and a call that could not be recorded
        # (so did not run) says so to the model instead of failing the others' results.
        return [
            outcome[0]
            if isinstance(outcome, tuple)
            else ToolResult.fail(
                call.id,
                call.name,
                "unavailable",
                f"Tool {call.name!r} was not run: the audit log could not be written, so "
                "nothing was done. Try the call again later, or continue without it.",
            )
            for call, outcome in zip(calls, outcomes, strict=True)
        ]

    async def _exec(
        self, call: ToolCall, ctx: ToolContext, approver: Approver | None, trace: _Trace
    ) -> ToolResult:
        """Resolve → allowlist → arguments → scopes → approval → cache → execute; each
        stage either passes the call on or answers it."""
        # A known tool is looked up inline: the hot path awaits no extra coroutine.
        entries = self._entries
        entry = entries.get(call.name) if entries is not None else None
        if entry is None:
            found = await self._resolve(call)
            if isinstance(found, ToolResult):
                return found
            entry = found
        tool = trace.tool = entry.tool
        refused = self._unlisted(call, entry)
        if refused is not None:
            return refused
        spec = entry.spec
        if spec is None:
            spec = entry.spec = ArgumentSpec(tool.name, tool.input_schema)
        try:
            args, repaired = spec.prepare(call.arguments, repair=self.policy.repair_arguments)
        except ArgumentError as exc:
            return self._invalid(call, ctx, exc.code, exc.message)
        trace.arguments = args
        refused = self._forbidden(call, entry, ctx, repaired)
        if refused is None and self.gate is not None:
            message = await self.gate(tool.name, ctx)
            if message is not None:
                refused = ToolResult.fail(
                    call.id, tool.name, "too_many_calls", message, repaired=repaired
                )
        if refused is None and tool.effects == "destructive":
            refused = await self._approve(call, tool, args, ctx, approver, trace, repaired)
        if refused is not None:
            return refused
        if tool.cache_ttl is None or tool.effects != "read":
            return await self._execute(call, ctx, entry, args, repaired, trace, None)
        key = cache_key(tool.name, args, ctx, shared=tool.cache_shared)
        hit = await self.cache.get(key)
        if hit is not None:
            return ToolResult.ok(
                call.id, tool.name, orjson.loads(hit), repaired=repaired, cached=True
            )
        return await self._execute_once(call, ctx, entry, args, repaired, trace, key)

    async def _resolve(self, call: ToolCall) -> _Entry | ToolResult:
        """The tool of a call not in the known list (listing again), or the result that
        answers a call to no tool."""
        try:
            entry = await self._lookup(call.name)
        except Exception as exc:
            logger.error("Listing the tools failed (call %s)", call.id, exc_info=exc)
            return ToolResult.fail(
                call.id,
                call.name,
                "execution_error",
                f"Tool {call.name!r} could not be run: the list of tools is unavailable "
                f"({type(exc).__name__}). Try again later or continue without it.",
            )
        return self._unknown(call) if entry is None else entry

    def _unlisted(self, call: ToolCall, entry: _Entry) -> ToolResult | None:
        """Refuses a tool without a result allowlist when the policy requires one."""
        if entry.allowed is not None or not self.policy.require_allowlist:
            return None
        # Refused before it runs: its result could not be shown, whatever its shape, and
        # a write tool's effect should not happen for a result nobody may see.
        name = entry.tool.name
        logger.warning("%s", missing_allowlist(name))
        return ToolResult.fail(
            call.id,
            name,
            "execution_error",
            f"Tool {name!r} cannot be used here: it declares no result allowlist, which "
            "this server's policy requires. Do not call it again; continue without it.",
        )

    def _forbidden(
        self, call: ToolCall, entry: _Entry, ctx: ToolContext, repaired: list[str]
    ) -> ToolResult | None:
        """Refuses a caller that lacks one of the tool's scopes."""
        if not entry.scopes or entry.scopes <= ctx.scopes:
            return None
        name = entry.tool.name
        missing = ", ".join(repr(s) for s in sorted(entry.scopes - ctx.scopes))
        return ToolResult.fail(
            call.id,
            name,
            "forbidden",
            f"Tool {name!r} needs permissions this caller does not have ({missing}). "
            "Do not call it again; tell the user it is not available to them.",
            repaired=repaired,
        )

    async def _approve(
        self,
        call: ToolCall,
        tool: Tool,
        args: dict[str, Any],
        ctx: ToolContext,
        approver: Approver | None,
        trace: _Trace,
        repaired: list[str],
    ) -> ToolResult | None:
        """Asks for a destructive call's approval; the refusal, if it is refused."""
        asked = perf_counter()
        refused = await decide(
            ToolCall(id=call.id, name=tool.name, arguments=orjson.dumps(args).decode()),
            tool,
            ctx,
            policy=self.policy,
            approver=approver,
        )
        trace.approval_wait = perf_counter() - asked
        if refused is None:
            return None
        return ToolResult(
            call_id=call.id, name=tool.name, success=False, error=refused, repaired=repaired
        )

    async def _execute_once(
        self,
        call: ToolCall,
        ctx: ToolContext,
        entry: _Entry,
        args: dict[str, Any],
        repaired: list[str],
        trace: _Trace,
        key: str,
    ) -> ToolResult:
        """Runs a cacheable call, or shares the outcome of the same call already running."""
        leader = self._inflight.get(key)
        if leader is not None and leader.get_loop() is asyncio.get_running_loop():
            # The same call (same caller, same arguments) is running: share its outcome
            # instead of running the tool again (twenty identical calls run it once).
            try:
                shared = await asyncio.shield(leader)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if leader.cancelled() and task is not None and not task.cancelling():
                    # The leading call's client went away; this one still wants the result.
                    return await self._execute(call, ctx, entry, args, repaired, trace, key)
                raise
            return replace(shared, call_id=call.id, repaired=repaired, cached=shared.success)
        future: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            result = await self._execute(call, ctx, entry, args, repaired, trace, key)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: followers re-raise it, nobody else must
            raise
        else:
            future.set_result(result)
            return result
        finally:
            del self._inflight[key]

    async def _execute(
        self,
        call: ToolCall,
        ctx: ToolContext,
        entry: _Entry,
        args: dict[str, Any],
        repaired: list[str],
        trace: _Trace,
        key: str | None,
    ) -> ToolResult:
        """Run the tool with its timeout and turn every outcome into a result."""
        tool = entry.tool
        name = tool.name
        policy = self.policy
        if self.audit is not None and tool.effects != "read":
            # Committed before the side effect: after a crash the log shows it started.
            await self.audit.append_audit(
                audit_record("started", call, tool, args, ctx, grant=trace.grant)
            )
        trace.started = tool.effects != "read"
        timeout = tool.timeout if tool.timeout is not None else policy.default_timeout
        deadline = asyncio.timeout(timeout)
        execution = Execution()
        token = current_execution.set(execution)
        try:
            async with deadline:
                # `object`: a provider outside the protocol may return the bare value.
                out: object = await self.provider.execute_tool(name, args, ctx)
        except TimeoutError as exc:
            if deadline.expired():
                return self._timed_out(call, ctx, tool, args, timeout, execution, trace, repaired)
            return self._crashed(call, name, exc, repaired)
        except asyncio.CancelledError:
            # The caller went away: a sync tool's thread goes on; the log will say how it
            # ended.
            self._watch_late(call, ctx, tool, args, execution, trace)
            raise
        except ToolNotFoundError as exc:
            self._entries = None  # the provider's tools changed under us
            return ToolResult.fail(call.id, name, "unknown_tool", str(exc), repaired=repaired)
        except ToolParameterError as exc:
            return self._invalid(call, ctx, "invalid_arguments", str(exc), repaired=repaired)
        except ToolExecutionError as exc:
            message = str(exc) or f"Tool {name!r} failed."
            return ToolResult.fail(call.id, name, "execution_error", message, repaired=repaired)
        except Exception as exc:
            return self._crashed(call, name, exc, repaired)
        finally:
            current_execution.reset(token)

        if deadline.expired():
            # It swallowed its cancellation and returned after the deadline: its effects
            # happened, late; the result is not used.
            return ToolResult.fail(
                call.id,
                name,
                "timeout",
                f"Tool {name!r} finished only after its {timeout:g}-second timeout (it did not "
                "stop when asked to), so its result was discarded. What it does may have "
                "happened; check before calling it again.",
                repaired=repaired,
            )
        if isinstance(out, ToolResult):
            if not out.success:
                error = _provider_error(out, name)
                if error.code in ("invalid_arguments", "invalid_json"):
                    return self._invalid(call, ctx, error.code, error.message, repaired=repaired)
                return ToolResult(
                    call_id=call.id, name=name, success=False, error=error, repaired=repaired
                )
            value = out.result
        else:
            value = out  # lenient: a provider that returns the bare value

        return await self._finish(call, entry, value, repaired, key)

    async def _finish(
        self, call: ToolCall, entry: _Entry, value: Any, repaired: list[str], key: str | None
    ) -> ToolResult:
        """Redact, serialize, cap the size and cache a successful result."""
        policy = self.policy
        name = entry.tool.name
        try:
            value = redact(
                to_plain(value),
                tool_name=name,
                allowed=entry.allowed,
                require_allowlist=policy.require_allowlist,
            )
        except RedactionError as exc:
            logger.warning("%s", exc)
            return ToolResult.fail(call.id, name, "execution_error", str(exc), repaired=repaired)
        try:
            data = orjson.dumps(value, default=_json_default, option=_DUMP_OPTIONS)
        except TypeError as exc:
            logger.warning("Tool %r returned a result that is not JSON-serialisable: %s", name, exc)
            return ToolResult.fail(
                call.id,
                name,
                "execution_error",
                f"Tool {name!r} returned a result that cannot be sent as JSON ({exc}). "
                "Tool authors: return JSON-compatible data, a pydantic model or a dataclass.",
                repaired=repaired,
            )
        # orjson writes NaN and infinities as null: a result that silently changed is not a
        # success. Only results with a null in them can have one, so only they are walked.
        if b"null" in data and _non_finite(value):
            logger.warning("Tool %r returned NaN or an infinity", name)
            return ToolResult.fail(
                call.id,
                name,
                "execution_error",
                f"Tool {name!r} returned a number that is not finite (NaN or Infinity), which "
                "JSON cannot carry. Continue without it or try other arguments.",
                repaired=repaired,
            )
        limit = policy.max_result_bytes
        if len(data) > limit:
            if not policy.truncate_large_results:
                return ToolResult.fail(
                    call.id,
                    name,
                    "result_too_large",
                    f"Tool {name!r} returned {_size(len(data))} of JSON, over the limit of "
                    f"{_size(limit)} ({limit} bytes). Ask for less data (a narrower query, "
                    "fewer items) or continue without it.",
                    repaired=repaired,
                )
            value = _truncate(value, data, limit)
            data = orjson.dumps(value)
        elif type(value) not in _SCALARS:
            # A plain JSON copy: nothing the tool keeps a reference to can change it later.
            value = orjson.loads(data)
        if key is not None:
            ttl = entry.tool.cache_ttl
            if ttl is not None:
                await self.cache.set(key, data, ttl)
        return ToolResult.ok(call.id, name, value, repaired=repaired)

    # --- failures -------------------------------------------------------------------------

    def _timed_out(
        self,
        call: ToolCall,
        ctx: ToolContext,
        tool: Tool,
        args: dict[str, Any],
        timeout: float,
        execution: Execution,
        trace: _Trace,
        repaired: list[str],
    ) -> ToolResult:
        """The timeout result, true to what happened: a stopped tool, or one that goes on."""
        name = tool.name
        if execution.left_running:
            self._watch_late(call, ctx, tool, args, execution, trace)
            message = (
                f"Tool {name!r} did not answer within {timeout:g} seconds. It could not be "
                "stopped and may still complete; its result will not be used. Check whether "
                "it did what was asked before calling it again."
            )
        else:
            message = (
                f"Tool {name!r} did not finish within {timeout:g} seconds and was stopped. "
                "Try again with a smaller request, or continue without it."
            )
        return ToolResult.fail(call.id, name, "timeout", message, repaired=repaired)

    def _watch_late(
        self,
        call: ToolCall,
        ctx: ToolContext,
        tool: Tool,
        args: dict[str, Any],
        execution: Execution,
        trace: _Trace,
    ) -> None:
        """Record in the audit log how a call that was given up while running ends."""
        audit = self.audit
        if audit is None or not execution.left_running:
            return

        def finished(ok: bool) -> None:
            outcome = "finished_late" if ok else "failed_late"
            record = audit_record("finished", call, tool, args, ctx, grant=trace.grant)
            record.outcome = outcome
            task = asyncio.ensure_future(audit.append_audit(record))
            _background.add(task)
            task.add_done_callback(_background.discard)

        execution.on_late_finish = finished

    def _unknown(self, call: ToolCall) -> ToolResult:
        names = sorted((self._entries or {}).keys())
        message = str(ToolNotFoundError.unknown(call.name, names))
        close = difflib.get_close_matches(call.name, names, n=1)
        if close:
            message += f" Did you mean {close[0]!r}?"
        return ToolResult.fail(call.id, call.name, "unknown_tool", message)

    def _invalid(
        self,
        call: ToolCall,
        ctx: ToolContext,
        code: ErrorCode,
        message: str,
        *,
        repaired: list[str] | None = None,
    ) -> ToolResult:
        """An argument error, counted against the tool's retry budget for this run."""
        name = call.name
        attempts = ctx.invalid_attempts.get(name, 0) + 1
        ctx.invalid_attempts[name] = attempts
        limit = self.policy.max_invalid_attempts
        if attempts > limit:
            code = "retry_budget_exhausted"
            message = (
                f"{message} Stop calling tool {name!r}: this was invalid attempt {attempts} "
                f"and the limit is {limit}. Answer the user without this tool, or tell them "
                "which information is missing."
            )
        return ToolResult.fail(call.id, name, code, message, repaired=repaired or [])

    def _crashed(
        self, call: ToolCall, name: str, exc: BaseException, repaired: list[str]
    ) -> ToolResult:
        # The model gets the exception type only: messages and tracebacks may hold secrets.
        logger.error("Tool %r raised on call %s", name, call.id, exc_info=exc)
        return ToolResult.fail(
            call.id,
            name,
            "execution_error",
            f"Tool {name!r} failed: {type(exc).__name__}.",
            repaired=repaired,
        )


def _provider_error(out: ToolResult, name: str) -> ToolErrorInfo:
    """A provider's failed result as an error with a code, whatever it put in `error`."""
    error: object = out.error
    if isinstance(error, ToolErrorInfo) and error.strip():
        return error
    # A plain string (set after construction) is the provider's message to the model.
    text = str(error).strip() if error is not None else ""
    return ToolErrorInfo(text or f"Tool {name!r} failed.", code="execution_error")


def _entry(tool: Tool) -> _Entry:
    allowed = tool.allowed_fields
    return _Entry(
        tool=tool,
        allowed=frozenset(allowed) if allowed is not None else None,
        scopes=frozenset(tool.scopes),
    )


def _non_finite(value: Any) -> bool:
    if type(value) is float:
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_non_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_non_finite(v) for v in value)
    return False


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.0f} KiB"
    return f"{n} bytes"


def _truncate(value: Any, data: bytes, limit: int) -> str:
    """The start of the result as text, with a note, within `limit` bytes of JSON."""
    raw = value.encode() if isinstance(value, str) else data
    note = (
        f"\n[truncated: the full result was {_size(len(data))}, over the {_size(limit)} "
        "limit; only the beginning is shown]"
    )
    keep = limit - len(note.encode()) - 2  # the two quotes of a JSON string
    while True:
        text = raw[: max(keep, 0)].decode("utf-8", errors="ignore") + note
        excess = len(orjson.dumps(text)) - limit
        if excess <= 0 or keep <= 0:
            return text
        keep -= excess  # escaping made the JSON longer than the raw text
