"""A big store on a nearly full disk (issue #32): the drain that runs out of room loses nothing.

Copies a kept store (`bench_scale.py --keep DIR`, e.g. the 1M one) into a tmpfs mounted for the
purpose, spools --turns new turns (three events each, with long tool output so the drain must grow
the database), then shrinks the tmpfs to what it holds plus --headroom KB and runs `kirolearn drain`:
- the drain must fail in one `Error:` line naming the disk, exit 1, and leave every new event in the
  spool (none stored half-way: the transaction rolls back);
- then the tmpfs grows back and a second drain must store every new event exactly once, and
  `PRAGMA quick_check` must say ok.
Prints a table: the store's size, what the full drain printed, the events lost and stored twice
(both must be 0). Needs root for `mount` (prints why and exits 0 without it); never fails the build.

    python bench/bench_fulldisk.py --home DIR/home [--turns 200] [--headroom 256]
"""

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

from benchtable import print_table


def used_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def disk_used(point: str) -> int:
    """Bytes the file system counts as used (whole blocks, unlike the files' sizes)."""
    st = os.statvfs(point)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def mount(point: str, size: int, remount: bool = False) -> None:
    size = -(-size // 4096) * 4096
    if remount:
        subprocess.run(["mount", "-o", f"remount,size={size}", point], check=True)
    else:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", point], check=True)


def spool_turns(count: int, project: str) -> "list[str]":
    from kirolearn.capture import events, spool

    ids = []
    for t in range(count):
        for name, payload in (
            ("userPromptSubmit", {"prompt": f"rebuild the index of shard {t}"}),
            (
                "postToolUse",
                {
                    "tool_name": "shell",
                    "tool_input": {"command": f"make shard-{t}"},
                    "tool_response": f"shard {t} line\n" * 400,
                },
            ),
            ("stop", {"assistant_response": f"shard {t} rebuilt"}),
        ):
            event = events.build_event(name, {"cwd": project, "session_id": f"full-{t // 10}", **payload})
            spool.append(event["event_id"], events.serialize(event))
            ids.append(event["event_id"])
    return ids


def stored(db_file: str, ids: "list[str]") -> "tuple[int, int]":
    """(distinct new events stored, rows of them beyond one each)."""
    conn = sqlite3.connect(db_file)
    try:
        rows = 0
        distinct = 0
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows += conn.execute(
                f"select count(*) from events where event_id in ({marks})", chunk
            ).fetchone()[0]
            distinct += conn.execute(
                f"select count(distinct event_id) from events where event_id in ({marks})", chunk
            ).fetchone()[0]
        return distinct, rows - distinct
    finally:
        conn.close()


def quick_check(db_file: str) -> str:
    conn = sqlite3.connect(db_file)
    try:
        return conn.execute("pragma quick_check").fetchone()[0]
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--home", required=True, help="a kept store's KIROLEARN_HOME (bench_scale.py --keep DIR: DIR/home)"
    )
    parser.add_argument("--turns", type=int, default=200, help="new turns to spool (three events each)")
    parser.add_argument("--headroom", type=int, default=256, help="free KB left on the disk for the drain")
    parser.add_argument("--kirolearn", default=os.path.join(os.path.dirname(sys.executable), "kirolearn"))
    args = parser.parse_args()
    if not os.path.exists(os.path.join(args.home, "kirolearn.db")):
        print(
            f"no store at {args.home}: build one with bench/bench_scale.py --keep DIR first", file=sys.stderr
        )
        return 0
    if os.geteuid() != 0:
        print("bench_fulldisk needs root to mount a tmpfs; skipped", file=sys.stderr)
        return 0
    point = tempfile.mkdtemp(prefix="kl-fulldisk-")
    home = os.path.join(point, "home")
    size = used_bytes(args.home)
    try:
        mount(point, size + 512 * 1024 * 1024)
    except (subprocess.CalledProcessError, OSError) as exc:
        print(f"cannot mount a tmpfs at {point} ({exc}); skipped", file=sys.stderr)
        return 0
    try:
        started = time.monotonic()
        shutil.copytree(args.home, home, ignore=shutil.ignore_patterns("*.sock", "*.lock"))
        copied = time.monotonic() - started
        os.environ["KIROLEARN_HOME"] = home
        project = os.path.join(point, "project")
        os.makedirs(os.path.join(project, ".git"))
        ids = spool_turns(args.turns, project)
        full = disk_used(point) + args.headroom * 1024
        mount(point, full, remount=True)
        env = {**os.environ, "KIROLEARN_HOME": home, "KIROLEARN_EMBEDDING_MODEL": "none"}
        first = subprocess.run(
            [args.kirolearn, "drain"], env=env, capture_output=True, text=True, timeout=3600
        )
        db_file = os.path.join(home, "kirolearn.db")
        after_full, twice_full = stored(db_file, ids)
        waiting = len(set(ids) & {n[:-5] for n in os.listdir(os.path.join(home, "spool", "ready"))})
        mount(point, full + 1024 * 1024 * 1024, remount=True)
        second = subprocess.run(
            [args.kirolearn, "drain"], env=env, capture_output=True, text=True, timeout=3600
        )
        after, twice = stored(db_file, ids)
        check = quick_check(db_file)
        error = (first.stderr.strip().splitlines() or ["(nothing)"])[-1]
        rows = [
            ("store copied (MB)", f"{size / 1e6:,.0f}", f"in {copied:.0f} s"),
            ("new events spooled", str(len(ids)), f"{args.turns} turns"),
            ("free space for the drain (KB)", str(args.headroom), ""),
            ("drain on the full disk: exit status", str(first.returncode), "goal: 1"),
            (
                "new events stored by it / left in the spool",
                f"{after_full} / {waiting}",
                f"goal: 0 / {len(ids)} (or all stored if it fit)",
            ),
            ("drain after room is made: exit status", str(second.returncode), "goal: 0"),
            ("new events stored", f"{after} / {len(ids)}", "goal: all"),
            ("events lost", str(len(ids) - after), "goal: 0"),
            ("events stored twice", str(twice + twice_full), "goal: 0"),
            ("quick_check", check, "goal: ok"),
        ]
        print_table("a big store on a nearly full disk", rows)
        print(f"the full drain said: {error}")
    finally:
        subprocess.run(["umount", point], check=False)
        shutil.rmtree(point, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
