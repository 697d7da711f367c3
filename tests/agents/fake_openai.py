"""A scripted fake of the OpenAI Responses API (`POST /v1/responses`, SSE) and of Chat Completions
(`POST /v1/chat/completions`, streamed or not), on 127.0.0.1 only.

Real agent CLIs (Codex) talk to it instead of OpenAI. Each request body is
logged (`server.requests`), so a test can read exactly what reached the model.
The reply to each request comes from the script: a callable
`script(body) -> list of steps`, or a list of steps picked by how many tool
results the request already carries (the first request of a turn gets step 0,
the one after the first tool result step 1, ...). A step is either
`{"text": "..."}` (a final message) or `{"call": NAME, "arguments": {...}}` (a
function call; NAME may be a predicate on the request's tool names, see
`tool_named`). Standard library only.
"""

import json

from fakeserver import FakeServer, Handler


def _sse(kind: str, data: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def tool_names(body: dict) -> "list[str]":
    """Every tool name the request offers the model (function tools and namespaced MCP tools)."""
    names = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("name"):
            names.append(tool["name"])
        for inner in tool.get("tools") or []:  # namespace tools
            if isinstance(inner, dict) and inner.get("name"):
                names.append(f"{tool.get('name')}.{inner['name']}")
    return names


def tool_outputs(body: dict) -> "list[dict]":
    """The tool results (function_call_output items) in the request's input."""
    return [
        i
        for i in body.get("input") or []
        if isinstance(i, dict) and i.get("type", "").endswith("call_output")
    ]


def output_of(body: dict, call_id: str) -> "str | None":
    """The result the request carries for tool call `call_id`, as text (None if it has none)."""
    for item in tool_outputs(body):
        if item.get("call_id") == call_id:
            output = item.get("output")
            return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    return None


def request_text(body: dict) -> str:
    """Everything the model was shown in one request, as one string (for `in` checks)."""
    return json.dumps(
        {"instructions": body.get("instructions"), "input": body.get("input")}, ensure_ascii=False
    )


class FakeOpenAI(FakeServer):
    """`with FakeOpenAI(script) as fake:` ... `fake.base_url` is the `/v1` URL to configure."""

    def __init__(self, script):
        self.script = script
        self.requests: list = []  # request bodies, in arrival order
        self.paths: list = []
        self.calls: dict = {}  # call_id -> the tool name the fake told the model to call
        fake = self

        class OpenAIHandler(Handler):
            def do_GET(self):
                fake.log(fake.paths, ("GET", self.path))
                self.send_json(200, {"object": "list", "data": [{"id": "gpt-fake", "object": "model"}]})

            def do_POST(self):
                raw = self.read_body()
                if self.headers.get("Content-Encoding") == "zstd" or not raw.strip().startswith(b"{"):
                    return self.send(415, content_type=None)
                body = json.loads(raw)
                with fake._lock:
                    fake.requests.append(body)
                    fake.paths.append(("POST", self.path))
                    n = len(fake.requests)
                if self.path.rstrip("/").endswith("/chat/completions"):
                    if body.get("stream"):
                        return self.stream(
                            fake.chat_stream(body, n), headers=(("Cache-Control", "no-cache"),)
                        )
                    return self.send_json(200, fake.chat_reply(body, n))
                if not self.path.rstrip("/").endswith("/responses"):
                    return self.send(404, content_type=None)
                self.stream(fake.stream(body, n), headers=(("Cache-Control", "no-cache"),))

        super().__init__(OpenAIHandler)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def step_for(self, body: dict) -> dict:
        if callable(self.script):
            return self.script(body)
        steps = self.script
        return steps[min(len(tool_outputs(body)), len(steps) - 1)]

    def chat_step(self, body: dict) -> dict:
        """The step for a Chat Completions request (its tool results are `role: tool` messages)."""
        if callable(self.script):
            return self.script(body)
        done = sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool")
        return self.script[min(done, len(self.script) - 1)]

    def chat_message(self, body: dict, n: int) -> dict:
        step = self.chat_step(body)
        if "call" not in step:
            return {"role": "assistant", "content": step["text"]}
        name = step["call"]
        if callable(name):
            names = [
                t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)
            ]
            name = next((t for t in names if t and name(t)), None) or "missing_tool"
        self.calls[f"call_{n}"] = name
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(step.get("arguments", {}))},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    def chat_reply(self, body: dict, n: int) -> dict:
        message = self.chat_message(body, n)
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model") or "gpt-fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def chat_stream(self, body: dict, n: int):
        """The same reply as Chat Completions SSE chunks (`data: {...}`, then `data: [DONE]`)."""
        reply = self.chat_reply(body, n)
        message, finish = reply["choices"][0]["message"], reply["choices"][0]["finish_reason"]
        base = {"id": reply["id"], "object": "chat.completion.chunk", "created": 0, "model": reply["model"]}

        def chunk(delta, finish_reason=None, **more):
            data = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], **more}
            return f"data: {json.dumps(data)}\n\n".encode()

        yield chunk({"role": "assistant", "content": ""})
        if message.get("tool_calls"):
            calls = [dict(c, index=i) for i, c in enumerate(message["tool_calls"])]
            yield chunk({"tool_calls": calls})
        else:
            text = message["content"]
            for i in range(0, len(text), 40):
                yield chunk({"content": text[i : i + 40]})
        yield chunk({}, finish, usage=reply["usage"])
        yield b"data: [DONE]\n\n"

    def stream(self, body: dict, n: int):
        step = self.step_for(body)
        rid = f"resp_{n}"
        yield _sse(
            "response.created",
            {"response": {"id": rid, "object": "response", "status": "in_progress", "output": []}},
        )
        if "call" in step:
            name = step["call"]
            if callable(name):
                name = next((t for t in tool_names(body) if name(t)), None) or "missing_tool"
            item = {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": name,
                "arguments": json.dumps(step.get("arguments", {})),
                "status": "completed",
            }
            self.calls[item["call_id"]] = name
            if "." in name:  # a namespaced tool: the namespace and the tool's own name
                item["namespace"], item["name"] = name.rsplit(".", 1)
            yield _sse(
                "response.output_item.added", {"output_index": 0, "item": {**item, "status": "in_progress"}}
            )
            yield _sse("response.output_item.done", {"output_index": 0, "item": item})
        else:
            text = step["text"]
            msg_id = f"msg_{n}"
            item = {
                "type": "message",
                "id": msg_id,
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            yield _sse("response.output_item.added", {"output_index": 0, "item": item})
            yield _sse(
                "response.content_part.added",
                {
                    "item_id": msg_id,
                    "output_index": 0,
                    "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                },
            )
            for i in range(0, len(text), 40):
                yield _sse(
                    "response.output_text.delta",
                    {"item_id": msg_id, "output_index": 0, "content_index": 0, "delta": text[i : i + 40]},
                )
            yield _sse(
                "response.output_text.done",
                {"item_id": msg_id, "output_index": 0, "content_index": 0, "text": text},
            )
            done = {
                **item,
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
            yield _sse("response.output_item.done", {"output_index": 0, "item": done})
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        yield _sse(
            "response.completed",
            {
                "response": {
                    "id": rid,
                    "object": "response",
                    "status": "completed",
                    "output": [],
                    "usage": usage,
                }
            },
        )
