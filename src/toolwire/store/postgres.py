"""`PostgresStore`: the store for replicas that must lose nothing.

Every method takes a pooled connection in autocommit mode, so a single statement is its
own transaction, and the steps that must happen together (`put_run` with its approvals,
`transition_run` with the approvals it uses and adds) run in one explicit transaction.
Sessions force `synchronous_commit = on`: a method returns only after its commit is on
disk (and on a synchronous standby if the server has one), whatever the server default.

Compare-and-set is a conditional `UPDATE … WHERE id = … AND status = ANY(…)`: under READ
COMMITTED a second writer waits for the first's row lock, then re-checks the condition
against the committed row, so across any number of processes exactly one wins. A
transition locks its run first and its approvals in id order, so two transitions never
wait for each other in a cycle.

Tables live in one schema (`toolwire` by default; `?schema=name` in the URL picks another),
which holds `schema_version` with the number of `MIGRATIONS` applied. Opening migrates in
one transaction under an advisory lock keyed by the schema, so replicas starting at once
migrate it once.
"""

from __future__ import annotations

import logging
import re
import select
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, NoReturn
from urllib.parse import parse_qsl, urlencode, urlsplit

import orjson
import psycopg
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from toolwire.store._sql import (
    APPROVAL_COLUMNS,
    AUDIT_COLUMNS,
    RUN_COLUMNS,
    SqlReads,
    marks,
)
from toolwire.store.base import (
    APPROVAL_DECISION_FIELDS,
    ApprovalRecord,
    ApprovalStatus,
    AuditRecord,
    PruneCounts,
    RunRecord,
    RunStatus,
    StoreConflict,
    StoreError,
    StoreUnavailable,
    redact_url,
)

__all__ = ["DEFAULT_SCHEMA", "MIGRATIONS", "PostgresStore"]

_MARK = "%s"
"""This driver's parameter mark."""

logger = logging.getLogger("toolwire.store")

DEFAULT_SCHEMA = "toolwire"
"""Its own schema, so toolwire's `runs` or `cache` never meet an application's tables."""

