"""Kiro's installer targets: what `kirolearn install` writes into Kiro's config files, and undoes.

Writes only what it owns and preserves everything else: whole files that are
ours (the v3 hook file, the IDE 0.x `.kiro.hook` files, the `kirolearn` agent)
and one entry in shared `mcp.json` files. That entry is added as text, in the
file's own indentation, line endings and BOM, and the exact text inserted (only
our own entry, never the user's content) is recorded in
$KIROLEARN_HOME/installs.json, so `uninstall` gives back the user's bytes
exactly; a file edited since is unwired structurally instead. Install checks
every target before writing any: one unreadable or foreign file and nothing is
written. Commands are absolute paths ending in `|| true` (or, with
`--portable`, names resolved on PATH), so a removed binary never blocks the agent.

What goes where (one wiring per surface, one MCP definition per scope):
- global (`~/.kiro`): the `kirolearn` agent with classic hooks (Kiro CLI), and
  the MCP server in `~/.kiro/settings/mcp.json` (Kiro IDE, the default CLI
  agent, and the `kirolearn` agent through `includeMcpJson`);
- project (`<dir>/.kiro`): the v3 hook file (Kiro CLI >= 3 and IDE >= 1.0, for
  every agent), the IDE 0.x `.kiro.hook` files, and the MCP server in the
  project's mcp.json only when the global mcp.json does not already define it.
  No workspace agent: a workspace `kirolearn` agent would carry classic hooks
  next to the v3 file (every hook twice) and clash with the global agent's name.

Agent fields, checked against Kiro's agent configuration reference for IDE 1.0 / CLI 3.0
(https://kiro.dev/docs/custom-agents/configuration-reference/): `name`, `description`,
`tools` (["*"]: every tool; omitting it means none), `allowedTools` ("@server" allows one
MCP server's tools; a bare "*" is not accepted there), `includeMcpJson` (the agent also gets the
servers of ~/.kiro/settings/mcp.json and <cwd>/.kiro/settings/mcp.json), `hooks` (CLI only; the
IDE ignores it). Each hook entry is `command` plus `matcher` (pre/postToolUse only), and
`timeout_ms` from https://kiro.dev/docs/cli/hooks (default 30000). Kiro CLI 2.x
(https://kiro.dev/docs/cli/custom-agents/configuration-reference) documents `useLegacyMcpJson`
instead of `includeMcpJson`, so a version reads one flag or the other: the agent therefore also
defines kirolearn's server in its own `mcpServers` (every version reads that; agent > project >
global, so the same name is one server). `allowedTools` names each non-destructive tool: never
"@kirolearn", which would auto-approve forget_memory (the server marks it destructive).

The shared engine (Change, the diff, the all-or-nothing apply, installs.json)
is kirolearn.install.engine. Not on the hook path: only the CLI's install and uninstall
load this module (through kirolearn.install.agents); `doctor` asks it about Kiro-side clashes.
"""

import json
import os
import re
import shlex
import shutil

from kirolearn.core import paths
from kirolearn.core.errors import InstallError
from kirolearn.core.jsontext import indent_unit, line_indent, newline
from kirolearn.install.engine import (
    AGENT_NAME,
    BOM,
    KIRO_KINDS,
    MARK,
    Change,
    dump_json,
    env_prefix,
    home_travels,
    hook_argv,
    load_json,
    load_record,
    mcp_entry,
    read_text,
    strip_bom,
)


# Fields per Kiro's agent reference; see this module's docstring for the traps.
def _allowed_tools() -> list:
    from kirolearn.core.mcp_tools import MCP_SAFE_TOOLS

    return [f"@{AGENT_NAME}/{tool}" for tool in MCP_SAFE_TOOLS]


AGENT_SKELETON = {
    "name": AGENT_NAME,
    "description": "Kiro's default tools plus kirolearn memory (capture and recall)",
    "tools": ["*"],
    "allowedTools": _allowed_tools(),
    "includeMcpJson": True,
    "mcpServers": {},
}
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
IDE_LEGACY_HOOKS = (  # file stem, when, EVENT argument, description
    (
        "kirolearn-prompt-submit",
        {"type": "promptSubmit"},
        "ide-prompt-submit",
        "kirolearn: record your prompt and add recalled project memory to it",
    ),
    (
        "kirolearn-post-tool",
        {"type": "postToolUse", "toolTypes": ["*"]},
        "ide-post-tool",
        "kirolearn: record what each tool call did",
    ),
    (
        "kirolearn-agent-stop",
        {"type": "agentStop"},
        "ide-agent-stop",
        "kirolearn: record the end of the agent's turn",
    ),
)


