"""The installed `kirolearn-hook` console script, run as Kiro runs it."""

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import BIN, cli, hook_env, load_cases, read_only_ready, run_hook, substitute, writable_again

from kirolearn import hook as hooks
from kirolearn.core import paths
from kirolearn.pipeline.schema import Event

CASES = [c for c in load_cases() if c["expect"] is not None]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_real_hook_process_spools_a_valid_event(case, project, spooled):
    mapping = {"PROJECT": str(project), "CWD": str(project / "src")}
    stdin = case["stdin"]
    raw = (
        b""
        if stdin is None
        else (stdin if isinstance(stdin, str) else json.dumps(substitute(stdin, mapping))).encode()
    )
    result = run_hook(case["argv"], raw, env=hook_env(**case.get("env", {})), cwd=project / "src")
    assert result.returncode == 0
    assert result.stdout == b""
    assert result.stderr == b""
    (event,) = spooled()
    Event.model_validate(event)
    assert event["kind"] == case["expect"]["kind"]


def _held_open(argv, env, write=b""):
    """Start the hook with a stdin pipe that is never closed (IDE 0.x behaviour)."""
    proc = subprocess.Popen(
        [str(BIN / "kirolearn-hook"), *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    if write:
        proc.stdin.write(write)
        proc.stdin.flush()
    start = time.monotonic()
    try:
        proc.wait(timeout=10)
        elapsed = time.monotonic() - start
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait()
    return proc.returncode, out, err, elapsed


def test_ide_legacy_hook_does_not_read_a_stdin_that_never_closes(spooled, project):
    # a 60 s stdin cap: _held_open's 10 s wait only passes if stdin is not read at all
    env = hook_env(USER_PROMPT="why is the cache cold?", KIROLEARN_STDIN_TIMEOUT="60")
    code, out, err, _ = _held_open(["ide-prompt-submit"], env)
    assert (code, out, err) == (0, b"", b"")
    assert spooled()[0]["prompt"] == "why is the cache cold?"


def test_stdin_held_open_and_empty_gives_up_after_the_deadline(spooled):
    env = hook_env(KIROLEARN_STDIN_TIMEOUT="0.3")
    code, out, err, _ = _held_open([], env)  # bounded by the 10 s wait
    assert (code, out) == (0, b"")
    assert b"[kirolearn] hook: no hook name" in err
    assert spooled() == []


def test_payload_written_but_stdin_never_closed_is_still_recorded(spooled, project):
    payload = json.dumps(
        {"hook_event_name": "postToolUse", "cwd": str(project), "tool_name": "shell"}
    ).encode()
    # a 60 s stdin cap: ending within _held_open's 10 s wait means the idle rule ended the read
    code, out, err, _ = _held_open([], hook_env(KIROLEARN_STDIN_TIMEOUT="60"), write=payload)
    assert (code, out, err) == (0, b"", b"")
    assert spooled()[0]["tool_name"] == "shell"


TRICKLE = """
import sys, time
half = sys.argv[1].encode()
out = sys.stdout.buffer
for i in range(len(half)):  # half a payload, one byte at a time ...
    out.write(half[i:i + 1]); out.flush(); time.sleep(0.01)
while True:  # ... then one space at a time, for ever: the payload never completes
    out.write(b" "); out.flush(); time.sleep(0.01)
"""


def test_a_trickling_stdin_ends_the_hook_within_its_cap(spooled, project):
    """Each arriving byte used to push the deadline out: a trickle kept the hook alive for ever."""
    cap = 1.0
    env = hook_env(KIROLEARN_STDIN_TIMEOUT=str(cap))
    payload = json.dumps(
        {
            "hook_event_name": "postToolUse",
            "cwd": str(project),
            "tool_name": "shell",
            "tool_response": {"success": True, "result": ["x" * 200]},
        }
    )
    # Baseline, same test, same machine load: the hook on a payload that is all there and closed.
    start = time.monotonic()
    assert run_hook([], payload.encode(), env=env).returncode == 0
    baseline = time.monotonic() - start
    writer = subprocess.Popen(
        [sys.executable, "-c", TRICKLE, payload[: len(payload) // 2]], stdout=subprocess.PIPE
    )
    try:
        start = time.monotonic()
        hook = subprocess.Popen(
            [str(BIN / "kirolearn-hook")],
            stdin=writer.stdout,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        writer.stdout.close()  # the hook holds the only read end
        out, err = hook.communicate(timeout=cap + 10 * baseline + 10)
        elapsed = time.monotonic() - start
        assert writer.poll() is None  # still trickling when the hook gave up
    finally:
        writer.kill()
        writer.wait()
    assert hook.returncode == 0 and out == b""
    assert b"stdin is not valid JSON" in err  # half a payload: reported, nothing recorded
    assert len(spooled()) == 1  # only the baseline's event
    assert elapsed < cap + 2 * baseline + 0.5, (elapsed, baseline)


@pytest.mark.parametrize(
    "argv, stdin, message",
    [
        ([], b"garbage", b"stdin is not valid JSON"),
        ([], b"\xff\xfe\x00binary\x80", b"stdin is not valid JSON"),
        ([], b"", b"no hook name"),
        ([], b"[1, 2]", b"stdin JSON is a list, expected an object"),
        ([], b'{"hook_event_name": "fileSave"}', b"unknown hook event name"),
        (["what-is-this"], b"", b"unknown hook event name"),
        (
            ["nosuch-event"],
            b"",
            b"as the EVENT argument one of agent-spawn | prompt-submit | pre-tool | post-tool | "
            b"stop | ide-prompt-submit | ide-post-tool | ide-agent-stop",
        ),
        (["stop", "extra"], b"", b"expected at most one EVENT argument"),
        ([], b"[" * 100_000, b"nested too deeply"),
    ],
)
def test_bad_input_exits_0_with_one_stderr_line_and_a_log_line(home, argv, stdin, message, spooled):
    result = run_hook(argv, stdin)
    assert result.returncode == 0
    assert result.stdout == b""
    assert result.stderr.startswith(b"[kirolearn] ")
    assert message in result.stderr
    assert result.stderr.count(b"\n") == 1
    log = (home / "logs" / "hook.log").read_text()
    assert message.decode() in log
    assert spooled() == []


def test_unwritable_home_exits_0(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    payload = json.dumps({"hook_event_name": "stop", "cwd": str(tmp_path)}).encode()
    result = run_hook([], payload, env=hook_env(KIROLEARN_HOME=str(blocker / "home")))
    assert result.returncode == 0
    assert result.stdout == b""
    assert b"[kirolearn] hook: NotADirectoryError" in result.stderr


def test_unset_home_with_kirolearn_home_still_records(project, spooled):
    env = hook_env()
    env.pop("HOME")
    payload = json.dumps({"hook_event_name": "stop", "cwd": str(project)}).encode()
    result = run_hook([], payload, env=env)
    assert (result.returncode, result.stderr) == (0, b"")
    assert spooled()[0]["project_root"] == str(project)


def test_no_home_at_all_is_reported_not_raised(monkeypatch, capsys):
    monkeypatch.delenv("KIROLEARN_HOME")
    monkeypatch.delenv("KIROLEARN_RAISE_ERRORS")
    monkeypatch.setattr(paths, "user_home_dir", lambda: None)
    assert hooks.handle(["stop"], b"") == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "set KIROLEARN_HOME" in captured.err


def test_full_disk_is_reported_not_raised(monkeypatch, capsys, project, home):
    monkeypatch.delenv("KIROLEARN_RAISE_ERRORS")

    def full(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    payload = json.dumps({"hook_event_name": "stop", "cwd": str(project), "session_id": "s"}).encode()
    assert hooks.handle([], payload) == 0
    assert "No space left on device" in capsys.readouterr().err
    assert os.listdir(home / "spool" / "tmp") == []


def test_session_file_fallback_renews_on_spawn(project, spooled):
    calls = iter(range(100))

    def call(name, **fields):
        # each call its own bytes: the same bytes within seconds are one call run twice (tests/test_wiring_scopes.py)
        body = {"hook_event_name": name, "cwd": str(project / "src"), "call": next(calls), **fields}
        hooks.handle([], json.dumps(body).encode())
        return spooled()[-1]

    first = call("agentSpawn")
    tool = call("postToolUse", tool_name="shell")
    again = call("agentSpawn")
    after = call("stop")
    assert first["session_source"] == tool["session_source"] == "session-file"
    assert first["session_id"] == tool["session_id"]
    assert again["session_id"] != first["session_id"]
    assert after["session_id"] == again["session_id"]


def test_disable_variable_records_nothing(spooled):
    result = run_hook([], b'{"hook_event_name":"stop","cwd":"/"}', env=hook_env(KIROLEARN_DISABLE="1"))
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert spooled() == []


def test_help_and_version(spooled):
    assert b"usage: kirolearn-hook [--agent kiro|claude-code] [EVENT]" in run_hook(["--help"]).stdout
    assert run_hook(["--version"]).stdout.startswith(b"kirolearn-hook ")
    assert spooled() == []


def test_log_rotates(home, monkeypatch):
    monkeypatch.setattr(hooks, "LOG_MAX_BYTES", 200)
    for i in range(20):
        hooks.log(f"line {i}")
    assert (home / "logs" / "hook.log.1").exists()
    assert (home / "logs" / "hook.log").stat().st_size < 400


def test_fallback_session_ends_after_a_long_pause(project, spooled, home):
    calls = iter(range(100))

    def call():
        body = {
            "hook_event_name": "postToolUse",
            "cwd": str(project),
            "tool_name": "shell",
            "call": next(calls),
        }
        hooks.handle([], json.dumps(body).encode())
        return spooled()[-1]["session_id"]

    first = call()
    assert call() == first
    (session_file,) = (home / "sessions").iterdir()
    os.utime(session_file, (0, time.time() - hooks.SESSION_IDLE_SECONDS - 60))
    assert call() != first


def test_the_hook_says_nothing_was_recorded_and_means_it(home, project, filled):
    prefix = read_only_ready(home)
    body = {"hook_event_name": "postToolUse", "cwd": str(project), "session_id": "ro", "tool_name": "shell"}
    result = subprocess.run(
        [*prefix, str(BIN / "kirolearn-hook")],
        input=json.dumps(body).encode(),
        env=hook_env(),
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 0
    message = result.stderr.decode()
    assert "cannot move the event into" in message and "nothing recorded" in message, message
    assert os.listdir(home / "spool" / "tmp") == []  # no tmp file a later drain would store
    writable_again(home)
    stats = json.loads(cli("drain", "--json").stdout)
    assert stats["events_read"] == 0 and stats["recovered_tmp"] == 0


def test_twin_session_start_hooks_without_a_session_id_inject_once(project, add_record):
    add_record(project, "Sorted the checkout discounts", "by priority", observation_type="decision")
    classic = json.dumps({"hook_event_name": "agentSpawn", "cwd": str(project)}).encode()
    v3 = json.dumps({"hook_event_name": "SessionStart", "cwd": str(project)}).encode()
    procs = [
        subprocess.Popen(
            [str(BIN / "kirolearn-hook")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=hook_env(),
        )
        for _ in (classic, v3)
    ]
    outs = [p.communicate(payload, timeout=30) for p, payload in zip(procs, (classic, v3))]
    printed = [out for out, _ in outs if out]
    assert [p.returncode for p in procs] == [0, 0] and len(printed) == 1
    assert b"Sorted the checkout discounts" in printed[0]
    # a third one right after (Kiro runs hooks one by one) is refused too
    assert run_hook(stdin=classic).stdout == b""


def test_two_real_sessions_with_their_own_ids_both_get_the_block(project, add_record):
    add_record(project, "Sorted the checkout discounts", "by priority", observation_type="decision")
    for sid in ("kiro-a", "kiro-b"):
        out = run_hook(
            stdin=json.dumps(
                {"hook_event_name": "SessionStart", "cwd": str(project), "session_id": sid}
            ).encode()
        )
        assert b"Sorted the checkout discounts" in out.stdout


def test_memory_the_hook_could_not_print_is_offered_again(project, add_record):
    """An agent that closed the hook's stdout got nothing: the next hook of the session prints it."""
    add_record(project, "Sorted the checkout discounts", "by priority", observation_type="decision")
    for trigger in (
        "UserPromptSubmit",
        "SessionStart",
    ):  # a prompt first: a fresh start is adopted by prompts
        body = json.dumps(
            {
                "hook_event_name": trigger,
                "cwd": str(project),
                "session_id": f"closed-{trigger}",
                "prompt": "why are the checkout discounts sorted by priority",
            }
        ).encode()
        closed = subprocess.run(
            ["sh", "-c", f'exec "{BIN / "kirolearn-hook"}" >&-'],
            input=body,
            env=hook_env(),
            capture_output=True,
            timeout=30,
        )
        assert closed.returncode == 0
        assert b"was not printed" in closed.stderr, closed.stderr
        again = run_hook(stdin=body)
        assert b"Sorted the checkout discounts" in again.stdout, trigger
        assert (
            b"Sorted the checkout discounts" not in run_hook(stdin=body).stdout
        )  # shown once it was printed
