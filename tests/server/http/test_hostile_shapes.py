"""Hostile request shapes on every door (issue 23): one JSON depth rule, non-string item
types, client text kept out of response headers, the access log and the audit log, and
every error in the door's own shape."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from live import LiveServer
from server_support import GatewayFactory, config_with

from toolwire.server import create_app
from toolwire.server.http._httptools_protocol import GatewayHttpProtocol
from toolwire.server.http.client_text import HEADER_VALUE_CAP, header_list, log_text
from toolwire.server.http.json_depth import MAX_JSON_DEPTH, too_deep
from toolwire.server.http.serving import GatewayServer, H11WithHeaderDeadline, ServeOptions

MODEL = "toolwire-offline"
CONFIG = config_with(store="memory")
TOOLS_CONFIG = config_with(
    server_tools={"modules": [__import__("server_support").TOOLS_MODULE]}, store="memory"
)


def nested(depth: int) -> dict[str, Any]:
    """An object `depth` levels deep (`{}` is one level)."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def nested_text(depth: int) -> bytes:
    """`nested(depth)` as JSON text (deeper than json and orjson write)."""
    return b'{"a":' * (depth - 1) + b"{}" + b"}" * (depth - 1)


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


def anthropic_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["type"] == "error", body
    assert set(body["error"]) == {"type", "message"}, body
    return dict(body["error"])


def openai_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return dict(body["error"])


# --- 1. one JSON depth rule, at parse time ------------------------------------------------

# Each door's body with a client-chosen value `inner` at a place the issue found a 500 (or
# a pass-through field), and how many levels the body adds around it.
Body = Callable[[dict[str, Any]], dict[str, Any]]
DOORS: dict[str, tuple[str, Body]] = {
    "messages tool_use.input": (
        "/v1/messages",
        lambda inner: {
            "model": MODEL,
            "max_tokens": 16,
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": inner}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
                },
            ],
        },
    ),
    "count_tokens input_schema": (
        "/v1/messages/count_tokens",
        lambda inner: {
            "model": MODEL,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "x", "input_schema": {"type": "object", "properties": inner}}],
        },
    ),
    "responses tools[].parameters": (
        "/v1/responses",
        lambda inner: {
            "model": MODEL,
            "input": "hi",
            "store": False,
            "tools": [
                {
                    "type": "function",
                    "name": "x",
                    "parameters": {"type": "object", "properties": {"p": inner}},
                }
            ],
        },
    ),
    "responses text.format.schema": (
        "/v1/responses",
        lambda inner: {
            "model": MODEL,
            "input": "hi",
            "store": False,
            "text": {"format": {"type": "json_schema", "name": "x", "schema": inner}},
        },
    ),
    "responses unknown key under reasoning": (
        "/v1/responses",
        lambda inner: {"model": MODEL, "input": "hi", "store": False, "reasoning": {"x": inner}},
    ),
    "responses unknown key under text": (
        "/v1/responses",
        lambda inner: {"model": MODEL, "input": "hi", "store": False, "text": {"x": inner}},
    ),
    "chat pass-through field": (
        "/v1/chat/completions",
        lambda inner: {
            "model": MODEL,
            "messages": [{"role": "user", "content": "hi"}],
            "x_extra": inner,
        },
    ),
    "tools invoke arguments": (
        "/v1/tools/add/invoke",
        lambda inner: {"arguments": {"a": 2, "b": 3, "c": inner}},
    ),
    "approval decision": (
        "/v1/approvals/apr_unknown",
        lambda inner: {"decision": "approve", "x": inner},
    ),
    "run resume": ("/v1/runs/run_unknown/resume", lambda inner: {"x": inner}),
}


def _at_depth(make: Body, depth: int) -> bytes:
    """The door's body as JSON text, nesting exactly `depth` levels in all."""
    around = depth_of(make(nested(50))) - 50  # levels of the body above `inner`
    if depth <= 200:
        assert depth_of(make(nested(depth - around))) == depth
    text = json.dumps(make({"deep": "here"})).encode()
    return text.replace(b'{"deep": "here"}', nested_text(depth - around))


