"""`kirolearn migrate` and doctor's team-store checks, on a real SQLite file and a real PostgreSQL server."""

import itertools
import json

import pytest
from helpers import run_cli, schema_url
from pgserver import pg_database, pg_server  # noqa: F401 - fixtures

from kirolearn.store.postgres.migrations import MIGRATIONS

ALL = [name for name, _ in MIGRATIONS]

_names = itertools.count(1)


@pytest.fixture
def admin(pg_database):
    import psycopg

    with psycopg.connect(pg_database, autocommit=True) as conn:
        yield conn


@pytest.fixture
def schema(admin, pg_database):
    """An empty schema; yields (name, URL using it as the superuser)."""
    name = f"m_{next(_names)}"
    admin.execute(f'create schema "{name}"')
    yield name, schema_url(pg_database, name)
    admin.execute(f'drop schema "{name}" cascade')


@pytest.fixture
def role(admin):
    """A login role with no privileges of its own; yields its name."""
    name = f"dev_{next(_names)}"
    admin.execute(f'create role "{name}" login')
    yield name
    admin.execute(f'drop owned by "{name}"')
    admin.execute(f'drop role "{name}"')


def as_role(url: str, role: str) -> str:
    return url.replace("user=postgres", f"user={role}")


def test_migrate_applies_the_local_sqlite_schema_once(home):
    first = run_cli("migrate", "--json")
    assert first.exit_code == 0, first.output
    data = json.loads(first.stdout)
    assert data["backend"] == "sqlite" and data["store"] == str(home / "kirolearn.db")
    assert "m001_events" in data["applied"] and data["schema"]["pending"] == []
    again = run_cli("migrate")
    assert again.exit_code == 0 and "is up to date" in again.stdout, again.output


def test_migrate_applies_the_team_store_schema_once(schema):
    _, url = schema
    first = run_cli("migrate", "--json", env={"KIROLEARN_STORE_URL": url})
    assert first.exit_code == 0, first.output
    data = json.loads(first.stdout)
    assert data["backend"] == "postgresql" and data["applied"] == ALL
    assert data["schema"] == {"applied": ALL, "pending": []}
    again = run_cli("migrate", env={"KIROLEARN_STORE_URL": url})
    assert again.exit_code == 0 and "is up to date" in again.stdout, (
        again.output and "team store" in again.stdout
    )


def test_migrate_says_when_the_server_is_unreachable(tmp_path):
    url = f"postgresql://dev@/kl?host={tmp_path}&port=5999"
    result = run_cli("migrate", env={"KIROLEARN_STORE_URL": url})
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: connecting to the team store postgresql://dev@/kl")
    assert "check that the PostgreSQL server runs" in result.stderr and "Traceback" not in result.output


def test_migrate_without_create_permission_says_who_can(schema, role, admin):
    name, url = schema
    hidden = run_cli(
        "migrate", env={"KIROLEARN_STORE_URL": as_role(url, role)}
    )  # no USAGE: the schema is not seen
    assert hidden.exit_code == 1
    assert (
        "Error: migrating the team store" in hidden.stderr and "no schema has been selected" in hidden.stderr
    )
    assert "ask the server's owner for USAGE and CREATE" in hidden.stderr
    admin.execute(f'grant usage on schema "{name}" to "{role}"')
    denied = run_cli("migrate", env={"KIROLEARN_STORE_URL": as_role(url, role)})
    assert denied.exit_code == 1
    assert (
        "Error: migrating the team store" in denied.stderr and "permission denied for schema" in denied.stderr
    )
    assert "run `kirolearn migrate` themselves" in denied.stderr


def test_doctor_checks_a_team_store(schema, role, admin):
    name, url = schema
    behind = run_cli("doctor", "--json", env={"KIROLEARN_STORE_URL": url})
    checks = {c["message"].split(" (")[0]: c["level"] for c in json.loads(behind.stdout)["checks"]}
    assert behind.exit_code == 1
    assert any(m.startswith("team store postgresql://") and level == "OK" for m, level in checks.items())
    assert checks.get("the team store's schema is behind") == "FAIL"
    assert any("(you may run it)" in c["message"] for c in json.loads(behind.stdout)["checks"])

    assert run_cli("migrate", env={"KIROLEARN_STORE_URL": url}).exit_code == 0
    current = json.loads(run_cli("doctor", "--json", env={"KIROLEARN_STORE_URL": url}).stdout)["checks"]
    messages = {c["message"]: c["level"] for c in current}
    assert messages[f"team store schema is current ({len(ALL)} migration(s))"] == "OK"
    assert messages["your role may write to the team store (an insert, rolled back)"] == "OK"
    assert any("pgvector" in m for m in messages)

    admin.execute(f'grant usage on schema "{name}" to "{role}"')
    admin.execute(f'grant select on all tables in schema "{name}" to "{role}"')
    assert not [
        c for c in reader_checks(url, role) if "replica" in c["message"] or "15 or newer" in c["message"]
    ]
    reader = reader_checks(url, role)
    (write,) = [c for c in reader if "write to the team store" in c["message"]]
    assert write["level"] == "FAIL" and "permission denied for table drain_runs" in write["message"]


def reader_checks(url: str, role: str) -> "list[dict]":
    return json.loads(run_cli("doctor", "--json", env={"KIROLEARN_STORE_URL": as_role(url, role)}).stdout)[
        "checks"
    ]


def test_doctor_says_nothing_of_a_team_store_without_one():
    checks = json.loads(run_cli("doctor", "--json").stdout)["checks"]
    assert not [c for c in checks if "team store" in c["message"]]