def kiro_home() -> str:
    """~/.kiro of the user."""
    home = paths.user_home_dir()
    if home is None:
        raise InstallError("cannot find your home directory", "set HOME")
    return os.path.join(home, ".kiro")


def hook_command(event: str, windows: "bool | None" = None, portable: bool = False) -> str:
    """The shell command a Kiro hook runs: absolute paths, and a no-op fallback so a missing binary is harmless.

    Kiro runs hooks with `bash -c` on macOS and Linux and `cmd /C` on Windows.
    A portable command names `kirolearn-hook` on PATH and carries no KIROLEARN_HOME.
    """
    windows = os.name == "nt" if windows is None else windows
    argv = hook_argv(portable)
    if windows:
        import subprocess

        home = f'set "{paths.HOME_ENV}={paths.home()}" && ' if home_travels(portable) else ""
        return f"{home}{subprocess.list2cmdline([*argv, event])} || exit /b 0"
    if portable:  # not on PATH: a line on stderr and in the log, not silence
        from kirolearn.install.engine import portable_hook_command

        return portable_hook_command(event)
    return f"{env_prefix(portable)}{' '.join(shlex.quote(a) for a in argv)} {event} || true"


# JSON text that keeps the user's bytes (the mcp.json entry)

_WS = re.compile(r"[ \t\r\n]*")
_DECODER = json.JSONDecoder()


def _members(text: str, open_at: int) -> "tuple[list[tuple[str, int, int, int]], int]":
    """Members of the JSON object whose `{` is at `open_at`: [(key, key start, value start, value end)], and its `}`."""
    if text[open_at] != "{":
        raise ValueError("not an object")
    i = _WS.match(text, open_at + 1).end()
    members: list = []
    if text[i] == "}":
        return members, i
    while True:
        key_start = i
        key, i = json.decoder.scanstring(text, i + 1)
        i = _WS.match(text, i).end()
        if text[i] != ":":
            raise ValueError("expected ':'")
        i = _WS.match(text, i + 1).end()
        _, end = _DECODER.raw_decode(text, i)
        members.append((key, key_start, i, end))
        i = _WS.match(text, end).end()
        if text[i] == "}":
            return members, i
        if text[i] != ",":
            raise ValueError("expected ','")
        i = _WS.match(text, i + 1).end()


def _top(text: str) -> int:
    return _WS.match(text, 1 if text.startswith(BOM) else 0).end()


def _own_line(text: str, pos: int) -> bool:
    start = text.rfind("\n", 0, pos) + 1
    return start > 0 and not text[start:pos].strip()


def _insert(text: str, open_at: int, name: str, value) -> "tuple[str, str, str]":
    """Add `"name": value` at the end of the object at `open_at`, as the file would have it.

    Returns (new text, the text inserted, the text it replaced). Replacing the
    inserted text by the replaced text gives `text` back exactly.
    """
    members, close = _members(text, open_at)
    nl = newline(text)
    if "\n" not in text.strip():  # a one-line file stays one line
        member = f"{json.dumps(name, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"
        at, snippet = (members[-1][3], ", " + member) if members else (open_at + 1, member)
        return text[:at] + snippet + text[at:], snippet, ""
    unit = indent_unit(text)
    if members:
        last_key = members[-1][1]
        indent = (
            line_indent(text, last_key) if _own_line(text, last_key) else line_indent(text, open_at) + unit
        )
    else:
        indent = line_indent(text, open_at) + unit
    body = json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", nl + indent)
    member = f"{json.dumps(name, ensure_ascii=False)}: {body}"
    if members:
        at = members[-1][3]
        snippet = "," + nl + indent + member
        return text[:at] + snippet + text[at:], snippet, ""
    replaced = text[open_at + 1 : close]
    snippet = nl + indent + member + nl + line_indent(text, open_at)
    return text[: open_at + 1] + snippet + text[close:], snippet, replaced


