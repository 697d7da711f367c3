"""The spool is the write-ahead log: a drained file waits in spool/done/ until a check begun after its
commit found the database sound, so a database damaged after a drain loses none of the events drained
into it (the real `kirolearn` and `kirolearn-hook` console scripts, a real file damaged by plain writes)."""

import json
import os
import random
import sqlite3
import time
from pathlib import Path

from conftest import assert_one_error, hook_env, kl, ready, run_hook, stored_ids
from helpers import corrupt

from kirolearn.pipeline import drain


def hook_events(project, n, session):
    """`n` postToolUse events through the real hook; returns their event ids."""
    home = Path(os.environ["KIROLEARN_HOME"])
    before = set(ready(home))
    for i in range(n):
        payload = {
            "hook_event_name": "postToolUse",
            "session_id": session,
            "cwd": str(project),
            "tool_name": "shell",
            "tool_input": {"command": f"echo {session} {i}"},
            "tool_response": f"{session} output {i} " + "y" * 400,
        }
        assert run_hook([], json.dumps(payload).encode(), cwd=str(project)).returncode == 0
    return sorted(n[:-5] for n in set(ready(home)) - before)


def done_ids(home):
    base = home / "spool" / "done"
    lines = [line for p in base.glob("*/events.jsonl") for line in p.read_text("utf-8").splitlines()]
    return {json.loads(line)["event_id"] for line in lines if line.strip()}


def kept(home):
    """Every event id the spool holds: waiting in ready/ or kept in done/."""
    return {n[:-5] for n in ready(home)} | done_ids(home)


def later(seconds):
    """The environment of a command run `seconds` from now (the tests' clock, KIROLEARN_NOW)."""
    return hook_env(KIROLEARN_NOW=str(time.time() + seconds))


def test_a_drained_file_is_kept_private_until_a_later_check_and_its_retention(home, project, filled):
    assert kl("drain").returncode == 0  # checks the copied file (never checked here) and passes
    ids = hook_events(project, 3, "keep")
    assert kl("drain").returncode == 0
    assert ready(home) == [] and done_ids(home) == set(ids) and set(ids) <= stored_ids(home)
    done = home / "spool" / "done"
    assert all(os.stat(p).st_mode & 0o777 == 0o700 for p in [done, *done.iterdir()])
    assert all(os.stat(p).st_mode & 0o777 == 0o600 for p in done.glob("*/events.jsonl"))
    shown = kl("status")
    assert "0 events waiting" in shown.stdout and "3 drained, kept in spool/done/" in shown.stdout
    # a check 2 h later passes, but 24 h have not gone by: kept
    assert kl("drain", env=later(2 * 3600)).returncode == 0
    assert done_ids(home) == set(ids)
    # 25 h later a check is due again, passes, and the folder is older than the retention: removed
    assert kl("drain", env=later(25 * 3600)).returncode == 0
    assert done_ids(home) == set() and set(ids) <= stored_ids(home)


def test_garbage_in_middle_pages_loses_no_event_drained_after_it(home, project, filled):
    assert kl("drain").returncode == 0  # a sound file, checked: the next check is an hour away
    corrupt(home / "kirolearn.db")
    new = hook_events(project, 5, "after")
    first = kl("drain")  # the check is not due: SQLite may not notice pages it does not read
    assert set(new) <= kept(home), first.stderr  # whatever it did, the spool still holds them
    checked = kl("drain", env=later(2 * 3600))  # the check is due: it finds the damage
    assert first.returncode != 0 or checked.returncode != 0
    failed = checked if checked.returncode else first
    assert_one_error(failed, "damaged", "kirolearn repair", "spool/done/")
    assert set(new) <= kept(home)
    repaired = kl("repair", "--json")
    assert repaired.returncode == 0, repaired.stderr
    report = json.loads(repaired.stdout)
    assert report["repaired"] and set(new) <= stored_ids(home)
    assert kl("drain", env=later(3 * 3600)).returncode == 0  # sound again
    assert ready(home) == []


def test_an_sqlite_error_in_a_pass_checks_at_once_and_keeps_the_spool(home, project, filled):
    assert kl("drain").returncode == 0  # checked: no check is due for an hour
    path = home / "kirolearn.db"
    conn = sqlite3.connect(path)
    root = conn.execute("select rootpage from sqlite_master where name = 'events'").fetchone()[0]
    page_size = conn.execute("pragma page_size").fetchone()[0]
    conn.close()
    with open(path, "r+b") as fh:  # garbage over the page every insert into events reads
        fh.seek((root - 1) * page_size)
        fh.write(random.Random(5).randbytes(page_size))
    new = hook_events(project, 5, "root")
    assert_one_error(kl("drain"), "damaged", "spool files of this drain are kept", "kirolearn repair")
    assert {n[:-5] for n in ready(home)} == set(new)
    from kirolearn.store import state

    assert state.read(state.CHECK)["suspect"]  # and the next pass checks before it ingests
    assert_one_error(kl("drain"), "damaged", "nothing was ingested")
    assert kl("repair").returncode == 0 and set(new) <= stored_ids(home)


def test_a_destroyed_first_page_loses_no_event_drained_before_or_after_it(home, project, filled):
    assert kl("drain").returncode == 0
    before = hook_events(project, 4, "before")
    assert kl("drain").returncode == 0 and done_ids(home) == set(before)
    with open(home / "kirolearn.db", "r+b") as fh:  # the header and the schema
        fh.write(random.Random(3).randbytes(4096))
    after = hook_events(project, 3, "after")
    assert_one_error(kl("drain"), "damaged", "kirolearn repair")
    assert {n[:-5] for n in ready(home)} == set(after) and done_ids(home) == set(before)
    repaired = kl("repair", "--json")
    report = json.loads(repaired.stdout)
    assert report["requeued"] == len(before), repaired.stdout
    assert set(before) | set(after) <= stored_ids(home)  # page 1 lost the old rows, never these
    assert report["lost_events"] == 200  # the 200 the file held before: only the backups keep them


def test_an_error_in_a_pass_makes_the_next_pass_check_first(home, project, filled):
    assert kl("drain").returncode == 0
    from kirolearn.store import state

    checked = state.read(state.CHECK)["checked_at"]
    state.write(state.CHECK, dict(state.read(state.CHECK), suspect="OperationalError"))
    schedule = state.read(state.CHECK)
    assert "earlier pass failed" in (drain.Drainer.check_due(_drainer_for(schedule), schedule) or "")
    assert kl("drain").returncode == 0  # checked again (sound), and the mark is gone
    after = state.read(state.CHECK)
    assert not after.get("suspect") and after["checked_at"] >= checked


class _drainer_for:
    """Just what check_due reads of a Drainer."""

    def __init__(self, schedule):
        self._open = False


def test_a_check_stamped_by_a_clock_ahead_does_not_silence_the_next_ones(home, project, filled):
    assert kl("drain", env=later(31 * 86400)).returncode == 0  # checked, stamped 31 days ahead
    from kirolearn.store import state

    schedule = state.read(state.CHECK)
    assert (
        drain.Drainer.check_due(_drainer_for(schedule), schedule) == "the last check's time is in the future"
    )
