"""Issue #31, parts 1, 3, 5 and 6: a record's `outcome` and `freshness`, through the real hook, drain,
CLI, MCP client and a real git repository."""

import json
import math
import os
import shutil
import subprocess
import uuid

import pytest
from conftest import cli, hook_env, run_hook
from helpers import drain

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


def git(root, *args):
    return subprocess.run(
        ["git", "-C", str(root), *args],
        check=True,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
        },
    ).stdout


@pytest.fixture
def repo(tmp_path):
    """A real git repository with one commit (a space in its path, on purpose)."""
    root = tmp_path / "my repo"
    root.mkdir()
    if GIT:
        git(root, "init", "-q", "-b", "main")
        (root / "README.md").write_text("hello\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "init")
    else:
        (root / ".git").mkdir()
    return root


def hook(root, payload, agent=None):
    argv = ["--agent", agent] if agent else []
    done = run_hook(
        argv, stdin=json.dumps({"cwd": str(root), **payload}).encode(), env=hook_env(), cwd=str(root)
    )
    assert done.returncode == 0, done.stderr


def kiro_turn(root, session, prompt, tools, answer="Done."):
    """One Kiro CLI turn (classic camelCase events) through the real hook: prompt, tool calls, stop."""
    hook(root, {"hook_event_name": "userPromptSubmit", "session_id": session, "prompt": prompt})
    for name, tool_input, response in tools:
        hook(
            root,
            {
                "hook_event_name": "postToolUse",
                "session_id": session,
                "tool_name": name,
                "tool_input": tool_input,
                "tool_response": response,
            },
        )
    hook(root, {"hook_event_name": "stop", "session_id": session, "assistant_response": answer})


def write_tool(root, rel, text):
    """The agent writes a file (as fs_write does), and the hook hears of it."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return ("fs_write", {"command": "create", "path": str(path), "file_text": text}, {"success": True})


def records():
    done = cli("list", "--json", "--limit", "200", "--all-projects")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    return found["records"] if isinstance(found, dict) else found


def by_title(words):
    return [r for r in records() if words in r["title"]]


def module(name, n=12):
    return "".join(f"def {name}_{i}(x):\n    return x * {i} + {i * 7}\n\n\n" for i in range(n))


# --- outcome (part 3) ------------------------------------------------------------------------------


def test_outcome_in_every_failure_shape_the_adapters_see(repo):
    """failed / succeeded / unknown from each agent's payload, through the real hook and drain."""
    s = "sess-" + uuid.uuid4().hex[:6]
    kiro_turn(
        repo,
        s + "a",
        "run the kiro success false case",
        [
            (
                "execute_bash",
                {"command": "make lint"},
                {"success": False, "error": ["lint: fatal: bad config"]},
            )
        ],
    )
    kiro_turn(
        repo,
        s + "b",
        "run the kiro exit status case",
        [
            (
                "execute_bash",
                {"command": "git status"},
                {"success": True, "result": [{"exit_status": "0", "stdout": ""}]},
            ),
            (
                "execute_bash",
                {"command": "pytest -q"},
                {
                    "success": True,
                    "result": [{"exit_status": "1", "stdout": "", "stderr": "E   AssertionError: 2 != 3"}],
                },
            ),
        ],
    )
    kiro_turn(
        repo,
        s + "c",
        "run the kiro v3 exit code string case",
        [("shell", {"command": "npm test"}, "Output:\nError: Cannot find module 'x'\nExit Code: 1")],
    )
    kiro_turn(
        repo,
        s + "d",
        "run the recovered case",
        [
            ("execute_bash", {"command": "pytest -q"}, "Output:\nFAILED test_a\nExit Code: 1"),
            ("execute_bash", {"command": "pip install -e ."}, "Output:\nok\nExit Code: 0"),
            ("execute_bash", {"command": "pytest -q"}, "Output:\n3 passed\nExit Code: 0"),
        ],
    )
    kiro_turn(
        repo,
        s + "e",
        "run the plain success case",
        [
            (
                "execute_bash",
                {"command": "make build"},
                {"success": True, "result": [{"exit_status": "0", "stdout": "ok"}]},
            )
        ],
    )
    kiro_turn(repo, s + "f", "explain the unknown case without tools in src/x.py", [])
    # Codex: exit_code null with the sandbox's error; and a plain non-zero exit_code
    for sid, prompt, response in (
        (
            s + "g",
            "run the codex read only case",
            {"exit_code": None, "output": "touch: cannot touch 'build/x.lock': Read-only file system"},
        ),
        (s + "h", "run the codex exit code case", {"exit_code": 2, "output": "make: *** [all] Error 2"}),
    ):
        hook(repo, {"hook_event_name": "UserPromptSubmit", "session_id": sid, "prompt": prompt}, "codex")
        hook(
            repo,
            {
                "hook_event_name": "PostToolUse",
                "session_id": sid,
                "tool_name": "Bash",
                "tool_input": {"command": "make all"},
                "tool_response": response,
                "tool_use_id": "t1",
            },
            "codex",
        )
        hook(
            repo,
            {"hook_event_name": "Stop", "session_id": sid, "last_assistant_message": "It failed."},
            "codex",
        )
    sid = s + "i"
    hook(
        repo,
        {"hook_event_name": "BeforeAgent", "session_id": sid, "prompt": "run the gemini error case"},
        "gemini",
    )
    hook(
        repo,
        {
            "hook_event_name": "AfterTool",
            "session_id": sid,
            "tool_name": "run_shell_command",
            "tool_input": {"command": "cargo build"},
            "tool_response": {
                "llmContent": "Error: linker failed",
                "returnDisplay": "Error: linker failed",
                "error": {"message": "linker failed", "type": "execution_failed"},
            },
        },
        "gemini",
    )
    hook(
        repo,
        {
            "hook_event_name": "AfterAgent",
            "session_id": sid,
            "prompt": "run the gemini error case",
            "prompt_response": "The build failed.",
        },
        "gemini",
    )
    sid = s + "j"
    run = run_hook(
        ["--agent", "copilot", "userPromptSubmitted"],
        stdin=json.dumps(
            {"sessionId": sid, "cwd": str(repo), "prompt": "run the copilot failure case"}
        ).encode(),
        cwd=str(repo),
    )
    assert run.returncode == 0
    run = run_hook(
        ["--agent", "copilot", "postToolUse"],
        stdin=json.dumps(
            {
                "sessionId": sid,
                "cwd": str(repo),
                "toolName": "bash",
                "toolArgs": {"command": "go test ./..."},
                "toolResult": {
                    "resultType": "failure",
                    "textResultForLlm": "FAIL pkg\n<shellId: 0 completed with exit code 1>",
                },
            }
        ).encode(),
        cwd=str(repo),
    )
    assert run.returncode == 0
    drain()
    expect = {
        "kiro success false": "failed",
        "kiro exit status": "failed",
        "kiro v3 exit code": "failed",
        "recovered": "succeeded",
        "plain success": "succeeded",
        "unknown case": "unknown",
        "codex read only": "failed",
        "codex exit code": "failed",
        "gemini error": "failed",
        "copilot failure": "failed",
    }
    found = {}
    for words in expect:
        hits = by_title(words)
        assert hits, f"no record for {words!r}: {[r['title'] for r in records()]}"
        found[words] = hits[0]["outcome"]
    assert found == expect
    failed = by_title("codex read only")[0]
    assert (
        "Tried `make all`: failed because" in failed["summary"]
        and "Read-only file system" in failed["summary"]
    )
    assert "**Ran:**" not in failed["summary"]  # a failed attempt is never told as done
    assert "**Ran:**" in by_title("plain success")[0]["summary"]


def v3_turn(root, session, prompt, calls):
    """One Kiro CLI v3 turn: PreToolUse carries the input, PostToolUse `tool_input: {}` and a string
    response; the Stop carries no answer. `calls`: (tool name, input, response) in order."""
    hook(root, {"hook_event_name": "UserPromptSubmit", "session_id": session, "prompt": prompt})
    for name, tool_input, response in calls:
        hook(
            root,
            {
                "hook_event_name": "PreToolUse",
                "session_id": session,
                "tool_name": name,
                "tool_input": tool_input,
            },
        )
        hook(
            root,
            {
                "hook_event_name": "PostToolUse",
                "session_id": session,
                "tool_name": name,
                "tool_input": {},
                "tool_response": response,
            },
        )
    hook(root, {"hook_event_name": "Stop", "session_id": session})


def test_a_kiro_v3_turn_that_recovered_is_never_failed(repo):
    """A v3 re-run's PreToolUse is identical to the first run's, so within the dedup window (3 s) the drain
    keeps one: the re-run reaches the store without its command. A turn whose failed command may have been
    re-run with success is not `failed` (issue #31: nothing later in the turn succeeded); an unrelated
    later success, whose command is known, does not undo the failure."""
    s = "sess_" + uuid.uuid4().hex[:12]
    run = {"command": "pytest -q tests/test_api.py", "cwd": str(repo)}
    failed = "Output:\nE   ImportError: cannot import name 'login'\nExit Code: 1"
    passed = "Output:\n12 passed in 0.84s\nExit Code: 0"
    v3_turn(
        repo, s + "a", "make the api tests pass at once", [("shell", run, failed), ("shell", run, passed)]
    )
    v3_turn(
        repo,
        s + "b",
        "make the api tests pass after a look",
        [
            ("shell", run, failed),
            ("read", {"operations": [{"mode": "Line", "path": str(repo / "README.md")}]}, "hello"),
            ("shell", run, passed),
        ],
    )
    v3_turn(
        repo,
        s + "c",
        "run the api tests then look at git",
        [
            ("shell", run, failed),
            (
                "shell",
                {"command": "git status --short", "cwd": str(repo)},
                "Output:\n M README.md\nExit Code: 0",
            ),
        ],
    )
    v3_turn(repo, s + "d", "run the api tests once", [("shell", run, failed)])
    drain()
    found = {
        words: by_title(words)[0]["outcome"]
        for words in ("pass at once", "pass after a look", "then look at git", "api tests once")
    }
    assert found == {
        "pass at once": "succeeded",
        "pass after a look": "succeeded",
        "then look at git": "failed",
        "api tests once": "failed",
    }, found
    assert "**Ran:**" in by_title("pass at once")[0]["summary"]


def test_failed_records_are_demoted_and_marked_in_recall(repo):
    s = "sess-" + uuid.uuid4().hex[:6]
    kiro_turn(
        repo,
        s + "a",
        "deploy the zanzibar service",
        [
            (
                "execute_bash",
                {"command": "./deploy zanzibar"},
                "Output:\nError: permission denied\nExit Code: 1",
            )
        ],
    )
    # another program (a re-run of `./deploy zanzibar` would supersede the failure: tests/test_truth.py)
    kiro_turn(
        repo,
        s + "b",
        "deploy the zanzibar service again",
        [("execute_bash", {"command": "./scripts/deploy.sh zanzibar"}, "Output:\ndeployed\nExit Code: 0")],
    )
    drain()
    found = json.loads(cli("search", "deploy zanzibar service", "--json", "--project", str(repo)).stdout)
    hits = found["results"] if isinstance(found, dict) else found
    assert [h["outcome"] for h in hits[:2]] == ["succeeded", "failed"]
    done = cli(
        "context",
        "--prompt",
        "how do I deploy the zanzibar service",
        "--project",
        str(repo),
        "--session",
        s + "c",
    )
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stdout.splitlines() if hits[1]["record_id"] in ln]
    assert len(lines) == 1 and "Tried `./deploy zanzibar`: failed because" in lines[0], done.stdout
    assert "failed attempt" in lines[0] and "Ran" not in lines[0]
    assert done.stdout.index(hits[0]["record_id"]) < done.stdout.index(hits[1]["record_id"])


