"""The GitHub Copilot CLI adapter: `.github/hooks/*.json`, camelCase payloads, `.github/mcp.json`.

Measured with Copilot CLI 1.0.102 (shared/reference/agents-offline.md, and the
hooks reference on docs.github.com): a hook file is `{"version": 1, "hooks":
{"sessionStart": [{"type": "command", "bash": "…", "timeoutSec": 5}], …}}`;
the payload on stdin is camelCase (`sessionId`, `toolName`, `toolArgs`,
`toolResult`, `transcriptPath`) and carries no event name, so the installed
command names its event (`kirolearn-hook --agent copilot postToolUse`). Tool
names are lowercase (`bash`, `view`, `create`, `edit`); MCP tools are
`<server>-<tool>`. Stdout is parsed as one JSON object: `{"additionalContext":
"…"}` from sessionStart and userPromptSubmitted reached the model (observed).
`agentStop` carries no answer text, and its `transcriptPath` (events.jsonl) may
not hold the turn's final `assistant.message` yet when the hook runs (observed:
sometimes the newest message is still the turn's first, "Let me run a
command.", with its tool requests). So the hook reads it until the newest
assistant message asks for no tool (the final answer), for at most
FINAL_WAIT seconds, and falls back to the newest text it saw.
Repository hooks and `.github/mcp.json` load only in a folder the user trusts
(`trusted_folders` in ~/.copilot/config.json, what Copilot's first-start dialog
writes); kirolearn does not trust folders on the user's behalf.

Standard library only (the hook imports it); its installer half is kirolearn.install.agents.copilot.
"""

from kirolearn.capture.agents import common
from kirolearn.core import jsonfast

NAME = "copilot"
GENERATIONS = ("copilot",)
SURFACES = ("copilot-cli",)
SESSION_ENV = None  # every payload has sessionId
TRANSCRIPT_TAIL_BYTES = common.TRANSCRIPT_TAIL_BYTES
# seconds a stop hook waits for the final answer to reach the transcript
FINAL_WAIT = 1.5
FINAL_POLL = 0.02

TRIGGERS = {
    "sessionStart": "agentSpawn",
    "userPromptSubmitted": "userPromptSubmit",
    "preToolUse": "preToolUse",
    "postToolUse": "postToolUse",
    "agentStop": "stop",
    # the VS Code compatible spellings of the same events
    **common.CLAUDE_TRIGGERS,
}
NOTE_TRIGGERS = (
    "sessionEnd",
    "subagentStart",
    "subagentStop",
    "errorOccurred",
    "preCompact",
    "postToolUseFailure",
    "notification",
    "permissionRequest",
    "userPromptTransformed",
    "SessionEnd",
    "SubagentStop",
    "ErrorOccurred",
    "PreCompact",
    "PostToolUseFailure",
    "Notification",
)
HOOKS = (  # what install wires: event, timeout in seconds
    ("sessionStart", 5),
    ("userPromptSubmitted", 5),
    ("postToolUse", 2),
    ("agentStop", 5),
    ("sessionEnd", 5),
)
_KEYS = {
    "sessionId": "session_id",
    "toolName": "tool_name",
    "toolArgs": "tool_input",
    "toolResult": "tool_response",
    "tool_result": "tool_response",
}


def resolve_trigger(name: str) -> "tuple[str, str]":
    return common.resolve_trigger(name, TRIGGERS, NOTE_TRIGGERS, "copilot", "Copilot CLI hook event")


surface = common.fixed_surface("copilot-cli")


payload_from_env = common.payload_from_env  # always stdin JSON


def normalise(trigger: str, payload: dict, env) -> dict:
    """camelCase keys to the canonical ones; a stop's answer from the payload or the transcript."""
    out = {}
    for key, value in payload.items():
        canonical = _KEYS.get(key)
        if canonical and canonical not in payload:
            out[canonical] = value
        else:
            out[key] = value
    if trigger != "stop":
        return out
    # newer versions send these for subagents
    return common.final_answer(
        out,
        ("last_assistant_message", "response"),
        final_text,
        path_keys=("transcriptPath", "transcript_path"),
    )


def final_text(path: str, wait: float = FINAL_WAIT) -> "str | None":
    """The turn's final answer from the transcript, waiting (bounded) for Copilot to write it."""
    import time

    deadline = time.monotonic() + wait
    while True:
        text, final = last_assistant_text(path)
        if final or time.monotonic() >= deadline:
            return text
        time.sleep(FINAL_POLL)


def last_assistant_text(path: str, tail_bytes: int = TRANSCRIPT_TAIL_BYTES) -> "tuple[str | None, bool]":
    """(the newest non-empty `assistant.message` text of a Copilot events.jsonl, whether the newest
    assistant message is final: it requests no tool). Bounded in size, tolerant of partial lines."""
    final = None
    for item in common.newest_lines(path, tail_bytes, needle=b"assistant.message"):
        if (
            isinstance(item, dict)
            and item.get("type") == "assistant.message"
            and isinstance(item.get("data"), dict)
        ):
            if final is None:
                final = not item["data"].get("toolRequests")
            content = item["data"].get("content")
            if isinstance(content, str) and content.strip():
                return content.strip(), bool(final)
    return None, bool(final)


def context_output(trigger: str, text: str) -> str:
    """Copilot parses hook stdout as one JSON object; additionalContext is what reaches the model."""
    return jsonfast.dumps({"additionalContext": text}, ensure_ascii=False)