MIGRATIONS: list[tuple[str, ...]] = [
    # 1: runs, approvals, the audit log, the result cache and memory.
    (
        # `json`, not `jsonb`: it keeps the text as written (key order, number spelling).
        """CREATE TABLE runs (
            id text PRIMARY KEY,
            status text NOT NULL,
            state json NOT NULL,
            owner text,
            model text,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            lease_until double precision,
            holder text,
            version bigint NOT NULL
        )""",
        "CREATE INDEX runs_by_created ON runs (created_at DESC, id DESC)",
        "CREATE INDEX runs_by_status ON runs (status, created_at DESC, id DESC)",
        "CREATE INDEX runs_by_owner ON runs (owner, created_at DESC, id DESC)",
        "CREATE INDEX runs_by_updated ON runs (updated_at)",
        """CREATE TABLE approvals (
            id text PRIMARY KEY,
            run_id text NOT NULL,
            call_id text NOT NULL,
            tool text NOT NULL,
            arguments text NOT NULL,
            arguments_hash text NOT NULL,
            status text NOT NULL,
            reason text NOT NULL,
            effects text NOT NULL,
            requested_by text,
            approver text,
            created_at double precision NOT NULL,
            expires_at double precision NOT NULL,
            decided_by text,
            decided_at double precision,
            decision_reason text,
            used_at double precision
        )""",
        "CREATE INDEX approvals_by_created ON approvals (created_at DESC, id DESC)",
        "CREATE INDEX approvals_by_status ON approvals (status, created_at DESC, id DESC)",
        "CREATE INDEX approvals_by_run ON approvals (run_id, created_at DESC, id DESC)",
        "CREATE INDEX approvals_by_requester ON approvals (requested_by, created_at DESC, id DESC)",
        # Ids come from `audit_head`, not a sequence: see `PostgresStore.append_audit`.
        """CREATE TABLE audit (
            id bigint PRIMARY KEY,
            time double precision NOT NULL,
            event text NOT NULL,
            tool text NOT NULL,
            effects text NOT NULL,
            arguments_hash text NOT NULL,
            arguments json,
            call_id text NOT NULL,
            outcome text,
            duration_ms double precision,
            request_id text,
            run_id text,
            key_name text,
            approval_id text,
            approved_by text,
            approved_at double precision,
            approval_wait_ms double precision
        )""",
        "CREATE INDEX audit_by_tool ON audit (tool, id)",
        "CREATE INDEX audit_by_key ON audit (key_name, id)",
        "CREATE INDEX audit_by_outcome ON audit (outcome, id)",
        "CREATE INDEX audit_by_run ON audit (run_id, id)",
        "CREATE INDEX audit_by_time ON audit (time)",
        """CREATE TABLE audit_head (
            one boolean PRIMARY KEY DEFAULT true CHECK (one),
            last_id bigint NOT NULL
        )""",
        "INSERT INTO audit_head (last_id) VALUES (0)",
        # Append-only, enforced by the database and not only by this code. The one deletion
        # allowed is retention's: `prune` sets `toolwire.audit_before` for its transaction
        # and only rows older than that may go. A guard against mistakes and bugs, not
        # against a role that can drop the trigger.
        """CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'DELETE' AND OLD.time < NULLIF(
                current_setting('toolwire.audit_before', true), ''
            )::double precision THEN
                RETURN OLD;
            END IF;
            RAISE EXCEPTION 'the audit log is append-only (% refused)', TG_OP
                USING ERRCODE = 'insufficient_privilege';
        END $$""",
        """CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
           FOR EACH ROW EXECUTE FUNCTION audit_append_only()""",
        """CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
           FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only()""",
        # UNLOGGED: a result cache need not survive a server crash, and skipping the WAL
        # makes its writes cheap. Memory (server steps a client will resume) is logged.
        """CREATE UNLOGGED TABLE cache (
            key text PRIMARY KEY, value bytea NOT NULL, expires_at timestamptz NOT NULL
        )""",
        "CREATE INDEX cache_by_expiry ON cache (expires_at)",
        """CREATE TABLE memory (
            key text PRIMARY KEY, value json NOT NULL, expires_at timestamptz NOT NULL
        )""",
        "CREATE INDEX memory_by_expiry ON memory (expires_at)",
    ),
    # 1: counters of the per-key limits (UNLOGGED: a limit's window need not survive a
    # server crash).
    (
        """CREATE UNLOGGED TABLE counters (
            key text PRIMARY KEY, value bigint NOT NULL, expires_at timestamptz NOT NULL
        )""",
        "CREATE INDEX counters_by_expiry ON counters (expires_at)",
    ),
]
"""`MIGRATIONS[n]` takes a schema from version `n` to `n + 1`. Append only."""

_TABLES = ("runs", "approvals", "audit", "audit_head", "cache", "memory", "counters")
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_OUR_PARAMETERS = ("schema", "pool_size")
_PURGE_EVERY = 60.0
"""Seconds between sweeps of expired cache and memory rows (reads ignore them anyway)."""

_RUN_WRITTEN = tuple(c for c in RUN_COLUMNS if c not in ("id", "version"))

_Connection = psycopg.AsyncConnection[TupleRow]


