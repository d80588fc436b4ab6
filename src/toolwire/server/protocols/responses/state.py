"""Stored responses: what `GET /v1/responses/{id}` returns and `previous_response_id`
continues.

A response is kept (unless the request said `store: false`) in the store's memory, with
`memory_ttl`, under a key made of its id and a digest of the caller's key name: a caller
can never read, continue or delete another caller's responses, and an id alone opens
nothing. Beside the response object it keeps what a continuation needs: the whole
conversation after it (server tools' steps included, the request's `instructions` left
out, since they do not carry over), the client calls waiting for their outputs, and the
run and approvals waiting for a decision.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from dataclasses import dataclass
from typing import Any, Final

from toolwire.agent.state import message_from_json, message_to_json
from toolwire.models.messages import Message
from toolwire.store.base import Store
from toolwire.tools.call import ToolCall

__all__ = ["StoredResponse", "forget", "load", "paused_response", "save"]

_VERSION: Final = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredResponse:
    """A response as the gateway keeps it."""

    response: dict[str, Any]
    """The response object, exactly as the client got it."""
    messages: tuple[Message, ...]
    """The conversation up to and including this response, without `instructions`."""
    client_calls: tuple[ToolCall, ...] = ()
    """The client's calls this response handed back: the next input answers them."""
    run_id: str | None = None
    """The run paused for approval, when `approvals` is not empty."""
    approvals: tuple[str, ...] = ()
    """The ids of its `mcp_approval_request` items."""
    run_prefix: int = 0
    """How many leading messages of the paused run are `instructions`, not conversation."""

    def to_json(self) -> dict[str, Any]:
        return {
            "version": _VERSION,
            "response": self.response,
            "messages": [message_to_json(m) for m in self.messages],
            "client_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.client_calls
            ],
            "run_id": self.run_id,
            "approvals": list(self.approvals),
            "run_prefix": self.run_prefix,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredResponse:
        return cls(
            response=data["response"],
            messages=tuple(message_from_json(m) for m in data["messages"]),
            client_calls=tuple(
                ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
                for c in data.get("client_calls", ())
            ),
            run_id=data.get("run_id"),
            approvals=tuple(data.get("approvals", ())),
            run_prefix=int(data.get("run_prefix", 0)),
        )


def _key(owner: str | None, response_id: str) -> str:
    return f"responses:{_owner_digest(owner)}:{response_id}"


@functools.lru_cache(maxsize=1024)
def _owner_digest(owner: str | None) -> str:
    """The key name's part of a response key: a few key names, hashed on every request."""
    return hashlib.sha256((owner or "").encode()).hexdigest()[:16]


def _run_key(run_id: str) -> str:
    return f"responses:run:{run_id}"


async def save(store: Store, owner: str | None, stored: StoredResponse, ttl: float) -> None:
    """Keep a response for `ttl` seconds, readable by `owner` (a key name) only."""
    kept = store.remember(_key(owner, stored.response["id"]), stored.to_json(), ttl)
    if stored.run_id is None:
        await kept
        return
    # `POST /v1/runs/{id}/resume` continues the chain from the response that paused. Both
    # at once: a store that group-commits (SQLite) writes them in one statement.
    link = {"owner": owner, "response_id": stored.response["id"]}
    await asyncio.gather(kept, store.remember(_run_key(stored.run_id), link, ttl))


async def paused_response(store: Store, run_id: str) -> StoredResponse | None:
    """The stored response that paused the run, if one was kept."""
    link = await store.recall(_run_key(run_id))
    if link is None or "response_id" not in link:
        return None
    return await load(store, link.get("owner"), link["response_id"])


async def load(store: Store, owner: str | None, response_id: str) -> StoredResponse | None:
    """The response `owner` stored under that id, or `None` (unknown, expired, deleted,
    another caller's, or written by a newer toolwire)."""
    data = await store.recall(_key(owner, response_id))
    if data is None or data.get("version") != _VERSION:
        return None
    return StoredResponse.from_json(data)


async def forget(store: Store, owner: str | None, response_id: str) -> None:
    """Delete a stored response (the store forgets a key remembered with no time left)."""
    await store.remember(_key(owner, response_id), {}, 0)
