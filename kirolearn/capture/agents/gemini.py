"""The Gemini CLI adapter (`@google/gemini-cli`, measured on 0.61.0): its hooks, its settings.json.

Facts (geminicli.com/docs/hooks/reference, and what the real client showed
here, docs/agents/gemini.md): hooks live in the `hooks` block of
`settings.json` (`~/.gemini/` or a project's `.gemini/`), Claude Code's
shape with timeouts in milliseconds. Every payload is stdin JSON with
`session_id`, `transcript_path`, `cwd`, `hook_event_name` and `timestamp`.
The events kirolearn maps: SessionStart (`source`), BeforeAgent (`prompt`),
BeforeTool / AfterTool (`tool_name` such as `run_shell_command` or
`mcp_<server>_<tool>`, `tool_input`, and `tool_response` as
`{llmContent, returnDisplay, error?}`), AfterAgent (`prompt`,
`prompt_response`: the turn's final text, preferred over the chat file).

Context goes back only as JSON on stdout: `hookSpecificOutput.additionalContext`
of SessionStart and BeforeAgent reaches the model inside `<hook_context>` in
the user turn. Plain stdout does not reach the model (Gemini shows it to the
user as a "Hook system message"), so this adapter always prints the JSON form.

Standard library only (the hook imports it); its installer half is kirolearn.install.agents.gemini.
"""

from kirolearn.capture.agents import common

NAME = "gemini"
GENERATIONS = ("gemini",)
SURFACES = ("gemini-cli",)
SESSION_ENV = None  # Gemini CLI always sends session_id
TRANSCRIPT_TAIL_BYTES = common.TRANSCRIPT_TAIL_BYTES

TRIGGERS = {
    "SessionStart": "agentSpawn",
    "BeforeAgent": "userPromptSubmit",
    "BeforeTool": "preToolUse",
    "AfterTool": "postToolUse",
    "AfterAgent": "stop",
}
NOTE_TRIGGERS = (
    "SessionEnd",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
    "PreCompress",
    "Notification",
)
CONTEXT_EVENTS = {"agentSpawn": "SessionStart", "userPromptSubmit": "BeforeAgent"}

# What install wires: event, timeout in milliseconds (Gemini's unit).
HOOKS = (
    ("SessionStart", 5000),
    ("BeforeAgent", 5000),
    ("AfterTool", 2000),
    ("AfterAgent", 5000),
)


def resolve_trigger(name: str) -> "tuple[str, str]":
    """Map a Gemini CLI hook name to (canonical trigger, generation); an unknown PascalCase name is a note."""
    return common.resolve_trigger(
        name, TRIGGERS, NOTE_TRIGGERS, "gemini", "Gemini CLI hook event name", newer=True
    )


surface = common.fixed_surface("gemini-cli")


# Gemini CLI always sends its payload on stdin
payload_from_env = common.payload_from_env


def normalise(trigger: str, payload: dict, env) -> dict:
    """AfterAgent's final answer is `prompt_response` (else the chat file's last `gemini` message)."""
    if trigger != "stop":
        return payload
    out = common.final_answer(payload, ("prompt_response",), last_assistant_text)
    if out is not payload:
        # an empty one too, once the chat file gave the answer
        out.pop("prompt_response", None)
    return out


def last_assistant_text(path: str, tail_bytes: int = TRANSCRIPT_TAIL_BYTES) -> "str | None":
    """The newest non-empty `gemini` message of a chat JSONL file (None if none); bounded, partial lines skipped."""
    for item in common.newest_lines(path, tail_bytes):
        if isinstance(item, dict) and item.get("type") == "gemini" and isinstance(item.get("content"), str):
            if item["content"].strip():
                return item["content"].strip()
    return None


def context_output(trigger: str, text: str) -> str:
    """The only form that reaches the model: hookSpecificOutput.additionalContext."""
    event = CONTEXT_EVENTS.get(trigger)
    return "" if event is None else common.additional_context(event, text)
