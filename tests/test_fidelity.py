"""Issue #14: the seeds exactly, Kiro as it behaves, and the newcomer's rough edges.

Each test goes through the real MCP client session, the real CLI, the real hook
process or litellm against the local fake server.
"""

import json
import os
import subprocess

import pytest
from click.testing import CliRunner

from kirolearn import Memory, __version__, textcut
from kirolearn.recall import context
from kirolearn.cli import cli

from conftest import BIN, hook_env, run_hook
from fakellm import FakeLLM
from test_mcp import TURN, call, list_tools, text

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")

SEED_SESSION_END_DESCRIPTION = (
    "End-of-session capture: summary + highlights + pitfalls + next_steps so the next session can resume cleanly. "
    "Set auto_compress=true to have the LLM generate the missing summary/next_steps/pitfalls from stored session "
    "artifacts (or from an optional `transcript`)."
)


def _no_model():
    from kirolearn import settings

    return settings.Settings()


# --- 1. a failed auto_compress stores "" and never hides the earlier summary -----------------------------------


def test_failed_auto_compress_stores_an_empty_summary_and_keeps_the_previous_one(project):
    first = call(project, "session_end", {"session_id": "s-1", "summary": "Moved JWT checks into middleware.",
                                          "next_steps": ["Rate-limit /auth/refresh"]})
    assert not first.isError
    failed = call(project, "session_end", {"session_id": "s-2", "auto_compress": True, "transcript": "worked"},
                  settings=_no_model())
    shape = failed.structuredContent
    assert shape["summary_len"] == 0 and shape["auto_compress_error"] == "provider_unavailable"
    assert shape["compressed_used"] is False and shape["next_steps_count"] == 0

    from kirolearn.store import sqlite as store

    db = store.open_db()
    (row,) = db.query("select summary, record_id from session_summaries where session_id = 's-2'")
    assert row == {"summary": "", "record_id": None}  # the seed's empty summary; no placeholder record
    assert not Memory().search("no summary was written auto_compress", project=project)

    init = call(project, "session_init", {}).structuredContent
    # one saved row, the newest, as session_end saved it (#24); the earlier summary rides along whole
    assert init["found"] and init["session_id"] == "s-2" and init["summary"] == "" and init["next_steps"] == []
    assert init["previous"]["session_id"] == "s-1"
    assert init["previous"]["summary"] == "Moved JWT checks into middleware."
    assert init["previous"]["next_steps"] == ["Rate-limit /auth/refresh"]
    assert init["ended_without_summary"] == [{"session_id": "s-2", "ended_at": shape["ended_at"],
                                              "auto_compress_error": "provider_unavailable"}]
    block = Memory().context(project=project)
    assert "Moved JWT checks into middleware." in block and "Rate-limit /auth/refresh" in block
    assert "Since then session s-2 ended without a summary (auto_compress: provider_unavailable)." in block


def test_a_later_session_s_next_steps_replace_the_carried_ones(project):
    call(project, "session_end", {"session_id": "s-1", "summary": "Done A.", "next_steps": ["old step"]})
    call(project, "session_end", {"session_id": "s-2", "auto_compress": True, "next_steps": ["new step"]},
         settings=_no_model())
    init = call(project, "session_init", {}).structuredContent
    # never fields of two rows (#24): the newest row's own next steps, the older row whole beside it
    assert init["session_id"] == "s-2" and init["summary"] == "" and init["next_steps"] == ["new step"]
    assert init["previous"]["summary"] == "Done A." and init["previous"]["next_steps"] == ["old step"]
    call(project, "session_end", {"session_id": "s-3", "summary": "Done B."})
    init = call(project, "session_init", {}).structuredContent
    assert init["summary"] == "Done B." and init["ended_without_summary"] == [] and "previous" not in init
    assert init["next_steps"] == []


def test_only_empty_summaries_so_far_is_found_with_an_empty_summary(project):
    call(project, "session_end", {"session_id": "s-1", "auto_compress": True, "pitfalls": ["UTC"]},
         settings=_no_model())
    init = call(project, "session_init", {}).structuredContent
    assert init["found"] and init["summary"] == "" and init["pitfalls"] == ["UTC"]
    block = Memory().context(project=project)
    assert "Last session ended without a summary" in block and "UTC" in block


# --- 2. a fresh label is found: false ------------------------------------------------------------------------