# --- freshness (parts 1 and 6) --------------------------------------------------------------------


@needs_git
def test_freshness_follows_the_code_in_a_real_repository(repo):
    s = "sess-" + uuid.uuid4().hex[:6]
    kiro_turn(repo, s + "a", "write the gone module", [write_tool(repo, "src/gone.py", module("gone"))])
    kiro_turn(repo, s + "b", "write the moved module", [write_tool(repo, "src/moved.py", module("moved"))])
    kiro_turn(
        repo, s + "c", "write the rewritten module", [write_tool(repo, "src/rewritten.py", module("rw"))]
    )
    kiro_turn(
        repo, s + "d", "write the commented module", [write_tool(repo, "src/commented.py", module("cm"))]
    )
    kiro_turn(
        repo, s + "e", "write the untracked module", [write_tool(repo, "scratch/notes.py", module("nt"))]
    )
    kiro_turn(repo, s + "f", "write the binary blob", [write_tool(repo, "assets/logo.bin", "x")])
    (repo / "assets" / "logo.bin").write_bytes(b"\x89PNG\0\0" + os.urandom(64))
    kiro_turn(
        repo,
        s + "g",
        "read the file outside the project",
        [
            (
                "fs_read",
                {"operations": [{"mode": "Line", "path": "/etc/hostname"}]},
                {"success": True, "result": ["h"]},
            )
        ],
    )
    kiro_turn(
        repo,
        s + "h",
        "write the file with odd characters",
        [write_tool(repo, "src/odd name ü [1].py", module("od"))],
    )
    kiro_turn(repo, s + "i", "chat about nothing in particular about src/x.py", [])
    drain()
    assert {r["freshness"] for r in records()} == {"current"}
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "agent work")
    git(repo, "rm", "-q", "src/gone.py")
    git(repo, "mv", "src/moved.py", "src/renamed.py")
    git(repo, "commit", "-q", "-m", "user: rm and mv")
    (repo / "src" / "rewritten.py").write_text("class Totally:\n    pass\n\n\nNEW = 1\n" * 3)  # not committed
    with open(repo / "src" / "commented.py", "a") as f:
        f.write("# Reviewed: keep it small.\n\n\n")
    (repo / "assets" / "logo.bin").write_bytes(b"\x89PNG\0\0" + os.urandom(64))
    os.remove(repo / "scratch" / "notes.py")  # never committed: a plain rm
    (repo / "src" / "odd name ü [1].py").write_text(module("od") + "\n\n")
    drain()
    expect = {
        "gone module": "deleted",
        "moved module": "current",
        "rewritten module": "deleted",  # every symbol it claimed is gone
        "commented module": "current",
        "untracked module": "deleted",
        "binary blob": "current",  # it claimed nothing: one character is no line to cite
        "outside the project": "current",
        "odd characters": "current",
        "nothing in particular": "current",
    }
    assert {w: by_title(w)[0]["freshness"] for w in expect} == expect
    # every change of mark is in the record's history, with its reason and time; nothing was removed
    gone = by_title("gone module")[0]
    shown = json.loads(cli("show", gone["record_id"], "--json").stdout)
    marks = [h for h in shown["history"] if h["action"] == "mark"]
    assert len(marks) == 1 and "src/gone.py is gone" in marks[0]["reason"] and marks[0]["at"]
    assert json.loads(
        marks[0]["before"] if isinstance(marks[0]["before"], str) else json.dumps(marks[0]["before"])
    ) == {"freshness": "current"}
    record = shown.get("record") or shown
    assert record["freshness"] == "deleted" and {c["state"] for c in shown["claims"]} == {"deleted"}
    assert len(records()) == 9
    # the file comes back: current again, and that change is kept too
    git(repo, "checkout", "HEAD~1", "--", "src/gone.py")
    drain()
    assert by_title("gone module")[0]["freshness"] == "current"
    shown = json.loads(cli("show", gone["record_id"], "--json").stdout)
    assert [h["action"] for h in shown["history"]].count("mark") == 2


