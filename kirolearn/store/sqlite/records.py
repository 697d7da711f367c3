"""The store's record-management queries: list, show, forget, restore, edit, purge, import.

Only SQL lives here (architecture.md rule 10); kirolearn.manage.records holds the rules
around it (scrubbing, parsing filters, rendering). Readers take any connection
with `.execute` (a read-only sqlite3 connection or a sqlite-utils Database);
writers take a sqlite-utils Database and run inside `store.writing`.

Forgetting moves a record out of memory_records (so out of FTS and recall at
once) into forgotten_records, with the session_end summary made from it, and
writes an audit row. A purge drops what a tombstone keeps except the record's
hash, with SQLite's secure_delete on, then rewrites FTS and truncates the WAL so
the bytes are gone from the file, not just unlinked.
"""

import json
from typing import Any

from kirolearn.core.ids import new_ulid
from kirolearn.store.base import LINK_MARKS, RECORD_LISTS, SUMMARY_LISTS
from kirolearn.store.sqlite import db as store
from kirolearn.store.sqlite.reader import record_filters


def _rows(conn, sql: str, args=()) -> "list[dict]":
    cursor = conn.execute(sql, list(args))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def has_table(conn, name: str) -> bool:
    """Is there a table (or view) of this name? (A store older than the management migration has none.)"""
    return conn.execute("select 1 from sqlite_master where name = ?", [name]).fetchone() is not None


# --- reading ---


def list_records(conn, *, limit: int = 20, before=None, **filters) -> "list[dict]":
    """Records newest first (created_at, then record_id), after the keyset `before` = (created_at, record_id)."""
    conds, args = record_filters(**filters)
    # the first condition alone is an index range; the second breaks ties
    if before:
        conds.append("r.created_at <= ? and (r.created_at < ? or r.record_id < ?)")
        args.extend([before[0], before[0], before[1]])
    sql = "select r.* from memory_records r"
    if conds:
        sql += " where " + " and ".join(conds)
    sql += " order by r.created_at desc, r.record_id desc limit ?"
    return [decode_record(r) for r in _rows(conn, sql, [*args, limit])]


def decode_record(row: dict) -> dict:
    """A memory_records row with its JSON list columns decoded."""
    out = dict(row)
    for key in RECORD_LISTS:
        if key in out:
            try:
                value = json.loads(out[key] or "[]")
            except ValueError:
                value = []
            out[key] = value if isinstance(value, list) else []
    for key, kind in (("file_state", dict), ("claims", list), ("cites", list), ("pinned", dict)):
        if key not in out:
            continue
        value = out[key]
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = None
        out[key] = value if isinstance(value, kind) else ([] if kind is list else None)
    return out


def get_record(conn, record_id: str) -> "dict | None":
    """One live record (lists decoded), or None."""
    rows = _rows(conn, "select * from memory_records where record_id = ?", [record_id])
    return decode_record(rows[0]) if rows else None


def record_ids_with_prefix(conn, prefix: str, limit: int = 10) -> "list[str]":
    """Ids of live and forgotten records that start with `prefix` (sorted; at most `limit`).

    A primary-key range, not LIKE (which is case-insensitive in SQLite and would scan).
    """
    if not prefix:
        return []
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    sql = "select record_id from memory_records where record_id >= ? and record_id < ?"
    args = [prefix, upper]
    if has_table(conn, "forgotten_records"):
        sql += " union select record_id from forgotten_records where record_id >= ? and record_id < ?"
        args += [prefix, upper]
    return [
        r[0]
        for r in conn.execute(f"select record_id from ({sql}) order by record_id limit ?", [*args, limit])
    ]


def get_forgotten(conn, record_id: str) -> "dict | None":
    """A tombstone with its kept record decoded under 'record' (None once purged), or None."""
    if not has_table(conn, "forgotten_records"):
        return None
    rows = _rows(conn, "select * from forgotten_records where record_id = ?", [record_id])
    if not rows:
        return None
    found = rows[0]
    payload = json.loads(found.pop("payload") or "null") or {}
    found["record"] = decode_record(payload["record"]) if payload.get("record") else None
    found["session_summaries"] = payload.get("session_summaries", [])
    return found


def list_forgotten(conn, *, project_id=None, limit: int = 50, before: "str | None" = None) -> "list[dict]":
    """Tombstones newest first (keyset on forgotten_at|record_id), each with its record when still kept."""
    if not has_table(conn, "forgotten_records"):
        return []
    sql, args = "select record_id from forgotten_records where 1", []
    if project_id:
        sql += " and project_id = ?"
        args.append(project_id)
    if before:
        at, _, rid = before.partition("|")
        sql += " and (forgotten_at < ? or (forgotten_at = ? and record_id < ?))"
        args.extend([at, at, rid])
    sql += " order by forgotten_at desc, record_id desc limit ?"
    found = (get_forgotten(conn, r["record_id"]) for r in _rows(conn, sql, [*args, limit]))
    return [f for f in found if f is not None]


def forgotten_ids(conn, record_ids) -> "set[str]":
    """Which of these ids are forgotten (tombstoned, purged or not)."""
    ids = list(record_ids)
    if not ids or not has_table(conn, "forgotten_records"):
        return set()
    found: set[str] = set()
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        found.update(
            r[0]
            for r in conn.execute(
                f"select record_id from forgotten_records where record_id in ({','.join('?' * len(part))})",
                part,
            )
        )
    return found


