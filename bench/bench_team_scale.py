"""The team store at 10k, 100k and 1M records: does a sync pass cost the new rows or the store?

Starts a throw-away PostgreSQL cluster (tests/pgserver.py: a Unix socket, durability off,
shared_buffers 128MB, PostgreSQL's own default) and grows one synthetic team store through the
sizes asked. Each step is filled on the server (`insert … select` from generate_series over the
coding distractors' texts, triggers off, secondary indexes dropped and built again after, the
tsvector computed by the insert): records over 20 projects with a skewed share (project k gets
sqrt((k+1)/20) - sqrt(k/20) of them, 22 % down to 1.3 %) and 10 authors, 3 events each, one
feed row each. Then `kirolearn_migrations`' last migration is applied again on the filled store
(its time: an upgrade of an existing store at that size), VACUUM ANALYZE (as autovacuum would).

At each size, one developer (a fresh KIROLEARN_HOME and SQLite store) joins project p10 (3.5 %
of the store), through kirolearn.team.sync.sync, in process:
- first sync: the project's records come down (linear in them: rows/s);
- the pass after it: the records that came down are in the local feed, so they go up once
  (the team store looks them up by id and inserts none);
- idle pass: nothing new (median of 15; the local events of the sync's 2-minute overlap are
  read again, and neither sent nor asked of the server while the overlap is unchanged);
- new-work pass: a teammate adds 100 records to the team store and the developer 100 locally
  with their 300 events, then one pass (median of 5, each carrying the previous round's 100
  back up, as in steady state);
- team search p50 / p95 (200 queries of 1-3 words, in p10, and across all projects);
- bytes per record: pg_total_relation_size of every kirolearn table (indexes, TOAST) / records.
Each pass reports the client's CPU (time.process_time: sync, psycopg and the SQLite side), its
wall time, the server backend's CPU (/proc/<pid>/stat) and the shared buffers its statements
touched (auto_explain, one extra pass, so its timing overhead stays out of the CPU figures).
Buffers do not drift with the machine's load, so they say best whether a pass grows.

    python bench/bench_team_scale.py [--sizes 10000,100000,1000000] [--plans]

`--plans` prints each statement's plan shape (node and index names) of the idle and
new-work passes at each size. Never fails the build.
"""

import argparse
import json
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from benchtable import pct  # noqa: E402

PROJECTS, AUTHORS, EVENTS_PER_RECORD = 20, 10, 3
JOINED = "p10"
ME = "dev0"
GOAL = 1.5  # growth per 10x, idle and new-work passes (issue #32)
TICK = os.sysconf("SC_CLK_TCK")

# shared by the fill's statements: record g's project, author, session and time
_U = "((hashint4({g}) & 2147483647)::float8 / 2147483648)"
PROJECT = f"'p' || lpad(floor({PROJECTS} * power({_U.format(g='g')}, 2))::int::text, 2, '0')"
AUTHOR = f"'dev' || floor({AUTHORS} * power({_U.format(g='g + 1000003')}, 1.5))::int"
AT = (
    "to_char(timestamptz '2026-01-01 00:00:00+00' + g * interval '7 seconds', "
    '\'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"\')'
)

FILL_RECORDS = f"""
insert into memory_records (record_id, project_id, project_root, session_id, title, summary, facts, concepts,
    files_touched, observation_type, strategy, source_event_ids, run_id, record_hash, created_at, actor, host,
    agent)
select 'mr_' || lpad(g::text, 9, '0'), x.project, '/src/' || x.project, x.project || '_s' || (g / 400),
       t.title || ' #' || g, t.text || ' (turn ' || g || ')', jsonb_build_array(t.fact),
       jsonb_build_array(t.concept), jsonb_build_array('src/mod_' || (g %% 97) || '.py'),
       'tool_use', 'deterministic',
       (select jsonb_agg('ev' || lpad(g::text, 9, '0') || '_' || k) from generate_series(0, {EVENTS_PER_RECORD - 1}) k),
       'run_' || (g / 10), md5('record ' || g), {AT}, x.author, 'laptop-' || x.author, 'kiro'
from generate_series(%(lo)s::int, %(hi)s::int - 1) g
cross join lateral (select {PROJECT} as project, {AUTHOR} as author) x
join bench_texts t on t.i = g %% (select count(*) from bench_texts)
"""

