"""The store contract suite (tests/store_contract.py) on a real PostgreSQL server, and what only it does.

The server is tests/pgserver.py's throw-away cluster (a Unix socket in a temp folder); without
PostgreSQL or psycopg these tests skip with the reason, except in CI (KIROLEARN_REQUIRE_POSTGRES=1).
Each store lives in its own schema of the module's database (the URL's `options` set search_path),
migrated from scratch: a fresh, empty store costs a CREATE SCHEMA and the DDL, not a database.
"""

import itertools
import json
import time

import pytest
from helpers import schema_url
from pgserver import pg_database, pg_server  # noqa: F401 - fixtures
from store_contract import T0, StoreContract, event, record

from kirolearn.core.errors import KirolearnError, SchemaTooNew, StoreError
from kirolearn.store.backends import open_store

_schemas = itertools.count(1)


@pytest.fixture
def new_schema(pg_database):
    """A factory of empty schemas in the module's database: returns a URL that uses one."""
    import psycopg

    made = []

    def make(label: str = "s") -> str:
        name = f"{label}_{next(_schemas)}"
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute(f'create schema "{name}"')
        made.append(name)
        return schema_url(pg_database, name)

    yield make
    if made:
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute("drop schema " + ", ".join(f'"{n}"' for n in made) + " cascade")


class TestPostgresStore(StoreContract):
    """Stores by name ("main", "copy") are schemas migrated once per module and emptied for each
    test (DELETE of a few rows, where a new schema and its DDL cost ~80 ms)."""

    schemas: "dict[str, str]" = {}

    @pytest.fixture(autouse=True)
    def _where(self, pg_database):
        if getattr(self, "_database", None) != pg_database:
            TestPostgresStore.schemas, TestPostgresStore._database = {}, pg_database
        self.database = pg_database

    def make_store(self, name: str):
        from kirolearn.store.postgres.store import PostgresStore

        url = self.schemas.get(name)
        if url is None:
            import psycopg

            schema = f"contract_{name}"
            with psycopg.connect(self.database, autocommit=True) as conn:
                conn.execute(f'drop schema if exists "{schema}" cascade')
                conn.execute(f'create schema "{schema}"')
            url = self.schemas[name] = schema_url(self.database, schema)
            return PostgresStore(url, migrate=True)
        store = PostgresStore(url)
        tables = store.conn.execute(
            "select table_name from information_schema.tables where table_schema = "
            "current_schema() and table_type = 'BASE TABLE' "
            "and table_name != 'kirolearn_migrations'"
        ).fetchall()
        for row in tables:  # a few rows each: cheaper than TRUNCATE's new files
            store.conn.execute(f'delete from "{row["table_name"]}"')
        store.conn.commit()
        return store


# --- what the PostgreSQL store does beyond the contract ---------------------------------------------


def test_open_store_routes_a_postgresql_url(new_schema):
    url = new_schema()
    with pytest.raises(StoreError, match="kirolearn migrate"):  # a fresh schema is not used until migrated
        open_store(url)
    from kirolearn.store.postgres.store import PostgresStore

    PostgresStore(url, migrate=True).close()
    with open_store(url) as store:
        assert store.backend == "postgresql"
        assert store.schema()["pending"] == []


def test_a_newer_schema_is_refused(new_schema):
    from kirolearn.store.postgres.store import PostgresStore

    url = new_schema()
    with PostgresStore(url, migrate=True) as store:
        store.conn.execute("insert into kirolearn_migrations (name) values ('pg999_from_the_future')")
        store.conn.commit()
    with pytest.raises(SchemaTooNew, match="pg999_from_the_future"):
        PostgresStore(url)


def test_two_stores_migrating_at_once_apply_each_migration_once(new_schema):
    import threading

    from kirolearn.store.postgres.store import PostgresStore

    url = new_schema()
    applied, errors = [], []

    def one():
        try:
            with PostgresStore(url, check=False) as store:
                applied.append(store.migrate())
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == [] and len(applied) == 3
    from kirolearn.store.postgres.migrations import MIGRATIONS

    assert sorted(applied, key=len) == [[], [], [name for name, _ in MIGRATIONS]]


def test_the_search_column_weighs_fields_by_class(new_schema):
    from kirolearn.store.postgres.store import RANK_WEIGHTS, PostgresStore

    assert RANK_WEIGHTS[3] == 1.0 and RANK_WEIGHTS[0] < RANK_WEIGHTS[1] < RANK_WEIGHTS[2] < RANK_WEIGHTS[3]
    with PostgresStore(new_schema(), migrate=True) as store:
        store.commit_extraction(
            {
                "run_id": "r1",
                "batch_key": "b",
                "extractor": "deterministic",
                "outcome": "ok",
                "started_at": T0,
            },
            [
                record(
                    1,
                    title="Title words",
                    summary="summary words",
                    facts=["fact words"],
                    concepts=["concept"],
                    files=["src/app/main.py"],
                )
            ],
            [],
        )
        vector = store.conn.execute("select search::text as v from memory_records").fetchone()["v"]
        store.conn.rollback()
    lexemes = dict(part.split(":", 1) for part in vector.replace("'", "").split(" "))
    # PostgreSQL prints class D (the summary's) without a letter
    assert (lexemes["titl"], lexemes["concept"], lexemes["fact"], lexemes["summari"]) == (
        "1A",
        "3B",
        "8C",
        "10",
    )
    assert lexemes["src"] == "4C" and lexemes["main"] == "6C"  # a path is split into its words


