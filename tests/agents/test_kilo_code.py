"""Real Kilo Code CLI (`@kilocode/cli` 7.7.7), wired by `kirolearn install --agent kilo-code`, against the
Anthropic fake.

Kilo Code is an opencode fork that loads opencode plugins: install writes opencode's kirolearn plugin
(run as `--agent kilo-code`) and names it in kilo.json, with kirolearn's MCP server. The user's own
~/.config/kilo/kilo.json holds only the offline settings: an `anthropic` provider whose baseURL is the
fake, a dummy key, and Kilo's cloud gateway provider disabled. Every request that is not for loopback
goes to a proxy that records it, and none may come.
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
    run_agent,
    snapshot,
)
from fake_anthropic import FakeAnthropic
from fake_gemini import ProxySink
from opencode_family import assert_captured, assert_recalled, marker_turn, path_with_kirolearn, recall_turn

from kirolearn.pipeline import extract

pytestmark = [pytest.mark.agents, pytest.mark.timeout(900)]  # a first run installs the CLI from npm
SPEC = "@kilocode/cli@7.7.7"  # 7.8.1, the newest, has no linux-x64 binary package on npm
MARK = "KLMARK-k1l0"
FINAL = f"Done: the marker is {MARK}, and nothing else changed."
# Kilo Code's own switches (telemetry, model list, self-update), beside agentrun's OFFLINE ones
KILO_OFFLINE = {
    "KILO_TELEMETRY_LEVEL": "off",
    "KILO_DISABLE_MODELS_FETCH": "1",
    "KILO_DISABLE_AUTOUPDATE": "1",
}


@pytest.fixture(scope="module")
def kilo():
    return npmcache.install(SPEC, "kilo")


def offline_config(fake, **more) -> str:
    """The offline settings only: the fake as the model provider, a dummy key, the cloud gateway off."""
    return (
        json.dumps(
            {
                "$schema": "https://app.kilo.ai/config.json",
                "model": "anthropic/claude-sonnet-4-5",
                "provider": {
                    "anthropic": {
                        "options": {"baseURL": fake.url + "/v1", "apiKey": "dummy-key-for-the-fake"}
                    }
                },
                "disabled_providers": ["kilo"],
                **more,
            },
            indent=2,
        )
        + "\n"
    )


def session(kilo, cwd, prompt, **env):
    with ProxySink() as sink:
        result = run_agent(
            [kilo, "run", prompt],
            cwd,
            agent_env(HTTPS_PROXY=sink.url, HTTP_PROXY=sink.url, **KILO_OFFLINE, **env),
        )
    assert sink.attempts == [], sink.attempts  # nothing tried to leave loopback
    return result


def test_kilo_code_end_to_end(kilo, project):
    user = pathlib.Path(os.environ["HOME"]) / ".config" / "kilo" / "kilo.json"
    with FakeAnthropic() as fake:
        user.parent.mkdir(parents=True)
        user.write_text(offline_config(fake, permission={"bash": "allow"}))
        user_before = user.read_bytes()
        before = snapshot(project)

        # 1. install writes the wiring: a project kilo.json it creates, and the plugin
        kirolearn("install", "--agent", "kilo-code", "--project", str(project), "--yes")
        config = project / "kilo.json"
        wired = json.loads(config.read_text())
        assert wired["$schema"] == "https://app.kilo.ai/config.json"  # else Kilo Code adds it on load
        assert wired["mcp"]["kirolearn"]["command"][0].endswith("kirolearn-mcp")
        assert wired["mcp"]["kirolearn"]["environment"]["KIROLEARN_AGENT"] == "kilo-code"
        assert wired["permission"] == {"kirolearn_forget_memory": "ask"}  # never auto-approved
        (url,) = wired["plugin"]
        plugin = pathlib.Path(url.removeprefix("file://"))
        assert plugin.exists() and '"--agent", "kilo-code"' in plugin.read_text()
        status = json.loads(kirolearn("status", "--json", cwd=project).stdout)
        assert "kilo-code" in json.dumps(status)
        wired_bytes = config.read_bytes()

        # 2. a turn: bash (after "Let me run a command."), then the final answer
        marker_turn(fake, MARK, FINAL)
        out = session(kilo, project, "What does the marker command print?")
        assert fake.errors == []
        assert FINAL in out.stdout
        assert "kirolearn_search_memory" in {t["name"] for r in fake.main_requests() for t in r["tools"]}
        assert config.read_bytes() == wired_bytes and user.read_bytes() == user_before  # Kilo left them
        stored = assert_captured(project, "kilo-code", MARK, FINAL)
        assert [e["trigger"] for e in stored][:2] == ["agentSpawn", "userPromptSubmit"]
        tools = [e for e in stored if e["trigger"] == "postToolUse"]
        assert MARK in json.dumps(tools[0]["tool_response"])
        assert extract.tool_status(tools[0]) is True  # metadata.exit 0
        assert len({e["session_id"] for e in stored}) == 1
        records = [o for o in export(project) if o.get("type") == "record"]
        assert any(MARK in json.dumps(r) and FINAL in json.dumps(r) for r in records), records

        # 3 and 4. the next session: memory in the system prompt; search_memory's answer reaches the model
        fake.clear()
        recall_turn(fake)
        session(kilo, project, "Which marker did we see last time?")
        assert_recalled(fake, MARK)
        assert "kirolearn_search_memory" in [
            e.get("tool_name") for e in events_of(export(project), "kilo-code")
        ]

        # a failing command: its exit status reaches the record's outcome
        fake.clear()
        marker_turn(fake, MARK, FINAL, command="ls /no/such/folder-k1l0")
        session(kilo, project, "List the missing folder.")
        failing = [
            e
            for e in events_of(export(project), "kilo-code")
            if e["trigger"] == "postToolUse" and "folder-k1l0" in json.dumps(e.get("tool_input"))
        ]
        assert failing and extract.tool_status(failing[0]) is False

        doctor = kirolearn("doctor", "--json", cwd=project, check=False)
        assert "kilo-code" in doctor.stdout

    # uninstall: the created kilo.json and the plugin gone, the user's kilo.json byte for byte
    kirolearn("uninstall", "--agent", "kilo-code", "--project", str(project), "--yes")
    assert snapshot(project) == before
    assert not plugin.exists()
    assert user.read_bytes() == user_before


def test_kilo_code_portable_wiring(kilo, project, tmp_path):
    """`--portable` into the project's own kilo.json: the plugin is `./.kirolearn/kilo-plugin.js` (relative
    to kilo.json, found from a subfolder too), running `kirolearn-hook` from PATH; the MCP command is bare
    `kirolearn-mcp`. Uninstall gives the user's kilo.json back byte for byte."""
    path = path_with_kirolearn(tmp_path, os.environ["PATH"])
    with FakeAnthropic() as fake:
        config = project / "kilo.json"
        config.write_text(offline_config(fake, permission={"bash": "allow"}))
        before = snapshot(project)
        kirolearn("install", "--agent", "kilo-code", "--project", str(project), "--portable", "--yes")
        wired = json.loads(config.read_text())
        assert wired["plugin"] == ["./.kirolearn/kilo-plugin.js"]
        assert wired["mcp"]["kirolearn"]["command"] == ["kirolearn-mcp"]
        assert wired["mcp"]["kirolearn"]["environment"] == {"KIROLEARN_AGENT": "kilo-code"}
        assert wired["permission"] == {"bash": "allow", "kirolearn_forget_memory": "ask"}
        plugin = project / ".kirolearn" / "kilo-plugin.js"
        assert str(BIN) not in plugin.read_text() and str(BIN) not in config.read_text()

        marker_turn(fake, MARK, FINAL)
        out = session(kilo, project / "src", "What does the marker command print?", PATH=path)
        assert fake.errors == [] and FINAL in out.stdout
        assert_captured(project, "kilo-code", MARK, FINAL)

        fake.clear()
        recall_turn(fake)
        session(kilo, project, "Which marker did we see last time?", PATH=path)
        assert_recalled(fake, MARK)
        assert not (project / ".kilo").exists() and not (project / "node_modules").exists()

    kirolearn("uninstall", "--agent", "kilo-code", "--project", str(project), "--yes")
    assert snapshot(project) == before
    assert not (project / ".kirolearn").exists()


