"""bench/claims_world.py builds what its truth says: one scenario of each kind, the hooks really run,
no drain. The kirolearn figures are bench/bench_claims.py's business, not this test's."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BIN

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import claims_world  # noqa: E402

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    built = claims_world.World(str(tmp_path_factory.mktemp("world")), str(BIN), per_kind=1, drain=False)
    built.play()
    return built


def test_every_kind_is_built_and_every_hook_call_exits_0(world):
    assert sorted(sc.kind for sc in world.scenarios) == sorted(claims_world.KINDS)
    assert world.hook_calls > 40 and world.hook_failures == []
    ready = Path(world.home) / "spool" / "ready"
    events = [json.loads(p.read_text("utf-8")) for p in ready.iterdir()]
    assert len(events) == world.hook_calls  # one event per call, none dropped by the hook
    sessions = {json.dumps(e, sort_keys=True) for e in events}
    for sc in world.scenarios:
        for turn in (t for t in sc.turns.values() if t.label != "same3"):  # same3: the restore phase's
            assert any(turn.session in s for s in sessions), (sc.name, turn.label)


def test_the_files_hold_what_the_truth_says(world):
    for sc in world.scenarios:
        cfg = sc.config
        text = Path(sc.project.root, cfg.path).read_text("utf-8")
        assert text == cfg.text(), sc.name
        for key, value in cfg.entries.items():
            assert claims_world.read_value(cfg.fmt, text, key) == value, (sc.name, key)


def test_each_change_turn_edits_the_line_the_file_held(world):
    for sc in world.scenarios:
        for turn in sc.turns.values():
            for step in (s for s in turn.steps if s.op == "edit"):
                assert step.old != step.new and step.path, (sc.name, turn.label)
                line = claims_world.LINE[sc.config.fmt]
                assert step.new in (line(step.key, step.value, False), line(step.key, step.value, True))


def test_the_person_operations_left_the_tree_as_the_truth_says(world):
    for sc in world.scenarios:
        root = sc.project.root
        if sc.variant == "nogit":
            assert not os.path.exists(os.path.join(root, ".git"))
            continue
        tracked = subprocess.run(
            ["git", "-C", root, "ls-files"], capture_output=True, text=True
        ).stdout.split()
        status = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "-uall"], capture_output=True, text=True
        ).stdout
        if "git mv" in sc.ops_done:
            assert sc.config.path in tracked and sc.moved_from not in tracked
        if "mv (uncommitted)" in sc.ops_done:
            assert (
                sc.moved_from in tracked and sc.config.path not in tracked
            )  # moved in the working tree only
            assert not os.path.exists(os.path.join(root, sc.moved_from)) and sc.config.path in status
        if sc.kind == "noop":
            # the discarded or undone write is not on disk: the truth's value is the first one
            truth = sc.turns["truth"].steps[0]
            assert sc.config.entries[truth.key] == truth.value


def test_a_formatter_changes_the_text_and_never_a_value():
    cfg = claims_world.ConfigFile("toml", "a.toml", {"staging.log_level": "debug", "production.replicas": 3})
    plain = cfg.text()
    cfg.pretty = True
    assert cfg.text() != plain
    for fmt in claims_world.FORMATS:
        pool = claims_world.PLANS[fmt][1]
        entries = {k: v[0] for k, v in pool.items()}
        one = claims_world.ConfigFile(fmt, "x", entries)
        two = claims_world.ConfigFile(fmt, "x", entries, pretty=True)
        for key, value in entries.items():
            assert claims_world.read_value(fmt, one.text(), key) == value
            assert claims_world.read_value(fmt, two.text(), key) == value
            assert one.text().count(one.line(key)) == 1, (fmt, key)  # an edit's old string is unique


def test_each_agent_speaks_its_own_shape(tmp_path):
    turn = claims_world.Turn(
        "t",
        "kiro",
        "set it",
        "done",
        steps=[
            claims_world.Step("edit", path="a.py", old="A = 1", new="A = 2"),
            claims_world.Step("recall", query="A"),
        ],
        session="s",
    )
    shapes = {}
    for agent in claims_world.AGENTS:
        turn.agent = agent
        shapes[agent] = claims_world.agent_calls(turn, str(tmp_path), str(tmp_path))
    assert [p["hook_event_name"] for _, p in shapes["kiro"]] == [
        "userPromptSubmit",
        "postToolUse",
        "postToolUse",
        "stop",
    ]
    assert shapes["claude-code"][2][1]["tool_name"] == "mcp__kirolearn__search_memory"
    assert (
        shapes["copilot"][1][0] == ["--agent", "copilot", "postToolUse"]
        and "toolArgs" in shapes["copilot"][1][1]
    )
    assert "*** Update File: " in shapes["codex"][1][1]["tool_input"]["input"]
