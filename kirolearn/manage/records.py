"""Managing memory by hand: list, show, forget, restore, edit, purge and import.

The CLI, the MCP server and the web viewer all call these functions, so a
forget from any of them is the same tombstone and the same audit row. Memory
is untrusted text (architecture.md rule 9): everything returned for display is
re-scrubbed here; each medium escapes it for itself (`terminal()` for a
terminal, Jinja2's autoescape for HTML, JSON for JSON). SQL lives in
Store (kirolearn.store.base).
"""

import json
import os
import re
import threading
from collections import Counter
from datetime import datetime

from kirolearn.core import isotime, paths
from kirolearn.core.errors import KirolearnError
from kirolearn.store import backends
from kirolearn.store.base import LINK_MARKS, Store, start_of_day
from kirolearn.store.record import FORGET_REASON_MAX, OBSERVATION_TYPES, SUMMARY_MAX, TITLE_MAX, clip

ACTORS = ("cli", "mcp", "viewer", "retention")
DEFAULT_FORGOTTEN_DAYS = 30
_MARKER = re.compile(r"\[REDACTED:([A-Za-z0-9_\-]{1,40})\]")
# Controls but tab and newline, and the bidi overrides that reorder a terminal
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class ManageError(KirolearnError, ValueError):
    """A record to manage is missing, or a request to manage one is invalid."""


class NotFound(ManageError):
    """No record (live or forgotten) has this id."""

    default_fix = "`kirolearn list` shows live records, `kirolearn list --forgotten` forgotten ones"


# Helpers shared by every medium


_CACHE: dict = {}
_CLEAN_CACHE_SIZE = 4096
_LOCK = threading.Lock()  # the viewer serves requests from a thread pool


def scrubber(fresh: bool = False):
    """The scrubber with the user's extra patterns and allow-list (settings errors surface as they are).

    One per config.toml version, so the viewer does not load settings and
    compile patterns on every request; `fresh` gives a new one (its counts start at zero).
    """
    from kirolearn.privacy.scrub import Scrubber
    from kirolearn.settings import load, settings_path

    try:
        stamp = os.stat(settings_path()).st_mtime_ns
    except OSError:
        stamp = None
    key = (settings_path(), stamp)
    if fresh:
        conf = load()
        return Scrubber(conf.scrub.extra_patterns, conf.scrub.allow)
    with _LOCK:
        if _CACHE.get("key") != key:
            conf = load()
            made = Scrubber(conf.scrub.extra_patterns, conf.scrub.allow)
            _CACHE.clear()
            _CACHE.update(key=key, scrubber=made, rows={})
        return _CACHE["scrubber"]


def clean(value, scrub=None):
    """Re-scrub any JSON-like value on its way to a person or an agent.

    A list is cleaned item by item, and each item's result is remembered (by its
    JSON text) for the life of the current settings: paging back and forth in
    the viewer scrubs each record once.
    """
    scrub = scrub or scrubber()
    with _LOCK:
        if not isinstance(value, list) or scrub is not _CACHE.get("scrubber"):
            return scrub.scrub_value(value)
        memo = _CACHE["rows"]
        out = []
        for item in value:
            key = json.dumps(item, ensure_ascii=False, sort_keys=True, default=str)
            found = memo.get(key)
            if found is None:
                found = scrub.scrub_value(item)
                if len(memo) >= _CLEAN_CACHE_SIZE:
                    memo.pop(next(iter(memo)))
                memo[key] = found
            out.append(found)
    return json.loads(json.dumps(out, ensure_ascii=False, default=str)) if out else out


def terminal(text) -> str:
    """Text safe to print on a terminal: control, bidi and invisible characters shown as \\xNN / \\uNNNN,
    and each line that could pass for a marker quoted (kirolearn.privacy.sanitize.visible)."""
    from kirolearn.privacy.sanitize import clean_text, is_plain, visible

    text = str(text)
    if not is_plain(text):
        # Removing invisible characters may reveal a secret: re-scrub.
        cleaned = clean_text(text)
        scrubbed = scrubber().scrub_text(cleaned)
        if scrubbed != cleaned:
            return visible(scrubbed)
    return visible(text)


