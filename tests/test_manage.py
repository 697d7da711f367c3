"""Managing memory: list, show, forget (tombstones, purge), restore, edit, import, through the real CLI."""

import json
import os
import pty
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest
from helpers import run_cli

from kirolearn.capture import spool
from kirolearn.core.errors import StoreLost
from kirolearn.manage import records as manage
from kirolearn.pipeline.drain import PURGE_AFTER_PASSES
from kirolearn.store.sqlite import db as store

BIN = os.path.dirname(sys.executable)


def js(*args):
    return json.loads(run_cli(*args, "--json", ok=True).stdout)


def export_turn(
    make_event,
    prompt,
    *,
    session="sess-1",
    command="pytest tests/test_export.py",
    path="src/export.py",
    outcome="Set busy_timeout to 30 s; tests pass.",
):
    """One agent turn through the hook's own event builder: prompt, two tools, stop."""
    make_event("userPromptSubmit", prompt=prompt, session_id=session)
    make_event(
        tool_name="shell",
        tool_input={"command": command},
        tool_response={"stdout": "1 failed"},
        session_id=session,
    )
    make_event(
        tool_name="fs_write",
        tool_input={"path": path, "content": "x"},
        tool_response={"ok": True},
        session_id=session,
    )
    make_event("stop", assistant_response=outcome, session_id=session)


def ids(rows):
    return [r["record_id"] for r in rows]


@pytest.fixture
def here(project, monkeypatch):
    monkeypatch.chdir(project)
    return project


# --- list, search filters, show ------------------------------------------------------------------------


def test_list_filters_newest_first_and_search_shares_them(here, add_record, tmp_path):
    now = datetime.now(timezone.utc)
    old = add_record(
        here,
        "Old decision about WAL mode",
        observation_type="decision",
        created_at=now - timedelta(days=20),
        files=["src/db.py"],
        session_id="s-old",
    )
    err = add_record(
        here,
        "Export job error database is locked",
        observation_type="error",
        created_at=now - timedelta(days=2),
        files=["/abs/path/src/export.py"],
        session_id="s-new",
    )
    new = add_record(
        here,
        "Discovery: WAL checkpoints block export",
        created_at=now - timedelta(hours=1),
        files=["docs/wal.md"],
        session_id="s-new",
    )
    other = add_record(tmp_path / "elsewhere", "Unrelated WAL note in another project", created_at=now)

    assert ids(js("list")) == [new, err, old]  # newest first, this project only
    assert ids(js("list", "--all-projects")) == [other, new, err, old]
    assert ids(js("list", "--type", "decision")) == [old]
    assert ids(js("list", "--type", "decision", "--type", "error")) == [err, old]
    assert ids(js("list", "--since", "7d")) == [new, err]
    assert ids(js("list", "--since", (now - timedelta(days=3)).strftime("%Y-%m-%d"))) == [new, err]
    assert ids(js("list", "--session", "s-new")) == [new, err]
    assert ids(js("list", "--file", "src/export.py")) == [err]  # a tail of an absolute path
    assert ids(js("list", "--file", "export.py")) == [err]
    assert ids(js("list", "--file", "%")) == []  # LIKE wildcards are literal
    assert ids(js("list", "--limit", "1")) == [new]
    listed = js("list")[0]
    assert set(listed) >= {
        "record_id",
        "title",
        "summary",
        "observation_type",
        "created_at",
        "session_id",
        "files_touched",
        "source_event_ids",
        "project_root",
    }

    assert ids(js("search", "WAL")) == [new, old] or ids(js("search", "WAL")) == [old, new]
    assert ids(js("search", "WAL", "--since", "7d")) == [new]
    assert ids(js("search", "WAL", "--session", "s-old")) == [old]
    assert ids(js("search", "export", "--file", "src/export.py")) == [err]
    hits = js("search", "WAL", "--all-projects")
    assert other in ids(hits) and all(h["score"] > 0 for h in hits)

    bad = run_cli("list", "--since", "last tuesday")
    assert bad.exit_code == 2 and "7d" in bad.stderr


