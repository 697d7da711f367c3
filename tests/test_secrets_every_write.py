"""Issue #43: every new shape, in every placement, through the real console scripts, and no output and
no file of the home holds one.

One run: hooks (`kirolearn-hook`) with the shapes of tests/shapes43.py in a prompt, a command line,
a tool's output and a file's content written by a tool; Cursor's last answer kept by the hook with
no `stop` after it; a model (a fake local server) that answers 401 quoting the key it refused;
`kirolearn edit --reason` with a password; an MCP save (`kirolearn-mcp`) whose caller's
KIROLEARN_SESSION_ID is a token. Then every output (the database's every table and column,
`export`, `list --json`, `search --json`, `status --json`, `doctor --json`, what the model was
sent, MCP `search_memory`) and every file under the home (state/, logs/, sessions/, the database
and its WAL; the spool's done files too, when there are any) must hold none of the seeded secrets.
The spool's ready, tmp and quarantined event files are left out: raw text waits there for the drain
(design rule 3).
"""

import json
import os
import random
import sqlite3
import subprocess
import sys

import pytest
import shapes43
from conftest import hook_env, kl, run_hook

pytestmark = pytest.mark.timeout(300) if hasattr(pytest.mark, "timeout") else []

KEY = "sk-proj-" + "Qw7eRt2yUi9oPa4sDf6gHj1kLz3xCv8bNm5QwErTy"  # fake, like every value here
SESSION_TOKEN = "ghp_" + "Mx4Nc7Vb2Lk9Jh5Gf3Ds1Ap8Oi6Uy0Tr2Ew4Qq"
REASON_PW = "Rv8kLm3Qz7Xw2Np"
CURSOR_PW = "Ct5Yh8Jk2Lm9Qp4"
RAW_SPOOL = ("ready", "tmp", "quarantine")


def _cases():
    return shapes43.cases(random.Random(4343), per_family=1)


def _bash(project, session, command, output):
    return {
        "hook_event_name": "postToolUse",
        "cwd": str(project),
        "session_id": session,
        "tool_name": "execute_bash",
        "tool_input": {"command": command},
        "tool_response": {"success": True, "result": [output]},
    }


def _hook(body, *argv, env=None):
    done = run_hook(list(argv), json.dumps(body).encode(), env=env)
    assert done.returncode == 0, done.stderr[-2000:]


def _mcp(project, env, calls):
    """Run `kirolearn-mcp` over stdio: initialize, then each (tool, arguments); the replies."""
    proc = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "kirolearn-mcp")],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ] + [
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}}
        for i, (name, args) in enumerate(calls, 1)
    ]
    replies = {}
    try:
        for message in messages:
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()
            if "id" not in message:
                continue
            while message["id"] not in replies:
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
    return [replies[i] for i in range(1, len(calls) + 1)]


def _database(path):
    """Every cell of every table (the FTS index's shadow tables too), as text."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out = []
    try:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")]
        for table in tables:
            try:
                columns = [r[1] for r in conn.execute(f'pragma table_info("{table}")')]
                for row in conn.execute(f'select * from "{table}"'):
                    for column, cell in zip(columns, row):
                        if isinstance(cell, bytes):
                            cell = cell.decode("utf-8", "replace")
                        out.append(f"{table}.{column}: {cell}")
            except sqlite3.DatabaseError:  # a virtual table this build cannot read
                continue
    finally:
        conn.close()
    return out


def _files(home):
    """(path relative to the home, its bytes as text) for every file but the raw spool's."""
    out = []
    for root, _dirs, names in os.walk(home):
        rel = os.path.relpath(root, home).split(os.sep)
        if rel[0] == "spool" and len(rel) > 1 and rel[1] in RAW_SPOOL:
            continue
        for name in names:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as fh:
                    out.append((os.path.relpath(path, home), fh.read().decode("utf-8", "replace")))
    return out


