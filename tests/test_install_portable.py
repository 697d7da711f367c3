"""`kirolearn install --agent X --portable` (issue #33 item 5): the files a team commits name
`kirolearn-hook` / `kirolearn-mcp` found on PATH, never this machine's paths.

Each agent's real installer writes into a temporary HOME and project; the wired hook commands
then run through a POSIX shell (as every agent but Kiro-on-Windows runs them) with a PATH that
has kirolearn-hook (the event reaches the spool) and one that lacks it (exit 0, a line on stderr
and in hook.log, which doctor counts), and `doctor` names the file, the agent and the fix.
Uninstall gives back every byte of the user's files. The MCP entry's env names the agent, and the
real `kirolearn-mcp` started from that entry stores the record under that agent.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli

from kirolearn.install import engine as install

BIN = Path(sys.executable).parent
BARE_PATH = "/usr/bin:/bin"  # sh, date: but no kirolearn-hook
USER_FILES = {  # files a user already has, which install edits and uninstall must give back byte for byte
    "claude-code": {
        ".claude/settings.json": '{"env": {"A": "1"}}',
        ".mcp.json": '{\n  "mcpServers": {\n    "github": {"command": "gh-mcp"}\n  }\n}\n',
    },
    "gemini": {".gemini/settings.json": '{\r\n    "theme": "dark"\r\n}\r\n'},
    "qwen-code": {".qwen/settings.json": '{\n  "$version": 4,\n  "ui": {"theme": "dark"}\n}\n'},
    "auggie": {".augment/settings.json": '{\n  "model": "sonnet4.5"\n}\n'},
    "factory-droid": {
        ".factory/settings.json": '{\n  "model": "custom:m"\n}\n',
        ".factory/mcp.json": '{"mcpServers": {"gh": {"type": "stdio", "command": "gh-mcp"}}}\n',
    },
    "cursor": {".cursor/mcp.json": '{"mcpServers": {"other": {"command": "x"}}}'},
    "copilot": {".github/mcp.json": '{\n\t"mcpServers": {}\n}\n'},
    "kiro": {".kiro/settings/mcp.json": '{"mcpServers": {"github": {"command": "gh-mcp"}}}\n'},
    "codex": {},
}
PAYLOADS = {  # a prompt, in each agent's own shape
    "claude-code": {"hook_event_name": "UserPromptSubmit", "session_id": "p1", "prompt": "portable hello"},
    "codex": {"hook_event_name": "UserPromptSubmit", "session_id": "p1", "prompt": "portable hello"},
    "gemini": {"hook_event_name": "BeforeAgent", "session_id": "p1", "prompt": "portable hello"},
    "qwen-code": {"hook_event_name": "UserPromptSubmit", "session_id": "p1", "prompt": "portable hello"},
    "auggie": {"hook_event_name": "PromptSubmit", "conversation_id": "p1", "user_prompt": "portable hello"},
    "factory-droid": {"hook_event_name": "SessionStart", "session_id": "p1", "source": "startup"},
    "cursor": {"hook_event_name": "beforeSubmitPrompt", "conversation_id": "p1", "prompt": "portable hello"},
    "copilot": {"sessionId": "p1", "prompt": "portable hello"},
    "kiro": {"hook_event_name": "userPromptSubmit", "prompt": "portable hello"},
}


@pytest.fixture
def path_bin(tmp_path):
    """A folder holding only kirolearn's console scripts (as pipx would put them on PATH)."""
    folder = tmp_path / "path-bin"
    folder.mkdir()
    for name in ("kirolearn-hook", "kirolearn-mcp"):
        (folder / name).symlink_to(BIN / name)
    return folder


def install_portable(agent, project):
    for name, text in USER_FILES[agent].items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_bytes(text.encode())
    args = ["install", "--agent", agent, "--portable", "--yes"]
    if agent != "codex":  # Codex is wired in the user's Codex home only
        args += ["--project", str(project)]
    result = cli(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "absolute paths of this machine" not in result.stderr
    return [e["path"] for e in install.load_record()]


def wired_data(path):
    text = Path(path).read_text(encoding="utf-8")
    if path.endswith(".md"):  # Auggie's memory rule: text for the model, no wiring
        return {}
    if path.endswith(".toml"):
        import tomllib

        return tomllib.loads(text)
    return json.loads(text)


def hook_commands(files) -> "list[str]":
    return [
        c
        for f in files
        if not f.endswith(".toml")
        for c in install.commands(wired_data(f))
        if install.MARK in c
    ]


def mcp_entries(files) -> "list[dict]":
    found = []
    for f in files:
        data = wired_data(f)
        for key in ("mcpServers", "mcp_servers"):
            if isinstance(data.get(key), dict) and "kirolearn" in data[key]:
                found.append(data[key]["kirolearn"])
    return found


def run_in_shell(command, payload, project, path, event_arg=""):
    env = {
        "PATH": path,
        "HOME": os.environ["HOME"],
        "KIROLEARN_HOME": os.environ["KIROLEARN_HOME"],
        "KIROLEARN_EMBEDDING_MODEL": "none",
    }
    return subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps({**payload, "cwd": str(project)}).encode(),
        cwd=project,
        env=env,
        capture_output=True,
        timeout=60,
    )


