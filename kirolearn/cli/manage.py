"""`kirolearn list | show | forget | restore | edit | import | serve`: thin click commands over kirolearn.manage.records.

Registered on the `kirolearn` group by kirolearn.cli.commands (imported at its end).
Memory text printed on a terminal goes through `manage.terminal` (no escape
sequences); `--json` output is the re-scrubbed data itself.
"""

import json
import os
import sys

import click

from kirolearn.cli.common import (
    cli,
    existing_store,
    json_option,
    project_root_of,
    project_where,
    say_if_no_database,
    since_option,
)
from kirolearn.core.marks import OUTCOMES
from kirolearn.core.observation_types import OBSERVATION_TYPES, kind_label


def filter_options(func):
    """The filters `list` and `search` share."""
    for option in reversed(
        [
            click.option(
                "--project",
                type=click.Path(file_okay=False, exists=True),
                help="Project directory (default: the current one).",
            ),
            click.option("--all-projects", is_flag=True, help="Every project."),
            click.option(
                "--type",
                "types",
                multiple=True,
                type=click.Choice(OBSERVATION_TYPES),
                help="Only records of this observation type (repeatable).",
            ),
            click.option(
                "--since",
                callback=lambda c, p, v: since_option(v),
                help="Only records since an age (7d, 12h, 30m, 2w) or a date (2026-11-01).",
            ),
            click.option("--session", "session_id", help="Only records of this session id."),
            click.option(
                "--file", help="Only records that touched this file (a path, or its tail such as src/app.py)."
            ),
        ]
    ):
        func = option(func)
    return func


def _scope(project, all_projects):
    if project and all_projects:
        raise click.UsageError("--project and --all-projects cannot be combined")
    return None if all_projects else project_root_of(project)


def _refuse_lost() -> None:
    """A lost database (the marker says it existed) is StoreLost here too, as in drain, status and export."""
    from kirolearn.store.backends import refuse_lost

    refuse_lost()


def _no_database(record_id: str):
    from kirolearn.manage.records import NotFound

    return NotFound(f"no record {record_id!r}: there is no database yet (`kirolearn drain` creates it)")


def _echo_json(value):
    # same shape; every string sanitised (memory is untrusted)
    from kirolearn.manage.records import for_json

    click.echo(json.dumps(for_json(value), ensure_ascii=False, indent=2))


def _line(record, *, with_project=False) -> str:
    from kirolearn.core import marks
    from kirolearn.manage.records import terminal

    when = (record.get("created_at") or "")[:16].replace("T", " ")
    kind = kind_label(record["observation_type"], record.get("strategy"))
    text = f"{record['record_id']}  {when}  [{kind}] {' '.join(record['title'].split())}"
    notes = [
        f"{label} {record[mark]}"
        for mark, label in (("superseded_by", "superseded by"), ("merged_into", "merged into"))
        if record.get(mark)
    ]
    notes += marks.labels(record.get("freshness"), record.get("outcome"))
    # the marks `show` carries: a marked record does not read as current
    if notes:
        text += f"  ({'; '.join(notes)})"
    if with_project:
        text += f"  · {record['project_root']}"
    return terminal(text)


@cli.command(name="list")
@filter_options
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(1, 10_000),
    default=20,
    show_default=True,
    help="Most records to show.",
)
@click.option("--forgotten", is_flag=True, help="List forgotten records (restorable until purged) instead.")
@json_option
def list_command(project, all_projects, types, since, session_id, file, limit, forgotten, json_):
    """List memory records, newest first.

    \b
    Examples:
        kirolearn list --since 7d
        kirolearn list --type decision --file src/app.py --json
        kirolearn list --all-projects --session 5f0c… --limit 100
        kirolearn list --forgotten
    """
    from kirolearn.manage import records as manage

    root = _scope(project, all_projects)
    if forgotten and (types or since or session_id or file):
        raise click.UsageError(
            "--forgotten lists tombstones by project only: drop --type, --since, --session, --file"
        )
    store = existing_store()  # None on a fresh home; StoreLost when it was lost
    if store is None:
        say_if_no_database()
    if forgotten:
        rows = (
            manage.clean(store.list_forgotten(project_id=manage.project_id_of(root), limit=limit))
            if store is not None
            else []
        )
        if json_:
            _echo_json(rows)
            return
        for row in rows:
            title = row["record"]["title"] if row["record"] else "(purged)"
            reason = f" ({row['reason']})" if row["reason"] else ""
            click.echo(
                manage.terminal(
                    f"{row['record_id']}  forgotten {row['forgotten_at'][:16].replace('T', ' ')} "
                    f"by {row['actor']}{reason}: {' '.join(title.split())}"
                )
            )
        if not rows:
            click.echo(
                f"No forgotten records in {'any project' if all_projects else project_where(project)}.",
                err=True,
            )
        return
    rows = (
        manage.list_records(
            project_root=root,
            types=types,
            since=since,
            session_id=session_id,
            file=file,
            limit=limit,
            store=store,
        )
        if store is not None
        else []
    )
    if json_:
        _echo_json(rows)
        return
    for row in rows:
        click.echo(_line(row, with_project=all_projects))
    if not rows:
        click.echo(
            f"No memory records in {'any project' if all_projects else project_where(project)} match.",
            err=True,
        )


