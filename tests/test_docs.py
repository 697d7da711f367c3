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
    for target in ("demo", "test", "bench"):
        assert f"make {target}" in README
        assert f"\n{target}:" in makefile
