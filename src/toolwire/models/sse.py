"""Server-sent events: the `data` of each event, from the raw bytes of a stream."""

from __future__ import annotations

__all__ = ["MAX_EVENT_BYTES", "SSEDecoder", "SSETooLarge"]

MAX_EVENT_BYTES = 32 * 1024 * 1024
"""The default cap on one event (or one line) of a stream."""


class SSETooLarge(Exception):
    """One event or line of the stream is over the decoder's cap."""


class SSEDecoder:
    """The `data` of server-sent events, from the raw bytes of a stream.

    `feed(bytes)` returns the data of each event completed by those bytes (multi-line data
    joined with `\\n`), `finish()` the data of an event left without its closing blank
    line. Works on bytes throughout (orjson reads bytes), splits lines on `\\n`, `\\r\\n`
    and `\\r`, and ignores comments and the `event`, `id` and `retry` fields.
    """

    __slots__ = ("_cr", "_data", "_data_len", "_limit", "_tail", "_tail_len")

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._tail: list[bytes] = []
        """The start of a line not ended yet, in pieces: joined once the line ends, so a
        long line costs its length, not its length squared."""
        self._tail_len = 0
        self._data: list[bytes] = []
        self._data_len = 0
        self._cr = False
        self._limit = max_event_bytes

    @property
    def idle(self) -> bool:
        """Whether nothing is held: the next bytes start a new line of a new event."""
        return not (self._tail or self._data or self._cr)

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of the events completed by `chunk`."""
        if self._cr:
            # A `\r\n` cut between two chunks: the `\r` already ended the line.
            self._cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._cr = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in chunk:
            self._tail.append(chunk)
            self._tail_len += len(chunk)
            if self._tail_len > self._limit:
                raise SSETooLarge(f"a line of the stream is over {self._limit} bytes")
            return []
        if self._tail:
            self._tail.append(chunk)
            chunk = b"".join(self._tail)
            self._tail.clear()
        lines = chunk.split(b"\n")
        last = lines.pop()
        if last:
            self._tail.append(last)
        self._tail_len = len(last)
        out: list[bytes] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    out.append(data[0] if len(data) == 1 else b"\n".join(data))
                    data.clear()
                    self._data_len = 0
            elif line.startswith(b"data:"):
                piece = line[6:] if line[5:6] == b" " else line[5:]
                self._data_len += len(piece)
                if self._data_len > self._limit:
                    raise SSETooLarge(f"an event of the stream is over {self._limit} bytes")
                data.append(piece)
        return out

    def finish(self) -> list[bytes]:
        """The data of an event the stream left unterminated, if any."""
        out = self.feed(b"\n\n") if self._tail or self._data else []
        self._tail.clear()
        self._tail_len = 0
        self._data.clear()
        self._data_len = 0
        return out
