"""The Kilo Code CLI adapter: a fork of opencode that loads opencode's plugins, so it runs the same
plugin (kirolearn.install.agents.opencode_plugin.js) and sends the same payloads.

Measured with `@kilocode/cli` 7.7.7 (docs/agents/kilo-code.md): a plugin named by a file:// URL in
kilo.json's `plugin` array gets `chat.message`, `tool.execute.after`,
`experimental.chat.system.transform` and the bus events (`message.updated`,
`message.part.updated`, `session.idle`) with opencode's shapes; its bash tool's
`metadata.exit` is the command's exit status. MCP: kilo.json's `mcp` block,
tools named `kirolearn_<tool>`, allowed unless `permission` says "ask".

Standard library only (the hook imports it); its installer half is kirolearn.install.agents.kilo_code.
"""

from kirolearn.capture.agents import common, opencode

NAME = "kilo-code"
GENERATIONS = ("kilo-code",)
SURFACES = ("kilo-code",)
SESSION_ENV = None

TRIGGERS = opencode.TRIGGERS
NOTE_TRIGGERS = opencode.NOTE_TRIGGERS


def resolve_trigger(name: str) -> "tuple[str, str]":
    return common.resolve_trigger(name, TRIGGERS, NOTE_TRIGGERS, "kilo-code", "Kilo Code plugin event")


surface = common.fixed_surface("kilo-code")
payload_from_env = opencode.payload_from_env
normalise = opencode.normalise
context_output = opencode.context_output
