"""`RedisStore`: the store several gateway replicas share.

Key layout (every key starts with the prefix, `toolwire:` by default):

```
schema                        the layout's version (an integer)
run:{id}                      hash, one field per RunRecord attribute, each value JSON
runs                          sorted set of run ids by created_at; also
runs:status:{s}, runs:owner:{o}, runs:owner-status:{s}:{o}
runs:updated                  sorted set of run ids by updated_at (retention)
approval:{id}                 hash, as runs
approvals                     sorted set of approval ids by created_at; also
approvals:status:{s}, approvals:run:{id}, approvals:requester:{name},
approvals:requester-status:{s}:{name}
audit                         stream; record n is entry `0-n`, its JSON in field `r`
audit:last                    the last audit id given out (INCR)
audit:pruned                  the highest audit id retention removed (XTRIM MINID)
cache:{key}, memory:{key}     strings with native expiry (SET … PX)
```

Every write that must be taken once, or that touches a record and its indexes, is one Lua
script, which Redis runs atomically: two replicas deciding the same approval get one
winner. The scripts compute index keys from the prefix, so this is for a single Redis (or
a primary with replicas), not Redis Cluster.

The audit stream is append-only as far as Redis allows: no command rewrites a stream
entry, ids are given out by the append script only, and retention trims only the stream's
head. Redis has no triggers, so a client with XDEL, XTRIM, DEL or XSETID can still remove
entries; only an ACL stops that (give toolwire's user `-xdel -xsetid` and keep other
clients off the prefix). A removal is visible: `XLEN audit` equals `audit:last` minus
`audit:pruned` while nothing else deleted an entry.

List queries walk the narrowest sorted set newest first and filter the rest here; the
audit log's filters are applied while reading the stream from `after_id` on, so a
narrow filter over a long log reads much of it (SQLite has an index per filter).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
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
    PruneCounts,
    RunRecord,
    RunStatus,
    StoreConflict,
    StoreError,
    StoreUnavailable,
    redact_url,
)

__all__ = ["SCHEMA_VERSION", "RedisStore"]

logger = logging.getLogger("toolwire.store")

_WARNED: set[tuple[str, str]] = set()
"""(URL, prefix) of the volatile Redis stores this process has warned about."""

_PRUNE_BATCH = 500
"""Records one prune script looks at: Redis runs nothing else while a script runs."""

SCHEMA_VERSION = 2
"""The key layout's version; raise it, with a migration in `open`, when the layout changes."""

_Record = TypeVar("_Record", RunRecord, ApprovalRecord)

