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


# One event per hook call, when an agent is wired twice (user and project scope) and runs both commands.
CALL_WINDOW_SECONDS = 3.0  # the drain's content dedup window: a twin fires within milliseconds
CALLS_DIR = "once"  # under the spool; the drain never reads it
_BUCKET_SECONDS = 60  # one folder a minute, so old markers go with their folder


def _sha256(data: bytes) -> str:
    try:  # the builtin module: hashlib's OpenSSL start-up costs ~2.5 ms a hook call
        from _sha256 import sha256
    except ImportError:
        try:
            from _sha2 import sha256  # Python >= 3.12
        except ImportError:
            from hashlib import sha256
    return sha256(data).hexdigest()[:40]


def call_key(agent: str, event: "str | None", payload: bytes, session: str = "") -> str:
    """The key of one hook call: both commands of a twice-wired agent get the same bytes."""
    head = f"{agent}\0{event or ''}\0{session}\0{os.getcwd()}\0".encode("utf-8", "replace")
    return _sha256(head + payload)


def _sweep(calls: str, keep: int) -> None:
    """Remove the folders of minutes before `keep - 1` (a twin only looks one minute back)."""
    try:
        names = os.listdir(calls)
    except OSError:
        return
    for name in names:
        if name.isdigit() and int(name) < keep - 1:
            folder = os.path.join(calls, name)
            try:
                for marker in os.listdir(folder):
                    os.unlink(os.path.join(folder, marker))
                os.rmdir(folder)
            except OSError:
                pass  # another hook sweeps it too


def _fresh(path: str, now: float) -> bool:
    try:
        return now - os.stat(path).st_mtime < CALL_WINDOW_SECONDS
    except OSError:
        return False


def claim_call(spool_root: str, key: str, now: "float | None" = None) -> "str | None":
    """The marker path if this hook call is the first with `key` in the window, None for its twin.

    The marker is created with O_CREAT | O_EXCL, so of two runs at the same moment exactly one wins.
    A marker that cannot be made ("" back) never costs the event: the call is recorded.
    """
    try:
        return _claim(spool_root, key, time.time() if now is None else now)
    except OSError:
        return ""


def _claim(spool_root: str, key: str, now: float) -> "str | None":
    calls = os.path.join(spool_root, CALLS_DIR)
    bucket = int(now // _BUCKET_SECONDS)
    if now - bucket * _BUCKET_SECONDS < CALL_WINDOW_SECONDS and _fresh(
        os.path.join(calls, str(bucket - 1), key), now
    ):
        return None
    folder = os.path.join(calls, str(bucket))
    marker = os.path.join(folder, key)
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
    for _ in range(2):
        try:
            os.close(os.open(marker, flags, 0o600))
            return marker
        except FileNotFoundError:  # the minute's first call: its folder, and the old ones go
            paths.ensure_private_dir(calls)
            try:
                os.mkdir(folder, 0o700)
            except FileExistsError:
                continue
            _sweep(calls, bucket)
        except FileExistsError:
            if _fresh(marker, now):
                return None
            try:
                os.utime(marker)  # the same call again, later: a real repeat
            except OSError:
                pass
            return marker
    return None if _fresh(marker, now) else marker


def release_call(marker: "str | None") -> None:
    """Give a claim back when its event could not be written, so the twin's retry is not dropped."""
    if marker:
        try:
            os.unlink(marker)
        except OSError:
            pass
