"""The error family: one line, a fix, an exit status, converted in one place."""

import subprocess
import sys

from click.testing import CliRunner
from conftest import BIN

from kirolearn.cli.commands import cli
from kirolearn.core import errors


def test_error_carries_message_fix_and_exit_code():
    exc = errors.InstallError("~/.kiro/settings/mcp.json is not JSON", "fix the file or move it aside")
    assert str(exc) == "~/.kiro/settings/mcp.json is not JSON; fix the file or move it aside"
    assert exc.exit_code == 1
    assert isinstance(exc, RuntimeError)  # callers that caught the old base still do
    assert errors.DrainLocked("busy").exit_code == 0


def test_every_library_error_is_in_the_family():
    from kirolearn import settings
    from kirolearn.core import paths
    from kirolearn.install import engine as install
    from kirolearn.install import schedule
    from kirolearn.pipeline import drain, extract, summaries
    from kirolearn.store.sqlite import db as store

    for cls in (
        paths.HomeNotFound,
        drain.DrainLocked,
        extract.ExtractionError,
        install.InstallError,
        schedule.ScheduleError,
        settings.SettingsError,
        store.SchemaTooNew,
        summaries.SummaryError,
    ):
        assert issubclass(cls, errors.KirolearnError), cls


def test_sqlite_messages_become_store_errors_that_name_the_file():
    import sqlite3

    corrupt = errors.from_sqlite(sqlite3.DatabaseError("database disk image is malformed"), "/h/kirolearn.db")
    assert isinstance(corrupt, errors.StoreCorrupt)
    assert "/h/kirolearn.db" in str(corrupt) and "kirolearn repair" in str(corrupt)
    assert "try again" in str(errors.from_sqlite(sqlite3.OperationalError("database is locked"), "/x"))


def test_cli_prints_one_error_line_for_a_bad_config(home, write_config):
    write_config("[extract]\nbatch_max_events = 'many'\n")
    result = subprocess.run([str(BIN / "kirolearn"), "status"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr


def test_an_unexpected_exception_is_logged_not_shown(home, monkeypatch):
    from kirolearn import settings

    def boom():
        raise KeyError("token sk-ant-api03-" + "A" * 93)

    monkeypatch.setattr(settings, "load", boom)
    monkeypatch.delenv("KIROLEARN_DEBUG", raising=False)
    result = CliRunner().invoke(cli, ["drain"])
    assert result.exit_code == 1
    assert "unexpected KeyError" in result.output and "cli.log" in result.output
    assert "Traceback" not in result.output
    log = (home / "logs" / "cli.log").read_text()
    assert "Traceback" in log and "A" * 93 not in log  # the log is scrubbed


def test_mcp_server_turns_library_errors_into_one_line():
    # session_end with a blank summary and no auto_compress is a SummaryError
    import asyncio

    from kirolearn.mcp_server import build_server

    server = build_server(str(sys.path[0]))

    async def call():
        from mcp.server.fastmcp.exceptions import ToolError

        try:
            await server.call_tool("session_end", {"session_id": "s-1", "summary": "   "})
        except ToolError as exc:
            return str(exc)
        return None

    message = asyncio.run(call())
    assert message and "\n" not in message


def test_a_closed_pipe_is_not_reported_as_a_disk_error(home):
    """`kirolearn config show | head -1`: the reader leaving is not "file system error …; check the disk"."""
    proc = subprocess.Popen(
        [str(BIN / "kirolearn"), "config", "show"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.close()  # the reader is gone before anything is written
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert stderr == "", stderr
