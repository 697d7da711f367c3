"""`make demo`: the main job end to end on the embedded defaults, no API key.

Replays the recorded Kiro sessions in queue/sessions/ through the real
`kirolearn-hook` processes into a throw-away KIROLEARN_HOME, shows what was
captured, drains it with the real `kirolearn drain` command (deterministic
extractor unless KIROLEARN_MODEL is set), prints the memory records, and shows
what the next session would be told through the real hook command: a
`kirolearn session-end`, then the session-start block (one line per record, with
its id and the block's size) and the block for that session's first prompt,
which never repeats what the start showed.
Run: python -m kirolearn.demo [--keep | --into DIR] [RECORDING ...]
"""

import argparse
import glob
import json
import os
import sys
import tempfile

from kirolearn.capture import spool
from kirolearn.core import replay
from kirolearn.core.observation_types import kind_label
from kirolearn.privacy.scrub import scrub_text

HERE = os.path.dirname(os.path.abspath(__file__))


def _recordings_dir() -> str:
    """queue/sessions/ of a checkout, else the copy an installed wheel put in <prefix>/share/kirolearn/sessions."""
    import site
    import sysconfig

    checkout = os.path.join(os.path.dirname(HERE), "queue", "sessions")
    if os.path.isdir(checkout):
        return checkout
    for prefix in (sysconfig.get_path("data"), sys.prefix, getattr(site, "USER_BASE", None) or ""):
        installed = os.path.join(prefix, "share", "kirolearn", "sessions")
        if prefix and os.path.isdir(installed):
            return installed
    return checkout  # main() says none were found, naming this folder


RECORDINGS = _recordings_dir()


