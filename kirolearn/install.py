"""`kirolearn install` / `uninstall`: wire kirolearn into Kiro's config files, and unwire it.

Writes only what it owns and preserves everything else: whole files that are
ours (the v3 hook file, the IDE 0.x `.kiro.hook` files) and single entries in
shared JSON files (our hooks and MCP server in an agent config, our server in
mcp.json), keeping the file's indentation and key order. A file that is not
valid JSON is reported and left alone. Every change is recorded in
$KIROLEARN_HOME/installs.json, so `uninstall` removes exactly that, from every
project it was installed into. Commands are absolute paths ending in `|| true`,
so a removed binary never blocks the agent.
"""

import difflib
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field

from . import config
from .errors import InstallError  # noqa: F401 - re-exported for callers

AGENT_NAME = "kirolearn"
MARK = "kirolearn-hook"
CLASSIC_HOOKS = (  # trigger, EVENT argument, timeout_ms
    ("agentSpawn", "agent-spawn", 5000),
    ("userPromptSubmit", "prompt-submit", 5000),
    ("postToolUse", "post-tool", 2000),
    ("stop", "stop", 5000),
)
V3_HOOKS = (  # name, trigger, EVENT argument, timeout seconds
    ("kirolearn-session", "SessionStart", "agent-spawn", 5),
    ("kirolearn-prompt", "UserPromptSubmit", "prompt-submit", 5),
    ("kirolearn-post-tool", "PostToolUse", "post-tool", 2),
    ("kirolearn-stop", "Stop", "stop", 5),
)
IDE_LEGACY_HOOKS = (  # file stem, when, EVENT argument
    ("kirolearn-prompt-submit", {"type": "promptSubmit"}, "ide-prompt-submit"),
    ("kirolearn-post-tool", {"type": "postToolUse", "toolTypes": ["*"]}, "ide-post-tool"),
    ("kirolearn-agent-stop", {"type": "agentStop"}, "ide-agent-stop"),
)


@dataclass
class Change:
    """One file install would write (after=None: delete)."""

    path: str
    before: "str | None"
    after: "str | None"
    record: dict = field(default_factory=dict)
    problem: str = ""

    @property
    def changed(self) -> bool:
        return not self.problem and self.before != self.after

    def diff(self) -> str:
        """A unified diff of the change."""
        lines = difflib.unified_diff((self.before or "").splitlines(True), (self.after or "").splitlines(True),
                                     fromfile=self.path if self.before is not None else "/dev/null",
                                     tofile=self.path if self.after is not None else "/dev/null")
        return "".join(lines)


def kiro_home() -> str:
    """~/.kiro of the user."""
    home = config.user_home_dir()
    if home is None:
        raise InstallError("cannot find your home directory: set HOME")
    return os.path.join(home, ".kiro")