def _claim_line(claim: dict) -> str:
    """One claim and this machine's check of it: `config/app.toml [production] LOG_LEVEL = WARNING: changed,
    now ERROR (by mr_…)`."""
    scope, _, name = (claim.get("key") or "").rpartition(".")
    if claim.get("kind") == "lines":
        what = f"{claim['file']}: {len(claim.get('lines') or [])} lines written"
    elif claim.get("kind") == "symbol":
        what = f"{claim['file']}: {claim['key']}"
    else:
        where = f" [{scope}]" if scope and claim.get("kind") == "setting" else ""
        what = f"{claim['file']}{where} {name if where else claim.get('key')} = {claim.get('shown')}"
    state = claim.get("state") or "current"
    if state != "current":
        what += f": {state}" + (f", now {claim['now']}" if claim.get("now") else "")
        what += f" (by {claim['by_record']})" if claim.get("by_record") else ""
    if claim.get("path") and claim["path"] != claim["file"]:
        what += f" (now at {claim['path']})"
    return what


@cli.command(name="show")
@click.argument("record_id", metavar="ID")
@json_option
def show_command(record_id, json_):
    """Show one record with its provenance: source events, extraction run, redactions, session, history."""
    from kirolearn.manage import records as manage

    # StoreLost when it was lost, not "there is no database yet"
    store = existing_store()
    if store is None:
        raise _no_database(record_id)
    found = manage.show(record_id, store=store)
    record_id = found["record_id"]  # the full id of a unique prefix
    if json_:
        _echo_json(found)
        return
    t = manage.terminal
    rec = found["record"]
    if rec is None:
        f = found["forgotten"]
        click.echo(
            t(f"{record_id}: forgotten {f['forgotten_at']} and purged {f['purged_at']}: its text is gone")
        )
        return
    status = (
        ""
        if found["status"] == "live"
        else (
            f"  ** forgotten {found['forgotten']['forgotten_at']} by {found['forgotten']['actor']}"
            + (f": {found['forgotten']['reason']}" if found["forgotten"]["reason"] else "")
            + f" (kirolearn restore {record_id}) **"
        )
    )
    click.echo(
        t(
            f"{rec['record_id']}  [{kind_label(rec['observation_type'], rec.get('strategy'))}] {' '.join(rec['title'].split())}{status}"
        )
    )
    click.echo(
        t(
            f"project {rec['project_root']} · session {rec['session_id']} · {rec['created_at']} · "
            f"strategy {rec['strategy']}"
        )
    )
    if rec.get("actor"):
        click.echo(t(f"by {rec['actor']} on {rec.get('host') or '?'} with {rec.get('agent') or '?'}"))
    marks = found.get("marks") or {}
    if marks.get("superseded_by"):
        click.echo(t(f"superseded by {marks['superseded_by']} (kirolearn restore {record_id} undoes it)"))
    if marks.get("merged_into"):
        click.echo(t(f"merged into {marks['merged_into']} (kirolearn restore {record_id} brings it back)"))
    if marks.get("supersedes"):
        click.echo(t("supersedes " + ", ".join(marks["supersedes"])))
    if marks.get("merged_from"):
        click.echo(t("merged from " + ", ".join(marks["merged_from"])))
    for rule, at in sorted((rec.get("pinned") or {}).items()):
        click.echo(t(f"pinned against {rule} since {at} (a restore: that rule never marks it again)"))
    if rec.get("cites"):
        click.echo(t("cites " + ", ".join(rec["cites"]) + " (it repeats them: their marks are its marks)"))
    for claim in found.get("claims") or ():
        click.echo(t("claim: " + _claim_line(claim)))
    if not found.get("claims") and found.get("status") == "live":
        click.echo("claims: none (it wrote no file: talk, a question or a plan; nothing here can go stale)")
    click.echo("")
    from kirolearn.privacy.sanitize import quote

    click.echo(
        quote(t(rec["summary"]).split("\n"))
    )  # memory text: every line quoted, as in the context block
    for head, key in (("facts", "facts"), ("concepts", "concepts"), ("files", "files_touched")):
        if rec[key]:
            click.echo(t(f"{head}: " + "; ".join(" ".join(str(v).split()) for v in rec[key])))
    click.echo("\nprovenance:")
    run = found["run"]
    if run:
        click.echo(
            t(
                f"  extraction run {run['run_id']}: {run['extractor']}"
                + (f" ({run['model']})" if run["model"] else "")
                + f", {run['prompt_tokens']}+{run['completion_tokens']} tokens, ${run['cost_usd'] or 0:.4f}, "
                f"reason {run['reason']}, {run['started_at']}"
                + (f", fallback: {run['fallback_reason']}" if run["fallback_reason"] else "")
            )
        )
    else:
        click.echo(
            t(f"  extraction run: {rec.get('run_id') or 'none'} (written directly, or not in this store)")
        )
    click.echo(
        f"  source events: {len(found['events'])} stored"
        + (
            f", {found['missing_events']} not in the store (expired, or the record was written directly)"
            if found.get("missing_events")
            else ""
        )
    )
    for event in found["events"]:
        click.echo(t("    " + manage.event_line(event)))
    red = found["redactions"]
    for where in ("record", "events"):
        if red[where]:
            click.echo(
                f"  redactions in the {where}: " + ", ".join(f"{n} {k}" for k, n in red[where].items())
            )
    s = found["session"]
    click.echo(
        t(
            f"  session {s['session_id']}: {s['events']} events, {s['records']} records, "
            f"{s['first_at'] or '?'} → {s['last_at'] or '?'}"
        )
    )
    for summary in s["session_summaries"]:
        click.echo(t(f"    session_end {summary['ended_at']}: {' '.join(summary['summary'].split())[:200]}"))
        for step in summary["next_steps"]:
            click.echo(t(f"      next: {' '.join(str(step).split())}"))
    if found["history"]:
        click.echo("history:")
        for h in found["history"]:
            extra = f" v{h['version']}" if h["version"] else ""
            why = f": {h['reason']}" if h["reason"] else ""
            click.echo(t(f"  {h['at']} {h['action']}{extra} by {h['actor']}{why}"))


