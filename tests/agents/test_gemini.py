"""Real Gemini CLI (`@google/gemini-cli` 0.61.0) against a scripted fake of the Gemini API.

`kirolearn install --agent gemini` wires the user's ~/.gemini/settings.json;
real `gemini -p` sessions then run (no --yolo), and the test reads what
reached the fake model and what `kirolearn export` stored.
"""

import json
import os
import subprocess
from pathlib import Path

import npmcache
import pytest
from agentrun import first_session
from click.testing import CliRunner
from fake_gemini import FakeGemini, ProxySink, request_text, tool_names, tool_results
from helpers import drain

from kirolearn.capture.agents import gemini
from kirolearn.cli.commands import cli

pytestmark = [pytest.mark.agents, pytest.mark.timeout(900)]  # a first run installs the CLI from npm
SPEC = "@google/gemini-cli@0.61.0"

# Current keys only: Gemini CLI rewrites settings.json (its own layout) when it migrates a deprecated key
# such as general.disableAutoUpdate; uninstall then takes out only kirolearn's entries, not the bytes.
USER_SETTINGS = """{
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "tools": {"allowed": ["read_file"]}
}
"""
FINAL_1 = "Retries from Stripe are deduplicated by event id now; KLGFINAL-5150 marks this final answer."


@pytest.fixture(scope="module")
def gemini_bin():
    return npmcache.install(SPEC, "gemini")


