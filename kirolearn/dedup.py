"""Canonical JSON and the tagged content hashes that decide what is a duplicate.

The canonical form is a contract (tests/test_mutants.py pins it): keys sorted, no whitespace,
non-ASCII kept as UTF-8. Hashes carry their algorithm as a prefix so a later
change of either is visible in the data.
"""

import hashlib
import json

HASH_PREFIX = "sha256:"

# What makes two events "the same hook call": everything Kiro sent, not when or
# by which process it arrived (event_id, received_at, hook spelling are excluded).
EVENT_CONTENT_FIELDS = (
    "project_root",
    "session_id",
    "kind",
    "trigger",
    "prompt",
    "tool_name",
    "tool_input",
    "tool_response",
    "assistant_response",
    "extra",
)


def canonical_json(value) -> str:
    """Deterministic JSON text of a JSON-like value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tagged_hash(value) -> str:
    """`sha256:<hex>` of the canonical JSON of `value`."""
    data = canonical_json(value).encode("utf-8", "surrogatepass")
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


def event_content_hash(event: dict) -> str:
    """Content hash of an event (see EVENT_CONTENT_FIELDS)."""
    return tagged_hash({k: event.get(k) for k in EVENT_CONTENT_FIELDS})
