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
the runner execute, `wire` writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolwire.agent.result import RunResult
from toolwire.models import ModelResponse
from toolwire.models.messages import SystemMessage
from toolwire.server.gateway import Gateway
from toolwire.server.http.errors import GatewayError, store_error
from toolwire.server.http.requests import read_json
from toolwire.server.http.responses import dropped_header, json_response
from toolwire.server.keys.access import decide, may_see, may_see_run
from toolwire.server.keys.caller import Caller, authenticate, gateway_of
from toolwire.server.protocols.checks import field_error
from toolwire.server.protocols.responses.items import Input, parse_input
from toolwire.server.protocols.responses.request import ResponsesRequest, parse_responses_request
from toolwire.server.protocols.responses.state import (
    StoredResponse,
    forget,
    load,
    paused_response,
    save,
)
from toolwire.server.protocols.responses.wire import (
    DEFAULT_ECHO,
    CallInfo,
    ResponsesRunWriter,
    ResponsesTurnWriter,
    ResponseWriter,
    new_id,
    response_head,
)
from toolwire.server.session import Answer, Run, RunRequest, Session, Turn, resume, start
from toolwire.store.base import ApprovalRecord, RunRecord, StoreError

__all__ = ["DOOR", "resume_answer", "routes"]

DOOR = "responses"
"""This door's name in a run's state."""


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
        paused = _answering(previous, given)
        answer, writer = await _continue(gateway, caller, req, paused, given)
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
        answer, writer = await _start(gateway, caller, req, previous, given)
    headers = dropped_header(given.dropped_results)
    return await answer.respond(request, headers, _shutdown_event(writer))


def _shutdown_event(writer: ResponseWriter) -> Callable[[str], bytes]:
    """The `response.failed` event that ends a stream a shutdown interrupted."""
    return lambda message: writer.failed(message, code="shutting_down")


async def _start(
    gateway: Gateway,
    caller: Caller,
    req: ResponsesRequest,
    previous: StoredResponse | None,
    given: Input,
) -> tuple[Answer, ResponseWriter]:
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
        out = ResponsesTurnWriter(writer)

        async def keep(response: ModelResponse) -> None:
            assert out.response is not None
            message = response.message
            stored = StoredResponse(
                response=out.response,
                messages=(*conversation, message),
                client_calls=message.tool_calls,
            )
            await save(gateway.store, caller.name, stored, ttl)

        model = gateway.models[req.model]
        messages = (*instructions, *conversation)
        on_done = keep if req.store else None
        return Turn(gateway, model, messages, req.tools, req.settings, out, on_done), writer
    # A client that sends the whole conversation back gets the gateway's own steps
    # restored, as on the chat endpoint; a stored history has them already.
    run = await start(
        gateway,
        ctx,
        RunRequest(
            door=DOOR,
            model=req.model,
            messages=given.messages,
            tools=req.tools,
            settings=req.settings,
            stream=req.stream,
            prefix=(*instructions, *history),
        ),
    )
    session = _answer(
        gateway, run, writer, owner=caller.name, store=req.store, prefix=len(instructions)
    )
    return session, writer


async def _continue(
    gateway: Gateway, caller: Caller, req: ResponsesRequest, paused: StoredResponse, given: Input
) -> tuple[Answer, ResponseWriter]:
    """Decide the approvals of the paused response (`_answering`) and go on with its run."""
    await _ready(gateway)
    try:
        records = {i: await gateway.store.get_approval(i) for i in paused.approvals}
        await _decide_all(gateway, caller, given, records)
        assert paused.run_id is not None
        record = await gateway.store.get_run(paused.run_id)
    except StoreError as exc:
        raise store_error(exc) from None
    not_resumable = GatewayError(
        409,
        f"The run of response {paused.response['id']!r} cannot be resumed here: it "
        "is gone, or was made with a model this gateway no longer routes.",
        code="run_not_resumable",
    )
    if record is None:
        raise not_resumable
    if not may_see_run(caller, record.owner):
        raise GatewayError(
            404,
            f"Run {record.id!r} does not exist.",
            param="previous_response_id",
            code="run_not_found",
        )
    run = await resume(gateway, caller, record, stream=req.stream, not_routed=not_resumable)
    head = response_head(id=new_id("resp"), model=record.model or req.model, echo=req.echo)
    writer = ResponseWriter(head, stream=req.stream)
    calls = _approved_calls(gateway, records)
    session = _answer(
        gateway,
        run,
        writer,
        owner=caller.name,
        store=req.store,
        prefix=paused.run_prefix,
        calls=calls,
    )
    return session, writer


