"""Extraction: the deterministic extractor's pieces, the LLM path behind the
`complete` seam, and the litellm adapter against a local fake server."""

import json
import os

import pytest
from fakellm import FakeLLM
from helpers import GOOD

from kirolearn import settings
from kirolearn.pipeline import extract
from kirolearn.pipeline.extract import Batch, Completion

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")


def ev(kind, n, **fields):
    trigger = {
        "prompt": "userPromptSubmit",
        "tool_use": "postToolUse",
        "session_summary": "stop",
        "note": "agentSpawn",
    }[kind]
    return {
        "event_id": f"01ARZ3NDEKTSV4RRFFQ69G5F{n:02d}",
        "kind": kind,
        "trigger": trigger,
        "received_at": "2026-11-30T10:00:00.000Z",
        **fields,
    }


def batch(*events, root="/p"):
    return Batch("pid", root, "s1", list(events), "turn-end")


# --- deterministic --------------------------------------------------------------------------


def test_turns_split_at_prompts_and_stops():
    events = [
        ev("note", 1),
        ev("prompt", 2, prompt="a"),
        ev("tool_use", 3, tool_name="x"),
        ev("session_summary", 4),
        ev("prompt", 5, prompt="b"),
        ev("prompt", 6, prompt="c"),
    ]
    turns = extract.split_turns(events)
    assert [[e["event_id"][-2:] for e in t] for t in turns] == [["01", "02", "03", "04"], ["05"], ["06"]]


@pytest.mark.parametrize(
    "response, is_failure",
    [
        ({"success": True, "result": [{"exit_status": "0", "stdout": "ok"}]}, False),
        ({"success": True, "result": [{"exit_status": "2", "stdout": "boom"}]}, True),
        ({"success": False, "error": ["No such file"]}, True),
        ("Output:\nfine\nExit Code: 0", False),
        ("Output:\nTraceback...\nValueError: x\nExit Code: 1", True),
        ("Created the src/a.py file.", False),
    ],
)
def test_failure_detection(response, is_failure):
    assert extract.failed({"tool_response": response}) is is_failure


def test_error_line_prefers_the_exception_over_the_summary_line():
    out = "F.\n=== FAILURES ===\ntest_x: KeyError: 'user'\n1 failed, 1 passed in 0.2s\n"
    event = {"tool_response": {"success": True, "result": [{"exit_status": "1", "stdout": out}]}}
    assert extract.error_line(event) == "test_x: KeyError: 'user'"


def test_pre_tool_input_fills_an_empty_post_tool_input():
    events = [
        ev("prompt", 1, prompt="run it"),
        dict(ev("tool_use", 2, tool_name="shell", tool_input={"command": "make test"}), trigger="preToolUse"),
        ev("tool_use", 3, tool_name="shell", tool_input={}, tool_response="Output:\nok\nExit Code: 0"),
    ]
    (record,) = extract.deterministic(batch(*events))
    assert "`make test`" in record["summary"]
    assert record["observation_type"] == "tool_use"


def test_error_then_fix_after_an_edit():
    events = [
        ev("prompt", 1, prompt="tests fail"),
        ev(
            "tool_use",
            2,
            tool_name="execute_bash",
            tool_input={"command": "pytest -q tests/test_x.py"},
            tool_response={
                "success": True,
                "result": [{"exit_status": "1", "stdout": "E ImportError: no x"}],
            },
        ),
        ev(
            "tool_use",
            3,
            tool_name="fs_write",
            tool_input={"command": "create", "path": "/p/x.py", "file_text": ""},
        ),
        ev(
            "tool_use",
            4,
            tool_name="execute_bash",
            tool_input={"command": "pytest -q tests/"},
            tool_response={"success": True, "result": [{"exit_status": "0", "stdout": "ok"}]},
        ),
    ]
    (record,) = extract.deterministic(batch(*events))
    assert record["observation_type"] == "error"
    assert record["facts"][0] == (
        "`pytest -q tests/test_x.py` failed: E ImportError: no x — fixed after changing x.py: "
        "`pytest -q tests/` then succeeded"
    )
    assert record["files_touched"] == ["x.py"]


def test_notes_alone_make_no_record():
    assert extract.deterministic(batch(ev("note", 1))) == []


def test_a_huge_turn_stays_within_record_limits():
    events = [ev("prompt", 1, prompt="p" * 10_000)] + [
        ev(
            "tool_use",
            i,
            tool_name="execute_bash",
            tool_input={"command": f"cmd{i} " + "x" * 500},
            tool_response={"success": False, "error": ["E" * 5000]},
        )
        for i in range(2, 60)
    ]
    (record,) = extract.deterministic(batch(*events))
    assert len(record["title"]) <= 200 and len(record["summary"]) <= 4000
    assert all(len(f) <= 500 for f in record["facts"]) and len(record["facts"]) <= 20


