"""Shared fixtures: every test gets its own KIROLEARN_HOME and HOME under tmp_path."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

# Tests never touch the network: litellm must not fetch its price map (or read a .env)
# whichever test imports it first.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
BIN = Path(sys.executable).parent

from kirolearn.capture import (  # noqa: E402  (after the environment above)
    events,  # stdlib only, like the hook
    spool,  # noqa: E402
)


def pytest_report_header(config):
    return f"sqlite: {sqlite3.sqlite_version}; python: {sys.executable}"


FIGURES: list = []  # filled from test reports, so lines from pytest-xdist workers arrive too


@pytest.fixture
def report_figure(request):
    """Record one line (a measured figure) for the end-of-run summary, not the progress line."""
    return lambda line: request.node.user_properties.append(("figure", line))


def pytest_runtest_logreport(report):
    if report.when == "call":
        FIGURES.extend(value for key, value in report.user_properties if key == "figure")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    figures = FIGURES
    if figures:
        terminalreporter.write_sep("-", "figures")
        for line in figures:
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """An isolated $KIROLEARN_HOME (and a fake user HOME beside it)."""
    kl_home = tmp_path / "kirolearn-home"
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    monkeypatch.setenv("KIROLEARN_HOME", str(kl_home))
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("KIROLEARN_RAISE_ERRORS", "1")
    # Loading the embedding model costs ~1 s per process: tests that need vectors turn it on
    # (fixture `wordllama` below).
    monkeypatch.setenv("KIROLEARN_EMBEDDING_MODEL", "none")
    for var in (
        "KIRO_SESSION_ID",
        "USER_PROMPT",
        "VSCODE_PID",
        "VSCODE_IPC_HOOK",
        "KIROLEARN_DISABLE",
        "KIROLEARN_INTERNAL",
    ):
        monkeypatch.delenv(var, raising=False)
    return kl_home


@pytest.fixture
def project(tmp_path):
    """A project directory with a .git marker and a src/ subfolder."""
    root = tmp_path / "my project"  # a space, on purpose (architecture.md rule 6)
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    return root


@pytest.fixture
def spooled(home):
    """A function returning the parsed events in the spool, oldest first."""

    def read():
        ready = home / "spool" / "ready"
        if not ready.exists():
            return []
        return [json.loads(p.read_text("utf-8")) for p in sorted(ready.iterdir())]

    return read


def load_cases():
    return json.loads((FIXTURES / "payloads.json").read_text("utf-8"))


def substitute(value, mapping):
    """Replace ${NAME} placeholders anywhere inside a JSON value."""
    if isinstance(value, str):
        for key, repl in mapping.items():
            value = value.replace("${%s}" % key, repl)
        return value
    if isinstance(value, list):
        return [substitute(v, mapping) for v in value]
    if isinstance(value, dict):
        return {substitute(k, mapping): substitute(v, mapping) for k, v in value.items()}
    return value


def hook_env(**extra):
    """Environment for a real `kirolearn-hook` subprocess (no RAISE_ERRORS: as Kiro runs it)."""
    env = {k: v for k, v in os.environ.items() if k != "KIROLEARN_RAISE_ERRORS"}
    env.update(extra)
    return env


def run_hook(argv=(), stdin=b"", env=None, cwd=None, timeout=20):
    """Run the installed console script the way Kiro does."""
    return subprocess.run(
        [str(BIN / "kirolearn-hook"), *argv],
        input=stdin,
        env=env or hook_env(),
        cwd=cwd,
        capture_output=True,
        timeout=timeout,
    )


@pytest.fixture
def make_event(project):
    """Spool one event built by the hook's own code; returns the event dict."""
    from kirolearn.capture import events as ev
    from kirolearn.capture import spool

    def make(name="postToolUse", now=None, **payload):
        payload.setdefault("cwd", str(project))
        payload.setdefault("session_id", "sess-1")
        event = ev.build_event(name, payload, now=now)
        spool.append(event["event_id"], ev.serialize(event))
        return event

    return make


@pytest.fixture
def write_config(home):
    """Write $KIROLEARN_HOME/config.toml from a TOML string."""

    def write(text):
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(text, "utf-8")

    return write


@pytest.fixture
def drain_now(new_store):
    """Run one drain in-process through the library facade (`Memory.drain`); returns (stats, db).

    The store starts as a copy of a migrated one (`new_store`): how a drain creates
    its store is tested through the CLI on an empty home (test_repair).
    """
    from kirolearn import Memory

    def run(flush=False, complete=None):
        new_store().conn.close()
        stats = Memory().drain(flush=flush, complete=complete, wait=0)
        return stats, new_store()

    return run


@pytest.fixture(scope="session")
def migrated_store(tmp_path_factory):
    """A freshly migrated, empty store file, made once (a new store costs ~50 ms CPU and its fsyncs)."""
    from kirolearn.store.sqlite import db as store

    path = tmp_path_factory.mktemp("migrated") / "kirolearn.db"
    db = store.open_db(str(path), mark=False)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file: a copy is complete
    db.conn.close()
    return path


@pytest.fixture
def new_store(home, migrated_store):
    """Put a copy of the migrated empty store in this test's home (as the first open would make it)."""
    import shutil

    from kirolearn.core import paths
    from kirolearn.store.sqlite import db as store

    def make():
        path = paths.db_path()
        if not os.path.exists(path):
            paths.ensure_private_dir(os.path.dirname(path))
            shutil.copyfile(migrated_store, path)
            os.chmod(path, 0o600)
            store.mark_created(path)
        return store.open_db()

    return make


