"""The context block (kirolearn/recall/context.py): what takes the turn-summary slot, the budget cap under
Kiro's 10 KB hook output, and cuts (kirolearn/core/textcut.py) that land on a boundary, never inside code."""

import json

import pytest
from conftest import run_hook
from helpers import TURN, call

from kirolearn import Memory
from kirolearn.core import textcut
from kirolearn.recall import context

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")


def test_session_end_records_do_not_take_the_turn_summary_slot(project):
    call(project, "save_session_summary", TURN)
    call(project, "session_end", {"session_id": "s-1", "summary": "Wrapped up the login work for today."})
    block = Memory().context(project=project)
    # one line: the request once, then what was completed and what is next
    assert (
        "- Why does login 500 on plus-sign emails? → Parameterised the query Next: Fix app/orders.py" in block
    )
    assert "· session_summary ·" in block
    assert "Session end:" not in block  # shown once, in the session-end block
    assert block.count("Wrapped up the login work") == 1
    prompt = Memory().context(
        project=project, prompt="wrapped up the login work today", session_id="no-start"
    )
    assert "· session_end ·" in prompt and "Session end: Wrapped up" in prompt


def test_the_hook_caps_the_budget_below_kiros_output_limit(project, add_record, write_config):
    write_config("[recall]\nbudget_tokens = 100000\n")  # an old config.toml: the hook still caps it
    assert context.settings()["budget_tokens"] == context.MAX_BUDGET_TOKENS
    for i in range(12):
        add_record(
            project,
            f"Decision {i} about the café schema — ünïcode",
            "é" * 3000 + f" `code {i}`",
            observation_type="decision",
        )
    out = run_hook(
        stdin=json.dumps({"hook_event_name": "agentSpawn", "cwd": str(project), "session_id": "big"}).encode()
    ).stdout
    assert 0 < len(out) <= 10_000 < 10_240


def test_cut_lands_on_a_boundary_and_never_inside_code():
    text = "First sentence here. Then we ran `make test --all` to check.\nSecond line with more words."
    for limit in range(10, len(text)):
        cut = textcut.cut(text, limit)
        assert len(cut) <= limit and cut.endswith(textcut.MARKER.strip())
        kept = cut[: -len(textcut.MARKER)] if cut != textcut.MARKER.strip() else ""
        assert kept.count("`") % 2 == 0, cut
        assert text.startswith(kept)
    assert (
        textcut.cut(text, 70)
        == "First sentence here. Then we ran `make test --all` to check." + textcut.MARKER
    )
    fenced = "Run this:\n```\nlong code line one\nlong code line two\n```\nafter"
    assert textcut.cut(fenced, 40) == "Run this:" + textcut.MARKER


def test_a_long_summary_is_cut_outside_its_code_span_in_the_block(project, add_record):
    summary = "We changed the query. " * 30 + "Then `" + "x" * 200 + "` fixed it."
    add_record(project, "Long record", summary, observation_type="decision")
    block = Memory().context(project=project)
    (line,) = [ln for ln in block.splitlines() if "We changed the query" in ln]
    said = line.split(" · decision · ")[0]  # one line per record: what it holds, then its kind, age and id
    assert said.endswith("We changed the query.") and "`" not in said


def test_context_prompt_prints_what_the_real_prompt_hook_of_a_new_session_prints(project, add_record):
    """Issue #33: `context --prompt` printed 2 records where a new session's prompt hook printed none
    (its session start had shown them). It models that session; --session models a running one."""
    from conftest import cli

    add_record(
        project,
        "Checkout timeouts come from the payment pool",
        "pool size 5 under load",
        observation_type="discovery",
    )
    add_record(project, "Payment pool raised to 20", "the checkout pool limit", observation_type="decision")
    add_record(project, "Unrelated: docs theme colour", "blue", observation_type="decision")
    prompt = "why does checkout time out on the payment pool?"
    previewed = cli("context", "--prompt", prompt, "--project", str(project))
    # a session shown nothing yet (no session start) would get them: what the preview used to print
    assert (
        "Payment pool"
        in cli("context", "--prompt", prompt, "--session", "bare", "--project", str(project)).stdout
    )
    start = run_hook(
        stdin=json.dumps(
            {"hook_event_name": "agentSpawn", "cwd": str(project), "session_id": "new-1"}
        ).encode()
    )
    assert start.returncode == 0 and "Payment pool" in start.stdout.decode()
    hook = run_hook(
        stdin=json.dumps(
            {
                "hook_event_name": "userPromptSubmit",
                "cwd": str(project),
                "session_id": "new-1",
                "prompt": prompt,
            }
        ).encode()
    )
    assert hook.returncode == 0 and hook.stdout == b""  # its session start showed them already
    assert previewed.stdout == hook.stdout.decode()
    # a running session, as its state stands: the same again (nothing new), and equal to the hook's next answer
    running = cli("context", "--prompt", prompt + " again", "--session", "new-1", "--project", str(project))
    again = run_hook(
        stdin=json.dumps(
            {
                "hook_event_name": "userPromptSubmit",
                "cwd": str(project),
                "session_id": "new-1",
                "prompt": prompt + " again",
            }
        ).encode()
    )
    assert running.stdout == again.stdout.decode()
