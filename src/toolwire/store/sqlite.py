"""`SqliteStore`: the default store, one SQLite file that several processes may share.

The connection is in autocommit mode: a single-statement write is committed (and, with
`synchronous=FULL`, on disk) before the method returns. A write of several statements
(`transition_run`, `put_run` with approvals) is one `BEGIN IMMEDIATE … COMMIT`, which
takes the file's write lock first, so its checks and writes see no other process's
commit in between. Compare-and-set is an `UPDATE … WHERE id = ? AND status IN (…)` whose
row count says who won, which holds across processes sharing the file as within one.

Every statement, read or write, runs under one `asyncio.Lock`. aiosqlite runs a
connection's statements one at a time on its thread, but a transaction spans several
awaits: without the lock another coroutine's statement would land inside it (committed or
rolled back with it, or reading what it has not committed yet). A second connection for
transactions was the other choice; it would contend with the first through the file lock,
whose busy handler polls with sleeps of up to 100 ms, where the lock hands over at once.

Cache and memory rows (cached results, stored responses) and the audit records of read
tools are the exception, on a second connection: puts waiting at the same time are one
multi-row statement (group commit), and it commits in the event loop's thread with
`synchronous=NORMAL`, never waiting for another process's write lock (then the batch goes
the usual way). Such a commit is visible to every process sharing the file and survives a
killed process when the put returns, but not a power cut before the next fsync, which
every 64th batch and every other write does (`_quick_write`). Nothing depends on those
rows being on disk: a read tool that was running when the process died is not resumed
(runs.md, "Crash semantics"), and a lost stored response or cached result is asked for
again. Cache and memory reads go on that connection too: a stored response costs no
thread hop, to keep or to read back.

The schema is versioned with `PRAGMA user_version`; `MIGRATIONS[n]` takes a file from
version `n` to `n + 1` and runs inside one transaction when the store is opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import operator
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final

import aiosqlite
import orjson

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
)

__all__ = ["MIGRATIONS", "SqliteStore"]

_MARK = "?"
"""This driver's parameter mark."""