def _shown(path: str) -> str:
    """A recording's path relative to here when it is below here (a checkout), else as it is."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


# The two IDE recordings are two sessions of one app: one project.
SAME_APP = {"ide-legacy": "export-app", "ide-v3": "export-app"}


def _short(event: dict) -> str:
    text = (
        event.get("prompt")
        or event.get("assistant_response")
        or (json.dumps(event["tool_input"]) if event.get("tool_input") else "")
        or (event["tool_response"] if isinstance(event.get("tool_response"), str) else "")
    )
    # the spool holds raw text until the drain scrubs it
    text = " ".join(scrub_text(str(text)).split())
    return text[:70] + ("…" if len(text) > 70 else "")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kirolearn.demo", description=__doc__.splitlines()[0])
    parser.add_argument("recordings", nargs="*", help="recorded sessions (default: queue/sessions/*.jsonl)")
    parser.add_argument("--keep", action="store_true", help="keep the demo home directory and print its path")
    parser.add_argument(
        "--into",
        metavar="DIR",
        help="build in DIR (created; kept) instead of a temporary folder: "
        "scripts/screenshot.py shoots the viewer on it",
    )
    args = parser.parse_args(argv)
    if args.into:
        args.keep = True
    recordings = args.recordings or sorted(glob.glob(os.path.join(RECORDINGS, "*.jsonl")))
    if not recordings:
        parser.error(f"no recordings found in {RECORDINGS}")

    work = os.path.abspath(args.into) if args.into else tempfile.mkdtemp(prefix="kirolearn-demo-")
    os.makedirs(work, exist_ok=True)
    home = os.path.join(work, "kirolearn home")  # a space, on purpose
    os.environ["KIROLEARN_HOME"] = home
    print(f"kirolearn demo: KIROLEARN_HOME={home}\n")
    projects = []
    for path in recordings:
        name = os.path.basename(path)[:-6]
        project = replay.make_project(os.path.join(work, "projects", SAME_APP.get(name, name)))
        if project not in projects:
            projects.append(project)
        calls = replay.load(path)
        results, silent = [], []
        for call in calls:  # one by one, to see which calls recorded nothing
            before = len(spool.ready_files())
            results += replay.replay([call], project)
            if len(spool.ready_files()) == before:
                silent.append(call)
        failures = [r for r in results if r.returncode != 0 or r.stdout or r.stderr]
        print(
            f"== replayed {len(calls)} hook calls from {_shown(path)}: "
            f"{len(calls) - len(silent)} events recorded ({len(failures)} calls with output or errors)"
        )
        for call in silent:
            print(f"   {_why_silent(call)}")
        for r in failures:
            sys.stdout.write(r.stderr.decode("utf-8", "replace"))

    files = spool.ready_files()
    print(
        f"\n== spool: {len(files)} events in {os.path.join(spool.root(), 'ready')} (files 0600; text shown scrubbed)"
    )
    print(f"{'kind':<16} {'trigger':<17} {'surface':<11} {'tool':<13} text")
    for path in files:
        with open(path, encoding="utf-8") as fh:
            event = json.load(fh)
        print(
            f"{event['kind']:<16} {event['trigger']:<17} {event['surface']:<11} "
            f"{(event.get('tool_name') or '-'):<13} {_short(event)}"
        )
    drained = _drain()
    if drained is None:
        return 1
    print(f"\n== kirolearn drain --flush: {drained.strip()}")
    _show_records()
    by_name = {os.path.basename(p): p for p in projects}
    _end_session(by_name.get("cli-classic", projects[0]))
    _show_recall(by_name.get("cli-classic", projects[0]))
    if "export-app" in by_name:
        _show_recall(by_name["export-app"], session="demo-export", prompt=EXPORT_PROMPT)
    if "claude-code" in by_name:
        _show_claude_recall(by_name["claude-code"])
    if args.keep:
        print(f"\nkept: {work}\n  open the viewer on this demo's memory:  {viewer_command(home)}")
    else:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    print(what_next())
    return 0


WHAT_NEXT = (
    ("install", "wire the kirolearn agent and MCP server into ~/.kiro"),
    ("install --project DIR", "also wire one project's .kiro/ files (hooks for every agent)"),
    ("schedule", "drain the spool in the background (or run `{k} drain --watch`)"),
    ("doctor", "check the wiring; `{k} status` shows what is stored"),
    ("context --session-start", "what your next session will be told, from inside a project"),
    ("serve", "the web viewer of your memory (the demo's own: `make demo ARGS=--keep`,"),
    ("", "or `python -m kirolearn.demo --keep`, prints the command)"),
)


def kirolearn_command() -> str:
    """How to type `kirolearn` here: the bare name when PATH finds this installation's, else its path
    (`.venv/bin/kirolearn` after `make install`, relative to this folder when it is inside it)."""
    import shutil

    beside = os.path.join(os.path.dirname(sys.executable), "kirolearn")
    found = shutil.which("kirolearn")
    if not os.path.exists(beside) or (found and os.path.realpath(found) == os.path.realpath(beside)):
        return "kirolearn"
    relative = os.path.relpath(beside)
    return relative if not relative.startswith(os.pardir) else beside


def what_next(k: "str | None" = None) -> str:
    """The demo's last lines: what to run next, naming `kirolearn` as it can be typed here."""
    k = k or kirolearn_command()
    width = max(len(f"{k} {args}") for args, _ in WHAT_NEXT) + 2
    lines = ["", "== what next"]
    for args, says in WHAT_NEXT:
        typed = f"{k} {args}" if args else ""
        lines.append(f"  {typed:<{width}} {says.format(k=k)}".rstrip())
    lines.append("docs/install-and-agents.md has the details; `make test` runs the tests.")
    return "\n".join(lines)


def viewer_command(home: str) -> str:
    """The command that opens `kirolearn serve` on a kept demo home."""
    import shlex

    return f"KIROLEARN_HOME={shlex.quote(home)} {shlex.quote(kirolearn_command())} serve"


