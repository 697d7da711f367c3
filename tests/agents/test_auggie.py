"""Real Auggie (`@augmentcode/auggie` 0.36.0) against a scripted fake of Augment's backend.

`kirolearn install --agent auggie` wires the user's ~/.augment/settings.json (or a project's
.augment/settings.json); real `auggie --print` sessions then run, and the test reads what reached
the fake backend and what kirolearn stored. The session (a dummy token for the fake's URL) comes
from AUGMENT_SESSION_AUTH: nothing is written for it.
"""

import json
import os
from pathlib import Path

import npmcache
import pytest
from agentrun import agent_env, events_of, export, first_session, kirolearn, run_agent
from fake_augment import FakeAugment, request_text, session_json, tool_names, tool_results
from fake_gemini import ProxySink

from kirolearn.pipeline import extract

pytestmark = [pytest.mark.agents, pytest.mark.timeout(900)]  # a first run installs the CLI from npm
SPEC = "@augmentcode/auggie@0.36.0"

# The user's own settings before install (the offline ones come from the environment).
USER_SETTINGS = '{\n  "autoUpdate": false\n}\n'
FINAL_1 = "Retries from Stripe are deduplicated by event id now; KLAFINAL-4711 marks this final answer."
RULES = (".augment", "rules", "kirolearn-memory.md")


@pytest.fixture(scope="module")
def auggie_bin():
    return npmcache.install(SPEC, "auggie")


def run_auggie(binary, cwd, prompt, url, timeout=180):
    """One `auggie --print` run; every request that is not for loopback goes to a proxy that records it."""
    with ProxySink() as sink:
        env = agent_env(
            AUGMENT_SESSION_AUTH=session_json(url),
            AUGMENT_DISABLE_AUTO_UPDATE="1",
            NO_COLOR="1",
            HTTPS_PROXY=sink.url,
            HTTP_PROXY=sink.url,
        )
        result = run_agent([binary, "--print", prompt], cwd, env, timeout=timeout)
    assert sink.attempts == [], sink.attempts  # nothing tried to leave loopback
    return result


def shell(command: str, cwd) -> dict:
    return {
        "call": "launch-process",
        "arguments": {"command": command, "wait": True, "max_wait_seconds": 30, "cwd": str(cwd)},
    }


def test_auggie_real_session_capture_memory_mcp_and_exact_uninstall(auggie_bin, project, home):
    settings = Path(os.environ["HOME"]) / ".augment" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    original = settings.read_bytes()
    kirolearn("install", "--agent", "auggie", "--yes")
    data = json.loads(settings.read_text())
    assert data["mcpServers"]["kirolearn"]["env"]["KIROLEARN_AGENT"] == "auggie"
    assert {"toolName": "forget_memory_kirolearn", "permission": {"type": "ask-user"}} in data[
        "toolPermissions"
    ]

    turn_1 = [shell("echo KLATOOL-808 the webhook notes", project), {"text": FINAL_1}]
    with FakeAugment(turn_1) as fake:
        run_auggie(auggie_bin, project, "Make the Stripe webhook handler idempotent", fake.url)
        assert "KLATOOL-808" in json.dumps(tool_results(fake.requests[-1]))  # the tool really ran

        objects = export(cwd=project)
        stats = json.loads(kirolearn("drain", "--json", cwd=project).stdout)
        events, tools = first_session(stats, objects, "auggie", FINAL_1)
        assert [e["trigger"] for e in events] == ["agentSpawn", "userPromptSubmit", "postToolUse", "stop"]
        assert [t["tool_name"] for t in tools] == ["launch-process"]
        assert "<return-code>\n0\n</return-code>" in tools[0]["tool_response"]["output"]
        assert extract.tool_status(tools[0]) is True
        assert {e["surface"] for e in events} == {"auggie"}
        assert len({e["session_id"] for e in events}) == 1  # conversation_id
        (record,) = [o for o in objects if o["type"] == "record"]
        assert "KLAFINAL-4711" in record["summary"] and "KLATOOL-808" in json.dumps(record), record

        # Session 2: its first model request carries the memory, through the rule the drain wrote (Auggie
        # reads its rules before its SessionStart hook runs); the agent's search_memory call returns it.
        rule = project.joinpath(*RULES)
        assert "KLAFINAL-4711" in rule.read_text()

        def turn_2(body):
            if tool_results(body):
                return {"text": "Found it in memory."}
            return {"call": "search_memory_kirolearn", "arguments": {"query": "Stripe webhook"}}

        fake.script, start = turn_2, len(fake.requests)
        run_auggie(auggie_bin, project, "What do we know about the webhook?", fake.url)
        requests = fake.requests[start:]
        first = requests[0]
        assert "KLAFINAL-4711" in request_text(first), "the memory kirolearn wrote did not reach the model"
        assert any(r.get("path") == "/".join(RULES) for r in first["rules"]), first["rules"]
        assert "search_memory_kirolearn" in tool_names(first), tool_names(first)
        (answer,) = tool_results(requests[-1])
        assert "KLAFINAL-4711" in answer["content"], answer
        calls = [
            e
            for e in events_of(export(cwd=project), "auggie")
            if e.get("tool_name") == "search_memory_kirolearn"
        ]
        assert calls, "Auggie reported no PostToolUse for the MCP call"
        # what Auggie called besides the model: its setup, and the workspace index (no upload: all known)
        called = {path for path, _ in fake.others}
        assert called <= {
            "settings/get-mcp-tenant-configs",
            "settings/get-mcp-user-configs",
            "find-missing",
        }, called

    kirolearn("uninstall", "--agent", "auggie", "--yes")
    assert settings.read_bytes() == original
    assert not project.joinpath(*RULES).exists()  # the rule the hook created goes too


