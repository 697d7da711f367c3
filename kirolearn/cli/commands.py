"""`kirolearn`: the command line for people, cron jobs and scripts.

The group and its error handling are kirolearn.cli.common's (`KirolearnGroup`
turns library errors into one `Error:` line with a fix-it hint); bad flag
combinations are usage errors (exit 2). `--json` output is stable:
its keys are documented in docs/ and only ever added to.
"""

import json
import os
import sys

import click

from kirolearn.capture.agents import names as agent_names
from kirolearn.cli.common import (
    CONTEXT_SETTINGS,
    cli,
    existing_store,
    json_option,
    project_root_of,
    project_where,
    reindex_with_bar,
    say_if_no_database,
    since_option,
)
from kirolearn.core.observation_types import OBSERVATION_TYPES
from kirolearn.recall.lexical import SEARCH_LIMIT_MAX

# `--agent` of install / uninstall: every adapter's agent
AGENT_NAMES = list(agent_names())


def _load_settings():
    from kirolearn.settings import load

    return load()


def _open_store():
    from kirolearn.store.backends import open_store

    return open_store()


def _own_drain_log() -> None:
    """A scheduled drain appends to logs/drain.log through the shell: drop a link planted there."""
    import os

    from kirolearn.core import paths

    try:
        if os.path.lexists(os.path.join(paths.logs_dir(), "drain.log")):
            os.close(paths.open_log("drain.log"))
    except (OSError, paths.HomeNotFound):
        pass


@cli.command(name="drain")
@click.option("--watch", is_flag=True, help="Keep draining as events arrive, until interrupted.")
@click.option(
    "--flush", is_flag=True, help="Extract every buffered session now, without waiting for turn end or idle."
)
@click.option(
    "--no-recall-server",
    is_flag=True,
    help="With --watch: do not also serve recall (kirolearn serve-recall).",
)
@json_option
def drain_command(watch, flush, json_, no_recall_server):
    """Store spooled events and extract memory records from them.

    Takes the spool lock first: if another drain holds it, exits 0 saying so.

    \b
    Examples:
        kirolearn drain                  # once, e.g. from cron
        kirolearn drain --watch          # keep going as Kiro works
        kirolearn drain --json           # summary as JSON
    """
    from dataclasses import asdict

    from kirolearn import Memory
    from kirolearn.capture import spool
    from kirolearn.cli.progress import for_hand_run
    from kirolearn.core.errors import DrainLocked

    if watch and flush:
        raise click.UsageError("--flush applies to a single drain; drop it or --watch")
    _own_drain_log()
    from kirolearn import health

    # a run of `kirolearn schedule`'s job: doctor's proof that it fires
    health.note_scheduled_run()
    # a person at a terminal: the spool and the backfills show their progress
    bars = for_hand_run(watch)
    stored = None

    # the lock is held: show progress for a big spool, or say we are watching
    def start():
        nonlocal stored
        if bars is not None:
            stored = bars.phase("storing the spool", spool.size())
        if watch:
            click.echo("kirolearn: watching the spool; Ctrl-C to stop", err=True)

    def progress(done):
        if stored is not None:
            stored(done)

    def on_pass(s):
        click.echo(json.dumps(asdict(s)) if json_ else _describe(s), err=not json_)

    server = None
    # the watcher keeps the model loaded anyway: answer recall too
    if watch and not no_recall_server:
        from kirolearn.recall.server import start_in_thread

        server = start_in_thread()
    try:
        stats = Memory().drain(
            flush=flush, watch=watch, progress=progress, on_pass=on_pass, on_start=start, bars=bars
        )
    except DrainLocked as exc:
        if json_:
            click.echo(json.dumps({"locked": True, "message": str(exc)}))
        else:
            click.echo(f"kirolearn: {exc}", err=True)
        return
    finally:
        if bars is not None:
            bars.close()
        if server is not None:
            server.close()
    if json_ and not watch:
        click.echo(json.dumps(asdict(stats), sort_keys=True))
    elif not json_:
        click.echo(_describe(stats))
    _rescrub_note()


def _rescrub_note(store=None) -> None:
    """Say on stderr when the store's text predates the current scrubbing rules."""
    from kirolearn.privacy.rescrub import note

    text = note(store or _open_store())
    if text:
        click.echo(f"kirolearn: {text}", err=True)


def _describe(stats) -> str:
    parts = [
        f"{stats.events_read} events read",
        f"{stats.stored} stored",
        f"{stats.duplicates} duplicates",
        f"{stats.already_stored} already stored",
        f"{stats.quarantined} quarantined",
        f"{stats.batches_extracted} batches extracted ({stats.extractor})",
        f"{stats.records_written} records written",
        f"{stats.pending_events} events buffered",
    ]
    text = "drain: " + ", ".join(parts)
    if stats.redactions:
        text += "\nredacted: " + ", ".join(f"{n} {kind}" for kind, n in sorted(stats.redactions.items()))
    if stats.llm_failures:
        text += f"\nmodel failures: {stats.llm_failures} (batches kept, retried on the next drain)"
    if stats.fallbacks:
        text += (
            f"\ndeterministic fallbacks: {stats.fallbacks} (model unset, over its daily limit, or failing)"
        )
    if stats.tokens_used:
        text += f"\ntokens used: {stats.tokens_used} (${stats.cost_usd:.4f})"
    if stats.records_embedded:
        text += f"\nembedded: {stats.records_embedded} records (semantic recall)"
    if stats.embedding_error:
        text += f"\nsemantic recall off: {stats.embedding_error} (search uses words alone; see `kirolearn doctor`)"
    team = stats.team
    if team.get("error"):
        text += (
            f"\nteam store not synced: {team['error']} (nothing is lost: it is sent at the next drain; "
            "see `kirolearn status`)"
        )
    elif team:
        text += (
            f"\nteam: sent {team['events_sent']} events and {team['records_sent']} records, received "
            f"{team['records_received']} records ({team['projects']} shared projects)"
        )
    return text