def events_by_ids(conn, event_ids, limit: int = 200) -> "list[dict]":
    """Stored events (decoded bodies plus their state), oldest first; missing ids are left out."""
    ids = list(event_ids)[:limit]
    if not ids:
        return []
    rows = _rows(
        conn,
        f"select event_id, kind, trigger, session_id, received_at, extract_state, run_id, body "
        f"from events where event_id in ({','.join('?' * len(ids))}) order by event_id",
        ids,
    )
    for row in rows:
        row["body"] = json.loads(row["body"])
    return rows


def run_by_id(conn, run_id: "str | None") -> "dict | None":
    """An extraction run without its prompt text (that is what the model saw, shown by `show --json` only)."""
    if not run_id:
        return None
    rows = _rows(
        conn,
        "select run_id, batch_key, reason, extractor, model, event_count, prompt_tokens, "
        "completion_tokens, cost_usd, outcome, error, fallback_reason, records_written, started_at, "
        "finished_at from extraction_runs where run_id = ?",
        [run_id],
    )
    return rows[0] if rows else None


def session_info(conn, project_id: str, session_id: str) -> dict:
    """A session's span in the store: events, records, first and last times, its session_end summaries."""
    ev = conn.execute(
        "select count(*), min(received_at), max(received_at) from events "
        "where project_id = ? and session_id = ?",
        [project_id, session_id],
    ).fetchone()
    rec = conn.execute(
        "select count(*), min(created_at), max(created_at) from memory_records "
        "where project_id = ? and session_id = ?",
        [project_id, session_id],
    ).fetchone()
    summaries = (
        [
            decode_summary(r)
            for r in _rows(
                conn,
                "select * from session_summaries where project_id = ? and session_id = ? order by ended_at desc",
                [project_id, session_id],
            )
        ]
        if has_table(conn, "session_summaries")
        else []
    )
    firsts = [t for t in (ev[1], rec[1]) if t]
    lasts = [t for t in (ev[2], rec[2]) if t]
    return {
        "session_id": session_id,
        "events": ev[0],
        "records": rec[0],
        "first_at": min(firsts) if firsts else None,
        "last_at": max(lasts) if lasts else None,
        "session_summaries": summaries,
    }


def session_labels(conn, project_id: str, session_ids) -> "dict[str, dict]":
    """{session_id: {"prompt": its first prompt (or its oldest record's title), "first_at"}} for the viewer."""
    ids = list(dict.fromkeys(session_ids))
    out: dict = {}
    for i in range(0, len(ids), 400):
        part = ids[i : i + 400]
        marks = ",".join("?" * len(part))
        for sid, first_at, body in conn.execute(
            f"select e.session_id, e.received_at, e.body from events e where e.project_id = ? "
            f"and e.session_id in ({marks}) and e.kind = 'prompt' and e.event_id = (select min(x.event_id) "
            f"from events x where x.project_id = e.project_id and x.session_id = e.session_id "
            f"and x.kind = 'prompt')",
            [project_id, *part],
        ).fetchall():
            try:
                prompt = json.loads(body).get("prompt") or ""
            except (ValueError, AttributeError):
                prompt = ""
            if prompt.strip():
                out[sid] = {"prompt": " ".join(prompt.split()), "first_at": first_at}
        missing = [s for s in part if s not in out]
        # no events left (retention): the oldest record speaks for it
        if missing:
            marks = ",".join("?" * len(missing))
            for sid, title, first_at in conn.execute(
                f"select session_id, title, min(created_at) from memory_records where project_id = ? "
                f"and session_id in ({marks}) group by session_id",
                [project_id, *missing],
            ).fetchall():
                out[sid] = {"prompt": " ".join((title or "").split()), "first_at": first_at}
    return out


def decode_summary(row: dict) -> dict:
    """A session_summaries row with its list columns decoded."""
    out = dict(row)
    for key in SUMMARY_LISTS:
        try:
            out[key] = json.loads(out.get(key) or "[]")
        except ValueError:
            out[key] = []
    return out


def audit_for(conn, record_id: str) -> "list[dict]":
    """The record's audit trail, oldest first (before/after decoded; None once purged)."""
    if not has_table(conn, "record_audit"):
        return []
    rows = _rows(conn, "select * from record_audit where record_id = ? order by audit_id", [record_id])
    for row in rows:
        for key in ("before", "after"):
            row[key] = json.loads(row[key]) if row[key] else None
    return rows


def projects(conn) -> "list[dict]":
    """Every project with records: id, root, record count, newest record time (newest first).

    Counted from the (project_id, created_at) index alone, then one lookup per
    project for its root: grouping the table itself read every record (docs/benchmarks.md, 'Scale').
    """
    rows = _rows(
        conn,
        "select project_id, count(*) as records, max(created_at) as last_at "
        "from memory_records indexed by idx_records_project group by project_id order by last_at desc",
    )
    for row in rows:
        row["project_root"] = conn.execute(
            "select project_root from memory_records where project_id = ? limit 1", [row["project_id"]]
        ).fetchone()[0]
    return rows


def list_session_summaries(conn, *, project_id=None, limit: int = 20, before=None) -> "list[dict]":
    """session_end summaries newest first (keyset `before` = (ended_at, id))."""
    if not has_table(conn, "session_summaries"):
        return []
    sql, args = "select * from session_summaries where 1", []
    if project_id:
        sql += " and project_id = ?"
        args.append(project_id)
    if before:
        sql += " and (ended_at < ? or (ended_at = ? and id < ?))"
        args.extend([before[0], before[0], before[1]])
    sql += " order by ended_at desc, id desc limit ?"
    return [decode_summary(r) for r in _rows(conn, sql, [*args, limit])]


