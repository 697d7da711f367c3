"""The Factory Droid CLI adapter (`droid`, npm `@factory/cli-linux-x64`, measured on 0.225.2).

Facts (what the real client sent here, docs/agents/factory-droid.md): hooks live in the `hooks` block
of `settings.json` (`~/.factory/` or a project's `.factory/`), Claude Code's shape with timeouts in
seconds. Every payload is stdin JSON with `session_id`, `transcript_path`, `cwd`, `permission_mode`
and `hook_event_name`. SessionStart has `source` (and `CLAUDE_ENV_FILE`); PreToolUse / PostToolUse
have `tool_name` (`Execute`, `Read`, ..., MCP tools as `<server>___<tool>`), `tool_input` and, after
the call, `tool_response` as the tool's text (a shell call's ends "[Process exited with code N]"). A
tool that failed fires no PostToolUse. Stop has `message_id` (the final assistant message's id),
`stop_hook_active`, `tool_execution_count` and `elapsed_time`, but not the text: that is read from
the transcript, a JSONL file of Claude Code's message shape that holds the final message when Stop
fires. `droid exec` fires no UserPromptSubmit; SessionEnd comes last (a note).

Plain stdout of SessionStart (exit 0) reaches the model as a user message before the prompt.

Standard library only (the hook imports it); its installer half is kirolearn.install.agents.factory_droid.
"""

from kirolearn.capture.agents import common

NAME = "factory-droid"
GENERATIONS = ("droid",)
SURFACES = ("factory-droid",)
SESSION_ENV = None  # Droid always sends session_id
TRANSCRIPT_TAIL_BYTES = common.TRANSCRIPT_TAIL_BYTES

TRIGGERS = common.CLAUDE_TRIGGERS
# Droid's other events: kept as notes, payload in `extra`.
NOTE_TRIGGERS = ("SessionEnd", "SubagentStop", "PreCompact", "Notification")

# What install wires: event, timeout in seconds (Droid's unit).
HOOKS = (
    ("SessionStart", 5),
    ("UserPromptSubmit", 5),
    ("PostToolUse", 2),
    ("Stop", 5),
)


def resolve_trigger(name: str) -> "tuple[str, str]":
    """Map a Droid hook name to (canonical trigger, generation); an unknown PascalCase name is a note."""
    return common.resolve_trigger(
        name, TRIGGERS, NOTE_TRIGGERS, "droid", "Factory Droid hook event name", newer=True
    )


surface = common.fixed_surface("factory-droid")


# Droid always sends its payload on stdin
payload_from_env = common.payload_from_env


def normalise(trigger: str, payload: dict, env) -> dict:
    """A Stop's final text: the transcript's message `message_id` names (else its newest assistant text)."""
    if trigger != "stop":
        return payload
    message_id = payload.get("message_id")
    wanted = message_id if isinstance(message_id, str) and message_id else None

    def read(path: str) -> "str | None":
        return last_assistant_text(path, wanted)

    return common.final_answer(payload, ("last_assistant_message",), read)


def last_assistant_text(
    path: str, message_id: "str | None" = None, tail_bytes: int = TRANSCRIPT_TAIL_BYTES
) -> "str | None":
    """The text of the transcript's assistant message `message_id` (any: the newest), None if none.

    Reads at most `tail_bytes` from the end; a partial first or last line is skipped, never an error.
    """
    for item in common.newest_lines(path, tail_bytes, needle=b'"assistant"'):
        if not isinstance(item, dict) or item.get("type") != "message":
            continue
        if message_id is not None and item.get("id") != message_id:
            continue
        message = item.get("message")
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            text = content.strip()
        elif isinstance(content, list):
            text = "\n".join(
                b["text"]
                for b in content
                if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
            ).strip()
        else:
            text = ""
        if text:
            return text
    return None


def context_output(trigger: str, text: str) -> str:
    """Plain stdout on exit 0 is added to the model's context at SessionStart and UserPromptSubmit."""
    return text