def test_search_scores_are_real_numbers_not_zero(here, add_record):
    add_record(here, "Export job database is locked", summary="busy_timeout fixes the export job")
    line = run_cli("search", "export", ok=True).stdout.splitlines()[0]
    score = line.split()[1]
    assert float(score) > 0 and score != "0.00", line


def test_fresh_machine_list_and_show_create_nothing(home):
    assert js("list") == []
    assert js("list", "--forgotten") == []
    missing = run_cli("show", "mr_01M8P11TV4D5K3PEVTAMHCTT16")
    assert missing.exit_code == 1 and "no record" in missing.stderr
    assert not os.path.exists(home / "kirolearn.db")


def test_forget_without_a_database_is_the_same_error_as_with_one(home, here, request):
    before = run_cli("forget", "mr_x")
    assert before.exit_code == 1 and "no record 'mr_x': there is no database yet" in before.stderr
    assert not os.path.exists(home / "kirolearn.db")
    request.getfixturevalue("add_record")(here, "Something stored")  # the fixture opens the store
    after = run_cli("forget", "mr_x")
    assert after.exit_code == 1 and "no record 'mr_x'" in after.stderr


def test_a_lost_database_is_reported_by_show_list_and_forget(home, here, add_record):
    add_record(here, "Something stored")
    assert run_cli("drain", ok=True).exit_code == 0
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(str(home / "kirolearn.db") + suffix):
            os.remove(str(home / "kirolearn.db") + suffix)
    for args in (
        ["show", "mr_x"],
        ["list"],
        ["list", "--forgotten"],
        ["forget", "mr_x"],
        ["forget", "--session", "s1", "--yes"],
        ["restore", "mr_x"],
        ["edit", "mr_x", "--title", "t"],
    ):
        result = run_cli(*args)
        assert result.exit_code == 1, (args, result.output)
        assert "is missing, but it was created on" in result.stderr and "kirolearn repair" in result.stderr, (
            args
        )
    # the layer the MCP server and the viewer use says the same, instead of "no database yet"
    for call in (manage.list_records, lambda: manage.show("mr_x"), lambda: manage.forget(["mr_x"])):
        with pytest.raises(StoreLost):
            call()
    assert not os.path.exists(home / "kirolearn.db")


def test_show_gives_provenance(here, make_event, drain_now):
    export_turn(make_event, "Why does the export job fail? token=ghp_" + "a" * 36)
    drain_now()
    (record,) = js("list")
    shown = js("show", record["record_id"])
    assert shown["status"] == "live" and shown["record"]["title"].startswith("Why does the export job fail?")
    assert [e["kind"] for e in shown["events"]] == ["prompt", "tool_use", "tool_use", "session_summary"]
    assert shown["run"]["extractor"] == "deterministic" and shown["run"]["prompt_tokens"] == 0
    assert "request" not in shown["run"]
    assert shown["redactions"]["events"].get("github-token") == 1
    assert shown["redactions"]["record"].get("github-token", 0) >= 1
    assert shown["session"]["session_id"] == "sess-1" and shown["session"]["events"] == 4
    assert shown["session"]["records"] == 1
    text = run_cli("show", record["record_id"], ok=True).stdout
    assert "extraction run" in text and "deterministic" in text and "source events: 4 stored" in text
    assert "redactions in the events: 1 github-token" in text and "ghp_aaaa" not in text


