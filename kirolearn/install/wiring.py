"""What install wired, as it stands now: each recorded file, its entries, and what they point at."""

import json
import os
import shlex
import shutil
import subprocess

from kirolearn.core.errors import InstallError
from kirolearn.install import agents
from kirolearn.install.engine import (
    AGENT_NAME,
    MARK,
    PORTABLE_GUARD,
    agent_of,
    binaries,
    commands,
    load_record,
    read_text,
    strip_bom,
)

PROBE_SECONDS = 20


def hook_program(command: str) -> "tuple[dict, list[str]]":
    """(environment assignments, the words up to and including the hook's own word) of a wired hook
    command such as `KIROLEARN_HOME=/h /venv/bin/python /pkg/launcher/kirolearn-hook --agent codex || true`."""
    # `--portable`: kirolearn-hook from PATH, guarded
    if command.startswith(PORTABLE_GUARD):
        return {}, [MARK]
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    env = {}
    while (
        words
        and "=" in words[0]
        and not words[0].startswith(("=", "/"))
        and words[0].split("=", 1)[0].replace("_", "").isalnum()
    ):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    upto = next((i for i, w in enumerate(words) if os.path.basename(w) == MARK), None)
    return env, (words[: upto + 1] if upto is not None else [])


def _resolves(word: str) -> bool:
    return os.path.exists(word) if os.sep in word else shutil.which(word) is not None


def probe(env: dict, program: "list[str]") -> "str | None":
    """Run a wired hook program as its agent would, with `--version` for the event: None when it answers
    as kirolearn-hook does, else what went wrong (the hook itself always exits 0 and says nothing)."""
    try:
        done = subprocess.run(
            program + ["--version"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=PROBE_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"`{shlex.join(program)}` does not run ({type(exc).__name__}: {exc})"
    if done.returncode != 0 or MARK not in done.stdout:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return f"`{shlex.join(program)} --version` exits {done.returncode}: {last}"
    return None


def wiring(run: bool = False) -> "list[dict]":
    """Each recorded file: is it there with our entries, and do they point at existing binaries?

    A portable command (a bare name) counts as present when PATH finds it. Each hook command's
    program (its interpreter, or the console script) must exist too: `missing_programs`. With `run`
    (doctor), each distinct hook program is also run once with `--version`: `broken_programs`.
    """
    probed: dict[tuple, str | None] = {}
    report = []
    for entry in load_record():
        parses = True
        try:
            text = read_text(entry["path"])
            data = (
                (parse_toml(text) if entry["path"].endswith(".toml") else json.loads(strip_bom(text)))
                if text
                else None
            )
        except (ValueError, InstallError):
            # a plugin file is not JSON
            data, parses = None, not entry["path"].endswith(".json")
        words = [b for c in commands(data) for b in binaries(c)] if data is not None else []
        missing = {w for w in words if not _resolves(w)}
        programs, broken = set(), []
        for command in commands(data) if data is not None else ():
            env, program = hook_program(command)
            if not program:
                continue
            if not _resolves(program[0]):
                programs.add(program[0])
            elif run and not any(w in missing for w in program):
                key = (tuple(sorted(env.items())), tuple(program))
                if key not in probed:
                    probed[key] = probe(env, program)
                if probed[key] and probed[key] not in broken:
                    broken.append(probed[key])
        present = bool(words)
        adapter = _adapter_of(entry)
        # files without commands: the adapter knows
        if adapter is not None and hasattr(adapter, "wired"):
            present = adapter.wired(entry, data)
        report.append(
            {
                "path": entry["path"],
                "agent": agent_of(entry),
                "present": present,
                "parses": parses,
                "mcp": _registers_server(data),
                "missing_binaries": sorted(missing),
                "missing_programs": sorted(programs - missing),
                "broken_programs": broken,
            }
        )
    return report


def parse_toml(text: str) -> dict:
    """A TOML file's data (Codex's config.toml); ValueError when it does not parse."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(text)  # TOMLDecodeError is a ValueError


def _registers_server(data) -> bool:
    """Does a config file define kirolearn's MCP server (`mcpServers`, opencode's `mcp`, Codex's `mcp_servers`)?"""
    if not isinstance(data, dict):
        return False
    # mcp_servers: Codex's config.toml
    for key in ("mcpServers", "mcp", "mcp_servers"):
        servers = data.get(key)
        entry = servers.get(AGENT_NAME) if isinstance(servers, dict) else None
        command = entry.get("command") if isinstance(entry, dict) else None
        if isinstance(command, list):
            command = command[0] if command else ""
        if isinstance(command, str) and command.endswith("kirolearn-mcp"):
            return True
    return False


def _adapter_of(entry: dict):
    try:
        return agents.get(agent_of(entry))
    except agents.UnknownAgent:
        return None
