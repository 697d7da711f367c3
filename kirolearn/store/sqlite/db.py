"""The SQLite store (sqlite-utils): open, migrate, and the pipeline's writes.

Events, records, extraction runs, drains, retention and vectors are written here;
managing records (forget, restore, purge, edit, import) is kirolearn.store.sqlite.records.

Opening applies pending migrations, turns on WAL and a 30 s busy timeout, and
keeps the file 0600. Writes that belong together (a chunk of events; an
extraction's records, its run row and the events it consumed) happen inside
one write transaction (`writing`, BEGIN IMMEDIATE) so a crash leaves all of
it or none, and concurrent writers wait for each other instead of failing.
"""

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterable
from datetime import datetime
from itertools import chain
from operator import itemgetter

import sqlite_utils

from kirolearn.core import crashpoint, envnum, isotime, paths
from kirolearn.core.errors import SchemaTooNew
from kirolearn.core.marks import DEFAULT_FRESHNESS, DEFAULT_OUTCOME
from kirolearn.store.base import PARTS_MARK, record_hash, spend_limit_reason, start_of_day
from kirolearn.store.sqlite.migrations import migrations

BUSY_TIMEOUT_SECONDS = 30
# seconds; for slow shared disks (and tests)
BUSY_TIMEOUT_ENV = "KIROLEARN_BUSY_TIMEOUT"


def busy_timeout() -> float:
    """How long a command waits for another process's lock on the database."""
    return float(envnum.number(BUSY_TIMEOUT_ENV, BUSY_TIMEOUT_SECONDS, 0, 24 * 3600))


# current UTC time in the store's one format (kirolearn.core.isotime)
now_iso = isotime.now_iso


def open_db(path: "str | None" = None, *, mark: bool = True) -> sqlite_utils.Database:
    """Open (creating if needed) and migrate the database.

    Refuses (StoreLost) to start an empty database where one was lost; a new
    one is remembered outside itself (kirolearn.store.state) unless `mark` is False.
    """
    path = path or paths.db_path()
    refuse_lost(path)
    paths.ensure_private_dir(os.path.dirname(os.path.abspath(path)))
    creating = not os.path.exists(path)
    if creating:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    wait = busy_timeout()
    conn = sqlite3.connect(path, timeout=wait)
    db = sqlite_utils.Database(conn)
    db.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
    refuse_newer_schema(db, path)
    if db.journal_mode != "wal" or migrations.pending(db):
        # drainer, MCP and CLI may open a fresh store at once: one sets it up
        from filelock import FileLock

        # 0600 whatever the umask
        os.close(os.open(path + ".setup.lock", os.O_WRONLY | os.O_CREAT, 0o600))
        with FileLock(path + ".setup.lock", timeout=wait, mode=0o600):
            if db.journal_mode != "wal":
                db.enable_wal()
            migrations.apply(db)
    db.execute(
        "PRAGMA synchronous = NORMAL"
    )  # safe with WAL: a power cut may lose the last commit, never corrupt
    if creating and mark:
        mark_created(path)
    return db


# --- health: "never created" or "lost", "damaged" or "fine" ---


def _marker_matches(marker: dict, path: str) -> bool:
    # keyed by the home's id, so a moved home keeps its guard
    from kirolearn.store import state

    return state.store_marker_matches(marker, path)


def mark_created(path: str, **counts) -> None:
    """Remember, outside the database, that it exists here (and what it held at the last drain)."""
    from kirolearn.store import state

    marker = state.read(state.STORE)
    if not _marker_matches(marker, path):
        marker = {"created_at": now_iso(), "events": 0, "records": 0}
    marker.update(state.store_identity(path), **counts)
    state.write(state.STORE, marker)


