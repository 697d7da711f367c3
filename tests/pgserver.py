"""A throw-away PostgreSQL server for tests, CI and benchmarks.

One cluster per pytest session: `initdb` into a private temp folder, the server listening only on a
Unix socket inside that folder (`listen_addresses=''`, so nothing on the network), durability off
(fsync, synchronous_commit, full_page_writes: a crash loses a test cluster, nothing else), small
memory. It starts only when a test asks for it, and is stopped and deleted at the end.

Fixtures (use them with `from pgserver import pg_server, pg_database, pg_url  # noqa: F401` in a
test module, or list this module in `pytest_plugins`):
  pg_server    session: the running `PgCluster`
  pg_database  module:  a fresh database; its libpq URL (dropped after the module)
  pg_url       function: a fresh schema in the module's database; a URL whose `options` set
               `search_path` to it, so each test starts empty without paying for a database

Without PostgreSQL (no `initdb`) or without psycopg, these fixtures skip with the reason, except
when KIROLEARN_REQUIRE_POSTGRES=1 (set by .ci/run): then they fail, so CI never skips silently.

Run as root (CI here is root), the server runs as an unprivileged user (`postgres` if it exists,
else `nobody`): initdb and postgres refuse to run as root. `PgCluster` works outside pytest too
(bench/ uses it): `with PgCluster() as pg: pg.url("postgres")`.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

REQUIRE_ENV = "KIROLEARN_REQUIRE_POSTGRES"
START_TIMEOUT_SECONDS = 60.0
SUPERUSER = "postgres"
PORT = 5432  # only names the socket file; nothing listens on TCP


class PostgresUnavailable(RuntimeError):
    """No usable PostgreSQL server binaries on this machine (the message says what is missing)."""


def find_bindir() -> str:
    """The folder holding initdb, postgres and pg_isready of one installation.

    $KIROLEARN_PG_BINDIR, else the folder `initdb` on PATH really lives in (Debian puts only
    wrappers or symlinks on PATH), else the newest /usr/lib/postgresql/*/bin.
    """
    if os.environ.get("KIROLEARN_PG_BINDIR"):  # when set, the only place looked at
        candidates = [os.environ["KIROLEARN_PG_BINDIR"]]
    else:
        on_path = shutil.which("initdb")
        candidates = [os.path.dirname(os.path.realpath(on_path))] if on_path else []
        candidates += sorted(
            glob.glob("/usr/lib/postgresql/*/bin"),
            key=lambda p: [int(x) for x in re.findall(r"\d+", p)],
            reverse=True,
        )
    for bindir in candidates:
        if all(
            os.access(os.path.join(bindir, tool), os.X_OK) for tool in ("initdb", "postgres", "pg_isready")
        ):
            return bindir
    raise PostgresUnavailable(
        "PostgreSQL server binaries not found (initdb, postgres, pg_isready): install Debian's "
        "'postgresql' package (apt-get install postgresql) or set KIROLEARN_PG_BINDIR"
    )