def record_ids_of_session(conn, session_id: str, project_id=None) -> "list[str]":
    """Live record ids of one session (of one project, when given)."""
    sql, args = "select record_id from memory_records where session_id = ?", [session_id]
    if project_id:
        sql += " and project_id = ?"
        args.append(project_id)
    return [r[0] for r in conn.execute(sql + " order by created_at, record_id", args)]


def extraction_failures_since(conn, since_iso: str) -> int:
    """Failed model attempts since a time."""
    return conn.execute(
        "select count(*) from extraction_runs where outcome = 'failed' and started_at >= ?", [since_iso]
    ).fetchone()[0]


def model_runs_since(conn, since_iso: str) -> dict:
    """What the model did since a time (`status`): batches it extracted, their latency, its
    failed attempts, the batches that fell back to the deterministic extractor, by reason, and the
    supersede questions it was asked (kirolearn.pipeline.judge) and answered.

    Reads the runs since `since_iso` through idx_runs_started, never the whole table.
    """
    ok, failed, avg_ms, max_ms = conn.execute(
        "select coalesce(sum(outcome = 'ok'), 0), coalesce(sum(outcome = 'failed'), 0), "
        "avg(case when outcome = 'ok' then (julianday(finished_at) - julianday(started_at)) * 86400000.0 end), "
        "max(case when outcome = 'ok' then (julianday(finished_at) - julianday(started_at)) * 86400000.0 end) "
        "from extraction_runs where started_at >= ? and extractor = 'llm' and batch_key != 'session_end' "
        "and coalesce(reason, '') != 'supersede'",
        [since_iso],
    ).fetchone()
    asked, answered = conn.execute(
        "select count(*), coalesce(sum(outcome = 'ok'), 0) from extraction_runs "
        "where started_at >= ? and reason = 'supersede'",
        [since_iso],
    ).fetchone()
    reasons: dict = {}
    for (reason,) in conn.execute(
        "select fallback_reason from extraction_runs where started_at >= ? and "
        "extractor = 'deterministic' and coalesce(fallback_reason, '') != ''",
        [since_iso],
    ):
        # "model answer unusable: …" counts as one kind
        kind = reason.split(":", 1)[0].strip()
        reasons[kind] = reasons.get(kind, 0) + 1
    return {
        "batches": int(ok),
        "failed_attempts": int(failed),
        "latency_ms_avg": round(avg_ms) if avg_ms is not None else None,
        "latency_ms_max": round(max_ms) if max_ms is not None else None,
        "fallbacks": sum(reasons.values()),
        "fallback_reasons": dict(sorted(reasons.items())),
        "supersede_questions": int(asked),
        "supersede_answered": int(answered),
    }


def events_by_agent_since(conn, since_iso: str) -> dict:
    """{agent: events received since a time} (the agents that sent any)."""
    rows = conn.execute(
        "select agent, count(*) from events where received_at >= ? group by agent order by agent", [since_iso]
    ).fetchall()
    return {agent: count for agent, count in rows}


def pending_event_count(conn) -> int:
    """Events stored but not yet extracted."""
    return conn.execute("select count(*) from events where extract_state = 'pending'").fetchone()[0]


def last_drain(conn) -> "dict | None":
    """The newest drain run, its stats decoded."""
    rows = _rows(conn, "select * from drain_runs order by drain_id desc limit 1")
    if not rows:
        return None
    return {"finished_at": rows[0]["finished_at"], **json.loads(rows[0]["stats"] or "{}")}


def project_figures(conn) -> "list[dict]":
    """Per project: its root, events stored, events still buffered for extraction, and records."""
    projects = _rows(
        conn,
        "select project_root, count(*) as events, sum(extract_state = 'pending') as pending "
        "from events group by project_id order by project_root",
    )
    records = {
        r["project_root"]: r["n"]
        for r in _rows(conn, "select project_root, count(*) as n from memory_records group by project_id")
    }
    for p in projects:
        p["records"] = records.get(p["project_root"], 0)
    return projects


def changes(conn, project_ids: "list[str]", after: int, limit: int) -> dict:
    """Store.changes on SQLite: the record_changes feed (m017), joined to what each change names."""
    if not project_ids:
        return {"records": [], "forgotten": [], "purged": [], "marks": [], "after": after}
    marks = ",".join("?" * len(project_ids))
    feed = _rows(
        conn,
        "select seq, record_id, change from record_changes where seq > ? order by seq limit ?",
        [after, limit],
    )
    if not feed:
        return {"records": [], "forgotten": [], "purged": [], "marks": [], "after": after}
    new_ids = [c["record_id"] for c in feed if c["change"] == "record"]
    gone_ids = [c["record_id"] for c in feed if c["change"] == "forgotten"]
    purged_ids = [c["record_id"] for c in feed if c["change"] == "purged"]
    mark_ids = list(dict.fromkeys(c["record_id"] for c in feed if c["change"] == "mark"))
    live, gone, purged, marked = {}, {}, {}, {}
    for i in range(0, len(mark_ids), 500):
        part = mark_ids[i : i + 500]
        for row in _rows(
            conn,
            "select record_id, project_id, freshness, outcome from memory_records "
            f"where record_id in ({','.join('?' * len(part))}) and project_id in ({marks})",
            [*part, *project_ids],
        ):
            marked[row["record_id"]] = row
    for i in range(0, len(new_ids), 500):
        part = new_ids[i : i + 500]
        for row in _rows(
            conn,
            f"select * from memory_records where record_id in ({','.join('?' * len(part))}) "
            f"and project_id in ({marks})",
            [*part, *project_ids],
        ):
            live[row["record_id"]] = row
    for i in range(0, len(gone_ids), 500):
        part = gone_ids[i : i + 500]
        for row in _rows(
            conn,
            "select record_id, record_hash, project_id, actor, forgotten_at, "
            "json_extract(payload, '$.record.actor') as record_actor from forgotten_records "
            f"where record_id in ({','.join('?' * len(part))}) and project_id in ({marks})",
            [*part, *project_ids],
        ):
            gone[row["record_id"]] = row
    for i in range(0, len(purged_ids), 500):
        part = purged_ids[i : i + 500]
        for row in _rows(
            conn,
            "select record_id, record_hash, project_id, purged_at from forgotten_records "
            f"where record_id in ({','.join('?' * len(part))}) and project_id in ({marks}) "
            "and purged_at is not null",
            [*part, *project_ids],
        ):
            purged[row["record_id"]] = row
    from kirolearn.store.base import assemble_changes

    return assemble_changes(feed, live, gone, purged, marked)


