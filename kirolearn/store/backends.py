"""How the features above the store get one: `open_store(url)` and this home's file.

Everything above `kirolearn/store/` is handed a `Store` (kirolearn.store.base) opened here, once
per command (the CLI) or per call (kirolearn.Memory), and talks only to it. The one exception is
the hook's read path (the session-start and prompt blocks), which reads SQLite through the
standard library (kirolearn.store.sqlite.reader) because it cannot afford sqlite-utils.
"""

from __future__ import annotations

import os

from kirolearn.core import paths

# repair's report names it
from kirolearn.store.base import NO_CONTENT_METHOD, Store  # noqa: F401


def open_store(url: str | None = None, *, check: bool = True) -> Store:
    """The store a URL names: None or a path is this home's SQLite file; postgresql://… a team store
    (`check`: refuse one whose schema is behind; `kirolearn migrate` opens it without)."""
    if url and url.startswith(("postgresql://", "postgres://")):
        from kirolearn.store.postgres.store import PostgresStore

        return PostgresStore(url, check=check)
    from kirolearn.store.sqlite.store import SqliteStore

    return SqliteStore(url)


def open_existing(path: str | None = None) -> Store | None:
    """This home's store if it exists (migrated), else None: reading commands create nothing on a
    fresh machine. A store that existed and is gone (or emptied) is StoreLost, never "nothing yet"."""
    path = path or paths.db_path()
    refuse_lost(path)
    return open_store(path) if os.path.exists(path) else None


def open_empty() -> Store:
    """An empty, migrated store in memory: what a fresh home reads as, without creating a file."""
    from kirolearn.store.sqlite.store import SqliteStore

    return SqliteStore.in_memory()


def open_reading(budget: float, path: str | None = None) -> Store | None:
    """This home's store opened read-only, each query giving up after `budget` seconds (search, MCP,
    the recall server); None when there is no database yet."""
    from kirolearn.store.sqlite.store import SqliteStore

    return SqliteStore.reading(path or paths.db_path(), budget)


def lost_reason(path: str | None = None) -> str:
    """Why this home's database counts as lost ('' when it is present or was never created)."""
    from kirolearn.store.sqlite.db import lost_reason as reason

    return reason(path or paths.db_path())


def refuse_lost(path: str | None = None) -> None:
    """Raise StoreLost instead of silently starting an empty database where one was lost."""
    from kirolearn.store.sqlite.db import refuse_lost as refuse

    refuse(path or paths.db_path())


def migrate_local(path: str | None = None) -> dict:
    """Apply this home's pending migrations (`kirolearn migrate`): {"applied": names, "schema": …}."""
    from kirolearn.store.sqlite.store import migrate_file

    return migrate_file(path)


def rebuild_local(path: str, damaged: str | None, stamp: str) -> dict:
    """`kirolearn repair`'s file surgery: a fresh database at `path` holding what the copy `damaged`
    still holds (kirolearn.store.sqlite.salvage.rebuild); returns what it recovered and how."""
    from kirolearn.store.sqlite.salvage import rebuild

    return rebuild(path, damaged, stamp)


def local_health(path: str | None = None) -> dict:
    """{"state": "none" | "ok" | "lost" | "damaged" | "unreadable", "detail": text, ...} of this home's
    database file, read-only: SQLite's quick_check and its counts; nothing is created or migrated."""
    from kirolearn.store.sqlite.db import check_file

    return check_file(path or paths.db_path())
