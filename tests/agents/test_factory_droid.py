"""Real Factory Droid (`droid`, npm `@factory/cli-linux-x64` 0.225.2) against a scripted fake of OpenAI Chat
Completions.

`kirolearn install --agent factory-droid` wires the user's ~/.factory/ (or a project's .factory/):
hooks in settings.json, the MCP server in mcp.json. Real `droid exec` sessions then run with
FACTORY_AIRGAP_ENABLED=1 and a bring-your-own-key model of the user's settings (`customModels`,
provider `generic-chat-completion-api`) whose URL is the fake's, and the test reads what reached the
fake model and what kirolearn stored. The platform package is pinned, not `@factory/cli` (whose
wrapper only picks it): Linux x64 only.
"""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import npmcache
import pytest
from agentrun import agent_env, events_of, export, kirolearn, run_agent
from fake_gemini import ProxySink
from fake_openai import FakeOpenAI

from kirolearn.pipeline import extract

pytestmark = [pytest.mark.agents, pytest.mark.timeout(900)]  # a first run installs the CLI from npm
SPEC = "@factory/cli-linux-x64@0.225.2"
BINARY = "node_modules/@factory/cli-linux-x64/bin/droid"
FINAL_1 = "Retries from Stripe are deduplicated by event id now; KLDFINAL-5150 marks this final answer."
MCP_TOOL = "kirolearn___search_memory"


@pytest.fixture(scope="module")
def droid_bin():
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip(f"{SPEC} is Linux x64's binary")
    return npmcache.install(SPEC, "droid", path=BINARY)


def user_settings(base_url: str) -> str:
    """The user's own settings before install: a model of theirs at the fake's URL (Droid needs one offline)."""
    model = {
        "model": "gpt-fake",
        "displayName": "gpt-fake",
        "baseUrl": base_url,
        "apiKey": "dummy",
        "provider": "generic-chat-completion-api",
        "maxOutputTokens": 2048,
    }
    return json.dumps({"customModels": [model]}, indent=2) + "\n"


def run_droid(binary, cwd, prompt, timeout=180, check=True):
    """One `droid exec` run (its default autonomy: read-only tools only); every request that is not for
    loopback goes to a proxy that records it."""
    with ProxySink() as sink:
        env = agent_env(
            FACTORY_AIRGAP_ENABLED="1",
            NO_COLOR="1",
            HTTPS_PROXY=sink.url,
            HTTP_PROXY=sink.url,
        )
        argv = [binary, "exec", "-m", "custom:gpt-fake", prompt]
        if check:
            result = run_agent(argv, cwd, env, timeout=timeout)
        else:
            result = subprocess.run(
                argv,
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
    assert sink.attempts == [], sink.attempts  # nothing tried to leave loopback
    return result


def messages_text(body: dict) -> str:
    return json.dumps(body.get("messages"), ensure_ascii=False)


def tool_names(body: dict) -> "list[str]":
    return [t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)]


