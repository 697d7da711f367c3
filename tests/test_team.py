"""Team memory on this machine (#16): store URL rules, project identity across clones, attribution, opt-in sharing."""

import hashlib
import json
import os
import stat

import pytest
from conftest import as_store
from helpers import run_cli

from kirolearn import settings
from kirolearn.core import project as projects
from kirolearn.team import membership as team

SECRET = "hunter2-not-real-pw"


@pytest.fixture(autouse=True)
def fresh_ids():
    projects.forget_cached_ids()
    yield
    projects.forget_cached_ids()


def clone(path, url=None):
    """A project folder whose .git/config names `url` as remote origin (no remote when None)."""
    (path / ".git").mkdir(parents=True)
    text = "[core]\n\tbare = false\n"
    if url:
        text += f'[remote "origin"]\n\turl = {url}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
    (path / ".git" / "config").write_text(text)
    return path


def add_remote(path, url):
    with open(path / ".git" / "config", "a") as fh:
        fh.write(f'[remote "origin"]\n\turl = {url}\n')
    projects.forget_cached_ids()


# --- configuration ---------------------------------------------------------------------------------


def test_store_url_comes_from_config_toml_or_the_environment(write_config, monkeypatch):
    assert settings.load().store.url == ""
    write_config('[store]\nurl = "postgresql://kl@db.example.com:5432/kirolearn?sslmode=require"\n')
    assert settings.load().store.url == "postgresql://kl@db.example.com:5432/kirolearn?sslmode=require"
    monkeypatch.setenv("KIROLEARN_STORE_URL", "postgres:///team?service=kirolearn")
    assert settings.load().store.url == "postgres:///team?service=kirolearn"


def test_config_show_prints_the_store_url(monkeypatch):
    monkeypatch.setenv("KIROLEARN_STORE_URL", "postgresql:///kirolearn?service=team")
    result = run_cli("config", "show", "--json")
    assert result.exit_code == 0, result.output
    row = next(r for r in json.loads(result.output) if r["key"] == "store.url")
    assert row == {
        "key": "store.url",
        "value": "postgresql:///kirolearn?service=team",
        "source": "$KIROLEARN_STORE_URL",
    }


@pytest.mark.parametrize(
    "url", ["mysql://db/kl", "sqlite:///tmp/x.db", "db.example.com/kirolearn", "https://db/kl"]
)
def test_a_store_url_that_is_not_postgresql_is_a_named_error(write_config, url):
    write_config(f'[store]\nurl = "{url}"\n')
    result = run_cli("config", "show")
    assert result.exit_code == 1
    assert "invalid setting 'store.url'" in result.output and "must start with postgresql://" in result.output


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://kl:{SECRET}@db.example.com/kirolearn",
        f"postgresql://kl:{SECRET}@[::1]:5432/kirolearn",
        "postgresql://kl:@db.example.com/kirolearn",
        f"postgresql://db.example.com/kirolearn?user=kl&password={SECRET}",
        f"postgresql://db.example.com/kirolearn?sslpassword={SECRET}",
        f"postgresql://db.example.com/kirolearn?PassWord={SECRET}",
    ],
)
def test_a_password_in_the_store_url_is_refused_and_never_repeated(monkeypatch, url):
    monkeypatch.setenv("KIROLEARN_STORE_URL", url)
    result = run_cli("config", "show")
    assert result.exit_code == 1
    assert SECRET not in result.output
    assert "will not keep in plain text" in result.output and "~/.pgpass" in result.output
    with pytest.raises(settings.SettingsError) as info:
        settings.load()
    assert SECRET not in str(info.value)


def test_redact_url_hides_any_secret_and_keeps_the_rest_as_written():
    assert (
        team.redact_url(f"postgresql://kl:{SECRET}@db/x?sslmode=require")
        == "postgresql://kl:***@db/x?sslmode=require"
    )
    assert (
        team.redact_url(f"postgresql:///x?password={SECRET}&host=/run/pg")
        == "postgresql:///x?password=***&host=/run/pg"
    )
    assert team.redact_url("postgresql:///x?service=team") == "postgresql:///x?service=team"
    assert team.redact_url("") == ""


