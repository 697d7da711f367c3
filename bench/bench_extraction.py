"""Extraction (#36): the deterministic extractor against a local model, on the coding set's held-out half.

Two homes, one per extractor. Each gets the same distractor commit messages, drained with the
deterministic extractor, then the 20 held-out turns of bench/data/coding_set.json (odd positions; no
extraction choice was made on them), drained with the extractor under test: nothing, or the real
llama.cpp server with Gemma 3 270M (tests/llmserver.py; built once into ~/.cache/kirolearn-llm by
`python tests/llmserver.py --ensure`). Only the target turns meet the model, so its cost is theirs.

For each extractor it prints:
- recall@3: a turn counts when a record made from its events is in the top 3 that the prompt hook
  would inject (lexical, no recall server), for the ordinary and the hard question of each turn;
- the context block's size for the ordinary questions, in tokens (characters / 4, an estimate);
- the share of the turns' batches that fell back to the deterministic extractor, and why;
- drain speed over the turns' events (events per wall second and per CPU second).

    python bench/bench_extraction.py [--distractors 300] [--skip-model]

Never fails the build: without the server's venv the model row says so.
"""

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
from benchdata import coding_set, distractors, drain_all, make_project, spool_turn  # noqa: E402
from benchtable import print_table  # noqa: E402

MODEL = "openai/gemma-3-270m"
os.environ.setdefault("LITELLM_LOG", "ERROR")  # litellm's INFO lines would bury the table
SESSION = 1  # one turn per session: a batch per turn, what a 270M model can take in one prompt


def held_out(turns: list) -> list:
    return [t for i, t in enumerate(turns) if i % 2 == 1]  # bench_coding.half(): odd positions


def model_config(url: str) -> str:
    """The [extract] keys of tests/test_llm_real.py: a patient budget, no retries, short answers."""
    values = {
        "model": MODEL,
        "api_base": url,
        "timeout_seconds": 240,
        "call_budget_seconds": 300,
        "drain_llm_budget_seconds": 3600,
        "retries": 0,
        "max_answer_tokens": 256,
        "max_field_chars": 300,
        "max_prompt_chars": 3000,
    }
    return "[extract]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())


def run_arm(tmp: str, name: str, turns: list, noise: list, url: "str | None") -> dict:
    home = os.path.join(tmp, name, "home")
    os.makedirs(home, exist_ok=True)
    os.environ["KIROLEARN_HOME"] = home
    os.environ["KIROLEARN_EMBEDDING_MODEL"] = "wordllama/l2_supercat_256"
    project = make_project(os.path.join(tmp, name, "app"))
    when = 1_700_000_000.0
    for n, text in enumerate(noise):
        first, _, rest = text.partition(". ")
        when += 60
        spool_turn(project, f"noise-s{n // 20}", first, when, rest or None)
    drain_all()  # distractors: always the deterministic extractor
    if url:
        with open(os.path.join(home, "config.toml"), "w", encoding="utf-8") as fh:
            fh.write(model_config(url))
    events_of = {}
    for n, turn in enumerate(turns):
        when += 60
        events_of[turn["id"]] = set(
            spool_turn(
                project,
                f"target-s{n // SESSION}",
                turn["prompt"],
                when,
                turn["outcome"] + (" Files: " + ", ".join(turn["files"]) if turn.get("files") else ""),
            )
        )
    wall, cpu = time.perf_counter(), time.process_time()
    drain_all()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    n_events = sum(len(ids) for ids in events_of.values())

    from kirolearn.recall import context, lexical

    conn = lexical.connect_readonly(budget=1e9)
    pid = context.project_id(project)
    made_from = collections.defaultdict(set)  # turn id -> its records
    for rid, sources in conn.execute("select record_id, source_event_ids from memory_records"):
        for tid, ids in events_of.items():
            if ids & set(json.loads(sources or "[]")):
                made_from[tid].add(rid)
    runs = [
        dict(zip(("extractor", "reason"), r))
        for r in conn.execute(
            "select extractor, coalesce(fallback_reason, '') from extraction_runs where outcome = 'ok' "
            "and session_id like 'target-%'"
        )
    ]
    strategies = collections.Counter(
        r[0] for r in conn.execute("select strategy from memory_records where session_id like 'target-%'")
    )

    def injected(question):
        return [
            h.record_id
            for h in lexical.relevant(lexical.search(conn, question, project_id=pid, limit=15), question)
        ][:3]

    found = {"ordinary": 0, "hard": 0}
    tokens = []
    for turn in turns:
        for kind in found:
            found[kind] += bool(set(injected(turn[kind])) & made_from[turn["id"]])
        text, _ = context.for_prompt(conn, project, turn["ordinary"], already=[])
        tokens.append(len(text) / 4)
    conn.close()
    fell_back = [r for r in runs if r["extractor"] == "deterministic" and r["reason"]]
    return {
        "found": found,
        "n": len(turns),
        "tokens": sum(tokens) / max(1, len(tokens)),
        "batches": len(runs),
        "fell_back": len(fell_back),
        "why": collections.Counter(r["reason"].split(":")[0] for r in fell_back),
        "strategies": strategies,
        "events": n_events,
        "wall": wall,
        "cpu": cpu,
    }


