"""A scripted fake of Augment's backend (the API Auggie, `@augmentcode/auggie`, calls), on 127.0.0.1 only.

Auggie talks to its tenant URL, not to a model API: the session JSON
(`AUGMENT_SESSION_AUTH`, `session_json(fake.url)`) names it. What it calls
(measured on 0.36.0): `get-models` (models and feature flags; hooks run only
when `enable_hooks` is on), `settings/get-mcp-*-configs`, `agents/list-remote-tools`,
`find-missing` (which of the workspace's file blobs it must upload) and `chat-stream` (the model call: one JSON object per line, each a chunk of
`text` and response `nodes`). Every other path gets `{}`.

Each chat-stream body is logged (`fake.requests`), so a test reads what reached
the model. The reply comes from the script: a callable `script(body) -> step`
or a list of steps picked by how many tool results the request carries. A step
is `{"text": "..."}` (the final answer) or `{"call": NAME, "arguments": {...}}`
(a tool call). Standard library only.
"""

import json

from fakeserver import FakeServer, Handler

MODEL = "fake-model"
TOOL_USE = 5  # response node: a tool call
TOOL_RESULT = 1  # request node: a tool's result
STOP_END_TURN, STOP_TOOL_USE = 1, 3


def session_json(url: str) -> str:
    """The session Auggie reads from AUGMENT_SESSION_AUTH: a dummy token for the fake tenant."""
    return json.dumps({"accessToken": "dummy-token", "tenantURL": url + "/", "scopes": ["email"]})


def tool_results(body: dict) -> "list[dict]":
    """The tool results (tool_result_node) a chat-stream request carries, this turn's and the history's."""
    nodes = list(body.get("nodes") or [])
    for exchange in body.get("chat_history") or []:
        if isinstance(exchange, dict):
            nodes += exchange.get("request_nodes") or []
    return [n["tool_result_node"] for n in nodes if isinstance(n, dict) and n.get("tool_result_node")]


def tool_names(body: dict) -> "list[str]":
    """Every tool the request offers the model (MCP tools as `<tool>_<server>`)."""
    return [t.get("name") for t in body.get("tool_definitions") or [] if isinstance(t, dict)]


def request_text(body: dict) -> str:
    """Everything the model was shown in one request (rules, guidelines, message, history), as one string."""
    keys = ("rules", "user_guidelines", "workspace_guidelines", "message", "nodes", "chat_history")
    return json.dumps({k: body.get(k) for k in keys}, ensure_ascii=False)


class FakeAugment(FakeServer):
    """`with FakeAugment(script) as fake:` ... `fake.url` is the tenant URL for `session_json`."""

    def __init__(self, script, feature_flags: "dict | None" = None):
        self.script = script
        self.feature_flags = {"enable_hooks": True} if feature_flags is None else feature_flags
        self.requests: list = []  # chat-stream bodies, in arrival order
        self.paths: list = []
        self.others: list = []  # (path, body) of every other call (errors Auggie reports, indexing)
        self.calls = 0
        fake = self

        class AugmentHandler(Handler):
            def do_GET(self):
                fake.log(fake.paths, ("GET", self.path))
                self.send_json(200, {})

            def do_POST(self):
                raw = self.read_body(b"{}")
                fake.log(fake.paths, ("POST", self.path))
                path = self.path.split("?")[0].lstrip("/")
                if path == "get-models":
                    return self.send_json(200, fake.models())
                if path == "agents/list-remote-tools":
                    return self.send_json(200, {"tools": []})
                if path == "find-missing":  # the workspace index: every blob is known, so none is uploaded
                    fake.log(fake.others, (path, raw[:4000]))
                    return self.send_json(200, {"unknown_memory_names": [], "nonindexed_blob_names": []})
                if path != "chat-stream":
                    fake.log(fake.others, (path, raw[:4000]))
                    return self.send_json(200, {})
                body = json.loads(raw)
                fake.log(fake.requests, body)
                lines = fake.answer(body)
                self.send(200, b"".join(json.dumps(line).encode() + b"\n" for line in lines))

        super().__init__(AugmentHandler)

    def models(self) -> dict:
        return {
            "default_model": MODEL,
            "models": [{"name": MODEL, "suggested_prefix_char_count": 0, "suggested_suffix_char_count": 0}],
            "feature_flags": self.feature_flags,
        }

    def answer(self, body: dict) -> list:
        script = self.script
        if callable(script):
            step = script(body)
        else:
            step = script[min(len(tool_results(body)), len(script) - 1)]
        if "call" in step:
            self.calls += 1
            node = {
                "id": 1,
                "type": TOOL_USE,
                "content": "",
                "tool_use": {
                    "tool_use_id": f"toolu_fake_{self.calls}",
                    "tool_name": step["call"],
                    "input_json": json.dumps(step.get("arguments") or {}),
                },
            }
            return [{"text": "", "nodes": [node], "stop_reason": STOP_TOOL_USE}]
        return [{"text": step["text"], "nodes": []}, {"text": "", "nodes": [], "stop_reason": STOP_END_TURN}]
