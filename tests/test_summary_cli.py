"""The CLI twins of the MCP tools: save-summary, session-end, session-init."""

import json

from click.testing import CliRunner
from helpers import TURN, run_cli

from kirolearn import Memory
from kirolearn.cli.commands import cli


def test_save_summary_from_options_and_from_stdin(project):
    args = [
        "save-summary",
        "--request",
        TURN["request"],
        "--investigated",
        "i",
        "--learned",
        "l",
        "--completed",
        "c",
        "--next-steps",
        "n",
        "--file-read",
        "a.py",
        "--file-modified",
        "a.py",
    ]
    result = run_cli(*args, project=project)
    assert result.exit_code == 0 and result.output.startswith("Saved turn summary mr_")
    result = run_cli("save-summary", "--stdin", "--json", input=json.dumps(TURN), project=project)
    saved = json.loads(result.output)
    assert saved["title"] == TURN["request"]
    assert len(Memory().search("plus-sign login", project=project)) == 2


def test_save_summary_errors(project):
    assert (
        "missing --learned"
        in run_cli(
            "save-summary",
            "--request",
            "r",
            "--investigated",
            "i",
            "--completed",
            "c",
            "--next-steps",
            "n",
            project=project,
        ).output
    )
    bad = run_cli("save-summary", "--stdin", input=json.dumps(dict(TURN, extra=1)), project=project)
    assert bad.exit_code == 1 and "unknown field(s) extra" in bad.output
    bad = run_cli("save-summary", "--stdin", input="{nope", project=project)
    assert bad.exit_code == 1 and "not valid JSON" in bad.output
    empty = run_cli("save-summary", "--stdin", input=json.dumps(dict(TURN, request="")), project=project)
    assert empty.exit_code == 1 and "'request' must not be empty" in empty.output


def test_session_end_then_init_then_session_start(project):
    result = run_cli(
        "session-end",
        "--session-id",
        "s9",
        "--summary",
        "Queue for emails done.",
        "--next-step",
        "Monitor the mail worker",
        "--pitfall",
        "RQ needs Redis 6",
        "--json",
        project=project,
    )
    shape = json.loads(result.output)
    assert shape["next_steps_count"] == 1 and shape["project"] == "general"
    init = json.loads(run_cli("session-init", "--json", project=project).output)
    assert init["found"] and init["pitfalls"] == ["RQ needs Redis 6"]
    text = run_cli("session-init", project=project).output
    assert "Next steps:\n  - Monitor the mail worker" in text
    block = Memory().context(project=project)
    assert "Monitor the mail worker" in block


def test_session_end_requires_a_summary(project):
    for extra in ([], ["--summary", "  "]):  # the CLI's option names, not the MCP tool's field names
        result = run_cli("session-end", "--session-id", "s", *extra, project=project)
        assert result.exit_code == 2, result.output
        assert "give --summary, or --auto-compress to draft it with the configured model" in result.output
        assert "auto_compress is true" not in result.output


def test_session_end_auto_compress_without_a_model_still_saves(project, tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("user: fix it\nagent: fixed")
    result = run_cli(
        "session-end",
        "--session-id",
        "s",
        "--auto-compress",
        "--transcript",
        str(log),
        "--json",
        project=project,
    )
    assert json.loads(result.output)["auto_compress_error"] == "provider_unavailable"


def test_save_summary_reads_a_piped_json_document_without_stdin_flag(project):
    result = CliRunner().invoke(
        cli, ["save-summary", "--json", "--project", str(project)], input=json.dumps(TURN)
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["title"] == TURN["request"]
    empty = CliRunner().invoke(cli, ["save-summary", "--project", str(project)], input="")
    assert empty.exit_code == 2 and "missing --request" in empty.output