FILL_EVENTS = f"""
insert into events (event_id, content_hash, kind, trigger, hook, generation, surface, session_id, project_id,
    project_root, cwd, received_at, stored_at, actor, host, client_version, body, extract_state, run_id, agent)
select r.source_event_ids ->> k, md5(r.record_id || k), 'tool_use', 'postToolUse', 'postToolUse', 'classic',
       'kiro-cli', r.session_id, r.project_id, r.project_root, r.project_root, r.created_at, r.created_at,
       r.actor, r.host, '1',
       json_build_object('event_id', r.source_event_ids ->> k, 'kind', 'tool_use', 'session_id', r.session_id,
                         'payload', json_build_object('tool_name', 'execute_bash',
                                                      'tool_input', left(r.summary, 120),
                                                      'tool_response', r.title))::text,
       'done', r.run_id, 'kiro'
from memory_records r cross join generate_series(0, {EVENTS_PER_RECORD - 1}) k
where r.record_id >= %(first)s and r.record_id < %(last)s
"""

FILL_FEED = """
insert into record_changes (record_id, project_id, change)
select record_id, project_id, 'record' from memory_records
where record_id >= %(first)s and record_id < %(last)s order by record_id
"""


def rid(g: int) -> str:
    return f"mr_{g:09d}"


def cpu_of(pid: int) -> float:
    """A process's user+system CPU seconds (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


# --- filling ---


def indexes_only(ddl: str) -> bool:
    """True when a migration only creates (or drops, if they exist) indexes: the bench can take it
    off and apply it again."""
    statements = [s.strip().lower() for s in re.sub(r"--[^\n]*", "", ddl).split(";") if s.strip()]
    return bool(statements) and all(
        s.startswith(("create index", "drop index if exists")) for s in statements
    )


def load_texts(conn, texts: "list[str]") -> None:
    conn.execute(
        "create table if not exists bench_texts (i int primary key, text text, title text, fact text, "
        "concept text)"
    )
    conn.execute("truncate bench_texts")
    with conn.cursor().copy("copy bench_texts (i, text, title, fact, concept) from stdin") as copy:
        for i, text in enumerate(texts):
            words = text.split()
            copy.write_row(
                [
                    i,
                    text,
                    " ".join(words[:8]) or f"text {i}",
                    " ".join(words[8:16]),
                    max((w.strip(".,;:()") for w in words), key=len, default="x").lower(),
                ]
            )
    conn.execute("analyze bench_texts")


def secondary_indexes(conn) -> "list[tuple[str, str]]":
    """(name, definition) of every index that backs no constraint, on kirolearn's tables."""
    rows = conn.execute("""
        select i.indexname, i.indexdef from pg_indexes i
        where i.schemaname = current_schema() and i.tablename <> 'bench_texts'
          and not exists (select 1 from pg_constraint c where c.conname = i.indexname)""").fetchall()
    return [(r[0], r[1]) for r in rows]


