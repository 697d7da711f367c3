"""kirolearn-mcp's start-up (issue #33): `initialize` and `tools/list` answered before the SDK loads,
exactly as the SDK server answers them; the first tool call hands over to the SDK server; records
name the calling agent."""

import json
import os
import subprocess
import sys

import anyio
import pytest
from click.testing import CliRunner
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import Implementation

from kirolearn import mcp_server
from kirolearn.cli.commands import cli
from kirolearn.mcp_server import app

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")
BIN = os.path.dirname(sys.executable)
TURN = {
    "request": "Why does checkout time out?",
    "investigated": "app/pay.py",
    "learned": "no pool limit",
    "completed": "Added a pool",
    "next_steps": "Load test",
    "files_read": [],
    "files_modified": ["app/pay.py"],
}


def test_listing_json_is_what_the_sdk_server_answers(project):
    with open(mcp_server.LISTING, encoding="utf-8") as fh:
        stored = json.load(fh)
    assert stored == anyio.run(app.listing_of, app.build_server(str(project))), (
        "kirolearn/mcp_server/listing.json is stale: run `.venv/bin/python scripts/mcp_listing.py`"
    )


def dumped(model):
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def test_the_real_client_over_stdio_meets_the_sdk_servers_answers_then_the_sdk(project, home, monkeypatch):
    """The front's initialize and tools/list equal the SDK server's (in memory); a tool call after them
    runs on the SDK server, and its record names the client's agent and the session its env gave."""
    monkeypatch.setenv("KIROLEARN_SESSION_ID", "claude-sess-7")

    async def sdk():
        server = app.build_server(str(project))
        async with create_connected_server_and_client_session(server._mcp_server) as client:
            # the in-memory helper initialises without returning the result: ask the session what it got
            return (await client.list_tools()).tools, client

    async def real():
        params = StdioServerParameters(
            command=os.path.join(BIN, "kirolearn-mcp"), args=["--project", str(project)], env=dict(os.environ)
        )
        with anyio.fail_after(120):
            async with stdio_client(params) as (read, write):
                async with ClientSession(
                    read, write, client_info=Implementation(name="claude-code", version="2.1")
                ) as client:
                    init = await client.initialize()
                    tools = (await client.list_tools()).tools
                    saved = await client.call_tool("save_session_summary", TURN)
                    again = (await client.list_tools()).tools  # now the SDK's own answer
                    return init, tools, saved, again

    init, tools, saved, again = anyio.run(real)
    sdk_tools, _ = anyio.run(sdk)
    assert [dumped(t) for t in tools] == [dumped(t) for t in sdk_tools] == [dumped(t) for t in again]
    reference = app.build_server(str(project))._mcp_server.create_initialization_options()
    assert init.serverInfo.name == "kirolearn" and init.serverInfo.version == reference.server_version
    assert init.instructions == reference.instructions
    assert dumped(init.capabilities) == dumped(reference.capabilities)
    assert not saved.isError, saved
    record_id = saved.structuredContent["record_id"]
    exported = CliRunner().invoke(cli, ["export"])
    (record,) = [
        json.loads(line)
        for line in exported.stdout.splitlines()
        if json.loads(line).get("record_id") == record_id and json.loads(line)["type"] == "record"
    ]
    assert record["agent"] == "claude-code" and record["session_id"] == "claude-sess-7"


START_UP = r"""
import io, json, sys
from kirolearn import mcp_server
lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
          "capabilities": {}, "clientInfo": {"name": "codex-mcp-client", "version": "0.171.0"}}},
         {"jsonrpc": "2.0", "method": "notifications/initialized"},
         {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
out = io.BytesIO()
code = mcp_server.serve(sys.argv[1], "here", stdin=io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in lines)),
                        stdout=out)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "pydantic", "anyio", "sqlite_utils", "litellm",
                                                                  "click", "filelock")
               or m.startswith(("kirolearn.store", "kirolearn.settings", "kirolearn.pipeline", "kirolearn.mcp_server.app")))
print(json.dumps({"code": code, "heavy": heavy, "replies": [json.loads(l) for l in out.getvalue().splitlines()]}))
"""


def test_start_up_loads_neither_the_sdk_nor_the_store(project, home):
    done = subprocess.run(
        [sys.executable, "-c", START_UP, str(project)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["heavy"] == [] and seen["code"] == 0
    init, listed, pong = seen["replies"]
    assert init["id"] == 0 and init["result"]["protocolVersion"] == "2025-06-18"
    assert listed["id"] == 1 and {t["name"] for t in listed["result"]["tools"]} >= {
        "search_memory",
        "session_end",
    }
    assert pong == {"jsonrpc": "2.0", "id": 2, "result": {}}


def raw_session(project, messages, replies):
    """kirolearn-mcp fed raw lines; its first `replies` stdout lines, parsed. Stdin stays open until they
    came: a server whose stdin ends may stop before it answers a request still in flight."""
    proc = subprocess.Popen(
        [os.path.join(BIN, "kirolearn-mcp"), "--project", str(project)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        proc.stdin.write("".join(messages).encode())
        proc.stdin.flush()
        got = [json.loads(proc.stdout.readline()) for _ in range(replies)]  # the test's timeout bounds this
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0, proc.stderr.read()[-2000:]
        proc.stdout.close()
        proc.stderr.close()
    return got


def test_what_the_front_does_not_know_goes_to_the_sdk(project, home):
    """An unknown protocol version gets the SDK's latest; a malformed request first gets the SDK path's
    JSON-RPC error; a second initialize and a call after start-up are the SDK server's answers."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "1999-01-01",
            "capabilities": {},
            "clientInfo": {"name": "x", "version": "1"},
        },
    }
    replies = raw_session(
        project,
        [
            json.dumps(init) + "\n",
            '{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
            '{"jsonrpc": "2.0", "id": 2, "method": 42}\n',
            '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": '
            '"session_init", "arguments": {}}}\n',
        ],
        3,
    )
    from mcp.types import LATEST_PROTOCOL_VERSION

    assert [r["id"] for r in replies] == [1, 2, 3]  # the replayed initialize is not answered twice
    assert replies[0]["result"]["protocolVersion"] == LATEST_PROTOCOL_VERSION
    assert replies[1]["error"]["code"] == -32600
    assert replies[2]["result"]["structuredContent"]["found"] is False


@pytest.mark.parametrize(
    "client, env, agent",
    [
        ("claude-code", None, "claude-code"),
        ("codex-mcp-client", None, "codex"),
        ("gemini-cli-mcp-client", None, "gemini"),
        ("qwen-cli-mcp-client-kirolearn", None, "qwen-code"),  # what Qwen Code 0.24.4 sends
        ("augment-mcp-client", None, "auggie"),  # what Auggie 0.36.0 sends
        ("kilo", None, "kilo-code"),  # what Kilo Code 7.7.7 sends
        ("mcp", None, None),
        ("codex-mcp-client", "copilot", "copilot"),
        ("codex-mcp-client", "nonsense", "codex"),
    ],
)
def test_the_calling_agent_comes_from_the_environment_then_the_client(client, env, agent):
    assert app.agent_of_client(client, {app.AGENT_ENV: env} if env else {}) == agent
