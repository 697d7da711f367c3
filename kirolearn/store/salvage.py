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

from kirolearn.store import sqlite as store

PROBE_LIMIT = 100_000  # rowids probed one by one past the last readable one when max(rowid) is unreadable


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


def recover_with_cli(exe: str, damaged: str, scratch: str) -> bool:
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
