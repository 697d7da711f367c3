"""Install edits a symlinked config through its link, refuses a dangling one, and leaves nothing behind.

Dotfile managers (stow, chezmoi, yadm) keep ~/.claude/settings.json and the like as links into a
repository: replacing the link with a regular file would silently cut it from the user's dotfiles.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import run_cli

from kirolearn.cli.commands import cli

AGENTS = (
    "kiro",
    "claude-code",
    "codex",
    "gemini",
    "qwen-code",
    "auggie",
    "factory-droid",
    "cursor",
    "opencode",
    "kilo-code",
)


def files_under(root: Path) -> "dict[str, bytes]":
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def written_by_install(agent: str, home: Path) -> "list[Path]":
    """The user-level files `kirolearn install --agent agent` writes, learned from a plain install."""
    result = run_cli("install", "--agent", agent, "--yes")
    assert result.exit_code == 0, result.output
    written = [home / rel for rel in files_under(home)]
    assert run_cli("uninstall", "--agent", agent, "--yes").exit_code == 0
    shutil.rmtree(home)
    home.mkdir()
    return [
        p for p in written if p.suffix in (".json", ".toml") and "kirolearn" not in p.name
    ]  # ours alone: not a user file


def seed(path: Path) -> bytes:
    return b"# mine\n" if path.suffix == ".toml" else b'{"mine": true}\n'


@pytest.mark.parametrize("agent", AGENTS)
def test_a_symlinked_config_is_edited_through_its_link_and_given_back(agent, home, tmp_path):
    user_home = Path(os.environ["HOME"])
    targets = written_by_install(agent, user_home)
    assert targets, f"{agent} installs no user-level config file"
    dotfiles = tmp_path / "dotfiles"
    links = {}
    for path in targets:
        real = dotfiles / path.relative_to(user_home)
        real.parent.mkdir(parents=True, exist_ok=True)
        real.write_bytes(seed(path))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(real)
        links[path] = real
    result = run_cli("install", "--agent", agent, "--yes")
    assert result.exit_code == 0, result.output
    for link, real in links.items():
        assert link.is_symlink() and os.path.realpath(link) == str(real), f"{link} is no longer a link"
        assert b"kirolearn" in real.read_bytes()
    assert not list(user_home.rglob("*.kirolearn-tmp")) and not list(dotfiles.rglob("*.kirolearn-tmp"))
    result = run_cli("uninstall", "--agent", agent, "--yes")
    assert result.exit_code == 0, result.output
    for link, real in links.items():
        assert link.is_symlink() and real.read_bytes() == seed(link), f"{real} did not get its bytes back"


@pytest.mark.parametrize("agent", ("claude-code", "gemini", "codex"))
def test_a_dangling_link_is_refused_and_nothing_is_written(agent, home, tmp_path):
    user_home = Path(os.environ["HOME"])
    targets = written_by_install(agent, user_home)
    link = targets[0]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(tmp_path / "dotfiles" / "gone.json")
    before = files_under(user_home)
    result = CliRunner().invoke(cli, ["install", "--agent", agent, "--yes"])
    assert result.exit_code != 0
    assert "symbolic link" in result.output and "does not exist" in result.output
    assert link.is_symlink() and not link.exists()
    assert files_under(user_home) == before
    assert not list(user_home.rglob("*.kirolearn-tmp"))


def _immutable(path: Path) -> bool:
    if shutil.which("chattr") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0


def test_an_immutable_config_refuses_the_install_and_leaves_no_temporary_copy(home):
    user_home = Path(os.environ["HOME"])
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"env": {"A": "1"}}\n')
    if not _immutable(settings):
        pytest.skip("chattr +i is not available here (needs root and an ext4-like file system)")
    try:
        before = files_under(user_home)
        result = CliRunner().invoke(cli, ["install", "--agent", "claude-code", "--yes"])
        assert result.exit_code != 0 and "cannot be written" in result.output
        assert files_under(user_home) == before  # nothing changed, the other files included
        assert not list(user_home.rglob("*.kirolearn-tmp"))
    finally:
        subprocess.run(["chattr", "-i", str(settings)], check=False)
