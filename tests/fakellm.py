"""A tiny fake LLM HTTP server for tests (standard library only, never touches the network).

It speaks just enough of the OpenAI chat API (``POST /v1/chat/completions``) and of
Ollama's (``POST /api/chat`` and ``POST /api/show``) for ``litellm.completion`` to work
against it.  Replies are scripted with :meth:`FakeLLM.enqueue`; every request received is
recorded in :attr:`FakeLLM.requests`. ``FakeLLM(refuse_formats={"json_schema"})`` answers a chat
call asking for that ``response_format`` type with HTTP 500, as llama.cpp's server does.  Use it as a context manager::

    with FakeLLM() as llm:
        llm.enqueue("hello")
        litellm.completion(model="openai/x", api_base=llm.openai_base, api_key="fake", ...)

For ``ollama_chat/`` also set ``OLLAMA_API_BASE=llm.ollama_base``: litellm 1.110 POSTs
``/api/show`` to that env var (default http://localhost:11434), ignoring ``api_base``.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeLLM", "Reply", "NO_REPLY_BODY"]

NO_REPLY_BODY = "fakellm: no reply queued"
OPENAI_CHAT_PATH = "/v1/chat/completions"
OLLAMA_CHAT_PATH = "/api/chat"
OLLAMA_SHOW_PATH = "/api/show"
CHAT_PATHS = (OPENAI_CHAT_PATH, OLLAMA_CHAT_PATH)

# What /api/show answers.  litellm 1.110 only reads "template" (does it mention tools?)
# and any "*context_length" key of "model_info" (max tokens); empty values are fine and
# give max_tokens=None, supports_function_calling=False.
OLLAMA_SHOW_REPLY = {"modelfile": "", "parameters": "", "template": "", "details": {}, "model_info": {}}


@dataclasses.dataclass
class Reply:
    """One scripted answer to a chat call (see :meth:`FakeLLM.enqueue`)."""

    content: str | None = None
    status: int = 200
    body: str | bytes | dict | list | None = None
    raw: str | bytes | None = None
    delay: float = 0.0
    prompt_tokens: int = 12
    completion_tokens: int = 7
    finish_reason: str = "stop"


# llama.cpp's server (llama-cpp-python 0.3.x) answers a json_schema response_format with HTTP 500 and this.
LLAMA_CPP_REFUSAL = {
    "error": {
        "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
        "'ctx': {'expected': \"'text' or 'json_object'\"}}",
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # FakeLLM.stop() joins the handler threads itself, with a deadline

    def __init__(self, fake: FakeLLM):
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request, client_address):
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="fakellm-request",
            daemon=True,
        )
        self.fake._track(thread)
        thread.start()

    def handle_error(self, request, client_address):
        """Stay silent (the default prints a traceback to stderr)."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: no idle keep-alive threads
    timeout = 10  # a client that connects and never sends cannot pin a thread forever

    def log_message(self, format, *args):  # noqa: A002 - signature fixed by the base class
        """No access log on stderr."""

    # -- plumbing -----------------------------------------------------------------------

    def _read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length > 0 else b""
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return None

    def _send(self, status: int, body: Any, content_type: str | None = None) -> None:
        if isinstance(body, (dict, list)):
            payload = json.dumps(body).encode("utf-8")
            content_type = content_type or "application/json"
        elif isinstance(body, bytes):
            payload = body
        else:
            payload = str(body).encode("utf-8")
        content_type = content_type or "text/plain; charset=utf-8"
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except OSError:  # client gave up (timeout) before we answered
            pass

    # -- verbs --------------------------------------------------------------------------

    def do_GET(self):  # noqa: N802
        self.server.fake._record("GET", self.path, None)
        self._send(404, {"error": f"fakellm: no GET {self.path}"})

    def do_POST(self):  # noqa: N802
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        data = self._read_json()
        fake._record("POST", self.path, data)

        if path == OLLAMA_SHOW_PATH:
            self._send(200, OLLAMA_SHOW_REPLY)
            return
        if path not in CHAT_PATHS:
            self._send(404, {"error": f"fakellm: no POST {path}"})
            return
        if isinstance(data, dict) and data.get("stream") is True:
            self._send(400, {"error": "fakellm: streaming is not supported"})
            return

        asked = data.get("response_format") if isinstance(data, dict) else None
        form = asked.get("type") if isinstance(asked, dict) else None
        if form in fake.refuse_formats:
            self._send(500, LLAMA_CPP_REFUSAL)  # refused before any reply is consumed, as llama.cpp does
            return
        reply = fake._next_reply()
        if reply is None:
            self._send(500, NO_REPLY_BODY)
            return
        if reply.delay > 0 and fake._stopping.wait(reply.delay):
            return  # server stopping: abandon the request without answering
        if reply.status != 200:
            self._send(reply.status, reply.body if reply.body is not None else "")
        elif reply.raw is not None:
            self._send(200, reply.raw, "application/json")
        else:
            model = data.get("model", "fake") if isinstance(data, dict) else "fake"
            build = _openai_reply if path == OPENAI_CHAT_PATH else _ollama_reply
            self._send(200, build(fake, model, reply))