def command_path(name: str) -> str:
    """Absolute path of one of our console scripts (next to this Python first)."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(beside):
        return beside
    found = shutil.which(name)
    if not found:
        raise InstallError(f"{name} is not installed next to {sys.executable} or on PATH: reinstall kirolearn")
    return os.path.abspath(found)


def _env_prefix() -> str:
    home = os.environ.get(config.HOME_ENV)
    return f"{config.HOME_ENV}={shlex.quote(config.home())} " if home else ""


def hook_command(event: str, windows: "bool | None" = None) -> str:
    """The shell command a Kiro hook runs: absolute path, and a no-op fallback so a missing binary is harmless.

    Kiro runs hooks with `bash -c` on macOS and Linux and `cmd /C` on Windows.
    """
    windows = os.name == "nt" if windows is None else windows
    path = command_path(MARK)
    if windows:
        import subprocess

        home = f'set "{config.HOME_ENV}={config.home()}" && ' if os.environ.get(config.HOME_ENV) else ""
        return f"{home}{subprocess.list2cmdline([path, event])} || exit /b 0"
    return f"{_env_prefix()}{shlex.quote(path)} {event} || true"


def mcp_entry() -> dict:
    """Our MCP server entry (command, args, env)."""
    env = {config.HOME_ENV: config.home()} if os.environ.get(config.HOME_ENV) else {}
    return {"command": command_path("kirolearn-mcp"), "args": [], "env": env}


# --- JSON files that keep their look ----------------------------------------------------


def _read(path: str) -> "str | None":
    try:
        with open(path, encoding="utf-8", newline="") as fh:  # keep CRLF: the bytes are the user's
            return fh.read()
    except FileNotFoundError:
        return None


def _indent_of(text: str):
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            ws = line[: len(line) - len(stripped)]
            return "\t" if ws.startswith("\t") else len(ws)
    return 2


def _dump(data, like: "str | None") -> str:
    indent = _indent_of(like) if like else 2
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return text + ("\n" if like is None or like.endswith("\n") else "")


def _load(path: str, text: "str | None") -> dict:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}); left untouched: fix it or move it aside, then re-run")
    if not isinstance(data, dict):
        raise InstallError(f"{path} holds a JSON {type(data).__name__}, not an object; left untouched")
    return data


def _members_end(text: str, key: str) -> "tuple[int, int] | None":
    """(index of the closing brace, nesting level) of top-level object `key`, found by a tiny scanner.

    Used to add or remove one member of a shared JSON file as text, so every
    byte of the user's own content stays as they wrote it.
    """
    depth, i, n, in_string, target_open = 0, 0, len(text), False, None
    last_key = None
    while i < n:
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            last_key = text[i + 1:end]
            in_string = True
        elif ch in "{[":
            depth += 1
            if ch == "{" and depth == 2 and last_key == key and target_open is None:
                target_open = depth
        elif ch in "}]":
            if target_open is not None and depth == target_open and ch == "}":
                return i, depth
            depth -= 1
        i += 1
    return None


def _insert_member(text: str, key: str, member: str, value) -> "str | None":
    """`text` with `"member": value` added at the end of top-level object `key` (None if not found)."""
    found = _members_end(text, key)
    if not found:
        return None
    close, level = found
    unit = _indent_of(text)
    unit = "\t" if unit == "\t" else " " * unit
    body = json.dumps(value, indent=len(unit) if unit != "\t" else "\t", ensure_ascii=False)
    body = body.replace("\n", "\n" + unit * level)
    before = text[:close].rstrip()
    comma = "" if before.endswith("{") else ","
    return f"{before}{comma}\n{unit * level}{json.dumps(member)}: {body}\n{unit * (level - 1)}{text[close:]}"


def _remove_member(text: str, key: str, member: str, parsed_without: dict) -> "str | None":
    """`text` without the member install added (None if it cannot be done as text)."""
    marker = f'{json.dumps(member)}: '
    start = text.find(marker)
    if start < 0 or text.count(marker) != 1:
        return None
    head = text[:start].rstrip()
    try:
        _, end = json.JSONDecoder().raw_decode(text, start + len(marker))
    except ValueError:
        return None
    if head.endswith(","):
        candidate = head[:-1] + text[end:]
    else:
        rest = text[end:].lstrip()
        candidate = head + (text[end:] if not rest.startswith(",") else "\n" + rest[1:].lstrip(" \t"))
    try:
        return candidate if json.loads(candidate) == parsed_without else None
    except ValueError:
        return None


def _is_ours(entry) -> bool:
    return isinstance(entry, dict) and MARK in str(entry.get("command", ""))


def _edit(path: str, edit) -> Change:
    """Apply `edit(data) -> data` to a JSON file, as a Change (problem set when unreadable)."""
    before = _read(path)
    try:
        data = _load(path, before)
    except InstallError as exc:
        return Change(path, before, before, problem=str(exc))
    new = edit(json.loads(json.dumps(data)))  # edit a copy
    if new is None:
        return Change(path, before, None)
    after = _dump(new, before) if (new != data or before is None) else before
    return Change(path, before, after)


# --- what install writes ---------------------------------------------------------------------


def _agent_edit(data: dict) -> dict:
    if not data:
        data = {"name": AGENT_NAME, "description": "Kiro's default tools plus kirolearn memory (capture and recall)",
                "tools": ["*"], "allowedTools": ["@kirolearn"], "includeMcpJson": True}
    data.setdefault("mcpServers", {})[AGENT_NAME] = dict(mcp_entry(), timeout=120000)
    hooks = data.setdefault("hooks", {})
    for trigger, event, timeout in CLASSIC_HOOKS:
        kept = [h for h in hooks.get(trigger, []) if not _is_ours(h)]
        entry = {"command": hook_command(event), "timeout_ms": timeout}
        if trigger == "postToolUse":
            entry = {"matcher": "*", **entry}
        hooks[trigger] = kept + [entry]
    return data


def _mcp_edit(data: dict) -> dict:
    data.setdefault("mcpServers", {})[AGENT_NAME] = mcp_entry()
    return data


def _edit_mcp(path: str) -> Change:
    """Add our server to an mcp.json, as text when the file exists (its bytes stay the user's)."""
    change = _edit(path, _mcp_edit)
    if change.problem or not change.changed or change.before is None:
        return change
    data = json.loads(change.before)
    if AGENT_NAME in data.get("mcpServers", {}):  # an older entry of ours: replace it
        without = json.loads(change.before)
        del without["mcpServers"][AGENT_NAME]
        text = _remove_member(change.before, "mcpServers", AGENT_NAME, without)
    else:
        text = change.before
    inserted = _insert_member(text, "mcpServers", AGENT_NAME, mcp_entry()) if text else None
    if inserted and json.loads(inserted) == json.loads(change.after):
        change.after = inserted
    return change


def v3_hook_file() -> dict:
    """The v3 / IDE 1.x hook file, all ours."""
    hooks = []
    for name, trigger, event, timeout in V3_HOOKS:
        hook = {"name": name, "trigger": trigger, "action": {"type": "command", "command": hook_command(event)},
                "timeout": timeout, "enabled": True}
        if trigger == "PostToolUse":
            hook["matcher"] = ".*"
        hooks.append(hook)
    return {"version": "v1", "hooks": hooks}


def legacy_hook_file(stem: str, when: dict, event: str) -> dict:
    """One IDE 0.x `.kiro.hook` file, all ours."""
    return {"enabled": True, "name": f"kirolearn {event[4:].replace('-', ' ')}",
            "description": "kirolearn memory: capture (and recall on prompt submit)", "version": "1",
            "when": when, "then": {"type": "runCommand", "command": hook_command(event)}}


def _owned(path: str, data: dict) -> Change:
    before = _read(path)
    after = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if before is not None and before != after:
        try:
            theirs = json.loads(before)
        except ValueError:
            theirs = None
        if not (isinstance(theirs, dict) and MARK in before):
            return Change(path, before, before, problem=f"{path} exists and is not kirolearn's; left untouched")
    return Change(path, before, after)


def plan_install(project: "str | None", global_: bool) -> "list[Change]":
    """Every change install would make (nothing is written)."""
    changes = []
    kiro = kiro_home()
    if global_:
        changes.append(_edit(os.path.join(kiro, "agents", f"{AGENT_NAME}.json"), _agent_edit))
        changes.append(_edit_mcp(os.path.join(kiro, "settings", "mcp.json")))
    if project:
        dot = os.path.join(os.path.abspath(project), ".kiro")
        changes.append(_edit(os.path.join(dot, "agents", f"{AGENT_NAME}.json"), _agent_edit))
        changes.append(_owned(os.path.join(dot, "hooks", f"{AGENT_NAME}.json"), v3_hook_file()))
        for stem, when, event in IDE_LEGACY_HOOKS:
            changes.append(_owned(os.path.join(dot, "hooks", f"{stem}.kiro.hook"), legacy_hook_file(stem, when, event)))
        changes.append(_edit_mcp(os.path.join(dot, "settings", "mcp.json")))
    return changes


# --- what uninstall removes ------------------------------------------------------------------------


def _agent_unedit(data: dict) -> "dict | None":
    servers = data.get("mcpServers", {})
    servers.pop(AGENT_NAME, None)
    if not servers:
        data.pop("mcpServers", None)
    hooks = data.get("hooks", {})
    for trigger in list(hooks):
        hooks[trigger] = [h for h in hooks[trigger] if not _is_ours(h)]
        if not hooks[trigger]:
            del hooks[trigger]
    if not hooks:
        data.pop("hooks", None)
    skeleton = {"name", "description", "tools", "allowedTools", "includeMcpJson"}
    if data.get("name") == AGENT_NAME and set(data) <= skeleton:
        return None  # only what install created is left: remove the file
    return data


def _mcp_unedit(created: bool):
    def edit(data: dict) -> "dict | None":
        servers = data.get("mcpServers", {})
        servers.pop(AGENT_NAME, None)
        if created and not servers and set(data) <= {"mcpServers"}:
            return None
        return data

    return edit


def plan_uninstall(only_project: "str | None" = None) -> "list[Change]":
    """The changes that undo every recorded install (or only those under one project)."""
    changes = []
    for entry in load_record():
        path = entry["path"]
        if only_project and not path.startswith(os.path.join(os.path.abspath(only_project), ".kiro") + os.sep):
            continue
        if not os.path.exists(path):
            continue
        if entry["kind"] == "owned":
            text = _read(path)
            changes.append(Change(path, text, None) if text and MARK in text else
                           Change(path, text, text, problem=f"{path} no longer looks like kirolearn's; left alone"))
        elif entry["kind"] == "agent":
            changes.append(_edit(path, _agent_unedit))
        elif entry["kind"] == "mcp":
            change = _edit(path, _mcp_unedit(entry.get("created", False)))
            if change.changed and change.after is not None:
                text = _remove_member(change.before, "mcpServers", AGENT_NAME, json.loads(change.after))
                if text is not None:
                    change.after = text
            changes.append(change)
    return changes


# --- applying and recording ---------------------------------------------------------------------------


def record_path() -> str:
    """Where installs are recorded."""
    return os.path.join(config.home(), "installs.json")


def load_record() -> "list[dict]":
    """The recorded installs: [{path, kind, created}]."""
    try:
        with open(record_path(), encoding="utf-8") as fh:
            return json.load(fh).get("installs", [])
    except (OSError, ValueError, AttributeError):
        return []


def _save_record(entries: "list[dict]") -> None:
    config.ensure_private_dir(config.home())
    tmp = record_path() + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # 0600 whatever the umask
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"installs": entries}, fh, indent=2)
    os.replace(tmp, record_path())