def local_server():
    """(the server's python, the GGUF), or None and why when its venv was never built."""
    import llmserver

    python = llmserver._venv_python(llmserver.DEFAULT_CACHE_DIR / "venv")
    marker = llmserver._read_marker(llmserver.DEFAULT_CACHE_DIR / "venv" / llmserver.MARKER_NAME)
    if not (python.exists() and llmserver._marker_matches(marker)):
        return None, "no llama.cpp server venv: `python tests/llmserver.py --ensure` builds it (about 8 min)"
    return (python, llmserver.assemble_model(python)), ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--distractors", type=int, default=300)
    parser.add_argument("--skip-model", action="store_true", help="the deterministic row only")
    args = parser.parse_args()
    turns = held_out(coding_set()["turns"])
    noise = distractors(args.distractors)
    tmp = tempfile.mkdtemp(prefix="kirolearn-bench-extraction-")
    results, note = {}, ""
    try:
        results["deterministic"] = run_arm(tmp, "deterministic", turns, noise, None)
        server, note = (None, "skipped (--skip-model)") if args.skip_model else local_server()
        if server is not None:
            import llmserver

            log = llmserver.DEFAULT_CACHE_DIR / "bench-server.log"
            with llmserver.running_server(*server, log_path=log, startup_timeout=300) as url:
                results[f"local model ({MODEL.split('/')[-1]}, llama.cpp)"] = run_arm(
                    tmp, "local", turns, noise, url
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = []
    for name, r in results.items():
        why = ", ".join(f"{k} ({v})" for k, v in r["why"].most_common()) or "none"
        rows += [
            (
                f"{name}: recall@3, ordinary / hard (of {r['n']})",
                f"{r['found']['ordinary']} / {r['found']['hard']}",
                "",
            ),
            ("  context block for an ordinary question", f"{r['tokens']:.0f} tokens", "chars / 4"),
            ("  batches that fell back to deterministic", f"{r['fell_back']} of {r['batches']}", why),
            (
                "  drain over the turns' events",
                f"{r['events'] / r['wall']:.2f} events/s",
                f"{r['events'] / max(r['cpu'], 1e-6):.0f} events per CPU s; {r['wall']:.1f} s wall",
            ),
            ("  records by strategy", ", ".join(f"{k} {v}" for k, v in r["strategies"].most_common()), ""),
        ]
    if note:
        rows.append(("local model", "not run", note))
    print_table(
        f"Extraction on the coding set's held-out half ({len(turns)} turns among {len(noise)} distractors)",
        rows,
    )


if __name__ == "__main__":
    main()
