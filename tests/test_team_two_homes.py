"""Two developers, two homes, one repository cloned at two paths: identity, sharing, attribution and sync together.

The real hook code spools the events, the real drain stores them, `kirolearn team join` chooses what
is shared, and kirolearn.pipeline.team_sync carries it through a team store, here a SQLite store
(sync is written against the store contract; the PostgreSQL store passes the same contract).
"""

import json

import pytest
from click.testing import CliRunner

from kirolearn import config, team
from kirolearn import project as projects
from kirolearn.cli import cli
from kirolearn.pipeline import team_sync
from kirolearn.store.sqlite import SqliteStore


def clone(path, url):
    (path / ".git").mkdir(parents=True)
    (path / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {url}\n')
    return path


@pytest.fixture
def world(tmp_path):
    projects.forget_cached_ids()
    devs = {
        "ana": {"home": tmp_path / "ana" / ".kirolearn",
                "shop": clone(tmp_path / "ana" / "src" / "shop", "git@github.com:acme/shop.git")},
        "ben": {"home": tmp_path / "ben" / ".kirolearn",
                "shop": clone(tmp_path / "ben" / "work" / "shop-clone", "https://ben:tok@github.com/Acme/shop"),
                "side": clone(tmp_path / "ben" / "side", "git@github.com:ben/side.git")},
    }
    team_store = SqliteStore(str(tmp_path / "team.db"))
    yield devs, team_store
    team_store.close()
    projects.forget_cached_ids()


def cli_as(dev, *args):
    result = CliRunner().invoke(cli, list(args), env={"KIROLEARN_HOME": str(dev["home"]), "KIROLEARN_ACTOR": None})
    assert result.exit_code == 0, result.output
    return result.output


def turn(dev, where, session, prompt, answer):
    """One prompt and its answer, spooled by the hook's own code."""
    from kirolearn.capture import events as ev
    from kirolearn.capture import spool

    with config.using_home(str(dev["home"])):
        for name, payload in (("userPromptSubmit", {"prompt": prompt}), ("stop", {"assistant_response": answer})):
            event = ev.build_event(name, {"cwd": str(dev[where]), "session_id": session, **payload})
            spool.append(event["event_id"], ev.serialize(event))


def sync_as(dev, name, team_store):
    with config.using_home(str(dev["home"])):
        local = SqliteStore(config.db_path())
        try:
            return team_sync.sync(local, team_store, sorted(team.shared_project_ids()), me=name)
        finally:
            local.close()


def test_what_ana_learns_in_her_clone_reaches_bens_clone_and_nothing_else(world, monkeypatch):
    devs, team_store = world
    ana, ben = devs["ana"], devs["ben"]
    monkeypatch.setenv("USER", "ana")
    turn(ana, "shop", "s-ana", "why does the nightly export job time out",
         "The nightly export scans orders: orders.created_at has no index, so add one.")
    cli_as(ana, "drain", "--flush")
    cli_as(ana, "team", "join", "--project", str(ana["shop"]))
    sent = sync_as(ana, "ana", team_store)
    assert sent.error == "" and sent.records_sent >= 1 and sent.events_sent == 2

    monkeypatch.setenv("USER", "ben")
    turn(ben, "side", "s-ben", "the side project secret plan", "Nothing to share here.")
    cli_as(ben, "drain", "--flush")
    cli_as(ben, "team", "join", "--project", str(ben["shop"]))
    got = sync_as(ben, "ben", team_store)
    assert got.error == "" and got.records_received == sent.records_sent

    # ben's clone (another path, another URL form) is the same project: ana's memory is there, by ana
    listed = json.loads(cli_as(ben, "list", "--project", str(ben["shop"]), "--json"))
    assert listed and {(r["actor"], r["agent"]) for r in listed} == {("ana", "kiro")}
    shown = cli_as(ben, "context", "--prompt", "nightly export timeout", "--project", str(ben["shop"]))
    assert "orders.created_at has no index" in shown and " · by ana" in shown  # attributed to ana
    start = cli_as(ben, "context", "--session-start", "--project", str(ben["shop"]))
    assert "export" in start and " · by ana" in start
    monkeypatch.setenv("USER", "ana")  # ana's own memory never says "by ana" to her
    own = cli_as(ana, "context", "--prompt", "nightly export timeout", "--project", str(ana["shop"]))
    assert "orders.created_at has no index" in own and " · by " not in own
    monkeypatch.setenv("USER", "ben")
    # ben's other project shows nothing of ana's, and nothing of it reached the team store
    assert "(nothing would be injected)" in cli_as(ben, "context", "--prompt", "nightly export timeout",
                                                   "--project", str(ben["side"]))
    with config.using_home(str(ben["home"])):
        side_id = projects.project_id(str(ben["side"]))
    assert team_store.list_records(project_id=side_id) == []
    assert side_id not in {r["project_id"] for r in team_store.list_records(limit=100)}

    # ana forgets her record: team-wide, so ben's cache drops it at its next sync
    record_id = listed[0]["record_id"]
    cli_as(ana, "forget", record_id, "--reason", "wrong", "--yes")
    assert sync_as(ana, "ana", team_store).forgets_sent == 1
    assert sync_as(ben, "ben", team_store).forgets_received == 1
    assert record_id not in {r["record_id"] for r in json.loads(cli_as(ben, "list", "--all-projects", "--json"))}
