"""Cursor's installer targets: <project>/.cursor/ or ~/.cursor/: hooks.json and mcp.json.

The hook-time half of this agent lives in kirolearn.capture.agents.cursor; this is the CLI's half.
"""

import os

from kirolearn.capture.agents.cursor import HOOKS, NAME
from kirolearn.core.mcp_tools import MCP_SERVER
from kirolearn.install.agents import common


def cursor_dir(project: "str | None") -> str:
    if project:
        return os.path.join(os.path.abspath(project), ".cursor")
    return common.user_path(".cursor")


def hook_command(portable: bool = False) -> str:
    """The command Cursor runs (through a shell); a missing binary is a no-op."""
    return common.hook_command(NAME, portable=portable)


def _is_ours(entry) -> bool:
    return common.is_our_command(entry, NAME)


def _hooks_unwired(data: dict) -> dict:
    if common.drop_our_hooks(data, _is_ours) and set(data) == {"version"}:
        del data["version"]  # what install added along with the hooks
    return data


def _hooks_problem(data: dict) -> "str | None":
    if data.get("version", 1) != 1:
        return f"hooks.json version {data.get('version')!r} is not the version 1 kirolearn writes"
    return common.hooks_problem(data)


_mcp_unwired = common.drop_our_server
_mcp_problem = common.servers_problem


def plan_install(project: "str | None", global_: bool = False, portable: bool = False, **options):
    """hooks.json and mcp.json in the project's .cursor/ (or ~/.cursor/); nothing is written."""
    from kirolearn.install import edit as install_edit
    from kirolearn.install import engine as install
    from kirolearn.install.edit import Item, Member

    folder = cursor_dir(project)
    hooks_path = os.path.join(folder, "hooks.json")
    additions: list = [
        Item(("hooks", event), {"command": hook_command(portable), "timeout": timeout})
        for event, timeout in HOOKS
    ]
    before = install.read_text(hooks_path)
    try:
        # our version key only when the file has none of its own
        has_version = "version" in _hooks_unwired(install.load_json(hooks_path, before))
    except install.InstallError:
        has_version = True  # install_edit.plan reports the problem
    if not has_version:
        additions.insert(0, Member((), "version", 1))
    hooks = install_edit.plan(
        hooks_path, additions, "cursor-hooks", unwired=_hooks_unwired, problem=_hooks_problem
    )
    mcp = install_edit.plan(
        os.path.join(folder, "mcp.json"),
        [Member(("mcpServers",), MCP_SERVER, common.mcp_server(NAME, portable))],
        "cursor-mcp",
        unwired=_mcp_unwired,
        problem=_mcp_problem,
    )
    return [hooks, mcp]


def plan_uninstall(only_project: "str | None" = None):
    """Undo each recorded Cursor install: the user's exact bytes while the files are as install left them."""
    from kirolearn.install import edit as install_edit
    from kirolearn.install import engine as install

    changes = []
    for entry in install.load_record():
        if entry.get("kind") not in ("cursor-hooks", "cursor-mcp"):
            continue
        if only_project and not entry["path"].startswith(cursor_dir(only_project) + os.sep):
            continue
        unwired = _hooks_unwired if entry["kind"] == "cursor-hooks" else _mcp_unwired
        change = install_edit.undo(entry, unwired=unwired)
        if change is not None:
            changes.append(change)
    return changes