def _door_error(path: str, response: httpx.Response, status: int) -> dict[str, Any]:
    if path.startswith("/v1/messages"):
        return anthropic_error(response, status)
    return openai_error(response, status)


@pytest.mark.parametrize("door", list(DOORS))
async def test_one_depth_rule_on_every_door(gateway: GatewayFactory, door: str) -> None:
    path, make = DOORS[door]
    async with gateway(TOOLS_CONFIG) as client:
        under = await client.post(path, content=_at_depth(make, MAX_JSON_DEPTH))
        # Just under the rule: the door judges the body on its merits (the unknown
        # approval and run are 404s), never by its depth, and never with a 5xx.
        assert under.status_code < 500, under.text[:300]
        assert "json_too_deep" not in under.text
        # Just over it, and where orjson could no longer write the data back (254+).
        for depth in (MAX_JSON_DEPTH + 1, 260, 1000):
            over = await client.post(path, content=_at_depth(make, depth))
            error = _door_error(path, over, 400)
            assert "nests arrays and objects more than 128 levels" in error["message"]


async def test_depth_is_refused_in_the_anthropic_shape_with_the_type_anthropic_uses(
    gateway: GatewayFactory,
) -> None:
    path, make = DOORS["messages tool_use.input"]
    async with gateway(CONFIG) as client:
        response = await client.post(path, content=_at_depth(make, 300))
    assert anthropic_error(response, 400)["type"] == "invalid_request_error"


async def test_depth_names_the_top_level_field(gateway: GatewayFactory) -> None:
    path, make = DOORS["responses text.format.schema"]
    async with gateway(CONFIG) as client:
        response = await client.post(path, content=_at_depth(make, 200))
    error = openai_error(response, 400)
    assert error["param"] == "text"
    assert error["code"] == "json_too_deep"


def test_the_depth_rule_leaves_room_for_what_orjson_writes() -> None:
    import orjson

    # The data a request may carry, wrapped in a hundred levels of the gateway's own
    # objects, can still be written.
    value: Any = nested(MAX_JSON_DEPTH)
    for _ in range(50):
        value = {"wrapped": [value]}
    assert orjson.loads(orjson.dumps(value)) == value


def test_too_deep_counts_levels_and_names_where() -> None:
    assert too_deep(nested(5), limit=5) is None
    assert too_deep(nested(6), limit=5) == "a"
    assert too_deep([[1], [[[[]]]]], limit=4) == "[1]"
    assert too_deep([[1], [[[[]]]]], limit=5) is None
    assert too_deep("text", limit=0) is None
    # The cheap pre-check on the raw text never hides a deep value.
    assert too_deep(nested(6), b"{" * 6, limit=5) == "a"
    assert too_deep(nested(6), b"{}", limit=5) is None  # trusted: at most 1 container


# --- 2. a non-string input item type on /v1/responses --------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", [[], {}, 1, True, ["message"]])
async def test_a_non_string_item_type_is_a_400_naming_the_field(
    gateway: GatewayFactory, kind: Any, stream: bool
) -> None:
    body = {"model": MODEL, "input": [{"type": kind}], "store": False, "stream": stream}
    async with gateway(CONFIG) as client:
        response = await client.post("/v1/responses", json=body)
    error = openai_error(response, 400)
    assert error["param"] == "input[0].type"
    assert "the item type is" in error["message"]


PART_DOORS = {
    "/v1/chat/completions": lambda part: {"messages": [{"role": "user", "content": [part]}]},
    "/v1/responses": lambda part: {
        "input": [{"role": "user", "content": [part]}],
        "store": False,
    },
    "/v1/messages": lambda part: {
        "max_tokens": 8,
        "messages": [{"role": "user", "content": [part]}],
    },
}


@pytest.mark.parametrize("path", sorted(PART_DOORS))
@pytest.mark.parametrize("kind", [[], ["text"], {}, {"a": 1}, 1, None])
async def test_a_content_part_whose_type_is_not_a_string_is_a_400(
    gateway: GatewayFactory, path: str, kind: Any
) -> None:
    body = {"model": MODEL, **PART_DOORS[path]({"type": kind, "text": "hi"})}
    async with gateway(CONFIG) as client:
        response = await client.post(path, json=body)
    assert response.status_code == 400, response.text
    if path == "/v1/messages":
        assert response.json()["error"]["type"] == "invalid_request_error"
    else:
        assert "content" in openai_error(response, 400)["param"]


