"""The Auggie adapter (Augment's CLI, `@augmentcode/auggie`, measured on 0.36.0): its hooks, its rules file.

Facts (what the real client sent here, docs/agents/auggie.md): hooks live in the
`hooks` block of `settings.json` (`~/.augment/`, a project's committed
`.augment/settings.json` or personal `.augment/settings.local.json`), Claude
Code's shape with timeouts in milliseconds, and run only when Augment's
backend turns its `enable_hooks` flag on. The events are `SessionStart`,
`PromptSubmit`, `PreToolUse`, `PostToolUse`, `Stop`, `SessionEnd` and
`Notification`. Every payload is stdin JSON with `hook_event_name`,
`conversation_id` (the session) and `workspace_roots`; there is no `cwd`.
PromptSubmit has `user_prompt`; the tool events have `tool_name`
(`launch-process`, an MCP tool as `<tool>_<server>`), `tool_input`,
`tool_output` (text; a shell's opens with `<return-code>N</return-code>`, then
`<output>`), `tool_error` (the same text again when the call failed: a non-zero
exit, a denied tool) and `is_mcp_tool`. Stop has `agent_stop_cause` and
`_exchange.exchange.response_text`, the turn's final text.

Auggie runs SessionStart and PromptSubmit without waiting and drops their
output (a PromptSubmit's plain stdout is shown to the user), so context cannot
go back through a hook. It goes through a rules file instead,
`.augment/rules/kirolearn-memory.md` in the workspace (an always-applied rule).
Auggie reads its rules before its SessionStart hook runs, so the drain writes
that file after each pass (kirolearn.pipeline.drain), and the SessionStart hook
rewrites it for the session after.

Standard library only (the hook imports it); its installer half is kirolearn.install.agents.auggie.
"""

import os

from kirolearn.capture.agents import common

NAME = "auggie"
GENERATIONS = ("auggie",)
SURFACES = ("auggie",)
SESSION_ENV = None  # Auggie always sends conversation_id
TRANSCRIPT_TAIL_BYTES = common.TRANSCRIPT_TAIL_BYTES

TRIGGERS = {
    "SessionStart": "agentSpawn",
    "PromptSubmit": "userPromptSubmit",
    "PreToolUse": "preToolUse",
    "PostToolUse": "postToolUse",
    "Stop": "stop",
}
NOTE_TRIGGERS = ("SessionEnd", "Notification")

# What install wires: event, timeout in milliseconds (Auggie's unit).
HOOKS = (
    ("SessionStart", 5000),
    ("PromptSubmit", 5000),
    ("PostToolUse", 2000),
    ("Stop", 5000),
)

RULES_FILE = (".augment", "rules", "kirolearn-memory.md")
RULES_HEADER = (
    "---\ntype: always_apply\ndescription: kirolearn's memory of this project\n---\n"
    "<!-- Written by kirolearn at each Auggie session start (personal: git-ignored, not for commits). -->\n"
)
RULES_LIST = "auggie-rules-files.txt"  # every rules file a hook created, for uninstall


def resolve_trigger(name: str) -> "tuple[str, str]":
    """Map an Auggie hook name to (canonical trigger, generation); an unknown PascalCase name is a note."""
    return common.resolve_trigger(
        name, TRIGGERS, NOTE_TRIGGERS, "auggie", "Auggie hook event name", newer=True
    )


surface = common.fixed_surface("auggie")


payload_from_env = common.payload_from_env  # Auggie always sends its payload on stdin


def _workspace(payload: dict, env) -> "str | None":
    roots = payload.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0]:
        return roots[0]
    project = env.get("AUGMENT_PROJECT_DIR") if env is not None else None
    return project or None


def normalise(trigger: str, payload: dict, env) -> dict:
    """Auggie's names onto kirolearn's: conversation_id, the first workspace root, user_prompt, tool_output."""
    out = dict(payload)
    if isinstance(out.get("conversation_id"), str) and "session_id" not in out:
        out["session_id"] = out.pop("conversation_id")
    if "cwd" not in out:
        root = _workspace(payload, env)
        if root:
            out["cwd"] = root
    if trigger == "userPromptSubmit" and "prompt" not in out:
        out["prompt"] = out.pop("user_prompt", "")
    if trigger in ("preToolUse", "postToolUse") and "tool_output" in out:
        output = out.pop("tool_output")
        if trigger == "postToolUse":
            error = out.pop("tool_error", None)
            response = {"output": output}
            if error:  # a failed call: Auggie repeats its text as tool_error
                response["is_error"] = True
                if error != output:
                    response["error"] = error
            out["tool_response"] = response
    if trigger != "stop":
        return out
    exchange = out.pop("_exchange", None)  # the whole turn again (tool results too): only its answer is kept
    inner = exchange.get("exchange") if isinstance(exchange, dict) else None
    answer = inner.get("response_text") if isinstance(inner, dict) else None
    conversation = out.get("conversation")  # with the hook's includeConversationData
    if not (isinstance(answer, str) and answer.strip()) and isinstance(conversation, dict):
        answer = conversation.get("agentTextResponse")
    if isinstance(answer, str) and answer.strip() and not out.get("assistant_response"):
        out["assistant_response"] = answer
    return out


def rules_path(root: str) -> str:
    return os.path.join(root, *RULES_FILE)


def is_ours(path: str) -> bool:
    """Is the rule at `path` one kirolearn wrote (its header's mark)?"""
    try:
        with open(path, encoding="utf-8") as fh:
            return "kirolearn" in fh.read(4096)
    except OSError:
        return False


def write_rules(root: str, text: str, home: "str | None" = None) -> "str | None":
    """Write the memory rule under workspace `root` (atomic, 0600); the path, or None when it cannot."""
    path = rules_path(root)
    created = not os.path.exists(path)
    if not created and not is_ours(path):
        return None  # a file of the user's by that name: never overwritten
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(RULES_HEADER + text.rstrip("\n") + "\n")
    os.replace(tmp, path)
    _exclude_from_git(root)  # install's placeholder too, once the hook fills it
    if created:
        if home:
            os.makedirs(home, exist_ok=True)
            with open(os.path.join(home, RULES_LIST), "a", encoding="utf-8") as fh:
                fh.write(path + "\n")
    return path


def _exclude_from_git(root: str) -> None:
    """The memory is personal: a repository's own .git/info/exclude keeps it out of commits."""
    info = os.path.join(root, ".git", "info")
    if not os.path.isdir(info):
        return
    line = "/" + "/".join(RULES_FILE)
    exclude = os.path.join(info, "exclude")
    try:
        with open(exclude, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        text = ""
    if line not in text.splitlines():
        with open(exclude, "a", encoding="utf-8") as fh:
            fh.write(("" if not text or text.endswith("\n") else "\n") + line + "\n")


def context_output(trigger: str, text: str) -> str:
    """Nothing on stdout (Auggie drops it, or shows it to the user); SessionStart's block goes to the rules file."""
    if trigger == "agentSpawn":
        root = os.environ.get("AUGMENT_PROJECT_DIR")
        if root and os.path.isdir(root):
            from kirolearn.core import paths

            write_rules(root, text, paths.home())
    return ""
