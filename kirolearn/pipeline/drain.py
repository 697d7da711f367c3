"""The drainer: spool → validate → id dedup → scrub → content dedup → store → extract.

Holds the spool's file lock for its whole run, so a cron job, a watcher and a
manual run never process the same file twice. Invariants:
- a spool file leaves ready/ only at the end of a run, after the transaction
  that stored it (or proved it a duplicate) committed, its rows were read
  back and every later step (extraction, retention) finished; any failure
  before that keeps every spool file, and re-draining stores nothing twice
  (inserts are keyed by event id);
- it then moves to spool/done/ (the write-ahead log), and is removed only once
  an integrity check begun after its commit passed and DONE_KEEP_SECONDS went
  by, so `kirolearn repair` can re-ingest what a damaged database holds;
- the store's integrity check (quick_check) runs before a pass ingests, when
  due (CHECK_EVERY_*), and always after an unclean stop or an error in a pass:
  a damaged database it finds stops the run before anything is ingested;
- a forgotten record is purged by retention only after its age is due on
  PURGE_AFTER_PASSES drain passes in a row: one pass under a wrong clock purges nothing;
- spool entries are opened without following links or waiting on FIFOs, and
  anything but a regular file of at most 512 KiB is quarantined unread;
- a file that does not parse or validate is moved to quarantine/ with the
  reason, never dropped;
- a batch stays buffered until an extraction of it commits; a failing model
  is retried on later drains and, after `max_attempts`, replaced by the
  deterministic extractor.
"""

import json
import logging
import os
import signal
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from filelock import FileLock, Timeout
from pydantic import ValidationError

from kirolearn.capture import events as capture_events
from kirolearn.capture import spool
from kirolearn.core import crashpoint, dedup, isotime, jsonfast
from kirolearn.core.errors import DrainLocked, SpoolError, StoreCorrupt
from kirolearn.core.ids import new_ulid
from kirolearn.core.project import project_id
from kirolearn.pipeline import claims, extract
from kirolearn.pipeline.schema import Event
from kirolearn.privacy import writes
from kirolearn.privacy.carry import TurnCarry
from kirolearn.privacy.scrub import Scrubber
from kirolearn.store import state
from kirolearn.store.base import Store, event_project_id, event_row
from kirolearn.store.record import (
    CONCEPT_MAX,
    CONCEPTS_COUNT_MAX,
    FACT_MAX,
    FACTS_COUNT_MAX,
    FILE_MAX,
    FILES_KEPT,
    SUMMARY_MAX,
    TITLE_MAX,
    MemoryRecord,
    clip,
    clip_list,
)
from kirolearn.team import membership as team

TURN_STARTS = ("userPromptSubmit", "agentSpawn")  # nothing of the last turn carries over
STALE_TMP_SECONDS = 600  # older: its hook died mid-write

# quick_check reads every page (~1 s at 1M records): only when due (check_due).
CHECK_EVERY_PASSES = 100
CHECK_EVERY_SECONDS = 3600.0
DONE_KEEP_SECONDS = 24 * 3600.0  # spool/done/ keeps a drained file at least this long, and until a check
CLOCK_SKEW_SECONDS = 300.0  # a stamp further ahead than this was made by a wrong clock
PURGE_AFTER_PASSES = 10  # passes in a row a tombstone's age must be due on before retention purges it
BREAKER_COOL_OFF_SECONDS = 300.0  # then an open breaker lets one call through

EMBED_SECONDS = 3.0  # per pass, after its commit
TEAM_SYNC_SECONDS = 15.0  # --watch: team sync at most this often

log = logging.getLogger("kirolearn.pipeline.drain")


@dataclass
class DrainStats:
    """What one drain did (`kirolearn drain --json` prints this).

    fields: freshness_checked, the records whose files this pass re-checked, and
    freshness_marked, those whose freshness changed; superseded, older records a new one
    superseded (kirolearn.pipeline.truth); merged, the near-identical groups merged
    ({record_ids, into, why}). team: the team store sync of this drain ({} without one)."""

    events_read: int = 0
    stored: int = 0
    already_stored: int = 0
    duplicates: int = 0
    quarantined: int = 0
    recovered_tmp: int = 0
    redactions: dict = field(default_factory=dict)
    batches_extracted: int = 0
    records_written: int = 0
    extractor: str = "deterministic"
    llm_failures: int = 0
    fallbacks: int = 0
    tokens_used: int = 0
    cost_usd: float = 0.0
    pending_events: int = 0
    expired_events: int = 0
    released: int = 0
    llm_seconds: float = 0.0
    model_breaker_open: bool = False
    records_embedded: int = 0
    embedding_error: str = ""
    freshness_checked: int = 0
    freshness_marked: int = 0
    team: dict = field(default_factory=dict)
    superseded: int = 0
    merged: list = field(default_factory=list)
    duration_ms: int = 0

    def add(self, other: "DrainStats") -> None:
        """Accumulate another pass (used by --watch)."""
        for name, value in asdict(other).items():
            if name == "redactions":
                merged = Counter(self.redactions)
                merged.update(value)
                self.redactions = dict(merged)
            elif name in ("extractor", "pending_events", "model_breaker_open", "embedding_error", "team"):
                setattr(self, name, value)
            else:
                setattr(self, name, getattr(self, name) + value)


def lock(spool_root: "str | None" = None, wait: float = 2.0) -> FileLock:
    """Acquire the spool's drain lock or raise DrainLocked."""
    spool_root = spool.ensure_layout(spool_root)
    path = os.path.join(spool_root, spool.LOCK_NAME)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))  # 0600 whatever the umask or filelock version
    file_lock = FileLock(path, timeout=wait, mode=0o600)
    try:
        file_lock.acquire()
    except Timeout:
        raise DrainLocked(
            f"another kirolearn drain is running (lock {path}); it will pick up new events, nothing to do"
        ) from None
    return file_lock