def tombstones(conn, record_ids) -> "dict[str, dict]":
    """Store.tombstones on SQLite: each forgotten id's tombstone facts and its latest feed number."""
    ids = list(dict.fromkeys(record_ids))
    out: dict = {}
    if not ids or not has_table(conn, "forgotten_records"):
        return out
    feed = has_table(conn, "record_changes")
    seq = (
        "(select max(c.seq) from record_changes c where c.record_id = f.record_id and c.change = 'forgotten')"
        if feed
        else "null"
    )
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        for row in _rows(
            conn,
            "select f.record_id, f.record_hash, f.project_id, f.actor, f.forgotten_at, "
            "f.purged_at is not null as purged, json_extract(f.payload, '$.record.actor') "
            f"as record_actor, {seq} as seq from forgotten_records f "
            f"where f.record_id in ({','.join('?' * len(part))})",
            part,
        ):
            row["purged"] = bool(row["purged"])
            out[row.pop("record_id")] = row
    return out


def events_since(
    conn,
    project_ids: "list[str]",
    stored_since: "str | None",
    limit: int,
    after: "tuple[str, str] | None" = None,
) -> "list[dict]":
    """Store.events_since on SQLite."""
    if not project_ids:
        return []
    sql = f"select * from events where project_id in ({','.join('?' * len(project_ids))})"
    args = list(project_ids)
    if stored_since is not None:
        sql += " and stored_at >= ?"
        args.append(stored_since)
    if after is not None:
        sql += " and (stored_at, event_id) > (?, ?)"
        args.extend(after)
    return _rows(conn, sql + " order by stored_at, event_id limit ?", [*args, limit])


def figures(conn, since_iso: str, *, projects: bool = True) -> dict:
    """The status figures `status`, `doctor`, the viewer and Memory.health share: one query each.

    `projects=False` leaves out the per-project figures (a group-by over every event)."""
    forgotten = (
        conn.execute("select count(*) from forgotten_records").fetchone()[0]
        if has_table(conn, "forgotten_records")
        else 0
    )
    found = {
        **store.counts(conn),
        "forgotten": forgotten,
        "pending_events": pending_event_count(conn),
        "last_drain": last_drain(conn),
        "extraction_failures_24h": extraction_failures_since(conn, since_iso),
        "agent_events_24h": events_by_agent_since(conn, since_iso),
    }
    found.update(mark_figures(conn))
    if projects:
        found["projects"] = project_figures(conn)
    return found


# --- writing ---


def _audit(db, record_id, action, actor, reason="", *, before=None, after=None, version=None, at=None):
    db["record_audit"].insert(
        {
            "audit_id": new_ulid(),
            "record_id": record_id,
            "action": action,
            "actor": actor,
            "reason": reason or "",
            "at": at or store.now_iso(),
            "version": version,
            "before": json.dumps(before, ensure_ascii=False) if before is not None else None,
            "after": json.dumps(after, ensure_ascii=False) if after is not None else None,
        },
        pk="audit_id",
    )


def _secure(db) -> None:
    # Deleted rows and freed pages are overwritten, not just unlinked.
    db.execute("PRAGMA secure_delete = ON")


def _forget_derived(db, record_id: str, row: dict) -> None:
    """Drop what was derived from a record's old text: its vector, and its session's expansions.

    Each record's hidden `expansion` column holds its session neighbours' text, so
    forgetting, restoring or editing one record changes its neighbours' too; they
    are marked underived here and derived again (semantic.enrich_pending) by the caller.
    """
    if has_table(db, "record_vectors"):
        db.execute("delete from record_vectors where record_id = ?", [record_id])
    if "expansion" in table_columns(db, "memory_records"):
        db.execute(
            "update memory_records set expansion = null where project_id = ? and session_id is ?",
            [row["project_id"], row["session_id"]],
        )


