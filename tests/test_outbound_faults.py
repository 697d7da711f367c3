"""The smaller faults of issue 23, each through the real command.

a. a moved home keeps its database guard (state/store.json is keyed by the home's id);
b. `kirolearn export -o FILE` creates FILE 0600 under umask 000;
c. logs/mcp.log keeps nothing of a malformed MCP request, and the request gets a JSON-RPC error with its id;
d. quarantining a hard link leaves its outside target's mode alone;
e. `repair` recovers every row when only the 100-byte SQLite header was overwritten;
f. with stdout closed, the hook does not say "nothing recorded" for an event it recorded.
"""

import json
import os
import select
import shutil
import subprocess
import time

import pytest
from conftest import BIN, assert_one_error, hook_env, kl, ready, run_hook, spool_events, stored_ids

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8vN3kTp1"


# --- a. a moved home -----------------------------------------------------------------------------------------


def _moved(tmp_path, home, project, monkeypatch, legacy=False):
    """Drain 3 events in `home`, move the home, empty its database there; returns the new home."""
    spool_events(project, 3)
    assert kl("drain").returncode == 0
    marker = json.loads((home / "state" / "store.json").read_text())
    assert (
        marker["home_id"] == (home / "state" / "home_id").read_text().strip()
        and marker["db"] == "kirolearn.db"
    )
    if legacy:  # a marker written before home ids
        (home / "state" / "store.json").write_text(
            json.dumps({k: v for k, v in marker.items() if k not in ("home_id", "db")})
        )
        (home / "state" / "home_id").unlink()
    moved = tmp_path / "moved home"
    shutil.move(str(home), str(moved))
    (moved / "kirolearn.db").write_bytes(b"")  # what a half-finished copy leaves
    for suffix in ("-wal", "-shm"):
        if (moved / f"kirolearn.db{suffix}").exists():
            (moved / f"kirolearn.db{suffix}").unlink()
    monkeypatch.setenv("KIROLEARN_HOME", str(moved))
    return moved


@pytest.mark.parametrize("legacy", [False, True], ids=["home-id", "marker-from-before-home-ids"])
def test_a_moved_home_with_an_empty_database_is_refused_not_started_afresh(
    tmp_path, home, project, monkeypatch, legacy
):
    moved = _moved(tmp_path, home, project, monkeypatch, legacy=legacy)
    env = hook_env(KIROLEARN_HOME=str(moved))
    assert_one_error(kl("drain", env=env), "empty (0 bytes)", "kirolearn repair")
    assert_one_error(kl("status", env=env), "empty (0 bytes)")
    assert (moved / "kirolearn.db").stat().st_size == 0  # nothing started over it
    repaired = kl("repair", "--json", env=env)
    report = json.loads(repaired.stdout)
    assert report["state_before"] == "lost" and report["rebuilt"]
    # the empty file held nothing to read back, but spool/done/ kept the 3 events drained into it
    assert report["requeued"] == 3 and report["events"] == 3 and report["lost_events"] == 0
    assert report["repaired"] and repaired.returncode == 0
    marker = json.loads((moved / "state" / "store.json").read_text())
    assert marker["path"] == str(moved / "kirolearn.db") and marker["home_id"]


def test_the_guard_is_still_keyed_to_this_home_in_place(home, project):
    spool_events(project, 2)
    assert kl("drain").returncode == 0
    (home / "kirolearn.db").write_bytes(b"")
    assert_one_error(kl("drain"), "empty (0 bytes)")


# --- b. export -o under umask 000 ----------------------------------------------------------------------------


def test_export_to_a_file_creates_it_0600_under_umask_000(home, project, tmp_path):
    spool_events(project, 2)
    assert kl("drain").returncode == 0
    out = tmp_path / "backup.jsonl"
    done = kl("export", "-o", str(out), preexec_fn=lambda: os.umask(0))
    assert done.returncode == 0, done.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sum(1 for line in lines if line["type"] == "event") == 2
    missing = kl("export", "-o", str(tmp_path / "no such dir" / "x.jsonl"))
    assert missing.returncode != 0 and "no such dir" in missing.stderr and "Traceback" not in missing.stderr


# --- c. malformed MCP requests -------------------------------------------------------------------------------