def test_terminal_output_cannot_carry_escape_sequences(here, add_record):
    rid = add_record(here, "Red \x1b[31malert\x1b[0m and a bell \x07 and \u202eevil")
    out = run_cli("list", ok=True).stdout
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b[31malert" in out and "\\u202e" in out
    assert "\x1b" not in run_cli("show", rid, ok=True).stdout
    assert "\x1b" not in run_cli("search", "alert", ok=True).stdout
    # --json keeps its shape, its values sanitised like every other medium (issue 23, architecture.md rule 9)
    assert js("list")[0]["title"] == "Red alert and a bell  and evil"


# --- forget, tombstones, restore ------------------------------------------------------------------------


def test_forgotten_record_stays_gone_when_the_same_events_are_drained_again(
    here, make_event, drain_now, home, tmp_path
):
    export_turn(make_event, "Why does the export job fail with database is locked?")
    saved = tmp_path / "spool-copy"
    shutil.copytree(home / "spool" / "ready", saved)
    stats, db = drain_now()
    (record,) = js("list")
    rid = record["record_id"]
    assert ids(js("search", "database locked")) == [rid]

    out = js("forget", rid, "--reason", "wrong: it was the NFS mount")
    assert out == {"forgotten": [rid]}
    assert js("search", "database locked") == [] and js("list") == []
    run_ctx = run_cli("context", "--prompt", "why is the export database locked?", ok=True).stderr
    assert "nothing would be injected" in run_ctx
    assert ids(js("list", "--forgotten")) == [rid]
    assert js("show", rid)["status"] == "forgotten"

    # 1. the same spool files again (a restored backup of the spool): already stored, nothing extracted
    for name in os.listdir(saved):
        shutil.copy(saved / name, home / "spool" / "ready" / name)
    stats, db = drain_now(flush=True)
    assert stats.already_stored == 4 and js("list") == []
    # 2. the same events extracted again (their batch re-run): the tombstone's hash stops the record
    db.execute("update events set extract_state = 'pending'")
    db.conn.commit()
    stats, db = drain_now(flush=True)
    assert stats.batches_extracted == 1 and stats.records_written == 0
    assert js("list") == [] and js("search", "database locked") == []

    assert js("restore", rid) == {"restored": [rid]}
    assert ids(js("search", "database locked")) == [rid] and ids(js("list")) == [rid]
    assert js("list", "--forgotten") == []
    history = [h["action"] for h in js("show", rid)["history"]]
    assert history == ["forget", "restore"]
    assert js("show", rid)["history"][0]["reason"] == "wrong: it was the NFS mount"


def test_forget_by_session_and_by_query_need_yes(here, add_record):
    a = add_record(here, "Staging password rotated", session_id="s1")
    b = add_record(here, "Staging deploy uses blue green", session_id="s1")
    c = add_record(here, "Unrelated note about staging", session_id="s2")
    refused = run_cli("forget", "--session", "s1")
    assert refused.exit_code == 2 and "add --yes" in refused.stderr and a in refused.stderr
    assert len(js("list")) == 3
    assert sorted(js("forget", "--session", "s1", "--yes")["forgotten"]) == sorted([a, b])
    assert ids(js("list")) == [c]
    assert js("forget", "--query", "unrelated staging", "--yes")["forgotten"] == [c]
    assert js("list") == []
    assert run_cli("forget").exit_code == 2
    assert run_cli("forget", "mr_01M8P11TV4D5K3PEVTAMHCTT16").exit_code == 1
    assert js("forget", a) == {"forgotten": []}  # already forgotten: a no-op
    restore_unknown = run_cli("restore", "mr_01M8P11TV4D5K3PEVTAMHCTT16")
    assert restore_unknown.exit_code == 1 and "no forgotten record" in restore_unknown.stderr


def test_forgetting_a_session_end_record_hides_its_summary_until_restored(here):
    run_cli(
        "session-end",
        "--session-id",
        "s9",
        "--summary",
        "Moved JWT checks",
        "--next-step",
        "Rate-limit refresh",
        ok=True,
    )
    (record,) = js("list")
    assert js("session-init")["found"] is True
    js("forget", record["record_id"])
    assert js("session-init")["found"] is False
    assert "Moved JWT" not in run_cli("context", "--session-start", ok=True).stdout
    js("restore", record["record_id"])
    assert js("session-init")["next_steps"] == ["Rate-limit refresh"]


def _file_bytes(home) -> bytes:
    data = b""
    for name in ("kirolearn.db", "kirolearn.db-wal"):
        path = home / name
        if path.exists():
            data += path.read_bytes()
    return data


def _spool_done_bytes(home) -> bytes:
    return b"".join(p.read_bytes() for p in (home / "spool" / "done").glob("*/events.jsonl"))


def test_purge_removes_the_bytes_from_the_database_file(here, make_event, drain_now, home, tmp_path):
    marker = "zebracornfluxwidget"
    export_turn(make_event, f"Why does {marker} crash the export?", outcome=f"{marker} was a typo; fixed.")
    export_turn(
        make_event, "Keep this one about caching", session="sess-2", command="make cache", path="src/cache.py"
    )
    saved = tmp_path / "spool-copy"
    shutil.copytree(home / "spool" / "ready", saved)
    drain_now()
    (rid,) = ids(js("search", marker))
    js("forget", rid)
    assert marker.encode() in _file_bytes(home)  # forgotten, not yet purged: still restorable, so still there
    assert marker.encode() in _spool_done_bytes(home)  # the write-ahead log keeps the drained turn

    refused = run_cli("forget", "--purge")
    assert refused.exit_code == 2 and "cannot be undone" in refused.stderr
    out = js("forget", "--purge", "--yes")
    assert out["purged"] == 1 and out["record_ids"] == [rid] and out["events_deleted"] == 4
    assert out["wal_checkpoint"]["busy"] is False
    assert marker.encode() not in _file_bytes(home)
    assert out["spool_files_removed"] == 4 and marker.encode() not in _spool_done_bytes(home)
    assert b"make cache" in _spool_done_bytes(home)  # the other turn's log stays
    assert js("show", rid)["status"] == "purged"
    assert len(js("list")) == 1 and ids(js("search", "caching"))  # the other record is intact
    failed = run_cli("restore", rid)
    assert failed.exit_code == 1 and "purged" in failed.stderr

    # the hash stays: the very same spool files drained again bring the events back, never the record
    for name in os.listdir(saved):
        shutil.copy(saved / name, home / "spool" / "ready" / name)
    stats, _ = drain_now(flush=True)
    assert stats.batches_extracted >= 1 and js("search", marker) == []


def test_retention_purges_old_tombstones_on_drain(here, add_record, drain_now, write_config, home):
    rid = add_record(here, "A note to forget about quokkas")
    keep = add_record(here, "A note forgotten just now about wombats")
    js("forget", rid)
    db = store.open_db()
    old = store.iso_shift(store.now_iso(), -40 * 86400)
    db.execute("update forgotten_records set forgotten_at = ? where record_id = ?", [old, rid])
    db.conn.commit()
    js("forget", keep)
    drain_now()  # old enough, but due on one pass only: a wrong clock must not purge (docs/drain.md)
    assert js("show", rid)["status"] == "forgotten"
    for _ in range(PURGE_AFTER_PASSES - 1):
        drain_now()
    assert js("show", rid)["status"] == "purged" and js("show", keep)["status"] == "forgotten"
    assert b"quokkas" not in _file_bytes(home)
    write_config("[retention]\nforgotten_days = 0\n")
    db.execute("update forgotten_records set forgotten_at = ? where record_id = ?", [old, keep])
    db.conn.commit()
    drain_now()
    assert js("show", keep)["status"] == "forgotten"  # 0 = keep until `forget --purge`


# --- edit -------------------------------------------------------------------------------------------------


def test_edit_scrubs_versions_and_reindexes(here, add_record):
    rid = add_record(here, "Export uses port 5432", summary="Connect the export to port 5432")
    out = js(
        "edit",
        rid,
        "--title",
        "Export uses port 5433 via pgbouncer",
        "--summary",
        "Connect through pgbouncer; password=hunter2hunter2",
        "--reason",
        "port was wrong",
    )
    assert out["title"] == "Export uses port 5433 via pgbouncer"
    assert "hunter2" not in out["summary"] and "[REDACTED:" in out["summary"]
    assert ids(js("search", "pgbouncer")) == [rid]
    assert js("search", "5432") == []
    js("edit", rid, "--title", "Export goes through pgbouncer")
    history = js("show", rid)["history"]
    assert [(h["action"], h["version"]) for h in history] == [("edit", 1), ("edit", 2)]
    assert history[0]["before"] == {
        "title": "Export uses port 5432",
        "summary": "Connect the export to port 5432",
    }
    assert history[1]["before"] == {"title": "Export uses port 5433 via pgbouncer"}
    assert history[0]["reason"] == "port was wrong"
    empty = run_cli("edit", rid, "--title", "   ")
    assert empty.exit_code == 1 and "empty" in empty.stderr
    long = run_cli("edit", rid, "--title", "x" * 201)
    assert long.exit_code == 1 and "200" in long.stderr
    assert run_cli("edit", rid).exit_code == 2  # not a terminal: no $EDITOR
    # the purge of edit history drops the old text
    assert js("forget", "--purge", "--yes")["edit_versions_cleared"] == 2
    assert all(h["before"] is None for h in js("show", rid)["history"])


def test_edit_in_editor_on_a_terminal(here, add_record, tmp_path):
    rid = add_record(here, "Old title", summary="Old summary")
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys\n"
        "path = sys.argv[1]\n"
        "text = open(path).read()\n"
        "assert 'Old title' in text and 'Old summary' in text, text\n"
        "open(path, 'w').write('New title from the editor\\n\\nNew summary line one\\nline two\\n'"
        " '# a comment line\\n')\n"
    )
    env = dict(os.environ, EDITOR=f"{sys.executable} {editor}", TERM="dumb")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [os.path.join(BIN, "kirolearn"), "edit", rid],
        stdin=slave,
        stdout=slave,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(here),
    )
    os.close(slave)
    try:
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    finally:
        os.close(master)
    record = js("show", rid)["record"]
    assert record["title"] == "New title from the editor"
    assert record["summary"] == "New summary line one\nline two"


