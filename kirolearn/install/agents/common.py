"""What several agents' installers share: the hook command, and the JSON shapes of their config files."""

import os

from kirolearn.capture.agents.common import MARK
from kirolearn.core.mcp_tools import MCP_SERVER


def hook_command(agent: str, *args: str, portable: bool = False) -> str:
    """The hook command an agent runs through a shell, `--agent agent` and `args` after it; a missing binary
    is a no-op (portable: `kirolearn-hook` from PATH, and a line on stderr and in the log when PATH lacks it)."""
    import shlex

    from kirolearn.install import engine as install

    tail = "".join(f" {a}" for a in args)
    if portable:
        return install.portable_hook_command(f"--agent {agent}{tail}")
    return f"{install.env_prefix()}{' '.join(shlex.quote(a) for a in install.hook_argv())} --agent {agent}{tail} || true"


def is_our_command(entry, agent: str) -> bool:
    """Is `entry` (a {"command": ...} hook object) one that kirolearn installed for `agent`?"""
    return (
        isinstance(entry, dict)
        and MARK in str(entry.get("command", ""))
        and f"--agent {agent}" in str(entry.get("command", ""))
    )


def is_our_group(group, agent: str) -> bool:
    """Is `group` (Claude Code's shape: {"matcher": ..., "hooks": [...]}) one with a hook of ours for `agent`?"""
    return isinstance(group, dict) and any(is_our_command(h, agent) for h in group.get("hooks", []) or [])


def drop_our_hooks(data: dict, ours) -> bool:
    """Take the entries `ours` owns out of each list of `data["hooks"]`, in place.

    A list only we emptied goes too, and `hooks` itself when it is left empty
    that way; returns whether it did go.
    """
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return False
    emptied = False
    for event in list(hooks):
        if isinstance(hooks[event], list) and any(ours(g) for g in hooks[event]):
            hooks[event] = [g for g in hooks[event] if not ours(g)]
            if not hooks[event]:
                del hooks[event]
                emptied = True
    if emptied and not hooks:
        del data["hooks"]
        return True
    return False


def hooks_problem(data: dict) -> "str | None":
    """Why `data["hooks"]` cannot take our hooks (it must be an object of lists), or None."""
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values()):
        return "'hooks' is not an object of lists"
    return None


def is_our_server(entry) -> bool:
    """Is an `mcpServers` entry kirolearn's own (its command is kirolearn-mcp)?"""
    return isinstance(entry, dict) and os.path.basename(str(entry.get("command", ""))).startswith(
        "kirolearn-mcp"
    )


def mcp_server(agent: str, portable: bool = False) -> dict:
    """Our stdio server in the plain `mcpServers` shape: command, args, and env (KIROLEARN_AGENT=agent)."""
    from kirolearn.install import engine as install

    entry = install.mcp_entry(portable, agent)
    server = {"command": entry["command"], "args": entry["args"]}
    if entry["env"]:
        server["env"] = entry["env"]
    return server


def drop_our_server(data: dict) -> dict:
    """`data` without our `mcpServers` entry (the object goes too if that left it empty), in place."""
    servers = data.get("mcpServers")
    if isinstance(servers, dict) and is_our_server(servers.get(MCP_SERVER)):
        del servers[MCP_SERVER]
        if not servers:
            del data["mcpServers"]
    return data


def servers_problem(data: dict) -> "str | None":
    """Why `data["mcpServers"]` cannot take our server, or None."""
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        return "'mcpServers' is not an object"
    if MCP_SERVER in servers and not is_our_server(servers[MCP_SERVER]):
        return f"it already has an MCP server named {MCP_SERVER!r} that is not kirolearn-mcp"
    return None


def user_path(*parts: str) -> str:
    """A path under the user's home folder (kirolearn's idea of it, which tests can move)."""
    from kirolearn.core import paths

    return os.path.join(paths.user_home_dir() or os.path.expanduser("~"), *parts)