def lost_reason(path: str) -> str:
    """Why the database at `path` counts as lost ('' when it is present or was never created)."""
    from kirolearn.store import state

    marker = state.read(state.STORE)
    if not _marker_matches(marker, path):
        return ""
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        what = "is missing"
    else:
        if size:
            return ""
        what = "is empty (0 bytes)"
    events, records = int(marker.get("events") or 0), int(marker.get("records") or 0)
    held = f"{events} event{'s' * (events != 1)} and {records} record{'s' * (records != 1)}"
    when = f" ({marker['counted_at']})" if marker.get("counted_at") else ""
    # "at least": writes since that drain (MCP, import) are not counted yet
    return (
        f"the database {path} {what}, but it was created on {marker.get('created_at', '?')} and held "
        f"at least {held} at the last drain{when}"
    )


def refuse_lost(path: str) -> None:
    """Raise StoreLost instead of silently starting an empty database where one was lost."""
    reason = lost_reason(path)
    if reason:
        from kirolearn.core.errors import StoreLost

        raise StoreLost(reason)


def open_existing(path: "str | None" = None):
    """The store if it exists (migrated), else None: reading commands create nothing on a fresh machine.

    A store that existed and is gone (or emptied) is StoreLost, never "nothing yet".
    """
    path = path or paths.db_path()
    refuse_lost(path)
    return open_db(path) if os.path.exists(path) else None


def open_memory() -> sqlite_utils.Database:
    """An empty, migrated, in-memory store: what a fresh home reads as, without creating a file."""
    db = sqlite_utils.Database(memory=True)
    migrations.apply(db)
    return db


def quick_check(db) -> str:
    """SQLite's PRAGMA quick_check: '' when the file is sound, else the first problems found."""
    try:
        rows = [r[0] for r in db.execute("PRAGMA quick_check(5)").fetchall()]
    except sqlite3.DatabaseError as exc:
        return str(exc) or type(exc).__name__
    if rows == ["ok"]:
        return ""
    from kirolearn.core.errors import one_line

    text = one_line("; ".join(str(r) for r in rows[:2]))
    return text if len(text) <= 200 else text[:199] + "…"


def session_event_rows(db, project_id: str, session_id: str) -> "list[tuple[str, str]]":
    """(event_id, body) of a session's stored events, in arrival order."""
    return [
        tuple(r)
        for r in db.execute(
            "select event_id, body from events where project_id = ? and session_id = ? order by event_id",
            [project_id, session_id],
        ).fetchall()
    ]


def insert_record(db, row: dict) -> None:
    """One memory record (a row from record_row); a record id already stored is left as it is."""
    db["memory_records"].insert(row, pk="record_id", ignore=True)


def insert_run(db, run: dict) -> None:
    """One extraction_runs row (a model call that was not a drain batch, e.g. auto_compress)."""
    db["extraction_runs"].insert(run, pk="run_id")


def insert_session_summary(db, row: dict) -> None:
    """One session_summaries row (session_end)."""
    db["session_summaries"].insert(row, pk="id")


def counts(db) -> dict:
    """How many events and memory records the store holds."""
    return {
        "events": db.execute("select count(*) from events").fetchone()[0],
        "records": db.execute("select count(*) from memory_records").fetchone()[0],
    }


def change_stamp(db) -> "list[int]":
    """[newest event rowid, newest change feed number]: moves whenever an event or a record is added,
    or a record forgotten, restored or purged; read from the ends of two indexes (no count)."""
    return [
        db.execute("select coalesce(max(rowid), 0) from events").fetchone()[0],
        db.execute("select coalesce(max(seq), 0) from record_changes").fetchone()[0],
    ]


def refuse_newer_schema(db, path: str) -> None:
    known = {m.name for m in getattr(migrations, "_migrations", ())}
    if not known or "_sqlite_migrations" not in db.table_names():
        return
    applied = {
        row["name"]
        for row in db.query("select name from _sqlite_migrations where migration_set = ?", ["kirolearn"])
    }
    if applied - known:
        raise SchemaTooNew(
            f"{path} was written by a newer kirolearn (unknown migrations: "
            f"{', '.join(sorted(applied - known))}); upgrade kirolearn"
        )