def forget(db, record_ids, *, reason: str, actor: str) -> "list[dict]":
    """Move live records to tombstones (with their session_end summaries); returns what was forgotten."""
    _secure(db)
    done = []
    with store.writing(db):
        for record_id in dict.fromkeys(record_ids):
            rows = _rows(db, "select * from memory_records where record_id = ?", [record_id])
            if not rows:
                continue
            row = rows[0]
            summaries = _rows(db, "select * from session_summaries where record_id = ?", [record_id])
            at = store.now_iso()
            db["forgotten_records"].insert(
                {
                    "record_id": record_id,
                    "record_hash": row["record_hash"],
                    "project_id": row["project_id"],
                    "session_id": row["session_id"],
                    "reason": reason or "",
                    "actor": actor,
                    "forgotten_at": at,
                    "payload": json.dumps(
                        {"record": row, "session_summaries": summaries}, ensure_ascii=False
                    ),
                    "purged_at": None,
                },
                pk="record_id",
                replace=True,
            )
            db.execute("delete from session_summaries where record_id = ?", [record_id])
            db.execute("delete from memory_records where record_id = ?", [record_id])
            _forget_derived(db, record_id, row)
            _audit(db, record_id, "forget", actor, reason, at=at)
            done.append(decode_record(row))
    return done


def restore(db, record_ids, *, actor: str) -> "tuple[list[dict], list[str]]":
    """Bring tombstoned records back; returns (restored records, ids that were purged and cannot come back)."""
    restored, purged = [], []
    with store.writing(db):
        for record_id in dict.fromkeys(record_ids):
            rows = _rows(db, "select payload from forgotten_records where record_id = ?", [record_id])
            if not rows:
                continue
            if not rows[0]["payload"]:
                purged.append(record_id)
                continue
            payload = json.loads(rows[0]["payload"])
            db["memory_records"].insert(payload["record"], pk="record_id", ignore=True)
            for summary in payload.get("session_summaries", []):
                db["session_summaries"].insert(summary, pk="id", ignore=True)
            db.execute("delete from forgotten_records where record_id = ?", [record_id])
            _forget_derived(db, record_id, payload["record"])
            _audit(db, record_id, "restore", actor)
            restored.append(decode_record(payload["record"]))
    return restored, purged


def edit(db, record_id: str, changes: dict, *, actor: str, reason: str = "") -> "dict | None":
    """Change a live record's fields (FTS follows through its triggers); the old values go to the audit.

    The record_hash stays: it names what the extractor made, so a re-extraction
    of the same events still finds this record and does not bring the old text back.
    """
    with store.writing(db):
        rows = _rows(db, "select * from memory_records where record_id = ?", [record_id])
        if not rows:
            return None
        row = rows[0]
        before = {k: row[k] for k in changes}
        if before == changes:
            return decode_record(row)
        version = (
            db.execute(
                "select count(*) from record_audit where record_id = ? and action = 'edit'", [record_id]
            ).fetchone()[0]
            + 1
        )
        db["memory_records"].update(record_id, changes)
        _forget_derived(db, record_id, row)
        _audit(db, record_id, "edit", actor, reason, before=before, after=changes, version=version)
        return decode_record({**row, **changes})


def purgeable(db, *, record_ids=None, older_than: "str | None" = None) -> "list[str]":
    """Tombstones still holding their record: the given ones, or those forgotten before a time, or all."""
    sql, args = "select record_id from forgotten_records where payload is not null", []
    if older_than:
        sql += " and forgotten_at < ?"
        args.append(older_than)
    ids = [r[0] for r in db.execute(sql, args)]
    if record_ids is not None:
        wanted = set(record_ids)
        ids = [i for i in ids if i in wanted]
    return ids


def purge(db, record_ids, *, actor: str) -> dict:
    """Remove the bytes of forgotten records for good; keep only their hash, so nothing recreates them.

    Also deletes their source events that no other record (live or kept) cites,
    blanks the prompt of their extraction run when no live record came from it,
    and drops the old text of their audit rows. Then rewrites FTS (its index
    still held their words) and truncates the WAL, all with secure_delete on.
    """
    ids = list(dict.fromkeys(record_ids))
    result: dict[str, Any] = {"purged": 0, "events_deleted": 0, "wal_checkpoint": None}
    if not ids:
        return result
    _secure(db)
    with store.writing(db):
        payloads = {}
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            for r in _rows(
                db,
                f"select record_id, payload from forgotten_records where payload is not null "
                f"and record_id in ({','.join('?' * len(part))})",
                part,
            ):
                payloads[r["record_id"]] = json.loads(r["payload"])
        cited: set[str] = set()
        event_ids, run_ids = set(), set()
        for payload in payloads.values():
            record = payload["record"]
            event_ids.update(json.loads(record.get("source_event_ids") or "[]"))
            if record.get("run_id"):
                run_ids.add(record["run_id"])
        if event_ids:
            marks = ",".join("?" * len(event_ids))
            others = "select j.value from {table} t, json_each(t.{col}) j where j.value in ({marks})"
            cited.update(
                r[0]
                for r in db.execute(
                    others.format(table="memory_records", col="source_event_ids", marks=marks),
                    list(event_ids),
                )
            )
            for r in db.execute("select payload from forgotten_records where payload is not null"):
                if r[0]:
                    rec = json.loads(r[0])["record"]
                    if rec["record_id"] not in payloads:
                        cited.update(json.loads(rec.get("source_event_ids") or "[]"))
        gone = sorted(event_ids - cited)
        for i in range(0, len(gone), 500):
            part = gone[i : i + 500]
            cur = db.execute(f"delete from events where event_id in ({','.join('?' * len(part))})", part)
            result["events_deleted"] += cur.rowcount
        for run_id in run_ids:
            if not db.execute("select 1 from memory_records where run_id = ? limit 1", [run_id]).fetchone():
                db.execute("update extraction_runs set request = '' where run_id = ?", [run_id])
        now = store.now_iso()
        for record_id in payloads:
            db.execute(
                "update forgotten_records set payload = null, purged_at = ? where record_id = ?",
                [now, record_id],
            )
            db.execute("update record_audit set before = null, after = null where record_id = ?", [record_id])
            _audit(db, record_id, "purge", actor, at=now)
        result["purged"] = len(payloads)
    compact(db)
    result["wal_checkpoint"] = checkpoint(db)
    return result


