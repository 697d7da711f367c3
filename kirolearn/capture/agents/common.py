"""What the non-Kiro adapters share: trigger tables, the final answer of a turn, transcript tails, JSON context.

Each adapter keeps what is its agent's own (hook names, payload fields, files)
and calls these with it. Standard library only (the hook imports it for every
non-Kiro event; the Kiro adapter does not import it, so a Kiro hook call loads
nothing more).
"""

import os

from kirolearn.capture.rejected import Rejected
from kirolearn.core import jsonfast

MARK = "kirolearn-hook"  # how kirolearn finds its own hook entries again

# Read-only tools only: forget_memory and the writers keep asking.
APPROVED_TOOLS = ("search_memory", "get_memory", "session_init")
# how much of a transcript's end a stop hook reads
TRANSCRIPT_TAIL_BYTES = 256 * 1024

# Claude Code's hook names, which Codex and Copilot CLI use too.
CLAUDE_TRIGGERS = {
    "SessionStart": "agentSpawn",
    "UserPromptSubmit": "userPromptSubmit",
    "PreToolUse": "preToolUse",
    "PostToolUse": "postToolUse",
    "Stop": "stop",
}


def is_event_name(name: str, capitalised: bool) -> bool:
    """A name in the agent's style (PascalCase letters, or camelCase): an event newer than its adapter."""
    return 3 <= len(name) <= 40 and name[0].isupper() == capitalised and name.isalpha() and name.isascii()


def resolve_trigger(
    name: str, triggers: dict, notes: tuple, generation: str, what: str, newer: "bool | None" = None
) -> "tuple[str, str]":
    """(canonical trigger, generation) of hook `name` from an adapter's tables.

    A name of `triggers` maps onto its canonical trigger, one of `notes` stays
    itself (a lifecycle note, payload in `extra`), and with `newer` (True:
    PascalCase, False: camelCase) so does any name in that style. Else
    Rejected, naming `what` and the names expected.
    """
    if name in triggers:
        return triggers[name], generation
    if name in notes or (newer is not None and is_event_name(name, newer)):
        return name, generation
    raise Rejected(f"unknown {what}; expected one of " + ", ".join((*triggers, *notes)))


def fixed_surface(name: str):
    """An adapter's `surface(generation, env)` for an agent that runs on one surface only: always `name`."""

    def surface(generation: str, env) -> str:
        return name

    return surface


def payload_from_env(arg, env):
    """None: the agent always sends its payload on stdin."""
    return None


def final_answer(
    payload: dict, fields: tuple, read_transcript, path_keys: tuple = ("transcript_path",), keep: bool = False
) -> dict:
    """A stop payload with the turn's final answer as `assistant_response`.

    The first of `fields` holding text wins (taken out of the payload, so it is
    stored once, unless `keep`); else `read_transcript(path)` of the first of
    `path_keys` that is set. The payload itself is returned when it already has
    an answer or none is found, else a new dict.
    """
    if payload.get("assistant_response"):
        return payload
    for key in fields:
        text = payload.get(key)
        if isinstance(text, str) and text.strip():
            rest = payload if keep else {k: v for k, v in payload.items() if k != key}
            return {**rest, "assistant_response": text}
    path = None
    for key in path_keys:
        path = payload.get(key)
        if path:
            break
    text = read_transcript(path) if isinstance(path, str) and path else None
    return {**payload, "assistant_response": text} if text else payload


def newest_lines(path: str, tail_bytes: int = TRANSCRIPT_TAIL_BYTES, needle: "bytes | None" = None):
    """The JSON values of a JSONL file's lines, newest first, from at most its last `tail_bytes`.

    A cut first line, a partial last line (the agent may still be writing) or
    any line that is not JSON is skipped, never an error; so is a line without
    `needle`, when given, unparsed. An unreadable file yields nothing.
    """
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - tail_bytes))
            data = fh.read(tail_bytes)
    except OSError:
        return
    lines = data.split(b"\n")
    if size > tail_bytes:
        lines = lines[1:]  # the first line is cut
    for raw in reversed(lines):
        if needle is not None and needle not in raw:
            continue
        try:
            item = jsonfast.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            continue
        yield item


def additional_context(event: str, text: str) -> str:
    """Context in the JSON form Claude Code's hooks defined: hookSpecificOutput.additionalContext of `event`."""
    return jsonfast.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})
