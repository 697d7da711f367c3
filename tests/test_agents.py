"""Agent adapters: Claude Code beside Kiro, through the real hook, drain and installer."""

import json
import os

import pytest
from click.testing import CliRunner

from conftest import run_hook
from kirolearn import demo, replay
from kirolearn.capture import agents
from kirolearn.capture import events
from kirolearn.capture import spool
from kirolearn.store import sqlite as store
from kirolearn.capture.agents import claude_code
from kirolearn.cli import cli

RECORDING = os.path.join(demo.RECORDINGS, "claude-code.jsonl")


def test_registry_knows_both_agents_and_rejects_others():
    assert agents.names() == ("kiro", "claude-code")
    assert agents.get().NAME == "kiro" and agents.get("claude-code").NAME == "claude-code"
    with pytest.raises(agents.UnknownAgent, match="expected one of kiro, claude-code"):
        agents.get("cursor")


def test_recorded_claude_code_session_lands_drains_and_is_recalled(tmp_path, home, drain_now):
    project = replay.make_project(str(tmp_path / "shop"))
    calls = replay.load(RECORDING)
    results = replay.replay(calls, project)
    assert [(r.returncode, r.stderr) for r in results] == [(0, b"")] * len(calls)
    spooled = [json.loads(open(p, "rb").read()) for p in spool.ready_files()]
    assert len(spooled) == len(calls)
    assert {e["agent"] for e in spooled} == {"claude-code"}
    assert {e["surface"] for e in spooled} == {"claude-code"}
    assert [e["trigger"] for e in spooled] == ["agentSpawn", "userPromptSubmit", "postToolUse", "postToolUse",
                                                "postToolUse", "postToolUse", "stop"]
    stop = spooled[-1]
    # Claude Code's Stop has no text: it came from the transcript, whose last line was half written.
    assert stop["assistant_response"].startswith("Stripe retries a webhook with the same event id")

    stats, db = drain_now(flush=True)
    assert stats.stored == len(calls) and stats.records_written >= 1
    assert {r["agent"] for r in db.query("select agent from events")} == {"claude-code"}
    (record,) = list(db.query("select * from memory_records"))
    assert "retries from Stripe" in record["title"]
    assert "upserts by id" in record["summary"]
    assert "app/webhooks.py" in json.loads(record["files_touched"])

    # The next session's SessionStart prints that memory as context (stdout of exit 0).
    nxt = {"session_id": "next-session", "transcript_path": os.path.join(project, "t.jsonl"), "cwd": project,
           "hook_event_name": "SessionStart", "source": "startup"}
    result = run_hook(["--agent", "claude-code"], json.dumps(nxt).encode(), cwd=project)
    assert result.returncode == 0
    assert "Stripe retries a webhook with the same event id".encode() in result.stdout  # the line says its outcome


def test_claude_payload_without_agent_is_kiro_and_logged_not_guessed(tmp_path, home, project):
    payload = {"session_id": "s", "transcript_path": "/tmp/t.jsonl", "cwd": str(project),
               "hook_event_name": "UserPromptSubmit", "prompt": "hello"}
    assert run_hook([], json.dumps(payload).encode(), cwd=str(project)).returncode == 0
    (event,) = [json.loads(open(p, "rb").read()) for p in spool.ready_files()]
    assert event["agent"] == "kiro"
    log = (home / "logs" / "hook.log").read_text()
    assert "--agent claude-code" in log


def test_unknown_agent_and_unknown_name_are_rejected_without_echo(home, project):
    secret = "ghp_" + "a1B2" * 9
    result = run_hook(["--agent", "cursor"], b'{"hook_event_name": "Stop"}', cwd=str(project))
    assert result.returncode == 0 and b"unknown agent 'cursor'" in result.stderr
    result = run_hook(["--agent", "claude-code"], json.dumps({"hook_event_name": secret}).encode(),
                      cwd=str(project))
    assert result.returncode == 0 and b"unknown Claude Code hook event name" in result.stderr
    assert secret.encode() not in result.stderr
    assert secret not in (home / "logs" / "hook.log").read_text()
    assert spool.ready_files() == []


def test_version_1_spool_files_still_drain_as_kiro(home, project, drain_now):
    event = events.build_event("userPromptSubmit", {"cwd": str(project), "session_id": "old", "prompt": "hi"})
    del event["agent"]
    event["schema_version"] = 1
    spool.append(event["event_id"], events.serialize(event))
    stats, db = drain_now()
    assert stats.stored == 1 and stats.quarantined == 0
    assert next(db.query("select agent from events"))["agent"] == "kiro"


