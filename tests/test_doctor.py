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
    assert ("OK", "codex: kirolearn's MCP server is registered and answers `initialize`") in lines
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


# --- the MCP server, started as the agent starts it ------------------------------------------------


def test_doctor_fails_naming_an_mcp_server_whose_interpreter_moved(home, tmp_path):
    """A copy of kirolearn-mcp whose first line names a python that is gone (a moved venv): exit 127."""
    import sys
    from pathlib import Path

    from conftest import hook_env, kl

    claude = Path(os.environ["HOME"]) / ".claude"
    claude.mkdir()
    assert cli("install", "--agent", "claude-code", "--yes").returncode == 0
    done = kl("doctor", "--json", env=hook_env())
    checks = [(c["level"], c["message"]) for c in json.loads(done.stdout)["checks"]]
    assert ("OK", "claude-code: kirolearn's MCP server is registered and answers `initialize`") in checks
    wired = [p for p in (Path(os.environ["HOME"]) / ".claude.json", claude / "settings.json") if p.exists()]
    (config,) = [p for p in wired if "kirolearn-mcp" in p.read_text()]
    real = str(Path(sys.executable).parent / "kirolearn-mcp")
    moved = tmp_path / "old venv" / "bin" / "kirolearn-mcp"  # a space, on purpose
    moved.parent.mkdir(parents=True)
    script = Path(real).read_text().split("\n", 1)[1]
    moved.write_text(f"#!{tmp_path}/gone/bin/python3\n{script}")
    moved.chmod(0o755)
    assert real in config.read_text()
    config.write_text(config.read_text().replace(real, str(moved)))
    done = kl("doctor", "--json", env=hook_env())
    assert done.returncode == 1
    (failure,) = [
        c["message"] for c in json.loads(done.stdout)["checks"] if "MCP server does not start" in c["message"]
    ]
    assert str(moved) in failure and f"{tmp_path}/gone/bin/python3" in failure and "does not exist" in failure
    assert "kirolearn install --agent claude-code" in failure
    assert not [c for c in json.loads(done.stdout)["checks"] if "answers `initialize`" in c["message"]]
