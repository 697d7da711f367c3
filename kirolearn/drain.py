"""The drainer: spool → validate → dedup → scrub → store → extract.

Holds the spool's file lock for its whole run, so a cron job, a watcher and a
manual run never process the same file twice. Invariants:
- a spool file is unlinked only after the transaction that stored it (or
  proved it a duplicate) committed; re-draining after a crash stores nothing
  twice (inserts are keyed by event id);
- a file that does not parse or validate is moved to quarantine/ with the
  reason, never dropped;
- a batch stays buffered until an extraction of it commits; a failing model
  is retried on later drains and, after `max_attempts`, replaced by the
  deterministic extractor.
"""

import json
import os
import signal
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime

from filelock import FileLock, Timeout
from pydantic import ValidationError

from . import crashpoint, dedup, extract, spool, store
from .ids import new_ulid
from .schema import FACT_MAX, FILE_MAX, SUMMARY_MAX, TITLE_MAX, Event, MemoryRecord, clip, clip_list
from .scrub import Scrubber
from .errors import DrainLocked  # noqa: F401 - re-exported for callers

LOCK_NAME = ".drain.lock"
# Envelope fields the hook generates itself and the Event model constrains to
# ids, enumerations, timestamps or known hook names: nothing a user or tool
# wrote can be in them, so the scrubber skips them (it is the drain's hot spot).
GENERATED_FIELDS = frozenset(
    ("schema_version", "agent", "event_id", "kind", "hook", "trigger", "generation", "surface", "session_source",
     "received_at", "client_version", "project_global")
)
STALE_TMP_SECONDS = 600  # a tmp file this old belongs to a hook that died mid-write


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
    duration_ms: int = 0

    def add(self, other: "DrainStats") -> None:
        """Accumulate another pass (used by --watch)."""
        for name, value in asdict(other).items():
            if name == "redactions":
                merged = Counter(self.redactions)
                merged.update(value)
                self.redactions = dict(merged)
            elif name in ("extractor", "pending_events"):
                setattr(self, name, value)
            else:
                setattr(self, name, getattr(self, name) + value)


def lock(spool_root: "str | None" = None, wait: float = 2.0) -> FileLock:
    """Acquire the spool's drain lock or raise DrainLocked."""
    spool_root = spool.ensure_layout(spool_root)
    path = os.path.join(spool_root, LOCK_NAME)
    file_lock = FileLock(path, timeout=wait)
    try:
        file_lock.acquire()
    except Timeout:
        raise DrainLocked(
            f"another kirolearn drain is running (lock {path}); it will pick up new events, nothing to do"
        ) from None
    return file_lock