def spooled() -> int:
    spool = Path(os.environ["KIROLEARN_HOME"]) / "spool"
    return sum(
        1 for sub in ("ready", "quarantine") if (spool / sub).is_dir() for _ in (spool / sub).iterdir()
    )


def machine_words(home) -> "list[str]":
    return [str(BIN), os.path.dirname(install.LAUNCHER), str(home), os.environ["HOME"]]


@pytest.mark.slow  # ~10 s an agent: shells, two doctor runs
@pytest.mark.parametrize(
    "agent",
    ["claude-code", "codex", "copilot", "gemini", "qwen-code", "auggie", "factory-droid", "cursor", "kiro"],
)
def test_portable_wiring_runs_from_path_and_says_so_when_path_lacks_it(agent, project, home, path_bin):
    files = install_portable(agent, project)
    user_bytes = {name: text.encode() for name, text in USER_FILES[agent].items()}
    for f in files:  # nothing of this machine in any file install wrote
        text = Path(f).read_text(encoding="utf-8")
        assert not [
            w for w in machine_words(home) if w in text.replace(os.environ["HOME"] + "/.codex", "")
        ], f
    commands = hook_commands(files)
    assert commands and all(c.startswith(install.PORTABLE_GUARD) for c in commands)
    (entry,) = {json.dumps(e, sort_keys=True) for e in mcp_entries(files) if "timeout" not in e} or {None}
    entry = json.loads(entry)
    assert entry["command"] == "kirolearn-mcp" and entry["env"] == {"KIROLEARN_AGENT": agent}

    command = commands[0] if agent != "kiro" else next(c for c in commands if "prompt-submit" in c)
    if agent == "copilot":
        command = next(c for c in commands if "userPromptSubmitted" in c)
    logs = home / "logs"
    assert home.is_dir() and not logs.exists()  # install made the home (installs.json); the hook makes logs/
    # PATH has kirolearn-hook: the hook runs, and the event is kept
    count = spooled()
    ran = run_in_shell(command, PAYLOADS[agent], project, f"{path_bin}:{BARE_PATH}")
    assert ran.returncode == 0 and ran.stdout == b"", ran.stderr
    assert spooled() == count + 1
    # PATH lacks it: exit 0 all the same, one line on stderr the agent can show, one in the log
    missing = run_in_shell(command, PAYLOADS[agent], project, BARE_PATH)
    assert missing.returncode == 0 and missing.stdout == b""
    assert b"kirolearn-hook is not on PATH" in missing.stderr and spooled() == count + 1
    assert (
        oct((logs / "hook.log").stat().st_mode & 0o777) == "0o600"
        and oct(logs.stat().st_mode & 0o777) == "0o700"
    )
    log = (logs / "hook.log").read_text()
    assert log.count("kirolearn-hook is not on PATH") == 1 and log[:4].isdigit()

    # doctor, as run from a shell whose PATH lacks it: the agent, the file, what is wrong and the fix
    doctor = subprocess.run(
        [str(BIN / "kirolearn"), "doctor"],
        env={**os.environ, "PATH": BARE_PATH},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=project,
    )
    fails = [
        line for line in doctor.stdout.splitlines() if "from PATH, which this PATH does not find" in line
    ]
    assert fails and all(line.startswith("FAIL") and f"{agent}: " in line for line in fails), doctor.stdout
    assert any("kirolearn-hook" in line and "pipx install kirolearn" in line for line in fails)
    assert "1 hook error(s) in the last 24 h" in doctor.stdout
    # ... and from one whose PATH has it: every wired file is OK (the hook program answered --version)
    doctor = subprocess.run(
        [str(BIN / "kirolearn"), "doctor"],
        env={**os.environ, "PATH": f"{path_bin}:{BARE_PATH}"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=project,
    )
    assert "from PATH" not in doctor.stdout and "wired: " in doctor.stdout, doctor.stdout

    # uninstall: every byte of the user's files back, nothing of ours left
    scope = [] if agent == "codex" else ["--project", str(project)]  # the project's wiring, by name
    result = cli("uninstall", "--agent", agent, *scope, "--yes")
    assert result.returncode == 0, result.stderr
    assert {p: (project / p).read_bytes() for p in user_bytes} == user_bytes
    for f in files:
        if Path(f).exists():
            assert install.MARK not in Path(f).read_text() and "kirolearn-mcp" not in Path(f).read_text(), f


@pytest.mark.slow
def test_the_mcp_server_started_from_a_portable_entry_names_its_agent(project, home, path_bin):
    """The real kirolearn-mcp, started as Claude Code would start the .mcp.json entry (its command found
    on PATH, its env), by a client whose clientInfo names no agent: the record is Claude Code's."""
    files = install_portable("claude-code", project)
    (entry,) = mcp_entries(files)
    env = {**os.environ, **entry["env"], "PATH": f"{path_bin}:{BARE_PATH}"}
    proc = subprocess.Popen(
        ["/bin/sh", "-c", entry["command"]],
        cwd=project,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    args = {
        "title": "Portable wiring note",
        "summary": "the hook runs from PATH",
        "observation_type": "discovery",
        "facts": [],
        "concepts": [],
        "files_touched": [],
    }
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "some-client", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "save_observation", "arguments": args},
        },
    ]
    replies = {}
    try:
        for message in messages:
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()
            while "id" in message and message["id"] not in replies:
                line = proc.stdout.readline()
                assert line, proc.stderr.read().decode()[-2000:]
                reply = json.loads(line)
                replies[reply.get("id")] = reply
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        finally:
            proc.kill()
    assert not replies[2]["result"].get("isError"), replies[2]
    exported = [json.loads(line) for line in cli("export").stdout.splitlines()]
    (record,) = [o for o in exported if o.get("type") == "record" and o.get("title") == args["title"]]
    assert record["agent"] == "claude-code", record


