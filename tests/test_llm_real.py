"""A real model in the loop (#36): llama.cpp's server with Gemma 3 270M (GGUF), started on 127.0.0.1
by the test itself, and the drain's extraction batches, `doctor`'s probe and `session_end` with
auto_compress through litellm against it. `make test-llm` runs these (marker `llm`).

The server's venv is built once into ~/.cache/kirolearn-llm (tests/llmserver.py; .ci/run builds it).
Without it these tests skip, except with KIROLEARN_REQUIRE_LLM=1 (CI): then they fail. A 270M model
is a robustness test, not a quality bar: its answers may be valid or botched, and either way nothing
may be lost or stored twice, and every fallback says why.
"""

import json
import os
import signal
import threading
from pathlib import Path

import llmserver
import pytest
from conftest import cli

pytestmark = [
    pytest.mark.llm,
    pytest.mark.timeout(1800),
    pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning"),
]

CACHE = Path(
    os.environ.get("KIROLEARN_LLM_CACHE") or llmserver.DEFAULT_CACHE_DIR
)  # read at import, before HOME is replaced
MODEL = "openai/gemma-3-270m"


@pytest.fixture(scope="module")
def llama_server():
    """The real server's base URL (module-wide: it loads in 5-10 s, answers in 1-60 s a call)."""
    cache = CACHE
    python = llmserver._venv_python(cache / "venv")
    marker = llmserver._read_marker(cache / "venv" / llmserver.MARKER_NAME)
    if not (python.exists() and llmserver._marker_matches(marker)):
        why = (
            f"no llama.cpp server venv in {cache}: build it with `python tests/llmserver.py --ensure` "
            "(about 8 min on 2 cores)"
        )
        if os.environ.get("KIROLEARN_REQUIRE_LLM") == "1":
            pytest.fail(why)
        pytest.skip(why)
    gguf = llmserver.assemble_model(python)
    log = cache / "test-server.log"
    with llmserver.running_server(python, gguf, log_path=log, startup_timeout=180) as url:
        yield url


def configure(write_config, url, drain="", **keys):
    values = {
        "model": MODEL,
        "api_base": url,
        "timeout_seconds": 240,
        "call_budget_seconds": 300,
        "drain_llm_budget_seconds": 900,
        "retries": 0,
        "max_answer_tokens": 256,
        "max_field_chars": 300,
        "max_prompt_chars": 3000,
        **keys,
    }
    write_config(
        "[extract]\n"
        + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())
        + (f"[drain]\n{drain}\n" if drain else "")
    )


def webhook_retry_turn(make_event, session, n):
    make_event(
        "userPromptSubmit",
        prompt=f"webhooks to the payment provider keep timing out ({n})",
        session_id=session,
    )
    make_event(
        tool_name="fs_write",
        tool_input={"command": "str_replace", "path": "config/retry.py"},
        tool_response="WEBHOOK_RETRIES = 7",
        session_id=session,
    )
    make_event(
        tool_name="shell",
        tool_input={"command": "pytest tests/test_retry.py"},
        tool_response="4 passed",
        session_id=session,
    )
    make_event(
        "stop",
        assistant_response="Raised WEBHOOK_RETRIES from 3 to 7 in config/retry.py because "
        "the provider times out under load.",
        session_id=session,
    )


def check_nothing_lost_or_twice(db, sessions):
    events = [dict(r) for r in db.query("select event_id, session_id, extract_state from events")]
    assert len(events) == 4 * len(sessions) and all(e["extract_state"] == "done" for e in events)
    cited = [
        i
        for r in db.query("select source_event_ids from memory_records")
        for i in json.loads(r["source_event_ids"])
    ]
    ids = {e["event_id"] for e in events}
    assert ids <= set(cited)  # every event is behind a record
    for session in sessions:
        runs = [
            dict(r)
            for r in db.query(
                "select * from extraction_runs where session_id = ? and outcome = 'ok'", [session]
            )
        ]
        assert len(runs) == 1  # one committed extraction per batch: nothing extracted twice


