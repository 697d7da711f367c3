"""The model's word on a supersede the rules cannot decide (kirolearn.pipeline.judge; issues #31, #36).

Turns are spooled by the hook's own code, the drain runs through the library facade, and the model is
litellm against a fake OpenAI server on 127.0.0.1 (tests/fakellm.py); tests/test_llm_real.py asks the
real llama.cpp server the same question.
"""

import json

import pytest

from fakellm import FakeLLM

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")

OLD_ANSWER = "The nightly export is scheduled by cron on app-1; EXPORT_SCHEDULE names it in deploy/crontab."
NEW = {"observation_type": "session_summary", "title": "Moved the nightly export to the worker queue",
       "summary": 'EXPORT_SCHEDULE = "worker" now: the worker queue runs the nightly export, not cron.',
       "facts": ["EXPORT_SCHEDULE is read by jobs/schedule.py"], "concepts": ["scheduling"],
       "files_touched": ["deploy/crontab"]}
YES = json.dumps({"supersedes": True, "why": "the export moved from cron to the worker queue"})


def turn(make_event, session, prompt, answer):
    make_event("userPromptSubmit", prompt=prompt, session_id=session)
    make_event("stop", assistant_response=answer, session_id=session)


def history(make_event, drain_now, write_config, llm, calls=3, extra=""):
    """An older record made without a model, then a newer one the model extracts; returns the store."""
    turn(make_event, "s1", "how is the nightly export scheduled?", OLD_ANSWER)
    drain_now(flush=True)
    write_config(f'[extract]\nmodel = "openai/fake"\napi_base = "{llm.openai_base}"\nretries = 0\n{extra}'
                 f"[drain]\nsupersede_model_calls = {calls}\n")
    turn(make_event, "s2", "move the nightly export off cron onto the worker queue", "Done.")
    llm.enqueue(json.dumps({"records": [NEW]}))  # the extraction batch


def records(db):
    return {r["title"]: dict(r) for r in db.query("select * from memory_records")}


def supersede_runs(db):
    return [dict(r) for r in db.query("select * from extraction_runs where reason = 'supersede'")]


def test_a_yes_from_the_model_supersedes_the_older_record_with_its_reason(make_event, drain_now, write_config):
    with FakeLLM() as llm:
        history(make_event, drain_now, write_config, llm)
        llm.enqueue(YES)
        stats, db = drain_now(flush=True)
        asked = llm.chat_requests[-1]["json"]
    found = records(db)
    old, new = found["how is the nightly export scheduled?"], found[NEW["title"]]
    assert old["superseded_by"] == new["record_id"] and new["superseded_by"] is None
    assert stats.superseded == 1
    reasons = [r["reason"] for r in db.query("select reason from record_audit where record_id = ?", [old["record_id"]])]
    assert "superseded: model: the export moved from cron to the worker queue" in reasons
    prompt = json.dumps(asked["messages"])
    assert "OLDER:" in prompt and "cron on app-1" in prompt and "NEWER:" in prompt and "worker queue" in prompt
    (run,) = supersede_runs(db)
    assert run["outcome"] == "ok" and run["extractor"] == "llm" and run["prompt_tokens"] > 0
    assert run["answer"] == YES
    from click.testing import CliRunner
    from kirolearn.cli.commands import cli

    status = CliRunner().invoke(cli, ["status"])
    assert "1 supersede questions, 1 answered" in status.output and "model, last 24 h: 1 batches" in status.output


@pytest.mark.parametrize("answer", ['{"supersedes": false, "why": "different things"}', "yes, it does",
                                    '{"supersedes": "maybe"}', ""])
def test_a_no_or_an_answer_that_is_not_the_verdict_marks_nothing(make_event, drain_now, write_config, answer):
    with FakeLLM() as llm:
        history(make_event, drain_now, write_config, llm)
        llm.enqueue(answer)
        stats, db = drain_now(flush=True)
    assert all(r["superseded_by"] is None for r in records(db).values()) and stats.superseded == 0
    assert len(records(db)) == 2  # nothing lost, nothing merged
    (run,) = supersede_runs(db)
    if answer.startswith('{"supersedes": false'):
        assert run["outcome"] == "ok" and run["error"] == ""
    else:
        assert run["outcome"] == "failed" and "verdict" in run["error"]


def test_a_failing_server_marks_nothing_and_the_drain_goes_on(make_event, drain_now, write_config):
    with FakeLLM() as llm:
        history(make_event, drain_now, write_config, llm)
        llm.enqueue(status=500, body="boom")
        stats, db = drain_now(flush=True)
    found = records(db)
    assert len(found) == 2 and all(r["superseded_by"] is None for r in found.values())
    (run,) = supersede_runs(db)
    assert run["outcome"] == "failed" and run["error"]
    assert not [dict(r) for r in db.query("select event_id from events where extract_state != 'done'")]


def test_off_by_default_and_within_the_spend_limit(make_event, drain_now, write_config):
    with FakeLLM() as llm:
        history(make_event, drain_now, write_config, llm, calls=0)
        stats, db = drain_now(flush=True)
        assert len(llm.chat_requests) == 1  # the extraction only
    assert supersede_runs(db) == []


def test_a_spent_daily_limit_asks_nothing(make_event, drain_now, write_config):
    with FakeLLM() as llm:
        # the extraction's own tokens (12 + 7 from the fake) spend a 10-token day
        history(make_event, drain_now, write_config, llm, extra="daily_token_limit = 10\n")
        stats, db = drain_now(flush=True)
        assert len(llm.chat_requests) == 1
    assert supersede_runs(db) == [] and all(r["superseded_by"] is None for r in records(db).values())