MIGRATIONS: list[tuple[str, ...]] = [
    # 1: runs, approvals, the audit log, the result cache and memory.
    (
        """CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            status TEXT NOT NULL,
            state TEXT NOT NULL,
            owner TEXT,
            model TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            lease_until REAL,
            holder TEXT
        )""",
        "CREATE INDEX runs_by_created ON runs (created_at, id)",
        "CREATE INDEX runs_by_status ON runs (status, created_at, id)",
        "CREATE INDEX runs_by_owner ON runs (owner, created_at, id)",
        """CREATE TABLE approvals (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            arguments TEXT NOT NULL,
            arguments_hash TEXT NOT NULL,
            status TEXT NOT NULL,
            reason TEXT NOT NULL,
            effects TEXT NOT NULL,
            requested_by TEXT,
            approver TEXT,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            decided_by TEXT,
            decided_at REAL,
            decision_reason TEXT,
            used_at REAL
        )""",
        "CREATE INDEX approvals_by_created ON approvals (created_at, id)",
        "CREATE INDEX approvals_by_status ON approvals (status, created_at, id)",
        "CREATE INDEX approvals_by_run ON approvals (run_id, created_at, id)",
        "CREATE INDEX approvals_by_requester ON approvals (requested_by, created_at, id)",
        # AUTOINCREMENT: an id is never reused, even were the last row ever removed.
        """CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            time REAL NOT NULL,
            event TEXT NOT NULL,
            tool TEXT NOT NULL,
            effects TEXT NOT NULL,
            arguments_hash TEXT NOT NULL,
            arguments TEXT,
            call_id TEXT NOT NULL,
            outcome TEXT,
            duration_ms REAL,
            request_id TEXT,
            run_id TEXT,
            key_name TEXT,
            approval_id TEXT,
            approved_by TEXT,
            approved_at REAL
        )""",
        "CREATE INDEX audit_by_tool ON audit (tool, id)",
        "CREATE INDEX audit_by_key ON audit (key_name, id)",
        "CREATE INDEX audit_by_outcome ON audit (outcome, id)",
        "CREATE INDEX audit_by_run ON audit (run_id, id)",
        "CREATE INDEX audit_by_time ON audit (time)",
        # Append-only, enforced by the file itself and not only by this code.
        """CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
           BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
        """CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
           BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
        """CREATE TABLE cache (
            key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at REAL NOT NULL
        ) WITHOUT ROWID""",
        "CREATE INDEX cache_by_expiry ON cache (expires_at)",
        """CREATE TABLE memory (
            key TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at REAL NOT NULL
        ) WITHOUT ROWID""",
        "CREATE INDEX memory_by_expiry ON memory (expires_at)",
    ),
    ("ALTER TABLE audit ADD COLUMN approval_wait_ms REAL",),
    # 3: a run's version, compared by transition_run. A stored run was written at least once.
    ("ALTER TABLE runs ADD COLUMN version INTEGER NOT NULL DEFAULT 1",),
    # 4: retention. A delete from the audit log is refused unless it takes the oldest
    # record and that record is older than `audit_prune.before`, which only `prune` sets,
    # and back to -inf in the same transaction: outside a prune nothing can be deleted,
    # and no prune can punch a hole in the middle of the log. REPLACE deletes the row it
    # replaces without firing delete triggers (unless recursive_triggers is on, which is
    # per connection): a BEFORE INSERT trigger refuses an id that exists.
    (
        """CREATE TABLE audit_prune (
            id INTEGER PRIMARY KEY CHECK (id = 1), before REAL NOT NULL
        )""",
        "INSERT INTO audit_prune (id, before) VALUES (1, -9e999)",
        """CREATE TRIGGER audit_prune_keeps_its_row BEFORE DELETE ON audit_prune
           BEGIN SELECT RAISE(ABORT, 'audit_prune holds one row'); END""",
        "DROP TRIGGER audit_no_delete",
        """CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
           WHEN NOT (OLD.time < (SELECT before FROM audit_prune WHERE id = 1)
                     AND OLD.id = (SELECT MIN(id) FROM audit))
           BEGIN SELECT RAISE(ABORT, 'the audit log is append-only (prune removes its oldest)');
           END""",
        """CREATE TRIGGER audit_no_replace BEFORE INSERT ON audit
           WHEN EXISTS (SELECT 1 FROM audit WHERE id = NEW.id)
           BEGIN SELECT RAISE(ABORT, 'the audit log is append-only (no REPLACE)'); END""",
        "CREATE INDEX runs_by_updated ON runs (updated_at)",
    ),
    # 5: counters of the per-key limits.
    (
        """CREATE TABLE counters (
            key TEXT PRIMARY KEY, value INTEGER NOT NULL, expires_at REAL NOT NULL
        ) WITHOUT ROWID""",
        "CREATE INDEX counters_by_expiry ON counters (expires_at)",
    ),
    # 6: memory (stored responses) in a rowid table. WITHOUT ROWID keeps the whole row in
    # the key's b-tree, where a cell holds at most ~1,000 bytes of a 4 KB page; a stored
    # response (1.3 KB for a one-line answer) spilled the rest onto an overflow page of
    # its own, and every key compared on the way to a row read that page back (the whole
    # row is the key). A put cost 5-6 pages written to the log and ~3 page reads, and the
    # file grew 4.7 KB per response. Here the key's index holds only the key, and the row
    # (up to ~4 KB inline) is appended to the table: ~4.5 pages written and none read.
    # The copy runs under the write lock of the migration's transaction: about 13 s for
    # 100,000 stored responses (476 MB) on a 2-core machine, during which other
    # processes' writes wait (and fail after `_BUSY_TIMEOUT`).
    (
        "ALTER TABLE memory RENAME TO memory_v5",
        """CREATE TABLE memory (
            key TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at REAL NOT NULL
        )""",
        "INSERT INTO memory (key, value, expires_at) SELECT key, value, expires_at FROM memory_v5",
        "DROP TABLE memory_v5",  # and memory_by_expiry, its index
        "CREATE INDEX memory_by_expiry ON memory (expires_at)",
    ),
]
"""`MIGRATIONS[n]` takes a file from schema version `n` to `n + 1`. Append only."""