def tool_messages(body: dict) -> "list[dict]":
    return [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool"]


def execute(command: str) -> dict:
    return {
        "call": "Execute",
        "arguments": {"command": command, "riskLevel": "low", "riskLevelReason": "reads"},
    }


def test_droid_real_session_capture_memory_mcp_and_exact_uninstall(droid_bin, project, home):
    factory = Path(os.environ["HOME"]) / ".factory"
    settings = factory / "settings.json"
    factory.mkdir()
    with FakeOpenAI([execute("echo KLDTOOL-808 the webhook notes"), {"text": FINAL_1}]) as fake:
        settings.write_text(user_settings(fake.base_url))
        original = settings.read_bytes()
        kirolearn("install", "--agent", "factory-droid", "--yes")
        mcp = json.loads((factory / "mcp.json").read_text())
        assert mcp["mcpServers"]["kirolearn"]["env"]["KIROLEARN_AGENT"] == "factory-droid"

        out = run_droid(droid_bin, project, "Make the Stripe webhook handler idempotent").stdout
        assert "KLDFINAL-5150" in out
        assert "KLDTOOL-808" in json.dumps(tool_messages(fake.requests[-1]))  # the tool really ran

        objects = export(cwd=project)
        stats = json.loads(kirolearn("drain", "--json", cwd=project).stdout)
        assert stats["quarantined"] == 0, stats
        events = events_of(objects, "factory-droid")
        # `droid exec` fires no UserPromptSubmit; SessionEnd is not wired
        assert [e["trigger"] for e in events] == ["agentSpawn", "postToolUse", "stop"]
        start, tool, stop = events
        assert stop["assistant_response"] == FINAL_1  # read from the transcript Stop names
        assert tool["tool_name"] == "Execute" and "[Process exited with code 0]" in tool["tool_response"]
        assert extract.tool_status(tool) is True
        assert {e["surface"] for e in events} == {"factory-droid"}
        assert len({e["session_id"] for e in events}) == 1
        (record,) = [o for o in objects if o["type"] == "record"]
        assert "KLDFINAL-5150" in record["summary"] and "KLDTOOL-808" in json.dumps(record), record

        # Session 2: memory reaches the model (SessionStart's stdout), and search_memory's answer does too.
        def turn_2(body):
            if tool_messages(body):
                return {"text": "Found it in memory."}
            return {"call": MCP_TOOL, "arguments": {"query": "Stripe webhook"}}

        fake.script, start = turn_2, len(fake.requests)
        run_droid(droid_bin, project, "What do we know about the webhook?")
        requests = fake.requests[start:]
        assert "KLDFINAL-5150" in messages_text(requests[0]), (
            "the memory kirolearn injected did not reach the model"
        )
        # Droid defers MCP tools behind its ToolSearch: named in a system reminder, callable by that name
        assert MCP_TOOL in messages_text(requests[0]) and "ToolSearch" in tool_names(requests[0])
        (answer,) = tool_messages(requests[-1])
        assert "KLDFINAL-5150" in json.dumps(answer), answer
        calls = [e for e in events_of(export(cwd=project), "factory-droid") if e.get("tool_name") == MCP_TOOL]
        assert calls, "Droid reported no PostToolUse for the MCP call"

        # Session 3: forget_memory (destructive) is not run without asking; `droid exec` stops instead
        fake.script = [
            {
                "call": "kirolearn___forget_memory",
                "arguments": {"record_id": record["record_id"], "reason": "test"},
            },
            {"text": "forgotten"},
        ]
        refused = run_droid(droid_bin, project, "Forget the webhook record", check=False)
        assert refused.returncode != 0 and "insufficient permission" in refused.stdout + refused.stderr
        assert [
            o for o in export(cwd=project) if o["type"] == "record" and o["record_id"] == record["record_id"]
        ]

    kirolearn("uninstall", "--agent", "factory-droid", "--yes")
    assert settings.read_bytes() == original
    assert not (factory / "mcp.json").exists()


def test_droid_project_install_fires_and_its_mcp_server_loads(droid_bin, project, home):
    """`--project` wires <project>/.factory/; the user's settings are not touched."""
    factory = Path(os.environ["HOME"]) / ".factory"
    factory.mkdir()
    failing = execute("ls /nonexistent-KLDP-2")

    def script(body):
        done = len(tool_messages(body))
        if done == 0:
            return failing
        if done == 1:
            return {"call": MCP_TOOL, "arguments": {"query": "anything"}}
        return {"text": "project-scoped answer KLDP-1"}

    with FakeOpenAI(script) as fake:
        settings = factory / "settings.json"
        settings.write_text(user_settings(fake.base_url))
        original = settings.read_bytes()
        kirolearn("install", "--agent", "factory-droid", "--project", str(project), "--yes")
        assert settings.read_bytes() == original
        run_droid(droid_bin, project, "hello")
        failed, searched = tool_messages(fake.requests[-1])
    assert "No matching memories" in searched["content"], searched  # the project's server answered
    events = events_of(export(cwd=project), "factory-droid")
    (stop,) = [e for e in events if e["trigger"] == "stop"]
    assert stop["assistant_response"] == "project-scoped answer KLDP-1"
    assert "[Process exited with code 2]" in failed["content"]  # the model saw the failure ...
    # ... but a call that failed fires no PostToolUse (Droid has no failure event): the MCP call's only
    (mcp,) = [e for e in events if e["trigger"] == "postToolUse"]
    assert mcp["tool_name"] == MCP_TOOL and extract.tool_status(mcp) is True
    kirolearn("uninstall", "--agent", "factory-droid", "--project", str(project), "--yes")
    assert not (project / ".factory").exists()
    assert settings.read_bytes() == original