def test_actor_is_configurable_and_must_be_printable(write_config, monkeypatch):
    monkeypatch.setenv("USER", "os-user")
    assert team.attribution(settings.load(), actor="os-user", host="h1", agent="kiro") == {
        "actor": "os-user",
        "host": "h1",
        "agent": "kiro",
    }
    write_config('[team]\nactor = "Alice Example"\n')
    assert team.attribution(settings.load(), actor="os-user", host="h1")["actor"] == "Alice Example"
    monkeypatch.setenv("KIROLEARN_ACTOR", "alice@team")
    assert team.attribution(settings.load(), actor="os-user")["actor"] == "alice@team"
    monkeypatch.setenv("KIROLEARN_ACTOR", "bad\x1b[31mname")
    with pytest.raises(settings.SettingsError, match="team.actor"):
        settings.load()


# --- project identity --------------------------------------------------------------------------------


def path_id(root):
    return hashlib.sha256(str(root).encode()).hexdigest()[:16]


def test_two_clones_of_one_repository_share_a_project_id(tmp_path):
    a = clone(tmp_path / "alice" / "shop", "git@github.com:acme/shop.git")
    b = clone(tmp_path / "bob" / "work" / "shop-clone", "https://bob:ghp_notreal@github.com/acme/shop")
    assert projects.project_id(str(a)) == projects.project_id(str(b))
    assert projects.project_key(str(a)) == "git:github.com/acme/shop"
    assert projects.project_id(str(a)) != path_id(a)


def test_a_project_without_a_remote_keeps_its_path_id(tmp_path, project):
    local = clone(tmp_path / "local-only")
    assert projects.project_id(str(local)) == path_id(local)  # the id every store holds today
    assert projects.project_id(str(project)) == path_id(project)  # a .git folder with no config at all
    other = clone(tmp_path / "other", "git@github.com:acme/other.git")
    assert projects.project_id(str(other)) != projects.project_id(
        str(clone(tmp_path / "x", "git@github.com:acme/shop"))
    )


def test_events_from_two_clones_are_one_project_in_the_store(tmp_path, make_event, drain_now):
    a = clone(tmp_path / "a" / "shop", "git@github.com:acme/shop.git")
    b = clone(tmp_path / "b" / "shop", "https://github.com/acme/shop.git")
    make_event("userPromptSubmit", cwd=str(a), session_id="s-a", prompt="why does the nightly job time out")
    make_event("stop", cwd=str(a), session_id="s-a", assistant_response="orders.created_at has no index")
    make_event("userPromptSubmit", cwd=str(b), session_id="s-b", prompt="add the index")
    stats, db = drain_now(flush=True)
    ids = {r["project_id"] for r in db.query("select distinct project_id from events")}
    assert ids == {projects.project_id(str(a))}
    roots = {r["project_root"] for r in db.query("select distinct project_root from events")}
    assert roots == {str(a), str(b)}
    from kirolearn.recall import lexical

    hits = lexical.search(
        lexical.connect_readonly(), "nightly job index", project_id=projects.project_id(str(b))
    )
    assert hits, "clone b recalls what was learnt in clone a"


# --- migration of existing stores ---------------------------------------------------------------------


def _reapply(db, name):
    from kirolearn.store.sqlite import migrations

    db.execute("delete from _sqlite_migrations where name = ?", [name])
    db.conn.commit()
    projects.forget_cached_ids()
    migrations.migrations.apply(db)


