"""Scale (issue #32): what a drain pass, the prompt hook and search cost as the store grows 10x at a time.

Synthetic stores of 10k and 100k records (1M with --max 1000000) over 20 projects with a skewed share
(project k holds a share proportional to 1/(k+1): the first holds ~28 %), each record with the two
events of its turn, written in bulk through the store's own tables (bench_recall's record shape), not
one drain per record. The same home grows from one size to the next. At each size, in CPU seconds of
this process (the drain runs in process; embeddings off, so the figures are the store's):
- settle: the first drain pass after the import (expansions of every new record, the hook's word
  counts, the integrity check a new store is due);
- idle pass: a pass with nothing in the spool;
- new work: a pass with 100 new turns (300 events) in the spool;
- quick_check alone (a pass pays it after an unclean stop, else once per 100 passes or an hour, and after an error);
- in-process search (recall.lexical.search) p50 / p95 over the relevance fixture's prompts, and
  p50 / max over COMMON_PROMPTS (words most records hold);
- the prompt hook as a whole process, as a ratio to the same venv's `python -c pass` (alternated,
  median of --runs), and `kirolearn search` p50, without and with `kirolearn serve-recall` up (and the
  server's answer p50 / p95 as the hook asks it);
- database bytes per record (the file and its WAL, events included).
Then the growth of each figure per 10x. Prints tables; never fails.

    python bench/bench_scale.py [--venv DIR] [--max 100000] [--runs 15] [--sizes 1000000 --keep DIR]
"""

import argparse
import contextlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from bench_recall import FIXTURE, WORDS, vocabulary
from benchstore import as_store  # noqa: E402
from benchtable import compile_package, installed_hook, pct, print_table

PROJECTS = 20
# prompts of words most of the synthetic records hold ("database" and "lock" are in every one at 1M):
# at 1M before the match budget, 0.5 s, 2.2 s and an interrupted 9 s (docs/benchmarks-history.md)
COMMON_PROMPTS = [
    "fix the database lock",
    "database locked",
    "why did the export fail",
    "tried the migration again",
    "error",
    "the build failed again with an error in the test",
    "run the export again",
    "the session expired",
]


def project_weights() -> "list[float]":
    raw = [1.0 / (k + 1) for k in range(PROJECTS)]
    return [w / sum(raw) for w in raw]


def fill(n: int, projects: "list[str]", rng: random.Random) -> None:
    """Grow the store to n records (and two events a record) in one transaction: the FTS index's insert
    trigger is set aside while the rows go in and the index is rebuilt once at the end (1M records in
    minutes, not the hour a trigger-fed index takes); the trigger is put back as it was."""
    from kirolearn.core.project import project_id
    from kirolearn.store.sqlite import db as store

    db = store.open_db()
    have = db["memory_records"].count
    if have >= n:  # a kept store (--keep) already this big
        db.conn.close()
        return
    vocab, cum = vocabulary(rng)
    pids = [project_id(p) for p in projects]
    weights = project_weights()
    now = time.time()
    trigger = db.execute(
        "select sql from sqlite_master where type = 'trigger' and name = 'memory_records_ai'"
    ).fetchone()[0]

    def words(k):
        return " ".join(rng.choices(vocab, cum_weights=cum, k=k))

    with store.writing(db):
        db.execute("drop trigger memory_records_ai")
        for start in range(have, n, 5000):
            records, events = [], []
            for i in range(start, min(n, start + 5000)):
                k = rng.choices(range(PROJECTS), weights=weights)[0]
                when = (
                    time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now - 86400 * 30 * (n - i) / n)) + ".000Z"
                )
                session = f"s{k}-{i // 25}"  # ~25 turns a session
                ids = [f"{i:020d}A", f"{i:020d}B"]
                for j, (kind, text) in enumerate((("prompt", words(12)), ("session_summary", words(30)))):
                    body = {
                        "event_id": ids[j],
                        "kind": kind,
                        "session_id": session,
                        "project_root": projects[k],
                        "received_at": when,
                        "text": text,
                    }
                    events.append(
                        {
                            "event_id": ids[j],
                            "content_hash": f"h{ids[j]}",
                            "kind": kind,
                            "trigger": "bench",
                            "hook": "bench",
                            "generation": "v3",
                            "surface": "bench",
                            "agent": "kiro",
                            "session_id": session,
                            "project_id": pids[k],
                            "project_root": projects[k],
                            "cwd": projects[k],
                            "received_at": when,
                            "stored_at": when,
                            "actor": "dev",
                            "host": "bench",
                            "client_version": "1",
                            "body": json.dumps(body),
                            "extract_state": "done",
                            "run_id": "bench",
                        }
                    )
                records.append(
                    {
                        "record_id": f"mr_{i:026d}",
                        "project_id": pids[k],
                        "project_root": projects[k],
                        "session_id": session,
                        "title": words(8).capitalize(),
                        "summary": ". ".join(words(14) for _ in range(4)),
                        "facts": json.dumps([words(9) for _ in range(2)]),
                        "concepts": json.dumps(words(3).split()),
                        "files_touched": json.dumps([f"app/{rng.choice(WORDS)}.py"]),
                        "observation_type": rng.choice(
                            ["tool_use", "tool_use", "session_summary", "error", "decision"]
                        ),
                        "strategy": "bench",
                        "source_event_ids": json.dumps(ids),
                        "run_id": "bench",
                        "record_hash": f"h{i}",
                        "created_at": when,
                    }
                )
            store.insert_events(db, events)
            db["memory_records"].insert_all(records, batch_size=1000)
        db["memory_records"].rebuild_fts()
        db.execute(trigger)
    db.conn.close()


