"""Where each agent is wired now, read from the agents' own files: the user's and the current project's.

installs.json knows only what this user's `kirolearn install` wrote; a teammate's clone holds the
project's committed wiring (`install --project DIR --portable`) that no install here recorded. So
`status`, `doctor` and `install` read every agent's config files in both scopes and say which scope
wires which agent, whether its commands resolve on this PATH, and when one agent is wired twice (each
hook call would then run twice).
"""

import json
import os
import shutil

from kirolearn.core import paths
from kirolearn.core.errors import InstallError
from kirolearn.install.engine import MARK, PORTABLE_GUARD, commands, read_text, strip_bom

USER, PROJECT = "user", "project"


def current_project(cwd: "str | None" = None) -> "str | None":
    """The project of the working folder (the marker walk every component uses), or None at home."""
    from kirolearn.core.project import find_project_root

    cwd = os.path.abspath(cwd or os.getcwd())
    root, is_global = find_project_root(cwd)
    root = cwd if is_global else root
    home = paths.user_home_dir()
    if home and os.path.realpath(root) == os.path.realpath(home):
        return None
    return root


def _user(*parts: str) -> str:
    return os.path.join(paths.user_home_dir() or os.path.expanduser("~"), *parts)


def _codex_home() -> str:
    return os.path.abspath(os.environ["CODEX_HOME"]) if os.environ.get("CODEX_HOME") else _user(".codex")


def _opencode_user(folder: str = "opencode", name: str = "opencode.json") -> str:
    return os.path.join(os.environ.get("XDG_CONFIG_HOME") or _user(".config"), folder, name)


def candidates(agent: str, scope: str, project: "str | None" = None) -> "list[str]":
    """The files of `agent` that can hold kirolearn's hooks or MCP server in one scope."""
    if scope == USER:
        table = {
            "kiro": [_user(".kiro", "agents", "kirolearn.json"), _user(".kiro", "settings", "mcp.json")],
            "claude-code": [_user(".claude", "settings.json"), _user(".claude.json")],
            "codex": [os.path.join(_codex_home(), "hooks.json"), os.path.join(_codex_home(), "config.toml")],
            "gemini": [_user(".gemini", "settings.json")],
            "cursor": [_user(".cursor", "hooks.json"), _user(".cursor", "mcp.json")],
            "copilot": [_user(".copilot", "mcp-config.json")],
            "opencode": [_opencode_user()],
            "qwen-code": [_user(".qwen", "settings.json")],
            "auggie": [_user(".augment", "settings.json")],
            "kilo-code": [_opencode_user("kilo", "kilo.json")],
            "factory-droid": [_user(".factory", "settings.json"), _user(".factory", "mcp.json")],
        }
        return table.get(agent, [])
    if not project:
        return []
    root = os.path.abspath(project)

    def at(*parts):
        return os.path.join(root, *parts)

    table = {
        "kiro": [at(".kiro", "hooks", "kirolearn.json"), at(".kiro", "settings", "mcp.json")],
        "claude-code": [
            at(".claude", "settings.json"),
            at(".claude", "settings.local.json"),
            at(".mcp.json"),
        ],
        "codex": [at(".codex", "hooks.json"), at(".codex", "config.toml")],
        "gemini": [at(".gemini", "settings.json")],
        "cursor": [at(".cursor", "hooks.json"), at(".cursor", "mcp.json")],
        "copilot": [at(".github", "hooks", "kirolearn.json"), at(".github", "mcp.json")],
        "opencode": [at("opencode.json")],
        "qwen-code": [at(".qwen", "settings.json")],
        "auggie": [at(".augment", "settings.json"), at(".augment", "settings.local.json")],
        "kilo-code": [at("kilo.json")],
        "factory-droid": [at(".factory", "settings.json"), at(".factory", "mcp.json")],
    }
    return table.get(agent, [])


def _data(path: str):
    try:
        text = read_text(path)
    except InstallError:
        return None
    if not text:
        return None
    try:
        if path.endswith(".toml"):
            from kirolearn.install.wiring import parse_toml

            return parse_toml(text)
        return json.loads(strip_bom(text))
    except ValueError:
        return None


def _servers(data) -> "list[str]":
    """The commands of kirolearn's MCP server entries in a config file (every agent's key for them)."""
    from kirolearn.core.mcp_tools import MCP_SERVER

    found: list = []
    if not isinstance(data, dict):
        return found
    for key in ("mcpServers", "mcp", "mcp_servers"):
        servers = data.get(key)
        entry = servers.get(MCP_SERVER) if isinstance(servers, dict) else None
        command = entry.get("command") if isinstance(entry, dict) else None
        if isinstance(command, list):
            command = command[0] if command else ""
        if isinstance(command, str) and os.path.basename(command).startswith("kirolearn-mcp"):
            found.append(command)
    return found


def _our_hooks(agent: str, data) -> "list[str]":
    """kirolearn's hook commands for `agent` in a config file's data."""
    if agent in ("opencode", "kilo-code"):  # their hooks are a plugin the config names
        plugins = data.get("plugin") if isinstance(data, dict) else None
        return [p for p in plugins or [] if isinstance(p, str) and "kirolearn" in p]
    ours = []
    for command in commands(data):
        if MARK not in command:
            continue
        named = f"--agent {agent}" in command
        if named or (agent == "kiro" and "--agent " not in command):
            ours.append(command)
    return ours


