"""Issue #44, shorter walks: the event carries its project id from the hook to the store, and old
spool files without it still drain."""

import json

from kirolearn import hook as hooks
from kirolearn.capture import events, shown, spool
from kirolearn.core import project as project_mod

REMOTE = '[remote "origin"]\n\turl = git@github.com:example/shop.git\n'


def _with_remote(project):
    (project / ".git" / "config").write_text(REMOTE)
    return project


def _count_project_ids(monkeypatch) -> list:
    """Every project-id computation, whoever imported project_id by name, goes through project_key."""
    calls = []
    real = project_mod.project_key

    def counting(root, home=None):
        calls.append(root)
        return real(root, home)

    monkeypatch.setattr(project_mod, "project_key", counting)
    project_mod.forget_cached_ids()
    return calls


def test_the_event_carries_its_project_id_computed_once(project, spooled, drain_now, monkeypatch):
    _with_remote(project)
    calls = _count_project_ids(monkeypatch)
    payload = {"hook_event_name": "userPromptSubmit", "cwd": str(project), "session_id": "s1", "prompt": "hi"}
    assert hooks.handle([], json.dumps(payload).encode()) == 0
    (event,) = spooled()
    assert event["schema_version"] == events.SCHEMA_VERSION == 3
    expected = project_mod.path_id("git:github.com/example/shop")
    assert event["project_id"] == expected
    stats, db = drain_now()
    assert stats.stored == 1 and stats.quarantined == 0
    assert [r["project_id"] for r in db.query("select project_id from events")] == [expected]
    assert calls == [str(project)]  # the hook's, once; neither recall nor the drain asked again


def test_old_spool_files_without_a_project_id_still_drain(project, drain_now):
    _with_remote(project)
    for version in (1, 2):
        event = events.build_event(
            "userPromptSubmit", {"cwd": str(project), "session_id": "old", "prompt": "hi"}
        )
        del event["project_id"]
        event["schema_version"] = version
        event["prompt"] = f"version {version}"
        if version == 1:
            del event["agent"]
        spool.append(event["event_id"], events.serialize(event))
    stats, db = drain_now()
    assert stats.stored == 2 and stats.quarantined == 0
    ids = {r["project_id"] for r in db.query("select project_id from events")}
    assert ids == {project_mod.project_id(str(project))}


def test_a_bad_project_id_is_quarantined(project, drain_now, home):
    event = events.build_event("userPromptSubmit", {"cwd": str(project), "session_id": "s", "prompt": "hi"})
    event["project_id"] = "../not-an-id"
    spool.append(event["event_id"], events.serialize(event))
    stats, _ = drain_now()
    assert stats.stored == 0 and stats.quarantined == 1
    reason = next((home / "spool" / "quarantine").glob("*.reason")).read_text()
    assert "project_id" in reason


def test_the_hook_serialises_its_event_once(project, spooled, monkeypatch):
    calls = []
    real = events.serialize

    def counting(event):
        calls.append(event["event_id"])
        return real(event)

    monkeypatch.setattr(events, "serialize", counting)
    payload = {"hook_event_name": "postToolUse", "cwd": str(project), "session_id": "s1", "tool_name": "x"}
    assert hooks.handle([], json.dumps(payload).encode()) == 0
    (event,) = spooled()
    assert calls == [event["event_id"]]  # the size check's bytes are the ones written


def test_a_stop_event_keeps_the_ids_recall_showed_inside_the_size_caps(project, spooled, monkeypatch):
    shown_ids = [f"01J{i:023d}" for i in range(3)]
    monkeypatch.setattr(shown, "load_state", lambda session_id: {"records": shown_ids})
    small = {"hook_event_name": "stop", "cwd": str(project), "session_id": "s1"}
    # too big even at the smallest caps: the payload fields are cut to text, the shown ids stay
    huge = {**small, "blob": [[f"v{i:08d}" for i in range(500)] for _ in range(500)]}
    for payload in (small, huge):
        assert hooks.handle([], json.dumps(payload).encode()) == 0
    kept, cut = spooled()
    assert kept["extra"] == {"recall_shown": shown_ids}
    assert cut["extra"] == {"recall_shown": shown_ids} and "extra" in cut["truncated"]
    assert len(events.serialize(cut)) <= events.MAX_EVENT_BYTES