def _remove_member_text(text: str, name: str) -> "str | None":
    """`text` without member `name` of its `mcpServers` object, by text (None if it is not there)."""
    top_members, _ = _members(text, _top(text))
    servers = [m for m in top_members if m[0] == "mcpServers"]
    if not servers:
        return None
    open_at = servers[0][2]
    members, close = _members(text, open_at)
    index = [m[0] for m in members].index(name) if name in [m[0] for m in members] else -1
    if index < 0:
        return None
    if index > 0:  # from the end of the member before it
        return text[: members[index - 1][3]] + text[members[index][3] :]
    if len(members) > 1:  # the first: up to the member after it
        return text[: members[0][1]] + text[members[1][1] :]
    return text[: open_at + 1] + text[close:]


def _without_ours(text: str, record: dict) -> str:
    """The mcp.json text with our server taken out: the recorded insertion undone when it is still there."""
    snippet = record.get("snippet")
    if snippet and text.count(snippet) == 1:
        candidate = text.replace(snippet, record.get("replaced", ""))
        try:
            data = load_json("", candidate)
            if AGENT_NAME not in (data.get("mcpServers") or {}):
                return candidate
        except InstallError:
            pass
    try:
        removed = _remove_member_text(text, AGENT_NAME)
    except (ValueError, IndexError):
        removed = None
    if removed is not None:
        return removed
    data = load_json("", text)
    if AGENT_NAME not in (data.get("mcpServers") or {}):
        return text
    del data["mcpServers"][AGENT_NAME]
    return dump_json(data, text)


def _has_our_server(path: str) -> bool:
    try:
        servers = load_json(path, read_text(path)).get("mcpServers")
    except InstallError:
        return False
    return isinstance(servers, dict) and AGENT_NAME in servers


def _is_ours(entry) -> bool:
    return isinstance(entry, dict) and MARK in str(entry.get("command", ""))


# What install writes


def _edit(path: str, edit, kind: str) -> Change:
    """Apply `edit(data) -> data` to a JSON file, as a Change (problem set when unreadable)."""
    try:
        before = read_text(path)
        data = load_json(path, before)
    except InstallError as exc:
        return Change(path, None, None, problem=str(exc))
    new = edit(json.loads(json.dumps(data)))  # edit a copy
    if new is None:
        return Change(path, before, None, record={"kind": kind})
    after = dump_json(new, before) if (new != data or before is None) else before
    return Change(path, before, after, record={"kind": kind})


def _agent_edit(portable: bool):
    def edit(data: dict) -> dict:
        if not data:
            data = json.loads(json.dumps(AGENT_SKELETON))
        # older installs approved every tool, forget too
        if data.get("allowedTools") == [f"@{AGENT_NAME}"]:
            data["allowedTools"] = _allowed_tools()
        servers = data.get("mcpServers")
        if not isinstance(servers, dict):
            servers = data["mcpServers"] = {}
        if AGENT_NAME not in servers or _is_ours_server(servers[AGENT_NAME]):
            servers[AGENT_NAME] = {
                **mcp_entry(portable, "kiro"),
                "timeout": 120000,
            }  # whichever MCP flag a version reads
        hooks = data.setdefault("hooks", {})
        for trigger, event, timeout in CLASSIC_HOOKS:
            kept = [h for h in hooks.get(trigger, []) if not _is_ours(h)]
            entry = {"command": hook_command(event, portable=portable), "timeout_ms": timeout}
            if trigger == "postToolUse":
                entry = {"matcher": "*", **entry}
            hooks[trigger] = kept + [entry]
        return data

    return edit


def _is_ours_server(entry) -> bool:
    return isinstance(entry, dict) and str(entry.get("command", "")).endswith("kirolearn-mcp")


