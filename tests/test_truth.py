"""Issue #31, supersede and consolidation: turns through the real hook, `kirolearn drain`, the CLI, the MCP
client and the viewer; the marks' store side in tests/store_contract.py (SQLite and PostgreSQL)."""

import json
import re
import subprocess

import anyio
import pytest
from mcp.shared.memory import create_connected_server_and_client_session
from starlette.testclient import TestClient

from conftest import BIN, cli, hook_env, run_hook

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")


def hook(project, name, session, **payload):
    body = {"hook_event_name": name, "cwd": str(project), "session_id": session, **payload}
    result = run_hook([], json.dumps(body).encode())
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    return result.stdout.decode("utf-8")


def turn(project, session, prompt, answer, *, write=None, commands=()):
    """One Kiro CLI turn: the prompt, a file write and/or shell commands, the answer."""
    hook(project, "userPromptSubmit", session, prompt=prompt)
    if write:
        path, text = write
        hook(project, "postToolUse", session, tool_name="fs_write",
             tool_input={"command": "create", "path": str(project / path), "file_text": text},
             tool_response={"success": True, "result": [f"Created {path}"]})
    for command, output in commands:
        hook(project, "postToolUse", session, tool_name="execute_bash", tool_input={"command": command},
             tool_response={"success": True, "result": [{"exit_status": "0", "stdout": output, "stderr": ""}]})
    hook(project, "stop", session, assistant_response=answer)


def drain():
    result = subprocess.run([str(BIN / "kirolearn"), "drain", "--flush", "--json"], capture_output=True, text=True,
                            timeout=120, env=hook_env())
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
    turn(project, "s1", SET, "Set RETRIES to 3 in config/retry.py.", write=("config/retry.py", "RETRIES = 3\n"))
    turn(project, "s1", "make PAGE_SIZE 25 (config/api.py)", "PAGE_SIZE is now 25 (config/api.py).",
         write=("config/api.py", "PAGE_SIZE = 25\nMAX_PAGE_SIZE = 200\n"))
    assert drain()["superseded"] == 0
    turn(project, "s2", CHANGE, "Changed RETRIES from 3 to 7 in config/retry.py.",
         write=("config/retry.py", "RETRIES = 7\n"))
    # near misses: another setting of the same file, a mention without a value, the same value again
    turn(project, "s2", "MAX_PAGE_SIZE should be 500 now instead of 200",
         "Updated config/api.py: MAX_PAGE_SIZE = 500 (was 200).",
         write=("config/api.py", "PAGE_SIZE = 25\nMAX_PAGE_SIZE = 500\n"))
    turn(project, "s2", "explain what RETRIES does", "RETRIES is how often the client retries a request.")
    stats = drain()
    assert stats["superseded"] == 1, stats
    return listed(project)


def test_a_changed_setting_supersedes_the_older_record_and_nothing_else(project, tmp_path):
    records = settings_history(project)
    old, new = records[SET], records[CHANGE]
    assert old["superseded_by"] == new["record_id"] and new["superseded_by"] is None
    others = [r for t, r in records.items() if t != SET]
    assert all(r["superseded_by"] is None and r["merged_into"] is None for r in others), others
    # the same setting in another project is never touched
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    turn(other, "o1", "set RETRIES to 9 in config/retry.py", "Set RETRIES to 9.", write=("config/retry.py", "RETRIES = 9\n"))
    assert drain()["superseded"] == 0
    assert listed(project)[CHANGE]["superseded_by"] is None
    # the history says why and when; show gives the chain both ways
    old_shown, new_shown = shown(old["record_id"]), shown(new["record_id"])
    assert old_shown["marks"]["superseded_by"] == new["record_id"]
    assert new_shown["marks"]["supersedes"] == [old["record_id"]]
    entry = [h for h in old_shown["history"] if h["action"] == "supersede"]
    assert len(entry) == 1 and "RETRIES: 3 -> 7" in entry[0]["reason"] and entry[0]["at"] and entry[0]["actor"] == "drain"
    text = cli("show", old["record_id"]).stdout
    assert f"superseded by {new['record_id']}" in text
    assert f"supersedes {old['record_id']}" in cli("show", new["record_id"]).stdout
    log = (tmp_path / "kirolearn-home" / "logs" / "truth.log").read_text("utf-8")
    assert f"superseded {old['record_id']} by {new['record_id']}" in log