def expire_forgotten(db, days: float) -> int:
    """Purge tombstones older than `days` (the retention period); returns how many (0 = nothing to do)."""
    if not days:
        return 0
    return purge_forgotten_before(db, store.iso_shift(store.now_iso(), -days * 86400))


def purge_forgotten_before(db, before: str) -> int:
    """Purge the tombstones forgotten before `before` that keep their record (Store.expire_forgotten)."""
    if not has_table(db, "forgotten_records"):
        return 0
    ids = purgeable(db, older_than=before)
    return purge(db, ids, actor="retention")["purged"] if ids else 0


def compact(db) -> None:
    """Merge the FTS index into one segment, with secure_delete on.

    A deleted record's words stay in FTS5's old segments, beside a delete marker,
    until a merge applies the marker; 'optimize' merges everything, much faster than
    a 'rebuild' that re-reads every record (docs/benchmarks.md, 'Scale'). SQLite
    3.42's FTS5 'secure-delete' option would make this unnecessary; 3.40 is common.
    """
    _secure(db)
    with store.writing(db):
        db.execute("insert into memory_records_fts(memory_records_fts) values('optimize')")


def checkpoint(db) -> dict:
    """Copy the WAL into the database and truncate it to zero bytes; says whether a reader held it back."""
    busy, log, done = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return {"busy": bool(busy), "wal_frames": log, "checkpointed": done}


def purge_edit_history(db, record_ids=None) -> int:
    """Drop the superseded text of edits (all, or of some records); returns how many versions were cleared."""
    _secure(db)
    sql, args = "update record_audit set before = null where action = 'edit' and before is not null", []
    if record_ids is not None:
        ids = list(record_ids)
        if not ids:
            return 0
        sql += f" and record_id in ({','.join('?' * len(ids))})"
        args = ids
    with store.writing(db):
        return db.execute(sql, args).rowcount


# --- marks: superseded_by and merged_into ---

MARKS = LINK_MARKS


def has_marks(conn) -> bool:
    """Whether the store has the mark columns (m021)."""
    return "superseded_by" in table_columns(conn, "memory_records")


def marked_by(conn, record_id: str) -> dict:
    """The other end of a record's marks: {"supersedes": ids it superseded, "merged_from": ids merged into it}."""
    if not has_marks(conn):
        return {"supersedes": [], "merged_from": []}
    return {
        "supersedes": [
            r[0]
            for r in conn.execute(
                "select record_id from memory_records where superseded_by = ? order by created_at, record_id",
                [record_id],
            )
        ],
        "merged_from": [
            r[0]
            for r in conn.execute(
                "select record_id from memory_records where merged_into = ? order by created_at, record_id",
                [record_id],
            )
        ],
    }


def set_mark(
    db,
    record_id: str,
    mark: str,
    value: "str | None",
    *,
    actor: str,
    reason: str = "",
    action: "str | None" = None,
) -> bool:
    """Set (or clear, with None) one mark of a live record, its old and new value in the audit; False when
    the record is not live or already so. The change feed follows (m021's trigger)."""
    if mark not in MARKS:
        raise ValueError(f"no mark {mark!r}")
    with store.writing(db):
        row = db.execute(f"select {mark} from memory_records where record_id = ?", [record_id]).fetchone()
        if row is None or row[0] == value:
            return False
        db.execute(f"update memory_records set {mark} = ? where record_id = ?", [value, record_id])
        name = action or ({"superseded_by": "supersede", "merged_into": "merge"}[mark] if value else "unmark")
        _audit(db, record_id, name, actor, reason, before={mark: row[0]}, after={mark: value})
    return True


def merge_records(
    db, survivor_id: str, merged_ids: "list[str]", union: dict, *, actor: str, reason: str
) -> bool:
    """Fold records into a survivor: its list fields become `union` (every source event, fact and file of
    the group), each other record gets merged_into = the survivor. One transaction; nothing is deleted."""
    with store.writing(db):
        rows = _rows(
            db, "select * from memory_records where record_id = ? and merged_into is null", [survivor_id]
        )
        if not rows:
            return False
        row = rows[0]
        changes = {k: json.dumps(v, ensure_ascii=False) for k, v in union.items() if k in RECORD_LISTS}
        before = {k: row[k] for k in changes if row[k] != changes[k]}
        if before:
            db["memory_records"].update(survivor_id, {k: changes[k] for k in before})
            _forget_derived(db, survivor_id, row)
            # its new lists are a change the team sync sends, as a 'record'
            db.execute("insert into record_changes (record_id, change) values (?, 'record')", [survivor_id])
        _audit(
            db,
            survivor_id,
            "merge-survivor",
            actor,
            reason,
            before={**before, "merged": []},
            after={**{k: changes[k] for k in before}, "merged": list(merged_ids)},
        )
        for rid in merged_ids:
            set_mark(db, rid, "merged_into", survivor_id, actor=actor, reason=reason)
    return True


def apply_marks(db, records: "list[dict]", *, actor: str = "sync") -> int:
    """A teammate's (or the team store's) marks on records held here: each mark a row carries that differs
    is set, with an audit row; returns how many records changed. A row without the keys changes nothing."""
    if not has_marks(db):
        return 0
    changed = 0
    for rec in records:
        for mark in MARKS:
            if mark in rec and set_mark(
                db, rec["record_id"], mark, rec[mark], actor=actor, reason="from the team store"
            ):
                changed += 1
    return changed