@contextlib.contextmanager
def writing(db):
    """One write transaction that takes SQLite's write lock up front (BEGIN IMMEDIATE).

    sqlite-utils' atomic() starts a deferred BEGIN: a transaction that read first
    and then writes after another process committed fails at once with "database
    is locked" instead of waiting out the busy timeout. Nested use is a savepoint.
    """
    if db.conn.in_transaction:
        with db.atomic():  # a savepoint inside the open transaction
            yield db
        return
    db.conn.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        if db.conn.in_transaction:
            db.conn.execute("ROLLBACK")
        raise
    db.conn.execute("COMMIT")


# --- events ---


def _events_holding(db, column: str, values) -> "set[str]":
    """Which of `values` some stored event has in `column` (a fixed column name), 500 to a query."""
    found: set = set()
    values = list(values)
    for i in range(0, len(values), 500):
        part = values[i : i + 500]
        marks = ",".join("?" * len(part))
        sql = f"select distinct {column} from events where {column} in ({marks})"
        found.update(r[0] for r in db.execute(sql, part))
    return found


def existing_event_ids(db, event_ids) -> "set[str]":
    """Which of `event_ids` are already stored."""
    return _events_holding(db, "event_id", event_ids)


def has_content_duplicate(db, content_hash: str, since: "str | None", until: "str | None") -> bool:
    """Is an event with this content stored, received in [since, until] (None = any time)?"""
    args: list[str | None]
    if since is None:
        sql, args = "select 1 from events where content_hash = ? limit 1", [content_hash]
    else:
        sql = "select 1 from events where content_hash = ? and received_at between ? and ? limit 1"
        args = [content_hash, since, until]
    return db.execute(sql, args).fetchone() is not None


def last_turn_event_id(db, project_id: str, session_id: str, before: str) -> "str | None":
    """The newest stored event of a session before `before` that a turn holds (no stop, no lifecycle note)."""
    row = db.execute(
        "select max(event_id) from events where project_id = ? and session_id = ? and event_id < ? "
        "and kind not in ('session_summary', 'note')",
        [project_id, session_id, before],
    ).fetchone()
    return row[0] if row else None


def stored_content_hashes(db, content_hashes) -> "set[str]":
    """Which of `content_hashes` any stored event has (one query per 500, whatever their times)."""
    return _events_holding(db, "content_hash", content_hashes)


def insert_events(db, rows: "list[dict]") -> None:
    """Insert event rows; one whose event_id is stored already is skipped (caller holds the transaction).

    One executemany over the union of the rows' keys (a missing key stores NULL). Values are text,
    numbers or None, as the drain's rows hold; sqlite3 refuses anything else. (sqlite-utils'
    insert_all inspects every value of every row for JSON conversion: docs/benchmarks.md, 'Scale'.)
    """
    if not rows:
        return
    columns = tuple(dict.fromkeys(chain.from_iterable(rows)))
    sql = "insert or ignore into events ({}) values ({})".format(
        ", ".join(f"[{c}]" for c in columns), ", ".join("?" * len(columns))
    )
    # each row has each column
    if len(columns) > 1 and all(len(row) == len(columns) for row in rows):
        values: Iterable[tuple] = map(itemgetter(*columns), rows)  # picked in C
    else:
        values = (tuple(row.get(c) for c in columns) for row in rows)
    db.conn.executemany(sql, values)


# --- extraction buffer ---


def pending_sessions(db) -> "list[dict]":
    """Buffered (project, session) groups with their size, age and whether a turn ended."""
    sql = """
        select project_id, session_id, count(*) as n, min(event_id) as first_event_id,
               max(received_at) as last_received_at,
               max(case when kind = 'session_summary' then event_id end) as last_stop_id
        from events where extract_state = 'pending'
        group by project_id, session_id order by min(event_id)
    """
    return [dict(r) for r in db.query(sql)]


def pending_events(db, project_id: str, session_id: str, up_to: "str | None" = None) -> "list[dict]":
    """Buffered events of one session, oldest first (bodies decoded), optionally up to an event id."""
    sql = "select body from events where extract_state = 'pending' and project_id = ? and session_id = ?"
    args = [project_id, session_id]
    if up_to:
        sql += " and event_id <= ?"
        args.append(up_to)
    sql += " order by event_id"
    return [json.loads(r[0]) for r in db.execute(sql, args)]


