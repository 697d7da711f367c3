"""The `kirolearn` click group and what every command file shares (kirolearn.cli.commands, .manage, .team, .model).

Library errors are `kirolearn.core.errors.KirolearnError`s; `KirolearnGroup` turns
them into one `Error:` line with a fix-it hint (exit 1, unless the error says
otherwise). The command files import the group from here and kirolearn.cli.commands
imports them, so no command file imports another.
"""

import sqlite3
import sys

import click

from kirolearn.core.version import __version__

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


def json_option(func):
    return click.option("json_", "--json", is_flag=True, help="Print machine-readable JSON.")(func)


# `--help` lists commands in these sections (as llm and sqlite-utils do).
COMMAND_SECTIONS = (
    ("Capture and drain", ("drain", "status", "repair")),
    ("Recall", ("search", "context", "reindex", "model", "serve-recall")),
    (
        "Memory",
        (
            "list",
            "show",
            "forget",
            "restore",
            "edit",
            "consolidate",
            "export",
            "import",
            "serve",
            "scan",
            "rescrub",
        ),
    ),
    ("Summaries", ("save-summary", "session-end", "session-init")),
    ("Setup", ("install", "uninstall", "schedule", "doctor", "config")),
    ("Team", ("team", "migrate")),
)

# Verbs of other tools that people type, and the kirolearn command that does it.
WRONG_VERBS = {
    "delete": "forget",
    "del": "forget",
    "rm": "forget",
    "remove": "forget",
    "erase": "forget",
    "purge": "forget --purge",
    "prune": "forget --purge",
    "undelete": "restore",
    "unforget": "restore",
    "recover": "restore",
    "find": "search",
    "grep": "search",
    "query": "search",
    "recall": "search",
    "lookup": "search",
    "ls": "list",
    "records": "list",
    "get": "show",
    "view": "show",
    "cat": "show",
    "inspect": "show",
    "update": "edit",
    "modify": "edit",
    "change": "edit",
    "ingest": "drain",
    "process": "drain",
    "sync": "drain",
    "run": "drain",
    "backup": "export",
    "dump": "export",
    "load": "import",
    "ui": "serve",
    "web": "serve",
    "viewer": "serve",
    "check": "doctor",
    "health": "doctor",
    "info": "status",
    "stats": "status",
    "setup": "install",
    "init": "install",
    "cron": "schedule",
    "summary": "save-summary",
    "save": "save-summary",
    "end": "session-end",
    "start": "session-init",
    "settings": "config show",
    "share": "team join",
    "join": "team join",
    "leave": "team leave",
}


class KirolearnGroup(click.Group):
    """The one place where library errors become what a user sees.

    A `KirolearnError` becomes one `Error: …` line with its fix and exit status.
    A sqlite3 failure becomes the store error that names the file. Anything
    else is a bug: its traceback goes to logs/cli.log and the user gets one
    line pointing there (set KIROLEARN_DEBUG=1 to see the traceback instead).
    """

    def format_commands(self, ctx, formatter):
        """The command list in sections (COMMAND_SECTIONS), each with its description's whole first sentence.

        A command no section names (a new one) is listed under "Other", so none is ever hidden.
        Sub-groups (`config`, `team`) list their commands in one section, as click does.
        """
        rows = [
            (name, cmd.get_short_help_str(limit=200))
            for name, cmd in ((n, self.get_command(ctx, n)) for n in self.list_commands(ctx))
            if cmd and not cmd.hidden
        ]
        if not rows:
            return
        if ctx.parent is not None:  # a sub-group: one list
            with formatter.section("Commands"):
                formatter.write_dl(rows)
            return
        by_name = dict(rows)
        named = {name for _, names in COMMAND_SECTIONS for name in names}
        sections = [(title, [n for n in names if n in by_name]) for title, names in COMMAND_SECTIONS]
        sections.append(("Other", [n for n, _ in rows if n not in named]))
        for title, names in sections:
            if names:
                with formatter.section(title):
                    formatter.write_dl([(n, by_name[n]) for n in names])

    def resolve_command(self, ctx, args):
        """An unknown command gets a suggestion: a common verb of other tools (`delete`), or a close spelling."""
        if args and args[0] not in self.list_commands(ctx) and not args[0].startswith("-"):
            import difflib

            name = args[0]
            hint = WRONG_VERBS.get(name.lower()) or next(
                iter(difflib.get_close_matches(name, self.list_commands(ctx), n=1, cutoff=0.6)), None
            )
            if hint:
                ctx.fail(f"No such command {name!r}: did you mean `{hint}`? (`kirolearn --help` lists them)")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx):
        import os

        from kirolearn.core.errors import KirolearnError, from_sqlite

        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, KeyboardInterrupt):
            raise
        except KirolearnError as exc:
            _fail(str(exc), exc.exit_code)
        except BrokenPipeError:
            # the reader went away (`| head`): not a disk problem
            devnull = os.open(os.devnull, os.O_WRONLY)
            # so the interpreter's final flush does not fail again
            os.dup2(devnull, sys.stdout.fileno())
            raise click.exceptions.Exit(141) from None
        except sqlite3.Error as exc:
            from kirolearn.core import paths

            err = from_sqlite(exc, paths.db_path())
            _fail(str(err), err.exit_code)
        except OSError as exc:
            # a full disk, a file-size limit, a read-only folder: not a bug
            from kirolearn.core import paths
            from kirolearn.core.errors import HomeError, from_oserror

            problem = from_oserror(exc)
            if isinstance(exc, NotADirectoryError):
                try:
                    # KIROLEARN_HOME is a file: say so, not "check the disk"
                    paths.check_home()
                except HomeError as home_err:
                    problem = home_err
            _fail(str(problem), problem.exit_code)
        except Exception as exc:  # noqa: BLE001
            # a bug: log it whole, tell the user one line
            if os.environ.get("KIROLEARN_DEBUG"):
                raise
            where = _log_traceback()
            _fail(
                f"unexpected {type(exc).__name__}: {exc}; this is a kirolearn bug, "
                f"the traceback is in {where}",
                1,
            )


