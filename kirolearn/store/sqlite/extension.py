"""What only the embedded store keeps beside the Store contract, over its sqlite-utils Database.

The drainer no longer calls this class: the contract's optional capabilities
(kirolearn.store.base.Store.derived, refresh_term_docs, remember_counts, database_file) are
how it reaches what only some backends keep, and SqliteStore answers them through this class
and kirolearn.store.sqlite.derived. It stays for callers that hold a SqliteStore:
- the hook's word counts (`term_docs`, a copy of fts5vocab's document counts, see
  kirolearn.store.sqlite.db.refresh_term_docs), which the standard-library hook reads;
- the marker outside the file (kirolearn.store.state's store.json), which tells a lost or emptied
  file from a new one; a server has no such file to lose;
- the file's own name, for messages.
"""

from kirolearn.core import isotime
from kirolearn.store import state
from kirolearn.store.sqlite import db as sqlite
from kirolearn.store.sqlite import reader


class SqliteExtension:
    """What only the embedded store does, over its sqlite-utils Database (`SqliteStore.extension()`)."""

    def __init__(self, db):
        #: the sqlite-utils Database recall's vector and expansion passes take
        self.db = db

    def database_file(self) -> str:
        """The file behind the store ('' for an in-memory one)."""
        return reader.database_file(self.db)

    def refresh_term_docs(self, force: bool = False) -> bool:
        """Copy fts5vocab's document counts into term_docs (the hook's word counts) once the record count
        moved by more than kirolearn.store.sqlite.db.TERM_DOCS_DRIFT, or when `force`d; then merge the FTS
        index's segments. True if they were copied."""
        return sqlite.refresh_term_docs(self.db, force=force)

    def remember_counts(self, counted: dict, path: "str | None" = None) -> bool:
        """Keep the marker outside the database (kirolearn.store.state) at these counts (Store.counts):
        rewritten, with the time, only when a count changed or it was never counted. `path` is the file
        the marker names (default: this store's). True if it was rewritten."""
        marker = state.read(state.STORE)
        if "counted_at" in marker and all(marker.get(k) == v for k, v in counted.items()):
            return False
        sqlite.mark_created(path or self.database_file(), counted_at=isotime.now_iso(), **counted)
        return True

    def freshness_due(self, limit: int) -> "list[dict]":
        """Up to `limit` records with a file_state, the longest unchecked first (an index
        range, kirolearn.store.sqlite.records.freshness_due): the drain's bounded freshness pass."""
        from kirolearn.store.sqlite import records

        return records.freshness_due(self.db, limit)

    def note_checked(self, record_ids, at: str) -> None:
        """Put these records at the back of the freshness queue (checked at `at`)."""
        from kirolearn.store.sqlite import records

        records.note_checked(self.db, record_ids, at)
