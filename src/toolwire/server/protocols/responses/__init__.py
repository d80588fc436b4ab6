"""`/v1/responses`: the OpenAI Responses protocol.

- `request`: the body → `ResponsesRequest` (every client mistake is a 400 naming the field);
- `items`: `input` → toolwire messages, with the pairing rules of function call outputs;
- `content`: one item's content parts → text (or a user message with image/file parts);
- `state`: stored responses (`GET`, `DELETE`, `previous_response_id`);
- `wire`: the response object, its output items and SSE events, and a model turn's or a
  run's events as them (`ResponsesTurnWriter`, `ResponsesRunWriter`);
- `handler`: the routes.
"""

from toolwire.server.protocols.responses.handler import routes

__all__ = ["routes"]