def templated(noun):
    """A module written from one template, as agents write many: two of them share half their bytes."""
    return "".join(
        f'def {verb}_{noun}(rows):\n    """{verb.title()} {noun} rows."""\n    out = []\n'
        f"    for row in rows:\n        out.append(row)\n    return out\n\n\n"
        for verb in ("load", "rank", "describe", "total", "top", "count")
    )


@needs_git
def test_a_plain_rm_committed_beside_a_look_alike_new_file_is_deleted_and_a_real_rename_still_followed(repo):
    """Issue #31's held-out miss: `rm` (no git rm) of a module, then `git add -A` commits the deletion with
    another module of the same template; git pairs them as a 50-60 % "rename", which must not be followed."""
    s = "sess-" + uuid.uuid4().hex[:6]
    kiro_turn(
        repo, s + "a", "write the invoice helpers", [write_tool(repo, "src/invoice.py", templated("invoice"))]
    )
    kiro_turn(
        repo, s + "b", "write the ticket helpers", [write_tool(repo, "src/ticket.py", templated("ticket"))]
    )
    drain()
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "agent work")
    os.remove(repo / "src" / "invoice.py")  # a plain rm
    (repo / "src" / "voucher.py").write_text(templated("voucher"))  # the day's other work
    git(repo, "mv", "src/ticket.py", "src/ticket_v2.py")
    with open(repo / "src" / "ticket_v2.py", "a") as f:  # a rename with a light edit in the same commit
        f.write("# moved: keep the ticket helpers together\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "day 2")
    pairs = git(repo, "log", "-1", "-M", "--name-status", "--format=")
    assert "src/invoice.py\tsrc/voucher.py" in pairs  # git's default threshold does pair them
    drain()
    assert by_title("invoice helpers")[0]["freshness"] == "deleted"
    assert by_title("ticket helpers")[0]["freshness"] == "current"


@needs_git
def test_detached_head_no_git_a_huge_file_and_a_submodule_get_a_defined_check(repo, tmp_path):
    from kirolearn.claims import check
    from kirolearn.pipeline import claims as turns

    (repo / "a.py").write_text(module("a"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a")
    git(repo, "checkout", "-q", "--detach")
    claim = turns.file_claims("a.py", module("a"), None, [module("a")])[0]
    assert check.check(claim, str(repo)).state == check.CURRENT
    assert check.blob_id((repo / "a.py").read_bytes()) == git(repo, "hash-object", "a.py").strip()
    # no git repository at all: checked by content, a removed file is deleted
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "b.py").write_text("X = 1\n")
    claim = turns.file_claims("b.py", "X = 1\n", None, ["X = 1\n"])[0]
    assert check.check(claim, str(plain)).state == check.CURRENT
    (plain / "b.py").unlink()
    assert check.check(claim, str(plain)).state == check.DELETED
    # a huge file: not read, so not judged
    with open(plain / "b.py", "wb") as f:
        f.truncate(check.READ_MAX + 10)
    assert check.check(claim, str(plain)).state == check.UNKNOWN
    # a submodule: checked inside its own tree
    sub = tmp_path / "sub"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    (sub / "s.py").write_text("S = 1\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", "s")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "vendor/sub")
    claim = turns.file_claims("vendor/sub/s.py", "S = 1\n", None, ["S = 1\n"])[0]
    assert check.check(claim, str(repo)).state == check.CURRENT


def test_freshness_pass_is_bounded_and_uses_an_index(repo, write_config):
    """N records, M a pass: ceil(N/M) passes check each once; the pending query is an index range."""
    from kirolearn.store.sqlite import db as store
    from kirolearn.store.sqlite import records as recordstore

    n, m = 7, 3
    write_config(f"[drain]\nfreshness_per_pass = {m}\n")
    for i in range(n):
        kiro_turn(
            repo,
            f"s{i}-" + uuid.uuid4().hex[:4],
            f"write module number {i}",
            [write_tool(repo, f"src/m{i}.py", module(f"m{i}"))],
        )
    first = drain()
    for i in range(n):
        (repo / "src" / f"m{i}.py").unlink()
    checked, passes = first["freshness_checked"], 0
    assert checked <= m
    while sum(r["freshness"] == "deleted" for r in records()) < n:
        stats = drain()
        passes += 1
        assert stats["freshness_checked"] <= m
        assert passes <= math.ceil(n / m), (stats, [(r["title"], r["freshness"]) for r in records()])
    assert passes == math.ceil(n / m)  # every record re-checked once in ceil(N/M) passes, M at most each
    db = store.open_db()
    plan = [row[3] for row in db.execute("explain query plan " + recordstore.FRESHNESS_DUE_SQL, [m])]
    # one walk of the partial index in its order, stopped at the limit: no table scan, no sort
    assert plan == ["SCAN memory_records USING INDEX idx_records_claims_due"], plan
    db.conn.close()


def test_a_record_checked_while_the_clock_stepped_back_goes_to_the_back_of_the_queue(repo):
    """The freshness queue orders by the last check's wall-clock stamp: a pass whose clock stepped back
    (NTP on a loaded VM) must not send the records it checked to the front, where the next pass would
    check them again before the rest (a bound of ceil(N/M) passes would fail). One index lookup."""
    from kirolearn.store.sqlite import db as store
    from kirolearn.store.sqlite import records as recordstore

    for i in range(3):
        kiro_turn(
            repo,
            "clk-" + uuid.uuid4().hex[:6],
            f"write clock module {i}",
            [write_tool(repo, f"src/c{i}.py", module(f"c{i}"))],
        )
    drain()
    db = store.open_db()
    first = recordstore.freshness_due(db.conn, 1)[0]
    recordstore.note_checked(db, [first["record_id"]], "2000-01-01T00:00:00.000Z")  # a clock far behind
    queue = [r["record_id"] for r in recordstore.freshness_due(db.conn, 10)]
    assert queue[-1] == first["record_id"] and len(queue) == 3, queue
    plan = [row[3] for row in db.execute("explain query plan " + recordstore.NEWEST_CHECKED_SQL)]
    assert plan == ["SEARCH memory_records USING INDEX idx_records_claims_due"], plan  # max(): one seek
    db.conn.close()


# --- the contract (part 5) ------------------------------------------------------------------------


@needs_git
def test_marks_in_json_mcp_export_and_import(repo, tmp_path, home):
    s = "sess-" + uuid.uuid4().hex[:6]
    kiro_turn(repo, s + "a", "write the contract module", [write_tool(repo, "src/contract.py", module("ct"))])
    kiro_turn(
        repo,
        s + "b",
        "run the contract check",
        [("execute_bash", {"command": "make contract"}, "Output:\nError: contract broken\nExit Code: 2")],
    )
    drain()
    (repo / "src" / "contract.py").unlink()
    drain()
    listed = {r["title"]: r for r in records()}
    assert listed["write the contract module"]["freshness"] == "deleted"
    assert listed["run the contract check"]["outcome"] == "failed"
    found = json.loads(cli("search", "contract", "--json", "--project", str(repo)).stdout)
    hits = found["results"] if isinstance(found, dict) else found
    assert {(h["freshness"], h["outcome"]) for h in hits} >= {("deleted", "succeeded"), ("current", "failed")}
    exported = cli("export")
    lines = [json.loads(x) for x in exported.stdout.splitlines() if x.strip()]
    recs = [x for x in lines if x["type"] == "record"]
    assert {(r["freshness"], r["outcome"]) for r in recs} == {("deleted", "succeeded"), ("current", "failed")}
    # import into an empty home keeps both marks
    other = tmp_path / "other-home"
    path = tmp_path / "export.jsonl"
    path.write_text(exported.stdout)
    env = {**hook_env(), "KIROLEARN_HOME": str(other)}
    from conftest import KIROLEARN

    done = subprocess.run([KIROLEARN, "import", str(path)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    again = subprocess.run(
        [KIROLEARN, "list", "--json", "--all-projects"], env=env, capture_output=True, text=True
    )
    got = json.loads(again.stdout)
    got = got["records"] if isinstance(got, dict) else got
    assert {(r["freshness"], r["outcome"]) for r in got} == {("deleted", "succeeded"), ("current", "failed")}


def test_migration_starts_old_records_unknown_and_current(tmp_path):
    import sqlite_utils

    from kirolearn.store.sqlite.migrations import migrations

    db = sqlite_utils.Database(str(tmp_path / "old.db"))
    for m in migrations._migrations:
        if m.name == "m020_record_freshness_outcome":
            break
        m.fn(db)
    db["memory_records"].insert(
        {
            "record_id": "mr_old",
            "project_id": "p",
            "title": "t",
            "summary": "s",
            "observation_type": "discovery",
            "strategy": "x",
            "created_at": "2024-01-01T00:00:00.000Z",
            "record_hash": "h",
        }
    )
    next(m for m in migrations._migrations if m.name == "m020_record_freshness_outcome").fn(db)
    row = db.execute("select outcome, freshness, file_state from memory_records").fetchone()
    assert row == ("unknown", "current", None)


def test_edit_undoes_an_outcome_mark_with_its_history(repo):
    kiro_turn(
        repo,
        "sess-undo",
        "run the flaky check",
        [("execute_bash", {"command": "make flaky"}, "Output:\nError: timeout\nExit Code: 1")],
    )
    drain()
    record = by_title("flaky check")[0]
    assert record["outcome"] == "failed"
    done = cli(
        "edit", record["record_id"], "--outcome", "succeeded", "--reason", "it was the network", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "succeeded"
    history = json.loads(cli("show", record["record_id"], "--json").stdout)["history"]
    mark = [h for h in history if h["action"] == "mark"][-1]
    assert mark["reason"] == "it was the network" and mark["actor"] == "cli"