def test_an_existing_store_moves_a_project_with_a_remote_to_its_new_id(tmp_path, make_event, drain_now):
    from kirolearn.manage import records as manage
    from kirolearn.pipeline import summaries
    from kirolearn.recall import lexical

    shop = clone(tmp_path / "shop")  # no remote yet: stored under the path id, as older versions did
    plain = clone(tmp_path / "plain")
    make_event("userPromptSubmit", cwd=str(shop), session_id="s1", prompt="nightly job times out")
    make_event("stop", cwd=str(shop), session_id="s1", assistant_response="orders.created_at lacks an index")
    make_event("userPromptSubmit", cwd=str(shop), session_id="s2", prompt="second session about invoices")
    make_event(
        "stop", cwd=str(shop), session_id="s2", assistant_response="invoices are generated at midnight"
    )
    make_event("userPromptSubmit", cwd=str(plain), session_id="p1", prompt="plain project prompt")
    _, db = drain_now(flush=True)
    summaries.session_end(
        as_store(db), summaries.Project(str(shop)), session_id="s1", summary="Indexed orders.created_at."
    )
    old = path_id(shop)
    invoices = [
        r["record_id"]
        for r in db.query(
            "select record_id from memory_records where project_id = ? and session_id = 's2'", [old]
        )
    ]
    assert invoices
    manage.forget(invoices, reason="test", actor="cli", store=as_store(db))
    tables = ("events", "memory_records", "session_summaries", "extraction_runs", "forgotten_records")
    assert all(
        db.execute(f"select count(*) from {t} where project_id = ?", [old]).fetchone()[0] for t in tables
    )

    add_remote(shop, "git@github.com:acme/shop.git")
    _reapply(db, "m016_team_project_ids")

    new = projects.project_id(str(shop))
    assert new != old
    for table in tables:
        assert db.execute(f"select count(*) from {table} where project_id = ?", [old]).fetchone()[0] == 0, (
            table
        )
        assert db.execute(f"select count(*) from {table} where project_id = ?", [new]).fetchone()[0] > 0, (
            table
        )
    assert {
        r["project_id"]
        for r in db.query("select project_id from events where project_root = ?", [str(plain)])
    } == {path_id(plain)}
    assert lexical.search(lexical.connect_readonly(), "orders index", project_id=new), (
        "the FTS index followed"
    )
    manage.restore(invoices, actor="cli")
    assert {
        r["project_id"]
        for r in db.query(
            f"select project_id from memory_records where record_id in ({','.join('?' * len(invoices))})",
            invoices,
        )
    } == {new}


# --- attribution -----------------------------------------------------------------------------------------


def test_drained_records_carry_actor_host_and_agent(make_event, drain_now, monkeypatch, project):
    monkeypatch.setenv("USER", "dev-a")
    make_event("userPromptSubmit", prompt="fix the flaky test")
    make_event("stop", assistant_response="the flaky test waited on a timer")
    _, db = drain_now(flush=True)
    rows = list(db.query("select actor, host, agent from memory_records"))
    assert rows and all(r == {"actor": "dev-a", "host": team.this_host(), "agent": "kiro"} for r in rows)


def test_a_configured_actor_wins_over_the_os_user(make_event, drain_now, monkeypatch, write_config):
    monkeypatch.setenv("USER", "dev-a")
    write_config('[team]\nactor = "Alice"\n')
    make_event("userPromptSubmit", prompt="p")
    make_event("stop", assistant_response="done")
    _, db = drain_now(flush=True)
    assert {r["actor"] for r in db.query("select actor from memory_records")} == {"Alice"}
    assert {r["actor"] for r in db.query("select actor from events")} == {"Alice"}


def test_summaries_carry_attribution(project, monkeypatch):
    from kirolearn.pipeline import summaries
    from kirolearn.store.sqlite import db as store

    monkeypatch.setenv("KIROLEARN_ACTOR", "bob")
    db = store.open_db()
    here = summaries.Project(str(project))
    summaries.session_end(as_store(db), here, session_id="s9", summary="Shipped the fix.")
    rec = summaries.save_observation(
        as_store(db),
        here,
        title="Use the replica for reads",
        summary="Never write to it.",
        observation_type="decision",
        facts=[],
        concepts=[],
        files_touched=[],
    )
    assert (rec.actor, rec.host, rec.agent) == ("bob", team.this_host(), "kiro")
    (row,) = db.query("select actor, host, agent from session_summaries")
    assert row == {"actor": "bob", "host": team.this_host(), "agent": "kiro"}
    assert {r["actor"] for r in db.query("select actor from memory_records")} == {"bob"}


