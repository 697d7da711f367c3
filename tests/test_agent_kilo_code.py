"""Kilo Code's adapter through the real `kirolearn-hook`, drain and installer, on payloads of the shapes
the opencode plugin sent from Kilo Code 7.7.7 here (docs/agents/kilo-code.md); tests/agents/test_kilo_code.py
runs the real client."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import run_hook
from helpers import drain, exported

from kirolearn.capture import spool
from kirolearn.cli.commands import cli
from kirolearn.install.agents import kilo_code
from kirolearn.pipeline import extract

pytestmark = pytest.mark.timeout(120)
SESSION = "ses_dc09f655fffepGY1sXHa3Ezgma"  # Kilo Code's session id shape


def _bash(project, command, code, output):
    return {
        "hook_event_name": "tool.execute.after",
        "session_id": SESSION,
        "cwd": str(project),
        "tool_name": "bash",
        "tool_input": {"command": command, "description": "Print"},
        "tool_response": {
            "title": "Print",
            "output": output,
            "metadata": {"output": output, "exit": code, "description": "Print", "truncated": False},
        },
    }


def hook(payload, project):
    return run_hook(["--agent", "kilo-code"], json.dumps(payload).encode(), cwd=str(project))


def test_a_session_of_kilo_payloads_becomes_one_record_with_its_final_text(home, project):
    base = {"session_id": SESSION, "cwd": str(project)}
    calls = [
        {**base, "hook_event_name": "session.created"},
        {
            **base,
            "hook_event_name": "chat.message",
            "prompt": '"fix the flaky login test"',
        },  # `kilo run` quotes it
        _bash(project, "ls /no/such/dir", 2, "ls: cannot access '/no/such/dir': No such file or directory\n"),
        _bash(project, "pytest -q tests/test_login.py", 0, "1 passed\n"),
        {
            **base,
            "hook_event_name": "session.idle",
            "assistant_response": "The login test waits now; KLK-77.",
        },
    ]
    for payload in calls:
        result = hook(payload, project)
        assert result.returncode == 0 and result.stdout == b"", (payload["hook_event_name"], result)
    assert len(spool.ready_files()) == len(calls)
    stats = drain(flush=False)
    assert stats["stored"] == len(calls) and stats["quarantined"] == 0, stats
    objects = exported()
    events = [o for o in objects if o["type"] == "event"]
    assert [e["trigger"] for e in events] == [
        "agentSpawn",
        "userPromptSubmit",
        "postToolUse",
        "postToolUse",
        "stop",
    ]
    assert {e["agent"] for e in events} == {"kilo-code"} and {e["surface"] for e in events} == {"kilo-code"}
    failed, passed = [e for e in events if e["trigger"] == "postToolUse"]
    assert extract.tool_status(failed) is False and extract.tool_status(passed) is True
    assert events[-1]["assistant_response"] == "The login test waits now; KLK-77."
    (record,) = [o for o in objects if o["type"] == "record"]
    assert "KLK-77" in record["summary"], record


def test_metadata_exit_is_the_status_of_a_kilo_tool_call():
    def status(response):
        return extract.tool_status({"agent": "kilo-code", "tool_response": response})

    assert status({"output": "x", "metadata": {"exit": 0}}) is True
    assert status({"output": "x", "metadata": {"exit": 127}}) is False
    assert status({"output": "Exit Code: 0", "metadata": {"exit": 1}}) is False  # the status, not the text
    assert status({"output": "x", "metadata": {"exit": None}}) is None  # killed: no status
    assert status({"output": "x", "metadata": {"exit": True}}) is None
    assert status({"output": "file read", "metadata": {"preview": "..."}}) is None  # a tool that is no shell
    assert status("plain") is None


def test_unknown_and_broken_kilo_payloads_exit_0_and_are_kept(home, project):
    for raw in (
        b'{"hook_event_name": "session.idle", "session_id": "s", "assistant_response": {"parts": [1]}}',
        b'{"hook_event_name": "session.future", "session_id": "s"}',
        b'{"hook_event_name": "session.idle", "sess',
    ):
        result = run_hook(["--agent", "kilo-code"], raw, cwd=str(project))
        assert (result.returncode, result.stdout) == (0, b"")
    quarantine = Path(os.environ["KIROLEARN_HOME"]) / "spool" / "quarantine"
    assert len([p for p in quarantine.iterdir() if not p.name.endswith(".reason")]) == 2  # kept, not lost
    stats = drain(flush=False)
    assert stats["stored"] == 1, stats


LAYOUTS = {
    "none": None,
    "schema only (what Kilo Code writes)": '{\n  "$schema": "https://app.kilo.ai/config.json"\n}',
    "tabs crlf, their plugin, servers and permissions": '{\r\n\t"$schema": "https://app.kilo.ai/config.json",'
    '\r\n\t"plugin": ["other-plugin"],\r\n\t"mcp": {"gh": {"type": "local", "command": ["gh-mcp"]}},\r\n\t'
    '"permission": {"bash": "allow"}\r\n}\r\n',
}


@pytest.mark.parametrize("scope", ["project", "user"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_kilo_install_uninstall_exact_bytes(layout, scope, home, project):
    args = ["--project", str(project)] if scope == "project" else []
    root = project if scope == "project" else Path(os.environ["HOME"]) / ".config" / "kilo"
    config = root / "kilo.json"
    original = LAYOUTS[layout]
    if original is not None:
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_bytes(original.encode())
    if scope == "user":  # Kilo Code's first run leaves this beside it; it merges both files
        root.mkdir(parents=True, exist_ok=True)
        (root / "kilo.jsonc").write_text(json.dumps({"$schema": kilo_code.SCHEMA}, indent=2))
    runner = CliRunner()
    result = runner.invoke(cli, ["install", "--agent", "kilo-code", *args, "--yes"])
    assert result.exit_code == 0, result.output
    data = json.loads(config.read_text())
    assert data["$schema"] == kilo_code.SCHEMA
    server = data["mcp"]["kirolearn"]
    assert (
        server["command"][0].endswith("kirolearn-mcp")
        and server["environment"]["KIROLEARN_AGENT"] == "kilo-code"
    )
    assert data["permission"]["kirolearn_forget_memory"] == "ask"
    assert "kirolearn_search_memory" not in data["permission"]
    (plugin,) = [p for p in data["plugin"] if "kirolearn" in p]
    text = Path(plugin.removeprefix("file://")).read_text()
    assert '"--agent", "kilo-code"]' in text and "experimental.chat.system.transform" in text
    once = config.read_bytes()
    again = runner.invoke(cli, ["install", "--agent", "kilo-code", *args, "--yes"])
    assert "unchanged" in again.output and config.read_bytes() == once
    status = runner.invoke(cli, ["status", "--json"], catch_exceptions=False)
    assert "kilo-code" in status.output, status.output
    doctor = runner.invoke(cli, ["doctor"])
    assert "kilo-code" in doctor.output, doctor.output
    result = runner.invoke(cli, ["uninstall", "--agent", "kilo-code", *args, "--yes"])
    assert result.exit_code == 0, result.output
    assert (config.read_bytes() if config.exists() else None) == (
        None if original is None else original.encode()
    )
    assert not Path(plugin.removeprefix("file://")).exists()


@pytest.mark.parametrize(
    "jsonc",
    [
        '{\n  // mine\n  "model": "x"\n}\n',
        '{"plugin": ["x"]}',
        '{"mcp": {"kirolearn": {"type": "remote", "url": "x"}}}',
        '{"permission": "allow"}',
        '{"permission": {"kirolearn_forget_memory": "allow"}}',
    ],
)
def test_kilo_leaves_a_jsonc_whose_members_would_win_alone(jsonc, home, project):
    (project / "kilo.jsonc").write_text(jsonc)
    result = CliRunner().invoke(cli, ["install", "--agent", "kilo-code", "--project", str(project), "--yes"])
    assert result.exit_code != 0
    assert "kilo.jsonc" in result.output and "docs/agents/kilo-code.md" in result.output
    assert not (project / "kilo.json").exists()


def test_kilo_refuses_a_foreign_server_named_kirolearn(home, project):
    mine = (
        '{"$schema": "https://app.kilo.ai/config.json", "mcp": {"kirolearn": {"type": "remote", "url": "x"}}}'
    )
    (project / "kilo.json").write_text(mine)
    result = CliRunner().invoke(cli, ["install", "--agent", "kilo-code", "--project", str(project), "--yes"])
    assert result.exit_code != 0 or "left untouched" in result.output
    assert (project / "kilo.json").read_text() == mine


def test_doctor_warns_when_a_project_wires_opencode_and_kilo_code(home, project, monkeypatch):
    """Kilo Code loads a project's opencode.json beside kilo.json (measured with 7.7.7): both plugins run."""
    runner = CliRunner()
    for agent in ("kilo-code", "opencode"):
        result = runner.invoke(cli, ["install", "--agent", agent, "--project", str(project), "--yes"])
        assert result.exit_code == 0, result.output
    monkeypatch.chdir(project)
    doctor = runner.invoke(cli, ["doctor"])
    (line,) = [row for row in doctor.output.splitlines() if "runs both plugins" in row]
    assert line.startswith("WARN") and "opencode.json" in line and "kilo.json" in line
    result = runner.invoke(cli, ["uninstall", "--agent", "opencode", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    assert "runs both plugins" not in runner.invoke(cli, ["doctor"]).output
