"""Cursor, from its documented hooks.json schema and payloads (cursor.com/docs/agent/hooks).

No Cursor client runs here, so these tests prove only agreement with the
documented shapes: they drive the real hook command that `kirolearn install
--agent cursor` writes, with the payloads Cursor documents, then drain, export
and start the MCP server from the written mcp.json with the real MCP client.
"""

import json
import os
import shlex
import subprocess
import uuid

import anyio
import pytest
from click.testing import CliRunner
from helpers import drain

from kirolearn.capture import spool
from kirolearn.capture.agents import cursor
from kirolearn.cli.commands import cli
from kirolearn.install.agents import cursor as cursor_install

pytestmark = pytest.mark.agents


def common(project, conversation, event):
    return {
        "conversation_id": conversation,
        "generation_id": str(uuid.uuid4()),
        "model": "claude-4.5-sonnet",
        "hook_event_name": event,
        "cursor_version": "2.4.21",
        "workspace_roots": [str(project)],
        "user_email": "dev@example.com",
    }


def run_written_hook(project, payload, timeout=20):
    """Run the command install wrote for the payload's event, the way Cursor runs it (a shell, stdin JSON)."""
    data = json.loads((project / ".cursor" / "hooks.json").read_text())
    (entry,) = [e for e in data["hooks"][payload["hook_event_name"]] if "kirolearn" in e["command"]]
    env = {k: v for k, v in os.environ.items() if k != "KIROLEARN_RAISE_ERRORS"}
    result = subprocess.run(
        entry["command"],
        shell=True,
        input=json.dumps(payload).encode(),
        cwd=project,
        capture_output=True,
        env=env,
        timeout=timeout,
    )
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    return result.stdout