def test_kilo_code_user_scope_beside_its_own_kilo_jsonc(kilo, project):
    """For the user: the offline settings in the ~/.config/kilo/kilo.jsonc Kilo Code creates (plain JSON),
    kirolearn's wiring in a kilo.json install creates beside it; Kilo Code merges the two."""
    folder = pathlib.Path(os.environ["HOME"]) / ".config" / "kilo"
    folder.mkdir(parents=True)
    with FakeAnthropic() as fake:
        jsonc = folder / "kilo.jsonc"
        jsonc.write_text(offline_config(fake, permission={"bash": "allow"}))
        mine = jsonc.read_bytes()
        kirolearn("install", "--agent", "kilo-code", "--yes")
        assert json.loads((folder / "kilo.json").read_text())["mcp"]["kirolearn"]
        marker_turn(fake, MARK, FINAL)
        out = session(kilo, project, "What does the marker command print?")
        assert fake.errors == [] and FINAL in out.stdout
        assert_captured(project, "kilo-code", MARK, FINAL)
        fake.clear()
        recall_turn(fake)
        session(kilo, project, "Which marker did we see last time?")
        assert_recalled(fake, MARK)
    kirolearn("uninstall", "--agent", "kilo-code", "--yes")
    assert not (folder / "kilo.json").exists() and jsonc.read_bytes() == mine
