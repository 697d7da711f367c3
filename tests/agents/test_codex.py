"""Real Codex CLI (`@openai/codex` 0.171.0) against a scripted fake of the OpenAI Responses API.

`kirolearn install --agent codex` wires the user's ~/.codex; then real
`codex exec` sessions run with no bypass flag (the hooks fire because install
recorded their trust), and the test reads what reached the fake model and what
`kirolearn export` stored.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import npmcache
import pytest
from agentrun import first_session
from click.testing import CliRunner
from fake_openai import FakeOpenAI, output_of, request_text, tool_names, tool_outputs
from helpers import drain

from kirolearn.capture.agents import codex
from kirolearn.capture.agents.common import APPROVED_TOOLS
from kirolearn.cli.commands import cli

pytestmark = [pytest.mark.agents, pytest.mark.timeout(900)]  # a first run installs the CLI from npm
SPEC = "@openai/codex@0.171.0"

USER_CONFIG = """# my codex settings
model = "gpt-fake"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "{base_url}"
wire_api = "responses"
env_key = "FAKE_KEY"

[features]
plugins = false
apps = false

[analytics]
enabled = false
"""
USER_HOOKS = '{\n  "hooks": {\n    "Stop": [\n      {"hooks": [{"type": "command", "command": "true"}]}\n    ]\n  }\n}\n'


@pytest.fixture(scope="module")
def codex_bin():
    return npmcache.install(SPEC, "codex")


def run_codex(binary, cwd, prompt, timeout=120, rust_log="error"):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI", "CODEX"))}
    env.update({"FAKE_KEY": "dummy", "NO_COLOR": "1", "RUST_LOG": rust_log})
    env.pop("KIROLEARN_RAISE_ERRORS", None)  # the hook must behave as it does for users
    result = subprocess.run(
        [str(binary), "exec", "--skip-git-repo-check", prompt],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def export(runner=None):
    result = (runner or CliRunner()).invoke(cli, ["export"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


FINAL_1 = (
    "The webhook handler now dedupes Stripe retries by event id; KLFINAL-7731 is the marker "
    "of this final answer."
)


def test_codex_real_session_capture_memory_mcp_and_exact_uninstall(codex_bin, project, home):
    codex_home = Path(os.environ["HOME"]) / ".codex"
    codex_home.mkdir()
    hooks_json, config_toml = codex_home / "hooks.json", codex_home / "config.toml"
    hooks_json.write_text(USER_HOOKS)  # the user's own Stop hook: ours come after it (trust key index 1)

    turn_1 = [{"call": "exec_command", "arguments": {"cmd": "echo KLTOOL-4242"}}, {"text": FINAL_1}]
    with FakeOpenAI(turn_1) as fake:
        config_toml.write_text(USER_CONFIG.format(base_url=fake.base_url))
        original = {hooks_json: hooks_json.read_bytes(), config_toml: config_toml.read_bytes()}
        result = CliRunner().invoke(cli, ["install", "--agent", "codex", "--yes"])
        assert result.exit_code == 0, result.output
        installed = config_toml.read_text()
        assert "[mcp_servers.kirolearn]" in installed
        assert "[mcp_servers.kirolearn.tools.search_memory]" in installed
        assert "forget_memory" not in installed  # the destructive tool is never auto-approved
        run = run_codex(codex_bin, project, "Make the Stripe webhook handler idempotent")
        assert "KLTOOL-4242" in run.stdout + run.stderr  # the tool really ran

        # the real final answer, from last_assistant_message
        events, tools = first_session(drain(flush=False), export(), "codex", FINAL_1)
        assert [t["tool_name"] for t in tools] == ["Bash"]
        assert "KLTOOL-4242" in json.dumps(tools[0]["tool_input"])
        assert "KLTOOL-4242" in json.dumps(tools[0]["tool_response"])
        assert {e["surface"] for e in events} == {"codex-cli"}

        session_2(fake, codex_bin, project)
        session_3_forget_is_not_auto_approved(fake, codex_bin, project)

    # Uninstall gives back the user's exact bytes.
    result = CliRunner().invoke(cli, ["uninstall", "--agent", "codex", "--yes"])
    assert result.exit_code == 0, result.output
    assert {p: p.read_bytes() for p in original} == original


def session_2(fake, codex_bin, project):
    """Memory reaches the model, and the model calls search_memory, whose answer reaches it too.

    Codex starts MCP servers in the background and offers their tools from the first request after
    they are up; until then the script has the model wait with a short shell command (bounded).
    """
    drain(flush=False)
    searches = []

    def turn_2(body):
        if searches and output_of(body, searches[0]) is not None:
            return {"text": "Found it in memory."}
        if not any(n.endswith("search_memory") for n in tool_names(body)):
            if len(tool_outputs(body)) > 60:
                return {"text": "kirolearn's MCP tools never came."}
            return {"call": "exec_command", "arguments": {"cmd": "sleep 0.25"}}
        searches.append(f"call_{len(fake.requests)}")  # the id the fake gives this reply's call
        return {"call": lambda name: name.endswith("search_memory"), "arguments": {"query": "Stripe webhook"}}

    fake.script, start = turn_2, len(fake.requests)
    run = run_codex(
        codex_bin, project, "What do we know about the webhook?", rust_log="reqwest::connect=debug"
    )
    hosts = set(re.findall(r"starting new connection: (\S+)", run.stderr))
    assert hosts and all(h.startswith("http://127.0.0.1:") for h in hosts), hosts  # nothing left loopback
    requests = fake.requests[start:]
    assert "KLFINAL-7731" in request_text(requests[0]), (
        "the memory kirolearn injected did not reach the model"
    )
    # kirolearn-mcp answers tools/list before Codex's first model request (issue #33: it used to come too late)
    assert "mcp__kirolearn.search_memory" in tool_names(requests[0]), tool_names(requests[0])
    assert searches, "kirolearn's search_memory was never offered to the model"
    offered = next(tool_names(r) for r in requests if any(n.endswith("search_memory") for n in tool_names(r)))
    assert "mcp__kirolearn.search_memory" in offered and "mcp__kirolearn.forget_memory" in offered, offered
    assert fake.calls[searches[0]] == "mcp__kirolearn.search_memory"
    answer = output_of(requests[-1], searches[0])
    assert answer is not None and "KLFINAL-7731" in answer, (
        answer
    )  # the stored record, through the MCP server
    drain(flush=False)
    mcp_calls = [
        o
        for o in export()
        if o["type"] == "event"
        and o.get("trigger") == "postToolUse"
        and "search_memory" in o.get("tool_name", "")
    ]
    assert [c["tool_name"] for c in mcp_calls] == ["mcp__kirolearn__search_memory"]
    return mcp_calls


def session_3_forget_is_not_auto_approved(fake, codex_bin, project):
    """The model asks for the destructive forget_memory: Codex does not run it unasked (exec declines)."""
    records = [o for o in export() if o["type"] == "record"]
    assert records
    target = records[0]["record_id"]
    calls = []

    def turn_3(body):
        if calls and output_of(body, calls[0]) is not None:
            return {"text": "done"}
        if not any(n.endswith("forget_memory") for n in tool_names(body)):
            if len(tool_outputs(body)) > 60:
                return {"text": "no tools"}
            return {"call": "exec_command", "arguments": {"cmd": "sleep 0.25"}}
        calls.append(f"call_{len(fake.requests)}")
        return {
            "call": lambda name: name.endswith("forget_memory"),
            "arguments": {"record_id": target, "reason": "the model wants it gone"},
        }

    fake.script, _start = turn_3, len(fake.requests)
    run_codex(codex_bin, project, "Forget the webhook memory")
    assert calls, "forget_memory was never offered"
    answer = output_of(fake.requests[-1], calls[0])
    assert answer is not None and "requires approval" in answer and "Forgot" not in answer, answer
    assert [o for o in export() if o["type"] == "record" and o["record_id"] == target], (
        "the record was forgotten"
    )
    return answer


def test_codex_trust_hash_matches_what_codex_reports(codex_bin, tmp_path):
    """Our trust entries carry the hash Codex itself computes (its app-server's hooks/list)."""
    CliRunner().invoke(cli, ["install", "--agent", "codex", "--yes"], catch_exceptions=False)
    codex_home = Path(os.environ["HOME"]) / ".codex"
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"clientInfo": {"name": "t", "version": "1"}},
        },
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(tmp_path)]}},
    ]
    proc = subprocess.Popen(
        [str(codex_bin), "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
    )
    try:
        for message in requests:
            proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        listed = None
        for line in proc.stdout:
            message = json.loads(line)
            if message.get("id") == 2:
                listed = message["result"]["data"][0]["hooks"]
                break
    finally:
        proc.kill()
        proc.wait(timeout=10)
    ours = [h for h in listed if "kirolearn" in (h.get("command") or "")]
    assert len(ours) == len(codex.HOOKS)
    assert {h["trustStatus"] for h in ours} == {"trusted"}, ours
    assert all(h["sourcePath"] == str(codex_home / "hooks.json") for h in ours)


def test_codex_changed_and_unknown_payloads_are_kept_and_exit_0(home, project):
    from conftest import run_hook

    from kirolearn.capture import spool

    base = {"session_id": "s1", "cwd": str(project), "transcript_path": "/nonexistent/rollout.jsonl"}
    cases = [
        {**base, "hook_event_name": "Stop"},  # no last_assistant_message, no transcript: still stored
        {**base, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_response": {"new": ["shape"]}},
        {**base, "hook_event_name": "PostToolUse"},  # no tool fields at all
        {**base, "hook_event_name": "BrandNewEvent", "whatever": {"x": 1}},  # an event newer than the adapter
    ]
    for payload in cases:
        result = run_hook(["--agent", "codex"], json.dumps(payload).encode(), cwd=str(project))
        assert result.returncode == 0 and result.stdout == b"", result.stderr
    garbage = run_hook(["--agent", "codex"], b"{not json", cwd=str(project))
    assert garbage.returncode == 0 and garbage.stdout == b""
    assert len(spool.ready_files()) == len(cases)
    stats = drain(flush=False)
    assert stats["stored"] == len(cases) and stats["quarantined"] == 0, stats
    stored = [o for o in export() if o["type"] == "event"]
    assert {e["hook"] for e in stored} == {"Stop", "PostToolUse", "BrandNewEvent"}
    assert any(e.get("extra", {}).get("whatever") == {"x": 1} for e in stored)


def test_codex_stop_prefers_last_assistant_message_over_the_rollout(tmp_path):
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text(
        json.dumps(
            {
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "older text"}],
                },
            }
        )
        + "\n"
    )
    payload = {"last_assistant_message": "the real final answer", "transcript_path": str(rollout)}
    assert codex.normalise("stop", payload, {})["assistant_response"] == "the real final answer"
    assert (
        codex.normalise("stop", {"transcript_path": str(rollout)}, {})["assistant_response"] == "older text"
    )
    out = json.loads(codex.context_output("agentSpawn", "memory"))
    assert out == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "memory"}}


