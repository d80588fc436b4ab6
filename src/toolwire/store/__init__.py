"""Where runs, approvals, the audit log, the result cache and memory live.

```python
store = open_store(default_store_url())   # or "memory", "sqlite:///state.db",
await store.open()                         # "redis://…", "postgresql://…"
```

The default is a SQLite file in the user's state directory,
`$XDG_STATE_HOME/toolwire/state.db` (`~/.local/state/toolwire/state.db` when the variable
is unset; `%LOCALAPPDATA%\\toolwire\\state.db` on Windows), not one under the working
directory: the CLI and the gateway then see the same approvals and audit log wherever
they are started from, and no project tree collects a database by accident. The
`TOOLWIRE_STORE` environment variable overrides it with any URL `open_store` accepts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from toolwire.store.base import (
    APPROVAL_DECISION_FIELDS,
    ApprovalRecord,
    ApprovalStatus,
    AuditEvent,
    AuditQuery,
    AuditRecord,
    PruneCounts,
    RunRecord,
    RunStatus,
    Store,
    StoreConflict,
    StoreError,
    StoreUnavailable,
    arguments_hash,
    canonical_json,
    redact_url,
)
from toolwire.store.memory import MemoryStore
from toolwire.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from toolwire.store.postgres import PostgresStore
    from toolwire.store.redis import RedisStore

__all__ = [
    "APPROVAL_DECISION_FIELDS",
    "ApprovalRecord",
    "ApprovalStatus",
    "AuditEvent",
    "AuditQuery",
    "AuditRecord",
    "MemoryStore",
    "PostgresStore",
    "PruneCounts",
    "RedisStore",
    "RunRecord",
    "RunStatus",
    "SqliteStore",
    "Store",
    "StoreConflict",
    "StoreError",
    "StoreUnavailable",
    "arguments_hash",
    "canonical_json",
    "default_store_url",
    "open_store",
    "redact_url",
]

_ACCEPTED = (
    "memory, sqlite:///relative/path.db, sqlite:////absolute/path.db, a path ending in "
    ".db/.sqlite/.sqlite3, postgresql://user@host:port/database?schema=toolwire, "
    "redis://[:password@]host:port/db, rediss://… or unix:///path/to/redis.sock"
)


def default_store_url() -> str:
    """`$TOOLWIRE_STORE` if set, else the SQLite file in the user's state directory."""
    if url := os.environ.get("TOOLWIRE_STORE", "").strip():
        return url
    if os.name == "nt" and (local := os.environ.get("LOCALAPPDATA")):
        base = Path(local)
    else:
        xdg = os.environ.get("XDG_STATE_HOME", "")
        # The XDG spec says to ignore a relative value.
        base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return f"sqlite:///{base / 'toolwire' / 'state.db'}"


def open_store(url: str) -> Store:
    """The store a URL names, not opened yet (`await store.open()` connects).

    Accepts `memory`; `sqlite:///relative.db` or `sqlite:////absolute.db` (or a bare path
    ending in `.db`, `.sqlite` or `.sqlite3`); `redis://`, `rediss://` and `unix://` URLs,
    where a `prefix=` query parameter sets the key prefix (default `toolwire:`) and
    `allow_volatile=true` opens a Redis whose persistence settings cannot keep the
    at-most-once promise (with a warning) instead of refusing it; `postgresql://` and
    `postgres://` URLs, where `schema=` names the schema (default `toolwire`) and
    `pool_size=` the connections per process (default 10).

    Raises:
        StoreError: An unknown scheme or a malformed URL, or a Redis or PostgreSQL URL
            without its driver installed.
    """
    text = url.strip()
    scheme = text.partition("://")[0].lower() if "://" in text else ""
    if text.lower() in ("memory", "memory://"):
        return MemoryStore()
    if scheme == "sqlite":
        path = text[len("sqlite:///") :] if text.lower().startswith("sqlite:///") else ""
        if not path:
            raise StoreError(f"store URL {text!r} has no path: use sqlite:///path/to/state.db")
        return SqliteStore(path)
    if scheme in ("redis", "rediss", "unix"):
        return _redis_store(text)
    if scheme in ("postgresql", "postgres"):
        return _postgres_store(text)
    if not scheme and text.lower().endswith((".db", ".sqlite", ".sqlite3")):
        return SqliteStore(text)
    raise StoreError(f"unknown store {redact_url(text)!r}: use {_ACCEPTED}")


def _redis_store(url: str) -> Store:
    try:
        from toolwire.store.redis import RedisStore
    except ModuleNotFoundError as e:
        if e.name != "redis" and not (e.name or "").startswith("redis."):
            raise
        raise StoreError(
            f"the store {redact_url(url)} needs redis-py: pip install 'toolwire[redis]'"
        ) from None
    # `prefix` and `allow_volatile` are ours, not redis-py's: take them out of the query.
    base, _, query = url.partition("?")
    pairs = parse_qsl(query, keep_blank_values=True)
    ours = {key: value for key, value in pairs if key in ("prefix", "allow_volatile")}
    volatile = ours.get("allow_volatile", "false").strip().lower()
    if volatile not in _BOOLEANS:
        raise StoreError(
            f"allow_volatile={volatile!r} in the store URL {redact_url(url)}: use true or false"
        )
    rest = urlencode([(key, value) for key, value in pairs if key not in ours])
    return RedisStore(
        f"{base}?{rest}" if rest else base,
        prefix=ours.get("prefix", "toolwire:"),
        allow_volatile=_BOOLEANS[volatile],
    )


_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _postgres_store(url: str) -> Store:
    try:
        from toolwire.store.postgres import PostgresStore
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] not in ("psycopg", "psycopg_pool"):
            raise
        raise StoreError(
            f"the store {redact_url(url)} needs psycopg 3: pip install 'toolwire[postgres]'"
        ) from None
    return PostgresStore(url)


def __getattr__(name: str) -> Any:
    # `RedisStore` and `PostgresStore` are imported on first use: their drivers are extras
    # (`toolwire[redis]`, `toolwire[postgres]`).
    if name == "RedisStore":
        from toolwire.store.redis import RedisStore

        return RedisStore
    if name == "PostgresStore":
        from toolwire.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