def test_auggie_project_install_fires_and_its_mcp_server_loads(auggie_bin, project, home):
    """`--project` wires <project>/.augment/settings.json and its memory rule; the user's file is not touched."""
    settings = Path(os.environ["HOME"]) / ".augment" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    kirolearn("install", "--agent", "auggie", "--project", str(project), "--yes")
    assert settings.read_text() == USER_SETTINGS
    assert project.joinpath(*RULES).exists()
    failing = shell("ls /nonexistent-KLAP-2", project)
    forget = {"call": "forget_memory_kirolearn", "arguments": {"record_id": "KLAP-3", "reason": "test"}}
    with FakeAugment([failing, forget, {"text": "project-scoped answer KLAP-1"}]) as fake:
        run_auggie(auggie_bin, project, "hello", fake.url)
        offered = tool_names(fake.requests[0])
        first = request_text(fake.requests[0])
        (forgot,) = [r for r in tool_results(fake.requests[-1]) if r["tool_use_id"] == "toolu_fake_2"]
    # never auto-approved: the ask-user rule install wrote stops it (nobody can answer in --print)
    assert forgot["content"].startswith("Tool execution denied: forget_memory_kirolearn"), forgot
    events = events_of(export(cwd=project), "auggie")
    (stop,) = [e for e in events if e["trigger"] == "stop"]
    assert stop["assistant_response"] == "project-scoped answer KLAP-1"
    # a command that exits non-zero is a PostToolUse too: tool_error repeats the text, which opens with the code
    tool, denied = [e for e in events if e["trigger"] == "postToolUse"]
    assert "<return-code>\n2\n</return-code>" in tool["tool_response"]["output"], tool["tool_response"]
    assert tool["tool_response"]["is_error"] is True and extract.tool_status(tool) is False
    assert denied["tool_name"] == "forget_memory_kirolearn" and extract.tool_status(denied) is False
    assert "search_memory_kirolearn" in offered, offered
    assert "kirolearn writes this project's memory here" in first  # the project's rule reached the model
    kirolearn("uninstall", "--agent", "auggie", "--project", str(project), "--yes")
    assert not (project / ".augment").exists(), list((project / ".augment").rglob("*"))
    assert settings.read_text() == USER_SETTINGS


def test_auggie_runs_no_hook_without_the_backends_flag(auggie_bin, project, home):
    """Hooks are Augment's feature flag: a backend that does not turn `enable_hooks` on gets no events."""
    kirolearn("install", "--agent", "auggie", "--yes")
    with FakeAugment([{"text": "no hooks KLAN-1"}], feature_flags={}) as fake:
        run_auggie(auggie_bin, project, "hello", fake.url)
        assert fake.requests
    assert events_of(export(cwd=project), "auggie") == []