# --- import ------------------------------------------------------------------------------------------------


def _rich_store(here, make_event, drain_now):
    export_turn(make_event, "Why does the export job fail with database is locked?")
    export_turn(
        make_event,
        "Add caching to the product page",
        session="sess-2",
        command="make cache",
        path="src/cache.py",
    )
    drain_now()
    make_event("userPromptSubmit", prompt="Still pending: not extracted yet", session_id="sess-3")
    drain_now()
    run_cli(
        "save-summary",
        "--request",
        "Fix login 500 on plus-sign emails",
        "--investigated",
        "auth.py",
        "--learned",
        "SQL built with %",
        "--completed",
        "parameterised",
        "--next-steps",
        "orders.py",
        "--file-read",
        "app/auth.py",
        "--file-modified",
        "app/auth.py",
        ok=True,
    )
    run_cli(
        "session-end",
        "--session-id",
        "sess-1",
        "--summary",
        "Export fixed; ünïcode kept",
        "--next-step",
        "Check the cron job",
        "--pitfall",
        "NFS locks",
        ok=True,
    )


def test_export_import_round_trip_is_byte_identical_and_idempotent(
    here, make_event, drain_now, home, tmp_path, monkeypatch
):
    _rich_store(here, make_event, drain_now)
    first = tmp_path / "first.jsonl"
    run_cli("export", "-o", str(first), ok=True)
    kinds = [json.loads(line)["type"] for line in first.read_text("utf-8").splitlines()]
    assert {"event", "record", "summary"} <= set(kinds)

    monkeypatch.setenv("KIROLEARN_HOME", str(tmp_path / "empty-home"))
    counts = js("import", str(first))
    assert counts["events"] == {"added": kinds.count("event"), "present": 0}
    assert counts["records"] == {"added": kinds.count("record"), "present": 0}
    assert counts["summaries"] == {"added": 1, "present": 0}
    second = tmp_path / "second.jsonl"
    run_cli("export", "-o", str(second), ok=True)
    assert second.read_bytes() == first.read_bytes()

    again = run_cli("import", "-", "--json", input=first.read_text("utf-8"), ok=True)
    assert json.loads(again.stdout)["records"] == {"added": 0, "present": kinds.count("record")}
    third = tmp_path / "third.jsonl"
    run_cli("export", "-o", str(third), ok=True)
    assert third.read_bytes() == first.read_bytes()
    # provenance survives: ids, source events, the pending event still waits for extraction
    (record,) = [r for r in js("list", "--session", "sess-2")]
    assert js("show", record["record_id"])["session"]["events"] == 4
    assert js("status")["database"]["projects"][0]["pending"] == 1


