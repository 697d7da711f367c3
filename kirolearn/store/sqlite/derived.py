"""What recall derives from records, kept in the embedded store: each record's `expansion` text and
its vector (kirolearn.store.base.DerivedIndex, the store-side object recall's passes write through).

Every pass finds its pending work through an index or a watermark, never by reading every record
(architecture.md rule 15):
- expansions: the partial index `idx_records_expansion_pending` holds only records whose
  expansion is not derived yet (migration m020_pending_work);
- vectors of a model: `vector_progress` keeps, per model, a watermark on the change feed
  (`record_changes.seq`, never reused) for records written since, and a rowid cursor for the one
  backfill of what was there before (a new model, an upgraded store); `vectors_stale` is fed by a
  trigger when a vector is deleted (an edit, a forget); vectors a model made before it embedded
  parts are found through the partial index `idx_vectors_before_parts`.
Each batch of vectors commits with its watermark, so a killed backfill resumes where it stopped,
and nothing is embedded twice.
"""

from kirolearn.store.base import DerivedIndex
from kirolearn.store.sqlite import db as sqlite
from kirolearn.store.sqlite.vector_rows import VectorRows

BACKFILL_WINDOW = 5000  # rowids per backfill query: each stays bounded
BACKFILL_WINDOWS = 40  # per call at most: 200k rowids, well under a second
# idx_vectors_before_parts' condition, verbatim
PARTS = "substr(coalesce(v.text_hash, ''), 1, 1) != 'p'"
_EMBED_COLUMNS = ("rowid", "record_id", "project_id", "title", "summary", "facts", "concepts")
_SELECT = "r.rowid, r.record_id, r.project_id, r.title, r.summary, r.facts, r.concepts"
_NO_VECTOR = "left join record_vectors v on v.record_id = r.record_id and v.model_id = ?"


def _rows(cursor, extra=()) -> "list[dict]":
    columns = (*extra, *_EMBED_COLUMNS)
    return [dict(zip(columns, row)) for row in cursor]