class PrivateFile(click.File):
    """click.File for writing, except that the file is 0600 whatever the umask, an existing one included
    (an export holds every prompt and tool output). Opened on the first write, as click.File opens
    one; "-" is stdout."""

    def convert(self, value, param, ctx):
        if value == "-" or not isinstance(value, (str, os.PathLike)):
            return super().convert(value, param, ctx)
        return _PrivateOutput(os.fspath(value), self, param, ctx)


class _PrivateOutput:
    def __init__(self, path, kind, param, ctx):
        self.path, self.kind, self.param, self.ctx, self.fh = path, kind, param, ctx, None
        if ctx is not None:
            ctx.call_on_close(self.close)

    def write(self, text: str) -> int:
        if self.fh is None:
            try:
                fd = os.open(
                    self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o600
                )
            except OSError as exc:
                self.kind.fail(f"'{self.path}': {exc.strerror or exc}", self.param, self.ctx)
            import stat

            mode = os.fstat(fd).st_mode
            if stat.S_ISREG(mode) and mode & 0o077 and hasattr(os, "fchmod"):
                # an existing file others could read: memory is not theirs
                os.fchmod(fd, 0o600)
            self.fh = os.fdopen(fd, "w", encoding="utf-8")
        return self.fh.write(text)

    def flush(self) -> None:
        if self.fh is not None:
            self.fh.flush()

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


@cli.command(name="export")
@click.option(
    "-o",
    "--output",
    type=PrivateFile("w", encoding="utf-8"),
    default="-",
    help="File to write (default stdout); a new file is created 0600.",
)
def export_command(output):
    """Write every stored object as JSON Lines, for backup and tests.

    Each line is one object with a "type" field beside its own fields: "event"
    (a stored, scrubbed event), "record" (a memory record) or "summary" (a
    session_end summary).
    """
    from kirolearn import Memory

    Memory().export(output)


@cli.command(name="status")
@json_option
def status_command(json_):
    """Show the spool, the last drain, what is stored and today's model spend.

    Creates nothing: on a fresh machine it reports an empty spool and no database.
    """
    from kirolearn.health import status
    from kirolearn.team.sync import status_facts as team_facts

    settings = _load_settings()
    info = status(settings)
    # a feature's own facts: health sits below the team sync
    info["team"] = team_facts(settings)
    if json_:
        click.echo(json.dumps(info, indent=2, sort_keys=True))
        return
    s = info["spool"]
    age = f", oldest {s['oldest_age_seconds']:.0f} s old" if s["oldest_age_seconds"] is not None else ""
    click.echo(f"home: {info['home']}")
    click.echo(
        f"spool: {s['ready']} events waiting{age}; {s['quarantined']} quarantined; "
        f"{s.get('kept', 0)} drained, kept in spool/done/ until a later check finds the database sound"
    )
    ex = info["extractor"]
    limit = f", {ex.get('tokens_today', 0)} of {ex['daily_token_limit']} tokens today" if ex["model"] else ""
    click.echo(f"extractor: {ex['mode']}{' (' + ex['model'] + ')' if ex['model'] else ''}{limit}")
    if ex["breaker_open"]:
        click.echo(f"model: not called until it answers again; last error: {ex['last_model_error']}")
    runs = ex.get("model_runs_24h")
    if runs:
        latency = (
            f", {runs['latency_ms_avg'] / 1000:.1f} s each on average (slowest {runs['latency_ms_max'] / 1000:.1f} s)"
            if runs["latency_ms_avg"] is not None
            else ""
        )
        why = "; ".join(f"{kind} ({n})" for kind, n in runs["fallback_reasons"].items())
        click.echo(
            f"model, last 24 h: {runs['batches']} batches{latency}; {runs['failed_attempts']} failed attempts; "
            f"{runs['fallbacks']} fell back to the deterministic extractor" + (f": {why}" if why else "")
        )
        if runs.get("supersede_questions"):
            click.echo(
                f"model, last 24 h: {runs['supersede_questions']} supersede questions, "
                f"{runs['supersede_answered']} answered (see logs/truth.log)"
            )
    if info["last_drain_error"]:
        click.echo(f"last drain failed: {info['last_drain_error']}")
    if info["hook_errors_24h"]:
        click.echo(f"hook errors in the last 24 h: {info['hook_errors_24h']} (see logs/hook.log)")
    # every agent's files, despite the key's name (kept: --json is stable)
    wired = info["kiro_wiring"]
    from kirolearn.install import scopes

    found = info.get("wiring_scopes") or []
    if not wired and not found:
        from kirolearn.capture.agents import names

        click.echo(f"agents: none wired (run `kirolearn install --agent NAME`: {', '.join(names())})")
    for entry in found:
        click.echo(scopes.describe(entry))
    for user, _project in scopes.doubles(found):
        click.echo(
            f"{user['agent']}: wired twice (for this user and by this project): each hook runs twice; "
            "`kirolearn doctor` says how to keep one"
        )
    # one line per agent, in install order
    for agent in dict.fromkeys(w["agent"] for w in wired):
        click.echo(
            f"{agent}: "
            + ", ".join(
                ("" if w["present"] and not w["missing_binaries"] else "BROKEN ") + w["path"]
                for w in wired
                if w["agent"] == agent
            )
        )
    tm = info["team"]
    if tm["store"]:
        age = (
            f"synced {tm['cache_age_seconds']:.0f} s ago"
            if tm["cache_age_seconds"] is not None
            else "never synced"
        )
        click.echo(
            f"team store: {tm['store']}; {tm['shared_projects']} shared projects; cache {age}"
            + (
                f"; last sync failed: {tm['last_error']} (the spool and the local store keep everything)"
                if tm["last_error"]
                else ""
            )
        )
    db_info = info["database"]
    if db_info is None:
        click.echo("database: none yet (run `kirolearn drain`)")
        return
    click.echo(f"database: {db_info['events']} events, {db_info['records']} records ({db_info['path']})")
    if db_info.get("agent_events_24h"):
        click.echo(
            "events in the last 24 h: "
            + ", ".join(f"{agent} {count}" for agent, count in db_info["agent_events_24h"].items())
        )
    last = db_info["last_drain"]
    if last:
        click.echo(
            f"last drain: {last['finished_at']}: {last['events_read']} read, {last['stored']} stored, "
            f"{last['records_written']} records"
        )
        # what the drain merged by itself
        for group in last.get("merged") or ():
            click.echo(
                f"  merged {', '.join(i for i in group['record_ids'] if i != group['into'])} into "
                f"{group['into']}"
            )
    if db_info.get("superseded") or db_info.get("merged"):
        click.echo(
            f"marks: {db_info.get('superseded', 0)} records superseded, {db_info.get('merged', 0)} merged "
            "(kirolearn restore ID undoes one)"
        )
    if db_info["extraction_failures_24h"]:
        click.echo(f"model failures in the last 24 h: {db_info['extraction_failures_24h']}")
    sc = db_info["scrub"]
    click.echo(
        f"scrub rules: v{sc['rules_version']}; stored text scrubbed with v{sc['store_scrubbed_with']}"
        + (": run `kirolearn rescrub`" if sc["rescrub_needed"] else "")
    )
    for p in db_info["projects"]:
        click.echo(
            f"  {p['project_root']}: {p['events']} events ({p['pending']} buffered), {p['records']} records"
        )


