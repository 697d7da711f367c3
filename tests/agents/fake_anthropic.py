"""A scripted fake of the Anthropic Messages API on 127.0.0.1 (standard library only).

Claude Code, GitHub Copilot CLI (COPILOT_PROVIDER_TYPE=anthropic) and opencode
(an anthropic provider with a baseURL) all speak it, so one fake serves them.

The script is a list of steps, one per model call of the agent's main loop:
`ToolCall(name, input, text=None)` answers with a tool_use block (optionally
after some text, the way real models say "Let me run a command." first), and
`Text(text)` ends the turn. Which step a request gets is read from the request
itself: the number of assistant messages it already carries. So the fake is
stateless across sessions (each new session starts at step 0) and side
requests (titles, topic checks: requests without tools) get a short text
answer without consuming a step.

A tool name is matched against the `tools` the request offers: exactly
(ignoring case) first, then by suffix, so `ToolCall("search_memory", ...)`
finds Claude Code's `mcp__kirolearn__search_memory`, opencode's
`kirolearn_search_memory` and Copilot's `kirolearn-search_memory` alike.

Every request is logged (method, path, headers, parsed body) for the tests to
read. Streaming (`"stream": true`, server-sent events) and plain JSON answers,
HEAD and GET probes, and `count_tokens` are served. Nothing but loopback.
"""

import itertools
import json
from dataclasses import dataclass, field

from fakeserver import FakeServer, Handler

SIDE_ANSWER = "ok"  # what a request without tools (a title, a topic check) gets
# Claude Code 2.x connects MCP servers in the background and offers this tool until they are up:
# a scripted call of a tool not offered yet waits for them first, as a real model would.
WAIT_TOOLS = ("WaitForMcpServers",)


@dataclass
class ToolCall:
    name: str  # matched against the request's tools: exact (any case), then by suffix
    input: dict = field(default_factory=dict)
    text: "str | None" = None  # said before the call, in the same message


@dataclass
class Text:
    text: str


_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):024d}"


