"""The store contract: what every kirolearn store backend does, whatever its database.

Two backends implement it: SQLite through sqlite-utils (kirolearn.store.sqlite.store's
SqliteStore over kirolearn.store.sqlite.db, the embedded default, one file per home) and
PostgreSQL (kirolearn.store.postgres.store, a team's shared store). tests/store_contract.py is
one suite of tests written against this class only; each backend runs all of it, as huey
runs one storage test class over each of its backends.

The drainer (kirolearn.pipeline.drain) is written against this class only, and runs on any
backend. What only some backends keep (the hook's word counts, recall's expansions and vectors
through `derived()`, the marker outside the file) is an optional capability call here, which a
backend without it answers with None ("not supported") and the drainer skips. So every store call
the drain makes is one the contract suite runs on both backends: event dedup by id and by content (`event_ids_present`,
`content_hashes_present`, `content_duplicate`, `last_turn_event_id`), the extraction buffer,
`commit_extraction` and the model's runs (`record_failed_run`, `failed_attempts`,
`model_spend`, `daily_limit_reached`), retention (`expire_events`, `expire_forgotten`),
`counts`, `pending_event_count`, `integrity_problem`, and the capabilities `derived`,
`refresh_term_docs`, `remember_counts` and `database_file`.

The contract speaks in plain dicts, never in a backend's rows:

- an **event** is the drain's row (`event_row` below): ids,
  `project_id`, `session_id`, `kind`, `received_at`, `content_hash`, `body` (the
  scrubbed event as JSON text), `extract_state` ('pending' or 'done'), `run_id`, …
- a **record** has the fields of kirolearn.store.record.MemoryRecord, its list
  fields (`facts`, `concepts`, `files_touched`, `source_event_ids`) as lists, plus
  `record_hash` (kirolearn.store.base.record_hash); what a backend returns may
  carry more columns (`run_id`, `expansion`, attribution), never fewer.
- a **session summary** is a session_end row, its lists (`highlights`, `pitfalls`,
  `next_steps`, `open_questions`) as lists.
- timestamps are the store's ISO text (kirolearn.core.isotime.now_iso), so they
  compare as strings in every backend.

Nothing here scrubs: every caller hands the store text that is already scrubbed
(architecture.md rule 3), and the store keeps it as given.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Iterator

from kirolearn.core.dedup import tagged_hash
from kirolearn.core.errors import StoreError
from kirolearn.core.isotime import from_datetime, now_iso
from kirolearn.core.project import project_id

# part of the contract: how search weighs fields
from kirolearn.store.fields import FIELD_WEIGHTS  # noqa: F401

RECORD_LISTS = ("facts", "concepts", "files_touched", "source_event_ids")
SUMMARY_LISTS = ("highlights", "pitfalls", "next_steps", "open_questions")
# the marks that name another record
LINK_MARKS = ("superseded_by", "merged_into")
# how `kirolearn repair` got a damaged file's rows back
RECOVER_METHOD = "sqlite3 .recover"
SALVAGE_METHOD = "row-by-row salvage (Python sqlite3)"
# the file was missing or empty
NO_CONTENT_METHOD = "none: no database content to recover"
# starts a text_hash that embeds a record's parts (no hex digest does)
PARTS_MARK = "p"


class Store(abc.ABC):
    """One kirolearn store. Every method is one transaction: it happens whole or not at all."""

    #: "sqlite" or "postgresql"; shown by `status` and `doctor`.
    backend: str = ""

    # --- schema ---

    @abc.abstractmethod
    def migrate(self) -> list[str]:
        """Apply pending schema migrations; returns the names applied (none: [])."""

    @abc.abstractmethod
    def schema(self) -> dict:
        """{"applied": [names], "pending": [names]}: where this store's schema stands."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection. The store is not used after this."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- events ---

    @abc.abstractmethod
    def add_events(self, events: list[dict]) -> int:
        """Store events; one whose event_id is present is left as it is. Returns how many were new."""

    @abc.abstractmethod
    def event_ids_present(self, event_ids) -> set[str]:
        """Which of these event ids are stored."""

    @abc.abstractmethod
    def content_hashes_present(self, content_hashes) -> set[str]:
        """Which of these content hashes some stored event has, whenever it was received (the drain's
        first, cheap pass of content dedup: only these need `content_duplicate`'s window)."""

    @abc.abstractmethod
    def content_duplicate(self, content_hash: str, since: str | None, until: str | None) -> bool:
        """Is an event with this content hash stored, received in [since, until] (both ends included;
        both None: at any time)? The drain's content dedup (Drainer._is_duplicate: the
        [dedup] window, 3 s by default, or any time for a session start)."""

    @abc.abstractmethod
    def last_turn_event_id(self, project_id: str, session_id: str, before: str) -> str | None:
        """The greatest event id below `before` among a session's stored events that a turn holds
        (neither a `session_summary` stop nor a lifecycle `note`); None when there is none. It keys a
        stop's content hash to its turn (kirolearn.core.dedup.stop_content_hash)."""

    @abc.abstractmethod
    def pending_event_count(self) -> int:
        """How many stored events wait for extraction (extract_state 'pending')."""

    @abc.abstractmethod
    def pending_sessions(self) -> list[dict]:
        """Sessions with events waiting for extraction, oldest first:
        {project_id, session_id, n, first_event_id, last_received_at, last_stop_id}."""

    @abc.abstractmethod
    def pending_events(self, project_id: str, session_id: str, up_to: str | None = None) -> list[dict]:
        """A session's waiting events (their decoded bodies), oldest first, up to an event id if given."""

    @abc.abstractmethod
    def expire_events(self, before: str) -> int:
        """Delete extracted events received before `before`; waiting ones are kept. Returns how many."""

    # --- records ---

    @abc.abstractmethod
    def commit_extraction(self, run: dict, records: list[dict], event_ids: list[str]) -> int:
        """Store an extraction's records and its run, and mark its events done, all at once.

        A record whose record_hash was forgotten is never stored again; one whose
        record_id or record_hash is present is left as it is. Returns how many were new.
        """

    @abc.abstractmethod
    def record_failed_run(self, run: dict) -> None:
        """Store a failed model extraction attempt: an extraction run dict (run_id, batch_key,
        started_at, extractor, tokens, cost_usd, error, …) kept with outcome 'failed' whatever it
        says, for the retry count (`failed_attempts`), the spend (`model_spend`) and `status`. Its
        events stay pending."""

    @abc.abstractmethod
    def failed_attempts(self, batch_key: str) -> int:
        """How many extraction runs of this batch key failed (`record_failed_run`, or a run stored
        with outcome 'failed'); runs of other batches do not count."""

    @abc.abstractmethod
    def model_spend(self, since: str) -> tuple[int, float]:
        """(tokens, dollars) of the model extraction runs (extractor 'llm', failed or not) started at
        or after `since`: prompt plus completion tokens, and cost_usd. (0, 0.0) when there are none."""

    def daily_limit_reached(self, extract_settings) -> str:
        """Why today's model budget is spent ('' if it is not): `model_spend` since 00:00 UTC against
        [extract] daily_token_limit and daily_cost_limit_usd (0: no limit), worded as spend_limit_reason."""
        return spend_limit_reason(*self.model_spend(start_of_day()), extract_settings)

    @abc.abstractmethod
    def add_records(self, records: list[dict]) -> int:
        """Store records made elsewhere (another store's, an upload), keeping their ids and record_hash.

        Skips one whose record_id or record_hash is present or whose record_hash was
        forgotten. Returns how many were new.
        """

    @abc.abstractmethod
    def get_record(self, record_id: str) -> dict | None:
        """One live record, or None (never stored, or forgotten)."""

    @abc.abstractmethod
    def list_records(
        self,
        *,
        project_id: str | None = None,
        types=None,
        since: str | None = None,
        session_id: str | None = None,
        file: str | None = None,
        limit: int = 20,
        before: tuple[str, str] | None = None,
    ) -> list[dict]:
        """Live records, newest first (created_at, then record_id), after the keyset `before`; `file`
        keeps those that touched a file of that path (or ending in /that path)."""

    @abc.abstractmethod
    def search(
        self, words: list[str], *, project_id: str | None = None, types=None, limit: int = 10
    ) -> list[dict]:
        """Records containing any of `words` in their text fields, most relevant first.

        Words are plain words, matched on their stems; none of them is ever read
        as query syntax. Relevance weighs the field a word is found in
        (FIELD_WEIGHTS) and how rare the word is. Each result carries
        `relevance` (> 0, higher is better); ranking across backends need not be
        identical, only sensible: a title match beats a summary-only match.
        """

    @abc.abstractmethod
    def latest(self, project_id: str, *, types=None, limit: int = 5) -> list[dict]:
        """A project's newest live records, optionally of some observation types."""

    # --- session summaries ---

    @abc.abstractmethod
    def add_session_summary(self, summary: dict, record: dict | None = None) -> None:
        """Store a session_end summary, and the record made from it (if any), at once."""

    @abc.abstractmethod
    def session_summaries(self, project_id: str, *, label: str | None = None, limit: int = 50) -> list[dict]:
        """A project's session summaries (of one label, if given), newest first."""

    # --- forgetting ---

    @abc.abstractmethod
    def forget(self, record_ids, *, reason: str, actor: str) -> list[dict]:
        """Take live records out of memory and search, leaving tombstones; returns the records forgotten."""

    @abc.abstractmethod
    def restore(self, record_ids, *, actor: str) -> tuple[list[dict], list[str]]:
        """Bring tombstoned records back: (records restored, ids purged for good)."""

    @abc.abstractmethod
    def expire_forgotten(self, before: str) -> int:
        """Purge (as `purge`, by actor "retention") the tombstones forgotten before `before` that still
        keep their record: retention.forgotten_days. Returns how many were purged (0: none due)."""

    @abc.abstractmethod
    def tombstones(self, record_ids) -> dict[str, dict]:
        """The tombstones of these record ids: {record_id: {record_hash, project_id, actor (who forgot it),
        forgotten_at, purged (bool), record_actor (who made the record; None once purged), seq (the
        tombstone's number in this store's change feed; None if it has none)}}. Ids not forgotten are absent."""

    @abc.abstractmethod
    def purge(self, record_ids, *, actor: str) -> int:
        """Drop what these tombstones keep (the record's text, its session summaries, its source events no
        other record cites, old audit text) except their hash and ids, so it never comes back. Live or
        unknown ids and tombstones already purged are left alone. Returns how many were purged."""

    # --- marks ---

    @abc.abstractmethod
    def set_marks(self, marks: list[dict], *, actor: str) -> list[dict]:
        """Set live records' marks: each {record_id, freshness? (current|changed|deleted), outcome?
        (failed|succeeded|unknown), reason?, at?}. A mark equal to the record's is no change; each
        change is kept in the record's audit history (action 'mark', before, after, reason, time) and
        numbered in the change feed ("marks"), so a team sync carries it. Unknown or forgotten ids are
        left alone; nothing is removed (rule 14 in docs/architecture.md). Returns [{record_id, before, after, reason}]."""

    @abc.abstractmethod
    def apply_marks(self, records: list[dict], *, actor: str = "sync") -> int:
        """Set the marks (`superseded_by`, `merged_into`: a record id or None) each record dict carries on
        the live record of its id, when they differ, with an audit row; a dict without a mark's key leaves
        it alone. Returns how many marks changed (each change is fed to `changes` as a 'record')."""

    @abc.abstractmethod
    def merge_lists(self, records: list[dict], *, actor: str = "sync") -> int:
        """A merge survivor's lists, made in another store: for each record dict whose
        `source_event_ids` hold an event the live record of its id lacks (a merge always brings its
        group's events), each list it carries (RECORD_LISTS) becomes its union with the one held, order
        kept, with a 'merge-survivor' audit row; a dict that brings no new event changes nothing (edits
        do not sync). Returns how many records changed; each change is fed to `changes` as a
        'record' (an equal union is no change, so what a sync brings back stops there)."""

    def own_lists(self, record_ids) -> list[dict]:
        """The merge survivors among these records whose lists grew in this store itself ({"record_id",
        and each of RECORD_LISTS}): what a sync sends up to `merge_lists`. A team store makes none."""
        return []

    def own_marks(self, record_ids) -> list[dict]:
        """The marks of these records set or cleared in this store itself, not received from the team
        ({"record_id", mark: value} each): what a sync sends up. A team store makes none of its own."""
        return []

    # --- change feed (what the team store uploads and the cache pulls) ---

    @abc.abstractmethod
    def changes(self, project_ids: list[str], *, after: int = 0, limit: int = 500) -> dict:
        """What happened to these projects' records after change number `after`, oldest first.

        Returns {"records": [records that arrived and are still live], "forgotten":
        [{record_id, record_hash, project_id, actor (who forgot it), forgotten_at,
        record_actor (who made the record; None when unknown)} of tombstones that
        arrived], "purged": [{record_id, record_hash, project_id, purged_at} of
        tombstones purged], "marks": [{record_id, project_id, freshness, outcome} of live records
        whose marks changed, their values now], "after": the number to pass next time}. Numbers only
        grow and are never reused; at most `limit` changes are read per call;
        calling again with the returned `after` until "after" stops moving reads
        everything once.
        """

    @abc.abstractmethod
    def events_since(
        self,
        project_ids: list[str],
        stored_since: str | None,
        *,
        after: tuple[str, str] | None = None,
        limit: int = 1000,
    ) -> list[dict]:
        """These projects' events stored at or after `stored_since` (None: all), in (stored_at, event_id)
        order, after the keyset `after` = (stored_at, event_id) of the last one read: the events an
        upload has not sent yet (a resend is harmless, add_events is idempotent)."""

    # --- figures, health, export and import ---

    @abc.abstractmethod
    def counts(self) -> dict:
        """{"events": n, "records": n}: how many events and live records the store holds (the drain
        keeps them in the marker outside the store, so a lost file is told from a new one)."""

    @abc.abstractmethod
    def integrity_problem(self) -> str | None:
        """What is damaged in the store's own data, in one line (at most 200 characters), or None when
        it reads as sound. The drain asks before it ingests, when a check is due (after an unclean stop,
        else every CHECK_EVERY_PASSES passes or CHECK_EVERY_SECONDS): SQLite runs PRAGMA quick_check,
        which reads every page; a server that guards its own pages (PostgreSQL) answers None once it
        responds. A store that cannot be reached raises, as every method does."""

    # --- what the features above the store ask ---
    # A backend that cannot answer says so (`unsupported`).

    def unsupported(self, what: str) -> StoreError:
        """The error a backend raises for a call it does not support."""
        return StoreError(
            f"the {self.backend or 'current'} store does not support {what}",
            "run this against your own home's store (kirolearn's default)",
        )

    def events_by_ids(self, event_ids, limit: int = 200) -> list[dict]:
        """Stored events (body decoded, plus kind, trigger, session_id, received_at, extract_state,
        run_id), oldest first, at most `limit`; ids not stored are left out."""
        raise self.unsupported("reading events by id")

    def session_events(self, project_id: str, session_id: str) -> list[tuple[str, str]]:
        """(event_id, body as JSON text) of a session's stored events, in arrival order."""
        raise self.unsupported("reading a session's events")

    def session_agent(self, project_id: str, session_id: str) -> str | None:
        """The agent whose events a session holds (its newest event's), None when it has none."""
        return None

    def add_run(self, run: dict) -> None:
        """Store one model run that is no drain batch (a session's auto-compress, a judge's question)."""
        raise self.unsupported("storing a model run")

    def run_by_id(self, run_id: str | None) -> dict | None:
        """An extraction run without its prompt text, or None."""
        return None

    def model_runs_since(self, since: str) -> dict:
        """What the model did since a time (`status`): {batches, failed_attempts, latency_ms_avg,
        latency_ms_max, fallbacks, fallback_reasons: {reason: n}, supersede_questions, supersede_answered}."""
        raise self.unsupported("model run figures")

    def record_drain(self, drain_id: str, started_at: str, stats: dict, error: str = "") -> None:
        """Keep one drain pass's figures (`status` reads the newest)."""
        raise self.unsupported("recording a drain pass")

    def add_record(self, record: dict) -> bool:
        """Store one record a person or an agent made here (a saved turn summary, an observation), unless
        its id is present; saved again after a forget, it is stored again. True when it was added."""
        return self.add_records([record]) == 1

    def record_ids_with_prefix(self, prefix: str, limit: int = 10) -> list[str]:
        """Ids of live and forgotten records that start with `prefix` (sorted; at most `limit`)."""
        raise self.unsupported("shortened record ids")

    def record_ids_of_session(self, session_id: str, project_id: str | None = None) -> list[str]:
        """Live record ids of one session (of one project, when given), oldest first."""
        raise self.unsupported("a session's records")

    def edit(self, record_id: str, changes: dict, *, actor: str, reason: str = "") -> dict | None:
        """Change a live record's text fields; the old values go to its audit history. Returns the
        record as it is now, None when it is not live."""
        raise self.unsupported("editing records")

    def audit(self, record_id: str) -> list[dict]:
        """A record's audit history, oldest first (before/after decoded; None once purged)."""
        return []

    def projects(self) -> list[dict]:
        """Every project with records: project_id, project_root, records, last_at; newest first."""
        raise self.unsupported("the project list")

    def session_info(self, project_id: str, session_id: str) -> dict:
        """A session's span: {session_id, events, records, first_at, last_at, session_summaries}."""
        raise self.unsupported("session figures")

    def session_labels(self, project_id: str, session_ids) -> dict[str, dict]:
        """{session_id: {"prompt": its first prompt (or oldest record's title), "first_at"}}."""
        raise self.unsupported("session labels")

    def list_session_summaries(
        self, *, project_id: str | None = None, limit: int = 20, before: tuple[str, str] | None = None
    ) -> list[dict]:
        """session_end summaries newest first, after the keyset `before` = (ended_at, id)."""
        raise self.unsupported("listing session summaries")

    def get_forgotten(self, record_id: str) -> dict | None:
        """A tombstone: its facts, 'record' (the kept record, None once purged) and 'session_summaries'."""
        return None

    def list_forgotten(
        self, *, project_id: str | None = None, limit: int = 50, before: str | None = None
    ) -> list[dict]:
        """Tombstones newest first (get_forgotten's shape), after `before` = 'forgotten_at|record_id'."""
        return []

    def purge_report(self, record_ids, *, actor: str) -> dict:
        """`purge`, with what it did: {"purged": n, "events_deleted": n or None, "wal_checkpoint": …}."""
        return {"purged": self.purge(record_ids, actor=actor), "events_deleted": None, "wal_checkpoint": None}

    def purgeable(self, *, record_ids=None, older_than: str | None = None) -> list[str]:
        """The tombstones `purge` would empty: all, these ids, or those forgotten before a time."""
        raise self.unsupported("purging")

    def purge_edit_history(self, record_ids=None) -> int:
        """Drop the replaced text that edits kept (all, or some records'); returns how many versions."""
        return 0

    def compact(self) -> dict:
        """Rewrite what deleted rows left behind so their bytes are gone from the files:
        {"wal_checkpoint": …} where a write-ahead log was truncated."""
        return {}

    def import_forgotten(self, pairs: list[tuple[dict, dict]]) -> dict:
        """Store exported forgotten records as tombstones: (record, its 'forgotten' mark) pairs.
        Returns {"added": n, "present": n}."""
        raise self.unsupported("importing forgotten records")

    def export(self, out) -> int:
        """Write `kirolearn export`'s JSON Lines to `out` (every event, record, summary and tombstone,
        with this machine's file state); returns how many lines."""
        raise self.unsupported("export")

    def scrubbed_with(self) -> int | None:
        """The scrubbing rules' version the stored text was last scrubbed with (None: unknown)."""
        return None

    def rescrub(self, scrub_cell, version: int, on_chunk=None) -> dict:
        """Run `scrub_cell(table, column, value, derived) -> value` over every stored text, chunk by
        chunk (each committed: an interrupted rescrub resumes), rebuild the text index, note `version`,
        then make the replaced bytes leave the files. Returns {"resumed", "rows_changed": {table: n},
        "fts_rebuilt", "checkpoint_complete", "bytes_before", "bytes_after"}."""
        raise self.unsupported("rescrub")

    def rekey_projects(self, project_id_of) -> dict[str, str]:
        """Move the rows of projects whose id changed (`project_id_of(root)` now gives another: a git
        remote added since they were stored) to the new id; returns {old id: new id}."""
        return {}

    # --- marks on evidence ---

    def has_marks(self) -> bool:
        """Whether the drain marks records in this store (supersede, merge): the embedded store does; a
        team store receives its members' marks instead."""
        return False

    def set_mark(
        self, record_id: str, mark: str, value: str | None, *, actor: str, reason: str = "", **evidence
    ) -> bool:
        """Set (or clear, with None) `superseded_by` or `merged_into` on a live record, with an audit
        row; False when unchanged or not live."""
        raise self.unsupported("setting marks")

    def merge_records(
        self, survivor_id: str, merged_ids: list[str], union: dict, *, actor: str, reason: str
    ) -> bool:
        """Fold records into a survivor: its lists become `union`, the others are marked merged_into it."""
        raise self.unsupported("merging records")

    def claims_of(self, record_ids) -> dict[str, list[dict]]:
        """{record_id: [its claims]}: each {file, kind, key, digest, shown, lines, fingerprint} and this
        machine's check of it (state, now, path, blob, why, by_record: the record that changed it,
        checked_at). A backend that keeps no check answers {}."""
        return {}

    def records_claiming(
        self, project_id: str, identities, *, before: str = "", exclude=(), stored_before: str = ""
    ) -> list[dict]:
        """The claims of the project's live, unmarked records that cite one of these (file, kind, key),
        newest first, through an index (claims_of's shape): those created at or before `before`, or,
        with `stored_before` (a record id), those stored before that record, whatever their clocks said."""
        return []

    def set_claim_states(self, rows: list[dict]) -> int:
        """Keep this machine's check of claims: each {record_id, file, kind, key, state, now?, path?,
        blob?, why?, by?, at?}. Returns how many claims it changed."""
        return 0

    def records_citing(self, record_ids) -> dict[str, list[str]]:
        """{cited id: [ids of the records that cite it]}, through an index."""
        return {}

    def records_with_signature(self, project_id: str, signature: str) -> list[dict]:
        """The project's live, unmerged records whose work has this signature, oldest first."""
        return []

    def signature_groups(self, project_id: str, limit: int = 1000) -> list[list[str]]:
        """The project's sets of two or more live, unmerged records with one work signature."""
        return []

    def pin(self, record_id: str, rule: str, at: str) -> None:
        """Pin a record against a rule ('supersede', 'merge'): a restore of what that rule did."""
        raise self.unsupported("pinning records")

    def marked_by(self, record_id: str) -> dict:
        """The other end of a record's marks: {"supersedes": ids, "merged_from": ids}."""
        return {"supersedes": [], "merged_from": []}

    # --- optional capabilities: None means "not supported" ---

    def recall_connection(self):
        """The read connection lexical recall ranks on (the hook's reader, kirolearn.store.sqlite.reader),
        or None where recall cannot rank (a team store: recall reads this home's copy)."""
        return None

    def marks_of(self, record_ids) -> dict[str, tuple]:
        """{record_id: (freshness, outcome)} of these live records, for recall's ranking."""
        return {}

    def derived(self) -> DerivedIndex | None:
        """The store-side object recall's passes write expansions and vectors through (DerivedIndex),
        or None when the backend keeps neither (the team store: its records' expansions come with them)."""
        return None

    def refresh_term_docs(self, force: bool = False) -> bool | None:
        """Refresh the hook's word counts (a copy of the text index's document counts, which the
        standard-library hook reads) when the store changed enough, or `force`d: True if refreshed,
        False if not needed, None when the backend keeps none."""
        return None

    def remember_counts(self, counted: dict | None = None) -> bool | None:
        """Keep `counted` (counts(); None: the store counts, when rows were added since its last count)
        in the marker outside the store, which tells a lost or emptied file from a new one: True if
        rewritten, False if unchanged, None when there is no file to lose."""
        return None

    def database_file(self) -> str | None:
        """The file the store lives in ('' in memory), for messages; None for a server."""
        return None

    def freshness_due(self, limit: int) -> list[dict] | None:
        """Up to `limit` records whose files this machine recorded (file_state), the longest unchecked
        first, through an index: the drain's bounded freshness pass. None when the backend
        keeps no file state (a team store: a teammate's working tree is another)."""
        return None

    def note_checked(self, record_ids, at: str) -> None:
        """Put these records at the back of the freshness queue (checked at `at`); a no-op where
        freshness_due is None."""
        return None

    @abc.abstractmethod
    def figures(self, since: str, *, projects: bool = True) -> dict:
        """What `status` shows: {events, records, forgotten, pending_events, projects: [{project_root,
        events, pending, records}], last_drain, extraction_failures_24h (failed model runs since `since`)}."""

    @abc.abstractmethod
    def export_objects(self) -> Iterator[dict]:
        """Every stored object with its "type" ("event", "record", "summary") beside its fields, in a
        stable order: events by id, records by (created_at, record_id), summaries by (ended_at, id).
        Events come as the event dicts above (body as JSON text), not as `kirolearn export` lines."""

    @abc.abstractmethod
    def import_objects(self, objects: list[dict]) -> dict:
        """Store exported objects that are not there yet (forgotten records stay forgotten), at once.
        Returns {"events"|"records"|"summaries": {"added": n, "present": n}, "forgotten_skipped": n}."""