_iso_to_dt = isotime.parse


_WORSE = {"current": 0, "changed": 1, "deleted": 2}  # a record's freshness is its worst claim's


class Drainer:
    """One drainer over one store; call `run_once()` (or `watch()`) while holding `lock()`.

    `store` is any Store (kirolearn.store.base). The drainer speaks to it through the contract only, which tests/store_contract.py runs on every
    backend: what only some backends keep (the hook's word counts, recall's expansions and vectors,
    the marker outside the file) are its optional capability calls, skipped where not supported.
    """

    def __init__(self, store, settings, *, complete=None, sleep=time.sleep, progress=None, bars=None):
        self.store: Store = store
        self.settings = settings
        self.scrubber = Scrubber(
            settings.scrub.extra_patterns, settings.scrub.allow, betterleaks=settings.scrub.betterleaks
        )
        self.complete = complete or extract.litellm_complete
        self.sleep = sleep
        self.progress = progress  # callable(n_done) or None
        self.bars = bars  # a hand-run drain's progress bars (cli.progress.Bars), else None
        self.last_check = None  # monotonic time of the last passing integrity check

        self.checks = 0
        self._open = False  # this process marked a pass under way in state/check.json
        self.model_failures = int(state.read(state.MODEL).get("consecutive_failures", 0) or 0)
        self.llm_deadline = None
        self.last_team_sync = None  # monotonic time
        self.new_record_ids: list[str] = []  # what supersede and merge look at

        self._key: bytes | None = None  # the home's dedup key, read once
        self._carries: dict = {}  # (project root, session) -> TurnCarry
        self._done_lines: dict = {}  # spool path -> the event as stored, for spool/done's log

    # Ingest

    def recover_tmp(self, stats: DrainStats, now: float) -> None:
        """Publish complete tmp files of hooks that died after writing; quarantine the rest."""
        tmp_dir = os.path.join(spool.root(), spool.TMP)
        try:
            names = os.listdir(tmp_dir)
        except FileNotFoundError:
            return
        for name in names:
            path = os.path.join(tmp_dir, name)
            try:
                if now - os.lstat(path).st_mtime < STALE_TMP_SECONDS:  # lstat: a link's target is not ours
                    continue
                data = json.loads(spool.read_entry(path), parse_int=jsonfast.int_or_text)
                Event.model_validate(data)
                os.replace(path, os.path.join(spool.root(), spool.READY, data["event_id"] + spool.SUFFIX))
                stats.recovered_tmp += 1
            except FileNotFoundError:
                continue
            except spool.BadEntry as exc:
                spool.quarantine(path, f"left in tmp/: {exc}")
                stats.quarantined += 1
            except (ValueError, ValidationError, KeyError, TypeError) as exc:
                spool.quarantine(path, f"incomplete write left in tmp/: {type(exc).__name__}")
                stats.quarantined += 1

    def _is_duplicate(self, event: dict, content_hash: str, seen: dict, stored: set) -> bool:
        """Same content as an event of this chunk (`seen`: hash -> received_at list) or a stored one
        (`stored`: the chunk's hashes that some stored event has), within the dedup window."""
        if content_hash not in seen and content_hash not in stored:
            return False  # the common case: new content, no window to compute
        window = self.settings.dedup.window_seconds
        if event["kind"] == "note" and event["trigger"] == "agentSpawn":
            since = until = None  # a session starts once: Kiro may repeat the hook on every prompt
        else:
            since = isotime.shift(event["received_at"], -window)
            until = isotime.shift(event["received_at"], window)
        for earlier in seen.get(content_hash, ()):
            if since is None or since <= earlier <= until:
                return True
        return content_hash in stored and self.store.content_duplicate(content_hash, since, until)

    def _content_hash(self, event: dict, earlier: list, raw: "dict | None" = None) -> str:
        """The event's content hash; a stop's is keyed on its turn (the newest non-stop event before it).

        When scrubbing removed something (`raw` differs from `event` in a content field), the hash is of
        the raw text, keyed with this home's secret (dedup.keyed_content_hash): two prompts that differ
        only inside <private> stay two events, and the stored hash reveals nothing of what was removed.
        """
        scrubbed = raw is not None and any(raw.get(k) != event.get(k) for k in dedup.EVENT_CONTENT_FIELDS)
        if event["kind"] != "session_summary":
            if scrubbed:
                return dedup.keyed_content_hash(raw, self._dedup_key())
            return dedup.event_content_hash(event)
        key = None
        for _, other, _ in reversed(earlier):  # this chunk first: oldest first, like the spool
            if (
                other["session_id"] == event["session_id"]
                and other["project_root"] == event["project_root"]
                and other["kind"] not in ("session_summary", "note")
            ):
                key = other["event_id"]
                break
        if key is None:
            key = self.store.last_turn_event_id(
                event_project_id(event), event["session_id"], event["event_id"]
            )
        if scrubbed:
            return dedup.keyed_content_hash(raw, self._dedup_key(), key, stop=True)
        return dedup.stop_content_hash(event, key)

    def _dedup_key(self) -> bytes:
        """This home's dedup key (state.dedup_key), read once per drainer rather than once per event."""
        if self._key is None:
            self._key = state.dedup_key()
        return self._key

    def _scrub_in_turn(self, data: dict) -> dict:
        """Scrub one event with its session's carry (privacy.carry.TurnCarry): a secret whose name ends
        one tool output and whose value starts the next is redacted in both. A prompt starts a turn and
        a stop ends it: neither hands anything on to another turn."""
        key = (data.get("project_root"), data.get("session_id"))
        carry = self._carries.get(key)
        if carry is None:
            if len(self._carries) >= 256:  # many sessions in one pass: the oldest carry goes
                self._carries.pop(next(iter(self._carries)))
            carry = self._carries[key] = TurnCarry(self.scrubber)
        if data.get("trigger") in TURN_STARTS:
            carry.reset()
        clean = carry.scrub_event(data)
        if data.get("kind") == "session_summary":
            carry.reset()
        return clean

    def ingest(self, paths: "list[str]", stats: DrainStats) -> "list[tuple[str, str | None]]":
        """Store one chunk of spool files in one transaction.

        Returns (path, event_id) for every file the commit holds (event_id None for
        a duplicate, which is not stored by design): the caller verifies and unlinks.
        """
        parsed = []
        for path in paths:
            try:
                raw = spool.read_entry(path)
            except FileNotFoundError:
                continue
            except spool.BadEntry as exc:
                self._quarantine(path, str(exc))
                stats.quarantined += 1
                continue
            stats.events_read += 1
            try:
                data = json.loads(raw, parse_int=jsonfast.int_or_text)
                event = Event.model_validate(data)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "event"
                self._quarantine(path, f"not a valid event: {where}: {first['msg']}")
                stats.quarantined += 1
                continue
            except (ValueError, RecursionError) as exc:
                self._quarantine(path, f"not valid JSON: {type(exc).__name__}: {str(exc)[:200]}")
                stats.quarantined += 1
                continue
            if os.path.basename(path) != event.event_id + spool.SUFFIX:
                self._quarantine(path, f"file name does not match event_id {event.event_id}")
                stats.quarantined += 1
                continue
            parsed.append((path, data))

        known = self.store.event_ids_present([d["event_id"] for _, d in parsed])
        rows, done, seen_hashes, fresh = [], [], {}, []
        before = Counter(self.scrubber.counts)
        for path, data in parsed:
            if data["event_id"] in known:
                done.append((path, data["event_id"]))
                stats.already_stored += 1
                continue
            known.add(data["event_id"])
            clean = self._scrub_in_turn(data)
            fresh.append((path, clean, self._content_hash(clean, fresh, raw=data)))
        stored_hashes = self.store.content_hashes_present({h for _, _, h in fresh})
        stored_at = isotime.now_iso()
        for path, clean, content_hash in fresh:
            if self._is_duplicate(clean, content_hash, seen_hashes, stored_hashes):
                done.append((path, None))
                stats.duplicates += 1
                continue
            done.append((path, clean["event_id"]))
            line = capture_events.serialize(clean)  # the row and spool/done's log keep the scrubbed text
            self._done_lines[path] = line
            seen_hashes.setdefault(content_hash, []).append(clean["received_at"])
            body = line.decode("utf-8")
            rows.append(event_row(clean, content_hash, stored_at, actor=self.settings.team.actor, body=body))
        self.store.add_events(rows)  # one transaction (crash point "ingest-in-transaction" inside)
        crashpoint.reached("ingest-after-commit")
        stats.stored += len(rows)
        delta = Counter(self.scrubber.counts)
        delta.subtract(before)
        merged = Counter(stats.redactions)
        merged.update({k: v for k, v in delta.items() if v > 0})
        stats.redactions = dict(merged)
        wanted = {event_id for _, event_id in done if event_id}
        missing = wanted - self.store.event_ids_present(wanted)
        if missing:  # the commit said yes, but the rows are not there: keep every file
            raise StoreCorrupt(
                f"{len(missing)} committed events do not read back from {self.db_path()}; "
                "their spool files are kept",
                "run `kirolearn repair`: it backs the file up, recovers what it can and re-ingests the spool",
            )
        return done

    def _quarantine(self, path: str, reason: str) -> None:
        try:
            spool.quarantine(path, reason)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SpoolError(
                f"cannot move {path} into the spool's quarantine folder ({exc.strerror or exc})",
                f"make {os.path.dirname(path)} and {spool.root()} writable by you, then drain again",
            ) from None

    def check_store(self, before: bool = True) -> None:
        """Raise StoreCorrupt when the store's integrity check (SQLite's quick_check) finds it damaged."""
        self.checks += 1
        problem = self.store.integrity_problem()
        if problem:
            what = "nothing was ingested" if before else "the spool files of this drain are kept"
            raise StoreCorrupt(
                f"the database {self.db_path()} is damaged ({problem}); {what}",
                "run `kirolearn repair`: it backs the file up, recovers what it can and re-ingests "
                "the spool, which keeps every event not yet drained and, in spool/done/, every one "
                "drained since the last check that found the database sound",
            )
        self.last_check = time.monotonic()

    def _store_key(self) -> str:
        """Which store check.json is about: the file and its inode (a repaired file is a new one)."""
        path = self.store.database_file() or ""
        try:
            return f"{os.path.abspath(path)}:{os.stat(path).st_ino}" if path else self.store.backend
        except OSError:
            return path

    def check_schedule(self) -> dict:
        """state/check.json if it is about this store, else {} (never checked: a check is due)."""
        found = state.read(state.CHECK)
        return found if found.get("store") == self._store_key() else {}

    def check_due(self, schedule: dict) -> "str | None":
        """Why the integrity check is due before this pass ingests (None: not due).

        SQLite's quick_check reads every page (~1 s at 1M records), so it runs at most once a
        pass, before the pass takes events in, and only when due: after an unclean stop (a pass
        that took events in and never finished), else once CHECK_EVERY_PASSES passes took events
        in, or CHECK_EVERY_SECONDS went by, since the last one (state/check.json)."""
        if not schedule.get("checked_at"):
            return "never checked"
        if schedule.get("suspect"):
            return f"an earlier pass failed ({schedule['suspect']})"
        if schedule.get("open") and not self._open:
            return "the last pass that took events in did not finish"
        if int(schedule.get("passes") or 0) >= CHECK_EVERY_PASSES:
            return f"{CHECK_EVERY_PASSES} passes since the last check"
        try:
            age = isotime.now() - _iso_to_dt(schedule["checked_at"]).timestamp()
        except (TypeError, ValueError, AttributeError):
            return "unreadable time of the last check"
        if age < -CLOCK_SKEW_SECONDS:  # stamped by a clock that ran ahead: no time since it can be trusted
            return "the last check's time is in the future"
        return f"{int(age)} s since the last check" if age >= CHECK_EVERY_SECONDS else None

    def _begin_pass(self, ingesting: bool) -> None:
        """Check the store if it is due (at most once a pass), and mark a pass that ingests as under way."""
        schedule = self.check_schedule()
        due = self.check_due(schedule)
        if due:
            self.check_store()  # a damaged store takes nothing in: the spool keeps it all
            schedule = {"checked_at": isotime.now_iso(), "passes": 0, "open": self._open}  # sound now
            self.prune_done()  # what done/ holds was committed before this check began
        if ingesting and not self._open:
            schedule = dict(schedule, open=True)
            self._open = True
        elif not due:
            return
        self._write_schedule(schedule)

    def _end_pass(self) -> None:
        """A pass that ingested finished: it counts towards the next check, and the stop was clean."""
        if not self._open:
            return
        schedule = self.check_schedule()
        self._write_schedule(dict(schedule, open=False, passes=int(schedule.get("passes") or 0) + 1))
        self._open = False

    def _write_schedule(self, schedule: dict) -> None:
        try:
            state.write(state.CHECK, dict(schedule, store=self._store_key()))
        except OSError:
            pass  # a full disk or a read-only home: the next pass checks again, which is safe

    def db_path(self) -> str:
        """The store's file, or what names a server store, for messages."""
        try:
            found = self.store.database_file()
        except Exception:  # noqa: BLE001 - only for a message
            found = ""
        if found is None:
            return f"the {self.store.backend or 'team'} store"
        return found or "kirolearn.db"

    def release(self, done: "list[tuple[str, str | None]]", stats: DrainStats) -> None:
        """Move the run's spool files into spool/done/, one folder for this pass, once every step of the
        run finished (their rows were read back after commit); `prune_done` removes them later."""
        if not done:
            return
        files = [path for path, _ in done]
        batch = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(isotime.now())) + "-" + new_ulid()
        lines = {path: self._done_lines.pop(path) for path in files if path in self._done_lines}
        try:
            spool.keep_done(files, batch, lines)
        except OSError as exc:
            raise SpoolError(
                f"stored {len(files)} events but cannot move their spool files from "
                f"{os.path.dirname(files[0])} into {os.path.join(spool.root(), spool.DONE)} "
                f"({exc.strerror or exc})",
                "make the spool's folders writable by you (chmod u+w); the next drain recognises them as "
                "stored and moves them",
            ) from None
        stats.released += len(files)

    def prune_done(self) -> int:
        """Right after a passing check: remove done/'s pass folders older than DONE_KEEP_SECONDS. Every
        folder there was committed before the check began, so the database found sound holds it. Names
        start with their UTC stamp: the walk stops at the first one too young. Returns files removed."""
        cutoff = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(isotime.now() - DONE_KEEP_SECONDS))
        removed = 0
        for batch in spool.done_batches():
            if batch[: len(cutoff)] >= cutoff:
                break
            try:
                removed += spool.drop_done(batch)
            except OSError as exc:  # kept a while longer: never a reason to fail a drain
                log.warning("cannot remove %s from spool/done: %s", batch, exc.strerror or exc)
                break
        return removed

    # Extraction

    def ready_batches(self, now: float, flush: bool = False) -> "list[extract.Batch]":
        """Buffered sessions whose turn ended, that grew too big, or that went idle."""
        batches = []
        for group in self.store.pending_sessions():
            up_to, reason = None, None
            if group["last_stop_id"]:
                up_to, reason = group["last_stop_id"], "turn-end"
            elif group["n"] >= self.settings.batch.max_events:
                reason = "size"
            elif now - _iso_to_dt(group["last_received_at"]).timestamp() >= self.settings.batch.idle_seconds:
                reason = "idle"
            elif flush:
                reason = "flush"
            if reason is None:
                continue
            events = self.store.pending_events(group["project_id"], group["session_id"])
            # an idle or flushed session's open last turn goes too
            cut = next((i + 1 for i, e in enumerate(events) if e["event_id"] == up_to), len(events))
            rest = events[cut:]
            events = events[:cut]
            if rest and not (
                flush
                or now - _iso_to_dt(group["last_received_at"]).timestamp() >= self.settings.batch.idle_seconds
            ):
                rest = []
            for part, why in ((events, reason), (rest, "flush" if flush else "idle")):
                if part:
                    batches.append(
                        extract.Batch(
                            group["project_id"], part[0]["project_root"], group["session_id"], part, why
                        )
                    )
        return batches

    def _half_open(self) -> None:
        """Failures in a row survive across drains; once the breaker has cooled off, one call may go through."""
        limit = self.settings.extract.breaker_failures
        if self.model_failures < limit:
            return
        last = state.read(state.MODEL).get("last_failure_at")
        try:
            age = time.time() - _iso_to_dt(last).timestamp()
        except (TypeError, ValueError, AttributeError):
            age = BREAKER_COOL_OFF_SECONDS
        if age >= BREAKER_COOL_OFF_SECONDS:
            self.model_failures = limit - 1

    def breaker_open(self) -> bool:
        """Has the model failed `extract.breaker_failures` batches in a row (so this run stops calling it)?"""
        return (
            bool(self.settings.extract.model)
            and self.model_failures >= self.settings.extract.breaker_failures
        )

    def _note_model(self, ok: bool, error: str = "") -> None:
        if ok:
            if self.model_failures or state.read(state.MODEL).get("consecutive_failures"):
                writes.state_try_update(
                    state.MODEL, consecutive_failures=0, last_success_at=isotime.now_iso()
                )
            self.model_failures = 0
            return
        self.model_failures += 1
        previous = int(state.read(state.MODEL).get("consecutive_failures", 0) or 0)
        writes.state_try_update(  # a provider's error may quote the key it refused
            state.MODEL,
            consecutive_failures=max(previous + 1, self.model_failures),
            model=self.settings.extract.model,
            last_error=error[:500],
            last_failure_at=isotime.now_iso(),
        )

    def _fallback_reason(self, batch: extract.Batch) -> str:
        ex = self.settings.extract
        if not ex.model:
            return ""
        if self.breaker_open():
            return f"model failed {self.model_failures} batches in a row: not called again in this drain"
        spent = self.store.daily_limit_reached(ex)
        if spent:
            return spent
        failures = self.store.failed_attempts(batch.key)
        if failures >= ex.max_attempts:
            return f"model failed {failures} times on this batch"
        return ""

    def _records(
        self, batch: extract.Batch, candidates: list, run_id: str, now_iso: str
    ) -> "tuple[list, list]":
        """Scrub, then clip (a redaction marker can be longer than what it replaced), then validate.

        Returns (records, problems): a candidate that still fails validation is
        dropped with a note instead of failing the whole batch.
        """
        records, problems = [], []
        by_id = {e["event_id"]: e for e in batch.events}
        try:
            claims.annotate(
                batch,
                candidates,
                scrub=self.scrubber.scrub_text,
                secret=self._dedup_key(),
                claims_of=self.store.claims_of,
            )
        except Exception as exc:  # noqa: BLE001 - a file the drain cannot read must never lose the record
            log.warning("claims of %s not read: %s: %s", batch.project_root, type(exc).__name__, exc)
        for cand in candidates:
            source = (
                cand.pop("source_event_ids", None) or batch.event_ids
            )  # per turn when the extractor knows
            first = by_id.get(source[0], batch.events[0])
            who = team.attribution(
                self.settings, actor=first.get("actor"), host=first.get("host"), agent=first.get("agent")
            )
            made = {k: cand.pop(k) for k in ("claims", "work_signature") if k in cand}  # scrubbed as made
            cand = dict(self.scrubber.scrub_value(cand), **made)
            cand.update(
                title=clip(" ".join(str(cand.get("title", "")).split()), TITLE_MAX),
                summary=clip(str(cand.get("summary", "")), SUMMARY_MAX),
                facts=clip_list(cand.get("facts"), FACT_MAX, FACTS_COUNT_MAX),
                concepts=clip_list(cand.get("concepts"), CONCEPT_MAX, CONCEPTS_COUNT_MAX),
                files_touched=clip_list(cand.get("files_touched"), FILE_MAX, FILES_KEPT),
            )
            try:
                records.append(
                    MemoryRecord(
                        record_id="mr_" + new_ulid(),
                        project_id=batch.project_id,
                        project_root=batch.project_root,
                        session_id=batch.session_id,
                        source_event_ids=source,
                        run_id=run_id,
                        created_at=now_iso,
                        **who,
                        **cand,
                    )
                )
            except ValidationError as exc:
                first = exc.errors()[0]
                problems.append(f"dropped a candidate: {'.'.join(map(str, first['loc']))}: {first['msg']}")
        return records, problems

    def check_claims(self, records: list[dict]) -> tuple[int, int]:
        """Check these records' claims against their working trees; keep each claim's state and mark a
        record's freshness when its claims' worst state moved. Returns (claims checked, records marked)."""
        from kirolearn.claims import check as claimcheck
        from kirolearn.claims.model import Claim

        found = self.store.claims_of([r["record_id"] for r in records])
        states, marks, checked, moved = [], [], 0, []
        now = isotime.now_iso()
        for record in records:
            root = record.get("project_root") or ""
            rows = found.get(record["record_id"]) or []
            if not rows or not os.path.isdir(root):
                continue  # a teammate's record, or a project not on this machine: not judged here
            worst, why = "current", ""
            for row in rows:
                try:
                    verdict = claimcheck.check(Claim.from_dict(row), root, self._dedup_key())
                except Exception as exc:  # noqa: BLE001 - an odd file is not judged, never lost
                    log.warning(
                        "claim of %s not checked: %s: %s", record["record_id"], type(exc).__name__, exc
                    )
                    continue
                checked += 1
                state = (
                    verdict.state if verdict.state != claimcheck.UNKNOWN else row.get("state") or "current"
                )
                if (
                    state != row.get("state")
                    or verdict.now != (row.get("now") or "")
                    or verdict.blob != row.get("blob")
                    or (verdict.path and verdict.path != (row.get("path") or row["file"]))
                ):
                    states.append(
                        {
                            **{k: row[k] for k in ("record_id", "file", "kind", "key")},
                            "state": state,
                            "now": verdict.now,
                            "path": verdict.path,
                            "blob": verdict.blob,
                            "why": verdict.why or row.get("why") or "",
                            "at": now,
                        }
                    )
                if (
                    state == "changed"
                    and verdict.path
                    and verdict.path != row["file"]
                    and not row.get("by_record")
                ):
                    moved.append(
                        (record.get("project_id") or project_id(root), verdict.path, row["kind"], row["key"])
                    )
                if _WORSE.get(state, 0) > _WORSE.get(worst, 0):
                    worst, why = state, verdict.why or row.get("why") or ""
            if worst != (record.get("freshness") or "current"):
                marks.append({"record_id": record["record_id"], "freshness": worst, "reason": why, "at": now})
        if states:
            self.store.set_claim_states(states)
        for mark in marks:
            mark["reason"] = writes.text(mark.get("reason"), self.scrubber)
        done = len(self.store.set_marks(marks, actor="drain")) if marks else 0
        if moved:
            self._supersede_after_moves(moved)
        return checked, done

    def _supersede_after_moves(self, moved: list) -> None:
        """A claim found changed at the path its file moved to: the newest record that wrote that key
        there (after the move, before this check saw it) supersedes it, as it would have at store time."""
        from kirolearn.pipeline import truth

        lines: list = []
        newest: dict = {}
        for project, path, kind, key in dict.fromkeys(moved):
            for row in self.store.records_claiming(project, [(path, kind, key)], before=isotime.now_iso()):
                if row["file"] == path and row.get("state") == "current":
                    newest.setdefault(row["record_id"], None)
                    break
        for record_id in newest:
            record = self.store.get_record(record_id)
            if record is not None:
                truth.supersede(self.store, record, log=lines.append)
        writes.append_log("truth.log", lines, "drain")

    def check_freshness(self, stats: DrainStats) -> None:
        """Re-check the claims of at most `drain.freshness_per_pass` records, the longest unchecked first (an
        index range, never every record: rule 15 in docs/architecture.md); a change of mark keeps its reason."""
        limit = self.settings.drain.freshness_per_pass
        due = (self.store.freshness_due(limit) or []) if limit else []
        if not due:
            return
        shown = self._phase("checking claims", len(due))
        checked, marked = self.check_claims(due)
        if shown:
            shown(len(due))
        stats.freshness_checked += len(due)
        stats.freshness_marked += marked
        self.store.note_checked([r["record_id"] for r in due], isotime.now_iso())

    def extract_batch(self, batch: extract.Batch, stats: DrainStats) -> None:
        """Extract one batch and commit its records, or leave it buffered on failure."""
        run_id = new_ulid()
        started = isotime.now_iso()
        fallback = self._fallback_reason(batch)
        run = {
            "run_id": run_id,
            "batch_key": batch.key,
            "project_id": batch.project_id,
            "session_id": batch.session_id,
            "reason": batch.reason,
            "event_count": len(batch.events),
            "started_at": started,
            "model": self.settings.extract.model,
            "fallback_reason": fallback,
            "error": "",
        }
        if self.settings.extract.model and not fallback:
            if self.llm_deadline is not None and time.monotonic() >= self.llm_deadline:
                return  # this drain spent its model time: the batch waits for the next one
            stats.extractor = "llm"
            began = time.monotonic()
            try:
                result = extract.llm_extract(
                    batch, self.settings, self.complete, sleep=self.sleep, deadline=self.llm_deadline
                )
            except extract.ExtractionError as exc:
                stats.llm_seconds = round(stats.llm_seconds + time.monotonic() - began, 3)
                self._note_model(False, str(exc))
                partial = getattr(exc, "result", None)
                stats.llm_failures += 1
                self.store.record_failed_run(
                    dict(
                        run,
                        extractor="llm",
                        outcome="failed",
                        error=self.scrubber.scrub_text(str(exc))[:2000],
                        finished_at=isotime.now_iso(),
                        request=partial.request if partial else "",
                        prompt_tokens=partial.prompt_tokens if partial else 0,
                        completion_tokens=partial.completion_tokens if partial else 0,
                        cost_usd=partial.cost_usd if partial else 0.0,
                        **self._provenance(partial),
                    )
                )
                if partial:
                    stats.tokens_used += partial.prompt_tokens + partial.completion_tokens
                    stats.cost_usd += partial.cost_usd
                if not (partial and partial.botched):
                    return  # the provider failed (down, refusing): the batch waits for a later drain
                self._botched(batch, run, partial.botched, stats)
                candidates = extract.deterministic(batch)
                run = dict(run, run_id=new_ulid(), extractor="deterministic", request="")
                self._commit(batch, run, candidates, stats)
                return
            stats.llm_seconds = round(stats.llm_seconds + time.monotonic() - began, 3)
            self._note_model(True)
            candidates = result.records
            run.update(
                extractor="llm",
                request=result.request,
                prompt_tokens=result.prompt_tokens,
                fallback_reason=result.note,
                **self._provenance(result),
                completion_tokens=result.completion_tokens,
                cost_usd=result.cost_usd,
                error="; ".join(result.errors),
            )
            stats.tokens_used += result.prompt_tokens + result.completion_tokens
            stats.cost_usd += result.cost_usd
        else:
            if fallback:
                stats.fallbacks += 1
            candidates = extract.deterministic(batch)
            run.update(extractor="deterministic", request="")
        self._commit(batch, run, candidates, stats)

    def _commit(self, batch: extract.Batch, run: dict, candidates: list, stats: DrainStats) -> None:
        """Scrub and validate the candidates, then commit them with the run row and mark the batch done."""
        records, problems = self._records(batch, candidates, run["run_id"], isotime.now_iso())
        crashpoint.reached("extract-before-commit")
        run.update(
            outcome="ok",
            finished_at=isotime.now_iso(),
            error="; ".join(filter(None, [run.get("error", ""), *problems]))[:2000],
        )
        stats.records_written += self.store.commit_extraction(run, records, batch.event_ids)
        self.new_record_ids += [r.record_id for r in records]
        self.new_record_roots.update((r.project_root, r.agent) for r in records if r.project_root)
        made = [
            {"record_id": r.record_id, "project_root": r.project_root, "freshness": r.freshness}
            for r in records
        ]
        if any(r.claims for r in records):
            self.check_claims(
                [m for m, r in zip(made, records) if r.claims]
            )  # a write reverted since reads so
        stats.batches_extracted += 1

    # A model's answers

    def _provenance(self, result) -> dict:
        """The run row's trace of a model call: prompt version, structured-output form, raw answer (scrubbed)."""
        answer = getattr(result, "answer", "") if result is not None else ""
        return {
            "prompt_version": extract.PROMPT_VERSION,
            "response_form": getattr(result, "form", "") or "",
            "answer": self.scrubber.scrub_text(answer)[: extract.ANSWER_KEPT_CHARS] if answer else "",
        }

    def _botched(self, batch: extract.Batch, run: dict, reason: str, stats: DrainStats) -> None:
        """A batch whose model answer was unusable: this batch only goes to the deterministic extractor, now."""
        stats.fallbacks += 1
        run["fallback_reason"] = f"model answer unusable: {reason}"[:500]
        log.warning(
            "batch %s (%d events): the model's answer was unusable, deterministic extractor used: %s",
            batch.key,
            len(batch.events),
            reason[:300],
        )

    # Whole runs

    def expire_events(self) -> int:
        """Delete extracted events past `retention.events_days`; returns how many."""
        days = self.settings.retention.events_days
        if not days:
            return 0
        return self.store.expire_events(isotime.shift(isotime.now_iso(), -days * 86400))

    def expire_forgotten(self) -> int:
        """Purge tombstones forgotten more than `retention.forgotten_days` ago (their bytes go) once their
        age has been due on PURGE_AFTER_PASSES passes in a row (state/purge.json counts them), so one
        pass under a clock running ahead, or a forget stamped by a clock running behind, purges nothing.
        A forgotten_at in the future is never old. Returns how many were purged."""
        days = self.settings.retention.forgotten_days
        if not days:
            return 0
        due = self.store.purgeable(older_than=isotime.shift(isotime.now_iso(), -days * 86400))
        found = state.read(state.PURGE)
        seen = found.get("due") if found.get("store") == self._store_key() else None
        seen = seen if isinstance(seen, dict) else {}
        if not due and not seen:
            return 0  # the usual pass: one index range, nothing written
        counts = {rid: int(seen.get(rid) or 0) + 1 for rid in due}
        ripe = [rid for rid, n in counts.items() if n >= PURGE_AFTER_PASSES]
        purged = self.store.purge(ripe, actor="retention") if ripe else 0
        left = {rid: n for rid, n in counts.items() if n < PURGE_AFTER_PASSES}
        try:
            state.write(state.PURGE, {"store": self._store_key(), "due": left})
        except OSError:
            pass  # unwritten, the count starts again: later, never sooner
        return purged

    def mark_truth(self, stats: DrainStats) -> None:
        """Supersede what the new records changed and merge near-identical chores, right after
        they are stored; the cost follows the new records (a few FTS candidates each)."""
        if not self.new_record_ids or not self.store.has_marks():  # a store that keeps no marks
            return
        from kirolearn.pipeline import truth

        lines: list = []
        done = truth.mark_new(
            self.store, self.new_record_ids, merge=self.settings.drain.auto_merge, log=lines.append
        )
        stats.superseded += len(done["superseded"])
        stats.merged += done["merged"]
        writes.append_log("truth.log", lines, "drain")

    def embed_records(self, stats: DrainStats) -> None:
        """Expansions of new records (plain text for the hook's index: no model needed) and the hook's
        word counts, where the store keeps them (Store.derived, Store.refresh_term_docs)."""
        derived = self.store.derived()
        expanded = 0
        if derived is not None:
            from kirolearn.recall import semantic  # recall's text rules, above the store

            expanded = semantic.enrich_pending(
                derived, progress=self._phase("expanding", derived.expansions_pending)
            )
        if stats.records_written or expanded:
            # word counts the hook reads with one index range; records an import or a team sync added get
            # their expansions here, and without this copy the hook read fts5vocab's doclists instead
            # (230 ms a prompt at 100k records after an import)
            self.store.refresh_term_docs()

    def embed_vectors(self, stats: DrainStats, seconds: "float | None" = EMBED_SECONDS) -> None:
        """Vectors, last in a pass, bounded (EMBED_SECONDS) and ended between two batches when new turns
        reach the spool: a backfill never holds up the drain; the next pass goes on with it (--watch: at
        once), words find the rest meanwhile. `seconds` None (--flush): every vector now."""
        self.vectors_pending = False
        derived = self.store.derived()
        if derived is None or self.settings.embeddings.model.strip().lower() in ("", "none", "off"):
            return
        from kirolearn.recall import semantic  # numpy and the model load only here, in the drainer

        stats.records_embedded, stats.embedding_error = semantic.index_with_settings(
            derived,
            self.settings,
            seconds=seconds,
            progress=self._phase("embedding"),
            interrupt=None if seconds is None else (lambda: bool(spool.ready_files())),
        )
        self.vectors_pending = (
            bool(stats.records_embedded) and semantic.vectors_pending(derived, self.settings) > 0
        )

    def _phase(self, label: str, total=None):
        """The progress callable of a backfill phase when a person watches (self.bars), else None.
        `total`: a count, or a callable counting the work (asked only when a bar may show)."""
        if self.bars is None:
            return None
        return self.bars.phase(label, total() if callable(total) else total)

    def run_once(self, flush: bool = False) -> DrainStats:
        """One pass (`_pass`); an error in it (SQLite's, the disk's, a bug's) checks the store now and
        makes the check due before the next pass ingests."""
        try:
            return self._pass(flush)
        except DrainLocked:
            raise
        except Exception as exc:
            self._after_error(exc)
            raise

    def _after_error(self, exc: Exception) -> None:
        """Mark the store suspect (state/check.json) and, unless the error already says it is damaged,
        run the integrity check now: raise StoreCorrupt when it fails, so the message names the fix."""
        try:
            self._write_schedule(dict(self.check_schedule(), suspect=type(exc).__name__))
            if isinstance(exc, StoreCorrupt):
                return
            self.checks += 1
            problem = self.store.integrity_problem()
        except Exception:  # noqa: BLE001 - the first error is the one to report
            return
        if problem:
            raise StoreCorrupt(
                f"the database {self.db_path()} is damaged ({problem}); the spool files of this drain are kept",
                "run `kirolearn repair`: it backs the file up, recovers what it can and re-ingests the spool, "
                "which keeps every event not yet drained and, in spool/done/, every one drained since the "
                "last check that found the database sound",
            ) from exc

    def _pass(self, flush: bool = False) -> DrainStats:
        """Drain everything in the spool once, extract every ready batch, then release the spool files.

        Spool files leave ready/ last (see `release`): if extraction, retention
        or the store fails on the way, every one of them stays for the next run.
        """
        start = time.monotonic()
        stats = DrainStats(extractor="llm" if self.settings.extract.model else "deterministic")
        now = time.time()
        self.recover_tmp(stats, now)  # spool files only: the store is not touched yet
        files = spool.ready_files()
        self._begin_pass(bool(files))
        chunk = self.settings.drain.chunk_size
        done = []
        for i in range(0, len(files), chunk):
            done += self.ingest(files[i : i + chunk], stats)
            if self.progress:
                self.progress(min(i + chunk, len(files)))
        self._half_open()
        budget = self.settings.extract.drain_llm_budget_seconds
        self.llm_deadline = time.monotonic() + budget if budget else None
        self.new_record_ids = []
        self.new_record_roots: set = set()
        for batch in self.ready_batches(time.time(), flush=flush):
            self.extract_batch(batch, stats)
        self.mark_truth(stats)
        stats.model_breaker_open = self.breaker_open()
        stats.expired_events = self.expire_events()
        self.expire_forgotten()
        self.check_freshness(stats)
        self.embed_records(stats)
        stats.pending_events = self.store.pending_event_count()
        self.release(done, stats)
        writes.scrub_session_files(self.scrubber)  # the hook keeps Cursor's last answer raw there
        self.note_counts()
        self.refresh_memory_rules()
        stats.team = self.sync_team()
        # last: CPU-bound embedding never holds up the spool or team sync
        self.embed_vectors(stats, None if flush else EMBED_SECONDS)  # --flush: all now
        if self.bars is not None:
            self.bars.close()
        self._end_pass()
        stats.duration_ms = int((time.monotonic() - start) * 1000)
        return stats

    def refresh_memory_rules(self) -> None:
        """Auggie reads its memory rule before its session-start hook runs: a project that got records
        has its rule (one kirolearn wrote, or a new one after an Auggie session) rewritten now, so the
        next session starts with them."""
        from kirolearn.capture.agents import auggie

        by_auggie = {root for root, agent in self.new_record_roots if agent == auggie.NAME}
        roots = sorted(
            root
            for root in {root for root, _ in self.new_record_roots}
            if (root in by_auggie and not os.path.exists(auggie.rules_path(root)))
            or auggie.is_ours(auggie.rules_path(root))
        )
        if not roots:
            return
        from kirolearn.core import paths
        from kirolearn.recall import context, lexical

        conf = context.settings()
        conn = lexical.connect_readonly(budget=conf["time_budget_ms"] / 1000)
        if conn is None:
            return
        try:
            for root in roots:
                text, _ = context.session_start(conn, root, conf=conf)
                if text and os.path.isdir(root):
                    auggie.write_rules(root, text, paths.home())
        except Exception as exc:  # noqa: BLE001 - the rule is a convenience: the drain's work is done
            log.warning("memory rule not refreshed: %s: %s", type(exc).__name__, str(exc)[:200])
        finally:
            conn.close()

    def note_counts(self) -> None:
        """Keep the marker outside the database (kirolearn.store.state) at what the store holds now.

        Every drain counts, not only one that read events: records written
        directly (save-summary, session-end, import, the MCP server) must count
        too if the file is later lost. The file is rewritten only when a count changed.
        """
        self.store.remember_counts()  # counted only when rows were added: a count reads every row

    def sync_team(self) -> dict:
        """Send the shared projects to the team store and fetch the team's records (kirolearn.team.sync).

        After the spool files are released: the team store never holds up the local
        drain, and a server that is down loses nothing (the local store has it all).
        """
        if not self.settings.store.url or self.store.database_file() is None:
            return {}  # no team, or a drain into the team store itself: nothing to sync
        now = time.monotonic()
        if self.last_team_sync is not None and now - self.last_team_sync < TEAM_SYNC_SECONDS:
            return {}
        self.last_team_sync = now
        from kirolearn.team import sync as team_sync

        found = team_sync.run(self.settings, self.store)
        return found.to_dict() if found is not None else {}

    def watch(self, on_pass=None, should_stop=None) -> DrainStats:
        """Drain, then keep draining as files arrive, until SIGINT/SIGTERM (or should_stop())."""
        total = DrainStats()
        stopping = []
        previous = signal.getsignal(signal.SIGTERM)
        try:
            signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        except ValueError:  # not the main thread (tests)
            previous = None
        try:
            last_idle_check = 0.0
            while not stopping and not (should_stop and should_stop()):
                has_files = bool(spool.ready_files()) or getattr(self, "vectors_pending", False)
                if has_files or time.monotonic() - last_idle_check >= 10 * self.settings.drain.poll_seconds:
                    stats = self.run_once()
                    last_idle_check = time.monotonic()
                    total.add(stats)
                    if on_pass and (
                        stats.events_read
                        or stats.batches_extracted
                        or stats.quarantined
                        or stats.team.get("records_received")
                    ):
                        on_pass(stats)
                    continue
                self.sleep(self.settings.drain.poll_seconds)
        except KeyboardInterrupt:
            pass
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        return total
