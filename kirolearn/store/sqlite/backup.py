"""Export: every stored object as JSON Lines, for backup and tests.

Each line is one object with a "type" field beside its own fields: "event" (a
stored, scrubbed event), "record" (a memory record; a forgotten one, restorable
until purged, carries a `forgotten` object) or "summary" (a session_end summary). Lines come in a stable order (events by id, records by creation,
summaries by end time), so two exports of one store are byte-identical.
"""

import json
from collections.abc import Iterator
from typing import IO

from kirolearn.core.jsonfast import strict_dumps
from kirolearn.store.sqlite.records import decode_record, decode_summary


def objects(db, kinds=("event", "record", "summary")) -> "Iterator[dict]":
    """Every stored row of these kinds as a store-contract object (kirolearn.store.base.Store.export_objects)."""
    if "event" in kinds:
        for row in db.query("select * from events order by event_id"):
            yield {"type": "event", **row}
    if "record" in kinds:
        for row in db.query("select * from memory_records order by created_at, record_id"):
            yield {"type": "record", **decode_record(row)}
    if "summary" in kinds:
        for row in db.query("select * from session_summaries order by ended_at, id"):
            yield {"type": "summary", **decode_summary(row)}


def export(db, out: IO[str]) -> int:
    """Write the store `db` to `out` as `kirolearn export` lines; returns the number of lines written."""
    lines = 0
    for row in db.query("select body, extract_state, run_id, actor, host from events order by event_id"):
        item = json.loads(row["body"])
        # the stored attribution (a configured actor replaces the OS user)
        item.update({k: row[k] for k in ("actor", "host") if row[k]})
        out.write(
            strict_dumps(
                {
                    "type": "event",
                    **item,
                    "extract_state": row["extract_state"],
                    "extract_run_id": row["run_id"],
                },
                ensure_ascii=False,
            )
            + "\n"
        )
        lines += 1
    for item in objects(db, kinds=("record", "summary")):
        out.write(strict_dumps(item, ensure_ascii=False) + "\n")
        lines += 1
    for item in forgotten_objects(db):
        out.write(strict_dumps(item, ensure_ascii=False) + "\n")
        lines += 1
    return lines


FORGOTTEN_KEYS = ("forgotten_at", "reason", "actor")


def forgotten_objects(db) -> "Iterator[dict]":
    """Forgotten (not purged) records as "record" lines marked `forgotten`: {forgotten_at, reason, actor}.

    `import` brings them back forgotten, so an export holds every stored object and a round trip
    restores nothing the user removed. A purged record's text is gone: it has no line.
    """
    from kirolearn.store.sqlite.records import has_table

    if not has_table(db, "forgotten_records"):
        return
    for row in db.query(
        "select * from forgotten_records where payload is not null order by forgotten_at, record_id"
    ):
        payload = json.loads(row["payload"] or "null") or {}
        if payload.get("record"):
            yield {
                "type": "record",
                **decode_record(payload["record"]),
                "forgotten": {k: row[k] for k in FORGOTTEN_KEYS},
            }
