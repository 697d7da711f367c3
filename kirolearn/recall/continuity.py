"""Which session_end summary the next session resumes from.

Standard library only: the session-start hook uses it (through kirolearn.recall.context),
and so do `session_init` (MCP and CLI). One rule for both:

- The newest summary *with content* is the one shown. A later session that
  ended without one (auto_compress failed, or the model had nothing to say)
  never hides it; it is listed in `ended_without_summary` instead.
- Each list (next steps, pitfalls, open questions, highlights) comes from the
  newest of those sessions that gave one, so open next steps are carried
  forward until a later session replaces them.
"""

import json
try:  # the C module alone: the sqlite3 package adds datetime adapters we never use (~3 ms of the hook)
    import _sqlite3 as sqlite3
except ImportError:  # not CPython
    import sqlite3

SUMMARY_LISTS = ("highlights", "pitfalls", "next_steps", "open_questions")
SCAN = 50  # session ends looked at, newest first: enough to find the last one with content


def decode(row, columns=None) -> dict:
    """A session_summaries row (dict, sqlite3.Row or tuple with `columns`) with its JSON lists decoded."""
    found = dict(zip(columns, row)) if columns is not None else dict(row)
    for key in SUMMARY_LISTS:
        try:
            value = json.loads(found.get(key) or "[]")
        except ValueError:
            value = []
        found[key] = value if isinstance(value, list) else []
    return found


def _rows(conn, project_id: str, label: "str | None") -> "list[dict]":
    sql = "select * from session_summaries where project_id = ?"
    args: list = [project_id]
    if label is not None:
        sql += " and project = ?"
        args.append(label)
    sql += " order by ended_at desc, rowid desc limit ?"
    args.append(SCAN)
    try:
        cursor = conn.execute(sql, args)
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):  # a store from before session_end existed
            return []
        raise
    columns = [d[0] for d in cursor.description]
    return [decode(tuple(r), columns) for r in cursor.fetchall()]


def resume(conn, project_id: str, label: "str | None" = None) -> "dict | None":
    """What a new session of this project (and label, if given) resumes from; None if nothing ended yet."""
    rows = _rows(conn, project_id, label)
    if not rows:
        return None
    base_at = next((i for i, r in enumerate(rows) if (r.get("summary") or "").strip()), 0)
    later, base = rows[:base_at], dict(rows[base_at])
    for key in SUMMARY_LISTS:
        for row in later + [base]:  # newest first
            if row[key]:
                base[key] = row[key]
                break
    base["ended_without_summary"] = [
        {"session_id": r["session_id"], "ended_at": r["ended_at"], "auto_compress_error": r.get("auto_compress_error")}
        for r in later
    ]
    return base


def labels(conn, project_id: str) -> "list[str]":
    """The labels (`project` arguments) this project's session ends used."""
    try:
        return [r[0] for r in conn.execute(
            "select distinct project from session_summaries where project_id = ? order by project", [project_id])]
    except sqlite3.OperationalError:
        return []
