"""The CLI's conventions (as llm and sqlite-utils have them), through the real `kirolearn` command:
grouped --help, -n/--limit, unique-prefix record ids, and a suggestion for a wrong verb."""

import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from helpers import run_cli

from kirolearn.cli.commands import cli
from kirolearn.cli.common import COMMAND_SECTIONS

BIN = os.path.dirname(sys.executable)


@pytest.fixture
def here(project, monkeypatch):
    monkeypatch.chdir(project)
    return project


def test_help_lists_every_command_once_under_its_section():
    out = run_cli("--help", ok=True).stdout
    titles = [title for title, _ in COMMAND_SECTIONS]
    positions = [out.index(f"\n{title}:\n") for title in titles]
    assert positions == sorted(positions)  # the sections, in their order
    assert "\nCommands:\n" not in out
    listed = re.findall(r"^  ([a-z][a-z-]*)  ", out.split("\nOptions:\n")[1], re.MULTILINE)
    assert sorted(listed) == sorted(cli.commands)  # every command, none twice, none lost
    drain_section = out.split("\nCapture and drain:\n")[1].split("\n\n")[0]
    assert "drain " in drain_section and "status " in drain_section
    assert "forget " in out.split("\nMemory:\n")[1].split("\n\n")[0]
    assert "Claude Code" in out


def test_a_command_no_section_names_is_listed_under_other():
    import click

    @cli.command(name="zz-new-command", help="A command added later.")
    def _new():
        pass

    try:
        out = run_cli("--help", ok=True).stdout
        assert "\nOther:\n  zz-new-command  A command added later." in out
    finally:
        del cli.commands["zz-new-command"]
    assert isinstance(cli, click.Group)


def test_subgroup_help_keeps_one_list():
    assert "\nCommands:\n" in run_cli("team", "--help", ok=True).stdout


def test_dash_n_is_limit_wherever_a_limit_is_taken(here, add_record):
    made = [add_record(here, f"Export retry note {i}") for i in range(3)]
    assert len(json.loads(run_cli("list", "-n", "2", "--json", ok=True).stdout)) == 2
    assert len(json.loads(run_cli("search", "export", "-n", "1", "--json", ok=True).stdout)) == 1
    forgotten = json.loads(
        run_cli("forget", "--query", "export", "-n", "1", "--yes", "--json", ok=True).stdout
    )["forgotten"]
    assert len(forgotten) == 1 and forgotten[0] in made
    for command in ("list", "search", "forget"):
        assert "-n, --limit" in run_cli(command, "--help", ok=True).stdout


def test_unique_prefix_ids_for_show_forget_restore_edit(here, add_record):
    rid = add_record(here, "Export uses port 5433")
    prefix = rid[:-8]  # one record: any unique start of its id names it
    shown = json.loads(run_cli("show", prefix, "--json", ok=True).stdout)
    assert shown["record_id"] == rid and shown["record"]["title"] == "Export uses port 5433"
    assert rid in run_cli("show", prefix, ok=True).stdout
    edited = json.loads(run_cli("edit", prefix, "--title", "Export uses port 5434", "--json", ok=True).stdout)
    assert edited["record_id"] == rid and edited["title"] == "Export uses port 5434"
    assert json.loads(run_cli("forget", prefix, "--json", ok=True).stdout) == {"forgotten": [rid]}
    assert (
        json.loads(run_cli("show", prefix, "--json", ok=True).stdout)["status"] == "forgotten"
    )  # a tombstone's id too
    assert json.loads(run_cli("restore", prefix, "--json", ok=True).stdout) == {"restored": [rid]}
    assert json.loads(run_cli("forget", rid, "--json", ok=True).stdout) == {
        "forgotten": [rid]
    }  # the full id still works
    assert json.loads(run_cli("forget", prefix, "--purge", "--yes", "--json", ok=True).stdout)[
        "record_ids"
    ] == [rid]


