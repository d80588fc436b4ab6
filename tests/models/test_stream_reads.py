"""`read_deltas`: the deltas of one read of an upstream stream are those of its chunks fed
one by one, joined; the fast path for plain text chunks changes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.models import ModelDelta
from toolwire.models.openai import _coalesced, read_deltas
from toolwire.models.openai_wire import ChatStreamAssembler
from toolwire.models.sse import SSEDecoder


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c", "model": "m", "choices": [choice], **extra}


CHUNKS = st.one_of(
    st.builds(lambda t: _chunk({"content": t}), st.text(max_size=3)),
    st.builds(lambda t: _chunk({"reasoning_content": t}), st.text(min_size=1, max_size=3)),
    st.builds(lambda t: _chunk({"content": t}, "stop"), st.text(max_size=3)),
    st.builds(lambda t: _chunk({"content": t, "role": "assistant"}), st.text(max_size=3)),
    st.builds(
        lambda i, a: _chunk(
            {"tool_calls": [{"index": i, "id": f"t{i}", "function": {"name": "f", "arguments": a}}]}
        ),
        st.integers(0, 2),
        st.text(max_size=3),
    ),
    st.just({"id": "c", "model": "m", "choices": [], "usage": {"prompt_tokens": 1}}),
    st.just(
        {
            "id": "c",
            "model": "m",
            "choices": [{"index": 1, "delta": {"content": "other choice"}}],
        }
    ),
)


def _one_by_one(chunks: list[dict[str, Any]]) -> list[ModelDelta]:
    assembler = ChatStreamAssembler()
    out: list[ModelDelta] = []
    for chunk in chunks:
        out += assembler.feed(chunk)
    return _coalesced(out)


@settings(max_examples=200, deadline=None)
@given(st.lists(CHUNKS, max_size=30), st.integers(1, 64))
def test_a_read_gives_the_chunks_deltas_joined(chunks: list[dict[str, Any]], size: int) -> None:
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    decoder, assembler = SSEDecoder(), ChatStreamAssembler()
    got: list[ModelDelta] = []
    for start in range(0, len(body), size):
        batch, done = read_deltas(body[start : start + size], decoder, assembler)
        assert not done
        got += batch
    assert _coalesced(got) == _one_by_one(chunks)
    reference = ChatStreamAssembler()
    for chunk in chunks:
        reference.feed(chunk)
    assert assembler.finish() == reference.finish()


WRITERS: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "orjson": lambda c: b"data: " + orjson.dumps(c) + b"\n\n",
    # Every non-ASCII character and emoji as \u escapes (surrogate pairs), no space.
    "ascii": lambda c: b"data:" + json.dumps(c, separators=(",", ":")).encode() + b"\n\n",
    "crlf": lambda c: b"data: " + orjson.dumps(c) + b"\r\n\r\n",
}
TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=4) | st.sampled_from(
    ['"', "\\", "\n", "é", "😀", "\u2028", "\x1f", "a\\b"]
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.builds(lambda t: _chunk({"content": t}), TEXT),
            st.builds(lambda t: _chunk({"content": t}, "stop"), TEXT),
            st.just({"id": "c", "model": "m", "choices": [], "usage": {"prompt_tokens": 1}}),
            st.builds(
                lambda a: _chunk(
                    {"tool_calls": [{"index": 0, "id": "t", "function": {"arguments": a}}]}
                ),
                TEXT,
            ),
        ),
        max_size=80,
    ),
    st.integers(1, 4096),
    st.sampled_from(sorted(WRITERS)),
)
def test_runs_of_text_chunks_read_from_the_bytes_give_the_same_deltas(
    chunks: list[dict[str, Any]], size: int, writer: str
) -> None:
    # Long runs of text chunks in large reads: the path that reads a run from the bytes.
    chunks = [_chunk({"content": "start"}), *chunks]
    body = b"".join(WRITERS[writer](c) for c in chunks) + b"data: [DONE]\n\n"
    decoder, assembler = SSEDecoder(), ChatStreamAssembler()
    got: list[ModelDelta] = []
    done = False
    for start in range(0, len(body), size):
        batch, done = read_deltas(body[start : start + size], decoder, assembler)
        got += batch
    assert done
    assert _coalesced(got) == _one_by_one(chunks)


@settings(max_examples=200, deadline=None)
@given(st.lists(CHUNKS, max_size=30), st.integers(1, 4096))
def test_without_joining_each_chunk_is_its_own_deltas(
    chunks: list[dict[str, Any]], size: int
) -> None:
    chunks = [_chunk({"content": "start"}), *chunks]
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    decoder, assembler = SSEDecoder(), ChatStreamAssembler()
    got: list[ModelDelta] = []
    for start in range(0, len(body), size):
        batch, _ = read_deltas(body[start : start + size], decoder, assembler, join=False)
        got += batch
    reference = ChatStreamAssembler()
    expected: list[ModelDelta] = []
    for chunk in chunks:
        expected += reference.feed(chunk)
    assert got == expected
    assert assembler.finish() == reference.finish()


def test_a_text_chunk_of_the_learnt_shape_is_read_from_its_bytes() -> None:
    from toolwire.models.openai_wire import TextChunkShape, plain_text

    first = orjson.dumps(_chunk({"content": "Hel"}))
    shape = TextChunkShape()
    text = plain_text(orjson.loads(first))
    assert text == "Hel"
    assert shape.text(first) is None  # nothing learnt yet
    shape.learn(first, text)
    assert shape.text(first) == "Hel"
    assert shape.text(orjson.dumps(_chunk({"content": "lo, wörld"}))) == "lo, wörld"
    assert shape.text(orjson.dumps(_chunk({"content": ""}))) == ""
    # Anything the template cannot vouch for is decoded as JSON instead.
    assert shape.text(orjson.dumps(_chunk({"content": 'say "hi"'}))) is None
    assert shape.text(orjson.dumps(_chunk({"content": "a\\nb"}))) is None
    assert shape.text(orjson.dumps(_chunk({"content": "x"}, "stop"))) is None
    assert shape.text(orjson.dumps({**_chunk({"content": "x"}), "id": "other"})) is None
    prefix = first[: first.index(b"Hel")]
    assert shape.text(prefix + b"\xff" + first[first.index(b"Hel") + 3 :]) is None


def test_a_chunk_whose_content_needs_decoding_teaches_no_shape() -> None:
    from toolwire.models.openai_wire import TextChunkShape

    shape = TextChunkShape()
    shape.learn(orjson.dumps(_chunk({"content": 'a "quote"'})), 'a "quote"')
    assert shape.text(orjson.dumps(_chunk({"content": "plain"}))) is None


def _marked(delta: dict[str, Any], finish: str | None = None) -> tuple[bytes, bytes]:
    """The bytes of a chunk before and after its content (the marker `@@`)."""
    data = orjson.dumps(_chunk({**delta, "content": "@@"}, finish, logprobs=None))
    head, _, tail = data.partition(b"@@")
    return head, tail


_HEAD, _TAIL = _marked({})


def _raw(content: bytes) -> bytes:
    return b"data: " + _HEAD + content + _TAIL + b"\n\n"


# Events a run of text chunks may meet, most of them malformed: contents that are not
# valid JSON on their own (a lone backslash, half an escape or surrogate pair, half a UTF-8
# character, a raw quote or control character), contents only valid joined, chunks that
# look like the shape but are not, and SSE lines that are not `data:` ones.
ODD_EVENTS = [
    _raw(b"\\"),
    _raw(b"a\\"),
    _raw(b"\\\\"),
    _raw(b"\\u00"),
    _raw(b"e9"),
    _raw(b"\\u0000"),
    _raw(b"\\u0000x"),
    _raw(b"\\ud83d"),
    _raw(b"\\ude00"),
    _raw(b"\\ud83d\\ude00"),
    _raw(b"\xc3"),
    _raw(b"\xa9"),
    _raw(b"\xc3\xa9"),
    _raw(b'a"b'),
    _raw(b"\t"),
    _raw(b"x\ndata: y"),
    _raw(b'\\"'),
    b"data: " + _HEAD[:-1] + _TAIL + b"\n\n",
    b"data:" + _HEAD + b"no space" + _TAIL + b"\n\n",
    b"data: " + _HEAD + b"two" + _TAIL + b"\ndata: " + _HEAD + b"lines" + _TAIL + b"\n\n",
    b": a comment\n\n",
    b"\n",
    b"event: message\n",
    b"data: " + b"".join(_marked({"role": "assistant"})).replace(b"@@", b"r") + b"\n\n",
    b"data: " + b"".join(_marked({}, "stop")).replace(b"@@", b"end") + b"\n\n",
    b'data: {"choices": []}\n\n',
]


class _RegexOnly:
    """Reads a stream as before the line split: `TextChunkShape.run` by its regexes only."""

    def __init__(self, assembler: ChatStreamAssembler) -> None:
        from toolwire.models.openai_wire import TextChunkShape

        class Shape(TextChunkShape):
            __slots__ = ()

            def _line_run(self, piece: bytes, pos: int) -> tuple[str, int] | None:
                return None

        assembler.shape = Shape()


def _read(body: bytes, size: int, *, regex_only: bool) -> tuple[list[ModelDelta], str, bool]:
    """The deltas of a first text chunk then `body` read `size` bytes at a time, the error
    that ended it (if any) and whether `[DONE]` came."""
    decoder, assembler = SSEDecoder(), ChatStreamAssembler()
    if regex_only:
        _RegexOnly(assembler)
    got, _ = read_deltas(_raw(b"start"), decoder, assembler)  # the shape, learnt
    try:
        for start in range(0, len(body), size):
            batch, done = read_deltas(body[start : start + size], decoder, assembler)
            got += batch
            if done:
                return _coalesced(got), "", True
    except Exception as exc:  # the test compares them
        return _coalesced(got), f"{type(exc).__name__}: {exc}", False
    return _coalesced(got), "", False


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.builds(lambda t: _raw(orjson.dumps(t)[1:-1]), TEXT),
            st.builds(lambda t: _raw(json.dumps(t)[1:-1].encode()), TEXT),
            st.sampled_from(ODD_EVENTS),
        ),
        max_size=60,
    ),
    st.integers(1, 4096),
)
def test_the_line_split_reads_runs_as_the_regexes_did(events: list[bytes], size: int) -> None:
    # The fast path of `TextChunkShape.run` gives the deltas, the error or the end the
    # regexes gave, whatever it meets amid a run (most of it what it must turn down).
    body = b"".join(events) + b"data: [DONE]\n\n"
    assert _read(body, size, regex_only=False) == _read(body, size, regex_only=True)


def test_a_run_is_read_from_the_events_of_a_read() -> None:
    from toolwire.models.openai_wire import TextChunkShape

    shape = TextChunkShape()
    shape.learn(_HEAD + b"x" + _TAIL, "x")
    run = _raw(b"a") + _raw(b'\\"') + _raw(b"\\n") + _raw("é".encode()) + _raw(b"")
    piece = b"junk" + run + b"data: " + _HEAD + b"cut o"
    assert shape._line_run(piece, 4) == ('a"\né', 4 + len(run))
    # The end of a run: the first event that is not a chunk of the shape.
    stop = b"data: " + b"".join(_marked({}, "stop")).replace(b"@@", b"end") + b"\n\n"
    for other in (b": comment\n\n", stop, b"data: " + _HEAD[:-1] + _TAIL + b"\n\n"):
        assert shape._line_run(_raw(b"a") + _raw(b"b") + other, 0) == ("ab", 2 * len(_raw(b"a")))
    # What it cannot vouch for is left to the regexes.
    assert shape._line_run(_raw(b"a") + _raw(b"\\"), 0) is None
    # A separator swallowed by a lone backslash, a NUL written by a content: the counts.
    assert shape._line_run(_raw(b"a\\") + _raw(b"b"), 0) is None
    assert shape._line_run(_raw(b"\\u0000") + _raw(b"a\\") + _raw(b"b"), 0) is None
    assert shape._line_run(_raw(b"\\ud83d") + _raw(b"\\ude00"), 0) is None
    assert shape._line_run(b"data: " + _HEAD[:-1] + _TAIL + b"\n\n", 0) is None
    assert shape._line_run(b"data: " + _HEAD + b"cut o", 0) is None