def fill(conn, lo: int, hi: int, last_migration: str, last_ddl: str) -> dict:
    """Add records lo..hi-1 (and their events and feed rows); returns the seconds each phase took."""
    from kirolearn.store.postgres.migrations import MIGRATIONS

    took = {}
    t = time.perf_counter()
    # the last migration is applied again after the fill (timed): take it off first
    if indexes_only(last_ddl):
        for name in re.findall(r"create index (\w+)", last_ddl):
            conn.execute(f"drop index if exists {name}")
        conn.execute("delete from kirolearn_migrations where name = %s", [last_migration])
    kept = [(n, d) for n, d in secondary_indexes(conn)]
    for name, _ in kept:
        conn.execute(f"drop index {name}")
    took["drop"] = time.perf_counter() - t
    conn.execute("set session_replication_role = replica")  # the feed's triggers: rows written below
    conn.execute("set maintenance_work_mem = '256MB'")
    step = 100_000
    t = time.perf_counter()
    for start in range(lo, hi, step):
        end = min(hi, start + step)
        with conn.transaction():
            conn.execute(FILL_RECORDS, {"lo": start, "hi": end})
            conn.execute(FILL_EVENTS, {"first": rid(start), "last": rid(end)})
            conn.execute(FILL_FEED, {"first": rid(start), "last": rid(end)})
        print(f"  filled {end:,} records ({time.perf_counter() - t:.0f} s)", file=sys.stderr, flush=True)
    took["insert"] = time.perf_counter() - t
    conn.execute("set session_replication_role = origin")
    t = time.perf_counter()
    for _, definition in kept:
        conn.execute(definition)
    took["indexes"] = time.perf_counter() - t
    t = time.perf_counter()
    for table in ("memory_records", "events", "record_changes"):
        conn.execute(f"vacuum analyze {table}")
    took["vacuum"] = time.perf_counter() - t
    assert MIGRATIONS[-1][0] == last_migration
    return took


# --- one developer ---


class Developer:
    """One home: KIROLEARN_HOME, its SQLite store, and its connection to the team store."""

    def __init__(self, base: str, url: str):
        from kirolearn.store.postgres.store import PostgresStore
        from kirolearn.store.sqlite.store import SqliteStore

        self.home = os.path.join(base, "home")
        os.makedirs(self.home)
        os.environ["KIROLEARN_HOME"] = self.home
        self.local = SqliteStore(os.path.join(self.home, "kirolearn.db"))
        self.team = PostgresStore(url)
        self.pid = self.team.conn.execute("select pg_backend_pid() as pid").fetchone()["pid"]
        self.team.conn.commit()

    def sync(self):
        from kirolearn.team.sync import sync

        server, cpu, wall = cpu_of(self.pid), time.process_time(), time.perf_counter()
        stats = sync(self.local, self.team, [JOINED], me=ME)
        out = {
            "wall": time.perf_counter() - wall,
            "cpu": time.process_time() - cpu,
            "server": cpu_of(self.pid) - server,
            "stats": stats,
        }
        if stats.error:
            raise RuntimeError(f"sync failed: {stats.error}")
        return out

    def explained(self, log_path: str) -> dict:
        """One pass with auto_explain on this connection: shared buffers touched, and each plan's shape."""
        conn = self.team.conn
        for setting in (
            "load 'auto_explain'",
            "set auto_explain.log_min_duration = 0",
            "set auto_explain.log_analyze = on",
            "set auto_explain.log_buffers = on",
            "set auto_explain.log_timing = off",
            "set auto_explain.log_format = json",
            "set auto_explain.log_level = log",
        ):
            conn.execute(setting)
        conn.commit()
        start = os.path.getsize(log_path)
        try:
            stats = self.sync()["stats"]
        finally:
            conn.execute("set auto_explain.log_min_duration = -1")
            conn.commit()
        with open(log_path, encoding="utf-8", errors="replace") as fh:
            fh.seek(start)
            text = fh.read()
        return {"stats": stats, **plans(text)}


def plans(log: str) -> dict:
    """Sum the buffers of auto_explain's JSON plans in a server log excerpt; each plan's shape."""
    buffers, shapes = 0, []
    decoder = json.JSONDecoder()
    for found in re.finditer(r"plan:\s*\n?", log):
        try:
            doc, _ = decoder.raw_decode(log, found.end())
        except ValueError:
            continue
        text = doc.get("Query Text", "")
        if text.strip().lower().startswith(("set ", "load ")):
            continue
        plan = doc["Plan"]
        buffers += plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)
        shapes.append((" ".join(text.split())[:90], shape(plan)))
    return {"buffers": buffers, "plans": shapes}