class DerivedIndex(abc.ABC):
    """What recall derives from records and keeps in the store (Store.derived()): each record's
    `expansion` text (its session neighbours' words, which the hook searches) and its vectors. Every
    method finds pending work through an index or a watermark, never by reading every record
    (architecture.md rule 15), and each write commits whole, so a killed backfill resumes."""

    @abc.abstractmethod
    def sessions_needing_expansion(self, limit: int = 500) -> list[tuple[str, str, int]]:
        """(project_id, session_id, rowid of its first record without an expansion), at most `limit`."""

    def expansions_pending(self) -> int | None:
        """How many records await their expansion (a hand-run drain's progress bar), None when unknown."""
        return None

    @abc.abstractmethod
    def session_records(
        self, project_id: str, session_id: str, from_rowid: int = 0, context: int = 0
    ) -> list[dict]:
        """A session's records in creation order from `from_rowid` on, after the `context` records
        before it: dicts of rowid, record_id, title, summary, expansion."""

    @abc.abstractmethod
    def set_expansions(self, values: dict[str, str]) -> None:
        """Write derived expansion text: record id -> text."""

    @abc.abstractmethod
    def clear_expansions(self) -> None:
        """Mark every record's expansion as not derived (reindex)."""

    @abc.abstractmethod
    def vectors_to_embed(
        self, model_id: str, limit: int = 512, *, before_parts: bool = False
    ) -> tuple[list[dict], dict]:
        """(records to embed with the model: rowid, record_id, project_id, title, summary, facts,
        concepts; the cursor save_vectors commits with their vectors, whose "more" says whether a next
        call may find more even when these are none)."""

    @abc.abstractmethod
    def save_vectors(self, rows: list[dict], cursor: dict | None = None) -> None:
        """Store vector rows (record_id, project_id, model_id, dimensions, vector, text_hash) and the
        cursor, in one transaction."""

    @abc.abstractmethod
    def count_to_embed(self, model_id: str, *, before_parts: bool = False) -> int:
        """How many records vectors_to_embed would still give."""

    @abc.abstractmethod
    def drop_vectors(self, keep_model_id: str | None = None) -> int:
        """Delete the vectors of every model but `keep_model_id` (all when None); returns how many."""

    # What recall reads back: SQLite's are VectorRows' methods.
    def database_file(self) -> str:
        """The file the vectors live beside (an index's folder is named after it); '' in memory."""
        return ""