@cli.command(name="search")
@click.argument("query")
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True),
    help="Project directory (default: the current one).",
)
@click.option("--all-projects", is_flag=True, help="Search every project.")
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice(OBSERVATION_TYPES),
    help="Only records of this observation type (repeatable).",
)
@click.option(
    "--since",
    callback=lambda c, p, v: since_option(v),
    help="Only records since an age (7d, 12h, 2w) or a date.",
)
@click.option("--session", "session_id", help="Only records of this session id.")
@click.option("--file", help="Only records that touched this file (a path, or its tail).")
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(1, SEARCH_LIMIT_MAX),
    default=10,
    show_default=True,
    help="Most records to show.",
)
@json_option
def search_command(query, project, all_projects, types, since, session_id, file, limit, json_):
    """Search memory records of the current project.

    Any text works: quotes, operators and code are searched as plain words.

    \b
    Examples:
        kirolearn search "database is locked"
        kirolearn search migration --type decision --json
        kirolearn search WAL --all-projects
    """
    import time

    from kirolearn import Memory
    from kirolearn.recall import context

    if project and all_projects:
        raise click.UsageError("--project and --all-projects cannot be combined")
    # would match nothing: say so, not "No memory records match ''"
    if not query.strip():
        raise click.UsageError(
            "QUERY is empty: give words to search for (`kirolearn list` shows the newest records)"
        )
    root = project_root_of(project)
    say_if_no_database()
    hits = Memory().search(
        query,
        project=root,
        all_projects=all_projects,
        types=types,
        limit=limit,
        since=since,
        session_id=session_id,
        file=file,
    )
    # the recall server re-scrubbed them (kirolearn.recall.server)
    if getattr(hits, "scrubbed", False):
        from kirolearn.recall.client import terminal

        def clean(value):
            return value
    else:
        from kirolearn.manage.records import clean, terminal

    if json_:
        from kirolearn.manage.records import for_json

        click.echo(json.dumps(for_json([h.to_dict() for h in hits]), ensure_ascii=False, indent=2))
        return
    if not hits:
        where = "any project" if all_projects else project_where(project)
        click.echo(f"No memory records match {query!r} in {where}.", err=True)
        return
    now = time.time()
    # BM25 of a small store is tiny: significant digits, not a fixed 0.00
    for hit in hits:
        kind = context.kind_label(hit)
        click.echo(terminal(clean(f"{hit.record_id}  {hit.score:8.3g}  [{kind}] {hit.title}")))
        click.echo(
            f"    {context.age(hit.created_at, now)}" + (f" · {hit.project_root}" if all_projects else "")
        )


@cli.command(name="context")
@click.option("--session-start", is_flag=True, help="What the session-start hook would print.")
@click.option("--prompt", help="What the prompt-submit hook would print for this prompt.")
@click.option(
    "--session",
    "session_id",
    help="With --prompt: as in this running session (what it was shown "
    "already is not repeated); default: the first prompt of a new session, after its session-start block.",
)
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True),
    help="Project directory (default: the current one).",
)
def context_command(session_start, prompt, session_id, project):
    """Print exactly what a hook would inject, for debugging.

    Read-only: it does not mark anything as shown for any session.
    """
    from kirolearn import Memory

    if bool(session_start) == (prompt is not None):
        raise click.UsageError("give exactly one of --session-start or --prompt TEXT")
    say_if_no_database()
    if session_id and prompt is None:
        raise click.UsageError(
            "--session goes with --prompt TEXT (a session start is printed once per session)"
        )
    text = Memory().context(
        project=project_root_of(project), prompt=None if session_start else prompt, session_id=session_id
    )
    if text:
        click.echo(text, nl=False)
    else:
        click.echo(f"(nothing would be injected) in {project_where(project)}", err=True)


def _scrubber():
    from kirolearn.privacy.scrub import Scrubber

    conf = _load_settings()
    # The drain's own configuration: `scan` must judge as the drain does.
    return Scrubber(conf.scrub.extra_patterns, conf.scrub.allow, betterleaks=conf.scrub.betterleaks)