class Stdio:
    """kirolearn-mcp as Kiro starts it, spoken to line by line."""

    def __init__(self, project):
        self.proc = subprocess.Popen(
            [str(BIN / "kirolearn-mcp"), "--project", str(project)],
            env=hook_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            }
        )
        assert self.reply(0)["result"]["serverInfo"]["name"] == "kirolearn"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def reply(self, request_id, timeout=30.0) -> dict:
        """The next reply carrying `request_id` (other lines, e.g. notifications, are skipped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready_, _, _ = select.select([self.proc.stdout], [], [], deadline - time.monotonic())
            if not ready_:
                break
            line = self.proc.stdout.readline()
            assert line, self.proc.stderr.read().decode()[-2000:]
            message = json.loads(line)
            if message.get("id") == request_id:
                return message
        raise AssertionError(f"no reply to request {request_id!r} within {timeout} s")

    def close(self) -> str:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            self.proc.kill()
        return self.proc.stderr.read().decode()


def test_malformed_mcp_requests_get_an_error_with_their_id_and_leave_no_trace_in_the_log(project, home):
    server = Stdio(project)
    try:
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 41,
                "method": "tools/call",
                "params": f"aws_secret_access_key={AWS_SECRET}",
            }
        )
        assert server.reply(41)["error"]["code"] == -32602
        server.send({"jsonrpc": "2.0", "id": "req-42", "method": 7, "aws_secret_access_key": AWS_SECRET})
        assert server.reply("req-42")["error"]["code"] == -32600
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 43,
                "method": "tools/call",  # valid JSON-RPC, invalid params
                "params": {"name": 5, "arguments": {"aws_secret_access_key": AWS_SECRET}},
            }
        )
        assert server.reply(43)["error"]["code"] == -32602
        server.send(f'not json at all aws_secret_access_key="{AWS_SECRET}"')  # no id to answer
        server.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",  # a notification: no answer owed
                "params": {"requestId": {"k": 1}, "reason": f"x {AWS_SECRET}"},
            }
        )
        server.send({"jsonrpc": "2.0", "id": 44, "method": "tools/list"})
        assert len(server.reply(44)["result"]["tools"]) >= 6  # still serving
    finally:
        stderr = server.close()
    log = (home / "logs" / "mcp.log").read_text()
    assert "malformed MCP message" in log
    for text in (log, stderr):
        for tail in range(8, len(AWS_SECRET) + 1, 4):  # not even the end of the secret
            assert AWS_SECRET[-tail:] not in text, text
        assert "input_value=" not in text or "input_value=[not logged]" in text


def test_log_lines_never_keep_pydantic_quoted_input():
    import logging

    from kirolearn.privacy.logscrub import ScrubbingFormatter

    line = (
        "Failed to validate request: 1 validation error for ClientRequest\n  Input should be a valid "
        f"dictionary [type=dict_type, input_value='aws_secret_access_key=...{AWS_SECRET[-18:]}', "
        "input_type=str]"
    )
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, line, None, None)
    out = ScrubbingFormatter("%(message)s").format(record)
    assert AWS_SECRET[-18:] not in out and "input_value=[not logged], input_type=str]" in out


# --- d. quarantining a hard link -----------------------------------------------------------------------------


def test_quarantining_a_hard_link_leaves_its_outside_target_alone(home, project, tmp_path):
    spool_events(project, 1)  # the spool exists
    outside = tmp_path / "someone else's notes.txt"
    outside.write_text("not an event")
    outside.chmod(0o644)
    os.link(outside, home / "spool" / "ready" / "linked.json")
    done = kl("drain")
    assert done.returncode == 0, done.stderr
    assert outside.stat().st_mode & 0o777 == 0o644 and outside.read_text() == "not an event"
    qdir = home / "spool" / "quarantine"
    assert (qdir / "linked.json").exists() and "hard link" in (qdir / "linked.json.reason").read_text()
    assert ready(home) == []


def test_a_quarantined_plain_file_is_still_made_private(home, project):
    spool_events(project, 1)
    junk = home / "spool" / "ready" / "junk.json"
    junk.write_bytes(b"not json")
    junk.chmod(0o644)
    assert kl("drain").returncode == 0
    assert (home / "spool" / "quarantine" / "junk.json").stat().st_mode & 0o777 == 0o600


# --- e. repair after the header was overwritten --------------------------------------------------------------


def test_repair_recovers_every_row_when_only_the_header_was_overwritten(home, project):
    ids = spool_events(project, 250)
    assert kl("drain").returncode == 0
    with open(home / "kirolearn.db", "r+b") as fh:
        fh.write(os.urandom(100))
    assert_one_error(kl("drain"), "kirolearn repair")
    text = kl("repair")
    assert text.returncode == 0, text.stderr
    assert "header" in text.stdout and "250 events" in text.stdout
    assert stored_ids(home) == set(ids)
    assert kl("doctor", "--json").stdout.count('"FAIL"') == 0


def test_repair_report_names_the_rebuilt_header(home, project):
    spool_events(project, 20)
    assert kl("drain").returncode == 0
    with open(home / "kirolearn.db", "r+b") as fh:
        fh.write(b"\0" * 100)
    report = json.loads(kl("repair", "--json").stdout)
    assert report["header_rebuilt"] and report["page_size"] == 4096
    assert report["recovered"]["events"] == 20 and report["lost_events"] == 0


# --- f. the hook with stdout closed --------------------------------------------------------------------------


def test_a_hook_with_stdout_closed_says_the_event_was_recorded(home, project, add_record):
    add_record(
        project, "Cache warmup notes", "the cache warmup reads redis first", observation_type="decision"
    )
    body = {
        "hook_event_name": "userPromptSubmit",
        "cwd": str(project),
        "session_id": "closed",
        "prompt": "how does the cache warmup work?",
    }
    done = subprocess.run(
        [str(BIN / "kirolearn-hook")],
        input=json.dumps(body).encode(),
        env=hook_env(),
        stderr=subprocess.PIPE,
        timeout=30,
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 0
    stderr = done.stderr.decode()
    assert "nothing recorded" not in stderr and "event recorded" in stderr, stderr
    assert len(ready(home)) == 1  # it was recorded
    assert "event recorded" in (home / "logs" / "hook.log").read_text()
    # with stdout open, the same hook prints the memory and says nothing
    again = run_hook(stdin=json.dumps(dict(body, session_id="open")).encode())
    assert again.returncode == 0 and b"Cache warmup" in again.stdout and again.stderr == b""
