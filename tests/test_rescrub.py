"""`kirolearn rescrub`, `scan` and the rules-version notes: a store built by weaker rules is cleaned.

The "old rules" are today's scrubber without the catalogue table (monkeypatched), so the store
really holds table-only secrets in events, records, summaries, runs, the FTS index and the logs;
after rescrub the raw bytes of kirolearn.db and its -wal must no longer contain them.
"""

import contextlib
import json
import os

import pytest
from click.testing import CliRunner
from conftest import as_store

from kirolearn.cli.commands import cli
from kirolearn.core import paths
from kirolearn.pipeline import summaries
from kirolearn.privacy import rescrub
from kirolearn.privacy.scrub import Scrubber, rules_version
from kirolearn.store.sqlite import db as store
from kirolearn.store.sqlite import scrubbing as store_scrub

# Formats only the catalogue table knows (fake, assembled at run time).
LINEAR = "lin_api_" + "Q7w" * 13 + "x"
SHOPIFY = "shpat_" + "0a1b2c3d" * 4
PASSWORD = "letmeinplease"  # an INI password without digits: the old rules' known miss


@contextlib.contextmanager
def old_rules():
    """Scrub like the rules before the catalogue table (and before the INI fix)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(Scrubber, "_table_pass", lambda self, text, found=None: text)
        m.setattr("kirolearn.privacy.scrub._ini_value", lambda *a: False)
        yield


def _db_bytes():
    path = paths.db_path()
    data = b""
    for p in (path, path + "-wal"):
        if os.path.exists(p):
            with open(p, "rb") as fh:
                data += fh.read()
    return data


def _secrets_in(data: bytes):
    return [s for s in (LINEAR, SHOPIFY, PASSWORD) if s.encode() in data]


def test_rescrub_cleans_a_store_built_with_old_rules(make_event, drain_now, project):
    with old_rules():
        _build_old_store(make_event, drain_now, project)
    _rescrub_and_check()


def _build_old_store(make_event, drain_now, project):
    make_event("userPromptSubmit", prompt=f"deploy with LINEAR={LINEAR} please")
    make_event(
        "postToolUse",
        tool_name="execute_bash",
        tool_input={"command": f"cat config.ini && echo {SHOPIFY}"},
        tool_response={"result": [{"stdout": f"[db]\nuser = app\npassword = {PASSWORD}\n"}]},
    )
    make_event("stop", assistant_response=f"Done; the key {SHOPIFY} works.")
    stats, db = drain_now(flush=True)
    assert stats.stored == 3 and stats.records_written >= 1
    summaries.session_end(
        as_store(db),
        summaries.Project(str(project)),
        session_id="sess-1",
        summary=f"used LINEAR={LINEAR}",
        highlights=[f"shop key {SHOPIFY}"],
    )
    # A forgotten record keeps its row (with the old text) in a tombstone until purge.
    from kirolearn.manage import records as manage

    first = db.execute("select record_id from memory_records order by created_at limit 1").fetchone()[0]
    manage.forget([first], reason="cleanup", store=as_store(db))
    assert LINEAR in db.execute("select payload from forgotten_records").fetchone()[0]
    logs = paths.ensure_private_dir(paths.logs_dir())
    with open(os.path.join(logs, "hook.log"), "a", encoding="utf-8") as fh:
        fh.write(f"2026-01-01T00:00:00Z pid=1 unknown hook event {LINEAR!r}\n")
    with store.writing(db):  # the old release had no scrub_state: it was scrubbed with v1
        db.execute("update scrub_state set value = '1' where key = 'scrubbed_with'")
    assert set(_secrets_in(_db_bytes())) == {LINEAR, SHOPIFY, PASSWORD}, "the old store must hold them"
    assert (
        LINEAR
        in db.execute("select group_concat(title || summary || facts) from memory_records").fetchone()[0]
    )
    db.conn.close()

    runner = CliRunner()
    status = json.loads(runner.invoke(cli, ["status", "--json"], catch_exceptions=False).output)
    assert status["database"]["scrub"] == {
        "rules_version": rules_version(),
        "store_scrubbed_with": 1,
        "rescrub_needed": True,
    }
    doctor = runner.invoke(cli, ["doctor"], catch_exceptions=False)
    assert "kirolearn rescrub" in doctor.output


def _rescrub_and_check():
    logs = paths.logs_dir()
    runner = CliRunner()
    result = runner.invoke(cli, ["rescrub", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["rows_changed"]["events"] == 3
    assert (
        report["rows_changed"]["session_summaries"] == 1 and report["rows_changed"]["forgotten_records"] == 1
    )
    assert report["redactions"]["linear-api-key"] >= 2 and report["redactions"]["shopify-access-token"] >= 2
    assert report["log_lines_changed"] == {os.path.join("logs", "hook.log"): 1}
    assert report["checkpoint_complete"] is True

    assert _secrets_in(_db_bytes()) == []
    assert (
        os.path.getsize(paths.db_path() + "-wal") == 0 if os.path.exists(paths.db_path() + "-wal") else True
    )
    with open(os.path.join(logs, "hook.log"), encoding="utf-8") as fh:
        assert LINEAR not in fh.read()
    db = store.open_db()
    assert store_scrub.scrubbed_with(db) == rules_version() and store_scrub.progress(db) is None
    # The FTS index was rebuilt from the scrubbed rows: the secret is not a term any more, the name is.
    assert (
        db.execute(
            "select count(*) from memory_records_fts where memory_records_fts match ?", ['"' + LINEAR + '"']
        ).fetchone()[0]
        == 0
    )
    # Content hashes follow the scrubbed bodies, so dedup still recognises a repeat.
    from kirolearn.capture.events import GENERATED_FIELDS
    from kirolearn.core.dedup import event_content_hash

    for row in db.query("select body, content_hash from events"):
        body = json.loads(row["body"])
        assert event_content_hash(body) == row["content_hash"]
        assert {k for k in GENERATED_FIELDS if k in body}
    status = json.loads(runner.invoke(cli, ["status", "--json"], catch_exceptions=False).output)
    assert status["database"]["scrub"]["rescrub_needed"] is False

    again = json.loads(runner.invoke(cli, ["rescrub", "--json"], catch_exceptions=False).output)
    assert again["rows_changed"] == {} and again["log_lines_changed"] == {}


def test_rescrub_resumes_after_an_interruption(make_event, drain_now, monkeypatch):
    with old_rules():
        for i in range(7):
            make_event("userPromptSubmit", prompt=f"prompt {i} with LINEAR={LINEAR}")
        _, db = drain_now()
    monkeypatch.setattr(store_scrub, "CHUNK_ROWS", 3)
    seen = []

    def stop_after_first_chunk(table, rowid):
        seen.append((table, rowid))
        if table == "events":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rescrub.rescrub(as_store(db), on_chunk=stop_after_first_chunk)
    mark = store_scrub.progress(db)
    assert mark["table"] == "events" and mark["version"] == rules_version()
    done_first = db.execute("select count(*) from events where body like ?", [f"%{LINEAR}%"]).fetchone()[0]
    assert done_first == 4  # the first chunk of 3 is committed, the rest still waits
    report = rescrub.rescrub(as_store(db))
    assert report["resumed"] is True and report["rows_changed"]["events"] == 4
    assert db.execute("select count(*) from events where body like ?", [f"%{LINEAR}%"]).fetchone()[0] == 0


def test_new_store_is_current_and_drain_says_nothing(make_event):
    runner = CliRunner()
    make_event("userPromptSubmit", prompt="hello")
    result = runner.invoke(cli, ["drain"], catch_exceptions=False)
    assert "rescrub" not in result.output
    db = store.open_db()
    assert store_scrub.scrubbed_with(db) == rules_version()
    with store.writing(db):
        db.execute("update scrub_state set value = '1' where key = 'scrubbed_with'")
    result = CliRunner().invoke(cli, ["drain"], catch_exceptions=False)
    assert "run `kirolearn rescrub`" in result.stderr


def test_scan_reports_by_type_without_printing_secrets(tmp_path):
    env = tmp_path / ".env"
    env.write_text(f"LINEAR={LINEAR}\nSHOP={SHOPIFY}\nDEBUG=1\n", "utf-8")
    runner = CliRunner()
    out = runner.invoke(cli, ["scan", str(env)], catch_exceptions=False).output
    assert LINEAR not in out and SHOPIFY not in out
    assert "linear-api-key" in out and "1: LINEAR=[REDACTED:linear-api-key]" in out
    data = json.loads(
        runner.invoke(
            cli, ["scan", "-", "--json"], input=env.read_text("utf-8"), catch_exceptions=False
        ).output
    )
    assert data["by_type"] == {"linear-api-key": 1, "shopify-access-token": 1}
    assert data["findings"] == [
        {"line": 1, "type": "linear-api-key"},
        {"line": 2, "type": "shopify-access-token"},
    ]
    assert data["total"] == 2 and data["rules_version"] == rules_version()


def test_mcp_log_lines_are_scrubbed(home, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    missing = tmp_path / f"LINEAR={LINEAR}"
    env = {k: v for k, v in os.environ.items() if k != "KIROLEARN_RAISE_ERRORS"}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "kirolearn-mcp"), "--project", str(missing)],
        env=env,
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1
    log = (home / "logs" / "mcp.log").read_text("utf-8")
    assert "does not exist" in log and "[REDACTED:linear-api-key]" in log
    assert LINEAR not in log and LINEAR.encode() not in result.stderr and result.stdout == b""
