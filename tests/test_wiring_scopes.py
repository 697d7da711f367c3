"""Wiring is seen wherever it lives, one capture per call, and uninstall by scope.

Everything runs through the real console scripts in temporary HOMEs: a teammate's clone of a repository
whose portable Claude Code wiring is committed (a real `git init`, commit and `git clone`), both
scopes of one agent wired at once (install refuses, doctor names both files, the hook keeps one event
per call), and the uninstall of each scope checked by sha256 of every file it could touch.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
TIMEOUT = 120


def env_for(user_home: Path, extra_path: bool = True) -> dict:
    """One person's environment: their HOME and kirolearn home, kirolearn's scripts on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("KIROLEARN_RAISE_ERRORS", "CODEX_HOME")}
    env.update(
        HOME=str(user_home),
        KIROLEARN_HOME=str(user_home / ".kirolearn"),
        PATH=(f"{BIN}:" if extra_path else "") + "/usr/bin:/bin",
        GIT_AUTHOR_NAME="a",
        GIT_AUTHOR_EMAIL="a@example.com",
        GIT_COMMITTER_NAME="a",
        GIT_COMMITTER_EMAIL="a@example.com",
    )
    return env


def run_process(args, env, cwd, stdin=None):
    return subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, input=stdin
    )


def kl(env, cwd, *args):
    return run_process([str(BIN / "kirolearn"), *args], env, cwd)


def post_tool(cwd: Path, tool_use_id: str) -> str:
    return json.dumps(
        {
            "session_id": "s-1",
            "transcript_path": str(cwd / "t.jsonl"),
            "cwd": str(cwd),
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
            "tool_use_id": tool_use_id,
            "tool_response": {"stdout": "README.md", "stderr": ""},
        }
    )


def post_tool_command(settings: Path) -> str:
    """The PostToolUse command kirolearn wrote into a Claude Code settings file."""
    data = json.loads(settings.read_text("utf-8"))
    (command,) = [
        h["command"]
        for g in data["hooks"]["PostToolUse"]
        for h in g["hooks"]
        if "kirolearn-hook" in h["command"]
    ]
    return command


def spooled(user_home: Path) -> "list[str]":
    ready = user_home / ".kirolearn" / "spool" / "ready"
    return sorted(os.listdir(ready)) if ready.exists() else []


def sha(path: Path) -> "str | None":
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


@pytest.fixture
def people(tmp_path):
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    alice.mkdir()
    bob.mkdir()
    return alice, bob


def test_a_teammates_clone_reads_wired_by_this_project(people):
    alice, bob = people
    repo = alice / "src" / "repo"
    repo.mkdir(parents=True)
    a = env_for(alice)
    assert run_process(["git", "init", "-q", str(repo)], a, alice).returncode == 0
    (repo / "README.md").write_text("hello\n")
    done = kl(a, repo, "install", "--agent", "claude-code", "--portable", "--project", str(repo), "--yes")
    assert done.returncode == 0, done.stderr
    assert run_process(["git", "add", "-A"], a, repo).returncode == 0
    assert run_process(["git", "commit", "-qm", "wire kirolearn"], a, repo).returncode == 0

    clone = bob / "work" / "repo"
    b = env_for(bob)
    assert run_process(["git", "clone", "-q", str(repo), str(clone)], b, bob).returncode == 0
    assert (clone / ".claude" / "settings.json").exists() and not (bob / ".kirolearn").exists()

    status = kl(b, clone, "status")
    assert status.returncode == 0, status.stderr
    assert "claude-code: wired by this project (portable)" in status.stdout, status.stdout
    assert "none wired" not in status.stdout and "not found on this PATH" not in status.stdout
    doctor = kl(b, clone, "doctor")
    assert "no agent is wired" not in doctor.stdout, doctor.stdout
    assert "OK    claude-code: wired by this project (portable)" in doctor.stdout, doctor.stdout
    assert str(clone / ".claude" / "settings.json") in doctor.stdout
    assert (
        str(clone / ".mcp.json") in doctor.stdout and "registers no kirolearn MCP server" not in doctor.stdout
    )

    # the committed command records Bob's calls, as Claude Code runs it (a POSIX shell)
    command = post_tool_command(clone / ".claude" / "settings.json")
    hooked = run_process(["sh", "-c", command], b, clone, stdin=post_tool(clone, "toolu_1"))
    assert hooked.returncode == 0 and len(spooled(bob)) == 1, hooked.stderr

    # following the old advice (install the user's scope too) is refused, naming the project's file
    again = kl(b, clone, "install", "--agent", "claude-code", "--yes")
    assert again.returncode == 1, again.stdout
    assert str(clone / ".claude" / "settings.json") in again.stderr and "--also" in again.stderr
    assert not (bob / ".claude" / "settings.json").exists()

    # a PATH without kirolearn: said, with the fix
    bare = kl({**b, "PATH": "/usr/bin:/bin"}, clone, "status")
    assert "not found on this PATH: kirolearn-hook" in bare.stdout, bare.stdout