def for_json(value, scrub=None):
    """A value for `--json` output: same shape, every string sanitised (kirolearn.privacy.sanitize) and
    re-scrubbed after that (a secret split by an invisible character is whole once it is removed)."""
    from kirolearn.privacy.sanitize import outbound_value

    return outbound_value(value, scrub or scrubber())


def parse_since(text: "str | None", now: "datetime | None" = None) -> "str | None":
    """'7d', '12h', '30m', '2w', '90s', a date (YYYY-MM-DD, UTC midnight) or an ISO time → store timestamp."""
    if text is None or not str(text).strip():
        return None
    try:
        # a leaf: kirolearn.cli.fast reads --since without this module
        return isotime.since(str(text), now)
    except ValueError as exc:
        why = f" ({exc})" if "reaches back" in str(exc) else ""
        raise ManageError(
            f"cannot read --since {text!r}{why}",
            "give an age such as 7d, 12h, 30m, 2w or a date such as 2026-11-01",
        ) from None


# the store, None on a fresh home, StoreLost when it was lost
open_existing = backends.open_existing


def writable() -> Store:
    """The store to change, or a ManageError saying there is none yet."""
    store = open_existing()
    if store is None:
        raise ManageError(f"no database at {paths.db_path()}", "run `kirolearn drain` first")
    return store


def project_id_of(root: "str | None") -> "str | None":
    """The project id of a project root (None for all projects)."""
    from kirolearn.core.project import project_id

    return project_id(root) if root else None


# List and search


def list_records(
    *,
    project_root=None,
    types=None,
    since=None,
    session_id=None,
    file=None,
    limit=20,
    before=None,
    store=None,
) -> "list[dict]":
    """Live records newest first with the shared filters; `before` = 'created_at|record_id' from the last page."""
    store = store or open_existing()
    if store is None:
        return []
    key = tuple(before.split("|", 1)) if before else None
    rows = store.list_records(
        limit=limit,
        before=key,
        project_id=project_id_of(project_root),
        types=list(types or ()) or None,
        since=since,
        session_id=session_id,
        file=file,
    )
    return clean(rows)


def search(
    query: str, *, project_root=None, types=None, since=None, session_id=None, file=None, limit: int = 10
) -> "list[dict]":
    """The ranking of `kirolearn search` (kirolearn.recall.semantic.search: words and vectors, the words
    alone when no vectors can take part) with the shared filters; hits as dicts, re-scrubbed."""
    from kirolearn.recall import semantic

    reading = backends.open_reading(budget=5.0)
    try:
        hits = semantic.search(
            reading,
            query,
            project_id=project_id_of(project_root),
            types=list(types or ()) or None,
            limit=limit,
            since=since,
            session_id=session_id,
            file=file,
        )
    finally:
        if reading is not None:
            reading.close()
    return clean([h.to_dict() for h in hits])


# The viewer's pages: projects, timelines, session summaries, tombstones


def projects(store=None) -> "list[dict]":
    """Every project with records (id, root, record count, newest record time), newest first."""
    store = store or open_existing()
    return clean(store.projects()) if store else []


def _brief(record: dict) -> dict:
    """What a timeline row shows (scrubbing the rest would be wasted work): turn summaries in full."""
    keep = ("record_id", "session_id", "title", "observation_type", "strategy", "created_at", "project_root")
    row = {k: record[k] for k in keep}
    for mark in ("freshness", "outcome", "superseded_by"):  # the card's labels
        row[mark] = record.get(mark)
    # a turn summary in full; a conversation's card shows its outcome
    row["summary"] = (
        record["summary"] if record["observation_type"] in ("session_summary", "conversation") else ""
    )
    return row


def timeline(project_id: str, *, session_id=None, before=None, limit: int = 50, store=None) -> "list[dict]":
    """A project's live records newest first, as timeline rows (`_brief`).

    `before` = (created_at, record_id) of the last row shown.
    """
    store = store or open_existing()
    if store is None:
        return []
    rows = store.list_records(limit=limit, before=before, project_id=project_id, session_id=session_id)
    return clean([_brief(r) for r in rows])


