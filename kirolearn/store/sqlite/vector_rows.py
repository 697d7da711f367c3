"""The vector rows an approximate-nearest-neighbour index reads (kirolearn.recall.ann), by rowid.

A record_vectors row's rowid grows with every write (an edit's new vector takes a new rowid), so an
index keyed by it follows the table through a watermark: what it covers is every row of its
(model, project) at or below it. Every query here reads an index range or a rowid range of the
new rows, never every vector of a project (architecture.md rule 15).
"""

import sqlite3

_PROJECT = "indexed by idx_record_vectors_project where project_id = ? and model_id = ?"


def vector_top(conn, model_id: str, project_id: str) -> int:
    """The highest rowid of a project's vectors of a model (0 when none): one index seek."""
    try:
        row = conn.execute(f"select max(rowid) from record_vectors {_PROJECT}", [project_id, model_id]).fetchone()
    except sqlite3.OperationalError:
        return 0
    return row[0] or 0


def vector_rows_after(conn, model_id: str, project_id: str, after: int, limit: int) -> "list[tuple]":
    """(rowid, vector bytes, dimensions, updated_at) of a project's vectors above rowid `after`, in order."""
    return conn.execute(f"select rowid, vector, dimensions, updated_at from record_vectors {_PROJECT} "
                        "and rowid > ? order by rowid limit ?", [project_id, model_id, after, limit]).fetchall()


def vector_rows_down(conn, model_id: str, project_id: str, at_most: int, limit: int) -> "list[tuple]":
    """(rowid, vector bytes, dimensions, updated_at, record_id) of a project's vectors at or below rowid
    `at_most`, highest first (an index looks for rowids reused after its newest rows were deleted)."""
    return conn.execute(f"select rowid, vector, dimensions, updated_at, record_id from record_vectors {_PROJECT} "
                        "and rowid <= ? order by rowid desc limit ?", [project_id, model_id, at_most, limit]).fetchall()


def vector_first(conn, model_id: str, project_id: str) -> int:
    """The lowest rowid of a project's vectors of a model (0 when none): one index seek."""
    row = conn.execute(f"select min(rowid) from record_vectors {_PROJECT}", [project_id, model_id]).fetchone()
    return row[0] or 0


def vector_row_stamp(conn, rowid: int) -> "tuple | None":
    """(record_id, updated_at) of the vector row with this rowid, None when there is none."""
    return conn.execute("select record_id, updated_at from record_vectors where rowid = ?", [rowid]).fetchone()


def count_vectors_capped(conn, model_id: str, project_id: str, cap: int) -> int:
    """How many vectors of a model a project holds, counted up to `cap` (reads at most `cap` index entries)."""
    return conn.execute(f"select count(*) from (select 1 from record_vectors {_PROJECT} limit ?)",
                        [project_id, model_id, cap]).fetchone()[0]


def count_vectors_capped_after(conn, model_id: str, project_id: str, after: int, cap: int) -> int:
    """How many of a project's vectors of a model lie above rowid `after`, counted up to `cap`."""
    return conn.execute(f"select count(*) from (select 1 from record_vectors {_PROJECT} and rowid > ? limit ?)",
                        [project_id, model_id, after, cap]).fetchone()[0]


def vector_records_after(conn, model_id: str, project_id: str, after: int, limit: int) -> "list[tuple]":
    """(rowid, record_id, vector bytes, dimensions) of a project's vectors above rowid `after`, in order."""
    return conn.execute(f"select rowid, record_id, vector, dimensions from record_vectors {_PROJECT} "
                        "and rowid > ? order by rowid limit ?", [project_id, model_id, after, limit]).fetchall()


def vector_max_rowid(conn) -> int:
    """The highest rowid of record_vectors (any model, any project; 0 when empty)."""
    try:
        return conn.execute("select max(rowid) from record_vectors").fetchone()[0] or 0
    except sqlite3.OperationalError:
        return 0


def projects_with_vectors_after(conn, model_id: str, after: int) -> "list[str]":
    """Projects with a vector of `model_id` above rowid `after` (reads the rows above it only)."""
    return [r[0] for r in conn.execute("select distinct project_id from record_vectors where rowid > ? "
                                       "and model_id = ?", [after, model_id])]


def vectors_by_rowid(conn, rowids: "list[int]") -> "list[tuple]":
    """(rowid, record_id, project_id, model_id, vector bytes, dimensions) of these vector rows."""
    rows = []
    for i in range(0, len(rowids), 500):
        part = [int(r) for r in rowids[i : i + 500]]
        rows += conn.execute("select rowid, record_id, project_id, model_id, vector, dimensions from record_vectors "
                             f"where rowid in ({','.join('?' * len(part))})", part).fetchall()
    return rows


def vectors_of_records(conn, model_id: str, record_ids: "list[str]") -> "list[tuple]":
    """(record_id, project_id, vector bytes, dimensions) of these records' vectors of `model_id`."""
    rows = []
    for i in range(0, len(record_ids), 500):
        part = list(record_ids[i : i + 500])
        rows += conn.execute("select record_id, project_id, vector, dimensions from record_vectors where record_id "
                             f"in ({','.join('?' * len(part))}) and model_id = ?", [*part, model_id]).fetchall()
    return rows


_RECORD = "rowid, record_id, session_id, title, source_event_ids, created_at"


def session_neighbours(conn, project_id: str, record_ids: "list[str]") -> "dict[str, tuple]":
    """For each record: (its row, the row just before it, the row just after it), each row
    (rowid, record_id, session_id, title, source_event_ids, created_at) or None.

    "Just before" is the previous record of the project in rowid order when it is of the same
    session (what kirolearn.recall.semantic's session order pairs): the session's previous record,
    found through idx_records_project_session, with no other record of the project between.
    """
    out = {}
    for record_id in dict.fromkeys(record_ids):
        row = conn.execute(f"select {_RECORD} from memory_records where record_id = ? and project_id = ?",
                           [record_id, project_id]).fetchone()
        if row is None:
            continue
        rowid, session = row[0], row[2]
        before = conn.execute(f"select {_RECORD} from memory_records indexed by idx_records_project_session "
                              "where project_id = ? and session_id is ? and rowid < ? order by rowid desc limit 1",
                              [project_id, session, rowid]).fetchone()
        after = conn.execute(f"select {_RECORD} from memory_records indexed by idx_records_project_session "
                             "where project_id = ? and session_id is ? and rowid > ? order by rowid limit 1",
                             [project_id, session, rowid]).fetchone()
        if before is not None and _between(conn, project_id, before[0], rowid):
            before = None
        if after is not None and _between(conn, project_id, rowid, after[0]):
            after = None
        out[record_id] = (row, before, after)
    return out


def _between(conn, project_id: str, low: int, high: int) -> bool:
    """Whether a record of the project lies strictly between two rowids (a rowid range: the rows
    written meanwhile, few for neighbouring turns)."""
    if high - low <= 1:
        return False
    return conn.execute("select exists (select 1 from memory_records where rowid > ? and rowid < ? "
                        "and project_id = ?)", [low, high, project_id]).fetchone()[0] == 1
