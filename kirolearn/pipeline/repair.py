"""`kirolearn repair`: rebuild a damaged or lost database from what SQLite can recover and the spool.

The file surgery is the store's (backends.rebuild_local). With the drain lock held it:
1. copies the damaged file (and its -wal / -shm) into $KIROLEARN_HOME/backups/
   (0600), so nothing is ever repaired in place;
2. recovers rows from that copy, with the `sqlite3` command's `.recover`
   when it is installed (it reads around damaged pages, and is the tool
   SQLite documents for this), else row by row through Python's sqlite3,
   skipping rowids whose pages cannot be read;
3. builds a fresh, migrated database, copies every recovered row of every
   table it knows into it (full-text indexes refill through their triggers),
   and puts it in place of the damaged file;
4. moves what spool/done/ keeps (files already drained, the write-ahead log)
   back into ready/ and runs one drain, which stores whatever the spool holds
   (events the recovered rows already have dedupe by event id), and reports counts.
"""

import os
import shutil
import time
from dataclasses import asdict, dataclass, field

from kirolearn.core import isotime, paths
from kirolearn.store import backends, state

NO_CONTENT_METHOD = backends.NO_CONTENT_METHOD


@dataclass
class RepairReport:
    """What `kirolearn repair` did (`--json` prints this).

    rebuilt: the database file was rebuilt (from what could be recovered, and the spool);
    nothing_saved: it held events or records, and none of them came back; repaired: rebuilt, and
    something of what it held (or of the spool) is in it again."""

    database: str
    state_before: str
    detail: str = ""
    backups: list = field(default_factory=list)
    method: str = ""
    recovered: dict = field(default_factory=dict)
    unreadable_tables: list = field(default_factory=list)
    # the file header was not SQLite's: rebuilt from the pages
    header_rebuilt: bool = False
    page_size: int = 0
    held_before: dict = field(default_factory=dict)
    lost_events: int = 0
    lost_records: int = 0
    reingested: int = 0
    # files spool/done/ kept that went back to ready/ for this repair's drain
    requeued: int = 0
    already_stored: int = 0
    quarantined: int = 0
    events: int = 0
    records: int = 0
    rebuilt: bool = False
    nothing_saved: bool = False
    repaired: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def _private_copy(src: str, dst: str) -> None:
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
        shutil.copyfileobj(inp, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())


def _backup(path: str, stamp: str) -> "list[str]":
    directory = paths.ensure_private_dir(os.path.join(paths.home(), "backups"))
    copies = []
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            target = os.path.join(directory, f"kirolearn-{stamp}.db{suffix}")
            _private_copy(path + suffix, target)
            copies.append(target)
    return copies


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def repair(settings, *, force: bool = False) -> RepairReport:
    """Back up, recover, rebuild and re-ingest (see the module docstring). Hold the drain lock around it."""
    from kirolearn import health
    from kirolearn.pipeline import drain

    path = paths.db_path()
    found = health.store_health(path)
    report = RepairReport(
        database=path,
        state_before=found["state"],
        detail=found["detail"],
        held_before={k: v for k, v in state.read(state.STORE).items() if k in ("events", "records")},
    )
    if found["state"] in ("ok", "none") and not force:
        return report  # nothing to repair; the caller says so
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    report.backups = _backup(path, stamp)
    rebuilt = backends.rebuild_local(path, report.backups[0] if report.backups else None, stamp)
    for key in ("method", "recovered", "unreadable_tables", "header_rebuilt", "page_size"):
        setattr(report, key, rebuilt[key])
    from kirolearn.capture import spool

    # drained into the damaged file: the log brings them back
    requeued = spool.requeue_done()
    report.requeued = len(requeued)
    with backends.open_store(path) as store:
        before = store.event_ids_present(requeued) if requeued else set()
        stats = drain.Drainer(store, settings).run_once()
        counts = store.counts()
        from_log = len(store.event_ids_present(requeued) - before) if requeued else 0
    report.reingested, report.already_stored, report.quarantined = (
        stats.stored,
        stats.already_stored,
        stats.quarantined,
    )
    report.events, report.records = counts["events"], counts["records"]
    held = int(report.held_before.get("events") or 0)
    report.lost_events = max(0, held - int(report.recovered.get("events", 0)) - from_log)
    report.lost_records = max(
        0, int(report.held_before.get("records") or 0) - int(report.recovered.get("memory_records", 0))
    )
    marker = {
        **state.store_identity(path),
        "created_at": isotime.now_iso(),
        "repaired_at": isotime.now_iso(),
        **counts,
    }
    state.write(state.STORE, marker)
    health.drain_finished(None)
    report.rebuilt = True
    held_anything = held > 0 or int(report.held_before.get("records") or 0) > 0
    report.nothing_saved = held_anything and report.events == 0 and report.records == 0
    report.repaired = not report.nothing_saved
    return report
