"""The embedded store's claims: what records say about the code, found by what they cite.

`record_claims` and `record_cites` are kept by m023's triggers from each record's `claims` and
`cites`; this part reads them by index and keeps this machine's check of each claim. Every query
is an index range (identity, record id, signature, the re-check queue), never a scan: rule 15.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite_utils

_CLAIM_COLUMNS = (
    "record_id, file, kind, key, digest, shown, lines, fingerprint, state, now, path, blob, why, by_record, "
    "checked_at, created_at"
)


def _dicts(cursor) -> list[dict]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _claim(row: dict) -> dict:
    row = dict(row)
    for key in ("lines", "fingerprint"):
        try:
            row[key] = json.loads(row.get(key) or "[]")
        except ValueError:
            row[key] = []
    return row


class ClaimsPart:
    """Claims, cites, signatures and pins (a part of SqliteStore, over its sqlite-utils `db`)."""

    db: sqlite_utils.Database  # SqliteStore's

    def claims_of(self, record_ids) -> dict[str, list[dict]]:
        ids = list(dict.fromkeys(record_ids))
        out: dict[str, list[dict]] = {}
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            cursor = self.db.execute(
                f"select {_CLAIM_COLUMNS} from record_claims where record_id in ({','.join('?' * len(part))}) "
                "order by record_id, file, kind, key",
                part,
            )
            for row in _dicts(cursor):
                out.setdefault(row["record_id"], []).append(_claim(row))
        return out

    def records_claiming(
        self, project_id: str, identities, *, before: str = "", exclude=(), stored_before: str = ""
    ) -> list[dict]:
        skip = set(exclude)
        out = []
        # stored order: the claim rows' rowids, whatever the clock said
        limit_row = None
        if stored_before:
            found = self.db.execute(
                "select min(rowid) from record_claims where record_id = ?", [stored_before]
            ).fetchone()
            limit_row = found[0] if found and found[0] is not None else None
        order = "c.rowid < ?" if limit_row is not None else "c.created_at <= ?"
        bound = limit_row if limit_row is not None else (before or "9999")
        columns = f"c.{_CLAIM_COLUMNS.replace(', ', ', c.')}"
        for file, kind, key in dict.fromkeys(map(tuple, identities)):
            seen = set()
            # by the claim's file, then by where a check found it moved
            for index, column in (("indexed by idx_claims_identity", "file"), ("", "path")):
                # the second: idx_claims_moved, which the planner picks
                cursor = self.db.execute(
                    f"select {columns} from record_claims c {index} "
                    "join memory_records r on r.record_id = c.record_id "
                    f"where c.project_id = ? and c.{column} = ? and c.kind = ? and c.key = ? "
                    f"and {order} and r.superseded_by is null and r.merged_into is null "
                    "order by c.rowid desc limit 50",
                    [project_id, file, kind, key, bound],
                )
                for row in _dicts(cursor):
                    if row["record_id"] not in skip and (row["record_id"], row["file"]) not in seen:
                        seen.add((row["record_id"], row["file"]))
                        out.append(_claim(row))
        return out

    def set_claim_states(self, rows: list[dict]) -> int:
        from kirolearn.core.isotime import now_iso
        from kirolearn.store.sqlite.db import writing

        changed = 0
        with writing(self.db):
            for row in rows:
                cursor = self.db.execute(
                    "update record_claims set state = ?, now = ?, path = coalesce(?, path), "
                    "blob = coalesce(?, blob), why = ?, by_record = coalesce(?, by_record), checked_at = ? "
                    "where record_id = ? and file = ? and kind = ? and key = ?",
                    [
                        row["state"],
                        row.get("now") or None,
                        row.get("path") or None,
                        row.get("blob") or None,
                        row.get("why") or None,
                        row.get("by") or None,
                        row.get("at") or now_iso(),
                        row["record_id"],
                        row["file"],
                        row["kind"],
                        row.get("key") or "",
                    ],
                )
                changed += cursor.rowcount
        return changed

    def records_citing(self, record_ids) -> dict[str, list[str]]:
        ids = list(dict.fromkeys(record_ids))
        out: dict[str, list[str]] = {}
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            for citing, cited in self.db.execute(
                f"select record_id, cited_id from record_cites where cited_id in ({','.join('?' * len(part))})",
                part,
            ):
                out.setdefault(cited, []).append(citing)
        return out

    def records_with_signature(self, project_id: str, signature: str) -> list[dict]:
        from kirolearn.store.sqlite.records import decode_record

        cursor = self.db.execute(
            "select * from memory_records indexed by idx_records_signature where project_id = ? "
            # stored order
            "and work_signature = ? and merged_into is null order by rowid limit 200",
            [project_id, signature],
        )
        return [decode_record(r) for r in _dicts(cursor)]

    def signature_groups(self, project_id: str, limit: int = 1000) -> list[list[str]]:
        cursor = self.db.execute(
            "select group_concat(record_id, ' ') from (select record_id, work_signature from memory_records "
            "indexed by idx_records_signature where project_id = ? and work_signature is not null "
            "and merged_into is null order by rowid) group by work_signature "
            "having count(*) > 1 limit ?",
            [project_id, limit],
        )
        return [row[0].split(" ") for row in cursor.fetchall()]

    def pin(self, record_id: str, rule: str, at: str) -> None:
        from kirolearn.store.sqlite.db import writing

        with writing(self.db):
            self.db.execute(
                "update memory_records set pinned = json_set(coalesce(pinned, '{}'), '$.' || ?, ?) "
                "where record_id = ?",
                [rule, at, record_id],
            )