def _kind(path: str) -> str:
    if path.endswith(os.path.join("settings", "mcp.json")):
        return "mcp"
    if os.sep + "agents" + os.sep in path:
        return "agent"
    return "owned"


def _prune_empty_dirs(directory: str) -> None:
    """Remove empty folders install created, up to and including the `.kiro` folder."""
    while os.path.basename(directory) in ("agents", "hooks", "settings", ".kiro"):
        try:
            os.rmdir(directory)  # only succeeds when empty
        except OSError:
            return
        if os.path.basename(directory) == ".kiro":
            return
        directory = os.path.dirname(directory)


def apply(changes: "list[Change]", *, installing: bool) -> None:
    """Write the changes and update the install record."""
    recorded = {e["path"]: e for e in load_record()}
    for change in changes:
        if change.problem:
            continue
        if change.changed:
            if change.after is None:
                os.remove(change.path)
                _prune_empty_dirs(os.path.dirname(change.path))
            else:
                os.makedirs(os.path.dirname(change.path), exist_ok=True)
                tmp = change.path + ".kirolearn-tmp"
                with open(tmp, "w", encoding="utf-8", newline="") as fh:
                    fh.write(change.after)
                os.replace(tmp, change.path)
        if installing:
            previous = recorded.get(change.path, {})
            entry = {**previous, "path": change.path, "kind": change.record.get("kind") or _kind(change.path),
                     "created": previous.get("created", change.before is None)}
            if change.changed:  # what an adapter needs to undo this write (agents.claude_code)
                entry.update({k: v for k, v in change.record.items() if k != "kind"})
            recorded[change.path] = entry
        else:
            recorded.pop(change.path, None)
    _save_record(list(recorded.values()))


