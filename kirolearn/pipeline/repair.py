"""`kirolearn repair`: rebuild a damaged or lost database from what SQLite can recover and the spool.

Part of the store boundary (like migrations.py, it speaks SQL). With the drain
lock held it:
1. copies the damaged file (and its -wal / -shm) into $KIROLEARN_HOME/backups/
   (0600), so nothing is ever repaired in place;
2. recovers rows from that copy, with the `sqlite3` command's `.recover`
   when it is installed (it reads around damaged pages, and is the tool
   SQLite documents for this), else row by row through Python's sqlite3,
   skipping rowids whose pages cannot be read;
3. builds a fresh, migrated database, copies every recovered row of every
   table it knows into it (full-text indexes refill through their triggers),
   and puts it in place of the damaged file;
4. runs one drain, which stores whatever the spool still holds (the drain
   keeps spool files until a healthy store has them), and reports counts.
"""

import os
import shutil
import sqlite3
import subprocess
import time
from dataclasses import asdict, dataclass, field

from kirolearn import config
from kirolearn.store import state
from kirolearn.store import sqlite as store

CLI_METHOD = "sqlite3 .recover"
SALVAGE_METHOD = "row-by-row salvage (Python sqlite3)"
NO_CONTENT_METHOD = "none: no database content to recover"  # the file was missing or empty
PROBE_LIMIT = 100_000  # rowids probed one by one past the last readable one when max(rowid) is unreadable


