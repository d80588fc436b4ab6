"""`POST /v1/chat/completions`: the OpenAI Chat Completions protocol.

- `request`: the body → `ChatRequest` (every client mistake is a 400 naming the field);
- `transcript`: `messages` → toolwire messages, with the pairing rules of tool results;
- `handler`: the door (its reader, writer and direct path, as the session uses them) and
  the route;
- `wire`: the JSON bodies and SSE chunks, and a run's events as them (`ChatRunWriter`).
"""

from toolwire.server.protocols.chat_completions.handler import DOOR, DROPPED_HEADER, routes

__all__ = ["DOOR", "DROPPED_HEADER", "routes"]
