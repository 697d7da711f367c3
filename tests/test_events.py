"""Every payload shape of every Kiro generation becomes the right event."""

import json

import pytest
from conftest import load_cases, substitute

from kirolearn import hook as hooks
from kirolearn.capture import events
from kirolearn.pipeline.schema import Event

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_payload_becomes_expected_event(case, project, spooled, monkeypatch):
    mapping = {"PROJECT": str(project), "CWD": str(project / "src")}
    monkeypatch.chdir(project / "src")
    for key, value in case.get("env", {}).items():
        monkeypatch.setenv(key, value)
    stdin = case["stdin"]
    raw = (
        None
        if stdin is None
        else (stdin if isinstance(stdin, str) else json.dumps(substitute(stdin, mapping)))
    )
    assert hooks.handle(case["argv"], None if raw is None else raw.encode()) == 0

    found = spooled()
    if case["expect"] is None:
        assert found == []
        return
    assert len(found) == 1
    event = found[0]
    for key, value in substitute(case["expect"], mapping).items():
        assert event.get(key) == value, key
    assert event["project_root"] == str(project)
    assert event["project_global"] is False
    Event.model_validate(event)  # the drainer's gate accepts what the hook writes


def test_unknown_event_name_is_rejected():
    with pytest.raises(events.Rejected, match="unknown hook event name"):
        events.resolve_trigger("fileSave")


@pytest.mark.parametrize(
    "name, trigger, generation",
    [
        ("agentSpawn", "agentSpawn", "classic"),
        ("SessionStart", "agentSpawn", "v3"),
        ("UserPromptSubmit", "userPromptSubmit", "v3"),
        ("ide-agent-stop", "stop", "ide-legacy"),
        ("post-tool", "postToolUse", "unknown"),
        ("Manual", "Manual", "v3"),
    ],
)
def test_resolve_trigger(name, trigger, generation):
    assert events.resolve_trigger(name) == (trigger, generation)


def test_payload_hook_name_wins_over_argument(project, spooled):
    payload = {"hook_event_name": "stop", "cwd": str(project), "assistant_response": "done"}
    hooks.handle(["post-tool"], json.dumps(payload).encode())
    assert spooled()[0]["kind"] == "session_summary"


def test_huge_tool_output_keeps_head_and_tail(project, spooled):
    output = "HEAD-LINE\n" + "x" * (20 * 1024 * 1024) + "\nTAIL-ERROR: boom"
    payload = {
        "hook_event_name": "postToolUse",
        "cwd": str(project),
        "tool_name": "execute_bash",
        "tool_input": {"command": "make"},
        "tool_response": {"success": False, "result": [output]},
    }
    hooks.handle([], json.dumps(payload).encode())
    (event,) = spooled()
    text = event["tool_response"]["result"][0]
    assert text.startswith("HEAD-LINE")
    assert text.endswith("TAIL-ERROR: boom")
    assert "kirolearn cut" in text
    assert len(text) < events.MAX_STRING_CHARS + 100
    assert event["truncated"] == ["tool_response.result[]"]
    assert event["tool_input"] == {"command": "make"}
    assert len(events.serialize(event)) <= events.MAX_EVENT_BYTES
    Event.model_validate(event)


def test_many_small_strings_still_fit_the_event_cap():
    payload = {
        "hook_event_name": "postToolUse",
        "cwd": "/",
        "tool_name": "grep",
        "tool_response": [{"k%d" % i: "v" * 3000 for i in range(400)} for _ in range(3)],
    }
    event = events.build_event("postToolUse", payload)
    assert len(events.serialize(event)) <= events.MAX_EVENT_BYTES
    assert "tool_response" in event["truncated"][0]


def test_deep_nesting_is_cut_not_fatal():
    deep = current = {}
    for _ in range(200):
        current["d"] = {}
        current = current["d"]
    event = events.build_event("postToolUse", {"tool_name": "x", "tool_input": deep, "cwd": "/"})
    assert "nesting deeper" in json.dumps(event)
    Event.model_validate(event)


def test_long_lists_keep_both_ends():
    event = events.build_event(
        "postToolUse", {"tool_name": "x", "cwd": "/", "tool_response": list(range(5000))}
    )
    kept = event["tool_response"]
    assert kept[0] == 0 and kept[-1] == 4999
    assert any(isinstance(v, str) and "cut 4500 items" in v for v in kept)


def test_cut_text_marker_counts_dropped_chars():
    assert events.cut_text("abc", 10) == "abc"
    cut = events.cut_text("a" * 100 + "b" * 100, 40)
    assert cut.startswith("a" * 30) and cut.endswith("b" * 10)
    assert "cut 160 chars" in cut


def test_lone_surrogates_do_not_break_serialisation():
    event = events.build_event("userPromptSubmit", {"prompt": "bad \ud800 char", "cwd": "/"})
    data = events.serialize(event)
    assert json.loads(data)["prompt"] == "bad ? char"


def test_event_ids_sort_by_time():
    a = events.build_event("stop", {"cwd": "/"}, now=1_700_000_000.0)
    b = events.build_event("stop", {"cwd": "/"}, now=1_700_000_000.002)
    assert a["event_id"] < b["event_id"]
    assert a["received_at"] == "2023-11-14T22:13:20.000Z"


def test_surface_is_ide_for_v3_under_vscode():
    event = events.build_event("Stop", {"cwd": "/"}, env={"VSCODE_IPC_HOOK": "/tmp/x.sock"})
    assert event["surface"] == "kiro-ide"


def test_schema_rejects_tool_fields_on_prompt():
    event = events.build_event("userPromptSubmit", {"prompt": "p", "cwd": "/"})
    event["tool_name"] = "x"
    with pytest.raises(ValueError, match="cannot carry tool fields"):
        Event.model_validate(event)


def test_unknown_event_name_is_not_echoed():
    """The name is untrusted input the hook cannot scrub: a secret-shaped one never reaches the log."""
    token = "ghp_" + "Ab1" * 12
    with pytest.raises(events.Rejected) as err:
        events.build_event(token, {"cwd": "/tmp"})
    assert token not in str(err.value) and "unknown hook event name" in str(err.value)
