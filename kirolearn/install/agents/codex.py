"""Codex CLI's installer targets: $CODEX_HOME (default ~/.codex): hooks.json, and config.toml (MCP server + hook trust).

The hook-time half of this agent lives in kirolearn.capture.agents.codex; this is the CLI's half.
"""

import os

from kirolearn.capture.agents.codex import HOOKS, NAME
from kirolearn.capture.agents.common import APPROVED_TOOLS
from kirolearn.core.mcp_tools import MCP_SERVER
from kirolearn.install.agents import common


def codex_home() -> str:
    if os.environ.get("CODEX_HOME"):
        return os.path.abspath(os.environ["CODEX_HOME"])
    return common.user_path(".codex")


def hook_command(portable: bool = False) -> str:
    """The command Codex runs (through a shell); a missing binary is a no-op."""
    return common.hook_command(NAME, portable=portable)


def _handler(timeout: int, portable: bool = False) -> dict:
    return {"type": "command", "command": hook_command(portable), "timeout": timeout}


def _is_ours(group) -> bool:
    return common.is_our_group(group, NAME)


def _unwired(data: dict) -> dict:
    """`data` without our hook groups (a list, or `hooks`, that only we emptied goes too)."""
    common.drop_our_hooks(data, _is_ours)
    return data


_hooks_problem = common.hooks_problem


def trust_hash(label: str, handler: dict) -> str:
    """Codex's trust hash of one of our hooks (no matcher): SHA-256 of its canonical normalised JSON."""
    import hashlib
    import json

    identity = {"event_name": label, "hooks": [{**handler, "async": False}]}
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _toml_string(text: str) -> str:
    import json

    # a JSON string is a TOML basic string (BMP text)
    return json.dumps(text, ensure_ascii=False)


def config_block(hooks_path: str, data: dict, portable: bool = False) -> str:
    """The TOML tables install appends to config.toml: the MCP server, tool approvals and hook trust."""
    from kirolearn.install import engine as install

    entry = install.mcp_entry(portable, NAME)
    lines = [f"[mcp_servers.{MCP_SERVER}]", f"command = {_toml_string(entry['command'])}", "args = []"]
    if entry["env"]:
        lines.append(
            "env = { " + ", ".join(f"{k} = {_toml_string(v)}" for k, v in entry["env"].items()) + " }"
        )
    lines.append("")
    # the rest keep Codex's default: ask (declined in `codex exec`)
    for tool in APPROVED_TOOLS:
        lines += [f"[mcp_servers.{MCP_SERVER}.tools.{tool}]", 'approval_mode = "approve"', ""]
    existing = data.get("hooks", {}) if isinstance(data.get("hooks"), dict) else {}
    for event, label, timeout in HOOKS:
        index = len([g for g in existing.get(event, []) or [] if not _is_ours(g)])
        key = f"{hooks_path}:{label}:{index}:0"
        lines += [
            f"[hooks.state.{_toml_string(key)}]",
            f"trusted_hash = {_toml_string(trust_hash(label, _handler(timeout, portable)))}",
            "",
        ]
    return "\n".join(lines)


def _headers(block: str) -> "list[str]":
    return [line for line in block.splitlines() if line.startswith("[")]


def plan_install(project: "str | None", global_: bool = False, portable: bool = False, **options):
    """hooks.json and config.toml under $CODEX_HOME (nothing is written).

    Codex reads a project's .codex/ only in a project the user trusted, so
    kirolearn wires the user's Codex home, for every project; kirolearn sorts
    memories by the project each hook's `cwd` is in.
    """
    from kirolearn.install import edit as install_edit
    from kirolearn.install import engine as install
    from kirolearn.install.edit import Item

    home = codex_home()
    hooks_path = os.path.join(home, "hooks.json")
    recorded = {e["path"]: e for e in install.load_record()}
    additions = [
        Item(("hooks", event), {"hooks": [_handler(timeout, portable)]}) for event, _, timeout in HOOKS
    ]
    hooks_change = install_edit.plan(
        hooks_path, additions, "codex-hooks", unwired=_unwired, problem=_hooks_problem
    )
    if hooks_change.problem:
        return [hooks_change]
    data = install.load_json(hooks_path, hooks_change.before)
    block = config_block(hooks_path, _unwired(data), portable)
    config_path = os.path.join(home, "config.toml")
    config_change = install_edit.plan_toml(
        config_path, "codex-config", block, _headers(block), recorded.get(config_path)
    )
    return [hooks_change, config_change]


def plan_uninstall(only_project: "str | None" = None):
    """Undo each recorded Codex install: the user's exact bytes while the files are as install left them."""
    from kirolearn.install import edit as install_edit
    from kirolearn.install import engine as install

    changes: list = []
    if only_project:
        # Codex is wired in the user's Codex home, never into a project
        return changes
    for entry in install.load_record():
        if entry.get("kind") == "codex-hooks":
            change = install_edit.undo(entry, unwired=_unwired)
        elif entry.get("kind") == "codex-config":
            change = install_edit.undo_toml(entry)
        else:
            continue
        if change is not None:
            changes.append(change)
    return changes
