"""The Claude Code adapter: its hooks, its settings files, its transcript.

Facts: shared/reference/claude-code-hooks.md. Every payload is stdin JSON with
`session_id`, `transcript_path`, `cwd` and `hook_event_name`, plus `prompt`,
`tool_name` / `tool_input` / `tool_response` or `source` per event. Its `Stop`
(since 2.x) carries `last_assistant_message`, the turn's real final text:
measured with Claude Code 2.1.197, the transcript does not hold that message yet
when Stop fires, so the field wins and the transcript (a JSONL file Claude Code
may still be writing, read bounded in size) is only the fallback of older
versions. Stdout of SessionStart and UserPromptSubmit (exit 0) becomes context.

Standard library only (the hook imports it); the installer part is used by the CLI.
"""

import os

from kirolearn import jsonfast  # not json: it imports re (~30M instructions a hook call)
from kirolearn.capture.agents import common
from kirolearn.capture.agents.common import MARK  # noqa: F401 - how its hook groups are found

NAME = "claude-code"
GENERATIONS = ("claude",)
SURFACES = ("claude-code",)
SESSION_ENV = None  # Claude Code always sends session_id
TRANSCRIPT_TAIL_BYTES = common.TRANSCRIPT_TAIL_BYTES

TRIGGERS = common.CLAUDE_TRIGGERS
# Lifecycle events with no Kiro twin: kept as notes, payload in `extra`.
NOTE_TRIGGERS = ("SubagentStop", "SessionEnd", "PreCompact", "Notification")

# What install wires: event, timeout in seconds (Claude Code's unit).
HOOKS = (
    ("SessionStart", 5),
    ("UserPromptSubmit", 5),
    ("PostToolUse", 2),
    ("Stop", 5),
)


def resolve_trigger(name: str) -> "tuple[str, str]":
    """Map a Claude Code hook name to (canonical trigger, generation)."""
    return common.resolve_trigger(name, TRIGGERS, NOTE_TRIGGERS, "claude", "Claude Code hook event name")


surface = common.fixed_surface("claude-code")


payload_from_env = common.payload_from_env  # Claude Code always sends its payload on stdin

FINAL_TEXT_KEY = "last_assistant_message"  # Stop's final text (Claude Code >= 2.x; Codex sends it too)


def normalise(trigger: str, payload: dict, env) -> dict:
    """A Stop's closing text: `last_assistant_message` when sent, else the transcript's last assistant text."""
    if trigger != "stop":
        return payload
    return common.final_answer(payload, (FINAL_TEXT_KEY,), last_assistant_text)


def last_assistant_text(path: str, tail_bytes: int = TRANSCRIPT_TAIL_BYTES) -> "str | None":
    """The text of the newest assistant message in a transcript JSONL file (None if none is found).

    Reads at most `tail_bytes` from the end; a partial first or last line (the
    file may still be being written) is skipped, never an error.
    """
    for item in common.newest_lines(path, tail_bytes):
        text = _assistant_text(item)
        if text:
            return text
    return None


def _assistant_text(item) -> "str | None":
    if not isinstance(item, dict):
        return None
    message = item.get("message") if isinstance(item.get("message"), dict) else item
    if item.get("type") != "assistant" and message.get("role") != "assistant":
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content.strip() or None
    if isinstance(content, list):
        parts = [block.get("text", "") for block in content
                 if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)]
        text = "\n".join(p for p in parts if p.strip()).strip()
        return text or None
    return None


def context_output(trigger: str, text: str) -> str:
    """Plain stdout on exit 0 is added to the context of SessionStart and UserPromptSubmit."""
    return text


# --- installing: ~/.claude/settings.json or <project>/.claude/settings.json ------------------------


def settings_path(project: "str | None") -> str:
    """The settings file install edits: the project's shared one, else the user's."""
    if project:
        return os.path.join(os.path.abspath(project), ".claude", "settings.json")
    return common.user_path(".claude", "settings.json")


def hook_command() -> str:
    """The command Claude Code runs (through a POSIX shell, Git Bash on Windows); a missing binary is a no-op."""
    return common.hook_command(NAME)


def _is_ours(group) -> bool:
    return isinstance(group, dict) and any(
        isinstance(h, dict) and MARK in str(h.get("command", "")) for h in group.get("hooks", []) or [])


def _wired(data: dict) -> dict:
    data = jsonfast.loads(jsonfast.dumps(data))  # a copy
    hooks = data.setdefault("hooks", {})
    command = hook_command()
    for event, timeout in HOOKS:
        groups = [g for g in hooks.get(event, []) or [] if not _is_ours(g)]
        hooks[event] = groups + [{"matcher": "", "hooks": [{"type": "command", "command": command,
                                                             "timeout": timeout}]}]
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


def _insert_as_text(before: str, data: dict) -> "tuple[str, list] | None":
    """`before` with our hook groups added as text (and the insertions), or None if that cannot be done."""
    from kirolearn import jsontext

    text, insertions = before, []
    try:
        for event, timeout in HOOKS:
            group = {"matcher": "", "hooks": [{"type": "command", "command": hook_command(), "timeout": timeout}]}
            root = jsontext.parse(text)
            hooks = jsontext.find(root, "hooks")
            if hooks is None:
                text, ins = jsontext.append(text, root, {event: [group]}, key="hooks")
            elif jsontext.find(root, "hooks", event) is None:
                text, ins = jsontext.append(text, hooks, [group], key=event)
            else:
                text, ins = jsontext.append(text, jsontext.find(root, "hooks", event), group)
            insertions.append(list(ins))
    except jsontext.JSONTextError:
        return None
    return text, insertions


KINDS = ("claude-settings", "claude-mcp", "claude-local")  # the install records this adapter writes