@cli.command(name="save-summary")
@click.option("--request", help="What the user asked for.")
@click.option("--investigated", help="What was explored.")
@click.option("--learned", help="Key findings.")
@click.option("--completed", help="What was delivered.")
@click.option("--next-steps", help="Suggested follow-ups.")
@click.option("--file-read", "files_read", multiple=True, help="A file read (repeatable).")
@click.option("--file-modified", "files_modified", multiple=True, help="A file modified (repeatable).")
@click.option(
    "--stdin",
    "from_stdin",
    is_flag=True,
    help="Read one JSON object with the seven fields (files as lists) from standard input.",
)
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True),
    help="Project directory (default: the current one).",
)
@json_option
def save_summary_command(
    request,
    investigated,
    learned,
    completed,
    next_steps,
    files_read,
    files_modified,
    from_stdin,
    project,
    json_,
):
    """Save a structured turn summary as a memory record (what the MCP tool does).

    \b
    Examples:
        kirolearn save-summary --request "Fix login 500" --investigated "auth.py" \\
            --learned "SQL built with %" --completed "parameterised" --next-steps "orders.py" \\
            --file-read app/auth.py --file-modified app/auth.py
        echo '{"request": "...", ...}' | kirolearn save-summary --json   # --stdin is implied
    """
    from kirolearn.pipeline import summaries

    given = (request, investigated, learned, completed, next_steps, files_read, files_modified)
    piped = None
    if not from_stdin and not any(given) and not sys.stdin.isatty():
        # `… | kirolearn save-summary`: the JSON document, without --stdin
        piped = sys.stdin.read()
        from_stdin = bool(piped.strip())
    if from_stdin:
        if any(given):
            raise click.UsageError("--stdin takes all fields from the JSON document; drop the field options")
        try:
            doc = json.loads(piped if piped is not None else sys.stdin.read())
        except ValueError as exc:
            raise click.ClickException(f"standard input is not valid JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise click.ClickException("standard input must be one JSON object with the seven summary fields")
        unknown = set(doc) - set(summaries.TURN_FIELDS)
        if unknown:
            raise click.ClickException(
                f"unknown field(s) {', '.join(sorted(unknown))}; expected {', '.join(summaries.TURN_FIELDS)}"
            )
        fields = {k: doc.get(k) for k in summaries.TURN_FIELDS}
    else:
        fields = {
            "request": request,
            "investigated": investigated,
            "learned": learned,
            "completed": completed,
            "next_steps": next_steps,
            "files_read": list(files_read),
            "files_modified": list(files_modified),
        }
        missing = [f"--{k.replace('_', '-')}" for k, v in fields.items() if v is None]
        if missing:
            raise click.UsageError(f"missing {', '.join(missing)} (or pass the JSON document with --stdin)")
    from kirolearn import Memory

    record = Memory().save_turn_summary(project=project_root_of(project), **fields)
    if json_:
        click.echo(
            json.dumps(
                {
                    "record_id": record.record_id,
                    "title": record.title,
                    "message": f"Saved turn summary {record.record_id}",
                }
            )
        )
    else:
        click.echo(f"Saved turn summary {record.record_id}")


@cli.command(name="session-end")
@click.option("--session-id", required=True, help="The session being ended.")
@click.option("--summary", help="What was done (required unless --auto-compress).")
@click.option("--highlight", "highlights", multiple=True, help="A highlight (repeatable).")
@click.option("--pitfall", "pitfalls", multiple=True, help="A gotcha for the next session (repeatable).")
@click.option("--next-step", "next_steps", multiple=True, help="A next step (repeatable).")
@click.option("--open-question", "open_questions", multiple=True, help="An open question (repeatable).")
@click.option("--label", default="general", show_default=True, help="Project label (the tool's `project`).")
@click.option("--auto-compress", is_flag=True, help="Let the configured model draft what is missing.")
@click.option(
    "--transcript",
    type=click.File("r", encoding="utf-8"),
    help="Session log file for --auto-compress ('-' for stdin).",
)
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True),
    help="Project directory (default: the current one).",
)
@json_option
def session_end_command(
    session_id,
    summary,
    highlights,
    pitfalls,
    next_steps,
    open_questions,
    label,
    auto_compress,
    transcript,
    project,
    json_,
):
    """Save an end-of-session summary that the next session-init (and session start) returns.

    \b
    Example:
        kirolearn session-end --session-id s1 --summary "Moved JWT checks into middleware" \\
            --next-step "Rate-limit /auth/refresh" --pitfall "Refresh tokens are UTC"
    """
    from kirolearn import Memory

    # the tool's own message names MCP fields
    if not (summary or "").strip() and not auto_compress:
        raise click.UsageError("give --summary, or --auto-compress to draft it with the configured model")
    result = Memory().end_session(
        session_id,
        project=project_root_of(project),
        summary=summary,
        # an option not given is absent (None), so auto_compress may fill it
        highlights=list(highlights) or None,
        pitfalls=list(pitfalls) or None,
        next_steps=list(next_steps) or None,
        open_questions=list(open_questions) or None,
        label=label,
        auto_compress=auto_compress,
        transcript=transcript.read() if transcript else None,
    )
    if json_:
        click.echo(json.dumps(result))
        return
    click.echo(
        f"Saved session end {result['id']} for {project_where(project)}, label '{result['project']}' "
        f"({result['summary_len']} characters, {result['next_steps_count']} next steps)"
    )
    if result.get("auto_compress_error"):
        click.echo(f"auto-compress did not help: {result['auto_compress_error']}", err=True)


@cli.command(name="session-init")
@click.option("--label", default="general", show_default=True, help="Project label used at session-end.")
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True),
    help="Project directory (default: the current one).",
)
@json_option
def session_init_command(label, project, json_):
    """Show the latest session-end summary of this project (it stays until superseded)."""
    from kirolearn import Memory
    from kirolearn.manage.records import for_json, terminal

    found = for_json(
        Memory().init_session(label=label, project=project_root_of(project))
    )  # memory: untrusted
    if json_:
        click.echo(json.dumps(found, ensure_ascii=False))
        return
    if not found["found"]:
        click.echo(found["message"])
        return
    click.echo(
        f"Last session {found['session_id']} ended {found['ended_at']}"
        + (f" on branch {found['branch']}" if found.get("branch") else "")
    )
    click.echo(terminal(found["summary"]) if found["summary"] else "(it ended without a summary)")
    _echo_lists(found, terminal)
    previous = found.get("previous")
    # the newest row with a summary, shown apart: never mixed into the row above
    if previous:
        click.echo(f"Before that, session {previous['session_id']} ended {previous['ended_at']}:")
        click.echo(terminal(previous["summary"]))
        _echo_lists(previous, terminal)


