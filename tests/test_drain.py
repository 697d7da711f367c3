"""The drainer end to end: spool → validate → dedup → scrub → store → extract."""

import json
import os
import shutil

from click.testing import CliRunner

from kirolearn.capture import spool
from kirolearn.cli.commands import cli
from kirolearn.core import replay
from kirolearn.demo import RECORDINGS
from kirolearn.pipeline import drain


def records(db):
    rows = [dict(r) for r in db.query("select * from memory_records order by created_at, record_id")]
    for r in rows:
        for key in ("facts", "concepts", "files_touched", "source_event_ids"):
            r[key] = json.loads(r[key])
    return rows


def test_recorded_cli_session_becomes_turn_summaries(tmp_path, drain_now, home):
    project = replay.make_project(str(tmp_path / "shop"))
    results = replay.replay(replay.load(os.path.join(RECORDINGS, "cli-classic.jsonl")), project)
    assert all(r.returncode == 0 for r in results)

    stats, db = drain_now()
    assert (stats.events_read, stats.stored, stats.quarantined) == (13, 13, 0)
    assert stats.redactions.get("url-password") == 1
    assert stats.batches_extracted == 1 and stats.records_written == 2
    assert spool.size() == 0

    first, second = records(db)
    assert first["observation_type"] == second["observation_type"] == "session_summary"
    assert first["strategy"] == "deterministic-turn"
    assert first["title"].startswith("Login returns a 500 when the email has a plus sign")
    assert "parameterised query" in first["summary"]
    assert "app/auth.py" in first["files_touched"]
    assert any(
        "failed: test_login_plus_address" in f and "fixed after changing app/auth.py" in f
        for f in first["facts"]
    ), first["facts"]
    assert "app/orders.py" in second["files_touched"] and "tests/test_orders.py" in second["files_touched"]
    # Each turn's record cites that turn's events: together the whole batch, none twice.
    assert len(first["source_event_ids"]) + len(second["source_event_ids"]) == 13
    assert not set(first["source_event_ids"]) & set(second["source_event_ids"])
    # The password in the DATABASE_URL never reached the database.
    dump = "\n".join(
        str(tuple(r)) for t in ("events", "memory_records") for r in db.execute(f"select * from {t}")
    )
    assert "s3cr3t-pw" not in dump
    assert "postgres://app:[REDACTED:url-password]@localhost/app" in dump


def test_every_recording_drains_cleanly(tmp_path, drain_now):
    for path in sorted(os.listdir(RECORDINGS)):
        project = replay.make_project(str(tmp_path / path))
        replay.replay(replay.load(os.path.join(RECORDINGS, path)), project)
    stats, db = drain_now(flush=True)
    assert stats.quarantined == 0 and spool.size() == 0
    assert stats.pending_events == 0
    titles = [r["title"] for r in records(db)]
    assert any(t.startswith("Add a --dry-run flag") for t in titles)  # IDE 0.x: no stop, flushed
    assert any(t.startswith("The nightly export job keeps failing") for t in titles)


def test_redrain_after_crash_between_commit_and_unlink_stores_nothing_twice(
    make_event, drain_now, home, tmp_path
):
    for i in range(5):
        make_event(tool_name="shell", tool_input={"command": f"echo {i}"})
    backup = tmp_path / "backup"
    shutil.copytree(home / "spool" / "ready", backup)
    drain_now()
    for name in os.listdir(backup):  # as if the drainer died after COMMIT, before unlink
        shutil.copy(backup / name, home / "spool" / "ready" / name)
    stats, db = drain_now()
    assert (stats.events_read, stats.already_stored, stats.stored) == (5, 5, 0)
    assert db["events"].count == 5
    assert spool.size() == 0


def test_same_tool_call_twice_in_the_window_is_stored_once(make_event, drain_now):
    call = dict(
        tool_name="execute_bash",
        tool_input={"command": "ls"},
        tool_response={"success": True, "result": ["a"]},
    )
    make_event(now=1_800_000_000.0, **call)
    make_event(now=1_800_000_001.0, **call)  # Kiro fired the hook twice
    make_event(now=1_800_000_500.0, **call)  # the same command much later: a new fact
    make_event(now=1_800_000_001.5, **dict(call, session_id="other"))  # another session
    stats, db = drain_now()
    assert (stats.stored, stats.duplicates) == (3, 1)


