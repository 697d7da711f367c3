"""The opencode adapter: no shell hooks, so a JavaScript plugin runs kirolearn-hook per event.

Measured with opencode 1.18.33 (shared/reference/agents-offline.md): plugins in
`.opencode/plugin/*.js` (or `~/.config/opencode/plugin/`) get `chat.message`
(input.sessionID, output.parts), `tool.execute.after` (input.tool, .args,
.sessionID; output.title, .output, .metadata), `experimental.chat.system.transform`
(input.sessionID; output.system, a list of strings sent as the system prompt)
and every bus event (`message.updated`, `message.part.updated`, `session.idle`).
Install lists the plugin in opencode.json's `plugin` array as a file:// URL of a
file in $KIROLEARN_HOME/opencode/: a plugin inside `.opencode/` makes opencode
create `.opencode/node_modules` and install its plugin SDK from npm on every
start (measured), which kirolearn's plugin does not need.
The plugin kirolearn installs (opencode_plugin.js) sends kirolearn-hook
payloads already in kirolearn's own shape: `session.created` (the first sight
of a session), `chat.message` (prompt), `tool.execute.after`, and
`session.idle` with the turn's final answer (the newest assistant text the
plugin saw streamed). Recalled memory goes back through the system-prompt
transform. MCP: the `mcp` block of opencode.json, tools named
`kirolearn_<tool>`; opencode allows tools unless `permission` says "ask":
install sets "ask" for the destructive ones.

Standard library only (the hook imports it); the installer part is used by the CLI.
"""

import os

from kirolearn.capture.agents import common

NAME = "opencode"
GENERATIONS = ("opencode",)
SURFACES = ("opencode",)
SESSION_ENV = None

TRIGGERS = {
    "session.created": "agentSpawn",
    "chat.message": "userPromptSubmit",
    "tool.execute.before": "preToolUse",
    "tool.execute.after": "postToolUse",
    "session.idle": "stop",
}
NOTE_TRIGGERS = ("session.compacted", "session.error", "session.deleted")


def resolve_trigger(name: str) -> "tuple[str, str]":
    return common.resolve_trigger(name, TRIGGERS, NOTE_TRIGGERS, "opencode", "opencode plugin event")


surface = common.fixed_surface("opencode")


payload_from_env = common.payload_from_env  # the plugin sends stdin JSON


def normalise(trigger: str, payload: dict, env) -> dict:
    """The plugin already sends kirolearn's keys."""
    return payload


def context_output(trigger: str, text: str) -> str:
    """Plain text: the plugin adds it to the system prompt."""
    return text


# --- installing: the plugin file and opencode.json's `mcp` and `permission` ---------------------------

KINDS = ("opencode-plugin", "opencode-config")
PLUGIN_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opencode_plugin.js")


def _root(project: "str | None") -> str:
    if project:
        return os.path.abspath(project)
    from kirolearn import config

    home = config.user_home_dir() or os.path.expanduser("~")
    return os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "opencode")


def plugin_path(project: "str | None") -> str:
    """The plugin file, one per wired config (a hash of its folder), under $KIROLEARN_HOME/opencode/."""
    import hashlib

    from kirolearn import config

    key = hashlib.sha256(_root(project).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return os.path.join(config.home(), "opencode", f"kirolearn-{key}.js")


def plugin_url(project: "str | None") -> str:
    import pathlib

    return pathlib.Path(plugin_path(project)).as_uri()


def config_path(project: "str | None") -> str:
    return os.path.join(_root(project), "opencode.json")


def plugin_text() -> str:
    import json

    from kirolearn import config, install

    env = {config.HOME_ENV: config.home()} if install._home_travels(False) else {}
    with open(PLUGIN_TEMPLATE, encoding="utf-8") as fh:
        text = fh.read()
    argv = [*install.hook_argv(), "--agent", NAME]
    return text.replace("__KIROLEARN_HOOK_ARGV__", json.dumps(argv)).replace("__KIROLEARN_HOOK_ENV__", json.dumps(env))


def mcp_entry() -> dict:
    from kirolearn import install

    entry = install.mcp_entry()
    return {"type": "local", "command": [entry["command"], *entry["args"]], "environment": entry["env"],
            "enabled": True}


def _server_is_ours(value) -> bool:
    return isinstance(value, dict) and isinstance(value.get("command"), list) and bool(value["command"]) \
        and str(value["command"][0]).endswith("kirolearn-mcp")


def _config_edits(project: "str | None") -> list:
    from kirolearn.capture import agents
    from kirolearn.install_edit import Item, Member

    return [Item(("plugin",), plugin_url(project)),
            Member(("mcp",), agents.MCP_SERVER, mcp_entry()),
            *(Member(("permission",), f"{agents.MCP_SERVER}_{tool}", "ask") for tool in agents.MCP_DESTRUCTIVE_TOOLS)]


def plan_install(project: "str | None", global_: bool = False, **options):
    """The plugin (a file of ours) and our entries in opencode.json (added as text, recorded)."""
    from kirolearn import install, install_edit

    previous = {e["path"]: e for e in install.load_record() if e.get("kind") in KINDS}
    path = config_path(project)
    if os.path.exists(os.path.join(os.path.dirname(path), "opencode.jsonc")):
        return [install.Change(path, None, None, problem=f"{os.path.dirname(path)} has an opencode.jsonc "
                               "(JSON with comments), which kirolearn does not edit; add the `mcp.kirolearn` "
                               "entry of docs/agents/opencode.md by hand")]
    changes = [install_edit.owned(plugin_path(project), plugin_text(), "opencode-plugin", mark=common.MARK),
               install_edit.plan(path, _config_edits(project), "opencode-config", ours=_server_is_ours,
                                 previous=previous.get(path))]
    for change in changes:
        change.record.setdefault("agent", NAME)
        change.record["project"] = project and os.path.abspath(project)
    return changes


def plan_uninstall(only_project: "str | None" = None):
    from kirolearn import install, install_edit

    changes = []
    for entry in install.load_record():
        if entry.get("kind") not in KINDS:
            continue
        if entry["kind"] == "opencode-plugin":
            if only_project and entry.get("project") != os.path.abspath(only_project):
                continue
            change = install_edit.undo_owned(entry, mark=common.MARK)
        else:
            if not install_edit.under(entry["path"], only_project):
                continue
            change = install_edit.undo(entry, _config_edits(entry.get("project")), ours=_server_is_ours)
        if change is not None:
            changes.append(change)
    return changes


def wired(entry: dict, data) -> bool:
    from kirolearn import install
    from kirolearn.capture import agents

    if entry.get("kind") == "opencode-plugin":
        try:
            return common.MARK in (install._read(entry["path"]) or "")
        except install.InstallError:
            return False
    return isinstance(data, dict) and _server_is_ours((data.get("mcp") or {}).get(agents.MCP_SERVER))
