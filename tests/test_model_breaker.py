"""The model breaker: a model that accepts and never answers is bounded per batch, skipped after failures
in a row (status says so), and tried once again after its cool-off."""

import json

from conftest import cli, run_hook


def test_a_hung_model_is_bounded_and_skipped_after_failures_in_a_row(
    home, project, write_config, monkeypatch
):
    from fakellm import FakeLLM

    with FakeLLM() as fake:
        write_config(
            f'[extract]\nmodel = "openai/fake-model"\napi_base = "{fake.openai_base}"\n'
            "timeout_seconds = 0.3\ncall_budget_seconds = 0.8\nretries = 5\nretry_backoff_seconds = 0\n"
            "breaker_failures = 2\n"
        )
        for _ in range(40):
            fake.enqueue(delay=60, content="never")  # accepted, never answered
        for s in range(4):  # four sessions whose turn ended: four batches
            body = {
                "hook_event_name": "stop",
                "cwd": str(project),
                "session_id": f"hung-{s}",
                "assistant_response": f"finished part {s}",
            }
            assert run_hook([], json.dumps(body).encode()).returncode == 0
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-tests")
        result = cli("drain", "--json")
        assert result.returncode == 0, result.stderr
        stats = json.loads(result.stdout)
        # two batches past their deadline fall back at once (#36), then the breaker skips the model for two more
        assert stats["llm_failures"] == 2 and stats["fallbacks"] == 4 and stats["model_breaker_open"]
        assert stats["batches_extracted"] == 4 and stats["pending_events"] == 0
        asked = len(fake.chat_requests)
        assert asked <= 2 * 4  # each batch: attempts of 0.3 s within its 0.8 s budget, never all 6 tries
        status = json.loads(cli("status", "--json").stdout)
        assert status["extractor"]["breaker_open"] and status["extractor"]["failures_in_a_row"] == 2
        assert "failed 2 batches in a row" in status["extractor"]["mode"]
        runs = status["extractor"]["model_runs_24h"]
        assert runs["batches"] == 0 and runs["failed_attempts"] == 2 and runs["fallbacks"] == 4
        assert set(runs["fallback_reasons"]) == {"model answer unusable", "model failed 2 batches in a row"}
        text = cli("status").stdout
        assert "model: not called" in text and "4 fell back to the deterministic extractor" in text
        body = {
            "hook_event_name": "stop",
            "cwd": str(project),
            "session_id": "hung-late",
            "assistant_response": "finished the last part",
        }
        assert run_hook([], json.dumps(body).encode()).returncode == 0
        again = json.loads(cli("drain", "--json", "--flush").stdout)
        assert len(fake.chat_requests) == asked  # breaker still open: the model is not called again
        assert again["fallbacks"] == 1 and again["pending_events"] == 0


def test_the_breaker_lets_one_call_through_after_its_cool_off(home, make_event, drain_now, write_config):
    from helpers import GOOD

    from kirolearn.store import state

    calls = []

    def complete(messages, conf):
        from kirolearn.pipeline.extract import Completion

        calls.append(1)
        return Completion(GOOD)

    write_config('[extract]\nmodel = "m"\nbreaker_failures = 2\n')
    make_event("stop", assistant_response="done", session_id="cool")
    state.write(state.MODEL, {"consecutive_failures": 5, "last_failure_at": "2001-01-01T00:00:00.000Z"})
    stats, _ = drain_now(complete=complete)
    assert calls == [1] and stats.extractor == "llm" and not stats.model_breaker_open
    assert state.read(state.MODEL)["consecutive_failures"] == 0