def test_session_init_with_a_new_label_on_a_fresh_project_is_not_an_error(project):
    fresh = call(project, "session_init", {"project": "my-api"})
    assert not fresh.isError
    assert fresh.structuredContent["found"] is False and fresh.structuredContent["known_projects"] == []
    cli_out = CliRunner().invoke(cli, ["session-init", "--label", "my-api", "--json", "--project", str(project)])
    assert cli_out.exit_code == 0 and json.loads(cli_out.output)["found"] is False


# --- 3. files_touched keeps the whole union, modified first ---------------------------------------------------


def test_files_touched_is_the_whole_union_modified_first(project):
    read = [f"src/read_{i}.py" for i in range(150)]
    modified = [f"src/changed_{i}.py" for i in range(10)] + ["src/read_0.py"]
    result = call(project, "save_session_summary", dict(TURN, files_read=read, files_modified=modified))
    assert not result.isError
    (hit,) = Memory().search("plus-sign login", project=project)
    assert len(hit.files_touched) == 160
    assert hit.files_touched[:11] == modified and set(read) <= set(hit.files_touched)


# --- 4. session_end records are not turn summaries ------------------------------------------------------------


def test_session_end_records_do_not_take_the_turn_summary_slot(project):
    call(project, "save_session_summary", TURN)
    call(project, "session_end", {"session_id": "s-1", "summary": "Wrapped up the login work for today."})
    block = Memory().context(project=project)
    # one line: the request once, then what was completed and what is next
    assert "- Why does login 500 on plus-sign emails? → Parameterised the query Next: Fix app/orders.py" in block
    assert "· session_summary ·" in block
    assert "Session end:" not in block  # shown once, in the session-end block
    assert block.count("Wrapped up the login work") == 1
    prompt = Memory().context(project=project, prompt="wrapped up the login work today")
    assert "· session_end ·" in prompt and "Session end: Wrapped up" in prompt


# --- 5. the hook path's turn summary comes from the model ------------------------------------------------------


def _answer(*types):
    return json.dumps({"records": [{"observation_type": t, "title": f"{t} title", "summary": f"{t} summary"}
                                   for t in types]})


@pytest.mark.parametrize("second, strategy, note", [
    (_answer("session_summary"), "llm-summary", ""),
    (_answer("decision"), "deterministic-turn", "turn summary: the model gave none"),
])
def test_the_model_is_asked_for_the_missing_turn_summary(make_event, drain_now, write_config, monkeypatch,
                                                         second, strategy, note):
    with FakeLLM() as fake:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-tests")
        write_config(f'[extract]\nmodel = "openai/fake-model"\napi_base = "{fake.openai_base}"\nretries = 0\n')
        make_event("userPromptSubmit", prompt="fix the login bug")
        make_event("stop", assistant_response="Fixed it.")
        fake.enqueue(_answer("decision"))  # no session_summary record ...
        fake.enqueue(second)  # ... so it is asked for explicitly
        stats, db = drain_now()
        asked = fake.chat_requests[1]["json"]["messages"]
    assert len(fake.chat_requests) == 2 and 'observation_type "session_summary"' in asked[-1]["content"]
    summary = next(db.query("select strategy from memory_records where observation_type = 'session_summary'"))
    assert summary["strategy"] == strategy
    (run,) = db.query("select fallback_reason, extractor from extraction_runs")
    assert run["extractor"] == "llm" and run["fallback_reason"].startswith(note)


# --- 6. smaller seed points ------------------------------------------------------------------------------------


def test_auto_compress_fills_only_absent_values(project):
    from kirolearn.pipeline.extract import Completion

    def complete(messages, conf, response_format=None):
        return Completion(json.dumps({"summary": "Drafted.", "next_steps": ["drafted"], "pitfalls": ["drafted"]}))

    conf = _no_model()
    conf.extract.model = "openai/fake"
    shape = call(project, "session_end", {"session_id": "s", "auto_compress": True, "next_steps": [],
                                          "transcript": "log"}, settings=conf, complete=complete).structuredContent
    assert shape["next_steps_count"] == 0 and shape["compressed_used"] is True
    init = call(project, "session_init", {}).structuredContent
    assert init["next_steps"] == [] and init["pitfalls"] == ["drafted"]


def test_session_end_description_is_the_seed_s_byte_for_byte(project):
    tools = {t.name: t for t in list_tools(project)}
    assert tools["session_end"].description == SEED_SESSION_END_DESCRIPTION


