"""Viewer and management speed at 100k records: page renders, list, forget, purge.

Uses bench_recall's synthetic records (20 projects, Zipf words). Pages are
fetched through the real Starlette app in process (no socket), so the figure
is query + scrub + render. Prints a table; never fails.

    python bench/bench_viewer.py [--records 100000]
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

from bench_recall import fill
from benchstore import as_store  # noqa: E402
from benchtable import pct, print_table


def timed(func, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        times.append((time.perf_counter() - start) * 1000)
    return f"{statistics.median(times):.1f} / {pct(times, 0.95):.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["KIROLEARN_HOME"] = os.path.join(tmp, "home")
        from starlette.testclient import TestClient

        from kirolearn.core import paths
        from kirolearn.manage import records as manage
        from kirolearn.store.sqlite import db as store
        from kirolearn.store.sqlite import records as recordstore
        from kirolearn.viewer.app import create_app

        projects = [os.path.join(tmp, f"project{i}") for i in range(20)]
        for p in projects:
            os.makedirs(os.path.join(p, ".git"))
        fill(paths.db_path(), args.records, projects, random.Random(3))
        client = TestClient(create_app("t", 1), base_url="http://127.0.0.1:1")
        client.get("/?token=t")
        pid = manage.project_id_of(projects[0])
        db = store.open_db()
        rows_deep = recordstore.list_records(db, limit=2500, project_id=pid)
        cursor = f"{rows_deep[-1]['created_at']}|{rows_deep[-1]['record_id']}"
        ids = [r["record_id"] for r in rows_deep[:200]]
        n = args.records
        rows = [
            (
                f"timeline, first page of 50 at {n:,}: median / p95 (ms)",
                timed(lambda: client.get(f"/?project={pid}"), args.runs),
                "<= 100",
            ),
            (
                "timeline, page 50 (keyset cursor)",
                timed(lambda: client.get(f"/?project={pid}&before={cursor}"), args.runs),
                "<= 100",
            ),
            (
                "search page, all projects, 25 best",
                timed(
                    lambda: client.get("/search?q=why+does+the+alembic+migration+fail+on+the+index"),
                    args.runs,
                ),
                "",
            ),
            (
                "search page, one project",
                timed(
                    lambda: client.get(
                        f"/search?q=why+does+the+alembic+migration+fail+on+the+index&project={pid}"
                    ),
                    args.runs,
                ),
                "",
            ),
            ("record page with provenance", timed(lambda: client.get(f"/record/{ids[0]}"), args.runs), ""),
            ("health page", timed(lambda: client.get("/health"), args.runs), ""),
            (
                "`list --all-projects --limit 20` query",
                timed(lambda: manage.list_records(limit=20), args.runs),
                "",
            ),
            (
                "`list --file app/cache.py` query",
                timed(lambda: manage.list_records(file="app/cache.py", limit=20), args.runs),
                "",
            ),
        ]
        start = time.perf_counter()
        manage.forget(ids, actor="cli", store=as_store(db))
        forget_ms = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        manage.purge(ids, store=as_store(db))
        purge_ms = (time.perf_counter() - start) * 1000
        rows += [
            ("forget 200 records (ms)", f"{forget_ms:.0f}", ""),
            (
                f"purge them: secure delete, FTS optimize over {n - 200:,}, WAL truncate (ms)",
                f"{purge_ms:.0f}",
                "",
            ),
        ]
    print_table("viewer and management speed", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