def run_gemini(binary, cwd, prompt, base_url, timeout=120):
    """One `gemini -p` run; every request that is not for loopback goes to a proxy that records it."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GEMINI", "GOOGLE"))
        and k.lower() not in ("http_proxy", "https_proxy", "no_proxy", "all_proxy")
    }
    env.update(
        {
            "GEMINI_API_KEY": "dummy",
            "GOOGLE_GEMINI_BASE_URL": base_url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "NO_COLOR": "1",
            "NO_BROWSER": "1",
            "NO_PROXY": "127.0.0.1,localhost",
        }
    )
    env.pop("KIROLEARN_RAISE_ERRORS", None)  # the hook must behave as it does for users
    with ProxySink() as sink:
        env["HTTPS_PROXY"] = env["HTTP_PROXY"] = sink.url
        result = subprocess.run(
            [str(binary), "-p", prompt],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sink.attempts == [], sink.attempts  # nothing tried to leave loopback
    return result


def export():
    result = CliRunner().invoke(cli, ["export"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_gemini_real_session_capture_memory_mcp_and_exact_uninstall(gemini_bin, project, home):
    settings = Path(os.environ["HOME"]) / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    original = settings.read_bytes()
    (project / "NOTES.md").write_text("KLGTOOL-808 the webhook notes\n")
    result = CliRunner().invoke(cli, ["install", "--agent", "gemini", "--yes"])
    assert result.exit_code == 0, result.output
    data = json.loads(settings.read_text())
    assert data["mcpServers"]["kirolearn"]["command"].endswith("kirolearn-mcp")
    assert data["tools"]["allowed"] == [
        "read_file",
        "mcp_kirolearn_search_memory",
        "mcp_kirolearn_get_memory",
        "mcp_kirolearn_session_init",
    ]
    assert not data["mcpServers"]["kirolearn"].get("trust")  # trust would approve forget_memory too

    turn_1 = [{"call": "read_file", "arguments": {"file_path": str(project / "NOTES.md")}}, {"text": FINAL_1}]
    with FakeGemini(turn_1) as fake:
        run_gemini(gemini_bin, project, "Make the Stripe webhook handler idempotent", fake.base_url)
        assert "KLGTOOL-808" in json.dumps(tool_results(fake.requests[-1]))  # the tool really ran

        # the real final answer, from prompt_response
        events, tools = first_session(drain(flush=False), export(), "gemini", FINAL_1)
        assert [t["tool_name"] for t in tools] == ["read_file"]
        assert "KLGTOOL-808" in json.dumps(tools[0]["tool_response"])
        assert {e["surface"] for e in events} == {"gemini-cli"}

        # Session 2: memory reaches the model, and search_memory's answer does too.
        def turn_2(body):
            if tool_results(body):
                return {"text": "Found it in memory."}
            return {"call": "mcp_kirolearn_search_memory", "arguments": {"query": "Stripe webhook"}}

        fake.script, start = turn_2, len(fake.requests)
        run_gemini(gemini_bin, project, "What do we know about the webhook?", fake.base_url)
        requests = fake.requests[start:]
        first = request_text(requests[0])
        assert "<hook_context>" in first and "KLGFINAL-5150" in first, (
            "the memory kirolearn injected did not reach the model"
        )
        offered = tool_names(requests[0])
        assert "mcp_kirolearn_search_memory" in offered
        assert "mcp_kirolearn_forget_memory" not in offered  # it needs a confirmation, which -p cannot give
        (answer,) = tool_results(requests[-1])
        assert answer["name"] == "mcp_kirolearn_search_memory" and "KLGFINAL-5150" in json.dumps(answer), (
            answer
        )
        drain(flush=False)
        mcp_calls = [
            o
            for o in export()
            if o["type"] == "event"
            and o.get("trigger") == "postToolUse"
            and o.get("tool_name") == "mcp_kirolearn_search_memory"
        ]
        assert mcp_calls, "Gemini CLI reported no AfterTool for the MCP call"

    result = CliRunner().invoke(cli, ["uninstall", "--agent", "gemini", "--yes"])
    assert result.exit_code == 0, result.output
    assert settings.read_bytes() == original


def test_gemini_changed_and_unknown_payloads_are_kept_and_exit_0(home, project):
    from conftest import run_hook

    from kirolearn.capture import spool

    base = {
        "session_id": "g1",
        "cwd": str(project),
        "transcript_path": "/nonexistent/chat.jsonl",
        "timestamp": "2026-12-01T09:00:00Z",
    }
    cases = [
        {**base, "hook_event_name": "AfterAgent", "prompt": "p"},  # no prompt_response: still stored
        {
            **base,
            "hook_event_name": "AfterTool",
            "tool_name": "read_file",
            "tool_response": "a plain string now",
        },
        {**base, "hook_event_name": "AfterTool"},
        {**base, "hook_event_name": "BeforeModel", "llm_request": {"model": "m", "messages": []}},
        {**base, "hook_event_name": "AfterEverything", "new": True},
    ]
    for payload in cases:
        result = run_hook(["--agent", "gemini"], json.dumps(payload).encode(), cwd=str(project))
        assert result.returncode == 0 and result.stdout == b"", result.stderr
    assert run_hook(["--agent", "gemini"], b"[1, 2]", cwd=str(project)).returncode == 0
    assert len(spool.ready_files()) == len(cases)
    stats = drain(flush=False)
    assert stats["stored"] == len(cases) and stats["quarantined"] == 0, stats


def test_gemini_tool_shapes_reach_the_record(home, project):
    """Gemini's tool names and {llmContent, returnDisplay} answers feed the deterministic extractor."""
    from conftest import run_hook

    base = {"session_id": "g2", "cwd": str(project), "transcript_path": "/nonexistent", "timestamp": "t"}
    calls = [
        {**base, "hook_event_name": "BeforeAgent", "prompt": "fix the flaky login test"},
        {
            **base,
            "hook_event_name": "AfterTool",
            "tool_name": "write_file",
            "tool_input": {"file_path": str(project / "tests" / "test_login.py"), "content": "..."},
            "tool_response": {"llmContent": "Successfully wrote", "returnDisplay": "ok"},
        },
        {
            **base,
            "hook_event_name": "AfterTool",
            "tool_name": "run_shell_command",
            "tool_input": {"command": "pytest -q tests/test_login.py"},
            "tool_response": {
                "llmContent": "Output: 1 failed\nE   AssertionError: no token\nExit Code: 1",
                "returnDisplay": "1 failed",
            },
        },
        {
            **base,
            "hook_event_name": "AfterAgent",
            "prompt": "p",
            "prompt_response": "The login test waits for the token now.",
        },
    ]
    for payload in calls:
        assert run_hook(["--agent", "gemini"], json.dumps(payload).encode(), cwd=str(project)).returncode == 0
    drain(flush=False)
    (record,) = [o for o in export() if o["type"] == "record"]
    assert "tests/test_login.py" in record["files_touched"], record
    assert "waits for the token" in record["summary"], record
    assert "**Changed:** tests/test_login.py" in record["summary"], record  # write_file is an edit
    assert "AssertionError: no token" in record["summary"], record  # the failure, read from llmContent


