"""The store contract suite (tests/store_contract.py) on the embedded SQLite store."""

import shutil

import pytest
import sqlite_utils
from helpers import call
from store_contract import StoreContract

from kirolearn import Memory
from kirolearn.store.backends import open_store
from kirolearn.store.sqlite.store import SqliteStore


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory):
    """One freshly migrated store file, copied for each test (migrating costs ~0.2 s a store)."""
    path = tmp_path_factory.mktemp("template") / "template.db"
    store = SqliteStore(str(path))
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return path


class TestSqliteStore(StoreContract):
    @pytest.fixture(autouse=True)
    def _where(self, tmp_path, migrated_template):
        self.tmp_path, self.template = tmp_path, migrated_template

    def make_store(self, name: str) -> SqliteStore:
        path = self.tmp_path / f"{name}.db"
        shutil.copyfile(self.template, path)
        path.chmod(0o600)
        return open_store(str(path))


def test_nested_writing_is_a_savepoint(tmp_path):
    from kirolearn.store.sqlite import db as store

    db = store.open_db(str(tmp_path / "k.db"), mark=False)
    with store.writing(db):
        db.execute("create table t (x)")
        with pytest.raises(ValueError), store.writing(db):  # the inner block rolls back alone
            db.execute("insert into t values (1)")
            raise ValueError
        db.execute("insert into t values (2)")
    assert [r[0] for r in db.execute("select x from t")] == [2]


def test_an_older_store_s_placeholder_summaries_are_emptied(project):
    from kirolearn.store.sqlite import db as store
    from kirolearn.store.sqlite import migrations

    call(project, "session_end", {"session_id": "s-1", "summary": "Real work done."})
    db = store.open_db()
    placeholder = "Session s-2 ended; no summary was written (auto_compress: provider_unavailable)."
    call(project, "session_end", {"session_id": "s-2", "summary": placeholder})  # as an old version stored it
    db.execute("update session_summaries set auto_compress = 1 where session_id = 's-2'")
    db.execute("delete from _sqlite_migrations where name = 'm014_placeholder_session_summaries'")
    db.conn.commit()
    migrations.migrations.apply(db)
    (row,) = db.query("select summary, record_id from session_summaries where session_id = 's-2'")
    assert row == {"summary": "", "record_id": None}
    assert not Memory().search("no summary was written", project=project)
    init = call(project, "session_init", {}).structuredContent
    assert init["summary"] == "" and init["previous"]["summary"] == "Real work done."


def test_a_damaged_file_names_its_integrity_problem(tmp_path):
    from helpers import corrupt
    from store_contract import event

    path = tmp_path / "k.db"
    store = SqliteStore(str(path))
    store.add_events([dict(event(n), body="x" * 2000) for n in range(400)])
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    corrupt(path)
    damaged = SqliteStore(db=sqlite_utils.Database(str(path)))  # opened as it is: open_db would migrate
    problem = damaged.integrity_problem()
    damaged.close()
    assert isinstance(problem, str) and problem and len(problem) <= 200 and "\n" not in problem


def test_the_extension_keeps_the_hook_s_word_counts_and_the_marker(home, tmp_path):
    from store_contract import record, run_row

    from kirolearn.store import state

    store = SqliteStore(str(tmp_path / "k.db"))
    local = store.extension()
    assert local.db is store.db and local.database_file() == str(tmp_path / "k.db")
    store.commit_extraction(run_row(1), [record(n, title=f"deploy step {n}") for n in range(1000)], [])
    assert local.refresh_term_docs() is True  # 1,000 records: the hook's copy is made
    assert store.db.execute("select docs from term_docs where term = ''").fetchone()[0] == 1000
    assert local.refresh_term_docs() is False  # nothing moved
    assert local.remember_counts(store.counts()) is True
    marker = state.read(state.STORE)
    assert (marker["events"], marker["records"]) == (0, 1000) and marker["counted_at"]
    assert local.remember_counts(store.counts()) is False  # unchanged: the file is not rewritten
    assert state.read(state.STORE)["counted_at"] == marker["counted_at"]
    store.close()


def test_the_drainer_runs_on_any_store(tmp_path):
    from kirolearn import settings
    from kirolearn.pipeline.drain import Drainer
    from kirolearn.store.base import Store

    store = SqliteStore(str(tmp_path / "k.db"))
    drainer = Drainer(store, settings.Settings())
    assert drainer.store is store and drainer.db_path() == str(tmp_path / "k.db")

    remote = type(
        "Remote", (Store,), {"backend": "postgresql", **{name: None for name in Store.__abstractmethods__}}
    )
    other = Drainer(remote(), settings.Settings())  # any Store: what it does not keep, the drainer skips
    assert other.db_path() == "the postgresql store"
    store.close()
