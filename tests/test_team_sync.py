"""Team sync (kirolearn.team.sync) over the store contract: two homes, one team store.

The team store here is a second SQLite store: sync is written against
kirolearn.store.base.Store only, so what holds for it holds for PostgreSQL,
which passes the same contract suite (the two-developer test runs it there).
"""

import json

import pytest
from store_contract import event, record, run_row

from kirolearn.core import paths
from kirolearn.store import state
from kirolearn.store.sqlite.store import SqliteStore
from kirolearn.team import sync as team_sync


@pytest.fixture
def team(tmp_path):
    st = SqliteStore(str(tmp_path / "team.db"))
    yield st
    st.close()


@pytest.fixture
def homes(tmp_path):
    """Two developers' homes, each with its own local store."""
    made = {}
    for name in ("ana", "ben"):
        home = tmp_path / f"home-{name}"
        with paths.using_home(str(home)):
            made[name] = (str(home), SqliteStore(str(home / "kirolearn.db")))
    yield made
    for _, st in made.values():
        st.close()


def sync(homes, who, team, projects=("shared",)):
    home, local = homes[who]
    with paths.using_home(home):
        return team_sync.sync(local, team, list(projects), me=who)


def drained(local, n, *, project="shared", **fields):
    local.add_events([event(n, project=project)])
    local.commit_extraction(
        run_row(n), [record(n, project=project, events=[f"ev{n:04d}"], **fields)], [f"ev{n:04d}"]
    )


def test_a_shared_record_reaches_the_other_developer(homes, team):
    _, ana = homes["ana"]
    _, ben = homes["ben"]
    drained(ana, 1, summary="the nightly job times out: orders.created_at has no index")
    drained(ana, 2, project="private", summary="my own side project")
    sent = sync(homes, "ana", team)
    assert (sent.events_sent, sent.records_sent, sent.error) == (1, 1, "")
    assert team.event_ids_present(["ev0001", "ev0002"]) == {"ev0001"}  # nothing of an unshared project leaves
    got = sync(homes, "ben", team)
    assert got.records_received == 1 and got.error == ""
    (hit,) = ben.search(["nightly"], project_id="shared")
    assert hit["record_id"] == "mr_0001"
    assert ben.search(["side"]) == [] and ben.get_record("mr_0002") is None


def test_sync_again_moves_nothing_twice(homes, team):
    _, ana = homes["ana"]
    for n in range(1, 4):
        drained(ana, n)
    first = sync(homes, "ana", team)
    again = sync(homes, "ana", team)
    assert (first.events_sent, first.records_sent) == (3, 3)
    assert (again.events_sent, again.records_sent, again.records_received) == (0, 0, 0)
    with paths.using_home(homes["ana"][0]):
        state.write(team_sync.STATE, {})  # a lost state file: everything is sent again, nothing stored twice
    resent = sync(homes, "ana", team)
    assert (resent.events_sent, resent.records_sent, resent.error) == (0, 0, "")
    assert team.figures("2026-01-01T00:00:00.000Z")["events"] == 3
    assert team.figures("2026-01-01T00:00:00.000Z")["records"] == 3


def test_many_pages_of_events_and_records(homes, team, monkeypatch):
    monkeypatch.setattr(team_sync, "PAGE", 7)
    _, ana = homes["ana"]
    for n in range(1, 31):
        drained(ana, n)
    sent = sync(homes, "ana", team)
    assert (sent.events_sent, sent.records_sent) == (30, 30)
    assert sync(homes, "ben", team).records_received == 30


def test_forgetting_a_teammates_record_stays_local(homes, team):
    _, ana = homes["ana"]
    _, ben = homes["ben"]
    drained(ana, 1, summary="rotate the staging token monthly")
    sync(homes, "ana", team)
    sync(homes, "ben", team)
    ben.forget(["mr_0001"], reason="not for me", actor="cli")
    out = sync(homes, "ben", team)
    assert out.forgets_sent == 0
    assert team.get_record("mr_0001") is not None  # still the team's memory
    assert ben.get_record("mr_0001") is None  # and still forgotten here, even after another pull
    sync(homes, "ben", team)
    assert ben.get_record("mr_0001") is None


