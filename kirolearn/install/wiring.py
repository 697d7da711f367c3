"""What install wired, as it stands now: each recorded file, its entries, and what they point at."""

import json
import os
import shutil

from kirolearn.core.errors import InstallError
from kirolearn.install import agents
from kirolearn.install.engine import (AGENT_NAME, agent_of, binaries, commands, load_record, read_text,
                                      strip_bom)


def wiring() -> "list[dict]":
    """Each recorded file: is it there with our entries, and do they point at existing binaries?

    A portable command (a bare name) counts as present when PATH finds it.
    """
    report = []
    for entry in load_record():
        parses = True
        try:
            text = read_text(entry["path"])
            data = (_toml(text) if entry["path"].endswith(".toml") else json.loads(strip_bom(text))) if text else None
        except (ValueError, InstallError):
            data, parses = None, not entry["path"].endswith(".json")  # a plugin file is not JSON
        words = [b for c in commands(data) for b in binaries(c)] if data is not None else []
        missing = {w for w in words if (not os.path.exists(w) if os.sep in w else shutil.which(w) is None)}
        present = bool(words)
        adapter = _adapter_of(entry)
        if adapter is not None and hasattr(adapter, "wired"):  # files without commands: the adapter knows
            present = adapter.wired(entry, data)
        report.append({"path": entry["path"], "agent": agent_of(entry), "present": present, "parses": parses,
                       "mcp": _registers_server(data),
                       "missing_binaries": sorted(missing)})
    return report


def _toml(text: str) -> dict:
    """A TOML file's data (Codex's config.toml); ValueError when it does not parse."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(text)  # TOMLDecodeError is a ValueError


def _registers_server(data) -> bool:
    """Does a config file define kirolearn's MCP server (`mcpServers`, or opencode's `mcp`)?"""
    if not isinstance(data, dict):
        return False
    for key in ("mcpServers", "mcp"):
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