def test_list_show_export_and_import_keep_attribution(make_event, drain_now, monkeypatch, tmp_path):
    monkeypatch.setenv("KIROLEARN_ACTOR", "carol")
    make_event("userPromptSubmit", prompt="where is the config loaded")
    make_event("stop", assistant_response="settings.py loads config.toml")
    drain_now(flush=True)
    listed = json.loads(run_cli("list", "--all-projects", "--json").output)
    assert listed and all(
        (r["actor"], r["host"], r["agent"]) == ("carol", team.this_host(), "kiro") for r in listed
    )
    record_id = listed[0]["record_id"]
    shown = json.loads(run_cli("show", record_id, "--json").output)["record"]
    assert (shown["actor"], shown["agent"]) == ("carol", "kiro")
    assert f"by carol on {team.this_host()} with kiro" in run_cli("show", record_id).output
    exported = run_cli("export").output
    assert '"actor": "carol"' in exported

    monkeypatch.setenv("KIROLEARN_HOME", str(tmp_path / "second-home"))
    monkeypatch.setenv("KIROLEARN_ACTOR", "someone-else")  # an import keeps who made it
    source = tmp_path / "export.jsonl"
    source.write_text(exported)
    assert run_cli("import", str(source)).exit_code == 0
    again = json.loads(run_cli("list", "--all-projects", "--json").output)
    assert {(r["record_id"], r["actor"], r["agent"]) for r in again} == {
        (r["record_id"], "carol", "kiro") for r in listed
    }
    from kirolearn.store.sqlite import db as store

    assert {r["actor"] for r in store.open_db().query("select actor from events")} == {"carol"}


def test_older_records_get_attribution_from_their_events(make_event, drain_now, monkeypatch, project):
    from kirolearn.pipeline import summaries

    monkeypatch.setenv("USER", "dev-old")
    make_event("userPromptSubmit", prompt="old prompt")
    make_event("stop", assistant_response="old answer")
    _, db = drain_now(flush=True)
    summaries.save_observation(
        as_store(db),
        summaries.Project(str(project)),
        title="no events behind this",
        summary="hand-made",
        observation_type="pattern",
        facts=[],
        concepts=[],
        files_touched=[],
    )
    summaries.session_end(
        as_store(db), summaries.Project(str(project)), session_id="sess-1", summary="Wrapped up."
    )
    summaries.session_end(
        as_store(db), summaries.Project(str(project)), session_id="no-events", summary="Hand-made."
    )
    for table in ("memory_records", "session_summaries"):  # the schema before m016_team_attribution
        for column in ("actor", "host", "agent"):
            db.execute(f"alter table {table} drop column {column}")
    assert "actor" not in db["memory_records"].columns_dict
    db.execute("update events set actor = 'captured-user', agent = 'claude-code'")
    monkeypatch.setenv("USER", "today-user")
    _reapply(db, "m016_team_attribution")
    rows = {
        (r["strategy"], r["session_id"]): (r["actor"], r["agent"])
        for r in db.query("select strategy, session_id, actor, agent from memory_records")
    }
    assert rows.pop(("mcp_observation", "mcp")) == (
        "today-user",
        "kiro",
    )  # no source event: this machine's user
    assert rows.pop(("mcp_session_end", "no-events")) == ("today-user", "kiro")
    assert rows and set(rows.values()) == {("captured-user", "claude-code")}
    by_session = {
        r["session_id"]: (r["actor"], r["agent"])
        for r in db.query("select session_id, actor, agent from session_summaries")
    }
    assert by_session == {"sess-1": ("captured-user", "claude-code"), "no-events": ("today-user", "kiro")}


