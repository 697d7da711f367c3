"""Vectors at scale (issue #32): a usearch HNSW index (kirolearn/recall/ann.py) against the exact scan.

Part 1, the library: synthetic clustered unit vectors of 384 dimensions (MiniLM's), made in bulk with
numpy (2,000 centres, noise around each), at each --sizes rows. For each size: the exact scan's CPU
per query (`matrix @ q` and the top 200, what semantic._ProjectIndex does), the index's build (as
the drain adds rows: chunks of ann.ADD_CHUNK, one thread) in CPU and wall seconds, its bytes a row
on disk, its query CPU (ann.CANDIDATE_ROWS nearest, re-scored in float32 as the searcher does),
recall@10 against the exact top 10 with and without that re-scoring, whether a paraphrase's exact
best comes first, the found ten's summed similarity over the exact ten's (a miss among near-ties costs ~nothing),
the same for more candidates or a larger search expansion (SWEEP), and (--f16) the same for f16.
Queries: paraphrases of stored rows (cosine ~0.86 to the row) and mixtures of two rows, 200 of them.

Part 2, the searcher (--store N): a real SQLite store of N records in one project (bench_scale's
record shape, sessions of 25), each with two vector rows of a synthetic 384-d model, then
semantic.Searcher.search p50 / p95 CPU per query, exact (no index) and through the index the drain
builds (semantic.refresh_ann), and how many of the exact top 10 the indexed search returns.

Also the import of usearch (`python -X importtime`). Prints tables; never fails.

    python bench/bench_vectors.py [--sizes 100000,1000000] [--store 100000] [--f16]
"""

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchstore import as_store  # noqa: E402
from benchtable import print_table  # noqa: E402

DIM = 384
CENTRES = 2000
QUERIES = 200
PARAPHRASE = 0.6  # a unit row plus this much of a random unit direction: cosine 1 / sqrt(1 + 0.36) = 0.86
SWEEP = ((200, 256), (200, 512), (400, 1024))  # (candidates re-scored, search expansion) besides ann.py's


