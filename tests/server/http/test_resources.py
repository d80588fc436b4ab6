"""What one caller can hold is bounded, and never the room the others need (issue 23):
idle `GET /mcp` streams have a budget of their own, request bytes are counted as they
arrive and per key, stalled bodies are cut sooner when the gateway is busy, a body is
charged for what it becomes once parsed, and `/readyz` says which budget is full.

Everything here runs against uvicorn on a real loopback socket: the attacks are about
connections that stay open.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from live import LiveServer
from server_support import config_with

from toolwire.server import create_app

ALICE, BOB, CAROL = "tw-res-alice", "tw-res-bob", "tw-res-carol"
CHAT = json.dumps(
    {"model": "toolwire-offline", "messages": [{"role": "user", "content": "hi"}]}
).encode()


def _keys() -> list[dict[str, Any]]:
    return [
        {"name": name, "sha256": hashlib.sha256(key.encode()).hexdigest()}
        for name, key in (("alice", ALICE), ("bob", BOB), ("carol", CAROL))
    ]


@contextlib.contextmanager
def _gateway(served_by: str = "uvicorn", **sections: Any) -> Iterator[LiveServer]:
    """The gateway on uvicorn as it comes, or (`served_by="toolwire"`) on the server
    `toolwire serve` runs, whose protocol tells the app of a disconnect itself."""
    sections.setdefault("mcp", {"enabled": True})
    config = config_with(keys=_keys(), store="memory", **sections)
    with LiveServer(create_app(config, access_log=False), served_by=served_by) as live:
        yield live


def _connect(live: LiveServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", live.port), timeout=5)


def _head(key: str, method: str, path: str, *lines: str) -> bytes:
    return (
        "\r\n".join(
            [f"{method} {path} HTTP/1.1", "Host: x", f"Authorization: Bearer {key}", *lines]
        )
        + "\r\n\r\n"
    ).encode()


def _open_stream(live: LiveServer, key: str) -> tuple[socket.socket, bytes]:
    """A `GET /mcp` event stream and the first bytes of its answer."""
    sock = _connect(live)
    sock.sendall(_head(key, "GET", "/mcp", "Accept: text/event-stream"))
    return sock, sock.recv(4096)


def _stall(live: LiveServer, key: str, declared: int, sent: bytes = b'{"model"') -> socket.socket:
    """An upload that declares `declared` bytes, sends `sent` and stops."""
    sock = _connect(live)
    sock.sendall(
        _head(
            key,
            "POST",
            "/v1/chat/completions",
            "Content-Type: application/json",
            f"Content-Length: {declared}",
        )
        + sent
    )
    return sock


def _chat(live: LiveServer, key: str = BOB) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    return httpx.post(f"{live.url}/v1/chat/completions", content=CHAT, headers=headers, timeout=5)


def _answer(sock: socket.socket) -> bytes:
    """Whatever the server sends until it closes the connection (or 5 s of silence)."""
    data = b""
    with contextlib.suppress(TimeoutError, ConnectionError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


def _json_body(data: bytes) -> Any:
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


# --- idle GET /mcp streams ---------------------------------------------------------------------


@pytest.mark.parametrize("served_by", ["uvicorn", "toolwire"])
def test_idle_mcp_streams_are_bounded_per_key_and_in_all_and_leave_the_slots_alone(
    served_by: str,
) -> None:
    # Before: each idle stream held one of the request slots, without a bound of its own;
    # 1,024 of them made every POST a 503 while /readyz still said 200.
    mcp = {"max_streams": 6, "max_streams_per_key": 3, "stream_keepalive": 0.2}
    limits = {"max_in_flight": 2}
    with _gateway(served_by, mcp={"enabled": True, **mcp}, limits=limits) as live:
        held: list[socket.socket] = []
        try:
            for key in (ALICE, BOB):
                for _ in range(3):
                    sock, first = _open_stream(live, key)
                    held.append(sock)
                    assert first.startswith(b"HTTP/1.1 200 "), first
                    assert b"text/event-stream" in first
            over_share, answer = _open_stream(live, ALICE)
            held.append(over_share)
            assert answer.startswith(b"HTTP/1.1 429 "), answer
            error = _json_body(answer)
            assert error["jsonrpc"] == "2.0"
            assert error["id"] is None
            assert "mcp.max_streams_per_key" in error["error"]["message"]
            over_all, answer = _open_stream(live, CAROL)
            held.append(over_all)
            assert answer.startswith(b"HTTP/1.1 503 "), answer
            assert b"retry-after: 5" in answer.lower()
            assert "mcp.max_streams" in _json_body(answer)["error"]["message"]

            # Six streams open, two request slots: model traffic still gets both.
            assert _chat(live, CAROL).status_code == 200
            ready = httpx.get(f"{live.url}/readyz")
            assert ready.status_code == 200
            assert ready.json()["checks"]["mcp_streams"] == "full"

            # An idle stream carries keep-alive comments.
            held[0].settimeout(2)
            assert b": keep-alive\n\n" in held[0].recv(4096)
        finally:
            for sock in held:
                sock.close()
        # A closed stream gives its place back.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            sock, first = _open_stream(live, ALICE)
            sock.close()
            if first.startswith(b"HTTP/1.1 200 "):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("closed streams were not released")


@pytest.mark.parametrize("served_by", ["uvicorn", "toolwire"])
def test_an_idle_mcp_stream_ends_after_its_idle_timeout(served_by: str) -> None:
    mcp = {"enabled": True, "stream_idle_timeout": 0.5, "stream_keepalive": 0.2}
    with _gateway(served_by, mcp=mcp) as live:
        sock, first = _open_stream(live, ALICE)
        with sock:
            started = time.monotonic()
            data = first
            # Chunked: the terminating zero-length chunk says the stream ended.
            while not data.endswith(b"\r\n0\r\n\r\n"):
                chunk = sock.recv(4096)
                assert chunk, "the connection closed before the stream ended"
                data += chunk
            took = time.monotonic() - started
    assert first.startswith(b"HTTP/1.1 200 ")
    assert took < 3, took


# --- request bytes -----------------------------------------------------------------------------


def test_stalled_uploads_hold_no_bytes_and_lock_no_key_out() -> None:
    # Before: bytes were counted as declared; 8 stalled uploads declaring 512 KiB filled a
    # 4 MiB budget and every other key got 503 until the body timeout (30 s).
    limits = {"max_in_flight_bytes": 4 * 1024 * 1024}
    with _gateway(limits=limits) as live:
        stalled = [_stall(live, ALICE, 512 * 1024) for _ in range(8)]
        try:
            time.sleep(0.2)
            answered = _chat(live, BOB)
            assert answered.status_code == 200, answered.text
        finally:
            for sock in stalled:
                sock.close()


def test_one_key_cannot_hold_more_than_its_share_of_request_bytes() -> None:
    # Bodies are charged five times their bytes (what they hold once parsed and sent on).
    limits = {"max_in_flight_bytes": 16 * 1024 * 1024, "max_in_flight_bytes_per_key": 4 << 20}
    with _gateway(limits=limits) as live:
        first = _stall(live, ALICE, 700_000, b"[" + b"1" * 600_000)
        try:
            time.sleep(0.3)  # its 600 kB have arrived
            second = _stall(live, ALICE, 700_000, b"[" + b"1" * 600_000)
            with second:
                answer = _answer(second)
            assert answer.startswith(b"HTTP/1.1 429 "), answer[:200]
            error = _json_body(answer)["error"]
            assert error["code"] == "rate_limit_exceeded"
            assert "limits.max_in_flight_bytes_per_key" in error["message"]
            assert _chat(live, BOB).status_code == 200
        finally:
            first.close()


def test_stalled_bodies_are_cut_sooner_when_the_slots_run_out() -> None:
    # Before: a stalled body held its slot for the whole body timeout (30 s here) however
    # busy the gateway was.
    limits = {"max_in_flight": 4, "body_timeout": 30, "min_body_timeout": 1}
    with _gateway(limits=limits) as live:
        stalled = [_stall(live, ALICE, 1000) for _ in range(4)]
        started = time.monotonic()
        answers = []
        for sock in stalled:
            with sock:
                answers.append(_answer(sock))
        took = time.monotonic() - started
        assert took < 4, took
        for answer in answers:
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
            assert _json_body(answer)["error"]["code"] == "request_timeout"
        assert _chat(live, BOB).status_code == 200


def test_a_body_is_charged_for_what_it_becomes_once_parsed() -> None:
    # 700 kB of `[[],[],…]` parse to about 15 MB of Python objects: with 8 MiB of room it is
    # refused before it is parsed. Before, it was parsed whatever it would cost.
    body = b'{"model": "toolwire-offline", "x": [' + b",".join([b"[]"] * 230_000) + b"]}"
    room = 8 * 1024 * 1024
    limits = {"max_in_flight_bytes": room, "max_in_flight_bytes_per_key": room}
    with _gateway(limits=limits) as live:
        headers = {"Authorization": f"Bearer {BOB}", "Content-Type": "application/json"}
        refused = httpx.post(
            f"{live.url}/v1/chat/completions", content=body, headers=headers, timeout=5
        )
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "overloaded"
        messages = httpx.post(f"{live.url}/v1/messages", content=body, headers=headers, timeout=5)
        assert messages.status_code == 503
        assert messages.json()["error"]["type"] == "overloaded_error"
        assert _chat(live, BOB).status_code == 200  # what it held was given back


def test_readyz_names_the_full_budget() -> None:
    # Before: /readyz said 200 while every request got 503.
    limits = {"max_in_flight": 2, "min_body_timeout": 5}
    with _gateway(limits=limits) as live:
        stalled = [_stall(live, ALICE, 1000) for _ in range(2)]
        try:
            time.sleep(0.2)
            ready = httpx.get(f"{live.url}/readyz", timeout=5)
            assert ready.status_code == 503
            assert ready.json()["checks"]["requests"] == "full"
            assert ready.json()["status"] == "not ready"
        finally:
            for sock in stalled:
                sock.close()
