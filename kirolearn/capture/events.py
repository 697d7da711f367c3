"""Turn one agent hook call into one kirolearn event dict (standard library only).

What differs between agents (hook names, payload shapes, environment hints)
lives in their adapters, one per agent in kirolearn.capture.agents (Kiro, Claude Code, Codex,
Copilot CLI, Gemini CLI, Qwen Code, Auggie, Factory Droid, opencode, Kilo Code, Cursor).
`build_event` asks the adapter to map the hook name onto kirolearn's canonical
triggers and returns the one flat shape described in queue/README.md and
validated by kirolearn.pipeline.schema.Event. Invalid input raises `Rejected`; nothing
here writes.
"""

import os
import time

from kirolearn.capture import agents, spool
from kirolearn.capture.agents import SESSION_START_TRIGGERS, TRIGGER_KIND
from kirolearn.capture.rejected import Rejected  # noqa: F401 - events.Rejected, as callers know it
from kirolearn.core import identity, isotime, jsonfast
from kirolearn.core.ids import new_ulid, new_uuid4
from kirolearn.core.project import find_project_root, project_id
from kirolearn.core.version import __version__

# 2 added `agent` (version 1 files, no agent, are Kiro's); 3 added `project_id`, computed once here
# (a version 1 or 2 file without it still drains: the drain computes it)
SCHEMA_VERSION = 3

# Made by the hook, constrained by Event: no user text, so scrubbing skips them.
GENERATED_FIELDS = frozenset(
    (
        "schema_version",
        "agent",
        "event_id",
        "kind",
        "hook",
        "trigger",
        "generation",
        "surface",
        "session_source",
        "received_at",
        "client_version",
        "project_global",
        "project_id",
    )
)

# Size caps, documented in queue/README.md; shrink_event applies them.
MAX_STRING_CHARS = 32 * 1024
MAX_ITEMS = 500
MAX_DEPTH = 32
MAX_EVENT_BYTES = spool.MAX_ENTRY_BYTES  # the most the spool accepts as one entry
MIN_STRING_CHARS = 256

# Folded into named event fields; every other key goes to `extra`.
_KNOWN_KEYS = frozenset(
    (
        "hook_event_name",
        "cwd",
        "session_id",
        "prompt",
        "tool_name",
        "tool_input",
        "tool_response",
        "assistant_response",
    )
)


def _adapter(agent: "str | None"):
    try:
        return agents.get(agent)
    except agents.UnknownAgent as exc:
        raise Rejected(str(exc)) from None


def resolve_trigger(name: str, agent: "str | None" = None) -> "tuple[str, str]":
    """Map `agent`'s spelling of a hook name to (canonical trigger, generation)."""
    return _adapter(agent).resolve_trigger(name)


utc_iso = isotime.utc_iso  # the stored timestamp format, defined once


def ide_legacy_payload(trigger: str, user_prompt: str) -> "dict | None":
    """Kiro IDE 0.x: the USER_PROMPT variable as payload keys (see agents.kiro)."""
    return agents.get("kiro").ide_legacy_payload(trigger, user_prompt)


def build_event(
    name: str,
    payload: dict,
    *,
    env=None,
    cwd: "str | None" = None,
    session_lookup=None,
    now: "float | None" = None,
    agent: "str | None" = None,
    annotate=None,
) -> dict:
    """Build the event dict for `agent`'s hook `name` with its decoded `payload`.

    `session_lookup(surface, project_root, renew)` supplies a session id when
    neither the payload nor the agent's session variable has one (see
    hooks.session_file_id). `annotate(event)` may add fields before the size caps apply.
    """
    return spooled_event(
        name,
        payload,
        env=env,
        cwd=cwd,
        session_lookup=session_lookup,
        now=now,
        agent=agent,
        annotate=annotate,
    )[0]


def spooled_event(
    name: str,
    payload: dict,
    *,
    env=None,
    cwd: "str | None" = None,
    session_lookup=None,
    now: "float | None" = None,
    agent: "str | None" = None,
    annotate=None,
) -> "tuple[dict, bytes]":
    """build_event's event and its spool bytes: the hook serialises it once, in the size check."""
    env = os.environ if env is None else env
    now = time.time() if now is None else now
    agent = agent or agents.DEFAULT
    adapter = _adapter(agent)
    trigger, generation = adapter.resolve_trigger(name)
    payload = adapter.normalise(trigger, payload, env)
    kind = TRIGGER_KIND.get(trigger, "note")
    surface = adapter.surface(generation, env)

    event_cwd = payload.get("cwd")
    if not isinstance(event_cwd, str) or not event_cwd:
        event_cwd = cwd or os.getcwd()
    project_root, is_global = find_project_root(event_cwd)

    session_id = payload.get("session_id")
    if isinstance(session_id, str) and session_id.strip():
        session_source = "payload"
    elif adapter.SESSION_ENV and env.get(adapter.SESSION_ENV, "").strip():
        session_id, session_source = env[adapter.SESSION_ENV], "env"
    else:
        renew = trigger in SESSION_START_TRIGGERS
        session_id = session_lookup(surface, project_root, renew) if session_lookup else new_uuid4()
        session_source = "session-file"

    event = {
        "schema_version": SCHEMA_VERSION,
        "agent": agent,
        "event_id": new_ulid(int(now * 1000)),
        "kind": kind,
        "hook": name,
        "trigger": trigger,
        "generation": generation,
        "surface": surface,
        "session_id": session_id.strip()[:256],
        "session_source": session_source,
        "cwd": event_cwd,
        "project_root": project_root,
        "project_global": is_global,
        "project_id": project_id(project_root),  # the drain and the prompt's recall read it from here
        "received_at": utc_iso(now),
        "client_version": __version__,
        "actor": identity.event_user(env),
        "host": identity.this_host(env),
    }
    _copy_fields(event, kind, payload, env)
    extra = {k: v for k, v in payload.items() if k not in _KNOWN_KEYS and k != "extra"}
    if isinstance(payload.get("extra"), dict):
        extra.update(payload["extra"])
    if extra:
        event["extra"] = extra
    if annotate is not None:
        annotate(event)
    return shrink_to_bytes(event)


