"""Soak: hooks, looping drains, a watcher and SIGKILLs at once; then count lost and duplicated events.

For the given time, in a throw-away KIROLEARN_HOME:
- `--writers` threads each run the real `kirolearn-hook` console script in a
  loop, every call with a unique command; a call counts as acknowledged when
  the hook exited 0 and said nothing on stderr;
- `--drains` threads each run `kirolearn drain` in a loop, and one
  `kirolearn drain --watch` runs throughout;
- a killer sends SIGKILL to a random running drain (or the watcher, which is
  then restarted) `--kills` times, evenly spread.
Then every process is stopped, one last drain runs, and `kirolearn export`
is read back: lost = acknowledged but not stored, duplicated = stored more
than once. Prints a table; never fails (exit 0), like every `make bench` step.

    python bench/soak.py [--seconds 90] [--writers 8] [--drains 4] [--kills 16] [--venv .venv]
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

from benchtable import print_table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--drains", type=int, default=4)
    parser.add_argument("--kills", type=int, default=16)
    parser.add_argument("--venv", default=os.path.dirname(os.path.dirname(os.path.abspath(sys.executable))))
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    bin_dir = os.path.join(os.path.abspath(args.venv), "bin")
    hook, kirolearn = os.path.join(bin_dir, "kirolearn-hook"), os.path.join(bin_dir, "kirolearn")
    rng = random.Random(args.seed)

    with tempfile.TemporaryDirectory(prefix="kirolearn-soak-") as tmp:
        env = dict(os.environ, KIROLEARN_HOME=os.path.join(tmp, "home"), HOME=os.path.join(tmp, "user"))
        for var in ("KIROLEARN_RAISE_ERRORS", "KIROLEARN_DISABLE", "KIROLEARN_MODEL", "KIRO_SESSION_ID"):
            env.pop(var, None)
        project = os.path.join(tmp, "project")
        os.makedirs(os.path.join(project, ".git"))
        os.makedirs(env["HOME"])
        stop = threading.Event()
        lock = threading.Lock()
        acked, refused = [], []
        running: list[subprocess.Popen] = []
        drain_runs, drain_failures, kills = Counter(), [], []

        def writer(w: int) -> None:
            i = 0
            while not stop.is_set():
                marker = f"soak-{w}-{i}"
                body = {
                    "hook_event_name": "postToolUse",
                    "cwd": project,
                    "session_id": f"soak-{w}",
                    "tool_name": "execute_bash",
                    "tool_input": {"command": f"echo {marker}"},
                    "tool_response": {"success": True, "result": [{"stdout": marker * 20}]},
                }
                done = subprocess.run(
                    [hook], input=json.dumps(body).encode(), env=env, capture_output=True, timeout=60
                )
                with lock:
                    (acked if done.returncode == 0 and not done.stderr else refused).append(marker)
                i += 1

        def start(argv):
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            with lock:
                running.append(proc)
            return proc

        def finish(proc, label):
            _, err = proc.communicate()
            with lock:
                running.remove(proc)
            drain_runs[label] += 1
            if proc.returncode not in (0, -signal.SIGKILL, -signal.SIGTERM):
                drain_failures.append(err.decode("utf-8", "replace").strip()[-300:])

        def drainer() -> None:
            while not stop.is_set():
                finish(start([kirolearn, "drain"]), "drain")

        def watcher() -> None:
            while not stop.is_set():
                proc = start([kirolearn, "drain", "--watch"])
                while proc.poll() is None and not stop.is_set():
                    time.sleep(0.1)
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                finish(proc, "watch")

        def killer() -> None:
            began = time.monotonic()
            moments = sorted(rng.uniform(0.02, 0.95) * args.seconds for _ in range(args.kills))
            for moment in moments:
                if stop.wait(max(0.0, began + moment - time.monotonic())):
                    return
                while not stop.is_set():  # the next running drain (or the watcher) dies
                    with lock:
                        victims = [p for p in running if p.poll() is None]
                    if victims:
                        victim = rng.choice(victims)
                        try:
                            victim.send_signal(signal.SIGKILL)
                            kills.append(victim.pid)
                        except ProcessLookupError:
                            continue
                        break
                    stop.wait(0.02)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(args.writers)]
        threads += [threading.Thread(target=drainer) for _ in range(args.drains)]
        threads += [threading.Thread(target=watcher), threading.Thread(target=killer)]
        began = time.monotonic()
        for t in threads:
            t.start()
        stop.wait(args.seconds)
        stop.set()
        for t in threads:
            t.join(timeout=120)
        elapsed = time.monotonic() - began

        final = subprocess.run(
            [kirolearn, "drain", "--flush", "--json"], env=env, capture_output=True, text=True, timeout=600
        )
        exported = subprocess.run([kirolearn, "export"], env=env, capture_output=True, text=True, timeout=600)
        stored = Counter()
        for line in exported.stdout.splitlines():
            item = json.loads(line)
            if item.get("type") == "event":
                command = (item.get("tool_input") or {}).get("command", "")
                if command.startswith("echo soak-"):
                    stored[command[5:]] += 1
        quarantine = os.path.join(env["KIROLEARN_HOME"], "spool", "quarantine")
        quarantined = (
            len([n for n in os.listdir(quarantine) if not n.endswith(".reason")])
            if os.path.isdir(quarantine)
            else 0
        )
        ready = os.path.join(env["KIROLEARN_HOME"], "spool", "ready")
        left = len(os.listdir(ready)) if os.path.isdir(ready) else 0

    lost = [m for m in acked if m not in stored]
    duplicated = sum(n - 1 for n in stored.values() if n > 1)
    rows = [
        ("duration (s)", f"{elapsed:.0f}", f"{args.seconds:.0f} asked"),
        ("hook writers / looping drains / watchers", f"{args.writers}/{args.drains}/1", ""),
        ("SIGKILLs sent", f"{len(kills)}", f"{args.kills} asked"),
        ("drain runs (one-shot / watch)", f"{drain_runs['drain']}/{drain_runs['watch']}", ""),
        ("drain runs that failed (not killed)", f"{len(drain_failures)}", "0"),
        ("events acknowledged by the hook", f"{len(acked)}", ""),
        ("hook calls that reported an error", f"{len(refused)}", "0"),
        ("events stored", f"{sum(stored.values())}", ""),
        ("lost (acknowledged, not stored)", f"{len(lost)}", "0"),
        ("duplicated (stored twice or more)", f"{duplicated}", "0"),
        ("left in ready/ after the last drain", f"{left}", "0"),
        ("quarantined", f"{quarantined}", "0"),
        ("last drain exit status", f"{final.returncode}", "0"),
    ]
    print_table(f"soak: {args.seconds:.0f} s of hooks, drains, a watcher and SIGKILLs", rows)
    for failure in drain_failures[:5]:
        print(f"  drain failure: {failure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
