"""The vector rows an approximate-nearest-neighbour index reads (kirolearn.recall.ann), by rowid.

A record_vectors row's rowid grows with every write (an edit's new vector takes a new rowid), so an
index keyed by it follows the table through a watermark: what it covers is every row of its
(model, project) at or below it. Every query here reads an index range or a rowid range of the
new rows, never every vector of a project (architecture.md rule 15).
"""

import sqlite3

_PROJECT = "indexed by idx_record_vectors_project where project_id = ? and model_id = ?"

_RECORD = "rowid, record_id, session_id, title, source_event_ids, created_at"

_SIDE = (
    "(select p.rowid from memory_records p indexed by idx_records_project_session where p.project_id = "
    "r.project_id and p.session_id is r.session_id and p.rowid {} r.rowid order by p.rowid {} limit 1)"
)


class VectorRows:
    """The reads of record_vectors (and of the records they belong to) that recall needs, on one
    connection: semantic recall's matrix of a project and the usearch index's rows by rowid."""

    def __init__(self, conn):
        self.conn = conn

    def database_file(self) -> str:
        """The file behind the connection ('' in memory): an index lives beside it."""
        return self.conn.execute("pragma database_list").fetchone()[2] or ""

    def vector_top(self, model_id: str, project_id: str) -> int:
        """The highest rowid of a project's vectors of a model (0 when none): one index seek."""
        try:
            row = self.conn.execute(
                f"select max(rowid) from record_vectors {_PROJECT}", [project_id, model_id]
            ).fetchone()
        except sqlite3.OperationalError:
            return 0
        return row[0] or 0

    def vector_rows_after(self, model_id: str, project_id: str, after: int, limit: int) -> "list[tuple]":
        """(rowid, vector bytes, dimensions, updated_at) of a project's vectors above rowid `after`, in order."""
        return self.conn.execute(
            f"select rowid, vector, dimensions, updated_at from record_vectors {_PROJECT} "
            "and rowid > ? order by rowid limit ?",
            [project_id, model_id, after, limit],
        ).fetchall()

    def vector_rows_down(self, model_id: str, project_id: str, at_most: int, limit: int) -> "list[tuple]":
        """(rowid, vector bytes, dimensions, updated_at, record_id) of a project's vectors at or below rowid
        `at_most`, highest first (an index looks for rowids reused after its newest rows were deleted)."""
        return self.conn.execute(
            f"select rowid, vector, dimensions, updated_at, record_id from record_vectors {_PROJECT} "
            "and rowid <= ? order by rowid desc limit ?",
            [project_id, model_id, at_most, limit],
        ).fetchall()

    def vector_first(self, model_id: str, project_id: str) -> int:
        """The lowest rowid of a project's vectors of a model (0 when none): one index seek."""
        row = self.conn.execute(
            f"select min(rowid) from record_vectors {_PROJECT}", [project_id, model_id]
        ).fetchone()
        return row[0] or 0

    def vector_row_stamp(self, rowid: int) -> "tuple | None":
        """(record_id, updated_at) of the vector row with this rowid, None when there is none."""
        return self.conn.execute(
            "select record_id, updated_at from record_vectors where rowid = ?", [rowid]
        ).fetchone()

    def count_vectors_capped(self, model_id: str, project_id: str, cap: int) -> int:
        """How many vectors of a model a project holds, counted up to `cap` (reads at most `cap` index entries)."""
        return self.conn.execute(
            f"select count(*) from (select 1 from record_vectors {_PROJECT} limit ?)",
            [project_id, model_id, cap],
        ).fetchone()[0]

    def count_vectors_capped_after(self, model_id: str, project_id: str, after: int, cap: int) -> int:
        """How many of a project's vectors of a model lie above rowid `after`, counted up to `cap`."""
        return self.conn.execute(
            f"select count(*) from (select 1 from record_vectors {_PROJECT} and rowid > ? limit ?)",
            [project_id, model_id, after, cap],
        ).fetchone()[0]

    def vector_records_after(self, model_id: str, project_id: str, after: int, limit: int) -> "list[tuple]":
        """(rowid, record_id, vector bytes, dimensions) of a project's vectors above rowid `after`, in order."""
        return self.conn.execute(
            f"select rowid, record_id, vector, dimensions from record_vectors {_PROJECT} "
            "and rowid > ? order by rowid limit ?",
            [project_id, model_id, after, limit],
        ).fetchall()

    def vector_max_rowid(self) -> int:
        """The highest rowid of record_vectors (any model, any project; 0 when empty)."""
        try:
            return self.conn.execute("select max(rowid) from record_vectors").fetchone()[0] or 0
        except sqlite3.OperationalError:
            return 0

    def projects_with_vectors_after(self, model_id: str, after: int) -> "list[str]":
        """Projects with a vector of `model_id` above rowid `after` (reads the rows above it only)."""
        return [
            r[0]
            for r in self.conn.execute(
                "select distinct project_id from record_vectors where rowid > ? and model_id = ?",
                [after, model_id],
            )
        ]

    def vectors_by_rowid(self, rowids: "list[int]") -> "list[tuple]":
        """(rowid, record_id, project_id, model_id, vector bytes, dimensions) of these vector rows."""
        rows = []
        for i in range(0, len(rowids), 500):
            part = [int(r) for r in rowids[i : i + 500]]
            rows += self.conn.execute(
                "select rowid, record_id, project_id, model_id, vector, dimensions from record_vectors "
                f"where rowid in ({','.join('?' * len(part))})",
                part,
            ).fetchall()
        return rows

    def vectors_of_records(self, model_id: str, record_ids: "list[str]") -> "list[tuple]":
        """(record_id, project_id, vector bytes, dimensions) of these records' vectors of `model_id`."""
        rows = []
        for i in range(0, len(record_ids), 500):
            part = list(record_ids[i : i + 500])
            rows += self.conn.execute(
                "select record_id, project_id, vector, dimensions from record_vectors where record_id "
                f"in ({','.join('?' * len(part))}) and model_id = ?",
                [*part, model_id],
            ).fetchall()
        return rows

    def session_neighbours(self, project_id: str, record_ids: "list[str]") -> "dict[str, tuple]":
        """For each record: (its row, the row just before it, the row just after it), each row
        (rowid, record_id, session_id, title, source_event_ids, created_at) or None.

        "Just before" is the previous record of the project in rowid order when it is of the same
        session (what kirolearn.recall.semantic's session order pairs): the session's previous record,
        found through idx_records_project_session, with no other record of the project between.
        Three statements for 500 records, and one for each pair with other rows between them.
        """
        out = {}
        ids = list(dict.fromkeys(record_ids))
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            # `+r.project_id`: seek each id, never walk the project's index
            found = self.conn.execute(
                f"select {_RECORD}, {_SIDE.format('<', 'desc')}, {_SIDE.format('>', 'asc')} from memory_records r "
                f"where r.record_id in ({','.join('?' * len(part))}) and +r.project_id = ?",
                [*part, project_id],
            ).fetchall()
            sides = sorted({rowid for row in found for rowid in row[6:8] if rowid is not None})
            by_rowid: dict[int, tuple] = {}
            for j in range(0, len(sides), 500):
                chunk = sides[j : j + 500]
                by_rowid.update(
                    (r[0], r)
                    for r in self.conn.execute(
                        f"select {_RECORD} from memory_records where rowid in ({','.join('?' * len(chunk))})",
                        chunk,
                    )
                )
            for row in found:
                before, after = by_rowid.get(row[6]), by_rowid.get(row[7])
                if before is not None and self._between(project_id, before[0], row[0]):
                    before = None
                if after is not None and self._between(project_id, row[0], after[0]):
                    after = None
                out[row[1]] = (row[:6], before, after)
        return out

    def _between(self, project_id: str, low: int, high: int) -> bool:
        """Whether a record of the project lies strictly between two rowids (a rowid range: the rows
        written meanwhile, few for neighbouring turns)."""
        if high - low <= 1:
            return False
        return (
            self.conn.execute(
                "select exists (select 1 from memory_records where rowid > ? and rowid < ? and project_id = ?)",
                [low, high, project_id],
            ).fetchone()[0]
            == 1
        )

    def vector_counts(self) -> "dict[str, int]":
        """Stored vectors per model id ({} before the migration ran)."""
        try:
            return {
                r[0]: r[1]
                for r in self.conn.execute("select model_id, count(*) from record_vectors group by model_id")
            }
        except sqlite3.OperationalError:
            return {}

    def load_vectors(self, model_id: str, project_id: "str | None" = None) -> "list[tuple]":
        """(rowid, record_id, session_id, vector bytes, dimensions) of a project's records, in rowid order
        (a vector blob may hold several rows of `dimensions` floats: kirolearn.recall.semantic.record_parts)."""
        sql = (
            "select r.rowid, r.record_id, r.session_id, v.vector, v.dimensions from record_vectors v "
            "join memory_records r on r.record_id = v.record_id where v.model_id = ?"
        )
        args = [model_id]
        if project_id:
            sql += " and v.project_id = ?"
            args.append(project_id)
        return self.conn.execute(sql + " order by r.rowid", args).fetchall()

    def session_order(self, project_id: "str | None" = None) -> "list[tuple]":
        """(rowid, record_id, session_id, title, source_event_ids, created_at) of a project's records in
        rowid (creation) order."""
        sql, args = (
            "select rowid, record_id, session_id, title, source_event_ids, created_at from memory_records",
            [],
        )
        if project_id:
            sql += " where project_id = ?"
            args.append(project_id)
        return self.conn.execute(sql + " order by rowid", args).fetchall()

    def records_by_id(self, record_ids: "list[str]") -> list:
        """memory_records rows for these ids (any order)."""
        rows = []
        for i in range(0, len(record_ids), 500):
            part = record_ids[i : i + 500]
            rows += self.conn.execute(
                f"select * from memory_records where record_id in ({','.join('?' * len(part))})", part
            ).fetchall()
        return rows

    def vector_stamp(self, model_id: str, project_id: "str | None") -> tuple:
        """Changes whenever a project's vectors of a model change (a search-side cache key)."""
        sql, args = "select count(*), max(rowid) from record_vectors where model_id = ?", [model_id]
        if project_id:
            sql += " and project_id = ?"
            args.append(project_id)
        try:
            return tuple(self.conn.execute(sql, args).fetchone())
        except sqlite3.OperationalError:
            return (0, None)
