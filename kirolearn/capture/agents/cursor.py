"""The Cursor adapter, from Cursor's documented hooks (cursor.com/docs/agent/hooks); no client runs here.

Hooks live in `hooks.json` (`<project>/.cursor/` or `~/.cursor/`):
`{"version": 1, "hooks": {"<event>": [{"command": "...", "timeout": seconds}]}}`,
camelCase event names. Every payload is stdin JSON with `conversation_id`,
`generation_id`, `model`, `hook_event_name`, `cursor_version`,
`workspace_roots` and (newer builds) `transcript_path`; there is often no
`cwd`, so the first workspace root stands in. The events kirolearn maps:
`sessionStart`, `beforeSubmitPrompt` (`prompt`, `attachments`),
`afterShellExecution` (`command`, `output` or `stdout`/`stderr`, `duration`),
`afterMCPExecution` (`tool_name`, `tool_input` as a JSON string, `result_json`
or `tool_result`), `afterFileEdit` (`file_path`, `edits`), the generic
`preToolUse` / `postToolUse` (`tool_name`, `tool_input`, `tool_output`),
`afterAgentResponse` (`text`: an assistant message) and `stop` (`status`,
`loop_count`: no text).

The final answer of a turn is the last `afterAgentResponse` text before its
`stop`: that hook keeps the text in a small 0600 file per conversation under
$KIROLEARN_HOME/sessions, and `stop` reads it (else the transcript's last
assistant line). Context goes back only at `sessionStart`, as
`{"additional_context": "..."}`; `beforeSubmitPrompt` can only allow or block,
so per-prompt recall is the MCP server's search_memory.

Standard library only (the hook imports it); its installer half is kirolearn.install.agents.cursor.
"""

import os

from kirolearn.capture.agents import common
from kirolearn.core import jsonfast

NAME = "cursor"
GENERATIONS = ("cursor",)
SURFACES = ("cursor",)
SESSION_ENV = None
TRANSCRIPT_TAIL_BYTES = common.TRANSCRIPT_TAIL_BYTES
LAST_TEXT_MAX = 64 * 1024

TRIGGERS = {
    "sessionStart": "agentSpawn",
    "beforeSubmitPrompt": "userPromptSubmit",
    "preToolUse": "preToolUse",
    "beforeShellExecution": "preToolUse",
    "beforeMCPExecution": "preToolUse",
    "beforeReadFile": "preToolUse",
    "postToolUse": "postToolUse",
    "afterShellExecution": "postToolUse",
    "afterMCPExecution": "postToolUse",
    "afterFileEdit": "postToolUse",
    "stop": "stop",
}
NOTE_TRIGGERS = (
    "sessionEnd",
    "afterAgentResponse",
    "afterAgentThought",
    "preCompact",
    "subagentStart",
    "subagentStop",
    "postToolUseFailure",
    "beforeTabFileRead",
    "afterTabFileEdit",
)

# Timeouts in seconds; not postToolUse as well: it would record commands twice.
HOOKS = (
    ("sessionStart", 5),
    ("beforeSubmitPrompt", 5),
    ("afterShellExecution", 2),
    ("afterMCPExecution", 2),
    ("afterFileEdit", 2),
    ("afterAgentResponse", 2),
    ("stop", 5),
)
_COMMON = (
    "conversation_id",
    "generation_id",
    "model",
    "hook_event_name",
    "cursor_version",
    "workspace_roots",
    "user_email",
    "transcript_path",
    "cwd",
    "session_id",
)


def resolve_trigger(name: str) -> "tuple[str, str]":
    """Map a Cursor hook name to (canonical trigger, generation); an unknown camelCase name is a note."""
    return common.resolve_trigger(
        name, TRIGGERS, NOTE_TRIGGERS, "cursor", "Cursor hook event name", newer=False
    )


surface = common.fixed_surface("cursor")


# Cursor always sends its payload on stdin
payload_from_env = common.payload_from_env


def _json_or_text(value):
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return jsonfast.loads(value)
        except ValueError:
            return value
    return value