def test_a_forgotten_hash_blocks_a_concurrent_extraction(new_schema):
    """forget holds the advisory lock exclusively: an extraction waits for it, then sees the tombstone."""
    from kirolearn.store.postgres.store import PostgresStore

    url = new_schema()
    rec = record(1, summary="rotate the staging token")
    run = {"run_id": "r1", "batch_key": "b", "extractor": "deterministic", "outcome": "ok", "started_at": T0}
    with PostgresStore(url, migrate=True) as a, PostgresStore(url) as b:
        a.commit_extraction(run, [rec], [])
        with a._tx() as cur:  # forget's transaction, held open while b commits the same memory again
            a._exclusive_forget_lock(cur)
            cur.execute("delete from memory_records where record_id = 'mr_0001'")
            import threading

            result = []
            worker = threading.Thread(
                target=lambda: result.append(
                    b.commit_extraction(dict(run, run_id="r2"), [dict(rec, record_id="mr_again")], [])
                )
            )
            worker.start()
            wait_until_blocked(a, b.conn.info.backend_pid)  # b waits on the lock, it does not write
            cur.execute(
                "insert into forgotten_records (record_id, record_hash, forgotten_at) "
                "select 'mr_0001', %s, %s",
                [_hash(rec), T0],
            )
        worker.join(timeout=30)
        assert result == [0]
        assert b.get_record("mr_again") is None