def _confirm(question: str, yes: bool) -> bool:
    if yes:
        return True
    if sys.stdin.isatty() and sys.stdout.isatty():
        return click.confirm(question, default=False)
    return False


@cli.command(name="forget")
@click.argument("record_ids", nargs=-1)
@click.option("--session", "session_id", help="Forget every record of this session.")
@click.option("--query", help="Forget the records a search for this text finds (at most --limit).")
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True),
    help="Project of --session / --query (default: the current one).",
)
@click.option("--all-projects", is_flag=True, help="--session / --query over every project.")
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(1, 1000),
    default=100,
    show_default=True,
    help="Most records --query forgets.",
)
@click.option("--reason", default="", help="Why (kept in the audit trail).")
@click.option(
    "--purge",
    is_flag=True,
    help="Also remove the bytes for good: of these records, or with no others named, "
    "of every forgotten record and the old text of edits.",
)
@click.option(
    "--yes", "-y", is_flag=True, help="Do not ask (needed for --session, --query and --purge off a terminal)."
)
@json_option
def forget_command(record_ids, session_id, query, project, all_projects, limit, reason, purge, yes, json_):
    """Forget records: gone from recall and search at once, never recreated by a drain.

    A forgotten record is kept, for `kirolearn restore ID`, until `kirolearn forget
    --purge` or the retention period (retention.forgotten_days) removes its bytes.

    \b
    Examples:
        kirolearn forget mr_01J… --reason "wrong: the port is 5433"
        kirolearn forget --session 5f0c… --yes
        kirolearn forget --query "staging password" --yes
        kirolearn forget --purge --yes        # erase every forgotten record for good
    """
    from kirolearn.manage import records as manage

    if not (record_ids or session_id or query or purge):
        raise click.UsageError("name records to forget: IDs, --session ID or --query TEXT (or --purge)")
    root = _scope(project, all_projects) if (session_id or query) else None
    store = existing_store()  # StoreLost when it was lost
    if store is None and record_ids:  # an id that is not there is an error
        raise _no_database(record_ids[0])
    # unique prefixes
    record_ids = manage.resolve_ids(record_ids, store) if store is not None else record_ids
    targets = (
        manage.resolve_targets(
            record_ids=record_ids,
            session_id=session_id,
            query=query,
            project_root=root,
            limit=limit,
            store=store,
        )
        if store is not None
        else []
    )
    if (session_id or query) and targets and not _confirm(f"forget {len(targets)} record(s)?", yes):
        for record in targets:
            click.echo(_line(record), err=True)
        raise click.UsageError(
            f"--session / --query match {len(targets)} record(s); add --yes to forget them "
            "(nothing was forgotten)"
        )
    if purge and not _confirm("purge for good (no restore possible)?", yes):
        raise click.UsageError("--purge cannot be undone: add --yes (nothing was changed)")
    forgotten = (
        manage.forget([r["record_id"] for r in targets], reason=reason, actor="cli", store=store)
        if targets
        else []
    )
    out = {"forgotten": [r["record_id"] for r in forgotten]}
    if purge:
        named = list(record_ids) + out["forgotten"] if (record_ids or session_id or query) else None
        out.update(manage.purge(named, actor="cli"))
    if json_:
        _echo_json(out)
        return
    for record in forgotten:
        click.echo(f"forgot   {_line(record)}")
    if purge:
        click.echo(
            f"purged {out['purged']} record(s) for good ({out['events_deleted']} source events deleted"
            + (
                f", {out['edit_versions_cleared']} old edit versions cleared"
                if out.get("edit_versions_cleared")
                else ""
            )
            + ")"
        )
        if out["wal_checkpoint"] and out["wal_checkpoint"]["busy"]:
            click.echo(
                "warning: another process held the database: its write-ahead log is truncated on its "
                "next checkpoint",
                err=True,
            )
    elif forgotten:
        click.echo(f"undo with: kirolearn restore {' '.join(out['forgotten'])}", err=True)
    elif not purge:
        click.echo("nothing to forget (already forgotten, or no match)", err=True)


