"""The Codex CLI adapter (`@openai/codex`, measured on 0.171.0): its hooks, its config, its trust.

Facts (shared/reference/agents-offline.md, and docs/agents/codex.md for what
the real client showed): `~/.codex/hooks.json` has Claude Code's shape; every
payload is stdin JSON with `session_id`, `transcript_path` (a rollout JSONL),
`cwd`, `hook_event_name`, `model`, `permission_mode`, plus `turn_id` inside a
turn. Tool hooks carry `tool_name` (`Bash` for its shell, `mcp__<server>__<tool>`
for MCP tools), `tool_input`, `tool_response` and `tool_use_id`. `Stop` carries
`last_assistant_message`, the turn's final text: it is preferred over the
rollout file, read only when the field is missing. Plain stdout and the JSON
`hookSpecificOutput.additionalContext` of SessionStart and UserPromptSubmit both
reach the model as a developer message; kirolearn prints the JSON form, which
no memory text can be mistaken for.

Codex runs a user hook only once it is trusted: `[hooks.state."<hooks.json
path>:<event>:<group>:<handler>"] trusted_hash = "sha256:..."` in
`~/.codex/config.toml`, the hash being SHA-256 of the canonical JSON of the
normalised hook (event label, matcher, the one handler with `timeout` and
`async`). install writes exactly those entries for its own hooks, so a normal
`codex` run fires them without `--dangerously-bypass-hook-trust`.

Standard library only (the hook imports it); the installer part is used by the CLI.
"""

import os

from kirolearn.capture.agents import common
from kirolearn.capture.agents.common import APPROVED_TOOLS, MCP_SERVER

NAME = "codex"
GENERATIONS = ("codex",)
SURFACES = ("codex-cli",)
SESSION_ENV = None  # Codex always sends session_id
TRANSCRIPT_TAIL_BYTES = common.TRANSCRIPT_TAIL_BYTES

TRIGGERS = common.CLAUDE_TRIGGERS  # Claude Code's hook names
# Codex's other documented events: kept as notes, payload in `extra`.
NOTE_TRIGGERS = ("SessionEnd", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact",
                 "PermissionRequest", "Interrupt", "StopFailure")
CONTEXT_EVENTS = {"agentSpawn": "SessionStart", "userPromptSubmit": "UserPromptSubmit"}

# What install wires: event, its label in Codex's trust keys, timeout in seconds.
HOOKS = (
    ("SessionStart", "session_start", 5),
    ("UserPromptSubmit", "user_prompt_submit", 5),
    ("PostToolUse", "post_tool_use", 2),
    ("Stop", "stop", 5),
)
# APPROVED_TOOLS: the MCP tools Codex may call without asking (approval_mode = "approve"); the others keep
# Codex's default, which asks (and is declined in `codex exec`).


def resolve_trigger(name: str) -> "tuple[str, str]":
    """Map a Codex hook name to (canonical trigger, generation); an unknown PascalCase name is a note."""
    return common.resolve_trigger(name, TRIGGERS, NOTE_TRIGGERS, "codex", "Codex hook event name", newer=True)


surface = common.fixed_surface("codex-cli")


payload_from_env = common.payload_from_env  # Codex always sends its payload on stdin


def normalise(trigger: str, payload: dict, env) -> dict:
    """The final answer of a Stop: `last_assistant_message` (kept in the payload too), else the rollout file's."""
    if trigger != "stop":
        return payload
    return common.final_answer(payload, ("last_assistant_message",), last_assistant_text, keep=True)


def last_assistant_text(path: str, tail_bytes: int = TRANSCRIPT_TAIL_BYTES) -> "str | None":
    """The newest assistant text of a Codex rollout JSONL file (None if none); bounded, partial lines skipped."""
    for item in common.newest_lines(path, tail_bytes):
        payload = item.get("payload") if isinstance(item, dict) else None
        if not isinstance(payload, dict):
            continue
        if payload.get("type") == "task_complete" and isinstance(payload.get("last_agent_message"), str):
            if payload["last_agent_message"].strip():
                return payload["last_agent_message"].strip()
        if payload.get("type") == "message" and payload.get("role") == "assistant":
            parts = [c.get("text", "") for c in payload.get("content") or []
                     if isinstance(c, dict) and c.get("type") == "output_text" and isinstance(c.get("text"), str)]
            text = "\n".join(p for p in parts if p.strip()).strip()
            if text:
                return text
    return None