def test_a_team_store_that_is_down_costs_nothing(homes, team):
    _, ana = homes["ana"]
    drained(ana, 1)

    class Down:
        def __getattr__(self, name):
            def fail(*args, **kwargs):
                raise ConnectionError("connection refused (team store at postgresql://db.example/team)")

            return fail

    out = sync(homes, "ana", Down())
    assert "ConnectionError" in out.error and "refused" in out.error
    with paths.using_home(homes["ana"][0]):
        found = team_sync.cache_state()
        assert found["last_error"] == out.error and found["last_ok_at"] is None
    ok = sync(homes, "ana", team)  # the server is back: what waited goes up
    assert (ok.events_sent, ok.records_sent, ok.error) == (1, 1, "")
    with paths.using_home(homes["ana"][0]):
        assert team_sync.cache_state()["last_ok_at"] and team_sync.cache_state()["last_error"] == ""


def test_text_scrubbed_with_older_rules_is_scrubbed_again_on_its_way_out(homes, team):
    from kirolearn.settings import Settings
    from kirolearn.store.sqlite import scrubbing

    home, ana = homes["ana"]
    leaked = "AKIA" + "QW3RTY7UIOPA5SDF"  # an AWS access key id the current rules catch
    ana.add_events([dict(event(1, project="shared"), body=json.dumps({"prompt": f"use {leaked} for s3"}))])
    ana.add_records([record(1, project="shared", summary=f"the deploy uses {leaked}")])
    scrubbing.finish(ana.db, 1)  # stored under rules version 1: older than the installed ones
    with paths.using_home(home):
        scrub = team_sync.outbound_scrubber(Settings(), ana)
        assert scrub is not None
        sent = team_sync.sync(ana, team, ["shared"], me="ana", scrub=scrub)
    assert (sent.events_sent, sent.records_sent) == (1, 1)
    assert leaked not in json.dumps(list(team.export_objects()))
    assert leaked in ana.get_record("mr_0001")["summary"]  # the local store is rescrub's job, not the sync's


def test_text_scrubbed_with_the_current_rules_goes_out_as_it_is(homes):
    from kirolearn.privacy.scrub import rules_version
    from kirolearn.settings import Settings
    from kirolearn.store.sqlite import scrubbing

    home, ana = homes["ana"]
    scrubbing.finish(ana.db, rules_version())
    with paths.using_home(home):
        assert team_sync.outbound_scrubber(Settings(), ana) is None


def authored(local, n, who, *, project="shared", **fields):
    """A turn drained by `who` (the record carries its author, as attribution does)."""
    local.add_events([event(n, project=project)])
    made = dict(record(n, project=project, events=[f"ev{n:04d}"], **fields), actor=who)
    local.commit_extraction(run_row(n), [made], [f"ev{n:04d}"])


def test_restoring_my_own_record_restores_it_team_wide(homes, team):
    _, ana = homes["ana"]
    _, ben = homes["ben"]
    authored(ana, 1, "ana", summary="cap the export retries at three")
    sync(homes, "ana", team)
    sync(homes, "ben", team)
    ana.forget(["mr_0001"], reason="wrong", actor="cli")
    assert sync(homes, "ana", team).forgets_sent == 1
    assert sync(homes, "ben", team).forgets_received == 1
    assert team.get_record("mr_0001") is None and ben.get_record("mr_0001") is None
    assert ben.tombstones(["mr_0001"])["mr_0001"]["actor"] == "team:ana"

    ana.restore(["mr_0001"], actor="cli")
    out = sync(homes, "ana", team)
    assert (out.restores_sent, out.error) == (1, "")
    assert team.get_record("mr_0001")["summary"] == "cap the export retries at three"
    got = sync(homes, "ben", team)
    assert (got.restores_received, got.error) == (1, "")
    assert [h["record_id"] for h in ben.search(["retries"], project_id="shared")] == ["mr_0001"]
    again = (sync(homes, "ana", team), sync(homes, "ben", team))  # nothing moves twice
    assert [(s.restores_sent, s.restores_received, s.forgets_sent, s.forgets_received) for s in again] == [
        (0, 0, 0, 0),
        (0, 0, 0, 0),
    ]


def test_a_teammates_own_forget_stays_after_the_author_restores(homes, team):
    _, ana = homes["ana"]
    _, ben = homes["ben"]
    authored(ana, 1, "ana", summary="rotate the staging token monthly")
    sync(homes, "ana", team)
    sync(homes, "ben", team)
    ben.forget(["mr_0001"], reason="not for me", actor="cli")  # ben's own, local forget
    ana.forget(["mr_0001"], reason="wrong", actor="cli")
    sync(homes, "ana", team)
    sync(homes, "ben", team)
    ana.restore(["mr_0001"], actor="cli")
    assert sync(homes, "ana", team).restores_sent == 1
    got = sync(homes, "ben", team)
    assert got.restores_received == 0 and got.error == ""
    assert ben.get_record("mr_0001") is None  # ben forgot it himself: it stays forgotten for him
    assert ben.tombstones(["mr_0001"])["mr_0001"]["actor"] == "cli"
    assert team.get_record("mr_0001") is not None


