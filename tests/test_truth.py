"""Marks on evidence: supersede by a changed claim, merge of identical work, echoes, pins. Turns through
the real hook (the files really written, as an agent writes them), `kirolearn drain`, the CLI, the MCP
client and the viewer; the marks' store side in tests/store_contract.py (SQLite and PostgreSQL)."""

import json
import re
import subprocess

import anyio
import pytest
from conftest import BIN, cli, hook_env, run_hook
from mcp.shared.memory import create_connected_server_and_client_session
from starlette.testclient import TestClient

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")


def hook(project, name, session, **payload):
    body = {"hook_event_name": name, "cwd": str(project), "session_id": session, **payload}
    result = run_hook([], json.dumps(body).encode())
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    return result.stdout.decode("utf-8")


def turn(project, session, prompt, answer, *, write=None, commands=(), failed=False):
    """One Kiro CLI turn: the prompt, a file write and/or shell commands, the answer."""
    hook(project, "userPromptSubmit", session, prompt=prompt)
    if write:
        path, text = write
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(text, "utf-8")  # what the agent's write did
        hook(
            project,
            "postToolUse",
            session,
            tool_name="fs_write",
            tool_input={"command": "create", "path": str(project / path), "file_text": text},
            tool_response={"success": True, "result": [f"Created {path}"]},
        )
    for command, output in commands:
        hook(
            project,
            "postToolUse",
            session,
            tool_name="execute_bash",
            tool_input={"command": command},
            tool_response={
                "success": True,
                "result": [{"exit_status": "1" if failed else "0", "stdout": output, "stderr": ""}],
            },
        )
    hook(project, "stop", session, assistant_response=answer)


