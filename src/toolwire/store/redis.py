"""`RedisStore`: the store several gateway replicas share.

Key layout (every key starts with the prefix, `toolwire:` by default):

```
schema                        the layout's version (an integer)
run:{id}                      hash, one field per RunRecord attribute, each value JSON
runs                          sorted set of run ids by created_at; also
runs:status:{s}, runs:owner:{o}
approval:{id}                 hash, as runs
approvals                     sorted set of approval ids by created_at; also
approvals:status:{s}, approvals:run:{id}, approvals:requester:{name}
audit                         stream; record n is entry `0-n`, its JSON in field `r`
audit:last                    the last audit id given out (INCR)
cache:{key}, memory:{key}     strings with native expiry (SET … PX)
```

Every write that must be taken once, or that touches a record and its indexes, is one Lua
script, which Redis runs atomically: two replicas deciding the same approval get one
winner. The scripts compute index keys from the prefix, so this is for a single Redis (or
a primary with replicas), not Redis Cluster.

List queries walk the narrowest sorted set newest first and filter the rest here; the
audit log's filters are applied while reading the stream from `after_id` on, so a
narrow filter over a long log reads much of it (SQLite has an index per filter).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, cast
from urllib.parse import parse_qs, urlsplit

import orjson
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import AuthenticationError, AuthorizationError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from toolwire.store.base import (
    APPROVAL_DECISION_FIELDS,
    ApprovalRecord,
    ApprovalStatus,
    AuditQuery,
    AuditRecord,
    RunRecord,
    RunStatus,
    StoreConflict,
    StoreError,
    StoreUnavailable,
    redact_url,
)

__all__ = ["SCHEMA_VERSION", "RedisStore"]

SCHEMA_VERSION = 1
"""The key layout's version; raise it, with a migration in `open`, when the layout changes."""

_Record = TypeVar("_Record", RunRecord, ApprovalRecord)

# Replace a run, optionally only if its stored status is one of the expected ones, and move
# it between index sets. Values are JSON; only strings are decoded here (cjson would round
# floats). ARGV: prefix, id, score, new status, new owner (JSON), n, n expected statuses,
# then field/value pairs.
_PUT_RUN = """
local key, prefix, id, score = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local n = tonumber(ARGV[6])
local old = redis.call('HMGET', key, 'status', 'owner')
local status = old[1] and cjson.decode(old[1])
if n > 0 then
  local ok = false
  for i = 1, n do if status == ARGV[6 + i] then ok = true end end
  if not ok then return 0 end
end
if status then
  redis.call('ZREM', prefix .. 'runs:status:' .. status, id)
  local owner = cjson.decode(old[2])
  if type(owner) == 'string' then redis.call('ZREM', prefix .. 'runs:owner:' .. owner, id) end
end
redis.call('DEL', key)
redis.call('HSET', key, unpack(ARGV, 7 + n))
redis.call('ZADD', prefix .. 'runs', score, id)
redis.call('ZADD', prefix .. 'runs:status:' .. ARGV[4], score, id)
local owner = cjson.decode(ARGV[5])
if type(owner) == 'string' then redis.call('ZADD', prefix .. 'runs:owner:' .. owner, score, id) end
return 1
"""

# Insert approvals, all or none. KEYS: their hashes. ARGV: prefix, stride, then per
# approval: id, score, status, run_id, requested_by (JSON), field/value pairs.
_ADD_APPROVALS = """
local prefix, stride = ARGV[1], tonumber(ARGV[2])
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return KEYS[i] end
end
for i = 1, #KEYS do
  local at = 3 + (i - 1) * stride
  local id, score = ARGV[at], ARGV[at + 1]
  redis.call('HSET', KEYS[i], unpack(ARGV, at + 5, at + stride - 1))
  redis.call('ZADD', prefix .. 'approvals', score, id)
  redis.call('ZADD', prefix .. 'approvals:status:' .. ARGV[at + 2], score, id)
  redis.call('ZADD', prefix .. 'approvals:run:' .. ARGV[at + 3], score, id)
  local requester = cjson.decode(ARGV[at + 4])
  if type(requester) == 'string' then
    redis.call('ZADD', prefix .. 'approvals:requester:' .. requester, score, id)
  end
end
return false
"""

