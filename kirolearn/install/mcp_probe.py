"""`doctor`'s MCP check: start each wired `kirolearn-mcp` command as its agent would and ask `initialize`.

A registered server that cannot start (its script's interpreter moved away: exit 127, or the exec
fails) reads as registered to a check that only parses the config file; this one runs it.
"""

import json
import os
import shlex
import shutil
import subprocess

from kirolearn.core.errors import InstallError
from kirolearn.install.engine import AGENT_NAME, read_text, strip_bom

PROBE_SECONDS = 10
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "kirolearn-doctor", "version": "1"},
    },
}


def servers(path: str) -> "list[tuple[str, list[str], dict]]":
    """(command, args, env) of kirolearn's MCP server in one config file (`mcpServers`, opencode's
    `mcp`, Codex's `mcp_servers`); [] when the file does not define it or does not parse."""
    try:
        text = read_text(path)
        if not text:
            return []
        if path.endswith(".toml"):
            try:
                import tomllib
            except ImportError:  # Python 3.10
                import tomli as tomllib
            data = tomllib.loads(text)
        else:
            data = json.loads(strip_bom(text))
    except (ValueError, InstallError, OSError):
        return []
    found = []
    for key in ("mcpServers", "mcp", "mcp_servers"):
        table = data.get(key) if isinstance(data, dict) else None
        entry = table.get(AGENT_NAME) if isinstance(table, dict) else None
        if not isinstance(entry, dict):
            continue
        command, args = entry.get("command"), entry.get("args") or []
        # opencode: the command and its arguments in one list
        if isinstance(command, list):
            command, args = (command[0] if command else ""), command[1:]
        env = entry.get("env") or entry.get("environment") or {}
        if isinstance(command, str) and command.endswith("kirolearn-mcp") and isinstance(args, list):
            found.append((command, [str(a) for a in args], {str(k): str(v) for k, v in env.items()}))
    return found


def _shebang(program: str) -> "str | None":
    try:
        with open(program, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        return None
    return first[2:].decode("utf-8", "replace").strip() if first.startswith(b"#!") else None


def resolve(command: str) -> "str | None":
    """The program a command names: a path as it is, a bare name through PATH (None if not found)."""
    return shutil.which(command) if os.sep not in command else command


def probe(command: str, args: "list[str]", env: dict) -> "str | None":
    """None when the server answers `initialize`, else what went wrong (naming the interpreter a script's
    first line names, when that is what is missing)."""
    program = resolve(command)
    if not program:
        return None  # not on this PATH: the wiring check names it
    shown = shlex.join([command, *args])
    interpreter = _shebang(program)
    missing = interpreter is not None and bool(interpreter) and not os.path.exists(interpreter.split()[0])
    try:
        done = subprocess.run(
            [program, *args],
            input=json.dumps(INITIALIZE) + "\n",
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=PROBE_SECONDS,
        )
    except subprocess.TimeoutExpired:
        return f"`{shown}` did not answer `initialize` within {PROBE_SECONDS} s"
    except OSError as exc:
        if missing:
            return (
                f"`{shown}` cannot start: its first line runs {interpreter}, which does not exist (exit 127)"
            )
        return f"`{shown}` cannot start ({type(exc).__name__}: {exc})"
    for line in done.stdout.splitlines():
        try:
            answer = json.loads(line)
        except ValueError:
            continue
        if isinstance(answer, dict) and answer.get("id") == 1 and isinstance(answer.get("result"), dict):
            return None
    last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
    if missing or done.returncode == 127:
        return f"`{shown}` exits {done.returncode}: its first line runs {interpreter}, which does not exist"
    return f"`{shown}` gave no answer to `initialize` (exit {done.returncode}: {last})"
