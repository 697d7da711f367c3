"""The team store's sync pass costs the new rows, not the store (issue #32), on a real PostgreSQL.

Plans are read from the server itself: auto_explain on the sync's own connection, sent to the
client as NOTICEs, with sequential scans priced out (enable_seqscan off), so a query that no
index can serve shows a Seq Scan whatever the table's size. The figures at 10k/100k/1M records
are bench/bench_team_scale.py's (`make bench-team-scale`), never a timed test here.
"""

import json
import re

import pytest
from pgserver import pg_database, pg_server, pg_url  # noqa: F401 - fixtures
from store_contract import record

from kirolearn.core import paths
from kirolearn.store.postgres.migrations import MIGRATIONS
from kirolearn.store.sqlite.store import SqliteStore
from kirolearn.team import sync as team_sync

TABLES = {
    "events",
    "memory_records",
    "record_changes",
    "forgotten_records",
    "session_summaries",
    "extraction_runs",
    "record_audit",
}


def rec(n: int, project: str, actor: str, session: str = "s1") -> dict:
    return dict(
        record(n, project=project, session=session, title=f"checkout {actor} {n}"),
        actor=actor,
        record_id=f"mr_{actor}_{project}_{n:04d}",
        source_event_ids=[f"ev_{actor}_{n:04d}"],
        run_id=f"run_{actor}_{n // 10}",
    )


@pytest.fixture
def team(pg_url):
    from kirolearn.store.postgres.store import PostgresStore

    store = PostgresStore(pg_url, migrate=True)
    yield store
    store.close()


@pytest.fixture
def mate(pg_url, team):
    from kirolearn.store.postgres.store import PostgresStore

    store = PostgresStore(pg_url)
    yield store
    store.close()


@pytest.fixture
def home(tmp_path):
    with paths.using_home(str(tmp_path / "home")):
        local = SqliteStore(str(tmp_path / "home.db"))
        yield local
        local.close()


class Plans:
    """auto_explain's JSON plans of every statement `store` runs while it is on."""

    def __init__(self, store):
        self.store, self.found = store, []

    def __enter__(self):
        conn = self.store.conn
        conn.add_notice_handler(self._notice)
        for setting in (
            "load 'auto_explain'",
            "set auto_explain.log_min_duration = 0",
            "set auto_explain.log_format = json",
            "set auto_explain.log_level = notice",
            "set client_min_messages = notice",
            "set enable_seqscan = off",
        ):
            conn.execute(setting)
        conn.commit()
        return self

    def _notice(self, diag):
        text = diag.message_primary or ""
        if "plan:" in text:
            doc = json.loads(text.split("plan:", 1)[1])
            if not doc["Query Text"].lstrip().lower().startswith(("set ", "load ")):
                self.found.append(doc)

    def __exit__(self, *exc):
        conn = self.store.conn
        conn.remove_notice_handler(self._notice)
        for setting in (
            "set auto_explain.log_min_duration = -1",
            "set client_min_messages = warning",
            "reset enable_seqscan",
        ):
            conn.execute(setting)
        conn.commit()

    def scans(self) -> "list[tuple[str, str, str]]":
        """(query start, node type, index or table) of every scan of kirolearn's tables."""
        out = []

        def walk(query, node):
            if node.get("Relation Name") in TABLES or node.get("Index Name"):
                out.append((query, node["Node Type"], node.get("Index Name") or node["Relation Name"]))
            for child in node.get("Plans", []):
                walk(query, child)

        for doc in self.found:
            walk(" ".join(doc["Query Text"].split())[:80], doc["Plan"])
        return out


def test_a_sync_pass_finds_its_pending_work_through_indexes(team, mate, home):
    mate.add_records([rec(n, "p1", "ben") for n in range(20)] + [rec(n, "p2", "ben") for n in range(20)])
    first = team_sync.sync(home, team, ["p1"], me="ana")
    assert first.records_received == 20 and not first.error
    mate.add_records([rec(n, "p1", "ben") for n in range(20, 25)])
    home.add_records([rec(n, "p1", "ana") for n in range(5)])
    with Plans(team) as plans:
        stats = team_sync.sync(home, team, ["p1"], me="ana")
        idle = team_sync.sync(home, team, ["p1"], me="ana")
    assert (stats.records_received, stats.records_sent, stats.error) == (5, 5, "")
    assert (idle.records_received, idle.records_sent) == (0, 0)
    scans = plans.scans()
    assert scans, "auto_explain reported no plan"
    assert [s for s in scans if s[1] == "Seq Scan"] == [], "a sync statement no index serves"
    # the feed's page: the project's index range, cut by its Limit (never a sort of the project)
    feed = [doc["Plan"] for doc in plans.found if re.search(r"seq > \$", doc["Query Text"])]
    assert len(feed) >= 3, [doc["Query Text"] for doc in plans.found]
    for plan in feed:
        reads = list(under(plan, "record_changes"))
        assert reads and all(
            parent == "Limit" and index == "idx_record_changes_feed" for parent, index in reads
        ), plan


