"""Two builds' hooks side by side: postToolUse and the prompt hook, as ratios to a bare start.

Each venv gets its own home and project, filled the same way through its own hook and drain: 40
turns that write settings files (so records carry claims where the build keeps them) and ran a
command. Then, alternating base, new and `python -c pass` (each venv's own), the postToolUse hook
with a 2 KB payload and the prompt hook with a prompt that matches records, whose files are
unchanged (the common case) or changed since the drain (the re-check parses). Prints medians of
wall time and the ratios; never fails.

    python bench/bench_hook_compare.py --base /path/to/old/.venv --new .venv [--runs 30]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_hook import payload_2kb
from benchtable import compile_package, installed_hook, print_table


def fill(venv: str, home: str, project: str) -> None:
    env = {**os.environ, "KIROLEARN_HOME": home, "KIROLEARN_EMBEDDING_MODEL": "none"}
    hook = installed_hook(venv)
    os.makedirs(os.path.join(project, "config"), exist_ok=True)
    subprocess.run(["git", "init", "-q", project], check=True)

    def call(name, **payload):
        body = {"hook_event_name": name, "cwd": project, "session_id": payload.pop("session"), **payload}
        subprocess.run(hook, input=json.dumps(body).encode(), env=env, check=True, capture_output=True)

    for i in range(40):
        session, rel = f"fill-{i // 5}", f"config/service{i % 8}.py"
        text = f"RETRY_LIMIT_{i % 8} = {i}\nPOOL_SIZE_{i % 8} = {i + 1}\n"
        with open(os.path.join(project, rel), "w", encoding="utf-8") as fh:
            fh.write(text)
        call("userPromptSubmit", session=session, prompt=f"set RETRY_LIMIT_{i % 8} to {i} in {rel}")
        call(
            "postToolUse",
            session=session,
            tool_name="fs_write",
            tool_input={"command": "create", "path": os.path.join(project, rel), "file_text": text},
            tool_response={"success": True, "result": [f"Created {rel}"]},
        )
        call("stop", session=session, assistant_response=f"RETRY_LIMIT_{i % 8} is {i} now.")
    kirolearn = os.path.join(venv, "bin", "kirolearn")
    subprocess.run([kirolearn, "drain", "--flush"], env=env, check=True, capture_output=True)


def timed(argv, stdin: bytes, env: dict, cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(argv, input=stdin, env=env, cwd=cwd, capture_output=True)
    return (time.perf_counter() - start) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the venv of the build to compare against")
    parser.add_argument("--new", default=".venv")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    builds = {"base": os.path.abspath(args.base), "new": os.path.abspath(args.new)}
    with tempfile.TemporaryDirectory() as tmp:
        setup = {}
        for name, venv in builds.items():
            compile_package(venv)
            home, project = os.path.join(tmp, name, "home"), os.path.join(tmp, name, "project")
            fill(venv, home, project)
            env = {**os.environ, "KIROLEARN_HOME": home, "KIROLEARN_EMBEDDING_MODEL": "none"}
            setup[name] = (venv, env, project)
        times: dict = {}
        for case in ("postToolUse", "prompt, files as drained", "prompt, a file changed since"):
            if case == "prompt, a file changed since":
                for _, _, project in setup.values():
                    with open(os.path.join(project, "config/service3.py"), "w", encoding="utf-8") as fh:
                        fh.write("RETRY_LIMIT_3 = 99\nPOOL_SIZE_3 = 100\n")
            for run in range(args.runs):
                for name, (venv, env, project) in setup.items():
                    if case == "postToolUse":
                        stdin = payload_2kb(project)
                    else:
                        body = {
                            "hook_event_name": "userPromptSubmit",
                            "cwd": project,
                            "session_id": f"bench-{case[:6]}-{run}",  # a new session: nothing shown yet
                            "prompt": "what is RETRY_LIMIT_3 set to in config/service3.py?",
                        }
                        stdin = json.dumps(body).encode()
                    python = os.path.join(venv, "bin", "python")
                    times.setdefault((case, name), []).append(
                        timed(installed_hook(venv), stdin, env, project)
                    )
                    times.setdefault((case, name + " bare"), []).append(
                        timed([python, "-c", "pass"], b"", env, project)
                    )
        rows = []
        for case in ("postToolUse", "prompt, files as drained", "prompt, a file changed since"):
            hooks = {}
            for name in builds:
                hooks[name] = statistics.median(times[(case, name)])
                bare = statistics.median(times[(case, name + " bare")])
                rows.append(
                    (f"{case}: {name} hook (ms)", f"{hooks[name]:.1f} ({hooks[name] / bare:.2f}x bare)", "")
                )
            # the two hooks ran alternately: their ratio is the figure (each bare start is noisier)
            rows.append(
                (f"{case}: new / base hook", f"{hooks['new'] / hooks['base']:.2f}", "<= 1.0 (no slower)")
            )
        print_table(f"hooks, base vs new, {args.runs} runs each, alternating", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
