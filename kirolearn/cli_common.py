"""The `kirolearn` click group and what every command file shares (kirolearn.cli, cli_manage, cli_team).

Library errors are `kirolearn.errors.KirolearnError`s; `KirolearnGroup` turns
them into one `Error:` line with a fix-it hint (exit 1, unless the error says
otherwise). The command files import the group from here and kirolearn.cli
imports them, so no command file imports another.
"""

import sqlite3
import sys

import click

from kirolearn.version import __version__

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


def json_option(func):
    return click.option("json_", "--json", is_flag=True, help="Print machine-readable JSON.")(func)


class KirolearnGroup(click.Group):
    """The one place where library errors become what a user sees.

    A `KirolearnError` becomes one `Error: …` line with its fix and exit status.
    A sqlite3 failure becomes the store error that names the file. Anything
    else is a bug: its traceback goes to logs/cli.log and the user gets one
    line pointing there (set KIROLEARN_DEBUG=1 to see the traceback instead).
    """

    def format_commands(self, ctx, formatter):
        """The command list with each description's whole first sentence (click cuts it to fit one line)."""
        rows = [(name, cmd.get_short_help_str(limit=200)) for name, cmd in
                ((n, self.get_command(ctx, n)) for n in self.list_commands(ctx)) if cmd and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx):
        import os

        from kirolearn.errors import KirolearnError, from_sqlite

        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, KeyboardInterrupt):
            raise
        except KirolearnError as exc:
            _fail(str(exc), exc.exit_code)
        except BrokenPipeError:  # the reader went away (`kirolearn export | head`): not a disk problem
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
            raise click.exceptions.Exit(141) from None
        except sqlite3.Error as exc:
            from kirolearn import config

            err = from_sqlite(exc, config.db_path())
            _fail(str(err), err.exit_code)
        except OSError as exc:  # a full disk, a file-size limit, a read-only folder: not a bug
            from kirolearn import config
            from kirolearn.errors import HomeError, from_oserror

            err = from_oserror(exc)
            if isinstance(exc, NotADirectoryError):
                try:
                    config.check_home()  # KIROLEARN_HOME is a file: say so, not "check the disk"
                except HomeError as home_err:
                    err = home_err
            _fail(str(err), err.exit_code)
        except Exception as exc:  # noqa: BLE001 - a bug: log it whole, tell the user one line
            if os.environ.get("KIROLEARN_DEBUG"):
                raise
            where = _log_traceback()
            _fail(f"unexpected {type(exc).__name__}: {exc}; this is a kirolearn bug, "
                  f"the traceback is in {where}", 1)


def _fail(message: str, code: int) -> None:
    from kirolearn.errors import one_line
    from kirolearn.privacy.scrub import scrub_text

    if code:
        click.echo(f"Error: {one_line(scrub_text(message))}", err=True)
    else:
        click.echo(f"kirolearn: {one_line(scrub_text(message))}", err=True)
    raise click.exceptions.Exit(code)


def _log_traceback() -> str:
    import os
    import traceback

    from kirolearn import config
    from kirolearn.privacy.scrub import scrub_text

    try:
        directory = config.ensure_private_dir(config.logs_dir())
        path = os.path.join(directory, "cli.log")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(scrub_text(traceback.format_exc()) + "\n")
        return path
    except Exception:  # noqa: BLE001 - logging must not mask the original failure
        return "(no log: the logs folder is not writable)"


@click.group(cls=KirolearnGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="kirolearn")
def cli():
    """kirolearn: durable memory for Kiro agents.

    Hooks capture each agent turn into a spool; `kirolearn drain` turns the
    spool into searchable memory records in $KIROLEARN_HOME/kirolearn.db.
    """
    from kirolearn.privacy.logscrub import scrub_stderr_logging

    scrub_stderr_logging()  # library warnings reach logs/drain.log under cron: scrub them too


def _existing_db():
    """The store, or None on a fresh home: read-only commands create no database (a lost one is StoreLost)."""
    from kirolearn.store.sqlite import open_existing

    return open_existing()


def _project_root(project):
    import os

    from kirolearn.project import find_project_root

    root, _ = find_project_root(os.path.abspath(project or os.getcwd()))
    return root


def _since(value):
    from kirolearn.manage import ManageError, parse_since

    try:
        return parse_since(value)
    except ManageError as exc:
        raise click.BadParameter(str(exc), param_hint="'--since'") from None