def under(node: dict, table: str, parent: str = ""):
    """(parent node type, index name) of each scan of `table` in a plan."""
    if node.get("Relation Name") == table:
        yield parent, node.get("Index Name")
    for child in node.get("Plans", []):
        yield from under(child, table, node["Node Type"])


def test_a_purge_finds_the_events_and_runs_still_cited_through_pg008(team):
    team.add_records([rec(n, "p1", "ana") for n in range(12)])
    team.forget(["mr_ana_p1_0001"], reason="test", actor="ana")
    with Plans(team) as plans:
        assert team.purge(["mr_ana_p1_0001"], actor="ana") == 1
    used = {s[2] for s in plans.scans()}
    assert {"idx_records_source_events", "idx_forgotten_source_events", "idx_records_run"} <= used, used
    assert [s for s in plans.scans() if s[1] == "Seq Scan"] == []


def test_a_purge_keeps_the_events_a_live_record_or_a_kept_tombstone_cites(team):
    from store_contract import event

    team.add_events([dict(event(n), event_id=f"ev{n:04d}") for n in range(1, 5)])
    shared = dict(rec(1, "p1", "ana"), source_event_ids=["ev0001", "ev0002"])
    live = dict(rec(2, "p1", "ana"), source_event_ids=["ev0002"])
    kept = dict(rec(3, "p1", "ana"), source_event_ids=["ev0003"])
    team.add_records([shared, live, kept, dict(rec(4, "p1", "ana"), source_event_ids=["ev0004"])])
    team.forget([kept["record_id"]], reason="kept tombstone", actor="ana")
    team.forget([shared["record_id"], "mr_ana_p1_0004"], reason="test", actor="ana")
    assert team.purge([shared["record_id"], "mr_ana_p1_0004"], actor="ana") == 2
    # ev0001 and ev0004 were cited only by the purged; ev0002 by a live record, ev0003 by a tombstone
    assert team.event_ids_present(["ev0001", "ev0002", "ev0003", "ev0004"]) == {"ev0002", "ev0003"}


def test_pg008_upgrades_a_team_store_made_at_pg007(pg_url, monkeypatch):
    import psycopg

    from kirolearn.store.postgres import store as pgstore

    from kirolearn.core.errors import StoreError
    from kirolearn.store.postgres.migrations import LEDGER
    from kirolearn.store.postgres.store import PostgresStore

    names = [name for name, _ in MIGRATIONS]
    at = names.index("pg007_truth2_record_lists") + 1
    with psycopg.connect(pg_url) as conn:  # the store as pg007's kirolearn left it
        conn.execute(LEDGER)
        for name, ddl in MIGRATIONS[:at]:
            conn.execute(ddl)
            conn.execute("insert into kirolearn_migrations (name) values (%s)", [name])
    with monkeypatch.context() as m:  # pg007's kirolearn knew no later column
        older = tuple(c for c in pgstore.RECORD_COLUMNS if c not in ("claims", "cites", "work_signature", "pinned"))
        m.setattr(pgstore, "RECORD_COLUMNS", older)
        m.setattr(pgstore, "_RECORD_SELECT", ", ".join(f"r.{c}" for c in older))
        with PostgresStore(pg_url, check=False) as old:
            old.add_records([rec(n, "p1", "ana") for n in range(30)])
            old.forget(["mr_ana_p1_0003"], reason="test", actor="ana")
    with pytest.raises(StoreError, match="pg008_scale_indexes"):
        PostgresStore(pg_url)
    with PostgresStore(pg_url, check=False) as store:
        assert store.migrate() == names[at:]
    with PostgresStore(pg_url) as store:
        indexes = {
            r["indexname"]
            for r in store.conn.execute(
                "select indexname from pg_indexes where schemaname = current_schema()"
            ).fetchall()
        }
        assert {
            "idx_records_source_events",
            "idx_records_run",
            "idx_forgotten_source_events",
            "idx_record_changes_feed",
        } <= indexes and "idx_record_changes_project" not in indexes
        assert store.counts()["records"] == 29
        assert len(store.changes(["p1"], limit=100)["records"]) == 29
        assert store.purge(["mr_ana_p1_0003"], actor="ana") == 1