def session_labels(store: Store, project_id: str, session_ids: "list[str]") -> dict:
    """Each session's label (its first prompt and date), by session id, for the viewer."""
    return clean(store.session_labels(project_id, session_ids))


def session_summaries(*, project_id=None, limit: int = 20, before=None, store=None) -> "list[dict]":
    """session_end summaries newest first; `before` = (ended_at, id) of the last one shown."""
    store = store or open_existing()
    if store is None:
        return []
    return clean(store.list_session_summaries(project_id=project_id, limit=limit, before=before))


def forgotten(*, limit: int = 50, before: "str | None" = None, store=None) -> "list[dict]":
    """Tombstones newest first, each with its record while kept; `before` = 'forgotten_at|record_id'."""
    store = store or open_existing()
    if store is None:
        return []
    return clean(store.list_forgotten(limit=limit, before=before))


# Show


def redaction_counts(*values) -> dict:
    """How many [REDACTED:type] markers of each type the values hold."""
    counts: Counter = Counter()
    for value in values:
        counts.update(_MARKER.findall(json.dumps(value, ensure_ascii=False)))
    return dict(sorted(counts.items()))


class AmbiguousId(ManageError):
    """A shortened record id that starts more than one record's id."""

    default_fix = "give more characters of the id"


def resolve_id(record_id: str, store: "Store | None") -> str:
    """The full id of the one record (live or forgotten) whose id is or starts with `record_id`.

    An exact id is returned as it is, and so is a prefix that matches nothing (the
    caller says "no record"); a prefix of several ids is an AmbiguousId naming them.
    """
    record_id = (record_id or "").strip()
    if (
        store is None
        or not record_id
        or store.get_record(record_id) is not None
        or store.get_forgotten(record_id) is not None
    ):
        return record_id
    found = store.record_ids_with_prefix(record_id, limit=6)
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        shown = ", ".join(found[:5]) + (", …" if len(found) > 5 else "")
        raise AmbiguousId(
            f"record id {record_id!r} is the start of {'more than 5' if len(found) > 5 else len(found)} "
            f"records' ids: {shown}"
        )
    return record_id


def resolve_ids(record_ids, store: "Store | None") -> "list[str]":
    """`resolve_id` for each id, keeping their order."""
    return [resolve_id(rid, store) for rid in record_ids]


def show(record_id: str, store=None) -> dict:
    """A record (live, forgotten or purged) with its provenance.

    Source events, extraction run, redaction counts, session, history.
    """
    store = store or open_existing()
    if store is None:
        raise NotFound(f"no record {record_id!r}: there is no database yet")
    record_id = resolve_id(record_id, store)
    record = store.get_record(record_id)
    tomb = None if record else store.get_forgotten(record_id)
    if record is None and tomb is None:
        raise NotFound(f"no record {record_id!r}")
    status = "live"
    if tomb is not None:
        record = tomb["record"]
        status = "forgotten" if record is not None else "purged"
    out = {
        "record_id": record_id,
        "status": status,
        "record": record,
        "events": [],
        "run": None,
        "redactions": {"record": {}, "events": {}},
        "session": None,
        "history": store.audit(record_id),
        "claims": store.claims_of([record_id]).get(record_id, []),
    }
    if tomb is not None:
        out["forgotten"] = {k: tomb[k] for k in ("forgotten_at", "reason", "actor", "purged_at")}
    # the marks both ways: what replaced this record, what it replaced
    out["marks"] = {
        "superseded_by": (record or {}).get("superseded_by"),
        "merged_into": (record or {}).get("merged_into"),
        **store.marked_by(record_id),
    }
    if record is not None:
        events = store.events_by_ids(record["source_event_ids"])
        out["events"] = events
        out["missing_events"] = len(record["source_event_ids"]) - len(events)
        out["run"] = store.run_by_id(record.get("run_id"))
        out["redactions"] = {
            "record": redaction_counts(record),
            "events": redaction_counts([e["body"] for e in events]),
        }
        out["session"] = store.session_info(record["project_id"], record["session_id"])
    return clean(out)