def test_opencode_portable_needs_a_project(project):
    result = cli("install", "--agent", "opencode", "--portable", "--yes")
    assert result.returncode == 1 and "--portable for opencode wires a project" in result.stderr
    assert "--project DIR" in result.stderr


NODE_CALLS_THE_PLUGIN = """
const { pathToFileURL } = await import("node:url");
const plugin = await import(pathToFileURL(process.argv[1]).href);
const hooks = await plugin.Kirolearn({ directory: process.argv[2] });
for (const id of ["s1", "s2"]) {
  const output = { parts: [{ type: "text", text: "portable hello" }] };
  await hooks["chat.message"]({ sessionID: id }, output);
}
console.log("done");
"""


@pytest.mark.slow
def test_opencode_portable_plugin_is_the_projects_and_runs_kirolearn_hook_from_path(project, home, path_bin):
    """opencode --portable: the plugin is a project file named relative to opencode.json, its hook is
    `kirolearn-hook` from PATH (a missing one: a line on stderr and in hook.log, the agent unharmed), the MCP
    command is bare; uninstall gives back every byte."""
    user = '{\n  "model": "anthropic/claude-sonnet-4-5",\n  "plugin": ["other-plugin"]\n}\n'
    (project / "opencode.json").write_text(user)
    before = {str(p.relative_to(project)): p.read_bytes() for p in project.rglob("*") if p.is_file()}
    result = cli("install", "--agent", "opencode", "--project", str(project), "--portable", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "absolute paths of this machine" not in result.stderr
    plugin = project / ".kirolearn" / "opencode-plugin.js"
    wired = json.loads((project / "opencode.json").read_text())
    assert wired["plugin"] == ["other-plugin", "./.kirolearn/opencode-plugin.js"]
    assert wired["mcp"]["kirolearn"]["command"] == ["kirolearn-mcp"]
    assert wired["mcp"]["kirolearn"]["environment"] == {"KIROLEARN_AGENT": "opencode"}
    assert wired["permission"] == {"kirolearn_forget_memory": "ask"}
    for f in (plugin, project / "opencode.json"):
        text = f.read_text()
        assert not [w for w in machine_words(home) if w in text], f
    assert 'const HOOK = ["kirolearn-hook", "--agent", "opencode"];' in plugin.read_text()
    assert sorted(e["path"] for e in install.load_record()) == sorted(
        [str(plugin), str(project / "opencode.json")]
    )

    node = shutil.which("node")
    if node:  # the plugin itself, as opencode (Bun) would call it

        def call(path):
            env = {
                "PATH": path,
                "HOME": os.environ["HOME"],
                "KIROLEARN_HOME": os.environ["KIROLEARN_HOME"],
                "KIROLEARN_EMBEDDING_MODEL": "none",
            }
            return subprocess.run(
                [node, "--input-type=module", "-e", NODE_CALLS_THE_PLUGIN, str(plugin), str(project)],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                cwd=project,
            )

        count = spooled()
        ran = call(f"{path_bin}:{os.path.dirname(node)}:{BARE_PATH}")
        assert ran.returncode == 0 and ran.stdout == "done\n" and ran.stderr == "", ran.stderr
        assert spooled() == count + 4  # each session's start and its prompt
        missing = call(f"{os.path.dirname(node)}:{BARE_PATH}")
        assert missing.returncode == 0 and missing.stdout == "done\n"
        assert missing.stderr.count("kirolearn-hook is not on PATH") == 1 and spooled() == count + 4
        log = (home / "logs" / "hook.log").read_text()
        assert log.count("kirolearn-hook is not on PATH") == 1 and log[:4].isdigit()

    result = cli("uninstall", "--agent", "opencode", "--project", str(project), "--yes")
    assert result.returncode == 0, result.stderr
    after = {str(p.relative_to(project)): p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert after == before and not (project / ".kirolearn").exists()
