"""The durable event spool: one JSON file per event (standard library only).

Layout under $KIROLEARN_HOME/spool/ (0700; files 0600):
    tmp/         events being written; never read by the drainer
    ready/       complete events, `<event_id>.json`; sorted names = arrival order
    quarantine/  files the drainer could not parse, each with a `.reason` file
    done/        drained events, one folder per drain pass (`<UTC stamp>-<pass id>/events.jsonl`,
                 each line an event as the drain stored it: scrubbed), kept as the write-ahead log
                 until an integrity check after them passed and their retention went by
                 (kirolearn.pipeline.drain); `kirolearn repair` re-ingests them

Invariant: a file in ready/ is always complete. Writers publish by writing
tmp/, fsync, then an atomic rename into ready/ (and fsync the directory), so no
lock is needed between concurrent hook processes. This module knows nothing of
SQLite or LLMs; locking between drainers lives with the drainer (the lock file's name is here).
"""

import os

from kirolearn.core import jsonfast, paths

TMP = "tmp"
READY = "ready"
QUARANTINE = "quarantine"
DONE = "done"
SUFFIX = ".json"
LOCK_NAME = ".drain.lock"  # the drainer's lock
MAX_ENTRY_BYTES = 512 * 1024  # hooks shrink events below it: a bigger file is not ours

