"""Store side of scrubbing: the rules version the stored text was scrubbed with, and rescrub's SQL.

Part of the store boundary (design rule 10): every query `kirolearn rescrub` and the
rules-version notes need lives here. Rescrub walks every ordinary table's text columns in rowid
order, in chunks of one transaction each, and records after every chunk where it got to, so an
interrupted run resumes where it stopped (re-scrubbing is idempotent, so a repeat is only time).
Then the full-text indexes are rebuilt, and the WAL checkpointed and the file vacuumed so the
old bytes are gone from the files, not only from the rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

from kirolearn.store.sqlite.db import writing

CHUNK_ROWS = 500
# ids, digests and times hold no secret, and other rows refer to them
_SKIP_SUFFIXES = ("_id", "_ids", "_hash", "_at")
_SKIP_NAMES = frozenset(
    (
        "id",
        "key",
        "kind",
        "trigger",
        "hook",
        "generation",
        "surface",
        "extract_state",
        "outcome",
        "extractor",
        "observation_type",
        "strategy",
    )
)


def scrubbed_with(db) -> int | None:
    """The rules version the stored text was last scrubbed with (None: the store predates it)."""
    from kirolearn.store.sqlite import reader

    return reader.scrubbed_with(db)


def _set(db, key: str, value: str | None) -> None:
    if value is None:
        db.execute("delete from scrub_state where key = ?", [key])
    else:
        db.execute("insert or replace into scrub_state (key, value) values (?, ?)", [key, value])


def progress(db) -> dict | None:
    """Where an interrupted rescrub stopped: {"version", "table", "rowid"}, or None."""
    row = db.execute("select value from scrub_state where key = 'rescrub_progress'").fetchone()
    return json.loads(row[0]) if row else None


def _virtual_tables(db) -> dict[str, str]:
    return {
        r[0]: r[1] or ""
        for r in db.execute(
            "select name, sql from sqlite_master where type = 'table' and sql like 'create virtual table%'"
        )
    }


def text_tables(db) -> list[tuple[str, list[str]]]:
    """(table, text columns) of every table whose text rescrub must see, in a stable order.

    Ordinary tables, and FTS tables that keep their own copy of the text; external-content FTS
    indexes are rebuilt from their tables instead, and shadow tables are the FTS engine's own.
    """
    virtual = _virtual_tables(db)
    shadow_prefixes = tuple(name + "_" for name in virtual)
    out = []
    for name in sorted(db.table_names()):
        if (
            name.startswith(("sqlite_", "_sqlite"))
            or name == "scrub_state"
            or name.startswith(shadow_prefixes)
        ):
            continue
        sql = virtual.get(name)
        if sql is not None and ("fts5vocab" in sql.lower() or "content=" in sql.replace(" ", "").lower()):
            # a view over an index, or an index over another table's text
            continue
        info = db.execute(f"pragma table_info([{name}])").fetchall()
        cols = [
            c[1]
            for c in info
            if (sql is not None or (c[2] or "").upper() in ("TEXT", ""))
            and not c[5]
            and not c[1].endswith(_SKIP_SUFFIXES)
            and c[1] not in _SKIP_NAMES
        ]
        if cols:
            out.append((name, cols))
    return out


def rescrub_rows(db, scrub_cell, version: int, on_chunk=None) -> dict[str, int]:
    """Re-scrub every text cell (resuming an interrupted run); returns rows changed per table.

    `scrub_cell(table, column, value, derived) -> new value` decides each cell; it may put a new
    value for a column derived from the text into `derived` (events.content_hash).
    """
    tables = text_tables(db)
    virtual = _virtual_tables(db)
    start = progress(db)
    if start and start.get("version") != version:
        start = None  # rules changed again since: start over
    changed: Counter = Counter()
    names = [t for t, _ in tables]
    begin = names.index(start["table"]) if start and start.get("table") in names else 0
    for name, cols in tables[begin:]:
        last = start["rowid"] if start and start.get("table") == name else 0
        start = None
        select = ", ".join(f"[{c}]" for c in cols)
        while True:
            try:
                rows = db.execute(
                    f"select rowid, {select} from [{name}] where rowid > ? order by rowid limit ?",
                    [last, CHUNK_ROWS],
                ).fetchall()
            except sqlite3.OperationalError:
                if name not in virtual:
                    raise
                # a virtual table whose module is not loaded here (vectors)
                break
            if not rows:
                break
            updates = []
            for row in rows:
                data = dict(zip(cols, row[1:]))
                derived: dict = {}
                new = {c: scrub_cell(name, c, v, derived) for c, v in data.items()}
                diff = {c: v for c, v in new.items() if v != data[c]}
                if diff:
                    diff.update(derived)
                if diff:
                    updates.append((row[0], diff))
            last = rows[-1][0]
            with writing(db):
                for rowid, diff in updates:
                    sets = ", ".join(f"[{c}] = ?" for c in diff)
                    db.execute(f"update [{name}] set {sets} where rowid = ?", [*diff.values(), rowid])
                _set(db, "rescrub_progress", json.dumps({"version": version, "table": name, "rowid": last}))
            if updates:
                changed[name] += len(updates)
            if on_chunk:
                on_chunk(name, last)
    return dict(changed)


def rebuild_fts(db) -> list[str]:
    """Rebuild and merge every FTS5 index, so no segment keeps a term of text that was replaced."""
    done = []
    for name, sql in _virtual_tables(db).items():
        low = sql.lower()
        if "using fts5" in low and "fts5vocab" not in low:
            with writing(db):
                if "content=" in low.replace(" ", ""):
                    db.execute(f"insert into [{name}]([{name}]) values('rebuild')")
                db.execute(f"insert into [{name}]([{name}]) values('optimize')")
            done.append(name)
    return done


def finish(db, version: int) -> None:
    """Record that every stored text is scrubbed with `version`, and forget the progress mark."""
    with writing(db):
        _set(db, "scrubbed_with", str(version))
        _set(db, "rescrub_progress", None)


def compact(db) -> dict:
    """Checkpoint the WAL into the file, vacuum, and truncate the WAL: old pages leave both files.

    Returns {"checkpoint_complete": bool}; False when another connection (a running drain or MCP
    server) still reads an old snapshot, so the WAL could not be emptied.
    """
    db.execute("pragma wal_checkpoint(TRUNCATE)")
    db.conn.execute("VACUUM")
    busy, _, _ = db.execute("pragma wal_checkpoint(TRUNCATE)").fetchone()
    return {"checkpoint_complete": busy == 0}