def _resolves(command: str) -> "list[str]":
    """The programs of a wired command that this PATH (or this disk) does not find."""
    from kirolearn.install.wiring import hook_program

    if command.startswith(("./", "file:")):  # opencode's plugin: a file
        return []
    if os.path.basename(command).startswith("kirolearn-mcp") and " " not in command:
        found = (
            shutil.which(command) if os.sep not in command else (command if os.path.exists(command) else None)
        )
        return [] if found else [command]
    _, program = hook_program(command)
    missing = []
    for word in program[:1]:
        exists = os.path.exists(word) if os.sep in word else shutil.which(word) is not None
        if not exists:
            missing.append(word)
    return missing


def _portable(command: str) -> bool:
    return command.startswith(PORTABLE_GUARD) or command.startswith("./") or os.sep not in command.split()[0]


def scan(project: "str | None" = None, agents: "list[str] | None" = None) -> "list[dict]":
    """Each (agent, scope) that wires kirolearn now: its files, whether it is portable and what of its
    commands this PATH does not find. `project` defaults to the working folder's."""
    from kirolearn.capture.agents import names

    project = current_project() if project is None else project
    found = []
    for agent in agents or names():
        for scope in (USER, PROJECT):
            files, hooks, servers = [], [], []
            for path in candidates(agent, scope, project):
                if not os.path.isfile(path):
                    continue
                data = _data(path)
                if data is None:
                    continue
                h, s = _our_hooks(agent, data), _servers(data)
                if h or s:
                    files.append(path)
                    hooks += h
                    servers += s
            if not hooks:
                # an MCP entry alone records nothing: not a wiring of the hooks
                continue
            wired = [*hooks, *servers]
            found.append(
                {
                    "agent": agent,
                    "scope": scope,
                    "project": project if scope == PROJECT else None,
                    "files": files,
                    "portable": all(_portable(c) for c in wired),
                    "mcp": bool(servers),
                    "missing": sorted({m for c in wired for m in _resolves(c)}),
                }
            )
    return found


# Kiro's two scopes wire different surfaces: both at once is its layout.
SCOPES_APART = ("kiro",)


def doubles(found: "list[dict]") -> "list[tuple[dict, dict]]":
    """Agents wired in both scopes: every hook call runs twice (the hook keeps one event; the agent pays twice)."""
    by_agent: dict = {}
    for entry in found:
        if entry["agent"] not in SCOPES_APART:
            by_agent.setdefault(entry["agent"], {})[entry["scope"]] = entry
    return [(s[USER], s[PROJECT]) for s in by_agent.values() if USER in s and PROJECT in s]


def describe(entry: dict) -> str:
    """One line: `claude-code: wired by this project (portable): FILES`, and what this PATH lacks."""
    where = "wired by this project" if entry["scope"] == PROJECT else "wired for this user"
    line = (
        f"{entry['agent']}: {where}{' (portable)' if entry['portable'] else ''}: {', '.join(entry['files'])}"
    )
    if entry["missing"]:
        line += f"; not found on this PATH: {', '.join(entry['missing'])}"
    return line


def scope_of(path: str, project: "str | None") -> str:
    """Which scope a recorded file belongs to: the project's when it lies inside `project`."""
    if project and os.path.abspath(path).startswith(os.path.abspath(project) + os.sep):
        return PROJECT
    return USER


def _user_dirs() -> "list[str]":
    return [
        _user(".kiro"),
        _user(".claude"),
        _user(".claude.json"),
        _codex_home(),
        _user(".gemini"),
        _user(".cursor"),
        _user(".copilot"),
        _user(".qwen"),
        _user(".augment"),
        _user(".factory"),
        os.path.dirname(_opencode_user()),
        os.path.dirname(_opencode_user("kilo")),
    ]


def recorded_project(entry: dict) -> "str | None":
    """The project a recorded install belongs to (None: the user's scope).

    Installs record it; for older records, a file under the user's agent folders is the user's,
    anything else the project folder holding its agent folder."""
    if "project" in entry:
        return entry["project"] or None
    path = os.path.abspath(entry.get("path", ""))
    if any(path == d or path.startswith(d + os.sep) for d in _user_dirs()):
        return None
    if path.startswith(os.path.abspath(paths.home()) + os.sep):
        return None  # kirolearn's own folder (opencode's plugin)
    parts = path.split(os.sep)
    for i, part in enumerate(parts):
        if part in (
            ".kiro",
            ".claude",
            ".github",
            ".codex",
            ".gemini",
            ".cursor",
            ".kirolearn",
            ".opencode",
            ".qwen",
            ".augment",
            ".factory",
        ):
            return os.sep.join(parts[:i]) or os.sep
    # .mcp.json, opencode.json, kilo.json: at the project's top
    return os.path.dirname(path)


def recorded_scope(entry: dict) -> str:
    return PROJECT if recorded_project(entry) else USER
