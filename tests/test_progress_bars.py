"""Progress bars of hand-run backfills (issue #32): a `kirolearn import` of a big file and a `kirolearn
drain` that derives the expansions of what it imported show a bar on stderr when it is a terminal (a real
pseudo-terminal here), and nothing when stderr is not one (cron, systemd, launchd, the tests' pipes)."""

import json
import os
import pty
import select
import subprocess

import pytest
from conftest import BIN

from kirolearn.store.sqlite import db as store


def export_file(tmp_path, add_record, project, count: int):
    """An export of `count` records (one real record's line, cloned with new ids), about 1 kB each."""
    add_record(project, "Export retry", "the exporter retries three times " * 20, concepts=["export"])
    exported = subprocess.run(
        [str(BIN / "kirolearn"), "export"], capture_output=True, text=True, check=True
    ).stdout
    line = next(json.loads(x) for x in exported.splitlines() if json.loads(x)["type"] == "record")
    path = tmp_path / "big.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for i in range(count):
            out.write(
                json.dumps(
                    dict(
                        line,
                        record_id=f"mr_{i:026d}",
                        record_hash=f"h{i}",
                        session_id=f"s{i // 20}",
                        source_event_ids=[f"{i:026d}"],
                    )
                )
                + "\n"
            )
    return path


def on_pty(args) -> "tuple[int, str, str]":
    """(exit status, stdout, stderr) of a kirolearn command whose stderr is a pseudo-terminal."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [str(BIN / "kirolearn"), *args], stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL
    )
    os.close(slave)
    seen = b""
    while True:  # read the terminal until the child closes it (EIO on Linux once it exits)
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    out = proc.stdout.read().decode()
    code = proc.wait(timeout=60)
    os.close(master)
    return code, out, seen.decode(errors="replace")


def pending_expansions() -> int:
    db = store.open_db()
    try:
        return next(db.query("select count(*) as n from memory_records where expansion is null"))["n"]
    finally:
        db.conn.close()


@pytest.fixture
def big_export(tmp_path, add_record, project, home, monkeypatch):
    path = export_file(tmp_path, add_record, project, 600)
    assert path.stat().st_size > 256 * 1024  # over the import bar's floor (cli/manage.IMPORT_BAR_BYTES)
    monkeypatch.setenv("KIROLEARN_HOME", str(tmp_path / "fresh-home"))
    return path


def test_a_terminal_sees_the_import_and_the_expansion_backfill(big_export):
    code, out, err = on_pty(["import", str(big_export)])
    assert code == 0, err
    assert "importing" in err and "100%" in err
    assert "records 600 added" in out  # the summary stays on stdout
    assert pending_expansions() == 600
    code, out, err = on_pty(["drain"])
    assert code == 0, err
    assert "expanding" in err and "100%" in err
    assert pending_expansions() == 0


def test_no_terminal_no_bar(big_export):
    done = subprocess.run([str(BIN / "kirolearn"), "import", str(big_export)], capture_output=True, text=True)
    assert done.returncode == 0 and "records 600 added" in done.stdout
    assert "importing" not in done.stderr + done.stdout
    done = subprocess.run([str(BIN / "kirolearn"), "drain"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert pending_expansions() == 0  # the backfill ran all the same
    assert "expanding" not in done.stderr + done.stdout and "%" not in done.stderr


def test_bars_skip_small_work_and_follow_each_phase():
    import io

    from kirolearn.cli.progress import Bars

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    bars = Bars(screen, minimum=10)
    assert bars.phase("tiny", 3) is None  # small work: no bar
    first = bars.phase("embedding")  # sized by the first update's own total
    first(5, 50)
    first(50, 50)
    second = bars.phase("checking freshness", 20)
    first(60, 60)  # a phase that ended draws nothing more
    second(20)
    bars.close()
    text = screen.getvalue()
    assert "embedding" in text and "checking freshness" in text and "tiny" not in text
    assert "60" not in text.replace("100%", "")