def _union(held, incoming) -> list:
    seen: dict = {}
    for value in [*(held or ()), *(incoming or ())]:
        seen.setdefault(json.dumps(value, sort_keys=True, ensure_ascii=False), value)
    return list(seen.values())


def merge_lists(db, records: "list[dict]", *, actor: str) -> int:
    """Store.merge_lists on SQLite: a merge survivor's lists made elsewhere (a teammate's consolidate or
    drain). Each record dict whose `source_event_ids` hold an event the live record here lacks (a merge
    always brings its group's events) gives each list its union with what is here, order kept, with a
    'merge-survivor' audit row, fed as a 'record' (a SQLite team store passes it on; a cache's own_lists
    leaves what the team sync brought alone); anything else changes nothing (edits do not sync).
    Returns how many records changed."""
    changed = 0
    with store.writing(db):
        for rec in records:
            rows = _rows(db, "select * from memory_records where record_id = ?", [rec.get("record_id")])
            if not rows:
                continue
            row = rows[0]
            held = decode_record(dict(row))
            if not set(map(str, rec.get("source_event_ids") or ())) - set(
                map(str, held.get("source_event_ids") or ())
            ):
                continue
            merged = {k: _union(held.get(k), rec.get(k)) for k in RECORD_LISTS if k in rec}
            after = {k: json.dumps(v, ensure_ascii=False) for k, v in merged.items()}
            before = {k: row[k] for k in after if row[k] != after[k]}
            if not before:
                continue
            db["memory_records"].update(row["record_id"], {k: after[k] for k in before})
            _forget_derived(db, row["record_id"], row)
            _audit(
                db,
                row["record_id"],
                "merge-survivor",
                actor,
                "lists merged in another store",
                before=before,
                after={k: after[k] for k in before},
            )
            db.execute(
                "insert into record_changes (record_id, change) values (?, 'record')", [row["record_id"]]
            )
            changed += 1
    return changed


def own_lists(conn, record_ids) -> "list[dict]":
    """The merge survivors among these records whose lists grew here (a 'merge-survivor' audit row that is
    not the team sync's): {"record_id", and each list} each, what a team sync sends up (Store.merge_lists)."""
    ids = list(dict.fromkeys(record_ids))
    out = []
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        rows = _rows(
            conn,
            f"select r.* from memory_records r where r.record_id in ({','.join('?' * len(part))}) "
            f"and exists (select 1 from record_audit a where a.record_id = r.record_id "
            f"and a.action = 'merge-survivor' and a.actor != 'team')",
            part,
        )
        for row in rows:
            rec = decode_record(row)
            out.append({"record_id": rec["record_id"], **{k: rec.get(k) or [] for k in RECORD_LISTS}})
    return out


def own_marks(conn, record_ids) -> "list[dict]":
    """The marks of these records that were set or cleared here (their latest mark audit row is not the
    team sync's): {"record_id", mark: value} for each such mark. What a team sync sends up, so a record
    that merely arrived from the team never sends its (maybe older) marks back."""
    ids = list(dict.fromkeys(record_ids))
    if not ids or not has_marks(conn):
        return []
    out = []
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        rows = _rows(
            conn,
            f"select a.record_id, a.actor, a.before, a.after from record_audit a "
            f"where a.record_id in ({','.join('?' * len(part))}) "
            f"and a.action in ('supersede', 'merge', 'unmark') order by a.audit_id",
            part,
        )
        latest: dict = {}
        for row in rows:
            for mark in json.loads(row["after"] or "{}"):
                latest[(row["record_id"], mark)] = row["actor"]
        current = {
            r["record_id"]: r
            for r in _rows(
                conn,
                f"select record_id, superseded_by, merged_into from memory_records "
                f"where record_id in ({','.join('?' * len(part))})",
                part,
            )
        }
        for (rid, mark), actor in latest.items():
            if actor != "team" and rid in current:
                out.append({"record_id": rid, mark: current[rid][mark]})
    return out


def mark_figures(conn) -> dict:
    """How many records are superseded and merged (partial indexes: no table scan)."""
    if not has_marks(conn):
        return {"superseded": 0, "merged": 0}
    return {
        "superseded": conn.execute(
            "select count(*) from memory_records indexed by idx_records_superseded_by "
            "where superseded_by is not null"
        ).fetchone()[0],
        "merged": conn.execute(
            "select count(*) from memory_records indexed by idx_records_merged_into "
            "where merged_into is not null"
        ).fetchone()[0],
    }


# --- import ---


def import_forgotten(db, rows: "list[tuple[dict, dict]]") -> dict:
    """Tombstones from an export: (memory_records row, {forgotten_at, reason, actor}); present ids are left alone."""
    counts = [0, 0]
    _secure(db)
    with store.writing(db):
        for row, mark in rows:
            if _rows(db, "select 1 from memory_records where record_id = ?", [row["record_id"]]) or _rows(
                db, "select 1 from forgotten_records where record_id = ?", [row["record_id"]]
            ):
                counts[1] += 1
                continue
            db["forgotten_records"].insert(
                {
                    "record_id": row["record_id"],
                    "record_hash": row["record_hash"],
                    "project_id": row["project_id"],
                    "session_id": row["session_id"],
                    "reason": str(mark.get("reason") or ""),
                    "actor": str(mark.get("actor") or "import"),
                    "forgotten_at": str(mark.get("forgotten_at") or ""),
                    "payload": json.dumps({"record": row, "session_summaries": []}, ensure_ascii=False),
                    "purged_at": None,
                },
                pk="record_id",
            )
            counts[0] += 1
    return {"added": counts[0], "present": counts[1]}


