"""The store contract suite (tests/store_contract.py) on the embedded SQLite store."""

import shutil

import pytest

from kirolearn import Memory
from kirolearn.store.backends import open_store
from kirolearn.store.sqlite_store import SqliteStore
from store_contract import StoreContract
from test_mcp import call


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
    from kirolearn.store import sqlite as store

    db = store.open_db(str(tmp_path / "k.db"), mark=False)
    with store.writing(db):
        db.execute("create table t (x)")
        with pytest.raises(ValueError), store.writing(db):  # the inner block rolls back alone
            db.execute("insert into t values (1)")
            raise ValueError
        db.execute("insert into t values (2)")
    assert [r[0] for r in db.execute("select x from t")] == [2]


def test_an_older_store_s_placeholder_summaries_are_emptied(project):
    from kirolearn.store import migrations
    from kirolearn.store import sqlite as store

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
