"""Property tests: whatever Kiro (or a broken Kiro) sends, the hook exits 0 and
either spools a valid event or logs exactly one rejection."""

import json
import tempfile
from pathlib import Path

from conftest import hook_env, run_hook
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kirolearn import hook as hooks
from kirolearn.pipeline.schema import Event

NAMES = [
    "agentSpawn",
    "userPromptSubmit",
    "preToolUse",
    "postToolUse",
    "stop",
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "Manual",
    "bogus",
    "",
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)
payloads = st.fixed_dictionaries(
    {"hook_event_name": st.sampled_from(NAMES)},
    optional={
        "cwd": st.text(max_size=30),
        "session_id": st.one_of(st.text(max_size=40), st.integers(), st.none()),
        "prompt": json_values,
        "tool_name": json_values,
        "tool_input": json_values,
        "tool_response": json_values,
        "assistant_response": json_values,
        "extra": json_values,
    },
)
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _outcome(home, before_log):
    ready = home / "spool" / "ready"
    files = sorted(ready.iterdir()) if ready.exists() else []
    log = home / "logs" / "hook.log"
    log_lines = log.read_text("utf-8").splitlines() if log.exists() else []
    return files, log_lines[before_log:]


def _check_one_outcome(home, seen, before_log):
    files, new_log = _outcome(home, before_log)
    new_files = [f for f in files if f not in seen]
    assert len(new_files) + len(new_log) == 1, (new_files, new_log)
    for f in new_files:
        Event.model_validate(json.loads(f.read_bytes()))
        seen.add(f)
    return before_log + len(new_log)


@SETTINGS
@given(payload=payloads)
def test_random_payload_objects(home, monkeypatch, payload):
    monkeypatch.delenv("KIROLEARN_RAISE_ERRORS", raising=False)
    monkeypatch.setattr(hooks, "_stdin_timeout", lambda: 0.1)
    seen = set(_outcome(home, 0)[0])
    before = len(_outcome(home, 0)[1])
    assert hooks.handle([], json.dumps(payload).encode()) == 0
    _check_one_outcome(home, seen, before)


@SETTINGS
@given(raw=st.binary(max_size=2000), arg=st.sampled_from([[], ["stop"], ["post-tool"], ["nope"]]))
def test_random_bytes(home, monkeypatch, raw, arg):
    monkeypatch.delenv("KIROLEARN_RAISE_ERRORS", raising=False)
    seen = set(_outcome(home, 0)[0])
    before = len(_outcome(home, 0)[1])
    assert hooks.handle(arg, raw) == 0
    _check_one_outcome(home, seen, before)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    raw=st.one_of(
        st.binary(max_size=500),
        st.just(b"\xed\xa0\x80 invalid utf-8 \xc3\x28"),
        st.just(
            json.dumps(
                {"hook_event_name": "postToolUse", "tool_name": "x", "tool_response": "y" * 3_000_000}
            ).encode()
        ),
        st.just(b'{"hook_event_name":"stop","a":' + b"[" * 5000 + b"]" * 5000 + b"}"),
    )
)
def test_real_process_never_hangs_or_prints(raw):
    with tempfile.TemporaryDirectory() as fresh:  # one home per example: earlier examples prove nothing here
        home = Path(fresh)
        result = run_hook([], raw, env=hook_env(KIROLEARN_HOME=fresh), timeout=15)
        assert result.returncode == 0
        assert result.stdout == b""
        _check_one_outcome(home, set(), 0)  # one event spooled or one line logged, never neither