def _echo_lists(found: dict, terminal) -> None:
    for head, key in (
        ("Next steps", "next_steps"),
        ("Pitfalls", "pitfalls"),
        ("Open questions", "open_questions"),
        ("Highlights", "highlights"),
    ):
        if found.get(key):
            click.echo(f"{head}:")
            for item in found[key]:
                click.echo(terminal(f"  - {' '.join(str(item).split())}"))


@cli.command(name="install")
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True),
    help="Wire this project's .kiro/ (v3 / IDE 1.x hook file, IDE 0.x .kiro.hook files, and the MCP "
    "server unless ~/.kiro has it) instead of ~/.kiro; add --global for both.",
)
@click.option(
    "--global",
    "global_",
    is_flag=True,
    help="Wire ~/.kiro (the kirolearn agent and the MCP server); the default when --project is not given.",
)
@click.option(
    "--portable",
    is_flag=True,
    help="Write commands found on PATH (kirolearn-hook, kirolearn-mcp) instead of this machine's "
    "absolute paths, for files a team commits (.kiro/, .claude/settings.json, .mcp.json, ...); "
    "a hook whose PATH lacks kirolearn-hook says so on stderr and in the log.",
)
@click.option("--dry-run", is_flag=True, help="Print the diff of every file it would touch; write nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before writing.")
@click.option("--set-default", is_flag=True, help="Also make `kirolearn` Kiro CLI's default agent.")
@click.option(
    "--agent",
    "agent",
    type=click.Choice(AGENT_NAMES),
    default="kiro",
    show_default=True,
    help="Which agent to wire: Kiro (CLI and IDE), Claude Code, or another adapter's agent "
    "(docs/agents/NAME.md says what each writes).",
)
@click.option(
    "--with-model",
    is_flag=True,
    help="Also run `kirolearn model install` (all-MiniLM-L6-v2, ~90 MB, no torch); asked in a terminal.",
)
@click.option(
    "--also",
    is_flag=True,
    help="Wire this scope even though the agent is wired in the other one (the user's, or this "
    "project's committed files): each hook call then runs twice, and the hook keeps one event.",
)
def install_command(project, global_, portable, dry_run, yes, set_default, agent, with_model, also):
    """Wire kirolearn's hooks and MCP server into an agent: Kiro (the default) or another (--agent).

    Kiro CLI and IDE, Claude Code, Codex, Copilot CLI, Gemini CLI, Qwen Code, Auggie, Factory Droid,
    opencode, Kilo Code or Cursor.

    Writes only its own entries, keeps everything else in shared files byte
    for byte, and records what it wrote so `kirolearn uninstall` can undo
    exactly that. Every target is checked first: if one cannot be changed
    safely, nothing is written. Running it again changes nothing.

    \b
    Examples:
        kirolearn install                           # ~/.kiro only: the kirolearn agent, the MCP server
        kirolearn install --project . --yes         # this project's .kiro/ only
        kirolearn install --global --project . -y   # both
        kirolearn install --project . --portable    # .kiro/ files fit to commit
        kirolearn install --project . --dry-run
        kirolearn install --agent claude-code       # ~/.claude/settings.json hooks
        kirolearn install --agent claude-code --project . --portable   # fit to commit
    """
    from kirolearn.install import agents, scopes

    if not also and agent not in scopes.SCOPES_APART:
        _refuse_second_scope(agent, project, global_)
    if agent != "kiro":
        if set_default:
            raise click.UsageError(f"--set-default is a Kiro option; drop it with --agent {agent}")
        changes = agents.get(agent).plan_install(project, global_ or not project, portable=portable)
        _mark_scope(changes, project)
        _apply_changes(changes, dry_run, yes, installing=True)
        _note_machine_paths(changes, project, agent)
        if not dry_run:
            cli_model.offer_model(with_model, yes)
            click.echo(
                f"next: `kirolearn schedule` to drain in the background; {agent} picks kirolearn up "
                "at its next start (docs/agents/" + agent + ".md)"
            )
        return
    # the Kiro-only option: --set-default
    from kirolearn.install.agents import kiro as kiro_install

    changes = agents.get("kiro").plan_install(project, global_ or not project, portable=portable)
    _mark_scope(changes, project)
    _apply_changes(changes, dry_run, yes, installing=True)
    _note_machine_paths(changes, project, "kiro")
    if set_default and not dry_run:
        click.echo(kiro_install.set_default_agent())
    if not dry_run:
        cli_model.offer_model(with_model, yes)
        click.echo(
            "next: `kirolearn schedule` to drain in the background; Kiro CLI users start "
            + ("`kiro-cli chat --agent kirolearn`" if global_ or not project else "`kiro-cli chat` here")
        )


def _install_scopes(agent: str, project, global_: bool) -> set:
    """The scopes an install writes: Codex only its user's home; Kiro both with --global --project."""
    from kirolearn.install import scopes

    if agent == "codex" or not project:
        return {scopes.USER}
    if agent == "kiro" and global_:
        return {scopes.USER, scopes.PROJECT}
    return {scopes.PROJECT}


