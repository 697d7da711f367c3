"""Factory Droid's installer targets: ~/.factory/ or <project>/.factory/: settings.json (hooks) and mcp.json.

The hook-time half of this agent lives in kirolearn.capture.agents.factory_droid; this is the CLI's half.
"""

import os

from kirolearn.capture.agents.factory_droid import HOOKS, NAME
from kirolearn.core.mcp_tools import MCP_SERVER
from kirolearn.install.agents import common

KIND = "factory-droid-settings"
MCP_KIND = "factory-droid-mcp"


def factory_dir(project: "str | None") -> str:
    if project:
        return os.path.join(os.path.abspath(project), ".factory")
    return common.user_path(".factory")


def hook_command(portable: bool = False) -> str:
    """The command Droid runs (through a shell); a missing binary is a no-op."""
    return common.hook_command(NAME, portable=portable)


def tool_name(tool: str) -> str:
    """The name Droid gives an MCP tool of ours (`<server>___<tool>`)."""
    return f"{MCP_SERVER}___{tool}"


def _is_ours(group) -> bool:
    return common.is_our_group(group, NAME)


def _settings_unwired(data: dict) -> dict:
    common.drop_our_hooks(data, _is_ours)
    return data


def _mcp_unwired(data: dict) -> dict:
    return common.drop_our_server(data)


_mcp_problem = common.servers_problem


def mcp_server(portable: bool = False) -> dict:
    """Our server as Droid's mcp.json has it (a stdio server)."""
    return {"type": "stdio", **common.mcp_server(NAME, portable)}


def plan_install(project: "str | None", global_: bool = False, portable: bool = False, **options):
    """settings.json (hooks) and mcp.json (the MCP server) in the project's .factory/ (or ~/.factory/)."""
    from kirolearn.install import edit as install_edit
    from kirolearn.install.edit import Item, Member

    # One scope per run: Droid merges user and project hooks, so each would fire twice.
    folder = factory_dir(project)
    additions = [
        Item(
            ("hooks", event),
            {"hooks": [{"type": "command", "command": hook_command(portable), "timeout": timeout}]},
        )
        for event, timeout in HOOKS
    ]
    settings = install_edit.plan(
        os.path.join(folder, "settings.json"),
        additions,
        KIND,
        unwired=_settings_unwired,
        problem=common.hooks_problem,
    )
    mcp = install_edit.plan(
        os.path.join(folder, "mcp.json"),
        [Member(("mcpServers",), MCP_SERVER, mcp_server(portable))],
        MCP_KIND,
        unwired=_mcp_unwired,
        problem=_mcp_problem,
    )
    changes = [settings, mcp]
    for one in changes:
        one.record.setdefault("agent", NAME)
    return changes


def plan_uninstall(only_project: "str | None" = None):
    """Undo each recorded Droid install: the user's exact bytes while the files are as install left them."""
    from kirolearn.install import edit as install_edit
    from kirolearn.install import engine as install

    changes = []
    for entry in install.load_record():
        if entry.get("kind") not in (KIND, MCP_KIND):
            continue
        if only_project and not entry["path"].startswith(factory_dir(only_project) + os.sep):
            continue
        unwired = _settings_unwired if entry["kind"] == KIND else _mcp_unwired
        change = install_edit.undo(entry, unwired=unwired)
        if change is not None:
            changes.append(change)
    return changes


def wired(entry: dict, data) -> bool:
    """Does a recorded file still hold what install put there (mcp.json holds no command)?"""
    if not isinstance(data, dict):
        return False
    if entry.get("kind") == MCP_KIND:
        return common.is_our_server((data.get("mcpServers") or {}).get(MCP_SERVER))
    return any(
        _is_ours(g)
        for groups in (data.get("hooks") or {}).values()
        if isinstance(groups, list)
        for g in groups
    )