def shape(plan: dict) -> str:
    name = (
        plan["Node Type"]
        + (f" using {plan['Index Name']}" if plan.get("Index Name") else "")
        + (f" on {plan['Relation Name']}" if plan.get("Relation Name") and not plan.get("Index Name") else "")
    )
    inner = [shape(p) for p in plan.get("Plans", [])]
    return name + (f" [{'; '.join(inner)}]" if inner else "")


def new_records(n: int, start: int, actor: str) -> "list[dict]":
    """n new records of `actor` in the joined project; `start` makes their ids and text unique."""
    return [
        {
            "record_id": f"nr_{actor}_{start + i:09d}",
            "project_id": JOINED,
            "project_root": f"/src/{JOINED}",
            "session_id": f"{actor}_live_{start // 100}",
            "title": f"checkout retry {actor} {start + i}",
            "summary": f"the checkout service retried order batch {start + i} after a timeout",
            "facts": [f"batch {start + i} retried"],
            "concepts": ["checkout"],
            "files_touched": ["src/checkout.py"],
            "observation_type": "tool_use",
            "strategy": "deterministic",
            "source_event_ids": [],
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "actor": actor,
            "host": f"laptop-{actor}",
            "agent": "kiro",
        }
        for i in range(n)
    ]


def new_events(n: int, start: int, minute: int) -> "list[dict]":
    """n events of this developer's turns in the joined project, stored `minute` minutes into 2027
    (rounds 10 minutes apart: past the sync's 2-minute overlap, so each pass sends only its own)."""
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1798761600 + minute * 60))
    out = []
    for i in range(n):
        event_id = f"ev_{ME}_{start + i:09d}"
        body = {
            "event_id": event_id,
            "kind": "tool_use",
            "session_id": f"{ME}_live",
            "payload": {"tool_name": "execute_bash", "tool_input": f"pytest -k case_{start + i}"},
        }
        out.append(
            {
                "event_id": event_id,
                "content_hash": f"h_{event_id}",
                "kind": "tool_use",
                "trigger": "postToolUse",
                "hook": "postToolUse",
                "generation": "classic",
                "surface": "kiro-cli",
                "agent": "kiro",
                "session_id": f"{ME}_live",
                "project_id": JOINED,
                "project_root": f"/src/{JOINED}",
                "cwd": f"/src/{JOINED}",
                "received_at": f"{at}.{i % 1000:03d}Z",
                "stored_at": f"{at}.{i % 1000:03d}Z",
                "actor": ME,
                "host": f"laptop-{ME}",
                "client_version": "1",
                "body": json.dumps(body),
                "extract_state": "done",
                "run_id": None,
            }
        )
    return out


def measure_size(cluster, url: str, size: int, asked, show_plans: bool) -> dict:
    from kirolearn.store.postgres.store import PostgresStore

    out = {}
    with tempfile.TemporaryDirectory(prefix="kirolearn-team-scale-") as base:
        dev = Developer(base, url)
        mate = PostgresStore(url)
        try:
            with dev.team.conn.cursor() as cur:
                cur.execute("select count(*) as n from memory_records where project_id = %s", [JOINED])
                out["project_rows"] = cur.fetchone()["n"]
            dev.team.conn.commit()
            first = dev.sync()
            got = first["stats"].records_received
            out["join"] = dict(first, rows=got)
            out["after_join"] = dev.sync()
            idle = [dev.sync() for _ in range(15)]
            out["idle"] = median_pass(idle)
            rounds = []
            for r in range(5):
                mate.add_records(new_records(100, size * 10 + r * 100, "dev1"))
                dev.local.add_records(new_records(100, size * 10 + r * 100, ME))
                dev.local.add_events(new_events(EVENTS_PER_RECORD * 100, size * 10 + r * 300, r * 10))
                rounds.append(dev.sync())
                stats = rounds[-1]["stats"]
                assert (stats.records_received, stats.events_sent) == (100, 300), stats
            out["new"] = median_pass(rounds)
            dev.sync()  # the last round's 100 go back up: then idle
            out["idle_explained"] = dev.explained(cluster.log_path)
            mate.add_records(new_records(100, size * 10 + 900, "dev1"))
            dev.local.add_records(new_records(100, size * 10 + 900, ME))
            dev.local.add_events(new_events(EVENTS_PER_RECORD * 100, size * 10 + 2700, 90))
            out["new_explained"] = dev.explained(cluster.log_path)
            # nothing lost, nothing twice: the cache holds exactly the team's project
            team_ids = {
                r["record_id"]
                for r in dev.team.conn.execute(
                    "select record_id from memory_records where project_id = %s", [JOINED]
                ).fetchall()
            }
            dev.team.conn.commit()
            local_ids = {
                r[0]
                for r in dev.local.db.execute(
                    "select record_id from memory_records where project_id = ?", [JOINED]
                ).fetchall()
            }
            out["same"] = team_ids == local_ids
            out["search_project"] = timed_search(mate, asked, JOINED)
            out["search_all"] = timed_search(mate, asked, None)
        finally:
            mate.close()
            dev.team.close()
            dev.local.close()
    return out