def test_a_turn_that_only_read_the_setting_is_not_superseded_when_it_changes(project):
    """What a file held when a turn read it is in the record's tool results, not a value the turn stated:
    a later change of that setting supersedes the turn that set it, not one that looked at the file."""
    (project / "config").mkdir()
    (project / "config" / "api.py").write_text("PAGE_SIZE = 20\nMAX_PAGE_SIZE = 200\n")
    turn(project, "r1", "make MAX_PAGE_SIZE 200 (config/api.py)", "MAX_PAGE_SIZE is now 200 (config/api.py).",
         write=("config/api.py", "PAGE_SIZE = 20\nMAX_PAGE_SIZE = 200\n"))
    hook(project, "userPromptSubmit", "r2", prompt="get the alembic upgrade through")
    hook(project, "postToolUse", "r2", tool_name="fs_read",
         tool_input={"operations": [{"mode": "Line", "path": str(project / "config" / "api.py")}]},
         tool_response={"success": True, "result": ["PAGE_SIZE = 20\nMAX_PAGE_SIZE = 200\n"]})
    hook(project, "postToolUse", "r2", tool_name="execute_bash", tool_input={"command": "alembic upgrade head"},
         tool_response={"success": True, "result": [{"exit_status": "0", "stdout": "Running upgrade", "stderr": ""}]})
    hook(project, "stop", "r2", assistant_response="The upgrade went through.")
    drain()
    turn(project, "r3", "raise MAX_PAGE_SIZE from 200 to 500", "Updated config/api.py: MAX_PAGE_SIZE = 500 (was 200).",
         write=("config/api.py", "PAGE_SIZE = 20\nMAX_PAGE_SIZE = 500\n"))
    assert drain()["superseded"] == 1
    records = listed(project)
    new = records["raise MAX_PAGE_SIZE from 200 to 500"]["record_id"]
    assert records["make MAX_PAGE_SIZE 200 (config/api.py)"]["superseded_by"] == new
    assert records["get the alembic upgrade through"]["superseded_by"] is None


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


def test_restore_clears_the_mark_with_history_and_the_older_ranks_as_before(project):
    records = settings_history(project)
    old = records[SET]
    done = cli("restore", old["record_id"], "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored"] == [old["record_id"]]
    assert listed(project)[SET]["superseded_by"] is None
    assert [h["action"] for h in shown(old["record_id"])["history"]][-2:] == ["supersede", "unmark"]
    again = cli("restore", old["record_id"])
    assert again.returncode == 1 and "nothing to restore" in again.stderr


def test_mcp_get_memory_and_search_memory_carry_the_chain(project):
    from kirolearn import mcp_server

    records = settings_history(project)
    old, new = records[SET], records[CHANGE]
    server = mcp_server.build_server(str(project))

    async def go():
        async with create_connected_server_and_client_session(server._mcp_server) as client:
            return (await client.call_tool("get_memory", {"record_id": old["record_id"]}),
                    await client.call_tool("get_memory", {"record_id": new["record_id"]}),
                    await client.call_tool("search_memory", {"query": "RETRIES"}))

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


CHORE = [("bump the version and regenerate the changelog", ["bump-my-version bump patch", "git cliff -o CHANGELOG.md"]),
         ("cut a patch release: version bump plus a fresh CHANGELOG",
          ["bump-my-version bump patch --no-commit", "git cliff --output CHANGELOG.md"]),
         ("do the release chore again - bump version, regenerate changelog",
          ["bump-my-version bump patch", "git cliff --output CHANGELOG.md"])]
NEAR = [("bump the requests pin to 2.32.3 in requirements.in",
         ["pip-compile --upgrade-package requests==2.32.3 requirements.in"]),
        ("run the type checker over src/", ["mypy src/"]),
        ("run the formatter over src/", ["black src/"]),
        ("run the tests of the release module", ["pytest -q tests/test_release.py"])]


