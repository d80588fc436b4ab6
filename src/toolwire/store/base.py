"""The store's records and its one async interface.

```
Store                       one interface, three backends (memory, SQLite, Redis)
├── runs                    RunRecord: a run's serialised state, status, lease
├── approvals               ApprovalRecord: one pending/decided call, single use
├── audit                   AuditRecord: append-only, one line per tool execution event
├── cache                   the runner's ResultCache (get / set with a TTL)
└── memory                  small JSON values with a TTL (the gateway's own steps)
StoreError                  the store cannot be opened, migrated or reached
├── StoreUnavailable        a backend is down (Redis unreachable): the gateway answers 503
└── StoreConflict           a compare-and-set lost (decided twice, resumed twice): 409
```

Every state change that must be taken once (deciding an approval, using it, claiming a
run to resume it) is a compare-and-set in the backend, so two gateway replicas deciding
the same approval at the same moment get one winner. Claiming a run and using its
approvals is one such change (`transition_run(..., approvals=...)`): all of it happens, or
none of it, so a resume that is refused leaves every approval as it was.

A run's `version` grows with every write and its `holder` names one claim (not only one
process): a writer that read a run compares both, so a state read earlier is never
written back over a newer one, and a lease is only ever renewed by the claim that holds it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit

import orjson

__all__ = [
    "APPROVAL_DECISION_FIELDS",
    "ApprovalRecord",
    "ApprovalStatus",
    "AuditEvent",
    "AuditQuery",
    "AuditRecord",
    "PruneCounts",
    "RunRecord",
    "RunStatus",
    "Store",
    "StoreConflict",
    "StoreError",
    "StoreUnavailable",
    "arguments_hash",
    "canonical_json",
    "redact_url",
]

RunStatus = Literal[
    "running",
    "awaiting_approval",
    "client_tool_calls",
    "completed",
    "max_iterations",
    "interrupted",
    "error",
]
"""A stored run's status. `running` with an expired lease reads as `interrupted`."""

ApprovalStatus = Literal["pending", "approved", "denied", "expired", "used"]
"""`used` is an approved approval whose call has run (or started to run): never again."""

AuditEvent = Literal["started", "finished", "interrupted"]
"""`started` is written before a write/destructive tool runs, `finished` after every
execution; a `started` without its `finished` is a call a crash cut short."""


class StoreError(Exception):
    """The store cannot be opened, migrated or used; the message is one clear line."""


class StoreUnavailable(StoreError):
    """The backend cannot be reached (Redis down, disk gone). Retry later."""


class StoreConflict(StoreError):
    """A compare-and-set lost: the record is no longer in the state the caller expected."""


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the form arguments are hashed and bound in."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def arguments_hash(arguments: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of `arguments`."""
    return "sha256:" + hashlib.sha256(canonical_json(arguments).encode()).hexdigest()


def redact_url(url: str) -> str:
    """`url` without a password, in the user part or a `password=` query parameter."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{host}" if user else host
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(k.lower() == "password" for k, _ in pairs):
        query = urlencode([(k, v) for k, v in pairs if k.lower() != "password"])
    # Not urlunsplit: it drops the `//` of `unix:///path` (an empty host).
    text = f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else parts.path
    return text + (f"?{query}" if query else "")


@dataclass(slots=True, kw_only=True)
class RunRecord:
    """One agent run as the store keeps it."""

    id: str
    status: RunStatus
    state: dict[str, Any]
    """The serialised run state (`toolwire.agent.RunState.to_json()`), opaque here."""
    owner: str | None = None
    """The key name that started the run (`None` on an open gateway or in the library)."""
    model: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    lease_until: float | None = None
    """While `running`: the time until which the process executing it holds it; after
    that the run reads as `interrupted` (the process died)."""
    holder: str | None = None
    """While `running`: `host:pid:nonce:claim` of the process executing it and of this one
    claim of the run, so a restart on the same host can tell at once that the holder is
    gone, and a lease renewal left over from an earlier claim can never extend this one."""
    version: int = 0
    """How many times the run was written; the store sets it (a record given to `put_run`
    or `transition_run` may carry any value). Compared by `transition_run(version=...)`."""

    def effective_status(self, now: float) -> RunStatus:
        """`interrupted` for a `running` record whose lease has run out."""
        if self.status == "running" and self.lease_until is not None and now >= self.lease_until:
            return "interrupted"
        return self.status


@dataclass(slots=True, kw_only=True)
class ApprovalRecord:
    """A person's decision on one call, bound to that exact call."""

    id: str
    run_id: str
    call_id: str
    tool: str
    arguments: str
    """The canonical JSON of the validated arguments that will run if approved."""
    arguments_hash: str
    status: ApprovalStatus = "pending"
    reason: str = ""
    """Why approval is needed (shown to the person deciding)."""
    effects: str = "destructive"
    requested_by: str | None = None
    """The key name of the caller whose run asked."""
    approver: str | None = None
    """A key name that must decide (the tool's `approver`), else any key allowed to."""
    created_at: float = 0.0
    expires_at: float = 0.0
    decided_by: str | None = None
    decided_at: float | None = None
    decision_reason: str | None = None
    used_at: float | None = None

    def effective_status(self, now: float) -> ApprovalStatus:
        """`expired` for a pending or unused approved record past `expires_at`."""
        if self.status in ("pending", "approved") and now >= self.expires_at:
            return "expired"
        return self.status