_O_BINARY = getattr(os, "O_BINARY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class BadEntry(Exception):
    """A spool entry that is not a regular file of a sane size; `str()` is the quarantine reason."""


class PublishError(OSError):
    """The hook could not publish its event; the message says where the event is (if anywhere)."""

    def __str__(self) -> str:
        return str(self.strerror)


def root() -> str:
    """The spool directory."""
    return paths.spool_dir()


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
    paths.ensure_private_dir(paths.home())
    paths.ensure_private_dir(spool_root)
    for sub in (TMP, READY):
        paths.ensure_private_dir(os.path.join(spool_root, sub))
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
    try:
        os.replace(tmp_path, final)
    except OSError as exc:
        # A later drain would store what the hook reported as not recorded.
        try:
            os.unlink(tmp_path)
            where = "nothing recorded"
        except OSError:
            where = f"the event stays in {tmp_dir} and a later drain stores it"
        raise PublishError(
            exc.errno, f"cannot move the event into {directory}: {exc.strerror or exc}; {where}"
        ) from None
    _fsync_dir(directory)
    return final


def read_entry(path: str, limit: int = MAX_ENTRY_BYTES) -> bytes:
    """The bytes of one spool file, read safely; raises BadEntry (or FileNotFoundError).

    Opened with O_NOFOLLOW | O_NONBLOCK and checked with fstat before reading:
    a symlink, FIFO, socket, device or directory is never followed, waited on
    or read, and a file over `limit` is refused without being read whole.
    """
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_BINARY)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP for a link under O_NOFOLLOW, EISDIR on some systems
        if os.path.islink(path):
            raise BadEntry("a symbolic link, not a file the hook wrote: not followed") from None
        if os.path.isdir(path):
            raise BadEntry("a directory, not an event file") from None
        raise BadEntry(f"cannot open: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISLNK(info.st_mode):
            raise BadEntry("a symbolic link, not a file the hook wrote: not followed")
        if stat.S_ISDIR(info.st_mode):
            raise BadEntry("a directory, not an event file")
        if stat.S_ISFIFO(info.st_mode):
            raise BadEntry("a FIFO (named pipe), not an event file: not read")
        if stat.S_ISSOCK(info.st_mode):
            raise BadEntry("a socket, not an event file: not read")
        if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
            raise BadEntry("a device, not an event file: not read")
        if not stat.S_ISREG(info.st_mode):
            raise BadEntry("not a regular file")
        if info.st_size > limit:
            raise BadEntry(f"{info.st_size} bytes, more than the {limit} a hook ever writes: not read")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:  # grew after fstat
                raise BadEntry(f"more than the {limit} bytes a hook ever writes: not read")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


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
    qdir = paths.ensure_private_dir(os.path.join(spool_root, QUARANTINE))
    name = os.path.basename(path)
    target = os.path.join(qdir, name)
    n = 0
    while os.path.lexists(target) or os.path.lexists(target + ".reason"):
        n += 1  # never replace an earlier quarantined file
        target = os.path.join(qdir, f"{name}.{n}")
    os.replace(path, target)
    try:
        import stat

        info = os.lstat(target)
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            # chmod would change a hard link's other names, outside the spool too.
            reason = (
                f"{reason.rstrip()} (a hard link, {info.st_nlink} names: only this name was moved; "
                "the file's mode and other names were left as they were)"
            )
        elif stat.S_ISREG(info.st_mode):
            os.chmod(target, 0o600)  # whatever it was, it may hold raw event text
    except OSError:
        pass
    fd = os.open(target + ".reason", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(reason.rstrip() + "\n")
    return target


DONE_LOG = "events.jsonl"  # a pass's log: one line per event, as the drain stored it (scrubbed)


def keep_done(
    files: "list[str]", batch: str, lines: "dict[str, bytes]", spool_root: "str | None" = None
) -> str:
    """Keep a pass's drained events in done/<batch>/events.jsonl (0700 folders, a 0600 file), then
    remove their ready/ files; returns the folder.

    `lines`: {path: the event as the drain stored it}, scrubbed, so the log holds no secret the
    store does not; a file with no line (a duplicate, an event stored before) only goes. The log is
    fsynced once, before any file is removed."""
    spool_root = spool_root or root()
    target = paths.ensure_private_dir(
        os.path.join(paths.ensure_private_dir(os.path.join(spool_root, DONE)), batch)
    )
    body = b"".join(lines[p].rstrip(b"\n") + b"\n" for p in files if p in lines)
    if body:
        write_atomic(target, DONE_LOG, body, target)
    for path in files:
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
    return target


def done_batches(spool_root: "str | None" = None) -> "list[str]":
    """Names of done/'s pass folders, oldest first (their names start with a UTC stamp)."""
    try:
        return sorted(
            n for n in os.listdir(os.path.join(spool_root or root(), DONE)) if not n.startswith(".")
        )
    except (FileNotFoundError, NotADirectoryError):
        return []


def _log_lines(folder: str) -> "list[bytes]":
    try:
        with open(os.path.join(folder, DONE_LOG), "rb") as fh:
            return [line for line in fh.read().split(b"\n") if line.strip()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _event_id(line: bytes) -> "str | None":
    try:
        value = jsonfast.loads(line.decode("utf-8", "replace"))
    except ValueError:
        return None
    event_id = value.get("event_id") if isinstance(value, dict) else None
    return event_id if isinstance(event_id, str) and event_id.isalnum() else None


def done_files(spool_root: "str | None" = None) -> "list[str]":
    """The ids of every event kept in done/, oldest pass first."""
    base = os.path.join(spool_root or root(), DONE)
    found = []
    for batch in done_batches(spool_root):
        found += [e for e in map(_event_id, _log_lines(os.path.join(base, batch))) if e]
    return found


def drop_done(batch: str, spool_root: "str | None" = None) -> int:
    """Remove one pass folder of done/ and its log; returns how many events went."""
    folder = os.path.join(spool_root or root(), DONE, batch)
    removed = len(_log_lines(folder))
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    for name in names:
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            continue  # not ours: left alone, and so is the folder
        os.unlink(path)
    try:
        os.rmdir(folder)
    except OSError:
        pass
    return removed


def requeue_done(spool_root: "str | None" = None) -> "list[str]":
    """Put every event kept in done/ back into ready/ (for `kirolearn repair`); returns their ids.

    An id already in ready/ is the same event waiting again: it is not written twice."""
    spool_root = ensure_layout(spool_root)
    ready, tmp = os.path.join(spool_root, READY), os.path.join(spool_root, TMP)
    moved = []
    for batch in done_batches(spool_root):
        for line in _log_lines(os.path.join(spool_root, DONE, batch)):
            event_id = _event_id(line)
            if event_id is None or os.path.lexists(os.path.join(ready, event_id + SUFFIX)):
                continue
            write_atomic(ready, event_id + SUFFIX, line, tmp)
            moved.append(event_id)
        drop_done(batch, spool_root)
    return moved


def drop_done_events(event_ids, spool_root: "str | None" = None) -> int:
    """Remove these events from done/'s logs (a purge: their text must go too); returns how many."""
    wanted = {str(e) for e in event_ids}
    base = os.path.join(spool_root or root(), DONE)
    removed = 0
    for batch in done_batches(spool_root):
        folder = os.path.join(base, batch)
        lines = _log_lines(folder)
        kept = [line for line in lines if _event_id(line) not in wanted]
        if len(kept) == len(lines):
            continue
        removed += len(lines) - len(kept)
        if kept:
            write_atomic(folder, DONE_LOG, b"\n".join(kept) + b"\n", folder)
        else:
            drop_done(batch, spool_root)
    return removed
