"""`open_store(url)`: the backend a store URL names, above both backends (store.base is their contract)."""

from __future__ import annotations

from kirolearn.store.base import Store


def open_store(url: "str | None" = None) -> Store:
    """The store a URL names: None or a path is this home's SQLite file; postgresql://… a team store."""
    if url and url.startswith(("postgresql://", "postgres://")):
        from kirolearn.store.postgres.store import PostgresStore

        return PostgresStore(url)
    from kirolearn.store.sqlite.store import SqliteStore

    return SqliteStore(url)
