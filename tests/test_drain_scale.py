"""Every pass costs the new work, not the store (issue #32): the integrity check at a bounded rate,
pending work found through indexes, backfills that resume after a kill."""

import json
import os
import signal
import subprocess
import sys

import pytest

from kirolearn import settings
from kirolearn.capture import events, spool
from kirolearn.pipeline import drain
from kirolearn.store import state
from kirolearn.store.sqlite import db as store

from conftest import hook_env


def spool_turn(project, session, n):
    for name, payload in (("userPromptSubmit", {"prompt": f"task {session} {n}"}),
                          ("postToolUse", {"tool_name": "shell", "tool_input": {"command": f"make {n}"},
                                           "tool_response": "ok"}),
                          ("stop", {"assistant_response": f"done {session} {n}"})):
        event = events.build_event(name, {"cwd": str(project), "session_id": session, **payload})
        spool.append(event["event_id"], events.serialize(event))


def quick_checks(db) -> list:
    """The quick_check statements run on this connection from now on (a sqlite3 trace callback)."""
    seen = []
    db.conn.set_trace_callback(lambda sql: seen.append(sql) if sql.lower().startswith("pragma quick_check") else None)
    return seen


def one_pass(conf, project, n, left=0):
    """A drain as one `kirolearn drain` process runs it: a new drainer over the store, one pass."""
    db = store.open_db()
    seen = quick_checks(db)
    spool_turn(project, "s", n)
    drainer = drain.Drainer(db, conf)
    stats = drainer.run_once()
    db.conn.close()
    assert stats.stored == 3 and stats.released == 3 + left
    return len(seen)


@pytest.fixture
def conf(write_config, new_store):
    write_config('[embeddings]\nmodel = "none"\n')
    new_store().conn.close()
    return settings.load()


def test_quick_check_runs_once_then_only_when_due(conf, project, monkeypatch):
    monkeypatch.setattr(drain, "CHECK_EVERY_PASSES", 3)
    # a new store is checked once (never checked), then not again until 3 passes took events in
    assert [one_pass(conf, project, n) for n in range(6)] == [1, 0, 0, 1, 0, 0]
    schedule = state.read(state.CHECK)
    assert schedule["passes"] == 3 and schedule["open"] is False and schedule["checked_at"]


def test_quick_check_is_due_after_hours(conf, project, monkeypatch):
    assert one_pass(conf, project, 0) == 1
    assert one_pass(conf, project, 1) == 0
    schedule = state.read(state.CHECK)
    state.write(state.CHECK, dict(schedule, checked_at="2020-01-01T00:00:00.000Z"))
    assert one_pass(conf, project, 2) == 1
    assert one_pass(conf, project, 3) == 0


def test_watch_passes_never_check_twice(conf, project):
    db = store.open_db()
    seen = quick_checks(db)
    drainer = drain.Drainer(db, conf)
    for n in range(4):
        spool_turn(project, "w", n)
        drainer.run_once()
    drainer.run_once()  # idle
    assert len(seen) == 1 and drainer.checks == 1


DRAINER = r"""
from kirolearn import settings
from kirolearn.pipeline import drain
from kirolearn.store.sqlite import db as store
held = drain.lock()
drain.Drainer(store.open_db(), settings.load()).run_once()
"""


def test_an_unclean_stop_makes_the_next_pass_check_first(conf, project, home):
    assert one_pass(conf, project, 0) == 1
    assert one_pass(conf, project, 1) == 0
    spool_turn(project, "k", 2)
    killed = subprocess.run([sys.executable, "-c", DRAINER], capture_output=True, timeout=120,
                            env=hook_env(KIROLEARN_CRASH_AT="extract-before-commit"))
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    assert state.read(state.CHECK)["open"] is True  # the marker of a pass under way stayed
    assert one_pass(conf, project, 3, left=3) == 1  # checked before it took anything in
    assert one_pass(conf, project, 4) == 0
    db = store.open_db()
    assert db.execute("select count(*) from events").fetchone()[0] == 15  # nothing lost, nothing twice
    assert db.execute("select count(*) from events where extract_state = 'pending'").fetchone()[0] == 0


def test_a_replaced_database_file_is_checked(conf, project, home):
    assert one_pass(conf, project, 0) == 1
    path = home / "kirolearn.db"
    db = store.open_db()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.conn.close()
    copy = home / "copy.db"
    copy.write_bytes(path.read_bytes())
    os.replace(copy, path)  # a new inode, as `kirolearn repair` leaves it
    assert one_pass(conf, project, 1) == 1
