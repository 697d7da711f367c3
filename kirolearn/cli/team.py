"""`kirolearn team join | leave | status`: thin click commands over kirolearn.team.membership (docs/team.md).

Registered on the `kirolearn` group by kirolearn.cli.commands (imported at its end).
"""

import json

import click

from kirolearn.cli.common import CONTEXT_SETTINGS, cli, json_option

_project_option = click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True),
    help="Project directory (default: the current one).",
)


def _echo_json(value):
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


@cli.group(name="team", context_settings=CONTEXT_SETTINGS)
def team_group():
    """Share chosen projects' memory with a team store (opt-in, per project)."""


@team_group.command(name="join")
@_project_option
@json_option
def team_join(project, json_):
    """Share this project's memory with the team from now on.

    The project is identified by its git remote, so teammates' clones match it
    wherever they live. Nothing of any other project leaves this machine.

    \b
    Example:
        kirolearn team join --project ~/src/shop
    """
    from kirolearn.team import membership as team

    out = team.join(project or ".")
    if json_:
        _echo_json(out)
        return
    verb = "Already sharing" if out["already"] else "Sharing"
    click.echo(f"{verb} {out['identity']} ({out['root']}, project id {out['project_id']}).")
    if out["rekeyed"]:
        click.echo(
            f"Moved this machine's memory of {len(out['rekeyed'])} project id(s) to the remote-based id."
        )
    if not team.status()["configured"]:
        click.echo(
            "No team store is configured yet: set [store] url in config.toml or KIROLEARN_STORE_URL "
            "(docs/team.md).",
            err=True,
        )


@team_group.command(name="leave")
@_project_option
@json_option
def team_leave(project, json_):
    """Stop sharing this project: nothing more of it is uploaded.

    What was already uploaded stays in the team store until forgotten.
    """
    from kirolearn.team import membership as team

    out = team.leave(project or ".")
    if json_:
        _echo_json(out)
        return
    if out["was_shared"]:
        click.echo(f"Stopped sharing {out['identity']} ({out['root']}).")
    else:
        click.echo(f"{out['identity']} ({out['root']}) was not shared.")


@team_group.command(name="status")
@json_option
def team_status(json_):
    """Show the team store, who you are in it, and which projects are shared."""
    from kirolearn.team import membership as team

    out = team.status()
    if json_:
        _echo_json(out)
        return
    click.echo(f"team store: {out['store_url'] or 'not configured (local memory only)'}")
    click.echo(f"you: {out['actor']} on {out['host']}")
    if not out["projects"]:
        click.echo("shared projects: none (kirolearn team join --project DIR)")
        return
    click.echo("shared projects:")
    for p in out["projects"]:
        click.echo(f"  {p['identity']}  {p['root']}  (since {p['joined_at']})")
        if p["stale"]:
            click.echo(
                f"    its git remote changed since: new memory there is not shared; "
                f"run `kirolearn team join --project {p['root']}` again",
                err=True,
            )
