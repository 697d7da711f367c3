"""Team sync: send this home's shared projects to the team store, and bring the team's records home.

The drainer runs it after each drain when a team store is configured. The local SQLite file stays the only thing the hook reads: for a shared
project it is the cache of the team's memory.

Per shared project, in this order:
1. **events up**: the project's events stored since the last upload (less a
   safety overlap) go to the team store, page by page. `add_events` is
   idempotent by event id, so a resend after a crash or a network cut stores
   nothing twice. The overlap's events are sent again only when the team
   store lacks them (`_held_window`): an idle pass sends and asks nothing.
2. **records up**: the local change feed (Store.changes) after the last number
   sent: new records go up with their ids and hashes (`add_records`, idempotent
   by id and hash); a tombstone goes up as a team-wide forget only when the
   forgotten record was made by this user (a user forgets their own records
   team-wide; forgetting a teammate's record stays local). The same for a
   restore (a record of this user, live here, that the team store holds a
   tombstone for, is restored there) and a purge (the team store's tombstone
   of this user's record loses its text too).
   A change of a record's marks goes up as it is now: freshness and outcome
   through the feed's 'mark' (`set_marks`), superseded_by and merged_into with the record's
   'record' change, only those set here (`own_marks`, `apply_marks`); an equal mark is no
   change, so a mark that came down stops there. A merge survivor's new lists (the union of its
   group's facts, concepts, files and events, from `consolidate --apply` or the drain's merge) go
   up with its 'record' change (`own_lists`, `merge_lists`: a union, so nothing sent twice grows
   it again); other edits of a record do not sync.
3. **records down**: the team store's change feed after the last number read:
   teammates' records land in the local store (idempotent; a survivor's grown lists are
   merged in, `merge_lists`), their tombstones
   forget the record here too, so a forgotten record never comes back. A record
   the team restored comes back here when this cache forgot it only because the
   team did (actor `team:…`), never when this user forgot it; a team purge
   purges this cache's tombstone of it.

Text goes out as the local store holds it, which the drain scrubbed; when the
store's text was scrubbed with older rules than the installed ones (see
`kirolearn rescrub`), every event body and record is scrubbed again with the
current rules on its way out, so the server never holds what today's rules
catch.

Each cursor is saved in $KIROLEARN_HOME/state/team.json after the page it
covers is stored on both sides, so a crash repeats at most one page. A team
store that is down costs one failed connection: the spool and the local store
already hold everything, the cursors do not move, and `status` says so.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

from kirolearn.core.isotime import shift
from kirolearn.privacy import writes
from kirolearn.store import state

log = logging.getLogger("kirolearn.team.membership")

STATE = "team"
PAGE = 500
# events stored slightly out of order (two drains racing) are still sent
EVENT_OVERLAP_SECONDS = 120


@dataclass
class SyncStats:
    """What one sync did (`kirolearn drain --json` prints it under "team").

    marks_sent / marks_received count each mark change once: a record's
    freshness/outcome change (set_marks, the feed's 'mark') and each superseded_by /
    merged_into change (apply_marks, carried by its 'record')."""

    projects: int = 0
    events_sent: int = 0
    records_sent: int = 0
    forgets_sent: int = 0
    records_received: int = 0
    forgets_received: int = 0
    restores_sent: int = 0
    restores_received: int = 0
    purges_sent: int = 0
    purges_received: int = 0
    # each mark change counted once (see SyncStats)
    marks_sent: int = 0
    marks_received: int = 0
    # merge survivors whose lists changed on the other side
    lists_sent: int = 0
    lists_received: int = 0
    error: str = ""
    per_project: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _cursor(saved: dict, project_id: str) -> dict:
    return dict(saved.get("cursors", {}).get(project_id) or {"up": 0, "down": 0, "events": None})


def _save(project_id: str, cursor: dict) -> None:
    saved = state.read(STATE)
    saved.setdefault("cursors", {})[project_id] = cursor
    state.write(STATE, saved)


RECORD_TEXT = ("title", "summary", "facts", "concepts", "files_touched")


def _clean_events(page: list[dict], scrub) -> list[dict]:
    if scrub is None:
        return page
    import json

    from kirolearn.capture.events import scrub_event

    out = []
    for row in page:
        body = json.loads(row["body"])
        body = scrub_event(body, scrub)
        out.append(dict(row, body=json.dumps(body, ensure_ascii=False)))
    return out


def _clean_records(records: list[dict], scrub) -> list[dict]:
    if scrub is None:
        return records
    return [dict(r, **{k: scrub.scrub_value(r[k]) for k in RECORD_TEXT if k in r}) for r in records]


def _events_up(local, team, project_id: str, cursor: dict, stats: SyncStats, scrub=None) -> None:
    """Send the project's events stored after the cursor, and those of the overlap before it that
    the team store lacks (see _held_window)."""
    old = cursor["events"]
    since = shift(old, -EVENT_OVERLAP_SECONDS) if old else None
    key = None  # the last event sent in this sync: pages never overlap
    seen: list[tuple[str, str]] = []  # (stored_at, event_id) read in this pass
    while True:
        page = local.events_since([project_id], since, after=key, limit=PAGE)
        if not page:
            return
        fresh = [e for e in page if old is None or e["stored_at"] > old]
        window = [e for e in page if old is not None and e["stored_at"] <= old]
        if window:
            # all of the overlap is in this page
            whole = key is None and (len(page) < PAGE or bool(fresh))
            fresh = _held_window(team, window, cursor.get("window") if whole else None) + fresh
        if fresh:
            stats.events_sent += team.add_events(_clean_events(fresh, scrub))
        seen += [(e["stored_at"], e["event_id"]) for e in page]
        key = (page[-1]["stored_at"], page[-1]["event_id"])
        cursor["events"] = max(cursor["events"] or "", key[0])
        low = shift(cursor["events"], -EVENT_OVERLAP_SECONDS)
        cursor["window"] = _digest(i for at, i in seen if low <= at <= cursor["events"])
        _save(project_id, cursor)
        if len(page) < PAGE:
            return


def _digest(event_ids) -> str:
    import hashlib

    return hashlib.sha256("\n".join(sorted(event_ids)).encode()).hexdigest()[:32]


def _held_window(team, window: list[dict], saved: str | None) -> list[dict]:
    """The events of the overlap (stored up to the cursor) the team store lacks.

    The overlap catches an event a racing drain stored with an earlier time after the cursor
    moved past it. When the overlap holds exactly the events it held at the last pass (the
    digest of their ids, `saved`), all were sent then: nothing to ask. Otherwise the team store
    is asked which it holds (one primary-key lookup each) and only the others are sent. So an
    idle pass sends nothing and asks nothing (it re-sent the last two minutes' events).
    """
    if saved is not None and _digest(e["event_id"] for e in window) == saved:
        return []
    held = team.event_ids_present([e["event_id"] for e in window])
    return [e for e in window if e["event_id"] not in held]


def _team_authors(team, record_ids: list[str]) -> dict[str, str | None]:
    """Who made these records, as the team store knows it (its live copy, else its kept tombstone)."""
    authors = {rid: t.get("record_actor") for rid, t in team.tombstones(record_ids).items()}
    for rid in record_ids:
        if not authors.get(rid):
            live = team.get_record(rid)
            authors[rid] = live.get("actor") if live else None
    return authors


def _marks(found: list[dict]) -> list[dict]:
    """Marks read from one store's feed as another store's set_marks takes them (an equal mark is no
    change there, so a mark that came down and goes up again stops at once)."""
    return [
        {
            "record_id": m["record_id"],
            "freshness": m.get("freshness"),
            "outcome": m.get("outcome"),
            "reason": "synced from the team store",
        }
        for m in found
    ]


def _count(done: list[dict]) -> int:
    """How many marks set_marks changed (a record whose freshness and outcome both changed: two), as
    apply_marks counts superseded_by and merged_into."""
    return sum(len(d.get("after") or {}) for d in done)


def _records_up(local, team, project_id: str, cursor: dict, me: str, stats: SyncStats, scrub=None) -> None:
    while True:
        found = local.changes([project_id], after=cursor["up"], limit=PAGE)
        if found["after"] == cursor["up"]:
            return
        if found["records"]:
            stats.records_sent += team.add_records(_clean_records(found["records"], scrub))
            # marks made here; a record from the team sends none back
            stats.marks_sent += team.apply_marks(
                local.own_marks([r["record_id"] for r in found["records"]]), actor=me
            )
            # a merge survivor's new lists, made here
            stats.lists_sent += team.merge_lists(
                _clean_records(local.own_lists([r["record_id"] for r in found["records"]]), scrub), actor=me
            )
            _restores_up(team, found["records"], cursor, me, stats)
        unknown = [
            t["record_id"] for t in found["forgotten"] if not t.get("record_actor")
        ]  # purged here already
        authors = _team_authors(team, unknown) if unknown else {}
        mine = [
            t["record_id"]
            for t in found["forgotten"]
            if (t.get("record_actor") or authors.get(t["record_id"])) == me
        ]
        if mine:
            stats.forgets_sent += len(team.forget(mine, reason="forgotten by its author", actor=me))
        purged = [p["record_id"] for p in found.get("purged", [])]
        if purged:
            authors = _team_authors(team, purged)
            mine = [rid for rid in purged if authors.get(rid) == me]
            if mine:
                stats.purges_sent += team.purge(mine, actor=me)
        if found.get("marks"):  # a record's freshness or outcome changed here
            stats.marks_sent += _count(team.set_marks(_marks(found["marks"]), actor=me))
        cursor["up"] = found["after"]
        _save(project_id, cursor)


def _restores_up(team, records: list[dict], cursor: dict, me: str, stats: SyncStats) -> None:
    """My records live here that the team store holds a tombstone for: I restored them, so the team does.

    Only a tombstone this home has already read from the team's feed (its number is at or below
    the down cursor) counts: one that arrived since is a forget from another of my machines, which
    the pull that follows applies here, never undone by a record this home merely had not dropped yet.
    """
    mine = [r["record_id"] for r in records if r.get("actor") == me]
    if not mine:
        return
    held = team.tombstones(mine)
    wanted = [
        rid
        for rid, t in held.items()
        if not t["purged"] and t.get("seq") is not None and t["seq"] <= cursor["down"]
    ]
    if wanted:
        restored, _ = team.restore(wanted, actor=me)
        stats.restores_sent += len(restored)


def _records_down(local, team, project_id: str, cursor: dict, stats: SyncStats) -> None:
    while True:
        found = team.changes([project_id], after=cursor["down"], limit=PAGE)
        if found["after"] == cursor["down"]:
            return
        if found["records"]:
            stats.records_received += local.add_records(found["records"])
            stats.marks_received += local.apply_marks(found["records"], actor="team")
            stats.lists_received += local.merge_lists(found["records"], actor="team")
            # forgotten by the team, restored since: back, unless forgotten here
            held = local.tombstones([r["record_id"] for r in found["records"]])
            back = [rid for rid, t in held.items() if str(t.get("actor") or "").startswith("team:")]
            if back:
                restored, _ = local.restore(back, actor="team")
                stats.restores_received += len(restored)
        by_actor: dict = {}
        for t in found["forgotten"]:
            by_actor.setdefault(t.get("actor") or "?", []).append(t["record_id"])
        for actor, gone in by_actor.items():
            stats.forgets_received += len(
                local.forget(gone, reason="forgotten team-wide", actor=f"team:{actor}")
            )
        purged = [p["record_id"] for p in found.get("purged", [])]
        if purged:  # erased team-wide: this cache's tombstone of it goes too
            stats.purges_received += local.purge(purged, actor="team")
        # a teammate's drain marked a record: the same marks here
        if found.get("marks"):
            stats.marks_received += _count(local.set_marks(_marks(found["marks"]), actor="team"))
        cursor["down"] = found["after"]
        _save(project_id, cursor)


def sync(local, team, project_ids, *, me: str, scrub=None) -> SyncStats:
    """Send and fetch every shared project's changes (see the module docstring); never raises for the server.

    `local` is this home's store, `team` the team store (both kirolearn.store.base.Store);
    `me` is this user's actor name (attribution); `scrub`, a Scrubber, cleans what goes
    out again (None: the local text is already scrubbed with the current rules). A failure is logged and kept in
    state/team.json with the time of the last good sync (the cache's age in `status`).
    """
    stats = SyncStats(projects=len(project_ids))
    saved = state.read(STATE)
    try:
        for project_id in project_ids:
            cursor = _cursor(saved, project_id)
            before = (stats.events_sent, stats.records_sent, stats.records_received)
            _events_up(local, team, project_id, cursor, stats, scrub)
            _records_up(local, team, project_id, cursor, me, stats, scrub)
            _records_down(local, team, project_id, cursor, stats)
            stats.per_project[project_id] = {
                "events_sent": stats.events_sent - before[0],
                "records_sent": stats.records_sent - before[1],
                "records_received": stats.records_received - before[2],
            }
    except Exception as exc:  # noqa: BLE001
        # a team store that is down or refuses must never fail the drain
        from kirolearn.core.errors import one_line

        stats.error = one_line(f"{type(exc).__name__}: {exc}")[:300]
        log.warning("team sync failed: %s", stats.error)
        writes.state_try_update(STATE, last_sync_at=state.utc_now(), last_error=stats.error)
        return stats
    state.try_update(STATE, last_sync_at=state.utc_now(), last_ok_at=state.utc_now(), last_error="")
    return stats


def run(settings, local) -> SyncStats | None:
    """Sync this home's shared projects with the configured team store; None when there is nothing to do.

    `local` is the drainer's open local store. Opening the team store can fail
    (server down, credentials, schema); that is one error in the result and in
    state/team.json, never an exception: the drain it follows already succeeded.
    """
    from kirolearn.team import membership as team

    ids = sorted(team.shared_project_ids())
    if not settings.store.url or not ids:
        return None
    me = team.attribution(settings)["actor"]
    try:
        from kirolearn.store.backends import open_store

        remote = open_store(settings.store.url)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        from kirolearn.core.errors import one_line

        stats = SyncStats(projects=len(ids), error=one_line(f"{type(exc).__name__}: {exc}")[:300])
        log.warning("team store unavailable: %s", stats.error)
        writes.state_try_update(STATE, last_sync_at=state.utc_now(), last_error=stats.error)
        return stats
    try:
        return sync(local, remote, ids, me=me, scrub=outbound_scrubber(settings, local))
    finally:
        try:
            remote.close()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass


def outbound_scrubber(settings, local):
    """A Scrubber when the local store's text predates the installed rules (or extra patterns are set), else None."""
    from kirolearn.privacy.scrub import Scrubber, rules_version

    if local.scrubbed_with() == rules_version() and not settings.scrub.extra_patterns:
        return None
    return Scrubber(settings.scrub.extra_patterns, settings.scrub.allow)


def cache_state() -> dict:
    """When the cache last synced, and the last error ('' when it worked)."""
    found = state.read(STATE)
    return {
        "last_ok_at": found.get("last_ok_at"),
        "last_sync_at": found.get("last_sync_at"),
        "last_error": found.get("last_error", ""),
    }


def status_facts(settings) -> dict:
    """`kirolearn status`'s "team" object: the store (no password), shared projects, the cache's age."""
    import time

    from kirolearn.core.isotime import iso_epoch
    from kirolearn.store.url import redact_url
    from kirolearn.team import membership as team

    found = cache_state()
    ok = iso_epoch(found["last_ok_at"]) if found["last_ok_at"] else None
    return {
        "store": redact_url(settings.store.url) if settings.store.url else None,
        "shared_projects": len(team.shared_project_ids()),
        "cache_synced_at": found["last_ok_at"],
        "last_sync_at": found["last_sync_at"],
        "cache_age_seconds": round(time.time() - ok, 1) if ok is not None else None,
        "last_error": found["last_error"] or None,
    }
