"""Tool-call ids rewritten to what an upstream accepts, and mapped back.

Clients make up their own call ids (`call_abc…`, `toolu_…`, UUIDs, anything); some
upstreams accept only a narrow form: Anthropic `^[a-zA-Z0-9_-]+$`, Mistral exactly nine
letters or digits. An `IdMap` rewrites every id of one request deterministically and
without collisions, and maps the upstream's ids back, so the client only ever sees its own.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final, Literal

__all__ = ["IdMap", "IdStyle", "id_style_for"]

IdStyle = Literal["keep", "anthropic", "mistral"]
"""`keep`: ids go upstream as they are; `anthropic`: `[a-zA-Z0-9_-]`, at most 64
characters; `mistral`: exactly nine letters or digits."""

_ANTHROPIC: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ANTHROPIC_BAD: Final = re.compile(r"[^A-Za-z0-9_-]")
_MISTRAL: Final = re.compile(r"[A-Za-z0-9]{9}")
_BASE62: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_MISTRAL_FAMILY: Final = ("mistral", "mixtral", "magistral", "devstral", "ministral", "codestral")


def id_style_for(model: str) -> IdStyle:
    """The id style an OpenAI-compatible server needs for `model`: Mistral-family models
    served with Mistral's tokenizer reject anything but nine-character ids."""
    lowered = model.lower()
    return "mistral" if any(name in lowered for name in _MISTRAL_FAMILY) else "keep"


class IdMap:
    """The id rewriting of one upstream request.

    `upstream(client_id)` is stable within the map (the same client id always gives the
    same upstream id, and two client ids never share one); `client(upstream_id)` undoes it,
    and returns ids the map never issued (new calls from the upstream) unchanged.
    """

    __slots__ = ("_style", "_to_client", "_to_upstream")

    def __init__(self, style: IdStyle) -> None:
        self._style = style
        self._to_upstream: dict[str, str] = {}
        self._to_client: dict[str, str] = {}

    @property
    def style(self) -> IdStyle:
        return self._style

    def upstream(self, client_id: str) -> str:
        """The id to send upstream for `client_id`."""
        if self._style == "keep":
            return client_id
        known = self._to_upstream.get(client_id)
        if known is not None:
            return known
        candidate = client_id if self._valid(client_id) else self._rewrite(client_id, 0)
        salt = 0
        while candidate in self._to_client and self._to_client[candidate] != client_id:
            salt += 1
            candidate = self._rewrite(client_id, salt)
        self._to_upstream[client_id] = candidate
        self._to_client[candidate] = client_id
        return candidate

    def client(self, upstream_id: str) -> str:
        """The client's id for `upstream_id` (unchanged when this map did not issue it)."""
        return self._to_client.get(upstream_id, upstream_id)

    def _valid(self, call_id: str) -> bool:
        pattern = _ANTHROPIC if self._style == "anthropic" else _MISTRAL
        return pattern.fullmatch(call_id) is not None

    def _rewrite(self, call_id: str, salt: int) -> str:
        digest = hashlib.sha256(f"{salt}:{call_id}".encode()).digest()
        if self._style == "mistral":
            number = int.from_bytes(digest[:8])
            chars = []
            for _ in range(9):
                number, rem = divmod(number, 62)
                chars.append(_BASE62[rem])
            return "".join(chars)
        # Keep what is readable of the original and add a short digest, so two ids that
        # differ only in replaced characters stay distinct.
        cleaned = _ANTHROPIC_BAD.sub("_", call_id)[:48] or "call"
        return f"{cleaned}_{digest[:6].hex()}"
