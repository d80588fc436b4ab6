"""Text a client chose (field names, tool-call ids, model ids), made safe to put where
it was never meant to go in full: a response header or a log line.

A header value must be printable ASCII, and an HTTP client reads only so much of it
(the official SDKs' client refuses a header over 64 KB); a log line must stay one line.
So a header carries a bounded summary, percent-encoded, and a log field an escaped,
shortened copy. Neither is the place for the whole text: the request has it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final
from urllib.parse import quote

__all__ = [
    "HEADER_ITEMS",
    "HEADER_ITEM_CHARS",
    "HEADER_VALUE_CAP",
    "LOG_FIELD_CHARS",
    "header_list",
    "log_text",
]

HEADER_VALUE_CAP: Final = 1024
"""Bytes of a listing header's value at most: the few names a person needs to see what
went wrong, far below any client's or proxy's header limit (8 KB is common)."""
HEADER_ITEMS: Final = 16
"""Names listed at most; the count header says how many there were."""
HEADER_ITEM_CHARS: Final = 64
"""Characters of one name (as encoded) at most; a shortened name ends in `%E2%80%A6` (…)."""
LOG_FIELD_CHARS: Final = 200
"""Characters of a client-chosen log field at most (before escaping)."""

_SAFE: Final = "!#$&'()*+-./:;<=>?@[]^_`{|}~"
"""Printable ASCII kept as it is in a header value; a comma separates, so it is encoded."""
_ELLIPSIS: Final = "%E2%80%A6"


def header_list(values: Sequence[str]) -> tuple[str, bool]:
    """`values` as a header value: comma-separated, each percent-encoded where it is not
    printable ASCII (or is a comma) and shortened to `HEADER_ITEM_CHARS`, at most
    `HEADER_ITEMS` of them and `HEADER_VALUE_CAP` bytes in all (the first ones kept);
    and whether that is all of them, whole."""
    listed: list[str] = []
    whole = len(values) <= HEADER_ITEMS
    size = 0
    for value in values[:HEADER_ITEMS]:
        # Encoding a long value whole would cost what the client chose to send: only the
        # start can be shown, so only the start is encoded.
        item = quote(value[:HEADER_ITEM_CHARS], safe=_SAFE)
        if len(item) > HEADER_ITEM_CHARS or len(value) > HEADER_ITEM_CHARS:
            item = _shorten(item, HEADER_ITEM_CHARS - len(_ELLIPSIS)) + _ELLIPSIS
            whole = False
        size += len(item) + (1 if listed else 0)
        if size > HEADER_VALUE_CAP:
            return ",".join(listed), False
        listed.append(item)
    return ",".join(listed), whole


def _shorten(encoded: str, limit: int) -> str:
    cut = encoded[:limit]
    # Never end inside an escape: `%E2%8` would decode to garbage.
    tail = cut.rfind("%", max(0, len(cut) - 2))
    return cut[:tail] if tail != -1 else cut


def log_text(value: str, limit: int = LOG_FIELD_CHARS) -> str:
    """`value` for a log line: control characters (a newline would forge a line) escaped
    as Python does in a `repr`, and at most `limit` characters of it, then `…`."""
    short = value[:limit]
    escaped = short if short.isprintable() else short.encode("unicode_escape").decode("ascii")
    return escaped + "…" if len(value) > limit else escaped