def event_line(event: dict) -> str:
    """One line describing a stored event (for `show` on a terminal and the viewer)."""
    body = event.get("body", {})
    what = body.get("tool_name") or ""
    text = body.get("prompt") or body.get("assistant_response") or ""
    if not text and body.get("tool_input") is not None:
        text = json.dumps(body.get("tool_input"), ensure_ascii=False)
    text = " ".join(str(text).split())
    if len(text) > 100:
        text = text[:99] + "…"
    return " ".join(
        p
        for p in (event.get("received_at", ""), f"{event.get('kind')}/{event.get('trigger')}", what, text)
        if p
    )


# Forget, restore, purge


def resolve_targets(
    *, record_ids=(), session_id=None, query=None, project_root=None, limit=100, store=None
) -> "list[dict]":
    """The live records a forget names: ids, every record of a session, or the search hits of a query."""
    store = store or open_existing()
    if store is None:
        return []
    found = []
    for rid in resolve_ids(record_ids, store):
        record = store.get_record(rid)
        if record is None:
            if store.get_forgotten(rid):
                continue  # already forgotten: forgetting twice is a no-op
            raise NotFound(f"no record {rid!r}")
        found.append(record)
    if session_id:
        found += [
            store.get_record(rid)
            for rid in store.record_ids_of_session(session_id, project_id_of(project_root))
        ]
    if query:
        # Search matches via neighbours too: forget only own matches.
        from kirolearn.recall.lexical import matched, terms

        words = terms(query)
        for hit in search(query, project_root=project_root, limit=limit):
            record = store.get_record(hit["record_id"])
            if record and matched(words, _own_text(record)):
                found.append(record)
    unique = {r["record_id"]: r for r in found if r}
    return clean(list(unique.values()))


def _own_text(record: dict) -> str:
    return " ".join(
        [
            record.get("title") or "",
            record.get("summary") or "",
            *(str(v) for key in ("facts", "concepts", "files_touched") for v in record.get(key) or ()),
        ]
    )


def forget(
    record_ids, *, reason: str = "", actor: str = "cli", project_root=None, store=None
) -> "list[dict]":
    """Soft-forget records: gone from recall at once, kept for `restore` until purged. Returns them."""
    store = store or writable()
    # the MCP server may only forget its own project's records
    if project_root is not None:
        pid = project_id_of(project_root)
        for rid in record_ids:
            record = store.get_record(rid)
            if record is not None and record["project_id"] != pid:
                raise NotFound(f"no record {rid!r} in this project")
            if record is None and not store.get_forgotten(rid):
                raise NotFound(f"no record {rid!r} in this project")
    reason = " ".join(clean(reason or "").split())[:FORGET_REASON_MAX]
    forgotten = store.forget(record_ids, reason=reason, actor=actor)
    _rederive(store, forgotten)
    return clean(forgotten)


def restore(record_ids, *, actor: str = "cli", store=None) -> "list[dict]":
    """Bring forgotten records back into recall; a purged or unknown id is an error."""
    store = store or writable()
    record_ids = resolve_ids(record_ids, store)
    unmarked = []
    for rid in record_ids:
        if store.get_forgotten(rid) is None:
            live = store.get_record(rid)
            if live is not None and (live.get("superseded_by") or live.get("merged_into")):
                # a superseded or merged record: restoring it clears the mark
                unmarked.append(rid)
                continue
            if live is not None:
                raise ManageError(
                    f"record {rid!r} is not forgotten, superseded or merged: nothing to restore"
                )
            raise NotFound(f"no forgotten record {rid!r}")
    done = []
    for rid in unmarked:
        live = store.get_record(rid) or {}
        for mark, rule in zip(LINK_MARKS, ("supersede", "merge")):
            if live.get(mark):  # the rule that marked it never does so again
                store.pin(rid, rule, isotime.now_iso())
            store.set_mark(rid, mark, None, actor=actor, reason="restored")
        done.append(store.get_record(rid))
    record_ids = [rid for rid in record_ids if rid not in unmarked]
    if not record_ids:
        return clean(done)
    restored, purged = store.restore(record_ids, actor=actor)
    restored = done + restored
    _rederive(store, restored)
    if restored:
        _embed_now(store)
    if purged:
        raise ManageError(
            f"record(s) {', '.join(purged)} were purged: their text is gone for good",
            "nothing can restore a purged record"
            + (f" ({len(restored)} other(s) restored)" if restored else ""),
        )
    return clean(restored)


