"""The app's one ASGI layer: what every HTTP request passes on its way to its route and
back, and the way to the route.

Starlette stacked a layer per concern: its own error middleware, toolwire's four
(observation, in-flight limits, per-key limits, the JSON 500), its exception middleware,
the router, and the route's own exception wrapper. Every message of every answer went
through a wrapper of `send` in each. `Layer` does the same work in the same order, with
one wrapper of `send` on the app's side (`_serve`) and one on the server's (`__call__`):

1. **server errors** (what Starlette's `ServerErrorMiddleware` did): an exception that
   escapes everything before the answer started gets a plain-text `500`, and is
   re-raised to the server;
2. **observation** (`observability.metrics.Observe`): the request's id
   (`X-Request-Id`), its metrics, trace span and access log line;
3. **in-flight limits** (`http.limits.InFlightLimit`): the request's slot and its
   body's bytes, a refusal in the door's shape in place of the app's answer;
4. **per-key limits** (`keys.quotas.KeyLimits`): the key's requests per minute, tokens
   and requests at once; the `x-ratelimit-*` headers of the answer;
5. **failures**: an exception one of the app's `exception_handlers` answers (what
   Starlette's exception middleware and each route's wrapper did), else a JSON 500 in
   the door's shape (`http.door_errors.answer_failure`);
6. **dispatch**: a request for one of the `direct` routes (the hot `POST` doors) goes
   straight to its endpoint when the router would pick that route for it; every other
   request goes through Starlette's router.

The request's headers are read once, for the request id and the in-flight limits.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Collection, Mapping
from typing import Any, Final

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Match, Route, Router
from starlette.types import ASGIApp, ExceptionHandler, Message, Receive, Scope, Send

from toolwire import tracing
from toolwire.server.http.door_errors import answer_failure
from toolwire.server.http.errors import GatewayError
from toolwire.server.http.limits import HEADERS, InFlightLimit, Ticket, send_refusal
from toolwire.server.http.request_id import assign_request_id
from toolwire.server.http.requests import METERED
from toolwire.server.keys.quotas import Admitted, KeyLimits
from toolwire.server.observability.metrics import Observe

__all__ = ["GatewayApp", "Layer"]

_START: Final = "http.response.start"
_BODY: Final = "http.response.body"
_EVENT_STREAM: Final = b"text/event-stream"


class GatewayApp(Starlette):
    """A Starlette app whose middleware is one `Layer` around the router, in place of
    Starlette's `ServerErrorMiddleware` and `ExceptionMiddleware` (the layer does their
    work). Middleware added with `add_middleware` wraps the layer.

    Args:
        observe: Request ids, metrics and the access log.
        in_flight: The in-flight budget.
        key_limits: The per-key request limits.
        direct: `(method, path)` of the routes dispatched without the router.
        starlette: `Starlette`'s own arguments (`debug` and a handler of `500` or
            `Exception` are not supported: the layer answers those itself).
    """

    def __init__(
        self,
        *,
        observe: Observe,
        in_flight: InFlightLimit,
        key_limits: KeyLimits,
        direct: Collection[tuple[str, str]] = (),
        **starlette: Any,
    ) -> None:
        super().__init__(**starlette)
        self._layer = (observe, in_flight, key_limits, tuple(direct))

    def build_middleware_stack(self) -> ASGIApp:
        if self.debug or any(k in (500, Exception) for k in self.exception_handlers):
            raise ValueError("the gateway's layer answers server errors itself")
        observe, in_flight, key_limits, direct = self._layer
        app: ASGIApp = Layer(
            self.router,
            self.exception_handlers,
            observe=observe,
            in_flight=in_flight,
            key_limits=key_limits,
            direct=direct,
        )
        for cls, args, kwargs in reversed(self.user_middleware):
            app = cls(app, *args, **kwargs)
        return app


class Layer:
    """The ASGI layer between the server and the router (see the module's docstring).

    Args:
        router: The app's router.
        handlers: The app's exception handlers, by exception class or status code.
        direct: `(method, path)` of the routes to dispatch without the router.
    """

    def __init__(
        self,
        router: Router,
        handlers: Mapping[Any, ExceptionHandler],
        *,
        observe: Observe,
        in_flight: InFlightLimit,
        key_limits: KeyLimits,
        direct: Collection[tuple[str, str]] = (),
    ) -> None:
        self.router = router
        self.observe = observe
        self.in_flight = in_flight
        self.key_limits = key_limits
        # What any other scope (`lifespan`; `websocket`, which no route serves) passes, as
        # it did in Starlette's own stack; its handlers are the ones the routes use.
        self.other = ExceptionMiddleware(router, handlers=handlers)
        # (by class, by status; a handler takes a `Request` or a `WebSocket`)
        self.handlers: tuple[Mapping[Any, Any], Mapping[int, Any]] = (
            self.other._exception_handlers,
            self.other._status_handlers,
        )
        self.direct_paths = tuple(direct)
        self._direct: dict[tuple[str, str], Route] = {}
        self._direct_for = -1  # the number of routes `_direct` was found among

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.other(scope, receive, send)
            return
        observe = self.observe
        started = time.perf_counter()
        given: bytes | None = None
        headers: dict[str, str] = {}
        for name, value in scope.get("headers", ()):
            if name == b"x-request-id":
                if given is None:
                    given = value
            elif name in HEADERS:
                headers.setdefault(name.decode("latin-1"), value.decode("latin-1"))
        request_id = assign_request_id(scope, given)
        status = 500
        streaming = False
        first_byte: float | None = None
        answered = False  # an answer's start reached the server

        async def observed(message: Message) -> None:
            nonlocal status, streaming, first_byte, answered
            kind = message["type"]
            if kind == _START:
                status = message["status"]
                sent = message.get("headers", ())
                for name, value in sent:
                    if name == b"content-type" and value.startswith(_EVENT_STREAM):
                        streaming = True
                        observe.streams += 1
                message["headers"] = [*sent, request_id]
                answered = True
            elif first_byte is None and kind == _BODY and message.get("body"):
                first_byte = time.perf_counter()
            await send(message)

        observe.in_flight += 1
        tool_calls, answered_by = observe.begin()
        try:
            if not tracing.enabled():
                try:
                    await self._serve(scope, receive, observed, headers)
                finally:
                    observe.done(
                        scope, started, status, streaming, first_byte, tool_calls, answered_by
                    )
                return
            request_span = observe.span(scope)
            current = request_span.__enter__()
            try:
                await self._serve(scope, receive, observed, headers)
            finally:
                observe.end_span(current, scope, status)
                request_span.__exit__(None, None, None)
                observe.done(scope, started, status, streaming, first_byte, tool_calls, answered_by)
        except Exception:
            if not answered:
                await PlainTextResponse("Internal Server Error", status_code=500)(
                    scope, receive, send
                )
            raise

    async def _serve(
        self, scope: Scope, receive: Receive, observed: Send, headers: Mapping[str, str]
    ) -> None:
        """The limits, the failures and the dispatch; the app's answer to `observed`."""
        ticket: Ticket | None = None
        if not InFlightLimit.exempt(scope):
            admitted = self.in_flight.admit(scope, headers)
            if isinstance(admitted, GatewayError):
                await send_refusal(scope, observed, admitted)
                return
            ticket = admitted
            receive = ticket.metered(receive)
            scope[METERED] = True
        extra: list[tuple[bytes, bytes]] = []
        started = False  # the app started an answer (which a refusal may have dropped)

        async def send(message: Message) -> None:
            nonlocal started
            starts = message["type"] == _START
            if starts:
                started = True
                if extra:
                    message = {**message, "headers": [*message.get("headers", []), *extra]}
            if ticket is not None:
                if ticket.refused is not None and not ticket.started:
                    return  # the refusal is sent below, not the app's answer to it
                if starts:
                    ticket.started = True
            await observed(message)

        try:
            keyed: Admitted | None = None
            if self.key_limits.applies(scope):
                admission = await self.key_limits.admit(scope)
                if isinstance(admission, GatewayError):
                    await send_refusal(scope, send, admission)
                    return
                keyed = admission
            entered = None
            if keyed is not None:
                extra = keyed.headers
                entered = self.key_limits.enter(keyed)
            try:
                try:
                    route = self._direct_route(scope)
                    if route is None:
                        await self.router.middleware_stack(scope, receive, send)
                    else:
                        request = Request(scope, receive, send)
                        try:
                            response = await route.endpoint(request)
                            await response(scope, receive, send)
                        except Exception as exc:
                            # What Starlette's wrapper of each route did.
                            if not await self._handle(exc, request, send, started):
                                raise
                except Exception as exc:
                    # What Starlette's exception middleware did: the router's 404 and
                    # 405, and a failure of a handler.
                    if not await self._handle(exc, Request(scope, receive, send), send, started):
                        raise
            except Exception:
                if started:
                    raise  # too late to answer
                await answer_failure(scope, receive, send)
            finally:
                if keyed is not None:
                    assert entered is not None
                    await self.key_limits.release(keyed, entered)
        except Exception:
            if ticket is None or ticket.refused is None or ticket.started:
                raise
        finally:
            if ticket is not None:
                ticket.release()
        if ticket is not None and ticket.refused is not None and not ticket.started:
            await send_refusal(scope, observed, ticket.refused)

    async def _handle(self, exc: Exception, request: Request, send: Send, started: bool) -> bool:
        """Answer `exc` with the app's handler of it, if it has one (as Starlette did)."""
        exceptions, statuses = self.handlers
        handler = None
        if isinstance(exc, HTTPException):
            handler = statuses.get(exc.status_code)
        if handler is None:
            for cls in type(exc).__mro__:
                if cls in exceptions:
                    handler = exceptions[cls]
                    break
        if handler is None:
            return False
        if started:
            raise RuntimeError("Caught handled exception, but response already started.") from exc
        if inspect.iscoroutinefunction(handler):
            response = await handler(request, exc)
        else:
            response = await run_in_threadpool(handler, request, exc)
        if response is not None:
            await response(request.scope, request.receive, send)
        # Reused exception instances accumulate tracebacks across requests.
        exc.__traceback__ = None
        return True

    def _direct_route(self, scope: Scope) -> Route | None:
        """The `direct` route of this request, if it has one; else the router's to find.

        Sets what the router would have set in `scope`."""
        routes = self.router.routes
        if len(routes) != self._direct_for:  # found again when routes come or go
            self._direct = _direct_routes(self.router, self.direct_paths)
            self._direct_for = len(routes)
        route = self._direct.get((scope["method"], scope["path"]))
        if route is None or scope.get("root_path"):
            return None
        scope.setdefault("router", self.router)
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = dict(scope.get("path_params", {}))
        return route


def _direct_routes(
    router: Router, direct: Collection[tuple[str, str]]
) -> dict[tuple[str, str], Route]:
    """For each `(method, path)`, the route the router picks for it, when that is a plain
    `Route` of an `async` endpoint (called as `request_response` would, without its
    wrapper): the layer does what the router and the wrapper did."""
    found: dict[tuple[str, str], Route] = {}
    if router.middleware_stack != router.app:
        return found  # the router has middleware of its own
    for method, path in direct:
        probe: Scope = {
            "type": "http",
            "method": method,
            "path": path,
            "root_path": "",
            "headers": [],
            "query_string": b"",
        }
        for route in router.routes:
            match, _ = route.matches(probe)
            if match is not Match.FULL:
                continue
            if (
                isinstance(route, Route)
                and not route.param_convertors
                and inspect.iscoroutinefunction(route.endpoint)
                and getattr(route.app, "__qualname__", "") == _PLAIN
            ):
                found[(method, path)] = route
            break
    return found


_PLAIN: Final = "request_response.<locals>.app"
"""What Starlette's `Route` serves a function endpoint with, when no middleware of the
route's own wraps it."""
