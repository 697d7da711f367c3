"""The Qwen Code adapter (`@qwen-code/qwen-code`, measured on 0.24.4): its hooks, its settings.json.

Facts (what the real client sent here, docs/agents/qwen-code.md): hooks live in
the `hooks` block of `settings.json` (`~/.qwen/` or a project's `.qwen/`),
Claude Code's shape with timeouts in milliseconds. Every payload is stdin JSON
with `session_id`, `transcript_path`, `cwd`, `hook_event_name`, `timestamp` and
`permission_mode`. SessionStart has `source`; UserPromptSubmit has `prompt`, and
fires again with an empty `prompt` before each later model call of the turn
(after a tool result): that call is no prompt, so it is skipped. PostToolUse has
`tool_name` (`run_shell_command`, `mcp__<server>__<tool>`), `tool_input` and
`tool_response` as `{llmContent, returnDisplay}`; a tool that failed (a shell
command with a non-zero exit too) fires PostToolUseFailure with `error` (text),
no `tool_response`. Stop carries `last_assistant_message`, the turn's final text.

Context goes back as JSON on stdout: `hookSpecificOutput.additionalContext` of
SessionStart reaches the model in the system prompt and that of UserPromptSubmit
in the user turn.

Standard library only (the hook imports it); its installer half is kirolearn.install.agents.qwen_code.
"""

from kirolearn.capture.agents import common

NAME = "qwen-code"
GENERATIONS = ("qwen",)
SURFACES = ("qwen-code",)
SESSION_ENV = None  # Qwen Code always sends session_id
TRANSCRIPT_TAIL_BYTES = common.TRANSCRIPT_TAIL_BYTES

FAILURE_EVENT = "PostToolUseFailure"
TRIGGERS = dict(common.CLAUDE_TRIGGERS, **{FAILURE_EVENT: "postToolUse"})
# Qwen Code's other events: kept as notes, payload in `extra`.
NOTE_TRIGGERS = (
    "SessionEnd",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "Notification",
    "PermissionRequest",
    "PermissionDenied",
    "StopFailure",
)
CONTEXT_EVENTS = {"agentSpawn": "SessionStart", "userPromptSubmit": "UserPromptSubmit"}

# What install wires: event, timeout in milliseconds (Qwen Code's unit).
HOOKS = (
    ("SessionStart", 5000),
    ("UserPromptSubmit", 5000),
    ("PostToolUse", 2000),
    (FAILURE_EVENT, 2000),
    ("Stop", 5000),
)


def resolve_trigger(name: str) -> "tuple[str, str]":
    """Map a Qwen Code hook name to (canonical trigger, generation); an unknown PascalCase name is a note."""
    return common.resolve_trigger(
        name, TRIGGERS, NOTE_TRIGGERS, "qwen", "Qwen Code hook event name", newer=True
    )


surface = common.fixed_surface("qwen-code")


# Qwen Code always sends its payload on stdin
payload_from_env = common.payload_from_env


def skip(payload: dict) -> bool:
    """The UserPromptSubmit Qwen Code sends with an empty prompt before each later model call: not a prompt."""
    if payload.get("hook_event_name") != "UserPromptSubmit":
        return False
    prompt = payload.get("prompt")
    return prompt is None or (isinstance(prompt, str) and not prompt.strip())


def normalise(trigger: str, payload: dict, env) -> dict:
    """A Stop's final text is `last_assistant_message` (else the chat file's); a failure gets a tool_response."""
    if payload.get("hook_event_name") == FAILURE_EVENT and "tool_response" not in payload:
        failed = {"success": False, "error": payload.get("error")}
        if payload.get("is_interrupt"):
            failed["is_interrupt"] = True
        return dict(payload, tool_response=failed)
    if trigger != "stop":
        return payload
    return common.final_answer(payload, ("last_assistant_message",), last_assistant_text)


def last_assistant_text(path: str, tail_bytes: int = TRANSCRIPT_TAIL_BYTES) -> "str | None":
    """The newest assistant text of a Qwen Code chat JSONL file (None if none); bounded, partial lines skipped."""
    for item in common.newest_lines(path, tail_bytes, needle=b'"assistant"'):
        if not isinstance(item, dict) or item.get("type") != "assistant":
            continue
        message = item.get("message")
        parts = message.get("parts") if isinstance(message, dict) else None
        if not isinstance(parts, list):
            continue
        text = "\n".join(
            p["text"]
            for p in parts
            if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
        ).strip()
        if text:
            return text
    return None


def context_output(trigger: str, text: str) -> str:
    """The JSON form Qwen Code reads: hookSpecificOutput.additionalContext of SessionStart and UserPromptSubmit."""
    event = CONTEXT_EVENTS.get(trigger)
    return "" if event is None else common.additional_context(event, text)