# The compare-and-set behind deciding and using an approval. ARGV: prefix, id, new status,
# n, n expected statuses, then field/value pairs of the decision fields.
_UPDATE_APPROVAL = """
local key, prefix, id, new = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local n = tonumber(ARGV[4])
local stored = redis.call('HGET', KEYS[1], 'status')
if not stored then return 0 end
local status = cjson.decode(stored)
local ok = false
for i = 1, n do if status == ARGV[4 + i] then ok = true end end
if not ok then return 0 end
redis.call('HSET', key, unpack(ARGV, 5 + n))
if new ~= status then
  local score = redis.call('ZSCORE', prefix .. 'approvals', id)
  redis.call('ZREM', prefix .. 'approvals:status:' .. status, id)
  redis.call('ZADD', prefix .. 'approvals:status:' .. new, score, id)
end
return 1
"""

# Ids and stream order agree because both are taken in one atomic step.
_APPEND_AUDIT = """
local id = redis.call('INCR', KEYS[1])
redis.call('XADD', KEYS[2], '0-' .. id, 'r', ARGV[1])
return id
"""


class RedisStore:
    """The `Store` interface over Redis (redis-py's asyncio client).

    Args:
        url: `redis://[user:password@]host:port/db`, `rediss://…` or
            `unix:///path/to/redis.sock?db=0`.
        prefix: Put before every key, so several deployments can share one database.
        connect_timeout: Seconds to wait for a connection.
        timeout: Seconds to wait for an answer. Both are short so a dead Redis fails a
            request in a few seconds instead of hanging it.
    """

    durable = True

    def __init__(
        self,
        url: str,
        prefix: str = "toolwire:",
        *,
        connect_timeout: float = 2.0,
        timeout: float = 3.0,
    ) -> None:
        self.url = redact_url(url)
        self.prefix = prefix
        self._full_url = url
        self._connect_timeout = connect_timeout
        self._timeout = timeout
        self._client: aioredis.Redis | None = None
        self._scripts: dict[str, AsyncScript] = {}

    async def open(self) -> None:
        if self._client is not None:
            return
        try:
            client = aioredis.Redis.from_url(
                self._full_url,
                socket_connect_timeout=self._connect_timeout,
                socket_timeout=self._timeout,
                # One immediate retry replaces a pooled connection Redis closed (a restart);
                # the default (10 retries with backoff) would hold a request for seconds.
                retry=Retry(NoBackoff(), 1),
            )
        except ValueError as e:
            raise StoreError(f"invalid Redis URL {self.url}: {e}") from None
        self._client = client
        try:
            with self._errors():
                schema = self._key("schema")
                await client.set(schema, SCHEMA_VERSION, nx=True)
                version = int(await client.get(schema) or 0)
        except BaseException:
            await self.aclose()
            raise
        if version > SCHEMA_VERSION:
            await self.aclose()
            raise StoreError(
                f"Redis at {self.url} (prefix {self.prefix!r}) holds data of a newer toolwire "
                f"(schema version {version}, this one knows up to {SCHEMA_VERSION}); upgrade "
                "toolwire or use another prefix or database"
            )
        # Sent by SHA (EVALSHA), and in full only when Redis does not know them yet.
        lua = (_PUT_RUN, _ADD_APPROVALS, _UPDATE_APPROVAL, _APPEND_AUDIT)
        self._scripts = {text: client.register_script(text) for text in lua}

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(RedisError, OSError):
                await client.aclose()

    async def ping(self) -> None:
        with self._errors():
            await self._redis().ping()

    # --- plumbing ---------------------------------------------------------------------

    def _redis(self) -> aioredis.Redis:
        if self._client is None:
            raise StoreError(f"the Redis store {self.url} is not open; await store.open()")
        return self._client

    async def _eval(self, lua: str, keys: list[str], args: list[Any]) -> Any:
        self._redis()  # open?
        with self._errors():
            return await self._scripts[lua](keys=keys, args=args)

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn redis-py's errors into store errors whose text holds no password."""
        try:
            yield
        except (AuthenticationError, AuthorizationError) as e:
            raise StoreError(
                f"Redis at {self.url} refused the credentials: {self._text(e)}"
            ) from None
        except (RedisConnectionError, RedisTimeoutError, OSError) as e:
            raise StoreUnavailable(f"Redis at {self.url} is unreachable: {self._text(e)}") from None
        except RedisError as e:
            raise StoreError(f"Redis at {self.url} failed: {self._text(e)}") from None

    def _text(self, error: BaseException) -> str:
        text = str(error) or type(error).__name__
        password = _password(self._full_url)
        return text.replace(password, "***") if password else text

    async def _load(self, cls: type[_Record], ids: Sequence[bytes | str]) -> list[_Record]:
        if not ids:
            return []
        kind = "run" if cls is RunRecord else "approval"
        keys = [self._key(kind, _str(record_id)) for record_id in ids]
        with self._errors():
            if len(keys) == 1:  # a pipeline costs more than it saves for one key
                hashes = [await self._redis().hgetall(keys[0])]
            else:
                pipe = self._redis().pipeline(transaction=False)
                for key in keys:
                    pipe.hgetall(key)
                hashes = await pipe.execute()
        return [_decode(cls, h) for h in hashes if h]

    async def _newest(
        self,
        cls: type[_Record],
        index: str,
        keep: Callable[[_Record], bool],
        limit: int,
    ) -> list[_Record]:
        """Up to `limit` records from `index`, newest first, that `keep(record)` accepts."""
        found: list[_Record] = []
        start, chunk = 0, max(limit, 100)
        while len(found) < limit:
            with self._errors():
                ids = cast(
                    "list[bytes]", await self._redis().zrevrange(index, start, start + chunk - 1)
                )
            if not ids:
                break
            found += [r for r in await self._load(cls, ids) if keep(r)]
            start += chunk
        return found[: max(limit, 0)]

    # --- runs -------------------------------------------------------------------------

    async def put_run(self, run: RunRecord) -> None:
        await self._write_run(run.id, run, ())

    async def get_run(self, run_id: str) -> RunRecord | None:
        runs = await self._load(RunRecord, [run_id])
        return runs[0] if runs else None

    async def transition_run(
        self, run_id: str, *, expect: Sequence[RunStatus], run: RunRecord
    ) -> bool:
        if not expect:
            return False
        return await self._write_run(run_id, run, expect)

    async def _write_run(self, run_id: str, run: RunRecord, expect: Sequence[str]) -> bool:
        args = [
            self.prefix,
            run_id,
            repr(float(run.created_at)),
            run.status,
            orjson.dumps(run.owner),
            len(expect),
            *expect,
            *_encode(run),
        ]
        return bool(await self._eval(_PUT_RUN, [self._key("run", run_id)], args))

    async def list_runs(
        self, *, status: RunStatus | None = None, owner: str | None = None, limit: int = 100
    ) -> list[RunRecord]:
        if owner is not None:
            index = self._key("runs:owner", owner)
        elif status is not None:
            index = self._key("runs:status", status)
        else:
            index = self._key("runs")
        return await self._newest(
            RunRecord,
            index,
            lambda r: (
                (status is None or r.status == status) and (owner is None or r.owner == owner)
            ),
            limit,
        )

    # --- approvals --------------------------------------------------------------------

    async def add_approvals(self, approvals: Sequence[ApprovalRecord]) -> None:
        if not approvals:
            return
        ids = [a.id for a in approvals]
        if len(set(ids)) != len(ids):
            raise StoreConflict(f"approval ids repeat in one batch: {ids}")
        args: list[Any] = [self.prefix, 0]
        for a in approvals:
            fields = _encode(a)
            args += [a.id, repr(float(a.created_at)), a.status, a.run_id]
            args += [orjson.dumps(a.requested_by), *fields]
        args[1] = 5 + len(_encode(approvals[0]))
        keys = [self._key("approval", a.id) for a in approvals]
        taken = await self._eval(_ADD_APPROVALS, keys, args)
        if taken:
            approval_id = _str(taken).removeprefix(self._key("approval", ""))
            raise StoreConflict(f"approval {approval_id!r} exists already")

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        approvals = await self._load(ApprovalRecord, [approval_id])
        return approvals[0] if approvals else None

    async def list_approvals(
        self,
        *,
        status: ApprovalStatus | None = None,
        requested_by: str | None = None,
        run_id: str | None = None,
        now: float,
        limit: int = 100,
    ) -> list[ApprovalRecord]:
        # The narrowest index: a run's approvals are few, and so are the pending ones
        # (effective status `pending` implies stored `pending`; not so for `expired`).
        if run_id is not None:
            index = self._key("approvals:run", run_id)
        elif status is not None and status != "expired":
            index = self._key("approvals:status", status)
        elif requested_by is not None:
            index = self._key("approvals:requester", requested_by)
        else:
            index = self._key("approvals")
        return await self._newest(
            ApprovalRecord,
            index,
            lambda a: (
                (status is None or a.effective_status(now) == status)
                and (requested_by is None or a.requested_by == requested_by)
                and (run_id is None or a.run_id == run_id)
            ),
            limit,
        )

    async def update_approval(
        self, approval: ApprovalRecord, *, expect: Sequence[ApprovalStatus]
    ) -> bool:
        if not expect:
            return False
        fields: list[Any] = []
        for name in APPROVAL_DECISION_FIELDS:
            fields += [name, orjson.dumps(getattr(approval, name))]
        args = [self.prefix, approval.id, approval.status, len(expect), *expect, *fields]
        return bool(await self._eval(_UPDATE_APPROVAL, [self._key("approval", approval.id)], args))

    # --- audit ------------------------------------------------------------------------

    async def append_audit(self, record: AuditRecord) -> int:
        data = dataclasses.asdict(record)
        del data["id"]
        keys = [self._key("audit:last"), self._key("audit")]
        return int(await self._eval(_APPEND_AUDIT, keys, [orjson.dumps(data)]))

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        found: list[AuditRecord] = []
        filtered = query != AuditQuery(after_id=query.after_id, limit=query.limit)
        # Filters are applied here, so a filtered query reads the log in larger pages.
        chunk = max(query.limit, 1000) if filtered else query.limit
        start = max(query.after_id, 0) + 1
        while len(found) < query.limit:
            with self._errors():
                entries = await self._redis().xrange(
                    self._key("audit"), min=f"0-{start}", max="+", count=chunk
                )
            if not entries:
                break
            for entry_id, values in cast("list[tuple[bytes, dict[bytes, bytes]]]", entries):
                record = AuditRecord(**orjson.loads(values[b"r"]))
                record.id = int(entry_id.split(b"-")[1])
                if query.matches(record):
                    found.append(record)
                    if len(found) == query.limit:
                        break
                start = record.id + 1
        return found

    # --- cache and memory -------------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        with self._errors():
            value = await self._redis().get(self._key("cache", key))
        return value.encode() if isinstance(value, str) else value

    async def set(self, key: str, value: bytes, ttl: float) -> None:
        await self._put(self._key("cache", key), value, ttl)

    async def remember(self, key: str, value: dict[str, Any], ttl: float) -> None:
        await self._put(self._key("memory", key), orjson.dumps(value), ttl)

    async def recall(self, key: str) -> dict[str, Any] | None:
        with self._errors():
            raw = await self._redis().get(self._key("memory", key))
        if raw is None:
            return None
        value: dict[str, Any] = orjson.loads(raw)
        return value

    async def _put(self, key: str, value: bytes, ttl: float) -> None:
        with self._errors():
            if ttl <= 0:
                await self._redis().delete(key)
            else:
                await self._redis().set(key, value, px=max(1, round(ttl * 1000)))


def _encode(record: RunRecord | ApprovalRecord) -> list[Any]:
    """Field/value pairs for a hash: every value JSON, `null` included."""
    pairs: list[Any] = []
    for field in dataclasses.fields(record):
        pairs += [field.name, orjson.dumps(getattr(record, field.name))]
    return pairs


def _decode(cls: type[_Record], fields: dict[Any, Any]) -> _Record:
    return cls(**{_str(k): orjson.loads(v) for k, v in fields.items()})


def _str(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _password(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.password:
        return parts.password
    return next(iter(parse_qs(parts.query).get("password", [])), None)
