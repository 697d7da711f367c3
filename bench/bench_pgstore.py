"""The PostgreSQL team store beside the SQLite store: write rates and search latency, one run.

Starts a throw-away PostgreSQL cluster (tests/pgserver.py: a Unix socket, durability off as in
the tests, so the write figures are upper bounds for a real server), then for each store:
- add_events: N events in chunks of 500 (the drain's chunk size), events/s;
- commit_extraction: N records, 10 per extraction (one transaction each), records/s;
- search: 300 queries of 1-3 words drawn from the records' own text, p50 and p95 in ms.
Record text comes from bench/data's coding distractors. Prints a table; never fails (a
machine without PostgreSQL or psycopg prints why and exits 0).

    python bench/bench_pgstore.py [--records 10000]
"""

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time

from benchtable import pct, print_table

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))


def make_events(n: int) -> "list[dict]":
    out = []
    for i in range(n):
        at = f"2026-11-01T{10 + i // 360000 % 10:02d}:{i // 6000 % 60:02d}:{i // 100 % 60:02d}.{i % 100:03d}Z"
        body = {
            "event_id": f"ev{i:08d}",
            "kind": "tool_use",
            "session_id": f"s{i // 50}",
            "payload": {"n": i},
        }
        out.append(
            {
                "event_id": f"ev{i:08d}",
                "content_hash": f"h{i:08d}",
                "kind": "tool_use",
                "trigger": "postToolUse",
                "hook": "postToolUse",
                "generation": "classic",
                "surface": "kiro-cli",
                "agent": "kiro",
                "session_id": f"s{i // 50}",
                "project_id": f"p{i % 8}",
                "project_root": f"/src/p{i % 8}",
                "cwd": f"/src/p{i % 8}",
                "received_at": at,
                "stored_at": at,
                "actor": "dev",
                "host": "laptop",
                "client_version": "1",
                "body": json.dumps(body),
                "extract_state": "pending",
                "run_id": None,
            }
        )
    return out


def make_records(n: int, texts: "list[str]") -> "list[dict]":
    out = []
    for i in range(n):
        text = texts[i % len(texts)]
        words = text.split()
        out.append(
            {
                "record_id": f"mr_{i:08d}",
                "project_id": f"p{i % 8}",
                "project_root": f"/src/p{i % 8}",
                "session_id": f"s{i // 20}",
                "title": " ".join(words[:8]) or f"record {i}",
                "summary": f"{text} (turn {i})",
                "facts": [" ".join(words[8:16])] if len(words) > 8 else [],
                "concepts": [],
                "files_touched": [f"src/mod_{i % 97}.py"],
                "observation_type": "tool_use",
                "strategy": "deterministic",
                "source_event_ids": [f"ev{i:08d}"],
                "created_at": f"2026-11-01T10:00:00.{i % 1000:03d}Z",
            }
        )
    return out


def queries(texts: "list[str]", n: int) -> "list[list[str]]":
    rng = random.Random(7)
    vocab = sorted({w.lower() for t in texts for w in re.findall(r"[A-Za-z]{4,}", t)})
    return [rng.sample(vocab, rng.randint(1, 3)) for _ in range(n)]


def measure(store, events, records, asked) -> dict:
    t = time.perf_counter()
    for i in range(0, len(events), 500):
        store.add_events(events[i : i + 500])
    events_s = len(events) / (time.perf_counter() - t)
    t = time.perf_counter()
    for i in range(0, len(records), 10):
        store.commit_extraction(
            {
                "run_id": f"run{i:08d}",
                "batch_key": f"b{i}",
                "extractor": "deterministic",
                "outcome": "ok",
                "started_at": "2026-11-01T10:00:00.000Z",
            },
            records[i : i + 10],
            [],
        )
    records_s = len(records) / (time.perf_counter() - t)
    times, hits = [], 0
    for words in asked:
        t = time.perf_counter()
        hits += bool(store.search(words, limit=10))
        times.append((time.perf_counter() - t) * 1000)
    return {
        "events_s": events_s,
        "records_s": records_s,
        "p50": pct(times, 0.5),
        "p95": pct(times, 0.95),
        "hit": hits / len(asked),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    args = parser.parse_args()
    try:
        import psycopg  # noqa: F401
        from pgserver import PgCluster, PostgresUnavailable
    except ImportError as exc:
        print(f"PostgreSQL store: skipped ({exc}; pip install 'kirolearn[team]')")
        return 0
    from benchdata import distractors

    texts = distractors(limit=args.records) or ["no distractor text"]
    events, records = make_events(args.records), make_records(args.records, texts)
    asked = queries(texts, 300)
    try:
        cluster = PgCluster().start()
    except PostgresUnavailable as exc:
        print(f"PostgreSQL store: skipped ({exc})")
        return 0
    try:
        from kirolearn.store.postgres.store import PostgresStore
        from kirolearn.store.sqlite.store import SqliteStore

        dbname = cluster.create_database("bench")
        with PostgresStore(cluster.url(dbname), migrate=True) as pg:
            pg_figures = measure(pg, events, records, asked)
        with tempfile.TemporaryDirectory() as tmp, SqliteStore(os.path.join(tmp, "bench.db")) as lite:
            lite_figures = measure(lite, events, records, asked)
    finally:
        cluster.stop()
    rows = []
    for name, f in (("postgresql", pg_figures), ("sqlite", lite_figures)):
        rows += [
            (f"{name}: add_events, events/s (chunks of 500)", f"{f['events_s']:,.0f}", ""),
            (f"{name}: commit_extraction, records/s (10 a run)", f"{f['records_s']:,.0f}", ""),
            (
                f"{name}: search p50 / p95 ms ({args.records:,} records)",
                f"{f['p50']:.1f} / {f['p95']:.1f}",
                "",
            ),
            (f"{name}: queries with a result", f"{f['hit']:.0%}", ""),
        ]
    rows.append(
        ("search p95, postgresql / sqlite", f"{pg_figures['p95'] / lite_figures['p95']:.1f}x", "figure only")
    )
    print_table(
        f"Store backends, {args.records:,} events and records, one run (PostgreSQL {cluster_version()})", rows
    )
    return 0


def cluster_version() -> str:
    import subprocess

    from pgserver import find_bindir

    out = subprocess.run(
        [os.path.join(find_bindir(), "postgres"), "--version"], capture_output=True, text=True
    )
    found = re.search(r"\) (\d+(\.\d+)*)", out.stdout)
    return found.group(1) if found else "?"


if __name__ == "__main__":
    sys.exit(main())
