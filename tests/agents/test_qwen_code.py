"""Real Qwen Code (`@qwen-code/qwen-code` 0.24.4) against a scripted fake of OpenAI Chat Completions.

`kirolearn install --agent qwen-code` wires the user's ~/.qwen/settings.json (or a project's
.qwen/settings.json); real `qwen -p` sessions then run (no --yolo), and the test reads what
reached the fake model and what kirolearn stored.
"""

import json
import os
from pathlib import Path

import npmcache
import pytest
from agentrun import agent_env, events_of, export, first_session, kirolearn, run_agent
from fake_gemini import ProxySink
from fake_openai import FakeOpenAI

from kirolearn.pipeline import extract

pytestmark = [pytest.mark.agents, pytest.mark.timeout(900)]  # a first run installs the CLI from npm
SPEC = "@qwen-code/qwen-code@0.24.4"

# The offline settings only: the OpenAI-compatible endpoint comes from the environment, telemetry off.
# The shell tool is the user's own choice to allow (without it `qwen -p` would refuse it). The current
# `$version`: without it Qwen Code migrates the file (adds the key), and uninstall then keeps that edit.
USER_SETTINGS = """{
  "$version": 4,
  "security": {"auth": {"selectedType": "openai"}},
  "model": {"name": "gpt-fake"},
  "general": {"enableAutoUpdate": false},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "permissions": {"allow": ["run_shell_command"]}
}
"""
FINAL_1 = "Retries from Stripe are deduplicated by event id now; KLQFINAL-5150 marks this final answer."


@pytest.fixture(scope="module")
def qwen_bin():
    return npmcache.install(SPEC, "qwen")


def run_qwen(binary, cwd, prompt, base_url, timeout=180):
    """One `qwen -p` run; every request that is not for loopback goes to a proxy that records it."""
    with ProxySink() as sink:
        env = agent_env(
            OPENAI_API_KEY="dummy",
            OPENAI_BASE_URL=base_url,
            OPENAI_MODEL="gpt-fake",
            NO_COLOR="1",
            NO_BROWSER="1",
            HTTPS_PROXY=sink.url,
            HTTP_PROXY=sink.url,
        )
        result = run_agent([binary, "-p", prompt], cwd, env, timeout=timeout)
    assert sink.attempts == [], sink.attempts  # nothing tried to leave loopback
    return result


def messages_text(body: dict) -> str:
    return json.dumps(body.get("messages"), ensure_ascii=False)


def tool_names(body: dict) -> "list[str]":
    return [t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)]


def tool_messages(body: dict) -> "list[dict]":
    return [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool"]


def test_qwen_real_session_capture_memory_mcp_and_exact_uninstall(qwen_bin, project, home):
    settings = Path(os.environ["HOME"]) / ".qwen" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    original = settings.read_bytes()
    kirolearn("install", "--agent", "qwen-code", "--yes")
    data = json.loads(settings.read_text())
    assert data["mcpServers"]["kirolearn"]["alwaysLoadTools"] is True

    command = "echo KLQTOOL-808 the webhook notes"
    turn_1 = [
        {"call": "run_shell_command", "arguments": {"command": command, "is_background": False}},
        {"text": FINAL_1},
    ]
    with FakeOpenAI(turn_1) as fake:
        run_qwen(qwen_bin, project, "Make the Stripe webhook handler idempotent", fake.base_url)
        assert "KLQTOOL-808" in json.dumps(tool_messages(fake.requests[-1]))  # the tool really ran

        objects = export(cwd=project)
        stats = json.loads(kirolearn("drain", "--json", cwd=project).stdout)
        events, tools = first_session(stats, objects, "qwen-code", FINAL_1)
        # one event per hook call: the empty UserPromptSubmit before the second model call is none
        assert [e["trigger"] for e in events] == ["agentSpawn", "userPromptSubmit", "postToolUse", "stop"]
        assert [t["tool_name"] for t in tools] == ["run_shell_command"]
        assert "Exit Code: 0" in json.dumps(tools[0]["tool_response"])
        assert {e["surface"] for e in events} == {"qwen-code"}
        (record,) = [o for o in objects if o["type"] == "record"]
        assert "KLQFINAL-5150" in record["summary"] and "KLQTOOL-808" in json.dumps(record), record

        # Session 2: memory reaches the model, and search_memory's answer does too.
        def turn_2(body):
            if tool_messages(body):
                return {"text": "Found it in memory."}
            return {"call": "mcp__kirolearn__search_memory", "arguments": {"query": "Stripe webhook"}}

        fake.script, start = turn_2, len(fake.requests)
        run_qwen(qwen_bin, project, "What do we know about the webhook?", fake.base_url)
        requests = fake.requests[start:]
        first = messages_text(requests[0])
        assert "KLQFINAL-5150" in first, "the memory kirolearn injected did not reach the model"
        offered = tool_names(requests[0])
        assert "mcp__kirolearn__search_memory" in offered, offered
        (answer,) = tool_messages(requests[-1])
        assert "KLQFINAL-5150" in json.dumps(answer), answer
        calls = [
            e
            for e in events_of(export(cwd=project), "qwen-code")
            if e.get("tool_name") == "mcp__kirolearn__search_memory"
        ]
        assert calls, "Qwen Code reported no PostToolUse for the MCP call"

    kirolearn("uninstall", "--agent", "qwen-code", "--yes")
    assert settings.read_bytes() == original


def test_qwen_project_install_fires_and_its_mcp_server_loads(qwen_bin, project, home):
    """`--project` wires <project>/.qwen/settings.json; the user's file is not touched."""
    settings = Path(os.environ["HOME"]) / ".qwen" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    kirolearn("install", "--agent", "qwen-code", "--project", str(project), "--yes")
    assert settings.read_text() == USER_SETTINGS
    failing = {
        "call": "run_shell_command",
        "arguments": {"command": "ls /nonexistent-KLQP-2", "is_background": False},
    }
    with FakeOpenAI([failing, {"text": "project-scoped answer KLQP-1"}]) as fake:
        run_qwen(qwen_bin, project, "hello", fake.base_url)
        offered = tool_names(fake.requests[0])
    events = events_of(export(cwd=project), "qwen-code")
    (stop,) = [e for e in events if e["trigger"] == "stop"]
    assert stop["assistant_response"] == "project-scoped answer KLQP-1"
    # a command that exits non-zero comes as PostToolUseFailure, its exit code only in the text
    (tool,) = [e for e in events if e["trigger"] == "postToolUse"]
    assert tool["tool_response"]["success"] is False and "Exit Code: 2" in tool["tool_response"]["error"]
    assert extract.tool_status(tool) is False
    # a project's MCP server starts only once approved: install wrote the approval Qwen Code checks
    assert "mcp__kirolearn__search_memory" in offered, offered
    approvals = Path(os.environ["HOME"]) / ".qwen" / "mcpApprovals.json"
    assert json.loads(approvals.read_text())[os.path.realpath(project)]["kirolearn"]["status"] == "approved"
    kirolearn("uninstall", "--agent", "qwen-code", "--project", str(project), "--yes")
    assert not (project / ".qwen").exists() and not approvals.exists()
    assert settings.read_text() == USER_SETTINGS
