"""The throw-away PostgreSQL server of tests/pgserver.py: private, isolated per test, never silent."""

import os
import textwrap

import pytest
from pgserver import REQUIRE_ENV, pg_database, pg_server, pg_url  # noqa: F401  (fixtures)

pytest_plugins = ["pytester"]


def _connect(url):
    import psycopg

    return psycopg.connect(url, autocommit=True)


def test_server_listens_only_on_its_private_socket(pg_server):
    with pg_server.connect() as conn:
        settings = dict(
            conn.execute(
                "select name, setting from pg_settings where name in "
                "('listen_addresses', 'unix_socket_directories', 'fsync', 'synchronous_commit')"
            ).fetchall()
        )
    assert settings == {
        "listen_addresses": "",
        "unix_socket_directories": pg_server.socket_dir,
        "fsync": "off",
        "synchronous_commit": "off",
    }
    assert os.stat(pg_server.socket_dir).st_mode & 0o077 == 0  # nobody else can reach the socket


def test_each_test_gets_an_empty_schema_of_its_own(pg_url):
    with _connect(pg_url) as conn:
        schema = conn.execute("select current_schema()").fetchone()[0]
        assert conn.execute("select count(*) from pg_tables where schemaname = %s", [schema]).fetchone() == (
            0,
        )
        conn.execute("create table marker (x int)")  # lands in this test's schema only
        assert conn.execute("select count(*) from marker").fetchone() == (0,)


def test_a_second_test_does_not_see_the_first_ones_tables(pg_url):
    with _connect(pg_url) as conn:
        schema = conn.execute("select current_schema()").fetchone()[0]
        assert conn.execute("select count(*) from pg_tables where schemaname = %s", [schema]).fetchone() == (
            0,
        )


def test_module_database_is_dropped_afterwards(pg_server):
    name = pg_server.create_database("dropme")
    pg_server.drop_database(name)
    with pg_server.connect() as conn:
        assert conn.execute("select 1 from pg_database where datname = %s", [name]).fetchone() is None


USES_SERVER = textwrap.dedent("""
    from pgserver import pg_server  # noqa: F401

    def test_needs_postgres(pg_server):
        pass
""")


@pytest.fixture
def no_postgres(pytester, monkeypatch):
    """A pytest run in which no PostgreSQL binaries can be found."""
    monkeypatch.setenv("KIROLEARN_PG_BINDIR", str(pytester.path / "no-such-bindir"))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # a bare run: no third-party plugins to load
    monkeypatch.syspath_prepend(os.path.dirname(__file__))
    pytester.makepyfile(test_uses=USES_SERVER)
    return pytester


def test_without_postgres_the_fixtures_skip_and_say_why(no_postgres, monkeypatch):
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    result = no_postgres.runpytest("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*PostgreSQL server binaries not found*apt-get install postgresql*"])


def test_ci_never_skips_silently(no_postgres, monkeypatch):
    monkeypatch.setenv(REQUIRE_ENV, "1")
    result = no_postgres.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{REQUIRE_ENV}=1 but PostgreSQL server binaries not found*"])
