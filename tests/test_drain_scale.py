"""Every pass costs the new work, not the store (issue #32): the integrity check at a bounded rate,
pending work found through indexes, backfills that resume after a kill."""

import os
import signal
import subprocess
import sys

import pytest
from conftest import as_store, hook_env

from kirolearn import settings
from kirolearn.capture import events, spool
from kirolearn.pipeline import drain
from kirolearn.store import state
from kirolearn.store.sqlite import db as store


def spool_turn(project, session, n):
    for name, payload in (
        ("userPromptSubmit", {"prompt": f"task {session} {n}"}),
        (
            "postToolUse",
            {"tool_name": "shell", "tool_input": {"command": f"make {n}"}, "tool_response": "ok"},
        ),
        ("stop", {"assistant_response": f"done {session} {n}"}),
    ):
        event = events.build_event(name, {"cwd": str(project), "session_id": session, **payload})
        spool.append(event["event_id"], events.serialize(event))


def quick_checks(db) -> list:
    """The quick_check statements run on this connection from now on (a sqlite3 trace callback)."""
    seen = []
    db.conn.set_trace_callback(
        lambda sql: seen.append(sql) if sql.lower().startswith("pragma quick_check") else None
    )
    return seen


def one_pass(conf, project, n, left=0):
    """A drain as one `kirolearn drain` process runs it: a new drainer over the store, one pass."""
    db = store.open_db()
    seen = quick_checks(db)
    spool_turn(project, "s", n)
    drainer = drain.Drainer(as_store(db), conf)
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
    drainer = drain.Drainer(as_store(db), conf)
    for n in range(4):
        spool_turn(project, "w", n)
        drainer.run_once()
    drainer.run_once()  # idle
    assert len(seen) == 1 and drainer.checks == 1


DRAINER = r"""
from kirolearn import settings
from kirolearn.pipeline import drain
from kirolearn.store.sqlite import db as store
from kirolearn.store.sqlite.store import SqliteStore
held = drain.lock()
drain.Drainer(SqliteStore(db=store.open_db()), settings.load()).run_once()
"""


def test_an_unclean_stop_makes_the_next_pass_check_first(conf, project, home):
    assert one_pass(conf, project, 0) == 1
    assert one_pass(conf, project, 1) == 0
    spool_turn(project, "k", 2)
    killed = subprocess.run(
        [sys.executable, "-c", DRAINER],
        capture_output=True,
        timeout=120,
        env=hook_env(KIROLEARN_CRASH_AT="extract-before-commit"),
    )
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


# --- pending work through indexes; killed backfills resume --------------------------------------


def fill_records(sessions: int, per_session: int = 2, start: int = 0, session=None) -> None:
    """Records as extraction writes them, `per_session` to a session, through the store contract."""
    from kirolearn.store.sqlite.store import SqliteStore

    with SqliteStore() as st:
        st.add_records(
            [
                {
                    "record_id": f"mr_{start + i:08d}",
                    "project_id": "p0" if session else f"p{(start + i) // per_session % 3}",
                    "project_root": "/src/p",
                    "session_id": session or f"s{(start + i) // per_session}",
                    "title": f"turn {start + i} about exports",
                    "summary": f"did thing {start + i}",
                    "facts": [],
                    "concepts": [],
                    "files_touched": [],
                    "observation_type": "tool_use",
                    "strategy": "test",
                    "source_event_ids": [],
                    "created_at": "2026-11-01T10:00:00.000Z",
                }
                for i in range(sessions * per_session)
            ]
        )


def plans(db, run) -> "dict[str, list[str]]":
    """The query plan of every statement `run()` makes on this connection (EXPLAIN QUERY PLAN)."""
    statements = []
    db.conn.set_trace_callback(
        lambda sql: statements.append(sql) if sql.lstrip().lower().startswith("select") else None
    )
    run()
    db.conn.set_trace_callback(None)
    return {
        sql: [row[3] for row in db.conn.execute("EXPLAIN QUERY PLAN " + sql)]
        for sql in dict.fromkeys(statements)
    }


PENDING_INDEXES = ("idx_records_expansion_pending", "idx_vectors_before_parts")


def test_retention_reads_only_the_expired_events(new_store):
    db = new_store()
    statements = []
    db.conn.set_trace_callback(statements.append)
    store.expire_events(db, "2026-01-01T00:00:00.000Z")
    db.conn.set_trace_callback(None)
    delete = next(sql for sql in statements if sql.lstrip().lower().startswith("delete"))
    plan = [row[3] for row in db.execute("EXPLAIN QUERY PLAN " + delete)]
    assert plan == ["SEARCH events USING INDEX idx_events_expiry (received_at<?)"]


