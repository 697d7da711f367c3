"""The content dedup (kirolearn/core/dedup.py): the canonical form and the hashes are a contract."""

import hashlib

from kirolearn.core import dedup
from kirolearn.core.project import project_id


def test_canonical_json_is_sorted_compact_and_keeps_utf8():
    assert (
        dedup.canonical_json({"b": 1, "a": [1, "é", None], "c": {"z": 0, "y": True}})
        == '{"a":[1,"é",null],"b":1,"c":{"y":true,"z":0}}'
    )


def test_tagged_hash_is_sha256_of_the_canonical_utf8():
    expected = hashlib.sha256('{"a":"é","b":[1,2]}'.encode()).hexdigest()
    assert dedup.tagged_hash({"b": [1, 2], "a": "é"}) == "sha256:" + expected


def test_hashes_accept_lone_surrogates():
    """Paths from os.fsdecode of undecodable bytes hold lone surrogates: hashing them must not raise."""
    path = "/srv/caf\udce9"
    raw = path.encode("utf-8", "surrogatepass")
    assert project_id(path) == hashlib.sha256(raw).hexdigest()[:16]
    assert dedup.tagged_hash(path) == "sha256:" + hashlib.sha256(b'"' + raw + b'"').hexdigest()


def test_event_content_hash_ignores_arrival_and_keeps_content():
    event = {
        "project_root": "/p",
        "session_id": "s",
        "kind": "tool_use",
        "trigger": "postToolUse",
        "tool_name": "shell",
        "tool_input": {"command": "ls"},
        "event_id": "01A",
        "received_at": "t1",
    }
    same = dict(event, event_id="01B", received_at="t2", hook="PostToolUse")
    assert dedup.event_content_hash(event) == dedup.event_content_hash(same)
    assert dedup.event_content_hash(event) == dedup.tagged_hash(
        {k: event.get(k) for k in dedup.EVENT_CONTENT_FIELDS}
    )
    for key, value in (("session_id", "other"), ("tool_input", {"command": "ls -l"}), ("project_root", "/q")):
        assert dedup.event_content_hash(dict(event, **{key: value})) != dedup.event_content_hash(event)
