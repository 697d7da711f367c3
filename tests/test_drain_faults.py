"""A drain that cannot finish (a failing step after its commit, a file-size limit, a database lock held
too long, a read-only spool) fails in one `Error:` line, exit status 1, no traceback, and loses no event."""

import json
import os
import resource
import sqlite3
import subprocess
import sys

import pytest
from conftest import (
    KIROLEARN,
    assert_one_error,
    cli,
    hook_env,
    kl,
    read_only_ready,
    ready,
    spool_events,
    stored_ids,
    writable_again,
)


def test_a_failing_step_after_the_commit_never_costs_a_spool_file(home, project, drain_now, monkeypatch):
    from kirolearn.pipeline import drain

    ids = spool_events(project, 30)

    def broken(self):
        raise sqlite3.DatabaseError("database disk image is malformed")

    with monkeypatch.context() as patched:
        patched.setattr(drain.Drainer, "expire_events", broken)
        with pytest.raises(sqlite3.DatabaseError):
            drain_now()
    assert ready(home) == sorted(i + ".json" for i in ids)  # stored, but every file is kept
    stats, _ = drain_now()
    assert (stats.already_stored, stats.stored, stats.released) == (30, 0, 30)
    assert ready(home) == [] and stored_ids(home) == set(ids)


def test_a_drain_under_a_file_size_limit_fails_cleanly_and_loses_nothing(home, project, filled):
    new = spool_events(project, 300, session="big", start=1000)
    limit = os.path.getsize(home / "kirolearn.db") + 16 * 1024

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    assert_one_error(kl("drain", preexec_fn=small_files), "ulimit")
    assert set(new) <= {n[:-5] for n in ready(home)}  # every new event still waits
    assert cli("drain").returncode == 0
    assert set(new) | set(filled) == stored_ids(home) and ready(home) == []


def test_a_database_lock_held_too_long_is_one_error_line(home, project, filled, monkeypatch):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(home / "kirolearn.db")],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        spool_events(project, 3, session="late")
        monkeypatch.setenv("KIROLEARN_BUSY_TIMEOUT", "0.5")
        assert_one_error(kl("drain", env=hook_env()), "busy", "try again")  # a whole process, once
        for command in (["status"], ["drain"], ["export"]):
            assert_one_error(cli(*command), "busy", "try again")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert len(ready(home)) == 3
    monkeypatch.delenv("KIROLEARN_BUSY_TIMEOUT")
    assert cli("drain").returncode == 0 and ready(home) == []


HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA locking_mode=EXCLUSIVE")
conn.execute("BEGIN EXCLUSIVE")
conn.execute("insert into drain_runs (drain_id) values ('lock-holder')")
print("held", flush=True)
sys.stdin.read()  # until the test closes stdin
"""


def test_a_read_only_ready_folder_fails_cleanly_and_loses_nothing(home, project, filled):
    ids = spool_events(project, 4, session="ro")
    prefix = read_only_ready(home)
    result = subprocess.run(
        [*prefix, KIROLEARN, "drain"], env=hook_env(), capture_output=True, text=True, timeout=120
    )
    assert_one_error(result, "cannot move their spool files", "chmod")
    assert ready(home) == sorted(i + ".json" for i in ids)
    writable_again(home)
    again = cli("drain", "--json")
    assert again.returncode == 0, again.stderr
    stats = json.loads(again.stdout)
    assert (stats["already_stored"], stats["stored"], stats["released"]) == (4, 0, 4)
    assert set(ids) <= stored_ids(home)
