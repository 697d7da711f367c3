"""The drain keeps up with all-MiniLM-L6-v2 (issue #22): a backfill, and what a day's traffic costs.

A store of N records with no vector of the model (as after `kirolearn model install` on a store
the default model filled, or a first drain of a big spool) is drained pass after pass as
`kirolearn drain --watch` does (Drainer.run_once, no --flush): each pass stores what the spool
holds, releases the spool files, then embeds for at most drain.EMBED_SECONDS. While the backfill
runs, one new turn arrives before every pass; its latency (spooled → stored as a record) is what
the backfill must not delay. It is measured twice: to the moment the pass starts embedding (the
record is committed and the spool file released by then: what capture and recall depend on), and
to the end of the pass (when a bench can first look, since the pass is one call). Records are
bench_recall's synthetic ones. Prints a table; never fails.

    python bench/bench_backfill.py [--records 10000] [--day 2000]
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_recall import fill  # noqa: E402
from benchdata import make_project, spool_turn  # noqa: E402
from benchstore import as_store  # noqa: E402
from benchtable import print_table  # noqa: E402

MODEL = "local/all-MiniLM-L6-v2"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--day", type=int, default=2_000, help="records a heavy day brings (for the day row)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["KIROLEARN_HOME"] = os.path.join(tmp, "home")
        os.environ["KIROLEARN_EMBEDDING_MODEL"] = MODEL
        from kirolearn import settings
        from kirolearn.core import paths
        from kirolearn.pipeline import drain
        from kirolearn.recall import lexical
        from kirolearn.recall.embeddings import registry as embeddings
        from kirolearn.store.sqlite import db as store

        try:
            embeddings.get_model(MODEL).embed_batch(["warm up"])
        except embeddings.EmbeddingUnavailable as exc:
            print(f"{MODEL} not available ({exc.message}): no backfill rows")
            return 0
        project = make_project(os.path.join(tmp, "app"))
        fill(paths.db_path(), args.records, [project], random.Random(3))
        conf = settings.load()
        db = store.open_db()
        drainer = drain.Drainer(as_store(db), conf)
        passes, latencies, embedded = [], [], 0
        to_embed, embedding = [], []  # per pass: spooled -> embedding starts; the embedding slice itself
        embed_vectors = drainer.embed_vectors

        def timed_embed(stats, seconds=drain.EMBED_SECONDS):
            t = time.perf_counter()
            to_embed.append(t - spooled)
            embed_vectors(stats, seconds)
            embedding.append(time.perf_counter() - t)

        drainer.embed_vectors = timed_embed
        start = time.perf_counter()
        n = 0
        while True:
            spooled = time.perf_counter()
            spool_turn(
                project, f"live-{n}", f"live turn {n}: why does the export fail", time.time(), "fixed it"
            )
            lock = drain.lock()
            try:
                t0 = time.perf_counter()
                stats = drainer.run_once()
                passes.append(time.perf_counter() - t0)
            finally:
                lock.release()
            conn = lexical.connect_readonly(budget=60)
            found = conn.execute(
                "select count(*) from memory_records where session_id = ?", [f"live-{n}"]
            ).fetchone()[0]
            conn.close()
            if found:
                latencies.append(time.perf_counter() - spooled)
            embedded += stats.records_embedded
            n += 1
            if not drainer.vectors_pending or n > 10 * args.records:
                break
        total = time.perf_counter() - start
        db.conn.close()
    rate = embedded / total if total else 0.0
    rows = [
        (f"backfill: {args.records:,} records embedded with {MODEL} (s)", f"{total:.0f}", ""),
        ("  records embedded / s (whole passes)", f"{rate:.1f}", "~40 on these machines"),
        (
            "  passes / longest pass (s)",
            f"{len(passes)} / {max(passes):.1f}",
            f"each <= ~{drain.EMBED_SECONDS:.0f} s + ingest",
        ),
        (
            "  embedding slice per pass, median / max (s)",
            f"{statistics.median(embedding):.1f} / {max(embedding):.1f}",
            f"~{drain.EMBED_SECONDS:.0f} s",
        ),
        (
            "  a turn spooled before a pass: stored + spool released, median / max (s)",
            f"{statistics.median(to_embed):.2f} / {max(to_embed):.2f}",
            "before any embedding",
        ),
        (
            "  a turn spooled before a pass: end of that pass, median / max (s)",
            f"{statistics.median(latencies):.1f} / {max(latencies):.1f}" if latencies else "never",
            "one pass",
        ),
        (
            f"a heavy day ({args.day:,} records): embedding time at that rate (s)",
            f"{args.day / rate:.0f}" if rate else "?",
            "spread over passes",
        ),
    ]
    print_table("the drain keeps up: embedding after the commit, bounded per pass", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
