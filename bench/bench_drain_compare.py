"""Two builds' drain passes side by side: a pass of 100 new turns and an idle pass, CPU seconds.

Each venv gets its own home and project; 100 turns (300 events) are spooled in one process with
that build's own capture code, then `kirolearn drain` runs as a process (what the schedule runs);
then five idle passes. Rounds alternate base and new, each round on the same home, so its store
grows by 100 turns a round. CPU time is the child's (user + system). Prints medians; never fails.

    python bench/bench_drain_compare.py --base /path/to/old/.venv --new .venv [--rounds 3]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile

from benchtable import print_table

SPOOL = """
import sys
from kirolearn.capture import events, spool
project, tag = sys.argv[1], sys.argv[2]
for t in range(100):
    for name, payload in (
        ("userPromptSubmit", {"prompt": f"fix the export of {tag} {t}"}),
        ("postToolUse", {"tool_name": "execute_bash", "tool_input": {"command": f"make export-{tag}-{t}"},
                         "tool_response": {"success": True, "result": [{"exit_status": "0", "stdout": "ok " * 40}]}}),
        ("stop", {"assistant_response": f"the export of {tag} {t} works again"}),
    ):
        event = events.build_event(name, {"cwd": project, "session_id": f"s-{tag}-{t // 10}", **payload})
        spool.append(event["event_id"], events.serialize(event))
"""


def child_cpu(argv, env) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--new", default=".venv")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    builds = {"base": os.path.abspath(args.base), "new": os.path.abspath(args.new)}
    work: dict = {}
    idle: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in builds:
            os.makedirs(os.path.join(tmp, name, "project", ".git"))
        for r in range(args.rounds):
            for name, venv in builds.items():
                env = {
                    **os.environ,
                    "KIROLEARN_HOME": os.path.join(tmp, name, "home"),
                    "KIROLEARN_EMBEDDING_MODEL": "none",
                }
                project = os.path.join(tmp, name, "project")
                python, kirolearn = (
                    os.path.join(venv, "bin", "python"),
                    os.path.join(venv, "bin", "kirolearn"),
                )
                subprocess.run([python, "-c", SPOOL, project, f"r{r}"], env=env, check=True)
                work.setdefault(name, []).append(child_cpu([kirolearn, "drain", "--flush"], env))
                idle.setdefault(name, []).extend(child_cpu([kirolearn, "drain"], env) for _ in range(3))
        rows = []
        for label, table in (("pass with 100 new turns", work), ("idle pass", idle)):
            med = {n: statistics.median(v) for n, v in table.items()}
            for n in builds:
                rows.append((f"{label}: {n} (CPU s, a process)", f"{med[n]:.3f}", ""))
            rows.append((f"{label}: new / base", f"{med['new'] / med['base']:.2f}", "<= 1.0 (no slower)"))
        print_table(f"drain passes, base vs new, {args.rounds} rounds alternating", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