def _text(value) -> "str | None":
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return jsonfast.dumps(value, ensure_ascii=False)


def _copy_fields(event: dict, kind: str, payload: dict, env) -> None:
    if kind == "prompt":
        prompt = _text(payload.get("prompt")) or ""
        if not prompt.strip() and env.get("USER_PROMPT", "").strip():
            # v3 builds sent "prompt": "" (Kiro #10308); the variable still has it.
            prompt = env["USER_PROMPT"]
        event["prompt"] = prompt
    elif kind == "tool_use":
        tool_name = payload.get("tool_name")
        event["tool_name"] = tool_name if isinstance(tool_name, str) and tool_name else "unknown"
        if "tool_input" in payload:
            event["tool_input"] = payload["tool_input"]
        if "tool_response" in payload:
            event["tool_response"] = payload["tool_response"]
    elif kind == "session_summary":
        event["assistant_response"] = _text(payload.get("assistant_response"))
    else:
        # Notes keep whatever prompt agentSpawn carried under --no-interactive.
        if isinstance(payload.get("prompt"), str) and payload["prompt"]:
            event["prompt"] = payload["prompt"]


# --- size caps -------------------------------------------------------------


def cut_text(text: str, cap: int) -> str:
    """Keep the head and the tail of `text` around a marker saying how much went."""
    if len(text) <= cap:
        return text
    keep_head = cap * 3 // 4
    keep_tail = cap - keep_head
    dropped = len(text) - keep_head - keep_tail
    return f"{text[:keep_head]}\n[... kirolearn cut {dropped} chars ...]\n{text[-keep_tail:]}"


def _shrink(value, cap: int, depth: int, path: str, cut: list):
    if isinstance(value, str):
        if len(value) > cap:
            cut.append(path)
            return cut_text(value, cap)
        return value
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if depth >= MAX_DEPTH:
        cut.append(path)
        return f"[... kirolearn cut nesting deeper than {MAX_DEPTH} ...]"
    if isinstance(value, dict):
        items = list(value.items())
        out = {}
        for key, item in items[:MAX_ITEMS]:
            key = cut_text(str(key), MIN_STRING_CHARS * 4)
            out[key] = _shrink(item, cap, depth + 1, f"{path}.{key[:40]}", cut)
        if len(items) > MAX_ITEMS:
            cut.append(path)
            out["[kirolearn]"] = f"cut {len(items) - MAX_ITEMS} more keys"
        return out
    if isinstance(value, (list, tuple)):
        n = len(value)
        if n > MAX_ITEMS:
            cut.append(path)
            head = MAX_ITEMS * 3 // 4
            tail = MAX_ITEMS - head
            kept = (
                list(value[:head]) + [f"[... kirolearn cut {n - MAX_ITEMS} items ...]"] + list(value[-tail:])
            )
        else:
            kept = list(value)
        return [_shrink(item, cap, depth + 1, f"{path}[]", cut) for item in kept]
    return str(value)


def scrub_event(event: dict, scrubber) -> dict:
    """`event` with every field a user or tool could have written passed through `scrubber.scrub_value`
    (a kirolearn.privacy.scrub.Scrubber): the one way the drain, import, team sync and rescrub clean one."""
    return {k: v if k in GENERATED_FIELDS else scrubber.scrub_value(v) for k, v in event.items()}


def serialize(event: dict) -> bytes:
    """The event's spool bytes: compact UTF-8 JSON (lone surrogates replaced)."""
    text = jsonfast.dumps(event, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def shrink_event(event: dict) -> dict:
    """Apply the size caps; records what was cut in `event["truncated"]` (shrink_to_bytes)."""
    return shrink_to_bytes(event)[0]


def shrink_to_bytes(event: dict) -> "tuple[dict, bytes]":
    """The event with the size caps applied, and its spool bytes (the ones the check measured).

    Strings longer than the cap (MAX_STRING_CHARS, then a quarter of it, down to
    MIN_STRING_CHARS) keep their head and tail around a marker; containers keep
    MAX_ITEMS entries; nesting below MAX_DEPTH becomes a marker; until the event
    serialises to at most MAX_EVENT_BYTES. Still too big at the smallest cap
    (e.g. thousands of keys): the envelope stays and each payload field becomes a
    cut text rendering of it."""
    cap = MAX_STRING_CHARS
    while True:
        cut: list = []
        shrunk = {k: _shrink(v, cap, 0, k, cut) for k, v in event.items()}
        if cut:
            shrunk["truncated"] = sorted(set(cut))
        data = serialize(shrunk)
        if len(data) <= MAX_EVENT_BYTES:
            return shrunk, data
        if cap <= MIN_STRING_CHARS:
            break
        cap //= 4
    # Too big even at the smallest cap: keep the envelope, cut each payload field.
    extra = shrunk.get("extra")
    shown = extra.get("recall_shown") if isinstance(extra, dict) else None
    for key in ("tool_input", "tool_response", "extra", "prompt", "assistant_response"):
        if key in shrunk:
            shrunk[key] = cut_text(_text(shrunk[key]) or "", MAX_STRING_CHARS // 4)
            shrunk.setdefault("truncated", []).append(key)
    if shown is not None:  # a stop event's shown ids (capture.shown) outlive the cut
        shrunk["extra"] = {"recall_shown": shown}
    return shrunk, serialize(shrunk)
