"""`/v1/responses`: create, retrieve and delete responses.

`POST /v1/responses` takes one of three paths:

- **Direct** (the gateway has no server tools): one model turn, streamed as it arrives.
- **Agent**: the loop runs server tools inside the gateway (`mcp_call` items) until the
  model answers, calls a client tool (`function_call` items) or a call waits for a
  person (`mcp_approval_request` items, status `completed`, as OpenAI does).
- **Approvals**: `mcp_approval_response` items with `previous_response_id` decide the
  previous response's approvals (the same decision as `POST /v1/approvals/{id}`, by the
  same rules) and continue its paused run; the run's answer is the new response.

Nothing here decides anything about tools: `request` and `items` validate, the agent and
the runner execute, `translate` and `wire` write.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.agent import AgentEvent, RunConflict
from toolwire.agent.result import RunResult
from toolwire.models.messages import AssistantMessage, SystemMessage
from toolwire.server.approvals import decide, may_see, may_see_run, resume_audit, run_context
from toolwire.server.caller import Caller, authenticate, gateway_of
from toolwire.server.errors import GatewayError, store_error
from toolwire.server.gateway import Gateway
from toolwire.server.memory import remember_steps, restore_steps
from toolwire.server.protocols.chat_completions.transcript import field_error
from toolwire.server.protocols.responses.items import Input, parse_input
from toolwire.server.protocols.responses.request import ResponsesRequest, parse_responses_request
from toolwire.server.protocols.responses.state import StoredResponse, forget, load, save
from toolwire.server.protocols.responses.translate import (
    CallInfo,
    agent_response,
    collect,
    model_response,
)
from toolwire.server.protocols.responses.wire import ResponseWriter, new_id, response_head
from toolwire.server.requests import read_json
from toolwire.server.responses import dropped_header, json_response
from toolwire.server.streaming import stream_response, unless_disconnected
from toolwire.store.base import StoreError

__all__ = ["routes"]

Body = tuple[AsyncIterator[bytes], ResponseWriter]


async def _create(request: Request) -> Response:
    caller = authenticate(request)
    gateway = gateway_of(request)
    data = await read_json(request, limit=gateway.config.limits.max_body_bytes)
    req = parse_responses_request(
        data, limits=gateway.config.limits, server_tools=gateway.server_tool_names
    )
    request.state.model = req.model  # for the access log and metrics
    if req.model not in gateway.models:
        raise gateway.unknown_model(req.model)
    previous = None
    if req.previous_response_id is not None:
        previous = await _previous(gateway, caller, req.previous_response_id)
    given = parse_input(
        req.input,
        waiting=previous.client_calls if previous is not None else (),
        strict_tool_results=gateway.config.strict_tool_results,
        dialect=gateway.config.dialect,
    )
    if given.answers:
        body, writer = await _continue(gateway, caller, req, previous, given)
    elif previous is not None and previous.approvals:
        raise GatewayError(
            400,
            f"The previous response {previous.response['id']!r} waits for a decision on "
            f"approval request(s) {', '.join(previous.approvals)}; answer each with an "
            '{"type": "mcp_approval_response", "approval_request_id": ..., "approve": '
            "true | false} input item before sending new input.",
            param="input",
            code="approval_required",
        )
    else:
        body, writer = await _start(gateway, caller, req, previous, given)
    headers = dropped_header(given.dropped_results)
    if req.stream:
        return await stream_response(
            body, headers, request, on_shutdown=lambda m: writer.failed(m, code="shutting_down")
        )
    payload = await unless_disconnected(request, collect(body, writer))
    return json_response(payload, headers=headers)


async def _start(
    gateway: Gateway,
    caller: Caller,
    req: ResponsesRequest,
    previous: StoredResponse | None,
    given: Input,
) -> Body:
    """A new model turn or agent run over the previous conversation and the input."""
    ctx = caller.ctx
    ttl = gateway.config.memory_ttl
    instructions = (SystemMessage(content=req.instructions),) if req.instructions else ()
    history = previous.messages if previous is not None else ()
    head = response_head(id=new_id("resp"), model=req.model, echo=req.echo)
    writer = ResponseWriter(head, stream=req.stream)
    if not gateway.server_tool_names:
        if req.store:
            await _ready(gateway)
        conversation = (*history, *given.messages)

        async def on_turn(response: dict[str, Any], message: AssistantMessage) -> None:
            if req.store:
                stored = StoredResponse(
                    response=response,
                    messages=(*conversation, message),
                    client_calls=message.tool_calls,
                )
                await save(gateway.store, caller.name, stored, ttl)

        turn = model_response(
            gateway.models[req.model],
            (*instructions, *conversation),
            req.tools,
            req.settings,
            writer,
            stream=req.stream,
            redact=gateway.redact,
            on_done=on_turn,
        )
        return turn, writer
    await _ready(gateway)
    try:
        # A client that sends the whole conversation back gets the gateway's own steps
        # restored, as on the chat endpoint; a stored history has them already.
        new = await restore_steps(gateway.store, ctx.principal, given.messages)
    except StoreError as exc:
        raise store_error(exc) from None
    messages = (*instructions, *history, *new)
    events = gateway.agents[req.model].run_stream(
        messages,
        ctx,
        stream=req.stream,
        settings=req.settings,
        client_tools=req.tools,
        model_id=req.model,
        unknown_calls_to_client=gateway.config.dialect == "tool_request",
    )

    async def on_run(response: dict[str, Any], result: RunResult) -> None:
        await remember_steps(gateway.store, ctx.principal, result, len(messages), ttl)
        if req.store:
            stored = _stored_run(response, result, len(instructions))
            await save(gateway.store, caller.name, stored, ttl)

    body = agent_response(
        events, writer, redact=gateway.redact, shown=gateway.shown_arguments, on_done=on_run
    )
    return body, writer


async def _continue(
    gateway: Gateway,
    caller: Caller,
    req: ResponsesRequest,
    previous: StoredResponse | None,
    given: Input,
) -> Body:
    """Decide the previous response's approvals and go on with its paused run."""
    first = given.answers[0]
    if previous is None:
        raise GatewayError(
            400,
            f"{first.where} is an mcp_approval_response: it answers an approval request of "
            "an earlier response, so send it with 'previous_response_id' set to that "
            "response's id.",
            param="previous_response_id",
            code="missing_previous_response",
        )
    if given.first_other is not None:
        raise field_error(
            given.first_other,
            "a request answering approval requests carries only mcp_approval_response "
            "items: the paused run goes on from where it stopped. Send new input in the "
            "next request, with previous_response_id set to the response this one returns.",
            code="unexpected_input_item",
        )
    seen: set[str] = set()
    for answer in given.answers:
        if answer.approval_id not in previous.approvals or answer.approval_id in seen:
            listed = ", ".join(previous.approvals) or "none"
            raise field_error(
                f"{answer.where}.approval_request_id",
                f"{answer.approval_id!r} is not an open approval request of the previous "
                f"response {previous.response['id']!r} (its requests: {listed}); answer "
                "each of them once.",
                code="unknown_approval_request",
            )
        seen.add(answer.approval_id)
    assert previous.run_id is not None
    await _ready(gateway)
    store = gateway.store
    ctx = caller.ctx
    calls: dict[str, CallInfo] = {}
    try:
        now = time.time()
        records = {i: await store.get_approval(i) for i in previous.approvals}
        for record in records.values():
            if record is not None:
                shown = gateway.shown_arguments(record.tool, record.arguments)
                calls[record.call_id] = (record.tool, shown, record.id)
        for answer in given.answers:
            record = records[answer.approval_id]
            if record is None or not may_see(caller, record):
                raise GatewayError(
                    404,
                    f"Approval {answer.approval_id!r} does not exist (any more).",
                    param=f"{answer.where}.approval_request_id",
                    code="approval_not_found",
                )
            # A decision taken the same way already (through /v1/approvals) stands.
            if record.effective_status(now) != ("approved" if answer.approve else "denied"):
                await decide(
                    store,
                    record,
                    caller,
                    approve=answer.approve,
                    reason=answer.reason,
                    request_id=ctx.metadata.get("request_id"),
                    now=now,
                )
        run = await store.get_run(previous.run_id)
    except StoreError as exc:
        raise store_error(exc) from None
    agent = gateway.agents.get(run.model or "") if run is not None else None
    if run is None or agent is None:
        raise GatewayError(
            409,
            f"The run of response {previous.response['id']!r} cannot be resumed here: it "
            "is gone, or was made with a model this gateway no longer routes.",
            code="run_not_resumable",
        )
    if not may_see_run(caller, run.owner):
        raise GatewayError(
            404,
            f"Run {run.id!r} does not exist.",
            param="previous_response_id",
            code="run_not_found",
        )
    # The run's tools run for whoever started it, with that key's scopes.
    ctx = run_context(gateway.keyring, caller, run.owner)
    try:
        await store.append_audit(resume_audit(run, caller, ctx))
    except StoreError as exc:
        raise store_error(exc) from None
    events = agent.resume_stream(run.id, None, ctx, stream=req.stream)
    try:
        # The claim and the decision checks happen before the first event.
        head_event = await anext(events)
    except RunConflict as exc:
        raise GatewayError(409, str(exc), code="run_not_resumable") from None
    except StoreError as exc:
        raise store_error(exc) from None

    async def replay() -> AsyncGenerator[AgentEvent, None]:
        async with contextlib.aclosing(events):
            yield head_event
            async for event in events:
                yield event

    head = response_head(id=new_id("resp"), model=run.model or req.model, echo=req.echo)
    writer = ResponseWriter(head, stream=req.stream)
    prefix = previous.run_prefix

    async def on_run(response: dict[str, Any], result: RunResult) -> None:
        if req.store:
            stored = _stored_run(response, result, prefix)
            await save(gateway.store, caller.name, stored, gateway.config.memory_ttl)

    body = agent_response(
        replay(),
        writer,
        redact=gateway.redact,
        shown=gateway.shown_arguments,
        on_done=on_run,
        calls=calls,
    )
    return body, writer