def failed_attempts(db, batch_key: str) -> int:
    """How many LLM extraction attempts on this batch have failed."""
    row = db.execute(
        "select count(*) from extraction_runs where batch_key = ? and outcome = 'failed'", [batch_key]
    ).fetchone()
    return row[0]


def spend_since(db, since: str) -> "tuple[int, float]":
    """(tokens, dollars) spent on LLM extraction by runs started at or after `since` (Store.model_spend)."""
    row = db.execute(
        "select coalesce(sum(prompt_tokens + completion_tokens), 0), coalesce(sum(cost_usd), 0) "
        "from extraction_runs where extractor = 'llm' and started_at >= ?",
        [since],
    ).fetchone()
    return int(row[0]), float(row[1])


def spend_today(db, now: "datetime | None" = None) -> "tuple[int, float]":
    """(tokens, dollars) spent on LLM extraction since 00:00 UTC today."""
    return spend_since(db, start_of_day(now))


def daily_limit_reached(db, extract_settings) -> str:
    """Why today's model budget is spent ('' if it is not): the one check extraction,
    auto_compress, status and doctor share (kirolearn.store.base.spend_limit_reason)."""
    return spend_limit_reason(*spend_today(db), extract_settings)


def record_row(record) -> dict:
    """A MemoryRecord (or a record dict with list fields) as a memory_records row (lists as JSON text)."""
    data = record.model_dump(mode="json") if hasattr(record, "model_dump") else dict(record)
    data["record_hash"] = data.get("record_hash") or record_hash(data)
    for key in ("facts", "concepts", "files_touched", "source_event_ids"):
        data[key] = json.dumps(data.get(key) or [], ensure_ascii=False)
    # in every row: insert_all drops a row missing a NOT NULL key
    data["outcome"] = data.get("outcome") or DEFAULT_OUTCOME
    data["freshness"] = data.get("freshness") or DEFAULT_FRESHNESS
    # NULL when empty: the re-check queue holds records with claims only
    for key in ("claims", "cites"):
        value = data.get(key)
        data[key] = json.dumps(value, ensure_ascii=False, sort_keys=True) if value else None
    if isinstance(data.get("pinned"), dict):
        data["pinned"] = json.dumps(data["pinned"], sort_keys=True) if data["pinned"] else None
    # what the record's files were when stored
    if isinstance(data.get("file_state"), dict):
        data["file_state"] = json.dumps(data["file_state"], ensure_ascii=False, sort_keys=True)
        data["freshness_checked_at"] = data.get("freshness_checked_at") or data.get("created_at")
    else:
        data["file_state"] = data.get("file_state") or None
        data["freshness_checked_at"] = data.get("freshness_checked_at") or (
            data.get("created_at") if data["claims"] else None
        )
    return data


def forgotten_hashes(db, hashes) -> "set[str]":
    """Which of these record hashes belong to forgotten records (kirolearn forget, purged or not)."""
    found: set = set()
    hashes = list(hashes)
    for i in range(0, len(hashes), 500):
        part = hashes[i : i + 500]
        found.update(
            r[0]
            for r in db.execute(
                f"select record_hash from forgotten_records where record_hash in ({','.join('?' * len(part))})",
                part,
            )
        )
    return found


def commit_extraction(db, run: dict, records: list, event_ids: "list[str]") -> int:
    """Store an extraction's records and run row, and mark its events done, atomically.

    Returns how many records were new (identical records are stored once).
    """
    with writing(db):
        before = db["memory_records"].count
        rows = [record_row(r) for r in records]
        # a user forgot it: never recreate
        gone = forgotten_hashes(db, [r["record_hash"] for r in rows])
        rows = [r for r in rows if r["record_hash"] not in gone]
        if rows:
            db["memory_records"].insert_all(rows, pk="record_id", ignore=True)
        written = db["memory_records"].count - before
        run = dict(run, records_written=written)
        db["extraction_runs"].insert(run, pk="run_id")
        for i in range(0, len(event_ids), 500):
            part = event_ids[i : i + 500]
            marks = ",".join("?" * len(part))
            db.execute(
                f"update events set extract_state = 'done', run_id = ? where event_id in ({marks})",
                [run["run_id"], *part],
            )
        crashpoint.reached("extract-in-transaction")
    return written


