"""Recall speed: search latency at 1k/10k/100k records, and the prompt-submit hook over 100k.

Records are synthetic but shaped like real ones (titles, multi-sentence
summaries, facts, files), spread over 20 projects. Words follow a Zipf law
over ~4,100 words (the 120 domain words below are the most frequent, then
generated identifiers), as real text does; a uniform 120-word vocabulary would
make every query term match half the corpus.
Queries are developer prompts from tests/fixtures/relevance.json. The prompt
hook runs over the 20-project store, then over the same number of records in
one project (where the project narrows nothing). Prints a table; never fails.

With the recall server (issue #22): the same prompt hook and `kirolearn search` as whole processes
(the console script, whose fast path asks the server before click loads, beside the click command it
ran before, alternated with the bare interpreter) while `kirolearn serve-recall` runs with all-MiniLM-L6-v2 loaded (the one-command setup; wordllama
when its weights are missing). Its vectors for the synthetic records are random unit vectors of the
model's dimensions, written as the drainer writes them: the time of a query is the same, and
embedding 100k synthetic records (~40 a second) would take most of an hour.

    python bench/bench_recall.py [--venv DIR] [--sizes 1000,10000,100000] [--no-server]
"""

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchstore import as_store  # noqa: E402
from benchtable import compile_package, installed_hook, pct, print_table

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "relevance.json")
WORDS = (
    "database lock timeout export script migration alembic column index query login session token "
    "refresh middleware cache redis expire queue worker email signup checkout discount total report "
    "timezone docker image wheel arm64 postgres driver vite node npm workflow pagination cursor order "
    "reference apostrophe quote parameter injection sqlite wal journal busy retry backoff rate limit "
    "window structlog logging handler gunicorn request api endpoint test flaky ordering fixture mock "
    "config setting environment variable deploy staging production rollback feature flag build "
    "compile error exception traceback stack import module package version upgrade dependency"
).split()