class PostgresStore(SqlReads):
    """The `Store` interface over PostgreSQL (psycopg 3 and its connection pool).

    Args:
        url: `postgresql://[user[:password]@]host[:port]/database[?param=value…]`
            (`postgres://` too). Query parameters go to libpq (`sslmode`,
            `connect_timeout`, …) except `schema` (where the tables live, default
            `toolwire`) and `pool_size` (connections per store, default 10).
        connect_timeout: Seconds to wait for a new connection (libpq rounds it to whole
            seconds, at least 2; a `connect_timeout` in the URL wins).
        timeout: Seconds a call waits for a free pooled connection before the store
            reads as unavailable. Both are short, so that a database that went away
            fails a request in seconds instead of holding it.

    Raises:
        StoreError: The URL cannot be read, or names an invalid schema or pool size.
    """

    _mark = _MARK
    # `::text`: the JSON comes back as written and orjson parses it (faster than json.loads).
    _run_select = ", ".join("state::text" if c == "state" else c for c in RUN_COLUMNS)
    _audit_select = ", ".join(
        ["id", *("arguments::text" if c == "arguments" else c for c in AUDIT_COLUMNS)]
    )

    durable = True

    def __init__(self, url: str, *, connect_timeout: float = 3.0, timeout: float = 5.0) -> None:
        self.url = redact_url(url)
        base, _, query = url.partition("?")
        pairs = parse_qsl(query, keep_blank_values=True)
        ours = {k: v for k, v in pairs if k in _OUR_PARAMETERS}
        rest = urlencode([(k, v) for k, v in pairs if k not in _OUR_PARAMETERS])
        if urlsplit(base).scheme.lower() == "postgres":
            base = "postgresql" + base[len("postgres") :]
        self.schema = ours.get("schema", DEFAULT_SCHEMA)
        if not _SCHEMA_NAME.fullmatch(self.schema):
            raise StoreError(
                f"invalid schema {self.schema!r} in the store URL {self.url}: use lowercase "
                "letters, digits and underscores, not starting with a digit"
            )
        try:
            self.pool_size = int(ours.get("pool_size", "10"))
        except ValueError:
            self.pool_size = 0
        if not 1 <= self.pool_size <= 1000:
            raise StoreError(
                f"invalid pool_size in the store URL {self.url}: use a whole number from 1"
            )
        try:
            params = conninfo_to_dict(f"{base}?{rest}" if rest else base)
        except psycopg.ProgrammingError as e:
            raise StoreError(f"invalid PostgreSQL URL {self.url}: {_line(e)}") from None
        params.setdefault("connect_timeout", max(1, round(connect_timeout)))
        params.setdefault("application_name", "toolwire")
        # Appended to any `options` of the URL, so ours win: the schema; durability even
        # on a server whose default is `synchronous_commit = off`; and a frozen process
        # (stopped, swapping) cannot hold a run's row lock between two statements of a
        # transaction for longer than 30 s, so other replicas are never stuck behind it.
        extra = (
            f"-c search_path={self.schema} -c synchronous_commit=on "
            "-c idle_in_transaction_session_timeout=30000"
        )
        params["options"] = f"{params.get('options') or ''} {extra}".strip()
        self._conninfo = make_conninfo("", **params)
        self._timeout = timeout
        self._pool: AsyncConnectionPool[_Connection] | None = None
        self._next_purge = 0.0

    # --- opening ----------------------------------------------------------------------

    async def open(self) -> None:
        if self._pool is not None:
            return
        # One plain connection first: its error says why (the pool's would only time out).
        try:
            conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        except psycopg.Error as e:
            raise self._connect_failure(e) from None
        try:
            await self._migrate(conn)
            cursor = await conn.execute("SELECT current_setting('fsync')")
            row = await cursor.fetchone()
            if problem := _durability_problem(str(row[0]) if row else "on"):
                logger.warning("PostgreSQL at %s %s", self.url, problem)
        except psycopg.Error as e:
            raise StoreError(
                f"cannot prepare the PostgreSQL store {self.url} (schema {self.schema}): {_line(e)}"
            ) from None
        finally:
            await conn.close()
        pool: AsyncConnectionPool[_Connection] = AsyncConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=self.pool_size,
            kwargs={"autocommit": True},
            timeout=self._timeout,
            open=False,
            name=f"toolwire {self.url}",
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except psycopg.Error as e:
            await pool.close()
            raise self._connect_failure(e) from None
        self._pool = pool
        self._next_purge = 0.0

    def _connect_failure(self, error: psycopg.Error) -> StoreError:
        text = _line(error).removeprefix("connection failed: ")
        if "FATAL:" in text:  # the server answered: wrong database, role or password
            return StoreError(
                f"PostgreSQL refused the store {self.url}: {text.replace('FATAL:  ', '')}; "
                "check the database name and the credentials"
            )
        return StoreUnavailable(f"PostgreSQL at {self.url} is unreachable: {text}")

    async def _migrate(self, conn: _Connection) -> None:
        async with conn.transaction():
            # Transaction-scoped: released by the commit, or by the server if we die.
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('toolwire migrate ' || %s))", [self.schema]
            )
            cursor = await conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relname = ANY(%s)",
                [self.schema, ["schema_version", *_TABLES]],
            )
            present = {str(row[0]) for row in await cursor.fetchall()}
            if "schema_version" in present:
                cursor = await conn.execute("SELECT version FROM schema_version")
                row = await cursor.fetchone()
                version = int(row[0]) if row else 0
            elif present:
                raise StoreError(
                    f"the schema {self.schema} of {self.url} holds tables that are not "
                    f"toolwire's ({', '.join(sorted(present))}); choose another schema with "
                    "?schema=name"
                )
            else:
                # Not CREATE SCHEMA IF NOT EXISTS alone: it needs the CREATE privilege on
                # the database even when a DBA made the schema beforehand.
                cursor = await conn.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", [self.schema]
                )
                if await cursor.fetchone() is None:
                    await conn.execute(f'CREATE SCHEMA "{self.schema}"')
                await conn.execute("CREATE TABLE schema_version (version integer NOT NULL)")
                await conn.execute("INSERT INTO schema_version VALUES (0)")
                version = 0
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"the PostgreSQL store {self.url} (schema {self.schema}) was written by a "
                    f"newer toolwire (schema version {version}, this one knows up to "
                    f"{len(MIGRATIONS)}); upgrade toolwire or choose another schema"
                )
            for steps in MIGRATIONS[version:]:
                for statement in steps:
                    await conn.execute(statement)
            if version < len(MIGRATIONS):
                await conn.execute("UPDATE schema_version SET version = %s", [len(MIGRATIONS)])

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def ping(self) -> None:
        async with self._connection() as conn:
            await conn.execute("SELECT 1")

    # --- plumbing ---------------------------------------------------------------------

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[_Connection]:
        """A pooled connection; psycopg's errors leave as store errors without a password."""
        if self._pool is None:
            raise StoreError(f"the PostgreSQL store {self.url} is not open; await store.open()")
        try:
            conn = await _live_connection(self._pool, time.monotonic() + self._timeout)
            try:
                async with conn:  # as `pool.connection()`: commit or roll back, keep it open
                    yield conn
            finally:
                await self._pool.putconn(conn)
        except errors.UniqueViolation:
            raise  # the callers that insert turn it into StoreConflict
        except psycopg.OperationalError as e:  # connection lost, server shutting down, no
            # pooled connection free in time (PoolTimeout), an administrator's cancel
            raise StoreUnavailable(f"PostgreSQL at {self.url} failed: {_line(e)}") from e
        except psycopg.Error as e:
            raise StoreError(f"the PostgreSQL store {self.url} failed: {_line(e)}") from e

    async def _fetch(self, sql: str, params: Sequence[Any]) -> list[TupleRow]:
        async with self._connection() as conn:
            cursor = await conn.execute(sql, params)
            return await cursor.fetchall()

    async def _write(self, sql: str, params: Sequence[Any]) -> int:
        """Run one statement (committed on return); the number of rows it changed."""
        async with self._connection() as conn:
            cursor = await conn.execute(sql, params)
            return cursor.rowcount

    # --- runs -------------------------------------------------------------------------

    async def put_run(self, run: RunRecord, *, approvals: Sequence[ApprovalRecord] = ()) -> None:
        columns = ("id", *_RUN_WRITTEN, "version")
        sql = (
            f"INSERT INTO runs ({', '.join(columns)}) "
            f"VALUES ({_marks(len(columns))}) ON CONFLICT (id) DO UPDATE SET "
            f"{', '.join(f'{c} = excluded.{c}' for c in _RUN_WRITTEN)}, "
            "version = runs.version + 1"
        )
        params = [run.id, *_run_values(run, _RUN_WRITTEN), 1]  # a new run is version 1
        if not approvals:
            await self._write(sql, params)
            return
        async with self._connection() as conn, _conflicts(approvals), conn.transaction():
            await conn.execute(sql, params)
            await _insert_approvals(conn, approvals)

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
        if not expect:
            return False
        sets = ", ".join(f"{c} = %s" for c in _RUN_WRITTEN)
        clauses = ["id = %s", "status = ANY(%s)"]
        params: list[Any] = [*_run_values(run, _RUN_WRITTEN), run_id, list(expect)]
        if version is not None:
            clauses.append("version = %s")
            params.append(version)
        if holder is not None:
            clauses.append("holder = %s")
            params.append(holder)
        update_run = f"UPDATE runs SET {sets}, version = version + 1 WHERE {' AND '.join(clauses)}"
        if not approvals and not new_approvals:
            return await self._write(update_run, params) == 1
        async with self._connection() as conn, _conflicts(new_approvals):
            try:
                async with conn.transaction():
                    # The run's row lock first, then the approvals' in id order (see above).
                    cursor = await conn.execute(update_run, params)
                    if cursor.rowcount != 1:
                        raise _Lost
                    for approval, wanted in sorted(approvals, key=lambda a: a[0].id):
                        if not await _decide(conn, approval, wanted):
                            raise _Lost
                    await _insert_approvals(conn, new_approvals)
            except _Lost:  # raised inside the transaction block: it rolled back
                return False
        return True

    # --- approvals --------------------------------------------------------------------

    async def add_approvals(self, approvals: Sequence[ApprovalRecord]) -> None:
        if not approvals:
            return
        # One multi-row INSERT is its own transaction: all or none.
        async with self._connection() as conn, _conflicts(approvals):
            await _insert_approvals(conn, approvals)

    async def update_approval(
        self, approval: ApprovalRecord, *, expect: Sequence[ApprovalStatus]
    ) -> bool:
        if not expect:
            return False
        async with self._connection() as conn:
            return await _decide(conn, approval, expect)

    # --- audit ------------------------------------------------------------------------

    async def append_audit(self, record: AuditRecord) -> int:
        # Ids must increase in commit order, or a reader paging with `after_id` could pass
        # id 8 while id 7's transaction is still committing and never see 7. A sequence
        # hands out ids before commit, so concurrent appends could commit out of order.
        # Instead the id is taken from the one `audit_head` row in the same statement:
        # its row lock is held until this commit, so the next append reads the head only
        # after this record is visible. Appends are serialised (one commit at a time),
        # which costs little at a few records per tool call, and ids have no gaps.
        values = [getattr(record, c) for c in AUDIT_COLUMNS]
        values[AUDIT_COLUMNS.index("arguments")] = _dumps(record.arguments)
        rows = await self._fetch(
            "WITH head AS (UPDATE audit_head SET last_id = last_id + 1 RETURNING last_id) "
            f"INSERT INTO audit (id, {', '.join(AUDIT_COLUMNS)}) "
            f"SELECT last_id, {_marks(len(AUDIT_COLUMNS))} FROM head RETURNING id",
            values,
        )
        return int(rows[0][0])

    # --- retention --------------------------------------------------------------------

    async def prune(
        self,
        *,
        runs_before: float | None = None,
        approvals_before: float | None = None,
        audit_before: float | None = None,
        now: float,
    ) -> PruneCounts:
        runs = approvals = audit = 0
        if runs_before is not None:
            runs = await self._write(
                "DELETE FROM runs WHERE updated_at < %s AND ("
                "status NOT IN ('running', 'awaiting_approval') OR ("
                "status = 'awaiting_approval' AND NOT EXISTS ("
                "SELECT 1 FROM approvals a WHERE a.run_id = runs.id AND NOT ("
                "a.status = 'expired' OR (a.status IN ('pending', 'approved') "
                "AND a.expires_at <= %s)))))",
                [runs_before, now],
            )
        if approvals_before is not None:
            approvals = await self._write(
                "DELETE FROM approvals WHERE created_at < %s AND ("
                "status IN ('denied', 'used', 'expired') OR "
                "(status IN ('pending', 'approved') AND expires_at <= %s)) AND NOT EXISTS ("
                "SELECT 1 FROM runs r WHERE r.id = approvals.run_id AND r.status = 'running')",
                [approvals_before, now],
            )
        if audit_before is not None:
            async with self._connection() as conn, conn.transaction():
                # What the append-only trigger lets through, for this transaction only.
                await conn.execute(
                    "SELECT set_config('toolwire.audit_before', %s, true)", [repr(audit_before)]
                )
                # Only the log's head: up to the first record at or after the cut, so a
                # record older than the cut written after a newer one stays (no holes).
                cursor = await conn.execute(
                    "DELETE FROM audit WHERE id < COALESCE("
                    "(SELECT min(id) FROM audit WHERE time >= %s), 9223372036854775807)",
                    [audit_before],
                )
                audit = cursor.rowcount
        return PruneCounts(runs=runs, approvals=approvals, audit=audit)

    # --- cache and memory -------------------------------------------------------------

    # Expiry is on the server's clock: the one clock every replica shares.

    async def get(self, key: str) -> bytes | None:
        rows = await self._fetch(
            "SELECT value FROM cache WHERE key = %s AND expires_at > now()", [key]
        )
        return bytes(rows[0][0]) if rows else None

    async def recall(self, key: str) -> dict[str, Any] | None:
        rows = await self._fetch(
            "SELECT value::text FROM memory WHERE key = %s AND expires_at > now()", [key]
        )
        if not rows:
            return None
        value: dict[str, Any] = orjson.loads(rows[0][0])
        return value

    async def add_count(self, key: str, amount: int, ttl: float) -> int:
        rows = await self._fetch(
            "INSERT INTO counters (key, value, expires_at) "
            "VALUES (%s, %s, now() + make_interval(secs => %s)) "
            "ON CONFLICT (key) DO UPDATE SET "
            "value = CASE WHEN counters.expires_at > now() THEN counters.value ELSE 0 END "
            "+ excluded.value, expires_at = excluded.expires_at RETURNING value",
            [key, amount, ttl],
        )
        return int(rows[0][0])

    async def _put(self, table: str, key: str, value: bytes | str, ttl: float) -> None:
        if ttl <= 0:
            await self._write(f"DELETE FROM {table} WHERE key = %s", [key])
        else:
            await self._write(
                f"INSERT INTO {table} (key, value, expires_at) "
                "VALUES (%s, %s, now() + make_interval(secs => %s)) "
                "ON CONFLICT (key) DO UPDATE SET "
                "value = excluded.value, expires_at = excluded.expires_at",
                [key, value, ttl],
            )
        await self._purge()

    async def _purge(self) -> None:
        """Delete expired cache, memory and counter rows, at most once every `_PURGE_EVERY`."""
        now = time.monotonic()
        if now < self._next_purge:
            return
        self._next_purge = now + _PURGE_EVERY
        for table in ("cache", "memory", "counters"):
            await self._write(f"DELETE FROM {table} WHERE expires_at <= now()", [])


