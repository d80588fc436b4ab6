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
the same approval at the same moment get one winner.
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
    """While `running`: `host:pid:nonce` of the process executing it, so a restart on the
    same host can tell at once that the holder is gone."""

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

    async def put_run(self, run: RunRecord) -> None:
        """Insert or replace a run."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None: ...

    async def transition_run(
        self,
        run_id: str,
        *,
        expect: Sequence[RunStatus],
        run: RunRecord,
    ) -> bool:
        """Replace the run with `run` (whose `id` is `run_id`) only if its stored status
        is one of `expect`.

        The check is on the stored status alone: a claim that leaves the status as it
        was (`running` to `running` with a new holder) does not exclude a second claimer.

        Returns:
            `False` when the run is missing or in another status (someone else won).
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
    ) -> list[ApprovalRecord]:
        """Newest first; `status` compares `effective_status(now)`."""
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