def test_both_scopes_wired_at_once_keep_one_event_per_call(people):
    alice, _ = people
    project = alice / "proj"
    (project / ".git").mkdir(parents=True)
    a = env_for(alice)
    assert (
        kl(
            a, project, "install", "--agent", "claude-code", "--portable", "--project", str(project), "--yes"
        ).returncode
        == 0
    )
    refused = kl(a, project, "install", "--agent", "claude-code", "--yes")
    assert refused.returncode == 1 and "already wired by the project" in refused.stderr, refused.stderr
    assert not (alice / ".claude").exists()  # nothing was written
    both = kl(a, project, "install", "--agent", "claude-code", "--also", "--yes")
    assert both.returncode == 0, both.stderr

    user_file, project_file = alice / ".claude" / "settings.json", project / ".claude" / "settings.json"
    doctor = kl(a, project, "doctor")
    (warning,) = [line for line in doctor.stdout.splitlines() if "wired twice" in line]
    assert warning.startswith("WARN") and str(user_file) in warning and str(project_file) in warning
    assert "wired twice" in kl(a, project, "status").stdout

    # Claude Code runs both commands for each call, at the same moment, with the same bytes
    commands = [post_tool_command(user_file), post_tool_command(project_file)]
    assert commands[0] != commands[1]
    for call in ("toolu_1", "toolu_2"):
        payload = post_tool(project, call)
        procs = [
            subprocess.Popen(
                ["sh", "-c", c], env=a, cwd=project, stdin=subprocess.PIPE, stderr=subprocess.PIPE
            )
            for c in commands
        ]
        for proc in procs:
            proc.communicate(payload.encode(), timeout=TIMEOUT)
            assert proc.returncode == 0
    assert len(spooled(alice)) == 2  # one event per call, not four
    assert kl(a, project, "drain").returncode == 0
    export = kl(a, project, "export")
    tools = [json.loads(line) for line in export.stdout.splitlines() if '"type": "event"' in line]
    assert len(tools) == 2, export.stdout[-2000:]


def test_uninstall_each_scope_by_sha256(people):
    alice, _ = people
    project = alice / "proj"
    (project / ".git").mkdir(parents=True)
    (alice / ".claude").mkdir()
    (alice / ".claude" / "settings.json").write_text('{"theme": "dark"}\n')  # the user's own, before install
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{\n  "env": {"A": "1"}\n}\n')  # committed before
    (project / ".mcp.json").write_text('{"mcpServers": {"gh": {"command": "gh-mcp"}}}\n')
    user_files = [alice / ".claude" / "settings.json", alice / ".claude.json"]
    project_files = [project / ".claude" / n for n in ("settings.json", "settings.local.json")] + [
        project / ".mcp.json"
    ]
    before = {p: sha(p) for p in user_files + project_files}
    a = env_for(alice)
    assert (
        kl(
            a, project, "install", "--agent", "claude-code", "--portable", "--project", str(project), "--yes"
        ).returncode
        == 0
    )
    assert kl(a, project, "install", "--agent", "claude-code", "--also", "--yes").returncode == 0
    wired = {p: sha(p) for p in user_files + project_files}
    assert all(wired[p] != before[p] for p in wired)

    user = kl(a, project, "uninstall", "--agent", "claude-code", "--yes")  # the user's scope, by default
    assert user.returncode == 0, user.stderr
    assert f"update     {user_files[0]}" in user.stdout and f"remove     {user_files[1]}" in user.stdout
    assert (
        f"kept       the wiring of {project}" in user.stdout and str(project / ".mcp.json") not in user.stdout
    )
    assert {p: sha(p) for p in user_files} == {p: before[p] for p in user_files}
    assert {p: sha(p) for p in project_files} == {p: wired[p] for p in project_files}  # untouched

    proj = kl(a, project, "uninstall", "--agent", "claude-code", "--project", str(project), "--yes")
    assert proj.returncode == 0, proj.stderr
    assert {p: sha(p) for p in project_files} == {p: before[p] for p in project_files}
    # the files that were there before are edited back, not deleted; the one install created is gone
    assert (project / ".claude" / "settings.json").exists() and (project / ".mcp.json").exists()
    assert not (project / ".claude" / "settings.local.json").exists()
    again = kl(a, project, "uninstall", "--agent", "claude-code", "--yes")
    assert "nothing to uninstall" in again.stdout


def test_a_call_claimed_once_within_the_window(tmp_path):
    from kirolearn.capture import once

    key = once.call_key("claude-code", None, b'{"a": 1}', "s")
    assert key != once.call_key("claude-code", None, b'{"a": 2}', "s")
    assert key != once.call_key("codex", None, b'{"a": 1}', "s")
    root, session = str(tmp_path), once.session_key("claude-code", "s-1")
    now = 1_800_000_030.0
    first = once.claim_call(root, key, session, now)
    os.utime(first, (now, now))
    assert first and once.claim_call(root, key, session, now + 0.5) is None  # the twin
    assert once.claim_call(root, key, session, now + once.CALL_WINDOW_SECONDS + 1)  # the same bytes, later
    # across a minute's edge the twin still sees the claim; old minutes' folders are swept
    edge = 1_800_000_059.5
    marker = once.claim_call(root, key, session, edge)
    os.utime(marker, (edge, edge))
    assert once.claim_call(root, key, session, edge + 1.0) is None
    later = edge + 600
    assert once.claim_call(root, key, session, later)
    assert sorted(n for n in os.listdir(tmp_path / once.CALLS_DIR) if n.isdigit()) == [str(int(later // 60))]
    once.release_call(first)  # a release of a swept marker is harmless


def test_the_same_bytes_after_another_call_of_the_session_are_a_new_call(tmp_path):
    from kirolearn.capture import once

    root = str(tmp_path)
    for turn in range(20):  # microseconds apart, finer than a file system's clock tick
        session = once.session_key("kiro", f"s-{turn}")
        bodies = (f'{{"session": {turn}, "stop": ""}}', f'{{"session": {turn}, "prompt": "next"}}')
        stop, prompt = (once.call_key("kiro", None, b.encode()) for b in bodies)
        assert once.claim_call(root, stop, session)
        assert once.claim_call(root, prompt, session)
        assert once.claim_call(root, stop, session)  # a second turn ending in the same empty stop
        assert once.claim_call(root, stop, session) is None  # but its twin is one call
