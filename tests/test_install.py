"""install / uninstall against a temporary HOME seeded with realistic Kiro configs;
schedule's generated jobs (and a fake crontab); config show; doctor and status."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import run_cli

from kirolearn.cli.commands import cli
from kirolearn.install import engine as install
from kirolearn.install import schedule, wiring
from kirolearn.install.agents import kiro as kiro_install

OTHER_AGENT = '{\n  "name": "reviewer",\n  "tools": ["read"],\n  "hooks": {"stop": [{"command": "notify-send done"}]}\n}\n'
GLOBAL_MCP = '{\n    "mcpServers": {\n        "github": {"command": "gh-mcp", "args": [], "env": {"TOKEN": "${GH}"}}\n    }\n}\n'
USER_HOOK = '{"version": "v1", "hooks": [{"name": "lint", "trigger": "PostFileSave", "action": {"type": "command", "command": "ruff"}}]}\n'


@pytest.fixture
def kiro(tmp_path, project):
    """A user home with other agents, another MCP server, a user hook and a malformed file."""
    home = Path(os.environ["HOME"])
    (home / ".kiro" / "agents").mkdir(parents=True)
    (home / ".kiro" / "settings").mkdir(parents=True)
    (home / ".kiro" / "agents" / "reviewer.json").write_text(OTHER_AGENT)
    (home / ".kiro" / "settings" / "mcp.json").write_text(GLOBAL_MCP)
    (project / ".kiro" / "hooks").mkdir(parents=True)
    (project / ".kiro" / "hooks" / "lint.json").write_text(USER_HOOK)
    (project / ".kiro" / "settings").mkdir(parents=True)
    (project / ".kiro" / "settings" / "mcp.json").write_text('{"mcpServers": {')  # malformed
    return home


def snapshot(*roots):
    return {
        str(p): p.read_bytes()
        for root in roots
        for p in sorted(Path(root).rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def test_install_global_and_project_then_uninstall(kiro, project):
    (project / ".kiro" / "settings" / "mcp.json").unlink()  # the malformed file has its own test
    before = snapshot(kiro, project)
    result = run_cli("install", "--global", "--project", str(project), "--yes")
    assert result.exit_code == 0, result.output

    # this Python and the launcher file (not pip's console script, which imports re first)
    hook = f"KIROLEARN_HOME={os.environ['KIROLEARN_HOME']} {sys.executable} {install.LAUNCHER}"
    assert (
        kiro_install.hook_command("post-tool") == f"{hook} post-tool || true"
    )  # KIROLEARN_HOME travels along
    agent = json.loads((kiro / ".kiro" / "agents" / "kirolearn.json").read_text())
    # exactly the fields of Kiro's current agent reference that install means to set
    assert set(agent) == {
        "name",
        "description",
        "tools",
        "allowedTools",
        "includeMcpJson",
        "mcpServers",
        "hooks",
    }
    assert agent["name"] == "kirolearn" and agent["tools"] == ["*"] and agent["includeMcpJson"] is True
    # each safe tool, never "@kirolearn" (that would auto-approve forget_memory, marked destructive)
    assert agent["allowedTools"] == [
        f"@kirolearn/{t}"
        for t in (
            "search_memory",
            "get_memory",
            "session_init",
            "save_session_summary",
            "save_observation",
            "session_end",
        )
    ]
    # the agent reaches kirolearn-mcp whether its Kiro reads includeMcpJson or useLegacyMcpJson
    assert agent["mcpServers"]["kirolearn"]["command"] == install.command_path("kirolearn-mcp")
    assert agent["hooks"]["postToolUse"] == [
        {"matcher": "*", "command": f"{hook} post-tool || true", "timeout_ms": 2000}
    ]
    assert set(agent["hooks"]) == {"agentSpawn", "userPromptSubmit", "postToolUse", "stop"}
    mcp = json.loads((kiro / ".kiro" / "settings" / "mcp.json").read_text())
    assert list(mcp["mcpServers"]) == ["github", "kirolearn"] and mcp["mcpServers"]["kirolearn"]["args"] == []
    assert mcp["mcpServers"]["kirolearn"]["command"] == install.command_path("kirolearn-mcp")
    assert (
        (kiro / ".kiro" / "settings" / "mcp.json")
        .read_text()
        .startswith('{\n    "mcpServers": {\n        "github"')
    )
    # one MCP definition: the global mcp.json; no project mcp.json, no workspace agent
    assert not (project / ".kiro" / "settings" / "mcp.json").exists()
    assert not (project / ".kiro" / "agents").exists()
    v3 = json.loads((project / ".kiro" / "hooks" / "kirolearn.json").read_text())
    assert [h["trigger"] for h in v3["hooks"]] == ["SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"]
    assert v3["hooks"][2]["matcher"] == ".*" and v3["hooks"][2]["action"]["type"] == "command"
    legacy = json.loads((project / ".kiro" / "hooks" / "kirolearn-post-tool.kiro.hook").read_text())
    assert legacy["when"] == {"type": "postToolUse", "toolTypes": ["*"]}
    assert legacy["then"] == {"type": "runCommand", "command": f"{hook} ide-post-tool || true"}
    # not ours: byte for byte
    for path in (kiro / ".kiro" / "agents" / "reviewer.json", project / ".kiro" / "hooks" / "lint.json"):
        assert path.read_bytes() == before[str(path)]

    once = snapshot(kiro, project)
    again = run_cli("install", "--global", "--project", str(project), "--yes")
    assert "create" not in again.output and "update" not in again.output
    assert snapshot(kiro, project) == once  # idempotent

    result = run_cli("uninstall", "--yes")  # the user's scope; the project's wiring stays
    assert result.exit_code == 0, result.output
    assert f"kept       the wiring of {project}" in result.output
    assert (project / ".kiro" / "hooks" / "kirolearn.json").exists()
    result = run_cli("uninstall", "--project", str(project), "--yes")
    assert result.exit_code == 0, result.output
    assert snapshot(kiro, project) == before  # exactly what install added is gone
    assert not (project / ".kiro" / "agents").exists()


def test_one_malformed_target_and_nothing_is_written(kiro, project, home):
    before = snapshot(kiro, project)
    result = run_cli(
        "install", "--project", str(project), "--yes"
    )  # ~/.kiro has no server: the project's mcp.json is a target
    assert result.exit_code == 1
    assert "is not valid JSON" in result.output and "nothing was written" in result.output
    assert snapshot(kiro, project) == before  # not even the hook files that were fine
    assert not Path(install.record_path()).exists()


def test_the_three_ide_hook_files_say_what_each_does(kiro, project):
    (project / ".kiro" / "settings" / "mcp.json").unlink()
    run_cli("install", "--project", str(project), "--yes")
    descriptions = [
        json.loads(p.read_text())["description"]
        for p in sorted((project / ".kiro" / "hooks").glob("kirolearn-*.kiro.hook"))
    ]
    assert len(descriptions) == 3 and len(set(descriptions)) == 3
    assert all(d.startswith("kirolearn: ") for d in descriptions)


def test_project_mcp_json_only_when_the_global_one_lacks_our_server(tmp_path, project):
    assert run_cli("install", "--project", str(project), "--yes").exit_code == 0  # no ~/.kiro at all
    assert "kirolearn" in json.loads((project / ".kiro" / "settings" / "mcp.json").read_text())["mcpServers"]
    assert not (Path(os.environ["HOME"]) / ".kiro").exists()  # --project alone leaves ~/.kiro alone
    # then wiring ~/.kiro moves the one definition there, on the next project install
    assert run_cli("install", "--yes").exit_code == 0
    result = run_cli("install", "--project", str(project), "--yes")
    assert result.exit_code == 0 and "remove" in result.output
    assert not (project / ".kiro" / "settings").exists()


def test_reinstall_removes_an_older_workspace_agent(project, home):
    """Older versions wrote <project>/.kiro/agents/kirolearn.json: its classic hooks doubled the v3 file."""
    agent = project / ".kiro" / "agents" / "kirolearn.json"
    agent.parent.mkdir(parents=True)
    agent.write_text(
        json.dumps(
            {
                **kiro_install.AGENT_SKELETON,
                "hooks": {"stop": [{"command": kiro_install.hook_command("stop"), "timeout_ms": 5000}]},
            },
            indent=2,
        )
        + "\n"
    )
    home.mkdir()
    Path(install.record_path()).write_text(
        json.dumps({"installs": [{"path": str(agent), "kind": "agent", "created": True}]})
    )
    assert run_cli("install", "--global", "--project", str(project), "--yes").exit_code == 0
    assert not agent.exists()
    assert str(agent) not in [e["path"] for e in install.load_record()]


def test_portable_install_names_commands_on_path(project, tmp_path, monkeypatch):
    result = run_cli("install", "--project", str(project), "--portable", "--yes")
    assert result.exit_code == 0 and "absolute paths" not in result.output
    v3 = json.loads((project / ".kiro" / "hooks" / "kirolearn.json").read_text())
    # no venv, no KIROLEARN_HOME: kirolearn-hook from PATH (and a line on stderr and in the log without it)
    assert v3["hooks"][0]["action"]["command"] == install.portable_hook_command("agent-spawn")
    mcp = json.loads((project / ".kiro" / "settings" / "mcp.json").read_text())
    assert mcp["mcpServers"]["kirolearn"] == {
        "command": "kirolearn-mcp",
        "args": [],
        "env": {"KIROLEARN_AGENT": "kiro"},
    }
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # kirolearn-hook no longer found on PATH
    broken = [w for w in wiring.wiring() if w["missing_binaries"]]
    assert broken and broken[0]["missing_binaries"] == ["kirolearn-hook"]


def test_a_non_portable_project_install_warns_about_machine_paths(project):
    result = CliRunner().invoke(cli, ["install", "--project", str(project), "--yes"])
    assert result.exit_code == 0
    assert "holds absolute paths of this machine" in result.stderr and "--portable" in result.stderr


def test_dry_run_prints_diffs_and_writes_nothing(kiro, project):
    before = snapshot(kiro, project)
    result = run_cli("install", "--global", "--dry-run")
    assert result.exit_code == 0
    assert "+++ " + str(kiro / ".kiro" / "agents" / "kirolearn.json") in result.output
    assert '+        "kirolearn": {' in result.output  # the mcp.json diff, in the file's own indent
    assert snapshot(kiro, project) == before
    assert not Path(install.record_path()).exists()


def test_uninstall_dry_run_prints_the_removal_and_writes_nothing(kiro, project):
    run_cli("install", "--yes")
    installed = snapshot(kiro, project)
    record = Path(install.record_path()).read_bytes()
    result = run_cli("uninstall", "--dry-run")
    assert result.exit_code == 0
    assert "remove     " + str(kiro / ".kiro" / "agents" / "kirolearn.json") in result.output
    assert '-        "kirolearn": {' in result.output
    assert snapshot(kiro, project) == installed and Path(install.record_path()).read_bytes() == record


def test_uninstall_project_leaves_the_other_installs(kiro, project, tmp_path):
    other = tmp_path / "other project"
    (other / ".git").mkdir(parents=True)
    (project / ".kiro" / "settings" / "mcp.json").write_text('{\r\n\t"mcpServers": {}\r\n}')
    before = snapshot(project)
    for target in (project, other):
        assert run_cli("install", "--project", str(target), "--yes").exit_code == 0  # ~/.kiro is not wired
    assert "kirolearn" in (project / ".kiro" / "settings" / "mcp.json").read_text()
    result = run_cli("uninstall", "--project", str(project), "--yes")
    assert result.exit_code == 0, result.output
    assert snapshot(project) == before  # this project's bytes back, CRLF and tabs included
    assert (other / ".kiro" / "hooks" / "kirolearn.json").exists()
    assert {e["path"] for e in install.load_record()} == {
        str(p) for p in (other / ".kiro").rglob("*") if p.is_file()
    }


def test_uninstall_keeps_what_the_user_added_to_our_agent(kiro):
    run_cli("install", "--yes")
    path = kiro / ".kiro" / "agents" / "kirolearn.json"
    data = json.loads(path.read_text())
    data["hooks"]["stop"].insert(0, {"command": "say done"})
    data["model"] = "claude-sonnet"
    path.write_text(json.dumps(data, indent=2) + "\n")
    run_cli("uninstall", "--yes")
    left = json.loads(path.read_text())
    assert left["hooks"] == {"stop": [{"command": "say done"}]} and left["model"] == "claude-sonnet"
    assert "mcpServers" not in left


def test_uninstall_of_an_mcp_json_edited_since_takes_out_only_our_entry(kiro):
    path = kiro / ".kiro" / "settings" / "mcp.json"
    run_cli("install", "--yes")
    data = json.loads(path.read_text())
    data["mcpServers"]["notes"] = {"command": "notes-mcp", "args": []}
    path.write_text(json.dumps(data, indent=4) + "\n")
    assert run_cli("uninstall", "--yes").exit_code == 0
    assert json.loads(path.read_text()) == {
        "mcpServers": {
            "github": json.loads(GLOBAL_MCP)["mcpServers"]["github"],
            "notes": {"command": "notes-mcp", "args": []},
        }
    }


def test_uninstall_purge_removes_data_only_when_asked(kiro, home):
    run_cli("install", "--yes")
    run_cli("uninstall", "--yes")
    assert home.exists()  # data kept
    run_cli("uninstall", "--purge", "--yes")
    assert not home.exists()


def test_purge_without_a_terminal_and_without_yes_refuses(kiro, home):
    run_cli("install", "--yes")
    result = CliRunner().invoke(cli, ["uninstall", "--purge"], input="y\n")  # stdin is not a terminal
    assert result.exit_code == 2
    assert "refusing to delete" in result.stderr and "--yes" in result.stderr
    assert home.exists() and (kiro / ".kiro" / "agents" / "kirolearn.json").exists()  # nothing done at all


def test_a_foreign_file_with_our_name_is_left_alone(kiro, project):
    theirs = project / ".kiro" / "hooks" / "kirolearn.json"
    theirs.write_text('{"version": "v1", "hooks": []}\n')
    result = run_cli("install", "--project", str(project), "--yes")
    assert result.exit_code == 1 and "is not kirolearn's" in result.output
    assert theirs.read_text() == '{"version": "v1", "hooks": []}\n'


def test_a_foreign_mcp_server_named_kirolearn_is_left_alone(kiro):
    path = kiro / ".kiro" / "settings" / "mcp.json"
    path.write_text('{"mcpServers": {"kirolearn": {"command": "something-else"}}}\n')
    result = run_cli("install", "--yes")
    assert result.exit_code == 1 and "not ours" in result.output
    assert path.read_text() == '{"mcpServers": {"kirolearn": {"command": "something-else"}}}\n'
    assert not (kiro / ".kiro" / "agents" / "kirolearn.json").exists()


# --- mcp.json byte round trips -------------------------------------------------------------------------

GITHUB = '{"command": "gh-mcp", "args": [], "env": {"TOKEN": "${GH}"}}'
LAYOUTS = {
    "one-line": '{"mcpServers": {"github": %s}}' % GITHUB,
    "one-line-spaced": '{ "mcpServers" : { "github" : %s } }' % GITHUB,
    "tabs": '{\n\t"mcpServers": {\n\t\t"github": {\n\t\t\t"command": "gh-mcp",\n\t\t\t"args": []\n\t\t}\n\t}\n}',
    "two-spaces": '{\n  "mcpServers": {\n    "github": {\n      "command": "gh-mcp",\n      "args": []\n    }\n  }\n}',
    "four-spaces": '{\n    "mcpServers": {\n        "github": {"command": "gh-mcp", "args": []}\n    }\n}',
    "empty-servers": '{"mcpServers": {}}',
    "empty-servers-multiline": '{\n  "mcpServers": {}\n}',
    "empty-servers-spread": '{\n  "mcpServers": {\n  }\n}',
    "servers-last": '{\n  "theme": "dark",\n  "mcpServers": {\n    "github": %s\n  }\n}' % GITHUB,
    "servers-first": '{\n  "mcpServers": {\n    "github": %s\n  },\n  "theme": "dark"\n}' % GITHUB,
    "no-servers-key": '{\n  "theme": "dark"\n}',
    "empty-object": "{}",
    "non-ascii": '{\n  "mcpServers": {\n    "café": {"command": "ça-mcp", "args": ["ü"]}\n  }\n}',
}
VARIANTS = {
    "lf": lambda t: t + "\n",
    "crlf": lambda t: t.replace("\n", "\r\n") + "\r\n",
    "bom": lambda t: "\ufeff" + t + "\n",
    "bom-crlf-no-final-newline": lambda t: "\ufeff" + t.replace("\n", "\r\n"),
    "no-final-newline": lambda t: t,
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_install_then_uninstall_gives_back_the_exact_bytes(layout, variant, tmp_path):
    path = Path(os.environ["HOME"]) / ".kiro" / "settings" / "mcp.json"
    path.parent.mkdir(parents=True)
    original = VARIANTS[variant](LAYOUTS[layout]).encode("utf-8")
    path.write_bytes(original)
    assert run_cli("install", "--yes").exit_code == 0
    installed = path.read_bytes()
    text = installed.decode("utf-8")
    data = json.loads(text.lstrip("\ufeff"))
    assert data["mcpServers"]["kirolearn"] == install.mcp_entry(agent="kiro")
    theirs = json.loads(original.decode().lstrip("\ufeff"))
    assert {k: v for k, v in data.items() if k != "mcpServers"} == {
        k: v for k, v in theirs.items() if k != "mcpServers"
    }
    assert installed.startswith(b"\xef\xbb\xbf") == original.startswith(b"\xef\xbb\xbf")
    if b"\r\n" in original:
        assert text.count("\n") == text.count("\r\n")  # no bare LF slipped in
    if b"\n" not in original.strip():
        assert "\n" not in text.strip()  # a one-line file stays one line
    assert run_cli("install", "--yes").output.count("update") == 0  # idempotent
    assert run_cli("uninstall", "--yes").exit_code == 0
    assert path.read_bytes() == original


def test_an_mcp_json_install_created_is_removed_and_an_empty_one_restored(tmp_path):
    path = Path(os.environ["HOME"]) / ".kiro" / "settings" / "mcp.json"
    run_cli("install", "--yes")
    assert json.loads(path.read_text()) == {"mcpServers": {"kirolearn": install.mcp_entry(agent="kiro")}}
    run_cli("uninstall", "--yes")
    assert not (Path(os.environ["HOME"]) / ".kiro").exists()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    run_cli("install", "--yes")
    run_cli("uninstall", "--yes")
    assert path.read_bytes() == b""


def test_set_default_runs_kiro_cli(kiro, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "kiro-cli"
    fake.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/kiro-cli-args\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = run_cli("install", "--yes", "--set-default")
    assert "default agent set" in result.output
    assert (tmp_path / "kiro-cli-args").read_text().strip() == "settings chat.defaultAgent kirolearn"


# --- schedule ------------------------------------------------------------------------------------------


def test_schedule_texts(home, monkeypatch):
    assert schedule.parse_every("5m") == 300 and schedule.parse_every("2h") == 7200
    with pytest.raises(schedule.ScheduleError, match="shortest interval is 1m"):
        schedule.parse_every("30s")
    with pytest.raises(schedule.ScheduleError, match="use a number with s, m or h"):
        schedule.parse_every("often")
    drain = " ".join(schedule.drain_argv())
    assert schedule.cron_line(300).startswith(
        f"*/5 * * * * KIROLEARN_HOME={home} KIROLEARN_SCHEDULED=cron:300 {drain} >>"
    )
    service, timer = schedule.systemd_job(120)
    assert f"ExecStart={drain}" in service.content and "Type=oneshot" in service.content
    assert 'Environment="KIROLEARN_SCHEDULED=systemd:120"' in service.content
    assert "OnUnitActiveSec=120s" in timer.content and "WantedBy=timers.target" in timer.content
    (plist,) = schedule.launchd_job(600)
    assert "<integer>600</integer>" in plist.content and "<string>drain</string>" in plist.content
    assert "<key>KIROLEARN_SCHEDULED</key><string>launchd:600</string>" in plist.content
    result = run_cli("schedule", "--every", "10m", "--launchd", "--print")
    assert "dev.kirolearn.pipeline.drain" in result.output


def test_schedule_cron_against_a_fake_crontab(tmp_path, monkeypatch):
    store = tmp_path / "crontab.txt"
    store.write_text("0 3 * * * backup.sh\n")
    fake = tmp_path / "bin" / "crontab"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nif [ "$1" = "-l" ]; then cat {store}; else cat > {store}; fi\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    assert run_cli("schedule", "--cron", "--every", "2m").exit_code == 0
    assert run_cli("schedule", "--cron", "--every", "5m").exit_code == 0  # replaces, never duplicates
    lines = store.read_text().splitlines()
    assert lines[0] == "0 3 * * * backup.sh" and len(lines) == 2 and lines[1].startswith("*/5 * * * * ")
    assert run_cli("schedule", "--cron", "--remove").exit_code == 0
    assert store.read_text() == "0 3 * * * backup.sh\n"


# --- config show, doctor, status ---------------------------------------------------------------------------


def test_config_show_names_sources(write_config, monkeypatch, home):
    write_config("[batch]\nmax_events = 7\n")
    monkeypatch.setenv("KIROLEARN_MODEL", "ollama_chat/qwen2.5")
    rows = {r["key"]: r for r in json.loads(run_cli("config", "show", "--json").output)}
    assert rows["batch.max_events"] == {
        "key": "batch.max_events",
        "value": 7,
        "source": str(home / "config.toml"),
    }
    assert rows["extract.model"]["source"] == "$KIROLEARN_MODEL"
    assert rows["dedup.window_seconds"]["source"] == "default"
    write_config("[batch]\nmax_event = 7\n")
    bad = CliRunner().invoke(cli, ["config", "show"])
    assert (
        bad.exit_code == 1
        and "unknown setting 'batch.max_event'; did you mean 'batch.max_events'?" in bad.output
    )


def test_doctor_and_status_on_a_known_home(kiro, make_event, home, drain_now):
    make_event(tool_name="shell")
    drain_now()
    old = make_event(tool_name="shell", now=1_000_000_000.0)  # waiting since 2001: no drain runs
    (home / "logs").mkdir(exist_ok=True)
    from kirolearn import hook as hooks

    hooks.log("hook: stdin is not valid JSON; nothing recorded")
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 1
    assert "no drain is running" in result.output and "1 hook error(s)" in result.output
    assert "no agent is wired" in result.output and "Kiro is not wired" not in result.output
    run_cli("install", "--yes")
    info = json.loads(run_cli("status", "--json").output)
    assert info["spool"]["ready"] == 1 and info["hook_errors_24h"] == 1
    assert info["database"]["events"] == 1 and len(info["kiro_wiring"]) == 2
    os.remove(home / "spool" / "ready" / (old["event_id"] + ".json"))
    healthy = CliRunner().invoke(cli, ["doctor"])
    assert "wired: " in healthy.output


def test_the_written_hook_command_records_and_recalls(home, project, add_record):
    """What install writes runs through a shell, as the agent runs it, spools the event and prints the
    memory (the launcher leaves with os._exit after flushing); with the launcher gone it is a no-op."""
    assert os.path.basename(install.LAUNCHER) == "kirolearn-hook" and os.path.isfile(install.LAUNCHER)
    add_record(project, "Export job: database is locked", "use timeout=30 and WAL", observation_type="error")
    command = kiro_install.hook_command("prompt-submit")
    payload = json.dumps(
        {
            "hook_event_name": "userPromptSubmit",
            "cwd": str(project),
            "session_id": "l1",
            "prompt": "why is the export job locked",
        }
    )
    env = {k: v for k, v in os.environ.items() if k != "KIROLEARN_RAISE_ERRORS"}
    result = subprocess.run(
        ["bash", "-c", command],
        input=payload.encode(),
        capture_output=True,
        env=env,
        cwd=str(project),
        timeout=60,
    )
    assert (result.returncode, result.stderr) == (0, b"")
    assert "> - Export job: database is locked: use timeout=30 and WAL · error".encode() in result.stdout
    assert len(os.listdir(os.path.join(str(home), "spool", "ready"))) == 1
    broken = kiro_install.hook_command("prompt-submit").replace(install.LAUNCHER, install.LAUNCHER + "-gone")
    assert (
        subprocess.run(["bash", "-c", broken], capture_output=True, timeout=60).returncode == 0
    )  # `|| true`


def test_windows_hook_commands_use_cmd_syntax(home):
    command = kiro_install.hook_command("post-tool", windows=True)
    assert command.startswith(f'set "KIROLEARN_HOME={home}" && ')
    assert command.endswith(" post-tool || exit /b 0") and "'" not in command


def test_systemd_quotes_environment_values(tmp_path, monkeypatch):
    monkeypatch.setenv("KIROLEARN_HOME", str(tmp_path / "my home"))
    service, _ = schedule.systemd_job(60)
    assert f'Environment="KIROLEARN_HOME={tmp_path}/my home"' in service.content


def test_cron_install_creates_the_log_folder(tmp_path, monkeypatch, home):
    store = tmp_path / "crontab.txt"
    fake = tmp_path / "bin" / "crontab"
    fake.parent.mkdir()
    fake.write_text(
        f'#!/bin/sh\nif [ "$1" = "-l" ]; then echo "no crontab for root" >&2; exit 1; else cat > {store}; fi\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    assert run_cli("schedule", "--cron").exit_code == 0
    assert (home / "logs").is_dir() and "drain.log" in store.read_text()


def test_doctor_warns_about_a_workspace_agent_named_like_ours(kiro, project, monkeypatch):
    run_cli("install", "--yes")
    theirs = project / ".kiro" / "agents" / "kirolearn.json"
    theirs.parent.mkdir(parents=True)
    theirs.write_text('{"name": "kirolearn", "tools": ["*"]}\n')
    monkeypatch.chdir(project / "src")  # doctor looks at the project it runs in, and at every recorded one
    result = CliRunner().invoke(cli, ["doctor"])
    assert f"WARN  {theirs} and ~/.kiro/agents/kirolearn.json are both named kirolearn" in result.output


def test_doctor_warns_when_classic_and_v3_hooks_meet_in_one_project(kiro, project):
    (project / ".kiro" / "settings" / "mcp.json").unlink()
    run_cli("install", "--global", "--project", str(project), "--yes")
    result = CliRunner().invoke(cli, ["doctor"])
    assert f"{project} has kirolearn's v3 hook file" in result.output
    assert "without `--agent kirolearn`" in result.output


def test_project_install_refuses_the_home_directory(kiro):
    result = CliRunner().invoke(cli, ["install", "--project", str(kiro), "--yes"])
    assert result.exit_code == 1 and "is your home directory" in result.stderr and "--global" in result.stderr
    assert not (kiro / ".kiro" / "hooks").exists()


def test_install_help_says_what_project_and_global_do():
    text = " ".join(run_cli("install", "--help").output.split())
    assert "instead of ~/.kiro; add --global for both" in text
    assert "--portable" in text and "# this project's .kiro/ only" in text


def test_uninstall_with_nothing_recorded_says_so(kiro, tmp_path):
    """Not a silent exit 0 for a project that was never wired (or a mistyped path)."""
    result = run_cli("uninstall", "--project", str(tmp_path / "never-wired"), "--yes")
    assert (
        result.exit_code == 0 and "nothing to uninstall" in result.output and "never-wired" in result.output
    )
    assert "nothing to uninstall" in run_cli("uninstall", "--yes").output