# --- opt-in sharing -----------------------------------------------------------------------------------------


def test_only_joined_projects_are_shared(tmp_path):
    shop = clone(tmp_path / "shop", "git@github.com:acme/shop.git")
    secret = clone(tmp_path / "secret-side-project", "git@github.com:me/secret.git")
    assert team.shared_project_ids() == frozenset()
    result = run_cli("team", "join", "--project", str(shop / ".git" / ".."), "--json")
    assert result.exit_code == 0, result.output
    joined = json.loads(result.output)
    assert (
        joined["project_id"] == projects.project_id(str(shop))
        and joined["identity"] == "git:github.com/acme/shop"
    )
    assert team.shared_project_ids() == {projects.project_id(str(shop))}
    assert projects.project_id(str(secret)) not in team.shared_project_ids()
    # a teammate's clone elsewhere is the same project, so it is shared too
    assert (
        projects.project_id(str(clone(tmp_path / "b" / "shop", "https://github.com/acme/shop")))
        in team.shared_project_ids()
    )
    again = json.loads(run_cli("team", "join", "--project", str(shop), "--json").output)
    assert again["already"] and again["joined_at"] == joined["joined_at"]
    left = run_cli("team", "leave", "--project", str(shop))
    assert left.exit_code == 0 and "Stopped sharing git:github.com/acme/shop" in left.output
    assert team.shared_project_ids() == frozenset()
    assert "was not shared" in run_cli("team", "leave", "--project", str(shop)).output


def test_a_project_without_a_remote_or_the_global_memory_cannot_be_shared(tmp_path, home):
    result = run_cli("team", "join", "--project", str(clone(tmp_path / "local")))
    assert (
        result.exit_code == 2
        and "has no git remote" in result.output
        and "git remote add origin" in result.output
    )
    user_home = os.environ["HOME"]
    result = run_cli("team", "join", "--project", user_home)
    assert result.exit_code == 2 and "never shared" in result.output
    assert team.shared_project_ids() == frozenset()


