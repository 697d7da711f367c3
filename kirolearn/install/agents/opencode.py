"""opencode's installer targets: the plugin file, and opencode.json's `mcp` and `permission`.

The hook-time half of this agent lives in kirolearn.capture.agents.opencode; this is the CLI's half.
`Wiring` is the same for its forks that load opencode plugins (Kilo Code: kirolearn.install.agents.kilo_code),
named by each fork's folders and files.
"""

import os

from kirolearn.capture.agents.opencode import NAME
from kirolearn.install.agents import common

PLUGIN_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opencode_plugin.js")


class Wiring:
    """The plugin and config edits of one opencode-family agent.

    `agent` names it (the hook's --agent and the records), `folder` is its user config folder under
    $XDG_CONFIG_HOME, `config` its JSON config file's name, `plugin` the portable plugin's file name in a
    project's .kirolearn/, `seed` the members a config file install creates starts with (what the agent
    would otherwise write into it), and `merged_jsonc` says the agent merges `<config>c` beside the
    JSON file, so a plain-JSON one that names none of our keys does not stop the install.
    """

    def __init__(self, agent: str, folder: str, config: str, plugin: str, seed=(), merged_jsonc=False):
        self.agent = agent
        self.folder = folder
        self.config = config
        self.portable_plugin = f"./.kirolearn/{plugin}"  # `--portable`: named relative to the config
        self.seed = dict(seed)
        self.merged_jsonc = merged_jsonc
        self.KINDS = (f"{agent}-plugin", f"{agent}-config")

    def root(self, project: "str | None") -> str:
        if project:
            return os.path.abspath(project)
        from kirolearn.core import paths

        home = paths.user_home_dir() or os.path.expanduser("~")
        return os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), self.folder)

    def plugin_path(self, project: "str | None", portable: bool = False) -> str:
        """The plugin file, one per wired config (a hash of its folder), under $KIROLEARN_HOME/<agent>/;
        portable, the project's `.kirolearn/<plugin>` (a file the team commits)."""
        import hashlib

        from kirolearn.core import paths

        if portable:
            return os.path.join(self.root(project), *self.portable_plugin.split("/")[1:])
        key = hashlib.sha256(self.root(project).encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return os.path.join(paths.home(), self.agent, f"kirolearn-{key}.js")

    def plugin_url(self, project: "str | None", portable: bool = False) -> str:
        """How the config names the plugin: its file:// URL, or, portable, its path relative to the config
        (measured with opencode 1.18.33: `./…` resolves against the config's folder, from any working
        folder, and loads with no npm install and no .opencode/node_modules; `file:./…` and `file://./…`
        load nothing)."""
        import pathlib

        if portable:
            return self.portable_plugin
        return pathlib.Path(self.plugin_path(project)).as_uri()

    def config_path(self, project: "str | None") -> str:
        return os.path.join(self.root(project), self.config)

    def plugin_text(self, portable: bool = False) -> str:
        import json

        from kirolearn.core import paths
        from kirolearn.install import engine as install

        env = {paths.HOME_ENV: paths.home()} if install.home_travels(portable) else {}
        with open(PLUGIN_TEMPLATE, encoding="utf-8") as fh:
            text = fh.read()
        argv = [*install.hook_argv(portable), "--agent", self.agent]
        missing = install.NOT_ON_PATH if portable else None
        return (
            text.replace("__KIROLEARN_HOOK_ARGV__", json.dumps(argv))
            .replace("__KIROLEARN_HOOK_ENV__", json.dumps(env))
            .replace("__KIROLEARN_NOT_ON_PATH__", json.dumps(missing))
        )

    def mcp_entry(self, portable: bool = False) -> dict:
        from kirolearn.install import engine as install

        entry = install.mcp_entry(portable, self.agent)
        return {
            "type": "local",
            "command": [entry["command"], *entry["args"]],
            "environment": entry["env"],
            "enabled": True,
        }

    def _config_edits(self, project: "str | None", portable: bool = False, created: bool = False) -> list:
        from kirolearn.core import mcp_tools as agents
        from kirolearn.install.edit import Item, Member

        return [
            *(Member((), key, value) for key, value in (self.seed.items() if created else ())),
            Item(("plugin",), self.plugin_url(project, portable)),
            Member(("mcp",), agents.MCP_SERVER, self.mcp_entry(portable)),
            *(
                Member(("permission",), f"{agents.MCP_SERVER}_{tool}", "ask")
                for tool in agents.MCP_DESTRUCTIVE_TOOLS
            ),
        ]

    def _jsonc_problem(self, path: str) -> "str | None":
        """Why the `<config>c` beside `path` stops the install (None: it does not)."""
        import json

        from kirolearn.install import engine as install

        jsonc = path + "c"
        if not os.path.exists(jsonc):
            return None
        if self.merged_jsonc:  # e.g. the `{"$schema": …}` Kilo Code writes on its first run; it loads last
            try:
                data = json.loads(install.strip_bom(install.read_text(jsonc) or "") or "{}")
            except (ValueError, install.InstallError):
                data = None
            if isinstance(data, dict) and not _overrides(data):
                return None
        why = "JSON with comments" + (
            ", or a `plugin` list or kirolearn entries of its own, which would win over kirolearn's"
            if self.merged_jsonc
            else ""
        )
        return (
            f"{os.path.dirname(path)} has a {os.path.basename(jsonc)} ({why}), which kirolearn does not edit; "
            f"add the entries of docs/agents/{self.agent}.md by hand"
        )

    def plan_install(self, project: "str | None", global_: bool = False, portable: bool = False, **options):
        """The plugin (a file of ours) and our entries in the config (added as text, recorded)."""
        from kirolearn.install import edit as install_edit
        from kirolearn.install import engine as install

        if portable and not project:  # the relative plugin name was measured in a project's config only
            raise install.InstallError(
                f"--portable for {self.agent} wires a project: the plugin goes into DIR/.kirolearn/ and "
                f"{self.config} names it relative to itself",
                "add --project DIR",
            )

        previous = {e["path"]: e for e in install.load_record() if e.get("kind") in self.KINDS}
        path = self.config_path(project)
        problem = self._jsonc_problem(path)
        if problem:
            return [install.Change(path, None, None, problem=problem)]
        created = not os.path.exists(path)
        changes = [
            install_edit.owned(
                self.plugin_path(project, portable),
                self.plugin_text(portable),
                self.KINDS[0],
                mark=common.MARK,
            ),
            install_edit.plan(
                path,
                self._config_edits(project, portable, created),
                self.KINDS[1],
                ours=_server_is_ours,
                previous=previous.get(path),
            ),
        ]
        for change in changes:
            change.record.setdefault("agent", self.agent)
            change.record["project"] = project and os.path.abspath(project)
            change.record["portable"] = portable
        return changes

    def plan_uninstall(self, only_project: "str | None" = None):
        from kirolearn.install import edit as install_edit
        from kirolearn.install import engine as install

        changes = []
        for entry in install.load_record():
            if entry.get("kind") not in self.KINDS:
                continue
            if entry["kind"] == self.KINDS[0]:
                if only_project and entry.get("project") != os.path.abspath(only_project):
                    continue
                change = install_edit.undo_owned(entry, mark=common.MARK)
            else:
                if not install_edit.under(entry["path"], only_project):
                    continue
                edits = self._config_edits(
                    entry.get("project"), bool(entry.get("portable")), bool(entry.get("created"))
                )
                change = install_edit.undo(entry, edits, ours=_server_is_ours)
            if change is not None:
                changes.append(change)
        return changes

    def wired(self, entry: dict, data) -> bool:
        from kirolearn.core import mcp_tools as agents
        from kirolearn.install import engine as install

        if entry.get("kind") == self.KINDS[0]:
            try:
                return common.MARK in (install.read_text(entry["path"]) or "")
            except install.InstallError:
                return False
        return isinstance(data, dict) and _server_is_ours((data.get("mcp") or {}).get(agents.MCP_SERVER))


def _overrides(data: dict) -> bool:
    """Would this merged config's members replace ours: its own `plugin` list, a `kirolearn` server, a
    permission that is no table of names or names a kirolearn tool?"""
    from kirolearn.core import mcp_tools as agents

    permission = data.get("permission", {})
    return (
        "plugin" in data
        or (isinstance(data.get("mcp"), dict) and agents.MCP_SERVER in data["mcp"])
        or not isinstance(permission, dict)
        or any(str(name).startswith(agents.MCP_SERVER) for name in permission)
    )


def _server_is_ours(value) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("command"), list)
        and bool(value["command"])
        and str(value["command"][0]).endswith("kirolearn-mcp")
    )


OPENCODE = Wiring(NAME, "opencode", "opencode.json", "opencode-plugin.js")
KINDS = OPENCODE.KINDS
PORTABLE_PLUGIN = OPENCODE.portable_plugin
plugin_path = OPENCODE.plugin_path
plugin_url = OPENCODE.plugin_url
config_path = OPENCODE.config_path
plugin_text = OPENCODE.plugin_text
mcp_entry = OPENCODE.mcp_entry
plan_install = OPENCODE.plan_install
plan_uninstall = OPENCODE.plan_uninstall
wired = OPENCODE.wired