def set_default_agent() -> str:
    """Make kirolearn Kiro CLI's default agent (only on --set-default); returns what was done."""
    import subprocess

    cli = shutil.which("kiro-cli")
    command = ["kiro-cli", "settings", "chat.defaultAgent", AGENT_NAME]
    if not cli:
        return "kiro-cli is not on PATH; to make kirolearn the default agent run: " + " ".join(command)
    result = subprocess.run([cli, *command[1:]], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise InstallError(f"`{' '.join(command)}` failed: {result.stderr.strip() or result.stdout.strip()}")
    return f"default agent set: {' '.join(command)}"


def _commands(value):
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "command" and isinstance(item, str):
                yield item
            else:
                yield from _commands(item)
    elif isinstance(value, list):
        for item in value:
            yield from _commands(item)


def _binaries(command: str) -> "list[str]":
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return [w for w in words if w.endswith((os.sep + MARK, os.sep + "kirolearn-mcp"))]


def wiring() -> "list[dict]":
    """Each recorded file: is it there with our entries, and do they point at existing binaries?"""
    report = []
    for entry in load_record():
        text = _read(entry["path"])
        try:
            data = json.loads(text) if text else None
        except ValueError:
            data = None
        paths = [b for c in _commands(data) for b in _binaries(c)] if data is not None else []
        report.append({"path": entry["path"], "present": bool(paths),
                       "missing_binaries": sorted({p for p in paths if not os.path.exists(p)})})
    return report