def spool_turns(project: str, count: int, tag: str) -> None:
    from kirolearn.capture import events, spool

    for t in range(count):
        for name, payload in (
            ("userPromptSubmit", {"prompt": f"fix the export of {tag} {t}"}),
            (
                "postToolUse",
                {
                    "tool_name": "shell",
                    # new work: a command no earlier pass ran (the same one again merges)
                    "tool_input": {"command": f"make export-{tag}-{t}"},
                    "tool_response": "ok " * 40,
                },
            ),
            ("stop", {"assistant_response": f"the export of {tag} {t} works again"}),
        ):
            event = events.build_event(
                name, {"cwd": project, "session_id": f"new-{tag}-{t // 10}", **payload}
            )
            spool.append(event["event_id"], events.serialize(event))


def drain_pass() -> "tuple[float, object]":
    """(CPU seconds, stats) of one drain pass as one `kirolearn drain` process runs it (a new drainer)."""
    from kirolearn import settings
    from kirolearn.pipeline import drain
    from kirolearn.store.sqlite import db as store

    held = drain.lock()
    try:
        db = store.open_db()
        start = time.process_time()
        stats = drain.Drainer(as_store(db), settings.load()).run_once()
        spent = time.process_time() - start
        db.conn.close()
    finally:
        held.release()
    return spent, stats


def quick_check_seconds() -> float:
    from kirolearn.store.sqlite import db as store

    db = store.open_db()
    start = time.process_time()
    store.quick_check(db)
    spent = time.process_time() - start
    db.conn.close()
    return spent


def search_times(prompts, pid) -> "tuple[list[float], list[float]]":
    """Wall and CPU milliseconds of each in-process search (CPU holds on a busy machine, wall does not)."""
    from kirolearn.recall import lexical

    conn = lexical.connect_readonly(
        budget=120.0
    )  # the hook's own budget is short; this measures, on a busy machine
    times, cpu = [], []
    for _ in range(3):
        for prompt in prompts:
            start, used = time.perf_counter(), time.process_time()
            lexical.search(conn, prompt, project_id=pid, limit=15)
            times.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - used) * 1000)
    conn.close()
    return times, cpu