class SqliteDerived(VectorRows, DerivedIndex):
    """Expansions and vectors of one SQLite store (`SqliteStore.derived()`), over its sqlite-utils
    Database; recall reads the vectors through VectorRows' methods."""

    def __init__(self, db):
        self.db = db
        super().__init__(db.conn)

    def sessions_needing_expansion(self, limit: int = 500) -> "list[tuple[str, str, int]]":
        """(project_id, session_id, rowid of its first record without an expansion), through the partial
        index of such records: as many rows as are pending, whatever the store holds."""
        return [
            tuple(r)
            for r in self.db.execute(
                "select project_id, session_id, min(rowid) from memory_records indexed by idx_records_expansion_pending "
                "where expansion is null group by project_id, session_id limit ?",
                [limit],
            )
        ]

    def expansions_pending(self) -> int:
        """How many records await their expansion: a count of the partial index, as long as the work."""
        return self.db.execute(
            "select count(*) from memory_records indexed by idx_records_expansion_pending "
            "where expansion is null"
        ).fetchone()[0]

    def session_records(
        self, project_id: str, session_id: str, from_rowid: int = 0, context: int = 0
    ) -> "list[dict]":
        """A session's records in creation order from `from_rowid` on, after the `context` records before it:
        rowid, record_id, title, summary, expansion."""
        columns = "rowid, record_id, title, summary, expansion"
        where = "project_id = ? and session_id is ?"
        rows = []
        if context and from_rowid:
            rows = self.db.execute(
                f"select {columns} from memory_records where {where} and rowid < ? "
                "order by rowid desc limit ?",
                [project_id, session_id, from_rowid, context],
            ).fetchall()[::-1]
        rows += self.db.execute(
            f"select {columns} from memory_records where {where} and rowid >= ? order by rowid",
            [project_id, session_id, from_rowid],
        ).fetchall()
        return [dict(zip(("rowid", "record_id", "title", "summary", "expansion"), r)) for r in rows]

    def set_expansions(self, values: "dict[str, str]") -> None:
        sqlite.set_expansions(self.db, values)

    def clear_expansions(self) -> None:
        sqlite.clear_expansions(self.db)

    def _progress(self, model_id: str) -> "tuple[int, int | None]":
        """(feed watermark, backfill rowid cursor or None when done) of a model; started on first use."""
        row = self.db.execute(
            "select feed_seq, backfill_after from vector_progress where model_id = ?", [model_id]
        ).fetchone()
        if row is not None:
            return row[0], row[1]
        top = self.db.execute("select coalesce(max(seq), 0) from record_changes").fetchone()[0]
        with sqlite.writing(self.db):
            self.db.execute(
                "insert or ignore into vector_progress (model_id, feed_seq, backfill_after) values (?, ?, 0)",
                [model_id, top],
            )
        return self._progress(model_id)

    def vectors_to_embed(
        self, model_id: str, limit: int = 512, *, before_parts: bool = False
    ) -> "tuple[list[dict], dict]":
        """(records to embed with `model_id`, the cursor that save_vectors commits with them; its "more":
        whether a next call may find more, even when these rows are none).

        Without a vector of the model: those whose vector was deleted, then those written after the
        feed watermark, then the backfill's. `before_parts`: instead those whose vector of it was
        made before it embedded parts. Every query reads an index range; none reads every record.
        """
        if before_parts:
            rows = _rows(
                self.db.execute(
                    f"select {_SELECT} from record_vectors v indexed by idx_vectors_before_parts "
                    f"join memory_records r on r.record_id = v.record_id where v.model_id = ? and {PARTS} "
                    "order by v.record_id limit ?",
                    [model_id, limit],
                )
            )
            return rows, {}
        rows = _rows(
            self.db.execute(
                f"select {_SELECT} from vectors_stale s join memory_records r on r.record_id = s.record_id "
                f"{_NO_VECTOR} where v.record_id is null limit ?",
                [model_id, limit],
            )
        )
        if rows:
            return rows, {"stale": [r["record_id"] for r in rows], "more": True}
        if self.db.execute("select exists (select 1 from vectors_stale)").fetchone()[0]:
            # marks of records that have a vector again, or are gone
            self.clear_stale()
        feed, backfill = self._progress(model_id)
        top = self.db.execute("select coalesce(max(seq), 0) from record_changes").fetchone()[0]
        if feed < top:
            found = _rows(
                self.db.execute(
                    f"select c.seq, {_SELECT} from record_changes c join memory_records r on r.record_id = c.record_id "
                    f"{_NO_VECTOR} where c.seq > ? and c.seq <= ? and c.change = 'record' and v.record_id is null "
                    "order by c.seq limit ?",
                    [model_id, feed, top, limit],
                ),
                extra=("seq",),
            )
            seq = found[-1]["seq"] if len(found) == limit else top
            for row in found:
                del row["seq"]
            return found, {"model_id": model_id, "feed_seq": seq, "backfill_after": backfill, "more": True}
        if backfill is None:
            return [], {}
        last = self.db.execute("select coalesce(max(rowid), 0) from memory_records").fetchone()[0]
        found = []
        for _ in range(BACKFILL_WINDOWS):
            if backfill >= last or len(found) >= limit:
                break
            end = min(backfill + BACKFILL_WINDOW, last)
            found += _rows(
                self.db.execute(
                    f"select {_SELECT} from memory_records r {_NO_VECTOR} where r.rowid > ? and r.rowid <= ? "
                    "and v.record_id is null order by r.rowid limit ?",
                    [model_id, backfill, end, limit - len(found)],
                )
            )
            backfill = found[-1]["rowid"] if len(found) >= limit else end
        done = backfill >= last
        return found, {
            "model_id": model_id,
            "feed_seq": feed,
            "backfill_after": None if done else backfill,
            "more": not done,
        }

    def save_vectors(self, rows: "list[dict]", cursor: "dict | None" = None) -> None:
        """Store vector rows and, in the same transaction, the cursor vectors_to_embed gave with them
        (a vector of one model replaces another's: the other models' progress starts over)."""
        cursor = cursor or {}
        with sqlite.writing(self.db):
            sqlite.save_vectors(self.db, rows)
            models = {r["model_id"] for r in rows}
            if models:
                marks = ",".join("?" * len(models))
                self.db.execute(f"delete from vector_progress where model_id not in ({marks})", list(models))
            if "model_id" in cursor:
                self.db.execute(
                    "update vector_progress set feed_seq = ?, backfill_after = ? where model_id = ?",
                    [cursor["feed_seq"], cursor["backfill_after"], cursor["model_id"]],
                )
            stale = cursor.get("stale") or []
            for i in range(0, len(stale), 500):
                part = stale[i : i + 500]
                self.db.execute(
                    f"delete from vectors_stale where record_id in ({','.join('?' * len(part))})", part
                )

    def clear_stale(self) -> None:
        """Forget stale marks of records that have a vector again or are gone (what vectors_to_embed skips)."""
        with sqlite.writing(self.db):
            self.db.execute(
                "delete from vectors_stale where record_id not in (select record_id from memory_records) "
                "or record_id in (select record_id from record_vectors)"
            )

    def count_to_embed(self, model_id: str, *, before_parts: bool = False) -> int:
        """How many records vectors_to_embed would still give (reads only what is pending, and what the
        backfill has left)."""
        if before_parts:
            return self.db.execute(
                f"select count(*) from record_vectors v indexed by idx_vectors_before_parts "
                f"where v.model_id = ? and {PARTS}",
                [model_id],
            ).fetchone()[0]
        feed, backfill = self._progress(model_id)
        count = self.db.execute(
            f"select count(*) from vectors_stale s join memory_records r on r.record_id = s.record_id {_NO_VECTOR} "
            "where v.record_id is null",
            [model_id],
        ).fetchone()[0]
        count += self.db.execute(
            f"select count(distinct r.record_id) from record_changes c join memory_records r "
            f"on r.record_id = c.record_id {_NO_VECTOR} where c.seq > ? and c.change = 'record' "
            "and v.record_id is null",
            [model_id, feed],
        ).fetchone()[0]
        if backfill is not None:
            count += self.db.execute(
                f"select count(*) from memory_records r {_NO_VECTOR} where r.rowid > ? "
                "and v.record_id is null",
                [model_id, backfill],
            ).fetchone()[0]
        return count

    def drop_vectors(self, keep_model_id: "str | None" = None) -> int:
        """Delete vectors of every model but `keep_model_id` (all when None), and their progress."""
        with sqlite.writing(self.db):
            dropped = sqlite.drop_vectors(self.db, keep_model_id)
            # the backfill finds what is dropped
            self.db.execute("delete from vectors_stale")
            # every model starts over
            self.db.execute("delete from vector_progress")
        return dropped
