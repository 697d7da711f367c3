"""Factory Droid's adapter through the real `kirolearn-hook`, drain and installer, on payloads of the shapes
Droid 0.225.2 sent here (docs/agents/factory-droid.md); tests/agents/test_factory_droid.py runs the real
client."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import run_hook
from helpers import drain

from kirolearn.capture import spool
from kirolearn.capture.agents import factory_droid
from kirolearn.cli.commands import cli
from kirolearn.mcp_server import app
from kirolearn.pipeline import extract

pytestmark = pytest.mark.timeout(120)

SESSION = "71cd24be-cc00-4999-a0b8-ae2ce74b3272"
FINAL_ID = "1f24276c-324e-4431-8f6d-923a6ef789e7"


def _base(project, transcript, mode="auto-low"):
    return {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "cwd": str(project),
        "permission_mode": mode,
    }


def _transcript(path: Path, final: str) -> Path:
    """The lines Droid 0.225.2 had written when its Stop hook ran (trimmed): hook notes, the tool call, the
    final assistant message Stop's message_id names, then the Stop hook's own line."""
    lines = [
        {"type": "session_start", "id": SESSION, "title": "say hi", "version": 2, "cwd": "/p"},
        {
            "type": "message",
            "id": "c853",
            "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        },
        {
            "type": "message",
            "id": "f81f",
            "message": {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "call_1", "name": "Execute", "input": {}}],
            },
        },
        {"type": "message", "id": "0d8b", "message": {"role": "user", "content": [{"type": "tool_result"}]}},
        {
            "type": "message",
            "id": FINAL_ID,
            "message": {"role": "assistant", "content": [{"type": "text", "text": final}]},
        },
        {
            "type": "message",
            "id": "731c",
            "message": {"role": "user", "content": [], "visibility": "user_only", "hookEventName": "Stop"},
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _execute(project, transcript, command, code):
    return {
        **_base(project, transcript),
        "hook_event_name": "PostToolUse",
        "tool_name": "Execute",
        "tool_input": {"command": command, "riskLevelReason": "runs the tests", "riskLevel": "low"},
        "tool_response": f"out\n\n\n[Process exited with code {code}]",
    }


def hook(payload, project):
    return run_hook(["--agent", "factory-droid"], json.dumps(payload).encode(), cwd=str(project))


def export():
    result = CliRunner().invoke(cli, ["export"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_a_session_of_droid_payloads_becomes_one_record_with_its_final_text(home, project, tmp_path):
    transcript = _transcript(tmp_path / f"{SESSION}.jsonl", "The login test waits for the token now; KLD-77.")
    start = {
        **_base(project, transcript, "off"),
        "hook_event_name": "SessionStart",
        "source": "startup",
        "CLAUDE_ENV_FILE": str(tmp_path / "droid-env.sh"),
    }
    calls = [
        start,
        {**_base(project, transcript), "hook_event_name": "UserPromptSubmit", "prompt": "fix the login test"},
        {
            **_base(project, transcript),
            "hook_event_name": "PreToolUse",
            "tool_name": "Execute",
            "tool_input": {"command": "pytest -q tests/test_login.py"},
        },
        _execute(project, transcript, "pytest -q tests/test_login.py", 1),
        _execute(project, transcript, "pytest -q tests/test_login.py", 0),
        {
            **_base(project, transcript),
            "hook_event_name": "Stop",
            "message_id": FINAL_ID,
            "stop_hook_active": False,
            "tool_execution_count": 0,
            "elapsed_time": 91,
        },
        {
            **_base(project, transcript),
            "hook_event_name": "SessionEnd",
            "message_id": FINAL_ID,
            "reason": "other",
            "session_duration_ms": 309.2,
            "message_count": 9,
        },
    ]
    for payload in calls:
        result = hook(payload, project)
        assert result.returncode == 0, (payload["hook_event_name"], result)
        if payload["hook_event_name"] != "SessionStart":
            assert result.stdout == b"", (payload["hook_event_name"], result)
    assert len(spool.ready_files()) == len(calls)
    stats = drain(flush=False)
    assert stats["stored"] == len(calls) and stats["quarantined"] == 0, stats
    events = [o for o in export() if o["type"] == "event"]
    assert [e["trigger"] for e in events] == [
        "agentSpawn",
        "userPromptSubmit",
        "preToolUse",
        "postToolUse",
        "postToolUse",
        "stop",
        "SessionEnd",
    ]
    assert {e["agent"] for e in events} == {"factory-droid"}
    assert {e["surface"] for e in events} == {"factory-droid"}
    failed, passed = [e for e in events if e["trigger"] == "postToolUse"]
    assert extract.tool_status(failed) is False and extract.tool_status(passed) is True
    (stop,) = [e for e in events if e["trigger"] == "stop"]
    assert stop["assistant_response"] == "The login test waits for the token now; KLD-77."
    (record,) = [o for o in export() if o["type"] == "record"]
    assert "KLD-77" in record["summary"], record


def test_stop_reads_the_message_its_message_id_names(tmp_path):
    transcript = _transcript(tmp_path / "t.jsonl", "the final answer")
    with transcript.open("a") as fh:  # a later assistant line (another turn) is not this Stop's
        fh.write(
            json.dumps({"type": "message", "id": "later", "message": {"role": "assistant", "content": "x"}})
        )
        fh.write('\n{"type": "message", "id": "cut')  # a partial last line
    stop = {"hook_event_name": "Stop", "transcript_path": str(transcript), "message_id": FINAL_ID}
    assert factory_droid.normalise("stop", stop, {})["assistant_response"] == "the final answer"
    assert factory_droid.normalise("stop", {**stop, "message_id": None}, {})["assistant_response"] == "x"
    missing = {"hook_event_name": "Stop", "transcript_path": str(tmp_path / "gone.jsonl")}
    assert "assistant_response" not in factory_droid.normalise("stop", missing, {})
    assert factory_droid.context_output("agentSpawn", "memory") == "memory"


def test_droid_tool_status_and_mcp_client_name():
    def status(response):
        return extract.tool_status({"agent": "factory-droid", "tool_response": response})

    assert status("[Process exited with code 0] in a log\n[Process exited with code 2]") is False
    assert status("KLTOOL-1\n\n\n[Process exited with code 0]") is True
    assert status("No matching memories found in project /p.") is True  # PostToolUse: it ran
    assert status(None) is None
    # Droid's MCP clientInfo name (measured)
    assert app.agent_of_client("factory-cli", environ={}) == "factory-droid"


def test_odd_droid_payloads_are_kept(home, project, tmp_path):
    base = _base(project, tmp_path / "none.jsonl")
    cases = [
        {**base, "hook_event_name": "Stop"},  # no transcript: still stored
        {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "kirolearn___search_memory",
            "tool_response": "x",
        },
        {**base, "hook_event_name": "Notification", "message": "waiting"},
        {**base, "hook_event_name": "SomethingNew", "new": True},
    ]
    for payload in cases:
        result = hook(payload, project)
        assert result.returncode == 0 and result.stdout == b"", result.stderr
    stats = drain(flush=False)
    assert stats["stored"] == len(cases) and stats["quarantined"] == 0, stats


def test_a_new_droid_session_start_gets_the_memory_as_plain_text(home, project, tmp_path):
    transcript = _transcript(tmp_path / "t.jsonl", "Deduplicated by event id, KLD-5150.")
    for payload in (
        {
            **_base(project, transcript),
            "hook_event_name": "UserPromptSubmit",
            "prompt": "make the webhook idempotent",
        },
        _execute(project, transcript, "pytest -q tests/test_webhook.py", 0),
        {**_base(project, transcript), "hook_event_name": "Stop", "message_id": FINAL_ID},
    ):
        assert hook(payload, project).returncode == 0
    drain(flush=False)
    start = {
        **_base(project, transcript),
        "session_id": "s2",
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    result = hook(start, project)
    assert result.returncode == 0, result.stderr
    assert b"KLD-5150" in result.stdout and not result.stdout.startswith(b"{")


SETTINGS_LAYOUTS = {
    "absent": None,
    "empty object": "{}\n",
    "tabs crlf, their hooks and models": '{\r\n\t"hooks": {\r\n\t\t"PostToolUse": [{"hooks": '
    '[{"type": "command", "command": "audit.sh", "timeout": 3}]}]\r\n\t},\r\n\t"customModels": '
    '[{"model": "m", "provider": "generic-chat-completion-api"}]\r\n}',
    "one line": '{"logoAnimation": "off"}',
}
MCP_LAYOUTS = {
    "absent": None,
    "empty object": "{}\n",
    "tabs crlf, their hooks and models": '{\r\n\t"mcpServers": {"gh": {"type": "stdio", "command": "gh-mcp"}}\r\n}',
    "one line": '{"mcpServers": {}}',
}


def _ours(data, event):
    return [h for g in data["hooks"][event] for h in g["hooks"] if "kirolearn-hook" in h["command"]]


@pytest.mark.parametrize("scope", ["project", "user"])
@pytest.mark.parametrize("layout", SETTINGS_LAYOUTS, ids=list(SETTINGS_LAYOUTS))
def test_droid_install_uninstall_exact_bytes(layout, scope, home, project):
    args = ["--project", str(project)] if scope == "project" else []
    root = project if scope == "project" else Path(os.environ["HOME"])
    settings, mcp = root / ".factory" / "settings.json", root / ".factory" / "mcp.json"
    originals = {settings: SETTINGS_LAYOUTS[layout], mcp: MCP_LAYOUTS[layout]}
    for path, text in originals.items():
        if text is not None:
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(text.encode())
    runner = CliRunner()
    result = runner.invoke(cli, ["install", "--agent", "factory-droid", *args, "--yes"])
    assert result.exit_code == 0, result.output
    data = json.loads(settings.read_text())
    for event, timeout in factory_droid.HOOKS:
        (ours,) = _ours(data, event)
        assert ours["timeout"] == timeout and timeout < 60  # seconds
        assert "--agent factory-droid" in ours["command"] and ours["type"] == "command"
    if "audit.sh" in (originals[settings] or ""):
        assert data["hooks"]["PostToolUse"][0]["hooks"][0]["command"] == "audit.sh"  # theirs stays first
    servers = json.loads(mcp.read_text())["mcpServers"]
    server = servers["kirolearn"]
    assert server["type"] == "stdio" and server["command"].endswith("kirolearn-mcp")
    assert server["env"]["KIROLEARN_AGENT"] == "factory-droid"
    assert ("gh" in servers) == ("gh-mcp" in (originals[mcp] or ""))
    once = {p: p.read_bytes() for p in originals}
    again = runner.invoke(cli, ["install", "--agent", "factory-droid", *args, "--yes"])
    assert again.exit_code == 0 and "unchanged" in again.output, again.output
    assert {p: p.read_bytes() for p in originals} == once  # idempotent
    status = runner.invoke(cli, ["status"])
    assert "factory-droid" in status.output, status.output
    doctor = runner.invoke(cli, ["doctor"]).output
    assert f"OK    wired: {settings}" in doctor and f"OK    wired: {mcp}" in doctor, doctor
    assert "factory-droid: kirolearn's MCP server is registered and answers `initialize`" in doctor, doctor
    result = runner.invoke(cli, ["uninstall", "--agent", "factory-droid", *args, "--yes"])
    assert result.exit_code == 0, result.output
    for path, text in originals.items():
        assert (path.read_bytes() if path.exists() else None) == (None if text is None else text.encode())
    if layout == "absent":
        assert not (root / ".factory").exists()


def test_droid_uninstall_after_an_edit_removes_only_ours(home, project):
    settings, mcp = project / ".factory" / "settings.json", project / ".factory" / "mcp.json"
    runner = CliRunner()
    args = ["--agent", "factory-droid", "--project", str(project), "--yes"]
    assert runner.invoke(cli, ["install", *args], catch_exceptions=False).exit_code == 0
    data = json.loads(settings.read_text())
    data["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "notify.sh"}]})
    data["model"] = "custom:m"
    settings.write_text(json.dumps(data, indent=2) + "\n")
    servers = json.loads(mcp.read_text())
    servers["mcpServers"]["gh"] = {"type": "stdio", "command": "gh-mcp"}
    mcp.write_text(json.dumps(servers, indent=2) + "\n")
    assert runner.invoke(cli, ["uninstall", *args], catch_exceptions=False).exit_code == 0
    assert json.loads(settings.read_text()) == {
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify.sh"}]}]},
        "model": "custom:m",
    }
    assert json.loads(mcp.read_text()) == {"mcpServers": {"gh": {"type": "stdio", "command": "gh-mcp"}}}


def test_droid_refuses_a_foreign_server_named_kirolearn(home, project):
    mcp = project / ".factory" / "mcp.json"
    mcp.parent.mkdir()
    mcp.write_text('{"mcpServers": {"kirolearn": {"command": "something-else"}}}\n')
    args = ["install", "--agent", "factory-droid", "--project", str(project), "--yes"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0 and "not kirolearn-mcp" in result.output
    assert not (project / ".factory" / "settings.json").exists()  # all or nothing


def test_droid_wired_for_the_user_refuses_a_second_scope_that_would_fire_twice(home, project):
    runner = CliRunner()
    assert runner.invoke(cli, ["install", "--agent", "factory-droid", "--yes"]).exit_code == 0
    result = runner.invoke(cli, ["install", "--agent", "factory-droid", "--project", str(project), "--yes"])
    assert result.exit_code != 0 and "run every hook twice" in result.output, result.output
    assert not (project / ".factory").exists()
    doctor = runner.invoke(cli, ["doctor"], catch_exceptions=False).output
    assert "factory-droid: wired for this user" in doctor, doctor


def test_droid_installed_hook_command_reaches_the_spool(home, project):
    from kirolearn.install.agents import factory_droid as installer

    assert installer.tool_name("search_memory") == "kirolearn___search_memory"
    runner = CliRunner()
    assert runner.invoke(cli, ["install", "--agent", "factory-droid", "--yes"]).exit_code == 0
    data = json.loads((Path(os.environ["HOME"]) / ".factory" / "settings.json").read_text())
    (ours,) = _ours(data, "Stop")
    payload = {"hook_event_name": "Stop", "session_id": "d1", "cwd": str(project)}
    import subprocess

    done = subprocess.run(
        ["/bin/sh", "-c", ours["command"]], input=json.dumps(payload).encode(), cwd=project, timeout=60
    )
    assert done.returncode == 0 and len(spool.ready_files()) == 1
