"""`kirolearn-hook [--agent NAME] [EVENT]`: the one command behind every agent hook.

Reads the hook payload (stdin JSON, or USER_PROMPT for IDE 0.x hooks), turns it
into one event and publishes it to the spool. Standard library only, and it
never breaks the agent: every error of its own ends in exit 0, one
`[kirolearn] ...` line on stderr and a line in $KIROLEARN_HOME/logs/hook.log.
Stdout carries only the recalled memory printed on session start and prompt
submit (kirolearn.recall.context), and nothing at all when there is none.
Set KIROLEARN_RAISE_ERRORS=1 to get tracebacks instead (tests do).
"""

import os
import sys
import time

from kirolearn.capture import agents, events, once, shown, spool
from kirolearn.core import envnum, jsonfast, paths
from kirolearn.core.version import __version__  # not the package: it holds the facade (kirolearn.Memory)

USAGE = """\
usage: kirolearn-hook [--agent kiro|claude-code] [EVENT]

Record one agent hook call in the kirolearn spool. Kiro (or Claude Code) runs
this; you rarely do. --agent says whose hook it is (default kiro): Kiro v3 and
Claude Code use the same hook names, so `kirolearn install --agent ...` writes
it explicitly.

With no EVENT the hook name is read from `hook_event_name` in the stdin JSON
(agentSpawn, userPromptSubmit, preToolUse, postToolUse, stop, or the v3
PascalCase forms). EVENT may be one of:
  ide-prompt-submit | ide-post-tool | ide-agent-stop
      Kiro IDE 0.x hooks: the payload comes in the USER_PROMPT variable and
      stdin is not read.
  agent-spawn | prompt-submit | pre-tool | post-tool | stop
      a name for hook configs; `hook_event_name` on stdin wins when present.

Always exits 0. Errors go to stderr and $KIROLEARN_HOME/logs/hook.log.
"""

STDIN_TIMEOUT = 2.0  # rule 1: IDE 0.x keeps stdin open
STDIN_TIMEOUT_MAX = 600.0  # KIROLEARN_STDIN_TIMEOUT's range ends here: a hook must end
STDIN_IDLE = 0.25  # a pause after a full payload ends it
STDIN_LIMIT = 64 * 1024 * 1024
LOG_MAX_BYTES = 1024 * 1024
SESSION_IDLE_SECONDS = 4 * 3600  # a fallback session with no hook call for this long is over


def read_stdin(timeout: float = STDIN_TIMEOUT, limit: int = STDIN_LIMIT) -> bytes:
    """Read stdin to EOF without ever hanging on a pipe that stays open.

    IDE 0.x opens stdin and never writes or closes it; a plain read() would
    block forever. `timeout` caps the whole read, not the wait between chunks:
    a writer trickling a byte at a time cannot keep the hook past it (what has
    arrived by then is all there is). POSIX uses select() on fd 0 (no thread,
    so nothing can abort at interpreter exit); Windows falls back to a
    daemon-thread read.
    """
    stream = sys.stdin
    if stream is None:
        return b""
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, OSError):
        return b""
    if os.isatty(fd):
        return b""
    if os.name != "posix":
        return _read_stdin_thread(stream, timeout)
    import select

    chunks: list = []
    total = 0
    deadline = time.monotonic() + timeout
    while True:
        now = time.monotonic()
        wait = deadline - now
        if chunks:
            wait = min(wait, STDIN_IDLE) if _looks_complete(chunks[-1]) else wait
        if wait <= 0:
            break
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            break
        data = os.read(fd, 1 << 20)
        if not data:
            break
        chunks.append(data)
        total += len(data)
        if total > limit:
            raise events.Rejected(f"stdin payload larger than {limit} bytes")
    return b"".join(chunks)


def _looks_complete(chunk: bytes) -> bool:
    return chunk.rstrip().endswith(b"}")


def _read_stdin_thread(stream, timeout: float) -> bytes:
    import threading

    box: list = []
    done = threading.Event()

    def _read():
        try:
            box.append(stream.read())  # text mode: a bytes read can abort at exit
        finally:
            done.set()

    threading.Thread(target=_read, daemon=True).start()
    done.wait(timeout)
    return box[0].encode("utf-8", "replace") if box else b""


def _stdin_timeout() -> float:
    # nan, inf or a negative wait would end the read at once and drop the event: the default instead
    return envnum.number("KIROLEARN_STDIN_TIMEOUT", STDIN_TIMEOUT, 0.01, STDIN_TIMEOUT_MAX)