def _fail(message: str, code: int) -> None:
    from kirolearn.core.errors import one_line
    from kirolearn.privacy.scrub import scrub_text

    if code:
        click.echo(f"Error: {one_line(scrub_text(message))}", err=True)
    else:
        click.echo(f"kirolearn: {one_line(scrub_text(message))}", err=True)
    raise click.exceptions.Exit(code)


def _log_traceback() -> str:
    import os
    import traceback

    from kirolearn.core import paths
    from kirolearn.privacy.scrub import scrub_text

    try:
        path = os.path.join(paths.logs_dir(), "cli.log")
        fd = paths.open_log("cli.log")
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(scrub_text(traceback.format_exc()) + "\n")
        return path
    except Exception:  # noqa: BLE001
        # logging must not mask the original failure
        return "(no log: the logs folder is not writable)"


@click.group(cls=KirolearnGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="kirolearn")
def cli():
    """kirolearn: durable memory for coding agents (Kiro CLI and IDE, Claude Code, Codex, Copilot CLI,
    Gemini CLI, Qwen Code, Auggie, Factory Droid, opencode, Kilo Code, Cursor).

    Hooks capture each agent turn into a spool; `kirolearn drain` turns the
    spool into searchable memory records in $KIROLEARN_HOME/kirolearn.db, and
    the hooks recall them at session start and on each prompt. Record ids may
    be shortened to any unique prefix.
    """
    from kirolearn.privacy.logscrub import scrub_stderr_logging

    # library warnings reach logs/drain.log under cron: scrub them too
    scrub_stderr_logging()


def existing_store():
    """The store, or None on a fresh home: read-only commands create no database (a lost one is StoreLost)."""
    from kirolearn.store.backends import open_existing

    return open_existing()


def project_root_of(project):
    import os

    from kirolearn.core.project import find_project_root

    root, _ = find_project_root(os.path.abspath(project or os.getcwd()))
    return root


def since_option(value):
    if value is None:
        # importing manage.records costs ~1 s (pydantic, sqlite-utils)
        return None
    from kirolearn.manage.records import ManageError, parse_since

    try:
        return parse_since(value)
    except ManageError as exc:
        raise click.BadParameter(str(exc), param_hint="'--since'") from None


def project_where(project) -> str:
    """The project `project` (or the current directory) resolves to, and why, for messages
    (kirolearn.core.project.describe_where: the click-free `kirolearn search` of kirolearn.cli.fast says it too)."""
    from kirolearn.core.project import describe_where

    return describe_where(project)


def say_if_no_database() -> bool:
    """On a fresh home, say on stderr that there is no database yet (reading commands create none)."""
    import os

    from kirolearn.core import paths
    from kirolearn.store.backends import refuse_lost

    refuse_lost()
    if os.path.exists(paths.db_path()):
        return False
    click.echo(
        f"no database yet at {paths.db_path()}: `kirolearn drain` creates it from the spool "
        "(nothing has been drained into this KIROLEARN_HOME)",
        err=True,
    )
    return True


def reindex_with_bar(store, settings, *, everything: bool = False, bar: bool = True) -> dict:
    """kirolearn.recall.semantic.reindex with an "embedding" progress bar on stderr (none when not `bar`,
    e.g. for --json): what `kirolearn reindex` and `kirolearn model install` both run."""
    from kirolearn.recall import semantic

    shown = click.progressbar(length=1, label="embedding", file=sys.stderr) if bar else None

    def progress(done, total):
        if shown is not None:
            shown.length = max(total, 1)
            shown.update(done - shown.pos)

    try:
        return semantic.reindex(store, settings, everything=everything, progress=progress)
    finally:
        if shown is not None:
            shown.render_finish()