async def _live_connection(pool: AsyncConnectionPool[_Connection], deadline: float) -> _Connection:
    """A pooled connection not already ended by the server, by `deadline` (monotonic).

    When PostgreSQL ends a session (restart, `pg_terminate_backend`, an idle timeout) or a
    proxy cuts it, the idle pooled connection learns of it only by its socket: the
    server's last message or end of file arrive there, and nobody reads them until the
    next query fails. An idle connection is owed nothing, so a readable socket means it
    is gone: close it (the pool then drops it and opens another) and take the next.
    One `poll` with no wait and no round trip, against `check_connection`'s query per
    call. Not the pool's `check=` callback: after a failed check it backs off (1 s, then
    2 s, …), so a caller meeting the several connections a restart ended would wait
    seconds or time out. Nothing is retried here: no statement has been sent yet.

    A connection cut silently (a network path lost with no packet back) still reads as
    idle and its next statement waits for TCP to give up. libpq's `keepalives_idle`,
    `keepalives_interval`, `keepalives_count` and `tcp_user_timeout`, accepted in the
    URL, bound that; a keepalive that fails marks the socket, and it is skipped here.
    """
    while True:
        conn = await pool.getconn(max(0.0, deadline - time.monotonic()))
        if not _ended(conn):
            return conn
        await conn.close()
        await pool.putconn(conn)