# --- rendering and parsing ------------------------------------------------------------------


def test_render_shows_kinds_and_cuts_big_fields():
    big = "y" * 50_000
    text = extract.render_events(
        batch(ev("prompt", 1, prompt="hello"), ev("tool_use", 2, tool_name="shell", tool_response=big)),
        2_000,
        24_000,
    )
    assert '<event n="1" kind="prompt"' in text and 'tool="shell"' in text
    assert "kirolearn cut" in text and len(text) < 3_000


def test_render_keeps_both_ends_when_there_are_too_many_events():
    events = [ev("tool_use", i % 100, tool_name=f"t{i}", tool_response="z" * 300) for i in range(400)]
    text = extract.render_events(batch(*events), 2_000, 5_000)
    assert len(text) <= 5_100
    assert 'tool="t0"' in text and 'tool="t399"' in text and "<omitted events=" in text


def test_parse_answer_accepts_a_fence_and_rejects_garbage():
    assert len(extract.parse_answer("```json\n" + GOOD + "\n```").records) == 2
    with pytest.raises(extract.ExtractionError, match="malformed answer"):
        extract.parse_answer("Sure! Here are the records: ...")
    with pytest.raises(extract.ExtractionError, match="malformed answer"):
        extract.parse_answer('{"records": [{"observation_type": "opinion", "title": "t", "summary": "s"}]}')


def test_candidates_are_clipped_and_relative():
    (first, second) = extract.candidates_from(extract.parse_answer(GOOD), batch(ev("session_summary", 1)))
    assert first["strategy"] == "llm-summary"
    assert first["files_touched"] == ["app/auth.py"] and first["concepts"] == ["sql", "injection"]


def test_a_missing_turn_summary_is_added_from_the_deterministic_extractor():
    answer = extract.parse_answer(
        json.dumps({"records": [{"observation_type": "discovery", "title": "t", "summary": "s"}]})
    )
    events = [ev("prompt", 1, prompt="do it"), ev("session_summary", 2, assistant_response="done")]
    records = extract.candidates_from(answer, batch(*events))
    assert [r["observation_type"] for r in records] == ["session_summary", "discovery"]
    assert records[0]["strategy"] == "deterministic-turn"


# --- llm_extract retries -----------------------------------------------------------------------


class Timeout(Exception):
    """Named like litellm.Timeout: llm_extract treats it as transient."""


class BadRequestError(Exception):
    pass


def scripted(*answers):
    calls = []

    def complete(messages, conf):
        calls.append(messages)
        answer = answers[len(calls) - 1]
        if isinstance(answer, Exception):
            raise answer
        return Completion(answer, prompt_tokens=10, completion_tokens=5, cost_usd=0.001)

    complete.calls = calls
    return complete


def conf(**extract_overrides):
    s = settings.Settings()
    for key, value in extract_overrides.items():
        setattr(s.extract, key, value)
    return s


def test_transient_errors_are_retried_with_backoff():
    sleeps = []
    complete = scripted(Timeout("slow"), Timeout("slow"), GOOD)
    result = extract.llm_extract(
        batch(ev("session_summary", 1)), conf(model="m", retries=2), complete, sleeps.append
    )
    assert len(result.records) == 2 and sleeps == [1.0, 2.0]
    assert result.prompt_tokens == 10 and result.errors == ["Timeout: slow", "Timeout: slow"]


def test_a_bad_request_is_not_retried():
    complete = scripted(BadRequestError("no such model"), GOOD)
    with pytest.raises(extract.ExtractionError, match="BadRequestError: no such model"):
        extract.llm_extract(batch(ev("prompt", 1, prompt="x")), conf(model="m"), complete, lambda s: None)
    assert len(complete.calls) == 1


def test_malformed_answers_use_up_the_retries_and_keep_the_usage():
    complete = scripted("nope", "still nope", "{}{}")
    with pytest.raises(extract.ExtractionError) as info:
        extract.llm_extract(batch(ev("prompt", 1, prompt="x")), conf(model="m"), complete, lambda s: None)
    assert info.value.result.prompt_tokens == 30
    assert info.value.result.request.startswith("Project: p")


# --- the litellm adapter, for real, against a local fake server ---------------------------------


@pytest.fixture
def fake_llm(monkeypatch):
    with FakeLLM() as fake:
        monkeypatch.setenv("OLLAMA_API_BASE", fake.ollama_base)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-tests")
        yield fake