def _why_silent(call) -> str:
    """Why a replayed hook call left no event in the spool."""
    if call.argv:
        name = call.argv[0]
    else:
        name = call.stdin.get("hook_event_name", "hook") if isinstance(call.stdin, dict) else "hook"
    if name == "ide-agent-stop" and not call.env.get("USER_PROMPT", "").strip():
        return (
            "1 call recorded nothing, by design: the IDE's agentStop came with an empty USER_PROMPT "
            "(Kiro IDE often sends none), so there is no turn summary to keep"
        )
    return f"1 call ({name}) recorded nothing: see logs/hook.log in the demo home"


def _drain() -> "str | None":
    import subprocess

    command = os.path.join(os.path.dirname(sys.executable), "kirolearn")
    result = subprocess.run([command, "drain", "--flush"], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        sys.stdout.write(result.stdout + result.stderr)
        return None
    return result.stdout


def _show_records() -> None:
    from kirolearn.store.backends import open_store

    with open_store() as store:
        rows = list(reversed(store.list_records(limit=100_000)))  # oldest first
    print(f"\n== {len(rows)} memory records in {os.path.join(os.environ['KIROLEARN_HOME'], 'kirolearn.db')}")
    for row in rows:
        print(f"\n### [{kind_label(row['observation_type'], row['strategy'])}] {row['title']}")
        print(f"strategy {row['strategy']}, files {', '.join(row['files_touched']) or '-'}")
        print(row["summary"])


NEXT_PROMPT = "orders with a quote in the reference crash the lookup again, same SQL problem?"
EXPORT_PROMPT = "add a --limit option next to --dry-run in scripts/export.py"


def _end_session(project: str) -> None:
    """The session pair: `kirolearn session-end` saves what the next session start shows first."""
    import subprocess

    command = os.path.join(os.path.dirname(sys.executable), "kirolearn")
    result = subprocess.run(
        [
            command,
            "session-end",
            "--project",
            project,
            "--session-id",
            "demo-session-1",
            "--summary",
            "Fixed the SQL injection in find_user and in the orders lookup.",
            "--next-step",
            "Audit app/ for any other string-formatted SQL",
            "--pitfall",
            "Emails with + or quotes are the regression cases",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    print(
        f"\n== kirolearn session-end --project {os.path.basename(project)} ...: "
        f"{(result.stdout or result.stderr).strip()}"
    )


def _show_recall(project: str, session: str = "demo-next", prompt: str = NEXT_PROMPT) -> None:
    """A new session's start block, then its first prompt's block: one session never gets a record twice."""
    import subprocess

    hook = replay.hook_command()
    for title, payload in (
        (
            "a new session starts (agentSpawn)",
            {"hook_event_name": "agentSpawn", "cwd": project, "session_id": session},
        ),
        (
            f"in that session, the developer asks: {prompt!r}",
            {"hook_event_name": "userPromptSubmit", "cwd": project, "session_id": session, "prompt": prompt},
        ),
    ):
        out = subprocess.run([hook], input=json.dumps(payload).encode(), capture_output=True, timeout=30)
        print(f"\n== recall in {os.path.basename(project)}: {title}; the hook prints:\n")
        print(
            out.stdout.decode("utf-8", "replace").rstrip()
            or "(nothing new: the session start showed the records that match; a session never gets one twice)"
        )


def _show_claude_recall(project: str) -> None:
    import subprocess

    payload = {
        "hook_event_name": "SessionStart",
        "source": "startup",
        "cwd": project,
        "session_id": "demo-claude-next",
        "transcript_path": os.path.join(project, ".claude", "next.jsonl"),
    }
    out = subprocess.run(
        [replay.hook_command(), "--agent", "claude-code"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=30,
    )
    print(
        f"\n== recall in {os.path.basename(project)}: a new Claude Code session starts "
        "(kirolearn-hook --agent claude-code); the hook prints:\n"
    )
    print(out.stdout.decode("utf-8", "replace").rstrip() or "(nothing)")


if __name__ == "__main__":
    sys.exit(main())
