"""opencode's installer targets: the plugin file, and opencode.json's `mcp` and `permission`.

The hook-time half of this agent lives in kirolearn.capture.agents.opencode; this is the CLI's half.
"""

import os

from kirolearn.capture.agents.opencode import NAME
from kirolearn.install.agents import common

KINDS = ("opencode-plugin", "opencode-config")
PLUGIN_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opencode_plugin.js")


def _root(project: "str | None") -> str:
    if project:
        return os.path.abspath(project)
    from kirolearn.core import paths

    home = paths.user_home_dir() or os.path.expanduser("~")
    return os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "opencode")


PORTABLE_PLUGIN = (
    # `--portable`: in the project, named relative to opencode.json
    "./.kirolearn/opencode-plugin.js"
)


def plugin_path(project: "str | None", portable: bool = False) -> str:
    """The plugin file, one per wired config (a hash of its folder), under $KIROLEARN_HOME/opencode/;
    portable, the project's `.kirolearn/opencode-plugin.js` (a file the team commits)."""
    import hashlib

    from kirolearn.core import paths

    if portable:
        return os.path.join(_root(project), *PORTABLE_PLUGIN.split("/")[1:])
    key = hashlib.sha256(_root(project).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return os.path.join(paths.home(), "opencode", f"kirolearn-{key}.js")


def plugin_url(project: "str | None", portable: bool = False) -> str:
    """How opencode.json names the plugin: its file:// URL, or, portable, its path relative to opencode.json
    (measured with opencode 1.18.33: `./…` resolves against the config's folder, from any working folder,
    and loads with no npm install and no .opencode/node_modules; `file:./…` and `file://./…` load nothing)."""
    import pathlib

    if portable:
        return PORTABLE_PLUGIN
    return pathlib.Path(plugin_path(project)).as_uri()


def config_path(project: "str | None") -> str:
    return os.path.join(_root(project), "opencode.json")


def plugin_text(portable: bool = False) -> str:
    import json

    from kirolearn.core import paths
    from kirolearn.install import engine as install

    env = {paths.HOME_ENV: paths.home()} if install.home_travels(portable) else {}
    with open(PLUGIN_TEMPLATE, encoding="utf-8") as fh:
        text = fh.read()
    argv = [*install.hook_argv(portable), "--agent", NAME]
    missing = install.NOT_ON_PATH if portable else None
    return (
        text.replace("__KIROLEARN_HOOK_ARGV__", json.dumps(argv))
        .replace("__KIROLEARN_HOOK_ENV__", json.dumps(env))
        .replace("__KIROLEARN_NOT_ON_PATH__", json.dumps(missing))
    )


def mcp_entry(portable: bool = False) -> dict:
    from kirolearn.install import engine as install

    entry = install.mcp_entry(portable, NAME)
    return {
        "type": "local",
        "command": [entry["command"], *entry["args"]],
        "environment": entry["env"],
        "enabled": True,
    }


def _server_is_ours(value) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("command"), list)
        and bool(value["command"])
        and str(value["command"][0]).endswith("kirolearn-mcp")
    )


def _config_edits(project: "str | None", portable: bool = False) -> list:
    from kirolearn.core import mcp_tools as agents
    from kirolearn.install.edit import Item, Member

    return [
        Item(("plugin",), plugin_url(project, portable)),
        Member(("mcp",), agents.MCP_SERVER, mcp_entry(portable)),
        *(
            Member(("permission",), f"{agents.MCP_SERVER}_{tool}", "ask")
            for tool in agents.MCP_DESTRUCTIVE_TOOLS
        ),
    ]


def plan_install(project: "str | None", global_: bool = False, portable: bool = False, **options):
    """The plugin (a file of ours) and our entries in opencode.json (added as text, recorded)."""
    from kirolearn.install import edit as install_edit
    from kirolearn.install import engine as install

    # the relative plugin name was measured in a project's opencode.json only
    if portable and not project:
        raise install.InstallError(
            "--portable for opencode wires a project: the plugin goes into DIR/.kirolearn/ and opencode.json "
            "names it relative to itself",
            "add --project DIR",
        )

    previous = {e["path"]: e for e in install.load_record() if e.get("kind") in KINDS}
    path = config_path(project)
    if os.path.exists(os.path.join(os.path.dirname(path), "opencode.jsonc")):
        return [
            install.Change(
                path,
                None,
                None,
                problem=f"{os.path.dirname(path)} has an opencode.jsonc "
                "(JSON with comments), which kirolearn does not edit; add the `mcp.kirolearn` "
                "entry of docs/agents/opencode.md by hand",
            )
        ]
    changes = [
        install_edit.owned(
            plugin_path(project, portable), plugin_text(portable), "opencode-plugin", mark=common.MARK
        ),
        install_edit.plan(
            path,
            _config_edits(project, portable),
            "opencode-config",
            ours=_server_is_ours,
            previous=previous.get(path),
        ),
    ]
    for change in changes:
        change.record.setdefault("agent", NAME)
        change.record["project"] = project and os.path.abspath(project)
        change.record["portable"] = portable
    return changes


def plan_uninstall(only_project: "str | None" = None):
    from kirolearn.install import edit as install_edit
    from kirolearn.install import engine as install

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
            change = install_edit.undo(
                entry, _config_edits(entry.get("project"), bool(entry.get("portable"))), ours=_server_is_ours
            )
        if change is not None:
            changes.append(change)
    return changes


def wired(entry: dict, data) -> bool:
    from kirolearn.core import mcp_tools as agents
    from kirolearn.install import engine as install

    if entry.get("kind") == "opencode-plugin":
        try:
            return common.MARK in (install.read_text(entry["path"]) or "")
        except install.InstallError:
            return False
    return isinstance(data, dict) and _server_is_ours((data.get("mcp") or {}).get(agents.MCP_SERVER))