def _rederive(store, records) -> None:
    """Derive again the expansions of the sessions that forget, restore or edit touched, so no old
    text stays searchable (only those sessions: a store with other underived rows waits for the drain)."""
    from kirolearn.recall.semantic import enrich_sessions

    enrich_sessions(store, [(r["project_id"], r["session_id"]) for r in records])


# a restore embeds what it brought back (new records first), not a backfill
RESTORE_EMBED_SECONDS = 5.0


def _embed_now(store) -> None:
    """Give restored records their vectors at once, when the embedding model is on and loads: search
    finds them by meaning, and doctor has no missing vector to report (else the next drain adds them)."""
    from kirolearn.settings import SettingsError, load

    derived = store.derived()
    if derived is None:
        return
    try:
        conf = load()
    except SettingsError:
        return  # the drain reports the config
    if conf.embeddings.model.strip().lower() in ("", "none", "off"):
        return
    from kirolearn.recall import semantic

    # why not: the drain says
    semantic.index_with_settings(derived, conf, seconds=RESTORE_EMBED_SECONDS)


def _source_events(store, record_ids) -> "set[str]":
    """The event ids the kept records of these tombstones cite (their raw copies may wait in spool/done/)."""
    found = set()
    for rid in record_ids:
        kept = (store.get_forgotten(rid) or {}).get("record") or {}
        cited = kept.get("source_event_ids") or []
        if isinstance(cited, str):
            import json

            try:
                cited = json.loads(cited)
            except ValueError:
                cited = []
        found.update(str(e) for e in cited if e)
    return found


def purge(record_ids=None, *, older_than: "str | None" = None, actor: str = "cli", store=None) -> dict:
    """Remove the bytes of forgotten records (all, some, or those forgotten before a time) for good."""
    store = store or writable()
    ids = store.purgeable(record_ids=record_ids, older_than=older_than)
    sources = _source_events(store, ids)
    result = store.purge_report(ids, actor=actor)
    if sources:
        from kirolearn.capture import spool

        # the log's raw copies go too
        result["spool_files_removed"] = spool.drop_done_events(sources)
    if record_ids is None and older_than is None:
        result["edit_versions_cleared"] = store.purge_edit_history()
        if result["edit_versions_cleared"] and not ids:
            result.update(store.compact())
    result["record_ids"] = ids
    return result


# Edit


def edit(
    record_id: str,
    *,
    title: "str | None" = None,
    summary: "str | None" = None,
    actor: str = "cli",
    reason: str = "",
    store=None,
    outcome: "str | None" = None,
) -> dict:
    """Change a record's title and/or summary: scrubbed, versioned in the audit, re-indexed; and/or its
    outcome mark, kept in the audit as a 'mark'."""
    store = store or writable()
    record_id = resolve_id(record_id, store)
    if store.get_record(record_id) is None:
        if store.get_forgotten(record_id):
            raise ManageError(f"record {record_id!r} is forgotten", f"`kirolearn restore {record_id}` first")
        raise NotFound(f"no record {record_id!r}")
    scrub = scrubber()
    changes = {}
    if title is not None:
        text = " ".join(scrub.scrub_text(title).split())
        if not text:
            raise ManageError("the title cannot be empty")
        if len(" ".join(title.split())) > TITLE_MAX:
            raise ManageError(
                f"the title is {len(' '.join(title.split()))} characters; the limit is {TITLE_MAX}"
            )
        changes["title"] = clip(text, TITLE_MAX)
    if summary is not None:
        text = scrub.scrub_text(summary).strip()
        if not text:
            raise ManageError("the summary cannot be empty")
        if len(summary.strip()) > SUMMARY_MAX:
            raise ManageError(f"the summary is {len(summary.strip())} characters; the limit is {SUMMARY_MAX}")
        changes["summary"] = clip(text, SUMMARY_MAX)
    if outcome is not None:
        from kirolearn.core.marks import OUTCOMES

        if outcome not in OUTCOMES:
            raise ManageError(f"unknown outcome {outcome!r}", f"give one of {', '.join(OUTCOMES)}")
        store.set_marks(
            [
                {
                    "record_id": record_id,
                    "outcome": outcome,
                    "reason": scrub.scrub_text(reason or "") or "edited by hand",
                }
            ],
            actor=actor,
        )
        if not changes:
            return clean(store.get_record(record_id))
    if not changes:
        raise ManageError("nothing to change", "give --title, --summary and/or --outcome")
    edited = store.edit(record_id, changes, actor=actor, reason=scrub.scrub_text(reason or ""))
    _rederive(store, [edited] if edited else [])
    return clean(edited)