def test_import_scrubs_and_keeps_forgotten_records_forgotten(here, add_record, tmp_path, monkeypatch):
    rid = add_record(here, "Deploy key note", summary="The deploy uses AKIAIOSFODNN7EXAMPLE as its key")
    # what an older kirolearn (weaker rules) might have exported: the raw key
    export = tmp_path / "old.jsonl"
    run_cli("export", "-o", str(export), ok=True)
    text = export.read_text("utf-8")
    raw = text.replace("[REDACTED:aws-access-key]", "AKIAIOSFODNN7EXAMPLE")
    assert "AKIAIOSFODNN7EXAMPLE" in raw
    js("forget", rid)
    out = json.loads(run_cli("import", "-", "--json", input=raw, ok=True).stdout)
    assert out["forgotten_skipped"] == 1 and out["records"]["added"] == 0
    assert js("list") == []
    js("forget", "--purge", "--yes")
    out = json.loads(run_cli("import", "-", "--json", input=raw, ok=True).stdout)
    assert out["forgotten_skipped"] == 1  # even purged: the hash remembers
    # into a fresh home, the raw key is scrubbed on the way in
    monkeypatch.setenv("KIROLEARN_HOME", str(tmp_path / "fresh"))
    out = json.loads(run_cli("import", "-", "--json", input=raw, ok=True).stdout)
    assert out["records"]["added"] == 1 and out["redactions"].get("aws-access-key") == 1
    assert "AKIA" not in js("list")[0]["summary"]