def _tool_fields(hook: str, payload: dict) -> dict:
    """tool_name / tool_input / tool_response from the shape of each Cursor tool hook."""
    rest = {k: v for k, v in payload.items() if k not in _COMMON}
    if hook in ("afterShellExecution", "beforeShellExecution"):
        fields: dict = {"tool_name": "Shell", "tool_input": {"command": rest.pop("command", None)}}
        if "cwd" in payload:
            fields["tool_input"]["cwd"] = payload["cwd"]
        if hook == "afterShellExecution":
            fields["tool_response"] = rest
        return fields
    if hook in ("afterMCPExecution", "beforeMCPExecution"):
        name = rest.pop("tool_name", None)
        fields = {
            "tool_name": f"mcp:{name}" if name else "mcp",
            "tool_input": _json_or_text(rest.pop("tool_input", None)),
        }
        if hook == "afterMCPExecution":
            result = rest.pop("result_json", rest.pop("tool_result", None))
            fields["tool_response"] = (
                _json_or_text(result) if not rest else {"result": _json_or_text(result), **rest}
            )
        return fields
    if hook in ("afterFileEdit", "beforeReadFile"):
        fields = {
            "tool_name": "Edit" if hook == "afterFileEdit" else "Read",
            "tool_input": {"file_path": rest.pop("file_path", None)},
        }
        if hook == "afterFileEdit":
            fields["tool_response"] = rest  # the edits
        return fields
    fields = {}
    if "tool_output" in payload and "tool_response" not in payload:
        fields["tool_response"] = _json_or_text(payload["tool_output"])
    if isinstance(payload.get("tool_input"), str):
        fields["tool_input"] = _json_or_text(payload["tool_input"])
    return fields


def normalise(trigger: str, payload: dict, env) -> dict:
    """Cursor's payloads in kirolearn's keys: session, cwd, tool fields, and the turn's final answer."""
    out = dict(payload)
    hook = payload.get("hook_event_name")
    if not (isinstance(out.get("session_id"), str) and out["session_id"].strip()):
        if isinstance(payload.get("conversation_id"), str) and payload["conversation_id"].strip():
            out["session_id"] = payload["conversation_id"]
    if not (isinstance(out.get("cwd"), str) and out["cwd"]):
        roots = payload.get("workspace_roots")
        if isinstance(roots, list) and roots and isinstance(roots[0], str):
            out["cwd"] = roots[0]
    if trigger in ("preToolUse", "postToolUse"):
        for key in (
            "command",
            "file_path",
            "edits",
            "output",
            "stdout",
            "stderr",
            "exit_code",
            "result_json",
            "tool_result",
            "tool_output",
        ):
            out.pop(key, None)
        out.update(_tool_fields(hook if isinstance(hook, str) else "", payload))
    elif hook == "afterAgentResponse" and isinstance(payload.get("text"), str):
        _remember_text(out.get("session_id"), payload["text"])
    elif trigger == "stop" and not out.get("assistant_response"):
        text = _last_text(out.get("session_id"))
        if not text and isinstance(payload.get("transcript_path"), str):
            text = last_assistant_text(payload["transcript_path"])
        if text:
            out["assistant_response"] = text
    return out


def _state_path(session_id) -> "str | None":
    if not (isinstance(session_id, str) and session_id):
        return None
    safe = "".join(c for c in session_id[:80] if c.isalnum() or c in "-_")
    if not safe:
        return None
    from kirolearn.core import paths

    return os.path.join(paths.sessions_dir(), f"cursor-last-{safe}.txt")


def _remember_text(session_id, text: str) -> None:
    """Keep the newest assistant message of a conversation for its `stop` (best effort, 0600)."""
    path = _state_path(session_id)
    if path is None:
        return
    try:
        from kirolearn.core import paths

        paths.ensure_private_dir(os.path.dirname(path))
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, text[:LAST_TEXT_MAX].encode("utf-8", "replace"))
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        pass  # the note event still holds the text


def _last_text(session_id) -> "str | None":
    path = _state_path(session_id)
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            text = fh.read(LAST_TEXT_MAX).decode("utf-8", "replace")
        os.remove(path)  # one turn's answer, not the next turn's
    except OSError:
        return None
    return text.strip() or None


def last_assistant_text(path: str, tail_bytes: int = TRANSCRIPT_TAIL_BYTES) -> "str | None":
    """The newest assistant text of a JSONL transcript ({"role": "assistant", ...} lines); bounded."""
    for item in common.newest_lines(path, tail_bytes):
        if not isinstance(item, dict):
            continue
        message = item.get("message")
        message = message if isinstance(message, dict) else item
        if message.get("role") != "assistant" and item.get("type") != "assistant":
            continue
        content = message.get("content", message.get("text"))
        if isinstance(content, list):
            content = "\n".join(
                b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
            )
        if isinstance(content, str) and content.strip():
            return content.strip()
    return None


def context_output(trigger: str, text: str) -> str:
    """sessionStart's documented output; beforeSubmitPrompt cannot add context, so nothing is printed there."""
    if trigger != "agentSpawn":
        return ""
    return jsonfast.dumps({"additional_context": text})
