"""The database schema as named, append-only migrations (sqlite-utils Migrations).

A migration's number is part of its name, not its place: they apply in the order this file
defines them (so m015 runs before m011, and the three m012s and two m016s run in file order);
a store records the names it has applied. A new migration goes at the end of the file.
Never rename, reorder or edit a migration that has shipped: add a new one.
Session summaries (m008), tombstones (m011), vectors (m012) and the rest came the same way.
"""

from sqlite_utils import Migrations

migrations = Migrations("kirolearn")

RECORD_FTS_COLUMNS = ["title", "summary", "facts", "concepts", "files_touched"]


@migrations()
def m001_events(db):
    """Every stored hook event (scrubbed) and its extraction state."""
    db["events"].create(
        {
            "event_id": str,
            "content_hash": str,
            "kind": str,
            "trigger": str,
            "hook": str,
            "generation": str,
            "surface": str,
            "session_id": str,
            "project_id": str,
            "project_root": str,
            "cwd": str,
            "received_at": str,
            "stored_at": str,
            "actor": str,
            "host": str,
            "client_version": str,
            "body": str,  # the whole scrubbed event, JSON
            "extract_state": str,  # pending | done
            "run_id": str,  # the run that consumed it
        },
        pk="event_id",
        not_null={"content_hash", "kind", "session_id", "project_id", "received_at", "body", "extract_state"},
        defaults={"extract_state": "pending"},
    )
    db["events"].create_index(["content_hash", "received_at"], index_name="idx_events_content")
    db["events"].create_index(
        ["extract_state", "project_id", "session_id", "event_id"], index_name="idx_events_pending"
    )
    db["events"].create_index(["project_id", "session_id"], index_name="idx_events_session")


@migrations()
def m002_memory_records(db):
    """Memory records with their provenance, and an FTS5 index kept in sync by triggers."""
    db["memory_records"].create(
        {
            "record_id": str,
            "project_id": str,
            "project_root": str,
            "session_id": str,
            "title": str,
            "summary": str,
            "facts": str,  # JSON list
            "concepts": str,  # JSON list
            "files_touched": str,  # JSON list
            "observation_type": str,
            "strategy": str,
            "source_event_ids": str,  # JSON list
            "run_id": str,
            "record_hash": str,
            "created_at": str,
        },
        pk="record_id",
        not_null={
            "project_id",
            "title",
            "summary",
            "observation_type",
            "strategy",
            "created_at",
            "record_hash",
        },
    )
    db["memory_records"].create_index(["project_id", "created_at"], index_name="idx_records_project")
    db["memory_records"].create_index(["record_hash"], index_name="idx_records_hash", unique=True)
    db["memory_records"].enable_fts(RECORD_FTS_COLUMNS, create_triggers=True, tokenize="porter")