def clustered(n: int, seed: int = 0) -> np.ndarray:
    """n unit rows around CENTRES random centres (float32), made a million rows at a time."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CENTRES, DIM)).astype(np.float32)
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):
        end = min(n, start + 100_000)
        rows = centres[rng.integers(0, CENTRES, end - start)]
        rows += 0.6 * rng.standard_normal(rows.shape).astype(np.float32)
        out[start:end] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def queries(matrix: np.ndarray, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picked = matrix[rng.integers(0, len(matrix), QUERIES)]
    noise = rng.standard_normal(picked.shape).astype(np.float32)
    # a paraphrase of a row: cosine ~0.86 to it (PARAPHRASE); per-component noise of 0.3 (before 3 Dec)
    # made a query almost random (best cosine ~0.22 in the store), the hardest case an index meets
    near = picked + PARAPHRASE * noise / np.linalg.norm(noise, axis=1, keepdims=True)
    mixed = picked + matrix[rng.integers(0, len(matrix), QUERIES)]  # between two topics
    q = np.where((np.arange(QUERIES) % 2 == 0)[:, None], near, mixed)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def cpu_ms(fn, items) -> "tuple[list[float], list]":
    times, out = [], []
    for item in items:
        start = time.process_time()
        out.append(fn(item))
        times.append((time.process_time() - start) * 1000)
    return times, out


def pct(values, p) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def library(n: int, folder: str, dtypes, threads: int = 1) -> "list[tuple]":
    from usearch.index import Index

    from kirolearn.recall import ann

    matrix = clustered(n)
    qs = queries(matrix)

    def exact(q):
        sims = matrix @ q
        top = np.argpartition(-sims, ann.CANDIDATE_ROWS)[: ann.CANDIDATE_ROWS]
        return top[np.argsort(-sims[top])][:10]

    times, truth = cpu_ms(exact, qs)
    rows = [
        (
            f"{n:,} rows: exact scan, CPU per query p50 / p95",
            f"{pct(times, 50):.1f} / {pct(times, 95):.1f} ms",
            "",
        )
    ]
    for dtype in dtypes:
        index = Index(
            ndim=DIM,
            metric="cos",
            dtype=dtype,
            connectivity=ann.CONNECTIVITY,
            expansion_add=ann.EXPANSION_ADD,
        )
        cpu, wall = time.process_time(), time.perf_counter()
        for start in range(0, n, ann.ADD_CHUNK):
            end = min(n, start + ann.ADD_CHUNK)
            index.add(np.arange(start, end, dtype=np.uint64), matrix[start:end], threads=threads)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        path = os.path.join(folder, f"{n}-{dtype}.usearch")
        index.save(path)
        size = os.path.getsize(path)
        del index
        view = Index.restore(path, view=True)
        view.expansion_search = ann.expansion_for(n)

        def approximate(q, rescore=True, candidates=ann.CANDIDATE_ROWS, view=view):
            keys = view.search(q, candidates, threads=1).keys.astype(np.int64)
            if not rescore:
                return keys[:10]
            sims = matrix[keys] @ q  # the searcher reads these rows from the store
            return keys[np.argsort(-sims)][:10]

        def kept(found) -> "tuple[float, float]":
            """(recall@10, the found ten's summed similarity over the exact ten's) over the queries."""
            recall = statistics.mean(len(set(f) & set(t)) / 10 for f, t in zip(found, truth))
            share = statistics.mean(
                float((matrix[f] @ q).sum() / (matrix[t] @ q).sum()) for f, t, q in zip(found, truth, qs)
            )
            return recall, share

        qtimes, found = cpu_ms(approximate, qs)
        raw = [approximate(q, rescore=False) for q in qs]
        recall, share = kept(found)
        recall_raw = statistics.mean(len(set(f) & set(t)) / 10 for f, t in zip(raw, truth))
        # paraphrases only: a mixture's two rows are equally near, its best a coin toss
        best = statistics.mean(float(f[0] == t[0]) for f, t in list(zip(found, truth))[0::2])
        sweep = []
        for candidates, expansion in SWEEP:  # the levers, on the same index
            view.expansion_search = expansion
            stimes, sfound = cpu_ms(lambda q, c=candidates: approximate(q, candidates=c), qs)
            srecall, sshare = kept(sfound)
            sweep.append(
                (
                    f"{n:,} rows, {dtype} index: {candidates} candidates, search expansion {expansion}",
                    f"recall@10 {srecall:.3f}, similarity {sshare:.4f}",
                    f"CPU p50 {pct(stimes, 50):.2f} ms",
                )
            )
        view.expansion_search = ann.expansion_for(n)
        rows += [
            (
                f"{n:,} rows, {dtype} index: build ({threads} thread{'s' if threads > 1 else ''})",
                f"{cpu:.0f} s CPU, {wall:.0f} s wall",
                f"{cpu / n * 1e6:.0f} µs CPU a row",
            ),
            (f"{n:,} rows, {dtype} index: bytes a row on disk", f"{size / n:.0f}", f"{size / 2**20:.0f} MB"),
            (
                f"{n:,} rows, {dtype} index: CPU per query p50 / p95 ({ann.CANDIDATE_ROWS} re-scored, "
                f"expansion {ann.expansion_for(n)})",
                f"{pct(qtimes, 50):.2f} / {pct(qtimes, 95):.2f} ms",
                f"{pct(times, 50) / pct(qtimes, 50):.0f}x less",
            ),
            (
                f"{n:,} rows, {dtype} index: recall@10 vs exact, re-scored / raw",
                f"{recall:.3f} / {recall_raw:.3f}",
                "",
            ),
            (
                f"{n:,} rows, {dtype} index: a paraphrase's exact best first; found ten's similarity / exact ten's",
                f"{best:.3f}; {share:.4f}",
                "ties: how much nearer the missed rows were",
            ),
            *sweep,
        ]
        view = None  # the memory map closed before the file goes
        os.remove(path)
    return rows


class Synthetic:
    """A 384-d embedding model whose vectors come from a text's hash near CENTRES centres."""

    def __init__(self):
        from kirolearn.recall.embeddings.base import EmbeddingModel

        class Model(EmbeddingModel):
            model_id, dimensions, batch_size = "bench/synthetic-384", DIM, 256

            centres = np.random.default_rng(0).standard_normal((CENTRES, DIM)).astype(np.float32)

            def _embed(self, texts):
                out, centres = [], self.centres
                for text in texts:
                    rng = np.random.default_rng(abs(hash(text)) % 2**32)
                    out.append(
                        centres[rng.integers(0, CENTRES)] + 0.6 * rng.standard_normal(DIM).astype(np.float32)
                    )
                return np.asarray(out)

        self.model = Model()