def test_restoring_a_teammates_record_stays_local(homes, team):
    _, ana = homes["ana"]
    _, ben = homes["ben"]
    authored(ana, 1, "ana")
    sync(homes, "ana", team)
    sync(homes, "ben", team)
    ana.forget(["mr_0001"], reason="wrong", actor="cli")
    sync(homes, "ana", team)
    sync(homes, "ben", team)
    ben.restore(["mr_0001"], actor="cli")  # ben brings ana's forgotten record back for himself only
    assert sync(homes, "ben", team).restores_sent == 0
    assert team.get_record("mr_0001") is None and ben.get_record("mr_0001") is not None


def test_a_forget_from_my_other_machine_is_not_undone_by_a_record_this_home_pulled(homes, team):
    """ana on two laptops: laptop 1 pulled her record made on laptop 2, then laptop 2 forgot it team-wide."""
    home1, laptop1 = homes["ana"]
    home2, laptop2 = homes["ben"]  # ana's second home

    def sync_on(home, local):
        with paths.using_home(home):
            return team_sync.sync(local, team, ["shared"], me="ana")

    authored(laptop2, 1, "ana", summary="cap the export retries at three")
    sync_on(home2, laptop2)
    assert sync_on(home1, laptop1).records_received == 1  # in laptop 1's feed now, not sent up yet
    laptop2.forget(["mr_0001"], reason="wrong", actor="cli")
    assert sync_on(home2, laptop2).forgets_sent == 1
    out = sync_on(home1, laptop1)  # its upload sees a record of ana's, live here, tombstoned on the team
    assert (out.restores_sent, out.forgets_received, out.error) == (0, 1, "")
    assert team.get_record("mr_0001") is None and laptop1.get_record("mr_0001") is None


def test_purging_my_forgotten_record_purges_it_team_wide(homes, team):
    _, ana = homes["ana"]
    _, ben = homes["ben"]
    secret = "the staging db password is in vault path ops/stg-7"
    authored(ana, 1, "ana", summary=secret)
    sync(homes, "ana", team)
    sync(homes, "ben", team)
    ana.forget(["mr_0001"], reason="leaked", actor="cli")
    sync(homes, "ana", team)
    sync(homes, "ben", team)
    assert (
        secret in ben.db.execute("select payload from forgotten_records").fetchone()[0]
    )  # the cache's tombstone
    assert ana.purge(["mr_0001"], actor="cli") == 1
    out = sync(homes, "ana", team)
    assert (out.purges_sent, out.error) == (1, "")
    tomb = team.tombstones(["mr_0001"])["mr_0001"]
    assert tomb["purged"] and tomb["record_hash"]
    assert secret not in json.dumps(list(team.export_objects()))
    assert team.event_ids_present(["ev0001"]) == set()  # its source event left the team store too
    got = sync(homes, "ben", team)
    assert (got.purges_received, got.error) == (1, "")
    assert ben.tombstones(["mr_0001"])["mr_0001"]["purged"]
    assert (
        ben.db.execute(
            "select count(*) from forgotten_records where payload like ?", [f"%{secret}%"]
        ).fetchone()[0]
        == 0
    )
    assert (
        team.add_records([dict(record(1, project="shared", summary=secret), actor="ana")]) == 0
    )  # never back


def test_forgetting_and_purging_before_a_sync_still_reaches_the_team(homes, team):
    _, ana = homes["ana"]
    authored(ana, 1, "ana", summary="a token that leaked")
    sync(homes, "ana", team)
    ana.forget(["mr_0001"], reason="leaked", actor="cli")
    ana.purge(["mr_0001"], actor="cli")  # the local tombstone no longer says who made the record
    out = sync(homes, "ana", team)
    assert (out.forgets_sent, out.purges_sent, out.error) == (1, 1, "")
    assert team.tombstones(["mr_0001"])["mr_0001"]["purged"]