def processes(python: str, hook: "list[str]", kirolearn: str, project: str, prompts, runs: int) -> dict:
    """Whole processes, alternated: bare interpreter, the prompt hook, `kirolearn search` (no server)."""
    times = {"bare": [], "hook": [], "search": []}
    cpu = {"bare": [], "hook": []}
    for i in range(runs):
        prompt = prompts[i % len(prompts)]
        payload = json.dumps(
            {"hook_event_name": "userPromptSubmit", "cwd": project, "session_id": f"b{i}", "prompt": prompt}
        ).encode()
        order = [
            ("bare", [python, "-c", "pass"], b""),
            ("hook", hook, payload),
            ("search", [kirolearn, "search", prompt, "--project", project], b""),
        ]
        for key, cmd, data in order if i % 2 else order[::-1]:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(cmd, input=data, capture_output=True, env=os.environ)
            times[key].append((time.perf_counter() - start) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if key in cpu:
                cpu[key].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    bare = statistics.median(times["bare"])
    return {
        "hook_ratio": statistics.median(times["hook"]) / bare,
        "hook_cpu_ratio": statistics.median(cpu["hook"]) / statistics.median(cpu["bare"]),
        "search_p50": statistics.median(times["search"]),
        "bare_ms": bare,
    }


def served(python: str, hook: "list[str]", kirolearn: str, project: str, prompts, runs: int) -> dict:
    """With `kirolearn serve-recall` up (embeddings off, as the whole bench: its lexical answers over the
    store): its answer p50 / p95 as the hook asks it, then the prompt hook and `kirolearn search` whole."""
    from kirolearn.recall import client
    from kirolearn.recall.context import project_id

    server = subprocess.Popen([kirolearn, "serve-recall"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while client.ask({"op": "ping"}, 2.0) is None:
            if server.poll() is not None or time.monotonic() > deadline:
                print(
                    "  recall server did not start: " + server.stderr.read().decode()[-300:], file=sys.stderr
                )
                return {}
            time.sleep(0.1)
        pid = project_id(project)
        answers = []
        for _ in range(3):
            for prompt in prompts:
                start = time.perf_counter()
                client.ask({"op": "prompt", "query": prompt, "project_id": pid, "limit": 5}, 30.0)
                answers.append((time.perf_counter() - start) * 1000)
        whole = processes(python, hook, kirolearn, project, prompts, runs)
        return {
            "server answer p50 (ms)": statistics.median(answers),
            "server answer p95 (ms)": pct(answers, 0.95),
            "hook_ratio_server": whole["hook_ratio"],
            "hook_cpu_ratio_server": whole["hook_cpu_ratio"],
            "search_p50_server": whole["search_p50"],
        }
    finally:
        server.terminate()
        server.wait(timeout=60)


def db_bytes() -> int:
    from kirolearn.core import paths

    path = paths.db_path()
    return sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--venv", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv")
    )
    parser.add_argument(
        "--max", type=int, default=100_000, help="the largest store (10k, 100k, ... up to it)"
    )
    parser.add_argument("--runs", type=int, default=15, help="whole-process runs of each kind (median)")
    parser.add_argument("--sizes", help="comma-separated sizes instead of 10k, 100k, ... up to --max")
    parser.add_argument(
        "--keep",
        help="build the stores in this folder and keep them (a store already there "
        "grows from what it holds: its settle is then a pass over no import)",
    )
    args = parser.parse_args()
    sizes = (
        [int(n) for n in args.sizes.split(",")]
        if args.sizes
        else [n for n in (10_000, 100_000, 1_000_000, 10_000_000) if n <= args.max]
    )
    compile_package(args.venv)
    python = os.path.join(args.venv, "bin", "python")
    hook = installed_hook(args.venv) + ["prompt-submit"]
    kirolearn = os.path.join(args.venv, "bin", "kirolearn")
    prompts = [q["prompt"] for q in json.load(open(FIXTURE))["queries"]]
    rng = random.Random(3)
    figures = {}
    with contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory() as tmp:
        os.environ["KIROLEARN_HOME"] = os.path.join(tmp, "home")
        os.environ["KIROLEARN_EMBEDDING_MODEL"] = "none"  # the store's costs, not a model's
        from kirolearn.recall import context

        projects = [os.path.join(tmp, f"project{k}") for k in range(PROJECTS)]
        for p in projects:
            os.makedirs(os.path.join(p, ".git"), exist_ok=True)
        for n in sizes:
            started = time.monotonic()
            fill(n, projects, rng)
            filled = time.monotonic() - started
            settle, _ = drain_pass()
            idle = statistics.median(drain_pass()[0] for _ in range(5))
            spool_turns(projects[3], 100, f"n{n}")
            new_work, stats = drain_pass()
            assert stats.stored == 300, stats
            times, cpu = search_times(prompts, context.project_id(projects[0]))
            common, common_cpu = search_times(COMMON_PROMPTS, context.project_id(projects[0]))
            figures[n] = {
                "settle after the import (CPU s)": settle,
                "idle pass (CPU s)": idle,
                "pass with 100 new turns (CPU s)": new_work,
                "quick_check alone (CPU s)": quick_check_seconds(),
                "in-process search p50 (ms)": statistics.median(times),
                "in-process search p95 (ms)": pct(times, 0.95),
                "in-process search p50 (CPU ms)": statistics.median(cpu),
                "in-process search p95 (CPU ms)": pct(cpu, 0.95),
                "in-process search of common words, p50 / max (CPU ms)": (
                    statistics.median(common_cpu),
                    max(common_cpu),
                ),
                **{
                    k: v
                    for k, v in processes(python, hook, kirolearn, projects[0], prompts, args.runs).items()
                },
                **served(python, hook, kirolearn, projects[0], prompts, args.runs),
                "database bytes per record": db_bytes() / n,
            }
            print(
                f"  {n:,} records: filled in {filled:.0f} s, measured in {time.monotonic() - started - filled:.0f} s: "
                + json.dumps(
                    {
                        k: [round(x, 4) for x in v] if isinstance(v, tuple) else round(v, 4)
                        for k, v in figures[n].items()
                    }
                ),
                file=sys.stderr,
                flush=True,
            )
    names = {
        "hook_ratio": "prompt hook / bare `python -c pass` (wall)",
        "hook_cpu_ratio": "prompt hook / bare `python -c pass` (CPU)",
        "search_p50": "`kirolearn search` p50, no server (ms)",
        "bare_ms": "bare `python -c pass` (ms)",
        "hook_ratio_server": "prompt hook / bare, recall server up (wall)",
        "hook_cpu_ratio_server": "prompt hook / bare, recall server up (CPU)",
        "search_p50_server": "`kirolearn search` p50, recall server up (ms)",
    }
    targets = {
        "idle pass (CPU s)": "<= 1.5x per 10x",
        "pass with 100 new turns (CPU s)": "<= 1.5x per 10x",
        "hook_ratio": "<= 3.0 at 1M; <= 1.5x per 10x",
        "settle after the import (CPU s)": "linear (10x per 10x)",
        "in-process search p95 (ms)": "<= 20 at 1M",
        "in-process search of common words, p50 / max (CPU ms)": "max <= 20 at 1M",
        "search_p50": "<= 1000 at 1M",
        "hook_ratio_server": "<= 3.0 at 1M",
        "server answer p95 (ms)": "<= 50 at 1M",
        "search_p50_server": "<= 150 at 1M",
    }
    rows = []
    for key in figures[sizes[0]]:
        values = [figures[n][key] for n in sizes]
        if isinstance(values[0], tuple):  # (p50, max): shown together, growth of the max
            shown = " / ".join(f"{a:.1f}, {b:.1f}" for a, b in values)
            growth = " ".join(f"{b[1] / a[1]:.2f}x" if a[1] else "-" for a, b in zip(values, values[1:]))
            rows.append((key, shown, f"growth per 10x (max): {growth or '-'}   {targets.get(key, '')}"))
            continue
        shown = " / ".join(f"{v:.3f}" if v < 10 else f"{v:,.0f}" for v in values)
        growth = " ".join(f"{b / a:.2f}x" if a else "-" for a, b in zip(values, values[1:]))
        rows.append((names.get(key, key), shown, f"growth per 10x: {growth or '-'}   {targets.get(key, '')}"))
    print_table(
        f"scale: {' / '.join(f'{n:,}' for n in sizes)} records over {PROJECTS} projects (skewed)", rows
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