# --- 3. client text in response headers: bounded, encoded summaries ------------------------

HOSTILE_NAMES = ["€uro", "a\r\nSet-Cookie: x=1", "nul\x00byte", "x" * 100_000, "日本"]


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with LiveServer(create_app(CONFIG, environ={})) as server:
        yield server


def _listing_ok(headers: httpx.Headers, name: str, count: int) -> list[str]:
    value = headers[name]
    assert len(value.encode()) <= HEADER_VALUE_CAP
    assert value.isascii(), value[:200]
    assert value.isprintable(), value[:200]
    assert headers[f"{name}-count"] == str(count)
    for other, text in headers.items():
        assert len(other) + len(text) < 8192, other
    return value.split(",")


def test_ignored_field_names_reach_the_anthropic_sdk_as_a_bounded_summary(
    live: LiveServer,
) -> None:
    extra = dict.fromkeys(HOSTILE_NAMES, 1)
    extra.update({f"field_{n}": n for n in range(40)})
    with anthropic.Anthropic(base_url=live.url, api_key="x", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=16,
            messages=[{"role": "user", "content": "hi"}],
            extra_body=extra,
        )
        message = raw.parse()
    assert message.content
    listed = _listing_ok(raw.headers, "toolwire-ignored-fields", len(extra))
    # Sorted as before; each name encoded, the long one shortened with an encoded '…'.
    assert listed[:3] == ["a%0D%0ASet-Cookie:%20x=1", "field_0", "field_1"]
    assert "%E2%82%ACuro" in listed or len(listed) < len(extra)
    assert all(len(item) <= 64 for item in listed)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_each_hostile_field_name_alone_gets_an_answer(live: LiveServer, name: str) -> None:
    with anthropic.Anthropic(base_url=live.url, api_key="x", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=16,
            messages=[{"role": "user", "content": "hi"}],
            extra_body={name: 1},
        )
        raw.parse()
    [item] = _listing_ok(raw.headers, "toolwire-ignored-fields", 1)
    assert item.startswith(header_list([name])[0][:20])


def test_a_megabyte_orphan_id_reaches_the_openai_sdk_as_a_bounded_summary(
    live: LiveServer,
) -> None:
    ghost = "call_" + "g" * 1_000_000
    with openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": ghost, "content": "x"},
                {"role": "tool", "tool_call_id": "call_€", "content": "x"},
                {"role": "user", "content": "and?"},
            ],
        )
        raw.parse()
    listed = _listing_ok(raw.headers, "toolwire-dropped-tool-results", 2)
    assert listed[0].startswith("call_ggg")
    assert listed[0].endswith("%E2%80%A6")
    assert listed[1] == "call_%E2%82%AC"


def test_a_megabyte_orphan_output_reaches_the_responses_sdk_as_a_bounded_summary(
    live: LiveServer,
) -> None:
    ghost = "call_" + "\n" * 1_000_000
    with openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0) as client:
        raw = client.responses.with_raw_response.create(
            model=MODEL,
            store=False,
            input=[
                {"role": "user", "content": "hi"},
                {"type": "function_call_output", "call_id": ghost, "output": "?"},
            ],
        )
        raw.parse()
    [item] = _listing_ok(raw.headers, "toolwire-dropped-tool-results", 1)
    assert item.startswith("call_%0A%0A")


def test_a_megabyte_orphan_tool_result_reaches_the_anthropic_sdk_bounded(
    live: LiveServer,
) -> None:
    ghost = "toolu_" + "€" * 300_000
    with anthropic.Anthropic(base_url=live.url, api_key="x", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=16,
            messages=[
                {"role": "user", "content": "hi"},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": ghost, "content": "x"}],
                },
            ],
        )
        raw.parse()
    [item] = _listing_ok(raw.headers, "toolwire-dropped-tool-results", 1)
    assert item.startswith("toolu_%E2%82%AC")


