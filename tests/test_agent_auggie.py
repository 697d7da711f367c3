"""Auggie's adapter through the real `kirolearn-hook`, drain and installer, on payloads of the shapes
Auggie 0.36.0 sent here (docs/agents/auggie.md); tests/agents/test_auggie.py runs the real client."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import hook_env, run_hook
from helpers import drain

from kirolearn.capture import spool
from kirolearn.capture.agents import auggie
from kirolearn.cli.commands import cli
from kirolearn.core import mcp_tools
from kirolearn.pipeline import extract

pytestmark = pytest.mark.timeout(120)
RULE = (".augment", "rules", "kirolearn-memory.md")


def _base(project, event, session="a1"):
    return {"hook_event_name": event, "conversation_id": session, "workspace_roots": [str(project)]}


def _shell(project, command, code, session="a1"):
    output = (
        "Here are the results from executing the command.\n<return-code>\n"
        f"{code}\n</return-code>\n<output>\nout\n\n</output>"
    )
    return {
        **_base(project, "PostToolUse", session),
        "tool_name": "launch-process",
        "tool_input": {"command": command, "wait": True, "max_wait_seconds": 30, "cwd": str(project)},
        "tool_output": output,
        "tool_error": None,
        "is_mcp_tool": False,
    }


def _stop(project, text, session="a1"):
    exchange = {
        "request_message": "fix it",
        "response_text": text,
        "request_id": "r1",
        "request_nodes": [{"id": 1, "type": 1, "tool_result_node": {"tool_use_id": "t1", "content": "x"}}],
        "response_nodes": [],
    }
    return {
        **_base(project, "Stop", session),
        "agent_stop_cause": "end_turn",
        "_exchange": {"exchange": exchange, "changedFiles": []},
    }


def hook(payload, project, **env):
    env = hook_env(AUGMENT_PROJECT_DIR=str(project), AUGMENT_HOOK_EVENT=payload["hook_event_name"], **env)
    return run_hook(["--agent", "auggie"], json.dumps(payload).encode(), env=env, cwd=str(project))


def export():
    result = CliRunner().invoke(cli, ["export"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_a_session_of_auggie_payloads_becomes_one_record_with_its_final_text(home, project):
    calls = [
        _base(project, "SessionStart"),
        {**_base(project, "PromptSubmit"), "user_prompt": "fix the flaky login test"},
        {**_shell(project, "pytest -q", 0), "hook_event_name": "PreToolUse", "tool_output": "[undefined]"},
        _shell(project, "pytest -q tests/test_login.py", 1),
        _shell(project, "pytest -q tests/test_login.py", 0),
        _stop(project, "The login test waits for the token now; KLA-77."),
        _base(project, "SessionEnd"),
    ]
    for payload in calls:
        result = hook(payload, project)
        assert result.returncode == 0 and result.stdout == b"", (payload["hook_event_name"], result)
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
    assert {e["agent"] for e in events} == {"auggie"} and {e["session_id"] for e in events} == {"a1"}
    assert {e["cwd"] for e in events} == {str(project)}  # the first workspace root: Auggie sends no cwd
    assert [e.get("prompt") for e in events if e["trigger"] == "userPromptSubmit"] == [
        "fix the flaky login test"
    ]
    failed, passed = [e for e in events if e["trigger"] == "postToolUse"]
    assert extract.tool_status(failed) is False and extract.tool_status(passed) is True
    stop = events[-2]
    assert stop["assistant_response"] == "The login test waits for the token now; KLA-77."
    assert "_exchange" not in json.dumps(stop)  # the turn again, tool results too: only its answer is kept
    (record,) = [o for o in export() if o["type"] == "record"]
    assert "KLA-77" in record["summary"], record


def test_return_code_is_the_status_of_an_auggie_shell_call():
    def status(output, error=None):
        response = {"output": output, **({"error": error} if error else {})}
        return extract.tool_status({"agent": "auggie", "tool_response": response})

    head = "Here are the results from executing the command.\n<return-code>\n"
    assert status(head + "0\n</return-code>\n<output>\n<return-code>\n1\n</return-code>\n</output>") is True
    assert status(head + "127\n</return-code>\n<output>\nsh: nope: not found\n</output>") is False
    assert status("Successfully edited the file") is True  # a tool that is no shell ran
    assert status("", error="Tool call failed") is False
    assert (
        extract.tool_status({"agent": "auggie", "tool_response": {"output": "x", "is_error": True}}) is False
    )
    assert extract.tool_status({"agent": "auggie", "tool_response": "plain"}) is None
    failed = _shell("/p", "ls", 2)
    normal = auggie.normalise("postToolUse", {**failed, "tool_error": failed["tool_output"]}, {})
    assert normal["tool_response"] == {"output": failed["tool_output"], "is_error": True}  # stored once
    assert "tool_output" not in normal and "tool_error" not in normal
    other = auggie.normalise("postToolUse", {**failed, "tool_error": "boom"}, {})
    assert other["tool_response"]["error"] == "boom"
    assert extract.tool_status({"agent": "auggie", **normal}) is False


def test_stop_reads_the_exchange_then_the_conversation_data(project):
    assert (
        auggie.normalise("stop", _stop(project, "the real answer"), {})["assistant_response"]
        == "the real answer"
    )
    with_data = {**_base(project, "Stop"), "conversation": {"agentTextResponse": "from conversation data"}}
    assert auggie.normalise("stop", with_data, {})["assistant_response"] == "from conversation data"
    assert "assistant_response" not in auggie.normalise("stop", _base(project, "Stop"), {})
    assert auggie.context_output("userPromptSubmit", "memory") == ""  # Auggie would show it to the user


def test_auggie_mcp_tool_names_are_memory_tools():
    assert mcp_tools.is_memory_tool("search_memory_kirolearn")
    assert not mcp_tools.is_memory_tool("search_memory_other")


def test_session_start_writes_the_memory_rule_for_the_next_session(home, project):
    (project / ".git" / "info").mkdir()
    for payload in (
        {**_base(project, "PromptSubmit"), "user_prompt": "make the webhook idempotent"},
        _shell(project, "pytest -q tests/test_webhook.py", 0),
        _stop(project, "Deduplicated by event id, KLA-5150."),
    ):
        assert hook(payload, project).returncode == 0
    drain(flush=False)
    result = hook(_base(project, "SessionStart", "a2"), project)
    assert result.returncode == 0 and result.stdout == b"", result.stderr  # Auggie drops hook output
    rule = project.joinpath(*RULE)
    text = rule.read_text()
    assert text.startswith("---\ntype: always_apply\n") and "KLA-5150" in text
    assert oct(rule.stat().st_mode & 0o777) == "0o600"
    exclude = (project / ".git" / "info" / "exclude").read_text()
    assert exclude.splitlines().count("/.augment/rules/kirolearn-memory.md") == 1  # memory is personal
    assert hook(_base(project, "SessionStart", "a3"), project).returncode == 0
    assert exclude == (project / ".git" / "info" / "exclude").read_text()


def test_install_placeholder_is_git_excluded_once_filled_and_portable_writes_no_rule(home, project):
    (project / ".git" / "info").mkdir()
    runner = CliRunner()
    assert (
        runner.invoke(cli, ["install", "--agent", "auggie", "--project", str(project), "--yes"]).exit_code
        == 0
    )
    assert auggie.write_rules(str(project), "memory KLA-9") == str(project.joinpath(*RULE))
    assert "/.augment/rules/kirolearn-memory.md" in (project / ".git" / "info" / "exclude").read_text()
    assert (
        runner.invoke(cli, ["uninstall", "--agent", "auggie", "--project", str(project), "--yes"]).exit_code
        == 0
    )
    assert not (project / ".augment").exists()
    result = runner.invoke(
        cli, ["install", "--agent", "auggie", "--project", str(project), "--portable", "--yes"]
    )
    assert result.exit_code == 0, result.output
    assert not project.joinpath(*RULE).exists()


def test_the_drain_writes_the_rule_for_a_project_auggie_worked_in_and_only_there(home, project, tmp_path):
    for payload in (
        {**_base(project, "PromptSubmit"), "user_prompt": "make the webhook idempotent"},
        _shell(project, "pytest -q tests/test_webhook.py", 0),
        _stop(project, "Deduplicated by event id, KLA-6160."),
    ):
        assert hook(payload, project).returncode == 0
    other = tmp_path / "claude-only"
    (other / ".git").mkdir(parents=True)
    claude = {"session_id": "c1", "cwd": str(other), "hook_event_name": "Stop", "last_assistant_message": "x"}
    assert run_hook(["--agent", "claude-code"], json.dumps(claude).encode(), cwd=str(other)).returncode == 0
    assert not project.joinpath(*RULE).exists()  # no memory yet at this session's start: no rule
    drain(flush=True)
    # the next session's first request carries it: Auggie reads rules before its SessionStart hook
    assert "KLA-6160" in project.joinpath(*RULE).read_text()
    assert not (other / ".augment").exists()  # another agent's project gets no Auggie rule
    result = CliRunner().invoke(cli, ["uninstall", "--agent", "auggie", "--yes"])
    assert result.exit_code == 0 and not project.joinpath(*RULE).exists(), result.output


def test_a_users_own_rule_of_that_name_is_never_overwritten(home, project):
    rule = project.joinpath(*RULE)
    rule.parent.mkdir(parents=True)
    rule.write_text("my own notes\n")
    assert auggie.write_rules(str(project), "memory") is None
    assert rule.read_text() == "my own notes\n"


LAYOUTS = {
    "absent": None,
    "empty object": "{}\n",
    "tabs crlf, their hooks, servers and permissions": '{\r\n\t"hooks": {\r\n\t\t"PostToolUse": [{"matcher": ".*", '
    '"hooks": [{"type": "command", "command": "audit.sh"}]}]\r\n\t},\r\n\t"mcpServers": {"gh": {"command": '
    '"gh-mcp"}},\r\n\t"toolPermissions": [{"toolName": "launch-process", "permission": {"type": "allow"}}]\r\n}',
    "one line": '{"model": "sonnet4.5"}',
}


@pytest.mark.parametrize("scope", ["project", "user"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_auggie_install_uninstall_exact_bytes(layout, scope, home, project):
    args = ["--project", str(project)] if scope == "project" else []
    root = project if scope == "project" else Path(os.environ["HOME"])
    settings = root / ".augment" / "settings.json"
    original = LAYOUTS[layout]
    if original is not None:
        settings.parent.mkdir()
        settings.write_bytes(original.encode())
    runner = CliRunner()
    result = runner.invoke(cli, ["install", "--agent", "auggie", *args, "--yes"])
    assert result.exit_code == 0, result.output
    data = json.loads(settings.read_text())
    for event, timeout in auggie.HOOKS:
        (ours,) = [h for g in data["hooks"][event] for h in g["hooks"] if "kirolearn-hook" in h["command"]]
        assert ours["timeout"] == timeout and timeout >= 1000  # milliseconds
        assert "--agent auggie" in ours["command"] and ours["type"] == "command"
    server = data["mcpServers"]["kirolearn"]
    assert server["command"].endswith("kirolearn-mcp") and server["env"]["KIROLEARN_AGENT"] == "auggie"
    # Auggie runs every tool unasked: forget_memory gets a rule that asks
    assert {"toolName": "forget_memory_kirolearn", "permission": {"type": "ask-user"}} in data[
        "toolPermissions"
    ]
    assert not any(
        r.get("permission", {}).get("type") == "allow" and "kirolearn" in r["toolName"]
        for r in data["toolPermissions"]
    )
    assert project.joinpath(*RULE).exists() == (scope == "project")
    once = settings.read_bytes()
    again = runner.invoke(cli, ["install", "--agent", "auggie", *args, "--yes"])
    assert "unchanged" in again.output and settings.read_bytes() == once
    status = runner.invoke(cli, ["status"])
    assert "auggie" in status.output, status.output
    doctor = runner.invoke(cli, ["doctor"]).output
    assert "auggie" in doctor, doctor
    result = runner.invoke(cli, ["uninstall", "--agent", "auggie", *args, "--yes"])
    assert result.exit_code == 0, result.output
    assert (settings.read_bytes() if settings.exists() else None) == (
        None if original is None else original.encode()
    )
    if original is None:
        assert not (root / ".augment").exists()
    assert not project.joinpath(*RULE).exists()


def test_a_user_scope_uninstall_removes_the_rules_its_hooks_wrote_and_keeps_a_projects(
    home, project, tmp_path
):
    runner = CliRunner()
    assert runner.invoke(cli, ["install", "--agent", "auggie", "--yes"]).exit_code == 0
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    for where in (project, other):
        auggie.write_rules(str(where), "memory of " + where.name, os.environ["KIROLEARN_HOME"])
    edited = other.joinpath(*RULE)
    edited.write_text("the user took it over\n")  # no longer ours: left alone
    result = runner.invoke(cli, ["uninstall", "--agent", "auggie", "--yes"])
    assert result.exit_code == 0, result.output
    assert not project.joinpath(*RULE).exists() and not (project / ".augment").exists()
    assert edited.read_text() == "the user took it over\n"


def test_auggie_wired_for_the_user_refuses_a_second_scope_that_would_fire_twice(home, project):
    runner = CliRunner()
    assert runner.invoke(cli, ["install", "--agent", "auggie", "--yes"]).exit_code == 0
    result = runner.invoke(cli, ["install", "--agent", "auggie", "--project", str(project), "--yes"])
    assert result.exit_code != 0 and "run every hook twice" in result.output, result.output
    assert not (project / ".augment").exists()
    doctor = runner.invoke(cli, ["doctor"], catch_exceptions=False).output
    assert "auggie: wired for this user" in doctor, doctor


def test_auggie_refuses_a_foreign_server_named_kirolearn(home, project):
    settings = project / ".augment" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"mcpServers": {"kirolearn": {"command": "something-else"}}}\n')
    result = CliRunner().invoke(cli, ["install", "--agent", "auggie", "--project", str(project), "--yes"])
    assert result.exit_code != 0 and "not kirolearn-mcp" in result.output