def searcher_rows(n: int, folder: str, profile: bool = False) -> "list[tuple]":
    os.environ["KIROLEARN_HOME"] = os.path.join(folder, "home")
    os.environ["KIROLEARN_EMBEDDING_MODEL"] = "none"
    import bench_scale

    from kirolearn.core.project import project_id
    from kirolearn.recall import ann, semantic
    from kirolearn.recall import lexical as recall
    from kirolearn.store.sqlite import db as store

    projects = [os.path.join(folder, f"p{k}") for k in range(bench_scale.PROJECTS)]
    bench_scale.project_weights = lambda: [1.0] + [0.0] * (bench_scale.PROJECTS - 1)  # one project
    start = time.perf_counter()
    bench_scale.fill(n, projects, random.Random(7))
    db = store.open_db()
    pid = project_id(projects[0])
    model = Synthetic().model
    ids = [r[0] for r in db.execute("select record_id from memory_records where project_id = ?", [pid])]
    matrix = clustered(2 * len(ids), seed=3)
    have = db.execute("select count(*) from record_vectors").fetchone()[0]
    for at in range(0, len(ids) if have < len(ids) else 0, 5000):
        store.save_vectors(
            db,
            [
                {
                    "record_id": rid,
                    "project_id": pid,
                    "model_id": model.model_id,
                    "dimensions": DIM,
                    "vector": matrix[2 * (at + i) : 2 * (at + i) + 2].tobytes(),
                    "text_hash": "p",
                }
                for i, rid in enumerate(ids[at : at + 5000])
            ],
        )
    fill_s = time.perf_counter() - start
    vocab = [r[0] for r in db.execute("select title from memory_records limit 100")]
    prompts = [" ".join(t.split()[:4]) for t in vocab]
    conn = recall.connect_readonly(budget=1e9)

    lexical = {
        p: [rid for rid, _ in recall.scores(conn, p, project_id=pid, limit=semantic.CANDIDATES)]
        for p in prompts
    }

    def run():
        searcher = semantic.Searcher(as_store(conn), model)
        searcher.search(prompts[0], project_id=pid)  # loads the matrix or opens the index
        return cpu_ms(lambda p: [h.record_id for h in searcher.search(p, project_id=pid, limit=10)], prompts)

    def vector_part():
        """The vector half alone: the query's similarities (and, with an index, its candidates')."""
        searcher = semantic.Searcher(as_store(conn), model)
        return cpu_ms(lambda p: searcher.similarities(p, pid, extra=lexical[p]), prompts)[0]

    opener = ann.open_index
    ann.open_index = lambda *a, **k: (None, "")  # exact: as if no index were kept (a --keep store has one)
    exact_v = vector_part()
    exact_t, exact = run()
    ann.open_index = opener
    os.environ[ann.THRESHOLD_ENV] = "0"
    cpu, wall = time.process_time(), time.perf_counter()
    done = semantic.refresh_ann(as_store(db), model)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    ann_t, found = run()
    ann_v = vector_part()
    if profile:
        import cProfile

        cProfile.runctx("vector_part()", globals(), {"vector_part": vector_part}, sort="tottime")
    overlap = statistics.mean(len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(found, exact))
    return [
        (f"store of {n:,} records ({2 * n:,} vector rows), one project", f"made in {fill_s:.0f} s", ""),
        (
            "Searcher.search, exact scan: CPU p50 / p95",
            f"{pct(exact_t, 50):.1f} / {pct(exact_t, 95):.1f} ms",
            "",
        ),
        (
            "the drain's index build (semantic.refresh_ann)",
            f"{cpu:.0f} s CPU, {wall:.0f} s wall",
            f"{done.get('added', 0):,} records",
        ),
        (
            "Searcher.search through the index: CPU p50 / p95",
            f"{pct(ann_t, 50):.1f} / {pct(ann_t, 95):.1f} ms",
            f"{pct(exact_t, 50) / pct(ann_t, 50):.1f}x less",
        ),
        (
            "its vector half (Searcher.similarities), exact: CPU p50 / p95",
            f"{pct(exact_v, 50):.1f} / {pct(exact_v, 95):.1f} ms",
            "the whole project's matrix",
        ),
        (
            "its vector half through the index: CPU p50 / p95",
            f"{pct(ann_v, 50):.1f} / {pct(ann_v, 95):.1f} ms",
            "candidates, neighbours, their stored vectors",
        ),
        ("fused top 10 shared with the exact search", f"{overlap:.3f}", ""),
    ]


def import_ms(python: str) -> float:
    """usearch.index's cumulative import time (ms) from `python -X importtime`, median of 5."""
    found = []
    for _ in range(5):
        err = subprocess.run(
            [python, "-X", "importtime", "-c", "import usearch.index"], capture_output=True, text=True
        ).stderr
        line = [x for x in err.splitlines() if x.rstrip().endswith("| usearch.index")]
        found.append(int(line[-1].split("|")[1]) / 1000 if line else float("nan"))
    return statistics.median(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument(
        "--store", type=int, default=100_000, help="records of the searcher's store (0: none)"
    )
    parser.add_argument("--threads", type=int, default=1, help="threads of the index build (the drain: 1)")
    parser.add_argument("--keep", help="make (or reuse) the searcher's store in this folder")
    parser.add_argument("--profile", action="store_true", help="profile the indexed searcher's queries")
    parser.add_argument("--f16", action="store_true", help="also an f16 index (i8 is what ann.py keeps)")
    args = parser.parse_args()
    try:
        import usearch
    except ImportError:
        print("usearch is not installed (pip install 'kirolearn[vectors]'): no vector index figures")
        return 0
    rows = [
        ("usearch version", usearch.__version__, ""),
        ("import usearch.index (-X importtime, cumulative)", f"{import_ms(sys.executable):.0f} ms", ""),
        ("load average (1 / 5 / 15 min) at the start", " / ".join(f"{x:.2f}" for x in os.getloadavg()), ""),
    ]
    with tempfile.TemporaryDirectory() as folder:
        for n in [int(x) for x in args.sizes.split(",") if x]:
            rows += library(n, folder, ["i8", "f16"] if args.f16 else ["i8"], args.threads)
            print_table("vector index (usearch HNSW) vs exact scan, so far", rows)
        if args.store:
            rows += searcher_rows(args.store, args.keep or folder, args.profile)
    rows.append(
        ("load average (1 / 5 / 15 min) at the end", " / ".join(f"{x:.2f}" for x in os.getloadavg()), "")
    )
    print_table("vector index (usearch HNSW) vs exact scan", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