def import_rows(db, events: "list[dict]", records: "list[dict]", summaries: "list[dict]") -> dict:
    """Insert rows that are not there yet, in one transaction; returns counts per kind.

    Rows are keyed by their ids (and records also by record_hash): present ones are
    left as they are. Records (and their session_end summaries) that were forgotten
    here are skipped, so an old backup cannot bring back what a user removed.
    """
    counts: dict[str, Any] = {
        "events": [0, 0],
        "records": [0, 0],
        "summaries": [0, 0],
        "forgotten_skipped": 0,
    }
    gone_ids = forgotten_ids(
        db, [r["record_id"] for r in records] + [s["record_id"] for s in summaries if s.get("record_id")]
    )
    gone_hashes = store.forgotten_hashes(db, [r["record_hash"] for r in records])
    with store.writing(db):
        for table, key, rows, _pk in (
            ("events", "events", events, "event_id"),
            ("memory_records", "records", records, "record_id"),
            ("session_summaries", "summaries", summaries, "id"),
        ):
            for row in rows:
                if table == "memory_records" and (
                    row["record_id"] in gone_ids or row["record_hash"] in gone_hashes
                ):
                    counts["forgotten_skipped"] += 1
                    continue
                if table == "session_summaries" and row.get("record_id") in gone_ids:
                    counts["forgotten_skipped"] += 1
                    continue
                cur = db.execute(
                    f"insert or ignore into {table} ({', '.join(f'[{c}]' for c in row)}) "
                    f"values ({', '.join('?' * len(row))})",
                    list(row.values()),
                )
                counts[key][0 if cur.rowcount else 1] += 1
    return {
        "events": {"added": counts["events"][0], "present": counts["events"][1]},
        "records": {"added": counts["records"][0], "present": counts["records"][1]},
        "summaries": {"added": counts["summaries"][0], "present": counts["summaries"][1]},
        "forgotten_skipped": counts["forgotten_skipped"],
    }


def table_columns(db, table: str) -> "list[str]":
    """Column names of a table."""
    return [r[1] for r in db.execute(f"pragma table_info({table})")]


# --- marks (freshness and outcome) ---

MARK_FIELDS = ("freshness", "outcome")


def set_marks(db, marks: "list[dict]", *, actor: str) -> "list[dict]":
    """Store.set_marks on SQLite: each {record_id, freshness?, outcome?, reason?, at?} applied to a live
    record whose marks differ, with an audit row ('mark': before, after, reason, time); the change
    feed numbers it through its trigger (m020). Nothing is removed. Returns the changes made."""
    done: list[dict] = []
    if not marks or "freshness" not in table_columns(db, "memory_records"):
        return done
    with store.writing(db):
        for mark in marks:
            rows = _rows(
                db,
                "select record_id, freshness, outcome from memory_records where record_id = ?",
                [mark["record_id"]],
            )
            if not rows:
                continue
            after = {k: mark[k] for k in MARK_FIELDS if mark.get(k) is not None and mark[k] != rows[0][k]}
            if not after:
                continue
            before = {k: rows[0][k] for k in after}
            db.execute(
                f"update memory_records set {', '.join(f'{k} = ?' for k in after)} where record_id = ?",
                [*after.values(), mark["record_id"]],
            )
            _audit(
                db,
                mark["record_id"],
                "mark",
                actor,
                mark.get("reason") or "",
                before=before,
                after=after,
                at=mark.get("at"),
            )
            done.append(
                {
                    "record_id": mark["record_id"],
                    "before": before,
                    "after": after,
                    "reason": mark.get("reason") or "",
                }
            )
    return done


def freshness_due(conn, limit: int) -> "list[dict]":
    """The records whose files were checked longest ago (never checked first), at most `limit`: one range
    of the partial index idx_records_freshness_due (records with a file_state only), never a scan."""
    if (
        limit <= 0
        or not has_table(conn, "memory_records")
        or "claims" not in table_columns(conn, "memory_records")
    ):
        return []
    rows = _rows(
        conn,
        FRESHNESS_DUE_SQL.replace(
            "select record_id ",
            "select record_id, project_root, freshness, outcome, claims, cites, freshness_checked_at ",
            1,
        ),
        [limit],
    )
    return [decode_record(r) for r in rows]


FRESHNESS_DUE_SQL = (
    "select record_id from memory_records indexed by idx_records_claims_due "
    "where claims is not null order by freshness_checked_at, record_id limit ?"
)


NEWEST_CHECKED_SQL = (
    "select max(freshness_checked_at) from memory_records "
    "indexed by idx_records_claims_due where claims is not null"
)


def note_checked(db, record_ids, at: str) -> None:
    """When these records' files were last checked: they go to the back of freshness_due's queue, behind
    every stamp already there even when the wall clock stepped back (`at` older than the newest stamp,
    which would send them to the front and check them again before the rest). One index lookup."""
    ids = list(record_ids)
    if not ids:
        return
    newest = db.execute(NEWEST_CHECKED_SQL).fetchone()[0]
    if newest and newest >= at:
        from kirolearn.core import isotime

        at = isotime.shift(newest, 0.001)
    with store.writing(db):
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            db.execute(
                f"update memory_records set freshness_checked_at = ? where record_id in "
                f"({','.join('?' * len(part))})",
                [at, *part],
            )