@migrations()
def m003_extraction_runs(db):
    """One row per extraction attempt: what was sent, what it cost, how it ended."""
    db["extraction_runs"].create(
        {
            "run_id": str,
            # first event id of the batch: groups retries of one batch
            "batch_key": str,
            "project_id": str,
            "session_id": str,
            "reason": str,  # turn-end | size | idle | flush
            "extractor": str,  # deterministic | llm
            "model": str,
            "event_count": int,
            # the prompt sent (scrubbed), or "" for deterministic
            "request": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost_usd": float,
            "outcome": str,  # ok | failed
            "error": str,
            # why the deterministic extractor ran instead of the model
            "fallback_reason": str,
            "records_written": int,
            "started_at": str,
            "finished_at": str,
        },
        pk="run_id",
        not_null={"batch_key", "extractor", "outcome", "started_at"},
        defaults={"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "records_written": 0},
    )
    db["extraction_runs"].create_index(["batch_key", "outcome"], index_name="idx_runs_batch")
    db["extraction_runs"].create_index(["started_at"], index_name="idx_runs_started")


@migrations()
def m004_drain_runs(db):
    """One row per drain: what `kirolearn status` reports as the last drain."""
    db["drain_runs"].create(
        {"drain_id": str, "started_at": str, "finished_at": str, "stats": str, "error": str},
        pk="drain_id",
    )


@migrations()
def m005_records_by_type(db):
    """Session start asks for a project's newest records of given types."""
    db["memory_records"].create_index(
        ["project_id", "observation_type", "created_at"], index_name="idx_records_project_type"
    )


@migrations()
def m006_fts_by_project(db):
    """Index project_id in the FTS table too, so a search only ranks its own project's records.

    With the project only in the joined table, FTS5 scored every project's matches
    and the join threw most away (docs/benchmarks.md, 'Scale').
    """
    db["memory_records"].disable_fts()
    db["memory_records"].enable_fts(
        RECORD_FTS_COLUMNS + ["project_id"], create_triggers=True, tokenize="porter"
    )
    db["memory_records"].rebuild_fts()


@migrations()
def m007_fts_vocabulary(db):
    """Document frequencies of indexed terms, so recall can skip words most records contain."""
    db.execute(
        "create virtual table if not exists memory_records_fts_vocab using fts5vocab(memory_records_fts, 'row')"
    )


@migrations()
def m008_session_summaries(db):
    """session_end summaries, returned by session_init and shown at session start until superseded."""
    db["session_summaries"].create(
        {
            "id": str,
            "session_id": str,
            "project": str,  # the caller's label ("general" by default)
            "project_id": str,  # resolved by the server (marker walk)
            "project_root": str,
            "branch": str,
            "summary": str,
            "highlights": str,  # JSON lists
            "pitfalls": str,
            "next_steps": str,
            "open_questions": str,
            "auto_compress": int,
            "compressed_used": int,
            "auto_compress_error": str,
            "record_id": str,  # the searchable memory record made from it
            "ended_at": str,
        },
        pk="id",
        not_null={"session_id", "project", "project_id", "summary", "ended_at"},
    )
    db["session_summaries"].create_index(
        ["project_id", "project", "ended_at"], index_name="idx_session_summaries"
    )
    db["session_summaries"].create_index(["session_id"], index_name="idx_session_summaries_session")


@migrations()
def m015_events_agent(db):
    """Which agent an event came from (event schema 2); every earlier event was Kiro's."""
    db["events"].add_column("agent", str, not_null_default="kiro")


@migrations()
def m014_placeholder_session_summaries(db):
    """Undo the placeholder summary older versions invented when auto_compress failed.

    The seed stores an empty summary; the placeholder also hid the previous real
    summary at session start. Only rows whose text is exactly that placeholder
    change; the searchable record made from it goes too.
    """
    placeholder = (
        "summary glob 'Session * ended; no summary was written (auto_compress: *).' and auto_compress = 1"
    )
    ids = [
        r[0]
        for r in db.execute(
            f"select record_id from session_summaries where {placeholder} and record_id is not null"
        ).fetchall()
    ]
    for record_id in ids:
        db.execute(
            "delete from memory_records where record_id = ? and strategy = 'mcp_session_end'", [record_id]
        )
    db.execute(f"update session_summaries set summary = '', record_id = null where {placeholder}")


@migrations()
def m011_forgotten_and_audit(db):
    """Tombstones of forgotten records and the audit trail of forget / restore / edit / purge.

    A forgotten record leaves memory_records (and so FTS and recall) at once; its
    row waits in `payload` until a purge or the retention period, so `restore`
    can bring it back. After a purge only the record_hash stays (a digest, no
    text), which is enough to keep a later drain or import from recreating it.
    """
    db["forgotten_records"].create(
        {
            "record_id": str,
            "record_hash": str,
            "project_id": str,
            "session_id": str,
            "reason": str,
            "actor": str,  # cli | mcp | viewer | retention
            "forgotten_at": str,
            # JSON {"record": row, "session_summaries": [rows]}; NULL if purged
            "payload": str,
            "purged_at": str,
        },
        pk="record_id",
        not_null={"record_hash", "forgotten_at"},
    )
    db["forgotten_records"].create_index(["record_hash"], index_name="idx_forgotten_hash")
    db["forgotten_records"].create_index(["forgotten_at"], index_name="idx_forgotten_at")
    db["record_audit"].create(
        {
            "audit_id": str,  # ULID: time-ordered
            "record_id": str,
            "action": str,  # forget | restore | edit | purge
            "actor": str,
            "reason": str,
            "at": str,
            "version": int,  # edits: 1, 2, ...
            "before": str,  # changed fields as JSON; NULL once purged
            "after": str,  # NULL once purged
        },
        pk="audit_id",
        not_null={"record_id", "action", "at"},
    )
    db["record_audit"].create_index(["record_id", "audit_id"], index_name="idx_audit_record")
    # `list` and the viewer page newest first, fast at 100k records
    db["memory_records"].create_index(["created_at", "record_id"], index_name="idx_records_created")
    db["memory_records"].create_index(["session_id", "created_at"], index_name="idx_records_session")


@migrations()
def m009_scrub_state(db):
    """Which scrub-rules version the stored text was scrubbed with (and where a rescrub stopped).

    A new store holds nothing yet, so it is as clean as the current rules; a store that already
    holds rows was scrubbed by the rules before this table existed, version 1.
    """
    from kirolearn.core.version import SCRUB_RULES_VERSION

    db["scrub_state"].create({"key": str, "value": str}, pk="key")
    holds_rows = any(
        db[t].exists() and db[t].count for t in ("events", "memory_records", "session_summaries")
    )
    db["scrub_state"].insert(
        {"key": "scrubbed_with", "value": "1" if holds_rows else str(SCRUB_RULES_VERSION)}
    )


@migrations()
def m012_record_vectors(db):
    """Embedding vectors of memory records, one per record and model.

    The model id is stored with every vector so vectors of two models never mix;
    `kirolearn reindex` rewrites them when the configured model changes.
    """
    db["record_vectors"].create(
        {
            "record_id": str,
            "project_id": str,
            "model_id": str,
            "dimensions": int,
            "vector": bytes,
            "text_hash": str,
            "updated_at": str,
        },
        pk="record_id",
        not_null={"project_id", "model_id", "dimensions", "vector"},
    )
    db["record_vectors"].create_index(["project_id", "model_id"], index_name="idx_record_vectors_project")


@migrations()
def m012_record_expansion(db):
    """A hidden text column the drainer fills from semantics, searched by the hook too.

    `expansion` holds words a record should also be found by: the text of its session
    neighbours for now (a follow-up rarely repeats the words of the turn it needs,
    but the turn next to it often has them). It is indexed as the last FTS column with a
    low weight, so the stdlib-only hook benefits with no model. NULL = not derived yet.
    """
    db["memory_records"].add_column("expansion", str)
    db["memory_records"].create_index(
        ["project_id", "session_id"], index_name="idx_records_project_session", if_not_exists=True
    )
    db["memory_records"].disable_fts()
    db["memory_records"].enable_fts(
        RECORD_FTS_COLUMNS + ["project_id", "expansion"], create_triggers=True, tokenize="porter"
    )
    db["memory_records"].rebuild_fts()


@migrations()
def m012_term_docs(db):
    """Document counts of indexed terms, copied from fts5vocab by the drainer.

    The prompt hook skips words most records contain; reading the counts from fts5vocab
    walks each term's whole doclist (docs/benchmarks.md, 'Scale'), this table is one
    index range. The row with term '' holds the record count the copy was made at.
    """
    db.execute(
        "create table if not exists term_docs (term text primary key, docs integer not null) without rowid"
    )


@migrations()
def m017_record_changes(db):
    """A change feed of records: each insert into memory_records and each tombstone gets a sequence number.

    `Store.changes` reads it (the team store's upload and cache sync).
    AUTOINCREMENT, so a number is never reused, not even after the newest record is
    forgotten; triggers, so every writer feeds it without knowing. Existing records
    and tombstones are fed in creation order.
    """
    db.execute(
        "create table if not exists record_changes (seq integer primary key autoincrement, "
        "record_id text not null, change text not null)"
    )
    db.execute(
        "insert into record_changes (record_id, change) "
        "select record_id, 'record' from memory_records order by created_at, record_id"
    )
    db.execute(
        "insert into record_changes (record_id, change) "
        "select record_id, 'forgotten' from forgotten_records order by forgotten_at, record_id"
    )
    db.execute(
        "create trigger if not exists record_changes_record after insert on memory_records begin "
        "insert into record_changes (record_id, change) values (new.record_id, 'record'); end"
    )
    db.execute(
        "create trigger if not exists record_changes_forgotten after insert on forgotten_records begin "
        "insert into record_changes (record_id, change) values (new.record_id, 'forgotten'); end"
    )


@migrations()
def m016_team_project_ids(db):
    """A project whose repository has a git remote is identified by that remote.

    Two clones of one repository, on two machines or at two paths, now share one project id.
    Rows stored under the old path-derived id of such a project move to the new id (the
    project roots are read from disk now: a root that is gone, or has no remote, keeps its id).
    """
    from kirolearn.core.project import project_id
    from kirolearn.store.sqlite.team import rekey_projects

    rekey_projects(db, project_id)


@migrations()
def m016_team_attribution(db):
    """Who made a record: actor, host and agent on records and session summaries.

    Older rows take them from the events they were made from, else from this machine (its OS
    user and host) and Kiro, the only agent before event schema 2.
    """
    from kirolearn.core.identity import os_user, this_host
    from kirolearn.store.sqlite.team import add_attribution_columns, backfill_attribution

    add_attribution_columns(db)
    backfill_attribution(db, os_user(), this_host())


@migrations()
def m018_session_end_milliseconds(db):
    """Session ends stored to the second ("…:11Z") get the store's one format ("…:11.000Z").

    Every other stored time has milliseconds (kirolearn.core.isotime), and "…:11Z" sorts after
    "…:11.500Z" as text: without this a session that ended in the same second as an
    older one could read as the older of the two.
    """
    db.execute(
        "update session_summaries set ended_at = substr(ended_at, 1, 19) || '.000Z' "
        "where ended_at glob '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]Z'"
    )


@migrations()
def m019_purge_changes(db):
    """The change feed also numbers purges ('purged'), so a team sync can carry a purge.

    A trigger on forgotten_records.purged_at going from NULL to a time; tombstones purged
    before this migration are fed once, in purge order. An index on record_id lets a sync
    read a tombstone's feed number (Store.tombstones).
    """
    db.execute(
        "insert into record_changes (record_id, change) select record_id, 'purged' from forgotten_records "
        "where purged_at is not null order by purged_at, record_id"
    )
    db.execute(
        "create trigger if not exists record_changes_purged after update of purged_at on forgotten_records "
        "when old.purged_at is null and new.purged_at is not null begin "
        "insert into record_changes (record_id, change) values (new.record_id, 'purged'); end"
    )
    db.execute("create index if not exists idx_record_changes_record on record_changes (record_id, seq)")


@migrations()
def m020_pending_work(db):
    """Pending derived work found through indexes and watermarks, not by reading every record.

    - `idx_records_expansion_pending`: a partial index of the records whose expansion is not
      derived yet, so a drain pass finds them in proportion to how many there are;
    - `vector_progress`: per embedding model, a watermark on the change feed (records written
      since) and a rowid cursor for the one backfill of what was there before (NULL once done);
    - `vectors_stale`: records whose vector was deleted (an edit, a forget), fed by a trigger;
    - `idx_vectors_before_parts`: the vectors a model made before it embedded parts;
    - `idx_events_expiry`: extracted events by time, for retention.
    """
    db.execute(
        "create index if not exists idx_records_expansion_pending on memory_records (project_id, session_id) "
        "where expansion is null"
    )
    db.execute(
        "create table if not exists vector_progress (model_id text primary key, feed_seq integer not null, "
        "backfill_after integer)"
    )
    db.execute("create table if not exists vectors_stale (record_id text primary key)")
    db.execute(
        "create trigger if not exists vectors_stale_deleted after delete on record_vectors begin "
        "insert or ignore into vectors_stale (record_id) values (old.record_id); end"
    )
    db.execute(
        "create index if not exists idx_vectors_before_parts on record_vectors (model_id, record_id) "
        "where substr(coalesce(text_hash, ''), 1, 1) != 'p'"
    )
    # retention reads this range, not every event
    db.execute(
        "create index if not exists idx_events_expiry on events (received_at) where extract_state = 'done'"
    )


@migrations()
def m020_record_freshness_outcome(db):
    """a record's `outcome` and `freshness` marks, and what its files were when it was stored.

    `outcome` (failed | succeeded | unknown) is decided at extraction; `freshness` (current |
    changed | deleted) by the drain's re-checks against the working tree. `file_state` (JSON:
    the HEAD commit and each touched file's git blob id, size and line fingerprint) is taken
    by the drain when it stores a record; `freshness_checked_at` is when it was last checked,
    and the partial index serves the drain's "oldest-checked first" pass (architecture.md rule 15):
    records with no file_state (old ones, teammates', records that touched no file) are not in it.
    Old records start `unknown` / `current`. A change of mark feeds record_changes ('mark') so a
    team sync sends it, as an insert feeds 'record'.
    """
    table = db["memory_records"]
    table.add_column("outcome", str, not_null_default="unknown")
    table.add_column("freshness", str, not_null_default="current")
    table.add_column("file_state", str)
    table.add_column("freshness_checked_at", str)
    db.execute(
        "create index if not exists idx_records_freshness_due on memory_records "
        "(freshness_checked_at, record_id) where file_state is not null"
    )
    db.execute(
        "create trigger if not exists record_changes_mark after update of freshness, outcome "
        "on memory_records when old.freshness is not new.freshness or old.outcome is not new.outcome "
        "begin insert into record_changes (record_id, change) values (new.record_id, 'mark'); end"
    )


@migrations()
def m021_record_supersede_merge(db):
    """Two marks on a record: `superseded_by` (a newer record changed what it stated) and
    `merged_into` (consolidation folded it into a survivor). Both name another record's id; NULL = none.

    Nothing is deleted: recall demotes a superseded record and hides a merged one, and `kirolearn
    restore ID` clears either mark. The reverse lookups ("supersedes Y", "merged from Z") use the
    indexes; a mark that changes feeds record_changes ('record'), so the team sync sends it.
    Existing records start with neither mark.
    """
    columns = {c.name for c in db["memory_records"].columns}
    for name in ("superseded_by", "merged_into"):
        if name not in columns:
            db["memory_records"].add_column(name, str)
    db.execute(
        "create index if not exists idx_records_superseded_by on memory_records (superseded_by) "
        "where superseded_by is not null"
    )
    db.execute(
        "create index if not exists idx_records_merged_into on memory_records (merged_into) "
        "where merged_into is not null"
    )
    db.execute(
        "create trigger if not exists record_changes_marks after update of superseded_by, merged_into "
        "on memory_records when old.superseded_by is not new.superseded_by "
        "or old.merged_into is not new.merged_into begin "
        "insert into record_changes (record_id, change) values (new.record_id, 'record'); end"
    )


@migrations()
def m022_extraction_answers(db):
    """A model run keeps what it was asked with and what it answered: the prompt's version,
    the structured-output form the server took, and the raw answer (scrubbed, cut to 8,000
    characters), so a bad record can be traced to its run."""
    for column in ("answer", "prompt_version", "response_form"):
        if column not in db["extraction_runs"].columns_dict:
            db["extraction_runs"].add_column(column, str)


@migrations()
def m023_claims(db):
    """Marks on evidence: each record's claims about the code, what it cites, its work's signature.

    - memory_records gains `claims` (JSON: what the record says, the same on every machine),
      `cites` (JSON: record ids), `work_signature` and `pinned` (JSON: rules a restore pinned
      it against);
    - `record_claims`: one row per claim with this machine's check of it (state, the value now,
      where the file is now, the blob last read), found by its identity (project, file, kind,
      key) when a newer record writes the same thing; `record_cites`: who cites whom. Both are
      kept by triggers from the record's own columns, so every way a record arrives (a drain,
      an import, a restore, a team sync) indexes its claims and every way it leaves drops them;
    - `idx_records_signature`: identical work found by an index; `idx_records_claims_due`: the
      re-check pass's queue, records with claims only.
    """
    columns = {c.name for c in db["memory_records"].columns}
    for name in ("claims", "cites", "work_signature", "pinned"):
        if name not in columns:
            db["memory_records"].add_column(name, str)
    db.execute(
        "create table if not exists record_claims (record_id text not null, project_id text not null, "
        "file text not null, kind text not null, key text not null, digest text not null, shown text, "
        "lines text, fingerprint text, state text not null default 'current', now text, path text, blob text, "
        "why text, by_record text, checked_at text, created_at text, primary key (record_id, file, kind, key))"
    )
    db.execute(
        "create index if not exists idx_claims_identity on record_claims (project_id, file, kind, key, created_at)"
    )
    db.execute(  # a claim found again under the path its file moved to
        "create index if not exists idx_claims_moved on record_claims (project_id, path, kind, key, created_at) "
        "where path is not null"
    )
    db.execute(
        "create table if not exists record_cites (record_id text not null, cited_id text not null, "
        "primary key (record_id, cited_id))"
    )
    db.execute("create index if not exists idx_cites_cited on record_cites (cited_id)")
    db.execute(
        "create index if not exists idx_records_signature on memory_records (project_id, work_signature) "
        "where work_signature is not null"
    )
    db.execute(
        "create index if not exists idx_records_claims_due on memory_records (freshness_checked_at, record_id) "
        "where claims is not null"
    )
    claim_rows = (
        "insert or ignore into record_claims (record_id, project_id, file, kind, key, digest, shown, lines, "
        "fingerprint, created_at) select new.record_id, new.project_id, json_extract(j.value, '$.file'), "
        "json_extract(j.value, '$.kind'), coalesce(json_extract(j.value, '$.key'), ''), "
        "coalesce(json_extract(j.value, '$.digest'), ''), json_extract(j.value, '$.shown'), "
        "json_extract(j.value, '$.lines'), json_extract(j.value, '$.fingerprint'), new.created_at "
        "from json_each(new.claims) j "
        "where json_valid(new.claims) and json_extract(j.value, '$.file') is not null; "
    )
    cite_rows = (
        "insert or ignore into record_cites (record_id, cited_id) select new.record_id, j.value "
        "from json_each(new.cites) j where json_valid(new.cites) and j.type = 'text'; "
    )
    db.execute(
        "create trigger if not exists record_claims_in after insert on memory_records "
        f"begin {claim_rows}{cite_rows}end"
    )
    db.execute(
        "create trigger if not exists record_claims_out after delete on memory_records begin "
        "delete from record_claims where record_id = old.record_id; "
        "delete from record_cites where record_id = old.record_id; end"
    )
    db.execute(
        "create trigger if not exists record_claims_changed after update of claims, cites on memory_records "
        "begin delete from record_claims where record_id = new.record_id; "
        f"delete from record_cites where record_id = new.record_id; {claim_rows}{cite_rows}end"
    )
