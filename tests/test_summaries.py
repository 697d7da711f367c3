"""Session summaries (kirolearn/pipeline/summaries.py): auto_compress asks the model, names its failures
and counts its spend; session_end's defaults."""

import pytest
from conftest import as_store

from kirolearn import settings
from kirolearn.pipeline import summaries
from kirolearn.pipeline.extract import Completion
from kirolearn.store.sqlite import db as store


def _model_conf():
    conf = settings.Settings()
    conf.extract.model = "openai/fake"
    return conf


def test_compress_asks_with_the_system_prompt_and_a_schema_then_counts_the_call(home):
    db = store.open_db()
    seen = {}

    def complete(messages, conf, response_format=None):
        seen.update(messages=messages, schema=sorted(response_format.model_json_schema()["properties"]))
        return Completion(
            '```json\n{"summary": "Did it."}\n```', prompt_tokens=90, completion_tokens=20, cost_usd=0.002
        )

    draft, error = summaries.compress(as_store(db), "user: fix it", _model_conf(), complete)
    assert (draft, error) == (
        {"summary": "Did it.", "next_steps": [], "pitfalls": []},
        None,
    )  # fenced, defaults
    assert seen["messages"] == [
        {"role": "system", "content": summaries.COMPRESS_PROMPT},
        {"role": "user", "content": "user: fix it"},
    ]
    assert seen["schema"] == ["next_steps", "pitfalls", "summary"]
    (run,) = [dict(r) for r in db.query("select * from extraction_runs")]
    assert {
        k: run[k]
        for k in (
            "batch_key",
            "extractor",
            "reason",
            "model",
            "event_count",
            "request",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
            "outcome",
            "records_written",
        )
    } == {
        "batch_key": "session_end",
        "extractor": "llm",
        "reason": "auto_compress",
        "model": "openai/fake",
        "event_count": 0,
        "request": "",
        "prompt_tokens": 90,
        "completion_tokens": 20,
        "cost_usd": 0.002,
        "outcome": "ok",
        "records_written": 0,
    }
    assert run["error"] == "" and run["fallback_reason"] == "" and run["started_at"] and run["finished_at"]


class Timeout(Exception):
    """Named like litellm's: compress tells it apart by name, without importing litellm."""


@pytest.mark.parametrize(
    "answer, error",
    [
        (Timeout("slow"), "timeout"),
        (ConnectionError("down"), "provider_unavailable"),
        (Completion(None, 1, 1), "malformed_json"),
        (Completion('{"summary": 3}', 1, 1), "malformed_json"),
    ],
)
def test_compress_failures_are_named(home, answer, error):
    def complete(messages, conf, response_format=None):
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert summaries.compress(as_store(store.open_db()), "log", _model_conf(), complete) == (None, error)


def test_session_end_defaults_to_the_general_label_and_no_compression(home, project):
    result = summaries.session_end(
        as_store(store.open_db()), summaries.Project(str(project)), session_id=" s-1 ", summary="x"
    )
    assert result["project"] == "general" and result["session_id"] == "s-1"
    assert "auto_compress" not in result


def test_compress_says_why_it_did_not_ask(home):
    db = store.open_db()

    def complete(messages, conf, response_format=None):
        raise AssertionError("not asked")

    assert summaries.compress(as_store(db), "  \n", _model_conf(), complete) == (None, "empty_context")
    assert summaries.compress(as_store(db), "log", settings.Settings(), complete) == (
        None,
        "provider_unavailable",
    )


def test_compress_passes_the_settings_and_defaults_a_missing_summary(home):
    conf = _model_conf()

    def complete(messages, given, response_format=None):
        assert given is conf
        return Completion('{"next_steps": ["run it"]}', 1, 1)

    assert summaries.compress(as_store(store.open_db()), "log", conf, complete) == (
        {"summary": "", "next_steps": ["run it"], "pitfalls": []},
        None,
    )