def _ended(conn: _Connection) -> bool:
    """Whether an idle connection has been ended: anything to read on its socket (the
    server's farewell, end of file, an error) or psycopg already knows it broken."""
    if conn.closed:
        return True
    try:
        if not hasattr(select, "poll"):  # Windows, whose select() takes any socket number
            return bool(select.select([conn.fileno()], [], [], 0)[0])
        # poll, not select: select() refuses descriptors past 1023, common in a busy gateway.
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError, psycopg.Error):  # no socket to ask: not one to hand out
        return True


def _durability_problem(fsync: str) -> str | None:
    """What the server's settings cost the at-most-once promise (`synchronous_commit` is
    forced per session; `fsync` is the server's alone)."""
    if fsync.lower() == "off":
        return (
            "runs with fsync = off: a crash of its host can lose committed writes, among "
            "them an approval marked used, and an approved call could then run twice; "
            "set fsync = on"
        )
    return None


class _Lost(Exception):
    """A comparison of `transition_run` failed: roll its transaction back."""


@asynccontextmanager
async def _conflicts(approvals: Sequence[ApprovalRecord]) -> AsyncIterator[None]:
    try:
        yield
    except errors.UniqueViolation:
        _taken(approvals)


def _taken(approvals: Sequence[ApprovalRecord]) -> NoReturn:
    ids = ", ".join(repr(a.id) for a in approvals)
    raise StoreConflict(f"an approval with one of the ids {ids} exists already") from None


