"""The store contract suite (tests/store_contract.py) on the embedded SQLite store."""

import shutil

import pytest

from kirolearn.store.backends import open_store
from kirolearn.store.sqlite_store import SqliteStore
from store_contract import StoreContract


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
