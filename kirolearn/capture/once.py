"""Inject the session-start block once, even when Kiro fires two session-start hooks.

Standard library only (the hook uses it). A project wired both through an
agent's classic hooks and through v3 workspace hooks gets `agentSpawn` *and*
`SessionStart` for one session start, often without a session id. The first
hook to claim $KIROLEARN_HOME/sessions/start-<project hash>.json prints the
block; another session start of the same project within WINDOW_SECONDS prints
nothing, unless both carry different session ids from Kiro (two real sessions).
A short-lived `.lock` beside the marker makes the claim safe between two
hooks running at the same moment.
"""

import os
import time

from kirolearn.core import jsonfast, paths

WINDOW_SECONDS = 5.0
KIRO_SOURCES = ("payload", "env")  # session ids Kiro gave us (not our own fallback)


def _paths(project_root: str) -> "tuple[str, str]":
    import hashlib

    key = hashlib.sha256(project_root.encode("utf-8", "replace")).hexdigest()[:32]
    directory = paths.ensure_private_dir(paths.sessions_dir())
    marker = os.path.join(directory, f"start-{key}.json")
    return marker, marker + ".lock"


def _lock(path: str, now: float) -> "int | None":
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
    try:
        return os.open(path, flags, 0o600)
    except FileExistsError:
        pass
    try:
        if now - os.path.getmtime(path) < WINDOW_SECONDS:
            return None  # the twin hook holds it: it prints the block
        os.unlink(path)  # a hook died holding it
        return os.open(path, flags, 0o600)
    except OSError:
        return None


def claim_session_start(
    project_root: str, session_id: str, session_source: str, now: "float | None" = None
) -> bool:
    """True if this hook call should print the session-start block of `project_root`."""
    now = time.time() if now is None else now
    marker, lock = _paths(project_root)
    fd = _lock(lock, now)
    if fd is None:
        return False
    try:
        try:
            with open(marker, encoding="utf-8") as fh:
                last = jsonfast.load(fh)
            recent = now - float(last.get("at", 0)) < WINDOW_SECONDS
            other_session = (
                session_source in KIRO_SOURCES
                and last.get("source") in KIRO_SOURCES
                and last.get("session_id") != session_id
            )
            if recent and not other_session:
                return False
        except (OSError, ValueError, TypeError, AttributeError):
            pass  # no marker yet, or an unreadable one: claim it
        body = jsonfast.dumps({"at": now, "session_id": session_id, "source": session_source})
        tmp = f"{marker}.{os.getpid()}.tmp"  # no fsync: a marker lost in a crash costs one repeated block
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as fh:
            fh.write(body)
        os.replace(tmp, marker)
        return True
    finally:
        os.close(fd)
        try:
            os.unlink(lock)
        except OSError:
            pass


def release_session_start(project_root: str) -> None:
    """Give a claim back: the block it was for could not be printed, so a twin or the next start may."""
    try:
        os.unlink(_paths(project_root)[0])
    except OSError:
        pass
