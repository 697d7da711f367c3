"""The SQL side of `kirolearn repair`: recover rows from a damaged SQLite file.

Two ways, best first: the `sqlite3` command's `.recover` (it reads around
damaged pages, and is the tool SQLite documents for this), else row by row
through Python's sqlite3, skipping rowids whose pages cannot be read. The
orchestration (backups, the drain lock, re-ingesting the spool) is in
kirolearn.pipeline.repair.
"""

import os
import shutil
import sqlite3
import subprocess

from kirolearn.store.base import NO_CONTENT_METHOD, RECOVER_METHOD, SALVAGE_METHOD
from kirolearn.store.sqlite import db as store

# rowids probed past the last readable one if max(rowid) is not
PROBE_LIMIT = 100_000


def sqlite3_cli() -> "str | None":
    """The `sqlite3` command if it is installed and knows `.recover` (SQLite 3.29+), else None."""
    exe = shutil.which("sqlite3")
    if not exe:
        return None
    import tempfile

    # tried, not trusted by version: some 3.40 builds lack sqlite_dbpage
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


def recover_with_cli(exe: str, damaged: str, scratch: str) -> bool:
    """`sqlite3 damaged .recover | sqlite3 scratch`; True when it produced a readable database."""
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)
    try:
        dump = subprocess.Popen([exe, damaged, ".recover"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        # no -bail: past a failing statement, one bad row costs one row
        subprocess.run([exe, scratch], stdin=dump.stdout, capture_output=True, timeout=3600)
        if dump.stdout is not None:
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


HEADER_MAGIC = b"SQLite format 3\x00"
HEADER_SIZE = 100
# interior/leaf index, interior/leaf table
_BTREE_PAGE_TYPES = (0x02, 0x05, 0x0A, 0x0D)


def header_damaged(path: str) -> bool:
    """Whether the file's first 16 bytes are not SQLite's magic string (a file too short counts too)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(HEADER_MAGIC)) != HEADER_MAGIC
    except OSError:
        return False


def guess_page_size(path: str) -> "int | None":
    """The page size of a database whose 100-byte header is gone, read from its pages.

    Page 1's b-tree header follows the file header at byte 100 (a table page, leaf or interior);
    every other page starts at a multiple of the page size, and b-tree pages start with one of four
    type bytes. The size whose page starts look most like b-tree pages (the file size a multiple of
    it) wins; None when page 1 does not look like a b-tree page at all.
    """
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            data = fh.read(min(size, 64 << 20))
    except OSError:
        return None
    if len(data) <= HEADER_SIZE or data[HEADER_SIZE] not in (0x05, 0x0D):
        return None
    best, best_score = None, -1.0
    for page_size in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536):
        if size % page_size or size < page_size:
            continue
        starts = range(page_size, min(len(data), size), page_size)
        if not starts:
            score = 0.0
        else:
            score = sum(1 for at in starts if data[at] in _BTREE_PAGE_TYPES) / len(starts)
        if score > best_score:
            best, best_score = page_size, score
    return best


def rebuild_header(damaged: str, scratch: str) -> "int | None":
    """Copy `damaged` to `scratch` (0600) with a valid 100-byte header; returns the page size used.

    Everything but the page size is what a fresh kirolearn database has (UTF-8, no reserved bytes,
    schema format 4, rollback journal, no freelist: lost free pages are only unused space); the
    page count is the file's size. None (and no scratch file) when no page size can be told.
    """
    page_size = guess_page_size(damaged)
    if page_size is None:
        return None
    import struct

    pages = os.path.getsize(damaged) // page_size
    header = bytearray(HEADER_SIZE)
    header[0:16] = HEADER_MAGIC
    struct.pack_into(">H", header, 16, 1 if page_size == 65536 else page_size)
    # file format write/read version: legacy (no WAL needed to read it)
    header[18], header[19] = 1, 1
    # reserved bytes; payload fractions
    header[20], header[21], header[22], header[23] = 0, 64, 32, 32
    struct.pack_into(">I", header, 24, 1)  # file change counter
    # database size in pages (valid: 92 holds the same counter)
    struct.pack_into(">I", header, 28, pages)
    struct.pack_into(">I", header, 40, 1)  # schema cookie
    struct.pack_into(">I", header, 44, 4)  # schema format number
    struct.pack_into(">I", header, 56, 1)  # text encoding: UTF-8
    struct.pack_into(">I", header, 92, 1)  # version-valid-for = change counter
    struct.pack_into(
        ">I",
        header,
        96,
        sqlite3.sqlite_version_info[0] * 1_000_000
        + sqlite3.sqlite_version_info[1] * 1000
        + sqlite3.sqlite_version_info[2],
    )
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o600)
    with os.fdopen(fd, "wb") as out, open(damaged, "rb") as inp:
        inp.seek(HEADER_SIZE)
        out.write(bytes(header))
        shutil.copyfileobj(inp, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())
    return page_size


def _tables(conn) -> "dict[str, list[str]]":
    """Plain tables (no virtual tables, no FTS shadow tables, no SQLite internals) and their columns."""
    rows = conn.execute("select name, type, sql from sqlite_master where type = 'table'").fetchall()
    virtual = [name for name, _, sql in rows if (sql or "").lstrip().upper().startswith("CREATE VIRTUAL")]
    found = {}
    for name, _, _sql in rows:
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
                cursor = conn.execute(
                    f"select rowid, {select} from [{table}] where rowid > ? order by rowid", [pos]
                )
            for row in cursor:
                pos = row[0]
                yield row[1:]
            return
        except sqlite3.DatabaseError:
            pass
        # A damaged page: probe rowids one by one until a range reads.
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


def copy_into(src, db, recovered: dict, unreadable: list) -> None:
    """Copy every readable row of every table the fresh store `db` knows from the connection `src`.

    Rows a table gained go into `recovered[table]`; a table that cannot be read goes into `unreadable`.
    """
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
            unreadable.append(table)
            continue
        recovered[table] = db.execute(f"select count(*) from [{table}]").fetchone()[0] - before


def open_source(path: str):
    """A read-only connection to a recovered or damaged copy, or None if SQLite cannot open it."""
    try:
        return sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
    except sqlite3.Error:
        return None


def copy_from(source: str, db, recovered: dict, unreadable: list) -> None:
    """copy_into from the file `source`; an unreadable schema is noted in `unreadable`."""
    src = open_source(source)
    if src is None:
        return
    try:
        copy_into(src, db, recovered, unreadable)
    except sqlite3.DatabaseError as exc:  # even the table list is unreadable
        unreadable.append(f"(schema: {exc})")
    finally:
        src.close()


def close_checkpointed(db) -> None:
    """Fold the WAL into the file and close, so the file alone holds everything."""
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.conn.close()


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def rebuild(path: str, damaged: "str | None", stamp: str) -> dict:
    """Build a fresh, migrated database at `path` from what the copy `damaged` (None or empty: nothing)
    still holds: sqlite3's .recover when installed, else row by row; the header rebuilt first when it
    is not SQLite's. The damaged file's journal is never applied to the new one. Returns {"method",
    "recovered": {table: rows}, "unreadable_tables", "header_rebuilt", "page_size"}."""
    recovered: dict[str, int] = {}
    unreadable: list[str] = []
    out = {
        "method": NO_CONTENT_METHOD,
        "recovered": recovered,
        "unreadable_tables": unreadable,
        "header_rebuilt": False,
        "page_size": 0,
    }
    new_path = path + ".repairing"
    for suffix in ("", "-wal", "-shm"):
        _remove(new_path + suffix)
    scratch = source = rebuilt = None
    if damaged and os.path.getsize(damaged) > 0:
        if header_damaged(damaged):  # nothing reads past a bad header
            rebuilt = os.path.join(os.path.dirname(damaged), f"header-rebuilt-{stamp}.db")
            out["page_size"] = rebuild_header(damaged, rebuilt) or 0
            if out["page_size"]:
                out["header_rebuilt"], damaged = True, rebuilt
            else:
                rebuilt = None
        exe = sqlite3_cli()
        if exe:
            scratch = os.path.join(os.path.dirname(damaged), f"recovered-{stamp}.db")
            if recover_with_cli(exe, damaged, scratch):
                out["method"], source = RECOVER_METHOD, scratch
        if source is None:
            out["method"], source = SALVAGE_METHOD, damaged
    db = store.open_db(new_path, mark=False)
    if source is not None:
        copy_from(source, db, recovered, unreadable)
    close_checkpointed(db)
    # the damaged file's journal must never be applied to the new one
    for suffix in ("-wal", "-shm"):
        _remove(path + suffix)
    os.replace(new_path, path)
    for suffix in ("-wal", "-shm", ".setup.lock"):
        _remove(new_path + suffix)
    for leftover in (scratch, rebuilt):
        if leftover:
            _remove(leftover)
    return out
