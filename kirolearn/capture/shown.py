"""What the hook's recall showed a session, kept in $KIROLEARN_HOME/sessions/recall-<hash>.json.

Standard library only. kirolearn.recall.context writes it; the stop hook reads it so a turn's event
says which records the agent was shown (`extra.recall_shown`), and the drain can tell an answer
that repeats them (an echo) from new work.
"""

import os

from kirolearn.core import jsonfast, paths
from kirolearn.core.ids import sha256_hex

SHOWN_MAX = 50  # ids a stop event carries, the latest


def state_path(session_id: str) -> str:
    key = sha256_hex(session_id.encode("utf-8", "replace"))[:32]
    return os.path.join(paths.sessions_dir(), f"recall-{key}.json")


def load_state(session_id: str) -> dict:
    """What this session was already shown: {"session_start": bool, "records": [ids], ...}."""
    try:
        with open(state_path(session_id), encoding="utf-8") as fh:
            state = jsonfast.load(fh)
        if isinstance(state, dict) and isinstance(state.get("records"), list):
            return state
    except (OSError, ValueError):
        pass
    return {"session_start": False, "records": []}


def note_shown(event: dict) -> None:
    """Add to a stop event the ids recall showed its session (nothing when it showed none)."""
    if not event.get("session_id"):
        return
    ids = [str(r) for r in load_state(str(event["session_id"]))["records"] if isinstance(r, str)]
    if ids:
        extra = event.get("extra")
        event["extra"] = {**(extra if isinstance(extra, dict) else {}), "recall_shown": ids[-SHOWN_MAX:]}
