"""Agent adapters: Claude Code beside Kiro, through the real hook, drain and installer."""

import json
import os

import pytest
from click.testing import CliRunner
from conftest import run_hook

from kirolearn import demo
from kirolearn.capture import agents, events, spool
from kirolearn.capture.agents import claude_code
from kirolearn.cli.commands import cli
from kirolearn.core import replay

RECORDING = os.path.join(demo.RECORDINGS, "claude-code.jsonl")


def test_registry_knows_both_agents_and_rejects_others():
    assert agents.names()[:2] == ("kiro", "claude-code")
    assert {"codex", "gemini", "cursor"} <= set(agents.names())  # issue 21, part 2
    assert {"copilot", "opencode"} <= set(agents.names())
    assert agents.get().NAME == "kiro" and agents.get("claude-code").NAME == "claude-code"
    for name in agents.names():
        assert agents.get(name).NAME == name
    with pytest.raises(agents.UnknownAgent, match="expected one of kiro, claude-code"):
        agents.get("no-such-agent")


def test_recorded_claude_code_session_lands_drains_and_is_recalled(tmp_path, home, drain_now):
    project = replay.make_project(str(tmp_path / "shop"))
    calls = replay.load(RECORDING)
    results = replay.replay(calls, project)
    assert [(r.returncode, r.stderr) for r in results] == [(0, b"")] * len(calls)
    spooled = [json.loads(open(p, "rb").read()) for p in spool.ready_files()]
    assert len(spooled) == len(calls)
    assert {e["agent"] for e in spooled} == {"claude-code"}
    assert {e["surface"] for e in spooled} == {"claude-code"}
    assert [e["trigger"] for e in spooled] == [
        "agentSpawn",
        "userPromptSubmit",
        "postToolUse",
        "postToolUse",
        "postToolUse",
        "postToolUse",
        "stop",
    ]
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
    nxt = {
        "session_id": "next-session",
        "transcript_path": os.path.join(project, "t.jsonl"),
        "cwd": project,
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    result = run_hook(["--agent", "claude-code"], json.dumps(nxt).encode(), cwd=project)
    assert result.returncode == 0
    assert b"Stripe retries a webhook with the same event id" in result.stdout  # the line says its outcome


def test_claude_payload_without_agent_is_kiro_and_logged_not_guessed(tmp_path, home, project):
    payload = {
        "session_id": "s",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": str(project),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "hello",
    }
    assert run_hook([], json.dumps(payload).encode(), cwd=str(project)).returncode == 0
    (event,) = [json.loads(open(p, "rb").read()) for p in spool.ready_files()]
    assert event["agent"] == "kiro"
    log = (home / "logs" / "hook.log").read_text()
    assert "--agent claude-code" in log


def test_unknown_agent_and_unknown_name_are_rejected_without_echo(home, project):
    secret = "ghp_" + "a1B2" * 9
    result = run_hook(["--agent", "windsurf"], b'{"hook_event_name": "Stop"}', cwd=str(project))
    assert result.returncode == 0 and b"unknown agent 'windsurf'" in result.stderr
    result = run_hook(
        ["--agent", "claude-code"], json.dumps({"hook_event_name": secret}).encode(), cwd=str(project)
    )
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
    lines = [
        json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": f"answer {i}"}]}})
        for i in range(2000)
    ]
    path.write_text("\n".join(lines) + '\n{"type": "assist')
    assert claude_code.last_assistant_text(str(path), tail_bytes=4096) == "answer 1999"
    assert claude_code.last_assistant_text(str(tmp_path / "missing.jsonl")) is None
    path.write_text('{"type": "user", "message": {"content": "only the user"}}\n')
    assert claude_code.last_assistant_text(str(path)) is None


def test_claude_stop_prefers_last_assistant_message_over_the_transcript(tmp_path, home, project, spooled):
    """Claude Code 2.1.197: when Stop fires, the transcript holds only the turn's first text."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Let me run a command."}],
                },
            }
        )
        + "\n"
    )
    final = "The build passes: 42 tests, none failed."
    stop = {
        "session_id": "s1",
        "transcript_path": str(transcript),
        "cwd": str(project),
        "hook_event_name": "Stop",
        "permission_mode": "default",
        "stop_hook_active": False,
        "last_assistant_message": final,
    }
    result = run_hook(["--agent", "claude-code"], json.dumps(stop).encode(), cwd=str(project))
    assert (result.returncode, result.stderr) == (0, b"")
    (event,) = spooled()
    assert event["trigger"] == "stop" and event["assistant_response"] == final
    assert "last_assistant_message" not in event.get("extra", {})  # stored once, as the answer
    # an older Claude Code without the field (or an empty one): the transcript is the fallback
    for absent in ({}, {"last_assistant_message": ""}):
        payload = (
            {k: v for k, v in stop.items() if k != "last_assistant_message"} | absent | {"session_id": "s2"}
        )
        event = events.build_event("Stop", payload, agent="claude-code")
        assert event["assistant_response"] == "Let me run a command."


def test_claude_tool_failure_is_captured_as_a_failed_tool_use(home, project, spooled):
    """Claude Code sends a failed tool as PostToolUseFailure (no tool_response): it is a postToolUse
    whose response says it failed, never a rejected hook call."""
    failure = {
        "session_id": "s1",
        "cwd": str(project),
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": {"command": "touch /etc/x"},
        "tool_use_id": "t1",
        "error": "touch: cannot touch '/etc/x': Read-only file system",
        "is_interrupt": False,
    }
    result = run_hook(["--agent", "claude-code"], json.dumps(failure).encode(), cwd=str(project))
    assert (result.returncode, result.stderr) == (0, b"")
    (event,) = spooled()
    assert event["trigger"] == "postToolUse" and event["tool_name"] == "Bash"
    assert event["tool_response"] == {"success": False, "error": failure["error"]}
    assert ("PostToolUseFailure", 2) in claude_code.HOOKS  # install wires it


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


@pytest.mark.parametrize(
    "original",
    [
        '{"env": {"A": "1"}}',
        '{\n  "env": {\n    "A": "1"\n  }\n}\n',
        '{"env": {"A": "1"}, "hooks": {"Stop": []}}\r\n',
    ],
)
def test_claude_uninstall_after_a_hand_edit_keeps_every_byte_of_the_users(home, project, original):
    """Issue #33: install, a hand edit, uninstall: only kirolearn's entries go, the rest is the user's bytes."""
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_bytes(original.encode())
    runner = CliRunner()
    assert (
        runner.invoke(
            cli, ["install", "--agent", "claude-code", "--project", str(project), "--yes"]
        ).exit_code
        == 0
    )
    installed = settings.read_bytes().decode()
    assert "kirolearn-hook" in installed
    settings.write_bytes(
        installed.replace('"A": "1"', '"A": "1", "B": "2"', 1).encode()
    )  # the user's hand edit
    result = runner.invoke(cli, ["uninstall", "--agent", "claude-code", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    assert settings.read_bytes() == original.replace('"A": "1"', '"A": "1", "B": "2"', 1).encode()


def test_claude_uninstall_when_the_user_removed_our_entries_says_nothing_to_remove(home, project):
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"env": {"A": "1"}}')
    runner = CliRunner()
    assert (
        runner.invoke(
            cli, ["install", "--agent", "claude-code", "--project", str(project), "--yes"]
        ).exit_code
        == 0
    )
    settings.write_text(
        '{"env": {"A": "1"},\n "model": "opus"}'
    )  # the user took kirolearn's hooks out by hand
    result = runner.invoke(cli, ["uninstall", "--agent", "claude-code", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    assert settings.read_text() == '{"env": {"A": "1"},\n "model": "opus"}'
    assert f"unchanged  {settings}: nothing to remove" in result.output
    assert f"update     {settings}" not in result.output


def test_status_labels_each_wired_file_by_its_agent(home, project):
    runner = CliRunner()
    assert runner.invoke(cli, ["install", "--project", str(project), "--yes"]).exit_code == 0
    assert (
        runner.invoke(
            cli, ["install", "--agent", "claude-code", "--project", str(project), "--yes"]
        ).exit_code
        == 0
    )
    lines = runner.invoke(cli, ["status"]).stdout.splitlines()
    kiro = [line for line in lines if line.startswith("kiro: ")]
    claude = [line for line in lines if line.startswith("claude-code: ")]
    assert len(kiro) == 1 and ".claude" not in kiro[0] and ".kiro" in kiro[0]
    assert len(claude) == 1 and claude[0] == "claude-code: " + ", ".join(
        str(project / name) for name in (".claude/settings.json", ".mcp.json", ".claude/settings.local.json")
    )
    agents_of = {
        w["agent"] for w in json.loads(runner.invoke(cli, ["status", "--json"]).stdout)["kiro_wiring"]
    }
    assert agents_of == {"kiro", "claude-code"}


def test_kiro_install_is_unchanged_by_the_adapter(home, project):
    runner = CliRunner()
    result = runner.invoke(cli, ["install", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    assert (project / ".kiro" / "hooks" / "kirolearn.json").exists()
    assert not (project / ".claude").exists()


def test_safe_tools_are_exactly_the_servers_non_destructive_tools(tmp_path):
    """What installs may auto-approve comes from the MCP server's own annotations."""
    import asyncio

    from kirolearn.mcp_server import build_server

    tools = asyncio.run(build_server(str(tmp_path)).list_tools())
    destructive = {t.name for t in tools if t.annotations and t.annotations.destructiveHint}
    from kirolearn.core import mcp_tools

    assert destructive == set(mcp_tools.MCP_DESTRUCTIVE_TOOLS) == {"forget_memory"}
    assert set(mcp_tools.MCP_SAFE_TOOLS) == {t.name for t in tools} - destructive


def test_claude_install_registers_the_mcp_server_and_approves_only_safe_tools(home, project):
    mcp = project / ".mcp.json"
    theirs = '{\n    "mcpServers": {\n        "github": {"command": "gh-mcp", "args": []}\n    }\n}\n'
    mcp.write_text(theirs)
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_bytes(b'{"permissions": {"allow": ["Bash(ls:*)"]}}')
    runner = CliRunner()
    result = runner.invoke(cli, ["install", "--agent", "claude-code", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    servers = json.loads(mcp.read_text())["mcpServers"]
    assert list(servers) == ["github", "kirolearn"] and servers["kirolearn"]["type"] == "stdio"
    assert servers["kirolearn"]["command"].endswith("kirolearn-mcp") and os.path.exists(
        servers["kirolearn"]["command"]
    )
    settings = json.loads(local.read_text())
    assert settings["enabledMcpjsonServers"] == ["kirolearn"]
    allowed = settings["permissions"]["allow"]
    assert allowed[0] == "Bash(ls:*)" and "mcp__kirolearn__search_memory" in allowed
    assert (
        not any("forget" in a for a in allowed) and "mcp__kirolearn" not in allowed
    )  # never the whole server
    result = runner.invoke(cli, ["uninstall", "--agent", "claude-code", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    assert mcp.read_text() == theirs and local.read_bytes() == b'{"permissions": {"allow": ["Bash(ls:*)"]}}'
    assert not (project / ".claude" / "settings.json").exists()


def test_doctor_checks_each_wired_agent_and_status_counts_its_events(home, project, drain_now):
    runner = CliRunner()
    for agent in ("claude-code", "copilot", "opencode"):
        result = runner.invoke(cli, ["install", "--agent", agent, "--project", str(project), "--yes"])
        assert result.exit_code == 0, result.output
    payloads = {
        "claude-code": (
            ["--agent", "claude-code"],
            {"session_id": "c", "cwd": str(project), "hook_event_name": "UserPromptSubmit", "prompt": "hi"},
        ),
        "copilot": (
            ["--agent", "copilot", "userPromptSubmitted"],
            {"sessionId": "p", "cwd": str(project), "timestamp": 1, "prompt": "hi"},
        ),
        "opencode": (
            ["--agent", "opencode", "chat.message"],
            {"hook_event_name": "chat.message", "session_id": "o", "cwd": str(project), "prompt": "hi"},
        ),
    }
    for argv, payload in payloads.values():
        assert run_hook(argv, json.dumps(payload).encode(), cwd=str(project)).returncode == 0
    stats, _ = drain_now()
    assert stats.stored == 3 and stats.quarantined == 0
    lines = runner.invoke(cli, ["status"]).stdout.splitlines()
    assert "events in the last 24 h: claude-code 1, copilot 1, opencode 1" in lines
    doctor = runner.invoke(cli, ["doctor"]).stdout
    for agent in payloads:
        assert f"{agent}: kirolearn's MCP server is registered" in doctor
    (project / ".mcp.json").write_text("{ not json")
    doctor = runner.invoke(cli, ["doctor"]).stdout
    assert f"{project / '.mcp.json'} is not valid JSON any more" in doctor
    assert "claude-code: no wired file registers kirolearn's MCP server" in doctor


def test_copilot_payload_is_mapped_and_its_stop_waits_for_the_final_message(tmp_path, project):
    """Copilot 1.0.102: camelCase, no event name; agentStop's transcript may still end with the first text."""
    import threading

    from kirolearn.capture.agents import copilot

    def message(content, tools):
        return (
            json.dumps({"type": "assistant.message", "data": {"content": content, "toolRequests": tools}})
            + "\n"
        )

    transcript = tmp_path / "events.jsonl"
    transcript.write_text(message("Let me run a command.", [{"name": "bash"}]))
    done = threading.Event()

    def finish():  # Copilot writes the final message after the hook started
        done.wait(5)
        with open(transcript, "a") as fh:
            fh.write(message("", [{"name": "view"}]) + message("The answer.", []))

    writer = threading.Thread(target=finish)
    writer.start()
    stop = {
        "sessionId": "s1",
        "timestamp": 1,
        "cwd": str(project),
        "transcriptPath": str(transcript),
        "stopReason": "end_turn",
        "stop_hook_active": False,
    }
    done.set()
    event = events.build_event("agentStop", stop, agent="copilot")
    writer.join(5)
    assert event["assistant_response"] == "The answer." and event["session_id"] == "s1"
    assert event["surface"] == "copilot-cli" and event["extra"]["stopReason"] == "end_turn"
    tool = events.build_event(
        "postToolUse",
        {
            "sessionId": "s1",
            "cwd": str(project),
            "toolName": "bash",
            "toolArgs": {"command": "ls"},
            "toolResult": {"resultType": "success", "textResultForLlm": "a"},
        },
        agent="copilot",
    )
    assert (tool["tool_name"], tool["tool_input"], tool["tool_response"]["textResultForLlm"]) == (
        "bash",
        {"command": "ls"},
        "a",
    )
    assert json.loads(copilot.context_output("agentSpawn", "memo")) == {"additionalContext": "memo"}
    transcript.write_text(
        message("Still working.", [{"name": "bash"}])
    )  # never finished: the newest text, in time
    assert copilot.final_text(str(transcript), wait=0.1) == "Still working."


def test_opencode_plugin_carries_the_hook_command_and_payloads_drain(home, project, drain_now):
    from kirolearn.install.agents import opencode

    text = opencode.plugin_text()
    argv = json.loads(text.split("const HOOK = ", 1)[1].split(";\n", 1)[0])
    assert argv[-2:] == ["--agent", "opencode"] and os.path.exists(argv[0])
    assert "__KIROLEARN" not in text
    for name, payload in (
        ("session.created", {}),
        ("chat.message", {"prompt": "hi"}),
        (
            "tool.execute.after",
            {"tool_name": "bash", "tool_input": {"command": "ls"}, "tool_response": {"output": "a"}},
        ),
        ("session.idle", {"assistant_response": "done"}),
    ):
        body = {"hook_event_name": name, "session_id": "ses_1", "cwd": str(project), **payload}
        assert (
            run_hook(["--agent", "opencode", name], json.dumps(body).encode(), cwd=str(project)).returncode
            == 0
        )
    stats, db = drain_now()
    assert stats.stored == 4 and stats.quarantined == 0
    assert [r["trigger"] for r in db.query("select trigger from events order by received_at")] == [
        "agentSpawn",
        "userPromptSubmit",
        "postToolUse",
        "stop",
    ]


def test_install_leaves_a_users_own_entry_of_our_name_alone_and_writes_nothing(home, project):
    mcp = project / ".mcp.json"
    theirs = '{"mcpServers": {"kirolearn": {"command": "their-own-server"}}}'
    mcp.write_text(theirs)
    opencode_json = project / "opencode.json"
    opencode_json.write_text('{"permission": "allow"}\n')  # a string, not an object: cannot take our entry
    runner = CliRunner()
    for agent in ("claude-code", "opencode"):
        result = runner.invoke(cli, ["install", "--agent", agent, "--project", str(project), "--yes"])
        assert result.exit_code == 1 and "nothing was written" in result.output, result.output
    assert mcp.read_text() == theirs and opencode_json.read_text() == '{"permission": "allow"}\n'
    assert not (project / ".claude").exists()


def test_claude_global_install_registers_the_user_scope_server_and_gives_the_bytes_back(home):
    state = home.parent / "user-home" / ".claude.json"
    theirs = '{\n  "numStartups": 3,\n  "projects": {"/x": {"allowedTools": []}}\n}\n'
    state.write_text(theirs)
    runner = CliRunner()
    result = runner.invoke(cli, ["install", "--agent", "claude-code", "--yes"])
    assert result.exit_code == 0, result.output
    assert json.loads(state.read_text())["mcpServers"]["kirolearn"]["type"] == "stdio"
    assert (home.parent / "user-home" / ".claude" / "settings.json").exists()
    result = runner.invoke(cli, ["uninstall", "--agent", "claude-code", "--yes"])
    assert result.exit_code == 0, result.output
    assert state.read_text() == theirs
    assert not (home.parent / "user-home" / ".claude").exists()