@pytest.fixture
def add_record(new_store):
    """Insert a memory record straight into the store (as the drainer would); returns its id."""
    from datetime import datetime, timezone

    from kirolearn.core.ids import new_ulid
    from kirolearn.core.project import project_id
    from kirolearn.store.record import MemoryRecord
    from kirolearn.store.sqlite import db as store

    db = new_store()

    def add(
        project_root,
        title,
        summary="s",
        *,
        observation_type="discovery",
        facts=(),
        concepts=(),
        files=(),
        created_at=None,
        session_id="sess-1",
    ):
        record = MemoryRecord(
            record_id="mr_" + new_ulid(),
            project_id=project_id(str(project_root)),
            project_root=str(project_root),
            session_id=session_id,
            title=title,
            summary=summary,
            facts=list(facts),
            concepts=list(concepts),
            files_touched=list(files),
            observation_type=observation_type,
            strategy="test",
            source_event_ids=[new_ulid()],
            created_at=created_at or datetime.now(timezone.utc),
        )
        with store.writing(db):
            store.insert_record(db, store.record_row(record))
        return record.record_id

    add.db = db
    return add


AGENTS_DIR = Path(__file__).parent / "agents"


def pytest_collection_modifyitems(config, items):
    """Every test in tests/agents/ (the real agent CLIs) carries the `agents` marker: `make test`
    leaves them out, `make test-agents` (CI) runs them with KIROLEARN_REQUIRE_AGENTS=1. (No conftest.py
    there: a second `conftest` module would shadow this one for `from conftest import ...`.)"""
    for item in items:
        if AGENTS_DIR in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.agents)
            item.add_marker(pytest.mark.timeout(900))  # a cold npm install plus a few real sessions


# --- the real commands and the spool, for the fault tests (every expected failure: one `Error:` line) ---

KIROLEARN = str(BIN / "kirolearn")


def kl(*args, env=None, preexec_fn=None, timeout=120):
    """Run the installed `kirolearn` console script in its own process (text output)."""
    return subprocess.run(
        [KIROLEARN, *args],
        env=env or hook_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


class Ran:
    """A CliRunner result shaped like a CompletedProcess."""

    def __init__(self, result):
        self.returncode = result.exit_code
        self.stdout = result.stdout
        self.stderr = result.stderr
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            self.stderr += "Traceback (in-process):" + repr(result.exception)


def cli(*args):
    """Run the real click command in this process (cheaper than a process start)."""
    from click.testing import CliRunner

    from kirolearn.cli.commands import cli as group

    return Ran(CliRunner().invoke(group, list(args)))


def assert_one_error(result, *needles):
    """Exit 1, no traceback, and stderr is exactly one `Error:` line (containing every needle)."""
    assert result.returncode == 1, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def spool_events(project, n, session="s", start=0):
    ids = []
    for i in range(start, start + n):
        event = events.build_event(
            "postToolUse",
            {
                "cwd": str(project),
                "session_id": f"{session}{i % 5}",
                "tool_name": "shell",
                "tool_input": {"command": f"echo {i}"},
                "tool_response": f"output line {i} " + "x" * 600,
            },
        )
        spool.append(event["event_id"], events.serialize(event))
        ids.append(event["event_id"])
    return ids


def ready(home):
    path = home / "spool" / "ready"
    return sorted(p.name for p in path.iterdir()) if path.exists() else []


def stored_ids(home):
    conn = sqlite3.connect(home / "kirolearn.db")
    try:
        return {r[0] for r in conn.execute("select event_id from events")}
    finally:
        conn.close()


@pytest.fixture(scope="module")
def filled_template(tmp_path_factory):
    """One database of 200 drained events (a corruptible size), built once per module."""
    from kirolearn import Memory

    base = tmp_path_factory.mktemp("filled")
    project = base / "project"
    (project / ".git").mkdir(parents=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KIROLEARN_HOME", str(base / "home"))
        ids = spool_events(project, 200)
        stats = Memory().drain(flush=True)
    assert stats.stored == 200
    return base / "home", ids


@pytest.fixture
def filled(home, filled_template):
    """This test's home holds a copy of the 200-event database (and the marker saying so)."""
    source, ids = filled_template
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "kirolearn.db", home / "kirolearn.db")
    os.chmod(home / "kirolearn.db", 0o600)
    from kirolearn.store import state

    marker = json.loads((source / "state" / "store.json").read_text())
    state.write(state.STORE, dict(marker, path=str(home / "kirolearn.db")))
    return ids


def _can_remount():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind -o ro / /"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


def read_only_ready(home):
    """An argv prefix under which $KIROLEARN_HOME/spool/ready is read-only for the command.

    A normal user gets chmod 0500; root ignores modes, so root runs the command in
    its own mount namespace with ready/ bind-mounted read-only.
    """
    spool.ensure_layout()
    ready_dir = str(home / "spool" / "ready")
    if os.geteuid() != 0:
        os.chmod(ready_dir, 0o500)
        return []
    if not _can_remount():
        pytest.skip("running as root without a way to make a folder read-only (no unshare -m)")
    return ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', ready_dir]


def writable_again(home):
    os.chmod(home / "spool" / "ready", 0o700)


def as_store(db_or_conn):
    """A Store (the product's one door to storage) over the sqlite-utils Database or the read
    connection a test holds."""
    import sqlite3

    import sqlite_utils

    from kirolearn.store.sqlite.store import SqliteStore

    if isinstance(db_or_conn, sqlite3.Connection):
        db_or_conn = sqlite_utils.Database(db_or_conn, execute_plugins=False)
    return SqliteStore(db=db_or_conn)


@pytest.fixture
def wordllama(monkeypatch):
    """Turn the default (shipped, offline) embedding model on for this test."""
    monkeypatch.setenv("KIROLEARN_EMBEDDING_MODEL", "wordllama/l2_supercat_256")