# Shared by the scripts below, so every write keeps the indexes the same way. Hash values
# are JSON; a script decodes only strings (cjson would round floats). A plan (ARGV[2]) is a
# JSON object whose leaves are strings (scores, encoded field values), for the same reason.
_LIB = """
local prefix = ARGV[1]
local function has(list, value)
  for _, v in ipairs(list) do if v == value then return true end end
  return false
end
local function text(raw)  -- a stored JSON value that is a string, else nil
  if not raw then return nil end
  local value = cjson.decode(raw)
  if type(value) == 'string' then return value end
  return nil
end
local function approval_status(key)
  return text(redis.call('HGET', key, 'status'))
end
-- The index sets a record is in. `op` is 'ZADD' (with a score) or 'ZREM'. Owner and
-- requester come last in the combined keys: a name may hold ':', a status never does.
local function run_indexes(op, id, score, status, owner, updated)
  local function call(key)
    if op == 'ZADD' then redis.call('ZADD', key, score, id) else redis.call('ZREM', key, id) end
  end
  if op == 'ZADD' then
    redis.call('ZADD', prefix .. 'runs:updated', updated, id)
  else
    redis.call('ZREM', prefix .. 'runs:updated', id)
  end
  call(prefix .. 'runs')
  call(prefix .. 'runs:status:' .. status)
  if owner then
    call(prefix .. 'runs:owner:' .. owner)
    call(prefix .. 'runs:owner-status:' .. status .. ':' .. owner)
  end
end
local function approval_status_indexes(op, id, score, status, requester)
  local function call(key)
    if op == 'ZADD' then redis.call('ZADD', key, score, id) else redis.call('ZREM', key, id) end
  end
  call(prefix .. 'approvals:status:' .. status)
  if requester then call(prefix .. 'approvals:requester-status:' .. status .. ':' .. requester) end
end
local function approval_indexes(op, id, score, status, run, requester)
  local function call(key)
    if op == 'ZADD' then redis.call('ZADD', key, score, id) else redis.call('ZREM', key, id) end
  end
  call(prefix .. 'approvals')
  if run then call(prefix .. 'approvals:run:' .. run) end
  if requester then call(prefix .. 'approvals:requester:' .. requester) end
  approval_status_indexes(op, id, score, status, requester)
end
local function add_approval(key, a)
  redis.call('HSET', key, unpack(a.fields))
  approval_indexes('ZADD', a.id, a.score, a.status, a.run_id, a.requested_by)
end
local function decide(key, id, old, a)
  redis.call('HSET', key, unpack(a.fields))
  if a.status ~= old then
    local score = redis.call('ZSCORE', prefix .. 'approvals', id)
    local requester = text(redis.call('HGET', key, 'requested_by'))
    approval_status_indexes('ZREM', id, score, old, requester)
    approval_status_indexes('ZADD', id, score, a.status, requester)
  end
end
local function number(raw)  -- a stored JSON number, else nil
  if not raw then return nil end
  local value = cjson.decode(raw)
  if type(value) == 'number' then return value end
  return nil
end
local function expired(key, now)  -- the approval's effective status is `expired`
  local a = redis.call('HMGET', key, 'status', 'expires_at')
  local status, expires = text(a[1]), number(a[2])
  return status == 'expired'
    or ((status == 'pending' or status == 'approved') and expires ~= nil and expires <= now)
end
local function taken(keys, approvals)  -- the first id that exists or repeats, else nil
  local seen = {}
  for i, a in ipairs(approvals) do
    if seen[a.id] or redis.call('EXISTS', keys[i]) == 1 then return a.id end
    seen[a.id] = true
  end
  return nil
end
"""

# Insert or replace a run (plan.expect absent: put_run) or compare-and-set it (plan.expect,
# plus plan.version and plan.holder when given), decide approvals whose stored status is
# one of theirs, insert new ones: every comparison before the first write, so a failed one
# writes nothing. KEYS: the run's hash, the decided approvals', the new approvals'.
# Returns 1, 0 (a comparison failed) or {id} (a new approval's id is taken).
_WRITE_RUN = (
    _LIB
    + """
local plan = cjson.decode(ARGV[2])
local key = KEYS[1]
local old = redis.call('HMGET', key, 'status', 'owner', 'version', 'holder')
local status = text(old[1])
local version = tonumber(old[3]) or 0
if plan.expect then
  if not status or not has(plan.expect, status) then return 0 end
  if plan.version and version ~= plan.version then return 0 end
  if plan.holder and text(old[4]) ~= plan.holder then return 0 end
end
local decided = {}
for i, a in ipairs(plan.decide) do
  decided[i] = approval_status(KEYS[1 + i])
  if not decided[i] or not has(a.expect, decided[i]) then return 0 end
end
local new_keys = {unpack(KEYS, 2 + #plan.decide)}
local id = taken(new_keys, plan.add)
if id then return {id} end
if status then run_indexes('ZREM', plan.id, nil, status, text(old[2])) end
redis.call('DEL', key)
redis.call('HSET', key, 'version', version + 1, unpack(plan.fields))
run_indexes('ZADD', plan.id, plan.score, plan.status, plan.owner, plan.updated)
for i, a in ipairs(plan.decide) do decide(KEYS[1 + i], a.id, decided[i], a) end
for i, a in ipairs(plan.add) do add_approval(new_keys[i], a) end
return 1
"""
)

# Only lease_until, only for the claim that holds the run. ARGV: prefix, holder, lease_until
# (JSON).
_ADD_COUNT = """
-- KEYS[1]: the counter; ARGV: amount, ttl in ms. INCRBY and PEXPIRE as one step, so a
-- counter never lives on without its expiry.
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return value
"""