_BUSY_TIMEOUT = 5.0
"""Seconds a statement waits for another process's write to finish before failing."""
_PRUNE_BATCH = 500
"""Rows one prune statement deletes: the file's write lock is never held for long."""
_PUT_BATCH = 256
"""Rows one group-commit statement writes at most (3 parameters each, well under
SQLite's 32766)."""
_QUICK_BATCHES = 64
"""Batches of puts committed on the event loop's thread (`_quick_write`, no fsync) for one
on the careful path (fsync, checkpoint): a log that stays short, and at most that many
batches a power cut can take back."""
_PURGE_EVERY = 60.0
"""Seconds between sweeps of expired cache and memory rows (reads ignore them anyway)."""

_SET = tuple(c for c in RUN_COLUMNS if c not in ("id", "version"))
"""The run columns a write sets from the record; the store sets `version` itself."""

_audit_values: Final = operator.attrgetter(*AUDIT_COLUMNS)
"""An audit record's column values, in `AUDIT_COLUMNS` order (one C call per record)."""
_AUDIT_ARGUMENTS: Final = AUDIT_COLUMNS.index("arguments")
_is_value: Final = functools.partial(operator.is_not, None)


@functools.cache
def _audit_insert(present: tuple[bool, ...]) -> str:
    """The audit INSERT of the columns that hold a value (a handful of shapes occur: an
    outcome or not, an approval or not, a key or not)."""
    columns = list(itertools.compress(AUDIT_COLUMNS, present))
    return f"INSERT INTO audit ({', '.join(columns)}) VALUES ({_marks(len(columns))})"