def median_pass(passes: "list[dict]") -> dict:
    return {k: pct([p[k] for p in passes], 0.5) for k in ("wall", "cpu", "server")}


def timed_search(store, asked, project) -> dict:
    times = []
    for words in asked:
        t = time.perf_counter()
        store.search(words, project_id=project, limit=10)
        times.append((time.perf_counter() - t) * 1000)
    return {"p50": pct(times, 0.5), "p95": pct(times, 0.95)}


def sizes_of(conn) -> dict:
    rows = conn.execute("""
        select c.relname, pg_total_relation_size(c.oid) as bytes from pg_class c
        where c.relnamespace = current_schema()::regnamespace and c.relkind = 'r'
          and c.relname <> 'bench_texts'""").fetchall()
    return {r[0]: r[1] for r in rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--plans", action="store_true", help="print each sync statement's plan shape")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    try:
        import psycopg
        from pgserver import PgCluster, PostgresUnavailable
    except ImportError as exc:
        print(f"team store at scale: skipped ({exc}; pip install 'kirolearn[team]')")
        return 0
    from bench_pgstore import queries
    from benchdata import distractors

    from kirolearn.store.postgres.migrations import MIGRATIONS
    from kirolearn.store.postgres.store import PostgresStore

    texts = distractors()
    asked = queries(texts, 200)
    try:
        cluster = PgCluster(settings={"shared_buffers": "128MB"}).start()
    except PostgresUnavailable as exc:
        print(f"team store at scale: skipped ({exc})")
        return 0
    results = {}
    last_name, last_ddl = MIGRATIONS[-1]
    try:
        url = cluster.url(cluster.create_database("teamscale"))
        PostgresStore(url, migrate=True).close()
        conn = psycopg.connect(url, autocommit=True)
        load_texts(conn, texts)
        have = 0
        for size in sizes:
            print(f"filling {size:,} records ...", file=sys.stderr, flush=True)
            took = fill(conn, have, size, last_name, last_ddl)
            have = size
            t = time.perf_counter()
            with PostgresStore(url, check=False) as store:
                applied = store.migrate()
            took["migrate"] = time.perf_counter() - t
            assert applied == ([last_name] if indexes_only(last_ddl) else []), applied
            print(f"  fill {took}", file=sys.stderr, flush=True)
            sized = sizes_of(conn)
            print(f"measuring {size:,} ...", file=sys.stderr, flush=True)
            results[size] = measure_size(cluster, url, size, asked, args.plans)
            results[size].update(fill=took, bytes=sized, size=size)
            if args.plans:
                for what in ("idle_explained", "new_explained"):
                    print(
                        f"-- {size:,} records, {what}: {results[size][what]['buffers']:,} buffers", flush=True
                    )
                    for query, plan in results[size][what]["plans"]:
                        print(f"   {query}\n      {plan}", flush=True)
        conn.close()
    finally:
        cluster.stop()
    report(results, sizes, last_name)
    return 0


def report(results: dict, sizes: "list[int]", migration: str) -> None:
    def row(name, fmt, get, goal=""):
        values = [get(results[s]) for s in sizes]
        cells = [fmt(v) for v in values]
        g = ""
        if len(sizes) > 1 and values[0] and values[-1]:
            import math

            decades = math.log10(sizes[-1] / sizes[0])
            g = f"{(values[-1] / values[0]) ** (1 / decades):.2f}x" if decades else ""
        rows.append((name, *cells, g, goal))

    rows = []
    ms = lambda v: f"{v * 1000:.1f}"  # noqa: E731
    row("idle pass: client CPU ms", ms, lambda r: r["idle"]["cpu"], f"<= {GOAL}x")
    row("idle pass: wall ms", ms, lambda r: r["idle"]["wall"], f"<= {GOAL}x")
    row("idle pass: server CPU ms", ms, lambda r: r["idle"]["server"])
    row("idle pass: shared buffers", str, lambda r: r["idle_explained"]["buffers"], f"<= {GOAL}x")
    row("100 down + 100 up (+300 events): client CPU ms", ms, lambda r: r["new"]["cpu"], f"<= {GOAL}x")
    row("100 down + 100 up (+300 events): wall ms", ms, lambda r: r["new"]["wall"], f"<= {GOAL}x")
    row("100 down + 100 up (+300 events): server CPU ms", ms, lambda r: r["new"]["server"])
    row(
        "100 down + 100 up (+300 events): buffers",
        str,
        lambda r: r["new_explained"]["buffers"],
        f"<= {GOAL}x",
    )
    row("join: project rows", lambda v: f"{v:,}", lambda r: r["join"]["rows"], "3.5 % of the store")
    row("join: first sync wall s", lambda v: f"{v:.1f}", lambda r: r["join"]["wall"], "linear")
    row("join: rows/s", lambda v: f"{v:,.0f}", lambda r: r["join"]["rows"] / r["join"]["wall"], "flat")
    row("join: server CPU s", lambda v: f"{v:.2f}", lambda r: r["join"]["server"], "linear")
    row("the pass after joining: wall s", lambda v: f"{v:.1f}", lambda r: r["after_join"]["wall"])
    row("team search in p10: p50 ms", lambda v: f"{v:.1f}", lambda r: r["search_project"]["p50"])
    row("team search in p10: p95 ms", lambda v: f"{v:.1f}", lambda r: r["search_project"]["p95"])
    row("team search, all projects: p50 ms", lambda v: f"{v:.1f}", lambda r: r["search_all"]["p50"])
    row("team search, all projects: p95 ms", lambda v: f"{v:.1f}", lambda r: r["search_all"]["p95"])
    row("bytes per record, all tables", lambda v: f"{v:,.0f}", lambda r: sum(r["bytes"].values()) / r["size"])
    row(
        "  of which memory_records", lambda v: f"{v:,.0f}", lambda r: r["bytes"]["memory_records"] / r["size"]
    )
    row("  of which events (3 a record)", lambda v: f"{v:,.0f}", lambda r: r["bytes"]["events"] / r["size"])
    row(
        "  of which record_changes", lambda v: f"{v:,.0f}", lambda r: r["bytes"]["record_changes"] / r["size"]
    )
    row(
        "fill: seconds",
        lambda v: f"{v:.0f}",
        lambda r: sum(v for k, v in r["fill"].items() if k != "migrate"),
    )
    row(
        f"{migration} on the filled store: s",
        lambda v: f"{v:.1f}",
        lambda r: r["fill"]["migrate"],
        "an upgrade",
    )
    row("cache == team store after the passes", str, lambda r: r["same"], "True")
    header = ("figure", *(f"{s:,}" for s in sizes), "per 10x", "goal")
    print_rows(f"Team store at scale (load average {os.getloadavg()[0]:.2f} at the end)", header, rows)


def print_rows(title: str, header, rows) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(title)
    for r in [header, *rows]:
        print(
            "  "
            + "  ".join(
                str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))
            )
        )


if __name__ == "__main__":
    sys.exit(main())
