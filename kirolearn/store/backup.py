"""Export: every stored object as JSON Lines, for backup and tests.

Each line is one object with a "type" field beside its own fields: "event" (a
stored, scrubbed event), "record" (a memory record) or "summary" (a session_end
summary). Lines come in a stable order (events by id, records by creation,
summaries by end time), so two exports of one store are byte-identical.
"""

import json
from typing import IO


def export(db, out: IO[str]) -> int:
    """Write the store `db` to `out`; returns the number of lines written."""
    from kirolearn.recall.context import decode_session_summary

    lines = 0
    for row in db.query("select body, extract_state, run_id, actor, host from events order by event_id"):
        item = json.loads(row["body"])
        # the stored attribution (a configured actor replaces the OS user the hook saw)
        item.update({k: row[k] for k in ("actor", "host") if row[k]})
        out.write(json.dumps({"type": "event", **item, "extract_state": row["extract_state"],
                              "extract_run_id": row["run_id"]}, ensure_ascii=False) + "\n")
        lines += 1
    for row in db.query("select * from memory_records order by created_at, record_id"):
        item = dict(row)
        for key in ("facts", "concepts", "files_touched", "source_event_ids"):
            item[key] = json.loads(item[key])
        out.write(json.dumps({"type": "record", **item}, ensure_ascii=False) + "\n")
        lines += 1
    for row in db.query("select * from session_summaries order by ended_at, id"):
        out.write(json.dumps({"type": "summary", **decode_session_summary(row)}, ensure_ascii=False) + "\n")
        lines += 1
    return lines