def _only_waits(message: dict) -> bool:
    content = message.get("content")
    uses = (
        [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        if isinstance(content, list)
        else []
    )
    return bool(uses) and all(b.get("name") in WAIT_TOOLS for b in uses)


def resolve_tool(name: str, tools: list) -> str:
    """The name of the offered tool that `name` means (KeyError with the offered names if none)."""
    offered = [t.get("name", "") for t in tools if isinstance(t, dict)]
    for candidate in offered:
        if candidate.lower() == name.lower():
            return candidate
    for candidate in offered:
        if candidate.lower().endswith(name.lower()):
            return candidate
    raise KeyError(f"no tool like {name!r} among {offered}")


class FakeAnthropic(FakeServer):
    """`with FakeAnthropic(script) as fake:` serves on fake.url until the block ends."""

    def __init__(self, script=None, model: str = "claude-sonnet-4-5"):
        self.script = list(script or [])
        self.model = model
        self.requests: list = []  # every request: {method, path, headers, body}
        self.errors: list = []  # what the fake could not answer as scripted (tests assert it is empty)
        super().__init__(self._handler())

    # --- what the tests read --------------------------------------------------------------------

    def messages_requests(self) -> list:
        """Bodies of the POST /v1/messages requests, in order."""
        with self._lock:
            return [
                r["body"]
                for r in self.requests
                if r["method"] == "POST"
                and r["path"].split("?")[0].endswith("/messages")
                and isinstance(r["body"], dict)
            ]

    def main_requests(self) -> list:
        """The agent loop's requests (those that offer tools)."""
        return [b for b in self.messages_requests() if b.get("tools")]

    def containing(self, needle: str) -> list:
        """Message request bodies whose JSON text holds `needle`."""
        return [b for b in self.messages_requests() if needle in json.dumps(b, ensure_ascii=False)]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    # --- answering ---------------------------------------------------------------------------------

    def answer(self, body: dict) -> dict:
        """The assistant message for one request body, as a Messages API response object."""
        tools = body.get("tools") or []
        if not tools:
            return self._message([{"type": "text", "text": SIDE_ANSWER}], "end_turn")
        step = sum(
            1
            for m in body.get("messages", [])
            if isinstance(m, dict) and m.get("role") == "assistant" and not _only_waits(m)
        )
        if not self.script:
            return self._message([{"type": "text", "text": SIDE_ANSWER}], "end_turn")
        item = self.script[min(step, len(self.script) - 1)]
        if isinstance(item, Text):
            return self._message([{"type": "text", "text": item.text}], "end_turn")
        try:
            name = resolve_tool(item.name, tools)
        except KeyError as exc:
            waits = [t["name"] for t in tools if t.get("name") in WAIT_TOOLS]
            waited = sum(1 for m in body.get("messages", []) if isinstance(m, dict) and _only_waits(m))
            if waits and waited < 3:
                return self._message(
                    [{"type": "tool_use", "id": _id("toolu"), "name": waits[0], "input": {}}], "tool_use"
                )
            self.errors.append(str(exc))
            return self._message([{"type": "text", "text": f"fake: {exc}"}], "end_turn")
        content = [{"type": "text", "text": item.text}] if item.text else []
        content.append({"type": "tool_use", "id": _id("toolu"), "name": name, "input": item.input})
        return self._message(content, "tool_use")

    def _message(self, content: list, stop_reason: str) -> dict:
        return {
            "id": _id("msg"),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 100,
                "output_tokens": 20,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }

    def _handler(self):
        fake = self

        class AnthropicHandler(Handler):
            def _record(self, body):
                fake.log(
                    fake.requests,
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers.items()),
                        "body": body,
                    },
                )

            def _send(self, status: int, payload: bytes, content_type: str = "application/json"):
                self.send(
                    status,
                    payload,
                    content_type,
                    headers=(("request-id", _id("req")), ("anthropic-organization-id", "fake-org")),
                )

            def do_HEAD(self):
                self._record(None)
                self._send(200, b"")

            def do_GET(self):
                self._record(None)
                path = self.path.split("?")[0]
                if path.endswith("/models"):
                    models = [
                        {
                            "type": "model",
                            "id": fake.model,
                            "display_name": fake.model,
                            "created_at": "2025-09-29T00:00:00Z",
                        }
                    ]
                    self._send(
                        200,
                        json.dumps(
                            {"data": models, "has_more": False, "first_id": fake.model, "last_id": fake.model}
                        ).encode(),
                    )
                elif path in ("", "/"):
                    self._send(200, b"{}")
                else:
                    self._send(
                        404,
                        json.dumps(
                            {
                                "type": "error",
                                "error": {"type": "not_found_error", "message": f"fake: no GET {path}"},
                            }
                        ).encode(),
                    )

            def do_POST(self):
                raw = self.read_body()
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                self._record(body)
                path = self.path.split("?")[0]
                if path.endswith("/count_tokens"):
                    self._send(200, json.dumps({"input_tokens": 100}).encode())
                    return
                if not path.endswith("/messages") or not isinstance(body, dict):
                    fake.errors.append(f"unexpected POST {self.path}")
                    self._send(
                        404,
                        json.dumps(
                            {
                                "type": "error",
                                "error": {"type": "not_found_error", "message": f"fake: no POST {path}"},
                            }
                        ).encode(),
                    )
                    return
                message = fake.answer(body)
                if body.get("stream"):
                    self._send(200, sse(message), "text/event-stream")
                else:
                    self._send(200, json.dumps(message).encode())

        return AnthropicHandler


def sse(message: dict) -> bytes:
    """`message` as the Messages API's stream of server-sent events."""
    out = []

    def event(kind: str, data: dict):
        out.append(f"event: {kind}\ndata: {json.dumps(data)}\n\n")

    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    event("message_start", {"type": "message_start", "message": start})
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": block["text"]},
                },
            )
        else:
            event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}},
            )
            event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                },
            )
        event("content_block_stop", {"type": "content_block_stop", "index": index})
    event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
    )
    event("message_stop", {"type": "message_stop"})
    return "".join(out).encode()
