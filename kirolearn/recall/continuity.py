"""Which session_end summary the next session resumes from.

Standard library only: the session-start hook uses it (through kirolearn.recall.context),
and so do `session_init` (MCP and CLI). One rule for both:

- `session_init` returns the newest row exactly as `session_end` saved it (the seed):
  one row, never fields of two.
- When that row has no summary (auto_compress failed, or the model had nothing to
  say), the newest row with one rides along whole as `previous`, so it is never
  hidden; the sessions that ended without one since are listed in `ended_without_summary`.
"""

import json

from kirolearn.store.sqlite import reader

SUMMARY_LISTS = ("highlights", "pitfalls", "next_steps", "open_questions")
# session ends looked at, newest first: enough to find the last one with content
SCAN = 50


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
    """The newest session_end row of this project (and label, if given), exactly as saved; None if none yet.

    When that row's summary is empty (auto_compress failed, or no model), `previous` holds the
    newest row with content, whole and apart (never mixed into the newest row's fields), and
    `ended_without_summary` lists the sessions that ended without one since.
    """
    rows = _rows(conn, project_id, label)
    if not rows:
        return None
    newest = dict(rows[0])
    base_at = next((i for i, r in enumerate(rows) if (r.get("summary") or "").strip()), None)
    later = rows[:base_at] if base_at is not None else rows
    newest["previous"] = dict(rows[base_at]) if base_at else None
    newest["ended_without_summary"] = (
        [
            {
                "session_id": r["session_id"],
                "ended_at": r["ended_at"],
                "auto_compress_error": r.get("auto_compress_error"),
            }
            for r in later
        ]
        if base_at
        else []
    )
    return newest


def labels(conn, project_id: str) -> "list[str]":
    """The labels (`project` arguments) this project's session ends used."""
    return reader.session_end_labels(conn, project_id)
