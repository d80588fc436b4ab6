"""An OpenAI-compatible upstream, run as its own process (`python slow_upstream.py SECONDS`),
that answers at once except large requests, which it holds for SECONDS (as a model would
while it generates). It prints its port on the first line.

A process of its own: in the test's process, its threads reading hundreds of megabytes
would compete for the GIL with the client whose latency the test measures.
"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LARGE = 1_000_000
"""Bytes from which a request is held."""


class _Handler(BaseHTTPRequestHandler):
    hold = 0.0

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self) -> None:
        size = int(self.headers.get("content-length", 0))
        self.rfile.read(size)
        if size > LARGE:
            time.sleep(self.hold)
        self._send(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    def _send(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    _Handler.hold = float(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