_RENEW_LEASE = (
    _LIB
    + """
local old = redis.call('HMGET', KEYS[1], 'status', 'holder')
if text(old[1]) ~= 'running' or text(old[2]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'lease_until', ARGV[3])
return 1
"""
)

# Delete the approvals among ARGV[4..] that retention no longer keeps (see Store.prune);
# ARGV[2]: approvals_before, ARGV[3]: now. Returns how many.
_PRUNE_APPROVALS = (
    _LIB
    + """
local before, now, deleted = tonumber(ARGV[2]), tonumber(ARGV[3]), 0
for i = 4, #ARGV do
  local id = ARGV[i]
  local key = prefix .. 'approval:' .. id
  local a = redis.call('HMGET', key, 'status', 'created_at', 'run_id', 'requested_by')
  local status, created, run = text(a[1]), number(a[2]), text(a[3])
  local run_status = run and text(redis.call('HGET', prefix .. 'run:' .. run, 'status'))
  if status and created and created < before and run_status ~= 'running'
     and (status == 'denied' or status == 'used' or expired(key, now)) then
    redis.call('DEL', key)
    approval_indexes('ZREM', id, nil, status, run, text(a[4]))
    deleted = deleted + 1
  end
end
return deleted
"""
)

# Delete the runs among ARGV[4..] that retention no longer keeps; ARGV[2]: runs_before,
# ARGV[3]: now. Returns how many.
_PRUNE_RUNS = (
    _LIB
    + """
local before, now, deleted = tonumber(ARGV[2]), tonumber(ARGV[3]), 0
for i = 4, #ARGV do
  local id = ARGV[i]
  local key = prefix .. 'run:' .. id
  local r = redis.call('HMGET', key, 'status', 'updated_at', 'owner')
  local status, updated = text(r[1]), number(r[2])
  local gone = status and updated and updated < before and status ~= 'running'
  if gone and status == 'awaiting_approval' then
    for _, approval in ipairs(redis.call('ZRANGE', prefix .. 'approvals:run:' .. id, 0, -1)) do
      if not expired(prefix .. 'approval:' .. approval, now) then gone = false end
    end
  end
  if gone then
    redis.call('DEL', key)
    run_indexes('ZREM', id, nil, status, text(r[3]))
    deleted = deleted + 1
  end
end
return deleted
"""
)

# Trim the audit stream's head below id `0-ARGV[1]` and remember the highest id pruned
# (so XLEN = audit:last - audit:pruned while nothing else deleted an entry).
_PRUNE_AUDIT = """
local trimmed = redis.call('XTRIM', KEYS[1], 'MINID', '0-' .. ARGV[1])
local pruned = tonumber(redis.call('GET', KEYS[2])) or 0
if tonumber(ARGV[1]) - 1 > pruned then redis.call('SET', KEYS[2], tonumber(ARGV[1]) - 1) end
return trimmed
"""

# Layout 1 -> 2: the combined owner/requester and status indexes, for the records among
# ARGV[3..] of kind ARGV[2] ('run' or 'approval'). Adding to a set twice is harmless, so
# two replicas migrating at once, or a migration cut short and run again, end the same.
_MIGRATE_1 = (
    _LIB
    + """
for i = 3, #ARGV do
  local id = ARGV[i]
  if ARGV[2] == 'run' then
    local r = redis.call('HMGET', prefix .. 'run:' .. id, 'status', 'owner', 'updated_at')
    local status, owner, updated = text(r[1]), text(r[2]), number(r[3])
    if status and owner then
      local score = redis.call('ZSCORE', prefix .. 'runs', id)
      redis.call('ZADD', prefix .. 'runs:owner-status:' .. status .. ':' .. owner, score, id)
    end
    if updated then redis.call('ZADD', prefix .. 'runs:updated', r[3], id) end
  else
    local a = redis.call('HMGET', prefix .. 'approval:' .. id, 'status', 'requested_by')
    local status, requester = text(a[1]), text(a[2])
    if status and requester then
      local score = redis.call('ZSCORE', prefix .. 'approvals', id)
      approval_status_indexes('ZADD', id, score, status, requester)
    end
  end
end
return 0
"""
)

