"""Exact behaviour of the small functions `make mutate` found under-tested: the canonical
form and hashes of the dedup, the spend window and limits, recency and the relevance
rule of recall. Each test here killed surviving mutants (README, "Mutation testing")."""

import hashlib
import math
from datetime import datetime, timedelta, timezone

import pytest

from kirolearn import settings
from kirolearn import dedup
from kirolearn.project import project_id
from kirolearn.recall import lexical as recall
from kirolearn.store import sqlite as store
from kirolearn.ids import new_ulid

# --- dedup: the canonical form and the hashes are a contract -------------------------------------------------


def test_canonical_json_is_sorted_compact_and_keeps_utf8():
    assert dedup.canonical_json({"b": 1, "a": [1, "é", None], "c": {"z": 0, "y": True}}) == \
        '{"a":[1,"é",null],"b":1,"c":{"y":true,"z":0}}'


def test_tagged_hash_is_sha256_of_the_canonical_utf8():
    expected = hashlib.sha256('{"a":"é","b":[1,2]}'.encode("utf-8")).hexdigest()
    assert dedup.tagged_hash({"b": [1, 2], "a": "é"}) == "sha256:" + expected


def test_hashes_accept_lone_surrogates():
    """Paths from os.fsdecode of undecodable bytes hold lone surrogates: hashing them must not raise."""
    path = "/srv/caf\udce9"
    raw = path.encode("utf-8", "surrogatepass")
    assert project_id(path) == hashlib.sha256(raw).hexdigest()[:16]
    assert dedup.tagged_hash(path) == "sha256:" + hashlib.sha256(b'"' + raw + b'"').hexdigest()


def test_project_id_is_16_hex_digits_of_sha256():
    assert project_id("/home/u/proj") == hashlib.sha256(b"/home/u/proj").hexdigest()[:16]


def test_event_content_hash_ignores_arrival_and_keeps_content():
    event = {"project_root": "/p", "session_id": "s", "kind": "tool_use", "trigger": "postToolUse",
             "tool_name": "shell", "tool_input": {"command": "ls"}, "event_id": "01A", "received_at": "t1"}
    same = dict(event, event_id="01B", received_at="t2", hook="PostToolUse")
    assert dedup.event_content_hash(event) == dedup.event_content_hash(same)
    assert dedup.event_content_hash(event) == dedup.tagged_hash({k: event.get(k) for k in dedup.EVENT_CONTENT_FIELDS})
    for key, value in (("session_id", "other"), ("tool_input", {"command": "ls -l"}), ("project_root", "/q")):
        assert dedup.event_content_hash(dict(event, **{key: value})) != dedup.event_content_hash(event)


# --- the spend window and the limits ---------------------------------------------------------------------------


def _run(db, started_at, tokens=(10, 5), cost=0.25, extractor="llm"):
    with store.writing(db):
        db["extraction_runs"].insert({
            "run_id": new_ulid(), "batch_key": "b", "extractor": extractor, "reason": "turn-end", "model": "m",
            "event_count": 1, "request": "", "prompt_tokens": tokens[0], "completion_tokens": tokens[1],
            "cost_usd": cost, "outcome": "ok", "error": "", "fallback_reason": "", "records_written": 0,
            "started_at": started_at, "finished_at": started_at}, pk="run_id", alter=True)


def _iso(dt):
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_spend_today_counts_model_runs_since_midnight_utc(home):
    db = store.open_db()
    now = datetime(2026, 11, 30, 15, 27, 41, 123456, tzinfo=timezone.utc)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    assert store.spend_today(db, now) == (0, 0.0)
    _run(db, _iso(midnight - timedelta(milliseconds=1)), tokens=(1000, 1000), cost=9.0)  # yesterday
    _run(db, _iso(midnight))  # the first millisecond of today counts
    _run(db, _iso(now), tokens=(7, 3), cost=0.5)
    _run(db, _iso(now), tokens=(500, 500), cost=5.0, extractor="deterministic")  # no model: free
    tokens, dollars = store.spend_today(db, now)
    assert (tokens, dollars) == (25, 0.75) and isinstance(tokens, int) and isinstance(dollars, float)


