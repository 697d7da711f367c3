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

Standard library only (the hook imports it); its installer half is kirolearn.install.agents.codex.
"""

from kirolearn.capture.agents import common

NAME = "codex"
GENERATIONS = ("codex",)
SURFACES = ("codex-cli",)
SESSION_ENV = None  # Codex always sends session_id
TRANSCRIPT_TAIL_BYTES = common.TRANSCRIPT_TAIL_BYTES

TRIGGERS = common.CLAUDE_TRIGGERS
# Codex's other documented events: kept as notes, payload in `extra`.
NOTE_TRIGGERS = (
    "SessionEnd",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "PermissionRequest",
    "Interrupt",
    "StopFailure",
)
CONTEXT_EVENTS = {"agentSpawn": "SessionStart", "userPromptSubmit": "UserPromptSubmit"}

# What install wires: event, its trust-key label, timeout in seconds.
HOOKS = (
    ("SessionStart", "session_start", 5),
    ("UserPromptSubmit", "user_prompt_submit", 5),
    ("PostToolUse", "post_tool_use", 2),
    ("Stop", "stop", 5),
)


def resolve_trigger(name: str) -> "tuple[str, str]":
    """Map a Codex hook name to (canonical trigger, generation); an unknown PascalCase name is a note."""
    return common.resolve_trigger(name, TRIGGERS, NOTE_TRIGGERS, "codex", "Codex hook event name", newer=True)


surface = common.fixed_surface("codex-cli")


# Codex always sends its payload on stdin
payload_from_env = common.payload_from_env


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
            parts = [
                c.get("text", "")
                for c in payload.get("content") or []
                if isinstance(c, dict) and c.get("type") == "output_text" and isinstance(c.get("text"), str)
            ]
            text = "\n".join(p for p in parts if p.strip()).strip()
            if text:
                return text
    return None


def context_output(trigger: str, text: str) -> str:
    """Codex's documented JSON form: hookSpecificOutput.additionalContext (reaches the model as a developer message)."""
    event = CONTEXT_EVENTS.get(trigger)
    return text if event is None else common.additional_context(event, text)
