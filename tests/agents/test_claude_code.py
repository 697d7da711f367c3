"""Real Claude Code, wired by `kirolearn install --agent claude-code`, against a scripted fake model.

What it proves (issue #21): the stored outcome of a turn is Claude Code's real
final answer with the turn's tool calls; the memory kirolearn injects reaches
the model in the next session; the model's call of kirolearn's MCP tool
search_memory returns a stored record to the model, with no bypass flag and
without forget_memory being approved; a payload of a shape kirolearn does not
know is kept, not lost, and the hook exits 0; uninstall gives back the user's
bytes.
"""

import json

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

PACKAGE = "@anthropic-ai/claude-code@2.1.197"
MARK = "KLMARK-7f3a"
FINAL = f"Done: the marker is {MARK}; echo printed it and nothing else changed."
USER_FILES = {  # the user's own Claude Code settings, which uninstall must give back byte for byte
    ".claude/settings.json": '{\r\n\t"env": {"THEIR_SETTING": "1"},\r\n\t"hooks": {"PostToolUse": [{"matcher": "Bash", '
    '"hooks": [{"type": "command", "command": "true"}]}]}\r\n}',
    ".claude/settings.local.json": '{"permissions": {"allow": ["Bash(echo:*)"]}}\n',
}


@pytest.fixture(scope="module")
def claude():
    return npmcache.install(PACKAGE, "claude")


def session(claude, project, fake, prompt):
    env = agent_env(ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY="dummy-key-for-the-fake")
    # -p: one non-interactive turn. --allowedTools lets the scripted Bash call run without a prompt;
    # kirolearn's MCP tools need nothing here: install approved the server and its safe tools.
    return run_agent([claude, "-p", prompt, "--allowedTools", "Bash"], project, env)


def trust(project):
    """What Claude Code records when the user accepts its trust dialog for a folder (as on a first
    interactive start there): project settings, such as the permissions install wrote, apply only then."""
    import os
    import pathlib

    state = pathlib.Path(os.environ["HOME"]) / ".claude.json"
    state.write_text(json.dumps({"projects": {str(project): {"hasTrustDialogAccepted": True}}}))


def test_claude_code_end_to_end(claude, project):
    trust(project)
    for name, text in USER_FILES.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_bytes(text.encode())
    before = snapshot(project)
    kirolearn("install", "--agent", "claude-code", "--project", str(project), "--yes")

    # 1. a turn: a Bash call (said after "Let me run a command."), then the final answer
    script = [
        ToolCall(
            "Bash",
            {"command": f"echo {MARK}", "description": "Print the marker"},
            text="Let me run a command.",
        ),
        Text(FINAL),
    ]
    with FakeAnthropic(script) as fake:
        out = session(claude, project, fake, "What does the marker command print?")
        assert fake.errors == []
        offered = {t["name"] for r in fake.main_requests() for t in r["tools"]}
    assert FINAL in out.stdout
    if "WaitForMcpServers" not in offered:  # 2.x offers that tool while servers still connect
        assert "mcp__kirolearn__search_memory" in offered  # the MCP server was loaded without a prompt
    stored = events_of(export(project), "claude-code")
    stops = [e for e in stored if e["trigger"] == "stop"]
    assert [s["assistant_response"] for s in stops] == [FINAL]  # the real final answer, not the first text
    tools = [e for e in stored if e["trigger"] == "postToolUse"]
    assert [(t["tool_name"], t["tool_input"]["command"]) for t in tools] == [("Bash", f"echo {MARK}")]
    assert MARK in json.dumps(tools[0]["tool_response"])
    assert {e["session_id"] for e in stored} == {stops[0]["session_id"]}

    # 2 and 3. the next session: injected memory reaches the model, and so does search_memory's answer
    script = [ToolCall("search_memory", {"query": "marker command"}), Text("It is in memory.")]
    with FakeAnthropic(script) as fake:
        session(claude, project, fake, "Which marker did we see last time?")
        assert fake.errors == []
        first, last = fake.main_requests()[0], fake.main_requests()[-1]
    assert MARK in json.dumps(first["messages"])  # before any tool ran: what the hooks injected
    (call,) = [u for u in tool_uses(last) if u[1] == "mcp__kirolearn__search_memory"]
    answers = [text for use_id, text in tool_results(last) if use_id == call[0]]
    assert answers and MARK in answers[0] and "rror" not in answers[0][:40]
    stored = events_of(export(project), "claude-code")
    assert "mcp__kirolearn__search_memory" in [e.get("tool_name") for e in stored]
    # no destructive tool is approved anywhere install wrote
    wired = "".join(
        (project / p).read_text()
        for p in (".claude/settings.json", ".claude/settings.local.json", ".mcp.json")
    )
    assert "forget_memory" not in wired and '"mcp__kirolearn"' not in wired

    # 5. a payload shape kirolearn does not know: the installed command exits 0 and keeps it
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    (command,) = [
        h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"] if "kirolearn" in h["command"]
    ]
    for payload in (
        b'{"hook_event_name": "PostToolBatch", "session_id": "s", "batch": [1, 2]}',
        b'{"hook_event_name": "Stop", "session_id": "s", "last_assistant_message": {"parts": ["x"]}}',
        b'{"hook_event_name": "Stop", "sess',
    ):
        count = len(quarantined())
        result = run_hook_command(command, payload, project)
        assert result.returncode == 0
        assert result.stdout == b""
        if len(quarantined()) == count:  # not quarantined: then it was stored
            assert any(
                e.get("hook") == "Stop" and e.get("session_id") == "s"
                for e in events_of(export(project), "claude-code")
            ), payload
    assert len(quarantined()) >= 2

    # 4. uninstall: the user's bytes, exactly, and nothing of ours left
    kirolearn("uninstall", "--agent", "claude-code", "--project", str(project), "--yes")
    assert snapshot(project) == before


