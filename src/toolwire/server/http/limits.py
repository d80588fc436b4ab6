"""What requests in flight may hold: request slots, the memory of their bodies, and the
long-lived `GET /mcp` streams, each against its own budget.

- **Slots** (`limits.max_in_flight`): requests at once, streams included while they last.
  `GET /mcp` streams are not counted here but in `Streams` (`mcp.max_streams`, per key
  too): 1,024 idle ones used to take every slot and lock the model traffic out.
- **Bytes** (`limits.max_in_flight_bytes`, and per gateway key): the memory bodies hold,
  charged as their bytes arrive, not as a `Content-Length` declares them (64 uploads
  declaring 4 MiB and stalling used to fill the budget without sending a byte): what a
  JSON body becomes once parsed and sent on (`body_cost`: five times its bytes, more for
  many small values: `[[],[],…]` parses to 21 times its bytes). Held until the request
  ends, since the parsed body lives that long.
- **Deadlines**: a body must arrive within `limits.body_timeout`; past half of either
  budget the deadline of every body still arriving shrinks, down to
  `limits.min_body_timeout` when full, so stalled uploads cannot hold what is left.

Past a limit a request is refused at once — `503` (or `429` for one key's share) with
`Retry-After`, in the error shape of the route's protocol (OpenAI's, Anthropic's,
JSON-RPC on `/mcp`) — before its body is read when that is known, else while it is read.
The probes are never refused; `/readyz` reports a full budget (`Budget.full`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

import orjson
from starlette.types import Message, Receive, Scope, Send

from toolwire.server.configuration.config import LimitsConfig, McpEndpointConfig
from toolwire.server.http.errors import GatewayError
from toolwire.server.keys.keyring import Keyring, presented_key

__all__ = [
    "HEADERS",
    "Budget",
    "InFlightLimit",
    "Streams",
    "Ticket",
    "body_cost",
    "refusal_body",
    "send_refusal",
]

_EXEMPT: Final = frozenset({"/healthz", "/readyz", "/metrics"})
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})
_PER_VALUE: Final = 64
"""Bytes of Python objects one JSON value may become: an empty list is 56 plus its 8-byte
slot in the parent, a short string 59 (measured: `[[],[],…]` parses to 21 times its
bytes, `[{},{},…]` to 24)."""
_PER_BYTE: Final = 5
"""What one byte of a body holds by the time its request is served: the bytes received,
joined into one, the parsed text, the request sent upstream and its buffers (measured:
200 concurrent 3.9 MB bodies held about 19 MB each). Charged as the bytes arrive, so
that bodies which could not be served once parsed are refused early, not read in
vain."""
_FULL: Final = 0.95
"""The share of the bytes budget at which `/readyz` reports it full."""
_SQUEEZE_FROM: Final = 0.5
_SQUEEZE_STEPS: Final = 20

MCP_PATH: Final = "/mcp"


def body_cost(chunk: bytes) -> int:
    """What `chunk` of a JSON body holds once received, parsed and sent on.

    `_PER_BYTE` per byte, and `_PER_VALUE` per value it may hold: every value but the
    first follows a `,` or opens with `[`/`{`, so counting those bytes bounds the values
    at C speed (about a millisecond for 4 MiB) without parsing. Commas inside strings
    are counted too, which only errs towards caution.
    """
    values = chunk.count(b",") + chunk.count(b"[") + chunk.count(b"{")
    return _PER_BYTE * len(chunk) + _PER_VALUE * values


class Streams:
    """`GET /mcp` streams open at once: in all and per gateway key."""

    def __init__(self, total: int, per_key: int) -> None:
        self.total = total
        self.per_key = per_key
        self.open = 0
        self._by_key: dict[str, int] = {}

    @property
    def full(self) -> bool:
        return self.open >= self.total

    def acquire(self, key: str | None) -> int | None:
        """Take a stream for `key` (`None`: no per-key bound); `None` when taken, else the
        HTTP status of the refusal (429: the key's share is used, 503: all are)."""
        if key is not None and self._by_key.get(key, 0) >= self.per_key:
            return 429
        if self.open >= self.total:
            return 503
        self.open += 1
        if key is not None:
            self._by_key[key] = self._by_key.get(key, 0) + 1
        return None

    def release(self, key: str | None) -> None:
        self.open -= 1
        if key is not None:
            left = self._by_key[key] - 1
            if left:
                self._by_key[key] = left
            else:
                del self._by_key[key]


class Budget:
    """What the requests in flight hold, against the limits (one per app).

    Args:
        limits: The `limits` section.
        mcp: The `mcp` section (its stream bounds).
    """

    def __init__(self, limits: LimitsConfig, mcp: McpEndpointConfig) -> None:
        self.max_requests = limits.max_in_flight
        self.max_bytes = limits.max_in_flight_bytes
        self.max_key_bytes = limits.key_bytes
        self.body_timeout = limits.body_timeout
        self.min_body_timeout = min(limits.min_body_timeout, limits.body_timeout)
        self.requests = 0
        self.bytes = 0
        self.key_bytes: dict[str, int] = {}
        self.streams = Streams(mcp.max_streams, mcp.max_streams_per_key)
        self._arriving: set[Ticket] = set()
        self._step = 0

    def pressure(self) -> float:
        """The fuller of the two budgets, 0 to 1."""
        return max(self.requests / self.max_requests, self.bytes / self.max_bytes)

    def full(self) -> dict[str, bool]:
        """Which budgets leave no room for model traffic (`requests`, `request_bytes`) and
        whether the `GET /mcp` streams are all taken (`mcp_streams`)."""
        return {
            "requests": self.requests >= self.max_requests,
            "request_bytes": self.bytes >= self.max_bytes * _FULL,
            "mcp_streams": self.streams.full,
        }

    def deadline(self, start: float) -> float:
        """When a body whose request began at `start` (loop time) must have arrived."""
        pressure = self.pressure()
        if pressure <= _SQUEEZE_FROM:
            return start + self.body_timeout
        shrunk = self.body_timeout * (1 - pressure) / (1 - _SQUEEZE_FROM)
        return start + max(self.min_body_timeout, shrunk)

    def _squeeze(self) -> None:
        # Bring the deadlines of bodies still arriving forward each time the pressure
        # rises a step: a stalled upload waiting on its old deadline would hold its slot.
        step = int(self.pressure() * _SQUEEZE_STEPS)
        rising = step > self._step
        self._step = step
        if not rising or step <= _SQUEEZE_FROM * _SQUEEZE_STEPS:
            return
        for ticket in self._arriving:
            ticket.tighten()


class Ticket:
    """One request's share of the budget."""

    __slots__ = (
        "arriving",
        "budget",
        "expired",
        "held",
        "key",
        "loop",
        "refused",
        "start",
        "started",
        "timer",
        "waiter",
    )

    def __init__(self, budget: Budget, key: str | None) -> None:
        self.budget = budget
        self.key = key
        self.held = 0
        self.loop = asyncio.get_running_loop()
        self.start = self.loop.time()
        self.arriving = True
        # One timer for the whole body, armed at its first read: a body that is in the
        # server's buffer already (nearly every one) is read without waiting, and an
        # `asyncio.timeout` around each read cost 6% of a request's instructions.
        self.timer: asyncio.TimerHandle | None = None
        self.expired = False
        self.waiter: asyncio.Task[Any] | None = None  # the task waiting for the body
        self.refused: GatewayError | None = None
        self.started = False
        budget.requests += 1

    def charge(self, size: int) -> None:
        budget = self.budget
        if budget.bytes + size > budget.max_bytes:
            raise self._refuse(_overloaded())
        if self.key is not None and budget.key_bytes.get(self.key, 0) + size > budget.max_key_bytes:
            raise self._refuse(_key_share(budget.max_key_bytes))
        budget.bytes += size
        self.held += size
        if self.key is not None:
            budget.key_bytes[self.key] = budget.key_bytes.get(self.key, 0) + size
        budget._squeeze()

    def tighten(self) -> None:
        timer = self.timer
        if timer is not None:
            deadline = self.budget.deadline(self.start)
            if deadline < timer.when():
                timer.cancel()
                self.timer = self.loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        # The body is late: the read waiting for it (if one is) ends in the refusal,
        # else the next read does.
        self.timer = None
        self.expired = True
        if self.waiter is not None:
            self.waiter.cancel()

    def _cancelled_by_deadline(self, task: asyncio.Task[Any], cancelling: int) -> bool:
        # Ours when the deadline passed and nothing else cancelled the task too (as
        # `asyncio.timeout` tells its own cancellation from others').
        return self.expired and task.uncancel() <= cancelling

    def done_arriving(self) -> None:
        self.arriving = False
        self.budget._arriving.discard(self)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def release(self) -> None:
        budget = self.budget
        budget.requests -= 1
        budget.bytes -= self.held
        if self.key is not None and self.held:
            left = budget.key_bytes[self.key] - self.held
            if left:
                budget.key_bytes[self.key] = left
            else:
                del budget.key_bytes[self.key]
        self.held = 0
        self.done_arriving()
        budget._squeeze()

    def _refuse(self, error: GatewayError) -> GatewayError:
        # The app's layer answers with this refusal, in the route's shape, in place of
        # whatever the app makes of this exception.
        self.refused = error
        return error

    def metered(self, receive: Receive) -> Receive:
        """`receive`, with the body's bytes charged as they arrive and its deadline kept:
        past either, it raises the refusal (`refused`) the layer answers with."""
        budget = self.budget

        async def metered_receive() -> Message:
            if not self.arriving:
                return await receive()
            if self.expired:
                raise self._refuse(_body_timeout())
            if self.timer is None:
                budget._arriving.add(self)
                self.timer = self.loop.call_at(budget.deadline(self.start), self._expire)
            task = asyncio.current_task()
            assert task is not None
            cancelling = task.cancelling()
            self.waiter = task
            try:
                message = await receive()
            except asyncio.CancelledError:
                if self._cancelled_by_deadline(task, cancelling):
                    raise self._refuse(_body_timeout()) from None
                raise
            finally:
                self.waiter = None
            if message["type"] != "http.request":
                self.done_arriving()
                return message
            chunk = message.get("body", b"")
            if chunk:
                self.charge(body_cost(chunk))
            if not message.get("more_body", False):
                self.done_arriving()
            return message

        return metered_receive


class InFlightLimit:
    """Requests and the memory of their bodies held to the budget (the app's layer,
    `server.dispatch`, asks it for each request's `Ticket`).

    The layer admits a request (`admit`), reads its body through `Ticket.metered`, drops
    the app's answer to a refusal raised there (`Ticket.refused`, unless the answer had
    started) and sends the refusal in its place (`send_refusal`), and releases the ticket
    when the request ends.

    Args:
        budget: The app's budget (`app.state.budget`, which `/readyz` reads).
        keyring: The gateway keys, for the per-key share (the key is looked up again, not
            trusted: an unknown one shares nothing but is refused by the route).
    """

    def __init__(self, *, budget: Budget, keyring: Keyring) -> None:
        self.budget = budget
        self.keyring = keyring

    @staticmethod
    def exempt(scope: Scope) -> bool:
        """Whether the request is not counted: the probes, `/metrics`, and `GET /mcp`
        streams (bounded by `Streams`, in the MCP endpoint)."""
        return scope["path"] in _EXEMPT or _is_mcp_stream(scope)

    def admit(self, scope: Scope, headers: Mapping[str, str]) -> Ticket | GatewayError:
        """The request's ticket, or the refusal to answer it with.

        Args:
            headers: Its `authorization`, `x-api-key` and `content-length` headers (the
                first of each, as every reader of the key takes them).
        """
        key = self._key(scope, headers)
        refusal = self._admit(scope, key, headers)
        if refusal is not None:
            return refusal
        return Ticket(self.budget, key)

    def _key(self, scope: Scope, headers: Mapping[str, str]) -> str | None:
        if not self.keyring.enabled:
            return None  # an open gateway's callers are one principal: no share to keep
        token = presented_key(headers.get("authorization"), headers.get("x-api-key"))
        key = self.keyring.key_of(scope, token)
        return key.name if key is not None else None

    def _admit(
        self, scope: Scope, key: str | None, headers: Mapping[str, str]
    ) -> GatewayError | None:
        budget = self.budget
        if budget.requests >= budget.max_requests:
            return _overloaded()
        # A declared length is not charged (it costs nothing to declare 4 MiB and send
        # nothing), but a body that would not fit once it has arrived is refused before
        # a byte of it is read, rather than read in vain.
        needs = _declared(scope, headers) * _PER_BYTE
        if budget.bytes + needs > budget.max_bytes:
            return _overloaded()
        if key is not None and budget.key_bytes.get(key, 0) + needs > budget.max_key_bytes:
            return _key_share(budget.max_key_bytes)
        return None


def _is_mcp_stream(scope: Scope) -> bool:
    return scope["path"] == MCP_PATH and scope.get("method") == "GET"


HEADERS: Final = frozenset({b"authorization", b"x-api-key", b"content-length"})
"""The request headers `InFlightLimit.admit` reads."""


def _declared(scope: Scope, headers: Mapping[str, str]) -> int:
    if scope.get("method") not in _BODY_METHODS:
        return 0
    value = headers.get("content-length")
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0  # the route answers 400


def _overloaded() -> GatewayError:
    return GatewayError(
        503,
        "The gateway is at its limit of requests in flight; retry in a moment "
        "(limits.max_in_flight, limits.max_in_flight_bytes).",
        type="server_error",
        code="overloaded",
        headers={"Retry-After": "1"},
    )


def _key_share(limit: int) -> GatewayError:
    return GatewayError(
        429,
        f"This key's requests in flight hold the most request memory one key may "
        f"({limit} bytes, limits.max_in_flight_bytes_per_key); retry when some have ended.",
        type="rate_limit_error",
        code="rate_limit_exceeded",
        headers={"Retry-After": "1"},
    )


def _body_timeout() -> GatewayError:
    return GatewayError(
        408,
        "The request body did not arrive in time (limits.body_timeout, shorter while the "
        "gateway is busy); send it at once.",
        code="request_timeout",
        headers={"Connection": "close"},
    )


# The JSON-RPC error codes `/mcp` answers with (those of the MCP SDK's transport).
JSONRPC_INVALID_REQUEST: Final = -32600
JSONRPC_INTERNAL_ERROR: Final = -32603


def refusal_body(path: str, error: GatewayError) -> dict[str, Any]:
    """`error` in the shape of the protocol served at `path`."""
    if path == MCP_PATH:
        code = JSONRPC_INTERNAL_ERROR if error.status >= 429 else JSONRPC_INVALID_REQUEST
        return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": error.message}}
    if path.startswith("/v1/messages"):
        kind = {503: "overloaded_error", 429: "rate_limit_error"}.get(
            error.status, "invalid_request_error"
        )
        return {"type": "error", "error": {"type": kind, "message": error.message}}
    return error.body()


async def send_refusal(scope: Scope, send: Send, error: GatewayError) -> None:
    """Answer with `error` in the route's protocol shape."""
    data = orjson.dumps(refusal_body(scope["path"], error))
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
    ]
    headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