def context_output(trigger: str, text: str) -> str:
    """Codex's documented JSON form: hookSpecificOutput.additionalContext (reaches the model as a developer message)."""
    event = CONTEXT_EVENTS.get(trigger)
    return text if event is None else common.additional_context(event, text)


# --- installing: $CODEX_HOME (default ~/.codex): hooks.json, and config.toml (MCP server + hook trust) -------


def codex_home() -> str:
    if os.environ.get("CODEX_HOME"):
        return os.path.abspath(os.environ["CODEX_HOME"])
    return common.user_path(".codex")


def hook_command() -> str:
    """The command Codex runs (through a shell); a missing binary is a no-op."""
    return common.hook_command(NAME)


def _handler(timeout: int) -> dict:
    return {"type": "command", "command": hook_command(), "timeout": timeout}


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

    return json.dumps(text, ensure_ascii=False)  # a JSON string is a TOML basic string (BMP text)


def config_block(hooks_path: str, data: dict) -> str:
    """The TOML tables install appends to config.toml: the MCP server, tool approvals and hook trust."""
    from kirolearn import install

    entry = install.mcp_entry()
    lines = [f"[mcp_servers.{MCP_SERVER}]", f"command = {_toml_string(entry['command'])}", "args = []"]
    if entry["env"]:
        lines.append("env = { " + ", ".join(f"{k} = {_toml_string(v)}" for k, v in entry["env"].items()) + " }")
    lines.append("")
    for tool in APPROVED_TOOLS:
        lines += [f"[mcp_servers.{MCP_SERVER}.tools.{tool}]", 'approval_mode = "approve"', ""]
    existing = data.get("hooks", {}) if isinstance(data.get("hooks"), dict) else {}
    for event, label, timeout in HOOKS:
        index = len([g for g in existing.get(event, []) or [] if not _is_ours(g)])
        key = f"{hooks_path}:{label}:{index}:0"
        lines += [f"[hooks.state.{_toml_string(key)}]", f"trusted_hash = {_toml_string(trust_hash(label, _handler(timeout)))}", ""]
    return "\n".join(lines)


def _headers(block: str) -> "list[str]":
    return [line for line in block.splitlines() if line.startswith("[")]


def plan_install(project: "str | None", global_: bool = False, **options):
    """hooks.json and config.toml under $CODEX_HOME (nothing is written).

    Codex reads a project's .codex/ only in a project the user trusted, so
    kirolearn wires the user's Codex home, for every project; kirolearn sorts
    memories by the project each hook's `cwd` is in.
    """
    from kirolearn import install, install_edit
    from kirolearn.install_edit import Item

    home = codex_home()
    hooks_path = os.path.join(home, "hooks.json")
    recorded = {e["path"]: e for e in install.load_record()}
    additions = [Item(("hooks", event), {"hooks": [_handler(timeout)]}) for event, _, timeout in HOOKS]
    hooks_change = install_edit.plan(hooks_path, additions, "codex-hooks", unwired=_unwired,
                                     problem=_hooks_problem)
    if hooks_change.problem:
        return [hooks_change]
    data = install._load(hooks_path, hooks_change.before)
    block = config_block(hooks_path, _unwired(data))
    config_path = os.path.join(home, "config.toml")
    config_change = install_edit.plan_toml(config_path, "codex-config", block, _headers(block),
                                           recorded.get(config_path))
    return [hooks_change, config_change]


def plan_uninstall(only_project: "str | None" = None):
    """Undo each recorded Codex install: the user's exact bytes while the files are as install left them."""
    from kirolearn import install, install_edit

    changes = []
    if only_project:
        return changes  # Codex is wired in the user's Codex home, never into a project
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
