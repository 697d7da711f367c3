"""The durable event spool: one JSON file per event (standard library only).

Layout under $KIROLEARN_HOME/spool/ (0700; files 0600):
    tmp/         events being written; never read by the drainer
    ready/       complete events, `<event_id>.json`; sorted names = arrival order
    quarantine/  files the drainer could not parse, each with a `.reason` file

Invariant: a file in ready/ is always complete. Writers publish by writing
tmp/, fsync, then an atomic rename into ready/ (and fsync the directory), so no
lock is needed between concurrent hook processes. This module knows nothing of
SQLite or LLMs; locking between drainers lives with the drainer.
"""

import os

from . import config

TMP = "tmp"
READY = "ready"
QUARANTINE = "quarantine"
SUFFIX = ".json"

_O_BINARY = getattr(os, "O_BINARY", 0)


def root() -> str:
    """The spool directory."""
    return config.spool_dir()


def _fsync_dir(path: str) -> None:
    if os.name != "posix":
        return  # Windows cannot open directories; NTFS journals the rename.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_layout(spool_root: "str | None" = None) -> str:
    """Create the spool folders (0700) if missing and return the spool root."""
    spool_root = spool_root or root()
    config.ensure_private_dir(config.home())
    config.ensure_private_dir(spool_root)
    for sub in (TMP, READY):
        config.ensure_private_dir(os.path.join(spool_root, sub))
    return spool_root


def write_atomic(directory: str, name: str, data: bytes, tmp_dir: str) -> str:
    """Durably publish `data` as directory/name via a temp file in tmp_dir."""
    tmp_path = os.path.join(tmp_dir, f"{name}.{os.getpid()}.tmp")
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o600)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(tmp_path)
        except OSError:
            pass
        raise
    os.close(fd)
    final = os.path.join(directory, name)
    os.replace(tmp_path, final)
    _fsync_dir(directory)
    return final


def append(event_id: str, data: bytes, spool_root: "str | None" = None) -> str:
    """Publish one serialised event; returns the path of its ready/ file."""
    spool_root = ensure_layout(spool_root)
    return write_atomic(
        os.path.join(spool_root, READY),
        event_id + SUFFIX,
        data,
        os.path.join(spool_root, TMP),
    )


def ready_files(spool_root: "str | None" = None) -> "list[str]":
    """Paths of complete events, oldest first. Missing spool → empty list."""
    ready = os.path.join(spool_root or root(), READY)
    try:
        names = os.listdir(ready)
    except FileNotFoundError:
        return []
    return [os.path.join(ready, n) for n in sorted(names) if n.endswith(SUFFIX)]


def size(spool_root: "str | None" = None) -> int:
    """Number of events waiting in ready/."""
    return len(ready_files(spool_root))


def quarantine(path: str, reason: str, spool_root: "str | None" = None) -> str:
    """Move a file out of ready/ into quarantine/, with the reason beside it."""
    spool_root = spool_root or root()
    qdir = config.ensure_private_dir(os.path.join(spool_root, QUARANTINE))
    name = os.path.basename(path)
    target = os.path.join(qdir, name)
    os.replace(path, target)
    fd = os.open(target + ".reason", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(reason.rstrip() + "\n")
    return target
