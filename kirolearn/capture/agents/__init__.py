"""Agent adapters: everything that differs between the coding agents kirolearn serves.

One module per agent owns its hook names and payload shapes, the environment
hints it gives, the config files it reads (and so the installer's targets),
and how recalled context is handed back to it. The rest of kirolearn speaks
one vocabulary: the canonical triggers `agentSpawn`, `userPromptSubmit`,
`preToolUse`, `postToolUse`, `stop` (plus lifecycle notes), and events with an
`agent` field.

Standard library only: the hook imports this package and the adapter it is
told to use (`kirolearn-hook --agent NAME`, default `kiro`). Kiro v3 and
Claude Code share hook names, so the hook never guesses between them: the
installer writes `--agent` explicitly.
"""

import sys

DEFAULT = "kiro"
_MODULES = {"kiro": "kiro", "claude-code": "claude_code"}
_MODULES.update({"codex": "codex", "gemini": "gemini", "cursor": "cursor"})  # issue 21, part 2
_MODULES["copilot"] = "copilot"  # GitHub Copilot CLI
_MODULES["opencode"] = "opencode"


# Canonical triggers and the event kind each one makes (shared by every adapter).
TRIGGER_KIND = {
    "agentSpawn": "note",
    "userPromptSubmit": "prompt",
    "preToolUse": "tool_use",
    "postToolUse": "tool_use",
    "stop": "session_summary",
}
SESSION_START_TRIGGERS = ("agentSpawn",)
CONTEXT_TRIGGERS = ("agentSpawn", "userPromptSubmit")

# kirolearn's MCP server, as every adapter registers it, and which of its tools an install may
# auto-approve: never one the server marks destructive (tests/test_agents.py checks the
# server's own annotations against these).
# They live in the leaf kirolearn.mcp_tools and load on first use (PEP 562 below): no hook call needs them.
_MCP_NAMES = ("MCP_DESTRUCTIVE_TOOLS", "MCP_SAFE_TOOLS", "MCP_SERVER")


def __getattr__(name):
    if name in _MCP_NAMES:
        from kirolearn import mcp_tools

        return getattr(mcp_tools, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Payload keys only one agent sends. A hint for a hook run without --agent, never a guess:
# checking it must not import every adapter on each Kiro hook call.
ONLY_KEYS = {"claude-code": ("transcript_path",)}


def sent_by(payload: dict) -> "str | None":
    """The agent whose own keys `payload` carries, if any."""
    for name, keys in ONLY_KEYS.items():
        if any(key in payload for key in keys):
            return name
    return None


class UnknownAgent(ValueError):
    """`--agent` names no adapter."""


def names() -> "tuple[str, ...]":
    """The agents kirolearn has adapters for."""
    return tuple(_MODULES)


_LOADED: dict = {}  # agent name -> its adapter module, once imported


def get(name: "str | None" = None):
    """The adapter module for `name` (None: the default, Kiro)."""
    key = DEFAULT if name is None else name
    module = _LOADED.get(key)
    if module is None:  # the drain asks twice per event: a dict look-up, not an import each time
        if key not in _MODULES:
            raise UnknownAgent(f"unknown agent {str(key)[:40]!r}; expected one of {', '.join(_MODULES)}")
        name = f"{__name__}.{_MODULES[key]}"
        __import__(name)  # not importlib.import_module: importlib costs every hook call ~0.5 ms of imports
        module = _LOADED[key] = sys.modules[name]
    return module
