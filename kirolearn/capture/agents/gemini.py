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

Standard library only (the hook imports it); the installer part is used by the CLI.
"""

import os

from kirolearn.capture.agents import common
from kirolearn.capture.agents.common import APPROVED_TOOLS, MCP_SERVER

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
NOTE_TRIGGERS = ("SessionEnd", "BeforeModel", "AfterModel", "BeforeToolSelection", "PreCompress", "Notification")
CONTEXT_EVENTS = {"agentSpawn": "SessionStart", "userPromptSubmit": "BeforeAgent"}

# What install wires: event, timeout in milliseconds (Gemini's unit).
HOOKS = (
    ("SessionStart", 5000),
    ("BeforeAgent", 5000),
    ("AfterTool", 2000),
    ("AfterAgent", 5000),
)
# APPROVED_TOOLS: the MCP tools Gemini may run without asking (`tools.allowed`; in `gemini -p` a tool that
# needs a confirmation is not offered at all). forget_memory keeps asking.


def resolve_trigger(name: str) -> "tuple[str, str]":
    """Map a Gemini CLI hook name to (canonical trigger, generation); an unknown PascalCase name is a note."""
    return common.resolve_trigger(name, TRIGGERS, NOTE_TRIGGERS, "gemini", "Gemini CLI hook event name", newer=True)


surface = common.fixed_surface("gemini-cli")


payload_from_env = common.payload_from_env  # Gemini CLI always sends its payload on stdin


def normalise(trigger: str, payload: dict, env) -> dict:
    """AfterAgent's final answer is `prompt_response` (else the chat file's last `gemini` message)."""
    if trigger != "stop":
        return payload
    out = common.final_answer(payload, ("prompt_response",), last_assistant_text)
    if out is not payload:
        out.pop("prompt_response", None)  # an empty one too, once the chat file gave the answer
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


# --- installing: ~/.gemini/settings.json or <project>/.gemini/settings.json ------------------------


def settings_path(project: "str | None") -> str:
    if project:
        return os.path.join(os.path.abspath(project), ".gemini", "settings.json")
    return common.user_path(".gemini", "settings.json")


def hook_command() -> str:
    """The command Gemini CLI runs (through a shell); a missing binary is a no-op."""
    return common.hook_command(NAME)


def tool_name(tool: str) -> str:
    """The name Gemini CLI gives an MCP tool of ours (and matches in `tools.allowed`)."""
    return f"mcp_{MCP_SERVER}_{tool}"


def _is_ours(group) -> bool:
    return common.is_our_group(group, NAME)


def _unwired(data: dict) -> dict:
    """`data` without our hooks, our MCP server and our allowed tools (containers only we emptied go too)."""
    common.drop_our_hooks(data, _is_ours)
    common.drop_our_server(data)
    tools = data.get("tools")
    ours = {tool_name(t) for t in APPROVED_TOOLS}
    if isinstance(tools, dict) and isinstance(tools.get("allowed"), list) and ours & set(map(str, tools["allowed"])):
        tools["allowed"] = [t for t in tools["allowed"] if t not in ours]
        if not tools["allowed"]:
            del tools["allowed"]
            if not tools:
                del data["tools"]
    return data


def _problem(data: dict) -> "str | None":
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values() if v is not None):
        return "'hooks' is not an object of lists"
    problem = common.servers_problem(data)
    if problem:
        return problem
    tools = data.get("tools", {})
    if not isinstance(tools, dict) or not isinstance(tools.get("allowed", []), list):
        return "'tools.allowed' is not a list"
    return None


def _additions() -> list:
    from kirolearn.install_edit import Item, Member

    additions = [Item(("hooks", event), {"matcher": "", "hooks": [
        {"name": f"kirolearn-{event}", "type": "command", "command": hook_command(), "timeout": timeout}]})
        for event, timeout in HOOKS]
    additions.append(Member(("mcpServers",), MCP_SERVER, common.mcp_server()))
    additions += [Item(("tools", "allowed"), tool_name(t)) for t in APPROVED_TOOLS]
    return additions


def plan_install(project: "str | None", global_: bool = False, **options):
    """The one settings.json install would write (hooks, the MCP server, its read-only tools allowed)."""
    from kirolearn import install_edit

    # One scope per run: were the user's and a project's hooks merged, wiring both would fire each twice.
    path = settings_path(project)
    return [install_edit.plan(path, _additions(), "gemini-settings", unwired=_unwired, problem=_problem)]


def plan_uninstall(only_project: "str | None" = None):
    """Undo each recorded Gemini CLI install: the user's exact bytes while the file is as install left it."""
    from kirolearn import install, install_edit

    changes = []
    for entry in install.load_record():
        if entry.get("kind") != "gemini-settings":
            continue
        if only_project and not entry["path"].startswith(os.path.join(os.path.abspath(only_project), ".gemini") + os.sep):
            continue
        change = install_edit.undo(entry, unwired=_unwired)
        if change is not None:
            changes.append(change)
    return changes
