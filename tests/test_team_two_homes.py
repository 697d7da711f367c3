"""Two developers, two homes, one repository cloned at two paths: identity, sharing, attribution and sync together.

The real hook code spools the events, the real drain stores them, `kirolearn team join` chooses what
is shared, and kirolearn.team.sync carries it through a team store: a real PostgreSQL
server (tests/pgserver.py), and a SQLite store too (sync is written against the store contract).
"""

import json
import os

import pytest
from click.testing import CliRunner
from pgserver import pg_database, pg_server, pg_url  # noqa: F401 - fixtures

from kirolearn.cli.commands import cli
from kirolearn.core import paths
from kirolearn.core import project as projects
from kirolearn.store.sqlite.store import SqliteStore
from kirolearn.team import membership as team
from kirolearn.team import sync as team_sync


def clone(path, url):
    (path / ".git").mkdir(parents=True)
    (path / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {url}\n')
    return path


@pytest.fixture(params=["postgresql", "sqlite"])
def team_store(request, tmp_path):
    """The team store both homes sync with."""
    if request.param == "sqlite":
        store = SqliteStore(str(tmp_path / "team.db"))
    else:
        from kirolearn.store.postgres.store import PostgresStore

        store = PostgresStore(request.getfixturevalue("pg_url"), migrate=True)
    yield store
    store.close()


@pytest.fixture
def world(tmp_path, team_store):
    projects.forget_cached_ids()
    devs = {
        "ana": {
            "home": tmp_path / "ana" / ".kirolearn",
            "shop": clone(tmp_path / "ana" / "src" / "shop", "git@github.com:acme/shop.git"),
        },
        "ben": {
            "home": tmp_path / "ben" / ".kirolearn",
            "shop": clone(tmp_path / "ben" / "work" / "shop-clone", "https://ben:tok@github.com/Acme/shop"),
            "side": clone(tmp_path / "ben" / "side", "git@github.com:ben/side.git"),
        },
    }
    yield devs, team_store
    projects.forget_cached_ids()


def cli_as(dev, *args):
    result = CliRunner().invoke(
        cli, list(args), env={"KIROLEARN_HOME": str(dev["home"]), "KIROLEARN_ACTOR": None}
    )
    assert result.exit_code == 0, result.output
    return result.output


def dev_turn(dev, where, session, prompt, answer):
    """One prompt and its answer, spooled by the hook's own code."""
    from kirolearn.capture import events as ev
    from kirolearn.capture import spool

    with paths.using_home(str(dev["home"])):
        for name, payload in (
            ("userPromptSubmit", {"prompt": prompt}),
            ("stop", {"assistant_response": answer}),
        ):
            event = ev.build_event(name, {"cwd": str(dev[where]), "session_id": session, **payload})
            spool.append(event["event_id"], ev.serialize(event))


def sync_as(dev, name, team_store):
    with paths.using_home(str(dev["home"])):
        local = SqliteStore(paths.db_path())
        try:
            return team_sync.sync(local, team_store, sorted(team.shared_project_ids()), me=name)
        finally:
            local.close()


def test_what_ana_learns_in_her_clone_reaches_bens_clone_and_nothing_else(world, monkeypatch):
    devs, team_store = world
    ana, ben = devs["ana"], devs["ben"]
    monkeypatch.setenv("USER", "ana")
    dev_turn(
        ana,
        "shop",
        "s-ana",
        "why does the nightly export job time out",
        "The nightly export scans orders: orders.created_at has no index, so add one.",
    )
    cli_as(ana, "drain", "--flush")
    cli_as(ana, "team", "join", "--project", str(ana["shop"]))
    sent = sync_as(ana, "ana", team_store)
    assert sent.error == "" and sent.records_sent >= 1 and sent.events_sent == 2

    monkeypatch.setenv("USER", "ben")
    dev_turn(ben, "side", "s-ben", "the side project secret plan", "Nothing to share here.")
    cli_as(ben, "drain", "--flush")
    cli_as(ben, "team", "join", "--project", str(ben["shop"]))
    got = sync_as(ben, "ben", team_store)
    assert got.error == "" and got.records_received == sent.records_sent

    # ben's clone (another path, another URL form) is the same project: ana's memory is there, by ana
    listed = json.loads(cli_as(ben, "list", "--project", str(ben["shop"]), "--json"))
    assert listed and {(r["actor"], r["agent"]) for r in listed} == {("ana", "kiro")}
    shown = cli_as(
        ben, "context", "--prompt", "nightly export timeout", "--session", "s2", "--project", str(ben["shop"])
    )
    assert "orders.created_at has no index" in shown and " · by ana" in shown  # attributed to ana
    start = cli_as(ben, "context", "--session-start", "--project", str(ben["shop"]))
    assert "export" in start and " · by ana" in start
    monkeypatch.setenv("USER", "ana")  # ana's own memory never says "by ana" to her
    own = cli_as(
        ana, "context", "--prompt", "nightly export timeout", "--session", "s2", "--project", str(ana["shop"])
    )
    assert "orders.created_at has no index" in own and " · by " not in own
    monkeypatch.setenv("USER", "ben")
    # ben's other project shows nothing of ana's, and nothing of it reached the team store
    assert "(nothing would be injected)" in cli_as(
        ben, "context", "--prompt", "nightly export timeout", "--session", "s2", "--project", str(ben["side"])
    )
    with paths.using_home(str(ben["home"])):
        side_id = projects.project_id(str(ben["side"]))
    assert team_store.list_records(project_id=side_id) == []
    assert side_id not in {r["project_id"] for r in team_store.list_records(limit=100)}

    # ana forgets her record: team-wide, so ben's cache drops it at its next sync
    record_id = listed[0]["record_id"]
    cli_as(ana, "forget", record_id, "--reason", "wrong", "--yes")
    assert sync_as(ana, "ana", team_store).forgets_sent == 1
    assert sync_as(ben, "ben", team_store).forgets_received == 1
    assert record_id not in {
        r["record_id"] for r in json.loads(cli_as(ben, "list", "--all-projects", "--json"))
    }

    # she restores it: team-wide too, so it is back in ben's cache
    cli_as(ana, "restore", record_id)
    assert sync_as(ana, "ana", team_store).restores_sent == 1
    assert sync_as(ben, "ben", team_store).restores_received == 1
    assert record_id in {r["record_id"] for r in json.loads(cli_as(ben, "list", "--all-projects", "--json"))}

    # she forgets it for good (--purge): its text leaves the team store and ben's cache, its hash stays
    cli_as(ana, "forget", record_id, "--purge", "--yes")
    sent = sync_as(ana, "ana", team_store)
    assert (sent.forgets_sent, sent.purges_sent) == (1, 1)
    exported = json.dumps(list(team_store.export_objects()))
    assert "orders.created_at has no index" not in exported and "nightly export" not in exported
    assert team_store.tombstones([record_id])[record_id]["purged"]
    assert sync_as(ben, "ben", team_store).purges_received == 1
    shown = json.loads(cli_as(ben, "show", record_id, "--json"))
    assert shown["status"] == "purged" and "orders.created_at" not in json.dumps(shown)


@pytest.fixture
def own_server():
    """A team server of this test's own, so it can be stopped and started again."""
    from pgserver import PgCluster, PostgresUnavailable

    try:
        cluster = PgCluster().start()
    except PostgresUnavailable as exc:
        if os.environ.get("KIROLEARN_REQUIRE_POSTGRES") != "1":
            pytest.skip(str(exc))
        raise
    try:
        url = cluster.url(cluster.create_database("team"))
        from kirolearn.store.postgres.store import PostgresStore

        PostgresStore(url, migrate=True).close()
        yield cluster, url
    finally:
        cluster.stop()


def test_the_drain_syncs_and_a_server_that_was_down_gets_everything_once(tmp_path, own_server, monkeypatch):
    """The issue's two-developer test, through `kirolearn drain` with KIROLEARN_STORE_URL set."""
    cluster, url = own_server
    projects.forget_cached_ids()
    ana = {
        "home": tmp_path / "ana" / ".kirolearn",
        "shop": clone(tmp_path / "ana" / "shop", "git@github.com:acme/shop.git"),
    }
    ben = {
        "home": tmp_path / "ben" / ".kirolearn",
        "shop": clone(tmp_path / "ben" / "co" / "shop", "https://github.com/acme/shop.git"),
        "side": clone(tmp_path / "ben" / "side", "git@github.com:ben/side.git"),
    }

    def as_dev(dev, who, *args):
        monkeypatch.setenv("USER", who)
        result = CliRunner().invoke(
            cli,
            list(args),
            env={"KIROLEARN_HOME": str(dev["home"]), "KIROLEARN_STORE_URL": url, "KIROLEARN_ACTOR": None},
        )
        assert result.exit_code == 0, result.output
        return result.output

    def spool(dev, who, *args):  # the hook runs as its developer's OS user
        monkeypatch.setenv("USER", who)
        dev_turn(dev, *args)

    def drain_as(dev, who):
        return json.loads(as_dev(dev, who, "drain", "--flush", "--json"))

    as_dev(ana, "ana", "team", "join", "--project", str(ana["shop"]))
    as_dev(ben, "ben", "team", "join", "--project", str(ben["shop"]))
    spool(
        ana,
        "ana",
        "shop",
        "s-a1",
        "why does the nightly export job time out",
        "The nightly export scans orders: orders.created_at has no index, so add one.",
    )
    spool(ben, "ben", "side", "s-b0", "plans for the side project", "Nothing to share here.")
    sent = drain_as(ana, "ana")["team"]
    assert sent["error"] == "" and sent["events_sent"] == 2 and sent["records_sent"] >= 1
    got = drain_as(ben, "ben")["team"]
    assert got["error"] == "" and got["records_received"] == sent["records_sent"]
    assert got["events_sent"] == 0  # ben's side project is not shared: nothing of it left his machine
    start = as_dev(ben, "ben", "context", "--session-start", "--project", str(ben["shop"]))
    assert "orders.created_at has no index" in start and " · by ana" in start  # ana's turn, attributed
    side = as_dev(
        ben,
        "ben",
        "context",
        "--prompt",
        "nightly export timeout",
        "--session",
        "s2",
        "--project",
        str(ben["side"]),
    )
    assert "orders.created_at" not in side

    cluster.pause()  # the team server goes down: both keep capturing and draining
    spool(
        ana, "ana", "shop", "s-a2", "the export retries forever on a deadlock", "Cap export retries at three."
    )
    spool(
        ben,
        "ben",
        "shop",
        "s-b1",
        "replica lag breaks the report",
        "Never run the report against the replica.",
    )
    down_a, down_b = drain_as(ana, "ana"), drain_as(ben, "ben")
    assert (
        down_a["stored"] == 2
        and down_a["team"]["error"]
        and down_b["stored"] == 2
        and down_b["team"]["error"]
    )
    status = json.loads(as_dev(ben, "ben", "status", "--json"))["team"]
    assert status["last_error"] and status["cache_synced_at"] and status["shared_projects"] == 1

    cluster.resume()  # back: what waited arrives, once
    up_a = drain_as(ana, "ana")["team"]
    up_b = drain_as(ben, "ben")["team"]
    again_a = drain_as(ana, "ana")["team"]
    assert up_a["error"] == up_b["error"] == again_a["error"] == ""
    assert up_a["events_sent"] == 2 and up_b["events_sent"] == 2 and up_b["records_received"] >= 1
    assert again_a["records_received"] >= 1 and again_a["events_sent"] == 0

    import psycopg

    with psycopg.connect(url) as conn:
        total, distinct = conn.execute("select count(*), count(distinct event_id) from events").fetchone()
        hashes, distinct_hashes = conn.execute(
            "select count(*), count(distinct record_hash) from memory_records"
        ).fetchone()
    assert total == distinct == 6  # ana's 2 + 2, ben's 2 of the shared project; none of his side project
    assert hashes == distinct_hashes
    for dev, who in ((ana, "ana"), (ben, "ben")):
        found = as_dev(
            dev,
            who,
            "context",
            "--prompt",
            "replica report export retries deadlock",
            "--session",
            "s2",
            "--project",
            str(dev["shop"]),
        )
        assert "replica" in found and "retries" in found.lower()
    projects.forget_cached_ids()


def test_issue_34s_shapes_never_reach_the_team_store(world, monkeypatch):
    """A .netrc dump, a Cookie header, a bearer token under a plain name, a wrapped URL password and a
    <private> span in fullwidth brackets go through ana's hook, drain and sync: the team store holds
    none of them (#34)."""
    from helpers import PW, SID, TOKEN

    devs, team_store = world
    ana = devs["ana"]
    monkeypatch.setenv("USER", "ana")
    dev_turn(
        ana,
        "shop",
        "s-34",
        "my netrc:\nmachine api.example.com login bob password "
        + PW
        + "\n＜private＞12 Oak Street＜/private＞",
        f"Cookie: sessionid={SID}; theme=dark\nUPSTREAM=Bearer {TOKEN}\n"
        f"DATABASE_URL=postgres://app:{PW[:5]}\n{PW[5:]}2@db.internal/app",
    )
    cli_as(ana, "drain", "--flush")
    cli_as(ana, "team", "join", "--project", str(ana["shop"]))
    sent = sync_as(ana, "ana", team_store)
    assert sent.error == "" and sent.events_sent == 2 and sent.records_sent >= 1
    held = json.dumps(list(team_store.export_objects()), default=str)  # every event, record and summary
    assert "machine api.example.com" in held  # what was sent is there, only its secrets are not
    for secret in (PW, SID, TOKEN, PW[5:] + "2", "12 Oak Street"):
        assert secret not in held, secret


def chore(dev, session, prompt, command, output):
    """A turn that ran one command, spooled by the hook's own code."""
    from kirolearn.capture import events as ev
    from kirolearn.capture import spool

    with paths.using_home(str(dev["home"])):
        for name, payload in (
            ("userPromptSubmit", {"prompt": prompt}),
            (
                "postToolUse",
                {
                    "tool_name": "execute_bash",
                    "tool_input": {"command": command},
                    "tool_response": {
                        "success": True,
                        "result": [{"exit_status": "0", "stdout": output, "stderr": ""}],
                    },
                },
            ),
            ("stop", {"assistant_response": f"Done: {output}."}),
        ):
            event = ev.build_event(name, {"cwd": str(dev["shop"]), "session_id": session, **payload})
            spool.append(event["event_id"], ev.serialize(event))


def test_a_merge_survivors_new_lists_reach_the_team_store_and_the_teammate_once(world, monkeypatch):
    """Issue #31: `consolidate --apply` grows the survivor's lists (the union of its group's); the sync sends
    them up (merge_lists), the team feeds them to ben's cache, and nothing moves again after."""
    devs, team_store = world
    ana, ben = devs["ana"], devs["ben"]
    monkeypatch.setenv("USER", "ana")
    cli_as(ana, "team", "join", "--project", str(ana["shop"]))
    with open(ana["home"] / "config.toml", "a", encoding="utf-8") as fh:
        fh.write("\n[drain]\nauto_merge = false\n")  # consolidate does the merging here
    for i, prompt in enumerate(
        ("regenerate the changelog for the release", "refresh CHANGELOG.md from the commits")
    ):
        chore(ana, f"c{i}", prompt, "git cliff -o CHANGELOG.md", f"wrote {12 + i} entries")
        cli_as(ana, "drain", "--flush")
    assert sync_as(ana, "ana", team_store).records_sent == 2
    monkeypatch.setenv("USER", "ben")
    cli_as(ben, "team", "join", "--project", str(ben["shop"]))
    assert sync_as(ben, "ben", team_store).records_received == 2

    monkeypatch.setenv("USER", "ana")
    applied = json.loads(cli_as(ana, "consolidate", "--apply", "--json", "--project", str(ana["shop"])))
    assert applied["merged"] == 1, applied
    (group,) = applied["groups"]
    survivor, merged = group["into"], group["record_ids"][0]
    with paths.using_home(str(ana["home"])):
        local = SqliteStore(paths.db_path())
        try:
            union = local.get_record(survivor)
            old = local.get_record(merged)
        finally:
            local.close()
    assert set(union["source_event_ids"]) == set(old["source_event_ids"]) | set(union["source_event_ids"])
    assert len(union["source_event_ids"]) == 6 and set(old["facts"]) <= set(union["facts"])
    before = team_store.get_record(survivor)
    assert len(before["source_event_ids"]) == 3  # the team store still holds the survivor as it was

    sent = sync_as(ana, "ana", team_store)
    assert (sent.error, sent.lists_sent, sent.marks_sent) == ("", 1, 1), sent
    held = team_store.get_record(survivor)
    for key in ("source_event_ids", "facts", "concepts", "files_touched"):
        assert held[key] == union[key], key  # the union, in the survivor's order
    assert team_store.get_record(merged)["merged_into"] == survivor
    again = sync_as(ana, "ana", team_store)  # the team's feed brings it back: equal, so it stops here
    assert (again.lists_sent, again.lists_received, again.marks_sent) == (0, 0, 0), again

    monkeypatch.setenv("USER", "ben")
    got = sync_as(ben, "ben", team_store)
    assert (got.error, got.lists_received, got.marks_received) == ("", 1, 1), got
    shown = json.loads(cli_as(ben, "show", survivor, "--json"))
    record = shown.get("record", shown)
    assert record["source_event_ids"] == union["source_event_ids"] and record["facts"] == union["facts"]
    assert shown["marks"]["merged_from"] == [merged]
    assert any(h["action"] == "merge-survivor" and h["actor"] == "team" for h in shown["history"])
    quiet = sync_as(ben, "ben", team_store)  # what came down does not go back up
    assert (quiet.lists_sent, quiet.lists_received, quiet.records_sent) == (0, 0, 0), quiet