def _openai_reply(fake: FakeLLM, model: str, reply: Reply) -> dict:
    return {
        "id": f"chatcmpl-fake{next(fake._ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content or ""},
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def _ollama_reply(fake: FakeLLM, model: str, reply: Reply) -> dict:
    return {
        "model": model,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "message": {"role": "assistant", "content": reply.content or ""},
        "done_reason": "stop",
        "done": True,
        "prompt_eval_count": reply.prompt_tokens,
        "eval_count": reply.completion_tokens,
    }


class FakeLLM:
    """A scripted OpenAI/Ollama-compatible chat server on 127.0.0.1 (a free port).

    Use as a context manager (or call :meth:`start` / :meth:`stop`).  Chat calls consume
    queued replies in order; with nothing queued they answer HTTP 500 ``NO_REPLY_BODY``.
    """

    def __init__(self, refuse_formats=()) -> None:
        # response_format types answered HTTP 500 like llama.cpp's server does ("json_schema")
        self.refuse_formats = frozenset(refuse_formats)
        self._lock = threading.Lock()
        self._queue: collections.deque[Reply] = collections.deque()
        self._requests: list[dict] = []
        self._threads: list[threading.Thread] = []
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._serve_thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> FakeLLM:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        if self._server is not None:
            raise RuntimeError("FakeLLM already started")
        self._stopping.clear()
        self._server = _Server(self)
        self._serve_thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fakellm-serve",
            daemon=True,
        )
        self._serve_thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, cut short any delayed reply, and join all server threads."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        deadline = time.monotonic() + timeout
        with self._lock:
            threads, self._threads = self._threads, []
        for thread in [self._serve_thread, *threads]:
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        self._server = None
        self._serve_thread = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- scripting ----------------------------------------------------------------------

    def enqueue(
        self,
        content: str | None = None,
        *,
        status: int = 200,
        body: str | bytes | dict | list | None = None,
        raw: str | bytes | None = None,
        delay: float = 0.0,
        prompt_tokens: int = 12,
        completion_tokens: int = 7,
        finish_reason: str = "stop",
    ) -> Reply:
        """Queue the answer to the next chat call and return it.

        - ``enqueue("text")``: a normal completion whose assistant content is ``text``.
        - ``enqueue(status=500, body="boom")``: that HTTP status with that body
          (a dict/list body is sent as JSON, anything else as text).
        - ``enqueue(raw='{...')``: HTTP 200 with exactly this body (e.g. malformed JSON).
        - ``delay=s``: sleep ``s`` seconds first (ends early, unanswered, on :meth:`stop`).
        - ``prompt_tokens`` / ``completion_tokens``: the usage reported (default 12 / 7).
        - ``finish_reason="length"``: an answer cut off at max_tokens.
        """
        if status != 200 and raw is not None:
            raise ValueError("use body= (not raw=) with a non-200 status")
        reply = Reply(content, status, body, raw, delay, prompt_tokens, completion_tokens, finish_reason)
        with self._lock:
            self._queue.append(reply)
        return reply

    # -- inspection ---------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        if self._server is None:
            raise RuntimeError("FakeLLM is not running")
        return self._server.server_address[1]

    @property
    def ollama_base(self) -> str:
        """``api_base`` for litellm ``ollama_chat/<model>``: ``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base(self) -> str:
        """``api_base`` for litellm ``openai/<model>``: ``http://127.0.0.1:<port>/v1``."""
        return f"{self.ollama_base}/v1"

    @property
    def requests(self) -> list[dict]:
        """Every request received, in order: ``{"method", "path", "json"}`` (a copy).

        ``json`` is the parsed request body, or None if absent or not JSON.
        """
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[dict]:
        """Like :attr:`requests`, but only chat calls (no ``/api/show`` or other paths)."""
        return [r for r in self.requests if r["path"].split("?", 1)[0] in CHAT_PATHS]

    def wait_for(self, path: str, count: int = 1, timeout: float = 2.0) -> list[dict]:
        """Wait until at least ``count`` requests to ``path`` arrived; return them.

        For requests litellm sends from a background thread after ``completion``
        returned (e.g. Ollama's ``/api/show``).  Raises AssertionError on timeout.
        """
        deadline = time.monotonic() + timeout
        while True:
            hits = [r for r in self.requests if r["path"].split("?", 1)[0] == path]
            if len(hits) >= count:
                return hits
            if time.monotonic() >= deadline:
                raise AssertionError(f"fakellm: {len(hits)} request(s) to {path}, wanted {count}")
            time.sleep(0.01)

    @property
    def pending(self) -> int:
        """How many queued replies have not been consumed yet."""
        with self._lock:
            return len(self._queue)

    # -- used by the handler ------------------------------------------------------------

    def _next_reply(self) -> Reply | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def _record(self, method: str, path: str, data: Any) -> None:
        with self._lock:
            self._requests.append({"method": method, "path": path, "json": data})

    def _track(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
