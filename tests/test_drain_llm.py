"""The drainer with a model configured: success, failure, retry later, fallback, spend limit."""

import json
from datetime import datetime, timedelta, timezone

import pytest
from fakellm import FakeLLM
from helpers import GOOD, call

from kirolearn import settings
from kirolearn.core.ids import new_ulid
from kirolearn.pipeline.extract import Completion
from kirolearn.store.sqlite import db as store

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")


def login_fix_turn(make_event, session="sess-1", n=0):
    make_event("userPromptSubmit", prompt=f"fix the login bug {n}", session_id=session)
    make_event(
        tool_name="shell", tool_input={"command": f"pytest {n}"}, tool_response="ok", session_id=session
    )
    make_event("stop", assistant_response=f"Fixed it {n}.", session_id=session)


def complete_with(*answers, tokens=(10, 5)):
    calls = []

    def complete(messages, conf):
        calls.append(messages)
        answer = answers[min(len(calls), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return Completion(answer, prompt_tokens=tokens[0], completion_tokens=tokens[1], cost_usd=0.0001)

    complete.calls = calls
    return complete


def runs(db):
    return [dict(r) for r in db.query("select * from extraction_runs order by started_at, run_id")]


def test_model_records_are_stored_with_their_run(make_event, drain_now, write_config):
    write_config('[extract]\nmodel = "openai/gpt-4o-mini"\n')
    login_fix_turn(make_event)
    complete = complete_with(GOOD)
    stats, db = drain_now(complete=complete)
    assert (stats.extractor, stats.records_written, stats.tokens_used) == ("llm", 2, 15)
    rows = [dict(r) for r in db.query("select observation_type, strategy, run_id from memory_records")]
    assert {r["strategy"] for r in rows} == {"llm-summary"}
    (run,) = runs(db)
    assert run["outcome"] == "ok" and run["extractor"] == "llm" and run["model"] == "openai/gpt-4o-mini"
    assert run["prompt_tokens"] == 10 and run["records_written"] == 2
    assert 'kind="prompt"' in run["request"] and "fix the login bug 0" in run["request"]
    assert {r["run_id"] for r in rows} == {run["run_id"]}


def test_a_failing_provider_keeps_the_batch_and_falls_back_after_max_attempts(
    make_event, drain_now, write_config
):
    """A provider that fails (not a botched answer, see test_llm_batches.py) keeps the batch for later drains."""
    write_config('[extract]\nmodel = "openai/gpt-4o-mini"\nmax_attempts = 2\nretries = 0\n')
    login_fix_turn(make_event)
    stats, db = drain_now(complete=complete_with(RuntimeError("provider down")))
    assert (stats.llm_failures, stats.records_written, stats.pending_events) == (1, 0, 3)
    stats, db = drain_now(complete=complete_with(RuntimeError("still down")))
    assert stats.llm_failures == 1 and stats.pending_events == 3
    stats, db = drain_now(complete=complete_with(GOOD))  # two failures: deterministic now
    assert (stats.fallbacks, stats.records_written, stats.pending_events) == (1, 1, 0)
    outcomes = [(r["extractor"], r["outcome"]) for r in runs(db)]
    assert outcomes == [("llm", "failed"), ("llm", "failed"), ("deterministic", "ok")]
    assert runs(db)[-1]["fallback_reason"] == "model failed 2 times on this batch"
    assert "RuntimeError: provider down" in runs(db)[0]["error"]


def test_a_malformed_answer_falls_back_for_that_batch_at_once(make_event, drain_now, write_config):
    write_config('[extract]\nmodel = "openai/gpt-4o-mini"\nretries = 0\n')
    login_fix_turn(make_event)
    stats, db = drain_now(complete=complete_with("not json"))
    assert (stats.llm_failures, stats.fallbacks, stats.records_written, stats.pending_events) == (1, 1, 1, 0)
    assert [(r["extractor"], r["outcome"]) for r in runs(db)] == [("llm", "failed"), ("deterministic", "ok")]
    assert "malformed answer" in runs(db)[0]["error"] and runs(db)[0]["answer"] == "not json"
    assert runs(db)[1]["fallback_reason"].startswith("model answer unusable: malformed answer")


def test_recovery_on_a_later_drain(make_event, drain_now, write_config):
    write_config('[extract]\nmodel = "openai/gpt-4o-mini"\nretries = 0\n')
    login_fix_turn(make_event)
    drain_now(complete=complete_with(RuntimeError("provider down")))
    stats, db = drain_now(complete=complete_with(GOOD))
    assert (stats.extractor, stats.records_written, stats.pending_events) == ("llm", 2, 0)


def test_daily_token_limit_switches_to_the_deterministic_extractor(make_event, drain_now, write_config):
    write_config('[extract]\nmodel = "openai/gpt-4o-mini"\ndaily_token_limit = 100\n')
    login_fix_turn(make_event, session="a")
    login_fix_turn(make_event, session="b", n=1)
    complete = complete_with(GOOD, tokens=(90, 20))
    stats, db = drain_now(complete=complete)
    assert len(complete.calls) == 1 and stats.fallbacks == 1
    reasons = [r["fallback_reason"] for r in runs(db)]
    assert reasons == ["", "daily token limit reached (110 of 100)"]


def test_turn_end_extracts_only_complete_turns(make_event, drain_now):
    login_fix_turn(make_event)
    make_event("userPromptSubmit", prompt="next question, not answered yet")
    stats, db = drain_now()
    assert (stats.batches_extracted, stats.pending_events) == (1, 1)


def test_size_and_idle_thresholds(make_event, drain_now, write_config):
    write_config("[batch]\nmax_events = 3\nidle_seconds = 3600\n")
    for i in range(3):
        make_event(tool_name="shell", tool_input={"command": f"c{i}"}, session_id="big")
    make_event(tool_name="shell", tool_input={"command": "recent"}, session_id="small")
    make_event(tool_name="shell", tool_input={"command": "old"}, session_id="idle", now=1_000_000_000.0)
    stats, db = drain_now()
    reasons = sorted(r["reason"] for r in runs(db))
    assert reasons == ["idle", "size"] and stats.pending_events == 1


def test_end_to_end_through_litellm_and_a_fake_server(make_event, drain_now, write_config, monkeypatch):
    with FakeLLM() as fake:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-tests")
        write_config(
            f'[extract]\nmodel = "openai/fake-model"\napi_base = "{fake.openai_base}"\n'
            "timeout_seconds = 0.5\nretries = 1\nretry_backoff_seconds = 0\n"
        )
        login_fix_turn(make_event)
        fake.enqueue(delay=1.5, content="late")  # litellm.Timeout, retried ...
        fake.enqueue(raw='{"broken')  # ... a malformed body: the attempt fails
        stats, db = drain_now()
        assert stats.llm_failures == 1 and stats.pending_events == 3
        error = runs(db)[0]["error"]
        assert "Timeout" in error and "InternalServerError" in error
        fake.enqueue(GOOD, prompt_tokens=300, completion_tokens=50)
        stats, db = drain_now()
        assert (stats.records_written, stats.tokens_used) == (2, 350)
        sent = fake.chat_requests[-1]["json"]["messages"][1]["content"]
        assert "fix the login bug 0" in sent


def test_custom_litellm_provider(make_event, drain_now, write_config):
    import litellm

    class Fake(litellm.CustomLLM):
        def completion(self, *args, **kwargs):
            return litellm.completion(model="gpt-4o-mini", messages=kwargs["messages"], mock_response=GOOD)

    before = litellm.custom_provider_map
    litellm.custom_provider_map = [{"provider": "kirofake", "custom_handler": Fake()}]
    try:
        write_config('[extract]\nmodel = "kirofake/anything"\n')
        login_fix_turn(make_event)
        stats, db = drain_now()
    finally:
        litellm.custom_provider_map = before
    assert (stats.extractor, stats.records_written, stats.llm_failures) == ("llm", 2, 0)
    assert json.loads(
        db.execute("select facts from memory_records where observation_type='session_summary'").fetchone()[0]
    ) == ["Use ? placeholders with sqlite3"]


def _run(db, started_at, tokens=(10, 5), cost=0.25, extractor="llm"):
    with store.writing(db):
        db["extraction_runs"].insert(
            {
                "run_id": new_ulid(),
                "batch_key": "b",
                "extractor": extractor,
                "reason": "turn-end",
                "model": "m",
                "event_count": 1,
                "request": "",
                "prompt_tokens": tokens[0],
                "completion_tokens": tokens[1],
                "cost_usd": cost,
                "outcome": "ok",
                "error": "",
                "fallback_reason": "",
                "records_written": 0,
                "started_at": started_at,
                "finished_at": started_at,
            },
            pk="run_id",
            alter=True,
        )


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
    assert (
        store.daily_limit_reached(db, _limits(dollars=0.5)) == "daily cost limit reached ($0.5000 of $0.50)"
    )
    assert store.daily_limit_reached(db, _limits(dollars=0.51)) == ""
    assert store.daily_limit_reached(db, _limits()) == ""  # 0 = no limit, for either
    assert store.daily_limit_reached(db, _limits(tokens=100, dollars=0.1)).startswith("daily token limit")


def test_no_model_is_not_a_fallback(make_event, drain_now):
    make_event("userPromptSubmit", prompt="hello")
    make_event("stop", assistant_response="hi")
    stats, db = drain_now()
    assert stats.fallbacks == 0 and stats.batches_extracted == 1
    assert [r["fallback_reason"] for r in db.query("select fallback_reason from extraction_runs")] == [""]


# The daily spend limit (kills the mutants that removed the dollar check or left auto_compress tokens uncounted).
def test_daily_dollar_limit_switches_to_the_deterministic_extractor(make_event, drain_now, write_config):
    write_config(
        '[extract]\nmodel = "openai/gpt-4o-mini"\ndaily_token_limit = 0\ndaily_cost_limit_usd = 0.00005\n'
    )
    login_fix_turn(make_event, session="a")
    login_fix_turn(make_event, session="b", n=1)
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

    first = call(
        project,
        "session_end",
        {"session_id": "s1", "auto_compress": True, "transcript": "did a"},
        settings=_conf(),
        complete=complete,
    )
    assert first.structuredContent["compressed_used"] is True
    second = call(
        project,
        "session_end",
        {"session_id": "s2", "auto_compress": True, "transcript": "did b"},
        settings=_conf(),
        complete=complete,
    )
    assert second.structuredContent["auto_compress_error"] == "spend_limit_reached" and len(calls) == 1
    # and the drainer sees the same spend
    write_config('[extract]\nmodel = "openai/gpt-4o-mini"\ndaily_token_limit = 100\n')
    login_fix_turn(make_event)
    extraction = complete_with(GOOD)
    stats, db = drain_now(complete=extraction)
    assert extraction.calls == [] and stats.fallbacks == 1
    assert store.spend_today(db)[0] == 110
