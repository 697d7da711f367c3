"""Canonical JSON and the tagged content hashes that decide what is a duplicate.

The canonical form is a contract (tests/test_dedup.py pins it): keys sorted, no whitespace,
non-ASCII kept as UTF-8. Hashes carry their algorithm as a prefix so a later
change of either is visible in the data.
"""

import hashlib
import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

HASH_PREFIX = "sha256:"

# "the same hook call": what the agent sent, not when or how it arrived
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


def canonical_json(value: object) -> str:
    """Deterministic JSON text of a JSON-like value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tagged_hash(value: object) -> str:
    """`sha256:<hex>` of the canonical JSON of `value`."""
    data = canonical_json(value).encode("utf-8", "surrogatepass")
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


def event_content_hash(event: "Mapping[str, object]") -> str:
    """Content hash of an event (see EVENT_CONTENT_FIELDS)."""
    return tagged_hash({k: event.get(k) for k in EVENT_CONTENT_FIELDS})


def stop_content_hash(event: "Mapping[str, object]", turn_key: "str | None") -> str:
    """Content hash of an end-of-turn event, keyed on what its turn holds.

    Kiro CLI posts empty stops, so two turns of one session can end with identical
    payloads seconds apart; a twin hook of the same stop follows the same turn. `turn_key`
    (the id of the newest event of the turn before the stop, see drain.Drainer) tells them apart.
    """
    fields = {k: event.get(k) for k in EVENT_CONTENT_FIELDS}
    fields["turn"] = turn_key
    return tagged_hash(fields)


KEYED_PREFIX = "hmac-sha256:"


def keyed_content_hash(
    event: "Mapping[str, object]", key: bytes, turn_key: "str | None" = None, stop: bool = False
) -> str:
    """A content hash of an event's raw text, keyed: for an event whose scrubbing removed something
    (a <private> span, a secret). Two such events that differ only in what was removed get different
    hashes, and without the home's key the hash reveals nothing of the removed text."""
    import hmac

    fields = {k: event.get(k) for k in EVENT_CONTENT_FIELDS}
    if stop:
        fields["turn"] = turn_key
    data = canonical_json(fields).encode("utf-8", "surrogatepass")
    return KEYED_PREFIX + hmac.new(key, data, hashlib.sha256).hexdigest()
