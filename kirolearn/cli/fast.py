"""The `kirolearn` console script: `kirolearn search` answered by the recall server before click loads.

With the recall server up (kirolearn.recall.server), `kirolearn search` needs none of click, the
settings (pydantic), the store's sqlite-utils, numpy or kirolearn.manage.records: the server ranked the
hits and re-scrubbed them with the user's scrub settings (kirolearn.privacy.sanitize.outbound_value,
which is what `--json` applies), and kirolearn.recall.client.terminal escapes them for a terminal
as the click command does. Loading those is most of a call's cost (docs/benchmarks.md, 'What the
hot paths avoid loading'); this path costs the interpreter,
a few standard-library-only kirolearn modules and one round trip (bench/bench_recall.py).

`main` reads the command line the way kirolearn.cli.commands's `search` does and prints what that command
prints, byte for byte. Anything else, and anything this path is not sure of (help, an error to
report, an option spelled another way, no database, no server, a server that fails, is
slow or did not scrub, text a terminal or click would treat specially), runs kirolearn.cli.commands's click
group from the start as before: its help, its errors and their exit statuses stay click's.
"""

import os
import sys

# click's shell completion for the `kirolearn` program
COMPLETE_ENV = "_KIROLEARN_COMPLETE"
VALUED = {
    "--project": "project",
    "--type": "types",
    "--since": "since",
    "--session": "session_id",
    "--file": "file",
    "-n": "limit",
    "--limit": "limit",
}
FLAGS = {"--all-projects": "all_projects", "--json": "json_"}


def main():
    """Console-script entry point (setup.cfg): the fast search, else the click group."""
    argv = sys.argv[1:]
    if argv[:1] == ["search"] and not os.environ.get(COMPLETE_ENV):
        try:
            out = search(argv[1:])
        except Exception:  # noqa: BLE001
            # whatever went wrong, the click command says it properly
            out = None
        if out is not None:
            return write(*out)
    from kirolearn.cli.commands import cli

    return cli()


def parse(args: "list[str]") -> "dict | None":
    """`search`'s arguments as the click command reads them, or None for anything unusual."""
    from kirolearn.core.observation_types import OBSERVATION_TYPES
    from kirolearn.recall.lexical import SEARCH_LIMIT_MAX

    opts = {
        "query": None,
        "project": None,
        "all_projects": False,
        "types": [],
        "since": None,
        "session_id": None,
        "file": None,
        "limit": None,
        "json_": False,
    }
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in FLAGS and not opts[FLAGS[arg]]:
            opts[FLAGS[arg]] = True
        elif arg.startswith("--") and "=" in arg and arg.split("=", 1)[0] in VALUED:
            name, value = arg.split("=", 1)
            if not _take(opts, VALUED[name], value):
                return None
        elif arg in VALUED:
            if i + 1 >= len(args) or args[i + 1].startswith("-") or not _take(opts, VALUED[arg], args[i + 1]):
                return None
            i += 1
        elif arg.startswith("-") or opts["query"] is not None:
            # help, another spelling, a second argument: click's to read
            return None
        else:
            opts["query"] = arg
        i += 1
    limit = opts["limit"]
    if limit is None:
        opts["limit"] = 10
    elif not (limit.isascii() and limit.isdigit() and 1 <= int(limit) <= SEARCH_LIMIT_MAX):
        return None
    else:
        opts["limit"] = int(limit)
    if (
        opts["query"] is None
        or not opts["query"].strip()
        or (opts["project"] and opts["all_projects"])
        or any(t not in OBSERVATION_TYPES for t in opts["types"])
    ):
        return None
    if opts["since"] is not None:  # read as manage.records.parse_since reads it
        from kirolearn.core import isotime

        opts["since"] = isotime.since(opts["since"]) if opts["since"].strip() else None
    project = opts["project"]
    if project is not None and not (os.path.isdir(project) and os.access(project, os.R_OK)):
        # click.Path(file_okay=False, exists=True) says what is wrong with it
        return None
    return opts


