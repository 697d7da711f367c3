"""LoCoMo retrieval: evidence R@5, hit@5, R@10 and latency of kirolearn beside its baselines.

Every dialog turn of the public LoCoMo release (../shared/bench/locomo/) goes in
as one prompt event of its session, one project per conversation, through the
product's spool → drain path in process (see benchdata.py), with no model
configured. Then the 1,540 questions of categories 1–4 are asked in their
conversation's project. A question's evidence turns are its gold records.

Methods, all over the same store:
  plain BM25      FTS5 OR-of-terms over the record text, no expansion, no vectors
  embedding alone cosine of the question's vector and each record's vector
  hook (lexical)  recall.search: what the prompt hook runs (stdlib, SQLite only)
  kirolearn       semantic.search: what `kirolearn search` / MCP run (hybrid)
  local model     all-MiniLM-L6-v2 alone and in the hybrid, with the `model` extra (benchlocal.py)
Two layouts (issue #22): "session", one agent session per LoCoMo session (neighbouring turns share
text through the drainer's expansion column), and "turn", one agent session per turn (a memory
found on its own words). Fusion choices were made on the odd conversations (1st, 3rd, ...) only;
the even ones are the held-out figures. Prints a table; never fails.

    python bench/bench_locomo.py [--keep DIR] [--zip PATH] [--layouts session,turn]
"""

import argparse
import os
import re
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlocal  # noqa: E402
from benchdata import (  # noqa: E402
    LOCOMO_ZIP,
    PlainBM25,
    drain_all,
    locomo_conversations,
    make_project,
    score,
    spool_turn,
    turn_text,
)
from benchstore import as_store  # noqa: E402
from benchtable import pct, print_table  # noqa: E402


def gold_turns(q: dict) -> "set[str]":
    """A LoCoMo question's evidence turns ("D<session>:<turn>"), for the categories scored (1-4); else empty."""
    if q.get("category") not in (1, 2, 3, 4):
        return set()
    return {e.strip() for e in q.get("evidence", []) if re.fullmatch(r"D\d+:\d+", str(e).strip())}


def _key(text: str) -> str:
    return " ".join(text.split())[:100]


def ingest(tmp: str, convs, per_turn: bool = False) -> "tuple[dict, dict]":
    """Spool and drain every turn; returns ({conv: project_root}, {(session_id, key): [dia_ids]})."""
    projects, by_text = {}, {}
    for conv_id, sessions, _ in convs:
        project = make_project(os.path.join(tmp, "projects", f"conv{conv_id}"))
        projects[conv_id] = project
        for number, when, turns in sessions:
            for i, turn in enumerate(turns):
                sid = f"locomo-{conv_id}-s{number}" + (f"-t{i}" if per_turn else "")
                text = turn_text(turn)
                spool_turn(project, sid, text, when + 30 * i)
                by_text.setdefault((sid, _key(text)), []).append(turn["dia_id"])
    drain_all()
    return projects, by_text


def dia_of_records(conn, by_text) -> "dict[str, str]":
    out = {}
    for record_id, session_id, title in conn.execute(
        "select record_id, session_id, title from memory_records"
    ):
        dias = by_text.get((session_id, _key(title)))
        if dias:
            out[record_id] = dias.pop(0) if len(dias) > 1 else dias[0]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zip", default=LOCOMO_ZIP)
    parser.add_argument("--keep", help="reuse (or create) the ingested stores in this folder")
    parser.add_argument(
        "--layouts",
        default="session,turn",
        help="session: one agent session per LoCoMo session; turn: one per turn",
    )
    parser.add_argument(
        "--methods",
        default="bm25,embedding,hook,kirolearn,local,kirolearn-local",
        help="local, kirolearn-local: all-MiniLM-L6-v2 alone / in the hybrid, when installed",
    )
    args = parser.parse_args()
    if not os.path.exists(args.zip):
        print(f"LoCoMo not found at {args.zip}: skipped")
        return 0
    convs = locomo_conversations(args.zip)
    base = args.keep or tempfile.mkdtemp(prefix="kl-locomo-")
    for layout in args.layouts.split(","):
        # the session layout keeps the folder's old place, so stores kept before still serve
        run_layout(
            os.path.join(base, "per-turn") if layout == "turn" else base,
            convs,
            layout,
            args.methods.split(","),
        )
    return 0