def wait_until_blocked(store, pid: int, timeout: float = 30.0) -> None:
    """Wait (bounded) until the server says backend `pid` waits on a lock."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(store.url, autocommit=True) as probe:
        while time.monotonic() < deadline:
            row = probe.execute(
                "select wait_event_type from pg_stat_activity where pid = %s", [pid]
            ).fetchone()
            if row and row[0] == "Lock":
                return
            probe.execute("select pg_sleep(0.01)")
    raise AssertionError(f"backend {pid} never waited on the lock")


def _hash(rec: dict) -> str:
    from kirolearn.store.base import record_hash

    return record_hash(rec)


def test_events_keep_their_body_text_exactly(new_schema):
    from kirolearn.store.postgres.store import PostgresStore

    ev = event(1)
    ev["body"] = '{"z": 1, "a": "naïve \\u2713",  "n": [3,2,1]}'  # key order and spacing as written
    with PostgresStore(new_schema(), migrate=True) as store:
        store.add_events([ev])
        (exported,) = [o for o in store.export_objects() if o["type"] == "event"]
    assert exported["body"] == ev["body"]
    assert json.loads(exported["body"])["a"] == "naïve ✓"


def test_an_unknown_column_is_refused_not_dropped(new_schema):
    from kirolearn.store.postgres.store import PostgresStore

    with PostgresStore(new_schema(), migrate=True) as store:
        with pytest.raises(ValueError, match="no column surprise"):
            store.add_events([dict(event(1), surprise="x")])
        assert store.figures(T0)["events"] == 0


def test_capabilities_say_whether_vectors_are_stored(new_schema):
    from kirolearn.store.postgres.store import PostgresStore

    with PostgresStore(new_schema(), migrate=True) as store:
        caps = store.capabilities()
        assert caps["pgvector"] in ("installed", "available", "absent")
        assert caps["vectors"] is False  # no migration stores vectors yet, pgvector or not
        assert caps["server_version"]
        assert store.can_write() == (True, "")
        assert store.figures(T0)["last_drain"] is None  # the write check was rolled back


def test_an_unreachable_server_is_a_store_error_without_the_password(tmp_path):
    from kirolearn.store.postgres.store import PostgresStore

    url = f"postgresql://alice:s3cret-pw@/kl?host={tmp_path}&port=5999"
    with pytest.raises(KirolearnError) as caught:
        PostgresStore(url, connect_timeout=2)
    text = str(caught.value)
    assert "s3cret-pw" not in text and "alice:***@" in text and "PostgreSQL server runs" in text


def test_a_restarted_connection_is_reopened(new_schema, pg_server):
    from kirolearn.store.postgres.store import PostgresStore

    with PostgresStore(new_schema(), migrate=True) as store:
        store.add_events([event(1)])
        pid = store.conn.info.backend_pid
        with pg_server.connect() as admin:
            admin.execute("select pg_terminate_backend(%s)", [pid])
        with pytest.raises(StoreError, match="team store"):
            store.add_events([event(2)])
        assert store.add_events([event(2)]) == 1  # the next call connects again
        assert store.event_ids_present(["ev0001", "ev0002"]) == {"ev0001", "ev0002"}


def test_a_sqlite_store_moves_to_postgresql_and_back_unchanged(new_schema, tmp_path):
    """What the team upload needs: export objects of one backend import into the other as they were."""
    from store_contract import run_row, summary

    from kirolearn.store.postgres.store import PostgresStore
    from kirolearn.store.sqlite.store import SqliteStore

    lite = SqliteStore(str(tmp_path / "local.db"))
    lite.add_events([event(1), event(2, state="done")])
    claim = {
        "file": "x.py",
        "kind": "setting",
        "key": "RETRIES",
        "digest": "s" + "0" * 64,
        "shown": "RETRIES = 3",
    }
    cited = dict(record(2, summary="naïve café ✓"), cites=["mr_0001"], work_signature="w1")
    lite.commit_extraction(
        run_row(1),
        [dict(record(1, facts=["a fact"], concepts=["c"], files=["x.py"]), claims=[claim]), cited],
        ["ev0002"],
    )
    lite.add_session_summary(
        summary(1, next_steps=["next"], record_id="mr_0003"), record(3, kind="session_summary")
    )
    lite.pin("mr_0001", "supersede", "2026-01-02T00:00:00Z")
    exported = list(lite.export_objects())
    first = next(o for o in exported if o.get("record_id") == "mr_0001")
    assert first["claims"] == [claim] and first["pinned"], first
    exported = list(lite.export_objects())
    with PostgresStore(new_schema(), migrate=True) as pg:
        assert pg.import_objects(exported)["records"] == {"added": 3, "present": 0}
        back = list(pg.export_objects())
        assert [{k: o[k] for k in mine} for o, mine in zip(back, exported)] == exported
        assert ids_of(pg.search(["café"])) == ["mr_0002"]
    other = SqliteStore(str(tmp_path / "other.db"))
    other.import_objects(back)
    assert list(other.export_objects()) == exported
    lite.close()
    other.close()


def ids_of(rows) -> "list[str]":
    return [r["record_id"] for r in rows]


def test_the_change_feed_never_skips_a_number_still_in_flight(new_schema):
    """Feed numbers are taken one writing transaction at a time, so a reader that moved past a number
    can never see a lower one commit later (a bare sequence would allow that, and lose the record)."""
    import threading

    from kirolearn.store.postgres.store import PostgresStore

    url = new_schema()
    with PostgresStore(url, migrate=True) as a, PostgresStore(url) as b, PostgresStore(url) as reader:
        with a._tx() as cur:  # a's record takes its number first and stays uncommitted
            from kirolearn.store.postgres.store import RECORD_COLUMNS, _insert_many, _record_row

            _insert_many(cur, "memory_records", RECORD_COLUMNS, [_record_row(record(1))], "record_id")
            worker = threading.Thread(target=lambda: b.add_records([record(2)]))
            worker.start()
            wait_until_blocked(a, b.conn.info.backend_pid)  # b waits: it cannot take a later number yet
            assert reader.changes(["p1"]) == {
                "records": [],
                "forgotten": [],
                "purged": [],
                "marks": [],
                "after": 0,
            }
        worker.join(timeout=30)
        first = reader.changes(["p1"])
        assert ids_of(first["records"]) == ["mr_0001", "mr_0002"]
        assert reader.changes(["p1"], after=first["after"])["records"] == []


def test_concurrent_uploads_store_each_event_and_record_once(new_schema):
    """Four laptops re-sending overlapping pages at once: every event and record lands exactly once."""
    import threading

    from kirolearn.store.postgres.store import PostgresStore

    url = new_schema()
    PostgresStore(url, migrate=True).close()
    pages = [[event(n) for n in range(start, start + 300)] for start in (0, 100, 200, 0)]
    made = [[record(n) for n in range(start, start + 30)] for start in (0, 10, 20, 0)]
    added, errors = [], []

    def upload(events, records):
        try:
            with PostgresStore(url) as store:
                added.append((store.add_events(events), store.add_records(records)))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=upload, args=pair) for pair in zip(pages, made)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and len(added) == 4
    assert sum(a[0] for a in added) == 500 and sum(a[1] for a in added) == 50
    with PostgresStore(url) as store:
        figures = store.figures(T0)
        assert (figures["events"], figures["records"]) == (500, 50)
        feed = store.changes(["p1"], limit=1000)
        assert sorted(ids_of(feed["records"])) == [f"mr_{n:04d}" for n in range(50)]  # each fed once


def test_common_words_are_searched_as_in_sqlite(new_schema):
    """No stop-word list: `about` or `not` finds what SQLite's porter index finds."""
    from kirolearn.store.postgres.store import PostgresStore

    with PostgresStore(new_schema(), migrate=True) as store:
        store.commit_extraction(
            {
                "run_id": "r1",
                "batch_key": "b",
                "extractor": "deterministic",
                "outcome": "ok",
                "started_at": T0,
            },
            [record(1, summary="it is not about the cache"), record(2, summary="cache only")],
            [],
        )
        assert ids_of(store.search(["about"])) == ["mr_0001"]
        assert ids_of(store.search(["not", "about"])) == ["mr_0001"]