def assemble_changes(
    feed: list[dict], live: dict, gone: dict, purged: dict, marked: dict | None = None
) -> dict:
    """Store.changes' answer from a read of the change feed (dicts with seq, record_id, change) and
    what each change names, by record id: live records, tombstones, purged tombstones, and the
    marks of live records whose marks changed ({record_id, project_id, freshness, outcome}: their
    values now). In feed order; a record forgotten since it arrived is no longer live, so it is not sent."""
    records, forgotten, purges, marks = [], [], [], []
    marked = dict(marked or {})
    for c in feed:
        if c["change"] == "mark":
            if c["record_id"] in marked:
                marks.append(marked.pop(c["record_id"]))
            continue
        if c["change"] == "record" and c["record_id"] in live:
            records.append(live.pop(c["record_id"]))
        elif c["change"] == "forgotten" and c["record_id"] in gone:
            forgotten.append(gone.pop(c["record_id"]))
        elif c["change"] == "purged" and c["record_id"] in purged:
            purges.append(purged.pop(c["record_id"]))
    return {
        "records": records,
        "forgotten": forgotten,
        "purged": purges,
        "marks": marks,
        "after": feed[-1]["seq"],
    }


def start_of_day(now=None) -> str:
    """00:00 UTC of `now`'s day (an aware datetime; default now), in the store's format: where a
    day's model spend starts."""
    from datetime import datetime, timezone

    now = now or datetime.now(timezone.utc)
    return from_datetime(now.replace(hour=0, minute=0, second=0, microsecond=0))


