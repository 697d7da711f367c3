"""Gemini CLI's installer targets: ~/.gemini/settings.json or <project>/.gemini/settings.json.

The hook-time half of this agent lives in kirolearn.capture.agents.gemini; this is the CLI's half.
"""

import os

from kirolearn.capture.agents.common import APPROVED_TOOLS
from kirolearn.capture.agents.gemini import HOOKS, NAME
from kirolearn.core.mcp_tools import MCP_SERVER
from kirolearn.install.agents import common


def settings_path(project: "str | None") -> str:
    if project:
        return os.path.join(os.path.abspath(project), ".gemini", "settings.json")
    return common.user_path(".gemini", "settings.json")


def hook_command(portable: bool = False) -> str:
    """The command Gemini CLI runs (through a shell); a missing binary is a no-op."""
    return common.hook_command(NAME, portable=portable)


def tool_name(tool: str) -> str:
    """The name Gemini CLI gives an MCP tool of ours (and matches in `tools.allowed`)."""
    return f"mcp_{MCP_SERVER}_{tool}"


def _is_ours(group) -> bool:
    return common.is_our_group(group, NAME)


def _unwired(data: dict) -> dict:
    """`data` without our hooks, our MCP server and our allowed tools (containers only we emptied go too)."""
    common.drop_our_hooks(data, _is_ours)
    common.drop_our_server(data)
    tools = data.get("tools")
    ours = {tool_name(t) for t in APPROVED_TOOLS}
    if (
        isinstance(tools, dict)
        and isinstance(tools.get("allowed"), list)
        and ours & set(map(str, tools["allowed"]))
    ):
        tools["allowed"] = [t for t in tools["allowed"] if t not in ours]
        if not tools["allowed"]:
            del tools["allowed"]
            if not tools:
                del data["tools"]
    return data


def _problem(data: dict) -> "str | None":
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values() if v is not None):
        return "'hooks' is not an object of lists"
    problem = common.servers_problem(data)
    if problem:
        return problem
    tools = data.get("tools", {})
    if not isinstance(tools, dict) or not isinstance(tools.get("allowed", []), list):
        return "'tools.allowed' is not a list"
    return None


def _additions(portable: bool = False) -> list:
    from kirolearn.install.edit import Item, Member

    additions: list = [
        Item(
            ("hooks", event),
            {
                "matcher": "",
                "hooks": [
                    {
                        "name": f"kirolearn-{event}",
                        "type": "command",
                        "command": hook_command(portable),
                        "timeout": timeout,
                    }
                ],
            },
        )
        for event, timeout in HOOKS
    ]
    additions.append(Member(("mcpServers",), MCP_SERVER, common.mcp_server(NAME, portable)))
    # Unlisted tools ask, and `gemini -p` offers none that asks.
    additions += [Item(("tools", "allowed"), tool_name(t)) for t in APPROVED_TOOLS]
    return additions


def plan_install(project: "str | None", global_: bool = False, portable: bool = False, **options):
    """The one settings.json install would write (hooks, the MCP server, its read-only tools allowed)."""
    from kirolearn.install import edit as install_edit

    # One scope per run: if user and project hooks merge, each would fire twice.
    path = settings_path(project)
    return [
        install_edit.plan(path, _additions(portable), "gemini-settings", unwired=_unwired, problem=_problem)
    ]


def plan_uninstall(only_project: "str | None" = None):
    """Undo each recorded Gemini CLI install: the user's exact bytes while the file is as install left it."""
    from kirolearn.install import edit as install_edit
    from kirolearn.install import engine as install

    changes = []
    for entry in install.load_record():
        if entry.get("kind") != "gemini-settings":
            continue
        if only_project and not entry["path"].startswith(
            os.path.join(os.path.abspath(only_project), ".gemini") + os.sep
        ):
            continue
        change = install_edit.undo(entry, unwired=_unwired)
        if change is not None:
            changes.append(change)
    return changes
