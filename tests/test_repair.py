"""A damaged or lost database: drains keep the spool, commands say so in one `Error:` line and never
start afresh, and `kirolearn repair` brings the store back (the real commands in a temporary home)."""

import json
import os
import random
import shutil

import pytest
from conftest import assert_one_error, cli, kl, ready, spool_events, stored_ids
from helpers import corrupt


def test_a_corrupt_database_keeps_the_spool_and_repair_brings_it_back(home, project, filled):
    corrupt(home / "kirolearn.db")
    new = spool_events(project, 5, session="new")
    assert_one_error(kl("drain"), "damaged", "kirolearn repair")
    assert ready(home) == sorted(i + ".json" for i in new)  # nothing was taken
    for command in (["status"], ["export"], ["status", "--json"]):
        assert_one_error(cli(*command), "damaged")
    doctor = cli("doctor", "--json")
    assert doctor.returncode == 1
    checks = json.loads(doctor.stdout)["checks"]
    assert any(c["level"] == "FAIL" and "repair" in c["message"] for c in checks)
    assert any(
        c["level"] == "FAIL" and "last drain" in c["message"] and "damaged" in c["message"] for c in checks
    )

    repaired = cli("repair", "--json")
    assert repaired.returncode == 0, repaired.stderr
    report = json.loads(repaired.stdout)
    assert report["repaired"] and report["state_before"] == "damaged"
    assert report["method"] in ("sqlite3 .recover", "row-by-row salvage (Python sqlite3)")
    assert report["backups"] and all(os.path.exists(p) for p in report["backups"])
    assert os.stat(report["backups"][0]).st_mode & 0o777 == 0o600
    assert report["reingested"] == 5 and ready(home) == []
    recovered = report["recovered"]["events"]
    assert 0 < recovered <= 200 and report["lost_events"] == 200 - recovered
    assert report["events"] == recovered + 5
    ids = stored_ids(home)
    assert set(new) <= ids and ids <= set(filled) | set(new)
    assert cli("doctor", "--json").stdout.count('"FAIL"') == 0
    assert cli("export").returncode == 0


def test_a_healthy_database_needs_no_repair(home, filled):
    result = cli("repair")
    assert result.returncode == 0 and result.stdout.startswith("nothing to repair: quick_check ok")


@pytest.mark.parametrize("how", ["truncate", "delete"])
def test_a_lost_database_is_reported_not_recreated(home, project, filled, how):
    db = home / "kirolearn.db"
    if how == "truncate":
        db.write_bytes(b"")
    else:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(str(db) + suffix):
                os.remove(str(db) + suffix)
    new = spool_events(project, 4, session="after")
    assert_one_error(cli("drain"), "200 events", "kirolearn repair")
    assert_one_error(cli("status"), "200 events")
    assert_one_error(cli("export"), "200 events")
    assert len(ready(home)) == 4
    assert not db.exists() or db.stat().st_size == 0  # nothing silently recreated
    report = json.loads(cli("repair", "--json").stdout)
    assert report["state_before"] == "lost" and report["reingested"] == 4 and report["lost_events"] == 200
    assert stored_ids(home) == set(new)
    assert cli("drain").returncode == 0


def test_a_lost_database_counts_records_written_between_drains(home, project):
    # save-summary writes a record directly; the drain after it reads no event but must still count it.
    summary = [
        "save-summary",
        "--project",
        str(project),
        "--request",
        "Fix login",
        "--investigated",
        "auth.py",
        "--learned",
        "SQL built with %",
        "--completed",
        "parameterised",
        "--next-steps",
        "orders.py",
    ]
    assert cli(*summary).returncode == 0
    assert cli("drain").returncode == 0
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(str(home / "kirolearn.db") + suffix):
            os.remove(str(home / "kirolearn.db") + suffix)
    assert_one_error(
        cli("drain"), "held at least 0 events and 1 record at the last drain", "kirolearn repair"
    )


def test_repair_of_a_lost_database_reads_as_sentences(home, project):
    drained = spool_events(project, 2)
    assert cli("drain").returncode == 0
    (home / "kirolearn.db").write_bytes(b"")
    repaired = cli("repair")
    assert "recovered: nothing (the database file was missing or empty)" in repaired.stdout
    assert "recovered with none" not in repaired.stdout
    assert "2 of them kept in spool/done/" in repaired.stdout  # the write-ahead log brings them back
    assert "not recoverable" not in repaired.stdout and repaired.returncode == 0
    assert stored_ids(home) == set(drained)


def test_repair_of_a_lost_database_without_its_log_saves_nothing(home, project):
    spool_events(project, 2)
    assert cli("drain").returncode == 0
    shutil.rmtree(home / "spool" / "done")  # the log gone too: nothing can come back
    (home / "kirolearn.db").write_bytes(b"")
    repaired = cli("repair")
    assert "not recoverable: 2 events" in repaired.stdout
    assert (
        repaired.returncode == 1 and "repair saved nothing" in repaired.stderr
    )  # never "repaired" when it is not


def test_repair_says_what_was_lost_and_fails_when_page_one_is_destroyed(home, project, filled):
    """Page 1 holds the header and the schema: without it nothing can be read back, and repair must say so."""
    with open(home / "kirolearn.db", "r+b") as fh:
        fh.write(random.Random(7).randbytes(4096))
    repaired = cli("repair", "--json")
    report = json.loads(repaired.stdout)
    assert report["rebuilt"] and report["recovered"] == {} and (report["events"], report["records"]) == (0, 0)
    assert (report["lost_events"], report["lost_records"]) == (200, report["held_before"]["records"])
    assert report["lost_records"] > 0 and report["nothing_saved"] and not report["repaired"]
    assert repaired.returncode == 1


def test_read_only_commands_create_no_database_on_a_fresh_home(home, project):
    (home / "logs").mkdir(parents=True)
    (home / "logs" / "drain.log").write_text("password=hunter2hunter2\n")
    rescrub = cli("rescrub")
    assert rescrub.returncode == 0 and "Nothing to rescrub: there is no database yet" in rescrub.stdout
    assert "hunter2" not in (home / "logs" / "drain.log").read_text()  # the logs are still cleaned
    assert json.loads(cli("rescrub", "--json").stdout)["rows_changed"] == {}
    reindex = cli("reindex")
    assert reindex.returncode == 0 and "Nothing to reindex" in reindex.stdout
    assert json.loads(cli("reindex", "--json").stdout)["embedded"] == 0
    init = cli("session-init", "--json", "--project", str(project))
    assert init.returncode == 0 and json.loads(init.stdout)["found"] is False
    assert "fresh start" in cli("session-init", "--project", str(project)).stdout
    assert not (home / "kirolearn.db").exists() and not (home / "state" / "store.json").exists()


def test_a_fresh_home_starts_a_database_silently(home, project):
    spool_events(project, 2)
    assert cli("drain").returncode == 0 and len(stored_ids(home)) == 2
