"""The turns and checks every opencode-family real-client test shares (opencode, Kilo Code): the same
plugin, so the same marker turn, the same recall turn and the same evidence of each."""

import json

from agentrun import BIN, events_of, export, tool_results, tool_uses
from fake_anthropic import Text, ToolCall


def marker_turn(fake, mark: str, final: str, command: "str | None" = None) -> None:
    """A turn: bash (after "Let me run a command."), then the final answer."""
    fake.script = [
        ToolCall(
            "bash",
            {"command": command or f"echo {mark}", "description": "Print the marker"},
            text="Let me run a command.",
        ),
        Text(final),
    ]


def recall_turn(fake) -> None:
    fake.script = [ToolCall("search_memory", {"query": "marker command"}), Text("It is in memory.")]


def assert_captured(project, agent: str, mark: str, final: str) -> list:
    """The marker turn as stored: its real final answer, its one bash call. Returns the agent's events."""
    stored = events_of(export(project), agent)
    assert [s["assistant_response"] for s in stored if s["trigger"] == "stop"] == [final]
    assert [
        (t["tool_name"], t["tool_input"]["command"]) for t in stored if t["trigger"] == "postToolUse"
    ] == [("bash", f"echo {mark}")]
    return stored


def assert_recalled(fake, mark: str) -> None:
    """Memory in the first request's system prompt; search_memory's answer reaches the model."""
    assert fake.errors == []
    first, last = fake.main_requests()[0], fake.main_requests()[-1]
    assert mark in json.dumps(first["system"])  # the plugin's system-prompt transform
    (call,) = [u for u in tool_uses(last) if u[1] == "kirolearn_search_memory"]
    answers = [text for use_id, text in tool_results(last) if use_id == call[0]]
    assert answers and mark in answers[0]


def path_with_kirolearn(tmp_path, path: str) -> str:
    """`path` led by a folder holding only kirolearn's console scripts, as pipx would put them on PATH."""
    folder = tmp_path / "path-bin"
    folder.mkdir()
    for name in ("kirolearn-hook", "kirolearn-mcp"):
        (folder / name).symlink_to(BIN / name)
    return f"{folder}:{path}"