def chores(project):
    for i, (prompt, commands) in enumerate(CHORE + NEAR):
        turn(project, f"c{i}", prompt, "Done.", commands=[(c, "ok") for c in commands])
    stats = drain()
    assert stats["merged"] == [], stats  # no two of them ran the very same command lines
    return listed(project)


def test_consolidate_previews_merges_and_restores_the_same_chore_only(project):
    records = chores(project)
    chore_ids = [records[p]["record_id"] for p, _ in CHORE]
    preview = cli("consolidate", "--json", "--project", str(project))
    assert preview.returncode == 0, preview.stderr
    groups = json.loads(preview.stdout)["groups"]
    assert groups == [{"record_ids": chore_ids, "into": chore_ids[-1], "why": groups[0]["why"]}]
    assert "bump-my-version bump" in groups[0]["why"]
    assert all(r["merged_into"] is None for r in listed(project).values())  # a preview changes nothing
    assert "would merge" in cli("consolidate", "--project", str(project)).stdout
    applied = cli("consolidate", "--apply", "--json", "--project", str(project))
    assert json.loads(applied.stdout)["merged"] == 2
    after = listed(project)
    assert [after[p]["merged_into"] for p, _ in CHORE] == [chore_ids[-1], chore_ids[-1], None]
    assert all(after[p]["merged_into"] is None for p, _ in NEAR)
    survivor = after[CHORE[-1][0]]
    every_source = [e for p, _ in CHORE for e in records[p]["source_event_ids"]]
    assert sorted(survivor["source_event_ids"]) == sorted(set(every_source))
    assert set(survivor["facts"]) >= {f for p, _ in CHORE for f in records[p]["facts"]}
    # recall hides the merged ones; the survivor names them; restore brings one back
    found = [h["record_id"] for h in json.loads(cli("search", "changelog version bump", "--json",
                                                      "--project", str(project)).stdout)]
    assert chore_ids[-1] in found and not set(chore_ids[:-1]) & set(found)
    assert shown(chore_ids[-1])["marks"]["merged_from"] == chore_ids[:-1]
    assert f"merged into {chore_ids[-1]}" in cli("show", chore_ids[0]).stdout
    assert cli("restore", chore_ids[0]).returncode == 0
    assert chore_ids[0] in [h["record_id"] for h in json.loads(cli("search", "changelog version bump", "--json",
                                                                    "--project", str(project)).stdout)]
    assert json.loads(cli("consolidate", "--json", "--project", str(project)).stdout)["groups"][0]["record_ids"] \
        == [chore_ids[0], chore_ids[-1]]


def test_the_drain_merges_near_identical_records_and_status_says_so(project, tmp_path):
    for i in range(2):
        turn(project, f"d{i}", ["regenerate uv.lock", "refresh the lock file"][i], "Refreshed uv.lock.",
             commands=[("uv lock", "Resolved 84 packages")])
    turn(project, "d9", "add httpx as a dependency", "Added httpx.", commands=[("uv add httpx", "+ httpx==0.27.2")])
    stats = drain()
    assert len(stats["merged"]) == 1 and len(stats["merged"][0]["record_ids"]) == 2, stats
    status = json.loads(cli("status", "--json").stdout)
    assert status["database"]["merged"] == 1 and status["database"]["last_drain"]["merged"] == stats["merged"]
    assert f"into {stats['merged'][0]['into']}" in cli("status").stdout
    records = listed(project)
    assert records["add httpx as a dependency"]["merged_into"] is None
    log = (tmp_path / "kirolearn-home" / "logs" / "truth.log").read_text("utf-8")
    assert f"into {stats['merged'][0]['into']}" in log


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


def ide_turn(project, prompt, calls, answer="Done."):
    """One Kiro IDE 0.x turn: hooks given USER_PROMPT, tool calls without their input (toolArgs {})."""
    def fire(event, text):
        result = run_hook([event], b"", env={**hook_env(), "USER_PROMPT": text}, cwd=str(project))
        assert result.returncode == 0 and result.stderr == b"", result.stderr

    fire("ide-prompt-submit", prompt)
    for output, ok in calls:
        fire("ide-post-tool", json.dumps({"toolName": "execute_bash", "toolArgs": {}, "toolResult": output,
                                          "toolSuccess": ok}))
    fire("ide-agent-stop", answer)