def _run_as() -> pwd.struct_passwd | None:
    """The unprivileged account the server runs as when we are root; None when we are not root."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PostgresUnavailable(
        "running as root, and neither a 'postgres' nor a 'nobody' account exists "
        "for the test server to run as (initdb refuses root)"
    )


class PgCluster:
    """A private PostgreSQL cluster in a temp folder, reachable only through its Unix socket."""

    def __init__(self, bindir: str | None = None, max_connections: int = 40, settings: dict | None = None):
        """`settings`: server settings over the defaults below (a benchmark's shared_buffers)."""
        self.bindir = bindir or find_bindir()
        self.max_connections = max_connections
        self.extra_settings = dict(settings or {})
        self.user = _run_as()
        self.base = ""
        self.proc: subprocess.Popen | None = None
        self._names = itertools.count(1)

    # -- paths -----------------------------------------------------------------------------
    @property
    def data_dir(self) -> str:
        return os.path.join(self.base, "data")

    @property
    def socket_dir(self) -> str:
        return self.base

    @property
    def log_path(self) -> str:
        return os.path.join(self.base, "server.log")

    def _tool(self, name: str) -> str:
        return os.path.join(self.bindir, name)

    def _sub(self, args, **kw):
        """Run a server binary as the unprivileged account when we are root."""
        if self.user is not None:
            kw.update(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
        return subprocess.Popen(args, env=env, cwd=self.base, **kw)

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> PgCluster:
        """initdb, start the server and wait until it accepts connections."""
        # /tmp rather than pytest's tmp_path: the server's account must be able to reach the folder,
        # and a Unix socket path must stay under ~100 bytes.
        self.base = tempfile.mkdtemp(prefix="kirolearn-pg-")
        if self.user is not None:
            os.chown(self.base, self.user.pw_uid, self.user.pw_gid)
        try:
            init = self._sub(
                [
                    self._tool("initdb"),
                    "--no-sync",
                    "--auth=trust",
                    f"--username={SUPERUSER}",
                    "--encoding=UTF8",
                    "--locale=C",
                    "-D",
                    self.data_dir,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            out, _ = init.communicate(timeout=120)
            if init.returncode != 0:
                raise PostgresUnavailable(
                    f"initdb failed ({init.returncode}): {out.decode(errors='replace')[-2000:]}"
                )
            settings = {
                "listen_addresses": "",
                "unix_socket_directories": self.socket_dir,
                "port": str(PORT),
                "fsync": "off",
                "synchronous_commit": "off",
                "full_page_writes": "off",
                "shared_buffers": "16MB",
                "max_connections": str(self.max_connections),
                "max_wal_size": "256MB",
                "dynamic_shared_memory_type": "posix",
                "logging_collector": "off",
                "log_min_messages": "warning",
                **self.extra_settings,
            }
            self._args = [self._tool("postgres"), "-D", self.data_dir]
            for key, value in settings.items():
                self._args += ["-c", f"{key}={value}"]
            self._launch()
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self) -> None:
        log = open(self.log_path, "ab")
        try:
            self.proc = self._sub(self._args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()
        self._wait_ready()

    def pause(self) -> None:
        """Stop the server (fast shutdown) and keep its data: a team server that is down."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)

    def resume(self) -> None:
        """Start the paused server again on the same data and socket."""
        self._launch()

    def _wait_ready(self) -> None:
        """Poll pg_isready until the server accepts connections; fail early if it exited."""
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            ready = subprocess.run(
                [
                    self._tool("pg_isready"),
                    "-q",
                    "-h",
                    self.socket_dir,
                    "-p",
                    str(PORT),
                    "-U",
                    SUPERUSER,
                    "-d",
                    "postgres",
                    "-t",
                    "5",
                ]
            )
            if ready.returncode == 0:
                return
            try:  # the interval doubles as the check that the server is still alive
                code = self.proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                code = None
            if code is not None:
                raise PostgresUnavailable(f"postgres exited with {code} while starting:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise PostgresUnavailable(
                    f"postgres not ready after {START_TIMEOUT_SECONDS:.0f} s:\n{self.log_tail()}"
                )

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-chars:]
        except OSError:
            return "(no server log)"

    def stop(self) -> None:
        """Fast shutdown (SIGINT), then delete everything. Idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
        if self.base:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = ""

    def __enter__(self) -> PgCluster:
        return self if self.proc is not None else self.start()  # `with PgCluster().start():` starts one

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- connections -----------------------------------------------------------------------
    def url(self, dbname: str = "postgres", **params: str) -> str:
        """A libpq URI for `dbname` over the socket (extra params, e.g. options=...)."""
        query = {"host": self.socket_dir, "port": str(PORT), "user": SUPERUSER, **params}
        return f"postgresql:///{urllib.parse.quote(dbname)}?{urllib.parse.urlencode(query, quote_via=urllib.parse.quote)}"

    def connect(self, dbname: str = "postgres", **kw):
        import psycopg

        return psycopg.connect(self.url(dbname), autocommit=True, **kw)

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its name."""
        name = f"{re.sub(r'[^a-z0-9_]', '_', prefix.lower())[:40]}_{os.getpid()}_{next(self._names)}"
        with self.connect() as conn:
            conn.execute(f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' STRATEGY FILE_COPY")
        return name

    def drop_database(self, name: str) -> None:
        with self.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ---------------------------------------------------------------------------------------------
# pytest fixtures
# ---------------------------------------------------------------------------------------------
try:
    import pytest
except ImportError:  # pragma: no cover - imported by a benchmark without pytest
    pytest = None


def _unavailable(reason: str):
    """Skip, or fail when CI demands a real server."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


if pytest is not None:

    @pytest.fixture(scope="session")
    def pg_server():
        """The session's PostgreSQL cluster (started on first use, deleted at the end)."""
        try:
            import psycopg  # noqa: F401
        except ImportError:
            _unavailable("psycopg is not installed (pip install -e '.[dev]')")
        try:
            cluster = PgCluster().start()
        except PostgresUnavailable as exc:
            _unavailable(str(exc))
        try:
            yield cluster
        finally:
            cluster.stop()

    @pytest.fixture(scope="module")
    def pg_database(pg_server, request):
        """A fresh database for one test module; yields its URL."""
        name = pg_server.create_database(request.module.__name__.rsplit(".", 1)[-1])
        try:
            yield pg_server.url(name)
        finally:
            pg_server.drop_database(name)

    _schemas = itertools.count(1)

    @pytest.fixture
    def pg_url(pg_server, pg_database):
        """A fresh schema in the module's database; the URL sets search_path to it."""
        import psycopg

        schema = f"s{next(_schemas)}"
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        options = f"-csearch_path={schema}"
        base, query = pg_database.split("?", 1)
        url = f"{base}?{query}&options={urllib.parse.quote(options)}"
        try:
            yield url
        finally:
            with psycopg.connect(pg_database, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":  # a manual check: start, print the URL, wait for Enter, stop
    with PgCluster() as pg:
        print(pg.url())
        if sys.stdin.isatty():
            input("server running; press Enter to stop ")