def test_litellm_complete_openai_compatible(fake_llm):
    fake_llm.enqueue(GOOD, prompt_tokens=120, completion_tokens=40)
    s = conf(model="openai/fake-model", api_base=fake_llm.openai_base, timeout_seconds=5)
    completion = extract.litellm_complete([{"role": "user", "content": "hi"}], s)
    assert json.loads(completion.content) == json.loads(GOOD)
    assert (completion.prompt_tokens, completion.completion_tokens) == (120, 40)
    body = fake_llm.chat_requests[0]["json"]
    assert body["model"] == "fake-model" and body["messages"] == [{"role": "user", "content": "hi"}]
    assert "response_format" in body  # structured output was asked for


def test_litellm_complete_ollama_chat(fake_llm):
    fake_llm.enqueue(GOOD)
    s = conf(model="ollama_chat/qwen2.5", api_base=fake_llm.ollama_base, timeout_seconds=5)
    completion = extract.litellm_complete([{"role": "user", "content": "hi"}], s)
    assert completion.content == GOOD and completion.prompt_tokens == 12
    assert "format" in fake_llm.chat_requests[0]["json"]  # the JSON schema went along


def test_litellm_errors_surface_as_provider_exceptions(fake_llm):
    import litellm

    s = conf(model="openai/fake-model", api_base=fake_llm.openai_base, timeout_seconds=0.5)
    fake_llm.enqueue(status=500, body="boom")
    with pytest.raises(litellm.InternalServerError):
        extract.litellm_complete([{"role": "user", "content": "hi"}], s)
    fake_llm.enqueue(delay=1.5, content="late")
    with pytest.raises(litellm.Timeout):
        extract.litellm_complete([{"role": "user", "content": "hi"}], s)


@pytest.mark.slow
def test_litellm_import_does_not_load_dotenv(tmp_path, monkeypatch):
    # The drainer runs in the user's project: a .env there must not leak into our environment.
    import subprocess
    import sys

    (tmp_path / ".env").write_text("KIROLEARN_LEAK_CHECK=leaked\n")
    code = (
        "import os; from kirolearn import settings; from kirolearn.pipeline import extract; "
        "s = settings.Settings(); s.extract.model = 'openai/x'; s.extract.api_base = 'http://127.0.0.1:9'; "
        "s.extract.timeout_seconds = 0.5\n"
        "try: extract.litellm_complete([{'role': 'user', 'content': 'x'}], s)\n"
        "except Exception: pass\n"
        "print(os.environ.get('KIROLEARN_LEAK_CHECK', 'clean'))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip() == "clean", out.stderr[-2000:]


def test_a_call_that_ignores_its_own_timeout_is_abandoned_within_the_budget(monkeypatch):
    import threading

    from kirolearn import settings
    from kirolearn.pipeline import extract

    monkeypatch.setattr(extract, "HARD_CAP_GRACE", 0.05)
    conf = settings.Settings()
    for key, value in dict(
        model="m", timeout_seconds=0.2, call_budget_seconds=0.5, retries=5, retry_backoff_seconds=0
    ).items():
        setattr(conf.extract, key, value)
    batch = extract.Batch("p", "/p", "s", [{"event_id": "e1", "kind": "prompt", "prompt": "x"}], "flush")
    release, timeouts = threading.Event(), []

    def trickle(messages, conf):  # a client whose timeout never fires
        timeouts.append(conf.extract.timeout_seconds)
        release.wait(30)

    try:
        with pytest.raises(extract.ExtractionError, match="CallTimeout: no answer within 0.2 s"):
            extract.llm_extract(batch, conf, trickle, sleep=lambda s: None)
    finally:
        release.set()
    assert 1 <= len(timeouts) <= 3 and max(timeouts) <= 0.2  # never the six tries retries=5 allows


def _answer(*types):
    return json.dumps(
        {
            "records": [
                {"observation_type": t, "title": f"{t} title", "summary": f"{t} summary"} for t in types
            ]
        }
    )


@pytest.mark.parametrize(
    "second, strategy, note",
    [
        (_answer("session_summary"), "llm-summary", ""),
        (_answer("decision"), "deterministic-turn", "turn summary: the model gave none"),
    ],
)
def test_the_model_is_asked_for_the_missing_turn_summary(
    make_event, drain_now, write_config, monkeypatch, second, strategy, note
):
    with FakeLLM() as fake:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-tests")
        write_config(
            f'[extract]\nmodel = "openai/fake-model"\napi_base = "{fake.openai_base}"\nretries = 0\n'
        )
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