@cli.command(name="restore")
@click.argument("record_ids", nargs=-1, required=True)
@json_option
def restore_command(record_ids, json_):
    """Bring forgotten records back into recall (until they are purged), or clear a record's superseded or
    merged mark (docs/memory-marks.md)."""
    from kirolearn.manage import records as manage

    _refuse_lost()
    restored = manage.restore(list(record_ids), actor="cli")
    if json_:
        _echo_json({"restored": [r["record_id"] for r in restored]})
        return
    for record in restored:
        click.echo(f"restored {_line(record)}")


@cli.command(name="consolidate")
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True),
    help="Project directory (default: the current one).",
)
@click.option("--apply", "apply_", is_flag=True, help="Merge each group (default: only show them).")
@json_option
def consolidate_command(project, apply_, json_):
    """Show groups of near-duplicate records of a project (the same chore done again); --apply merges them.

    A merge keeps one live record per group, the newest, with every source event and the union of the
    group's facts and files; the others are marked merged into it (hidden from recall, never deleted:
    `kirolearn restore ID` brings one back). Without --apply nothing changes.
    """
    from kirolearn.manage.consolidate import consolidate

    _refuse_lost()
    found = consolidate(project_root=project_root_of(project), apply=apply_, actor="cli")
    if json_:
        _echo_json(found)
        return
    if not found["groups"]:
        click.echo("no near-duplicate records in this project")
        return
    from kirolearn.manage.records import terminal as t

    for group in found["groups"]:
        click.echo(
            t(
                f"{'merged' if apply_ else 'would merge'} {', '.join(i for i in group['record_ids'] if i != group['into'])}"
                f" into {group['into']} ({group['why']})"
            )
        )
    if not apply_:
        click.echo(f"{len(found['groups'])} group(s); run `kirolearn consolidate --apply` to merge them")