def test_import_rejects_a_bad_file_whole(here, add_record, tmp_path, monkeypatch):
    add_record(here, "One good record")
    export = tmp_path / "e.jsonl"
    run_cli("export", "-o", str(export), ok=True)
    good = export.read_text("utf-8")
    monkeypatch.setenv("KIROLEARN_HOME", str(tmp_path / "fresh"))
    bad = run_cli("import", "-", input=good + '{"type": "record", "title": "no id"}\n')
    assert bad.exit_code == 1 and "line 2" in bad.stderr
    assert js("list") == []
    garbage = run_cli("import", "-", input="not json\n")
    assert garbage.exit_code == 1 and "line 1" in garbage.stderr


# --- the library functions the viewer and MCP share ------------------------------------------------------


def test_parse_since():
    now = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
    assert manage.parse_since("7d", now) == "2026-11-23T12:00:00.000Z"
    assert manage.parse_since("12h", now) == "2026-11-30T00:00:00.000Z"
    assert manage.parse_since("2w", now) == "2026-11-16T12:00:00.000Z"
    assert manage.parse_since("2026-11-01", now) == "2026-11-01T00:00:00.000Z"
    assert manage.parse_since("2026-11-01T10:00:00+02:00", now) == "2026-11-01T08:00:00.000Z"
    assert manage.parse_since(None) is None and manage.parse_since("") is None
    with pytest.raises(manage.ManageError):
        manage.parse_since("yesterday")


def test_forget_and_restore_are_one_transaction_each(here, add_record):
    a = add_record(here, "first")
    b = add_record(here, "second")
    forgotten = manage.forget([a, b, a], actor="cli")
    assert sorted(ids(forgotten)) == sorted([a, b])
    assert spool.size() == 0 and js("list") == []
    assert sorted(ids(manage.restore([a, b]))) == sorted([a, b])


@pytest.mark.parametrize("args", [["list"], ["list", "--forgotten"], ["forget", "--session", "s1", "--yes"]])
def test_list_and_forget_with_a_missing_project_are_errors(home, tmp_path, args):
    """README: `--project DIR` must be an existing directory, never a silent fall-back to another project."""
    result = run_cli(*args, "--project", str(tmp_path / "nonexistent"))
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_forget_by_a_session_that_matches_nothing_says_so(here, add_record):
    """Not "match 0 record(s); add --yes to forget them": there is nothing to confirm."""
    add_record(here, "Staging password rotated", session_id="s1")
    result = run_cli("forget", "--session", "no-such-session", ok=True)
    assert "nothing to forget" in result.stderr and "add --yes" not in result.stderr
    assert len(js("list")) == 1


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_search_with_an_empty_query_is_a_usage_error(home, query):
    result = run_cli("search", query)
    assert result.exit_code == 2 and "QUERY is empty" in result.stderr