def test_header_list_caps_items_and_bytes() -> None:
    value, whole = header_list([f"name_{n:04d}_" + "y" * 50 for n in range(100)])
    assert not whole
    assert len(value) <= HEADER_VALUE_CAP
    assert value.split(",")[0] == "name_0000_" + "y" * 50
    assert header_list(["a,b", "c d"]) == ("a%2Cb,c%20d", True)
    # A shortened name never ends inside an escape.
    shortened, whole = header_list(["€" * 100])
    assert not whole
    assert shortened == "%E2%82%AC" * 6 + "%E2%80%A6"


def test_log_text_escapes_and_caps() -> None:
    assert log_text("gpt-4o") == "gpt-4o"
    assert log_text("a\nb c") == "a\\nb c"
    assert log_text("x" * 300) == "x" * 200 + "…"
    assert "\n" not in log_text("\u2028line\rsep\n" * 50)


# --- 4. metrics labels come from the configuration only ------------------------------------


async def test_unknown_model_names_do_not_grow_the_metrics(gateway: GatewayFactory) -> None:
    async def flood(client: httpx.AsyncClient, start: int, count: int) -> None:
        for n in range(start, start + count):
            model = f"no-such-model-{n}-" + "m" * 200
            body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
            response = await client.post("/v1/chat/completions", json=body)
            assert response.status_code == 404
            anthropic_body = {**body, "max_tokens": 8}
            assert (await client.post("/v1/messages", json=anthropic_body)).status_code == 404
            responses_body = {"model": model, "input": "hi", "store": False}
            assert (await client.post("/v1/responses", json=responses_body)).status_code == 404

    async with gateway(CONFIG) as client:
        await flood(client, 0, 10)
        await client.get("/metrics")  # the scrape's own series, before measuring
        before = len((await client.get("/metrics")).content)
        await flood(client, 10, 500)
        scraped = (await client.get("/metrics")).text
    # The same series, with bigger counts: a few digits more, not 500 series more.
    assert len(scraped) - before < 400
    assert "no-such-model" not in scraped
    assert 'model="other"' in scraped


async def test_made_up_methods_do_not_grow_the_metrics(gateway: GatewayFactory) -> None:
    # httptools knows only the registered methods; h11 (`--http h11`) takes any token.
    async with gateway(CONFIG) as client:
        for n in range(50):
            await client.request(f"BREW{n}", "/v1/chat/completions")
        scraped = (await client.get("/metrics")).text
    assert "BREW" not in scraped
    assert 'method="other"' in scraped


async def test_configured_models_keep_their_own_label(gateway: GatewayFactory) -> None:
    async with gateway(CONFIG) as client:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
        scraped = (await client.get("/metrics")).text
    assert f'model="{MODEL}"' in scraped


# --- 5. the access log and the audit log ---------------------------------------------------


