"""What `kirolearn doctor` learns about a team store's PostgreSQL server, before any schema exists.

One short connection (libpq finds the credentials: ~/.pgpass, a service file, PGPASSWORD): is the
server reachable and who are we there, which version, may we create the schema (what
`kirolearn migrate` needs), is pgvector available or installed. A failure becomes a `StoreError`
whose fix names the likely cause (no psycopg, server down, authentication, database missing) and
never repeats a secret: the URL holds none (kirolearn.team.check_store_url), and libpq's own
messages name only host, port, user and database.
"""

from __future__ import annotations

from kirolearn.errors import StoreError

CONNECT_TIMEOUT_SECONDS = 5  # libpq's connect_timeout: whole seconds, at least 2
APPLICATION_NAME = "kirolearn"

_FIXES = (
    (("password authentication failed", "no password supplied", "authentication failed",
      "peer authentication failed", "certificate"),
     "check your credentials: a line for this server in ~/.pgpass (mode 0600, or the file PGPASSFILE names), "
     "a service file entry, or a client certificate (docs/team.md)"),
    (("does not exist",),
     "check the database and user names in [store] url; the server's owner creates them (docs/team.md)"),
    (("permission denied",),
     "ask the server's owner to grant your role CONNECT on the database (docs/team.md)"),
    (("connection refused", "no such file or directory", "could not translate host name", "timeout expired",
      "could not connect", "network is unreachable", "no route to host", "name or service not known"),
     "the server is not reachable: check host and port in [store] url, the network, and that PostgreSQL runs; "
     "the spool and the local store keep working meanwhile"),
)


def _fix_for(message: str) -> str:
    low = message.lower()
    for needles, fix in _FIXES:
        if any(n in low for n in needles):
            return fix
    return "see the server's message above and docs/team.md"


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else "no message"


def connect(url: str, *, timeout: int = CONNECT_TIMEOUT_SECONDS, **kwargs):
    """A psycopg connection to the team store, or StoreError with a fix-it hint."""
    try:
        import psycopg
    except ImportError:
        raise StoreError("a team store is configured ([store] url) but psycopg is not installed",
                         "pip install 'kirolearn[team]'") from None
    try:
        return psycopg.connect(url, connect_timeout=max(2, int(timeout)), application_name=APPLICATION_NAME,
                               **kwargs)
    except psycopg.Error as exc:
        message = _first_line(exc)
        raise StoreError(f"cannot connect to the team store: {message}", _fix_for(str(exc))) from None


def probe(url: str, *, timeout: int = CONNECT_TIMEOUT_SECONDS) -> dict:
    """Facts about the server at `url` (connects once, changes nothing); StoreError when unreachable."""
    with connect(url, timeout=timeout, autocommit=True) as conn:
        row = conn.execute(
            "select current_setting('server_version_num')::int, current_setting('server_version'), "
            "current_user, current_database(), current_schema(), "
            "has_database_privilege(current_database(), 'CREATE'), "
            "coalesce(has_schema_privilege(current_schema(), 'CREATE'), false), "
            "pg_is_in_recovery()").fetchone()
        vector = conn.execute(
            "select default_version, installed_version from pg_available_extensions where name = 'vector'").fetchone()
    return {
        "server_version_num": row[0],
        "server_version": row[1],
        "user": row[2],
        "database": row[3],
        "schema": row[4],
        "can_create_schema": bool(row[5]),
        "can_create_tables": bool(row[6]),
        "read_only_replica": bool(row[7]),
        "pgvector_available": vector is not None,
        "pgvector_installed": bool(vector and vector[1]),
    }
