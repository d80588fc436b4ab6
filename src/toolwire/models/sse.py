"""Server-sent events: the `data` of each event, from the raw bytes of a stream."""

from __future__ import annotations

__all__ = ["SSEDecoder"]


class SSEDecoder:
    """The `data` of server-sent events, from the raw bytes of a stream.

    `feed(bytes)` returns the data of each event completed by those bytes (multi-line data
    joined with `\\n`), `finish()` the data of an event left without its closing blank
    line. Works on bytes throughout (orjson reads bytes), splits lines on `\\n`, `\\r\\n`
    and `\\r`, and ignores comments and the `event`, `id` and `retry` fields.
    """

    __slots__ = ("_cr", "_data", "_tail")

    def __init__(self) -> None:
        self._tail = b""
        self._data: list[bytes] = []
        self._cr = False

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
        if self._tail:
            chunk = self._tail + chunk
        lines = chunk.split(b"\n")
        self._tail = lines.pop()
        out: list[bytes] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    out.append(data[0] if len(data) == 1 else b"\n".join(data))
                    data.clear()
            elif line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
        return out

    def finish(self) -> list[bytes]:
        """The data of an event the stream left unterminated, if any."""
        out = self.feed(b"\n\n") if self._tail or self._data else []
        self._tail = b""
        self._data.clear()
        return out