def test_gemini_prefers_prompt_response_and_prints_json_context(tmp_path):
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"type": "gemini", "content": "from the chat file"}) + "\n")
    payload = {"prompt_response": "the real final answer", "transcript_path": str(chat)}
    assert gemini.normalise("stop", payload, {})["assistant_response"] == "the real final answer"
    assert (
        gemini.normalise("stop", {"transcript_path": str(chat)}, {})["assistant_response"]
        == "from the chat file"
    )
    out = json.loads(gemini.context_output("userPromptSubmit", "memory"))
    assert out == {"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": "memory"}}


LAYOUTS = {
    "absent": None,
    "empty object": "{}\n",
    "tabs crlf, their hooks and servers": '{\r\n\t"hooks": {\r\n\t\t"AfterTool": [{"hooks": [{"type": "command", '
    '"command": "audit.sh"}]}]\r\n\t},\r\n\t"mcpServers": {"gh": {"command": '
    '"gh-mcp"}},\r\n\t"tools": {"allowed": []}\r\n}',
    "one line": '{"theme": "dark"}',
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_gemini_install_uninstall_exact_bytes_without_the_client(layout, home, project):
    settings = project / ".gemini" / "settings.json"
    original = LAYOUTS[layout]
    if original is not None:
        settings.parent.mkdir()
        settings.write_bytes(original.encode())
    runner = CliRunner()
    result = runner.invoke(cli, ["install", "--agent", "gemini", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    data = json.loads(settings.read_text())
    assert set(data["hooks"]) >= {event for event, _ in gemini.HOOKS} and "kirolearn" in data["mcpServers"]
    once = settings.read_bytes()
    again = runner.invoke(cli, ["install", "--agent", "gemini", "--project", str(project), "--yes"])
    assert "unchanged" in again.output and settings.read_bytes() == once
    result = runner.invoke(cli, ["uninstall", "--agent", "gemini", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    assert (settings.read_bytes() if settings.exists() else None) == (
        None if original is None else original.encode()
    )


def test_gemini_uninstall_after_an_edit_removes_only_ours(home, project):
    settings = project / ".gemini" / "settings.json"
    runner = CliRunner()
    runner.invoke(
        cli, ["install", "--agent", "gemini", "--project", str(project), "--yes"], catch_exceptions=False
    )
    data = json.loads(settings.read_text())
    data["theme"] = "dark"
    settings.write_text(json.dumps(data, indent=2) + "\n")
    runner.invoke(
        cli, ["uninstall", "--agent", "gemini", "--project", str(project), "--yes"], catch_exceptions=False
    )
    assert json.loads(settings.read_text()) == {"theme": "dark"}


def test_gemini_refuses_a_foreign_server_named_kirolearn(home, project):
    settings = project / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"mcpServers": {"kirolearn": {"command": "something-else"}}}\n')
    result = CliRunner().invoke(cli, ["install", "--agent", "gemini", "--project", str(project), "--yes"])
    assert result.exit_code != 0 and "not kirolearn-mcp" in result.output


def test_gemini_project_install_fires_in_a_trusted_folder(gemini_bin, project, home):
    """`--project` wires <project>/.gemini/settings.json, which Gemini CLI reads in a trusted folder."""
    settings = Path(os.environ["HOME"]) / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    result = CliRunner().invoke(cli, ["install", "--agent", "gemini", "--project", str(project), "--yes"])
    assert result.exit_code == 0, result.output
    assert settings.read_text() == USER_SETTINGS  # the user's file is not touched
    with FakeGemini([{"text": "project-scoped answer KLGP-1"}]) as fake:
        run_gemini(gemini_bin, project, "hello", fake.base_url)
    drain(flush=False)
    (stop,) = [o for o in export() if o["type"] == "event" and o.get("trigger") == "stop"]
    assert stop["assistant_response"] == "project-scoped answer KLGP-1" and stop["agent"] == "gemini"