def spend_limit_reason(tokens: int, dollars: float, extract_settings) -> str:
    """Why a day's spend of `tokens` and `dollars` reached [extract]'s daily limits ('' if it did not;
    a limit of 0 is none): the one wording extraction, auto_compress, status and doctor share."""
    ex = extract_settings
    if ex.daily_token_limit and tokens >= ex.daily_token_limit:
        return f"daily token limit reached ({tokens} of {ex.daily_token_limit})"
    if ex.daily_cost_limit_usd and dollars >= ex.daily_cost_limit_usd:
        return f"daily cost limit reached (${dollars:.4f} of ${ex.daily_cost_limit_usd:.2f})"
    return ""


def record_hash(data: dict) -> str:
    """The content hash that says two records are the same memory (and that a forgotten one stays gone)."""
    return tagged_hash(
        [
            data["project_id"],
            data["observation_type"],
            data["title"],
            data["summary"],
            data["source_event_ids"],
        ]
    )


def event_project_id(event: dict) -> str:
    """The project id an event carries (spool format 3: the hook computed it), else its root's."""
    carried = event.get("project_id")
    return carried if isinstance(carried, str) and carried else project_id(event["project_root"])


def event_row(
    event: dict, content_hash: str, stored_at: str | None = None, *, actor: str = "", body: str | None = None
) -> dict:
    """The stored row of a scrubbed event (what `Store.add_events` takes): its envelope as columns,
    the whole event as JSON `body` (given when the caller serialised it already), extraction 'pending'.
    `actor`, a configured one ([team] actor / KIROLEARN_ACTOR), wins over the OS user the event
    recorded; an import passes none and keeps what it reads. `stored_at` defaults to now (the drain
    passes one time per chunk)."""
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
        "project_id": event_project_id(event),
        "project_root": event["project_root"],
        "cwd": event["cwd"],
        "received_at": event["received_at"],
        "stored_at": stored_at or now_iso(),
        "actor": actor or event["actor"],
        "host": event["host"],
        "client_version": event["client_version"],
        "body": json.dumps(event, ensure_ascii=False) if body is None else body,
        "extract_state": "pending",
    }