def _refuse_second_scope(agent: str, project, global_: bool) -> None:
    """One capture per call: no second scope of an agent already wired in the other one, unless --also."""
    import os

    from kirolearn.core.errors import InstallError
    from kirolearn.install import scopes

    target = os.path.abspath(project) if project else scopes.current_project()
    writing = _install_scopes(agent, project, global_)
    for entry in scopes.scan(target, [agent]):
        if entry["scope"] in writing:
            continue  # the same scope again: install updates it in place
        where = "for this user" if entry["scope"] == scopes.USER else f"by the project {entry['project']}"
        undo = (
            f"`kirolearn uninstall --agent {agent}`"
            if entry["scope"] == scopes.USER
            else f"`kirolearn uninstall --agent {agent} --project {entry['project']}` (if you installed it)"
        )
        raise InstallError(
            f"{agent} is already wired {where} ({', '.join(entry['files'])}); wiring the "
            f"{'project' if entry['scope'] == scopes.USER else 'user'}'s scope too would run every hook "
            "twice, so nothing was written",
            f"keep that wiring (`kirolearn status` shows it records your calls), or remove it first with "
            f"{undo}, or add --also to wire both",
        )


def _mark_scope(changes, project) -> None:
    """Record which project each written file belongs to (None: the user's), for `uninstall`'s scopes."""
    import os

    root = os.path.abspath(project) if project else None
    for change in changes:
        inside = root is not None and os.path.abspath(change.path).startswith(root + os.sep)
        change.record.setdefault("project", root if inside else None)


def _note_machine_paths(changes, project, agent: str) -> None:
    """Say which project files hold this machine's absolute paths (a teammate's clone could not run them)."""
    from kirolearn.install import engine as install

    for path in install.machine_paths(changes, project):
        click.echo(
            f"note       {path} holds absolute paths of this machine; if your team commits it, re-run "
            "with --portable",
            err=True,
        )


def _apply_changes(changes, dry_run, yes, *, installing):
    from kirolearn.install import engine as install

    problems = [c for c in changes if c.problem]
    todo = [c for c in changes if c.changed]
    for c in changes:
        if not c.problem and not c.changed:
            click.echo(f"unchanged  {c.path}" + ("" if installing else ": nothing to remove"))
    for c in todo:
        verb = "create" if c.before is None else ("remove" if c.after is None else "update")
        click.echo(f"{verb:<10} {c.path}")
        if dry_run:
            click.echo(c.diff())
    for c in problems:
        click.echo(f"skipped    {c.problem}", err=True)
    if not dry_run and todo and not (installing and problems):
        if not yes and sys.stdin.isatty() and not click.confirm(f"write {len(todo)} file(s)?", default=True):
            raise click.Abort()
    if not dry_run:
        install.apply(changes, installing=installing)
    if problems:
        raise click.ClickException(f"{len(problems)} file(s) left untouched; see above")


@cli.command(name="uninstall")
@click.option(
    "--project",
    type=click.Path(file_okay=False),
    help="Undo what was installed into this project (default: the user's scope only, never a project's).",
)
@click.option(
    "--purge",
    is_flag=True,
    help="Also delete all kirolearn data ($KIROLEARN_HOME); asks first, and without a terminal needs --yes.",
)
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before writing or deleting.")
@click.option(
    "--agent",
    "agent",
    type=click.Choice(AGENT_NAMES),
    help="Only undo what was installed for this agent (default: every agent).",
)
def uninstall_command(project, purge, dry_run, yes, agent):
    """Remove exactly what `kirolearn install` added in one scope: the user's, or a project's.

    The user's scope (~/.claude, ~/.kiro and the like) by default, a project's
    with --project DIR; a plain uninstall never touches a project. It prints every file it will touch first. A file install created is removed;
    a file that was there before gets its bytes back as they were before install
    (unless you edited it since: then only kirolearn's entry is taken out). Your
    memory is kept unless --purge.
    """
    import os
    import shutil

    from kirolearn.core import paths
    from kirolearn.core.errors import KirolearnError
    from kirolearn.install import agents

    home = paths.home()
    if purge and not dry_run and not yes and not sys.stdin.isatty() and os.path.isdir(home):
        raise KirolearnError(
            f"refusing to delete {home} and all memory in it without a confirmation",
            "run it in a terminal, or pass --yes",
            exit_code=2,
        )
    from kirolearn.install import engine as install
    from kirolearn.install import scopes

    changes = [
        c for name in ([agent] if agent else agents.names()) for c in agents.get(name).plan_uninstall(project)
    ]
    # the user's scope: a project's files (often committed) stay
    if not project:
        recorded = {e["path"]: e for e in install.load_record()}
        kept = [c for c in changes if scopes.recorded_scope(recorded.get(c.path, c.record)) != scopes.USER]
        changes = [c for c in changes if c not in kept]
        for root in sorted({scopes.recorded_project(recorded.get(c.path, c.record)) or "?" for c in kept}):
            click.echo(f"kept       the wiring of {root} (`kirolearn uninstall --project {root}` removes it)")
    click.echo(
        f"uninstall {agent or 'every agent'} from "
        + (f"the project {os.path.abspath(project)}" if project else "the user's scope")
        + ": "
        + (f"{len([c for c in changes if c.changed])} file(s) to change" if changes else "nothing recorded")
    )
    if not changes:
        click.echo(
            f"nothing to uninstall: {install.record_path()} records no install"
            + (f" into {os.path.abspath(project)}" if project else " in the user's scope")
            + (f" for {agent}" if agent else "")
        )
    _apply_changes(changes, dry_run, yes, installing=False)
    if purge and not dry_run:
        if os.path.isdir(home):
            if not yes and not click.confirm(f"delete {home} and all memory in it?"):
                raise click.Abort()
            shutil.rmtree(home)
            click.echo(f"removed    {home}")


