"""What every fake model server of tests/agents shares: a threaded HTTP server on 127.0.0.1 for a `with` block.

A fake subclasses `FakeServer` and hands it its request handler, a subclass of
`Handler` (quiet, HTTP/1.1, with helpers to read a body and send an answer or
a stream). What each fake logs and answers is its own (fake_anthropic.py,
fake_openai.py, fake_gemini.py). Standard library only; loopback only.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: each fake logs its requests itself
        pass

    def read_body(self, empty: bytes = b"") -> bytes:
        """The request body (`empty` when there is none)."""
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else empty

    def send(
        self,
        status: int,
        payload: bytes = b"",
        content_type: "str | None" = "application/json",
        headers: tuple = (),
    ) -> None:
        """One whole answer (`content_type` None: no such header); a HEAD request gets no body."""
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD" and payload:
            self.wfile.write(payload)

    def send_json(self, status: int, data) -> None:
        self.send(status, json.dumps(data).encode())

    def stream(self, chunks, headers: tuple = ()) -> None:
        """A server-sent event stream of `chunks` (bytes, each flushed), then the connection closes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True


class FakeServer:
    """Serves `handler` on 127.0.0.1 (a free port) from `with fake:` to the block's end."""

    def __init__(self, handler):
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def log(self, where: list, item) -> int:
        """Append `item` to the request log `where` (thread-safe); how many it holds then."""
        with self._lock:
            where.append(item)
            return len(where)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