def test_purging_a_teammates_record_stays_local(homes, team):
    _, ana = homes["ana"]
    _, ben = homes["ben"]
    authored(ana, 1, "ana", summary="rotate the staging token monthly")
    sync(homes, "ana", team)
    sync(homes, "ben", team)
    ben.forget(["mr_0001"], reason="not for me", actor="cli")
    ben.purge(["mr_0001"], actor="cli")
    out = sync(homes, "ben", team)
    assert (out.forgets_sent, out.purges_sent) == (0, 0)
    assert team.get_record("mr_0001")["summary"] == "rotate the staging token monthly"


def test_superseded_and_merged_marks_reach_the_team_and_the_teammate_and_stop_there(homes, team):
    _, ana = homes["ana"]
    _, ben = homes["ben"]
    for n in range(1, 4):
        drained(ana, n)
    sync(homes, "ana", team)
    assert sync(homes, "ben", team).records_received == 3
    # ana's drain marks two of them (issue #31); the marks travel, once
    assert (
        ana.apply_marks(
            [
                {"record_id": "mr_0001", "superseded_by": "mr_0002"},
                {"record_id": "mr_0003", "merged_into": "mr_0002"},
            ],
            actor="drain",
        )
        == 2
    )
    sent = sync(homes, "ana", team)
    assert sent.marks_sent == 2 and sent.records_sent == 0 and sent.error == ""
    assert team.get_record("mr_0001")["superseded_by"] == "mr_0002"
    got = sync(homes, "ben", team)
    assert got.marks_received == 2 and got.records_received == 0
    assert ben.get_record("mr_0003")["merged_into"] == "mr_0002"
    assert (sync(homes, "ana", team).marks_received, sync(homes, "ben", team).marks_sent) == (0, 0)
    # ben restores the superseded one: the cleared mark goes back the same way
    assert ben.apply_marks([{"record_id": "mr_0001", "superseded_by": None}], actor="cli") == 1
    assert sync(homes, "ben", team).marks_sent == 1
    assert sync(homes, "ana", team).marks_received == 1 and ana.get_record("mr_0001")["superseded_by"] is None


def test_a_mark_change_reaches_the_team_and_the_other_developer_once(homes, team):
    """Issue #31: ana's drain marks her record deleted; the mark goes up, comes down to ben, and stops."""
    _, ana = homes["ana"]
    _, ben = homes["ben"]
    drained(ana, 1, summary="wrote src/gone.py")
    sync(homes, "ana", team)
    sync(homes, "ben", team)
    assert ben.get_record("mr_0001")["freshness"] == "current"
    ana.set_marks(
        [{"record_id": "mr_0001", "freshness": "deleted", "reason": "src/gone.py: deleted"}], actor="drain"
    )
    sent = sync(homes, "ana", team)
    assert sent.marks_sent == 1 and team.get_record("mr_0001")["freshness"] == "deleted"
    got = sync(homes, "ben", team)
    assert got.marks_received == 1 and ben.get_record("mr_0001")["freshness"] == "deleted"
    # what came down and goes up again is no change: nothing more moves, both ways
    assert sync(homes, "ben", team).marks_sent == 0
    assert (sync(homes, "ana", team).marks_received, sync(homes, "ben", team).marks_received) == (0, 0)
    assert ana.get_record("mr_0001")["freshness"] == "deleted"


def test_all_four_marks_travel_together_each_counted_once(homes, team):
    """Issue #31, both halves: freshness/outcome (set_marks, the feed's 'mark') and superseded_by/merged_into
    (apply_marks, the feed's 'record') of one record go up and come down in one sync, each mark counted once."""
    _, ana = homes["ana"]
    _, ben = homes["ben"]
    for n in range(1, 3):
        drained(ana, n)
    sync(homes, "ana", team)
    assert sync(homes, "ben", team).records_received == 2
    assert (
        len(
            ana.set_marks(
                [
                    {
                        "record_id": "mr_0001",
                        "freshness": "changed",
                        "outcome": "failed",
                        "reason": "src/app.py: changed",
                    }
                ],
                actor="drain",
            )
        )
        == 1
    )
    assert ana.apply_marks([{"record_id": "mr_0001", "superseded_by": "mr_0002"}], actor="drain") == 1
    sent = sync(homes, "ana", team)
    assert (sent.marks_sent, sent.records_sent, sent.error) == (3, 0, "")
    got = sync(homes, "ben", team)
    assert (got.marks_received, got.records_received) == (3, 0)
    mine = ben.get_record("mr_0001")
    assert (mine["freshness"], mine["outcome"], mine["superseded_by"]) == ("changed", "failed", "mr_0002")
    assert (sync(homes, "ben", team).marks_sent, sync(homes, "ana", team).marks_received) == (0, 0)
