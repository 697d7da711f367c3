"""Issue #24: memory that earns its tokens. What is kept, what is injected, what a person sees.

Every test goes through a real command: the hook process, `kirolearn` (CLI), the MCP client.
"""

import json
import os
import subprocess

import pytest
from click.testing import CliRunner
from conftest import BIN, hook_env, run_hook

from kirolearn.cli.commands import cli

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")


def hook(project, name, session="s-1", **payload):
    body = {"hook_event_name": name, "cwd": str(project), "session_id": session, **payload}
    result = run_hook([], json.dumps(body).encode())
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    return result.stdout.decode("utf-8")


def kirolearn(*args, cwd=None):
    result = subprocess.run(
        [str(BIN / "kirolearn"), *args], capture_output=True, text=True, timeout=120, env=hook_env(), cwd=cwd
    )
    return result


def records(*args):
    out = kirolearn("list", "--json", "--limit", "100", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# --- 1. nothing a turn did is lost --------------------------------------------------------------------------


def test_two_turns_ending_in_empty_stops_within_3_s_each_get_a_record_in_one_flush(project):
    hook(project, "userPromptSubmit", prompt="rename the config loader in src/config.py")
    hook(project, "stop", assistant_response="")  # Kiro CLI posts empty stops
    hook(project, "userPromptSubmit", prompt="now add a test for src/config.py")
    hook(project, "stop", assistant_response="")  # identical payload, well within the 3 s window
    drained = kirolearn("drain", "--flush", "--json")
    assert drained.returncode == 0, drained.stderr
    stats = json.loads(drained.stdout)
    assert stats["stored"] == 4 and stats["duplicates"] == 0 and stats["pending_events"] == 0
    titles = sorted(r["title"] for r in records("--project", str(project)))
    assert titles == ["now add a test for src/config.py", "rename the config loader in src/config.py"]


def test_a_twin_hook_of_the_same_stop_is_still_one_event(project):
    hook(project, "userPromptSubmit", prompt="rename the loader in src/config.py")
    hook(project, "stop", assistant_response="")
    hook(project, "stop", assistant_response="")  # the same stop, wired twice (classic + v3)
    stats = json.loads(kirolearn("drain", "--flush", "--json").stdout)
    assert stats["stored"] == 2 and stats["duplicates"] == 0  # the hook kept one (capture/once.py)


def test_one_flush_extracts_each_session_s_last_open_turn(project):
    for session in ("a", "b"):
        hook(
            project,
            "userPromptSubmit",
            session=session,
            prompt=f"first turn of {session}: edit src/{session}.py",
        )
        hook(project, "stop", session=session, assistant_response=f"Edited src/{session}.py.")
        hook(
            project,
            "userPromptSubmit",
            session=session,
            prompt=f"second turn of {session}: test src/{session}.py",
        )
    stats = json.loads(kirolearn("drain", "--flush", "--json").stdout)
    assert stats["pending_events"] == 0 and stats["batches_extracted"] == 4
    assert len(records("--project", str(project))) == 4
    again = json.loads(kirolearn("drain", "--flush", "--json").stdout)
    assert again["batches_extracted"] == 0


# --- 2. nothing that is not knowledge is kept as if it were -----------------------------------------------------


def test_chatter_is_a_conversation_never_tool_use_and_never_the_session_start_headline(project):
    hook(project, "userPromptSubmit", session="w", prompt="fix the failing import in src/app.py")
    hook(
        project,
        "postToolUse",
        session="w",
        tool_name="fs_write",
        tool_input={"command": "str_replace", "path": str(project / "src" / "app.py")},
        tool_response="Updated src/app.py",
    )
    hook(project, "stop", session="w", assistant_response="Fixed the import in src/app.py.")
    hook(project, "userPromptSubmit", session="c", prompt="write a haiku about autumn")
    hook(project, "stop", session="c", assistant_response="Leaves drift on cold wind / ...")
    hook(project, "userPromptSubmit", session="q", prompt="why did we pin numpy again?")
    hook(project, "stop", session="q", assistant_response="Because the newer release broke the build.")
    assert kirolearn("drain", "--flush").returncode == 0
    kinds = {r["title"]: r["observation_type"] for r in records("--project", str(project))}
    assert kinds["write a haiku about autumn"] == "conversation"
    assert kinds["why did we pin numpy again?"] == "conversation"
    assert kinds["fix the failing import in src/app.py"] == "session_summary"
    start = hook(project, "agentSpawn", session="next")
    assert "Fixed the import in src/app.py" in start
    assert "haiku" not in start and "numpy" not in start
    # still searchable, at a low weight, under its own name
    found = kirolearn("search", "autumn haiku", "--json", cwd=str(project))
    assert [h["observation_type"] for h in json.loads(found.stdout)] == ["conversation"]


def test_concepts_have_no_stop_words_and_no_redaction_marker_words(project):
    hook(
        project,
        "userPromptSubmit",
        prompt="lets go through the migration again because the rollback keeps failing <private>hunter2</private>",
    )
    hook(
        project,
        "stop",
        assistant_response="The migration rollback failed because the schema table was locked; "
        "lets retry through the pooled connection again.",
    )
    assert kirolearn("drain", "--flush").returncode == 0
    (record,) = records("--project", str(project))
    concepts = set(record["concepts"])
    assert {"migration", "rollback"} <= concepts
    assert not concepts & {"lets", "through", "again", "because", "redacted", "private"}


# --- 4. the seed's session pair is exact --------------------------------------------------------------------


@pytest.mark.parametrize("value", ["yes", 1, "false", "true", 0, None])
def test_auto_compress_takes_booleans_only(project, value):
    from helpers import call, text

    result = call(project, "session_end", {"session_id": "s-1", "summary": "Done.", "auto_compress": value})
    assert result.isError
    assert "'auto_compress' must be true or false" in text(result)


def test_session_init_returns_one_saved_row_never_two_mixed(project):
    from helpers import call

    from kirolearn import settings

    call(
        project,
        "session_end",
        {
            "session_id": "old",
            "summary": "Moved JWT checks.",
            "next_steps": ["old step"],
            "pitfalls": ["UTC tokens"],
        },
    )
    call(
        project,
        "session_end",
        {"session_id": "new", "auto_compress": True, "next_steps": ["new step"]},
        settings=settings.Settings(),
    )  # no model: an empty summary is saved
    init = call(project, "session_init", {}).structuredContent
    assert (init["session_id"], init["summary"], init["next_steps"], init["pitfalls"]) == (
        "new",
        "",
        ["new step"],
        [],
    )
    previous = init["previous"]
    assert (previous["session_id"], previous["summary"], previous["next_steps"], previous["pitfalls"]) == (
        "old",
        "Moved JWT checks.",
        ["old step"],
        ["UTC tokens"],
    )
    cli_init = CliRunner().invoke(cli, ["session-init", "--project", str(project), "--json"])
    assert json.loads(cli_init.output)["session_id"] == "new"


# --- 5. every message names the project it resolved and why ---------------------------------------------------


def test_messages_name_the_project_and_never_home(tmp_path, project, home):
    outside = tmp_path / "loose files"
    outside.mkdir()
    user_home = os.environ["HOME"]
    listed = kirolearn("list", "--project", str(outside))
    assert listed.returncode == 0
    assert "no database yet at" in listed.stderr  # a fresh home says so
    assert "the global project" in listed.stderr and str(outside) in listed.stderr
    assert user_home not in listed.stderr
    ended = kirolearn("session-end", "--session-id", "s", "--summary", "Did it.", "--project", str(project))
    assert (
        ended.returncode == 0
        and f"for project {project}" in ended.stdout
        and "for general" not in ended.stdout
    )
    listed = kirolearn("list", "--project", str(outside))
    assert (
        "no database yet" not in listed.stderr and "No memory records in the global project" in listed.stderr
    )


def test_the_mcp_server_started_from_home_names_the_project_it_uses(home):
    import asyncio

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    user_home = os.environ["HOME"]

    async def go():
        params = StdioServerParameters(
            command=str(BIN / "kirolearn-mcp"), args=[], env=hook_env(), cwd=user_home
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool("search_memory", {"query": "anything"})

    result = asyncio.run(asyncio.wait_for(go(), 60))
    said = result.content[0].text
    assert "the current project" not in said
    assert "the global project" in said and f"started in {user_home}" in said


def test_export_includes_forgotten_records_marked_and_import_round_trips_them(project, tmp_path, monkeypatch):
    hook(project, "userPromptSubmit", prompt="why is scripts/export.py locked")
    hook(
        project,
        "stop",
        assistant_response="It opened sqlite without a timeout; scripts/export.py uses 30 s now.",
    )
    hook(project, "userPromptSubmit", prompt="add --dry-run to scripts/export.py")
    hook(project, "stop", assistant_response="scripts/export.py --dry-run prints the row count.")
    assert kirolearn("drain", "--flush").returncode == 0
    first, second = records("--project", str(project))
    assert kirolearn("forget", first["record_id"], "--reason", "obsolete").returncode == 0
    out = kirolearn("export")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    recs = {r["record_id"]: r for r in lines if r["type"] == "record"}
    assert set(recs) == {first["record_id"], second["record_id"]}
    assert recs[first["record_id"]]["forgotten"]["reason"] == "obsolete"
    assert "forgotten" not in recs[second["record_id"]]
    dump = tmp_path / "dump.jsonl"
    dump.write_text(out.stdout, "utf-8")
    monkeypatch.setenv("KIROLEARN_HOME", str(tmp_path / "other home"))
    if True:
        imported = kirolearn("import", str(dump))
        assert imported.returncode == 0, imported.stderr
        assert [r["record_id"] for r in records("--project", str(project))] == [second["record_id"]]
        forgotten = json.loads(kirolearn("list", "--forgotten", "--json", "--project", str(project)).stdout)
        assert [f["record_id"] for f in forgotten] == [first["record_id"]]
        again = [json.loads(line) for line in kirolearn("export").stdout.splitlines()]
        assert sorted(json.dumps(x, sort_keys=True) for x in again if x["type"] == "record") == sorted(
            json.dumps(x, sort_keys=True) for x in lines if x["type"] == "record"
        )


# --- 3. a context block that is short and right -----------------------------------------------------------------


def _work_turn(project, session, prompt, answer, path):
    hook(project, "userPromptSubmit", session=session, prompt=prompt)
    hook(
        project,
        "postToolUse",
        session=session,
        tool_name="fs_write",
        tool_input={"command": "str_replace", "path": str(project / path)},
        tool_response=f"Updated {path}",
    )
    hook(project, "stop", session=session, assistant_response=answer)


def test_the_block_is_one_line_per_record_from_its_outcome_with_its_id_and_its_size(project):
    from helpers import TURN, call

    _work_turn(
        project,
        "w1",
        "make the nightly export robust in scripts/export.py",
        "The export now opens SQLite with timeout=30 and WAL, so the nightly job no longer fails locked.",
        "scripts/export.py",
    )
    assert kirolearn("drain", "--flush").returncode == 0
    call(project, "save_session_summary", dict(TURN, investigated="none", learned="None.", next_steps="n/a"))
    start = hook(project, "agentSpawn", session="next")
    lines = start.splitlines()
    assert lines[0] == "## kirolearn memory: where this project left off"
    assert "2 records, ~" in lines[1] and " tokens" in lines[1]
    said = [ln for ln in lines[2:] if ln.startswith("> - ")]
    assert len(said) == 2 and len(lines) == 4  # heading, preamble with the size, one line per record
    ids = [r["record_id"] for r in records("--project", str(project))]
    assert all(any(ln.endswith(" · " + rid) for ln in said) for rid in ids)
    assert any(
        "The export now opens SQLite with timeout=30 and WAL" in ln and "· session_summary ·" in ln
        for ln in said
    )
    assert "**Request:**" not in start and "Files:" not in start and "## What was" not in start
    assert "none" not in start.lower().replace("no longer", "") and "n/a" not in start
    assert " · by " not in start  # the reader's own records carry no attribution
    tokens = int(lines[1].split(", ~")[1].split(" tokens")[0])
    assert abs(tokens - len(start) / 4) <= 10


def test_own_records_are_never_attributed_even_when_the_hook_saw_no_user(project):
    env = {k: v for k, v in hook_env().items() if k not in ("USER", "LOGNAME", "USERNAME")}
    for name, payload in (
        ("userPromptSubmit", {"prompt": "speed up tests/test_api.py"}),
        ("stop", {"assistant_response": "tests/test_api.py now shares one app fixture."}),
    ):
        body = {"hook_event_name": name, "cwd": str(project), "session_id": "u", **payload}
        assert run_hook([], json.dumps(body).encode(), env=env).returncode == 0
    assert kirolearn("drain", "--flush").returncode == 0
    import pwd

    (record,) = records("--project", str(project))
    assert record["actor"] == pwd.getpwuid(os.getuid()).pw_name  # the login name, never "unknown"
    for reader_env in (env, hook_env(USER="someone")):
        body = {"hook_event_name": "agentSpawn", "cwd": str(project), "session_id": f"r-{len(reader_env)}"}
        out = run_hook([], json.dumps(body).encode(), env=reader_env).stdout.decode()
        assert "shares one app fixture" in out and " · by " not in out


def test_nothing_is_repeated_within_a_session(project, tmp_path):
    quiet = tmp_path / "quiet project"
    (quiet / ".git").mkdir(parents=True)
    for where in (project, quiet):
        _work_turn(
            where,
            "w",
            "fix the export lock in scripts/export.py",
            "scripts/export.py opens SQLite with timeout=30 and WAL now.",
            "scripts/export.py",
        )
    assert kirolearn("drain", "--flush").returncode == 0
    start = hook(project, "agentSpawn", session="s-next")
    assert "timeout=30" in start
    assert (
        hook(project, "userPromptSubmit", session="s-next", prompt="the export lock in scripts/export.py")
        == ""
    )
    # agentSpawn without a session id (kiro-cli --no-interactive), then prompts that carry one
    body = {"hook_event_name": "agentSpawn", "cwd": str(quiet)}
    assert "timeout=30" in run_hook([], json.dumps(body).encode()).stdout.decode()
    assert (
        hook(quiet, "userPromptSubmit", session="s-later", prompt="the export lock in scripts/export.py")
        == ""
    )
    state = [p for p in (pathlib_home() / "sessions").iterdir() if p.name.startswith("recall-")]
    assert state and all(p.stat().st_mode & 0o777 == 0o600 for p in state)


def pathlib_home():
    import pathlib

    return pathlib.Path(os.environ["KIROLEARN_HOME"])


def test_get_memory_reads_a_record_in_full_over_mcp(project):
    from helpers import call, list_tools, text

    _work_turn(
        project,
        "w",
        "fix the export lock in scripts/export.py",
        "scripts/export.py opens SQLite with timeout=30 and WAL now.",
        "scripts/export.py",
    )
    assert kirolearn("drain", "--flush").returncode == 0
    (record,) = records("--project", str(project))
    tool = {t.name: t for t in list_tools(project)}["get_memory"]
    assert tool.annotations.readOnlyHint is True and tool.annotations.destructiveHint is False
    got = call(project, "get_memory", {"record_id": record["record_id"]})
    assert not got.isError
    assert got.structuredContent["summary"] == record["summary"]
    assert got.structuredContent["files_touched"] == ["scripts/export.py"]
    assert "**Outcome:** scripts/export.py opens SQLite" in text(got)
    missing = call(project, "get_memory", {"record_id": "mr_01ARZ3NDEKTSV4RRFFQ69G5FAV"})
    assert missing.isError and f"in project {project}" in text(missing)
    other = project.parent / "other"
    (other / ".git").mkdir(parents=True)
    assert call(
        other, "get_memory", {"record_id": record["record_id"]}
    ).isError  # this project's records only


def test_bench_context_measures_tokens_and_the_needed_record(tmp_path):
    import pathlib
    import sys

    script = pathlib.Path(__file__).parent.parent / "bench" / "bench_context.py"
    env = dict(hook_env(), KIROLEARN_HOME=str(tmp_path / "unused"))
    out = subprocess.run(
        [sys.executable, str(script), "--sets", "coding", "--distractors", "30"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "coding: prompt block tokens mean / p95 / max" in out.stdout
    assert "coding: needed record in the prompt block" in out.stdout and "/80 = " in out.stdout
    assert "coding: prompt blocks within ~300 tokens" in out.stdout
