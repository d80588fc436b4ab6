"""`POST /v1/chat/completions`: the OpenAI Chat Completions protocol.

- `request`: the body → `ChatRequest` (every client mistake is a 400 naming the field);
- `transcript`: `messages` → toolwire messages, with the pairing rules of tool results;
- `handler`: the route: the direct path (one model turn) or the agent path;
- `run_writer`: a run's events → chunks or one whole response (`toolwire` extension);
- `wire`: the JSON bodies and SSE chunks.
"""

from toolwire.server.protocols.chat_completions.handler import (
    DROPPED_HEADER,
    chat_completions,
    routes,
)

__all__ = ["DROPPED_HEADER", "chat_completions", "routes"]