class SqliteStore(SqlReads):
    """The `Store` interface over one SQLite file.

    Args:
        path: The database file; its directory is created if missing.
    """

    _mark = _MARK
    _run_select = ", ".join(RUN_COLUMNS)
    _audit_select = ", ".join(["id", *AUDIT_COLUMNS])

    durable = True

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser().absolute()
        self.url = f"sqlite:///{self.path}"
        self._conn: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        """Held by every statement and by a transaction from BEGIN to COMMIT."""
        self._next_purge = 0.0
        self._next_count_purge = 0.0
        self._puts: dict[str, list[tuple[tuple[str, bytes | str, float], asyncio.Future[None]]]]
        self._puts = {"cache": [], "memory": []}
        """Cache and memory rows waiting for `_commit_puts`, by table, in arrival order."""
        self._committing: set[str] = set()
        """The tables a `_commit_puts` task is writing."""
        self._quick: sqlite3.Connection | None = None
        """The connection cache and memory puts commit on, in the event loop's thread
        (`_commit_puts`): `synchronous=NORMAL`, no busy wait, no checkpoints."""
        self._quick_left = 0
        """Batches `_quick` may still commit before one goes through the careful path."""

    async def open(self) -> None:
        if self._conn is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(
                f"cannot create the directory {self.path.parent} for the SQLite store "
                f"{self.path}: {e.strerror or e}; create it or choose another store path"
            ) from None
        if self.path.is_dir():
            raise StoreError(
                f"the SQLite store {self.path} is a directory; give a file path such as "
                f"{self.path / 'state.db'}"
            )
        conn = None
        try:
            # Autocommit (isolation_level=None): each statement commits on its own.
            conn = await aiosqlite.connect(self.path, isolation_level=None, timeout=_BUSY_TIMEOUT)
            await _use_wal(conn)
            # FULL fsyncs the WAL at each commit. NORMAL already survives a killed process
            # (the commit is in the OS page cache), but a power cut could undo the last
            # commits, among them an approval marked `used` or an audit `started` line,
            # and then a destructive call could run twice. At most once is worth an fsync.
            await conn.execute("PRAGMA synchronous = FULL")
            await self._migrate(conn)
        except sqlite3.DatabaseError as e:
            if conn is not None:
                await conn.close()
            raise StoreError(self._open_failure(e)) from None
        except BaseException:
            if conn is not None:
                await conn.close()
            raise
        try:
            quick = _open_quick(self.path)
        except sqlite3.DatabaseError as e:
            await conn.close()
            raise StoreError(self._open_failure(e)) from None
        self._conn = conn
        self._quick = quick
        self._quick_left = 0
        self._lock = asyncio.Lock()  # a reopened store may be on another event loop
        self._next_purge = 0.0
        await self._purge(time.time())

    def _open_failure(self, error: sqlite3.DatabaseError) -> str:
        text = str(error)
        if "not a database" in text:
            return (
                f"{self.path} is not a SQLite database ({text}); move it away or choose "
                "another store path"
            )
        return (
            f"cannot open the SQLite store {self.path}: {text}; check that this user can "
            "read and write the file and its directory"
        )

    async def _migrate(self, conn: aiosqlite.Connection) -> None:
        if await self._version(conn) == len(MIGRATIONS):
            return
        # IMMEDIATE takes the write lock now: two processes opening a new file at once
        # migrate it once, the second one finding the version already current.
        await conn.execute("BEGIN IMMEDIATE")
        try:
            version = await self._version(conn)
            if version == 0:
                await self._check_empty(conn)
            for steps in MIGRATIONS[version:]:
                for statement in steps:
                    await conn.execute(statement)
            await conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
            await conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.DatabaseError):  # keep the first error
                await conn.execute("ROLLBACK")
            raise

    async def _version(self, conn: aiosqlite.Connection) -> int:
        rows = list(await conn.execute_fetchall("PRAGMA user_version"))
        version = int(rows[0][0])
        if version > len(MIGRATIONS):
            raise StoreError(
                f"the SQLite store {self.path} was written by a newer toolwire (schema "
                f"version {version}, this one knows up to {len(MIGRATIONS)}); upgrade "
                "toolwire or choose another store path"
            )
        return version

    async def _check_empty(self, conn: aiosqlite.Connection) -> None:
        """Refuse to add toolwire's tables to another application's database."""
        rows = await conn.execute_fetchall(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
        names = sorted(str(row[0]) for row in rows)
        if names:
            raise StoreError(
                f"{self.path} is a SQLite database of something else (tables: "
                f"{', '.join(names[:5])}); choose another store path"
            )

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        quick, self._quick = self._quick, None
        if quick is not None:
            quick.close()
        if conn is not None:
            await conn.close()

    async def ping(self) -> None:
        await self._fetch("SELECT 1", ())

    # --- statements -------------------------------------------------------------------

    def _connection(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise StoreError(f"the SQLite store {self.path} is not open; await store.open()")
        return self._conn

    def _failure(self, error: sqlite3.DatabaseError) -> StoreError:
        message = f"the SQLite store {self.path} failed: {error}"
        if isinstance(error, sqlite3.OperationalError):  # locked, disk full, I/O error
            return StoreUnavailable(message)
        return StoreError(message)

    async def _fetch(self, sql: str, params: Iterable[Any]) -> list[sqlite3.Row]:
        conn = self._connection()
        async with self._lock:
            try:
                return list(await conn.execute_fetchall(sql, params))
            except sqlite3.DatabaseError as e:
                raise self._failure(e) from e

    async def _write(self, sql: str, params: Iterable[Any]) -> int:
        """Run one statement (committed on return); the number of rows it changed."""
        conn = self._connection()
        async with self._lock:
            try:
                cursor = await conn.execute(sql, params)
            except sqlite3.IntegrityError:
                raise
            except sqlite3.DatabaseError as e:
                raise self._failure(e) from e
            return cursor.rowcount

    async def _atomic(self, body: Callable[[aiosqlite.Connection], Awaitable[bool]]) -> bool:
        """Run `body` in one `BEGIN IMMEDIATE … COMMIT`; it commits when `body` returns
        True and rolls back when it returns False or raises (`IntegrityError` is raised
        as is, for the caller to name the conflict).

        The transaction runs in a task of its own, shielded: a caller cancelled between
        two of its statements must not leave it open (holding the file's write lock and
        catching the next coroutine's statements), so it always ends in COMMIT or ROLLBACK.
        """
        conn = self._connection()
        task = asyncio.ensure_future(self._transaction(conn, body))
        task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    async def _transaction(
        self,
        conn: aiosqlite.Connection,
        body: Callable[[aiosqlite.Connection], Awaitable[bool]],
    ) -> bool:
        async with self._lock:
            try:
                await conn.execute("BEGIN IMMEDIATE")
                try:
                    commit = await body(conn)
                    await conn.execute("COMMIT" if commit else "ROLLBACK")
                except BaseException:
                    with contextlib.suppress(sqlite3.DatabaseError):  # keep the first error
                        await conn.execute("ROLLBACK")
                    raise
            except sqlite3.IntegrityError:
                raise
            except sqlite3.DatabaseError as e:
                raise self._failure(e) from e
            return commit

    # --- runs -------------------------------------------------------------------------

    async def put_run(self, run: RunRecord, *, approvals: Sequence[ApprovalRecord] = ()) -> None:
        # An upsert, not INSERT OR REPLACE: the version is one more than the stored one.
        sql = (
            f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({_marks(len(RUN_COLUMNS))}) "
            f"ON CONFLICT (id) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in _SET)}, "
            "version = runs.version + 1"
        )
        row = [
            1 if c == "version" else value
            for c, value in zip(RUN_COLUMNS, _run_row(run), strict=True)
        ]
        if not approvals:
            await self._write(sql, row)
            return

        async def body(conn: aiosqlite.Connection) -> bool:
            await conn.execute(sql, row)
            await _insert_approvals(conn, approvals)
            return True

        await self._conflicts(approvals, body)

    async def _conflicts(
        self,
        approvals: Sequence[ApprovalRecord],
        body: Callable[[aiosqlite.Connection], Awaitable[bool]],
    ) -> bool:
        """`_atomic(body)`, a duplicate id among `approvals` raised as `StoreConflict`."""
        try:
            return await self._atomic(body)
        except sqlite3.IntegrityError:
            raise _conflict(approvals) from None

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
        if not expect or any(not wanted for _, wanted in approvals):
            return False
        values = dict(zip(RUN_COLUMNS, _run_row(run), strict=True))
        where = ["id = ?", f"status IN ({_marks(len(expect))})"]
        params: list[Any] = [run_id, *expect]
        if version is not None:
            where.append("version = ?")
            params.append(version)
        if holder is not None:
            where.append("holder = ?")
            params.append(holder)
        update = (
            f"UPDATE runs SET {', '.join(f'{c} = ?' for c in _SET)}, version = version + 1 "
            f"WHERE {' AND '.join(where)}"
        )
        update_params = [*(values[c] for c in _SET), *params]
        if not approvals and not new_approvals:
            return await self._write(update, update_params) == 1

        async def body(conn: aiosqlite.Connection) -> bool:
            if (await conn.execute(update, update_params)).rowcount != 1:
                return False
            # Every approval is compared before any is written, as the memory store does.
            if approvals:
                ids = [a.id for a, _ in approvals]
                rows = await conn.execute_fetchall(
                    f"SELECT id, status FROM approvals WHERE id IN ({_marks(len(ids))})", ids
                )
                stored = {str(r[0]): str(r[1]) for r in rows}
                if any(stored.get(a.id) not in wanted for a, wanted in approvals):
                    return False
            for approval, _ in approvals:
                await conn.execute(_DECIDE, [*_decision(approval), approval.id])
            await _insert_approvals(conn, new_approvals)
            return True

        return await self._conflicts(new_approvals, body)

    # --- approvals --------------------------------------------------------------------

    async def add_approvals(self, approvals: Sequence[ApprovalRecord]) -> None:
        if not approvals:
            return
        # One multi-row INSERT: all or none, without a transaction spanning awaits.
        try:
            await self._write(*_approvals_insert(approvals))
        except sqlite3.IntegrityError:
            raise _conflict(approvals) from None

    async def update_approval(
        self, approval: ApprovalRecord, *, expect: Sequence[ApprovalStatus]
    ) -> bool:
        if not expect:
            return False
        changed = await self._write(
            f"{_DECIDE} AND status IN ({_marks(len(expect))})",
            [*_decision(approval), approval.id, *expect],
        )
        return changed == 1

    # --- audit ------------------------------------------------------------------------

    async def append_audit(self, record: AuditRecord) -> int:
        values = list(_audit_values(record))
        values[_AUDIT_ARGUMENTS] = _dumps(record.arguments)
        # Only the columns that hold a value are bound; the others are NULL by having no
        # default. sqlite3 binds every None through its adapter lookup (which raises and
        # clears an AttributeError each time): a read tool's record has half a dozen.
        present = tuple(map(_is_value, values))
        sql = _audit_insert(present)
        params = list(itertools.compress(values, present))
        # A read tool's record (its only one, written after the call) is not what at most
        # once rests on: it commits like a stored response, with no thread hop or fsync.
        # Write and destructive tools' records are fsynced before the method returns.
        quick = (
            self._quick_write(sql, params)
            if record.effects == "read" and not self._lock.locked()
            else None
        )
        if quick is not None:
            row_id = quick.lastrowid
        else:
            conn = self._connection()
            async with self._lock:
                try:
                    # The cursor's `lastrowid` is the new row's id: no second statement
                    # (`execute_insert` runs `SELECT last_insert_rowid()` after the insert).
                    cursor = await conn.execute(sql, params)
                except sqlite3.DatabaseError as e:
                    raise self._failure(e) from e
                self._quick_left = _QUICK_BATCHES  # fsynced, with every quick commit before
            row_id = cursor.lastrowid
        assert row_id is not None  # set by every INSERT
        return row_id

    # --- retention --------------------------------------------------------------------

    async def prune(
        self,
        *,
        runs_before: float | None = None,
        approvals_before: float | None = None,
        audit_before: float | None = None,
        now: float,
    ) -> PruneCounts:
        # Approvals first, as in every backend: a paused run whose approvals are gone has
        # nothing left to wait for.
        approvals = runs = audit = 0
        if approvals_before is not None:
            approvals = await self._prune_batches(
                "DELETE FROM approvals WHERE id IN (SELECT id FROM approvals "
                "WHERE created_at < ? AND (status IN ('denied', 'used', 'expired') "
                "OR (status IN ('pending', 'approved') AND expires_at <= ?)) "
                "AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = approvals.run_id "
                "AND runs.status = 'running') LIMIT ?)",
                [approvals_before, now],
            )
        if runs_before is not None:
            runs = await self._prune_batches(
                "DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE updated_at < ? "
                "AND (status NOT IN ('running', 'awaiting_approval') "
                "OR (status = 'awaiting_approval' AND NOT EXISTS (SELECT 1 FROM approvals "
                "WHERE approvals.run_id = runs.id AND status != 'expired' "
                "AND NOT (status IN ('pending', 'approved') AND expires_at <= ?)))) LIMIT ?)",
                [runs_before, now],
            )
        if audit_before is not None:
            while True:
                deleted = await self._prune_audit(audit_before)
                audit += deleted
                if deleted < _PRUNE_BATCH:
                    break
        return PruneCounts(runs=runs, approvals=approvals, audit=audit)

    async def _prune_batches(self, sql: str, params: list[Any]) -> int:
        total = 0
        while (deleted := await self._write(sql, [*params, _PRUNE_BATCH])) > 0:
            total += deleted
            if deleted < _PRUNE_BATCH:
                break
        return total

    async def _prune_audit(self, before: float) -> int:
        """Delete up to `_PRUNE_BATCH` of the oldest audit records older than `before`."""
        deleted = 0

        async def body(conn: aiosqlite.Connection) -> bool:
            nonlocal deleted
            # The oldest records, up to the first that is not old enough: a prefix.
            rows = list(
                await conn.execute_fetchall(
                    "SELECT id, time FROM audit ORDER BY id LIMIT ?", [_PRUNE_BATCH]
                )
            )
            ids = [int(r[0]) for r in rows]
            cut = next((i for i, r in enumerate(rows) if not float(r[1]) < before), len(rows))
            if cut == 0:
                return False
            await conn.execute("UPDATE audit_prune SET before = ? WHERE id = 1", [before])
            cursor = await conn.execute("DELETE FROM audit WHERE id <= ?", [ids[cut - 1]])
            deleted = cursor.rowcount
            await conn.execute("UPDATE audit_prune SET before = -9e999 WHERE id = 1")
            return True

        await self._atomic(body)
        return deleted

    # --- cache and memory -------------------------------------------------------------

    # Expiry is on the wall clock: it is the only clock processes sharing the file share.

    async def get(self, key: str) -> bytes | None:
        rows = await self._quick_fetch(
            "SELECT value FROM cache WHERE key = ? AND expires_at > ?", [key, time.time()]
        )
        return bytes(rows[0][0]) if rows else None

    async def recall(self, key: str) -> dict[str, Any] | None:
        rows = await self._quick_fetch(
            "SELECT value FROM memory WHERE key = ? AND expires_at > ?", [key, time.time()]
        )
        if not rows:
            return None
        value: dict[str, Any] = orjson.loads(rows[0][0])
        return value

    async def add_count(self, key: str, amount: int, ttl: float) -> int:
        now = time.time()
        rows = await self._fetch(
            "INSERT INTO counters (key, value, expires_at) VALUES (?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET "
            "value = CASE WHEN counters.expires_at > ? THEN counters.value ELSE 0 END "
            "+ excluded.value, expires_at = excluded.expires_at RETURNING value",
            [key, amount, now + ttl, now],
        )
        if now >= self._next_count_purge:
            # Windows that ended are never read again: drop them now and then.
            self._next_count_purge = now + _PURGE_EVERY
            await self._write("DELETE FROM counters WHERE expires_at <= ?", [now])
        return int(rows[0][0])

    async def _put(self, table: str, key: str, value: bytes | str, ttl: float) -> None:
        """Keep (or, `ttl <= 0`, forget) a cache or memory row; committed, with the other
        puts waiting at the same time, before it returns (see `_commit_puts`)."""
        now = time.time()
        # A forgotten key is overwritten with an expired, empty row: no read returns it,
        # the next purge deletes it, and it goes in the same one statement as the rest.
        row = (key, value, now + ttl) if ttl > 0 else (key, "", 0.0)
        if (
            table not in self._committing  # nothing of this table waits or is being written
            and not self._lock.locked()  # nor does a transaction, which it would wait for
            and self._quick_write(_PUT[table], row) is not None
        ):
            # Alone: committed here and now, with no batch, task or future to go through.
            await self._purge(now)
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._puts[table].append((row, done))
        if table not in self._committing:
            self._committing.add(table)
            task = asyncio.ensure_future(self._commit_puts(table))
            task.add_done_callback(_retrieve)
        await done
        await self._purge(now)

    async def _commit_puts(self, table: str) -> None:
        """Group commit: write every put waiting for `table` in one multi-row statement,
        one commit (and one fsync) for all of them, until none waits.

        Puts queue while the lock is held (a transaction, another statement, the previous
        batch's commit) and go out together: under load a stored response costs a share of
        a thread hop, a file lock and an fsync, not one each. Each put still returns only
        once its batch is committed, as durable as a write of its own. A task of its own,
        so a cancelled caller does not take the others' write down with it.
        """
        waiting = self._puts[table]
        batch: list[tuple[tuple[str, bytes | str, float], asyncio.Future[None]]] = []
        try:
            while waiting:
                async with self._lock:
                    batch = waiting[:_PUT_BATCH]
                    del waiting[:_PUT_BATCH]
                    error: BaseException | None = None
                    sql = _put_sql(table, len(batch))
                    params = [v for row, _ in batch for v in row]
                    if self._quick_write(sql, params) is not None:
                        _settle(batch, None)
                        continue
                    try:
                        await self._connection().execute(sql, params)
                        self._quick_left = _QUICK_BATCHES
                    except sqlite3.DatabaseError as e:
                        error = self._failure(e)
                    except StoreError as e:  # not open
                        error = e
                    except ValueError as e:  # aiosqlite: the connection was closed
                        error = StoreError(f"the SQLite store {self.path} was closed: {e}")
                _settle(batch, error)
        except asyncio.CancelledError:  # the loop is going away: nobody is left unanswered
            failed = StoreUnavailable(f"the SQLite store {self.path} was shut down")
            _settle(batch, failed)
            _settle(waiting, failed)
            del waiting[:]
            raise
        finally:
            self._committing.discard(table)

    async def _quick_fetch(self, sql: str, params: list[Any]) -> list[Any]:
        """A read of one cache or memory row on `_quick`, in this thread (a stored
        response continued or fetched costs no thread hop); on the worker thread when
        `_quick` cannot (busy at once, which a WAL reader almost never is, or failed).

        It needs not the store's lock: it runs to its end without an await, and reads the
        last commit, as it would from another process.
        """
        quick = self._quick
        if quick is not None:
            try:
                return quick.execute(sql, params).fetchall()
            except sqlite3.Error:
                pass
        return await self._fetch(sql, params)

    def _quick_write(self, sql: str, params: Sequence[Any]) -> sqlite3.Cursor | None:
        """Commit one statement (a batch of puts, a read tool's audit record) on `_quick`,
        in this thread; None when it must take the careful path: another process holds
        the write lock (this one does not wait for it), `_quick` failed (the careful path
        reports the error), or `_QUICK_BATCHES` went this way since the last careful one.

        The careful path is a commit with `synchronous=FULL` on the worker thread, which
        fsyncs the log with everything before it, and checkpoints the log into the file
        once it is long. Here a commit is a few writes into the OS page cache, with no
        thread hop and no fsync: it is visible to every process sharing the file at once
        and survives this process being killed, as the careful path does; only a power
        cut (or an OS crash) before the next fsync can take it back. That loses a stored
        response, a cached result or a read tool's audit record, never a run, an approval
        or the record of a call with effects.
        """
        quick = self._quick
        if quick is None or self._quick_left <= 0:
            return None
        try:
            cursor = quick.execute(sql, params)
        except sqlite3.Error:
            self._quick_left = 0
            return None
        self._quick_left -= 1
        return cursor

    async def _purge(self, now: float) -> None:
        """Delete expired cache and memory rows, at most once every `_PURGE_EVERY`."""
        if now < self._next_purge:
            return
        self._next_purge = now + _PURGE_EVERY
        for table in ("cache", "memory"):
            await self._write(f"DELETE FROM {table} WHERE expires_at <= ?", [now])


def _put_sql(table: str, rows: int) -> str:
    """The statement that keeps `rows` cache or memory rows of `table` at once."""
    values = ", ".join(["(?, ?, ?)"] * rows)
    return f"INSERT OR REPLACE INTO {table} (key, value, expires_at) VALUES {values}"


_PUT = {table: _put_sql(table, 1) for table in ("cache", "memory")}
"""One put's statement, by table."""


def _open_quick(path: Path) -> sqlite3.Connection:
    """The connection of `_quick_write`, on a file `open` has set up (WAL, schema)."""
    # timeout=0: a write lock held by another process fails at once, never blocking the
    # event loop; check_same_thread=False: opened here, it is used under the store's lock
    # from whichever thread runs the event loop.
    quick = sqlite3.connect(path, isolation_level=None, timeout=0, check_same_thread=False)
    try:
        quick.execute("PRAGMA synchronous = NORMAL")
        quick.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints: the careful path's
    except BaseException:
        quick.close()
        raise
    return quick


async def _use_wal(conn: aiosqlite.Connection) -> None:
    """Switch the file to WAL (readers never wait for the writer; it stays switched).

    The switch answers "database is locked" at once, without the busy timeout, while
    another process opens the same new file, so it is retried here for as long.
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT
    while True:
        try:
            # fetchall: a statement left with unread rows would hold a read transaction.
            await conn.execute_fetchall("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.02)


_DECIDE = (
    f"UPDATE approvals SET {', '.join(f'{c} = ?' for c in APPROVAL_DECISION_FIELDS)} WHERE id = ?"
)


def _decision(approval: ApprovalRecord) -> list[Any]:
    return [getattr(approval, c) for c in APPROVAL_DECISION_FIELDS]


def _approvals_insert(approvals: Sequence[ApprovalRecord]) -> tuple[str, list[Any]]:
    row = f"({_marks(len(APPROVAL_COLUMNS))})"
    sql = (
        f"INSERT INTO approvals ({', '.join(APPROVAL_COLUMNS)}) "
        f"VALUES {', '.join([row] * len(approvals))}"
    )
    return sql, [getattr(a, c) for a in approvals for c in APPROVAL_COLUMNS]


async def _insert_approvals(
    conn: aiosqlite.Connection, approvals: Sequence[ApprovalRecord]
) -> None:
    if approvals:
        await conn.execute(*_approvals_insert(approvals))


def _conflict(approvals: Sequence[ApprovalRecord]) -> StoreConflict:
    ids = ", ".join(repr(a.id) for a in approvals)
    return StoreConflict(f"an approval with one of the ids {ids} exists already")


def _settle(puts: Sequence[tuple[Any, asyncio.Future[None]]], error: BaseException | None) -> None:
    """Answer the callers of the puts of a batch (committed, or failed with `error`)."""
    for _, done in puts:
        if not done.done():
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a shielded transaction's error as seen when its caller was cancelled."""
    if not task.cancelled():
        task.exception()


def _dumps(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _run_row(run: RunRecord) -> list[Any]:
    return [_dumps(run.state) if c == "state" else getattr(run, c) for c in RUN_COLUMNS]


def _marks(n: int) -> str:
    return marks(_MARK, n)