def _answering(previous: StoredResponse | None, given: Input) -> StoredResponse:
    """The paused response the request's approval answers are for, each open request of
    it answered once and nothing else given."""
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
    return previous


async def _decide_all(
    gateway: Gateway,
    caller: Caller,
    given: Input,
    records: Mapping[str, ApprovalRecord | None],
) -> None:
    """Take the decisions of the answers, by the same rules as `/v1/approvals`."""
    now = time.time()
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
                gateway.store,
                record,
                caller,
                approve=answer.approve,
                reason=answer.reason,
                request_id=caller.ctx.metadata.get("request_id"),
                now=now,
            )


def _approved_calls(
    gateway: Gateway, records: Mapping[str, ApprovalRecord | None]
) -> dict[str, CallInfo]:
    """The paused calls as their `mcp_call` items will show them, by call id."""
    calls: dict[str, CallInfo] = {}
    for record in records.values():
        if record is not None:
            shown = gateway.shown_arguments(record.tool, record.arguments)
            calls[record.call_id] = (record.tool, shown, record.id)
    return calls


def _answer(
    gateway: Gateway,
    run: Run,
    writer: ResponseWriter,
    *,
    owner: str | None,
    store: bool,
    prefix: int,
    calls: Mapping[str, CallInfo] | None = None,
) -> Session:
    """A run's response; kept (unless `store` is false) before its last event, so the
    client can continue from it at once."""
    out = ResponsesRunWriter(writer, gateway.shown_arguments, calls)
    remember = run.on_done

    async def on_done(result: RunResult) -> None:
        if remember is not None:
            await remember(result)
        if store:
            assert out.response is not None
            stored = _stored_run(out.response, result, prefix)
            await save(gateway.store, owner, stored, gateway.config.memory_ttl)

    # No waiting in the open stream for decisions: a Responses client sees a call's
    # approval request only as an output item of the finished response, and answers it
    # with mcp_approval_response in its next request.
    return Session(gateway, Run(run.events, run.stream, on_done), out)


async def resume_answer(
    request: Request, gateway: Gateway, caller: Caller, record: RunRecord, *, stream: bool
) -> Response:
    """`POST /v1/runs/{id}/resume` for a run started here: a response object that
    continues the paused response (`previous_response_id`), kept as the next link of
    its chain."""
    try:
        paused = await paused_response(gateway.store, record.id)
        ids = paused.approvals if paused is not None else ()
        records = {i: await gateway.store.get_approval(i) for i in ids}
    except StoreError as exc:
        raise store_error(exc) from None
    not_routed = GatewayError(
        409,
        f"Run {record.id!r} was made with the model {record.model!r}, which this gateway "
        "no longer routes; it cannot be resumed here.",
        code="run_not_resumable",
    )
    run = await resume(gateway, caller, record, stream=stream, not_routed=not_routed)
    # The paused response's request fields carry over; without it (made with
    # store: false) there is nothing to continue from, and nothing is kept.
    echo = {**DEFAULT_ECHO, "store": False}
    if paused is not None:
        echo.update({k: paused.response[k] for k in DEFAULT_ECHO if k in paused.response})
        echo["previous_response_id"] = paused.response["id"]
    head = response_head(id=new_id("resp"), model=record.model or "", echo=echo)
    writer = ResponseWriter(head, stream=stream)
    session = _answer(
        gateway,
        run,
        writer,
        owner=record.owner,
        store=bool(echo["store"]),
        prefix=paused.run_prefix if paused is not None else 0,
        calls=_approved_calls(gateway, records),
    )
    return await session.respond(request, {}, _shutdown_event(writer))


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