def _mcp_install(path: str, entry: dict, previous: dict) -> Change:
    """Add (or update) our server in an mcp.json as text: the user's bytes stay theirs."""
    try:
        before = read_text(path)
        data = load_json(path, before)
    except InstallError as exc:
        return Change(path, None, None, problem=str(exc))
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        return Change(path, before, before, problem=f"{path}: mcpServers is not an object; left untouched")
    if servers.get(AGENT_NAME) == entry:
        return Change(path, before, before, record={"kind": "mcp"})
    if AGENT_NAME in servers and not _is_ours_server(servers[AGENT_NAME]):
        return Change(
            path,
            before,
            before,
            problem=f"{path} already has an MCP server named {AGENT_NAME!r} that is not ours; left untouched",
        )
    if before is None or not strip_bom(before).strip():
        after = json.dumps({"mcpServers": {AGENT_NAME: entry}}, indent=2) + "\n"
        return Change(
            path,
            before,
            after,
            record={"kind": "mcp", "created": before is None, "snippet": after, "replaced": before or ""},
        )
    base = _without_ours(before, previous) if AGENT_NAME in servers else before
    if not strip_bom(base).strip():  # what is left was ours alone
        after = json.dumps({"mcpServers": {AGENT_NAME: entry}}, indent=2) + "\n"
        return Change(path, before, after, record={"kind": "mcp", "snippet": after, "replaced": base})
    wanted = load_json(path, base)
    wanted.setdefault("mcpServers", {})[AGENT_NAME] = entry
    try:
        top = _members(base, _top(base))[0]
        found = [m for m in top if m[0] == "mcpServers"]
        if found:
            after, snippet, replaced = _insert(base, found[0][2], AGENT_NAME, entry)
        else:
            after, snippet, replaced = _insert(base, _top(base), "mcpServers", {AGENT_NAME: entry})
        if json.loads(strip_bom(after)) != wanted:
            raise ValueError("text edit disagrees with the structure")
    except (ValueError, IndexError):
        after, snippet, replaced = dump_json(wanted, base), None, None
    return Change(path, before, after, record={"kind": "mcp", "snippet": snippet, "replaced": replaced})


def v3_hook_file(portable: bool = False) -> dict:
    """The v3 / IDE 1.x hook file, all ours."""
    hooks = []
    for name, trigger, event, timeout in V3_HOOKS:
        hook = {
            "name": name,
            "trigger": trigger,
            "action": {"type": "command", "command": hook_command(event, portable=portable)},
            "timeout": timeout,
            "enabled": True,
        }
        if trigger == "PostToolUse":
            hook["matcher"] = ".*"
        hooks.append(hook)
    return {"version": "v1", "hooks": hooks}


def legacy_hook_file(stem: str, when: dict, event: str, description: str, portable: bool = False) -> dict:
    """One IDE 0.x `.kiro.hook` file, all ours."""
    return {
        "enabled": True,
        "name": f"kirolearn {event[4:].replace('-', ' ')}",
        "description": description,
        "version": "1",
        "when": when,
        "then": {"type": "runCommand", "command": hook_command(event, portable=portable)},
    }


def _owned(path: str, data: dict) -> Change:
    try:
        before = read_text(path)
    except InstallError as exc:
        return Change(path, None, None, problem=str(exc))
    after = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if before is not None and before != after:
        try:
            theirs = json.loads(strip_bom(before))
        except ValueError:
            theirs = None
        if not (isinstance(theirs, dict) and MARK in before):
            return Change(
                path, before, before, problem=f"{path} exists and is not kirolearn's; left untouched"
            )
    return Change(path, before, after, record={"kind": "owned"})


def project_dot(project: str) -> str:
    """The .kiro folder of a project directory."""
    return os.path.join(os.path.abspath(project), ".kiro")


def plan_install(project: "str | None", global_: bool, portable: bool = False) -> "list[Change]":
    """Every change install would make (nothing is written).

    Entries an older install left in the same scope that this layout no longer
    uses (a workspace agent, a second MCP definition) are planned for removal.
    """
    changes = []
    kiro = kiro_home()
    recorded = {e["path"]: e for e in load_record()}
    global_mcp = os.path.join(kiro, "settings", "mcp.json")
    scopes = []
    if global_:
        changes.append(
            _edit(os.path.join(kiro, "agents", f"{AGENT_NAME}.json"), _agent_edit(portable), "agent")
        )
        changes.append(_mcp_install(global_mcp, mcp_entry(portable, "kiro"), recorded.get(global_mcp, {})))
        scopes.append(kiro + os.sep)
    if project:
        dot = project_dot(project)
        if os.path.realpath(dot) == os.path.realpath(kiro):
            raise InstallError(
                f"{os.path.abspath(project)} is your home directory, whose .kiro is ~/.kiro",
                "wire it with `kirolearn install --global`, and a project with --project DIR",
            )
        changes.append(_owned(os.path.join(dot, "hooks", f"{AGENT_NAME}.json"), v3_hook_file(portable)))
        for stem, when, event, description in IDE_LEGACY_HOOKS:
            changes.append(
                _owned(
                    os.path.join(dot, "hooks", f"{stem}.kiro.hook"),
                    legacy_hook_file(stem, when, event, description, portable),
                )
            )
        if not (global_ or _has_our_server(global_mcp)):
            path = os.path.join(dot, "settings", "mcp.json")
            changes.append(_mcp_install(path, mcp_entry(portable, "kiro"), recorded.get(path, {})))
        scopes.append(dot + os.sep)
    planned = {c.path for c in changes}
    for path, entry in recorded.items():
        if (
            entry["kind"] in KIRO_KINDS
            and path not in planned
            and any(path.startswith(s) for s in scopes)
            and os.path.exists(path)
        ):
            stale = _undo(entry)
            stale.undo = True
            changes.append(stale)
    return changes


