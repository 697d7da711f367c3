"""The Claude Code adapter: its hooks, its settings files, its transcript.

Facts: shared/reference/claude-code-hooks.md. Every payload is stdin JSON with
`session_id`, `transcript_path`, `cwd` and `hook_event_name`, plus `prompt`,
`tool_name` / `tool_input` / `tool_response` or `source` per event. Its `Stop`
(since 2.x) carries `last_assistant_message`, the turn's real final text:
measured with Claude Code 2.1.197, the transcript does not hold that message yet
when Stop fires, so the field wins and the transcript (a JSONL file Claude Code
may still be writing, read bounded in size) is only the fallback of older
versions. Stdout of SessionStart and UserPromptSubmit (exit 0) becomes context.

Standard library only (the hook imports it); its installer half is kirolearn.install.agents.claude_code.
"""

from kirolearn.capture.agents import common

NAME = "claude-code"
GENERATIONS = ("claude",)
SURFACES = ("claude-code",)
SESSION_ENV = None  # Claude Code always sends session_id
TRANSCRIPT_TAIL_BYTES = common.TRANSCRIPT_TAIL_BYTES

# A failed tool's postToolUse, so the turn's outcome can tell it failed.
FAILURE_EVENT = "PostToolUseFailure"
TRIGGERS = dict(common.CLAUDE_TRIGGERS, **{FAILURE_EVENT: "postToolUse"})
# Lifecycle events with no Kiro twin: kept as notes, payload in `extra`.
NOTE_TRIGGERS = ("SubagentStop", "SessionEnd", "PreCompact", "Notification")

# What install wires: event, timeout in seconds (Claude Code's unit).
HOOKS = (
    ("SessionStart", 5),
    ("UserPromptSubmit", 5),
    ("PostToolUse", 2),
    (FAILURE_EVENT, 2),
    ("Stop", 5),
)


def resolve_trigger(name: str) -> "tuple[str, str]":
    """Map a Claude Code hook name to (canonical trigger, generation)."""
    return common.resolve_trigger(name, TRIGGERS, NOTE_TRIGGERS, "claude", "Claude Code hook event name")


surface = common.fixed_surface("claude-code")


# Claude Code always sends its payload on stdin
payload_from_env = common.payload_from_env

# Stop's final text (Claude Code >= 2.x; Codex sends it too)
FINAL_TEXT_KEY = "last_assistant_message"


def normalise(trigger: str, payload: dict, env) -> dict:
    """A Stop's closing text: `last_assistant_message` when sent, else the transcript's last assistant text.

    A PostToolUseFailure gets the tool_response it lacks: {"success": false, "error": …}.
    """
    if payload.get("hook_event_name") == FAILURE_EVENT and "tool_response" not in payload:
        failed = {"success": False, "error": payload.get("error")}
        if payload.get("is_interrupt"):
            failed["is_interrupt"] = True
        return dict(payload, tool_response=failed)
    if trigger != "stop":
        return payload
    return common.final_answer(payload, (FINAL_TEXT_KEY,), last_assistant_text)


def last_assistant_text(path: str, tail_bytes: int = TRANSCRIPT_TAIL_BYTES) -> "str | None":
    """The text of the newest assistant message in a transcript JSONL file (None if none is found).

    Reads at most `tail_bytes` from the end; a partial first or last line (the
    file may still be being written) is skipped, never an error.
    """
    for item in common.newest_lines(path, tail_bytes):
        text = _assistant_text(item)
        if text:
            return text
    return None


def _assistant_text(item) -> "str | None":
    if not isinstance(item, dict):
        return None
    message = item.get("message")
    message = message if isinstance(message, dict) else item
    if item.get("type") != "assistant" and message.get("role") != "assistant":
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content.strip() or None
    if isinstance(content, list):
        parts = [
            block.get("text", "")
            for block in content
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        ]
        text = "\n".join(p for p in parts if p.strip()).strip()
        return text or None
    return None


def context_output(trigger: str, text: str) -> str:
    """Plain stdout on exit 0 is added to the context of SessionStart and UserPromptSubmit."""
    return text
