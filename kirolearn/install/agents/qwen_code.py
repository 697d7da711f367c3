"""Qwen Code's installer targets: ~/.qwen/settings.json or <project>/.qwen/settings.json.

The hook-time half of this agent lives in kirolearn.capture.agents.qwen_code; this is the CLI's half.
"""

import os

from kirolearn.capture.agents.common import APPROVED_TOOLS
from kirolearn.capture.agents.qwen_code import HOOKS, NAME
from kirolearn.core.mcp_tools import MCP_SERVER
from kirolearn.install.agents import common

KIND = "qwen-settings"
APPROVALS_KIND = "qwen-approvals"
SETTINGS_VERSION = 4  # the settings schema Qwen Code 0.24.4 writes


def settings_path(project: "str | None") -> str:
    if project:
        return os.path.join(os.path.abspath(project), ".qwen", "settings.json")
    return common.user_path(".qwen", "settings.json")


def hook_command(portable: bool = False) -> str:
    """The command Qwen Code runs (through a shell); a missing binary is a no-op."""
    return common.hook_command(NAME, portable=portable)


def tool_name(tool: str) -> str:
    """The name Qwen Code gives an MCP tool of ours (and matches in `permissions.allow`)."""
    return f"mcp__{MCP_SERVER}__{tool}"


def _is_ours(group) -> bool:
    return common.is_our_group(group, NAME)


def _unwired(data: dict) -> dict:
    """`data` without our hooks, our MCP server and our allowed tools (containers only we emptied go too)."""
    common.drop_our_hooks(data, _is_ours)
    common.drop_our_server(data)
    permissions = data.get("permissions")
    ours = {tool_name(t) for t in APPROVED_TOOLS}
    if (
        isinstance(permissions, dict)
        and isinstance(permissions.get("allow"), list)
        and ours & set(map(str, permissions["allow"]))
    ):
        permissions["allow"] = [t for t in permissions["allow"] if t not in ours]
        if not permissions["allow"]:
            del permissions["allow"]
            if not permissions:
                del data["permissions"]
    return data


def _unwired_created(data: dict) -> dict:
    """A file install created, without ours: nothing is left when only its `$version` is."""
    data = _unwired(data)
    return {} if set(data) == {"$version"} else data


def _problem(data: dict) -> "str | None":
    problem = common.hooks_problem(data) or common.servers_problem(data)
    if problem:
        return problem
    permissions = data.get("permissions", {})
    if not isinstance(permissions, dict) or not isinstance(permissions.get("allow", []), list):
        return "'permissions.allow' is not a list"
    return None


def mcp_server(portable: bool = False) -> dict:
    """Our stdio server; `alwaysLoadTools` lists its tools at once (else they wait behind tool_search)."""
    return {**common.mcp_server(NAME, portable), "alwaysLoadTools": True}


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
    additions.append(Member(("mcpServers",), MCP_SERVER, mcp_server(portable)))
    # Read-only tools run without asking; the writers keep asking.
    additions += [Item(("permissions", "allow"), tool_name(t)) for t in APPROVED_TOOLS]
    return additions


def approvals_path() -> str:
    return common.user_path(".qwen", "mcpApprovals.json")


def config_hash(server: dict) -> str:
    """Qwen Code's hash of an MCP server's config (configHash.ts): SHA-256 of its JSON with sorted keys."""
    import hashlib
    import json

    behavioral = {k: v for k, v in server.items() if k not in ("scope", "extensionName", "description")}
    text = json.dumps(behavioral, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _approval(project: str, portable: bool = False):
    """A project's servers load only once approved (`qwen mcp approve`), bound to their config's hash."""
    from kirolearn.install.edit import Member

    value = {"hash": config_hash(mcp_server(portable)), "status": "approved"}
    return Member((os.path.realpath(project),), MCP_SERVER, value)


def _approved_projects() -> list:
    from kirolearn.install import engine as install

    for entry in install.load_record():
        if entry.get("kind") == APPROVALS_KIND:
            return list(entry.get("projects") or [])
    return []


def plan_install(project: "str | None", global_: bool = False, portable: bool = False, **options):
    """The settings.json install would write (hooks, the MCP server, its read-only tools allowed); for a
    project, also its server's approval in ~/.qwen/mcpApprovals.json (else Qwen Code does not start it)."""
    from kirolearn.install import edit as install_edit

    # One scope per run: if user and project hooks merge, each would fire twice.
    path = settings_path(project)
    additions = _additions(portable)
    # a file Qwen Code finds without it, it migrates: adds `$version`
    if not os.path.exists(path):
        from kirolearn.install.edit import Member

        additions.insert(0, Member((), "$version", SETTINGS_VERSION))
    change = install_edit.plan(path, additions, KIND, unwired=_unwired, problem=_problem)
    changes = [change]
    if project:
        root = os.path.realpath(project)
        edit = _approval(project, portable)
        # an older approval (any install mode's) is replaced, a user's too
        approval = install_edit.plan(approvals_path(), [edit], APPROVALS_KIND, ours=lambda value: True)
        projects = _approved_projects()
        approval.record["projects"] = projects + ([root] if root not in projects else [])
        # a project's wiring, though the file is the user's
        approval.record["project"] = root
        changes.append(approval)
    for one in changes:
        one.record.setdefault("agent", NAME)
    return changes


def plan_uninstall(only_project: "str | None" = None):
    """Undo each recorded Qwen Code install: the user's exact bytes while the file is as install left it."""
    from kirolearn.install import edit as install_edit
    from kirolearn.install import engine as install

    changes = []
    for entry in install.load_record():
        if entry.get("kind") != KIND:
            continue
        if only_project and not entry["path"].startswith(
            os.path.join(os.path.abspath(only_project), ".qwen") + os.sep
        ):
            continue
        unwired = _unwired_created if entry.get("created") else _unwired
        change = install_edit.undo(entry, unwired=unwired)
        if change is not None:
            changes.append(change)
    for entry in install.load_record():
        if entry.get("kind") != APPROVALS_KIND:
            continue
        projects = entry.get("projects") or []
        if only_project:
            projects = [p for p in projects if p == os.path.realpath(only_project)]
            if not projects:
                continue
        edits = [_approval(p, portable) for p in projects for portable in (False, True)]
        change = install_edit.undo(entry, edits)
        if change is not None:
            changes.append(change)
    return changes


def wired(entry: dict, data) -> bool:
    """Does a recorded file still hold what install put there (the approvals file holds no command)?"""
    if not isinstance(data, dict):
        return False
    if entry.get("kind") == APPROVALS_KIND:
        return any(
            isinstance(data.get(p), dict) and (data[p].get(MCP_SERVER) or {}).get("status") == "approved"
            for p in entry.get("projects") or []
        )
    return any(
        _is_ours(g)
        for groups in (data.get("hooks") or {}).values()
        if isinstance(groups, list)
        for g in groups
    )
