"""Many hook processes at once lose nothing and corrupt nothing."""

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import hook_env, run_hook

from kirolearn.pipeline.schema import Event

pytestmark = pytest.mark.slow  # thousands of hook calls from many processes: `make test-slow`

WORKER = r"""
import json, sys
from kirolearn import hook as hooks
worker, calls, cwd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for i in range(calls):
    body = {"hook_event_name": "postToolUse", "cwd": cwd, "session_id": f"w{worker}",
            "tool_name": "execute_bash", "tool_input": {"command": f"echo {worker}-{i}"},
            "tool_response": {"success": True, "result": ["x" * 1500]}}
    hooks.handle([], json.dumps(body).encode())
"""


def test_16_processes_x_200_calls(home, project):
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(w), "200", str(project)], env=hook_env())
        for w in range(16)
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0
    ready = sorted((home / "spool" / "ready").iterdir())
    assert len(ready) == 3200
    ids, commands = set(), set()
    for path in ready:
        event = json.loads(path.read_bytes())
        Event.model_validate(event)
        assert path.name == event["event_id"] + ".json"
        ids.add(event["event_id"])
        commands.add(event["tool_input"]["command"])
    assert len(ids) == 3200
    assert commands == {f"echo {w}-{i}" for w in range(16) for i in range(200)}
    assert list((home / "spool" / "tmp").iterdir()) == []
    assert not (home / "logs").exists()  # no errors logged


def test_real_console_scripts_in_parallel(home, project):
    def one(i):
        body = {
            "hook_event_name": "PostToolUse",
            "cwd": str(project),
            "tool_name": "shell",
            "tool_input": {"command": f"run {i}"},
            "tool_response": "ok",
        }
        return run_hook([], json.dumps(body).encode())

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(one, range(48)))
    assert all(r.returncode == 0 and r.stdout == b"" and r.stderr == b"" for r in results)
    assert len(list((home / "spool" / "ready").iterdir())) == 48