@pytest.mark.parametrize("layout", ["absent", "empty", "crlf-no-newline"])
def test_codex_install_uninstall_exact_bytes_without_the_client(layout, home):
    codex_home = Path(os.environ["HOME"]) / ".codex"
    codex_home.mkdir()
    files = {
        codex_home / "hooks.json": {
            "absent": None,
            "empty": "{}\n",
            "crlf-no-newline": '{\r\n\t"hooks": {\r\n\t\t"Stop": []\r\n\t}\r\n}',
        }[layout],
        codex_home / "config.toml": {
            "absent": None,
            "empty": "",
            "crlf-no-newline": 'model = "o3"\r\n[tui]\r\nnotifications = true',
        }[layout],
    }
    for path, text in files.items():
        if text is not None:
            path.write_bytes(text.encode())
    runner = CliRunner()
    assert runner.invoke(cli, ["install", "--agent", "codex", "--yes"], catch_exceptions=False).exit_code == 0
    once = {p: p.read_bytes() for p in files}
    again = runner.invoke(cli, ["install", "--agent", "codex", "--yes"], catch_exceptions=False)
    assert "unchanged" in again.output and {p: p.read_bytes() for p in files} == once
    if sys.version_info >= (3, 11):
        import tomllib

        parsed = tomllib.loads((codex_home / "config.toml").read_text())
        assert set(parsed["mcp_servers"]["kirolearn"]["tools"]) == set(APPROVED_TOOLS)
        assert len(parsed["hooks"]["state"]) == len(codex.HOOKS)
    assert (
        runner.invoke(cli, ["uninstall", "--agent", "codex", "--yes"], catch_exceptions=False).exit_code == 0
    )
    for path, text in files.items():
        assert (path.read_bytes() if path.exists() else None) == (None if text is None else text.encode())


def test_codex_uninstall_after_the_user_edited_config_toml_takes_out_only_ours(home):
    codex_home = Path(os.environ["HOME"]) / ".codex"
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text('model = "o3"\n')
    runner = CliRunner()
    assert runner.invoke(cli, ["install", "--agent", "codex", "--yes"], catch_exceptions=False).exit_code == 0
    config.write_text("# added by hand\n" + config.read_text() + "\n[tui]\nnotifications = true\n")
    assert (
        runner.invoke(cli, ["uninstall", "--agent", "codex", "--yes"], catch_exceptions=False).exit_code == 0
    )
    assert config.read_text() == '# added by hand\nmodel = "o3"\n\n[tui]\nnotifications = true\n'
    assert not (codex_home / "hooks.json").exists()


def test_codex_install_refuses_a_config_that_already_defines_our_server(home):
    codex_home = Path(os.environ["HOME"]) / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('[mcp_servers.kirolearn]\ncommand = "something"\n')
    result = CliRunner().invoke(cli, ["install", "--agent", "codex", "--yes"])
    assert result.exit_code != 0 and "already defines [mcp_servers.kirolearn]" in result.output
    assert not (codex_home / "hooks.json").exists()  # all or nothing