def test_an_ambiguous_prefix_is_an_error_listing_the_candidates(here, add_record):
    first, second = add_record(here, "One note"), add_record(here, "Another note")
    common = os.path.commonprefix([first, second])
    assert len(common) >= 3  # both start mr_ (and the ULIDs' time part)
    for args in (("show", common), ("forget", common), ("restore", common), ("edit", common, "--title", "x")):
        result = run_cli(*args)
        assert result.exit_code == 1, args
        assert (
            f"record id {common!r} is the start of 2 records' ids: {min(first, second)}, {max(first, second)}"
            in result.stderr
        ), (args, result.stderr)
        assert "give more characters of the id" in result.stderr
    assert json.loads(run_cli("list", "--json", ok=True).stdout)[0]["title"] in (
        "One note",
        "Another note",
    )  # nothing changed


def test_an_unknown_id_is_still_no_record(here, add_record):
    add_record(here, "A note")
    result = run_cli("show", "mr_nothing")
    assert result.exit_code == 1 and "no record 'mr_nothing'" in result.stderr


@pytest.mark.parametrize(
    "wrong, right",
    [
        ("delete", "forget"),
        ("rm", "forget"),
        ("remove", "forget"),
        ("find", "search"),
        ("ls", "list"),
        ("purge", "forget --purge"),
        ("lst", "list"),
    ],
)
def test_a_wrong_verb_gets_a_suggestion(wrong, right):
    result = run_cli(wrong, "x")
    assert result.exit_code == 2
    assert f"No such command {wrong!r}: did you mean `{right}`?" in result.stderr


def test_the_installed_command_suggests_too(tmp_path):
    done = subprocess.run(
        [os.path.join(BIN, "kirolearn"), "delete", "mr_x"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KIROLEARN_HOME": str(tmp_path / "h")},
    )
    assert done.returncode == 2
    assert "did you mean `forget`?" in done.stderr
    assert not (tmp_path / "h").exists()  # a usage error creates nothing


def test_shell_completion_as_documented(tmp_path):
    """docs/install-and-agents.md: `eval "$(_KIROLEARN_COMPLETE=bash_source kirolearn)"`, and it completes."""
    kirolearn = os.path.join(BIN, "kirolearn")
    env = {**os.environ, "KIROLEARN_HOME": str(tmp_path / "h")}
    source = subprocess.run(
        [kirolearn],
        env={**env, "_KIROLEARN_COMPLETE": "bash_source"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert source.returncode == 0 and "_kirolearn_completion" in source.stdout
    done = subprocess.run(
        [kirolearn],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "_KIROLEARN_COMPLETE": "bash_complete", "COMP_WORDS": "kirolearn for", "COMP_CWORD": "1"},
    )
    assert done.returncode == 0 and "plain,forget" in done.stdout.split(), done.stdout


def test_top_level_help_does_not_truncate_descriptions():
    out = CliRunner().invoke(cli, ["--help"], terminal_width=80).output
    commands = out.split("Options:")[1]  # the command sections follow the options
    assert "..." not in commands
    assert (
        " ".join(commands.split()).count(
            "Show the latest session-end summary of this project (it stays until superseded)."
        )
        == 1
    )


def test_search_with_a_missing_project_is_an_error(tmp_path):
    result = CliRunner().invoke(cli, ["search", "x", "--project", str(tmp_path / "nonexistent")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_help_names_every_agent_not_kiro_alone():
    """Issue #33: `kirolearn --help` and `install --help` spoke of Kiro alone."""
    from click.testing import CliRunner

    from kirolearn.cli.commands import cli

    for args in (["--help"], ["install", "--help"]):
        text = " ".join(CliRunner().invoke(cli, args).output.split())
        assert all(
            name in text
            for name in ("Kiro", "Claude Code", "Codex", "Copilot", "Gemini", "opencode", "Cursor")
        ), (args, text[:400])