def test_every_new_shape_in_every_placement_reaches_no_output_and_no_file(
    home, project, write_config, tmp_path
):
    from fakellm import FakeLLM

    cases = _cases()
    secrets = {family: secret for family, _, secret in cases}
    secrets.update(key=KEY, session=SESSION_TOKEN, reason=REASON_PW, cursor=CURSOR_PW)
    joined = "\n\n".join(text for _, text, _ in cases)
    with FakeLLM() as fake:
        write_config(
            f'[extract]\nmodel = "openai/fake-model"\napi_base = "{fake.openai_base}"\n'
            "retries = 0\nbreaker_failures = 50\ntimeout_seconds = 10\n"
        )
        for _ in range(40):  # the provider refuses the key and quotes it back
            fake.enqueue(
                status=401,
                body={"error": {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"}},
            )
        env = hook_env(OPENAI_API_KEY=KEY)
        # the four placements, one turn each
        _hook(
            {
                "hook_event_name": "userPromptSubmit",
                "cwd": str(project),
                "session_id": "p-prompt",
                "prompt": "please check these:\n" + joined,
            },
            env=env,
        )
        _hook(
            {
                "hook_event_name": "stop",
                "cwd": str(project),
                "session_id": "p-prompt",
                "assistant_response": "checked the settings",
            },
            env=env,
        )
        _hook(
            {
                "hook_event_name": "userPromptSubmit",
                "cwd": str(project),
                "session_id": "p-command",
                "prompt": "run the maintenance commands",
            },
            env=env,
        )
        for i, (_, text, _) in enumerate(cases):
            _hook(_bash(project, "p-command", text, f"step {i} ok"), env=env)
        _hook(
            {
                "hook_event_name": "stop",
                "cwd": str(project),
                "session_id": "p-command",
                "assistant_response": "ran them all",
            },
            env=env,
        )
        _hook(
            {
                "hook_event_name": "userPromptSubmit",
                "cwd": str(project),
                "session_id": "p-output",
                "prompt": "show me the config files",
            },
            env=env,
        )
        for i, (_, text, _) in enumerate(cases):
            _hook(_bash(project, "p-output", f"cat conf/{i}.txt", text), env=env)
        _hook(
            {
                "hook_event_name": "stop",
                "cwd": str(project),
                "session_id": "p-output",
                "assistant_response": "those are the files",
            },
            env=env,
        )
        _hook(
            {
                "hook_event_name": "userPromptSubmit",
                "cwd": str(project),
                "session_id": "p-write",
                "prompt": "write the deploy notes",
            },
            env=env,
        )
        _hook(
            {
                "hook_event_name": "postToolUse",
                "cwd": str(project),
                "session_id": "p-write",
                "tool_name": "fs_write",
                "tool_input": {"command": "create", "path": str(project / "deploy.md"), "file_text": joined},
                "tool_response": {"success": True, "result": ["written"]},
            },
            env=env,
        )
        _hook(
            {
                "hook_event_name": "stop",
                "cwd": str(project),
                "session_id": "p-write",
                "assistant_response": "wrote deploy.md",
            },
            env=env,
        )
        # Cursor: the hook keeps the last answer raw in sessions/ until a stop that never comes
        _hook(
            {
                "hook_event_name": "afterAgentResponse",
                "conversation_id": "cur-1",
                "workspace_roots": [str(project)],
                "text": f"done: redis-cli -a {CURSOR_PW} ping",
            },
            "--agent",
            "cursor",
            env=env,
        )

        drained = kl("drain", "--flush", "--json", env=env)
        assert drained.returncode == 0, drained.stderr[-3000:]
        assert json.loads(drained.stdout)["llm_failures"] >= 1, drained.stdout  # the 401 was met, and noted
        model_sent = json.dumps([r for r in fake.chat_requests], default=str)
    # the model's failures leave the turns pending: without a model, the deterministic extractor
    write_config('[extract]\nmodel = ""\n')
    again = kl("drain", "--flush", "--json", env=env)
    assert again.returncode == 0 and json.loads(again.stdout)["records_written"] >= 4, again.stdout[-2000:]

    listed = kl("list", "--json", "--all-projects", env=env)
    assert listed.returncode == 0, listed.stderr
    records = json.loads(listed.stdout)
    records = records.get("records", records) if isinstance(records, dict) else records
    assert records
    rid = records[0]["record_id"]
    edited = kl(
        "edit",
        rid,
        "--title",
        "Maintenance notes",
        "--reason",
        f"rotated, was redis-cli -a {REASON_PW}",
        env=env,
    )
    assert edited.returncode == 0, edited.stderr

    mcp_env = dict(env, KIROLEARN_PROJECT=str(project), KIROLEARN_SESSION_ID=SESSION_TOKEN)
    saved, found = _mcp(
        project,
        mcp_env,
        [
            (
                "save_observation",
                {
                    "title": "Cache auth",
                    "summary": f"redis-cli -a {REASON_PW}x ping works",
                    "observation_type": "decision",
                    "facts": [],
                    "concepts": [],
                    "files_touched": [],
                },
            ),
            ("search_memory", {"query": "redis-cli ldapsearch openssl keytool discord telegram gcloud"}),
        ],
    )
    assert "error" not in saved and not saved["result"].get("isError"), saved
    assert found["result"]["content"], found

    outputs = {
        "model prompt": model_sent,
        "mcp search_memory": json.dumps(found),
        "mcp save": json.dumps(saved),
    }
    for name, args in {
        "export": ("export",),
        "list --json": ("list", "--json", "--all-projects"),
        "search --json": ("search", "redis-cli discord telegram sqlplus", "--json", "--all-projects"),
        "status --json": ("status", "--json"),
        "doctor --json": ("doctor", "--json"),
        "scan": ("scan", str(project / "deploy.md")),
    }.items():
        done = kl(*args, env=env)
        outputs[name] = done.stdout + done.stderr
    assert json.loads(kl("status", "--json", env=env).stdout)
    cells = _database(home / "kirolearn.db")
    files = _files(home)
    assert any(rel.startswith("state") for rel, _ in files) and cells

    leaks = []
    for what, secret in secrets.items():
        for name, out in outputs.items():
            if secret in out:
                leaks.append((what, name))
        for cell in cells:
            if secret in cell:
                leaks.append((what, cell.split(":", 1)[0]))
        for rel, body in files:
            if secret in body:
                leaks.append((what, rel))
    assert not leaks, sorted(set(leaks))[:20]
    # the run reached the new paths: the model's failure, the audit reason, the MCP session
    model_state = json.loads((home / "state" / "model.json").read_text())
    assert "[REDACTED:" in model_state.get("last_error", ""), model_state
    assert any(c.startswith("record_audit.reason: ") and "[REDACTED:" in c for c in cells)
    assert any(".session_id: [REDACTED:github-token]" in c for c in cells)


def test_rescrub_cleans_state_and_session_files_written_raw(home):
    """Files an older version (or the hook) wrote raw: rescrub cleans them, reporting each file."""
    (home / "state").mkdir(parents=True)
    (home / "sessions").mkdir()
    (home / "state" / "model.json").write_text(json.dumps({"last_error": f"401 Invalid API key: {KEY}"}))
    (home / "sessions" / "cursor-last-c1.txt").write_text(f"redis-cli -a {CURSOR_PW} ping\n")
    done = kl("rescrub", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {"state/model.json", "sessions/cursor-last-c1.txt"} <= set(report["log_lines_changed"])
    assert KEY not in (home / "state" / "model.json").read_text()
    assert CURSOR_PW not in (home / "sessions" / "cursor-last-c1.txt").read_text()
    assert oct((home / "sessions" / "cursor-last-c1.txt").stat().st_mode & 0o777) == "0o600"


def test_cursor_last_answer_is_scrubbed_by_the_drain_and_still_ends_its_turn(home, project):
    """The drain scrubs the hook's raw sessions/ file in place (0600); the turn's `stop` later still
    takes that answer, scrubbed."""
    env = hook_env()
    start = {"hook_event_name": "beforeSubmitPrompt", "conversation_id": "cur-2", "prompt": "cache status?"}
    _hook(dict(start, workspace_roots=[str(project)]), "--agent", "cursor", env=env)
    answer = {
        "hook_event_name": "afterAgentResponse",
        "conversation_id": "cur-2",
        "workspace_roots": [str(project)],
        "text": f"checked: redis-cli -a {CURSOR_PW} ping answers PONG",
    }
    _hook(answer, "--agent", "cursor", env=env)
    (kept,) = (home / "sessions").glob("cursor-last-*.txt")
    assert CURSOR_PW in kept.read_text()  # raw until a drain: the hook cannot afford the scrubber
    assert kl("drain", env=env).returncode == 0
    assert CURSOR_PW not in kept.read_text() and "[REDACTED:cli-password]" in kept.read_text()
    assert oct(kept.stat().st_mode & 0o777) == "0o600"
    stop = {"hook_event_name": "stop", "conversation_id": "cur-2", "workspace_roots": [str(project)]}
    _hook(stop, "--agent", "cursor", env=env)
    assert kl("drain", "--flush", env=env).returncode == 0
    exported = kl("export", env=env).stdout
    stops = [json.loads(line) for line in exported.splitlines() if '"stop"' in line]
    assert any("PONG" in json.dumps(s) and "[REDACTED:cli-password]" in json.dumps(s) for s in stops), stops
    assert CURSOR_PW not in exported
