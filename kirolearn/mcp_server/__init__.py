"""`kirolearn-mcp`: the MCP stdio server an agent starts (official SDK, mcp 1.x FastMCP, in `app.py`).

An agent sends its first model request as soon as its MCP servers have listed their tools, or
without them when a server is slow (real Codex does). Importing the SDK and what it
pulls in (pydantic models of the whole protocol, httpx, jsonschema, starlette) takes many times a
bare Python start (docs/benchmarks.md, 'The MCP server's start-up'); so this module, standard
library only, answers the two requests of a client's start-up itself from `listing.json` (the SDK server's own `initialize` capabilities and
`tools/list` answer, written by `scripts/mcp_listing.py` and checked against the SDK server by
tests/test_mcp_start.py), and hands the conversation to the SDK server at the first other message
(a tool call): that server sees the client's `initialize` and `initialized` first, its reply to the
repeated `initialize` is dropped, and everything after is the SDK's. A message this module does not
recognise exactly is the SDK's too, so an unusual client meets the SDK's behaviour.

Stdout carries only the protocol; logs go to stderr and $KIROLEARN_HOME/logs/mcp.log once the SDK
server runs. The project is resolved once, by the same marker walk as the hooks, from
`--project DIR`, else $KIROLEARN_PROJECT, else the directory the agent starts us in.
"""

import argparse
import json
import os
import sys

LISTING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "listing.json")

__all__ = ["build_server", "describe_project", "main"]


def _app():
    """The SDK server's module (__getattr__ declines `app`, so the import system loads the submodule)."""
    from kirolearn.mcp_server import app

    return app


def __getattr__(name):
    """The SDK server's names (guarded_stdio, malformed_reply, ...) load with it, on first use (PEP 562)."""
    if name.startswith("__") or name == "app":
        raise AttributeError(f"module 'kirolearn.mcp_server' has no attribute {name!r}")
    return getattr(_app(), name)


def build_server(project_root: str, **kwargs):
    """The FastMCP server bound to one project (tests call this directly); see app.build_server."""
    return _app().build_server(project_root, **kwargs)


def describe_project(start: str) -> "tuple[str, str]":
    """(project root, how messages name it) for a start directory: the global project is named as such."""
    from kirolearn.core.project import find_project_root

    root, is_global = find_project_root(os.path.abspath(start))
    if is_global:
        return root, (
            f"the global project (this server started in {start}, which is in no project: "
            "no marker such as .git, pyproject.toml or .kiro; pass --project DIR)"
        )
    return root, f"project {root}"


def _request_id(message: dict):
    rid = message.get("id")
    return rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None


class Front:
    """The start-up half of the conversation: `initialize`, `notifications/initialized`, `tools/list`, `ping`."""

    def __init__(self, listing: dict, version: str):
        self.listing = listing
        self.version = version
        self.held: list[bytes] = []  # the SDK server must see these first
        self.answered_initialize: tuple[object, dict] | None = None  # (request id, our result)
        self.client_info: dict | None = None

    def reply(self, line: bytes) -> "dict | None":
        """The response to one line, or None when the SDK server must answer it (and all after it)."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return None
        method, params, rid = message.get("method"), message.get("params"), _request_id(message)
        if params is not None and not isinstance(params, dict):
            return None
        initialized = self.answered_initialize is not None
        if (
            method == "initialize"
            and rid is not None
            and not initialized
            and params is not None
            and isinstance(params.get("protocolVersion"), str)
            and isinstance(params.get("capabilities"), dict)
            and isinstance(params.get("clientInfo"), dict)
        ):
            asked = params["protocolVersion"]
            listing = self.listing
            result = {
                "protocolVersion": asked
                if asked in listing["protocol_versions"]
                else listing["latest_protocol"],
                "capabilities": listing["capabilities"],
                "serverInfo": {"name": listing["server_name"], "version": self.version},
                "instructions": listing["instructions"],
            }
            self.held.append(line)
            self.answered_initialize = (rid, result)
            self.client_info = params["clientInfo"]
            return {"jsonrpc": "2.0", "id": rid, "result": result}
        if method == "notifications/initialized" and "id" not in message and initialized:
            self.held.append(line)
            return {}  # a notification: nothing to send
        if method == "tools/list" and rid is not None and initialized and not (params or {}).get("cursor"):
            return {"jsonrpc": "2.0", "id": rid, "result": {"tools": self.listing["tools"]}}
        if method == "ping" and rid is not None and initialized:
            return {"jsonrpc": "2.0", "id": rid, "result": {}}
        return None


def serve(root: str, where: str, *, stdin=None, stdout=None) -> int:
    """Answer start-up from the listing, then hand over to the SDK server at the first other message."""
    from kirolearn.core.version import __version__

    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    with open(LISTING, encoding="utf-8") as fh:
        front = Front(json.load(fh), __version__)
    while True:
        line = stdin.readline()
        if not line:
            # the client hung up before calling a tool: the SDK was never needed
            return 0
        if not line.strip():
            continue
        reply = front.reply(line)
        if reply is None:
            break
        if reply:
            stdout.write(json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
            stdout.flush()
    app = _app()  # the SDK, the tools' models, the store: only now
    app.setup_logging()
    app.serve_stdio(root, where, replay=front.held + [line], answered=front.answered_initialize)
    return 0


def main(argv=None) -> int:
    """Console-script entry point: serve MCP over stdio until the client hangs up."""
    from kirolearn.core.version import __version__

    parser = argparse.ArgumentParser(
        prog="kirolearn-mcp",
        description="kirolearn's MCP stdio server for coding "
        "agents (Kiro, Claude Code, Codex, Copilot, Gemini, Qwen Code, Auggie, Factory Droid, opencode, Kilo Code, "
        "Cursor).",
    )
    parser.add_argument(
        "--project", help="project directory (default: $KIROLEARN_PROJECT, else the current directory)"
    )
    parser.add_argument("--version", action="version", version=f"kirolearn-mcp {__version__}")
    args = parser.parse_args(argv)
    start = args.project or os.environ.get("KIROLEARN_PROJECT") or os.getcwd()
    if not os.path.isdir(start):
        app = _app()
        app.setup_logging()
        app.log.error("project directory %s does not exist: pass an existing --project DIR", start)
        return 1
    root, where = describe_project(start)
    return serve(root, where)


if __name__ == "__main__":
    sys.exit(main())