def session_file_id(surface: str, project_root: str, renew: bool) -> str:
    """Session id for Kiro builds that send none: one file per (surface, project).

    agentSpawn / SessionStart starts a new session; every other hook reuses the
    current one (creating it if missing, or if it was idle for 4 hours).
    """
    import hashlib  # only on this fallback path: ~3 ms of OpenSSL start-up

    key = hashlib.sha256(f"{surface}\0{project_root}".encode("utf-8", "replace")).hexdigest()[:32]
    directory = paths.ensure_private_dir(paths.sessions_dir())
    path = os.path.join(directory, f"{surface}-{key}.json")
    if not renew:
        try:
            # IDE 0.x never fires a session-start hook: a long pause ends the session instead.
            if time.time() - os.path.getmtime(path) < SESSION_IDLE_SECONDS:
                with open(path, encoding="utf-8") as fh:
                    found = jsonfast.load(fh).get("session_id")
                if isinstance(found, str) and found:
                    os.utime(path)  # still active
                    return found
        except (OSError, ValueError, AttributeError):
            pass
    session_id = events.new_uuid4()
    record = {
        "session_id": session_id,
        "project_root": project_root,
        "surface": surface,
        "started_at": events.utc_iso(time.time()),
    }
    spool.write_atomic(
        directory, os.path.basename(path), jsonfast.dumps(record).encode("utf-8", "replace"), directory
    )
    return session_id


def log(message: str) -> None:
    """Append one line to $KIROLEARN_HOME/logs/hook.log (rotated at 1 MiB)."""
    try:
        path = os.path.join(paths.logs_dir(), "hook.log")
        try:
            if os.path.getsize(path) > LOG_MAX_BYTES:
                os.replace(path, path + ".1")
        except OSError:
            pass
        line = f"{events.utc_iso(time.time())} pid={os.getpid()} {message}\n"
        fd = paths.open_log("hook.log")
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:
        pass  # logging must never be the reason a hook fails


def report(message: str) -> None:
    """Tell the user on stderr (one line) and keep a copy in the log."""
    one_line = " ".join(message.split())
    try:
        sys.stderr.write(f"[kirolearn] {one_line}\n")
        sys.stderr.flush()
    except Exception:
        pass
    log(one_line)


def _decode_payload(raw: bytes) -> dict:
    text = raw.decode("utf-8", "replace").strip()
    if not text:
        return {}
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        payload = jsonfast.loads(text)
    except RecursionError:
        raise events.Rejected("stdin JSON is nested too deeply") from None
    except ValueError as exc:
        raise events.Rejected(f"stdin is not valid JSON ({str(exc)[:80]})") from None
    if not isinstance(payload, dict):
        raise events.Rejected(f"stdin JSON is a {type(payload).__name__}, expected an object")
    return payload