def test_the_sharing_state_is_private_and_a_damaged_one_shares_nothing(tmp_path, home):
    shop = clone(tmp_path / "shop", "git@github.com:acme/shop.git")
    assert run_cli("team", "join", "--project", str(shop)).exit_code == 0
    path = home / "state" / "sharing.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text("{not json")
    assert team.shared_project_ids() == frozenset()
    path.write_text(json.dumps({"projects": {projects.project_id(str(shop)): {"shared": "yes"}, "x": "y"}}))
    assert team.shared_project_ids() == frozenset()


def test_team_status(tmp_path, monkeypatch):
    monkeypatch.setenv("KIROLEARN_ACTOR", "dana")
    out = json.loads(run_cli("team", "status", "--json").output)
    assert out["configured"] is False and out["store_url"] is None and out["projects"] == []
    shop = clone(tmp_path / "shop", "git@github.com:acme/shop.git")
    joined = run_cli("team", "join", "--project", str(shop))
    assert "No team store is configured yet" in joined.output
    monkeypatch.setenv("KIROLEARN_STORE_URL", "postgresql://dana@db.example.com/team")
    out = json.loads(run_cli("team", "status", "--json").output)
    assert out["configured"] is True and out["store_url"] == "postgresql://dana@db.example.com/team"
    assert out["actor"] == "dana" and out["host"] == team.this_host()
    assert [(p["identity"], p["root"]) for p in out["projects"]] == [("git:github.com/acme/shop", str(shop))]
    assert out["projects"][0]["stale"] is False
    text = run_cli("team", "status").output
    assert "team store: postgresql://dana@db.example.com/team" in text and "git:github.com/acme/shop" in text
    (shop / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:acme/shop-renamed.git\n')
    projects.forget_cached_ids()
    assert json.loads(run_cli("team", "status", "--json").output)["projects"][0]["stale"] is True
    assert "its git remote changed since" in run_cli("team", "status").output
    assert team.shared_project_ids() == {out["projects"][0]["project_id"]}  # the new id is not shared
    assert projects.project_id(str(shop)) not in team.shared_project_ids()


def test_joining_after_adding_a_remote_moves_the_local_memory(tmp_path, make_event, drain_now):
    shop = clone(tmp_path / "shop")
    make_event("userPromptSubmit", cwd=str(shop), session_id="s1", prompt="before the remote existed")
    _, db = drain_now(flush=True)
    add_remote(shop, "git@github.com:acme/shop.git")
    out = json.loads(run_cli("team", "join", "--project", str(shop), "--json").output)
    assert out["rekeyed"] == {path_id(shop): projects.project_id(str(shop))}
    assert {r["project_id"] for r in db.query("select project_id from events")} == {
        projects.project_id(str(shop))
    }


# --- costs ----------------------------------------------------------------------------------------------------


def test_identity_stays_standard_library_and_psycopg_stays_lazy(tmp_path):
    """The prompt hook resolves the remote-based id with the standard library; psycopg loads only on use."""
    import subprocess
    import sys

    repo = clone(tmp_path / "shop", "git@github.com:acme/shop.git")
    code = (
        "import sys, json; before = set(sys.modules)\n"
        "import kirolearn.hook\n"
        "from kirolearn.recall.context import project_id\n"
        f"pid = project_id({str(repo)!r})\n"
        "hook = sorted(m for m in set(sys.modules) - before if m.split('.')[0] not in sys.stdlib_module_names"
        " and m.split('.')[0] != 'kirolearn')\n"
        "import kirolearn.cli.commands, kirolearn.team.membership\n"
        "print(json.dumps([pid, hook, 'psycopg' in sys.modules, 'kirolearn.core.gitremote' in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    pid, third_party, psycopg_loaded, gitremote_loaded = json.loads(out)
    assert pid == projects.project_id(str(repo)) and third_party == [] and gitremote_loaded
    assert psycopg_loaded is False


def test_doctor_warns_about_sharing_only_with_a_team_store(tmp_path, monkeypatch):
    from kirolearn import doctor

    def team_lines():
        return [(level, msg) for level, msg in doctor.run_checks() if "shared" in msg]

    assert team_lines() == []  # no team store: nothing about sharing
    monkeypatch.setenv("KIROLEARN_STORE_URL", "postgresql://dev@db.example.com/team")
    assert team_lines() == [
        ("WARN", "a team store is configured but no project is shared: kirolearn team join --project DIR")
    ]
    shop = clone(tmp_path / "shop", "git@github.com:acme/shop.git")
    team.join(str(shop))
    assert team_lines() == []
    (shop / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:acme/renamed.git\n')
    projects.forget_cached_ids()
    ((level, message),) = team_lines()
    assert level == "WARN" and "its git remote changed since" in message and str(shop) in message


def test_with_no_user_variable_the_actor_is_the_login_name_of_the_passwd_entry(project):
    """A cron job or a container's `env -i`: no USER, LOGNAME or USERNAME; the real hook and drain."""
    import pwd

    from conftest import hook_env, kl, run_hook

    env = {k: v for k, v in hook_env().items() if k not in ("USER", "LOGNAME", "USERNAME")}
    for payload in (
        {"hook_event_name": "userPromptSubmit", "prompt": "fix the flaky test"},
        {"hook_event_name": "stop", "assistant_response": "the flaky test waited on a timer"},
    ):
        payload.update(cwd=str(project), session_id="s-nouser")
        assert run_hook([], json.dumps(payload).encode(), env=env, cwd=str(project)).returncode == 0
    assert kl("drain", "--flush", env=env).returncode == 0
    login = pwd.getpwuid(os.getuid()).pw_name
    (record,) = json.loads(kl("list", "--json", "--project", str(project), env=env).stdout)
    assert record["actor"] == login != "unknown"
    shown = kl("show", record["record_id"], env=env).stdout
    assert f"by {login} on" in shown
