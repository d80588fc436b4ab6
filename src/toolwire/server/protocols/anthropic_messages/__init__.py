"""`POST /v1/messages`: the Anthropic Messages protocol (and `/v1/messages/count_tokens`).

- `request`: the body → `MessagesRequest` (every client mistake is a 400 naming the field);
- `transcript`: `system` and `messages` → toolwire messages, with the pairing rules of
  tool results;
- `handler`: the door (its reader, writer and direct path, as the session uses them),
  the routes and Anthropic-shaped errors;
- `wire`: the message JSON and the SSE events, and a run's events as them
  (`MessagesRunWriter`);
- `tokens`: the estimate `count_tokens` answers with.
"""

from toolwire.server.protocols.anthropic_messages.handler import (
    DOOR,
    IGNORED_HEADER,
    count_tokens,
    routes,
)

__all__ = ["DOOR", "IGNORED_HEADER", "count_tokens", "routes"]