@cli.command(name="schedule")
@click.option("--every", default="1m", show_default=True, help="Interval: 1m, 5m, 1h, …")
@click.option("--systemd", "kind", flag_value="systemd", help="A systemd user timer.")
@click.option("--cron", "kind", flag_value="cron", help="A crontab line.")
@click.option("--launchd", "kind", flag_value="launchd", help="A launchd agent (macOS).")
@click.option("--print", "print_only", is_flag=True, help="Print the job instead of installing it.")
@click.option("--remove", is_flag=True, help="Remove the job.")
@click.option(
    "--recall-server",
    is_flag=True,
    help="Also (or with --remove: also remove) the recall server as a user service (systemd, launchd).",
)
def schedule_command(every, kind, print_only, remove, recall_server):
    """Run `kirolearn drain` periodically, with the scheduler that works here.

    Without a flag: launchd on macOS, a systemd user timer where `systemctl --user` reaches a user
    manager, else cron; when none does, it says so and gives the `kirolearn drain --watch` line for a
    supervisor of your own. The drain's own lock keeps runs from overlapping. --remove without a flag removes every drain job
    installed. --recall-server adds `kirolearn serve-recall` as a service that stays up, so the prompt
    hook and `search` get the embedding model's answers.
    """
    from kirolearn.install import schedule

    if recall_server:
        if print_only:
            for job in schedule.recall_server_jobs(kind or _printable_kind(schedule)):
                click.echo(f"# {job.path}\n{job.content}")
        elif remove:
            kinds = [kind] if kind else schedule.installed_recall_server()
            click.echo(
                "\n".join(schedule.remove_recall_server(k) for k in kinds)
                or "no recall server service installed: nothing to remove"
            )
        else:
            click.echo(schedule.install_recall_server(kind or schedule.default_kind()))
    if remove and not print_only:
        click.echo(schedule.remove_job(kind))
        return
    if print_only:
        kind = kind or _printable_kind(schedule)
        seconds = schedule.parse_every(every, kind)
        if kind == "cron":
            click.echo(schedule.cron_line(seconds))
        else:
            for job in schedule.systemd_job(seconds) if kind == "systemd" else schedule.launchd_job(seconds):
                click.echo(f"# {job.path}\n{job.content}")
        return
    kind = kind or schedule.default_kind()
    seconds = schedule.parse_every(every, kind)
    click.echo(schedule.install_job(kind, seconds))


def _printable_kind(schedule) -> str:
    """--print without a flag: the scheduler that works here, else the crontab line (text to adapt)."""
    from kirolearn.core.errors import ScheduleError

    try:
        return schedule.default_kind()
    except ScheduleError:
        return "cron"


@cli.command(name="scan")
@click.argument("source", type=click.File("r", encoding="utf-8", errors="replace"), default="-")
@json_option
def scan_command(source, json_):
    """Show what the scrubber would redact in FILE (or stdin), by type.

    Check your own secrets before trusting kirolearn with them. Prints the count
    per redaction type and each redacted line (the secrets themselves are never
    printed). Line numbers are those of the scrubbed text.

    
    Examples:
        kirolearn scan .env
        env | kirolearn scan --json
    """
    from kirolearn.privacy.rescrub import scan

    result = scan(source.read(), _scrubber())
    if json_:
        click.echo(json.dumps({k: v for k, v in result.items() if k != "scrubbed"}, indent=2, sort_keys=True))
        return
    click.echo(f"{result['total']} redaction(s) with scrub rules v{result['rules_version']}")
    for kind, n in result["by_type"].items():
        click.echo(f"  {n:>4}  {kind}")
    lines = result["scrubbed"].splitlines()
    for number in sorted({f["line"] for f in result["findings"]}):
        click.echo(f"{number:>5}: {lines[number - 1]}")


@cli.command(name="rescrub")
@json_option
def rescrub_command(json_):
    """Re-apply today's scrubbing rules to everything already stored and logged.

    Run it after an upgrade that brings new rules (`status` and `drain` say so).
    Scrubs every stored event, record, summary and run, rebuilds the full-text
    index, scrubs the log files, then checkpoints the WAL and vacuums so the old
    bytes leave the database files. Safe to interrupt and re-run.
    """
    from kirolearn.privacy.rescrub import rescrub, rescrub_logs, rules_version

    store = existing_store()
    if store is None:  # nothing stored yet: only the logs can hold old text
        scrubber = _scrubber()
        logs = rescrub_logs(scrubber)
        if json_:
            click.echo(
                json.dumps(
                    {
                        "rules_version": rules_version(),
                        "resumed": False,
                        "rows_changed": {},
                        "redactions": dict(scrubber.counts),
                        "fts_rebuilt": [],
                        "log_lines_changed": logs,
                        "checkpoint_complete": True,
                        "bytes_before": 0,
                        "bytes_after": 0,
                    },
                    indent=2,
                    sort_keys=True,
                )
            )
            return
        click.echo(
            "Nothing to rescrub: there is no database yet"
            + (f"; log lines changed: {sum(logs.values())}" if logs else "")
            + "."
        )
        return
    result = rescrub(store, _scrubber())
    if json_:
        click.echo(json.dumps(result, indent=2, sort_keys=True))
        return
    rows = result["rows_changed"]
    click.echo(
        f"rescrub with rules v{result['rules_version']}{' (resumed)' if result['resumed'] else ''}: "
        f"{sum(rows.values())} rows changed"
        + (f" ({', '.join(f'{t}: {n}' for t, n in sorted(rows.items()))})" if rows else "")
    )
    if result["redactions"]:
        click.echo("redacted: " + ", ".join(f"{n} {k}" for k, n in sorted(result["redactions"].items())))
    logs = result["log_lines_changed"]
    click.echo(
        f"log lines changed: {sum(logs.values())}"
        + (f" ({', '.join(f'{p}: {n}' for p, n in sorted(logs.items()))})" if logs else "")
    )
    click.echo(
        f"database: {result['bytes_before']:,} -> {result['bytes_after']:,} bytes (checkpointed and vacuumed)"
    )
    if not result["checkpoint_complete"]:
        click.echo(
            "kirolearn: another process still reads the database, so the WAL could not be emptied; "
            "stop `kirolearn drain --watch` and the MCP server, then run `kirolearn rescrub` again",
            err=True,
        )