def test_session_start_repeated_on_every_prompt_is_stored_once(make_event, drain_now):
    make_event("agentSpawn", now=1_800_000_000.0)
    make_event("userPromptSubmit", now=1_800_000_001.0, prompt="one")
    make_event("agentSpawn", now=1_800_003_000.0)  # an hour later, same session id
    make_event("agentSpawn", now=1_800_003_000.0, session_id="sess-2")
    stats, _ = drain_now()
    assert (stats.stored, stats.duplicates) == (3, 1)


def test_duplicates_within_one_chunk_and_across_drains(make_event, drain_now):
    call = dict(tool_name="grep", tool_input={"pattern": "x"})
    make_event(now=1_800_000_000.0, **call)
    drain_now()
    make_event(now=1_800_000_002.0, **call)
    make_event(now=1_800_000_003.0, **call)
    stats, db = drain_now()
    assert (stats.stored, stats.duplicates) == (0, 2)
    assert db["events"].count == 1


def test_bad_files_are_quarantined_with_a_reason(make_event, drain_now, home):
    ready = home / "spool" / "ready"
    good = make_event(tool_name="shell")
    (ready / "01ARZ3NDEKTSV4RRFFQ69G5FAA.json").write_bytes(b"{not json")
    bad_event = dict(good, event_id="01ARZ3NDEKTSV4RRFFQ69G5FAB", kind="weird")
    (ready / "01ARZ3NDEKTSV4RRFFQ69G5FAB.json").write_text(json.dumps(bad_event))
    renamed = dict(good, event_id="01ARZ3NDEKTSV4RRFFQ69G5FAC")
    (ready / "01ARZ3NDEKTSV4RRFFQ69G5FZZ.json").write_text(json.dumps(renamed))
    stats, db = drain_now()
    assert (stats.events_read, stats.stored, stats.quarantined) == (4, 1, 3)
    quarantine = home / "spool" / "quarantine"
    reasons = {p.name: p.read_text() for p in quarantine.iterdir() if p.name.endswith(".reason")}
    assert "not valid JSON" in reasons["01ARZ3NDEKTSV4RRFFQ69G5FAA.json.reason"]
    assert "not a valid event: kind" in reasons["01ARZ3NDEKTSV4RRFFQ69G5FAB.json.reason"]
    assert "does not match event_id" in reasons["01ARZ3NDEKTSV4RRFFQ69G5FZZ.json.reason"]
    assert (quarantine / "01ARZ3NDEKTSV4RRFFQ69G5FAA.json").read_bytes() == b"{not json"
    assert spool.size() == 0


def test_stale_tmp_files_are_recovered_or_quarantined(make_event, drain_now, home):
    event = make_event(tool_name="shell")
    ready = home / "spool" / "ready" / (event["event_id"] + ".json")
    tmp = home / "spool" / "tmp"
    complete = tmp / (event["event_id"] + ".json.123.tmp")
    os.replace(ready, complete)  # the hook died after fsync, before the rename
    partial = tmp / "01ARZ3NDEKTSV4RRFFQ69G5FAV.json.124.tmp"
    partial.write_bytes(b'{"schema_version": 1, "event_')
    fresh = tmp / "01ARZ3NDEKTSV4RRFFQ69G5FAW.json.125.tmp"
    fresh.write_bytes(b"{")  # being written right now: left alone
    for path in (complete, partial):
        os.utime(path, (1, 1))
    stats, db = drain_now()
    assert (stats.recovered_tmp, stats.stored, stats.quarantined) == (1, 1, 1)
    assert os.listdir(tmp) == [fresh.name]


def test_secrets_are_scrubbed_from_every_field(make_event, drain_now):
    aws = "AKIA" + "IOSFODNN7EXAMPL" + "E"
    ghp = "ghp_" + "a1B2" * 9
    make_event("userPromptSubmit", prompt=f"deploy with key {aws} <private>my home address</private>")
    make_event(
        tool_name="shell",
        tool_input={"command": f"GITHUB_TOKEN={ghp} gh pr list", "<private>secret-key-name</private>": "v"},
        tool_response=f"Authorization: Bearer {ghp}\n",
    )
    make_event("stop", assistant_response=f"Used {aws}.", extra={"password": "hunter22"})
    stats, db = drain_now(flush=True)
    dump = "\n".join(
        str(tuple(r)) for t in ("events", "memory_records") for r in db.execute(f"select * from {t}")
    )
    for secret in (aws, ghp, "my home address", "secret-key-name", "hunter22"):
        assert secret not in dump, secret
    assert "<private>" not in dump
    assert stats.redactions["aws-access-key"] >= 2
    assert stats.redactions["private"] >= 2


