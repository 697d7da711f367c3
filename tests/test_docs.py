"""Docs that cannot drift: every command has help, and the README names them."""

import pathlib

import click

from kirolearn.cli import cli

README = (pathlib.Path(__file__).parent.parent / "README.md").read_text("utf-8")


def test_every_command_has_help_and_is_in_the_readme():
    for name, command in cli.commands.items():
        assert command.help and command.help.strip(), name
        assert f"kirolearn {name}" in README, f"`kirolearn {name}` is not documented in README.md"
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.help, f"{name} {param.opts} has no help"


def test_readme_setup_commands_are_make_targets():
    makefile = (pathlib.Path(__file__).parent.parent / "Makefile").read_text("utf-8")
    for target in ("demo", "test", "test-slow", "test-all", "bench"):
        assert f"make {target}" in README
        assert f"\n{target}:" in makefile


def test_ci_runs_the_readme_test_command_and_then_the_slow_tests():
    root = pathlib.Path(__file__).parent.parent
    steps = [line.strip() for line in (root / ".ci" / "run").read_text("utf-8").splitlines()
             if line.strip().startswith("make ")]
    # `make install` first only when CI adds something to .venv (the local model's weights); it runs no test
    # every test, each once: the real agent CLIs (marker agents) run only in make test-agents
    assert [s for s in steps if s != "make install"] == ["make test", "make test-slow", "make test-agents"]
    makefile = (root / "Makefile").read_text("utf-8")
    assert '-m "not slow and not agents"' in makefile.split("\ntest:")[1].split("\n\n")[0]
    assert "-m slow" in makefile.split("\ntest-slow:")[1].split("\n\n")[0]
    agents = makefile.split("\ntest-agents:")[1].split("\n\n")[0]
    assert "-m agents" in agents and "KIROLEARN_REQUIRE_AGENTS=1" in agents  # a missing agent fails in CI