def record_failed_run(db, run: dict) -> None:
    """Keep a failed LLM attempt for the retry count, the spend total and `status`."""
    with writing(db):
        db["extraction_runs"].insert(dict(run, outcome="failed"), pk="run_id")


def expire_events(db, before: str) -> int:
    """Delete extracted events received before `before` (ISO); returns how many."""
    with writing(db):
        # forced: the planner would otherwise walk every extracted event
        cursor = db.execute(
            "delete from events indexed by idx_events_expiry "
            "where extract_state = 'done' and received_at < ?",
            [before],
        )
    return cursor.rowcount


def record_drain(db, drain_id: str, started_at: str, stats: dict, error: str = "") -> None:
    """Remember one drain run for `kirolearn status`."""
    with writing(db):
        db["drain_runs"].insert(
            {
                "drain_id": drain_id,
                "started_at": started_at,
                "finished_at": now_iso(),
                "stats": json.dumps(stats),
                "error": error,
            },
            pk="drain_id",
            replace=True,
        )


def iso_shift(iso: str, seconds: float) -> str:
    """Shift a store timestamp by `seconds` (keeps the store's format)."""
    return isotime.shift(iso, seconds)


# --- embeddings: reads take any sqlite3 connection, no sqlite-utils ---


def _to_embed(before_parts: bool) -> str:
    """The condition on `v` (the record's vector of the model) that makes a record one to embed."""
    if before_parts:
        return f"v.record_id is not null and substr(coalesce(v.text_hash, ''), 1, 1) != '{PARTS_MARK}'"
    return "v.record_id is null"


def records_to_embed(
    db, model_id: str, limit: int = 1000, after_rowid: int = 0, *, before_parts: bool = False
) -> "list[dict]":
    """Records (rowid > after_rowid) with no vector of `model_id`, oldest first; `before_parts`:
    instead the ones whose vector of it was made before it embedded parts (the whole text alone)."""
    sql = (
        "select r.rowid, r.record_id, r.project_id, r.title, r.summary, r.facts, r.concepts "
        "from memory_records r left join record_vectors v on v.record_id = r.record_id and v.model_id = ? "
        f"where {_to_embed(before_parts)} and r.rowid > ? order by r.rowid limit ?"
    )
    return [
        dict(zip(("rowid", "record_id", "project_id", "title", "summary", "facts", "concepts"), row))
        for row in db.execute(sql, [model_id, after_rowid, limit])
    ]


def count_to_embed(db, model_id: str, *, before_parts: bool = False) -> int:
    """How many records have no vector of `model_id` (`before_parts`: one made before parts)."""
    return db.execute(
        "select count(*) from memory_records r left join record_vectors v on v.record_id = r.record_id "
        f"and v.model_id = ? where {_to_embed(before_parts)}",
        [model_id],
    ).fetchone()[0]


def save_vectors(db, rows: "list[dict]") -> None:
    """Insert or replace vector rows (record_id, project_id, model_id, dimensions, vector, text_hash)."""
    if rows:
        stamp = now_iso()
        with writing(db):
            db["record_vectors"].insert_all(
                [dict(r, updated_at=stamp) for r in rows], pk="record_id", replace=True
            )


def drop_vectors(db, keep_model_id: "str | None" = None) -> int:
    """Delete vectors of every model but `keep_model_id` (all when None); returns how many."""
    with writing(db):
        if keep_model_id is None:
            cursor = db.execute("delete from record_vectors")
        else:
            cursor = db.execute("delete from record_vectors where model_id != ?", [keep_model_id])
    return cursor.rowcount


def sessions_needing_expansion(db, limit: int = 500) -> "list[tuple[str, str]]":
    """(project_id, session_id) of sessions holding records whose expansion is not derived yet."""
    return [
        tuple(r)
        for r in db.execute(
            "select distinct project_id, session_id from memory_records where expansion is null limit ?",
            [limit],
        )
    ]


