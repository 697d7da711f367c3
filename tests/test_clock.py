"""A wrong clock never destroys: retention purges a forgotten record only when its age is due on
PURGE_AFTER_PASSES drain passes in a row, and a time in the future is never old (the real `kirolearn`
console script, its clock moved by KIROLEARN_NOW)."""

import json
import time

import pytest
from conftest import cli, hook_env, kl

from kirolearn.core import isotime
from kirolearn.pipeline.drain import PURGE_AFTER_PASSES
from kirolearn.store import state

DAY = 86400


def clock(offset_seconds):
    """The environment of a command whose clock is `offset_seconds` off the real one."""
    return hook_env(KIROLEARN_NOW=str(time.time() + offset_seconds))


def status(rid):
    shown = kl("show", rid, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["status"]


@pytest.fixture
def forgotten(add_record, project, monkeypatch):
    """A record about quokkas, forgotten by the real command under the clock it is given."""
    monkeypatch.chdir(project)

    def make(offset_seconds):
        rid = add_record(project, "A note about quokkas to forget")
        assert kl("forget", rid, env=clock(offset_seconds)).returncode == 0
        return rid

    return make


def test_the_tests_clock_moves_every_stamp(monkeypatch):
    monkeypatch.setenv("KIROLEARN_NOW", "2030-01-02T03:04:05Z")
    assert isotime.now_iso() == "2030-01-02T03:04:05.000Z"
    monkeypatch.setenv("KIROLEARN_NOW", "nan")  # no clock: the system's
    assert abs(isotime.now() - time.time()) < 60


def test_a_forget_under_a_clock_40_days_behind_is_not_purged_by_the_next_drain(forgotten):
    rid = forgotten(-40 * DAY)
    assert kl("drain").returncode == 0  # the clock is right again: the tombstone reads 40 days old
    assert status(rid) == "forgotten"
    assert state.read(state.PURGE)["due"] == {rid: 1}
    for _ in range(PURGE_AFTER_PASSES - 2):
        assert cli("drain").returncode == 0
    assert status(rid) == "forgotten"
    assert cli("drain").returncode == 0  # the tenth pass in a row on which it is due
    assert status(rid) == "purged"


def test_one_drain_under_a_clock_31_days_ahead_purges_nothing(forgotten, monkeypatch):
    rid = forgotten(0)
    assert kl("drain", env=clock(31 * DAY)).returncode == 0
    assert status(rid) == "forgotten"
    assert kl("drain").returncode == 0  # the clock is right again: not due, the count starts over
    assert state.read(state.PURGE)["due"] == {}
    for _ in range(PURGE_AFTER_PASSES):  # every other pass runs ahead: never ten in a row
        monkeypatch.setenv("KIROLEARN_NOW", str(time.time() + 31 * DAY))
        assert cli("drain").returncode == 0
        monkeypatch.delenv("KIROLEARN_NOW")
        assert cli("drain").returncode == 0
    assert status(rid) == "forgotten"


def test_a_forget_stamped_in_the_future_is_never_old(forgotten):
    rid = forgotten(40 * DAY)
    for _ in range(PURGE_AFTER_PASSES + 1):
        assert cli("drain").returncode == 0
    assert status(rid) == "forgotten" and state.read(state.PURGE).get("due", {}) == {}
