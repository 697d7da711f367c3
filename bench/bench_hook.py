"""Hook latency benchmark: whole-process wall time of `kirolearn-hook` vs bare Python.

Both commands run from the same virtual environment, the same way (a 2 KB
postToolUse payload piped on stdin), alternating, and the figure that matters
is the ratio of medians (design.md, "Benchmark conventions"). Then each other
agent's own post-tool payload through the command its install writes (Claude Code,
Copilot, opencode, Codex, Gemini CLI, Cursor), in the same alternation. Prints a
table; never fails.

    python bench/bench_hook.py [--venv DIR] [--runs N] [--figures docs/figures.json]
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from benchtable import compile_package, installed_hook, pct, print_table
from figures import merge

HERE = os.path.dirname(os.path.abspath(__file__))


def payload_2kb(cwd: str) -> bytes:
    """A realistic postToolUse payload of about 2 KB."""
    stdout = "".join(f"tests/test_module_{i}.py::test_case_{i} PASSED\n" for i in range(36))
    body = {
        "hook_event_name": "postToolUse",
        "cwd": cwd,
        "session_id": "c186a259-e55f-4572-abc7-bd3697cfcfb1",
        "tool_name": "execute_bash",
        "tool_input": {"command": "python -m pytest -q tests/", "summary": "run the test suite"},
        "tool_response": {"success": True, "result": [{"exit_status": "0", "stdout": stdout, "stderr": ""}]},
    }
    data = json.dumps(body).encode()
    return data


def agent_payloads(cwd: str) -> dict:
    """{agent: (the EVENT arguments its installed postToolUse command passes, its own payload)}."""
    kiro = json.loads(payload_2kb(cwd))
    stdout = kiro["tool_response"]["result"][0]["stdout"]
    command = {"command": "python -m pytest -q tests/", "description": "run the test suite"}
    return {
        "claude-code": (
            ["--agent", "claude-code"],
            {
                "session_id": kiro["session_id"],
                "transcript_path": os.path.join(cwd, "t.jsonl"),
                "cwd": cwd,
                "permission_mode": "default",
                "hook_event_name": "PostToolUse",
                "tool_name": "Bash",
                "tool_input": command,
                "tool_use_id": "toolu_01",
                "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False},
            },
        ),
        "copilot": (
            ["--agent", "copilot", "postToolUse"],
            {
                "sessionId": kiro["session_id"],
                "timestamp": 1796110435788,
                "cwd": cwd,
                "toolName": "bash",
                "toolArgs": command,
                "toolResult": {"resultType": "success", "textResultForLlm": stdout},
            },
        ),
        "opencode": (
            ["--agent", "opencode", "tool.execute.after"],
            {
                "hook_event_name": "tool.execute.after",
                "session_id": "ses_dcf18edfbffexElq9LI0WUKbjy",
                "cwd": cwd,
                "tool_name": "bash",
                "tool_input": command,
                "tool_response": {
                    "title": command["command"],
                    "output": stdout,
                    "metadata": {"output": stdout, "exit": 0, "truncated": False},
                },
            },
        ),
        # Codex, Gemini CLI and Cursor name the event in the payload: install writes `--agent NAME` only
        "codex": (
            ["--agent", "codex"],
            {
                "session_id": kiro["session_id"],
                "turn_id": "019ad5f2-7c1e-7d30-9a41-3be1f4c2d8a0",
                "transcript_path": os.path.join(cwd, "rollout.jsonl"),
                "cwd": cwd,
                "hook_event_name": "PostToolUse",
                "model": "gpt-5-codex",
                "permission_mode": "default",
                "tool_name": "Bash",
                "tool_input": {"command": command["command"]},
                "tool_response": stdout,
                "tool_use_id": "call_01",
            },
        ),
        "gemini": (
            ["--agent", "gemini"],
            {
                "session_id": kiro["session_id"],
                "transcript_path": os.path.join(cwd, "chat.jsonl"),
                "cwd": cwd,
                "hook_event_name": "AfterTool",
                "timestamp": "2026-12-01T09:00:00.000Z",
                "tool_name": "run_shell_command",
                "tool_input": command,
                "tool_response": {"llmContent": f"Output: {stdout}\nExit Code: 0", "returnDisplay": stdout},
            },
        ),
        "cursor": (
            ["--agent", "cursor"],
            {  # its shell hook: install wires afterShellExecution, not postToolUse
                "conversation_id": kiro["session_id"],
                "generation_id": "5f0c3a52-9d7e-4b8a-a1f6-2c9e8d7b4a10",
                "model": "claude-4.5-sonnet",
                "hook_event_name": "afterShellExecution",
                "cursor_version": "2.4.21",
                "workspace_roots": [cwd],
                "user_email": "dev@example.com",
                "cwd": cwd,
                "command": command["command"],
                "output": stdout,
                "duration": 812,
            },
        ),
    }


CPU = {}  # command's first words -> CPU ms (user + system) of each run, beside its wall time


def unique(body: bytes, run: int, which: int) -> bytes:
    """`body` made one call's own: the hook keeps one event for the same bytes repeated within seconds
    (an agent wired twice), and every real call differs (a tool call id, its output, a time)."""
    return body[:-1] + f', "bench_call": "{run}-{which}"}}'.encode()


def time_run(cmd, stdin: bytes, env) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        cmd, input=stdin, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    CPU.setdefault(tuple(cmd), []).append(cpu)
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=os.path.join(os.path.dirname(HERE), ".venv"))
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument(
        "--figures", help="merge the quoted figures into this file (make bench: docs/figures.json)"
    )
    args = parser.parse_args()
    compile_package(args.venv)
    python = os.path.join(args.venv, "bin", "python")
    hook = installed_hook(args.venv) + ["post-tool"]  # what `kirolearn install` writes for postToolUse
    script = os.path.join(args.venv, "bin", "kirolearn-hook")  # pip's console script (--portable installs)
    with tempfile.TemporaryDirectory() as tmp:
        project = os.path.join(tmp, "project")
        os.makedirs(os.path.join(project, ".git"))
        env = dict(os.environ, KIROLEARN_HOME=os.path.join(tmp, "home"))
        stdin = payload_2kb(project)
        bare, hooked, wrapper = [], [], []
        agents = {
            name: (hook[:-1] + argv, json.dumps(body).encode(), [])
            for name, (argv, body) in agent_payloads(project).items()
        }
        for run in range(3):  # warm the page cache
            time_run([python, "-c", "pass"], stdin, env)
            time_run(hook, unique(stdin, -1 - run, 0), env)
        for run in range(args.runs):
            bare.append(time_run([python, "-c", "pass"], stdin, env))
            hooked.append(time_run(hook, unique(stdin, run, 1), env))
            # pip's generated console-script wrapper imports `re` before our code runs
            wrapper.append(time_run([script, "post-tool"], unique(stdin, run, 2), env))
            for cmd, body, times in agents.values():  # each agent's postToolUse, in the same alternation
                times.append(time_run(cmd, unique(body, run, 3), env))
        spooled = len(os.listdir(os.path.join(tmp, "home", "spool", "ready")))
        quarantined = os.path.join(tmp, "home", "spool", "quarantine")
        rejected = len(os.listdir(quarantined)) if os.path.isdir(quarantined) else 0
    med_bare, med_hook = statistics.median(bare), statistics.median(hooked)
    cpu_bare = statistics.median(CPU[(python, "-c", "pass")][3:])  # after the warm-up runs
    cpu_hook = statistics.median(CPU[tuple(hook)][3:])
    rows = [
        ("payload size (bytes)", f"{len(stdin)}", "~2 KB"),
        ("venv `python -c pass` median (ms)", f"{med_bare:.1f}", ""),
        ("installed hook command postToolUse median (ms)", f"{med_hook:.1f}", ""),
        ("installed hook command p90 (ms)", f"{pct(hooked, 0.9):.1f}", ""),
        (
            "pip's `kirolearn-hook` console script (--portable) median (ms)",
            f"{statistics.median(wrapper):.1f}",
            "",
        ),
        ("hook / bare python ratio (medians)", f"{med_hook / med_bare:.2f}", "<= 2.0"),
        (
            # CPU time: what a loaded machine cannot inflate for one side only, as it does wall time
            f"hook / bare python ratio, CPU time (medians; {cpu_hook:.1f} / {cpu_bare:.1f} ms)",
            f"{cpu_hook / cpu_bare:.2f}",
            "<= 2.0",
        ),
        *(
            (
                f"{name} postToolUse hook / bare python ratio (medians; {statistics.median(times):.1f} ms)",
                f"{statistics.median(times) / med_bare:.2f}",
                "<= 2.0",
            )
            for name, (_, _, times) in agents.items()
        ),
        ("events spooled", f"{spooled}", f"{(2 + len(agents)) * args.runs + 3}"),
        ("payloads quarantined (an agent's payload the hook could not read)", f"{rejected}", "0"),
        ("Node-based Kiro memory hook, for scale (ms)", "~215", "reference/libraries"),
    ]
    print_table(
        f"hook latency, {args.runs} alternating runs each, venv {args.venv}\nhook command: {' '.join(hook)}",
        rows,
    )
    if args.figures:
        values = {"runs": args.runs, "bare_ms": med_bare, "hook_ms": med_hook, "ratio": med_hook / med_bare}
        values.update(cpu_bare_ms=cpu_bare, cpu_hook_ms=cpu_hook, cpu_ratio=cpu_hook / cpu_bare)
        merge(args.figures, "hook", {k: round(v, 3) for k, v in values.items()}, args.venv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
