"""Hook latency benchmark: whole-process wall time of `kirolearn-hook` vs bare Python.

Both commands run from the same virtual environment, the same way (a 2 KB
postToolUse payload piped on stdin), alternating, and the figure that matters
is the ratio of medians (design.md, "Benchmark conventions"). Prints a table;
never fails.

    python bench/bench_hook.py [--venv DIR] [--runs N]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchtable import installed_hook, pct, print_table

HERE = os.path.dirname(os.path.abspath(__file__))


def payload_2kb(cwd: str) -> bytes:
    """A realistic postToolUse payload of about 2 KB."""
    stdout = "".join(f"tests/test_module_{i}.py::test_case_{i} PASSED\n" for i in range(36))
    body = {
        "hook_event_name": "postToolUse",
        "cwd": cwd,
        "session_id": "c186a259-e55f-4572-abc7-bd3697cfcfb1",
        "tool_name": "execute_bash",
        "tool_input": {"command": "python -m pytest -q tests/", "summary": "run the test suite"},
        "tool_response": {"success": True, "result": [{"exit_status": "0", "stdout": stdout, "stderr": ""}]},
    }
    data = json.dumps(body).encode()
    return data


def time_run(cmd, stdin: bytes, env) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, input=stdin, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return (time.perf_counter() - start) * 1000



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=os.path.join(os.path.dirname(HERE), ".venv"))
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    python = os.path.join(args.venv, "bin", "python")
    hook = installed_hook(args.venv) + ["post-tool"]  # what `kirolearn install` writes for postToolUse
    script = os.path.join(args.venv, "bin", "kirolearn-hook")  # pip's console script (--portable installs)
    with tempfile.TemporaryDirectory() as tmp:
        project = os.path.join(tmp, "project")
        os.makedirs(os.path.join(project, ".git"))
        env = dict(os.environ, KIROLEARN_HOME=os.path.join(tmp, "home"))
        stdin = payload_2kb(project)
        bare, hooked, wrapper = [], [], []
        for _ in range(3):  # warm the page cache
            time_run([python, "-c", "pass"], stdin, env)
            time_run(hook, stdin, env)
        for _ in range(args.runs):
            bare.append(time_run([python, "-c", "pass"], stdin, env))
            hooked.append(time_run(hook, stdin, env))
            # pip's generated console-script wrapper imports `re` before our code runs
            wrapper.append(time_run([script, "post-tool"], stdin, env))
        spooled = len(os.listdir(os.path.join(tmp, "home", "spool", "ready")))
    med_bare, med_hook = statistics.median(bare), statistics.median(hooked)
    rows = [
        ("payload size (bytes)", f"{len(stdin)}", "~2 KB"),
        ("venv `python -c pass` median (ms)", f"{med_bare:.1f}", ""),
        ("installed hook command postToolUse median (ms)", f"{med_hook:.1f}", ""),
        ("installed hook command p90 (ms)", f"{pct(hooked, 0.9):.1f}", ""),
        ("pip's `kirolearn-hook` console script (--portable) median (ms)", f"{statistics.median(wrapper):.1f}", ""),
        ("hook / bare python ratio (medians)", f"{med_hook / med_bare:.2f}", "<= 2.0"),
        ("events spooled", f"{spooled}", f"{2 * args.runs + 3}"),
        ("Node-based Kiro memory hook, for scale (ms)", "~215", "reference/libraries"),
    ]
    print_table(f"hook latency, {args.runs} alternating runs each, venv {args.venv}\n"
                f"hook command: {' '.join(hook)}", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
