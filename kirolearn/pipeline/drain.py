"""The drainer: spool → validate → id dedup → scrub → content dedup → store → extract.

Holds the spool's file lock for its whole run, so a cron job, a watcher and a
manual run never process the same file twice. Invariants:
- a spool file is unlinked only at the end of a run, after the transaction
  that stored it (or proved it a duplicate) committed, its rows were read
  back, every later step (extraction, retention) finished and SQLite's
  quick_check passed; any failure before that keeps every spool file, and
  re-draining stores nothing twice (inserts are keyed by event id);
- a damaged database stops the run before anything is ingested;
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

from kirolearn.core import crashpoint, isotime
from kirolearn.team import membership as team
from kirolearn.core import dedup
from kirolearn.pipeline import extract
from kirolearn.capture import spool
from kirolearn.capture.events import scrub_event
from kirolearn.store import state
from kirolearn.store.base import Store, event_row
from kirolearn.store.sqlite.store import SqliteStore
from kirolearn.core.ids import new_ulid
from kirolearn.core.project import project_id
from kirolearn.pipeline.schema import (CONCEPT_MAX, CONCEPTS_COUNT_MAX, FACT_MAX, FACTS_COUNT_MAX, FILE_MAX, FILES_KEPT,
                                       SUMMARY_MAX, TITLE_MAX, Event, MemoryRecord, clip, clip_list)
from kirolearn.privacy.scrub import Scrubber
from kirolearn.core.errors import DrainLocked, SpoolError, StoreCorrupt

log = logging.getLogger("kirolearn.drain")  # stderr; logs/drain.log under the scheduler

STALE_TMP_SECONDS = 600  # a tmp file this old belongs to a hook that died mid-write
RECHECK_SECONDS = 60.0  # --watch: how often a pass re-runs quick_check before it ingests
BREAKER_COOL_OFF_SECONDS = 300.0  # an open breaker lets one call through again after this long
EMBED_SECONDS = 3.0  # a pass embeds for about this long at most, after its commit (issue #22)
TEAM_SYNC_SECONDS = 15.0  # --watch: the team store is synced at most this often (every run of a single drain)


@dataclass
class DrainStats:
    """What one drain did (`kirolearn drain --json` prints this)."""

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
    team: dict = field(default_factory=dict)  # the team store sync of this drain ({} without one)
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


class Drainer:
    """One drainer over one database; call `run_once()` (or `watch()`) while holding `lock()`.

    `store` is a SqliteStore (or the sqlite-utils Database of one). The drainer speaks to it through
    the Store contract (kirolearn.store.base), which tests/store_contract.py runs on every backend,
    and to what only the embedded store keeps (the hook's word counts, vectors and expansions, the
    marker outside the file) through its SqliteExtension (`self.local`).
    """

    def __init__(self, store, settings, *, complete=None, sleep=time.sleep, progress=None):
        self.store: Store = store if isinstance(store, Store) else SqliteStore(db=store)
        if not isinstance(self.store, SqliteStore):
            raise TypeError(f"the drainer runs on the embedded SQLite store, not on {self.store.backend!r}: "
                            "a team store is synced after each drain (kirolearn.team.sync)")
        self.local = self.store.extension()
        self.settings = settings
        self.scrubber = Scrubber(settings.scrub.extra_patterns, settings.scrub.allow,
                                 betterleaks=settings.scrub.betterleaks)
        self.complete = complete or extract.litellm_complete
        self.sleep = sleep
        self.progress = progress  # callable(n_done) or None
        self.last_check = None  # monotonic time of the last quick_check that passed
        self.model_failures = int(state.read(state.MODEL).get("consecutive_failures", 0) or 0)
        self.llm_deadline = None
        self.last_team_sync = None  # monotonic time of the last team store sync

    @property
    def db(self):
        """The store's sqlite-utils Database (for callers of old; the drainer itself uses `store` and `local`)."""
        return self.local.db

    # -- ingest ----------------------------------------------------------------------------

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
                data = json.loads(spool.read_entry(path))
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

    def _content_hash(self, event: dict, earlier: list) -> str:
        """The event's content hash; a stop's is keyed on its turn (the newest non-stop event before it)."""
        if event["kind"] != "session_summary":
            return dedup.event_content_hash(event)
        key = None
        for _, other, _ in reversed(earlier):  # this chunk first: oldest first, like the spool
            if (other["session_id"] == event["session_id"] and other["project_root"] == event["project_root"]
                    and other["kind"] not in ("session_summary", "note")):
                key = other["event_id"]
                break
        if key is None:
            key = self.store.last_turn_event_id(project_id(event["project_root"]), event["session_id"],
                                                event["event_id"])
        return dedup.stop_content_hash(event, key)

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
                data = json.loads(raw)
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
            clean = scrub_event(data, self.scrubber)
            fresh.append((path, clean, self._content_hash(clean, fresh)))
        stored_hashes = self.store.content_hashes_present({h for _, _, h in fresh})
        stored_at = isotime.now_iso()
        for path, clean, content_hash in fresh:
            if self._is_duplicate(clean, content_hash, seen_hashes, stored_hashes):
                done.append((path, None))
                stats.duplicates += 1
                continue
            done.append((path, clean["event_id"]))
            seen_hashes.setdefault(content_hash, []).append(clean["received_at"])
            rows.append(event_row(clean, content_hash, stored_at, actor=self.settings.team.actor))
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
            raise StoreCorrupt(f"{len(missing)} committed events do not read back from {self.db_path()}; "
                               "their spool files are kept",
                               "run `kirolearn repair`: it backs the file up, recovers what it can and re-ingests "
                               "the spool")
        return done

    def _quarantine(self, path: str, reason: str) -> None:
        try:
            spool.quarantine(path, reason)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SpoolError(f"cannot move {path} into the spool's quarantine folder ({exc.strerror or exc})",
                             f"make {os.path.dirname(path)} and {spool.root()} writable by you, then drain again") from None

    def check_store(self, before: bool = True) -> None:
        """Raise StoreCorrupt when the store's integrity check (SQLite's quick_check) finds it damaged."""
        problem = self.store.integrity_problem()
        if problem:
            what = "nothing was ingested" if before else "the spool files of this drain are kept"
            raise StoreCorrupt(f"the database {self.db_path()} is damaged ({problem}); {what}",
                               "run `kirolearn repair`: it backs the file up, recovers what it can and re-ingests "
                               "the spool, which keeps every event until then")
        self.last_check = time.monotonic()

    def db_path(self) -> str:
        try:
            return self.local.database_file() or "kirolearn.db"
        except Exception:  # noqa: BLE001 - only for a message
            return "kirolearn.db"

    def release(self, done: "list[tuple[str, str | None]]", stats: DrainStats) -> None:
        """Unlink spool files once the store passes quick_check after every step of the run."""
        if not done:
            return
        self.check_store(before=False)  # rows were read back right after their commit; now the whole file
        for path, _ in done:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                left = len(done) - stats.released
                raise SpoolError(
                    f"stored {left} events but cannot remove their spool files from {os.path.dirname(path)} "
                    f"({exc.strerror or exc})",
                    f"make that folder writable by you (chmod u+w); the next drain recognises them as stored "
                    f"and removes them") from None
            stats.released += 1

    # -- extraction -------------------------------------------------------------------------

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
            # a session's last turn, still open after its last stop, goes too when it is idle or flushed
            # (one `drain --flush` extracts everything)
            cut = next((i + 1 for i, e in enumerate(events) if e["event_id"] == up_to), len(events))
            rest = events[cut:]
            events = events[:cut]
            if rest and not (flush or now - _iso_to_dt(group["last_received_at"]).timestamp()
                             >= self.settings.batch.idle_seconds):
                rest = []
            for part, why in ((events, reason), (rest, "flush" if flush else "idle")):
                if part:
                    batches.append(
                        extract.Batch(group["project_id"], part[0]["project_root"], group["session_id"], part, why))
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
        return bool(self.settings.extract.model) and self.model_failures >= self.settings.extract.breaker_failures

    def _note_model(self, ok: bool, error: str = "") -> None:
        if ok:
            if self.model_failures or state.read(state.MODEL).get("consecutive_failures"):
                state.try_update(state.MODEL, consecutive_failures=0, last_success_at=isotime.now_iso())
            self.model_failures = 0
            return
        self.model_failures += 1
        previous = int(state.read(state.MODEL).get("consecutive_failures", 0) or 0)
        state.try_update(state.MODEL, consecutive_failures=max(previous + 1, self.model_failures),
                         model=self.settings.extract.model, last_error=error[:500],
                         last_failure_at=isotime.now_iso())

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

    def _records(self, batch: extract.Batch, candidates: list, run_id: str, now_iso: str) -> "tuple[list, list]":
        """Scrub, then clip (a redaction marker can be longer than what it replaced), then validate.

        Returns (records, problems): a candidate that still fails validation is
        dropped with a note instead of failing the whole batch.
        """
        records, problems = [], []
        by_id = {e["event_id"]: e for e in batch.events}
        for cand in candidates:
            source = cand.pop("source_event_ids", None) or batch.event_ids  # per turn when the extractor knows
            first = by_id.get(source[0], batch.events[0])
            who = team.attribution(self.settings, actor=first.get("actor"), host=first.get("host"),
                                   agent=first.get("agent"))
            cand = self.scrubber.scrub_value(cand)
            cand.update(
                title=clip(" ".join(str(cand.get("title", "")).split()), TITLE_MAX),
                summary=clip(str(cand.get("summary", "")), SUMMARY_MAX),
                facts=clip_list(cand.get("facts"), FACT_MAX, FACTS_COUNT_MAX),
                concepts=clip_list(cand.get("concepts"), CONCEPT_MAX, CONCEPTS_COUNT_MAX),
                files_touched=clip_list(cand.get("files_touched"), FILE_MAX, FILES_KEPT),
            )
            try:
                records.append(MemoryRecord(
                    record_id="mr_" + new_ulid(), project_id=batch.project_id, project_root=batch.project_root,
                    session_id=batch.session_id, source_event_ids=source, run_id=run_id,
                    created_at=now_iso, **who, **cand))
            except ValidationError as exc:
                first = exc.errors()[0]
                problems.append(f"dropped a candidate: {'.'.join(map(str, first['loc']))}: {first['msg']}")
        return records, problems

    def extract_batch(self, batch: extract.Batch, stats: DrainStats) -> None:
        """Extract one batch and commit its records, or leave it buffered on failure."""
        run_id = new_ulid()
        started = isotime.now_iso()
        fallback = self._fallback_reason(batch)
        run = {"run_id": run_id, "batch_key": batch.key, "project_id": batch.project_id,
               "session_id": batch.session_id, "reason": batch.reason, "event_count": len(batch.events),
               "started_at": started, "model": self.settings.extract.model, "fallback_reason": fallback,
               "error": ""}
        if self.settings.extract.model and not fallback:
            if self.llm_deadline is not None and time.monotonic() >= self.llm_deadline:
                return  # this drain spent its model time: the batch waits for the next one
            stats.extractor = "llm"
            began = time.monotonic()
            try:
                result = extract.llm_extract(batch, self.settings, self.complete, sleep=self.sleep,
                                             deadline=self.llm_deadline)
            except extract.ExtractionError as exc:
                stats.llm_seconds = round(stats.llm_seconds + time.monotonic() - began, 3)
                self._note_model(False, str(exc))
                partial = getattr(exc, "result", None)
                stats.llm_failures += 1
                self.store.record_failed_run(dict(
                    run, extractor="llm", outcome="failed", error=self.scrubber.scrub_text(str(exc))[:2000],
                    finished_at=isotime.now_iso(),
                    request=partial.request if partial else "",
                    prompt_tokens=partial.prompt_tokens if partial else 0,
                    completion_tokens=partial.completion_tokens if partial else 0,
                    cost_usd=partial.cost_usd if partial else 0.0,
                    **self._provenance(partial),
                ))
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
            run.update(extractor="llm", request=result.request, prompt_tokens=result.prompt_tokens,
                       fallback_reason=result.note, **self._provenance(result),
                       completion_tokens=result.completion_tokens, cost_usd=result.cost_usd,
                       error="; ".join(result.errors))
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
        run.update(outcome="ok", finished_at=isotime.now_iso(),
                   error="; ".join(filter(None, [run.get("error", ""), *problems]))[:2000])
        stats.records_written += self.store.commit_extraction(run, records, batch.event_ids)
        stats.batches_extracted += 1

    # -- a model's answers (#36) --------------------------------------------------------------

    def _provenance(self, result) -> dict:
        """The run row's trace of a model call: prompt version, structured-output form, raw answer (scrubbed)."""
        answer = getattr(result, "answer", "") if result is not None else ""
        return {"prompt_version": extract.PROMPT_VERSION, "response_form": getattr(result, "form", "") or "",
                "answer": self.scrubber.scrub_text(answer)[:extract.ANSWER_KEPT_CHARS] if answer else ""}

    def _botched(self, batch: extract.Batch, run: dict, reason: str, stats: DrainStats) -> None:
        """A batch whose model answer was unusable: this batch only goes to the deterministic extractor, now."""
        stats.fallbacks += 1
        run["fallback_reason"] = f"model answer unusable: {reason}"[:500]
        log.warning("batch %s (%d events): the model's answer was unusable, deterministic extractor used: %s",
                    batch.key, len(batch.events), reason[:300])

    # -- whole runs ---------------------------------------------------------------------------

    def expire_events(self) -> int:
        """Delete extracted events past `retention.events_days`; returns how many."""
        days = self.settings.retention.events_days
        if not days:
            return 0
        return self.store.expire_events(isotime.shift(isotime.now_iso(), -days * 86400))

    def expire_forgotten(self) -> int:
        """Purge tombstones forgotten more than `retention.forgotten_days` ago (their bytes go); returns how many."""
        days = self.settings.retention.forgotten_days
        if not days:
            return 0
        return self.store.expire_forgotten(isotime.shift(isotime.now_iso(), -days * 86400))

    def embed_records(self, stats: DrainStats) -> None:
        """Vectors for new records (semantic recall); a model that cannot load leaves search lexical."""
        from kirolearn.recall import semantic  # numpy and the model load only here, in the drainer

        semantic.enrich_pending(self.local.db)  # plain text for the hook's index: no model needed
        if stats.records_written:
            self.local.refresh_term_docs()  # word counts the hook reads with one index range

    def embed_vectors(self, stats: DrainStats, seconds: "float | None" = EMBED_SECONDS) -> None:
        """Vectors, last in a pass, bounded (EMBED_SECONDS) and ended between two batches when new turns
        reach the spool: a backfill never holds up the drain; the next pass goes on with it (--watch: at
        once), words find the rest meanwhile. `seconds` None (--flush): every vector now."""
        from kirolearn.recall import semantic

        self.vectors_pending = False
        if self.settings.embeddings.model.strip().lower() not in ("", "none", "off"):
            stats.records_embedded, stats.embedding_error = semantic.index_with_settings(
                self.local.db, self.settings, seconds=seconds,
                interrupt=None if seconds is None else (lambda: bool(spool.ready_files())))
            self.vectors_pending = (bool(stats.records_embedded)
                                    and semantic.vectors_pending(self.local.db, self.settings) > 0)

    def run_once(self, flush: bool = False) -> DrainStats:
        """Drain everything in the spool once, extract every ready batch, then release the spool files.

        Spool files are unlinked last (see `release`): if extraction, retention
        or the store fails on the way, every one of them stays for the next run.
        """
        start = time.monotonic()
        stats = DrainStats(extractor="llm" if self.settings.extract.model else "deterministic")
        now = time.time()
        files = spool.ready_files()
        if self.last_check is None or files and time.monotonic() - self.last_check >= RECHECK_SECONDS:
            self.check_store()  # a damaged store takes nothing in: the spool keeps it all
        self.recover_tmp(stats, now)
        files = spool.ready_files()
        chunk = self.settings.drain.chunk_size
        done = []
        for i in range(0, len(files), chunk):
            done += self.ingest(files[i : i + chunk], stats)
            if self.progress:
                self.progress(min(i + chunk, len(files)))
        self._half_open()
        budget = self.settings.extract.drain_llm_budget_seconds
        self.llm_deadline = time.monotonic() + budget if budget else None
        for batch in self.ready_batches(time.time(), flush=flush):
            self.extract_batch(batch, stats)
        stats.model_breaker_open = self.breaker_open()
        stats.expired_events = self.expire_events()
        self.expire_forgotten()
        self.embed_records(stats)
        stats.pending_events = self.store.pending_event_count()
        self.release(done, stats)
        self.note_counts()
        stats.team = self.sync_team()
        # last: embedding (a contextual model is CPU-bound) never holds up the spool or the team store,
        # and the records the sync fetched get their vectors in the same pass
        self.embed_vectors(stats, None if flush else EMBED_SECONDS)  # --flush: every vector now, too
        stats.duration_ms = int((time.monotonic() - start) * 1000)
        return stats

    def note_counts(self) -> None:
        """Keep the marker outside the database (kirolearn.store.state) at what the store holds now.

        Every drain counts, not only one that read events: records written
        directly (save-summary, session-end, import, the MCP server) must count
        too if the file is later lost. The file is rewritten only when a count changed.
        """
        self.local.remember_counts(self.store.counts(), path=self.db_path())

    def sync_team(self) -> dict:
        """Send the shared projects to the team store and fetch the team's records (kirolearn.team.sync).

        After the spool files are released: the team store never holds up the local
        drain, and a server that is down loses nothing (the local store has it all).
        """
        if not self.settings.store.url:
            return {}
        now = time.monotonic()
        if self.last_team_sync is not None and now - self.last_team_sync < TEAM_SYNC_SECONDS:
            return {}
        self.last_team_sync = now
        from kirolearn.team import sync as team_sync

        found = team_sync.run(self.settings, self.local.db)
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
                    if on_pass and (stats.events_read or stats.batches_extracted or stats.quarantined
                                    or stats.team.get("records_received")):
                        on_pass(stats)
                    continue
                self.sleep(self.settings.drain.poll_seconds)
        except KeyboardInterrupt:
            pass
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        return total