@cli.command(name="edit")
@click.argument("record_id")
@click.option("--title", help="The new title (one line, at most 200 characters).")
@click.option("--summary", help="The new summary (at most 4,000 characters).")
@click.option(
    "--outcome", type=click.Choice(OUTCOMES), help="Correct the record's outcome mark (docs/memory-marks.md)."
)
@click.option("--reason", default="", help="Why (kept in the audit trail).")
@json_option
def edit_command(record_id, title, summary, outcome, reason, json_):
    """Correct a record's title, summary or outcome; with none of them, open it in $EDITOR (on a terminal).

    The text is scrubbed and re-indexed; the old version is kept in the audit trail.
    """
    from kirolearn.manage import records as manage

    _refuse_lost()
    if title is None and summary is None and outcome is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise click.UsageError("give --title and/or --summary (or run on a terminal to edit in $EDITOR)")
        current = manage.show(record_id)
        record_id = current["record_id"]  # the full id of a unique prefix
        if current["status"] != "live":
            raise manage.ManageError(
                f"record {record_id!r} is {current['status']}",
                f"`kirolearn restore {record_id}` first" if current["record"] else None,
            )
        edited = click.edit(manage.editor_text(current["record"]), extension=".md", require_save=True)
        if edited is None:
            click.echo("unchanged: nothing saved", err=True)
            return
        title, summary = manage.parse_editor_text(edited)
    record = manage.edit(record_id, title=title, summary=summary, outcome=outcome, reason=reason, actor="cli")
    if json_:
        _echo_json(record)
        return
    click.echo(f"edited   {_line(record)}")


IMPORT_BAR_BYTES = 256 * 1024  # a smaller export imports in a blink: no bar


def _read_with_progress(source, bars):
    """The lines of `source`, with a bar over its bytes when a person watches a big regular file (a pipe
    has no size: no bar)."""
    try:
        size = os.fstat(source.fileno()).st_size if bars is not None else 0
    except (AttributeError, OSError, ValueError):
        size = 0
    update = bars.phase("importing", size) if size >= IMPORT_BAR_BYTES else None
    if update is None:
        yield from source
        return
    done = 0
    for line in source:
        done += len(line.encode("utf-8", "surrogatepass"))
        update(done)
        yield line


@cli.command(name="import")
@click.argument("source", type=click.File("r", encoding="utf-8"))
@json_option
def import_command(source, json_):
    """Restore an export (JSON Lines from `kirolearn export`; '-' reads standard input).

    Idempotent: what is already there is kept as it is. Ids and provenance are
    kept; every text is scrubbed on the way in; forgotten records stay forgotten.
    """
    from kirolearn.cli.progress import for_hand_run
    from kirolearn.manage import records as manage

    bars = for_hand_run()
    try:
        counts = manage.import_lines(_read_with_progress(source, bars))
    finally:
        if bars is not None:
            bars.close()
    if json_:
        click.echo(json.dumps(counts, sort_keys=True))
        return
    parts = [
        f"{kind} {counts[kind]['added']} added, {counts[kind]['present']} already there"
        for kind in ("events", "records", "summaries")
    ]
    gone = counts.get("forgotten", {})
    click.echo(
        "imported: "
        + "; ".join(parts)
        + (f"; forgotten records {gone['added']} added (still forgotten)" if gone.get("added") else "")
        + (f"; {counts['forgotten_skipped']} forgotten (skipped)" if counts["forgotten_skipped"] else "")
    )
    if counts["redactions"]:
        click.echo("redacted: " + ", ".join(f"{n} {k}" for k, n in counts["redactions"].items()))


@cli.command(name="serve")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, help="Port on 127.0.0.1 (default: any free one)."
)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
def serve_command(port, open_browser):
    """Serve the memory viewer on 127.0.0.1, behind a random per-run token in its URL.

    Timeline, search, record detail with forget / edit / restore, session
    summaries and health. Stops with Ctrl-C.
    """
    from kirolearn.viewer.server import serve

    serve(
        port=port,
        open_browser=open_browser,
        announce=lambda url: click.echo(f"kirolearn viewer: {url}\n(Ctrl-C to stop)", err=True),
    )
