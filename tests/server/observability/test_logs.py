"""The log output: the background line writer, the access line written without a
`LogRecord`, and what a real `toolwire serve` leaves in its log on SIGTERM and SIGKILL."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from served import ServeProcess

from toolwire.server.http.client_text import log_text
from toolwire.server.observability.logs import (
    JsonFormatter,
    LineHandler,
    LineWriter,
    access_handler,
    configure_logging,
)
from toolwire.server.observability.metrics import _log_line


class _Recording(io.StringIO):
    """A stream that records each write (a batch) apart."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


class _Stalled(io.StringIO):
    """A stream whose writes wait until `go` is set (a pipe nobody reads yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.entered = threading.Event()

    def write(self, text: str) -> int:
        self.entered.set()
        self.go.wait(10)
        return super().write(text)


@pytest.fixture
def restore_loggers() -> Iterator[None]:
    names = ("toolwire", "toolwire.access", "uvicorn", "uvicorn.error")
    saved = {
        name: (list(logging.getLogger(name).handlers), logging.getLogger(name).level)
        for name in names
    }
    propagate = {name: logging.getLogger(name).propagate for name in names}
    yield
    for name in names:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if handler not in saved[name][0]:
                logger.removeHandler(handler)
                handler.close()
        logger.setLevel(saved[name][1])
        logger.propagate = propagate[name]


def test_lines_from_many_threads_are_all_written_whole_and_in_each_threads_order() -> None:
    stream = _Recording()
    writer = LineWriter(stream, interval=0.001)

    def produce(who: int) -> None:
        for n in range(2000):
            writer.write(f"thread={who} n={n} " + "x" * (n % 50) + "\n")

    threads = [threading.Thread(target=produce, args=(who,)) for who in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 8000
    for who in range(4):
        mine = [line for line in lines if line.startswith(f"thread={who} ")]
        assert [int(line.split()[1][2:]) for line in mine] == list(range(2000))
        assert all(line.endswith("x" * (n % 50)) for n, line in enumerate(mine))


def test_the_thread_writes_lines_in_batches_without_being_asked() -> None:
    stream = _Recording()
    writer = LineWriter(stream, interval=0.05)
    for n in range(100):
        writer.write(f"line {n}\n")
    try:
        for _ in range(500):  # the thread writes them within a few intervals
            if stream.getvalue().count("\n") == 100:
                break
            threading.Event().wait(0.01)
        assert stream.getvalue() == "".join(f"line {n}\n" for n in range(100))
        assert len(stream.writes) < 100  # batches, not a write per line
    finally:
        writer.close()


def test_close_writes_what_is_queued() -> None:
    stream = _Recording()
    writer = LineWriter(stream, interval=60)  # the thread would not write for a minute
    writer.write("first\n")
    writer.write("second\n")
    writer.close()
    assert stream.getvalue() == "first\nsecond\n"


def test_a_stream_that_does_not_keep_up_makes_the_writer_wait_not_grow() -> None:
    stream = _Stalled()
    writer = LineWriter(stream, interval=0.001, max_queued=10)
    writer.write("0\n")
    assert stream.entered.wait(5)  # the thread is stuck writing line 0
    done = threading.Event()

    def produce() -> None:
        for n in range(1, 30):
            writer.write(f"{n}\n")
        done.set()

    producer = threading.Thread(target=produce)
    producer.start()
    assert not done.wait(0.2)  # the producer waits once ten lines are queued
    assert len(writer._lines) <= 10
    stream.go.set()
    producer.join(10)
    writer.close()
    assert stream.getvalue() == "".join(f"{n}\n" for n in range(30))


@pytest.mark.parametrize("log_format", ["text", "json"])
@pytest.mark.parametrize(
    "created",
    [1_790_000_000.0, 1_790_000_000.1234567, 1_790_000_000.9994999, 1_790_000_000.9999996],
)
def test_the_direct_access_line_is_the_formatters_line(log_format: str, created: float) -> None:
    handler = LineHandler(log_format, stream=io.StringIO())
    fields = {"request_id": "req_1", "key": None, "status": 200, "duration_ms": 1.25, "x": "é"}
    message = "request_id=req_1 status=200 duration_ms=1.25 x=é"
    handler.access(message, fields, created)
    handler.close()
    record = logging.LogRecord("toolwire.access", logging.INFO, __file__, 1, message, None, None)
    record.created = created
    record.msecs = int((created - int(created)) * 1000) + 0.0
    record.toolwire = fields
    formatter = JsonFormatter() if log_format == "json" else handler.formatter
    assert formatter is not None
    assert handler.writer.stream.getvalue() == formatter.format(record) + "\n"  # type: ignore[attr-defined]


_FORGED = "a\nforged=line " + "m" * 300
"""A model id a client chose: a newline that would start a line of its own, and long."""


@pytest.mark.parametrize("log_format", ["text", "json"])
@pytest.mark.parametrize(
    ("request_id", "key", "model", "tool_calls", "answered_by", "ms"),
    [
        ("req_1", "alice", "gpt", 0, [], 0.5912),
        ("req_1", None, "", 0, [], 1.0),
        ("req_1", "", _FORGED, 3, ["up/a", "up/b"], 12.345),
        (None, "alice", "gpt", 0, [""], 0.125),
        (None, None, "", 1, ["up/a"], 86_400_000.0),
    ],
)
def test_the_access_line_holds_each_field_that_has_a_value_in_order(
    log_format: str,
    request_id: str | None,
    key: str | None,
    model: str,
    tool_calls: int,
    answered_by: list[str],
    ms: float,
) -> None:
    # What the line is: every field that has a value, in this order, as `key=value`; a
    # model's text escaped and shortened, the last deployment that answered.
    fields = {
        "request_id": request_id,
        "key": key,
        "method": "POST",
        "route": "/v1/chat/completions",
        "status": 200,
        "duration_ms": round(ms, 2),
        "model": log_text(model) if model else None,
        "tool_calls": tool_calls or None,
        "deployment": answered_by[-1] if answered_by else None,
    }
    expected = {k: v for k, v in fields.items() if v is not None}
    message = " ".join(f"{k}={v}" for k, v in expected.items())
    handler = LineHandler(log_format, stream=io.StringIO())
    state = {"request_id": request_id, "key_name": key}
    scope = {"method": "POST"}
    route = "/v1/chat/completions"
    _log_line(scope, state, route, 200, ms, model, tool_calls, answered_by, handler)
    handler.close()
    [line] = handler.writer.stream.getvalue().splitlines()  # type: ignore[attr-defined]
    if log_format == "text":
        assert line.endswith(f" INFO    toolwire.access: {message}")
    else:
        record = json.loads(line)
        assert list(record)[:4] == ["time", "level", "logger", "message"]
        assert record["message"] == message
        assert {k: record[k] for k in list(record)[4:]} == expected


def test_the_direct_access_line_is_used_only_where_the_record_would_go_nowhere_else(
    restore_loggers: None,
) -> None:
    configure_logging("info", "text")
    handler = access_handler()
    assert isinstance(handler, LineHandler)
    logging.getLogger("toolwire").addHandler(logging.NullHandler())  # the CLI adds one
    assert access_handler() is handler
    access = logging.getLogger("toolwire.access")
    other = logging.NullHandler()
    access.addHandler(other)  # e.g. pytest's caplog, or an operator's own handler
    assert access_handler() is None
    access.removeHandler(other)
    access.addFilter(lambda record: True)
    assert access_handler() is None
    access.filters.clear()
    logging.getLogger("toolwire").setLevel("WARNING")
    assert access_handler() is None
    logging.getLogger("toolwire").setLevel("INFO")
    assert access_handler() is handler


def test_configure_logging_again_flushes_the_lines_of_the_handler_it_replaces(
    restore_loggers: None,
) -> None:
    configure_logging("info", "text")
    first = access_handler()
    assert first is not None
    stream = io.StringIO()
    first.writer.stream = stream
    first.writer.interval = 60
    logging.getLogger("toolwire.server").info("before the second call")
    configure_logging("info", "json")
    assert "before the second call" in stream.getvalue()
    second = access_handler()
    assert second is not None
    assert second is not first
    assert second.json
    # One handler for every logger: their lines in the order they were logged.
    assert logging.getLogger("uvicorn.error").handlers == [second]


def _serve(tmp_path: Path, *extra: str) -> ServeProcess:
    config = tmp_path / "toolwire.yaml"
    config.write_text(json.dumps({"store": "memory"}))
    env = {**os.environ, "TOOLWIRE_LOG_LEVEL": "info", "NO_COLOR": "1"}
    return ServeProcess(config, env, *extra)


def _access_ids(output: list[str]) -> list[str]:
    ids = []
    for line in output:
        if "toolwire.access" in line and "request_id=t-" in line:
            ids.append(line.split("request_id=")[1].split()[0])
    return ids


def test_every_access_line_is_written_in_order_before_the_process_ends_on_sigterm(
    tmp_path: Path,
) -> None:
    gateway = _serve(tmp_path)
    sent = [f"t-{n}" for n in range(300)]
    with gateway.http() as http:
        for rid in sent:
            assert http.get("/healthz", headers={"X-Request-Id": rid}).status_code == 200
    gateway.proc.send_signal(signal.SIGTERM)
    gateway._close()
    assert _access_ids(gateway.output) == sent


def test_a_kill_9_loses_no_line_older_than_the_flush_interval(tmp_path: Path) -> None:
    gateway = _serve(tmp_path, "--log-format", "json")
    sent = [f"t-{n}" for n in range(100)]
    with gateway.http() as http:
        for rid in sent:
            assert http.get("/healthz", headers={"X-Request-Id": rid}).status_code == 200
    threading.Event().wait(1.0)  # a hundred flush intervals
    gateway.kill()
    ids = [
        json.loads(line)["request_id"]
        for line in gateway.output
        if line.startswith("{") and '"request_id":"t-' in line
    ]
    assert ids == sent