def drain_in_a_process():
    result = subprocess.run(
        [str(BIN / "kirolearn"), "drain", "--flush", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=hook_env(),
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def listed(project):
    found = cli("list", "--json", "--limit", "100", "--project", str(project))
    assert found.returncode == 0, found.stderr
    return {r["title"]: r for r in json.loads(found.stdout)}


def shown(record_id):
    found = cli("show", record_id, "--json")
    assert found.returncode == 0, found.stderr
    return json.loads(found.stdout)


SET = "set RETRIES to 3 in config/retry.py"
CHANGE = "raise RETRIES from 3 to 7"


def settings_history(project):
    turn(project, "s1", SET, "Set RETRIES to 3.", write=("config/retry.py", "RETRIES = 3\n"))
    turn(
        project,
        "s1",
        "make PAGE_SIZE 25 (config/api.py)",
        "PAGE_SIZE is now 25 (config/api.py).",
        write=("config/api.py", "PAGE_SIZE = 25\nMAX_PAGE_SIZE = 200\n"),
    )
    assert drain_in_a_process()["superseded"] == 0
    turn(project, "s2", CHANGE, "Changed RETRIES from 3 to 7.", write=("config/retry.py", "RETRIES = 7\n"))
    # near misses: another setting of the same file, a question, the same value again
    turn(
        project,
        "s2",
        "MAX_PAGE_SIZE should be 500 now instead of 200",
        "Updated config/api.py: MAX_PAGE_SIZE = 500 (was 200).",
        write=("config/api.py", "PAGE_SIZE = 25\nMAX_PAGE_SIZE = 500\n"),
    )
    turn(project, "s2", "explain what RETRIES does", "RETRIES is how often the client retries a request.")
    stats = drain_in_a_process()
    assert stats["superseded"] == 1, stats
    return listed(project)


def test_a_changed_setting_supersedes_the_older_record_and_nothing_else(project, tmp_path):
    records = settings_history(project)
    old, new = records[SET], records[CHANGE]
    assert old["superseded_by"] == new["record_id"] and new["superseded_by"] is None
    others = [r for t, r in records.items() if t != SET]
    assert all(r["superseded_by"] is None and r["merged_into"] is None for r in others), others
    # one of two claims changed: changed, not superseded, the other claim still current
    page = records["make PAGE_SIZE 25 (config/api.py)"]
    assert page["freshness"] == "changed" and page["superseded_by"] is None
    claims = {c["key"]: c for c in shown(page["record_id"])["claims"]}
    assert claims["PAGE_SIZE"]["state"] == "current"
    assert claims["MAX_PAGE_SIZE"]["state"] == "changed" and claims["MAX_PAGE_SIZE"]["now"] == "500"
    # the same setting in another project is never touched
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    turn(
        other,
        "o1",
        "set RETRIES to 9 in config/retry.py",
        "Set RETRIES to 9.",
        write=("config/retry.py", "RETRIES = 9\n"),
    )
    assert drain_in_a_process()["superseded"] == 0
    assert listed(project)[CHANGE]["superseded_by"] is None
    # the history names the evidence; show gives the chain both ways
    old_shown, new_shown = shown(old["record_id"]), shown(new["record_id"])
    assert old_shown["marks"]["superseded_by"] == new["record_id"]
    assert new_shown["marks"]["supersedes"] == [old["record_id"]]
    entry = [h for h in old_shown["history"] if h["action"] == "supersede"]
    assert len(entry) == 1 and "config/retry.py RETRIES = 7 (was 3)" in entry[0]["reason"], entry
    assert entry[0]["actor"] == "drain"
    assert old_shown["claims"][0]["by_record"] == new["record_id"]
    text = cli("show", old["record_id"]).stdout
    assert f"superseded by {new['record_id']}" in text and "RETRIES = 3" in text
    assert f"supersedes {old['record_id']}" in cli("show", new["record_id"]).stdout
    log = (tmp_path / "kirolearn-home" / "logs" / "truth.log").read_text("utf-8")
    assert f"superseded {old['record_id']} by {new['record_id']}" in log


def test_a_turn_that_only_read_the_setting_is_not_superseded_when_it_changes(project):
    turn(
        project,
        "r1",
        "make MAX_PAGE_SIZE 200 (config/api.py)",
        "MAX_PAGE_SIZE is now 200.",
        write=("config/api.py", "MAX_PAGE_SIZE = 200\n"),
    )
    hook(project, "userPromptSubmit", "r2", prompt="get the alembic upgrade through")
    hook(
        project,
        "postToolUse",
        "r2",
        tool_name="fs_read",
        tool_input={"operations": [{"mode": "Line", "path": str(project / "config" / "api.py")}]},
        tool_response={"success": True, "result": ["MAX_PAGE_SIZE = 200\n"]},
    )
    hook(project, "stop", "r2", assistant_response="The upgrade went through; MAX_PAGE_SIZE = 200.")
    drain_in_a_process()
    turn(
        project,
        "r3",
        "raise MAX_PAGE_SIZE from 200 to 500",
        "MAX_PAGE_SIZE = 500 now.",
        write=("config/api.py", "MAX_PAGE_SIZE = 500\n"),
    )
    assert drain_in_a_process()["superseded"] == 1
    records = listed(project)
    new = records["raise MAX_PAGE_SIZE from 200 to 500"]["record_id"]
    assert records["make MAX_PAGE_SIZE 200 (config/api.py)"]["superseded_by"] == new
    assert records["get the alembic upgrade through"]["superseded_by"] is None


def test_talk_questions_hypotheticals_and_failed_or_reverted_attempts_never_supersede(project):
    turn(project, "h1", "set WORKERS to 4", "Set WORKERS = 4.", write=("settings.py", "WORKERS = 4\n"))
    drain_in_a_process()
    turn(
        project,
        "h2",
        "what would happen if we set WORKERS to 16? do not change anything yet",
        "With WORKERS = 16 the pool would use more memory; nothing changed.",
    )
    turn(project, "h3", "what is WORKERS now?", "WORKERS is 4.")
    turn(
        project,
        "h4",
        "try WORKERS = 8 and run the tests",
        "The tests failed with 8 workers.",
        write=("settings.py", "WORKERS = 8\n"),
        commands=[("pytest -q", "2 failed")],
        failed=True,
    )
    (project / "settings.py").write_text("WORKERS = 4\n")  # the user put it back
    turn(project, "h5", "try WORKERS = 6", "Set WORKERS = 6.", write=("settings.py", "WORKERS = 6\n"))
    (project / "settings.py").write_text("WORKERS = 4\n")  # reverted before the drain ran
    stats = drain_in_a_process()
    assert stats["superseded"] == 0, stats
    records = listed(project)
    first = records["set WORKERS to 4"]
    assert first["superseded_by"] is None and first["freshness"] == "current"
    assert records["try WORKERS = 6"]["freshness"] == "changed"  # its own claim no longer holds


def test_a_section_is_part_of_the_key(project):
    toml = '[staging]\nLOG_LEVEL = "DEBUG"\n\n[production]\nLOG_LEVEL = "WARNING"\n'
    turn(
        project,
        "k1",
        "set staging logging to DEBUG",
        "Done.",
        write=("config/app.toml", '[staging]\nLOG_LEVEL = "DEBUG"\n'),
    )
    turn(project, "k2", "set production logging to WARNING", "Done.", write=("config/app.toml", toml))
    drain_in_a_process()
    turn(
        project,
        "k3",
        "production logging to ERROR",
        "Done.",
        write=("config/app.toml", toml.replace('"WARNING"', '"ERROR"')),
    )
    assert drain_in_a_process()["superseded"] == 0  # k2 also claims [staging], which still holds
    records = listed(project)
    assert records["set staging logging to DEBUG"]["superseded_by"] is None
    assert records["set staging logging to DEBUG"]["freshness"] == "current"
    claims = {c["key"]: c for c in shown(records["set production logging to WARNING"]["record_id"])["claims"]}
    assert (
        claims["production.LOG_LEVEL"]["state"] == "changed"
        and claims["staging.LOG_LEVEL"]["state"] == "current"
    )


def test_recall_ranks_the_newer_first_and_marks_the_older_in_the_block(project):
    records = settings_history(project)
    old, new = records[SET], records[CHANGE]
    found = cli("search", "RETRIES value", "--json", "--project", str(project))
    ids = [h["record_id"] for h in json.loads(found.stdout)]
    assert ids.index(new["record_id"]) < ids.index(old["record_id"]), ids
    hit = next(h for h in json.loads(found.stdout) if h["record_id"] == old["record_id"])
    assert hit["superseded_by"] == new["record_id"]
    block = hook(project, "agentSpawn", "s3")  # the session-start block lists the project's latest records
    old_lines = [line for line in block.splitlines() if old["record_id"] in line]
    assert old_lines and all(f"(superseded by {new['record_id']})" in line for line in old_lines), block
    new_lines = [line for line in block.splitlines() if new["record_id"] in line]
    assert new_lines and "superseded" not in new_lines[0]


def test_restore_clears_the_mark_pins_the_record_and_the_rule_never_marks_it_again(project):
    records = settings_history(project)
    old = records[SET]
    done = cli("restore", old["record_id"], "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored"] == [old["record_id"]]
    assert listed(project)[SET]["superseded_by"] is None
    actions = [h["action"] for h in shown(old["record_id"])["history"]]
    assert actions[-1] == "unmark" and "supersede" in actions, actions
    assert shown(old["record_id"])["record"]["pinned"]["supersede"]
    assert "pinned" in cli("show", old["record_id"]).stdout
    turn(project, "s4", "set RETRIES to 9", "RETRIES = 9.", write=("config/retry.py", "RETRIES = 9\n"))
    drain_in_a_process()
    assert listed(project)[SET]["superseded_by"] is None  # pinned: the rule leaves it alone
    again = cli("restore", old["record_id"])
    assert again.returncode == 1 and "nothing to restore" in again.stderr


def test_mcp_get_memory_and_search_memory_carry_the_chain(project):
    from kirolearn import mcp_server

    records = settings_history(project)
    old, new = records[SET], records[CHANGE]
    server = mcp_server.build_server(str(project))

    async def go():
        async with create_connected_server_and_client_session(server._mcp_server) as client:
            return (
                await client.call_tool("get_memory", {"record_id": old["record_id"]}),
                await client.call_tool("get_memory", {"record_id": new["record_id"]}),
                await client.call_tool("search_memory", {"query": "RETRIES"}),
            )

    got_old, got_new, searched = anyio.run(go)
    assert got_old.structuredContent["superseded_by"] == new["record_id"]
    assert f"Superseded by {new['record_id']}" in got_old.content[0].text
    assert got_new.structuredContent["supersedes"] == [old["record_id"]]
    assert f"Supersedes {old['record_id']}" in got_new.content[0].text
    results = {r["record_id"]: r for r in searched.structuredContent["results"]}
    assert results[old["record_id"]]["superseded_by"] == new["record_id"]
    assert f"superseded by {new['record_id']}" in searched.content[0].text


def test_the_viewer_shows_the_chain_both_ways_and_restores(project):
    from kirolearn.viewer.app import create_app

    records = settings_history(project)
    old, new = records[SET], records[CHANGE]
    c = TestClient(create_app("secret-token", 8765), base_url="http://127.0.0.1:8765")
    assert c.get("/?token=secret-token").status_code == 200
    page = c.get(f"/record/{old['record_id']}").text
    assert "Superseded by" in page and f'href="/record/{new["record_id"]}"' in page
    assert "Restore (clear the superseded mark)" in page
    assert f'href="/record/{old["record_id"]}"' in c.get(f"/record/{new['record_id']}").text
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)
    assert c.post(f"/record/{old['record_id']}/restore", data={"csrf": token}).status_code in (200, 303)
    assert listed(project)[SET]["superseded_by"] is None


CHORE = ("run the order tests", "pytest tests/test_orders.py -q")
LOOK_ALIKES = [
    ("run the payment tests", "pytest tests/test_payments.py -q"),
    ("apply staging", "terraform -chdir=infra/staging apply"),
    ("apply prod", "terraform -chdir=infra/prod apply"),
    ("run the order tests verbosely", "pytest tests/test_orders.py -v"),
]


def chores(project, times=3):
    for i in range(times):
        turn(project, f"c{i}", f"{CHORE[0]} ({i})", "Done.", commands=[(CHORE[1], "3 passed")])
    for i, (prompt, command) in enumerate(LOOK_ALIKES):
        turn(project, f"l{i}", prompt, "Done.", commands=[(command, "ok")])
    return listed(project)


def test_the_drain_merges_identical_work_only_and_status_says_so(project, tmp_path):
    chores(project)
    stats = drain_in_a_process()
    assert len(stats["merged"]) == 1 and len(stats["merged"][0]["record_ids"]) == 3, stats
    records = listed(project)
    assert all(records[p]["merged_into"] is None for p, _ in LOOK_ALIKES)
    status = json.loads(cli("status", "--json").stdout)
    assert status["database"]["merged"] == 2 and status["database"]["last_drain"]["merged"] == stats["merged"]
    assert f"into {stats['merged'][0]['into']}" in cli("status").stdout
    log = (tmp_path / "kirolearn-home" / "logs" / "truth.log").read_text("utf-8")
    assert f"into {stats['merged'][0]['into']}" in log


def test_consolidate_groups_identical_work_and_a_restore_lasts(project, write_config):
    write_config("[drain]\nauto_merge = false\n")
    chores(project)
    drain_in_a_process()
    records = listed(project)
    chore_ids = [records[f"{CHORE[0]} ({i})"]["record_id"] for i in range(3)]
    groups = json.loads(cli("consolidate", "--json", "--project", str(project)).stdout)["groups"]
    assert [g["record_ids"] for g in groups] == [chore_ids], groups
    assert "identical work" in groups[0]["why"]
    applied = cli("consolidate", "--apply", "--json", "--project", str(project))
    assert json.loads(applied.stdout)["merged"] == 2
    after = listed(project)
    assert [after[f"{CHORE[0]} ({i})"]["merged_into"] for i in range(3)] == [
        chore_ids[-1],
        chore_ids[-1],
        None,
    ]
    survivor = after[f"{CHORE[0]} (2)"]
    every_source = [e for i in range(3) for e in records[f"{CHORE[0]} ({i})"]["source_event_ids"]]
    assert sorted(survivor["source_event_ids"]) == sorted(set(every_source))
    assert shown(chore_ids[-1])["marks"]["merged_from"] == chore_ids[:-1]
    assert f"merged into {chore_ids[-1]}" in cli("show", chore_ids[0]).stdout
    assert cli("restore", chore_ids[0]).returncode == 0
    assert (
        json.loads(cli("consolidate", "--apply", "--json", "--project", str(project)).stdout)["merged"] == 0
    )
    assert listed(project)[f"{CHORE[0]} (0)"]["merged_into"] is None  # the restore lasts


def test_the_preview_finds_every_group_whatever_words_they_share(project, write_config):
    write_config("[drain]\nauto_merge = false\n")
    for g in range(30):
        for i in range(3):
            turn(
                project,
                f"g{g}-{i}",
                f"run the check again please ({g}, {i})",
                "Done.",
                commands=[(f"make check TARGET=t{g}", "ok")],
            )
    drain_in_a_process()
    groups = json.loads(cli("consolidate", "--json", "--project", str(project)).stdout)["groups"]
    assert len(groups) == 30 and all(len(g["record_ids"]) == 3 for g in groups)


def test_an_echo_cites_what_it_repeats_ranks_below_it_and_goes_with_it(project):
    turn(
        project,
        "e1",
        "set UPLOAD_RETRIES to 5",
        "UPLOAD_RETRIES = 5.",
        write=("config/upload.py", "UPLOAD_RETRIES = 5\n"),
    )
    drain_in_a_process()
    first = listed(project)["set UPLOAD_RETRIES to 5"]["record_id"]
    memory = cli("search", "UPLOAD_RETRIES", "--json", "--project", str(project)).stdout
    for i in range(3):
        hook(project, "userPromptSubmit", f"q{i}", prompt="what is UPLOAD_RETRIES?")
        hook(
            project,
            "postToolUse",
            f"q{i}",
            tool_name="@kirolearn/search_memory",
            tool_input={"query": "UPLOAD_RETRIES"},
            tool_response={"success": True, "result": [memory]},
        )
        hook(project, "stop", f"q{i}", assistant_response="UPLOAD_RETRIES is 5.")
    stats = drain_in_a_process()
    assert len(stats["merged"]) == 1 and len(stats["merged"][0]["record_ids"]) == 3  # one question, folded
    every = json.loads(cli("list", "--json", "--limit", "100", "--project", str(project)).stdout)
    echo = next(r for r in every if r["title"] == "what is UPLOAD_RETRIES?" and not r["merged_into"])
    assert echo["cites"] == [first] and echo["claims"] == []
    assert not any("search_memory" in f for f in echo["facts"])  # memory's own output is no fact
    found = [
        h["record_id"]
        for h in json.loads(cli("search", "UPLOAD_RETRIES", "--json", "--project", str(project)).stdout)
    ]
    assert found.index(first) < found.index(echo["record_id"])
    turn(
        project,
        "e2",
        "raise UPLOAD_RETRIES to 8",
        "UPLOAD_RETRIES = 8.",
        write=("config/upload.py", "UPLOAD_RETRIES = 8\n"),
    )
    drain_in_a_process()
    records = listed(project)
    change = records["raise UPLOAD_RETRIES to 8"]["record_id"]
    assert records["set UPLOAD_RETRIES to 5"]["superseded_by"] == change
    every = json.loads(cli("list", "--json", "--limit", "100", "--project", str(project)).stdout)
    assert next(r for r in every if r["record_id"] == echo["record_id"])["superseded_by"] == change
    found = [
        h["record_id"]
        for h in json.loads(cli("search", "UPLOAD_RETRIES", "--json", "--project", str(project)).stdout)
    ]
    assert found[0] == change


def test_export_and_import_carry_the_marks(project, tmp_path, monkeypatch):
    records = settings_history(project)
    out = cli("export")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    exported = {r["record_id"]: r for r in rows if r["type"] == "record"}
    assert exported[records[SET]["record_id"]]["superseded_by"] == records[CHANGE]["record_id"]
    assert exported[records[CHANGE]["record_id"]]["merged_into"] is None
    dump = tmp_path / "dump.jsonl"
    dump.write_text(out.stdout, "utf-8")
    monkeypatch.setenv("KIROLEARN_HOME", str(tmp_path / "second-home"))
    assert cli("import", str(dump)).returncode == 0
    assert listed(project)[SET]["superseded_by"] == records[CHANGE]["record_id"]


def test_the_block_rechecks_a_claim_before_it_shows_the_line(project):
    turn(project, "r1", SET, "Set RETRIES to 3.", write=("config/retry.py", "RETRIES = 3\n"))
    drain_in_a_process()
    rid = listed(project)[SET]["record_id"]

    def line(session):
        block = hook(project, "agentSpawn", session)
        return next(x for x in block.splitlines() if rid in x)

    assert "changed" not in line("r2")
    (project / "config/retry.py").write_text("RETRIES = 9\n", "utf-8")  # the user's edit, no drain since
    assert "changed: RETRIES now 9" in line("r3")
    assert "changed: RETRIES now 9" in line("r3b")  # the next session: the same verdict
    (project / "config/retry.py").write_text("# retries\nRETRIES  =  3\n", "utf-8")  # back, reformatted
    assert "changed" not in line("r4")
    assert shown(rid)["record"]["freshness"] == "current"  # the hook reads only: the drain keeps marks


def test_an_answer_that_repeats_what_the_hook_showed_cites_it(project):
    turn(
        project,
        "a1",
        "set UPLOAD_RETRIES to 5",
        "UPLOAD_RETRIES = 5.",
        write=("config/upload.py", "UPLOAD_RETRIES = 5\n"),
    )
    drain_in_a_process()
    first = listed(project)["set UPLOAD_RETRIES to 5"]["record_id"]
    block = hook(project, "userPromptSubmit", "a2", prompt="what is UPLOAD_RETRIES set to?")
    assert first in block
    hook(project, "stop", "a2", assistant_response="UPLOAD_RETRIES is 5.")
    hook(project, "userPromptSubmit", "a3", prompt="what does the upload retry loop do?")
    hook(project, "stop", "a3", assistant_response="It retries uploads with backoff; 5 times at most.")
    drain_in_a_process()
    records = listed(project)
    assert records["what is UPLOAD_RETRIES set to?"]["cites"] == [first]
    assert records["what does the upload retry loop do?"]["cites"] == []  # shown nothing, says no key


def test_writes_drained_together_supersede_the_older_values_with_the_newest(project):
    """One drain of a day's turns: the older claims read changed at once, and the newest holds."""
    for value in (3, 7, 9):
        turn(
            project,
            "d1",
            f"set RETRIES to {value}",
            f"RETRIES = {value}.",
            write=("config/retry.py", f"RETRIES = {value}\n"),
        )
    stats = drain_in_a_process()
    records = listed(project)
    newest = records["set RETRIES to 9"]["record_id"]
    assert stats["superseded"] == 2
    assert records["set RETRIES to 3"]["superseded_by"] == newest
    assert records["set RETRIES to 7"]["superseded_by"] == newest
    assert records["set RETRIES to 9"]["superseded_by"] is None


@pytest.mark.parametrize("how", ["git mv", "mv"])
def test_a_change_after_the_file_moved_supersedes_the_record_made_before(project, how):
    (project / ".git").rmdir()
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    turn(project, "m1", "set WORKERS to 4", "WORKERS = 4.", write=("etc/limits.py", "WORKERS = 4\n"))
    drain_in_a_process()
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "limits"], check=True)
    if how == "git mv":
        subprocess.run([*git, "mv", "etc/limits.py", "etc/base_limits.py"], check=True)
    else:
        (project / "etc/limits.py").rename(project / "etc/base_limits.py")
    drain_in_a_process()  # the re-check follows the move
    (claim,) = shown(listed(project)["set WORKERS to 4"]["record_id"])["claims"]
    assert claim["state"] == "current" and claim["path"] == "etc/base_limits.py"
    turn(project, "m2", "raise WORKERS to 6", "WORKERS = 6.", write=("etc/base_limits.py", "WORKERS = 6\n"))
    drain_in_a_process()
    records = listed(project)
    assert records["set WORKERS to 4"]["superseded_by"] == records["raise WORKERS to 6"]["record_id"]


