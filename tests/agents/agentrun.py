"""What every real-client test needs: an isolated environment, kirolearn's CLI, and the export.

The agents run with HOME in the test's temporary folder (the `home` fixture of
tests/conftest.py), telemetry and auto-update off, and every model URL on
127.0.0.1. `kirolearn` runs as a real process, as a user would run it.
"""

import json
import os
import pathlib
import shlex
import subprocess
import sys

BIN = pathlib.Path(sys.executable).parent
OFFLINE = {  # what no agent run may do: phone home, update itself, report telemetry
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DO_NOT_TRACK": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "NPM_CONFIG_UPDATE_NOTIFIER": "false",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
    # opencode installs its plugin SDK into every config folder in the background on each start (its
    # own doing, not kirolearn's); npm offline, with a registry on a closed loopback port, fails it at
    # once (measured: a start went from ~95 s, npm retrying, to ~15 s).
    "NPM_CONFIG_REGISTRY": "http://127.0.0.1:9/",
    "NPM_CONFIG_OFFLINE": "true",
    "NPM_CONFIG_FETCH_RETRIES": "0",
    "BUN_CONFIG_REGISTRY": "http://127.0.0.1:9/",
}
KEEP = (
    "PATH",
    "HOME",
    "KIROLEARN_HOME",
    "KIROLEARN_EMBEDDING_MODEL",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "USER",
    "LITELLM_LOCAL_MODEL_COST_MAP",
    "LITELLM_MODE",
)


def agent_env(**extra) -> dict:
    """The environment an agent runs in: ours only (no proxies, no keys, no RAISE_ERRORS)."""
    env = {k: os.environ[k] for k in KEEP if k in os.environ}
    env.update(OFFLINE)
    env.update(extra)
    return env


def kirolearn(*args, cwd=None, check=True) -> subprocess.CompletedProcess:
    """Run the `kirolearn` CLI of this venv."""
    result = subprocess.run(
        [str(BIN / "kirolearn"), *args],
        cwd=cwd,
        env=agent_env(),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"kirolearn {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    return result


def export(cwd=None) -> list:
    """`kirolearn drain` then `kirolearn export`: every stored object."""
    kirolearn("drain", cwd=cwd)
    out = kirolearn("export", cwd=cwd).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def events_of(objects: list, agent: str) -> list:
    return [o for o in objects if o.get("type") == "event" and o.get("agent") == agent]


def run_agent(argv, cwd, env, timeout=240) -> subprocess.CompletedProcess:
    """Run one agent session; a failure shows what the agent said."""
    result = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"{argv[0]} exited {result.returncode}:\nstdout: {result.stdout[-3000:]}\n"
            f"stderr: {result.stderr[-3000:]}"
        )
    return result


def snapshot(root) -> dict:
    """Every file under `root` (relative path -> bytes)."""
    root = pathlib.Path(root)
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def run_hook_command(command: str, payload: bytes, cwd) -> subprocess.CompletedProcess:
    """Run an installed hook command line the way the agents do (a POSIX shell, stdin JSON)."""
    return subprocess.run(
        ["/bin/sh", "-c", command], input=payload, cwd=cwd, env=agent_env(), capture_output=True, timeout=60
    )


def quarantined() -> list:
    qdir = pathlib.Path(os.environ["KIROLEARN_HOME"]) / "spool" / "quarantine"
    return sorted(p for p in qdir.iterdir() if not p.name.endswith(".reason")) if qdir.exists() else []


def tool_results(request: dict) -> list:
    """(tool_use_id, text) of every tool_result block in a Messages request."""
    found = []
    for message in request.get("messages", []):
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                text = inner if isinstance(inner, str) else json.dumps(inner, ensure_ascii=False)
                found.append((block.get("tool_use_id"), text))
    return found


def tool_uses(request: dict) -> list:
    """(id, name, input) of every tool_use block in a Messages request."""
    found = []
    for message in request.get("messages", []):
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                found.append((block.get("id"), block.get("name"), block.get("input")))
    return found


def quote(path) -> str:
    return shlex.quote(str(path))


def first_session(stats: dict, objects: list, agent: str, final: str) -> "tuple[list, list]":
    """An agent's first captured session, checked as every real client's must be: nothing quarantined,
    its session start first, a prompt, and its stop last holding the model's real final answer.
    Returns (its events, its postToolUse events)."""
    assert stats["quarantined"] == 0, stats
    events = events_of(objects, agent)
    triggers = [e["trigger"] for e in events]
    assert triggers[0] == "agentSpawn" and "userPromptSubmit" in triggers and triggers[-1] == "stop", triggers
    (stop,) = [e for e in events if e["trigger"] == "stop"]
    assert stop["assistant_response"] == final
    return events, [e for e in events if e["trigger"] == "postToolUse"]