def test_second_drainer_exits_saying_another_runs(make_event, home, write_config):
    write_config("[drain]\nlock_wait_seconds = 0.1\n")
    make_event(tool_name="shell")
    held = drain.lock()
    try:
        result = CliRunner().invoke(cli, ["drain", "--json"], env={"KIROLEARN_HOME": str(home)})
    finally:
        held.release()
    assert result.exit_code == 0
    assert json.loads(result.output)["locked"] is True
    assert spool.size() == 1


def test_cli_drain_json_and_export(make_event, home):
    make_event("userPromptSubmit", prompt="why is the build slow?")
    make_event(tool_name="shell", tool_input={"command": "make -j1"})
    make_event("stop", assistant_response="Parallel make fixed it.")
    runner = CliRunner()
    result = runner.invoke(cli, ["drain", "--json"], catch_exceptions=False)
    summary = json.loads(result.output)
    assert summary["events_read"] == 3 and summary["records_written"] == 1
    assert set(summary) >= {
        "events_read",
        "stored",
        "duplicates",
        "quarantined",
        "redactions",
        "batches_extracted",
        "records_written",
        "tokens_used",
    }
    lines = [json.loads(line) for line in runner.invoke(cli, ["export"]).output.splitlines()]
    assert [item["type"] for item in lines] == ["event"] * 3 + ["record"]
    assert lines[-1]["title"] == "why is the build slow?"
    assert runner.invoke(cli, ["drain"]).output.startswith("drain: 0 events read")


def test_export_without_a_database_says_what_to_do():
    result = CliRunner().invoke(cli, ["export"])
    assert result.exit_code == 1
    assert "no database at" in result.output and "kirolearn drain" in result.output


def test_bad_config_is_a_clear_error(write_config):
    write_config("[batch]\nmax_events = 0\n")
    result = CliRunner().invoke(cli, ["drain"])
    assert result.exit_code == 1
    assert "invalid setting 'batch.max_events'" in result.output


def test_status_on_a_fresh_home_creates_nothing(home):
    result = CliRunner().invoke(cli, ["status", "--json"], catch_exceptions=False)
    info = json.loads(result.output)
    assert info["spool"] == {"ready": 0, "oldest_age_seconds": None, "quarantined": 0, "kept": 0}
    assert info["database"] is None
    assert not home.exists()


def test_status_reports_spool_drain_and_fallback(make_event, home, write_config, drain_now):
    write_config('[extract]\nmodel = "openai/x"\ndaily_token_limit = 10\n')
    make_event("userPromptSubmit", prompt="a")
    make_event("stop", assistant_response="b")
    from kirolearn.pipeline.extract import Completion

    drain_now(complete=lambda m, c: Completion('{"records": []}', 20, 5))
    runner = CliRunner()
    runner.invoke(cli, ["drain"], catch_exceptions=False)  # records the drain run
    make_event(tool_name="shell")
    info = json.loads(runner.invoke(cli, ["status", "--json"], catch_exceptions=False).output)
    assert info["spool"]["ready"] == 1
    assert info["extractor"]["mode"] == "deterministic (daily limit reached)"
    assert info["extractor"]["tokens_today"] == 50  # the answer had no turn summary: asked once more
    assert info["database"]["events"] == 2 and info["database"]["last_drain"]["events_read"] == 0
    text = runner.invoke(cli, ["status"]).output
    assert "spool: 1 events waiting" in text and "daily limit reached" in text


def test_extracted_events_expire_after_retention(make_event, drain_now, write_config):
    write_config("[retention]\nevents_days = 30\n[batch]\nidle_seconds = 1e12\n")
    make_event("userPromptSubmit", prompt="old question", now=1_000_000_000.0, session_id="old")
    make_event("stop", assistant_response="old answer", now=1_000_000_001.0, session_id="old")
    make_event(
        "userPromptSubmit", prompt="pending, old, not extracted", now=1_000_000_000.0, session_id="open"
    )
    stats, db = drain_now()
    assert stats.records_written == 1 and stats.expired_events == 2
    assert db["events"].count == 1  # the unextracted one stays, however old
    assert db["memory_records"].count == 1  # records outlive their events


def test_export_includes_session_summaries(project, home):
    runner = CliRunner()
    runner.invoke(
        cli,
        ["session-end", "--session-id", "s1", "--summary", "done", "--project", str(project)],
        catch_exceptions=False,
    )
    lines = [json.loads(x) for x in runner.invoke(cli, ["export"]).output.splitlines()]
    assert [x["type"] for x in lines] == ["record", "summary"]
    assert lines[1]["summary"] == "done" and lines[1]["next_steps"] == []


