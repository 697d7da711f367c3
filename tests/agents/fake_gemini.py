"""A scripted fake of the Gemini API (`:generateContent` and `:streamGenerateContent?alt=sse`), on 127.0.0.1.

Gemini CLI talks to it through GOOGLE_GEMINI_BASE_URL. Every request body is
logged (`server.requests`, with `server.paths`). The main conversation's reply
comes from the script: a callable `script(body) -> step`, or a list of steps
picked by how many tool results (`functionResponse` parts) the request
carries. A step is `{"text": ...}` or `{"call": NAME, "arguments": {...}}`,
NAME being a tool name or a predicate on the offered names. Side requests
(JSON-schema ones, such as the CLI's routing or next-speaker checks) get a
small JSON answer and are logged apart in `server.side_requests`. Standard
library only.
"""

import json
import threading
from urllib.parse import urlparse

from fakeserver import FakeServer, Handler

MODEL = "gemini-2.5-pro"


def tool_names(body: dict) -> "list[str]":
    """The function names the request offers the model."""
    names = []
    for tool in body.get("tools") or []:
        for decl in (tool or {}).get("functionDeclarations") or []:
            if isinstance(decl, dict) and decl.get("name"):
                names.append(decl["name"])
    return names


def _parts(body: dict):
    for content in body.get("contents") or []:
        for part in (content or {}).get("parts") or []:
            if isinstance(part, dict):
                yield part


def tool_results(body: dict) -> "list[dict]":
    """The functionResponse parts of the request, oldest first."""
    return [p["functionResponse"] for p in _parts(body) if isinstance(p.get("functionResponse"), dict)]


def request_text(body: dict) -> str:
    """Everything the model was shown in one request, as one string (for `in` checks)."""
    return json.dumps(
        {"systemInstruction": body.get("systemInstruction"), "contents": body.get("contents")},
        ensure_ascii=False,
    )


def _is_side_request(body: dict) -> bool:
    config = body.get("generationConfig") or {}
    return config.get("responseMimeType") == "application/json" or bool(
        config.get("responseJsonSchema") or config.get("responseSchema")
    )


class FakeGemini(FakeServer):
    """`with FakeGemini(script) as fake:` ... `fake.base_url` is the value for GOOGLE_GEMINI_BASE_URL."""

    def __init__(self, script):
        self.script = script
        self.requests: list = []  # main-conversation request bodies
        self.side_requests: list = []
        self.paths: list = []
        self.calls: list = []  # (request index, tool name) of each call the fake made the model emit
        fake = self

        class GeminiHandler(Handler):
            _json = Handler.send_json

            def do_GET(self):
                fake.log(fake.paths, ("GET", self.path))
                self._json(
                    200,
                    {
                        "models": [
                            {
                                "name": f"models/{MODEL}",
                                "supportedGenerationMethods": [
                                    "generateContent",
                                    "streamGenerateContent",
                                    "countTokens",
                                ],
                            }
                        ]
                    },
                )

            def do_POST(self):
                body = json.loads(self.read_body(b"{}") or b"{}")
                path = urlparse(self.path).path
                fake.log(fake.paths, ("POST", self.path))
                if path.endswith(":countTokens"):
                    return self._json(200, {"totalTokens": 10})
                if path.endswith(":embedContent") or path.endswith(":batchEmbedContents"):
                    return self._json(200, {"embedding": {"values": [0.0] * 8}})
                if not (path.endswith(":generateContent") or path.endswith(":streamGenerateContent")):
                    return self._json(404, {"error": {"code": 404, "message": f"fake: no {path}"}})
                if _is_side_request(body):
                    fake.log(fake.side_requests, body)
                    text = json.dumps(
                        {
                            "reasoning": "fake",
                            "next_speaker": "user",
                            "model_choice": "pro",
                            "complexity_reasoning": "fake",
                            "complexity_score": 1,
                        }
                    )
                    response = fake._response({"text": text})
                else:
                    index = fake.log(fake.requests, body) - 1
                    response = fake._response(fake._step(body), body, index)
                if path.endswith(":streamGenerateContent"):
                    self.stream([b"data: " + json.dumps(response).encode() + b"\r\n\r\n"])
                else:
                    self._json(200, response)

        super().__init__(GeminiHandler)

    @property
    def base_url(self) -> str:
        return self.url

    def _step(self, body: dict) -> dict:
        if callable(self.script):
            return self.script(body)
        return self.script[min(len(tool_results(body)), len(self.script) - 1)]

    def _response(self, step: dict, body: "dict | None" = None, index: int = -1) -> dict:
        if "call" in step:
            name = step["call"]
            if callable(name):
                name = next((t for t in tool_names(body or {}) if name(t)), None) or "missing_tool"
            self.calls.append((index, name))
            part = {"functionCall": {"name": name, "args": step.get("arguments", {})}}
        else:
            part = {"text": step["text"]}
        return {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": MODEL,
        }


class ProxySink:
    """An HTTP(S) proxy on 127.0.0.1 that forwards nothing: it records each request line and answers 403.

    Point HTTPS_PROXY / HTTP_PROXY at `url` with NO_PROXY=127.0.0.1: any attempt to leave loopback lands
    in `attempts` (Gemini CLI sends every request through such a proxy, the fake's too without NO_PROXY).
    """

    def __init__(self):
        import socket

        self.attempts: list = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(50)
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self):

        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    first = conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
                    self.attempts.append(first)
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()