@dataclass
class RepairReport:
    """What `kirolearn repair` did (`--json` prints this)."""

    database: str
    state_before: str
    detail: str = ""
    backups: list = field(default_factory=list)
    method: str = ""
    recovered: dict = field(default_factory=dict)
    unreadable_tables: list = field(default_factory=list)
    held_before: dict = field(default_factory=dict)
    lost_events: int = 0
    reingested: int = 0
    already_stored: int = 0
    quarantined: int = 0
    events: int = 0
    records: int = 0
    repaired: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def sqlite3_cli() -> "str | None":
    """The `sqlite3` command if it is installed and knows `.recover` (SQLite 3.29+), else None."""
    exe = shutil.which("sqlite3")
    if not exe:
        return None
    import tempfile

    # Some builds (Debian's 3.40, for one) have the command but not the sqlite_dbpage table it
    # needs: try it on a one-row database instead of trusting the version number.
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.db")
        conn = sqlite3.connect(probe)
        conn.execute("create table t(a)")
        conn.execute("insert into t values ('kirolearn-probe')")
        conn.commit()
        conn.close()
        try:
            out = subprocess.run([exe, probe, ".recover"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return None
    return exe if "kirolearn-probe" in out else None


def _private_copy(src: str, dst: str) -> None:
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
        shutil.copyfileobj(inp, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())


def _backup(path: str, stamp: str) -> "list[str]":
    directory = config.ensure_private_dir(os.path.join(config.home(), "backups"))
    copies = []
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            target = os.path.join(directory, f"kirolearn-{stamp}.db{suffix}")
            _private_copy(path + suffix, target)
            copies.append(target)
    return copies


def _recover_with_cli(exe: str, damaged: str, scratch: str) -> bool:
    """`sqlite3 damaged .recover | sqlite3 scratch`; True when it produced a readable database."""
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)
    try:
        dump = subprocess.Popen([exe, damaged, ".recover"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        # Without -bail the loading shell goes on past a statement that fails: one bad row costs one row.
        subprocess.run([exe, scratch], stdin=dump.stdout, capture_output=True, timeout=3600)
        dump.stdout.close()
        dump.wait(timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    try:
        conn = sqlite3.connect(scratch)
        conn.execute("select count(*) from sqlite_master").fetchone()
        conn.close()
    except sqlite3.Error:
        return False
    return True


def _tables(conn) -> "dict[str, list[str]]":
    """Plain tables (no virtual tables, no FTS shadow tables, no SQLite internals) and their columns."""
    rows = conn.execute("select name, type, sql from sqlite_master where type = 'table'").fetchall()
    virtual = [name for name, _, sql in rows if (sql or "").lstrip().upper().startswith("CREATE VIRTUAL")]
    found = {}
    for name, _, sql in rows:
        if name.startswith("sqlite_") or name in virtual or any(name.startswith(v + "_") for v in virtual):
            continue
        if name == "lost_and_found":
            continue
        try:
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info([{name}])")]
        except sqlite3.Error:
            continue
        if cols:
            found[name] = cols
    return found


def _read_rows(conn, table: str, cols: "list[str]"):
    """Every readable row of `table`, skipping rowids whose pages are damaged; yields tuples."""
    select = ", ".join(f"[{c}]" for c in cols)
    try:
        top = conn.execute(f"select max(rowid) from [{table}]").fetchone()[0]
    except sqlite3.Error:
        top = None
    pos = None  # last rowid read (None: before the first)
    while True:
        try:
            if pos is None:
                cursor = conn.execute(f"select rowid, {select} from [{table}] order by rowid")
            else:
                cursor = conn.execute(f"select rowid, {select} from [{table}] where rowid > ? order by rowid", [pos])
            for row in cursor:
                pos = row[0]
                yield row[1:]
            return
        except sqlite3.DatabaseError:
            pass
        # A damaged page: probe the next rowids one by one until a range read works again.
        start = (pos if pos is not None else 0) + 1
        limit = top if top is not None else start + PROBE_LIMIT
        pos = start
        while pos <= limit:
            try:
                row = conn.execute(f"select rowid, {select} from [{table}] where rowid = ?", [pos]).fetchone()
            except sqlite3.DatabaseError:
                row = None
            if row is not None:
                yield row[1:]
                break
            pos += 1
        if pos > limit:
            return


def _copy_into(src, db, report: RepairReport) -> None:
    wanted = _tables(db.conn)
    available = _tables(src)
    for table, cols in wanted.items():
        if table == "_sqlite_migrations" or table not in available:
            continue
        common = [c for c in cols if c in available[table]]
        marks = ", ".join("?" * len(common))
        insert = f"insert or ignore into [{table}] ({', '.join(f'[{c}]' for c in common)}) values ({marks})"
        before = db.execute(f"select count(*) from [{table}]").fetchone()[0]
        try:
            with store.writing(db):
                batch = []
                for row in _read_rows(src, table, common):
                    batch.append(row)
                    if len(batch) >= 500:
                        db.conn.executemany(insert, batch)
                        batch = []
                if batch:
                    db.conn.executemany(insert, batch)
        except sqlite3.DatabaseError:
            report.unreadable_tables.append(table)
            continue
        report.recovered[table] = db.execute(f"select count(*) from [{table}]").fetchone()[0] - before


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def repair(settings, *, force: bool = False) -> RepairReport:
    """Back up, recover, rebuild and re-ingest (see the module docstring). Hold the drain lock around it."""
    from kirolearn import health
    from kirolearn.pipeline import drain

    path = config.db_path()
    found = health.store_health(path)
    report = RepairReport(database=path, state_before=found["state"], detail=found["detail"],
                          held_before={k: v for k, v in state.read(state.STORE).items() if k in ("events", "records")})
    if found["state"] in ("ok", "none") and not force:
        return report  # nothing to repair; the caller says so
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    report.backups = _backup(path, stamp)
    new_path = path + ".repairing"
    for suffix in ("", "-wal", "-shm"):
        _remove(new_path + suffix)
    scratch = None
    source = None
    if report.backups and os.path.getsize(report.backups[0]) > 0:
        damaged = report.backups[0]  # recover from the copy: the original is never modified
        exe = sqlite3_cli()
        if exe:
            scratch = os.path.join(os.path.dirname(damaged), f"recovered-{stamp}.db")
            if _recover_with_cli(exe, damaged, scratch):
                report.method, source = CLI_METHOD, scratch
        if source is None:
            report.method, source = SALVAGE_METHOD, damaged
    else:
        report.method = NO_CONTENT_METHOD
    db = store.open_db(new_path, mark=False)
    if source is not None:
        try:
            src = sqlite3.connect(f"file:{os.path.abspath(source)}?mode=ro", uri=True)
        except sqlite3.Error:
            src = None
        if src is not None:
            try:
                _copy_into(src, db, report)
            except sqlite3.DatabaseError as exc:  # even the table list is unreadable
                report.unreadable_tables.append(f"(schema: {exc})")
            finally:
                src.close()
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.conn.close()
    for suffix in ("-wal", "-shm"):  # the damaged file's journal must never be applied to the new one
        _remove(path + suffix)
    os.replace(new_path, path)
    for suffix in ("-wal", "-shm"):
        _remove(new_path + suffix)
    if scratch:
        _remove(scratch)
    db = store.open_db(path)
    stats = drain.Drainer(db, settings).run_once()
    report.reingested, report.already_stored, report.quarantined = stats.stored, stats.already_stored, stats.quarantined
    counts = store.counts(db)
    report.events, report.records = counts["events"], counts["records"]
    held = int(report.held_before.get("events") or 0)
    report.lost_events = max(0, held - int(report.recovered.get("events", 0)))
    marker = {"path": os.path.abspath(path), "created_at": store.now_iso(), "repaired_at": store.now_iso(), **counts}
    state.write(state.STORE, marker)
    health.drain_finished(None)
    for leftover in (new_path + ".setup.lock",):
        _remove(leftover)
    report.repaired = True
    return report