_SET_SCHEMA = """
if tonumber(redis.call('GET', KEYS[1])) == tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[2])
end
return 0
"""

# Insert approvals, all or none. KEYS: their hashes. Returns the id taken, or nil.
_ADD_APPROVALS = (
    _LIB
    + """
local plan = cjson.decode(ARGV[2])
local id = taken(KEYS, plan.add)
if id then return id end
for i, a in ipairs(plan.add) do add_approval(KEYS[i], a) end
return false
"""
)

# The compare-and-set behind deciding and using an approval. ARGV[2]: one decision.
_UPDATE_APPROVAL = (
    _LIB
    + """
local a = cjson.decode(ARGV[2])
local status = approval_status(KEYS[1])
if not status or not has(a.expect, status) then return 0 end
decide(KEYS[1], a.id, status, a)
return 1
"""
)

# Ids and stream order agree because both are taken in one atomic step. A counter behind
# the stream (reset, or lost while the stream was not) would make every XADD fail, and
# with it every write tool: the append then goes on after the stream's last id.
_APPEND_AUDIT = """
local id = redis.call('INCR', KEYS[1])
local added = redis.pcall('XADD', KEYS[2], '0-' .. id, 'r', ARGV[1])
if type(added) == 'table' and added.err then
  local info = redis.call('XINFO', 'STREAM', KEYS[2])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then
      id = tonumber(string.match(info[i + 1], '-(%d+)$')) + 1
    end
  end
  redis.call('SET', KEYS[1], id)
  redis.call('XADD', KEYS[2], '0-' .. id, 'r', ARGV[1])
end
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
        allow_volatile: Open a Redis whose persistence cannot keep the at-most-once
            promise (see `durability_problems`), with one warning, instead of refusing it.
            In a store URL: `?allow_volatile=true`.
    """

    durable = True

    def __init__(
        self,
        url: str,
        prefix: str = "toolwire:",
        *,
        connect_timeout: float = 2.0,
        timeout: float = 3.0,
        allow_volatile: bool = False,
    ) -> None:
        self.url = redact_url(url)
        self.prefix = prefix
        self.allow_volatile = allow_volatile
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
        # Sent by SHA (EVALSHA), and in full only when Redis does not know them yet.
        lua = (
            _WRITE_RUN,
            _RENEW_LEASE,
            _ADD_APPROVALS,
            _UPDATE_APPROVAL,
            _APPEND_AUDIT,
            _PRUNE_APPROVALS,
            _PRUNE_RUNS,
            _PRUNE_AUDIT,
            _MIGRATE_1,
            _SET_SCHEMA,
            _ADD_COUNT,
        )
        self._scripts = {text: client.register_script(text) for text in lua}
        try:
            await self._check_durability(client)
            with self._errors():
                schema = self._key("schema")
                await client.set(schema, SCHEMA_VERSION, nx=True)
                version = int(await client.get(schema) or 0)
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"Redis at {self.url} (prefix {self.prefix!r}) holds data of a newer "
                    f"toolwire (schema version {version}, this one knows up to "
                    f"{SCHEMA_VERSION}); upgrade toolwire or use another prefix or database"
                )
            if version < SCHEMA_VERSION:
                await self._migrate(version)
            await self._check_audit()
        except BaseException:
            await self.aclose()
            raise

    async def _check_audit(self) -> None:
        """Warn when the audit stream lost entries that retention did not remove: Redis
        cannot refuse an XDEL or a DEL, but the counters show one happened."""
        with self._errors():
            pipe = self._redis().pipeline(transaction=True)
            pipe.xlen(self._key("audit"))
            pipe.get(self._key("audit:last"))
            pipe.get(self._key("audit:pruned"))
            length, last, pruned = await pipe.execute()
        missing = int(last or 0) - int(pruned or 0) - int(length)
        if missing > 0:
            logger.warning(
                "the audit log in Redis at %s (prefix %r) lacks %d records that retention did "
                "not remove: something deleted them (XDEL, XTRIM or DEL); restrict those "
                "commands with an ACL",
                self.url,
                self.prefix,
                missing,
            )

    async def _migrate(self, version: int) -> None:
        """Bring data of layout `version` to `SCHEMA_VERSION` (only 1 -> 2 so far)."""
        for kind, index in (("run", "runs"), ("approval", "approvals")):
            start = 0
            while True:
                with self._errors():
                    ids = await self._redis().zrange(
                        self._key(index), start, start + _PRUNE_BATCH - 1
                    )
                if not ids:
                    break
                await self._eval(_MIGRATE_1, [], [self.prefix, kind, *ids])
                start += len(ids)
        # Only from the version migrated: a newer toolwire may have moved it on meanwhile.
        await self._eval(_SET_SCHEMA, [self._key("schema")], [version, SCHEMA_VERSION])

    async def _check_durability(self, client: aioredis.Redis) -> None:
        """Refuse (or, allowed, warn once) when Redis could lose an acknowledged write."""
        problems = await self._durability_problems(client)
        if not problems:
            return
        what = "; ".join(problems)
        if not self.allow_volatile:
            raise StoreError(
                f"Redis at {self.url} could lose writes toolwire must keep (a lost `used` mark "
                f"lets an approved call run twice): {what}. Set appendonly yes, appendfsync "
                "everysec or always (everysec may lose the last second of writes if the "
                "machine fails; always loses none) and maxmemory-policy noeviction (or a "
                "volatile-* policy), or add allow_volatile=true to the store URL to run anyway"
            )
        key = (self.url, self.prefix)
        if key not in _WARNED:
            _WARNED.add(key)
            logger.warning(
                "Redis at %s could lose writes (%s); allowed by allow_volatile: an approved "
                "call may run twice after a Redis restart",
                self.url,
                what,
            )

    async def _durability_problems(self, client: aioredis.Redis) -> list[str]:
        """What in the server's settings could lose an acknowledged write; [] if nothing."""
        settings: dict[str, str] = {}
        try:
            with self._errors():
                for name in ("appendonly", "appendfsync", "maxmemory-policy"):
                    reply = cast("dict[Any, Any]", await client.config_get(name))
                    settings |= {_str(k): _str(v) for k, v in reply.items()}
        except StoreUnavailable:
            raise
        except StoreError as e:
            # CONFIG renamed or disabled (managed Redis services do this), or denied by ACL.
            return [f"its persistence settings cannot be read ({e}), so they cannot be checked"]
        problems = []
        if settings.get("appendonly") != "yes":
            problems.append(f"appendonly is {settings.get('appendonly', 'unknown')}")
        if settings.get("appendfsync") not in ("always", "everysec"):
            problems.append(f"appendfsync is {settings.get('appendfsync', 'unknown')}")
        policy = settings.get("maxmemory-policy", "unknown")
        # volatile-* policies evict only keys with an expiry: the cache and memory entries,
        # never a run, an approval or the audit log.
        if policy != "noeviction" and not policy.startswith("volatile-"):
            problems.append(f"maxmemory-policy is {policy} (it may evict runs and approvals)")
        return problems

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
        before: tuple[float, str] | None = None,
    ) -> list[_Record]:
        """Up to `limit` records from `index`, newest first, that `keep(record)` accepts;
        with `before`, only those whose (created_at, id) is smaller."""
        found: list[_Record] = []
        top = "+inf"
        if before is not None:
            # Members of one score come in id order (Redis orders ties by member), so the
            # cursor's own score is read whole and cut by id; the rest starts below it.
            score, last_id = repr(float(before[0])), before[1]
            with self._errors():
                tied = cast("list[bytes]", await self._redis().zrangebyscore(index, score, score))
            ids = sorted((i for i in tied if _str(i) < last_id), reverse=True)
            found += [r for r in await self._load(cls, ids) if keep(r)]
            top = f"({score}"
        start, chunk = 0, max(limit, 100)
        while len(found) < limit:
            with self._errors():
                ids = cast(
                    "list[bytes]",
                    await self._redis().zrevrangebyscore(
                        index, top, "-inf", start=start, num=chunk
                    ),
                )
            if not ids:
                break
            found += [r for r in await self._load(cls, ids) if keep(r)]
            start += chunk
        return found[: max(limit, 0)]

    # --- runs -------------------------------------------------------------------------

    async def put_run(self, run: RunRecord, *, approvals: Sequence[ApprovalRecord] = ()) -> None:
        await self._write_run(run, {"decide": [], "add": [_new(a) for a in approvals]}, [])

    async def get_run(self, run_id: str) -> RunRecord | None:
        runs = await self._load(RunRecord, [run_id])
        return runs[0] if runs else None

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
        plan: dict[str, Any] = {
            "expect": list(expect),
            "decide": [_decision(a, wanted) for a, wanted in approvals],
            "add": [_new(a) for a in new_approvals],
        }
        if version is not None:
            plan["version"] = version
        if holder is not None:
            plan["holder"] = holder
        if run.id != run_id:
            run = dataclasses.replace(run, id=run_id)
        decided = [self._key("approval", a.id) for a, _ in approvals]
        return await self._write_run(run, plan, decided)

    async def _write_run(self, run: RunRecord, plan: dict[str, Any], decided: list[str]) -> bool:
        plan |= {
            "id": run.id,
            "score": _score(run.created_at),
            "status": run.status,
            "updated": _score(run.updated_at),
            "fields": _fields(run, skip="version"),
        }
        if run.owner is not None:
            plan["owner"] = run.owner
        keys = [
            self._key("run", run.id),
            *decided,
            *(self._key("approval", a["id"]) for a in plan["add"]),
        ]
        done = await self._eval(_WRITE_RUN, keys, [self.prefix, orjson.dumps(plan)])
        if isinstance(done, list):
            raise StoreConflict(f"approval {_str(done[0])!r} exists already")
        return bool(done)

    async def renew_lease(self, run_id: str, *, holder: str, lease_until: float) -> bool:
        args = [self.prefix, holder, orjson.dumps(lease_until)]
        return bool(await self._eval(_RENEW_LEASE, [self._key("run", run_id)], args))

    async def list_runs(
        self, *, status: RunStatus | None = None, owner: str | None = None, limit: int = 100
    ) -> list[RunRecord]:
        if owner is not None and status is not None:
            index = self._key("runs:owner-status", status, owner)
        elif owner is not None:
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
        keys = [self._key("approval", a.id) for a in approvals]
        plan = {"add": [_new(a) for a in approvals]}
        taken = await self._eval(_ADD_APPROVALS, keys, [self.prefix, orjson.dumps(plan)])
        if taken:
            raise StoreConflict(f"approval {_str(taken)!r} exists already")

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
        before: tuple[float, str] | None = None,
    ) -> list[ApprovalRecord]:
        # The narrowest index: a run's approvals are few, and one key's in one status walk
        # none of another key's (effective status `pending` implies stored `pending`; not
        # so for `expired`, which walks the key's or everyone's history).
        if run_id is not None:
            index = self._key("approvals:run", run_id)
        elif requested_by is not None and status is not None and status != "expired":
            index = self._key("approvals:requester-status", status, requested_by)
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
            before,
        )

    async def update_approval(
        self, approval: ApprovalRecord, *, expect: Sequence[ApprovalStatus]
    ) -> bool:
        if not expect:
            return False
        args = [self.prefix, orjson.dumps(_decision(approval, expect))]
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

    # --- retention --------------------------------------------------------------------

    async def prune(
        self,
        *,
        runs_before: float | None = None,
        approvals_before: float | None = None,
        audit_before: float | None = None,
        now: float,
    ) -> PruneCounts:
        # Approvals first, as in every backend. Candidates come in batches from the indexes
        # by created_at (approvals) and updated_at (runs); each batch's script checks every
        # rule again, atomically, so a record that changed since it was read is kept, and
        # prunes running at once agree.
        approvals = runs = audit = 0
        if approvals_before is not None:
            approvals = await self._prune_index(
                "approvals", _PRUNE_APPROVALS, approvals_before, now
            )
        if runs_before is not None:
            runs = await self._prune_index("runs:updated", _PRUNE_RUNS, runs_before, now)
        if audit_before is not None:
            audit = await self._prune_audit(audit_before)
        return PruneCounts(runs=runs, approvals=approvals, audit=audit)

    async def _prune_index(self, index: str, lua: str, before: float, now: float) -> int:
        deleted = kept = 0
        while True:
            with self._errors():
                ids = cast(
                    "list[bytes]",
                    await self._redis().zrangebyscore(
                        self._key(index), "-inf", f"({before!r}", start=kept, num=_PRUNE_BATCH
                    ),
                )
            if not ids:
                return deleted
            args = [self.prefix, repr(float(before)), repr(float(now)), *ids]
            gone = int(await self._eval(lua, [], args))
            deleted += gone
            kept += len(ids) - gone  # those stay at the front of the index

    async def _prune_audit(self, before: float) -> int:
        deleted = 0
        while True:
            with self._errors():
                entries = cast(
                    "list[tuple[bytes, dict[bytes, bytes]]]",
                    await self._redis().xrange(self._key("audit"), count=_PRUNE_BATCH),
                )
            # The oldest entries up to the first that is not old enough: a prefix.
            cut = None
            for entry_id, values in entries:
                if not orjson.loads(values[b"r"])["time"] < before:
                    cut = int(entry_id.split(b"-")[1])
                    break
            if cut is None and entries:
                cut = int(entries[-1][0].split(b"-")[1]) + 1
            if cut is None:
                return deleted
            keys = [self._key("audit"), self._key("audit:pruned")]
            trimmed = int(await self._eval(_PRUNE_AUDIT, keys, [cut]))
            deleted += trimmed
            if trimmed < _PRUNE_BATCH:
                return deleted

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

    async def add_count(self, key: str, amount: int, ttl: float) -> int:
        ttl_ms = max(1, round(ttl * 1000))
        return int(await self._eval(_ADD_COUNT, [self._key("count", key)], [amount, ttl_ms]))

    async def _put(self, key: str, value: bytes, ttl: float) -> None:
        with self._errors():
            if ttl <= 0:
                await self._redis().delete(key)
            else:
                await self._redis().set(key, value, px=max(1, round(ttl * 1000)))