def test_transcript_reading_is_bounded_and_tolerant(tmp_path):
    path = tmp_path / "t.jsonl"
    lines = [json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": f"answer {i}"}]}})
             for i in range(2000)]
    path.write_text("\n".join(lines) + '\n{"type": "assist')
    assert claude_code.last_assistant_text(str(path), tail_bytes=4096) == "answer 1999"
    assert claude_code.last_assistant_text(str(tmp_path / "missing.jsonl")) is None
    path.write_text('{"type": "user", "message": {"content": "only the user"}}\n')
    assert claude_code.last_assistant_text(str(path)) is None


LAYOUTS = {
    "absent": None,
    "empty object": "{}\n",
    "other settings, 2 spaces": '{\n  "model": "opus",\n  "permissions": {\n    "allow": ["Bash(ls:*)"]\n  }\n}\n',
    "their own hooks, tabs, CRLF, no newline": '{\r\n\t"hooks": {\r\n\t\t"PostToolUse": [{"matcher": "Bash", '
                                                '"hooks": [{"type": "command", "command": "audit.sh"}]}]\r\n\t}\r\n}',
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_claude_install_then_uninstall_gives_back_the_exact_bytes(layout, home, project):
    settings = project / ".claude" / "settings.json"
    original = LAYOUTS[layout]
    if original is not None:
        settings.parent.mkdir()
        settings.write_bytes(original.encode())
    runner = CliRunner()
    result = runner.invoke(cli, ["install", "--agent", "claude-code", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    data = json.loads(settings.read_text())
    for event, _ in claude_code.HOOKS:
        commands = [h["command"] for g in data["hooks"][event] for h in g["hooks"]]
        assert any(c.endswith("kirolearn-hook --agent claude-code || true") for c in commands), commands
    if layout.startswith("their own hooks"):
        assert data["hooks"]["PostToolUse"][0]["hooks"][0]["command"] == "audit.sh"  # theirs kept, first
    installed = settings.read_bytes()
    again = runner.invoke(cli, ["install", "--agent", "claude-code", "--project", str(project), "--yes"])
    assert "unchanged" in again.output and settings.read_bytes() == installed  # idempotent
    dry = runner.invoke(cli, ["uninstall", "--agent", "claude-code", "--project", str(project), "--dry-run"])
    assert dry.exit_code == 0 and settings.exists()
    result = runner.invoke(cli, ["uninstall", "--agent", "claude-code", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    if original is None:
        assert not settings.exists()
    else:
        assert settings.read_bytes() == original.encode()


def test_claude_uninstall_after_the_user_edited_the_file_removes_only_ours(home, project):
    settings = project / ".claude" / "settings.json"
    runner = CliRunner()
    runner.invoke(cli, ["install", "--agent", "claude-code", "--project", str(project), "--yes"])
    data = json.loads(settings.read_text())
    data["model"] = "sonnet"
    settings.write_text(json.dumps(data, indent=2) + "\n")
    result = runner.invoke(cli, ["uninstall", "--agent", "claude-code", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    assert json.loads(settings.read_text()) == {"model": "sonnet"}


def test_status_labels_each_wired_file_by_its_agent(home, project):
    runner = CliRunner()
    assert runner.invoke(cli, ["install", "--project", str(project), "--yes"]).exit_code == 0
    assert runner.invoke(cli, ["install", "--agent", "claude-code", "--project", str(project), "--yes"]).exit_code == 0
    lines = runner.invoke(cli, ["status"]).stdout.splitlines()
    kiro = [line for line in lines if line.startswith("kiro: ")]
    claude = [line for line in lines if line.startswith("claude-code: ")]
    assert len(kiro) == 1 and ".claude" not in kiro[0] and ".kiro" in kiro[0]
    assert len(claude) == 1 and claude[0].endswith(str(project / ".claude" / "settings.json"))
    agents_of = {w["agent"] for w in json.loads(runner.invoke(cli, ["status", "--json"]).stdout)["kiro_wiring"]}
    assert agents_of == {"kiro", "claude-code"}


def test_kiro_install_is_unchanged_by_the_adapter(home, project):
    runner = CliRunner()
    result = runner.invoke(cli, ["install", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    assert (project / ".kiro" / "hooks" / "kirolearn.json").exists()
    assert not (project / ".claude").exists()
