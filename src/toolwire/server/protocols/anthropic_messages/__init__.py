"""`POST /v1/messages`: the Anthropic Messages protocol (and `/v1/messages/count_tokens`).

- `request`: the body → `MessagesRequest` (every client mistake is a 400 naming the field);
- `transcript`: `system` and `messages` → toolwire messages, with the pairing rules of
  tool results;
- `handler`: the routes: the direct path (one model turn) or the agent path, and
  Anthropic-shaped errors;
- `run_writer`: a run's events → one message, streamed or whole (`toolwire` extension);
- `wire`: the message JSON and the SSE events;
- `tokens`: the estimate `count_tokens` answers with.
"""

from toolwire.server.protocols.anthropic_messages.handler import (
    IGNORED_HEADER,
    count_tokens,
    messages,
    routes,
)

__all__ = ["IGNORED_HEADER", "count_tokens", "messages", "routes"]