def _limits(tokens=0, dollars=0.0):
    conf = settings.Settings().extract
    conf.daily_token_limit, conf.daily_cost_limit_usd = tokens, dollars
    return conf


def test_daily_limits_are_reached_at_the_limit_not_after(home):
    db = store.open_db()
    _run(db, store.now_iso(), tokens=(60, 40), cost=0.5)  # 100 tokens, $0.50 today
    assert store.daily_limit_reached(db, _limits(tokens=100)) == "daily token limit reached (100 of 100)"
    assert store.daily_limit_reached(db, _limits(tokens=101)) == ""
    assert store.daily_limit_reached(db, _limits(dollars=0.5)) == "daily cost limit reached ($0.5000 of $0.50)"
    assert store.daily_limit_reached(db, _limits(dollars=0.51)) == ""
    assert store.daily_limit_reached(db, _limits()) == ""  # 0 = no limit, for either
    assert store.daily_limit_reached(db, _limits(tokens=100, dollars=0.1)).startswith("daily token limit")


# --- recall: recency and the relevance rule ---------------------------------------------------------------------

NOW = 1_800_000_000.0


def _at(days_ago):
    return _iso(datetime.fromtimestamp(NOW - days_ago * 86400, timezone.utc))


@pytest.mark.parametrize("days, factor", [(0, 1.0), (30, 0.75), (60, 0.625), (-5, 1.0)])
def test_recency_halves_the_bonus_every_30_days(days, factor):
    assert math.isclose(recall._recency(_at(days), NOW), factor, rel_tol=1e-6)


def test_recency_of_an_unreadable_date_is_the_floor():
    assert recall._recency("not a date", NOW) == 0.5


def _hit(score, matched):
    hit = recall.Hit("r", "/p", "s", "t", "s", [], [], [], "discovery", "test", _at(0))
    hit.score, hit.matched_terms = score, matched
    return hit


def test_relevant_needs_one_word_of_a_short_prompt_and_two_of_a_long_one():
    one, two = _hit(1.0, ["export"]), _hit(1.0, ["export", "locked"])
    assert recall.relevant([one, two], "export locked") == [one, two]
    assert recall.relevant([one, two], "export locked database") == [two]
    assert recall.relevant([one], "the and of") == []  # no telling word at all
    assert recall.relevant([], "export") == []


def test_relevant_keeps_a_hit_exactly_at_the_floor():
    best, at_floor = _hit(10.0, ["export"]), _hit(10.0 * recall.RELATIVE_FLOOR, ["export"])
    below = _hit(10.0 * recall.RELATIVE_FLOOR - 1e-6, ["export"])
    assert recall.relevant([best, at_floor, below], "export") == [best, at_floor]


# --- auto_compress: what the model is asked, what its answers become, what is counted -----------------------------

from kirolearn.pipeline import summaries  # noqa: E402
from kirolearn.pipeline.extract import Completion  # noqa: E402


def _model_conf():
    conf = settings.Settings()
    conf.extract.model = "openai/fake"
    return conf