EDIT_TEMPLATE = """{title}

{summary}
# Edit the record above: the first line is the title, the rest is the summary.
# Lines starting with '#' are ignored. Save an unchanged file to cancel.
# Record {record_id}
"""


def editor_text(record: dict) -> str:
    """What $EDITOR opens for a record."""
    return EDIT_TEMPLATE.format(
        title=record["title"], summary=record["summary"], record_id=record["record_id"]
    )


def parse_editor_text(text: str) -> "tuple[str, str]":
    """(title, summary) from an edited file: first non-empty line, then the rest; '#' lines dropped."""
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        raise ManageError("the edited text is empty: nothing changed")
    return lines[0].strip(), "\n".join(lines[1:]).strip()


# Import


def import_lines(lines, *, store=None) -> dict:
    """Restore an `export` (JSON Lines): idempotent, ids and provenance kept, everything scrubbed on the way in.

    The whole file is checked before anything is written; a bad line is an
    error naming it, and nothing is imported.
    """
    from pydantic import ValidationError

    from kirolearn.capture.events import scrub_event
    from kirolearn.core import dedup
    from kirolearn.pipeline.schema import Event
    from kirolearn.store.base import event_row
    from kirolearn.store.record import MemoryRecord

    scrub = scrubber(fresh=True)  # its counts are this import's redactions
    store = store or backends.open_store()
    record_fields = set(MemoryRecord.model_fields)
    events, records, summaries, forgotten = [], [], [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            kind = item.pop("type")
        except (ValueError, AttributeError, KeyError, TypeError):
            raise ManageError(
                f'line {number} is not an export object (JSON with a "type")',
                "import reads what `kirolearn export` writes",
            ) from None
        try:
            if kind == "event":
                state = item.pop("extract_state", "done")
                run_id = item.pop("extract_run_id", None)
                Event.model_validate(item)
                body = scrub_event(item, scrub)
                # the drain's own row shape
                row = event_row(body, dedup.event_content_hash(body))
                row.update(extract_state=state if state in ("pending", "done") else "done", run_id=run_id)
                events.append({"type": "event", **row})
            elif kind == "record":
                # a forgotten record comes back forgotten
                mark = item.pop("forgotten", None)
                if mark is not None and not (
                    isinstance(mark, dict) and isinstance(mark.get("forgotten_at"), str)
                ):
                    raise ManageError("a record's 'forgotten' must be an object with forgotten_at")
                MemoryRecord.model_validate({k: v for k, v in item.items() if k in record_fields})
                keep = (
                    "record_id",
                    "project_id",
                    "created_at",
                    "record_hash",
                    "run_id",
                    "source_event_ids",
                    "outcome",
                    "freshness",
                    "freshness_checked_at",
                    "superseded_by",
                    "merged_into",
                    "observation_type",
                    "strategy",
                )
                row = {k: v if k in keep else scrub.scrub_value(v) for k, v in item.items()}
                if not row.get("record_hash"):
                    raise ManageError("a record needs its record_hash")
                if mark is not None:
                    forgotten.append(
                        (row, {k: scrub.scrub_value(v) if k == "reason" else v for k, v in mark.items()})
                    )
                else:
                    records.append({"type": "record", **row})
            elif kind == "summary":
                for key in ("id", "session_id", "project", "project_id", "summary", "ended_at"):
                    if not isinstance(item.get(key), str) or not item[key]:
                        raise ManageError(f"a summary needs '{key}'")
                keep = ("id", "project_id", "record_id", "ended_at", "auto_compress", "compressed_used")
                row = {k: v if k in keep else scrub.scrub_value(v) for k, v in item.items()}
                try:  # an older export's "…:11Z" must sort among "…:11.500Z"
                    row["ended_at"] = isotime.normalize(item["ended_at"])
                except ValueError:
                    raise ManageError(
                        f"a summary's ended_at is not an ISO 8601 time: {item['ended_at'][:40]!r}"
                    ) from None
                summaries.append({"type": "summary", **row})
            else:
                raise ManageError(f"unknown type {str(kind)[:40]!r}")
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or kind
            raise ManageError(f"line {number}: not a valid {kind}: {where}: {first['msg']}") from None
        except ManageError as exc:
            if exc.message.startswith("line "):
                raise
            raise ManageError(f"line {number}: {exc.message}", exc.fix) from None
    refuse_mark_cycles(records + [row for row, _ in forgotten])
    counts = store.import_objects(events + records + summaries)
    counts["forgotten"] = store.import_forgotten(forgotten)
    counts["redactions"] = dict(sorted(scrub.counts.items())) if hasattr(scrub, "counts") else {}
    return counts


def refuse_mark_cycles(rows: list[dict]) -> None:
    """ManageError naming the records when an export's merged_into or superseded_by marks point a
    record at itself or go round in a circle: each of them would hide the others from recall for good."""
    for mark, verb in (("merged_into", "merge"), ("superseded_by", "supersede")):
        target = {
            r.get("record_id"): r.get(mark) for r in rows if isinstance(r.get(mark), str) and r.get(mark)
        }
        done: set = set()
        for start in sorted(target):
            path, seen, node = [], set(), start
            while node in target and node not in done and node not in seen:
                seen.add(node)
                path.append(node)
                node = target[node]
            done.update(path)
            if node in seen:
                loop = path[path.index(node) :] + [node]
                what = (
                    f"record {node} is {mark} itself"
                    if len(loop) == 2
                    else f"records {' -> '.join(loop)} form a {verb} cycle ({mark})"
                )
                raise ManageError(
                    f"{what}: importing it would hide them from recall; nothing was imported",
                    f"clear {mark} on one of them in the export file, then import it again",
                )


# Health


def health(store=None) -> dict:
    """What the viewer's health page shows: spool, quarantine, last drain, failures, spend vs limit, counts."""
    from kirolearn.capture import spool
    from kirolearn.settings import load

    conf = load()
    files = spool.ready_files()
    quarantine_dir = os.path.join(spool.root(), spool.QUARANTINE)
    quarantined = (
        len([n for n in os.listdir(quarantine_dir) if not n.endswith(".reason")])
        if os.path.isdir(quarantine_dir)
        else 0
    )
    ex = conf.extract
    out = {
        "spool_ready": len(files),
        "quarantined": quarantined,
        "last_drain": None,
        "extraction_failures_24h": 0,
        "model": ex.model or None,
        "tokens_today": 0,
        "cost_usd_today": 0.0,
        "daily_token_limit": ex.daily_token_limit,
        "daily_cost_limit_usd": ex.daily_cost_limit_usd,
        "limit_reached": "",
        "events": 0,
        "pending_events": 0,
        "records": 0,
        "forgotten": 0,
    }
    store = store or open_existing()
    if store is None:
        return out
    tokens, dollars = store.model_spend(start_of_day())
    found = store.figures(isotime.shift(isotime.now_iso(), -86400), projects=False)
    out.update(
        found,
        tokens_today=tokens,
        cost_usd_today=round(dollars, 6),
        limit_reached=store.daily_limit_reached(ex) if ex.model else "",
    )
    return clean(out)


__all__ = [
    "AmbiguousId",
    "ManageError",
    "NotFound",
    "OBSERVATION_TYPES",
    "clean",
    "edit",
    "forget",
    "forgotten",
    "health",
    "import_lines",
    "list_records",
    "parse_since",
    "projects",
    "purge",
    "resolve_id",
    "resolve_ids",
    "restore",
    "search",
    "session_labels",
    "session_summaries",
    "show",
    "terminal",
    "timeline",
]
