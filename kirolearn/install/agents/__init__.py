"""Each agent's installer half, by agent name: what `kirolearn install --agent NAME` writes, and undoes.

The hook-time half of each agent (hook names, payloads, context) is kirolearn.capture.agents;
these modules add its config files, MCP registration and wiring checks, on the CLI's side only.
"""

# one list of agents for both halves
from kirolearn.capture.agents import UnknownAgent, names  # noqa: F401
from kirolearn.install.agents import (
    auggie,
    claude_code,
    codex,
    copilot,
    cursor,
    factory_droid,
    gemini,
    kilo_code,
    kiro,
    opencode,
    qwen_code,
)

_ADAPTERS = {
    "kiro": kiro,
    "claude-code": claude_code,
    "codex": codex,
    "gemini": gemini,
    "cursor": cursor,
    "copilot": copilot,
    "opencode": opencode,
    "qwen-code": qwen_code,
    "auggie": auggie,
    "kilo-code": kilo_code.KILO,
    "factory-droid": factory_droid,
}


def get(name: "str | None" = None):
    """The installer half of `name`'s adapter (None: Kiro)."""
    key = "kiro" if name is None else name
    if key not in _ADAPTERS:
        raise UnknownAgent(f"unknown agent {str(key)[:40]!r}; expected one of {', '.join(_ADAPTERS)}")
    return _ADAPTERS[key]
