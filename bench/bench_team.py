"""Team store load: N developers push events into one PostgreSQL server while a teammate recalls.

Starts a throw-away PostgreSQL cluster on a Unix socket (tests/pgserver.py),
migrates a team store in it, and makes one git repository that every
developer has cloned at a path of their own (same remote, so one project).
Then, at once, in separate processes:
- each of --developers developers has its own KIROLEARN_HOME, joins the
  project, and in rounds writes a turn's events into its spool (the hook's own
  event builder) and runs `Memory().drain()`, which stores them locally and
  syncs with the team store; each round's first prompt carries a marker word;
- one reader (another teammate) drains in a loop (its drain only syncs: it
  pulls the team's records into its local cache), searches the cache with the
  hook's own lexical recall, and notes when each marker first shows up.

Prints events/s at the server, lost and duplicated events and records (both
must be 0), p50/p95 of the reader's searches, and how long a record took from
its author's drain to the reader's cache. Never fails the build.

Embeddings: wordllama (--embedding-model to change it), as on 30 Nov; with all-MiniLM-L6-v2 the
developers' drains also embed each other's records (1 Dec: 31 events/s, a turn in a teammate's
cache after 8.8 s p50).

    python bench/bench_team.py [--developers 8] [--events 50000] [--turn 25] [--embedding-model M]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # pgserver: the tests' throw-away cluster

from benchtable import pct, print_table  # noqa: E402

REMOTE = "git@github.com:acme/shop.git"


def clone(path: str) -> str:
    """A directory that git would call a clone of REMOTE (only .git/config matters to kirolearn)."""
    os.makedirs(os.path.join(path, ".git"), exist_ok=True)
    with open(os.path.join(path, ".git", "config"), "w") as fh:
        fh.write(f'[core]\n\tbare = false\n[remote "origin"]\n\turl = {REMOTE}\n')
    return path


def turn_payloads(dev: int, turn: int, size: int, marker: "str | None") -> "list[dict]":
    prompt = f"Why does the checkout service time out for order batch {dev}-{turn}?"
    if marker:
        prompt += f" Note {marker}."
    out = [{"hook_event_name": "userPromptSubmit", "prompt": prompt}]
    for step in range(size - 2):
        out.append(
            {
                "hook_event_name": "postToolUse",
                "tool_name": "execute_bash",
                "tool_input": {"command": f"pytest tests/test_checkout.py -k case_{dev}_{turn}_{step}"},
                "tool_response": {
                    "success": True,
                    "result": [{"exit_status": "0", "stdout": f"{step} passed in 0.{step}s"}],
                },
            }
        )
    out.append(
        {
            "hook_event_name": "stop",
            "assistant_response": f"The batch {dev}-{turn} query had no index "
            "on orders.created_at; added one and the timeout is gone.",
        }
    )
    return out


def developer(args) -> int:
    """One developer's process: rounds of (spool a turn, drain + sync); writes what it sent as JSON."""
    from kirolearn import Memory
    from kirolearn.capture import events, spool
    from kirolearn.team import membership as team

    team.join(args.project)
    sent_ids, markers, drains = [], {}, []
    per_dev = args.events // args.developers
    turns = max(1, per_dev // args.turn)
    ready = os.path.join(spool.ensure_layout(), spool.READY)
    memory = Memory()
    for turn in range(turns):
        marker = f"mk{args.dev}x{turn}" if turn % args.marker_every == 0 else None
        session = f"dev{args.dev}-s{turn // 4}"
        for payload in turn_payloads(args.dev, turn, args.turn, marker):
            payload.update(cwd=args.project, session_id=session)
            event = events.build_event(payload["hook_event_name"], payload)
            with open(os.path.join(ready, event["event_id"] + ".json"), "wb") as fh:
                fh.write(events.serialize(event))
            sent_ids.append(event["event_id"])
        started = time.time()
        stats = memory.drain(flush=True, wait=60)
        drains.append(time.time() - started)
        if stats.team.get("error"):
            print(f"developer {args.dev}: sync failed: {stats.team['error']}", file=sys.stderr)
        if marker:
            markers[marker] = started  # the turn is complete in the spool: its author's drain starts
    with open(args.out, "w") as fh:
        json.dump({"event_ids": sent_ids, "markers": markers, "drain_seconds": drains}, fh)
    return 0


def reader(args) -> int:
    """The teammate who recalls: sync, search the local cache, note when each marker arrives."""
    from kirolearn import Memory
    from kirolearn.core.project import project_id
    from kirolearn.recall import lexical
    from kirolearn.team import membership as team

    team.join(args.project)
    memory = Memory()
    pid = project_id(args.project)
    seen, latencies = {}, []
    queries = ["checkout timeout", "orders.created_at index", "batch query no index", "pytest checkout case"]
    deadline = time.time() + args.seconds
    wanted = [w for w in args.markers.split(",") if w]
    while time.time() < deadline and not os.path.exists(args.stop) and len(seen) < len(wanted):
        memory.drain(wait=60)  # nothing in its spool: the drain only syncs
        conn = lexical.connect_readonly(budget=5.0)
        if conn is None:
            time.sleep(0.2)
            continue
        try:
            for q in queries:
                t = time.perf_counter()
                lexical.search(conn, q, project_id=pid, limit=5)
                latencies.append(time.perf_counter() - t)
            for word in [w for w in wanted if w not in seen]:
                if lexical.search(conn, word, project_id=pid, limit=1):
                    seen[word] = time.time()
        finally:
            conn.close()
    with open(args.out, "w") as fh:
        json.dump({"seen": seen, "latencies": latencies}, fh)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--developers", type=int, default=8)
    parser.add_argument(
        "--embedding-model",
        default="wordllama/l2_supercat_256",
        help="the developers' [embeddings] model (default: the static one, fast enough to stay out of the way)",
    )
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--turn", type=int, default=25, help="events per turn (one drain each)")
    parser.add_argument("--marker-every", type=int, default=5, help="every Nth turn carries a marker")
    parser.add_argument("--role", choices=["main", "developer", "reader"], default="main")
    parser.add_argument("--dev", type=int, default=0)
    parser.add_argument("--project", default="")
    parser.add_argument("--out", default="")
    parser.add_argument("--stop", default="")
    parser.add_argument("--markers", default="")
    parser.add_argument("--seconds", type=float, default=1800)
    args = parser.parse_args()
    if args.role == "developer":
        return developer(args)
    if args.role == "reader":
        return reader(args)

    try:
        from pgserver import PgCluster, PostgresUnavailable
    except ImportError as exc:
        print(f"team store load: skipped ({exc})")
        return 0
    try:
        cluster = PgCluster(max_connections=max(40, args.developers * 3)).start()
    except PostgresUnavailable as exc:
        print(f"team store load: skipped, no PostgreSQL here ({exc})")
        return 0
    with cluster, tempfile.TemporaryDirectory() as tmp:
        url = cluster.url(cluster.create_database("team"))
        from kirolearn.store.postgres.store import PostgresStore

        PostgresStore(url, migrate=True).close()
        per_dev = args.events // args.developers
        turns = max(1, per_dev // args.turn)
        markers = [f"mk{d}x{t}" for d in range(args.developers) for t in range(0, turns, args.marker_every)]
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("KIROLEARN_")}
        base_env["KIROLEARN_STORE_URL"] = url
        # The store, the sync and the server are measured here, not embedding (bench_backfill.py): with
        # all-MiniLM-L6-v2 (the default where its weights are installed) each developer's `drain --flush`
        # also embeds every teammate's record it fetched, and nine processes on two cores measure that.
        base_env["KIROLEARN_EMBEDDING_MODEL"] = args.embedding_model

        def spawn(role, i, project, out, extra=()):
            env = dict(
                base_env,
                KIROLEARN_HOME=os.path.join(tmp, f"home-{role}-{i}"),
                KIROLEARN_ACTOR=f"{role}{i}",
                HOME=os.path.join(tmp, f"user-{role}-{i}"),
            )
            os.makedirs(env["HOME"], exist_ok=True)
            cmd = [
                sys.executable,
                __file__,
                "--role",
                role,
                "--dev",
                str(i),
                "--project",
                project,
                "--out",
                out,
                "--events",
                str(args.events),
                "--developers",
                str(args.developers),
                "--turn",
                str(args.turn),
                "--marker-every",
                str(args.marker_every),
                *extra,
            ]
            return subprocess.Popen(cmd, env=env)

        stop = os.path.join(tmp, "stop")
        reader_out = os.path.join(tmp, "reader.json")
        reading = spawn(
            "reader",
            0,
            clone(os.path.join(tmp, "clones", "reader", "shop")),
            reader_out,
            ["--stop", stop, "--markers", ",".join(markers)],
        )
        outs = [os.path.join(tmp, f"dev{i}.json") for i in range(args.developers)]
        start = time.time()
        devs = [
            spawn("developer", i, clone(os.path.join(tmp, "clones", f"dev{i}", "shop")), outs[i])
            for i in range(args.developers)
        ]
        codes = [p.wait() for p in devs]
        pushed = time.time() - start
        try:  # the reader stops by itself once it has seen every marker
            reading.wait(timeout=120)
        except subprocess.TimeoutExpired:
            open(stop, "w").close()
            reading.wait(timeout=300)
        sent = [json.load(open(o)) for o in outs if os.path.exists(o)]
        seen = json.load(open(reader_out)) if os.path.exists(reader_out) else {"seen": {}, "latencies": []}

        import psycopg

        with psycopg.connect(url) as conn:
            server_events = conn.execute("select count(*), count(distinct event_id) from events").fetchone()
            server_records = conn.execute(
                "select count(*), count(distinct record_hash) from memory_records"
            ).fetchone()
            ids = [i for s in sent for i in s["event_ids"]]
            present = set()
            for k in range(0, len(ids), 5000):
                part = ids[k : k + 5000]
                present.update(
                    r[0] for r in conn.execute("select event_id from events where event_id = any(%s)", [part])
                )
        lost = len(set(ids) - present)
        lags = [seen["seen"][m] - s["markers"][m] for s in sent for m in s["markers"] if m in seen["seen"]]
        drains = [d for s in sent for d in s["drain_seconds"]]
        rows = [
            ("developers (separate homes, spools, drainers)", f"{args.developers}", ""),
            ("events pushed", f"{len(ids):,}", f"{args.events:,}"),
            ("developers that failed", f"{sum(1 for c in codes if c)}", "0"),
            ("events/s at the server (all events / wall time)", f"{server_events[0] / pushed:,.0f}", ""),
            ("lost events (spooled, not on the server)", f"{lost}", "0"),
            ("duplicated events on the server", f"{server_events[0] - server_events[1]}", "0"),
            ("duplicated records on the server", f"{server_records[0] - server_records[1]}", "0"),
            ("records on the server", f"{server_records[0]:,}", ""),
            ("drain + sync per turn p50 / p95 (s)", f"{pct(drains, 0.5):.2f} / {pct(drains, 0.95):.2f}", ""),
            (
                "reader search p50 / p95 (ms, local cache)",
                f"{pct(seen['latencies'], 0.5) * 1000:.1f} / {pct(seen['latencies'], 0.95) * 1000:.1f}",
                "≤ 50",
            ),
            ("markers seen by the reader", f"{len(seen['seen'])} of {len(markers)}", f"{len(markers)}"),
            (
                "turn spooled → in a teammate's cache p50 / p95 (s)",
                f"{pct(lags, 0.5):.2f} / {pct(lags, 0.95):.2f}" if lags else "n/a",
                "",
            ),
        ]
        print_table(
            f"team store load (PostgreSQL on a Unix socket, one machine; embeddings: {args.embedding_model})",
            rows,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
