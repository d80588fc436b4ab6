"""The gateway's memory of its own steps between a client's requests.

When one model turn calls a server tool and a client tool, the gateway runs the server
tool and hands the client call back. The client's transcript then holds only the client
call: its next request would show the model a conversation without the server call and
its result. So the gateway remembers the steps it took (in the store, keyed by the
caller and the client call ids it returned) and puts them back where they belong when
the client sends the results of those calls.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from toolwire.agent.result import RunResult
from toolwire.agent.state import message_from_json, message_to_json
from toolwire.models.messages import AssistantMessage, Message, ToolMessage
from toolwire.store.base import Store

__all__ = ["remember_steps", "restore_steps"]


def _key(principal: str | None, call_id: str) -> str:
    owner = hashlib.sha256((principal or "").encode()).hexdigest()[:16]
    return f"steps:{owner}:{call_id}"


async def remember_steps(
    store: Store, principal: str | None, result: RunResult, first: int, ttl: float
) -> None:
    """Keep the run's own messages (from index `first`) when it handed client calls back
    after server tools ran."""
    if result.status != "client_tool_calls" or not result.client_calls:
        return
    steps = result.messages[first:]
    if not any(isinstance(m, ToolMessage) for m in steps):
        return  # no server tool ran: the client's transcript misses nothing
    await store.remember(
        _key(principal, result.client_calls[0].id),
        {
            "client_calls": [c.id for c in result.client_calls],
            "messages": [message_to_json(m) for m in steps],
        },
        ttl,
    )


async def restore_steps(
    store: Store, principal: str | None, messages: Sequence[Message]
) -> tuple[Message, ...]:
    """`messages` with each assistant message the gateway answered with after its own
    steps replaced by those steps (the server calls, their results, the whole turn)."""
    out: list[Message] = []
    changed = False
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            ids = [c.id for c in message.tool_calls]
            remembered = await store.recall(_key(principal, ids[0]))
            if remembered is not None and remembered.get("client_calls") == ids:
                out.extend(message_from_json(m) for m in remembered["messages"])
                changed = True
                continue
        out.append(message)
    return tuple(out) if changed else tuple(messages)
