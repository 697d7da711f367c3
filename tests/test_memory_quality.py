"""Issue #24: memory that earns its tokens. What is kept, what is injected, what a person sees.

Every test goes through a real command: the hook process, `kirolearn` (CLI), the MCP client.
"""

import json
import os
import subprocess

import pytest
from click.testing import CliRunner

from kirolearn.cli import cli

from conftest import BIN, hook_env, run_hook

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")


def hook(project, name, session="s-1", **payload):
    body = {"hook_event_name": name, "cwd": str(project), "session_id": session, **payload}
    result = run_hook([], json.dumps(body).encode())
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    return result.stdout.decode("utf-8")


def kirolearn(*args, cwd=None):
    result = subprocess.run([str(BIN / "kirolearn"), *args], capture_output=True, text=True, timeout=120,
                            env=hook_env(), cwd=cwd)
    return result


def records(*args):
    out = kirolearn("list", "--json", "--limit", "100", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# --- 1. nothing a turn did is lost --------------------------------------------------------------------------


def test_two_turns_ending_in_empty_stops_within_3_s_each_get_a_record_in_one_flush(project):
    hook(project, "userPromptSubmit", prompt="rename the config loader in src/config.py")
    hook(project, "stop", assistant_response="")  # Kiro CLI posts empty stops
    hook(project, "userPromptSubmit", prompt="now add a test for src/config.py")
    hook(project, "stop", assistant_response="")  # identical payload, well within the 3 s window
    drained = kirolearn("drain", "--flush", "--json")
    assert drained.returncode == 0, drained.stderr
    stats = json.loads(drained.stdout)
    assert stats["stored"] == 4 and stats["duplicates"] == 0 and stats["pending_events"] == 0
    titles = sorted(r["title"] for r in records("--project", str(project)))
    assert titles == ["now add a test for src/config.py", "rename the config loader in src/config.py"]


def test_a_twin_hook_of_the_same_stop_is_still_one_event(project):
    hook(project, "userPromptSubmit", prompt="rename the loader in src/config.py")
    hook(project, "stop", assistant_response="")
    hook(project, "stop", assistant_response="")  # the same stop, wired twice (classic + v3)
    stats = json.loads(kirolearn("drain", "--flush", "--json").stdout)
    assert stats["stored"] == 2 and stats["duplicates"] == 1


def test_one_flush_extracts_each_session_s_last_open_turn(project):
    for session in ("a", "b"):
        hook(project, "userPromptSubmit", session=session, prompt=f"first turn of {session}: edit src/{session}.py")
        hook(project, "stop", session=session, assistant_response=f"Edited src/{session}.py.")
        hook(project, "userPromptSubmit", session=session, prompt=f"second turn of {session}: test src/{session}.py")
    stats = json.loads(kirolearn("drain", "--flush", "--json").stdout)
    assert stats["pending_events"] == 0 and stats["batches_extracted"] == 4
    assert len(records("--project", str(project))) == 4
    again = json.loads(kirolearn("drain", "--flush", "--json").stdout)
    assert again["batches_extracted"] == 0


# --- 2. nothing that is not knowledge is kept as if it were -----------------------------------------------------


def test_chatter_is_a_conversation_never_tool_use_and_never_the_session_start_headline(project):
    hook(project, "userPromptSubmit", session="w", prompt="fix the failing import in src/app.py")
    hook(project, "postToolUse", session="w", tool_name="fs_write",
         tool_input={"command": "str_replace", "path": str(project / "src" / "app.py")},
         tool_response="Updated src/app.py")
    hook(project, "stop", session="w", assistant_response="Fixed the import in src/app.py.")
    hook(project, "userPromptSubmit", session="c", prompt="write a haiku about autumn")
    hook(project, "stop", session="c", assistant_response="Leaves drift on cold wind / ...")
    hook(project, "userPromptSubmit", session="q", prompt="why did we pin numpy again?")
    hook(project, "stop", session="q", assistant_response="Because the newer release broke the build.")
    assert kirolearn("drain", "--flush").returncode == 0
    kinds = {r["title"]: r["observation_type"] for r in records("--project", str(project))}
    assert kinds["write a haiku about autumn"] == "conversation"
    assert kinds["why did we pin numpy again?"] == "conversation"
    assert kinds["fix the failing import in src/app.py"] == "session_summary"
    start = hook(project, "agentSpawn", session="next")
    assert "Fixed the import in src/app.py" in start
    assert "haiku" not in start and "numpy" not in start
    # still searchable, at a low weight, under its own name
    found = kirolearn("search", "autumn haiku", "--json", cwd=str(project))
    assert [h["observation_type"] for h in json.loads(found.stdout)] == ["conversation"]


def test_concepts_have_no_stop_words_and_no_redaction_marker_words(project):
    hook(project, "userPromptSubmit",
         prompt="lets go through the migration again because the rollback keeps failing <private>hunter2</private>")
    hook(project, "stop", assistant_response="The migration rollback failed because the schema table was locked; "
                                             "lets retry through the pooled connection again.")
    assert kirolearn("drain", "--flush").returncode == 0
    (record,) = records("--project", str(project))
    concepts = set(record["concepts"])
    assert {"migration", "rollback"} <= concepts
    assert not concepts & {"lets", "through", "again", "because", "redacted", "private"}
