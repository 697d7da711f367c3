"""Claude Code's installer targets: ~/.claude/settings.json or <project>/.claude/settings.json, .mcp.json.

The hook-time half of this agent lives in kirolearn.capture.agents.claude_code; this is the CLI's half.
"""

import os

from kirolearn.capture.agents.claude_code import HOOKS, NAME
from kirolearn.capture.agents.common import MARK
from kirolearn.core import jsonfast
from kirolearn.install.agents import common


def settings_path(project: "str | None") -> str:
    """The settings file install edits: the project's shared one, else the user's."""
    if project:
        return os.path.join(os.path.abspath(project), ".claude", "settings.json")
    return common.user_path(".claude", "settings.json")


def hook_command(portable: bool = False) -> str:
    """The command Claude Code runs (through a POSIX shell, Git Bash on Windows); a missing binary is a no-op."""
    return common.hook_command(NAME, portable=portable)


def _is_ours(group) -> bool:
    return isinstance(group, dict) and any(
        isinstance(h, dict) and MARK in str(h.get("command", "")) for h in group.get("hooks", []) or []
    )


def _wired(data: dict, portable: bool = False) -> dict:
    data = jsonfast.loads(jsonfast.dumps(data))  # a copy
    hooks = data.setdefault("hooks", {})
    command = hook_command(portable)
    for event, timeout in HOOKS:
        groups = [g for g in hooks.get(event, []) or [] if not _is_ours(g)]
        hooks[event] = groups + [
            {"matcher": "", "hooks": [{"type": "command", "command": command, "timeout": timeout}]}
        ]
    return data


def _unwired(data: dict) -> dict:
    data = jsonfast.loads(jsonfast.dumps(data))
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        for event in list(hooks):
            if isinstance(hooks[event], list):
                hooks[event] = [g for g in hooks[event] if not _is_ours(g)]
                if not hooks[event]:
                    del hooks[event]
        if not hooks:
            del data["hooks"]
    return data


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _insert_as_text(before: str, data: dict, portable: bool = False) -> "tuple[str, list] | None":
    """`before` with our hook groups added as text (and the insertions), or None if that cannot be done."""
    from kirolearn.core import jsontext

    text, insertions = before, []
    try:
        for event, timeout in HOOKS:
            group = {
                "matcher": "",
                "hooks": [{"type": "command", "command": hook_command(portable), "timeout": timeout}],
            }
            root = jsontext.parse(text)
            hooks = jsontext.find(root, "hooks")
            groups = None if hooks is None else jsontext.find(root, "hooks", event)
            if hooks is None:
                text, ins = jsontext.append(text, root, {event: [group]}, key="hooks")
            elif groups is None:
                text, ins = jsontext.append(text, hooks, [group], key=event)
            else:
                text, ins = jsontext.append(text, groups, group)
            insertions.append(list(ins))
    except jsontext.JSONTextError:
        return None
    return text, insertions


# the install records this adapter writes
KINDS = ("claude-settings", "claude-mcp", "claude-local")


def mcp_path(project: "str | None") -> str:
    """Where the MCP server is registered: the project's `.mcp.json`, else the user's `~/.claude.json`."""
    if project:
        return os.path.join(os.path.abspath(project), ".mcp.json")
    return common.user_path(".claude.json")


def local_settings_path(project: str) -> str:
    return os.path.join(os.path.abspath(project), ".claude", "settings.local.json")


def mcp_entry(portable: bool = False) -> dict:
    """Our server as Claude Code's MCP config has it (a stdio server)."""
    from kirolearn.install import engine as install

    return {"type": "stdio", **install.mcp_entry(portable, NAME)}


def _server_is_ours(value) -> bool:
    return isinstance(value, dict) and str(value.get("command", "")).endswith("kirolearn-mcp")


def _mcp_edits(portable: bool = False) -> list:
    from kirolearn.core import mcp_tools as agents
    from kirolearn.install.edit import Member

    return [Member(("mcpServers",), agents.MCP_SERVER, mcp_entry(portable))]


def _local_edits() -> list:
    """The project's personal settings: approve our .mcp.json server, and allow its non-destructive tools."""
    from kirolearn.core import mcp_tools as agents
    from kirolearn.install.edit import Item

    return [
        Item(("enabledMcpjsonServers",), agents.MCP_SERVER),
        *(
            Item(("permissions", "allow"), f"mcp__{agents.MCP_SERVER}__{tool}")
            for tool in agents.MCP_SAFE_TOOLS
        ),
    ]


def plan_install(project: "str | None", global_: bool = False, portable: bool = False, **options):
    """The files install would write, as install.Changes (nothing is written).

    Hooks go into the settings file (`.claude/settings.json`, or the user's);
    the MCP server into `.mcp.json` (or `~/.claude.json`); for a project,
    `.claude/settings.local.json` approves that server (`enabledMcpjsonServers`,
    so Claude Code loads it without asking) and allows its non-destructive
    tools (never forget_memory). Every edit is text added to the user's file
    and recorded, so uninstall can give the bytes back.
    """
    from kirolearn.install import edit as install_edit

    changes = plan_settings(project, portable)
    previous = {e["path"]: e for e in _records()}
    path = mcp_path(project)
    changes.append(
        install_edit.plan(
            path, _mcp_edits(portable), "claude-mcp", ours=_server_is_ours, previous=previous.get(path)
        )
    )
    if project:
        path = local_settings_path(project)
        changes.append(install_edit.plan(path, _local_edits(), "claude-local", previous=previous.get(path)))
    for change in changes:
        change.record.setdefault("agent", NAME)
    return changes


