"""Real GitHub Copilot CLI, wired by `kirolearn install --agent copilot`, against the Anthropic fake.

Copilot CLI 1.0.102 talks to any Anthropic Messages endpoint offline
(COPILOT_OFFLINE, COPILOT_PROVIDER_TYPE=anthropic, COPILOT_PROVIDER_BASE_URL).
The same six points as for Claude Code: the stored answer is the real final
one with the turn's tool calls; memory reaches the next session's model
request; search_memory over MCP reaches the model; bad payloads are kept;
uninstall gives the user's bytes back.
"""

import json
import os
import pathlib

import npmcache
import pytest
from agentrun import (
    agent_env,
    events_of,
    export,
    kirolearn,
    quarantined,
    run_agent,
    run_hook_command,
    snapshot,
    tool_results,
    tool_uses,
)
from fake_anthropic import FakeAnthropic, Text, ToolCall

PACKAGE = "@github/copilot@1.0.102"
MARK = "KLMARK-c0p1"
FINAL = f"Done: the marker is {MARK}, and nothing else changed."
USER_FILES = {
    ".github/hooks/lint.json": '{"version": 1, "hooks": {"postToolUse": [{"type": "command", "bash": "true"}]}}\n',
    ".github/mcp.json": '{\n  "mcpServers": {}\n}\n',
}


@pytest.fixture(scope="module")
def copilot():
    return npmcache.install(PACKAGE, "copilot")


@pytest.fixture(scope="module")
def copilot_home(tmp_path_factory):
    """One HOME for the module: Copilot unpacks its ~150 MB runtime into ~/.cache on first start."""
    return tmp_path_factory.mktemp("copilot-home")


def trust(home: pathlib.Path, project):
    """What Copilot's "trust this folder" dialog records: repository hooks and MCP load only then."""
    config = home / ".copilot" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"trusted_folders": [str(project)]}))


def session(copilot, project, fake, prompt, home):
    env = agent_env(
        HOME=str(home),
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_TYPE="anthropic",
        COPILOT_PROVIDER_BASE_URL=fake.url,
        COPILOT_PROVIDER_API_KEY="dummy-key-for-the-fake",
        COPILOT_MODEL="claude-sonnet-4.5",
    )
    # -p: one non-interactive turn; the tools the scripted model calls are approved for this run
    # only, as a user of -p does (no --allow-all, no COPILOT_ALLOW_ALL); forget_memory is not.
    return run_agent(
        [
            copilot,
            "-p",
            prompt,
            "--no-auto-update",
            "--allow-tool",
            "shell(echo)",
            "--allow-tool",
            "kirolearn(search_memory)",
        ],
        project,
        env,
    )


def test_copilot_end_to_end(copilot, copilot_home, project):
    trust(copilot_home, project)
    for name, text in USER_FILES.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_bytes(text.encode())
    before = snapshot(project)
    kirolearn("install", "--agent", "copilot", "--project", str(project), "--yes")
    mcp = json.loads((project / ".github" / "mcp.json").read_text())
    assert mcp["mcpServers"]["kirolearn"]["command"].endswith("kirolearn-mcp")

    # 1. a turn: bash (after "Let me run a command."), then the final answer
    script = [
        ToolCall(
            "bash",
            {"command": f"echo {MARK}", "description": "Print the marker"},
            text="Let me run a command.",
        ),
        Text(FINAL),
    ]
    with FakeAnthropic(script) as fake:
        out = session(copilot, project, fake, "What does the marker command print?", copilot_home)
        assert fake.errors == []
        offered = {t["name"] for r in fake.main_requests() for t in r["tools"]}
    assert FINAL in out.stdout
    assert "kirolearn-search_memory" in offered
    stored = events_of(export(project), "copilot")
    stops = [e for e in stored if e["trigger"] == "stop"]
    assert [s["assistant_response"] for s in stops] == [FINAL]
    tools = [e for e in stored if e["trigger"] == "postToolUse"]
    assert [(t["tool_name"], t["tool_input"]["command"]) for t in tools] == [("bash", f"echo {MARK}")]
    assert MARK in json.dumps(tools[0]["tool_response"])
    assert len({e["session_id"] for e in stored}) == 1 and stored[0]["surface"] == "copilot-cli"

    # 2 and 3. the next session: injected memory reaches the model; so does search_memory's answer
    script = [ToolCall("search_memory", {"query": "marker command"}), Text("It is in memory.")]
    with FakeAnthropic(script) as fake:
        session(copilot, project, fake, "Which marker did we see last time?", copilot_home)
        assert fake.errors == []
        first, last = fake.main_requests()[0], fake.main_requests()[-1]
    assert MARK in json.dumps(first["messages"])  # sessionStart / userPromptSubmitted additionalContext
    (call,) = [u for u in tool_uses(last) if u[1] == "kirolearn-search_memory"]
    answers = [text for use_id, text in tool_results(last) if use_id == call[0]]
    assert answers and MARK in answers[0] and "denied" not in answers[0].lower()
    assert "kirolearn-search_memory" in [e.get("tool_name") for e in events_of(export(project), "copilot")]
    wired = (project / ".github" / "hooks" / "kirolearn.json").read_text() + (
        project / ".github/mcp.json"
    ).read_text()
    assert "forget_memory" not in wired

    # 5. payloads of shapes kirolearn does not know: exit 0, kept
    hooks = json.loads((project / ".github" / "hooks" / "kirolearn.json").read_text())["hooks"]
    command = hooks["agentStop"][0]["bash"]
    count = len(quarantined())
    for payload in (
        b'{"sessionId": "s", "transcriptPath": 42, "stopReason": {"new": true}}',
        b'{"sessionId": "s", "timest',
    ):
        result = run_hook_command(command, payload, project)
        assert (result.returncode, result.stdout) == (0, b"")
    assert len(quarantined()) == count + 1  # the broken one; the odd one was stored:
    assert any(
        e["session_id"] == "s" and e["trigger"] == "stop" for e in events_of(export(project), "copilot")
    )
    result = run_hook_command(
        command.replace(" agentStop ", " someFutureEvent "), b'{"sessionId": "s"}', project
    )
    assert result.returncode == 0 and len(quarantined()) == count + 2

    # 4. uninstall: the user's bytes exactly
    kirolearn("uninstall", "--agent", "copilot", "--project", str(project), "--yes")
    assert snapshot(project) == before
    assert not os.path.exists(project / ".github" / "hooks" / "kirolearn.json")