def test_consolidate_never_groups_a_turn_that_only_shows_its_output(project):
    """Kiro IDE 0.x sends its calls without input: `seeded 40 rows` from `make reset-db SERVICE=billing`
    reads like the reset-db chore's output, so such a turn is never grouped (precision over recall)."""
    chore = [("reset the dev database and reseed it", [("make reset-db", ""), ("make seed", "seeded 30 rows")]),
             ("give me a clean seeded database", [("make reset-db seed", "seeded 40 rows")])]
    for i, (prompt, commands) in enumerate(chore):
        turn(project, f"c{i}", prompt, "Done.", commands=commands)
    ide_turn(project, "reset only the billing database", [("seeded 40 rows", True)])
    ide_turn(project, "wipe the local db and load the seed data again", [("seeded 50 rows", True)])
    assert drain()["merged"] == []
    records = listed(project)
    groups = json.loads(cli("consolidate", "--json", "--project", str(project)).stdout)["groups"]
    assert [g["record_ids"] for g in groups] == [[records[p]["record_id"] for p, _ in chore]], groups


def test_consolidate_keeps_one_step_of_a_chore_apart_and_joins_the_chore_done_another_way(project):
    """`make seed` alone is one step of `make reset-db seed`, other work; `coverage html -d htmlcov` and
    `buf generate --template buf.gen.yaml` are the chore done another way (a flag's value, not a target)."""
    same = [("regenerate the coverage report", [("coverage run -m pytest -q", ""), ("coverage html", "total 84%")]),
            ("refresh htmlcov with the current coverage",
             [("coverage run -m pytest", ""), ("coverage html -d htmlcov", "total 85%")]),
            ("regenerate the protobuf stubs", [("buf generate", "wrote 4 files")]),
            ("refresh the gRPC stubs under gen/", [("buf generate --template buf.gen.yaml", "wrote 5 files")]),
            ("reset the dev database and reseed it", [("make reset-db seed", "seeded 30 rows")]),
            ("wipe the local db and load the seed data again", [("make reset-db", ""), ("make seed", "seeded 40 rows")])]
    apart = [("load the seed data again without resetting anything", [("make seed", "seeded 40 rows")]),
             ("rebuild only the html coverage report", [("coverage html", "total 84%")]),
             ("push the tags we already have", [("git push --tags", "Everything up-to-date")]),
             ("tag the release and push the tags", [("git tag v1.4.3", ""), ("git push origin --tags", "new tag")])]
    for i, (prompt, commands) in enumerate(same + apart):
        turn(project, f"s{i}", prompt, "Done.", commands=commands)
    drain()
    records = listed(project)
    groups = json.loads(cli("consolidate", "--json", "--project", str(project)).stdout)["groups"]
    ids = [records[p]["record_id"] for p, _ in same]
    assert sorted(map(sorted, (g["record_ids"] for g in groups))) == sorted(
        [sorted(ids[0:2]), sorted(ids[2:4]), sorted(ids[4:6])]), groups


# --- a later success of the same work supersedes a failed attempt ------------------------------------

def failing(project, session, prompt, command, error):
    """A Kiro CLI turn whose one command failed (exit status 1) and stayed failed."""
    hook(project, "userPromptSubmit", session, prompt=prompt)
    hook(project, "postToolUse", session, tool_name="execute_bash", tool_input={"command": command},
         tool_response={"success": True, "result": [{"exit_status": "1", "stdout": "", "stderr": error}]})
    hook(project, "stop", session, assistant_response=f"`{command}` failed: {error}")


