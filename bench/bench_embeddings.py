"""Embedding models side by side: the coding set and LoCoMo, embedding alone and hybrid, in one run.

Ingests each data set once (through spool → drain, as bench_coding.py and
bench_locomo.py do, with embeddings off), then embeds the same records with every
model named and asks the same questions. Vectors of different models coexist in a
store (each row carries its model id), so each model is measured on identical
records. Also prints each model's load time (a fresh process: import, load, one
text), throughput (record texts per second) and size on disk. Prints; never fails.

    python bench/bench_embeddings.py [--models wordllama/l2_supercat_256,static/minilm-l6-w30k]
                                     [--keep DIR] [--only coding|locomo]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchstore import as_store  # noqa: E402
from benchtable import print_table  # noqa: E402

DEFAULT_MODELS = "wordllama/l2_supercat_256,static/minilm-l6-w30k"


def model_size(model) -> str:
    folder = getattr(model, "folder", None)
    if folder is None:
        try:
            import wordllama

            folder = os.path.join(os.path.dirname(wordllama.__file__), "weights")
        except ImportError:
            return "?"
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs)
    return f"{total / 1e6:.1f} MB"


def load_seconds(spec: str) -> float:
    code = (
        "import time; t = time.perf_counter(); from kirolearn.recall.embeddings.registry import get_model; "
        f"get_model({spec!r}).embed_batch(['warm up']); print(time.perf_counter() - t)"
    )
    runs = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(3)
    ]
    return min(runs)


def embed_all(specs, progress_label):
    """Embed every record with each model in turn, yielding (spec, model, records/s) after each."""
    from kirolearn.recall import semantic
    from kirolearn.recall.embeddings import registry as embeddings
    from kirolearn.store.sqlite import db as store

    for spec in specs:
        db = store.open_db()
        model = embeddings.get_model(spec)
        model.embed_batch(["warm up"])
        start = time.perf_counter()
        n = semantic.index_pending(as_store(db), model)
        seconds = time.perf_counter() - start
        db.conn.close()
        print(f"{progress_label}: {spec} embedded {n} records in {seconds:.1f} s", file=sys.stderr)
        yield spec, model, (n / seconds if n else None)


def coding(tmp, specs):
    import bench_coding
    from benchdata import coding_set, distractors, make_project

    os.environ["KIROLEARN_HOME"] = os.path.join(tmp, "home")
    data = coding_set()
    turns = data["turns"]
    project = make_project(os.path.join(tmp, "app"))
    marker = os.path.join(tmp, "ingested")
    if not os.path.exists(marker):
        bench_coding.ingest(project, turns, distractors())
        open(marker, "w").close()
    from kirolearn.recall import context, semantic
    from kirolearn.recall import lexical as recall

    conn = recall.connect_readonly(budget=1e9)
    pid = context.project_id(project)
    record_of = {}
    for rid, title in conn.execute("select record_id, title from memory_records"):
        for t in turns:
            if (
                title
                and " ".join(title.split()) == " ".join(t["prompt"].split())[: len(" ".join(title.split()))]
            ):
                record_of.setdefault(t["id"], rid)
    results, models = {}, {}
    for spec, model, per_second in embed_all(specs, "coding"):
        models[spec] = (model, per_second)
        searcher = semantic.Searcher(as_store(conn), model)
        for method, fn in (
            ("embedding alone", lambda q, s=searcher: s.vector_only(q, project_id=pid, limit=3)),
            ("hybrid", lambda q, s=searcher: s.search(q, project_id=pid, limit=3)),
        ):
            found = {"ordinary": 0, "hard": 0}
            for t in turns:
                for kind in found:
                    if record_of.get(t["id"]) in [h.record_id for h in fn(t[kind])][:3]:
                        found[kind] += 1
            results[(spec, method)] = (found["ordinary"], found["hard"], len(turns))
    hook = {"ordinary": 0, "hard": 0}
    for t in turns:
        for kind in hook:
            if record_of.get(t["id"]) in [
                h.record_id for h in recall.search(conn, t[kind], project_id=pid, limit=3)
            ]:
                hook[kind] += 1
    conn.close()
    return models, results, (hook["ordinary"], hook["hard"], len(turns))


def locomo(tmp, specs):
    import bench_locomo
    from benchdata import LOCOMO_ZIP, locomo_conversations, score

    if not os.path.exists(LOCOMO_ZIP):
        return None
    convs = locomo_conversations(LOCOMO_ZIP)
    os.environ["KIROLEARN_HOME"] = os.path.join(tmp, "home")
    import pickle

    marker = os.path.join(tmp, "ingested")
    if not os.path.exists(marker):
        projects, by_text = bench_locomo.ingest(tmp, convs)
        with open(marker, "wb") as fh:
            pickle.dump((projects, by_text), fh)
    with open(marker, "rb") as fh:
        projects, by_text = pickle.load(fh)
    from kirolearn.recall import context, semantic
    from kirolearn.recall import lexical as recall

    conn = recall.connect_readonly(budget=1e9)
    dia = bench_locomo.dia_of_records(conn, {k: list(v) for k, v in by_text.items()})
    questions = []
    for n_conv, (conv_id, _, qa) in enumerate(convs):
        pid = context.project_id(projects[conv_id])
        for q in qa:
            gold = {e.strip() for e in q.get("evidence", []) if re.fullmatch(r"D\d+:\d+", str(e).strip())}
            if q.get("category") in (1, 2, 3, 4) and gold:
                questions.append((n_conv % 2, pid, q["question"], gold))

    def measure(fn):
        halves = {0: [], 1: []}
        for half, pid, question, gold in questions:
            halves[half].append(score([dia.get(r, "?") for r in fn(question, pid)], gold, 5))
        return halves

    results, models = {}, {}
    for spec, model, per_second in embed_all(specs, "locomo"):
        models[spec] = (model, per_second)
        searcher = semantic.Searcher(as_store(conn), model)
        results[(spec, "embedding alone")] = measure(
            lambda q, pid, s=searcher: [h.record_id for h in s.vector_only(q, project_id=pid, limit=5)]
        )
        results[(spec, "hybrid")] = measure(
            lambda q, pid, s=searcher: [h.record_id for h in s.search(q, project_id=pid, limit=5)]
        )
    hook = measure(lambda q, pid: [h.record_id for h in recall.search(conn, q, project_id=pid, limit=5)])
    conn.close()
    return models, results, hook


def locomo_cell(halves) -> str:
    def mean(rows, k):
        return sum(r[k] for r in rows) / len(rows)

    every = halves[0] + halves[1]
    return (
        f"{mean(every, 0):.3f} / {mean(every, 1):.3f}  (odd {mean(halves[0], 0):.3f} / {mean(halves[0], 1):.3f}, "
        f"even {mean(halves[1], 0):.3f} / {mean(halves[1], 1):.3f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--keep", help="reuse (or create) the ingested stores under this folder")
    parser.add_argument("--only", choices=("coding", "locomo"))
    args = parser.parse_args()
    specs = [s.strip() for s in args.models.split(",") if s.strip()]
    os.environ["KIROLEARN_EMBEDDING_MODEL"] = "none"  # ingest without vectors; each model embeds below
    tmp = args.keep or tempfile.mkdtemp(prefix="kl-embeddings-")
    rows = []
    models = {}
    if args.only in (None, "coding"):
        models, results, hook = coding(os.path.join(tmp, "coding"), specs)
        rows.append(
            (
                "coding set, top 3 ordinary / hard: hook (lexical, no model)",
                f"{hook[0]} / {hook[1]} of {hook[2]}",
                "",
            )
        )
        for (spec, method), (o, h, n) in results.items():
            rows.append(
                (f"  {spec}: {method}", f"{o} / {h} of {n}", ">= 25 hard" if method == "hybrid" else "")
            )
    if args.only in (None, "locomo"):
        found = locomo(os.path.join(tmp, "locomo"), specs)
        if found is None:
            rows.append(("LoCoMo", "not found: skipped", ""))
        else:
            models, results, hook = found
            rows.append(("LoCoMo R@5 / hit@5: hook (lexical, no model)", locomo_cell(hook), ""))
            for (spec, method), halves in results.items():
                rows.append(
                    (
                        f"  {spec}: {method}",
                        locomo_cell(halves),
                        ">= 0.68 / 0.75" if method == "hybrid" else "",
                    )
                )
    for spec, (model, per_second) in models.items():
        rows.append(
            (
                f"{spec}: load (fresh process) / records per s / size",
                f"{load_seconds(spec):.2f} s / {per_second or 0:,.0f} / {model_size(model)}",
                "",
            )
        )
    print_table("embedding models side by side (no LLM)", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
