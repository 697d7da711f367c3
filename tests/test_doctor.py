"""`kirolearn doctor` on a real store: its checks, the last drain and the drain job."""

import json
import os

from conftest import cli


def test_doctor_reports_schedule_and_last_drain(home, filled):
    from kirolearn import health

    health.drain_finished(None)  # as `kirolearn drain` records it
    report = json.loads(cli("doctor", "--json").stdout)
    messages = " | ".join(c["message"] for c in report["checks"])
    assert "quick_check ok: 200 events" in messages
    assert "last drain" in messages and "succeeded" in messages
    assert "no systemd or launchd drain job" in messages or "no drain job" in messages
    from kirolearn.install import schedule

    service, timer = schedule.systemd_job(60)
    os.makedirs(os.path.dirname(timer.path))
    with open(timer.path, "w") as fh:
        fh.write(timer.content)
    report = json.loads(cli("doctor", "--json").stdout)
    assert any(
        c["level"] == "WARN" and "drain job is installed (systemd" in c["message"] for c in report["checks"]
    )  # a timer that never ran a drain is not OK


# --- what is wired, run as its agent runs it (issue #33) -------------------------------------------


def doctor_lines():
    report = json.loads(cli("doctor", "--json").stdout)
    return [(c["level"], c["message"]) for c in report["checks"]]


def codex_installed():
    from pathlib import Path

    codex = Path(os.environ["HOME"]) / ".codex"
    codex.mkdir(exist_ok=True)
    assert cli("install", "--agent", "codex", "--yes").returncode == 0
    return codex / "hooks.json"


def test_doctor_counts_codex_config_toml_as_registering_the_mcp_server(home):
    codex_installed()
    lines = doctor_lines()
    assert ("OK", "codex: kirolearn's MCP server is registered") in lines
    assert not [m for _, m in lines if "no wired file registers" in m]
    assert all(level == "OK" for level, m in lines if "wired:" in m)  # the real hook program answered


def test_doctor_fails_naming_a_hook_interpreter_that_is_gone(home):
    import sys

    hooks = codex_installed()
    text = hooks.read_text()
    assert sys.executable in text or os.path.realpath(sys.executable) in text
    gone = "/moved/venv/bin/python3"
    hooks.write_text(
        text.replace(json.loads(text)["hooks"]["Stop"][0]["hooks"][0]["command"].split()[1], gone)
    )
    (failure,) = [m for level, m in doctor_lines() if level == "FAIL" and str(hooks) in m]
    assert gone in failure and "does not exist" in failure and "entries are gone" not in failure


def test_doctor_names_a_missing_launcher_not_missing_entries(home):
    from kirolearn.install.engine import LAUNCHER

    hooks = codex_installed()
    gone = "/moved/site-packages/kirolearn/launcher/kirolearn-hook"
    hooks.write_text(hooks.read_text().replace(LAUNCHER, gone))
    (failure,) = [m for level, m in doctor_lines() if level == "FAIL" and str(hooks) in m]
    assert gone in failure and "no longer exists" in failure and "entries are gone" not in failure


def test_doctor_runs_the_wired_program(home, tmp_path):
    """An interpreter that exists but cannot run the hook (no kirolearn in it): found by running it."""
    hooks = codex_installed()
    text = hooks.read_text()
    python = json.loads(text)["hooks"]["Stop"][0]["hooks"][0]["command"].split()[1]
    other = tmp_path / "bin" / "python3"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named kirolearn' >&2\nexit 1\n")
    other.chmod(0o755)
    hooks.write_text(text.replace(python, str(other)))
    (failure,) = [m for level, m in doctor_lines() if level == "FAIL" and str(hooks) in m]
    assert "--version` exits 1" in failure and "No module named kirolearn" in failure


def test_doctor_and_status_with_nothing_wired_name_every_agent_not_kiro_alone(home):
    lines = doctor_lines()
    (warning,) = [m for _, m in lines if "wired" in m]
    assert "Kiro is not wired" not in warning and "claude-code" in warning and "codex" in warning
    status = cli("status").stdout
    assert "kiro: not wired" not in status and "none wired" in status and "claude-code" in status


def test_status_of_a_codex_only_user_has_no_kiro_warning(home):
    codex_installed()
    assert "not wired" not in cli("status").stdout
    assert not [m for _, m in doctor_lines() if "Kiro" in m and "wired" in m]