APPROVAL_DECISION_FIELDS = (
    "status",
    "decided_by",
    "decided_at",
    "decision_reason",
    "used_at",
    "expires_at",
)
"""The fields `Store.update_approval` writes; the rest of an approval is fixed when added."""


@dataclass(slots=True, kw_only=True)
class AuditRecord:
    """One tool execution event. Never holds a secret, a key or a caller's token."""

    time: float
    event: AuditEvent
    tool: str
    effects: str
    arguments_hash: str
    arguments: dict[str, Any] | None
    """The arguments after the tool's redaction allowlist (`None`: none may be shown)."""
    call_id: str
    outcome: str | None = None
    """`ok` or the result's error code; `None` on `started`."""
    duration_ms: float | None = None
    request_id: str | None = None
    run_id: str | None = None
    key_name: str | None = None
    approval_id: str | None = None
    approved_by: str | None = None
    approved_at: float | None = None
    approval_wait_ms: float | None = None
    """Time spent waiting for a person's decision; not part of `duration_ms`."""
    id: int = 0
    """Assigned by the store, increasing in the order records were appended."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditQuery:
    """Filters of `Store.list_audit`; every field narrows the result."""

    tool: str | None = None
    key_name: str | None = None
    outcome: str | None = None
    run_id: str | None = None
    since: float | None = None
    """Only records with `time >= since`."""
    until: float | None = None
    """Only records with `time < until`."""
    after_id: int = 0
    """Only records with a larger id (pagination: pass the last id seen)."""
    limit: int = 100

    def matches(self, record: AuditRecord) -> bool:
        """Whether `record` passes every filter but `after_id` and `limit`."""
        return (
            (self.tool is None or record.tool == self.tool)
            and (self.key_name is None or record.key_name == self.key_name)
            and (self.outcome is None or record.outcome == self.outcome)
            and (self.run_id is None or record.run_id == self.run_id)
            and (self.since is None or record.time >= self.since)
            and (self.until is None or record.time < self.until)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneCounts:
    """How many records `Store.prune` deleted, per kind."""

    runs: int = 0
    approvals: int = 0
    audit: int = 0


class Store(Protocol):
    """Where state that must outlive a request or a process lives.

    All times are Unix seconds (`time.time()`), passed in by the caller where a decision
    depends on them, so backends never disagree about "now".
    """

    url: str
    """Where it lives (`sqlite:///…`, `redis://…`, `memory`), without any password."""
    durable: bool
    """`False` for the memory store: nothing survives the process."""

    async def open(self) -> None:
        """Connect, create the schema or migrate it.

        Raises:
            StoreError: One clear line: what could not be opened and what to do.
        """
        ...

    async def aclose(self) -> None: ...

    async def ping(self) -> None:
        """Raises `StoreUnavailable` when the backend cannot be reached."""
        ...

    # --- runs -------------------------------------------------------------------------

    async def put_run(self, run: RunRecord, *, approvals: Sequence[ApprovalRecord] = ()) -> None:
        """Insert or replace a run (its stored `version` becomes one more than before, or 1),
        and insert `approvals` with it: all of it or none.

        Raises:
            StoreConflict: An approval with one of these ids exists already (nothing is
                written).
        """
        ...

    async def get_run(self, run_id: str) -> RunRecord | None: ...

    async def transition_run(
        self,
        run_id: str,
        *,
        expect: Sequence[RunStatus],
        run: RunRecord,
        version: int | None = None,
        holder: str | None = None,
        approvals: Sequence[tuple[ApprovalRecord, Sequence[ApprovalStatus]]] = (),
        new_approvals: Sequence[ApprovalRecord] = (),
    ) -> bool:
        """Replace the run with `run` (whose `id` is `run_id`) only if its stored status is
        one of `expect`, its stored version is `version` and its stored holder is `holder`
        (each when given), and write each of `approvals`' decision fields only if that
        approval's stored status is one of the statuses paired with it; insert
        `new_approvals`. All of it in one atomic step, or nothing at all.

        This is how a resume takes a run and uses its approvals at once, how a process
        that holds a run writes it (fenced by its holder), and how a run pauses with its
        new approvals in one commit.

        Returns:
            `False` when any comparison fails (someone else won); nothing was written.

        Raises:
            StoreConflict: One of `new_approvals` exists already (nothing was written).
        """
        ...

    async def renew_lease(self, run_id: str, *, holder: str, lease_until: float) -> bool:
        """Set `lease_until` of a `running` run whose stored holder is `holder`; nothing
        else is written (not the state, not the version).

        Returns:
            `False` when the run is missing, not `running` or held by another claim: the
            caller no longer holds it and must stop renewing.
        """
        ...

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        owner: str | None = None,
        limit: int = 100,
    ) -> list[RunRecord]:
        """Newest first."""
        ...

    # --- approvals --------------------------------------------------------------------

    async def add_approvals(self, approvals: Sequence[ApprovalRecord]) -> None:
        """Insert new approvals, all or none.

        Raises:
            StoreConflict: An approval with one of these ids exists already.
        """
        ...

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None: ...

    async def list_approvals(
        self,
        *,
        status: ApprovalStatus | None = None,
        requested_by: str | None = None,
        run_id: str | None = None,
        now: float,
        limit: int = 100,
        before: tuple[float, str] | None = None,
    ) -> list[ApprovalRecord]:
        """Newest first; `status` compares `effective_status(now)`; `before` is a cursor:
        only approvals whose `(created_at, id)` sorts before it (the last one of the
        previous page)."""
        ...

    async def update_approval(
        self, approval: ApprovalRecord, *, expect: Sequence[ApprovalStatus]
    ) -> bool:
        """Write the approval's decision only if its stored status is one of `expect`
        (the compare-and-set behind deciding and using an approval).

        Only the fields in `APPROVAL_DECISION_FIELDS` are written: what the approval is
        bound to (run, call, tool, arguments, who asked) never changes once added.

        Returns:
            `False` when the approval is missing or in another status (someone else won).
        """
        ...

    # --- audit ------------------------------------------------------------------------

    async def append_audit(self, record: AuditRecord) -> int:
        """Append a record; returns its id."""
        ...

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        """Oldest first (ids increasing), at most `query.limit`."""
        ...

    # --- retention --------------------------------------------------------------------

    async def prune(
        self,
        *,
        runs_before: float | None = None,
        approvals_before: float | None = None,
        audit_before: float | None = None,
        now: float,
    ) -> PruneCounts:
        """Delete what retention no longer keeps; `None` keeps that kind forever.

        - runs last written before `runs_before` whose status is final (not `running`, not
          `awaiting_approval`), or `awaiting_approval` with every approval of it expired;
        - approvals created before `approvals_before` that can no longer change anything
          (`denied`, `used`, or expired at `now`), and whose run is not `running`;
        - audit records with `time` before `audit_before`, oldest first (the only deletion
          the append-only log allows).
        """
        ...

    # --- cache (the runner's ResultCache) ---------------------------------------------

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes, ttl: float) -> None:
        """Keep `value` for `ttl` seconds (`ttl <= 0`: forget the key)."""
        ...

    # --- memory: small JSON values with a TTL -----------------------------------------

    async def remember(self, key: str, value: dict[str, Any], ttl: float) -> None:
        """Keep `value` for `ttl` seconds (`ttl <= 0`: forget the key)."""
        ...

    async def recall(self, key: str) -> dict[str, Any] | None: ...

    # --- counters (per-key limits, shared by every replica on the store) ---------------

    async def add_count(self, key: str, amount: int, ttl: float) -> int:
        """Add `amount` (negative: take away) to the counter `key` and return its new value,
        atomically; the counter is forgotten `ttl` seconds after its last change (a missing
        or forgotten counter is 0). A windowed count names its window in the key; a count
        of requests in flight is added to and taken from, and its `ttl` clears what a
        crashed replica held."""
        ...