async def _insert_approvals(conn: _Connection, approvals: Sequence[ApprovalRecord]) -> None:
    if not approvals:
        return
    row = f"({_marks(len(APPROVAL_COLUMNS))})"
    await conn.execute(
        f"INSERT INTO approvals ({', '.join(APPROVAL_COLUMNS)}) "
        f"VALUES {', '.join([row] * len(approvals))}",
        [getattr(a, c) for a in approvals for c in APPROVAL_COLUMNS],
    )


async def _decide(
    conn: _Connection, approval: ApprovalRecord, expect: Sequence[ApprovalStatus]
) -> bool:
    """The compare-and-set behind deciding and using an approval, on `conn`."""
    cursor = await conn.execute(
        f"UPDATE approvals SET {', '.join(f'{c} = %s' for c in APPROVAL_DECISION_FIELDS)} "
        "WHERE id = %s AND status = ANY(%s)",
        [*(getattr(approval, c) for c in APPROVAL_DECISION_FIELDS), approval.id, list(expect)],
    )
    return cursor.rowcount == 1


def _line(error: BaseException) -> str:
    """An error's text on one line."""
    return " ".join(str(error).split()) or type(error).__name__


def _dumps(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _run_values(run: RunRecord, columns: Sequence[str]) -> list[Any]:
    """The run's `columns` (`state` as JSON text)."""
    return [_dumps(run.state) if c == "state" else getattr(run, c) for c in columns]


def _marks(n: int) -> str:
    return marks(_MARK, n)
