"""Files a user or an attacker prepared: a UTF-16 config, an absurd --since, a world-readable export
target, a hard link planted in logs/ (issue #34, defects 5 to 7). Each gets a clear answer, and
no memory reaches a file it should not."""

import json
import os
import stat

from conftest import assert_one_error, cli, kl, run_hook, spool_events  # noqa: F401


def test_a_utf16_config_is_a_clear_error_not_a_kirolearn_bug(home):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_bytes(
        "[recall]\nbudget_tokens = 300\n".encode("utf-16")
    )  # starts with a BOM
    for command in (["config", "show"], ["status"]):
        line = assert_one_error(cli(*command), "config.toml", "UTF-16", "UTF-8")
        assert "kirolearn bug" not in line
    from kirolearn.core.configfile import hook_view

    assert (
        hook_view()["budget_tokens"] == 300 or hook_view()["budget_tokens"] > 0
    )  # the hook keeps its defaults


def test_a_utf8_bom_config_is_read(home):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_bytes("\ufeff[recall]\nbudget_tokens = 300\n".encode("utf-8"))
    from kirolearn import settings

    assert settings.load().recall.budget_tokens == 300


def test_since_far_beyond_the_calendar_is_a_clear_error(home, project):
    spool_events(project, 1)
    assert cli("drain").returncode == 0
    result = cli("list", "--since", "99999999d")
    assert result.returncode == 2 and "Traceback" not in result.stderr  # click's usage error, one clear line
    assert (
        "--since" in result.stderr
        and "before the year 1" in result.stderr
        and "OverflowError" not in result.stderr
    )
    assert cli("list", "--since", "36500d").returncode == 0


def test_export_into_an_existing_world_readable_file_makes_it_private(home, project, tmp_path):
    spool_events(project, 1)
    assert cli("drain").returncode == 0
    target = tmp_path / "backup.jsonl"
    target.write_text("old")
    os.chmod(target, 0o666)
    assert cli("export", "-o", str(target)).returncode == 0
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert json.loads(target.read_text().splitlines()[0])["type"] in ("event", "record", "summary")


def test_no_log_line_goes_through_a_hard_link_planted_in_logs(home, project, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    logs = home / "logs"
    logs.mkdir(parents=True)
    for name in ("hook.log", "cli.log", "drain.log"):
        os.link(outside, logs / name)
    os.symlink(outside, logs / "mcp.log")
    # the hook logs a rejected payload; the CLI logs an unexpected error; a drain drops the drain.log link
    result = run_hook(["--agent", "no-such-agent"], b'{"hook_event_name": "Stop"}', cwd=str(project))
    assert result.returncode == 0
    assert kl("drain").returncode == 0
    from kirolearn.core import paths

    os.close(paths.open_log("mcp.log"))
    assert outside.read_text() == "untouched\n"
    assert (logs / "hook.log").read_text() and not (logs / "hook.log").samefile(outside)
    assert not (logs / "mcp.log").is_symlink() and not (logs / "drain.log").samefile(outside)


CATASTROPHIC = "(a+)+$"


def test_a_catastrophic_user_pattern_is_refused_at_load_and_never_runs(home, project):
    """`(a+)+$` passed the config check and hung every drain on the first run of a's (#34, defect 1)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f"[scrub.extra_patterns]\nslow = '{CATASTROPHIC}'\nfine = 'ACME-[A-Z0-9]{{8}}'\n"
    )
    line = assert_one_error(cli("config", "show"), "scrub.extra_patterns", "slow", "exponential time")
    assert "(a+)+" in line
    assert_one_error(
        cli("drain"), "exponential time"
    )  # the drain refuses to start with it, and keeps the spool
    from kirolearn.core.configfile import hook_view

    assert hook_view()["scrub_extra"] == {"fine": "ACME-[A-Z0-9]{8}"}  # the hook never runs the refused one
    payload = {
        "hook_event_name": "userPromptSubmit",
        "cwd": str(project),
        "session_id": "s",
        "prompt": "a" * 40 + "!",
    }
    result = run_hook(stdin=json.dumps(payload).encode(), cwd=str(project), timeout=20)
    assert result.returncode == 0