def test_drain_batches_through_the_real_server(home, make_event, drain_now, write_config, llama_server):
    from kirolearn.pipeline import extract, structured

    structured._known.clear()
    configure(write_config, llama_server)
    sessions = ["real-a", "real-b"]
    for n, session in enumerate(sessions):
        webhook_retry_turn(make_event, session, n)
    stats, db = drain_now()
    assert stats.pending_events == 0 and stats.batches_extracted == 2
    check_nothing_lost_or_twice(db, sessions)
    runs = [dict(r) for r in db.query("select * from extraction_runs order by started_at, rowid")]
    model_runs = [r for r in runs if r["extractor"] == "llm"]
    assert model_runs, runs  # the model was asked: no breaker, no json_schema failure
    assert all(r["response_form"] == "json_object" for r in model_runs)  # llama.cpp refuses json_schema
    assert all(r["prompt_version"] == extract.PROMPT_VERSION and r["answer"] for r in model_runs)
    fell_back = [r for r in runs if r["extractor"] == "deterministic"]
    assert all(r["fallback_reason"].startswith("model answer unusable: ") for r in fell_back)
    assert stats.fallbacks == len(fell_back) and stats.llm_failures == len(fell_back)
    remembered = json.loads((home / "state" / "llm_forms.json").read_text())
    assert remembered[f"{MODEL}@{llama_server}"]["form"] == "json_object"
    status = json.loads(cli("status", "--json").stdout)["extractor"]["model_runs_24h"]
    assert status["batches"] == 2 - len(fell_back) and status["fallbacks"] == len(fell_back)
    print(
        f"\nreal model: {len(model_runs)} calls, {len(fell_back)} fell back; {stats.llm_seconds:.1f} s of model time; "
        f"answers: {[r['answer'][:120] for r in model_runs]}"
    )


def test_doctor_probes_the_real_server(home, write_config, llama_server):
    configure(write_config, llama_server, timeout_seconds=120)
    result = cli("doctor", "--json")
    checks = json.loads(result.stdout)["checks"]
    (probe,) = [c for c in checks if f"model {MODEL} at {llama_server}" in c["message"]]
    assert probe["level"] in ("OK", "WARN") and "structured output: json_object" in probe["message"], probe


def test_session_end_auto_compress_through_the_real_server(
    home, project, make_event, write_config, llama_server
):
    from kirolearn import Memory

    configure(write_config, llama_server)
    webhook_retry_turn(make_event, "compress-me", 0)
    memory = Memory()
    memory.drain(flush=True, wait=0)
    result = memory.end_session(
        "compress-me", auto_compress=True, project=str(project), summary="Raised the webhook retries."
    )
    assert result["auto_compress"] is True
    # the model either filled gaps (compressed_used) or failed with a named code; the summary is stored either way
    assert result.get("auto_compress_error") in (None, "malformed_json", "timeout"), result
    found = memory.init_session(project=str(project))
    assert "Raised the webhook retries." in json.dumps(found)


def test_the_server_killed_mid_batch_loses_nothing(home, make_event, drain_now, write_config):
    """Its own server, killed (SIGKILL) while a batch's request is in flight: the batch stays buffered,
    and a later drain without the model extracts it once."""
    python = llmserver._venv_python(CACHE / "venv")
    if not python.exists():
        if os.environ.get("KIROLEARN_REQUIRE_LLM") == "1":
            pytest.fail(f"no llama.cpp server venv in {CACHE}")
        pytest.skip(f"no llama.cpp server venv in {CACHE}")
    gguf = llmserver.assemble_model(python)
    with llmserver.running_server(python, gguf, log_path=CACHE / "test-kill.log", startup_timeout=180) as url:
        configure(write_config, url, max_answer_tokens=2000)
        webhook_retry_turn(make_event, "killed", 0)
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        done = threading.Event()
        killed = []

        def killer():
            while not done.is_set():
                if _connected(port):  # the batch's request is in flight
                    for pid in _server_pids(port):
                        os.killpg(os.getpgid(pid), signal.SIGKILL)
                        killed.append(pid)
                    return
                done.wait(0.05)

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        try:
            stats, db = drain_now()
        finally:
            done.set()
            thread.join(10)
        assert killed, "the request never reached the server"
        assert stats.records_written == 0 and stats.pending_events == 4 and stats.llm_failures == 1
        assert db["memory_records"].count == 0
    write_config("")  # the model gone for good: the deterministic extractor
    stats, db = drain_now()
    assert stats.pending_events == 0
    check_nothing_lost_or_twice(db, ["killed"])


def _connected(port: int) -> bool:
    """Is a TCP connection to 127.0.0.1:port established (state 01 in /proc/net/tcp)?"""
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        if fields[1].endswith(f":{port:04X}") and fields[3] == "01":
            return True
    return False


def _server_pids(port: int):
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"llama_cpp.server" in cmd and str(port).encode() in cmd:
                pids.append(int(entry.name))
    return pids