def mcp_path(project: "str | None") -> str:
    """Where the MCP server is registered: the project's `.mcp.json`, else the user's `~/.claude.json`."""
    if project:
        return os.path.join(os.path.abspath(project), ".mcp.json")
    return common.user_path(".claude.json")


def local_settings_path(project: str) -> str:
    return os.path.join(os.path.abspath(project), ".claude", "settings.local.json")


def mcp_entry() -> dict:
    """Our server as Claude Code's MCP config has it (a stdio server)."""
    from kirolearn import install

    return {"type": "stdio", **install.mcp_entry()}


def _server_is_ours(value) -> bool:
    return isinstance(value, dict) and str(value.get("command", "")).endswith("kirolearn-mcp")


def _mcp_edits() -> list:
    from kirolearn.capture import agents
    from kirolearn.install_edit import Member

    return [Member(("mcpServers",), agents.MCP_SERVER, mcp_entry())]


def _local_edits() -> list:
    """The project's personal settings: approve our .mcp.json server, and allow its non-destructive tools."""
    from kirolearn.capture import agents
    from kirolearn.install_edit import Item

    return [Item(("enabledMcpjsonServers",), agents.MCP_SERVER),
            *(Item(("permissions", "allow"), f"mcp__{agents.MCP_SERVER}__{tool}") for tool in agents.MCP_SAFE_TOOLS)]


def plan_install(project: "str | None", global_: bool = False, **options):
    """The files install would write, as install.Changes (nothing is written).

    Hooks go into the settings file (`.claude/settings.json`, or the user's);
    the MCP server into `.mcp.json` (or `~/.claude.json`); for a project,
    `.claude/settings.local.json` approves that server (`enabledMcpjsonServers`,
    so Claude Code loads it without asking) and allows its non-destructive
    tools (never forget_memory). Every edit is text added to the user's file
    and recorded, so uninstall can give the bytes back.
    """
    from kirolearn import install_edit

    changes = plan_settings(project)
    previous = {e["path"]: e for e in _records()}
    path = mcp_path(project)
    changes.append(install_edit.plan(path, _mcp_edits(), "claude-mcp", ours=_server_is_ours,
                                     previous=previous.get(path)))
    if project:
        path = local_settings_path(project)
        changes.append(install_edit.plan(path, _local_edits(), "claude-local", previous=previous.get(path)))
    for change in changes:
        change.record.setdefault("agent", NAME)
    return changes


def _records() -> list:
    from kirolearn import install

    return [e for e in install.load_record() if e.get("kind") in KINDS]


def wired(entry: dict, data) -> bool:
    """Does a recorded file still hold what install put there?"""
    from kirolearn.capture import agents

    if not isinstance(data, dict):
        return False
    if entry.get("kind") == "claude-mcp":
        return _server_is_ours((data.get("mcpServers") or {}).get(agents.MCP_SERVER))
    if entry.get("kind") == "claude-local":
        return agents.MCP_SERVER in (data.get("enabledMcpjsonServers") or [])
    return any(_is_ours(g) for groups in (data.get("hooks") or {}).values() if isinstance(groups, list)
               for g in groups)


def plan_settings(project: "str | None"):
    """The one settings file install would write, as an install.Change (nothing is written).

    Our hook groups are added as text at the end of each list, so the user's
    bytes stay as they were; the insertions are recorded so that uninstall can
    take out exactly those bytes while the file is as install left it.
    """
    from kirolearn import install

    path = settings_path(project)
    before = install._read(path)
    try:
        data = install._load(path, before.lstrip("\ufeff") if before else before)
    except install.InstallError as exc:
        return [install.Change(path, before, before, problem=str(exc))]
    if not isinstance(data.get("hooks", {}), dict) or not all(
            isinstance(v, list) for v in data.get("hooks", {}).values()):
        return [install.Change(path, before, before,
                               problem=f"{path}: 'hooks' is not an object of lists; left untouched")]
    wired = _wired(data)
    if before is not None and wired == data:
        return [install.Change(path, before, before, record={"kind": "claude-settings"})]
    record = {"kind": "claude-settings", "insertions": None}
    as_text = None
    if before is not None and not any(_is_ours(g) for groups in data.get("hooks", {}).values() for g in groups):
        as_text = _insert_as_text(before, data)
    if as_text and jsonfast.loads(as_text[0].lstrip("\ufeff")) == wired:
        after, record["insertions"] = as_text
    else:
        after = install._dump(wired, before)
    record["written_sha256"] = _sha(after)
    return [install.Change(path, before, after, record=record)]


def plan_uninstall(only_project: "str | None" = None):
    """Undo each recorded Claude Code install: the user's exact bytes while the file is as install left it."""
    from kirolearn import install_edit

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
    from kirolearn import install, jsontext

    changes = []
    for entry in install.load_record():
        if entry.get("kind") != "claude-settings":
            continue
        path = entry["path"]
        if only_project and not path.startswith(os.path.join(os.path.abspath(only_project), ".claude") + os.sep):
            continue
        before = install._read(path)
        if before is None:
            continue
        untouched = entry.get("written_sha256") == _sha(before)
        if untouched and entry.get("created"):
            changes.append(install.Change(path, before, None, record={"kind": "claude-settings"}))
            continue
        restored = jsontext.remove(before, [tuple(i) for i in entry["insertions"]]) \
            if untouched and entry.get("insertions") else None
        if restored is None:
            try:
                data = install._load(path, before.lstrip("\ufeff"))
            except install.InstallError as exc:
                changes.append(install.Change(path, before, before, problem=str(exc)))
                continue
            rest = _unwired(data)
            restored = None if (not rest and entry.get("created")) else install._dump(rest, before)
        changes.append(install.Change(path, before, restored, record={"kind": "claude-settings"}))
    return changes
