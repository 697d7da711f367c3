"""GitHub Copilot CLI's installer targets: <project>/.github/hooks/kirolearn.json and .github/mcp.json.

The hook-time half of this agent lives in kirolearn.capture.agents.copilot; this is the CLI's half.
"""

import os

from kirolearn.capture.agents.copilot import HOOKS, NAME
from kirolearn.install.agents import common

KINDS = ("copilot-hooks", "copilot-mcp")


def hooks_path(project: str) -> str:
    return os.path.join(os.path.abspath(project), ".github", "hooks", "kirolearn.json")


def mcp_path(project: "str | None") -> str:
    """The project's `.github/mcp.json`, or the user's `~/.copilot/mcp-config.json`."""
    if project:
        return os.path.join(os.path.abspath(project), ".github", "mcp.json")
    return common.user_path(".copilot", "mcp-config.json")


def hook_command(event: str, portable: bool = False) -> str:
    return common.hook_command(NAME, event, portable=portable)


def hook_file(portable: bool = False) -> str:
    import json

    hooks = {
        event: [{"type": "command", "bash": hook_command(event, portable), "timeoutSec": timeout}]
        for event, timeout in HOOKS
    }
    return json.dumps({"version": 1, "hooks": hooks}, indent=2) + "\n"


def mcp_entry(portable: bool = False) -> dict:
    from kirolearn.install import engine as install

    # tools: what Copilot offers; approving a call stays the user's.
    return {"type": "local", **install.mcp_entry(portable, NAME), "tools": ["*"]}


def _server_is_ours(value) -> bool:
    return isinstance(value, dict) and str(value.get("command", "")).endswith("kirolearn-mcp")


def _mcp_edits(portable: bool = False) -> list:
    from kirolearn.core import mcp_tools as agents
    from kirolearn.install.edit import Member

    return [Member(("mcpServers",), agents.MCP_SERVER, mcp_entry(portable))]


def plan_install(project: "str | None", global_: bool = False, portable: bool = False, **options):
    """Hooks (a project's `.github/hooks/kirolearn.json`, all ours) and the MCP server entry."""
    from kirolearn.install import edit as install_edit
    from kirolearn.install import engine as install

    if not project:
        raise install.InstallError(
            "Copilot CLI loads hooks from the repository (.github/hooks/)",
            "run `kirolearn install --agent copilot --project DIR`",
        )
    previous = {e["path"]: e for e in install.load_record() if e.get("kind") in KINDS}
    changes = [
        install_edit.owned(hooks_path(project), hook_file(portable), "copilot-hooks", mark=common.MARK),
        install_edit.plan(
            mcp_path(project),
            _mcp_edits(portable),
            "copilot-mcp",
            ours=_server_is_ours,
            previous=previous.get(mcp_path(project)),
        ),
    ]
    for change in changes:
        change.record.setdefault("agent", NAME)
    return changes


def plan_uninstall(only_project: "str | None" = None):
    from kirolearn.install import edit as install_edit
    from kirolearn.install import engine as install

    changes = []
    for entry in install.load_record():
        if entry.get("kind") not in KINDS or not install_edit.under(entry["path"], only_project):
            continue
        if entry["kind"] == "copilot-hooks":
            change = install_edit.undo_owned(entry, mark=common.MARK)
        else:
            change = install_edit.undo(entry, _mcp_edits(), ours=_server_is_ours)
        if change is not None:
            changes.append(change)
    return changes


def wired(entry: dict, data) -> bool:
    from kirolearn.core import mcp_tools as agents

    if not isinstance(data, dict):
        return False
    if entry.get("kind") == "copilot-mcp":
        return _server_is_ours((data.get("mcpServers") or {}).get(agents.MCP_SERVER))
    return any(
        common.MARK in str(h.get("bash", ""))
        for groups in (data.get("hooks") or {}).values()
        if isinstance(groups, list)
        for h in groups
        if isinstance(h, dict)
    )