def test_pending_work_queries_read_their_indexes_not_every_record(new_store):
    from kirolearn.store.sqlite.derived import SqliteDerived

    new_store().conn.close()
    fill_records(20)
    db = store.open_db()
    derived = SqliteDerived(db)

    def work():
        derived.sessions_needing_expansion()
        derived.vectors_to_embed("test/m", 10)  # starts the model's progress: a backfill
        derived.save_vectors([], {"model_id": "test/m", "feed_seq": 0, "backfill_after": None})
        derived.vectors_to_embed("test/m", 10)  # the feed
        derived.vectors_to_embed("test/m", 10, before_parts=True)
        derived.count_to_embed("test/m")
        derived.count_to_embed("test/m", before_parts=True)
        derived.session_records("p0", "s1", 5, context=4)

    found = plans(db, work)
    assert any("idx_records_expansion_pending" in " ".join(p) for p in found.values())
    assert any("idx_vectors_before_parts" in " ".join(p) for p in found.values())
    for sql, plan in found.items():
        for step in plan:
            if step.startswith("SCAN") and "vectors_stale" not in sql.split(" where ")[0].split(" from ")[-1]:
                # a scan only of a pending-work index (or of the pending queue, vectors_stale, itself)
                assert any(name in step for name in PENDING_INDEXES) or step.startswith("SCAN s"), (sql, plan)


EMBEDDER = r"""
import sys
import numpy as np
from kirolearn.recall import semantic
from kirolearn.recall.embeddings.base import EmbeddingModel
from kirolearn.store.sqlite import db as store
from kirolearn.store.sqlite.store import SqliteStore

class Counting(EmbeddingModel):
    model_id, dimensions, batch_size = "test/counting", 3, 64

    def _embed(self, texts):
        for t in texts:
            print(t.split()[1], flush=True)  # the record's number: which records were embedded
        return [[len(t), 1.0, 0.0] for t in texts]

db = store.open_db()
if sys.argv[1] == "vectors":
    semantic.index_pending(SqliteStore(db=db), Counting(), batch=10)
else:
    print(semantic.enrich_pending(SqliteStore(db=db)))
"""


def embedder(what, crash_at=None):
    env = hook_env(**({"KIROLEARN_CRASH_AT": crash_at} if crash_at else {}))
    return subprocess.run(
        [sys.executable, "-c", EMBEDDER, what], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_killed_vector_backfill_resumes_without_redoing_or_losing_work(new_store):
    new_store().conn.close()
    fill_records(25)  # 50 records
    killed = embedder("vectors", "embed-after-batch:2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    first = killed.stdout.split()
    assert len(first) == 20  # two batches of 10 committed, then the kill
    fill_records(5, start=50)  # written meanwhile: the change feed brings them
    resumed = embedder("vectors")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    second = resumed.stdout.split()
    assert not set(first) & set(second)  # nothing embedded twice
    assert sorted(map(int, first + second)) == list(range(60))  # nothing lost
    assert second[:10] == [str(n) for n in range(50, 60)]  # new records first, then the backfill
    assert embedder("vectors").stdout == ""  # done: a pass finds nothing more
    db = store.open_db()
    assert db.execute("select count(*) from record_vectors").fetchone()[0] == 60


def test_a_changed_record_gets_its_vector_again(new_store):
    from kirolearn.manage import records as manage

    new_store().conn.close()
    fill_records(3)
    assert len(embedder("vectors").stdout.split()) == 6
    manage.edit("mr_00000004", title="turn 4 about imports now", actor="test")
    again = embedder("vectors").stdout.split()
    assert again == ["4"]


def test_a_killed_expansion_backfill_resumes_without_redoing_or_losing_work(new_store):
    new_store().conn.close()
    fill_records(700, per_session=2)  # 700 sessions: two batches of pending sessions (500 a batch)
    killed = embedder("expansion", "expand-after-batch:1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    db = store.open_db()
    done = db.execute("select count(*) from memory_records where expansion is not null").fetchone()[0]
    assert done == 1000  # the first batch of 500 sessions committed
    db.conn.close()
    resumed = embedder("expansion")
    assert resumed.returncode == 0 and int(resumed.stdout) == 400  # only what was left
    db = store.open_db()
    assert db.execute("select count(*) from memory_records where expansion is null").fetchone()[0] == 0
    fill_records(1, per_session=10, start=2000, session="long")
    assert embedder("expansion").stdout.strip() == "10"
    fill_records(1, per_session=1, start=2010, session="long")  # one more turn of a long session
    assert embedder("expansion").stdout.strip() == "3"  # it and the two before it, whose neighbours changed
    db = store.open_db()
    from kirolearn.recall import semantic

    whole = semantic.expansions_for(semantic.derived_of(as_store(db)).session_records("p0", "long"))
    assert whole and all(
        db.execute("select expansion from memory_records where record_id = ?", [rid]).fetchone()[0] == text
        for rid, text in whole.items()
    )  # as if the whole session were derived
