"""`kirolearn schedule`: the intervals each scheduler can run evenly, and what it says when one is missing."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import hook_env, kl

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


# --- a container without a user bus: what `schedule` picks, what a failure leaves, what doctor says ------


NO_BUS = "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n"
# a user manager that answers, but refuses to enable the timer
REFUSES = (
    "#!/bin/sh\n"
    'case "$2" in show-environment|daemon-reload) exit 0;; esac\n'
    "echo 'Failed to enable unit: Access denied' >&2\nexit 1\n"
)
CRONTAB = (  # `crontab -l` and `crontab -` over one file beside it, as the real one behaves for a user
    "#!/bin/sh\n"
    'tab="${0%/*}/tab"\n'
    'if [ "$1" = "-l" ]; then [ -f "$tab" ] || { echo "no crontab for $USER" >&2; exit 1; }; /bin/cat "$tab"; '
    'else /bin/cat > "$tab"; fi\n'
)


def fake_bin(tmp_path, **programs) -> Path:
    """A PATH of only these programs (systemctl, crontab) as scripts: nothing else is found."""
    folder = tmp_path / "fake-bin"
    folder.mkdir(exist_ok=True)
    for name, text in programs.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


def kl_with_path(folder, *args, **extra):
    return kl(*args, env=hook_env(PATH=str(folder), **extra), timeout=60)


def units():
    found = Path(os.environ["HOME"], ".config", "systemd", "user")
    return sorted(p.name for p in found.iterdir()) if found.exists() else []


def doctor(folder, **extra):
    done = kl_with_path(folder, "doctor", "--json", **extra)
    return [(c["level"], c["message"]) for c in json.loads(done.stdout)["checks"]]


def job_line(lines):
    return next((level, m) for level, m in lines if "drain job" in m)


def test_no_bus_and_no_crontab_schedule_says_none_works_and_writes_nothing(tmp_path):
    folder = fake_bin(tmp_path, systemctl=NO_BUS)
    done = kl_with_path(folder, "schedule")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no scheduler works here" in done.stderr and "Failed to connect to bus" in done.stderr
    assert "crontab is not installed" in done.stderr and "drain --watch" in done.stderr
    assert units() == []
    done = kl_with_path(folder, "schedule", "--systemd")
    assert done.returncode == 1 and "cannot install a systemd timer" in done.stderr
    assert "Failed to connect to bus" in done.stderr and "try --systemd" not in done.stderr
    assert units() == []  # nothing left behind that doctor could take for a job
    assert job_line(doctor(folder))[0] == "WARN"


def test_a_timer_the_manager_refuses_leaves_no_unit_files(tmp_path):
    folder = fake_bin(tmp_path, systemctl=REFUSES)
    done = kl_with_path(folder, "schedule", "--systemd")
    assert done.returncode == 1 and "Access denied" in done.stderr and "removed again" in done.stderr
    assert units() == []


def test_remove_without_a_flag_removes_unit_files_left_without_a_bus(tmp_path):
    from kirolearn.install import schedule

    for job in schedule.systemd_job(60):  # what an older kirolearn left after "Failed to connect to bus"
        os.makedirs(os.path.dirname(job.path), exist_ok=True)
        Path(job.path).write_text(job.content)
    folder = fake_bin(tmp_path, systemctl=NO_BUS)
    level, message = job_line(doctor(folder))
    assert level == "WARN" and "has not run a drain yet" in message and "kirolearn schedule" in message
    done = kl_with_path(folder, "schedule", "--remove")
    assert done.returncode == 0, done.stderr
    assert "kirolearn-drain units removed" in done.stdout and units() == []
    done = kl_with_path(folder, "schedule", "--remove")
    assert done.returncode == 0 and "nothing to remove" in done.stdout


def test_without_a_bus_cron_is_picked_and_doctor_says_ok_only_once_it_ran(tmp_path):
    folder = fake_bin(tmp_path, systemctl=NO_BUS, crontab=CRONTAB)
    done = kl_with_path(folder, "schedule")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("crontab: added") and units() == []
    line = (folder / "tab").read_text().strip()
    assert "KIROLEARN_SCHEDULED=cron:60" in line
    level, message = job_line(doctor(folder))
    assert level == "WARN" and "has not run a drain yet" in message and "cron" in message
    # fire the job as cron would: the line's command through sh, with cron's small environment
    command = line.split(" ", 5)[5]
    fired = subprocess.run(
        ["/bin/sh", "-c", command],
        env={"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"]},
        capture_output=True,
        timeout=120,
    )
    assert fired.returncode == 0, fired.stderr
    assert "drain:" in (Path(os.environ["KIROLEARN_HOME"]) / "logs" / "drain.log").read_text()
    level, message = job_line(doctor(folder))
    assert level == "OK" and "drain job installed (cron" in message and "last ran" in message
    # a job that stopped firing: its last run is more than two intervals old
    state = Path(os.environ["KIROLEARN_HOME"]) / "state" / "schedule.json"
    data = json.loads(state.read_text())
    state.write_text(json.dumps(dict(data, ran_at="2020-01-01T00:00:00.000Z")))
    level, message = job_line(doctor(folder))
    assert level == "WARN" and "though it runs every 60s" in message
    done = kl_with_path(folder, "schedule", "--remove")
    assert done.returncode == 0 and "crontab: kirolearn line removed" in done.stdout
    assert "kirolearn" not in (folder / "tab").read_text()
    assert job_line(doctor(folder))[0] == "WARN"
