"""Drain throughput: events/s through parse → validate → dedup → scrub → store.

Builds a spool of N realistic events (prompts, tool calls with outputs of a few
hundred bytes to a few KB, turn ends) with the hook's own event builder, then
times `Drainer.ingest` over it, then the deterministic extraction of the
resulting batches, in a throw-away KIROLEARN_HOME. Then, on the store it built, the passes a
scheduled drain makes: an idle pass, a pass with new work, quick_check alone (what a pass pays
when the check is due: hourly, every 100 passes, after an unclean stop or an error), and the
release of a pass's files into spool/done/ against the unlink it replaced. Prints a table; never fails.

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


def make_spool(n: int, project: str, start: int = 0) -> int:
    from kirolearn.capture import events, spool

    rng = random.Random(1)
    ready = os.path.join(spool.ensure_layout(), spool.READY)
    total_bytes = 0
    lines = [f"tests/test_mod_{i}.py::test_{i} PASSED" for i in range(200)]
    for i in range(start, start + n):
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


NEW_WORK = 40  # one turn's events: what a scheduled pass usually finds


def pass_costs(drainer, project: str, offset: int) -> dict:
    """Wall seconds of an idle pass, a new-work pass, quick_check alone and a pass's release, on the store
    the ingest built (each pass as `kirolearn drain` runs it, check not due unless said)."""
    import statistics

    from kirolearn.capture import spool

    drainer.run_once()  # the first pass pays the check (never checked): later ones are not due
    idle = []
    for _ in range(5):
        start = time.perf_counter()
        drainer.run_once()
        idle.append(time.perf_counter() - start)
    new = []
    for k in range(3):
        make_spool(NEW_WORK, project, start=offset + k * NEW_WORK)
        start = time.perf_counter()
        drainer.run_once()
        new.append(time.perf_counter() - start)
    start = time.perf_counter()
    problem = drainer.store.integrity_problem()
    check = time.perf_counter() - start
    assert not problem, problem
    ready = os.path.join(spool.root(), spool.READY)

    def files(tag: str) -> list:
        made = []
        for i in range(1000):
            path = os.path.join(ready, f"{tag}{i:06d}.json")
            with open(path, "wb") as fh:
                fh.write(b"{}")
            made.append(path)
        return made

    made = files("keep")
    start = time.perf_counter()
    spool.keep_done(made, "bench-release")
    keep = time.perf_counter() - start
    made = files("gone")
    start = time.perf_counter()
    for path in made:
        os.unlink(path)
    unlink = time.perf_counter() - start
    spool.drop_done("bench-release")
    return {
        "idle": statistics.median(idle),
        "new": statistics.median(new),
        "check": check,
        "keep": keep,
        "unlink": unlink,
    }


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
        from kirolearn.core import paths
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
        db_mb = os.path.getsize(paths.db_path()) / 1e6
        passes = pass_costs(drainer, project, args.events)
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
        ("idle pass, check not due (ms, median of 5)", f"{passes['idle'] * 1e3:.1f}", ""),
        (f"new-work pass, {NEW_WORK} events (ms, median of 3)", f"{passes['new'] * 1e3:.1f}", ""),
        ("quick_check alone (ms)", f"{passes['check'] * 1e3:.0f}", ""),
        ("quick_check / idle pass (ratio)", f"{passes['check'] / passes['idle']:.1f}x", ""),
        ("quick_check / new-work pass (ratio)", f"{passes['check'] / passes['new']:.1f}x", ""),
        (
            "quick_check per pass, paid once per 100 passes (ms)",
            f"{passes['check'] * 1e3 / drain.CHECK_EVERY_PASSES:.1f}",
            "",
        ),
        ("release 1,000 files into spool/done/ (ms)", f"{passes['keep'] * 1e3:.1f}", ""),
        ("unlink 1,000 files, the release it replaced (ms)", f"{passes['unlink'] * 1e3:.1f}", ""),
        ("release into done/ / unlink (ratio)", f"{passes['keep'] / passes['unlink']:.2f}x", "<= 2x"),
    ]
    print_table(f"drain throughput, {args.events} events, no LLM", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
