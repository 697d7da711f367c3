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
# A twin is the same bytes with nothing else of its session recorded since: two turns may end in the
# same empty stop within seconds, and those are two calls.
CALL_WINDOW_SECONDS = 3.0  # the drain's content dedup window: a twin fires within milliseconds
CALLS_DIR = "once"  # under the spool; the drain never reads it
_BUCKET_SECONDS = 60  # one folder a minute, so old markers go with their folder
_LAST_KEEP_SECONDS = 600  # a session's last-call file outlives any twin by far


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


def session_key(agent: str, session_id: str) -> str:
    return _sha256(f"{agent}\0{session_id}\0{os.getcwd()}".encode("utf-8", "replace"))


def _sweep(calls: str, keep: int, now: float) -> None:
    """Remove the folders of minutes before `keep - 1` (a twin looks one minute back), and old last-call files."""
    try:
        names = os.listdir(calls)
    except OSError:
        return
    for name in names:
        path = os.path.join(calls, name)
        try:
            if name.isdigit() and int(name) < keep - 1:
                for marker in os.listdir(path):
                    os.unlink(os.path.join(path, marker))
                os.rmdir(path)
            elif name.startswith("last-") and now - os.stat(path).st_mtime > _LAST_KEEP_SECONDS:
                os.unlink(path)
        except OSError:
            pass  # another hook sweeps it too


def _mtime_ns(path: str) -> "int | None":
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _fresh(mtime_ns: "int | None", now: float) -> bool:
    return mtime_ns is not None and now - mtime_ns / 1e9 < CALL_WINDOW_SECONDS


def _twin(last: str, marker_ns: int) -> bool:
    """Is a call whose fresh marker exists the twin of that call? Yes unless its session recorded
    another call since: each call sets its session's last-call file to its marker's time."""
    made = _mtime_ns(last)
    return made is None or made <= marker_ns


def _note_last(last: str, ns: int) -> None:
    """The session's last call was made at `ns` (a time, not a write: ~10x cheaper than new content)."""
    try:
        os.utime(last, ns=(ns, ns))
    except FileNotFoundError:
        os.close(os.open(last, os.O_WRONLY | os.O_CREAT, 0o600))
        os.utime(last, ns=(ns, ns))


def claim_call(spool_root: str, key: str, session: str = "", now: "float | None" = None) -> "str | None":
    """The marker path if this hook call is the first with `key` (None for its twin).

    The marker is created with O_CREAT | O_EXCL, so of two runs at the same moment exactly one wins.
    A marker that cannot be made ("" back) never costs the event: the call is recorded.
    """
    try:
        return _claim(spool_root, key, session, time.time() if now is None else now)
    except OSError:
        return ""


def _claim(spool_root: str, key: str, session: str, now: float) -> "str | None":
    calls = os.path.join(spool_root, CALLS_DIR)
    last = os.path.join(calls, f"last-{session or '-'}")
    bucket = int(now // _BUCKET_SECONDS)
    if now - bucket * _BUCKET_SECONDS < CALL_WINDOW_SECONDS:  # a twin across a minute's edge
        before = os.path.join(calls, str(bucket - 1), key)
        made = _mtime_ns(before)
        if made is not None and _fresh(made, now) and _twin(last, made):
            return None
    folder = os.path.join(calls, str(bucket))
    marker = os.path.join(folder, key)
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
    made = None
    for _ in range(2):
        try:
            os.close(os.open(marker, flags, 0o600))
            made = time.time_ns()  # set, not read: a file's own time may be a clock tick coarse
            os.utime(marker, ns=(made, made))
            break
        except FileNotFoundError:  # the minute's first call: its folder, and the old ones go
            paths.ensure_private_dir(calls)
            try:
                os.mkdir(folder, 0o700)
            except FileExistsError:
                continue
            _sweep(calls, bucket, now)
        except FileExistsError:
            made = _mtime_ns(marker)
            if made is not None and _fresh(made, now) and _twin(last, made):
                return None
            made = time.time_ns()
            os.utime(marker, ns=(made, made))  # the same bytes as a new call: the marker is this call's now
            break
    if made is not None:
        _note_last(last, made)
    return marker


def release_call(marker: "str | None") -> None:
    """Give a claim back when its event could not be written, so the twin's retry is not dropped."""
    if marker:
        try:
            os.unlink(marker)
        except OSError:
            pass
