"""Drain throughput: events/s through parse → validate → dedup → scrub → store.

Builds a spool of N realistic events (prompts, tool calls with outputs of a few
hundred bytes to a few KB, turn ends) with the hook's own event builder, then
times `Drainer.ingest` over it, then the deterministic extraction of the
resulting batches, in a throw-away KIROLEARN_HOME. Prints a table; never fails.

    python bench/bench_drain.py [--events N]
"""

import argparse
import os
import random
import sys
import tempfile
import time

from benchstore import as_store  # noqa: E402
from benchtable import print_table


def make_spool(n: int, project: str) -> int:
    from kirolearn.capture import events, spool

    rng = random.Random(1)
    ready = os.path.join(spool.ensure_layout(), spool.READY)
    total_bytes = 0
    lines = [f"tests/test_mod_{i}.py::test_{i} PASSED" for i in range(200)]
    for i in range(n):
        session = f"sess-{i // 40}"
        step = i % 40
        if step == 0:
            payload = {
                "hook_event_name": "userPromptSubmit",
                "prompt": "Why does the export job fail when "
                f"the table has {i} rows? Check scripts/export.py and fix it.",
            }
        elif step == 39:
            payload = {
                "hook_event_name": "stop",
                "assistant_response": "Fixed the export: it now streams "
                "rows in batches of 500 and the tests pass. " * rng.randint(1, 4),
            }
        else:
            out = "\n".join(rng.sample(lines, rng.randint(5, 60)))
            if rng.random() < 0.05:
                out += f"\nexport API_TOKEN=tok_{rng.getrandbits(96):024x}"
            payload = {
                "hook_event_name": "postToolUse",
                "tool_name": "execute_bash",
                "tool_input": {"command": f"python -m pytest tests/ -q -k case_{i}"},
                "tool_response": {"success": True, "result": [{"exit_status": "0", "stdout": out}]},
            }
        payload.update(cwd=project, session_id=session)
        event = events.build_event(payload["hook_event_name"], payload)
        data = events.serialize(event)
        total_bytes += len(data)
        with open(os.path.join(ready, event["event_id"] + ".json"), "wb") as fh:  # no fsync: setup only
            fh.write(data)
    return total_bytes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["KIROLEARN_HOME"] = os.path.join(tmp, "home")
        project = os.path.join(tmp, "project")
        os.makedirs(os.path.join(project, ".git"))
        from kirolearn import settings
        from kirolearn.capture import spool
        from kirolearn.pipeline import drain
        from kirolearn.pipeline.drain import DrainStats
        from kirolearn.store.sqlite import db as store

        size = make_spool(args.events, project)
        conf = settings.load()
        db = store.open_db()
        drainer = drain.Drainer(as_store(db), conf)
        stats = DrainStats()
        files = spool.ready_files()
        start = time.perf_counter()
        done = []
        for i in range(0, len(files), conf.drain.chunk_size):
            done += drainer.ingest(files[i : i + conf.drain.chunk_size], stats)
        drainer.release(done, stats)  # quick_check, then unlink the spool files
        ingest_s = time.perf_counter() - start
        start = time.perf_counter()
        batches = drainer.ready_batches(time.time(), flush=True)
        extract_stats = DrainStats()
        for batch in batches:
            drainer.extract_batch(batch, extract_stats)
        extract_s = time.perf_counter() - start
        db_mb = os.path.getsize(store.config.db_path()) / 1e6
    rows = [
        ("events in the spool", f"{args.events}", ""),
        ("mean event size (bytes)", f"{size // args.events}", ""),
        ("ingest: parse+validate+dedup+scrub+store+verify (s)", f"{ingest_s:.1f}", ""),
        ("ingest throughput (events/s)", f"{args.events / ingest_s:,.0f}", ">= 3,000"),
        (
            "stored / duplicates / redactions",
            f"{stats.stored}/{stats.duplicates}/{sum(stats.redactions.values())}",
            "",
        ),
        ("deterministic extraction (batches/s)", f"{len(batches) / extract_s:,.0f}", ""),
        ("records written", f"{extract_stats.records_written}", ""),
        ("database size (MB)", f"{db_mb:.1f}", ""),
    ]
    print_table(f"drain throughput, {args.events} events, no LLM", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
