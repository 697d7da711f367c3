"""Robust model batches (#36), through litellm against a local fake server (tests/fakellm.py):
structured output in the form the server takes (remembered per model), and a batch the model
botches falls back to the deterministic extractor for that batch alone, with its reason and the raw
answer kept in the run row. Nothing is lost and nothing is stored twice."""

import json
import time

import pytest
from fakellm import FakeLLM
from helpers import GOOD

from kirolearn.pipeline import extract, structured
from kirolearn.store import state

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")


@pytest.fixture(autouse=True)
def _fresh_forms(monkeypatch):
    """What a form worked for is remembered per process: each test starts from nothing."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-tests")
    structured._known.clear()
    yield
    structured._known.clear()


def retry_fix_turn(make_event, session="sess-1", n=0):
    make_event("userPromptSubmit", prompt=f"raise WEBHOOK_RETRIES in config/retry.py {n}", session_id=session)
    make_event(
        tool_name="shell",
        tool_input={"command": f"pytest tests/test_retry.py {n}"},
        tool_response="4 passed",
        session_id=session,
    )
    make_event("stop", assistant_response=f"Raised retries to 7 ({n}).", session_id=session)


def configure(write_config, fake, **keys):
    values = {
        "model": "openai/gemma-local",
        "api_base": fake.openai_base,
        "timeout_seconds": 5,
        "retries": 0,
        "retry_backoff_seconds": 0,
        **keys,
    }
    write_config("[extract]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items()))


def runs(db):
    return [dict(r) for r in db.query("select * from extraction_runs order by started_at, rowid")]


def nothing_lost_or_twice(db, turns):
    """Every event extracted once, into exactly one committed run; each turn's records cite its events."""
    events = [dict(r) for r in db.query("select event_id, extract_state, run_id from events")]
    assert events and all(e["extract_state"] == "done" for e in events)
    ok_runs = {r["run_id"] for r in runs(db) if r["outcome"] == "ok"}
    assert {e["run_id"] for e in events} <= ok_runs
    cited = [
        i
        for r in db.query("select source_event_ids from memory_records")
        for i in json.loads(r["source_event_ids"])
    ]
    assert sorted(cited) == sorted(e["event_id"] for e in events)  # each event cited by one record, once
    assert db["memory_records"].count == turns


def test_a_llama_cpp_like_server_gets_json_object_and_later_batches_go_straight_to_it(
    make_event, drain_now, write_config
):
    with FakeLLM(refuse_formats={"json_schema"}) as fake:
        configure(write_config, fake)
        retry_fix_turn(make_event)
        fake.enqueue(GOOD)
        stats, db = drain_now()
        assert (stats.extractor, stats.llm_failures, stats.fallbacks, stats.records_written) == (
            "llm",
            0,
            0,
            2,
        )
        first, second = (r["json"] for r in fake.chat_requests)
        assert first["response_format"]["type"] == "json_schema"  # tried first, refused with HTTP 500
        assert second["response_format"]["type"] == "json_object"
        assert second["response_format"]["schema"]["properties"]["records"]  # the grammar's schema ...
        assert "JSON Schema" in second["messages"][0]["content"]  # ... and the same schema in the prompt
        assert second["max_tokens"] == 2000
        (run,) = runs(db)
        assert (run["response_form"], run["prompt_version"]) == ("json_object", extract.PROMPT_VERSION)
        assert json.loads(run["answer"]) == json.loads(GOOD)
        assert (
            state.read(structured.STATE_NAME)[f"openai/gemma-local@{fake.openai_base}"]["form"]
            == "json_object"
        )

        structured._known.clear()  # a new process: the state dir remembers
        retry_fix_turn(make_event, session="sess-2", n=1)
        fake.enqueue(GOOD)
        stats, db = drain_now()
        assert stats.records_written == 2
        assert [r["json"]["response_format"]["type"] for r in fake.chat_requests[2:]] == ["json_object"]


def test_a_server_without_structured_output_gets_plain_text_with_the_schema_in_the_prompt(
    make_event, drain_now, write_config
):
    with FakeLLM(refuse_formats={"json_schema", "json_object"}) as fake:
        configure(write_config, fake)
        retry_fix_turn(make_event)
        fake.enqueue("```json\n" + GOOD + "\n```")
        stats, db = drain_now()
        assert stats.records_written == 2 and stats.fallbacks == 0
        last = fake.chat_requests[-1]["json"]
        assert "response_format" not in last and "JSON Schema" in last["messages"][0]["content"]
        assert runs(db)[0]["response_form"] == "text"
        assert len(fake.chat_requests) == 3


def test_an_error_that_is_not_about_the_format_is_not_a_step_down(make_event, drain_now, write_config):
    with FakeLLM() as fake:
        configure(write_config, fake)
        retry_fix_turn(make_event)
        fake.enqueue(status=401, body={"error": {"message": "response_format: invalid api key"}})
        stats, db = drain_now()
        assert stats.llm_failures == 1 and stats.pending_events == 3  # the provider failed: kept for later
        assert (
            len(fake.chat_requests) == 1
            and structured.remembered("openai/gemma-local", fake.openai_base) is None
        )


BOTCHES = [
    ("garbage", dict(content="Sure! Here are the records you asked for: none."), "malformed answer"),
    (
        "wrong types",
        dict(
            content=json.dumps({"records": [{"observation_type": "decision", "title": 7, "summary": ["x"]}]})
        ),
        "records.0.title",
    ),
    (
        "unknown type",
        dict(
            content=json.dumps({"records": [{"observation_type": "webhooks", "title": "t", "summary": "s"}]})
        ),
        "observation_type",
    ),
    ("empty", dict(content=""), "empty"),
    (
        "truncated",
        dict(content='{"records": [{"observation_type": "decision", "title": "Ra', finish_reason="length"),
        "cut off at max_answer_tokens",
    ),
    ("too long", dict(content="[" + "1," * 40_000 + "1]"), "too long"),
]