def test_a_failed_login_says_where_credentials_come_from(pg_server, pg_database, role, admin):
    """A role that must give a password (scram) and gives a wrong one, or none: one Error line, no password."""
    import pathlib
    import time

    import psycopg

    admin.execute(f"alter role \"{role}\" password 'right-pw'")
    hba = pathlib.Path(pg_server.data_dir) / "pg_hba.conf"
    before = hba.read_text()
    hba.write_text(f"local all {role} scram-sha-256\n" + before)  # only this role: other tests keep trust
    try:
        admin.execute("select pg_reload_conf()")
        url = as_role(pg_database, role)
        deadline = time.monotonic() + 30
        while True:  # the reload is asynchronous: wait until the server asks this role for a password
            try:
                psycopg.connect(url, connect_timeout=5).close()
            except psycopg.OperationalError:
                break
            assert time.monotonic() < deadline, "the server never asked for a password"
            time.sleep(0.05)
        result = run_cli("migrate", env={"KIROLEARN_STORE_URL": url, "PGPASSWORD": "wrong-pw"})
        assert result.exit_code == 1
        assert "password authentication failed" in result.stderr and "~/.pgpass" in result.stderr
        assert "wrong-pw" not in result.output and "Traceback" not in result.output
        from kirolearn.core.errors import StoreError
        from kirolearn.store.postgres.store import PostgresStore

        with_password = url.replace("postgresql://", f"postgresql://{role}:wrong-pw@", 1)
        with pytest.raises(StoreError) as caught:
            PostgresStore(with_password)
        assert "wrong-pw" not in str(caught.value) and f"{role}:***@" in str(caught.value)
    finally:
        hba.write_text(before)
        admin.execute("select pg_reload_conf()")


def test_migrate_grants_a_developer_role_what_a_drainer_needs(schema, role):
    from store_contract import T0, event, record

    from kirolearn.store.postgres.store import PostgresStore

    _, url = schema
    result = run_cli("migrate", "--grant", role, "--json", env={"KIROLEARN_STORE_URL": url})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["granted"] == [role]
    with PostgresStore(as_role(url, role)) as store:  # upload, sync down, forget: as a drainer does
        assert store.add_events([event(1)]) == 1
        assert store.add_records([record(1), record(2)]) == 2
        assert store.forget(["mr_0002"], reason="", actor=role)[0]["record_id"] == "mr_0002"
        assert [r["record_id"] for r in store.changes(["p1"])["records"]] == ["mr_0001"]
        assert store.can_write() == (True, "") and store.figures(T0)["forgotten"] == 1
    again = run_cli(
        "migrate", env={"KIROLEARN_STORE_URL": as_role(url, role)}
    )  # nothing to apply: fine as them
    assert again.exit_code == 0 and "is up to date" in again.stdout, again.output


def test_migrate_grant_names_a_missing_role_and_needs_a_team_store(schema):
    _, url = schema
    missing = run_cli("migrate", "--grant", "nobody_here", env={"KIROLEARN_STORE_URL": url})
    assert missing.exit_code == 1 and "'nobody_here': no such role" in missing.stderr
    local = run_cli("migrate", "--grant", "dev")
    assert local.exit_code == 2 and "no team store is configured" in local.stderr


def test_drain_uploads_a_shared_project_to_a_postgresql_team_store(schema, tmp_path):
    """The whole path: hook code spools a turn, `kirolearn drain` stores it and syncs it to the server;
    with the server down or its schema behind, the drain still stores locally and the sync catches up once."""
    from kirolearn.capture import events as ev
    from kirolearn.capture import spool
    from kirolearn.core import project as projects
    from kirolearn.store.postgres.store import PostgresStore

    _, url = schema
    shop = tmp_path / "src" / "shop"
    (shop / ".git").mkdir(parents=True)
    (shop / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:acme/shop.git\n')
    projects.forget_cached_ids()
    for name, payload in (
        ("userPromptSubmit", {"prompt": "why does the nightly export time out"}),
        ("stop", {"assistant_response": "orders.created_at has no index: add one."}),
    ):
        event = ev.build_event(name, {"cwd": str(shop), "session_id": "s1", **payload})
        spool.append(event["event_id"], ev.serialize(event))
    assert run_cli("team", "join", "--project", str(shop)).exit_code == 0
    env = {"KIROLEARN_STORE_URL": url}

    down = {"KIROLEARN_STORE_URL": f"postgresql://dev@/kl?host={tmp_path}&port=5999"}  # no server there
    offline = json.loads(run_cli("drain", "--flush", "--json", env=down).stdout)
    assert offline["records_written"] >= 1 and "connecting to the team store" in offline["team"]["error"]
    behind = json.loads(run_cli("drain", "--json", env=env).stdout)  # schema not applied yet
    assert "kirolearn migrate" in behind["team"]["error"]
    assert run_cli("migrate", env=env).exit_code == 0
    drained = json.loads(run_cli("drain", "--json", env=env).stdout)
    assert drained["team"]["error"] == "" and drained["team"]["events_sent"] == 2
    assert drained["team"]["records_sent"] >= 1
    shop_id = projects.project_id(str(shop))
    again = json.loads(
        run_cli("drain", "--json", env=env).stdout
    )  # a re-run re-sends the overlap: stored once
    assert (
        again["team"]["error"] == ""
        and again["team"]["events_sent"] == 0
        and again["team"]["records_sent"] == 0
    )
    with PostgresStore(url) as team_store:
        assert [r["project_id"] for r in team_store.list_records()] == [shop_id] * drained["team"][
            "records_sent"
        ]
        assert team_store.figures("")["events"] == 2
    projects.forget_cached_ids()