def _records() -> list:
    from kirolearn.install import engine as install

    return [e for e in install.load_record() if e.get("kind") in KINDS]


def wired(entry: dict, data) -> bool:
    """Does a recorded file still hold what install put there?"""
    from kirolearn.core import mcp_tools as agents

    if not isinstance(data, dict):
        return False
    if entry.get("kind") == "claude-mcp":
        return _server_is_ours((data.get("mcpServers") or {}).get(agents.MCP_SERVER))
    if entry.get("kind") == "claude-local":
        return agents.MCP_SERVER in (data.get("enabledMcpjsonServers") or [])
    return any(
        _is_ours(g)
        for groups in (data.get("hooks") or {}).values()
        if isinstance(groups, list)
        for g in groups
    )


def plan_settings(project: "str | None", portable: bool = False):
    """The one settings file install would write, as an install.Change (nothing is written).

    Our hook groups are added as text at the end of each list, so the user's
    bytes stay as they were; the insertions are recorded so that uninstall can
    take out exactly those bytes while the file is as install left it.
    """
    from kirolearn.install import engine as install

    path = settings_path(project)
    before = install.read_text(path)
    try:
        data = install.load_json(path, before.lstrip("\ufeff") if before else before)
    except install.InstallError as exc:
        return [install.Change(path, before, before, problem=str(exc))]
    if not isinstance(data.get("hooks", {}), dict) or not all(
        isinstance(v, list) for v in data.get("hooks", {}).values()
    ):
        return [
            install.Change(
                path, before, before, problem=f"{path}: 'hooks' is not an object of lists; left untouched"
            )
        ]
    wired = _wired(data, portable)
    if before is not None and wired == data:
        return [install.Change(path, before, before, record={"kind": "claude-settings"})]
    record: dict = {"kind": "claude-settings", "insertions": None}
    as_text = None
    if before is not None and not any(
        _is_ours(g) for groups in data.get("hooks", {}).values() for g in groups
    ):
        as_text = _insert_as_text(before, data, portable)
    if as_text and jsonfast.loads(as_text[0].lstrip("\ufeff")) == wired:
        after, record["insertions"] = as_text
    else:
        after = install.dump_json(wired, before)
    record["written_sha256"] = _sha(after)
    return [install.Change(path, before, after, record=record)]


def plan_uninstall(only_project: "str | None" = None):
    """Undo each recorded Claude Code install: the user's exact bytes while the file is as install left it."""
    from kirolearn.install import edit as install_edit

    changes = uninstall_settings(only_project)
    for entry in _records():
        if entry["kind"] == "claude-settings" or not install_edit.under(entry["path"], only_project):
            continue
        edits = _mcp_edits() if entry["kind"] == "claude-mcp" else _local_edits()
        change = install_edit.undo(entry, edits, ours=_server_is_ours)
        if change is not None:
            changes.append(change)
    return changes


def uninstall_settings(only_project: "str | None" = None):
    """Undo the hook groups of each recorded settings file."""
    from kirolearn.core import jsontext
    from kirolearn.install import engine as install

    changes = []
    for entry in install.load_record():
        if entry.get("kind") != "claude-settings":
            continue
        path = entry["path"]
        if only_project and not path.startswith(
            os.path.join(os.path.abspath(only_project), ".claude") + os.sep
        ):
            continue
        before = install.read_text(path)
        if before is None:
            continue
        untouched = entry.get("written_sha256") == _sha(before)
        if untouched and entry.get("created"):
            changes.append(install.Change(path, before, None, record={"kind": "claude-settings"}))
            continue
        restored = (
            jsontext.remove(before, [tuple(i) for i in entry["insertions"]])
            if untouched and entry.get("insertions")
            else None
        )
        if restored is None:
            try:
                data = install.load_json(path, before.lstrip("\ufeff"))
            except install.InstallError as exc:
                changes.append(install.Change(path, before, before, problem=str(exc)))
                continue
            rest = _unwired(data)
            # nothing of kirolearn's is left: nothing to remove
            if rest == data:
                restored = before
            elif not rest and entry.get("created"):
                restored = None
            else:  # edited since: take out only what install added
                from kirolearn.install.edit import without_insertions

                # none of ours left, the rest as the user has it
                def accept(left, rest=rest) -> bool:
                    return _unwired(left) == rest and not any(
                        _is_ours(g)
                        for groups in (left.get("hooks") or {}).values()
                        if isinstance(groups, list)
                        for g in groups
                    )

                restored = without_insertions(path, before, entry.get("insertions"), accept)
                if restored is None:
                    restored = install.dump_json(rest, before)
        changes.append(install.Change(path, before, restored, record={"kind": "claude-settings"}))
    return changes