def _take(opts: dict, key: str, value: str) -> bool:
    if key == "types":
        opts[key].append(value)
        return True
    if opts[key] is not None:
        return False  # given twice
    opts[key] = value
    return True


def search(args: "list[str]") -> "tuple | None":
    """`kirolearn search ARGS` through the recall server: (stream, text) to print, or None to let click run it."""
    opts = parse(args)
    if opts is None or not _plain_stream(sys.stdout) or not _plain_stream(sys.stderr):
        return None
    from kirolearn.core import paths
    from kirolearn.core.project import find_project_root

    paths.check_home()
    try:
        if os.path.getsize(paths.db_path()) <= 0:
            return None  # empty: refuse_lost may have something to say
    except OSError:
        return None  # no database: the click command says so
    if not os.path.exists(paths.recall_socket()):
        return None
    from kirolearn.recall import client, context

    project_id = None
    # as the command, then Memory.search, resolve it
    if not opts["all_projects"]:
        root, _ = find_project_root(os.path.abspath(opts["project"] or os.getcwd()))
        project_id = context.project_id(find_project_root(paths.check_project(root))[0])
    hits = client.search(
        opts["query"],
        project_id=project_id,
        limit=opts["limit"],
        types=opts["types"] or None,
        since=opts["since"],
        session_id=opts["session_id"],
        file=opts["file"],
    )
    if hits is None or not hits.scrubbed:
        return None
    if opts["json_"]:
        import json

        return _checked(
            sys.stdout, json.dumps([h.to_dict() for h in hits], ensure_ascii=False, indent=2) + "\n"
        )
    if not hits:
        from kirolearn.core.project import describe_where

        where = "any project" if opts["all_projects"] else describe_where(opts["project"])
        return _checked(sys.stderr, f"No memory records match {opts['query']!r} in {where}.\n")
    import time

    now = time.time()
    lines = []
    for hit in hits:  # kirolearn.cli.commands.search_command's two lines a hit
        lines.append(
            client.terminal(f"{hit.record_id}  {hit.score:8.3g}  [{context.kind_label(hit)}] {hit.title}")
        )
        lines.append(
            f"    {context.age(hit.created_at, now)}"
            + (f" · {hit.project_root}" if opts["all_projects"] else "")
        )
    return _checked(sys.stdout, "".join(line + "\n" for line in lines))


def _plain_stream(stream) -> bool:
    """A UTF-8 text stream click.echo writes to as it is (it re-wraps a misconfigured one)."""
    import codecs

    try:
        return codecs.lookup(stream.encoding).name == "utf-8"
    except (AttributeError, LookupError, TypeError):
        return False


def _checked(stream, text: str) -> "tuple | None":
    """(stream, text) when click.echo would write `text` as it is; None (click's turn) when it would not."""
    if "\x1b" in text:
        # click.echo strips ANSI sequences when the stream is not a terminal
        return None
    try:
        text.encode(stream.encoding, stream.errors or "strict")
    except (UnicodeError, LookupError):
        return None
    return stream, text


def write(stream, text: str) -> int:
    """Print it; a write error ends as kirolearn.cli.common.KirolearnGroup ends it (never a second, click run)."""
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        # the reader went away (`kirolearn search x | head`): not a disk problem
        devnull = os.open(os.devnull, os.O_WRONLY)
        # so the interpreter's final flush does not fail again
        os.dup2(devnull, stream.fileno())
        return 141
    except OSError as exc:  # a full disk, a file-size limit
        from kirolearn.core.errors import from_oserror, one_line
        from kirolearn.privacy.scrub import scrub_text

        err = from_oserror(exc)
        sys.stderr.write(f"Error: {one_line(scrub_text(str(err)))}\n")
        return err.exit_code
    return 0