def _fields(record: RunRecord | ApprovalRecord, skip: str = "") -> list[str]:
    """Field/value pairs for a hash: every value JSON, `null` included."""
    pairs: list[str] = []
    for field in dataclasses.fields(record):
        if field.name != skip:
            pairs += [field.name, orjson.dumps(getattr(record, field.name)).decode()]
    return pairs


def _score(created_at: float) -> str:
    return repr(float(created_at))


def _new(approval: ApprovalRecord) -> dict[str, Any]:
    """A new approval in a script's plan."""
    plan: dict[str, Any] = {
        "id": approval.id,
        "score": _score(approval.created_at),
        "status": approval.status,
        "run_id": approval.run_id,
        "fields": _fields(approval),
    }
    if approval.requested_by is not None:
        plan["requested_by"] = approval.requested_by
    return plan


def _decision(approval: ApprovalRecord, expect: Sequence[ApprovalStatus]) -> dict[str, Any]:
    """An approval's decision in a script's plan, written only from one of `expect`."""
    fields: list[str] = []
    for name in APPROVAL_DECISION_FIELDS:
        fields += [name, orjson.dumps(getattr(approval, name)).decode()]
    return {"id": approval.id, "status": approval.status, "expect": list(expect), "fields": fields}


def _decode(cls: type[_Record], fields: dict[Any, Any]) -> _Record:
    return cls(**{_str(k): orjson.loads(v) for k, v in fields.items()})


def _str(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _password(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.password:
        return parts.password
    return next(iter(parse_qs(parts.query).get("password", [])), None)