async def test_a_model_cannot_forge_or_flood_an_access_log_line(
    gateway: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    forged = "gpt\n2026-01-01 00:00:00 INFO toolwire.access: request_id=forged status=200"
    async with gateway(CONFIG) as client:
        with caplog.at_level("INFO", logger="toolwire.access"):
            for model in (forged, "m" * 200_000):
                body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
                assert (await client.post("/v1/chat/completions", json=body)).status_code == 404
    lines = [r.getMessage() for r in caplog.records if r.name == "toolwire.access"]
    assert len(lines) == 2
    assert "\n" not in lines[0]
    assert "model=gpt\\n2026" in lines[0]
    assert len(lines[1]) < 1000
    fields = caplog.records[-1].toolwire  # type: ignore[attr-defined]
    assert len(fields["model"]) <= 201


async def test_the_audit_log_keeps_the_cleaned_request_id(
    gateway: GatewayFactory, openai_server: Any
) -> None:
    from chat_support import native_upstream

    from fakes.openai_server import completion, tool_call

    config = config_with(
        upstream=native_upstream(openai_server.base_url),
        server_tools={"modules": ["approval_tools"]},
        store="memory",
    )
    openai_server.reply(
        completion(
            "Deleting.",
            tool_calls=[tool_call("delete_application", {"app_name": "demo"}, id="call_d")],
        )
    )
    hostile = "<script>alert(1)</script>" * 120  # ~3 KB, as seen
    async with gateway(config) as client:
        chat = await client.post(
            "/v1/chat/completions",
            json={"model": "gpt", "messages": [{"role": "user", "content": "Delete demo."}]},
        )
        [pending] = chat.json()["toolwire"]["pending_approvals"]
        decided = await client.post(
            f"/v1/approvals/{pending['id']}",
            json={"decision": "deny"},
            headers={"X-Request-Id": hostile},
        )
        assert decided.status_code == 200, decided.text
        audit = (await client.get("/v1/audit")).json()["data"]
    ids = {record["request_id"] for record in audit}
    assert decided.headers["x-request-id"] in ids
    for rid in ids:
        assert rid is None or ("<" not in rid and len(rid) <= 128)


# --- 5. every error in its door's shape, the server's own answers included ---------------


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
@pytest.mark.parametrize("method", ["OPTIONS", "TRACE", "PUT", "BREW"])
async def test_a_wrong_method_on_the_anthropic_door_is_an_anthropic_405(
    gateway: GatewayFactory, path: str, method: str
) -> None:
    async with gateway(CONFIG) as client:
        response = await client.request(method, path)
    assert anthropic_error(response, 405)["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "path", ["/v1/messages/batches", "/v1/messages/batches/msgbatch_1/results", "/v1/messages/x"]
)
@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
async def test_unknown_anthropic_paths_are_anthropic_404s(
    gateway: GatewayFactory, path: str, method: str
) -> None:
    async with gateway(CONFIG) as client:
        response = await client.request(method, path, json={})
    assert anthropic_error(response, 404)["type"] == "not_found_error"


async def test_an_unknown_playground_file_is_a_json_404(gateway: GatewayFactory) -> None:
    async with gateway(CONFIG) as client:
        assert (await client.get("/playground/app.js")).status_code == 200
        response = await client.get("/playground/nope.js")
    assert openai_error(response, 404)["code"] == "not_found"


def _boom(request: Any) -> Any:
    raise RuntimeError("a bug")


@pytest.mark.parametrize(
    ("path", "anthropic_shape"), [("/v1/boom", False), ("/v1/messages/boom", True)]
)
def test_an_unexpected_failure_is_a_json_500_and_the_connection_stays_open(
    path: str, anthropic_shape: bool
) -> None:
    from starlette.routing import Route

    app = create_app(CONFIG, environ={})
    app.router.routes.insert(0, Route(path, _boom, methods=["GET"]))
    with LiveServer(app) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        with sock:
            failed = _exchange(sock, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            # The same keep-alive connection answers the next request.
            after = _exchange(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    if anthropic_shape:
        assert anthropic_error(failed, 500)["type"] == "api_error"
    else:
        assert openai_error(failed, 500)["type"] == "server_error"
    assert failed.headers["x-request-id"]
    assert after.status_code == 200


def _exchange(sock: socket.socket, request: bytes) -> httpx.Response:
    """Send one request on `sock` and read one content-length response."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = httpx.Headers([tuple(line.split(": ", 1)) for line in lines])
    while len(body) < int(headers["content-length"]):
        body += sock.recv(65536)
    return httpx.Response(int(status_line.split()[1]), headers=headers, content=body)


@pytest.fixture(params=[GatewayHttpProtocol, H11WithHeaderDeadline], ids=["httptools", "h11"])
def served(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    app = create_app(CONFIG, environ={})
    config = ServeOptions(log_level="critical").uvicorn_config(app)
    config.http = request.param
    with LiveServer(app, server=GatewayServer(config, drain_seconds=1)) as live:
        yield live


@pytest.mark.parametrize(
    "raw",
    [
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n",
        b"\x00\x01 nonsense\r\n\r\n",
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
    ],
    ids=["malformed chunked body", "no request line", "malformed header"],
)
def test_what_the_server_cannot_parse_gets_a_json_400(served: LiveServer, raw: bytes) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=5) as sock:
        sock.sendall(raw)
        answer = _exchange(sock, b"")
    assert openai_error(answer, 400)["code"] == "invalid_http"
    assert answer.headers["connection"] == "close"


def test_a_url_over_64_kb_gets_a_json_400_or_is_served(served: LiveServer) -> None:
    # httptools refuses it (the server answers); h11 passes it on to the app.
    target = b"/v1/models?" + b"q" * 70_000
    with socket.create_connection(("127.0.0.1", served.port), timeout=5) as sock:
        answer = _exchange(sock, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    if answer.status_code == 400:
        assert openai_error(answer, 400)["code"] == "invalid_http"
    else:
        assert answer.status_code == 200


async def test_a_405_allows_the_methods_of_every_route_for_the_path(
    gateway: GatewayFactory,
) -> None:
    async with gateway(TOOLS_CONFIG) as client:
        response = await client.request("OPTIONS", "/v1/approvals/apr_1")
    assert openai_error(response, 405)["code"] == "method_not_allowed"
    # Two routes serve the path (GET and POST); Starlette named the first one's only.
    assert response.headers["allow"] == "GET, HEAD, POST"


# --- 1b. the depth rule for JSON inside strings: tool-call arguments ------------------------


def _deep_arguments_bodies(depth: int) -> dict[str, tuple[str, dict[str, Any]]]:
    deep = nested_text(depth).decode()
    request = json.dumps({"tool_request": {"name": "add", "arguments": {"x": "HERE"}}})
    return {
        "chat tool_calls arguments": (
            "/v1/chat/completions",
            {
                "model": MODEL,
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "add", "arguments": deep},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "x"},
                ],
            },
        ),
        "chat tool_request message": (
            "/v1/chat/completions",
            {
                "model": MODEL,
                "messages": [
                    {"role": "user", "content": "hi"},
                    # The object holding the arguments adds 3 levels around them.
                    {"role": "assistant", "content": request.replace('"HERE"', deep)},
                    {"role": "user", "content": "and?"},
                ],
            },
        ),
        "responses function_call arguments": (
            "/v1/responses",
            {
                "model": MODEL,
                "store": False,
                "input": [
                    {"role": "user", "content": "hi"},
                    {"type": "function_call", "call_id": "c1", "name": "add", "arguments": deep},
                    {"type": "function_call_output", "call_id": "c1", "output": "x"},
                ],
            },
        ),
    }


@pytest.mark.parametrize("door", list(_deep_arguments_bodies(2)))
async def test_deep_tool_call_arguments_are_refused_by_the_same_rule(
    gateway: GatewayFactory, door: str
) -> None:
    config = config_with(store="memory", dialect="tool_request")
    async with gateway(config) as client:
        path, under = _deep_arguments_bodies(MAX_JSON_DEPTH - 3)[door]
        response = await client.post(path, json=under)
        # Judged on its merits (the tool_request one waits for its result: a 400 saying so).
        assert response.status_code < 500, response.text[:300]
        assert "json_too_deep" not in response.text
        for depth in (MAX_JSON_DEPTH + 1, 300, 1100):
            path, body = _deep_arguments_bodies(depth)[door]
            error = openai_error(await client.post(path, json=body), 400)
            assert error["code"] == "json_too_deep"
            assert error["param"].startswith(("messages[1]", "input[1]"))


def test_loads_text_holds_json_in_strings_to_the_rule() -> None:
    import orjson

    from toolwire.server.http.json_depth import JsonTooDeep, loads_text, text_too_deep

    assert loads_text(nested_text(5).decode(), limit=5) == nested(5)
    with pytest.raises(JsonTooDeep):
        loads_text(nested_text(6).decode(), limit=5)
    # Too deep for orjson to read at all (its own limit, 1,024) is too deep too.
    with pytest.raises(JsonTooDeep):
        loads_text(nested_text(1100).decode())
    with pytest.raises(orjson.JSONDecodeError):
        loads_text("{not json")
    assert not text_too_deep("{not json" + "[" * 300)
    assert text_too_deep(nested_text(MAX_JSON_DEPTH + 1).decode())
    assert not text_too_deep(nested_text(MAX_JSON_DEPTH).decode())