def vocabulary(rng):
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "fi", "gu", "ha", "je"]
    extra = {"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(5000)}
    vocab = WORDS + sorted(extra - set(WORDS))[:4000]
    weights, total = [], 0.0
    for rank in range(1, len(vocab) + 1):
        total += 1.0 / rank
        weights.append(total)
    return vocab, weights


def fill(db_path, n, projects, rng):
    from kirolearn.store.sqlite import db as store

    db = store.open_db(db_path)
    have = db["memory_records"].count
    rows = []
    vocab, cum = vocabulary(rng)
    for i in range(have, n):
        root = projects[i % len(projects)]
        words = lambda k: " ".join(rng.choices(vocab, cum_weights=cum, k=k))  # noqa: E731
        rows.append(
            {
                "record_id": f"mr_{i:026d}",
                "project_id": store_pid(root),
                "project_root": root,
                "session_id": f"s{i // 10}",
                "title": words(8).capitalize(),
                "summary": ". ".join(words(14) for _ in range(4)),
                "facts": json.dumps([words(9) for _ in range(2)]),
                "concepts": json.dumps(words(3).split()),
                "files_touched": json.dumps([f"app/{rng.choice(WORDS)}.py"]),
                "observation_type": rng.choice(
                    ["tool_use", "tool_use", "session_summary", "error", "decision", "discovery"]
                ),
                "strategy": "bench",
                "source_event_ids": "[]",
                "run_id": None,
                "record_hash": f"h{i}",
                "created_at": f"2026-{1 + i % 11:02d}-{1 + i % 28:02d}T10:00:00.000Z",
            }
        )
    with db.atomic():
        db["memory_records"].insert_all(rows, batch_size=1000)
    db.conn.close()


def derive(embed: bool) -> None:
    """What the drainer adds for semantic recall: neighbour text always, vectors for the largest store."""
    from kirolearn.recall import semantic
    from kirolearn.recall.embeddings import registry as embeddings
    from kirolearn.store.sqlite import db as store

    db = store.open_db()
    semantic.enrich_pending(as_store(db))
    store.refresh_term_docs(db, force=True)
    if embed:
        semantic.index_pending(as_store(db), embeddings.get_model())
    db.conn.close()


def hybrid_row(n, prompts, pid):
    """`kirolearn search` / MCP search in process: BM25 + vectors + neighbours (semantic.Searcher)."""
    from kirolearn.recall import lexical, semantic

    conn = lexical.connect_readonly(budget=60.0)
    searcher = semantic.Searcher(as_store(conn))
    searcher.search(prompts[0], project_id=pid, limit=10)  # loads the model and the project's vectors once
    times = []
    for _ in range(3):
        for prompt in prompts:
            start = time.perf_counter()
            searcher.search(prompt, project_id=pid, limit=10)
            times.append((time.perf_counter() - start) * 1000)
    conn.close()
    return (
        f"hybrid search (vectors) at {n:,} records: median / p95 (ms)",
        f"{statistics.median(times):.1f} / {pct(times, 0.95):.1f}",
        "p95 <= 50 at 100k",
    )


def hook_rows(
    where: str,
    python: str,
    hook: "list[str]",
    sets: dict,
    project: str,
    runs: int,
    python3: "str | None" = None,
) -> list:
    """Whole-process prompt-submit hook runs, alternated with the venv's bare `python -c pass`."""
    times = {"bare": [], "py3": [], "fixture": [], "rare": []}
    cpu = {key: [] for key in times}
    printed = {"fixture": 0, "rare": 0}
    for i in range(runs):
        order = [("bare", [python, "-c", "pass"], b"")] + (
            [("py3", [python3, "-c", "pass"], b"")] if python3 else []
        )
        for key, chosen in sets.items():
            order.append(
                (
                    key,
                    hook,
                    json.dumps(
                        {
                            "hook_event_name": "userPromptSubmit",
                            "cwd": project,
                            "session_id": f"b{key}{i}{where}",
                            "prompt": chosen[i % len(chosen)],
                        }
                    ).encode(),
                )
            )
        for key, cmd, payload in order if i % 2 else order[::-1]:  # alternate the order too
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            out = subprocess.run(cmd, input=payload, capture_output=True, env=os.environ).stdout
            times[key].append((time.perf_counter() - start) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[key].append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
            if key in printed and out:
                printed[key] += 1
    bare, bare_cpu = statistics.median(times["bare"]), statistics.median(cpu["bare"])
    rows = []
    for key, label in (("fixture", "fixture prompts"), ("rare", "prompts naming rarer stored words")):
        med = statistics.median(times[key])
        rows.append(
            (
                f"prompt-submit hook {where}, {label}: median / p90 (ms)",
                f"{med:.1f} / {pct(times[key], 0.9):.1f}",
                "",
            )
        )
        rows.append(("  runs that printed memory", f"{printed[key]}/{runs}", ""))
        if python3:
            rows.append(
                (
                    "  ratio to `python3 -c pass` (PATH shim)",
                    f"{med / statistics.median(times['py3']):.2f}",
                    "",
                )
            )
        rows += [
            ("  ratio to venv `python -c pass`", f"{med / bare:.2f}", "<= 3.0"),
            (
                "  CPU-time ratio to venv `python -c pass` (steadier on a loaded machine)",
                f"{statistics.median(cpu[key]) / bare_cpu:.2f}",
                "",
            ),
        ]
    return rows


def fake_vectors(model_id: str, dims: int) -> int:
    """Random unit vectors of `model_id` for every record that has none (the drainer's rows, timing only)."""
    import numpy as np

    from kirolearn.store.sqlite import db as store

    db = store.open_db()
    rng = np.random.default_rng(7)
    total = 0
    while True:
        rows = store.records_to_embed(db, model_id, limit=5000)
        if not rows:
            break
        vectors = rng.standard_normal((len(rows), dims)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.save_vectors(
            db,
            [
                {
                    "record_id": r["record_id"],
                    "project_id": r["project_id"],
                    "model_id": model_id,
                    "dimensions": dims,
                    "vector": vectors[i].tobytes(),
                    "text_hash": "bench",
                }
                for i, r in enumerate(rows)
            ],
        )
        total += len(rows)
    db.conn.close()
    return total


def server_rows(
    venv: str, python: str, hook: "list[str]", sets: dict, project: str, runs: int, n: int
) -> list:
    """The prompt hook and `kirolearn search` (whole processes) while the recall server runs."""
    from kirolearn.recall import client
    from kirolearn.recall.embeddings.registry import EmbeddingUnavailable, get_model

    try:
        model = get_model("local/all-MiniLM-L6-v2")
        model.embed_batch(["warm up"])
    except EmbeddingUnavailable:
        model = get_model("wordllama/l2_supercat_256")
    fake_vectors(model.model_id, 384 if model.model_id.startswith("local/") else 256)
    env = dict(os.environ, KIROLEARN_EMBEDDING_MODEL=model.model_id)
    kirolearn = os.path.join(venv, "bin", "kirolearn")
    server = subprocess.Popen(
        [kirolearn, "serve-recall"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    rows = []
    try:
        deadline = time.monotonic() + 300
        while client.ask({"op": "ping"}, 2.0) is None:
            if server.poll() is not None or time.monotonic() > deadline:
                return [("recall server", "did not start: " + server.stderr.read().decode()[-300:], "")]
            time.sleep(0.1)
        for prompt in sets["fixture"][:3]:  # its first queries load the project's vectors
            client.ask({"op": "prompt", "query": prompt, "project_id": store_pid(project), "limit": 5}, 30.0)
        rows += hook_rows(
            f"over {n:,} records, recall server up ({model.model_id})", python, hook, sets, project, runs
        )
        # the console script (its fast path: kirolearn.cli.fast), the click command it ran before, the bare interpreter
        click = [
            python,
            "-c",
            "import sys; sys.argv[0] = 'kirolearn'; from kirolearn.cli.commands import cli; cli()",
        ]
        times = {"bare": [], "search": [], "click": []}
        same = 0
        for i in range(runs):
            query = sets["fixture"][i % len(sets["fixture"])]
            order = [
                ("bare", [python, "-c", "pass"]),
                ("search", [kirolearn, "search", query, "--project", project]),
                ("click", click + ["search", query, "--project", project]),
            ]
            outs = {}
            for key, cmd in order if i % 2 else order[::-1]:
                start = time.perf_counter()
                outs[key] = subprocess.run(cmd, capture_output=True, env=env).stdout
                times[key].append((time.perf_counter() - start) * 1000)
            same += outs["search"].split()[:1] == outs["click"].split()[:1]  # the same first record
        bare = statistics.median(times["bare"])
        for key, label, target in (
            ("search", "`kirolearn search` whole process, recall server up", "p50 <= 150"),
            ("click", "  the same through the click command (the path before kirolearn.cli.fast)", ""),
        ):
            rows.append(
                (
                    f"{label}: p50 / p90 (ms)",
                    f"{statistics.median(times[key]):.1f} / {pct(times[key], 0.9):.1f}",
                    target,
                )
            )
            rows.append(
                ("  ratio to venv `python -c pass`", f"{statistics.median(times[key]) / bare:.2f}", "")
            )
        rows.append(("  runs where both printed the same first record", f"{same}/{runs}", ""))
        answered = client.ask({"op": "ping"}, 2.0)
        rows.append(("  requests the server answered", f"{(answered or {}).get('served', '?')}", ""))
    finally:
        server.terminate()
        server.wait(timeout=60)
    return rows


def store_pid(root):
    from kirolearn.recall.context import project_id

    return project_id(root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=os.path.join(os.path.dirname(HERE), ".venv"))
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--no-server", action="store_true", help="skip the rows with the recall server up")
    parser.add_argument(
        "--skip-one-project",
        action="store_true",
        help="skip the hook over the largest size's records in one project",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    compile_package(args.venv)
    prompts = [q["prompt"] for q in json.load(open(FIXTURE))["queries"]]
    rng = random.Random(3)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        home = os.path.join(tmp, "home")
        os.environ["KIROLEARN_HOME"] = home
        from kirolearn.core import paths
        from kirolearn.recall import context, lexical

        projects = [os.path.join(tmp, f"project{i}") for i in range(20)]
        for p in projects:
            os.makedirs(os.path.join(p, ".git"))
        for n in sizes:
            fill(paths.db_path(), n, projects, rng)
            derive(n == sizes[-1])
            conn = lexical.connect_readonly(budget=5.0)
            pid = context.project_id(projects[0])
            times = []
            for _ in range(3):
                for prompt in prompts:
                    start = time.perf_counter()
                    lexical.search(conn, prompt, project_id=pid, limit=15)
                    times.append((time.perf_counter() - start) * 1000)
            conn.close()
            rows.append(
                (
                    f"search at {n:,} records: median / p95 (ms)",
                    f"{statistics.median(times):.1f} / {pct(times, 0.95):.1f}",
                    "p95 <= 20 at 100k",
                )
            )
            if n == sizes[-1]:
                rows.append(hybrid_row(n, prompts, context.project_id(projects[0])))
        # whole-process prompt-submit hook with recall over the largest store, on two prompt sets:
        # the fixture's developer prompts (most name only words that most synthetic records hold,
        # so little is printed) and prompts naming rarer words of the store (recall prints).
        python = os.path.join(args.venv, "bin", "python")
        hook = installed_hook(args.venv) + ["prompt-submit"]  # what `kirolearn install` writes for it
        python3 = shutil.which("python3") or python
        conn = lexical.connect_readonly(budget=5.0)
        total = conn.execute("select docs from term_docs where term = ''").fetchone()[0]
        rare = [
            r[0]
            for r in conn.execute(
                "select term from term_docs where docs between 20 and ? and length(term) > 5 "
                "order by term limit 400",
                [total // 50],
            )
        ]
        conn.close()
        pick = random.Random(5)
        printing = [
            f"the export broke again after the {pick.choice(rare)} change, is it the {pick.choice(rare)} config?"
            for _ in range(20)
        ]
        rows += hook_rows(
            f"over {sizes[-1]:,} records",
            python,
            hook,
            {"fixture": prompts, "rare": printing},
            projects[0],
            args.runs,
            python3,
        )
        if not args.no_server:
            rows += server_rows(
                args.venv,
                python,
                hook,
                {"fixture": prompts, "rare": printing},
                projects[0],
                args.runs,
                sizes[-1],
            )
        if not args.skip_one_project:
            # the same records in one project (a user with one big repository): the project narrows nothing
            os.environ["KIROLEARN_HOME"] = os.path.join(tmp, "home-one")
            solo = os.path.join(tmp, "solo")
            os.makedirs(os.path.join(solo, ".git"))
            same = random.Random(3)  # the same fills from the same seed: the same records, in one project
            for n in sizes:
                fill(paths.db_path(), n, [solo], same)
                derive(False)
            rows += hook_rows(
                f"over {sizes[-1]:,} records of one project",
                python,
                hook,
                {"fixture": prompts, "rare": printing},
                solo,
                args.runs,
            )
    print_table("recall speed", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