def _iso_to_dt(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


class Drainer:
    """One drainer over one database; call `run_once()` (or `watch()`) while holding `lock()`."""

    def __init__(self, db, settings, *, complete=None, sleep=time.sleep, progress=None):
        self.db = db
        self.settings = settings
        self.scrubber = Scrubber(settings.scrub.extra_patterns, settings.scrub.allow,
                                 betterleaks=settings.scrub.betterleaks)
        self.complete = complete or extract.litellm_complete
        self.sleep = sleep
        self.progress = progress  # callable(n_done) or None

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
                if now - os.path.getmtime(path) < STALE_TMP_SECONDS:
                    continue
                with open(path, "rb") as fh:
                    data = json.loads(fh.read())
                Event.model_validate(data)
                os.replace(path, os.path.join(spool.root(), spool.READY, data["event_id"] + spool.SUFFIX))
                stats.recovered_tmp += 1
            except FileNotFoundError:
                continue
            except (ValueError, ValidationError, KeyError, TypeError) as exc:
                spool.quarantine(path, f"incomplete write left in tmp/: {type(exc).__name__}")
                stats.quarantined += 1

    def _row(self, event: dict, content_hash: str) -> dict:
        return {
            "event_id": event["event_id"],
            "content_hash": content_hash,
            "kind": event["kind"],
            "trigger": event["trigger"],
            "hook": event["hook"],
            "generation": event["generation"],
            "surface": event["surface"],
            "agent": event.get("agent", "kiro"),
            "session_id": event["session_id"],
            "project_id": dedup.project_id(event["project_root"]),
            "project_root": event["project_root"],
            "cwd": event["cwd"],
            "received_at": event["received_at"],
            "stored_at": store.now_iso(),
            "actor": event["actor"],
            "host": event["host"],
            "client_version": event["client_version"],
            "body": json.dumps(event, ensure_ascii=False),
            "extract_state": "pending",
        }

    def _is_duplicate(self, event: dict, content_hash: str, seen: dict) -> bool:
        window = self.settings.dedup.window_seconds
        if event["kind"] == "note" and event["trigger"] == "agentSpawn":
            since = until = None  # a session starts once: Kiro may repeat the hook on every prompt
        else:
            since = store.iso_shift(event["received_at"], -window)
            until = store.iso_shift(event["received_at"], window)
        for earlier in seen.get(content_hash, ()):
            if since is None or since <= earlier <= until:
                return True
        return store.has_content_duplicate(self.db, content_hash, since, until)

    def ingest(self, paths: "list[str]", stats: DrainStats) -> None:
        """Store one chunk of spool files in one transaction, then unlink them."""
        parsed = []
        for path in paths:
            try:
                with open(path, "rb") as fh:
                    raw = fh.read()
            except FileNotFoundError:
                continue
            except OSError as exc:
                spool.quarantine(path, f"unreadable: {exc}")
                stats.quarantined += 1
                continue
            stats.events_read += 1
            try:
                data = json.loads(raw)
                event = Event.model_validate(data)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "event"
                spool.quarantine(path, f"not a valid event: {where}: {first['msg']}")
                stats.quarantined += 1
                continue
            except (ValueError, RecursionError) as exc:
                spool.quarantine(path, f"not valid JSON: {type(exc).__name__}: {str(exc)[:200]}")
                stats.quarantined += 1
                continue
            if os.path.basename(path) != event.event_id + spool.SUFFIX:
                spool.quarantine(path, f"file name does not match event_id {event.event_id}")
                stats.quarantined += 1
                continue
            parsed.append((path, data))

        known = store.existing_event_ids(self.db, [d["event_id"] for _, d in parsed])
        rows, done, seen_hashes = [], [], {}
        before = Counter(self.scrubber.counts)
        for path, data in parsed:
            done.append(path)
            if data["event_id"] in known:
                stats.already_stored += 1
                continue
            known.add(data["event_id"])
            clean = {k: v if k in GENERATED_FIELDS else self.scrubber.scrub_value(v) for k, v in data.items()}
            content_hash = dedup.event_content_hash(clean)
            if self._is_duplicate(clean, content_hash, seen_hashes):
                stats.duplicates += 1
                continue
            seen_hashes.setdefault(content_hash, []).append(clean["received_at"])
            rows.append(self._row(clean, content_hash))
        with store.writing(self.db):
            store.insert_events(self.db, rows)
            crashpoint.reached("ingest-in-transaction")
        crashpoint.reached("ingest-after-commit")
        stats.stored += len(rows)
        delta = Counter(self.scrubber.counts)
        delta.subtract(before)
        merged = Counter(stats.redactions)
        merged.update({k: v for k, v in delta.items() if v > 0})
        stats.redactions = dict(merged)
        for path in done:  # only now: the commit above holds them
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    # -- extraction -------------------------------------------------------------------------

    def ready_batches(self, now: float, flush: bool = False) -> "list[extract.Batch]":
        """Buffered sessions whose turn ended, that grew too big, or that went idle."""
        batches = []
        for group in store.pending_sessions(self.db):
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
            events = store.pending_events(self.db, group["project_id"], group["session_id"], up_to)
            if events:
                batches.append(
                    extract.Batch(group["project_id"], events[0]["project_root"], group["session_id"], events, reason)
                )
        return batches

    def _fallback_reason(self, batch: extract.Batch) -> str:
        ex = self.settings.extract
        if not ex.model:
            return ""
        spent = store.daily_limit_reached(self.db, ex)
        if spent:
            return spent
        failures = store.failed_attempts(self.db, batch.key)
        if failures >= ex.max_attempts:
            return f"model failed {failures} times on this batch"
        return ""

    def _records(self, batch: extract.Batch, candidates: list, run_id: str, now_iso: str) -> "tuple[list, list]":
        """Scrub, then clip (a redaction marker can be longer than what it replaced), then validate.

        Returns (records, problems): a candidate that still fails validation is
        dropped with a note instead of failing the whole batch.
        """
        records, problems = [], []
        for cand in candidates:
            cand = self.scrubber.scrub_value(cand)
            cand.update(
                title=clip(" ".join(str(cand.get("title", "")).split()), TITLE_MAX),
                summary=clip(str(cand.get("summary", "")), SUMMARY_MAX),
                facts=clip_list(cand.get("facts"), FACT_MAX, 50),
                concepts=clip_list(cand.get("concepts"), 100, 50),
                files_touched=clip_list(cand.get("files_touched"), FILE_MAX, 100),
            )
            try:
                records.append(MemoryRecord(
                    record_id="mr_" + new_ulid(), project_id=batch.project_id, project_root=batch.project_root,
                    session_id=batch.session_id, source_event_ids=batch.event_ids, run_id=run_id,
                    created_at=now_iso, **cand))
            except ValidationError as exc:
                first = exc.errors()[0]
                problems.append(f"dropped a candidate: {'.'.join(map(str, first['loc']))}: {first['msg']}")
        return records, problems

    def extract_batch(self, batch: extract.Batch, stats: DrainStats) -> None:
        """Extract one batch and commit its records, or leave it buffered on failure."""
        run_id = new_ulid()
        started = store.now_iso()
        fallback = self._fallback_reason(batch)
        run = {"run_id": run_id, "batch_key": batch.key, "project_id": batch.project_id,
               "session_id": batch.session_id, "reason": batch.reason, "event_count": len(batch.events),
               "started_at": started, "model": self.settings.extract.model, "fallback_reason": fallback,
               "error": ""}
        if self.settings.extract.model and not fallback:
            stats.extractor = "llm"
            try:
                result = extract.llm_extract(batch, self.settings, self.complete, sleep=self.sleep)
            except extract.ExtractionError as exc:
                partial = getattr(exc, "result", None)
                stats.llm_failures += 1
                store.record_failed_run(self.db, dict(
                    run, extractor="llm", outcome="failed", error=str(exc)[:2000], finished_at=store.now_iso(),
                    request=partial.request if partial else "",
                    prompt_tokens=partial.prompt_tokens if partial else 0,
                    completion_tokens=partial.completion_tokens if partial else 0,
                    cost_usd=partial.cost_usd if partial else 0.0,
                ))
                if partial:
                    stats.tokens_used += partial.prompt_tokens + partial.completion_tokens
                    stats.cost_usd += partial.cost_usd
                return
            candidates = result.records
            run.update(extractor="llm", request=result.request, prompt_tokens=result.prompt_tokens,
                       fallback_reason=result.note,
                       completion_tokens=result.completion_tokens, cost_usd=result.cost_usd,
                       error="; ".join(result.errors))
            stats.tokens_used += result.prompt_tokens + result.completion_tokens
            stats.cost_usd += result.cost_usd
        else:
            if fallback:
                stats.fallbacks += 1
            candidates = extract.deterministic(batch)
            run.update(extractor="deterministic", request="")
        records, problems = self._records(batch, candidates, run_id, store.now_iso())
        crashpoint.reached("extract-before-commit")
        run.update(outcome="ok", finished_at=store.now_iso(),
                   error="; ".join(filter(None, [run.get("error", ""), *problems]))[:2000])
        stats.records_written += store.commit_extraction(self.db, run, records, batch.event_ids)
        stats.batches_extracted += 1

    # -- whole runs ---------------------------------------------------------------------------

    def expire_events(self) -> int:
        """Delete extracted events past `retention.events_days`; returns how many."""
        days = self.settings.retention.events_days
        if not days:
            return 0
        cutoff = store.iso_shift(store.now_iso(), -days * 86400)
        with store.writing(self.db):
            cursor = self.db.execute(
                "delete from events where extract_state = 'done' and received_at < ?", [cutoff])
        return cursor.rowcount

    def run_once(self, flush: bool = False) -> DrainStats:
        """Drain everything in the spool once, then extract every ready batch."""
        start = time.monotonic()
        stats = DrainStats(extractor="llm" if self.settings.extract.model else "deterministic")
        now = time.time()
        self.recover_tmp(stats, now)
        files = spool.ready_files()
        chunk = self.settings.drain.chunk_size
        for i in range(0, len(files), chunk):
            self.ingest(files[i : i + chunk], stats)
            if self.progress:
                self.progress(min(i + chunk, len(files)))
        for batch in self.ready_batches(time.time(), flush=flush):
            self.extract_batch(batch, stats)
        stats.expired_events = self.expire_events()
        from .manage import expire_forgotten  # forgotten records past retention.forgotten_days lose their bytes

        expire_forgotten(self.db, self.settings.retention.forgotten_days)
        stats.pending_events = self.db.execute(
            "select count(*) from events where extract_state = 'pending'"
        ).fetchone()[0]
        stats.duration_ms = int((time.monotonic() - start) * 1000)
        return stats

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
                has_files = bool(spool.ready_files())
                if has_files or time.monotonic() - last_idle_check >= 10 * self.settings.drain.poll_seconds:
                    stats = self.run_once()
                    last_idle_check = time.monotonic()
                    total.add(stats)
                    if on_pass and (stats.events_read or stats.batches_extracted or stats.quarantined):
                        on_pass(stats)
                    continue
                self.sleep(self.settings.drain.poll_seconds)
        except KeyboardInterrupt:
            pass
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        return total