@pytest.mark.parametrize("name, reply, reason", BOTCHES, ids=[b[0] for b in BOTCHES])
def test_a_botched_answer_falls_back_for_that_batch_only(
    make_event, drain_now, write_config, name, reply, reason
):
    with FakeLLM(refuse_formats={"json_schema"}) as fake:
        configure(write_config, fake)
        retry_fix_turn(make_event, session="bad")
        retry_fix_turn(make_event, session="good", n=1)
        fake.enqueue(**reply)
        fake.enqueue(GOOD)
        stats, db = drain_now()
        assert (stats.batches_extracted, stats.llm_failures, stats.fallbacks, stats.pending_events) == (
            2,
            1,
            1,
            0,
        )
        by_session = {}
        for r in runs(db):
            by_session.setdefault(r["session_id"], []).append(r)
        failed, fell_back = by_session["bad"]
        assert (failed["extractor"], failed["outcome"]) == ("llm", "failed") and reason in failed["error"]
        assert failed["answer"] == (reply["content"] or "")[: extract.ANSWER_KEPT_CHARS]
        assert failed["prompt_version"] == extract.PROMPT_VERSION
        assert (fell_back["extractor"], fell_back["outcome"]) == ("deterministic", "ok")
        assert (
            fell_back["fallback_reason"].startswith("model answer unusable: ")
            and reason in fell_back["fallback_reason"]
        )
        assert [(r["extractor"], r["outcome"]) for r in by_session["good"]] == [("llm", "ok")]
        strategies = sorted(
            r["strategy"] for r in db.query("select strategy from memory_records where session_id = 'bad'")
        )
        assert strategies == ["deterministic-turn"]
        events = {
            r["session_id"]: r["n"]
            for r in db.query(
                "select session_id, count(*) n from events where extract_state = 'done' group by session_id"
            )
        }
        assert events == {"bad": 3, "good": 3}
        again, db = drain_now(flush=True)  # nothing left to extract, nothing extracted twice
        assert again.batches_extracted == 0 and db["memory_records"].count == 3


def test_the_raw_answer_is_scrubbed_before_it_is_kept(make_event, drain_now, write_config):
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    with FakeLLM() as fake:
        configure(write_config, fake)
        retry_fix_turn(make_event)
        fake.enqueue(f"not json, but a token {secret}")
        stats, db = drain_now()
        failed = runs(db)[0]
        assert secret not in failed["answer"] and "[REDACTED" in failed["answer"]
        assert secret not in failed["error"]  # the error quotes the answer's start: scrubbed too
        nothing_lost_or_twice(db, turns=1)


def test_a_hung_model_is_past_its_deadline_and_the_batch_falls_back(make_event, drain_now, write_config):
    with FakeLLM() as fake:
        configure(write_config, fake, timeout_seconds=0.4, call_budget_seconds=1)
        retry_fix_turn(make_event)
        fake.enqueue(delay=60, content="never")  # accepted, never answered
        began = time.monotonic()
        stats, db = drain_now()
        assert time.monotonic() - began < 15  # bounded: the call's timeout and its hard cap, not the server
        assert (stats.llm_failures, stats.fallbacks, stats.pending_events) == (1, 1, 0)
        assert "past its deadline" in runs(db)[-1]["fallback_reason"]
        nothing_lost_or_twice(db, turns=1)


def test_a_server_killed_mid_batch_keeps_the_batch_for_a_later_drain(make_event, drain_now, write_config):
    fake = FakeLLM().start()
    configure(write_config, fake)
    retry_fix_turn(make_event)
    fake.enqueue(delay=30, content=GOOD)
    import threading

    def kill_when_asked():
        fake.wait_for("/v1/chat/completions", timeout=30)
        fake.stop()  # the request is abandoned unanswered and the port closes

    killer = threading.Thread(target=kill_when_asked)
    killer.start()
    stats, db = drain_now()
    killer.join()
    assert stats.llm_failures == 1 and stats.pending_events == 3 and stats.records_written == 0
    assert runs(db)[0]["outcome"] == "failed" and not runs(db)[0]["answer"]
    assert db["memory_records"].count == 0  # nothing made from a half-answer
    stats, db = drain_now()  # still down (connection refused): still kept
    assert stats.pending_events == 3
    with FakeLLM() as back:
        configure(write_config, back)
        back.enqueue(GOOD)
        stats, db = drain_now()
        assert stats.records_written == 2 and stats.pending_events == 0
        assert db["memory_records"].count == 2
        assert {r["run_id"] for r in db.query("select run_id from events")} == {
            r["run_id"] for r in runs(db) if r["outcome"] == "ok"
        }


def test_unsupported_names_a_refused_format_only():
    class Err(Exception):
        def __init__(self, status, message):
            super().__init__(message)
            self.status_code, self.message = status, message

    assert structured.unsupported(Err(500, "Input should be 'text' or 'json_object'"))
    assert structured.unsupported(Err(400, "response_format json_schema is not supported by this model"))
    assert not structured.unsupported(Err(500, "CUDA out of memory"))
    assert not structured.unsupported(Err(429, "rate limit on response_format requests"))
    assert not structured.unsupported(Exception("response_format"))  # no status: not a server's refusal
