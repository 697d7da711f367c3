"""The store contract (kirolearn.store.base.Store) over the SQLite functions of kirolearn.store.sqlite.db.

Its own module, above db.py, records.py, reader.py, backup.py and extension.py, which it wraps:
those modules never need the class, so nothing below imports back up (the methods once imported them
lazily, to break that cycle).
"""

import json
import os
import sqlite3

import sqlite_utils

from kirolearn.core import crashpoint, marks, paths
from kirolearn.store import state
from kirolearn.store.base import SUMMARY_LISTS, Store
from kirolearn.store.sqlite import backup, reader, records, scrubbing, team
from kirolearn.store.sqlite import db as sqlite
from kirolearn.store.sqlite import records as recordstore
from kirolearn.store.sqlite.claims import ClaimsPart
from kirolearn.store.sqlite.db import (
    busy_timeout,
    commit_extraction,
    counts,
    existing_event_ids,
    expire_events,
    forget_terms,
    forgotten_hashes,
    insert_events,
    insert_record,
    insert_session_summary,
    open_db,
    pending_events,
    pending_sessions,
    record_row,
    refuse_newer_schema,
    writing,
)
from kirolearn.store.sqlite.derived import SqliteDerived
from kirolearn.store.sqlite.extension import SqliteExtension
from kirolearn.store.sqlite.migrations import migrations


