"""The opencode adapter: no shell hooks, so a JavaScript plugin runs kirolearn-hook per event.

Measured with opencode 1.18.33 (shared/reference/agents-offline.md): plugins in
`.opencode/plugin/*.js` (or `~/.config/opencode/plugin/`) get `chat.message`
(input.sessionID, output.parts), `tool.execute.after` (input.tool, .args,
.sessionID; output.title, .output, .metadata), `experimental.chat.system.transform`
(input.sessionID; output.system, a list of strings sent as the system prompt)
and every bus event (`message.updated`, `message.part.updated`, `session.idle`).
Install lists the plugin in opencode.json's `plugin` array as a file:// URL of a
file in $KIROLEARN_HOME/opencode/: a plugin inside `.opencode/` makes opencode
create `.opencode/node_modules` and install its plugin SDK from npm on every
start (observed), which kirolearn's plugin does not need.
The plugin kirolearn installs (opencode_plugin.js) sends kirolearn-hook
payloads already in kirolearn's own shape: `session.created` (the first sight
of a session), `chat.message` (prompt), `tool.execute.after`, and
`session.idle` with the turn's final answer (the newest assistant text the
plugin saw streamed). Recalled memory goes back through the system-prompt
transform. MCP: the `mcp` block of opencode.json, tools named
`kirolearn_<tool>`; opencode allows tools unless `permission` says "ask":
install sets "ask" for the destructive ones.

Standard library only (the hook imports it); its installer half is kirolearn.install.agents.opencode.
"""

from kirolearn.capture.agents import common

NAME = "opencode"
GENERATIONS = ("opencode",)
SURFACES = ("opencode",)
SESSION_ENV = None

TRIGGERS = {
    "session.created": "agentSpawn",
    "chat.message": "userPromptSubmit",
    "tool.execute.before": "preToolUse",
    "tool.execute.after": "postToolUse",
    "session.idle": "stop",
}
NOTE_TRIGGERS = ("session.compacted", "session.error", "session.deleted")


def resolve_trigger(name: str) -> "tuple[str, str]":
    return common.resolve_trigger(name, TRIGGERS, NOTE_TRIGGERS, "opencode", "opencode plugin event")


surface = common.fixed_surface("opencode")


payload_from_env = common.payload_from_env  # the plugin sends stdin JSON


def normalise(trigger: str, payload: dict, env) -> dict:
    """The plugin already sends kirolearn's keys."""
    return payload


def context_output(trigger: str, text: str) -> str:
    """Plain text: the plugin adds it to the system prompt."""
    return text