def test_compress_asks_with_the_system_prompt_and_a_schema_then_counts_the_call(home):
    db = store.open_db()
    seen = {}

    def complete(messages, conf, response_format=None):
        seen.update(messages=messages, schema=sorted(response_format.model_json_schema()["properties"]))
        return Completion("```json\n{\"summary\": \"Did it.\"}\n```", prompt_tokens=90, completion_tokens=20,
                          cost_usd=0.002)

    draft, error = summaries.compress(db, "user: fix it", _model_conf(), complete)
    assert (draft, error) == ({"summary": "Did it.", "next_steps": [], "pitfalls": []}, None)  # fenced, defaults
    assert seen["messages"] == [{"role": "system", "content": summaries.COMPRESS_PROMPT},
                                {"role": "user", "content": "user: fix it"}]
    assert seen["schema"] == ["next_steps", "pitfalls", "summary"]
    (run,) = [dict(r) for r in db.query("select * from extraction_runs")]
    assert {k: run[k] for k in ("batch_key", "extractor", "reason", "model", "event_count", "request",
                                "prompt_tokens", "completion_tokens", "cost_usd", "outcome", "records_written")} == {
        "batch_key": "session_end", "extractor": "llm", "reason": "auto_compress", "model": "openai/fake",
        "event_count": 0, "request": "", "prompt_tokens": 90, "completion_tokens": 20, "cost_usd": 0.002,
        "outcome": "ok", "records_written": 0}
    assert run["error"] == "" and run["fallback_reason"] == "" and run["started_at"] and run["finished_at"]


class Timeout(Exception):
    """Named like litellm's: compress tells it apart by name, without importing litellm."""


@pytest.mark.parametrize("answer, error", [
    (Timeout("slow"), "timeout"),
    (ConnectionError("down"), "provider_unavailable"),
    (Completion(None, 1, 1), "malformed_json"),
    (Completion('{"summary": 3}', 1, 1), "malformed_json"),
])
def test_compress_failures_are_named(home, answer, error):
    def complete(messages, conf, response_format=None):
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert summaries.compress(store.open_db(), "log", _model_conf(), complete) == (None, error)


def test_session_end_defaults_to_the_general_label_and_no_compression(home, project):
    result = summaries.session_end(store.open_db(), summaries.Project(str(project)), session_id=" s-1 ", summary="x")
    assert result["project"] == "general" and result["session_id"] == "s-1"
    assert "auto_compress" not in result


def test_compress_says_why_it_did_not_ask(home):
    db = store.open_db()

    def complete(messages, conf, response_format=None):
        raise AssertionError("not asked")

    assert summaries.compress(db, "  \n", _model_conf(), complete) == (None, "empty_context")
    assert summaries.compress(db, "log", settings.Settings(), complete) == (None, "provider_unavailable")


def test_compress_passes_the_settings_and_defaults_a_missing_summary(home):
    conf = _model_conf()

    def complete(messages, given, response_format=None):
        assert given is conf
        return Completion('{"next_steps": ["run it"]}', 1, 1)

    assert summaries.compress(store.open_db(), "log", conf, complete) == (
        {"summary": "", "next_steps": ["run it"], "pitfalls": []}, None)


def test_no_model_is_not_a_fallback(make_event, drain_now):
    make_event("userPromptSubmit", prompt="hello")
    make_event("stop", assistant_response="hi")
    stats, db = drain_now()
    assert stats.fallbacks == 0 and stats.batches_extracted == 1
    assert [r["fallback_reason"] for r in db.query("select fallback_reason from extraction_runs")] == [""]


def test_dedup_window_includes_exactly_3_seconds(make_event, drain_now):
    call = dict(tool_name="shell", tool_input={"command": "make"}, tool_response="ok")
    make_event(now=1_800_000_000.0, **call)
    make_event(now=1_800_000_003.0, **call)
    stats, _ = drain_now()
    assert (stats.stored, stats.duplicates) == (1, 1)


def test_only_a_session_start_is_stored_once_per_session(project, drain_now):
    """Other lifecycle notes (Claude Code's PreCompact, SessionEnd, ...) repeat for real: the 3 s window applies."""
    from kirolearn.capture import events
    from kirolearn.capture import spool

    for now in (1_800_000_000.0, 1_800_000_060.0):  # the context compacted twice, a minute apart
        event = events.build_event("PreCompact", {"cwd": str(project), "session_id": "c1", "trigger": "auto"},
                                   now=now, agent="claude-code")
        assert event["kind"] == "note" and event["trigger"] != "agentSpawn"
        spool.append(event["event_id"], events.serialize(event))
    stats, _ = drain_now()
    assert (stats.stored, stats.duplicates) == (2, 0)
