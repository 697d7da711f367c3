"""A Store over what a benchmark holds: kirolearn's features take a Store (its one door to storage)."""

import sqlite3


def as_store(db_or_conn):
    """A SqliteStore over a sqlite-utils Database or a read connection (reader.connect_readonly)."""
    import sqlite_utils

    from kirolearn.store.sqlite.store import SqliteStore

    if isinstance(db_or_conn, sqlite3.Connection):
        db_or_conn = sqlite_utils.Database(db_or_conn, execute_plugins=False)
    return SqliteStore(db=db_or_conn)