@cli.group(name="config", context_settings=CONTEXT_SETTINGS)
def config_group():
    """Inspect kirolearn's settings ($KIROLEARN_HOME/config.toml and KIROLEARN_* variables)."""


@config_group.command(name="show")
@json_option
def config_show(json_):
    """Print every effective setting and where it came from (default, file or environment)."""
    from kirolearn.settings import effective

    rows = effective()
    if json_:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        click.echo(f"{row['key']} = {json.dumps(row['value'])}    # {row['source']}")


@cli.command(name="reindex")
@click.option(
    "--all", "everything", is_flag=True, help="Re-embed every record, not only those without a vector."
)
@json_option
def reindex_command(everything, json_):
    """(Re)compute what semantic recall needs: session-neighbour text and record vectors.

    Run it after changing embeddings.model; the drainer keeps both current otherwise.
    """
    store = existing_store()
    if store is None:
        if json_:
            click.echo(
                json.dumps({"model": None, "embedded": 0, "dropped": 0, "expanded": 0}, sort_keys=True)
            )
        else:
            click.echo("Nothing to reindex: there is no database yet (`kirolearn drain` creates it).")
        return
    result = reindex_with_bar(store, _load_settings(), everything=everything, bar=not json_)
    if json_:
        click.echo(json.dumps(result, sort_keys=True))
    elif result["model"] is None:
        click.echo(f"Embeddings are off; rebuilt neighbour text of {result['expanded']} records.")
    else:
        click.echo(
            f"Embedded {result['embedded']} records with {result['model']}; "
            f"rebuilt neighbour text of {result['expanded']}."
        )


@cli.command(name="repair")
@click.option("--force", is_flag=True, help="Rebuild even when quick_check finds nothing wrong.")
@json_option
def repair_command(force, json_):
    """Rebuild a damaged or lost database: back it up, recover what SQLite can, re-ingest the spool.

    The damaged file (and its -wal/-shm) is copied to $KIROLEARN_HOME/backups/
    first. Rows are recovered with the `sqlite3` command's `.recover` when it
    is installed, else row by row through Python's sqlite3; the report says
    which. Holds the drain lock while it works.
    """
    from kirolearn.pipeline import drain, repair

    settings = _load_settings()
    held = drain.lock(wait=settings.drain.lock_wait_seconds)
    try:
        report = repair.repair(settings, force=force)
    finally:
        held.release()
    if json_:
        click.echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
        if report.nothing_saved:
            raise SystemExit(1)
        return
    if not report.rebuilt:
        click.echo(f"nothing to repair: {report.detail}")
        return
    click.echo(f"database was {report.state_before}: {report.detail}")
    for path in report.backups:
        click.echo(f"backed up: {path}")
    if report.header_rebuilt:
        click.echo(f"file header: not SQLite's; rebuilt from the pages (page size {report.page_size})")
    recovered = ", ".join(f"{n} {table}" for table, n in sorted(report.recovered.items()))
    if report.method == repair.NO_CONTENT_METHOD:
        click.echo("recovered: nothing (the database file was missing or empty)")
    else:
        click.echo(f"recovered with {report.method}: {recovered or 'nothing'}")
    if report.unreadable_tables:
        click.echo(f"unreadable: {', '.join(report.unreadable_tables)}")
    if report.held_before:
        click.echo(
            f"held at the last drain: {report.held_before.get('events', 0)} events, "
            f"{report.held_before.get('records', 0)} records"
        )
    if report.lost_events or report.lost_records:
        click.echo(
            f"not recoverable: {report.lost_events} events and {report.lost_records} records of those "
            f"held at the last drain (the backups above keep the damaged file)"
        )
    click.echo(
        f"re-ingested from the spool: {report.reingested} events ({report.already_stored} already recovered, "
        f"{report.quarantined} quarantined; {report.requeued} of them kept in spool/done/ after an earlier drain)"
    )
    click.echo(f"database now: {report.events} events, {report.records} records")
    if report.nothing_saved:
        from kirolearn.core.errors import KirolearnError

        raise KirolearnError(
            "repair saved nothing: the database is rebuilt empty and nothing it held could be read",
            "keep the backups above; the spool still feeds new events to the empty database",
        )


@cli.command(name="doctor")
@json_option
def doctor_command(json_):
    """Check the installation and say what to fix; exit 1 when something is wrong.

    Runs SQLite's quick_check on the database, checks that a drain job is
    installed and has run recently, and shows the last drain's error.
    """
    from kirolearn.doctor import run_checks

    checks = [{"level": level, "message": message} for level, message in run_checks()]
    problems = sum(c["level"] == "FAIL" for c in checks)
    if json_:
        click.echo(json.dumps({"ok": not problems, "checks": checks}, indent=2))
    else:
        for c in checks:
            click.echo(f"{c['level']:<5} {c['message']}")
    if problems:
        raise SystemExit(1)


@cli.command(name="migrate")
@click.option(
    "--grant",
    "grant",
    multiple=True,
    metavar="ROLE",
    help="Also let this PostgreSQL role (a developer, or a group role) read and write the team store's "
    "tables (repeatable).",
)
@json_option
def migrate_command(grant, json_):
    """Apply the configured store's schema and say what was applied.

    The store is the team store `[store] url` (or KIROLEARN_STORE_URL) names, else this
    home's SQLite file. A team store is migrated only by this command, run by a role
    that may create tables on the server.
    """
    from kirolearn.team import migrate

    result = migrate.migrate(_load_settings(), grant=grant)
    if json_:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(migrate.describe(result))


# registers list, show, forget, restore, edit, import, serve
from kirolearn.cli import manage as cli_manage  # noqa: E402,F401

# registers model install, status, and serve-recall
from kirolearn.cli import model as cli_model  # noqa: E402,F401

# registers team join, leave, status
from kirolearn.cli import team as cli_team  # noqa: E402,F401