def test_a_sync_after_new_rows_moves_exactly_those_rows(team, mate, home, monkeypatch):
    monkeypatch.setattr(team_sync, "PAGE", 4)  # several pages a pass: no row lost or sent twice at an edge
    mate.add_records([rec(n, p, "ben") for n in range(9) for p in ("p1", "p2")])
    joined = team_sync.sync(home, team, ["p1"], me="ana")
    assert (joined.records_received, joined.records_sent) == (9, 0)
    again = team_sync.sync(home, team, ["p1"], me="ana")  # the 9 that came down: held there already
    assert (again.records_received, again.records_sent) == (0, 0)
    mate.add_records(
        [rec(n, "p1", "ben") for n in range(9, 20)] + [rec(n, "p2", "ben") for n in range(9, 30)]
    )
    home.add_records([rec(n, "p1", "ana") for n in range(7)])
    mate.forget(["mr_ben_p1_0002"], reason="wrong", actor="ben")
    stats = team_sync.sync(home, team, ["p1"], me="ana")
    assert (stats.records_received, stats.records_sent, stats.forgets_received) == (11, 7, 1)
    settled = team_sync.sync(home, team, ["p1"], me="ana")
    assert (settled.records_received, settled.records_sent, settled.forgets_received) == (0, 0, 0)
    held_here = {
        r[0] for r in home.db.execute("select record_id from memory_records where project_id = 'p1'")
    }
    held_there = {r["record_id"] for r in team.list_records(project_id="p1", limit=1000)}
    assert held_here == held_there and len(held_here) == 20 - 1 + 7
    assert not {r for r in held_here if r.startswith("mr_ben_p2")}


def test_the_feed_pages_of_several_projects_hold_each_change_once_in_order(team):
    team.add_records([rec(n, p, "ana") for n in range(15) for p in ("p1", "p2", "p3")])
    team.forget(["mr_ana_p2_0004"], reason="test", actor="ana")
    read, after = [], 0
    while True:
        page = team.changes(["p2", "p1", "p2"], after=after, limit=4)
        if page["after"] == after:
            break
        read += [r["record_id"] for r in page["records"]] + [f"-{t['record_id']}" for t in page["forgotten"]]
        after = page["after"]
    want = [
        r["record_id"]
        for r in team.conn.execute(
            "select record_id from record_changes where project_id in ('p1', 'p2') and change = 'record' "
            "and record_id <> 'mr_ana_p2_0004' order by seq"
        ).fetchall()
    ]
    team.conn.commit()
    assert len(read) == len(set(read)) == 29 + 1  # 29 live records, one tombstone
    assert [r for r in read if not r.startswith("-")] == want and "-mr_ana_p2_0004" in read


@pytest.mark.parametrize("page", [500, 2])  # 2: the overlap spans pages, so it is asked, never trusted
def test_events_in_the_overlap_go_up_once_and_a_late_one_still_goes(team, home, page, monkeypatch):
    from store_contract import event

    monkeypatch.setattr(team_sync, "PAGE", page)

    def ev(n: int, second: int) -> dict:
        at = f"2026-11-01T10:00:{second:02d}.000Z"
        return dict(event(n, received=at), event_id=f"ev_ana_{n:04d}", stored_at=at)

    home.add_events([ev(n, 10 + n) for n in range(5)])
    assert team_sync.sync(home, team, ["p1"], me="ana").events_sent == 5
    with Plans(team) as plans:
        idle = team_sync.sync(home, team, ["p1"], me="ana")
    assert idle.events_sent == 0
    asked = [d["Query Text"] for d in plans.found if " events " in d["Query Text"]]
    assert not [q for q in asked if q.lstrip().startswith("insert")], "the overlap was sent again"
    assert page < 5 or not asked, "the overlap was asked again"
    home.add_events([ev(9, 11)])  # a racing drain's event, stored before the cursor, committed after it
    late = team_sync.sync(home, team, ["p1"], me="ana")
    assert late.events_sent == 1
    assert team.event_ids_present([f"ev_ana_{n:04d}" for n in (0, 1, 2, 3, 4, 9)]) == {
        f"ev_ana_{n:04d}" for n in (0, 1, 2, 3, 4, 9)
    }
