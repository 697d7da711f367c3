"""Auggie's installer targets: ~/.augment/settings.json or <project>/.augment/settings.json, and for a
project the memory rule its hooks refresh (<project>/.augment/rules/kirolearn-memory.md).

The hook-time half of this agent lives in kirolearn.capture.agents.auggie; this is the CLI's half.
"""

import os

from kirolearn.capture.agents.auggie import HOOKS, NAME, RULES_FILE, RULES_HEADER, RULES_LIST, rules_path
from kirolearn.core.mcp_tools import MCP_DESTRUCTIVE_TOOLS, MCP_SERVER
from kirolearn.install.agents import common

KIND = "auggie-settings"
RULES_KIND = "auggie-rules"
PLACEHOLDER = "kirolearn writes this project's memory here at each Auggie session start.\n"


def settings_path(project: "str | None") -> str:
    if project:
        return os.path.join(os.path.abspath(project), ".augment", "settings.json")
    return common.user_path(".augment", "settings.json")


def hook_command(portable: bool = False) -> str:
    """The command Auggie runs (through a shell); a missing binary is a no-op."""
    return common.hook_command(NAME, portable=portable)


def tool_name(tool: str) -> str:
    """The name Auggie gives an MCP tool of ours (the one its toolPermissions match)."""
    return f"{tool}_{MCP_SERVER}"


def _permissions() -> list:
    """Auggie runs every tool without asking unless a rule says otherwise: forget_memory always asks."""
    return [{"toolName": tool_name(t), "permission": {"type": "ask-user"}} for t in MCP_DESTRUCTIVE_TOOLS]


def _is_ours(group) -> bool:
    return common.is_our_group(group, NAME)


def _unwired(data: dict) -> dict:
    """`data` without our hooks, our MCP server and our permission rules (containers only we emptied go too)."""
    common.drop_our_hooks(data, _is_ours)
    common.drop_our_server(data)
    rules = data.get("toolPermissions")
    ours = _permissions()
    if isinstance(rules, list) and any(r in rules for r in ours):
        data["toolPermissions"] = [r for r in rules if r not in ours]
        if not data["toolPermissions"]:
            del data["toolPermissions"]
    return data


def _problem(data: dict) -> "str | None":
    problem = common.hooks_problem(data) or common.servers_problem(data)
    if problem:
        return problem
    if not isinstance(data.get("toolPermissions", []), list):
        return "'toolPermissions' is not a list"
    return None


def mcp_server(portable: bool = False) -> dict:
    return common.mcp_server(NAME, portable)


def _additions(portable: bool = False) -> list:
    from kirolearn.install.edit import Item, Member

    additions: list = [
        Item(
            ("hooks", event),
            {
                "matcher": ".*",
                "hooks": [{"type": "command", "command": hook_command(portable), "timeout": timeout}],
            },
        )
        for event, timeout in HOOKS
    ]
    additions.append(Member(("mcpServers",), MCP_SERVER, mcp_server(portable)))
    additions += [Item(("toolPermissions",), rule) for rule in _permissions()]
    return additions


def plan_install(project: "str | None", global_: bool = False, portable: bool = False, **options):
    """The settings.json install would write (hooks, the MCP server, forget_memory asking); for a project,
    also the memory rule the SessionStart hook refreshes (Auggie drops what its hooks print)."""
    from kirolearn.install import edit as install_edit

    # One scope per run: if user and project hooks merge, each would fire twice.
    changes = [
        install_edit.plan(
            settings_path(project), _additions(portable), KIND, unwired=_unwired, problem=_problem
        )
    ]
    if project and not portable:  # files to commit hold no memory: each clone's hook writes its own
        rule = install_edit.owned(
            rules_path(os.path.abspath(project)), RULES_HEADER + PLACEHOLDER, RULES_KIND
        )
        changes.append(rule)
    for one in changes:
        one.record.setdefault("agent", NAME)
    return changes


def _hook_written(only_project: "str | None") -> list:
    """The rules files the hook created in workspaces (a user-scope install), still ours, as record entries."""
    from kirolearn.core import paths

    try:
        with open(os.path.join(paths.home(), RULES_LIST), encoding="utf-8") as fh:
            listed = [line.strip() for line in fh if line.strip()]
    except OSError:
        return []
    tail = os.path.join(*RULES_FILE)
    entries = []
    for path in dict.fromkeys(listed):
        if not path.endswith(os.sep + tail) or not os.path.exists(path):
            continue
        if only_project and not path.startswith(os.path.abspath(only_project) + os.sep):
            continue
        # the user's wiring made it, though it lies in a project: a user-scope uninstall takes it
        entries.append({"path": path, "kind": RULES_KIND, "agent": NAME, "project": ""})
    return entries


def plan_uninstall(only_project: "str | None" = None):
    """Undo each recorded Auggie install: the user's exact bytes while the file is as install left it."""
    from kirolearn.install import edit as install_edit
    from kirolearn.install import engine as install

    changes = []
    recorded = install.load_record()
    for entry in recorded:
        if only_project and not entry["path"].startswith(
            os.path.join(os.path.abspath(only_project), ".augment") + os.sep
        ):
            continue
        if entry.get("kind") == KIND:
            change = install_edit.undo(entry, unwired=_unwired)
        elif entry.get("kind") == RULES_KIND:
            change = install_edit.undo_owned(entry)
        else:
            continue
        if change is not None:
            changes.append(change)
    known = {c.path for c in changes} | {e["path"] for e in recorded}
    for entry in _hook_written(only_project):
        if entry["path"] not in known:
            change = install_edit.undo_owned(entry)
            if change is not None:
                changes.append(change)
    return changes


def wired(entry: dict, data) -> bool:
    """Does a recorded file still hold what install put there (the rule file is ours whole)?"""
    if entry.get("kind") == RULES_KIND:
        return True
    if not isinstance(data, dict):
        return False
    return any(
        _is_ours(g)
        for groups in (data.get("hooks") or {}).values()
        if isinstance(groups, list)
        for g in groups
    )