def run_layout(tmp: str, convs, layout: str, chosen) -> None:
    os.makedirs(tmp, exist_ok=True)
    os.environ["KIROLEARN_HOME"] = os.path.join(tmp, "home")
    os.environ["KIROLEARN_EMBEDDING_MODEL"] = (
        "wordllama/l2_supercat_256"  # the local model's rows embed a copy
    )
    from kirolearn.recall import context, semantic
    from kirolearn.recall import lexical as recall
    from kirolearn.recall.embeddings import registry as embeddings

    embeddings.CACHE.clear()
    semantic._INDEXES.clear()
    marker = os.path.join(tmp, "ingested")
    start = time.perf_counter()
    import pickle

    if not os.path.exists(marker):
        projects, by_text = ingest(tmp, convs, per_turn=layout == "turn")
        with open(marker, "wb") as fh:
            pickle.dump((projects, by_text), fh)
        ingest_s = time.perf_counter() - start
    else:
        with open(marker, "rb") as fh:
            projects, by_text = pickle.load(fh)
        ingest_s = 0.0
    conn = recall.connect_readonly(budget=1e9)
    dia = dia_of_records(conn, {k: list(v) for k, v in by_text.items()})
    searcher = semantic.Searcher(as_store(conn))
    plain = PlainBM25(conn)
    methods = {
        "plain BM25": plain,
        "embedding alone": lambda q, pid, k: [
            h.record_id for h in searcher.vector_only(q, project_id=pid, limit=k)
        ],
        "hook (lexical, SQLite only)": lambda q, pid, k: [
            h.record_id for h in recall.search(conn, q, project_id=pid, limit=k)
        ],
        "kirolearn search (hybrid)": lambda q, pid, k: [
            h.record_id for h in searcher.search(q, project_id=pid, limit=k)
        ],
    }
    wanted = {
        "bm25": "plain BM25",
        "embedding": "embedding alone",
        "hook": "hook (lexical, SQLite only)",
        "kirolearn": "kirolearn search (hybrid)",
        "local": "local model alone",
        "kirolearn-local": "kirolearn search with local model",
    }
    notes = []
    if {"local", "kirolearn-local"} & set(chosen):  # all-MiniLM-L6-v2 vectors beside the default's
        local_searcher, notes = benchlocal.prepare(tmp)
        if local_searcher is not None:
            methods["local model alone"] = lambda q, pid, k: [
                h.record_id for h in local_searcher.vector_only(q, project_id=pid, limit=k)
            ]
            methods["kirolearn search with local model"] = lambda q, pid, k: [
                h.record_id for h in local_searcher.search(q, project_id=pid, limit=k)
            ]
    methods = {wanted[m]: methods[wanted[m]] for m in chosen if wanted[m] in methods}
    results = {
        name: {"r5": [], "h5": [], "r10": [], "ms": [], "cat": {}, "half": {0: [], 1: []}} for name in methods
    }
    asked = 0
    for n_conv, (conv_id, _, qa) in enumerate(convs):
        pid = context.project_id(projects[conv_id])
        for q in qa:
            gold = gold_turns(q)
            if not gold:
                continue
            asked += 1
            for name, fn in methods.items():
                t0 = time.perf_counter()
                ranked = fn(q["question"], pid, 10)
                results[name]["ms"].append((time.perf_counter() - t0) * 1000)
                dias = [dia.get(r, "?") for r in ranked]
                r5, h5 = score(dias, gold, 5)
                r10, _ = score(dias, gold, 10)
                res = results[name]
                res["r5"].append(r5), res["h5"].append(h5), res["r10"].append(r10)
                res["cat"].setdefault(q["category"], []).append(h5)
                res["half"][n_conv % 2].append((r5, h5))
    print(
        f"LoCoMo, {layout} layout: {sum(len(t) for _, s, _ in convs for _, _, t in s)} turns in {len(convs)} "
        f"projects, {len(dia)} records mapped, {asked} questions (categories 1-4)"
        + (f", ingested through spool+drain in {ingest_s:.0f} s" if ingest_s else "")
    )
    for note in notes:
        print(note)
    rows = []
    goal = {"session": ">= 0.72 / 0.80 /", "turn": "hit@5 >= 0.70"}[layout]
    for name, res in results.items():
        mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
        cats = " ".join(f"{c}:{mean(v):.2f}" for c, v in sorted(res["cat"].items()))
        halves = [
            (mean([r for r, _ in res["half"][h]]), mean([x for _, x in res["half"][h]])) for h in (0, 1)
        ]
        rows.append(
            (
                f"{name}: held out (even conversations) R@5 / hit@5",
                f"{halves[1][0]:.3f} / {halves[1][1]:.3f}",
                goal if name.startswith("kirolearn search") else "",
            )
        )
        rows.append(
            (
                "  tuned-on half (odd conversations) R@5 / hit@5",
                f"{halves[0][0]:.3f} / {halves[0][1]:.3f}",
                "",
            )
        )
        rows.append(
            (
                "  all: evidence R@5 / hit@5 / R@10",
                f"{mean(res['r5']):.3f} / {mean(res['h5']):.3f} / {mean(res['r10']):.3f}",
                "",
            )
        )
        rows.append(
            (
                "  hit@5 by category / p50 / p95 ms",
                f"{cats} / {statistics.median(res['ms']):.1f} / {pct(res['ms'], 0.95):.1f}",
                "",
            )
        )
    print_table(f"LoCoMo retrieval, {layout} layout ('local model' rows: all-MiniLM-L6-v2)", rows)
    conn.close()


if __name__ == "__main__":
    sys.exit(main())
