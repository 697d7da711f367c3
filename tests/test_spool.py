"""The spool's write side: atomic publish, private modes, ordering, quarantine."""

import json
import os
import stat

import pytest

from kirolearn.capture import events
from kirolearn.capture import spool


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
