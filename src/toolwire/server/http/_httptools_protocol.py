"""uvicorn's httptools protocol with the header deadline and the JSON 400 (kept apart so
that a missing `httptools` only makes `toolwire.server.http.serving` fall back to h11)."""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from toolwire.server.http.header_deadline import HeaderDeadlineMixin

__all__ = ["HttpToolsWithHeaderDeadline"]


class HttpToolsWithHeaderDeadline(HeaderDeadlineMixin, HttpToolsProtocol):
    """uvicorn's httptools protocol with the header deadline and the JSON 400."""