def test_a_scrubbed_model_answer_is_clipped_again_not_fatal(make_event, drain_now, write_config):
    from kirolearn.pipeline.extract import Completion

    write_config('[extract]\nmodel = "openai/x"\n')
    make_event("userPromptSubmit", prompt="q")
    make_event("stop", assistant_response="a")
    title = "x" * 185 + " password=hunter2abc"  # the marker is longer than the secret
    answer = json.dumps(
        {"records": [{"observation_type": "session_summary", "title": title, "summary": "s"}]}
    )
    stats, db = drain_now(complete=lambda m, c: Completion(answer, 10, 5))
    (row,) = db.query("select title from memory_records")
    assert len(row["title"]) <= 200 and "hunter2" not in row["title"]
    assert stats.records_written == 1 and stats.pending_events == 0


def test_deeply_nested_spool_file_is_quarantined(home, drain_now, make_event):
    make_event(tool_name="shell")
    ready = home / "spool" / "ready"
    (ready / "01KB0000000000000000000000.json").write_text("[" * 200000 + "]" * 200000)
    stats, _ = drain_now()
    assert (stats.stored, stats.quarantined) == (1, 1)


def test_truncated_paths_are_scrubbed(make_event, drain_now):
    key = "AKIA" + "IOSFODNN7EXAMPL3"
    make_event(tool_name="x", tool_input={"<private>hunter2</private>": "y" * 40000, key: "z" * 40000})
    _, db = drain_now()
    body = db.execute("select body from events").fetchone()[0]
    assert "hunter2" not in body and key not in body


def test_two_real_turns_with_identical_stops_are_both_kept(make_event, drain_now):
    make_event("userPromptSubmit", prompt="continue", now=1_800_000_000.0)
    make_event("Stop", now=1_800_000_030.0)
    make_event("userPromptSubmit", prompt="go on", now=1_800_000_060.0)
    make_event("Stop", now=1_800_000_090.0)  # identical to the first Stop: v3 sends no text
    stats, _ = drain_now()
    assert (stats.stored, stats.duplicates, stats.records_written) == (4, 0, 2)


def test_dedup_window_includes_exactly_3_seconds(make_event, drain_now):
    call = dict(tool_name="shell", tool_input={"command": "make"}, tool_response="ok")
    make_event(now=1_800_000_000.0, **call)
    make_event(now=1_800_000_003.0, **call)
    stats, _ = drain_now()
    assert (stats.stored, stats.duplicates) == (1, 1)


def test_only_a_session_start_is_stored_once_per_session(project, drain_now):
    """Other lifecycle notes (Claude Code's PreCompact, SessionEnd, ...) repeat for real: the 3 s window applies."""
    from kirolearn.capture import events, spool

    for now in (1_800_000_000.0, 1_800_000_060.0):  # the context compacted twice, a minute apart
        event = events.build_event(
            "PreCompact",
            {"cwd": str(project), "session_id": "c1", "trigger": "auto"},
            now=now,
            agent="claude-code",
        )
        assert event["kind"] == "note" and event["trigger"] != "agentSpawn"
        spool.append(event["event_id"], events.serialize(event))
    stats, _ = drain_now()
    assert (stats.stored, stats.duplicates) == (2, 0)


# The content dedup's window is 3 s, not more (each test below kills the mutant that made it 10x longer).
T = 1_800_000_000.0


CALL = dict(
    tool_name="execute_bash",
    tool_input={"command": "make"},
    tool_response={"success": True, "result": ["ok"]},
)


def test_dedup_window_boundary_within_one_drain(make_event, drain_now):
    make_event(now=T, **CALL)
    make_event(now=T + 2.9, **CALL)  # a hook wired twice, firing late: one call
    make_event(now=T + 100, **CALL)
    make_event(now=T + 103.1, **CALL)  # 3.1 s apart: two calls
    make_event(now=T + 200, **CALL)
    make_event(now=T + 229, **CALL)  # 29 s apart: a 30 s window would merge these
    stats, db = drain_now()
    assert (stats.stored, stats.duplicates) == (5, 1)


def test_dedup_window_boundary_across_drains(make_event, drain_now):
    """The second copy arrives after the first was stored: the store's lookup decides."""
    make_event(now=T, **CALL)
    make_event(now=T + 100, **CALL)
    make_event(now=T + 200, **CALL)
    drain_now()
    make_event(now=T + 2.9, **CALL)
    make_event(now=T + 103.1, **CALL)
    make_event(now=T + 229, **CALL)
    stats, db = drain_now()
    assert (stats.stored, stats.duplicates) == (2, 1)
    assert db["events"].count == 5