def test_search_on_a_fresh_machine_finds_nothing(home, monkeypatch):
    """With the default embedding model, not only with embeddings off: no database yet is no hit, not a bug."""
    monkeypatch.delenv("KIROLEARN_EMBEDDING_MODEL")
    assert js("search", "database is locked") == []
    assert "No memory records match" in run_cli("search", "anything", ok=True).stderr
    assert not os.path.exists(home / "kirolearn.db")


def test_forget_and_purge_take_the_text_out_of_the_neighbours_too(here, make_event, drain_now, home):
    # Each record's hidden `expansion` column carries its session neighbours' text (semantic recall):
    # forgetting one record must re-derive its neighbours, or its words stay searchable and exported.
    marker = "zebracornfluxwidget"
    export_turn(
        make_event, f"Rotated the {marker} staging password", outcome=f"{marker} rotated in the vault."
    )
    export_turn(
        make_event,
        "Fix the flaky CSV export test",
        command="pytest tests/test_csv.py",
        path="src/csv.py",
        outcome="The CSV test sorted rows by a non-unique key; it sorts by id now.",
    )
    drain_now(flush=True)
    rows = js("list")
    assert len(rows) == 2 and len({r["session_id"] for r in rows}) == 1
    secret = next(r["record_id"] for r in rows if marker in r["title"])
    other = next(r["record_id"] for r in rows if r["record_id"] != secret)
    assert ids(js("search", marker)) and marker in js("show", other)["record"]["expansion"]
    db = store.open_db()
    store.save_vectors(
        db,
        [
            {
                "record_id": secret,
                "project_id": rows[0]["project_id"],
                "model_id": "test/m",
                "dimensions": 1,
                "vector": b"\0\0\0\0",
                "text_hash": "x",
            }
        ],
    )

    # --query forgets the record whose own text matches, not its neighbour that matches through expansion
    assert js("forget", "--query", marker, "--yes")["forgotten"] == [secret]
    assert ids(js("list")) == [other]
    assert js("search", marker) == []
    assert marker not in (js("show", other)["record"]["expansion"] or "")
    assert db.execute("select count(*) from record_vectors where record_id = ?", [secret]).fetchone()[0] == 0

    js("restore", secret)  # back: the neighbour's expansion is derived again with it
    assert marker in js("show", other)["record"]["expansion"]
    js("forget", secret)
    js("forget", "--purge", "--yes")
    assert marker.encode() not in _file_bytes(home)
    assert marker not in run_cli("export", ok=True).stdout


def test_the_text_of_list_shows_each_records_marks(here, add_record):
    """`kirolearn list`, the console script: superseded, merged and freshness marks, as `show` has them."""
    from kirolearn.store.backends import open_store

    old = add_record(here, "Use port 8080 for the API")
    new = add_record(here, "Use port 9090 for the API")
    twin = add_record(here, "Run the linter before pushing")
    kept = add_record(here, "Run the linter before every push")
    moved = add_record(here, "Config lives in settings.toml")
    plain = add_record(here, "The cache is warmed at start")
    store = open_store()
    assert store.set_mark(old, "superseded_by", new, actor="test", reason="port changed")
    assert store.set_mark(twin, "merged_into", kept, actor="test", reason="identical work")
    store.set_marks([{"record_id": moved, "freshness": "deleted", "reason": "file gone"}], actor="test")
    store.close()
    lines = {line.split()[0]: line for line in kirolearn_list(here).splitlines()}
    assert f"(superseded by {new})" in lines[old]
    assert f"(merged into {kept})" in lines[twin]
    assert "(gone since)" in lines[moved]
    assert "(" not in lines[plain].split("]", 1)[1]


def kirolearn_list(cwd):
    import subprocess

    from conftest import KIROLEARN, hook_env

    done = subprocess.run(
        [KIROLEARN, "list", "--limit", "50"],
        env=hook_env(),
        cwd=str(cwd),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
