"""Agent adapters: everything that differs between the coding agents kirolearn serves.

One module per agent owns its hook names and payload shapes, the environment
hints it gives, and how recalled context is handed back to it; its installer
half (config files, install targets) is in kirolearn.install.agents. The rest of kirolearn speaks
one vocabulary: the canonical triggers `agentSpawn`, `userPromptSubmit`,
`preToolUse`, `postToolUse`, `stop` (plus lifecycle notes), and events with an
`agent` field.

Standard library only: the hook imports this package and the adapter it is
told to use (`kirolearn-hook --agent NAME`, default `kiro`). Kiro v3 and
Claude Code share hook names, so the hook never guesses between them: the
installer writes `--agent` explicitly.
"""

DEFAULT = "kiro"


# One loader per adapter: a hook call imports only the adapter it runs.
def _kiro():
    from kirolearn.capture.agents import kiro

    return kiro


def _claude_code():
    from kirolearn.capture.agents import claude_code

    return claude_code


def _codex():
    from kirolearn.capture.agents import codex

    return codex


def _gemini():
    from kirolearn.capture.agents import gemini

    return gemini


def _cursor():
    from kirolearn.capture.agents import cursor

    return cursor


def _copilot():
    from kirolearn.capture.agents import copilot

    return copilot


def _opencode():
    from kirolearn.capture.agents import opencode

    return opencode


def _qwen_code():
    from kirolearn.capture.agents import qwen_code

    return qwen_code


def _auggie():
    from kirolearn.capture.agents import auggie

    return auggie


def _kilo_code():
    from kirolearn.capture.agents import kilo_code

    return kilo_code


def _factory_droid():
    from kirolearn.capture.agents import factory_droid

    return factory_droid


_LOADERS = {
    "kiro": _kiro,
    "claude-code": _claude_code,
    "codex": _codex,
    "gemini": _gemini,
    "cursor": _cursor,
    "copilot": _copilot,
    "opencode": _opencode,
    "qwen-code": _qwen_code,
    "auggie": _auggie,
    "kilo-code": _kilo_code,
    "factory-droid": _factory_droid,
}


# Canonical triggers and the event kind each makes.
TRIGGER_KIND = {
    "agentSpawn": "note",
    "userPromptSubmit": "prompt",
    "preToolUse": "tool_use",
    "postToolUse": "tool_use",
    "stop": "session_summary",
}
SESSION_START_TRIGGERS = ("agentSpawn",)
CONTEXT_TRIGGERS = ("agentSpawn", "userPromptSubmit")

# Keys only one agent sends: a hint without --agent, never a guess.
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
    return tuple(_LOADERS)


_LOADED: dict = {}  # agent name -> its adapter module, once imported


def get(name: "str | None" = None):
    """The adapter module for `name` (None: the default, Kiro)."""
    key = DEFAULT if name is None else name
    module = _LOADED.get(key)
    # the drain asks twice per event: a dict look-up, not an import each time
    if module is None:
        if key not in _LOADERS:
            raise UnknownAgent(f"unknown agent {str(key)[:40]!r}; expected one of {', '.join(_LOADERS)}")
        module = _LOADED[key] = _LOADERS[key]()
    return module