def session_records(db, project_id: str, session_id: str) -> "list[dict]":
    """A session's records in creation order: rowid, record_id, title, summary, expansion."""
    cols = ("rowid", "record_id", "title", "summary", "expansion")
    return [
        dict(zip(cols, r))
        for r in db.execute(
            "select rowid, record_id, title, summary, expansion from memory_records "
            "where project_id = ? and session_id is ? order by rowid",
            [project_id, session_id],
        )
    ]


def set_expansions(db, values: "dict[str, str]") -> None:
    """Write derived expansion text (the FTS triggers re-index those rows)."""
    if values:
        with writing(db):
            db.conn.executemany(
                "update memory_records set expansion = ? where record_id = ?",
                [(text, rid) for rid, text in values.items()],
            )


def clear_expansions(db) -> None:
    """Mark every record's expansion as not derived (reindex)."""
    with writing(db):
        db.execute("update memory_records set expansion = null")


TERM_DOCS_DRIFT = 0.02  # refresh the copy once the record count moved this much


def forget_terms(db) -> None:
    """Re-derive the hook's word counts now (if it keeps any), so no word of a purged record stays in them."""
    if "term_docs" not in db.table_names() or db.execute("select count(*) from term_docs").fetchone()[0] == 0:
        return
    db.execute("PRAGMA secure_delete = ON")
    refresh_term_docs(db, force=True)


def refresh_term_docs(db, force: bool = False) -> bool:
    """Copy fts5vocab's document counts into term_docs when the store has changed enough."""
    total = db.execute("select count(*) from memory_records").fetchone()[0]
    row = db.execute("select docs from term_docs where term = ''").fetchone()
    if not force and row is not None and abs(total - row[0]) <= TERM_DOCS_DRIFT * max(row[0], 1):
        return False
    if not force and row is None and total < 1000:
        return False  # recall does not skip common words below 1,000 records
    with writing(db):
        db.execute("delete from term_docs")
        db.execute(
            "insert into term_docs (term, docs) select term, doc from memory_records_fts_vocab where term != ''"
        )
        db.execute("insert into term_docs (term, docs) values ('', ?)", [total])
    compact_fts(db)
    return True


# more than this many FTS5 index segments and compact_fts merges them into one
FTS_MAX_SEGMENTS = 1


def fts_segments(db) -> int:
    """How many segments the records' FTS5 index has (each write transaction adds one; FTS5 merges some)."""
    return db.execute("select count(distinct segid) from memory_records_fts_idx").fetchone()[0]


def compact_fts(db) -> bool:
    """Merge the records' FTS5 index into one segment ('optimize') when it has more than FTS_MAX_SEGMENTS.

    A query reads each of its words' doclists once per segment and merges them, and BM25 re-reads
    every phrase's whole doclist for its IDF, so many segments cost the prompt hook's query
    (measured in docs/benchmarks.md, 'Scale'). Runs with the term_docs refresh.
    """
    try:
        if fts_segments(db) <= FTS_MAX_SEGMENTS:
            return False
    except sqlite3.OperationalError:  # no FTS index (yet)
        return False
    with writing(db):
        db.execute("insert into memory_records_fts(memory_records_fts) values('optimize')")
    return True


def check_file(path: str) -> dict:
    """{"state": "none" | "ok" | "lost" | "damaged" | "unreadable", "detail": text} without changing anything."""
    lost = lost_reason(path)
    if lost:
        return {"state": "lost", "detail": lost}
    if not os.path.exists(path):
        return {"state": "none", "detail": "no database yet (the first drain creates it)"}
    try:
        uri = os.path.abspath(path).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
        conn = sqlite3.connect(f"file:{uri}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        return {"state": "unreadable", "detail": str(exc)}
    try:
        problem = quick_check(conn)
        if problem:
            return {"state": "damaged", "detail": problem}
        try:
            found = counts(conn)
            records, events = found["records"], found["events"]
        except sqlite3.Error as exc:
            return {"state": "unreadable", "detail": str(exc)}
        return {
            "state": "ok",
            "detail": f"quick_check ok: {events} events, {records} records",
            "events": events,
            "records": records,
        }
    finally:
        conn.close()
