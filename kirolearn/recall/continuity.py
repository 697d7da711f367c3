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

from kirolearn.store import reader

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
    rows, columns = reader.session_end_rows(conn, project_id, label, SCAN)
    return [decode(r, columns) for r in rows]


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
    return reader.session_end_labels(conn, project_id)