def test_a_change_written_before_the_drain_saw_the_move_still_supersedes(project):
    (project / ".git").rmdir()
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    turn(project, "n1", "set WORKERS to 4", "WORKERS = 4.", write=("etc/limits.py", "WORKERS = 4\n"))
    drain_in_a_process()
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "limits"], check=True)
    subprocess.run([*git, "mv", "etc/limits.py", "etc/base_limits.py"], check=True)
    turn(project, "n2", "raise WORKERS to 6", "WORKERS = 6.", write=("etc/base_limits.py", "WORKERS = 6\n"))
    drain_in_a_process()  # stores the change, then its re-check of the older claim follows the move
    records = listed(project)
    assert records["set WORKERS to 4"]["superseded_by"] == records["raise WORKERS to 6"]["record_id"]


def test_a_change_stored_with_a_clock_weeks_behind_still_supersedes(project):
    """Supersede follows the order the drain stored records in, not their clocks."""
    import time as _time

    turn(project, "c1", SET, "Set RETRIES to 3.", write=("config/retry.py", "RETRIES = 3\n"))
    drain_in_a_process()
    behind = hook_env(KIROLEARN_NOW=str(_time.time() - 40 * 86400))
    (project / "config/retry.py").write_text("RETRIES = 7\n", "utf-8")
    for name, payload in (
        ("userPromptSubmit", {"prompt": CHANGE}),
        (
            "postToolUse",
            {
                "tool_name": "fs_write",
                "tool_input": {
                    "command": "create",
                    "path": str(project / "config/retry.py"),
                    "file_text": "RETRIES = 7\n",
                },
                "tool_response": {"success": True, "result": ["Created config/retry.py"]},
            },
        ),
        ("stop", {"assistant_response": "Changed RETRIES from 3 to 7."}),
    ):
        body = {"hook_event_name": name, "cwd": str(project), "session_id": "c2", **payload}
        assert run_hook([], json.dumps(body).encode(), env=behind).returncode == 0
    done = subprocess.run(
        [str(BIN / "kirolearn"), "drain", "--flush", "--json"],
        env=behind,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    records = listed(project)
    assert records[CHANGE]["created_at"] < records[SET]["created_at"]  # the clock said earlier
    assert records[SET]["superseded_by"] == records[CHANGE]["record_id"]