def claude_bash(project, session, prompt, command, output):
    """A Claude Code turn whose Bash call reports no exit status: outcome unknown, but the work was done."""
    base = {"session_id": session, "cwd": str(project), "transcript_path": str(project / "t.jsonl")}
    for body in ({"hook_event_name": "UserPromptSubmit", "prompt": prompt},
                 {"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": command},
                  "tool_response": {"stdout": output, "stderr": "", "interrupted": False}},
                 {"hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "Done, it runs."}):
        result = run_hook(["--agent", "claude-code"], json.dumps({**base, **body}).encode(), cwd=str(project))
        assert result.returncode == 0 and result.stderr == b"", result.stderr


API, DB, LINT, BUILD = ("run the api tests", "run the db tests", "lint the sources", "build the docs")


def test_a_later_success_of_the_same_command_supersedes_the_failed_attempt_and_nothing_else(project, tmp_path):
    failing(project, "f1", API, "pytest -q tests/test_api.py", "FAILED tests/test_api.py::test_login - assert 401 == 200")
    failing(project, "f1", DB, "pytest -q tests/test_db.py", "FAILED tests/test_db.py::test_pool - TimeoutError")
    failing(project, "f1", LINT, "ruff check src", "src/app.py:3:1: F401 `os` imported but unused")
    failing(project, "f1", BUILD, "mkdocs build --strict", "ERROR - Config value 'nav': a page is missing")
    first = drain()
    assert first["superseded"] == 0, first
    records = listed(project)
    assert {records[t]["outcome"] for t in (API, DB, LINT, BUILD)} == {"failed"}
    # later: the same api command passes (after a fix); the db tests pass only for one test (other work);
    # another lint command passes; the docs build runs in Claude Code, which reports no exit status
    turn(project, "f2", "fix the login test and rerun it", "Fixed the token check; the api tests pass.",
         write=("src/auth.py", "def check(token):\n    return bool(token)\n"),
         commands=[("pytest tests/test_api.py", "12 passed in 0.4s")])
    turn(project, "f2", "run only the pool test", "The pool test passes.",
         commands=[("pytest -q tests/test_db.py -k pool", "1 passed in 0.1s")])
    turn(project, "f2", "format the sources", "Formatted.", commands=[("ruff format src", "3 files reformatted")])
    claude_bash(project, "f3", "build the docs again", "mkdocs build --strict", "INFO - Documentation built in 0.52 seconds")
    second = drain()
    assert second["superseded"] == 2, second
    after = listed(project)
    fix, docs = after["fix the login test and rerun it"], after["build the docs again"]
    assert fix["outcome"] == "succeeded" and docs["outcome"] == "unknown"
    assert after[API]["superseded_by"] == fix["record_id"]
    assert after[BUILD]["superseded_by"] == docs["record_id"]
    # precision: another command that also failed, and one whose later run was other work, stay as they were
    assert after[DB]["superseded_by"] is None and after[LINT]["superseded_by"] is None
    assert all(r["superseded_by"] is None for t, r in after.items() if t not in (API, BUILD))
    # the history says why and when; the chain shows both ways; search ranks the success first
    old = shown(after[API]["record_id"])
    entry = [h for h in old["history"] if h["action"] == "supersede"]
    assert len(entry) == 1 and entry[0]["actor"] == "drain" and entry[0]["at"], entry
    assert "a later success of the same work" in entry[0]["reason"] and "tests/test_api.py" in entry[0]["reason"]
    assert shown(fix["record_id"])["marks"]["supersedes"] == [after[API]["record_id"]]
    hits = json.loads(cli("search", "api tests test_api", "--json", "--project", str(project)).stdout)
    ids = [h["record_id"] for h in hits]
    assert ids.index(fix["record_id"]) < ids.index(after[API]["record_id"]), ids
    log = (tmp_path / "kirolearn-home" / "logs" / "truth.log").read_text("utf-8")
    assert f"superseded {after[API]['record_id']} by {fix['record_id']}" in log
    # restore undoes it, with the history kept
    assert cli("restore", after[API]["record_id"]).returncode == 0
    assert listed(project)[API]["superseded_by"] is None


def test_a_success_before_the_failure_or_in_another_project_supersedes_nothing(project, tmp_path):
    turn(project, "g1", "check the build", "It builds.", commands=[("make build", "ok")])
    drain()
    failing(project, "g2", "build it once more", "make build", "make: *** [build] Error 2")
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    failing(other, "g3", "build the other project", "make build", "make: *** [build] Error 2")
    drain()
    turn(project, "g4", "build it after the merge", "Builds again.", commands=[("make build", "ok")])
    assert drain()["superseded"] == 1
    records = listed(project)
    assert records["build it once more"]["superseded_by"] == records["build it after the merge"]["record_id"]
    assert records["check the build"]["superseded_by"] is None
    assert listed(other)["build the other project"]["superseded_by"] is None


def test_consolidate_keeps_a_chore_scoped_to_another_workspace_or_service_apart(project):
    """Near-identical commands that are other work: a selector flag's value or NAME=value differs (the
    subset rule once merged `npm run build --workspace admin` into the `npm run build` chore)."""
    same = [("rebuild the frontend assets", "npm run build"),
            ("make a fresh production bundle of the UI", "npm run build -- --mode production")]
    scoped = [("build only the admin workspace bundle", "npm run build --workspace admin"),
              ("migrate the local database to head", "alembic upgrade head"),
              ("migrate just the billing service's schema", "alembic -x service=billing upgrade head"),
              ("reset only the billing database", "make reset-db SERVICE=billing"),
              ("reset the dev database", "make reset-db")]
    for i, (prompt, command) in enumerate(same + scoped):
        turn(project, f"w{i}", prompt, "Done.", commands=[(command, "ok")])
    assert drain()["merged"] == []
    records = listed(project)
    groups = json.loads(cli("consolidate", "--json", "--project", str(project)).stdout)["groups"]
    assert [g["record_ids"] for g in groups] == [[records[p]["record_id"] for p, _ in same]], groups


def test_a_retry_without_status_whose_output_is_an_error_supersedes_nothing(project):
    failing(project, "h1", "build the docs", "mkdocs build --strict", "ERROR - Config value 'nav': a page is missing")
    drain()
    claude_bash(project, "h2", "try the docs build again", "mkdocs build --strict",
                "ERROR    -  Config value 'nav': a page is missing\nAborted with 1 configuration errors!")
    assert drain()["superseded"] == 0
    assert listed(project)["build the docs"]["superseded_by"] is None


def test_a_kiro_ide_failure_is_superseded_by_the_later_success_its_request_names(project):
    """Kiro IDE 0.x's calls carry no command: its failed attempt is superseded by a later success whose
    request quotes the same command, and only then; a different failed work, and a failure whose request
    quotes nothing, stay as they were."""
    api, cargo, vague = ("try `pytest -q tests/test_api.py` for the api module", "run `cargo test -p api` and report",
                         "run the tests and tell me")
    ide_turn(project, api, [("Command failed: E   ImportError: cannot import name 'login'", False)])
    ide_turn(project, cargo, [("Command failed: error[E0425]: cannot find value `limit`", False)])
    ide_turn(project, vague, [("Command failed: 2 failed, 10 passed", False)])
    drain()
    assert {listed(project)[t]["outcome"] for t in (api, cargo, vague)} == {"failed"}
    ide_turn(project, "retry `pytest -q tests/test_api.py` now", [("12 passed in 0.84s", True)])
    ide_turn(project, "the tests for the api module, once more please", [("12 passed in 0.9s", True)])
    done = drain()
    assert done["superseded"] == 1, done
    after = listed(project)
    retry = after["retry `pytest -q tests/test_api.py` now"]
    assert retry["outcome"] == "succeeded"
    assert after[api]["superseded_by"] == retry["record_id"]
    assert after[cargo]["superseded_by"] is None and after[vague]["superseded_by"] is None
    entry = [h for h in shown(after[api]["record_id"])["history"] if h["action"] == "supersede"]
    assert "pytest -q tests/test_api.py" in entry[0]["reason"], entry
    # another agent running the quoted command supersedes the IDE's failed attempt too
    turn(project, "k2", "build the api crate", "It builds.", commands=[("cargo test -p api", "test result: ok")])
    drain()
    after = listed(project)
    assert after[cargo]["superseded_by"] == after["build the api crate"]["record_id"]
    assert after[vague]["superseded_by"] is None