# What uninstall removes


def _agent_unedit(data: dict) -> "dict | None":
    servers = data.get("mcpServers", {})
    if isinstance(servers, dict):
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
    if data.get("name") == AGENT_NAME and set(data) <= set(AGENT_SKELETON):
        return None  # only what install created is left: remove the file
    return data


def _undo(entry: dict) -> Change:
    """The change that takes out what one recorded install put in a file."""
    path = entry["path"]
    try:
        text = read_text(path)
    except InstallError as exc:
        return Change(path, None, None, problem=str(exc))
    if entry["kind"] == "owned":
        if text and MARK in text:
            return Change(path, text, None, record=entry)
        return Change(path, text, text, problem=f"{path} no longer looks like kirolearn's; left alone")
    if entry["kind"] == "agent":
        return _edit(path, _agent_unedit, "agent")
    try:
        data = load_json(path, text)
    except InstallError as exc:
        return Change(path, text, text, problem=str(exc))
    if AGENT_NAME not in (data.get("mcpServers") or {}):
        return Change(path, text, text, record=entry)
    after = _without_ours(text, entry)
    left = load_json(path, after)
    if entry.get("created") and not left.get("mcpServers") and set(left) <= {"mcpServers"}:
        after = None  # the file was ours alone
    return Change(path, text, after, record=entry)


def plan_uninstall(only_project: "str | None" = None) -> "list[Change]":
    """The changes that undo every recorded install (or only those under one project)."""
    changes = []
    for entry in load_record():
        path = entry["path"]
        if entry["kind"] not in KIRO_KINDS:
            continue  # another agent's adapter undoes its own records
        if only_project and not path.startswith(project_dot(only_project) + os.sep):
            continue
        if not os.path.exists(path):
            continue
        changes.append(_undo(entry))
    return changes


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


def _recorded_projects() -> "list[str]":
    dots = {
        e["path"].split(os.sep + ".kiro" + os.sep)[0]
        for e in load_record()
        if os.sep + ".kiro" + os.sep in e["path"]
    }
    home = paths.user_home_dir()
    return sorted(d for d in dots if d and d != home)


def agent_conflicts(extra_projects: "list[str]" = ()) -> "list[str]":
    """Workspace agent files named like the global `kirolearn` agent (Kiro warns about the clash)."""
    try:
        global_agent = os.path.join(kiro_home(), "agents", f"{AGENT_NAME}.json")
    except InstallError:
        return []
    if not os.path.exists(global_agent):
        return []
    found = []
    for project in sorted({*_recorded_projects(), *extra_projects}):
        path = os.path.join(project_dot(project), "agents", f"{AGENT_NAME}.json")
        if os.path.exists(path) and path != global_agent:
            found.append(path)
    return found


def double_wiring(extra_projects: "list[str]" = ()) -> "list[str]":
    """Projects whose v3 hook file fires next to the global agent's classic hooks (Kiro CLI >= 3, --agent kirolearn)."""
    try:
        agent = load_json("", read_text(os.path.join(kiro_home(), "agents", f"{AGENT_NAME}.json")))
    except InstallError:
        return []
    if not any(
        _is_ours(h) for hooks in (agent.get("hooks") or {}).values() if isinstance(hooks, list) for h in hooks
    ):
        return []
    return [
        p
        for p in sorted({*_recorded_projects(), *extra_projects})
        if os.path.exists(os.path.join(project_dot(p), "hooks", f"{AGENT_NAME}.json"))
    ]
