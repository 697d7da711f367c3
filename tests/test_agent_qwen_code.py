"""Qwen Code's adapter through the real `kirolearn-hook`, drain and installer, on payloads of the shapes
Qwen Code 0.24.4 sent here (docs/agents/qwen-code.md); tests/agents/test_qwen_code.py runs the real client."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import run_hook
from helpers import drain

from kirolearn.capture import spool
from kirolearn.capture.agents import qwen_code
from kirolearn.cli.commands import cli
from kirolearn.pipeline import extract

pytestmark = pytest.mark.timeout(120)


def _base(project, session="q1"):
    return {
        "session_id": session,
        "transcript_path": "/nonexistent/chat.jsonl",
        "cwd": str(project),
        "timestamp": "2026-12-04T03:12:56.581Z",
        "permission_mode": "default",
    }


def _shell(project, command, code, session="q1"):
    llm = f"Command: {command}\nDirectory: (root)\nOutput: out\nError: (none)\nExit Code: {code}\nSignal: (none)"
    payload = {**_base(project, session), "tool_name": "run_shell_command", "tool_use_id": "toolu_1"}
    payload["tool_input"] = {"command": command, "is_background": False, "description": "run it"}
    if code == 0:
        return {
            **payload,
            "hook_event_name": "PostToolUse",
            "tool_response": {"llmContent": llm, "returnDisplay": "out"},
        }
    return {**payload, "hook_event_name": "PostToolUseFailure", "error": llm, "is_interrupt": False}


def hook(payload, project):
    return run_hook(["--agent", "qwen-code"], json.dumps(payload).encode(), cwd=str(project))


def export():
    result = CliRunner().invoke(cli, ["export"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_a_session_of_qwen_payloads_becomes_one_record_with_its_final_text(home, project):
    calls = [
        {**_base(project), "hook_event_name": "SessionStart", "source": "startup", "model": "qwen3-coder"},
        {**_base(project), "hook_event_name": "UserPromptSubmit", "prompt": "fix the flaky login test"},
        {**_base(project), "hook_event_name": "PreToolUse", "tool_name": "read_file", "tool_input": {}},
        _shell(project, "pytest -q tests/test_login.py", 1),
        {**_base(project), "hook_event_name": "UserPromptSubmit", "prompt": ""},  # before the next model call
        _shell(project, "pytest -q tests/test_login.py", 0),
        {**_base(project), "hook_event_name": "UserPromptSubmit", "prompt": "  \n"},
        {
            **_base(project),
            "hook_event_name": "Stop",
            "stop_hook_active": False,
            "last_assistant_message": "The login test waits for the token now; KLQ-77.",
        },
    ]
    for payload in calls:
        result = hook(payload, project)
        assert result.returncode == 0 and result.stdout == b"", (payload["hook_event_name"], result)
    assert len(spool.ready_files()) == len(calls) - 2  # the two empty prompts are no events
    stats = drain(flush=False)
    assert stats["stored"] == len(calls) - 2 and stats["quarantined"] == 0, stats
    objects = export()
    events = [o for o in objects if o["type"] == "event"]
    assert [e["trigger"] for e in events] == [
        "agentSpawn",
        "userPromptSubmit",
        "preToolUse",
        "postToolUse",
        "postToolUse",
        "stop",
    ]
    assert {e["agent"] for e in events} == {"qwen-code"} and {e["surface"] for e in events} == {"qwen-code"}
    assert [e.get("prompt") for e in events if e["trigger"] == "userPromptSubmit"] == [
        "fix the flaky login test"
    ]
    failed, passed = [e for e in events if e["trigger"] == "postToolUse"]
    assert extract.tool_status(failed) is False and extract.tool_status(passed) is True
    assert events[-1]["assistant_response"] == "The login test waits for the token now; KLQ-77."
    (record,) = [o for o in objects if o["type"] == "record"]
    assert "KLQ-77" in record["summary"], record


def test_exit_code_trailer_is_the_status_of_a_qwen_shell_call():
    def status(llm):
        return extract.tool_status(
            {"agent": "qwen-code", "tool_response": {"llmContent": llm, "returnDisplay": ""}}
        )

    assert status("Output: Exit Code: 0 in a log line\nExit Code: 2\nSignal: (none)") is False
    assert status("Output: failed once\nExit Code: 1 earlier\nExit Code: 0\nSignal: (none)") is True
    assert status("Successfully read file") is True  # a tool that is no shell: PostToolUse means it ran
    assert extract.tool_status({"agent": "qwen-code", "tool_response": "plain"}) is None
    failure = qwen_code.normalise(
        "postToolUse", {"hook_event_name": "PostToolUseFailure", "error": "Exit Code: 3"}, {}
    )
    assert failure["tool_response"] == {"success": False, "error": "Exit Code: 3"}
    assert extract.tool_status({"agent": "qwen-code", **failure}) is False


def test_empty_prompt_is_skipped_but_other_odd_payloads_are_kept(home, project):
    assert qwen_code.skip({"hook_event_name": "UserPromptSubmit", "prompt": ""})
    assert not qwen_code.skip({"hook_event_name": "UserPromptSubmit", "prompt": "x"})
    assert not qwen_code.skip({"hook_event_name": "Stop", "prompt": ""})
    cases = [
        {**_base(project), "hook_event_name": "Stop"},  # no final text: still stored
        {**_base(project), "hook_event_name": "PostToolUse", "tool_name": "x", "tool_response": "a string"},
        {**_base(project), "hook_event_name": "SessionEnd", "reason": "other"},
        {**_base(project), "hook_event_name": "TodoCreated", "new": True},
    ]
    for payload in cases:
        result = hook(payload, project)
        assert result.returncode == 0 and result.stdout == b"", result.stderr
    assert len(spool.ready_files()) == len(cases)
    stats = drain(flush=False)
    assert stats["stored"] == len(cases) and stats["quarantined"] == 0, stats


def test_stop_prefers_last_assistant_message_then_the_chat_file(tmp_path):
    chat = tmp_path / "chat.jsonl"
    lines = [
        {"type": "assistant", "message": {"role": "model", "parts": [{"text": "from the chat file"}]}},
        {"type": "system", "subtype": "ui_telemetry"},
    ]
    chat.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    sent = {"last_assistant_message": "the real final answer", "transcript_path": str(chat)}
    assert qwen_code.normalise("stop", sent, {})["assistant_response"] == "the real final answer"
    assert qwen_code.normalise("stop", {"transcript_path": str(chat)}, {})["assistant_response"] == (
        "from the chat file"
    )
    out = json.loads(qwen_code.context_output("agentSpawn", "memory"))
    assert out == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "memory"}}
    assert qwen_code.context_output("stop", "memory") == ""


def test_a_new_session_start_gets_the_memory_as_json_context(home, project):
    for payload in (
        {**_base(project), "hook_event_name": "UserPromptSubmit", "prompt": "make the webhook idempotent"},
        _shell(project, "pytest -q tests/test_webhook.py", 0),
        {
            **_base(project),
            "hook_event_name": "Stop",
            "last_assistant_message": "Deduplicated by event id, KLQ-5150.",
        },
    ):
        assert hook(payload, project).returncode == 0
    drain(flush=False)
    result = hook({**_base(project, "q2"), "hook_event_name": "SessionStart", "source": "startup"}, project)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "KLQ-5150" in out["hookSpecificOutput"]["additionalContext"]


LAYOUTS = {
    "absent": None,
    "empty object": "{}\n",
    "tabs crlf, their hooks, servers and permissions": '{\r\n\t"hooks": {\r\n\t\t"PostToolUse": [{"hooks": '
    '[{"type": "command", "command": "audit.sh"}]}]\r\n\t},\r\n\t"mcpServers": {"gh": {"command": '
    '"gh-mcp"}},\r\n\t"permissions": {"allow": ["read_file"]}\r\n}',
    "one line": '{"ui": {"theme": "dark"}}',
}


@pytest.mark.parametrize("scope", ["project", "user"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_qwen_install_uninstall_exact_bytes(layout, scope, home, project):
    args = ["--project", str(project)] if scope == "project" else []
    root = project if scope == "project" else Path(os.environ["HOME"])
    settings = root / ".qwen" / "settings.json"
    original = LAYOUTS[layout]
    if original is not None:
        settings.parent.mkdir()
        settings.write_bytes(original.encode())
    runner = CliRunner()
    result = runner.invoke(cli, ["install", "--agent", "qwen-code", *args, "--yes"])
    assert result.exit_code == 0, result.output
    data = json.loads(settings.read_text())
    for event, timeout in qwen_code.HOOKS:
        (ours,) = [h for g in data["hooks"][event] for h in g["hooks"] if "kirolearn-hook" in h["command"]]
        assert ours["timeout"] == timeout and timeout >= 1000  # milliseconds
        assert "--agent qwen-code" in ours["command"]
    server = data["mcpServers"]["kirolearn"]
    assert server["command"].endswith("kirolearn-mcp") and server["alwaysLoadTools"] is True
    assert server["env"]["KIROLEARN_AGENT"] == "qwen-code"
    allowed = data["permissions"]["allow"]
    assert "mcp__kirolearn__search_memory" in allowed and "mcp__kirolearn__forget_memory" not in allowed
    assert not server.get("trust")  # trust would approve forget_memory too
    once = settings.read_bytes()
    again = runner.invoke(cli, ["install", "--agent", "qwen-code", *args, "--yes"])
    assert "unchanged" in again.output and settings.read_bytes() == once
    status = runner.invoke(cli, ["status"])
    assert "qwen-code" in status.output, status.output
    result = runner.invoke(cli, ["uninstall", "--agent", "qwen-code", *args, "--yes"])
    assert result.exit_code == 0, result.output
    assert (settings.read_bytes() if settings.exists() else None) == (
        None if original is None else original.encode()
    )
    assert not (Path(os.environ["HOME"]) / ".qwen" / "mcpApprovals.json").exists()


def test_qwen_project_approval_is_qwens_hash_and_goes_back_exactly(home, project):
    from kirolearn.install.agents import qwen_code as installer

    # the hash `qwen mcp approve` wrote here (0.24.4) for this config
    assert installer.config_hash({"command": "/bin/cat", "alwaysLoadTools": True}) == (
        "77c18af7df5b9a47ae3f42f46a6a2a4c048dadcc167889b38c50db8cb1ab67f4"
    )
    approvals = Path(os.environ["HOME"]) / ".qwen" / "mcpApprovals.json"
    approvals.parent.mkdir()
    original = '{\n  "/elsewhere": {\n    "gh": {"hash": "abc", "status": "approved"}\n  }\n}\n'
    approvals.write_text(original)
    runner = CliRunner()
    result = runner.invoke(cli, ["install", "--agent", "qwen-code", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    data = json.loads(approvals.read_text())
    server = json.loads((project / ".qwen" / "settings.json").read_text())["mcpServers"]["kirolearn"]
    ours = data[os.path.realpath(project)]["kirolearn"]
    assert ours == {"hash": installer.config_hash(server), "status": "approved"}
    assert data["/elsewhere"] == {"gh": {"hash": "abc", "status": "approved"}}
    doctor = runner.invoke(cli, ["doctor"]).output
    assert f"OK    wired: {approvals}" in doctor and "qwen-code: wired for this user" not in doctor, doctor
    # the user's scope keeps a project's wiring, its approval too
    result = runner.invoke(cli, ["uninstall", "--agent", "qwen-code", "--yes"])
    assert result.exit_code == 0 and "kept" in result.output, result.output
    assert os.path.realpath(project) in json.loads(approvals.read_text())
    result = runner.invoke(cli, ["uninstall", "--agent", "qwen-code", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    assert approvals.read_text() == original


def test_qwen_uninstall_after_an_edit_removes_only_ours(home, project):
    settings = project / ".qwen" / "settings.json"
    runner = CliRunner()
    runner.invoke(
        cli, ["install", "--agent", "qwen-code", "--project", str(project), "--yes"], catch_exceptions=False
    )
    data = json.loads(settings.read_text())
    data["ui"] = {"theme": "dark"}
    settings.write_text(json.dumps(data, indent=2) + "\n")
    runner.invoke(
        cli, ["uninstall", "--agent", "qwen-code", "--project", str(project), "--yes"], catch_exceptions=False
    )
    # the file stays the user's now, with the schema version Qwen Code itself would have added
    assert json.loads(settings.read_text()) == {"$version": 4, "ui": {"theme": "dark"}}


def test_qwen_refuses_a_foreign_server_named_kirolearn(home, project):
    settings = project / ".qwen" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"mcpServers": {"kirolearn": {"command": "something-else"}}}\n')
    result = CliRunner().invoke(cli, ["install", "--agent", "qwen-code", "--project", str(project), "--yes"])
    assert result.exit_code != 0 and "not kirolearn-mcp" in result.output


def test_qwen_wired_for_the_user_refuses_a_second_scope_that_would_fire_twice(home, project):
    runner = CliRunner()
    assert runner.invoke(cli, ["install", "--agent", "qwen-code", "--yes"]).exit_code == 0
    result = runner.invoke(cli, ["install", "--agent", "qwen-code", "--project", str(project), "--yes"])
    assert result.exit_code != 0 and "run every hook twice" in result.output, result.output
    assert not (project / ".qwen").exists()
    doctor = runner.invoke(cli, ["doctor"], catch_exceptions=False).output
    assert "qwen-code: wired for this user" in doctor, doctor
