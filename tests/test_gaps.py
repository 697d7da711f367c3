"""Behaviours a review could break without failing a test: each test here fails under
one small deliberate bug (named in its docstring), through the real component.

Checked by planting each bug by hand and running this file (see README, "Mutation testing").
"""

import json

import pytest

from kirolearn import settings
from kirolearn.recall import context
from kirolearn.recall import lexical as recall
from kirolearn.store import sqlite as store
from kirolearn.pipeline.extract import Completion

from test_drain_llm import complete_with, runs, turn
from test_extract import GOOD
from test_mcp import call, text

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")

T = 1_800_000_000.0
CALL = dict(tool_name="execute_bash", tool_input={"command": "make"}, tool_response={"success": True, "result": ["ok"]})


# --- content dedup: 3 s, not more (mutation: the window made 10x longer) ----------------------------------


def test_dedup_window_boundary_within_one_drain(make_event, drain_now):
    make_event(now=T, **CALL)
    make_event(now=T + 2.9, **CALL)  # a hook wired twice, firing late: one call
    make_event(now=T + 100, **CALL)
    make_event(now=T + 103.1, **CALL)  # 3.1 s apart: two calls
    make_event(now=T + 200, **CALL)
    make_event(now=T + 229, **CALL)  # 29 s apart: a 30 s window would merge these
    stats, db = drain_now()
    assert (stats.stored, stats.duplicates) == (5, 1)


def test_dedup_window_boundary_across_drains(make_event, drain_now):
    """The second copy arrives after the first was stored: the store's lookup decides."""
    make_event(now=T, **CALL)
    make_event(now=T + 100, **CALL)
    make_event(now=T + 200, **CALL)
    drain_now()
    make_event(now=T + 2.9, **CALL)
    make_event(now=T + 103.1, **CALL)
    make_event(now=T + 229, **CALL)
    stats, db = drain_now()
    assert (stats.stored, stats.duplicates) == (2, 1)
    assert db["events"].count == 5


# --- recall: the relative floor (mutation: RELATIVE_FLOOR = 0) ------------------------------------------------


def test_a_weak_match_below_the_floor_is_not_injected(project, add_record):
    strong = add_record(project, "Export job: database is locked during export",
                        "The export job hits database is locked; the export now uses WAL and timeout=30.",
                        observation_type="error")
    weak = add_record(project, "Release checklist",
                      "Bump the version, tag, write the changelog, announce in chat, check the docs site, "
                      "rotate the staging data, review open issues, mention the export.",
                      observation_type="tool_use")
    for i in range(6):  # a realistic store: the prompt's words are rare in it
        add_record(project, f"Unrelated note {i}", f"frontend colour palette number {i}")
    conn = recall.connect_readonly()
    hits = recall.search(conn, "export locked", project_id=context.project_id(str(project)))
    by_id = {h.record_id: h for h in hits}
    assert {strong, weak} <= set(by_id)  # both match a word of the prompt ...
    assert by_id[weak].score < recall.RELATIVE_FLOOR * by_id[strong].score  # ... one far below the best
    block, shown = context.for_prompt(conn, str(project), "export locked")
    assert shown == [strong]
    assert "Release checklist" not in block


# --- session_end: a summary of only spaces is no summary (mutation: `not summary` instead of `.strip()`) ----


@pytest.mark.parametrize("blank", ["   ", "\n\t  \n"])
def test_session_end_rejects_a_summary_of_only_whitespace(project, blank):
    result = call(project, "session_end", {"session_id": "s", "summary": blank})
    assert result.isError and "'summary' is required unless auto_compress is true" in text(result)
    assert call(project, "session_init", {}).structuredContent["found"] is False  # nothing was stored


# --- the daily spend limit (mutations: the dollar check removed; auto_compress tokens not counted) ----------------


def test_daily_dollar_limit_switches_to_the_deterministic_extractor(make_event, drain_now, write_config):
    write_config('[extract]\nmodel = "openai/gpt-4o-mini"\ndaily_token_limit = 0\ndaily_cost_limit_usd = 0.00005\n')
    turn(make_event, session="a")
    turn(make_event, session="b", n=1)
    complete = complete_with(GOOD)  # each call costs $0.0001
    stats, db = drain_now(complete=complete)
    assert len(complete.calls) == 1 and stats.fallbacks == 1
    assert [r["fallback_reason"] for r in runs(db)] == ["", "daily cost limit reached ($0.0001 of $0.00)"]


def _conf(token_limit=100):
    conf = settings.Settings()
    conf.extract.model = "openai/fake"
    conf.extract.daily_token_limit = token_limit
    return conf


def test_auto_compress_tokens_count_toward_the_daily_limit(project, make_event, drain_now, write_config):
    calls = []

    def complete(messages, conf, response_format=None):
        calls.append(messages)
        return Completion(json.dumps({"summary": "Drafted.", "next_steps": [], "pitfalls": []}), 90, 20)

    first = call(project, "session_end", {"session_id": "s1", "auto_compress": True, "transcript": "did a"},
                 settings=_conf(), complete=complete)
    assert first.structuredContent["compressed_used"] is True
    second = call(project, "session_end", {"session_id": "s2", "auto_compress": True, "transcript": "did b"},
                  settings=_conf(), complete=complete)
    assert second.structuredContent["auto_compress_error"] == "spend_limit_reached" and len(calls) == 1
    # and the drainer sees the same spend
    write_config('[extract]\nmodel = "openai/gpt-4o-mini"\ndaily_token_limit = 100\n')
    turn(make_event)
    extraction = complete_with(GOOD)
    stats, db = drain_now(complete=extraction)
    assert extraction.calls == [] and stats.fallbacks == 1
    assert store.spend_today(db)[0] == 110


# --- MCP error results are scrubbed (mutation: the scrub on error results removed) ------------------------------

KEY = "ghp_" + "Zq9" * 12


@pytest.mark.parametrize("tool, args, quoted", [
    ("session_end", {"session_id": "s", "summary": "x", "auto_compress": KEY}, False),  # wrong types: named,
    ("save_observation", {"title": "t", "summary": "s", "observation_type": KEY, "facts": [], "concepts": [],
                          "files_touched": []}, False),  # not quoted
    ("search_memory", {"query": "q", "limit": KEY}, False),
    (KEY, {}, True),  # an unknown tool, named by the secret: quoted, so scrubbed
])
def test_mcp_error_results_never_quote_a_secret(project, tool, args, quoted):
    result = call(project, tool, args)
    assert result.isError
    assert KEY not in text(result)
    assert ("[REDACTED" in text(result)) is quoted


def test_a_library_error_naming_a_secret_path_is_scrubbed_too(project, tmp_path, monkeypatch):
    """Errors the tools raise themselves (KirolearnError) pass the same scrub as validation errors."""
    home = tmp_path / KEY
    home.mkdir()
    (home / "config.toml").write_text('[extract]\ndaily_token_limit = "lots"\n')
    monkeypatch.setenv("KIROLEARN_HOME", str(home))
    result = call(project, "session_end", {"session_id": "s", "summary": "x"})
    assert result.isError and "invalid setting 'extract.daily_token_limit'" in text(result)
    assert KEY not in text(result) and "[REDACTED" in text(result)
