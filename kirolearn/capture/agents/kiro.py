"""The Kiro adapter: Kiro CLI and Kiro IDE, all three hook generations.

Kiro's generations disagree on almost everything: classic CLI agent hooks
(camelCase `hook_event_name` on stdin), v3 / IDE 1.x hook files (PascalCase,
`tool_response` often a string, `session_id` or `prompt` sometimes missing)
and IDE 0.x `.kiro.hook` files (payload in the `USER_PROMPT` variable, stdin
never closed). Facts: shared/reference/kiro-hooks.md.

Standard library only (the hook imports it). Kiro's installer targets are its installer half,
kirolearn.install.agents.kiro, on the shared engine kirolearn.install.engine.
"""

from kirolearn.capture.rejected import Rejected
from kirolearn.core import jsonfast

NAME = "kiro"
GENERATIONS = ("classic", "v3", "ide-legacy", "unknown")
SURFACES = ("kiro-cli", "kiro-ide")
# a session id some builds put in the environment
SESSION_ENV = "KIRO_SESSION_ID"

V3_TRIGGERS = {
    "SessionStart": "agentSpawn",
    "UserPromptSubmit": "userPromptSubmit",
    "PreToolUse": "preToolUse",
    "PostToolUse": "postToolUse",
    "Stop": "stop",
}
# v3 triggers with no classic twin: kept as lifecycle notes, payload in `extra`.
V3_NOTE_TRIGGERS = (
    "PreTaskExec",
    "PostTaskExec",
    "PostFileCreate",
    "PostFileSave",
    "PostFileDelete",
    "Manual",
)
CLASSIC_TRIGGERS = ("agentSpawn", "userPromptSubmit", "preToolUse", "postToolUse", "stop")
# `kirolearn-hook EVENT`: legacy IDE hooks (payload in USER_PROMPT) ...
IDE_LEGACY_ARGS = {
    "ide-prompt-submit": "userPromptSubmit",
    "ide-post-tool": "postToolUse",
    "ide-agent-stop": "stop",
}
# ... and the kebab-case names our generated hook configs pass (stdin JSON).
HOOK_ARGS = {
    "agent-spawn": "agentSpawn",
    "session-start": "agentSpawn",
    "prompt-submit": "userPromptSubmit",
    "pre-tool": "preToolUse",
    "post-tool": "postToolUse",
    "stop": "stop",
}


# What --help and errors list (session-start is an alias of agent-spawn).
EVENT_ARGS = [name for name in HOOK_ARGS if name != "session-start"] + list(IDE_LEGACY_ARGS)


def resolve_trigger(name: str) -> "tuple[str, str]":
    """Map any Kiro spelling of a hook name to (canonical trigger, generation)."""
    if name in CLASSIC_TRIGGERS:
        return name, "classic"
    if name in V3_TRIGGERS:
        return V3_TRIGGERS[name], "v3"
    if name in V3_NOTE_TRIGGERS:
        return name, "v3"
    if name in IDE_LEGACY_ARGS:
        return IDE_LEGACY_ARGS[name], "ide-legacy"
    if name in HOOK_ARGS:
        return HOOK_ARGS[name], "unknown"
    raise Rejected(
        "unknown hook event name; expected in the payload one of agentSpawn, userPromptSubmit, preToolUse, "
        "postToolUse, stop or their v3 PascalCase forms, or as the EVENT argument one of "
        + " | ".join(EVENT_ARGS)
    )


def surface(generation: str, env) -> str:
    """kiro-ide or kiro-cli, from the generation and the IDE's environment variables."""
    if generation == "ide-legacy":
        return "kiro-ide"
    if generation == "v3" and (env.get("VSCODE_PID") or env.get("VSCODE_IPC_HOOK")):
        return "kiro-ide"
    return "kiro-cli"


def payload_from_env(arg: "str | None", env) -> "tuple[str, dict | None] | None":
    """For IDE 0.x hooks (EVENT argument, payload in USER_PROMPT): (name, payload or None to skip).

    None when `arg` is not such a hook: the payload then comes from stdin.
    """
    if arg not in IDE_LEGACY_ARGS:
        return None
    return arg, ide_legacy_payload(IDE_LEGACY_ARGS[arg], env.get("USER_PROMPT", ""))


def ide_legacy_payload(trigger: str, user_prompt: str) -> "dict | None":
    """Decode the USER_PROMPT variable of an IDE 0.x hook into payload keys.

    Returns None when there is nothing to record (the IDE fires agentStop with
    an empty USER_PROMPT; the seed spec says the IDE path skips those).
    """
    if trigger == "userPromptSubmit":
        return {"prompt": user_prompt}
    if trigger == "stop":
        return {"assistant_response": user_prompt} if user_prompt.strip() else None
    # postToolUse: camelCase {"toolName","toolArgs","toolResult",...}.
    try:
        data = jsonfast.loads(user_prompt) if user_prompt.strip() else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return {"tool_name": "unknown", "tool_response": user_prompt}
    response = {"result": data.get("toolResult")}
    if "toolSuccess" in data:
        response = {"success": data.get("toolSuccess"), "result": data.get("toolResult")}
    payload = {
        "tool_name": str(data.get("toolName") or "unknown"),
        "tool_input": data.get("toolArgs"),
        "tool_response": response,
    }
    rest = {k: v for k, v in data.items() if k not in ("toolName", "toolArgs", "toolResult", "toolSuccess")}
    if rest:
        payload["extra"] = rest
    return payload


def normalise(trigger: str, payload: dict, env) -> dict:
    """Kiro payloads need no rewriting beyond what build_event does."""
    return payload


def context_output(trigger: str, text: str) -> str:
    """Kiro adds a hook's stdout (exit 0) to the context of agentSpawn and userPromptSubmit."""
    return text