def export():
    result = CliRunner().invoke(cli, ["export"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


FINAL = "Stripe retries are now idempotent: the handler upserts by event id (KLCFINAL-2525)."


def a_turn(project, conversation):
    c = lambda event: common(project, conversation, event)  # noqa: E731
    return [
        {
            **c("sessionStart"),
            "session_id": conversation,
            "is_background_agent": False,
            "composer_mode": "agent",
        },
        {
            **c("beforeSubmitPrompt"),
            "prompt": "Make the Stripe webhook handler idempotent",
            "attachments": [],
        },
        {
            **c("afterShellExecution"),
            "command": "pytest -q tests/test_webhooks.py",
            "cwd": str(project),
            "output": "3 passed KLCTOOL-1",
            "duration": 812,
        },
        {
            **c("afterFileEdit"),
            "file_path": str(project / "app" / "webhooks.py"),
            "edits": [{"old_string": "insert(", "new_string": "upsert("}],
        },
        {
            **c("afterMCPExecution"),
            "tool_name": "search_memory",
            "tool_input": '{"query": "stripe"}',
            "result_json": '{"content": [{"type": "text", "text": "nothing yet"}]}',
            "duration": 40,
        },
        {**c("afterAgentResponse"), "text": "Let me run the tests first."},
        {**c("afterAgentResponse"), "text": FINAL},
        {**c("stop"), "status": "completed", "loop_count": 0},
    ]


def test_cursor_documented_turn_final_answer_memory_mcp_and_exact_uninstall(home, project):
    hooks_json, mcp_json = project / ".cursor" / "hooks.json", project / ".cursor" / "mcp.json"
    hooks_json.parent.mkdir()
    theirs = '{\n  "version": 1,\n  "hooks": {\n    "afterFileEdit": [{"command": "./format.sh"}]\n  }\n}\n'
    hooks_json.write_text(theirs)
    result = CliRunner().invoke(cli, ["install", "--agent", "cursor", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    data = json.loads(hooks_json.read_text())
    assert data["version"] == 1 and set(data["hooks"]) == {event for event, _ in cursor.HOOKS}
    assert data["hooks"]["afterFileEdit"][0] == {"command": "./format.sh"}  # theirs first, untouched

    conversation = str(uuid.uuid4())
    outputs = [run_written_hook(project, payload) for payload in a_turn(project, conversation)]
    assert outputs[1] == b""  # beforeSubmitPrompt: allow, nothing printed (it cannot carry context)
    stats = drain(flush=False)
    assert stats["quarantined"] == 0 and stats["stored"] == 8, stats
    events = [o for o in export() if o["type"] == "event"]
    assert {e["agent"] for e in events} == {"cursor"} and {e["session_id"] for e in events} == {conversation}
    assert {e["cwd"] for e in events} == {str(project)}  # from workspace_roots: Cursor sends no cwd
    (stop,) = [e for e in events if e["trigger"] == "stop"]
    assert stop["assistant_response"] == FINAL  # the last afterAgentResponse, not the first
    tools = {e["tool_name"]: e for e in events if e["trigger"] == "postToolUse"}
    assert set(tools) == {"Shell", "Edit", "mcp:search_memory"}
    assert tools["Shell"]["tool_input"]["command"].startswith("pytest") and "KLCTOOL-1" in json.dumps(
        tools["Shell"]
    )
    assert tools["mcp:search_memory"]["tool_input"] == {"query": "stripe"}
    assert tools["Edit"]["tool_input"]["file_path"].endswith("webhooks.py")
    (record,) = [
        o for o in export() if o["type"] == "record"
    ]  # the deterministic extractor reads these shapes
    assert "app/webhooks.py" in record["files_touched"] and "KLCFINAL-2525" in record["summary"], record

    # The next session's sessionStart hands the memory back in Cursor's documented form.
    nxt = str(uuid.uuid4())
    out = json.loads(run_written_hook(project, {**common(project, nxt, "sessionStart"), "session_id": nxt}))
    assert set(out) == {"additional_context"} and "KLCFINAL-2525" in out["additional_context"]

    # The MCP server registered in mcp.json answers search_memory with the stored record.
    server = json.loads(mcp_json.read_text())["mcpServers"]["kirolearn"]
    answer = anyio.run(search_through_mcp, server, str(project))
    assert "KLCFINAL-2525" in answer

    result = CliRunner().invoke(cli, ["uninstall", "--agent", "cursor", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    assert hooks_json.read_text() == theirs and not mcp_json.exists()


async def search_through_mcp(server: dict, cwd: str) -> str:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=server["command"],
        args=server.get("args", []),
        env={**os.environ, **server.get("env", {})},
        cwd=cwd,
    )
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {t.name: t for t in (await session.list_tools()).tools}
                assert tools["forget_memory"].annotations.destructiveHint is True
                result = await session.call_tool("search_memory", {"query": "Stripe webhook idempotent"})
                return "\n".join(getattr(c, "text", "") for c in result.content)


def test_cursor_unknown_and_changed_payloads_are_kept_and_exit_0(home, project):
    CliRunner().invoke(
        cli, ["install", "--agent", "cursor", "--project", str(project), "--yes"], catch_exceptions=False
    )
    conversation = str(uuid.uuid4())
    base = common(project, conversation, "")
    cases = [
        {**base, "hook_event_name": "stop"},  # no status, no text before it, no transcript
        {
            **base,
            "hook_event_name": "afterShellExecution",
            "stdout": "x",
            "stderr": "",
            "exit_code": 0,
        },  # older keys
        {**base, "hook_event_name": "afterMCPExecution", "tool_input": "{not json", "tool_result": "plain"},
        {
            **base,
            "hook_event_name": "postToolUse",
            "tool_name": "Write",
            "tool_input": {"path": "a"},
            "tool_output": "ok",
        },
        {**base, "hook_event_name": "afterEverything", "new": [1]},  # an event newer than the adapter
        {"hook_event_name": "afterFileEdit", "file_path": "/x"},  # no conversation, no workspace roots
    ]
    command = shlex.split(
        json.loads((project / ".cursor" / "hooks.json").read_text())["hooks"]["stop"][0]["command"].replace(
            " || true", ""
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "KIROLEARN_RAISE_ERRORS"}
    env.update(dict(a.split("=", 1) for a in command if "=" in a and a.split("=", 1)[0].isupper()))
    argv = [a for a in command if not ("=" in a and a.split("=", 1)[0].isupper())]
    for payload in cases:
        result = subprocess.run(
            argv, input=json.dumps(payload).encode(), cwd=project, capture_output=True, env=env, timeout=20
        )
        assert result.returncode == 0 and result.stdout == b"", result.stderr
    assert (
        subprocess.run(
            argv, input=b"\xff\xfe garbage", cwd=project, capture_output=True, env=env, timeout=20
        ).returncode
        == 0
    )
    assert len(spool.ready_files()) == len(cases)
    stats = drain(flush=False)
    assert stats["stored"] == len(cases) and stats["quarantined"] == 0, stats


LAYOUTS = {
    "absent": (None, None),
    "empty objects": ("{}\n", "{}\n"),
    "theirs, tabs, CRLF, no final newline": (
        '{\r\n\t"version": 1,\r\n\t"hooks": {\r\n\t\t"stop": [{"command": "notify"}]\r\n\t}\r\n}',
        '{\r\n\t"mcpServers": {\r\n\t\t"github": {"command": "gh-mcp"}\r\n\t}\r\n}',
    ),
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
@pytest.mark.parametrize("scope", ["project", "global"])
def test_cursor_install_uninstall_exact_bytes(layout, scope, home, project):
    folder = project / ".cursor" if scope == "project" else cursor_install.cursor_dir(None)
    folder = type(project)(folder)
    files = dict(zip((folder / "hooks.json", folder / "mcp.json"), LAYOUTS[layout]))
    for path, text in files.items():
        if text is not None:
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(text.encode())
    args = ["--project", str(project)] if scope == "project" else []
    runner = CliRunner()
    assert (
        runner.invoke(cli, ["install", "--agent", "cursor", *args, "--yes"], catch_exceptions=False).exit_code
        == 0
    )
    once = {p: p.read_bytes() for p in files}
    again = runner.invoke(cli, ["install", "--agent", "cursor", *args, "--yes"], catch_exceptions=False)
    assert "unchanged" in again.output and {p: p.read_bytes() for p in files} == once
    assert json.loads((folder / "hooks.json").read_text())["version"] == 1
    assert (
        runner.invoke(
            cli, ["uninstall", "--agent", "cursor", *args, "--yes"], catch_exceptions=False
        ).exit_code
        == 0
    )
    for path, text in files.items():
        assert (path.read_bytes() if path.exists() else None) == (None if text is None else text.encode())


def test_cursor_refuses_a_hooks_file_of_another_version(home, project):
    (project / ".cursor").mkdir()
    (project / ".cursor" / "hooks.json").write_text('{"version": 2, "hooks": {}}\n')
    result = CliRunner().invoke(cli, ["install", "--agent", "cursor", "--project", str(project), "--yes"])
    assert result.exit_code != 0 and "version 2" in result.output
    assert not (project / ".cursor" / "mcp.json").exists()  # all or nothing