class SqliteStore(ClaimsPart, Store):
    """The embedded store: one SQLite file per home, through sqlite-utils (kirolearn.store.base.Store).

    The drainer speaks to it through the contract, and to what only SQLite keeps (term
    counts, vectors, expansions, the marker outside the file) through
    `extension()` (kirolearn.store.sqlite.extension). The CLI and MCP still call
    kirolearn.store.sqlite.db's functions on `self.db` in places; the contract suite
    holds both ways to the same rows.
    """

    backend = "sqlite"

    def __init__(self, path: "str | None" = None, *, db: "sqlite_utils.Database | None" = None):
        self.db = db if db is not None else open_db(path)

    @classmethod
    def in_memory(cls) -> "SqliteStore":
        """An empty, migrated store in memory."""
        return cls(db=sqlite.open_memory())

    @classmethod
    def reading(cls, path: str, budget: float) -> "SqliteStore | None":
        """The file opened read-only, each query giving up after `budget` seconds; None when absent."""
        conn = reader.connect_readonly(path, budget)
        return None if conn is None else cls(db=sqlite_utils.Database(conn, execute_plugins=False))

    def recall_connection(self):
        """The standard-library connection lexical recall ranks on (kirolearn.store.sqlite.reader)."""
        return self.db.conn

    # schema
    def migrate(self) -> "list[str]":
        names = [m.name for m in migrations.pending(self.db)]
        if names:
            migrations.apply(self.db)
        return names

    def schema(self) -> dict:
        return {
            "applied": [m.name for m in migrations.applied(self.db)],
            "pending": [m.name for m in migrations.pending(self.db)],
        }

    def close(self) -> None:
        self.db.conn.close()

    def extension(self) -> "SqliteExtension":
        """What only this backend keeps, beside the contract (kirolearn.store.sqlite.extension)."""
        return SqliteExtension(self.db)

    # the contract's optional capabilities, all held by this store
    def derived(self) -> "SqliteDerived":
        return SqliteDerived(self.db)

    def refresh_term_docs(self, force: bool = False) -> bool:
        return sqlite.refresh_term_docs(self.db, force=force)

    def remember_counts(self, counted: "dict | None" = None) -> bool:
        # counted here, and only when a row was added since the marker's count
        if counted is None:
            stamp = sqlite.change_stamp(self.db)
            marker = state.read(state.STORE)
            if marker.get("stamp") == stamp and state.store_marker_matches(
                marker, self.database_file() or "kirolearn.db"
            ):
                return False
            counted = dict(counts(self.db), stamp=stamp)
        return self.extension().remember_counts(counted, path=self.database_file() or "kirolearn.db")

    def database_file(self) -> str:
        return reader.database_file(self.db)

    def freshness_due(self, limit: int) -> "list[dict]":
        return self.extension().freshness_due(limit)

    def note_checked(self, record_ids, at: str) -> None:
        self.extension().note_checked(record_ids, at)

    # events
    def add_events(self, events: "list[dict]") -> int:
        with writing(self.db):
            # rows inserted; an id already stored adds none
            before = self.db.conn.total_changes
            insert_events(self.db, events)
            # tests/test_drain_crash.py: inserted, not committed
            crashpoint.reached("ingest-in-transaction")
            return self.db.conn.total_changes - before

    def event_ids_present(self, event_ids) -> "set[str]":
        return existing_event_ids(self.db, event_ids)

    def content_hashes_present(self, content_hashes) -> "set[str]":
        return sqlite.stored_content_hashes(self.db, content_hashes)

    def content_duplicate(self, content_hash: str, since: "str | None", until: "str | None") -> bool:
        return sqlite.has_content_duplicate(self.db, content_hash, since, until)

    def last_turn_event_id(self, project_id: str, session_id: str, before: str) -> "str | None":
        return sqlite.last_turn_event_id(self.db, project_id, session_id, before)

    def pending_event_count(self) -> int:
        return records.pending_event_count(self.db)

    def pending_sessions(self) -> "list[dict]":
        return pending_sessions(self.db)

    def pending_events(self, project_id: str, session_id: str, up_to: "str | None" = None) -> "list[dict]":
        return pending_events(self.db, project_id, session_id, up_to)

    def expire_events(self, before: str) -> int:
        return expire_events(self.db, before)

    # records
    def commit_extraction(self, run: dict, records: "list[dict]", event_ids: "list[str]") -> int:
        return commit_extraction(self.db, run, records, event_ids)

    def record_failed_run(self, run: dict) -> None:
        sqlite.record_failed_run(self.db, run)

    def failed_attempts(self, batch_key: str) -> int:
        return sqlite.failed_attempts(self.db, batch_key)

    def model_spend(self, since: str) -> "tuple[int, float]":
        return sqlite.spend_since(self.db, since)

    def add_records(self, records: "list[dict]") -> int:
        columns = set(recordstore.table_columns(self.db, "memory_records"))
        rows = [{k: v for k, v in record_row(r).items() if k in columns} for r in records]
        with writing(self.db):
            before = counts(self.db)["records"]
            gone = forgotten_hashes(self.db, [r["record_hash"] for r in rows])
            for row in rows:
                if row["record_hash"] not in gone:
                    insert_record(self.db, row)
            return counts(self.db)["records"] - before

    def apply_marks(self, records: "list[dict]", *, actor: str = "sync") -> int:
        return recordstore.apply_marks(self.db, records, actor=actor)

    def merge_lists(self, records: "list[dict]", *, actor: str = "sync") -> int:
        return recordstore.merge_lists(self.db, records, actor=actor)

    def own_lists(self, record_ids) -> "list[dict]":
        return recordstore.own_lists(self.db, record_ids)

    def own_marks(self, record_ids) -> "list[dict]":
        return recordstore.own_marks(self.db, record_ids)

    def changes(self, project_ids: "list[str]", *, after: int = 0, limit: int = 500) -> dict:
        found = recordstore.changes(self.db, project_ids, after, limit)
        found["records"] = [_shared(recordstore.decode_record(r)) for r in found["records"]]
        return found

    def set_marks(self, marks: "list[dict]", *, actor: str) -> "list[dict]":
        return recordstore.set_marks(self.db, marks, actor=actor)

    def events_since(
        self,
        project_ids: "list[str]",
        stored_since: "str | None",
        *,
        after: "tuple[str, str] | None" = None,
        limit: int = 1000,
    ) -> "list[dict]":
        return recordstore.events_since(self.db, project_ids, stored_since, limit, after)

    def get_record(self, record_id: str) -> "dict | None":
        return records.get_record(self.db, record_id)

    def list_records(
        self,
        *,
        project_id=None,
        types=None,
        since=None,
        session_id=None,
        file=None,
        limit: int = 20,
        before=None,
    ) -> "list[dict]":
        return records.list_records(
            self.db,
            project_id=project_id,
            types=types,
            since=since,
            session_id=session_id,
            file=file,
            limit=limit,
            before=before,
        )

    def search(self, words: "list[str]", *, project_id=None, types=None, limit: int = 10) -> "list[dict]":
        if not words or limit <= 0:
            return []
        # marked records keep part of their relevance: rank a few more
        # so a demoted one can fall below the cut
        rows = reader.fts_matches(
            self.db.conn,
            words,
            depth=max(limit * 5, 25) * (20 if types else 1),
            limit=limit * 3,
            project_id=project_id,
            types=types,
        )
        out = []
        for row in rows:
            found = records.decode_record(row)
            if found.get("merged_into"):
                continue
            found["relevance"] = -found.pop("bm25") * marks.record_factor(found)
            out.append(found)
        out.sort(key=lambda r: (-r["relevance"], r["record_id"]))
        return out[:limit]

    def latest(self, project_id: str, *, types=None, limit: int = 5) -> "list[dict]":
        return [
            records.decode_record(r)
            for r in reader.latest_records(self.db.conn, project_id, types=types, limit=limit)
        ]

    # session summaries
    def add_session_summary(self, summary: dict, record: "dict | None" = None) -> None:
        row = dict(summary)
        for key in SUMMARY_LISTS:
            row[key] = json.dumps(row.get(key) or [], ensure_ascii=False)
        with writing(self.db):
            if record is not None:
                insert_record(self.db, record_row(record))
            insert_session_summary(self.db, row)

    def session_summaries(
        self, project_id: str, *, label: "str | None" = None, limit: int = 50
    ) -> "list[dict]":
        rows, columns = reader.session_end_rows(self.db.conn, project_id, label, limit)
        return [records.decode_summary(dict(zip(columns, r))) for r in rows]

    # forgetting
    def forget(self, record_ids, *, reason: str, actor: str) -> "list[dict]":
        return records.forget(self.db, record_ids, reason=reason, actor=actor)

    def restore(self, record_ids, *, actor: str) -> "tuple[list[dict], list[str]]":
        return records.restore(self.db, record_ids, actor=actor)

    def expire_forgotten(self, before: str) -> int:
        return records.purge_forgotten_before(self.db, before)

    def tombstones(self, record_ids) -> "dict[str, dict]":
        return records.tombstones(self.db, record_ids)

    def purge(self, record_ids, *, actor: str) -> int:
        ids = records.purgeable(self.db, record_ids=list(record_ids))
        if not ids:
            return 0
        # the hook's word counts may name words only the purged records had
        forget_terms(self.db)
        return records.purge(self.db, ids, actor=actor)["purged"]

    def purge_report(self, record_ids, *, actor: str) -> dict:
        ids = list(record_ids)
        if ids:
            # the hook's word counts may name words only the purged records had
            forget_terms(self.db)
        return records.purge(self.db, ids, actor=actor)

    # what the features above the store ask
    def events_by_ids(self, event_ids, limit: int = 200) -> "list[dict]":
        return records.events_by_ids(self.db, event_ids, limit=limit)

    def session_events(self, project_id: str, session_id: str) -> "list[tuple[str, str]]":
        return sqlite.session_event_rows(self.db, project_id, session_id)

    def session_agent(self, project_id: str, session_id: str) -> "str | None":
        return team.session_agent(self.db, project_id, session_id)

    def add_run(self, run: dict) -> None:
        with writing(self.db):
            sqlite.insert_run(self.db, run)

    def run_by_id(self, run_id) -> "dict | None":
        return records.run_by_id(self.db, run_id)

    def model_runs_since(self, since: str) -> dict:
        return records.model_runs_since(self.db, since)

    def record_drain(self, drain_id: str, started_at: str, stats: dict, error: str = "") -> None:
        sqlite.record_drain(self.db, drain_id, started_at, stats, error)

    def add_record(self, record) -> bool:
        with writing(self.db):
            before = self.db.conn.total_changes
            insert_record(self.db, record_row(record))
            return self.db.conn.total_changes > before

    def record_ids_with_prefix(self, prefix: str, limit: int = 10) -> "list[str]":
        return records.record_ids_with_prefix(self.db, prefix, limit=limit)

    def record_ids_of_session(self, session_id: str, project_id=None) -> "list[str]":
        return records.record_ids_of_session(self.db, session_id, project_id)

    def edit(self, record_id: str, changes: dict, *, actor: str, reason: str = "") -> "dict | None":
        return records.edit(self.db, record_id, changes, actor=actor, reason=reason)

    def audit(self, record_id: str) -> "list[dict]":
        return records.audit_for(self.db, record_id)

    def projects(self) -> "list[dict]":
        return records.projects(self.db)

    def session_info(self, project_id: str, session_id: str) -> dict:
        return records.session_info(self.db, project_id, session_id)

    def session_labels(self, project_id: str, session_ids) -> "dict[str, dict]":
        return records.session_labels(self.db, project_id, session_ids)

    def list_session_summaries(self, *, project_id=None, limit: int = 20, before=None) -> "list[dict]":
        return records.list_session_summaries(self.db, project_id=project_id, limit=limit, before=before)

    def get_forgotten(self, record_id: str) -> "dict | None":
        return records.get_forgotten(self.db, record_id)

    def list_forgotten(self, *, project_id=None, limit: int = 50, before=None) -> "list[dict]":
        return records.list_forgotten(self.db, project_id=project_id, limit=limit, before=before)

    def purgeable(self, *, record_ids=None, older_than=None) -> "list[str]":
        return records.purgeable(self.db, record_ids=record_ids, older_than=older_than)

    def purge_edit_history(self, record_ids=None) -> int:
        return records.purge_edit_history(self.db, record_ids)

    def compact(self) -> dict:
        records.compact(self.db)
        return {"wal_checkpoint": records.checkpoint(self.db)}

    def import_forgotten(self, pairs) -> dict:
        columns = set(records.table_columns(self.db, "memory_records"))
        rows = [({k: v for k, v in record_row(r).items() if k in columns}, mark) for r, mark in pairs]
        return records.import_forgotten(self.db, rows)

    def export(self, out) -> int:
        return backup.export(self.db, out)

    def marks_of(self, record_ids) -> "dict[str, tuple]":
        return reader.marks_of(self.db.conn, record_ids)

    def rekey_projects(self, project_id_of) -> "dict[str, str]":
        with writing(self.db):
            return team.rekey_projects(self.db, project_id_of)

    def scrubbed_with(self) -> "int | None":
        return scrubbing.scrubbed_with(self.db)

    def rescrub(self, scrub_cell, version: int, on_chunk=None) -> dict:
        resumed = scrubbing.progress(self.db)
        files = [self.database_file(), self.database_file() + "-wal"]
        before = {p: os.path.getsize(p) for p in files if p and os.path.exists(p)}
        rows = scrubbing.rescrub_rows(self.db, scrub_cell, version, on_chunk)
        fts = scrubbing.rebuild_fts(self.db)
        scrubbing.finish(self.db, version)
        compacted = scrubbing.compact(self.db)
        after = {p: os.path.getsize(p) for p in before if os.path.exists(p)}
        return {
            "resumed": bool(resumed and resumed.get("version") == version),
            "rows_changed": rows,
            "fts_rebuilt": fts,
            "checkpoint_complete": compacted["checkpoint_complete"],
            "bytes_before": sum(before.values()),
            "bytes_after": sum(after.values()),
        }

    def has_marks(self) -> bool:
        return records.has_marks(self.db)

    def set_mark(self, record_id: str, mark: str, value, *, actor: str, reason: str = "", **evidence) -> bool:
        return records.set_mark(self.db, record_id, mark, value, actor=actor, reason=reason, **evidence)

    def merge_records(self, survivor_id: str, merged_ids, union: dict, *, actor: str, reason: str) -> bool:
        return records.merge_records(self.db, survivor_id, merged_ids, union, actor=actor, reason=reason)

    def marked_by(self, record_id: str) -> dict:
        return records.marked_by(self.db, record_id)

    # figures, health, export and import
    def counts(self) -> dict:
        return counts(self.db)

    def integrity_problem(self) -> "str | None":
        return sqlite.quick_check(self.db) or None

    def figures(self, since: str, *, projects: bool = True) -> dict:
        return records.figures(self.db, since, projects=projects)

    def export_objects(self):
        # no machine-local file_state: only `kirolearn export` keeps it
        return (_shared(o) if o["type"] == "record" else o for o in backup.objects(self.db))

    def import_objects(self, objects: "list[dict]") -> dict:
        columns = {
            kind: set(records.table_columns(self.db, table))
            for kind, table in (
                ("event", "events"),
                ("record", "memory_records"),
                ("summary", "session_summaries"),
            )
        }
        rows: dict = {"event": [], "record": [], "summary": []}
        for obj in objects:
            kind = obj["type"]
            if kind == "record":
                row = record_row({k: v for k, v in obj.items() if k in columns["record"]})
            elif kind == "event":
                row = dict(obj)
            else:
                row = {k: v for k, v in obj.items() if k in columns["summary"]}
                for key in SUMMARY_LISTS:
                    row[key] = json.dumps(row.get(key) or [], ensure_ascii=False)
            rows[kind].append({k: v for k, v in row.items() if k in columns[kind]})
        return records.import_rows(self.db, rows["event"], rows["record"], rows["summary"])


def _shared(record: dict) -> dict:
    """A record as it leaves this home (the change feed): without what only this machine can use (the
    file_state its working tree gave, and when it was checked: a teammate's tree is another)."""
    record.pop("file_state", None)
    record.pop("freshness_checked_at", None)
    return record


def migrate_file(path: "str | None" = None) -> dict:
    """Apply the file's pending migrations (`kirolearn migrate`): {"applied": names now, "schema": schema()}."""
    path = path or paths.db_path()
    # a new file gets every migration
    pending = [m.name for m in getattr(migrations, "_migrations", ())]
    if os.path.exists(path) and os.path.getsize(path):
        probe = sqlite_utils.Database(sqlite3.connect(path, timeout=busy_timeout()))
        try:
            refuse_newer_schema(probe, path)
            pending = [m.name for m in migrations.pending(probe)]
        finally:
            probe.conn.close()
    with SqliteStore(path) as st:  # opening applies them (under the setup lock)
        return {"applied": pending, "schema": st.schema()}