# --- 7. one session start, one context block -------------------------------------------------------------------


def test_twin_session_start_hooks_without_a_session_id_inject_once(project, add_record):
    add_record(project, "Sorted the checkout discounts", "by priority", observation_type="decision")
    classic = json.dumps({"hook_event_name": "agentSpawn", "cwd": str(project)}).encode()
    v3 = json.dumps({"hook_event_name": "SessionStart", "cwd": str(project)}).encode()
    procs = [subprocess.Popen([str(BIN / "kirolearn-hook")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=hook_env()) for _ in (classic, v3)]
    outs = [p.communicate(payload, timeout=30) for p, payload in zip(procs, (classic, v3))]
    printed = [out for out, _ in outs if out]
    assert [p.returncode for p in procs] == [0, 0] and len(printed) == 1
    assert b"Sorted the checkout discounts" in printed[0]
    # a third one right after (Kiro runs hooks one by one) is refused too
    assert run_hook(stdin=classic).stdout == b""


def test_two_real_sessions_with_their_own_ids_both_get_the_block(project, add_record):
    add_record(project, "Sorted the checkout discounts", "by priority", observation_type="decision")
    for sid in ("kiro-a", "kiro-b"):
        out = run_hook(stdin=json.dumps({"hook_event_name": "SessionStart", "cwd": str(project),
                                         "session_id": sid}).encode())
        assert b"Sorted the checkout discounts" in out.stdout


# --- 8 and 16. the block fits Kiro's 10 KB hook output and is cut at a boundary ----------------------------------


def test_the_hook_caps_the_budget_below_kiros_output_limit(project, add_record, write_config):
    write_config("[recall]\nbudget_tokens = 100000\n")  # an old config.toml: the hook still caps it
    assert context.settings()["budget_tokens"] == context.MAX_BUDGET_TOKENS
    for i in range(12):
        add_record(project, f"Decision {i} about the café schema — ünïcode", "é" * 3000 + f" `code {i}`",
                   observation_type="decision")
    out = run_hook(stdin=json.dumps({"hook_event_name": "agentSpawn", "cwd": str(project),
                                     "session_id": "big"}).encode()).stdout
    assert 0 < len(out) <= 10_000 < 10_240


def test_cut_lands_on_a_boundary_and_never_inside_code():
    text = "First sentence here. Then we ran `make test --all` to check.\nSecond line with more words."
    for limit in range(10, len(text)):
        cut = textcut.cut(text, limit)
        assert len(cut) <= limit and cut.endswith(textcut.MARKER.strip())
        kept = cut[: -len(textcut.MARKER)] if cut != textcut.MARKER.strip() else ""
        assert kept.count("`") % 2 == 0, cut
        assert text.startswith(kept)
    assert textcut.cut(text, 70) == "First sentence here. Then we ran `make test --all` to check." + textcut.MARKER
    fenced = "Run this:\n```\nlong code line one\nlong code line two\n```\nafter"
    assert textcut.cut(fenced, 40) == "Run this:" + textcut.MARKER


def test_a_long_summary_is_cut_outside_its_code_span_in_the_block(project, add_record):
    summary = "We changed the query. " * 30 + "Then `" + "x" * 200 + "` fixed it."
    add_record(project, "Long record", summary, observation_type="decision")
    block = Memory().context(project=project)
    (line,) = [ln for ln in block.splitlines() if "We changed the query" in ln]
    said = line.split(" · decision · ")[0]  # one line per record: what it holds, then its kind, age and id
    assert said.endswith("We changed the query.") and "`" not in said


# --- 14. MCP server details -------------------------------------------------------------------------------------


def test_tool_schemas_hold_the_limits_and_descriptions_are_dedented(project):
    tools = {t.name: t for t in list_tools(project)}
    obs = tools["save_observation"].inputSchema["properties"]
    assert (obs["title"]["minLength"], obs["title"]["maxLength"]) == (1, 200)
    assert obs["summary"]["maxLength"] == 4000 and obs["facts"]["maxItems"] == 50
    assert obs["facts"]["items"]["maxLength"] == 500 and obs["files_touched"]["maxItems"] == 100
    turn = tools["save_session_summary"].inputSchema["properties"]
    assert turn["files_read"]["maxItems"] == 200 and turn["request"]["maxLength"] == 100_000
    for tool in tools.values():
        assert "\n    " not in tool.description, tool.name


@pytest.mark.parametrize("args, message", [
    ({"title": 5}, "'title' must be a string, got integer"),
    ({"facts": "one fact"}, "'facts' must be a list, got string"),
    ({"title": "x" * 201}, "'title' must be at most 200 characters"),
])
def test_wrong_types_get_one_plain_line(project, args, message):
    base = {"title": "t", "summary": "s", "observation_type": "decision", "facts": [], "concepts": [],
            "files_touched": []}
    result = call(project, "save_observation", dict(base, **args))
    assert result.isError
    assert text(result) == f"invalid arguments for save_observation: {message}"


def test_server_info_reports_kirolearn_s_version(project):
    from kirolearn import mcp_server

    server = mcp_server.build_server(str(project))
    assert server._mcp_server.create_initialization_options().server_version == __version__


# --- 17. help text ----------------------------------------------------------------------------------------------


def test_top_level_help_does_not_truncate_descriptions():
    out = CliRunner().invoke(cli, ["--help"], terminal_width=80).output
    commands = out.split("Options:")[1]  # the command sections follow the options
    assert "..." not in commands
    assert " ".join(commands.split()).count("Show the latest session-end summary of this project (it stays "
                                            "until superseded).") == 1


# --- 19. silent fallbacks and wrong hints -----------------------------------------------------------------------


def test_search_with_a_missing_project_is_an_error(tmp_path):
    result = CliRunner().invoke(cli, ["search", "x", "--project", str(tmp_path / "nonexistent")])
    assert result.exit_code == 2 and "does not exist" in result.output


@pytest.mark.parametrize("every, kind, ok", [
    ("90s", "--cron", False), ("7m", "--cron", False), ("25h", "--cron", False),
    ("90s", "--systemd", True), ("7m", "--launchd", True), ("15m", "--cron", True), ("2h", "--cron", True),
])
def test_schedule_refuses_what_cron_cannot_express(every, kind, ok):
    result = CliRunner().invoke(cli, ["schedule", "--every", every, kind, "--print"])
    assert (result.exit_code == 0) is ok, result.output
    if not ok:
        assert "cron cannot run a job evenly" in result.output and "--systemd" in result.output


def test_a_missing_crontab_does_not_suggest_cron(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no crontab, no systemctl, no launchctl
    result = CliRunner().invoke(cli, ["schedule", "--cron"])
    assert result.exit_code == 1 and "crontab is not installed" in result.output
    assert "--cron" not in result.output and "kirolearn drain --watch" in result.output


def test_save_summary_reads_a_piped_json_document_without_stdin_flag(project):
    result = CliRunner().invoke(cli, ["save-summary", "--json", "--project", str(project)], input=json.dumps(TURN))
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["title"] == TURN["request"]
    empty = CliRunner().invoke(cli, ["save-summary", "--project", str(project)], input="")
    assert empty.exit_code == 2 and "missing --request" in empty.output


def test_docs_configuration_table_is_one_table():
    import pathlib

    readme = (pathlib.Path(__file__).parent.parent / "docs" / "configuration.md").read_text("utf-8")
    section = readme.split("# Configuration", 1)[1].split("\n## ", 1)[0].splitlines()
    rows = [i for i, line in enumerate(section) if line.startswith("|")]
    assert rows == list(range(rows[0], rows[-1] + 1))  # no row stranded outside the table
    assert any("`retention.events_days`" in section[i] for i in rows)


def test_an_older_store_s_placeholder_summaries_are_emptied(project):
    from kirolearn.store import migrations
    from kirolearn.store import sqlite as store

    call(project, "session_end", {"session_id": "s-1", "summary": "Real work done."})
    db = store.open_db()
    placeholder = "Session s-2 ended; no summary was written (auto_compress: provider_unavailable)."
    call(project, "session_end", {"session_id": "s-2", "summary": placeholder})  # as an old version stored it
    db.execute("update session_summaries set auto_compress = 1 where session_id = 's-2'")
    db.execute("delete from _sqlite_migrations where name = 'm014_placeholder_session_summaries'")
    db.conn.commit()
    migrations.migrations.apply(db)
    (row,) = db.query("select summary, record_id from session_summaries where session_id = 's-2'")
    assert row == {"summary": "", "record_id": None}
    assert not Memory().search("no summary was written", project=project)
    init = call(project, "session_init", {}).structuredContent
    assert init["summary"] == "" and init["previous"]["summary"] == "Real work done."
