"""`kirolearn migrate` and doctor's checks of a team store: which store is configured, and its schema.

The configured store is a PostgreSQL team store when `[store] url` (or KIROLEARN_STORE_URL) names
one, else this home's SQLite file. Applying the schema is explicit for a team store: one person's
upgrade changes everybody's server, so it happens when someone runs `kirolearn migrate` as a role
allowed to create tables, never as a side effect of a drain. Nothing here prints a password: every
URL shown goes through kirolearn.store.url.redact_url.
"""

from __future__ import annotations

# PostgreSQL 15: what the team store is built and tested on
MIN_SERVER_VERSION = 150000


def store_url(settings=None) -> str:
    """The team store's URL (`[store] url`, or KIROLEARN_STORE_URL), or '' when memory stays in the local file."""
    if settings is None:
        from kirolearn.settings import load

        settings = load()
    return (settings.store.url or "").strip()


def migrate(settings=None, grant=()) -> dict:
    """Apply the configured store's pending migrations, then grant a team store's tables to `grant` roles.

    Returns {"backend", "store" (a path, or the URL without any password), "applied" (names applied
    now), "schema": {"applied", "pending"}, "granted" (roles)}. Failures are StoreError
    (SchemaTooNew for a store written by a newer kirolearn) with a fix-it hint.
    """
    url = store_url(settings)
    if url:
        from kirolearn.store.backends import open_store
        from kirolearn.store.url import redact_url as shown_url

        with open_store(url, check=False) as store:
            applied = store.migrate()
            # only the team store grants, and a URL opens one
            granted = store.grant(grant) if grant else []  # type: ignore[attr-defined]
            schema = store.schema()
        return {
            "backend": "postgresql",
            "store": shown_url(url),
            "applied": applied,
            "schema": {"applied": schema["applied"], "pending": schema["pending"]},
            "granted": granted,
        }
    if grant:
        from kirolearn.core.errors import ConfigError

        raise ConfigError(
            "--grant gives roles of a PostgreSQL team store its tables; no team store is configured",
            "set [store] url (or KIROLEARN_STORE_URL), or leave --grant out",
            exit_code=2,
        )
    from kirolearn.core import paths
    from kirolearn.store.backends import migrate_local

    done = migrate_local(paths.db_path())
    return {
        "backend": "sqlite",
        "store": paths.db_path(),
        "applied": done["applied"],
        "schema": done["schema"],
        "granted": [],
    }


def describe(result: dict) -> str:
    """What `kirolearn migrate` prints."""
    where = "team store" if result["backend"] == "postgresql" else "database"
    total = len(result["schema"]["applied"])
    if result["applied"]:
        text = (
            f"applied {len(result['applied'])} migration(s) to the {where} {result['store']}: "
            f"{', '.join(result['applied'])}"
        )
    else:
        text = f"the {where} {result['store']} is up to date ({total} migration(s) applied)"
    if result.get("granted"):
        text += f"\ngranted its tables to {', '.join(result['granted'])} (read and write; no schema changes)"
    return text


def store_checks(settings):
    """Doctor's (level, message) pairs about a configured team store; nothing without one.

    Reachable (one connection), schema current (no pending, nothing unknown), permission to write
    (an insert rolled back), and whether pgvector is on the server.
    """
    url = store_url(settings)
    if not url:
        return
    from kirolearn.core.errors import KirolearnError
    from kirolearn.store.backends import open_store
    from kirolearn.store.url import redact_url as shown_url

    shown = shown_url(url)
    try:
        store = open_store(url, check=False)
    except KirolearnError as exc:
        yield "FAIL", str(exc)
        return
    with store:
        try:
            yield from _checks(store, shown)
        except KirolearnError as exc:
            # the server went away half-way, or refused a read
            yield "FAIL", str(exc)


def _checks(store, shown: str):
    """The checks on an open team store."""
    caps = store.capabilities()
    yield "OK", f"team store {shown} reachable (PostgreSQL {caps['server_version']})"
    if caps["server_version_num"] < MIN_SERVER_VERSION:
        yield "FAIL", f"the team store runs PostgreSQL {caps['server_version']}: kirolearn needs 15 or newer"
    if caps["read_only"]:
        yield "FAIL", "the team store URL names a read-only replica: drains upload to the primary server"
    schema = store.schema()
    if schema["unknown"]:
        yield (
            "FAIL",
            (
                f"the team store's schema is newer than this kirolearn (unknown migrations: "
                f"{', '.join(schema['unknown'])}): upgrade kirolearn"
            ),
        )
    elif schema["pending"]:
        who = (
            "you may run it"
            if caps["can_create"]
            else f"as a role that may create tables in schema {caps['schema'] or '(none on the search_path)'}"
        )
        yield (
            "FAIL",
            (
                f"the team store's schema is behind ({len(schema['pending'])} pending: "
                f"{', '.join(schema['pending'])}): run `kirolearn migrate` ({who})"
            ),
        )
    else:
        yield "OK", f"team store schema is current ({len(schema['applied'])} migration(s))"
    if not schema["pending"] and not schema["unknown"]:
        ok, why = store.can_write()
        if ok:
            yield "OK", "your role may write to the team store (an insert, rolled back)"
        else:
            yield (
                "FAIL",
                (
                    f"your role may not write to the team store ({why}): ask the server's owner to "
                    "GRANT SELECT, INSERT, UPDATE, DELETE on kirolearn's tables"
                ),
            )
    if caps["pgvector"] == "installed":
        yield "OK", "pgvector is installed on the server; this kirolearn stores no vectors there yet"
    else:
        yield (
            "OK",
            (
                f"pgvector is {'not installed' if caps['pgvector'] == 'available' else 'absent'} on the "
                "server: the team store keeps no vectors, search ranks by words (as SQLite without "
                "an embedding model)"
            ),
        )
