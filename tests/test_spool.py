"""The spool: atomic publish, private modes, ordering, quarantine; hostile entries (a FIFO, a link, a huge
file, a folder, a device) are quarantined unread."""

import json
import os
import stat

import pytest
from conftest import kl, ready, spool_events, stored_ids

from kirolearn.capture import events, spool


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_append_publishes_complete_private_files(home):
    path = spool.append("01ARZ3NDEKTSV4RRFFQ69G5FAV", b'{"a":1}')
    assert path == str(home / "spool" / "ready" / "01ARZ3NDEKTSV4RRFFQ69G5FAV.json")
    assert json.loads(open(path, "rb").read()) == {"a": 1}
    assert mode(path) == 0o600
    for d in (home, home / "spool", home / "spool" / "ready", home / "spool" / "tmp"):
        assert mode(d) == 0o700, d
    assert os.listdir(home / "spool" / "tmp") == []


def test_ready_files_are_in_arrival_order(home):
    ids = [events.new_ulid(1_700_000_000_000 + i) for i in (5, 1, 3)]
    for event_id in ids:
        spool.append(event_id, b"{}")
    names = [os.path.basename(p)[:-5] for p in spool.ready_files()]
    assert names == sorted(ids)
    assert spool.size() == 3


def test_missing_spool_reads_as_empty_and_creates_nothing(home):
    assert spool.ready_files() == []
    assert spool.size() == 0
    assert not home.exists()


def test_failed_write_leaves_no_tmp_file(home, monkeypatch):
    def boom(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="No space left"):
        spool.append("01ARZ3NDEKTSV4RRFFQ69G5FAV", b"{}")
    assert os.listdir(home / "spool" / "tmp") == []
    assert spool.size() == 0


def test_quarantine_moves_the_file_with_its_reason(home):
    path = spool.append("01ARZ3NDEKTSV4RRFFQ69G5FAV", b"not json")
    target = spool.quarantine(path, "not valid JSON")
    assert spool.size() == 0
    assert open(target, "rb").read() == b"not json"
    assert open(target + ".reason").read() == "not valid JSON\n"


def quarantined(home):
    qdir = home / "spool" / "quarantine"
    if not qdir.exists():
        return {}
    return {
        p.name: (qdir / (p.name + ".reason")).read_text()
        for p in qdir.iterdir()
        if not p.name.endswith(".reason")
    }


def _name():
    from kirolearn.core.ids import new_ulid

    return new_ulid() + ".json"


def test_hostile_spool_entries_are_quarantined_unread(home, project, tmp_path):
    good = spool_events(project, 3)
    ready_dir = home / "spool" / "ready"
    fifo, link, big, folder = _name(), _name(), _name(), _name()
    os.mkfifo(ready_dir / fifo)
    outside = tmp_path / "outside.json"  # a valid event, but not in the spool
    event = events.build_event("postToolUse", {"cwd": str(project), "session_id": "evil", "tool_name": "x"})
    outside.write_bytes(events.serialize(event))
    os.symlink(outside, ready_dir / (event["event_id"] + ".json"))
    link = event["event_id"] + ".json"
    with open(ready_dir / big, "wb") as fh:  # 200 MB, sparse: quarantined by its size, never read
        fh.truncate(200 * 1024 * 1024)
    (ready_dir / folder).mkdir()
    device = None
    if os.geteuid() == 0:
        device = _name()
        os.mknod(ready_dir / device, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers

    result = kl("drain", "--json", timeout=60)  # a FIFO once hung the drain for ever
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["stored"] == 3 and stored_ids(home) == set(good)
    reasons = quarantined(home)
    assert "FIFO" in reasons[fifo]
    assert "symbolic link" in reasons[link] and "evil" not in json.dumps(stats)
    assert "209715200 bytes" in reasons[big] and "not read" in reasons[big]
    assert "directory" in reasons[folder]
    if device:
        assert "device" in reasons[device]
    assert os.path.islink(home / "spool" / "quarantine" / link)  # the link itself moved, its target untouched
    assert outside.read_bytes() == events.serialize(event)
    assert ready(home) == []


def test_read_entry_refuses_a_file_that_grew_past_the_cap(tmp_path):
    path = tmp_path / "x.json"
    path.write_bytes(b"{}")
    assert spool.read_entry(str(path)) == b"{}"
    path.write_bytes(b" " * 2000)
    with pytest.raises(spool.BadEntry, match="2000 bytes"):
        spool.read_entry(str(path), limit=1000)
