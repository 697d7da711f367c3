"""Bad input gets a clear error and loses nothing, through the real console scripts: environment
numbers that are not numbers, an export whose marks go round in a circle, non-finite numbers in an
export, a 5,000-digit integer in a hook payload, and a JSON-RPC request nested 50,000 deep."""

import json
import os
import select
import subprocess

import pytest

from tests.conftest import BIN, assert_one_error, hook_env, kl, run_hook

PAYLOAD = {"hook_event_name": "postToolUse", "session_id": "s1", "tool_name": "shell"}


def _ready(home):
    folder = home / "spool" / "ready"
    return sorted(folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("value", ["nan", "inf", "1e308", "-1", "abc", "9" * 5000])
def test_an_invalid_stdin_timeout_keeps_the_event_and_logs_one_line(home, project, value):
    payload = dict(PAYLOAD, cwd=str(project), tool_input={"command": "make test"})
    ran = run_hook(stdin=json.dumps(payload).encode(), env=hook_env(KIROLEARN_STDIN_TIMEOUT=value))
    assert ran.returncode == 0 and ran.stderr == b"", ran.stderr
    assert len(_ready(home)) == 1  # the default timeout read the payload
    lines = (home / "logs" / "env.log").read_text("utf-8").splitlines()
    assert len(lines) == 1 and "KIROLEARN_STDIN_TIMEOUT=" in lines[0] and "using 2.0" in lines[0]


def test_a_valid_stdin_timeout_is_used_and_logs_nothing(home, project):
    payload = dict(PAYLOAD, cwd=str(project))
    ran = run_hook(stdin=json.dumps(payload).encode(), env=hook_env(KIROLEARN_STDIN_TIMEOUT="5"))
    assert ran.returncode == 0 and len(_ready(home)) == 1
    assert not (home / "logs" / "env.log").exists()


def _env_lines(home, variable):
    log = home / "logs" / "env.log"
    return [line for line in log.read_text("utf-8").splitlines() if variable in line] if log.exists() else []


@pytest.mark.parametrize("variable", ["KIROLEARN_BUSY_TIMEOUT", "KIROLEARN_ANN_THRESHOLD"])
def test_the_drains_numeric_variables_fall_back_with_one_line(home, project, variable):
    payload = dict(PAYLOAD, cwd=str(project))
    assert run_hook(stdin=json.dumps(payload).encode()).returncode == 0
    env = hook_env(**{variable: "nan"}, KIROLEARN_EMBEDDING_MODEL="wordllama/l2_supercat_256")
    ran = kl("drain", "--flush", env=env, timeout=180)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "1 stored" in ran.stdout
    lines = _env_lines(home, variable)
    assert len(lines) == 1 and "'nan' is not a number" in lines[0], lines


def test_the_recall_deadline_falls_back_with_one_line(home, project, add_record):
    add_record(project, "the build runs make release", facts=["build with make release"])
    (home / "recall.sock").write_text("")  # not a server: the hook asks it, then recalls lexically
    payload = dict(PAYLOAD, cwd=str(project), hook_event_name="userPromptSubmit", prompt="how do I build")
    env = hook_env(KIROLEARN_RECALL_DEADLINE_MS="inf")
    ran = run_hook(stdin=json.dumps(payload).encode(), env=env)
    assert ran.returncode == 0 and len(_ready(home)) == 1, ran.stderr
    lines = _env_lines(home, "KIROLEARN_RECALL_DEADLINE_MS")
    assert len(lines) == 1 and "using 150.0" in lines[0], lines


def test_a_huge_integer_in_a_payload_is_kept_as_text(home, project):
    digits = "7" * 5000
    raw = json.dumps(dict(PAYLOAD, cwd=str(project), tool_input={"command": "x"})).replace(
        '"tool_input"', f'"tool_response": {{"count": {digits}}}, "tool_input"'
    )
    ran = run_hook(stdin=raw.encode())
    assert ran.returncode == 0 and ran.stderr == b"", ran.stderr
    assert not (home / "spool" / "quarantine").exists() or not list((home / "spool" / "quarantine").iterdir())
    assert kl("drain", timeout=120).returncode == 0
    exported = kl("export", timeout=120)
    events = [json.loads(line) for line in exported.stdout.splitlines() if '"event"' in line[:20]]
    assert digits in json.dumps(events)  # stored whole, as text


def _strict(line: str):
    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(line, parse_constant=refuse)


def test_export_writes_strict_json_for_non_finite_numbers(home, tmp_path, project):
    raw = json.dumps(dict(PAYLOAD, cwd=str(project), tool_input={"a": 1})).replace(
        '"tool_input"', '"tool_response": {"ratio": NaN, "top": Infinity, "low": -Infinity}, "tool_input"'
    )
    assert run_hook(stdin=raw.encode()).returncode == 0
    assert kl("drain", timeout=120).returncode == 0
    exported = kl("export", timeout=120)
    assert exported.returncode == 0, exported.stderr[-2000:]
    items = [_strict(line) for line in exported.stdout.splitlines()]
    text = json.dumps(items)
    assert '"NaN"' in text and '"Infinity"' in text and '"-Infinity"' in text
    dump = tmp_path / "strict.jsonl"
    dump.write_text(exported.stdout, "utf-8")
    again = kl("import", str(dump), env=hook_env(KIROLEARN_HOME=str(tmp_path / "other")), timeout=120)
    assert again.returncode == 0, again.stderr  # and it reads back


def _two_records(add_record, project):
    a = add_record(project, "the build uses make")
    b = add_record(project, "the tests run under pytest")
    lines = kl("export", timeout=120).stdout.splitlines()
    return a, b, [json.loads(line) for line in lines]


@pytest.mark.parametrize("mark", ["merged_into", "superseded_by"])
@pytest.mark.parametrize("shape", ["cycle", "self"])
def test_import_refuses_mark_cycles_naming_the_records(home, tmp_path, project, add_record, mark, shape):
    a, b, items = _two_records(add_record, project)
    for item in items:
        if item["type"] == "record":
            other = item["record_id"] if shape == "self" else (b if item["record_id"] == a else a)
            if shape == "cycle" or item["record_id"] == a:
                item[mark] = other
    dump = tmp_path / "cycle.jsonl"
    dump.write_text("".join(json.dumps(i) + "\n" for i in items), "utf-8")
    other_home = tmp_path / "other-home"
    env = hook_env(KIROLEARN_HOME=str(other_home))
    ran = kl("import", str(dump), env=env, timeout=120)
    message = assert_one_error(ran, a, mark)
    if shape == "cycle":
        assert b in message and "cycle" in message
    listed = kl("list", "--json", "--all-projects", env=env, timeout=120)
    assert listed.returncode != 0 or json.loads(listed.stdout or "[]") == []  # nothing written


def test_import_takes_a_plain_chain_of_marks(home, tmp_path, project, add_record):
    a, b, items = _two_records(add_record, project)
    for item in items:
        if item["type"] == "record" and item["record_id"] == a:
            item["merged_into"] = b
    dump = tmp_path / "chain.jsonl"
    dump.write_text("".join(json.dumps(i) + "\n" for i in items), "utf-8")
    ran = kl("import", str(dump), env=hook_env(KIROLEARN_HOME=str(tmp_path / "other")), timeout=120)
    assert ran.returncode == 0, ran.stderr


def _rpc(proc, message: str, wait: float = 60):
    """Send one line, read one reply line within `wait` seconds (a server that answers nothing fails)."""
    proc.stdin.write(message.encode() + b"\n")
    proc.stdin.flush()
    ready, _, _ = select.select([proc.stdout], [], [], wait)
    assert ready, f"no reply within {wait} s"
    return json.loads(proc.stdout.readline())


@pytest.mark.parametrize("depth", [300, 50_000])
def test_a_deeply_nested_request_gets_a_json_rpc_error_and_the_server_goes_on(home, project, depth):
    proc = subprocess.Popen(
        [str(BIN / "kirolearn-mcp")],
        env=dict(os.environ, KIROLEARN_PROJECT=str(project)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        assert _rpc(proc, json.dumps(init))["id"] == 1
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        deep = "[" * depth + "]" * depth
        line = (
            '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search_memory", '
            f'"arguments": {{"query": {deep}}}}}}}'
        )
        reply = _rpc(proc, line)
        assert reply["id"] == 7 and reply["error"]["code"] == -32700, reply
        call = {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tools/call",
            "params": {"name": "search_memory", "arguments": {"query": "make"}},
        }
        after = _rpc(proc, json.dumps(call))
        assert after["id"] == 8 and "result" in after, after
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, proc.stderr.read()[-2000:]


def test_the_env_helper_reads_numbers_in_range(monkeypatch):
    from kirolearn.core import envnum

    env = {"X": " 3.5 ", "N": "12", "BIG": "1" * 5000, "F": "2.5"}
    assert envnum.number("X", 1.0, 0, 10, env=env) == 3.5
    assert envnum.number("N", 1, 0, 100, integer=True, env=env) == 12
    assert envnum.number("F", 1, 0, 100, integer=True, env=env) == 1
    assert envnum.number("BIG", 1, 0, 1 << 62, integer=True, env=env) == 1
    assert envnum.number("MISSING", 7, 0, 10, env=env) == 7