def split_agent(argv: "list[str]") -> "tuple[str | None, list[str]]":
    """(`--agent` value or None, the other arguments)."""
    agent, rest, i = None, [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--agent":
            if i + 1 >= len(argv):
                raise events.Rejected("--agent needs a value: " + " or ".join(agents.names()))
            agent, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--agent="):
            agent = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return agent, rest


def capture(argv: "list[str]", stdin: "bytes | None" = None) -> "str | None":
    """Record one hook call; returns the spooled path (None if nothing to record).

    `stdin` is the raw payload; None means read the process's stdin (with a deadline).
    Raises events.Rejected for input that cannot become an event.
    """
    agent, argv = split_agent(argv)
    if len(argv) > 1:
        raise events.Rejected(f"expected at most one EVENT argument, got {len(argv)}")
    try:
        adapter = agents.get(agent)
    except agents.UnknownAgent as exc:
        raise events.Rejected(str(exc)) from None
    arg = argv[0] if argv else None
    from_env = adapter.payload_from_env(arg, os.environ)
    if from_env is not None:
        name, payload = from_env
        if payload is None:
            return None
    else:
        raw = read_stdin(_stdin_timeout()) if stdin is None else stdin
        try:
            payload = _decode_payload(raw)
            name = payload.get("hook_event_name") or arg
            skip = getattr(adapter, "skip", None)
            if skip is not None and skip(payload):
                return None  # a call the agent makes that is no event (Qwen Code's empty prompt)
            if not isinstance(name, str) or not name:
                raise events.Rejected(
                    "no hook name: stdin JSON has no 'hook_event_name' and no EVENT argument was given"
                )
            if agent is None and agents.sent_by(payload) == "claude-code":
                # Same hook names as Kiro v3: never guess, but never be silent about it either.
                log(
                    "a payload with transcript_path (a Claude Code field) came without --agent: stored as kiro; "
                    "run `kirolearn install --agent claude-code` to wire Claude Code properly"
                )
            event, data = events.spooled_event(
                name, payload, session_lookup=session_file_id, agent=adapter.NAME, annotate=_note_shown
            )
        except events.Rejected as exc:
            exc.raw = raw  # an agent's payload we cannot read yet is kept in quarantine, never lost
            raise
        marker = claim_call(adapter.NAME, arg, raw, event.get("session_id") or "")
        if marker is None:  # recorded once; recall still runs: it never shows a session a record twice
            if event["trigger"] in agents.CONTEXT_TRIGGERS:
                inject_context(event, adapter)
            return None
        try:
            path = spool.append(event["event_id"], data)
        except BaseException:
            once.release_call(marker)
            raise
        if event["trigger"] in agents.CONTEXT_TRIGGERS and not inject_context(event, adapter):
            once.release_call(marker)  # the agent got no memory: a retry of this call is not a twin
        return path
    event, data = events.spooled_event(
        name, payload, session_lookup=session_file_id, agent=adapter.NAME, annotate=_note_shown
    )
    path = spool.append(event["event_id"], data)
    if event["trigger"] in agents.CONTEXT_TRIGGERS:
        inject_context(event, adapter)
    return path


def _note_shown(event: dict) -> None:
    if event["trigger"] == "stop":  # what recall showed the session, inside the size caps
        shown.note_shown(event)


def claim_call(agent: str, arg: "str | None", raw: bytes, session_id: str) -> "str | None":
    """This call's marker ("" for none), or None when its twin (the same agent wired in a second scope,
    run with the same bytes) already recorded it: then it writes nothing."""
    root = spool.root()
    key = once.call_key(agent, arg, raw, os.environ.get("KIRO_SESSION_ID", ""))
    marker = once.claim_call(root, key, once.session_key(agent, session_id))
    if marker is None:
        log(
            f"{agent} {arg or 'hook'}: the same call was recorded by another kirolearn hook a moment ago "
            "(this agent is wired twice: `kirolearn doctor` names both files); kept once"
        )
    return marker


def inject_context(event: dict, adapter=None) -> bool:
    """Print recalled memory for the agent. Any failure prints nothing (and is logged); False when
    memory was there but stdout would not take it."""
    failed = []

    def deliver(text: str) -> bool:
        output = (adapter or agents.get()).context_output(event["trigger"], text)
        try:
            sys.stdout.write(output)  # sys.stdout is None when the agent started us with fd 1 closed
            sys.stdout.flush()
            return True
        except (AttributeError, OSError, ValueError) as exc:  # the event is in the spool already: say so
            report(
                f"{event.get('trigger')}: event recorded, but its recalled memory was not printed "
                f"(stdout is closed or broken: {type(exc).__name__}); the next hook offers it again"
            )
            failed.append(exc)
            return False

    try:
        from kirolearn.recall import context  # sqlite3 and the recall code load only for these two hooks

        # what it could not print is not marked as shown
        context.for_event(event, deliver)
    except Exception as exc:  # noqa: BLE001 - a broken recall must not cost the captured event
        if os.environ.get("KIROLEARN_RAISE_ERRORS"):
            raise
        log(f"recall for {event.get('trigger')}: {type(exc).__name__}: {str(exc)[:200]}")
    return not failed


def keep_rejected(raw: bytes, reason: str) -> "str | None":
    """Put a payload the hook could not turn into an event into the spool's quarantine (its path, or None).

    An agent that changed its payload shape loses nothing: the raw bytes wait
    there (0600, like every spool file) with the reason beside them, and
    `kirolearn doctor` points at them.
    """
    if not raw or not raw.strip():
        return None
    try:
        from kirolearn.core.ids import new_ulid

        root = spool.ensure_layout()
        name = f"{new_ulid(int(time.time() * 1000))}.rejected.json"
        path = spool.write_atomic(os.path.join(root, spool.TMP), name, raw, os.path.join(root, spool.TMP))
        return spool.quarantine(path, reason, root)
    except Exception as exc:  # noqa: BLE001 - keeping it is best effort; the report still goes out
        log(f"could not keep a rejected payload: {type(exc).__name__}: {str(exc)[:200]}")
        return None


def handle(argv: "list[str]", stdin: "bytes | None" = None) -> int:
    """Run one hook call the way Kiro sees it: errors reported, exit status 0."""
    if os.environ.get("KIROLEARN_DISABLE") or os.environ.get("KIROLEARN_INTERNAL"):
        return 0  # kirolearn's own LLM sessions must not capture themselves
    try:
        rest = split_agent(argv)[1]
    except events.Rejected:
        rest = argv
    label = rest[0] if rest else "hook"
    try:
        capture(argv, stdin)
    except events.Rejected as exc:
        kept = keep_rejected(getattr(exc, "raw", b""), f"{label}: {exc}")
        report(f"{label}: {exc}; " + (f"the payload is kept in {kept}" if kept else "nothing recorded"))
    except spool.PublishError as exc:  # its message says whether the event was kept
        report(f"{label}: {exc}")
    except Exception as exc:  # noqa: BLE001 - the agent must never see us fail
        if os.environ.get("KIROLEARN_RAISE_ERRORS"):
            raise
        report(f"{label}: {type(exc).__name__}: {str(exc)[:200]}; nothing recorded")
    return 0


def main(argv: "list[str] | None" = None) -> int:
    """Console-script entry point. Returns the exit status (always 0)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    if argv and argv[0] == "--version":
        sys.stdout.write(f"kirolearn-hook {__version__}\n")
        return 0
    return handle(argv)


if __name__ == "__main__":
    sys.exit(main())
