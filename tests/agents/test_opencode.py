"""Real opencode, wired by `kirolearn install --agent opencode`, against the Anthropic fake.

opencode has no shell hooks: install writes a JavaScript plugin that runs
kirolearn-hook per event, and recalled memory goes into the system prompt
through `experimental.chat.system.transform`. The model is an `anthropic`
provider whose baseURL is the fake (in the user's opencode.json, which
install must leave as it found it on uninstall).
"""

import json
import os
import pathlib

import npmcache
import pytest
from agentrun import (
    BIN,
    agent_env,
    events_of,
    export,
    kirolearn,
    quarantined,
    run_agent,
    run_hook_command,
    snapshot,
)
from fake_anthropic import FakeAnthropic
from opencode_family import assert_captured, assert_recalled, marker_turn, path_with_kirolearn, recall_turn

PACKAGE = "opencode-ai@1.18.33"
MARK = "KLMARK-0pc0"
FINAL = f"Done: the marker is {MARK}, and nothing else changed."


@pytest.fixture(scope="module")
def opencode():
    return npmcache.install(PACKAGE, "opencode")


def user_config(fake) -> str:
    """The user's own opencode.json: a model provider (the fake) and a permission of theirs."""
    return (
        json.dumps(
            {
                "$schema": "https://opencode.ai/config.json",
                "model": "anthropic/claude-sonnet-4-5",
                "provider": {
                    "anthropic": {
                        "options": {"baseURL": fake.url + "/v1", "apiKey": "dummy-key-for-the-fake"}
                    }
                },
                "permission": {"bash": "allow"},
            },
            indent=2,
        )
        + "\n"
    )


def session(opencode, project, fake, prompt):
    return run_agent([opencode, "run", prompt], project, agent_env())


def test_opencode_end_to_end(opencode, project):
    with FakeAnthropic() as fake:
        config = project / "opencode.json"
        config.write_text(user_config(fake))
        before = snapshot(project)
        kirolearn("install", "--agent", "opencode", "--project", str(project), "--yes")
        wired = json.loads(config.read_text())
        assert wired["mcp"]["kirolearn"]["command"][0].endswith("kirolearn-mcp")
        assert wired["permission"] == {
            "bash": "allow",
            "kirolearn_forget_memory": "ask",
        }  # never auto-approved
        (url,) = wired["plugin"]
        plugin = pathlib.Path(url.removeprefix("file://"))
        assert plugin.exists() and "kirolearn-hook" in plugin.read_text()

        # 1. a turn: bash (after "Let me run a command."), then the final answer
        marker_turn(fake, MARK, FINAL)
        out = session(opencode, project, fake, "What does the marker command print?")
        assert fake.errors == []
        assert FINAL in out.stdout
        assert "kirolearn_search_memory" in {t["name"] for r in fake.main_requests() for t in r["tools"]}
        stored = assert_captured(project, "opencode", MARK, FINAL)
        tools = [e for e in stored if e["trigger"] == "postToolUse"]
        assert MARK in json.dumps(tools[0]["tool_response"])
        assert [e["trigger"] for e in stored][:2] == ["agentSpawn", "userPromptSubmit"]
        assert len({e["session_id"] for e in stored}) == 1

        # 2 and 3. the next session: memory in the system prompt; search_memory's answer reaches the model
        fake.clear()
        recall_turn(fake)
        session(opencode, project, fake, "Which marker did we see last time?")
        assert_recalled(fake, MARK)
        assert "kirolearn_search_memory" in [
            e.get("tool_name") for e in events_of(export(project), "opencode")
        ]

    # 5. payloads kirolearn does not know, sent to the hook the plugin runs: exit 0, kept
    argv = json.loads(plugin.read_text().split("const HOOK = ", 1)[1].split(";\n", 1)[0])
    command = " ".join(f"'{a}'" for a in argv)
    count = len(quarantined())
    for event, payload in (
        (
            "session.idle",
            b'{"hook_event_name": "session.idle", "session_id": "s", "assistant_response": {"parts": [1]}}',
        ),
        ("session.future", b'{"hook_event_name": "session.future", "session_id": "s"}'),
        ("session.idle", b'{"hook_event_name": "session.idle", "sess'),
    ):
        result = run_hook_command(f"{command} {event}", payload, project)
        assert (result.returncode, result.stdout) == (0, b"")
    assert len(quarantined()) == count + 2
    assert any(e["session_id"] == "s" for e in events_of(export(project), "opencode"))

    # 4. uninstall: the user's opencode.json byte for byte, and no plugin left
    kirolearn("uninstall", "--agent", "opencode", "--project", str(project), "--yes")
    assert snapshot(project) == before
    assert not plugin.exists()


def test_opencode_portable_wiring(opencode, project, tmp_path):
    """`--portable`: the plugin is the project's `.kirolearn/opencode-plugin.js`, named in opencode.json as
    `./.kirolearn/opencode-plugin.js` (relative to opencode.json, so opencode started in a subfolder finds
    it), running `kirolearn-hook` from PATH; the MCP command is bare `kirolearn-mcp`. opencode loads it
    without an npm install into the project (no .opencode/ appears)."""
    env = agent_env(PATH=path_with_kirolearn(tmp_path, os.environ["PATH"]))
    with FakeAnthropic() as fake:
        config = project / "opencode.json"
        config.write_text(user_config(fake))
        before = snapshot(project)
        kirolearn("install", "--agent", "opencode", "--project", str(project), "--portable", "--yes")
        wired = json.loads(config.read_text())
        assert wired["plugin"] == ["./.kirolearn/opencode-plugin.js"]
        assert wired["mcp"]["kirolearn"]["command"] == ["kirolearn-mcp"]
        assert wired["mcp"]["kirolearn"]["environment"] == {"KIROLEARN_AGENT": "opencode"}
        plugin = project / ".kirolearn" / "opencode-plugin.js"
        assert str(BIN) not in plugin.read_text() and str(BIN) not in config.read_text()

        marker_turn(fake, MARK, FINAL)
        out = run_agent([opencode, "run", "What does the marker command print?"], project / "src", env)
        assert fake.errors == [] and FINAL in out.stdout
        assert "kirolearn_search_memory" in {t["name"] for r in fake.main_requests() for t in r["tools"]}
        assert_captured(project, "opencode", MARK, FINAL)

        fake.clear()
        recall_turn(fake)
        run_agent([opencode, "run", "Which marker did we see last time?"], project, env)
        assert_recalled(fake, MARK)
        assert not (project / ".opencode").exists() and not (project / "node_modules").exists()

    kirolearn("uninstall", "--agent", "opencode", "--project", str(project), "--yes")
    assert snapshot(project) == before
    assert not (project / ".kirolearn").exists()