def _stored_run(response: dict[str, Any], result: RunResult, prefix: int) -> StoredResponse:
    """What a run's response keeps; `prefix` leading messages are its `instructions`."""
    paused = result.status == "awaiting_approval"
    return StoredResponse(
        response=response,
        messages=tuple(result.messages[prefix:]),
        client_calls=tuple(result.client_calls) if result.status == "client_tool_calls" else (),
        run_id=result.run_id if paused else None,
        approvals=tuple(a.id for a in result.approvals) if paused else (),
        run_prefix=prefix,
    )


# --- stored responses ---------------------------------------------------------------------


async def _previous(gateway: Gateway, caller: Caller, response_id: str) -> StoredResponse:
    await _ready(gateway)
    try:
        stored = await load(gateway.store, caller.name, response_id)
    except StoreError as exc:
        raise store_error(exc) from None
    if stored is None:
        raise GatewayError(
            404,
            f"Previous response with id {response_id!r} not found: it expired, was "
            "deleted, was made with store: false, or belongs to another key.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    return stored


async def _stored(request: Request) -> tuple[Gateway, Caller, str, StoredResponse]:
    caller = authenticate(request)
    gateway = gateway_of(request)
    ident: str = request.path_params["id"]
    await _ready(gateway)
    try:
        stored = await load(gateway.store, caller.name, ident)
    except StoreError as exc:
        raise store_error(exc) from None
    if stored is None:
        raise GatewayError(404, f"Response with id {ident!r} not found.", code="response_not_found")
    return gateway, caller, ident, stored


async def _get(request: Request) -> Response:
    _, _, _, stored = await _stored(request)
    return json_response(stored.response)


async def _delete(request: Request) -> Response:
    gateway, caller, ident, _ = await _stored(request)
    try:
        await forget(gateway.store, caller.name, ident)
    except StoreError as exc:
        raise store_error(exc) from None
    return json_response({"id": ident, "object": "response.deleted", "deleted": True})


async def _ready(gateway: Gateway) -> None:
    try:
        await gateway.ready()
    except StoreError as exc:
        raise store_error(exc) from None


routes = [
    Route("/v1/responses", _create, methods=["POST"]),
    Route("/v1/responses/{id}", _get, methods=["GET"]),
    Route("/v1/responses/{id}", _delete, methods=["DELETE"]),
]
