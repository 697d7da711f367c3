"""`make mutate`: mutation testing of the code whose bugs the suite must catch. A check, not a timed test.

Runs mutmut (https://mutmut.readthedocs.io) over functions picked by name, so the
run keeps working when the modules around them change: the content dedup, the
drain's ingest order, recall ranking, the session summaries, the daily spend
limit and the scrubber's entry points. The tests it runs are the fast in-process
ones listed under [tool.mutmut] in pyproject.toml. Prints, per area, how many
mutants the tests killed, and every survivor with its diff. Never fails the
build: survivors are for a person to read (docs/development.md, "Mutation testing").

    python tools/mutate.py [--list] [--long] [AREA ...]
"""

import fnmatch
import os
import re
import shutil
import subprocess
import sys
import time

AREAS = {
    "dedup": ["kirolearn.core.dedup.x_*"],
    "drain order": ["kirolearn.pipeline.drain.x*Drainer*_is_duplicate__mutmut_*"],
    "recall ranking": [
        "kirolearn.recall.lexical.x_relevant__mutmut_*",
        "kirolearn.recall.lexical.x__recency__mutmut_*",
    ],
    "summaries": [
        "kirolearn.pipeline.summaries.x_compress__mutmut_*",
        "kirolearn.pipeline.summaries.x__record_spend__mutmut_*",
    ],
    "spend limit": [
        "kirolearn.store.sqlite.db.x_daily_limit_reached__mutmut_*",
        "kirolearn.store.sqlite.db.x_spend_today__mutmut_*",
        "kirolearn.pipeline.drain.x*Drainer*_fallback_reason__mutmut_*",
    ],
    "scrubber": [
        "kirolearn.privacy.scrub.x*Scrubber*scrub_text__mutmut_*",
        "kirolearn.privacy.scrub.x*Scrubber*scrub_value__mutmut_*",
    ],
}
# The big functions around them: ~540 more mutants, most of them in message and bookkeeping strings.
# `python tools/mutate.py --long` (or MUTATE_LONG=1 make mutate) adds them; it takes an hour on 2 cores.
LONG = {
    "drain ingest": ["kirolearn.pipeline.drain.x*Drainer*ingest__mutmut_*"],
    "recall search": ["kirolearn.recall.lexical.x_search__mutmut_*"],
    "session_end": ["kirolearn.pipeline.summaries.x_session_end__mutmut_*"],
}
MUTMUT = os.path.join(os.path.dirname(sys.executable), "mutmut")
LINE = re.compile(r"^\s*(\S+): (.+)$")


def mutmut(*args, capture=True):
    return subprocess.run([MUTMUT, *args], capture_output=capture, text=True)


def statuses() -> "dict[str, str]":
    out = mutmut("results", "--all", "true").stdout
    return {m.group(1): m.group(2).strip() for m in map(LINE.match, out.splitlines()) if m}


def main(argv):
    if "--long" in argv or os.environ.get("MUTATE_LONG"):
        AREAS.update(LONG)
    areas = [a for a in argv if not a.startswith("-")] or list(AREAS)
    patterns = [p for a in areas for p in AREAS[a]]
    shutil.rmtree("mutants", ignore_errors=True)  # a clean run: results of older code never count
    started = time.monotonic()
    jobs = os.environ.get("MUTATE_JOBS", "2")
    run = mutmut("run", "--max-children", jobs, *patterns, capture=False) if "--list" not in argv else None
    found = statuses()
    total_killed = total = 0
    print(f"\nmutation testing ({time.monotonic() - started:.0f} s, mutmut, {jobs} workers)")
    print(f"{'area':<16} {'mutants':>8} {'killed':>7} {'survived':>9} {'other':>6}  survival")
    survivors = []
    for area in areas:
        names = sorted(n for n in found if any(fnmatch.fnmatch(n, p) for p in AREAS[area]))
        killed = [n for n in names if found[n] == "killed"]
        lived = [n for n in names if found[n] == "survived"]
        other = len(names) - len(killed) - len(lived)
        total += len(killed) + len(lived)
        total_killed += len(killed)
        rate = f"{len(lived) / (len(killed) + len(lived)):.0%}" if killed or lived else "-"
        print(f"{area:<16} {len(names):>8} {len(killed):>7} {len(lived):>9} {other:>6}  {rate}")
        survivors += lived
    if total:
        print(
            f"{'all':<16} {'':>8} {total_killed:>7} {total - total_killed:>9} {'':>6}  "
            f"{(total - total_killed) / total:.0%}"
        )
    for name in survivors:
        print("\n" + "\n".join(mutmut("show", name).stdout.strip().splitlines()[-12:]))
    return 0 if run is None or run.returncode in (0, 1) else run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
