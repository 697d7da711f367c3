"""`kirolearn schedule`: the intervals each scheduler can run evenly, and what it says when one is missing."""

import pytest
from click.testing import CliRunner

from kirolearn.cli.commands import cli


@pytest.mark.parametrize(
    "every, kind, ok",
    [
        ("90s", "--cron", False),
        ("7m", "--cron", False),
        ("25h", "--cron", False),
        ("90s", "--systemd", True),
        ("7m", "--launchd", True),
        ("15m", "--cron", True),
        ("2h", "--cron", True),
    ],
)
def test_schedule_refuses_what_cron_cannot_express(every, kind, ok):
    result = CliRunner().invoke(cli, ["schedule", "--every", every, kind, "--print"])
    assert (result.exit_code == 0) is ok, result.output
    if not ok:
        assert "cron cannot run a job evenly" in result.output and "--systemd" in result.output


def test_a_missing_crontab_does_not_suggest_cron(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no crontab, no systemctl, no launchctl
    result = CliRunner().invoke(cli, ["schedule", "--cron"])
    assert result.exit_code == 1 and "crontab is not installed" in result.output
    assert "--cron" not in result.output and "kirolearn drain --watch" in result.output