def test_claude_code_runs_portable_wiring_from_path(claude, project, tmp_path):
    """`install --portable` (#33 item 5): the committed .claude/settings.json and .mcp.json name only
    kirolearn-hook / kirolearn-mcp; real Claude Code with them on PATH captures the turn and offers the
    MCP tools; with a PATH that lacks them the turn still completes and hook.log says why nothing was kept."""
    import os
    import pathlib
    import sys

    trust(project)
    path_bin = tmp_path / "path-bin"
    path_bin.mkdir()
    for name in ("kirolearn-hook", "kirolearn-mcp"):
        (path_bin / name).symlink_to(pathlib.Path(sys.executable).parent / name)
    kirolearn("install", "--agent", "claude-code", "--project", str(project), "--portable", "--yes")
    wired = (project / ".claude" / "settings.json").read_text() + (project / ".mcp.json").read_text()
    assert str(pathlib.Path(sys.executable).parent) not in wired and "launcher" not in wired
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["kirolearn"]["env"] == {
        "KIROLEARN_AGENT": "claude-code"
    }
    bare = f"{pathlib.Path(claude).parent}:/usr/bin:/bin"

    script = [ToolCall("Bash", {"command": f"echo {MARK}", "description": "Print the marker"}), Text(FINAL)]
    with FakeAnthropic(script) as fake:
        env = agent_env(
            ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY="dummy-key-for-the-fake", PATH=f"{path_bin}:{bare}"
        )
        out = run_agent(
            [claude, "-p", "What does the marker command print?", "--allowedTools", "Bash"], project, env
        )
        assert fake.errors == []
        offered = {t["name"] for r in fake.main_requests() for t in r["tools"]}
    assert FINAL in out.stdout
    if "WaitForMcpServers" not in offered:
        assert "mcp__kirolearn__search_memory" in offered  # kirolearn-mcp found on PATH
    stops = [e for e in events_of(export(project), "claude-code") if e["trigger"] == "stop"]
    assert [s["assistant_response"] for s in stops] == [FINAL]

    log = pathlib.Path(os.environ["KIROLEARN_HOME"]) / "logs" / "hook.log"
    with FakeAnthropic([Text("Nothing to run.")]) as fake:
        env = agent_env(ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY="dummy-key-for-the-fake", PATH=bare)
        out = run_agent(
            [claude, "-p", "Say something short."], project, env
        )  # the hooks exit 0: the turn completes
        assert fake.errors == []
    assert "Nothing to run." in out.stdout
    assert "kirolearn-hook is not on PATH" in log.read_text()
    assert len([e for e in events_of(export(project), "claude-code") if e["trigger"] == "stop"]) == 1


def test_claude_code_wired_in_both_scopes_records_one_event_per_call(claude, project, tmp_path):
    """A teammate's portable project wiring plus their own user wiring (`install --also`): real Claude
    Code runs every hook twice, and kirolearn keeps one event per call."""
    import pathlib
    import sys

    trust(project)
    path_bin = tmp_path / "path-bin"
    path_bin.mkdir()
    for name in ("kirolearn-hook", "kirolearn-mcp"):
        (path_bin / name).symlink_to(pathlib.Path(sys.executable).parent / name)
    kirolearn("install", "--agent", "claude-code", "--project", str(project), "--portable", "--yes")
    refused = kirolearn("install", "--agent", "claude-code", "--yes", cwd=str(project), check=False)
    assert refused.returncode != 0 and ".claude/settings.json" in refused.stderr  # names the other scope
    kirolearn("install", "--agent", "claude-code", "--also", "--yes", cwd=str(project))
    bare = f"{pathlib.Path(claude).parent}:/usr/bin:/bin"
    script = [ToolCall("Bash", {"command": f"echo {MARK}", "description": "Print the marker"}), Text(FINAL)]
    with FakeAnthropic(script) as fake:
        env = agent_env(
            ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY="dummy-key-for-the-fake", PATH=f"{path_bin}:{bare}"
        )
        out = run_agent(
            [claude, "-p", "What does the marker command print?", "--allowedTools", "Bash"], project, env
        )
        assert fake.errors == []
    assert FINAL in out.stdout
    events = events_of(export(project), "claude-code")
    by_trigger = {}
    for e in events:
        by_trigger[e["trigger"]] = by_trigger.get(e["trigger"], 0) + 1
    assert by_trigger.get("userPromptSubmit") == 1 and by_trigger.get("stop") == 1, by_trigger
    bash = [e for e in events if e["trigger"] == "postToolUse" and e.get("tool_name") == "Bash"]
    assert len(bash) == 1, by_trigger
    import os

    log = (pathlib.Path(os.environ["KIROLEARN_HOME"]) / "logs" / "hook.log").read_text()
    assert "the same call was recorded by another kirolearn hook" in log  # each hook did run twice
