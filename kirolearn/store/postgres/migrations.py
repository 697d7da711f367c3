"""The PostgreSQL team store's schema as named, append-only migrations (kirolearn.store.postgres.store).

Never rename, reorder or edit a migration that has shipped: append a new one. The names applied
are kept in `kirolearn_migrations`, one row each; `PostgresStore.migrate` applies the pending ones
in one transaction, under an advisory lock, so two laptops migrating at once do it once.

The tables mirror the SQLite store's (kirolearn.store.sqlite.migrations), with these choices:
- Lists (a record's facts, concepts, files_touched, source_event_ids; a summary's highlights,
  pitfalls, next_steps, open_questions) are `jsonb` arrays: they read back as Python lists, keep
  their order, and match the SQLite store's JSON-text lists one to one on export and import.
- An event's `body` stays `text`: the exact scrubbed JSON the drain wrote, so an export is
  byte-identical whichever store it came from (jsonb would reorder its keys).
- Timestamps stay the store's ISO text and every text column is `collate "C"`: ids and times
  sort bytewise, as in SQLite, whatever the database's own collation.
- Full-text search: `memory_records.search` is a generated `tsvector`, one `setweight` class per
  field (store.fields.FIELD_WEIGHTS decides the weights given to each class at query time, see
  kirolearn.store.postgres.store.RANK_WEIGHTS): title A, concepts B, files_touched / facts / expansion C, summary D.
  Punctuation is turned into spaces before parsing, so `kirolearn/pipeline/drain.py` is found by
  `drain` (PostgreSQL's parser would keep a path, URL or e-mail as one token; SQLite's porter
  tokenizer splits them). A GIN index serves the `@@` matches, with `fastupdate = off`: drains
  add records a few at a time, and GIN's pending list of such inserts is read linearly by every
  search and priced so by the planner, which then chose a sequential scan (measured in
  docs/benchmarks.md, 'The two store backends').
- The text search configuration `kirolearn` is PostgreSQL's `english` with its Snowball stemmer
  and no stop-word list: SQLite's porter tokenizer drops no word either, so a search for `about`
  or `not` finds the same records on both backends (rarity, not a list, weighs common words).
- Attribution (actor, host, agent) is on records and summaries from the start.
- No vector table: pgvector is not assumed (PostgresStore.capabilities says what the server has).
- The change feed (Store.changes, PG002; SQLite's m017) numbers each record that arrives and
  each tombstone, written by triggers so every writer feeds it. PostgreSQL hands out sequence
  numbers at insert, not at commit: a reader could see number 11 committed while 10 is still in
  flight, move past it and never read 10. So the trigger first takes a transaction-level advisory
  lock: writers of feed rows take their numbers one transaction at a time, in commit order, and a
  reader always sees every number up to the last it saw (gaps are only rolled-back numbers).
"""

from __future__ import annotations

# "C" collation: a generated column must not depend on the database's locale
_TEXT = "regexp_replace(({expr}) collate \"C\", '[[:punct:]]+', ' ', 'g')"


def _field(expr: str, weight: str) -> str:
    return f"setweight(to_tsvector('kirolearn'::regconfig, {_TEXT.format(expr=expr)}), '{weight}')"


SEARCH_VECTOR = " || ".join(
    [
        _field("coalesce(title, '')", "A"),
        _field("coalesce(concepts::text, '')", "B"),
        _field("coalesce(files_touched::text, '')", "C"),
        _field("coalesce(facts::text, '')", "C"),
        _field("coalesce(expansion, '')", "C"),
        _field("coalesce(summary, '')", "D"),
    ]
)

PG001_TABLES = f"""
create text search dictionary kirolearn_stem (template = snowball, language = english);
create text search configuration kirolearn (copy = english);
alter text search configuration kirolearn
    alter mapping for asciiword, asciihword, hword_asciipart, word, hword, hword_part with kirolearn_stem;

create table events (
    event_id text collate "C" primary key,
    content_hash text collate "C" not null,
    kind text collate "C" not null,
    trigger text collate "C",
    hook text collate "C",
    generation text collate "C",
    surface text collate "C",
    session_id text collate "C" not null,
    project_id text collate "C" not null,
    project_root text collate "C",
    cwd text collate "C",
    received_at text collate "C" not null,
    stored_at text collate "C",
    actor text collate "C",
    host text collate "C",
    client_version text collate "C",
    body text not null,
    extract_state text collate "C" not null default 'pending',
    run_id text collate "C",
    agent text collate "C" not null default 'kiro'
);
create index idx_events_content on events (content_hash, received_at);
create index idx_events_pending on events (extract_state, project_id, session_id, event_id);
create index idx_events_session on events (project_id, session_id);

create table memory_records (
    record_id text collate "C" primary key,
    project_id text collate "C" not null,
    project_root text collate "C",
    session_id text collate "C",
    title text not null,
    summary text not null,
    facts jsonb not null default '[]',
    concepts jsonb not null default '[]',
    files_touched jsonb not null default '[]',
    observation_type text collate "C" not null,
    strategy text collate "C" not null,
    source_event_ids jsonb not null default '[]',
    run_id text collate "C",
    record_hash text collate "C" not null unique,
    created_at text collate "C" not null,
    expansion text,
    actor text collate "C",
    host text collate "C",
    agent text collate "C",
    search tsvector generated always as ({SEARCH_VECTOR}) stored
);
create index idx_records_project on memory_records (project_id, created_at);
create index idx_records_project_type on memory_records (project_id, observation_type, created_at);
create index idx_records_created on memory_records (created_at, record_id);
create index idx_records_session on memory_records (session_id, created_at);
create index idx_records_project_session on memory_records (project_id, session_id);
create index idx_records_search on memory_records using gin (search) with (fastupdate = off);

create table extraction_runs (
    run_id text collate "C" primary key,
    batch_key text collate "C" not null,
    project_id text collate "C",
    session_id text collate "C",
    reason text,
    extractor text collate "C" not null,
    model text,
    event_count integer,
    request text,
    prompt_tokens integer not null default 0,
    completion_tokens integer not null default 0,
    cost_usd double precision not null default 0,
    outcome text collate "C" not null,
    error text,
    fallback_reason text,
    records_written integer not null default 0,
    started_at text collate "C" not null,
    finished_at text collate "C"
);
create index idx_runs_batch on extraction_runs (batch_key, outcome);
create index idx_runs_started on extraction_runs (started_at);

create table drain_runs (
    drain_id text collate "C" primary key,
    started_at text collate "C",
    finished_at text collate "C",
    stats text,
    error text
);

create table session_summaries (
    id text collate "C" primary key,
    session_id text collate "C" not null,
    project text collate "C" not null,
    project_id text collate "C" not null,
    project_root text collate "C",
    branch text,
    summary text not null,
    highlights jsonb not null default '[]',
    pitfalls jsonb not null default '[]',
    next_steps jsonb not null default '[]',
    open_questions jsonb not null default '[]',
    auto_compress integer,
    compressed_used integer,
    auto_compress_error text,
    record_id text collate "C",
    ended_at text collate "C" not null,
    actor text collate "C",
    host text collate "C",
    agent text collate "C"
);
create index idx_session_summaries on session_summaries (project_id, project, ended_at);
create index idx_session_summaries_session on session_summaries (session_id);
create index idx_session_summaries_record on session_summaries (record_id);

create table forgotten_records (
    record_id text collate "C" primary key,
    record_hash text collate "C" not null,
    project_id text collate "C",
    session_id text collate "C",
    reason text,
    actor text,
    forgotten_at text collate "C" not null,
    payload jsonb,
    purged_at text collate "C"
);
create index idx_forgotten_hash on forgotten_records (record_hash);
create index idx_forgotten_at on forgotten_records (forgotten_at);

create table record_audit (
    audit_id text collate "C" primary key,
    record_id text collate "C" not null,
    action text collate "C" not null,
    actor text,
    reason text,
    at text collate "C" not null,
    version integer,
    before jsonb,
    after jsonb
);
create index idx_audit_record on record_audit (record_id, audit_id);
"""

# the change feed (SQLite's m017): its lock keeps numbers in commit order
PG002_RECORD_CHANGES = """
create table record_changes (
    seq bigint generated always as identity primary key,
    record_id text collate "C" not null,
    project_id text collate "C" not null,
    change text collate "C" not null
);
create index idx_record_changes_project on record_changes (project_id, seq);
insert into record_changes (record_id, project_id, change)
    select record_id, project_id, 'record' from memory_records order by created_at, record_id;
insert into record_changes (record_id, project_id, change)
    select record_id, coalesce(project_id, ''), 'forgotten' from forgotten_records order by forgotten_at, record_id;
create function kirolearn_feed() returns trigger language plpgsql as $$
begin
    perform pg_advisory_xact_lock(hashtext(TG_TABLE_SCHEMA || ':kirolearn:feed'));
    insert into record_changes (record_id, project_id, change)
        values (new.record_id, coalesce(new.project_id, ''), TG_ARGV[0]);
    return null;
end $$;
create trigger record_changes_record after insert on memory_records
    for each row execute function kirolearn_feed('record');
create trigger record_changes_forgotten after insert on forgotten_records
    for each row execute function kirolearn_feed('forgotten');
"""

# purges join the feed (SQLite's m019) so a team-wide purge reaches every cache
PG003_PURGE_CHANGES = """
insert into record_changes (record_id, project_id, change)
    select record_id, coalesce(project_id, ''), 'purged' from forgotten_records where purged_at is not null
    order by purged_at, record_id;
create trigger record_changes_purged after update of purged_at on forgotten_records
    for each row when (old.purged_at is null and new.purged_at is not null)
    execute function kirolearn_feed('purged');
create index idx_record_changes_record on record_changes (record_id, seq);
"""

# outcome and freshness marks (SQLite's m020), fed so every cache pulls them
PG004_RECORD_MARKS = """
alter table memory_records add column outcome text collate "C" not null default 'unknown';
alter table memory_records add column freshness text collate "C" not null default 'current';
create trigger record_changes_mark after update of freshness, outcome on memory_records
    for each row when (old.freshness is distinct from new.freshness or old.outcome is distinct from new.outcome)
    execute function kirolearn_feed('mark');
"""

# superseded_by, merged_into (SQLite's m021), fed to teammates' caches
PG005_SUPERSEDE_MERGE = """
alter table memory_records add column superseded_by text collate "C";
alter table memory_records add column merged_into text collate "C";
create index idx_records_superseded_by on memory_records (superseded_by) where superseded_by is not null;
create index idx_records_merged_into on memory_records (merged_into) where merged_into is not null;
create trigger record_changes_marks after update of superseded_by, merged_into on memory_records
    for each row when (old.superseded_by is distinct from new.superseded_by
                       or old.merged_into is distinct from new.merged_into)
    execute function kirolearn_feed('record');
"""

# a model run keeps its prompt version, output form and raw answer
PG006_EXTRACTION_ANSWERS = """
alter table extraction_runs add column answer text, add column prompt_version text, add column response_form text;
"""

# A survivor's lists grown elsewhere feed record_changes: caches pull the union.
PG007_TRUTH2_RECORD_LISTS = """
create trigger record_changes_lists after update of facts, concepts, files_touched, source_event_ids
    on memory_records
    for each row when (old.facts is distinct from new.facts or old.concepts is distinct from new.concepts
                       or old.files_touched is distinct from new.files_touched
                       or old.source_event_ids is distinct from new.source_event_ids)
    execute function kirolearn_feed('record');
"""

# Indexes for what a sync pass or a purge queries: no full scan at 1M records.
PG008_SCALE_INDEXES = """
create index idx_record_changes_feed on record_changes (project_id, seq) include (record_id, change);
drop index if exists idx_record_changes_project;
create index idx_records_source_events on memory_records using gin (source_event_ids jsonb_path_ops);
create index idx_records_run on memory_records (run_id);
create index idx_forgotten_source_events on forgotten_records
    using gin ((payload -> 'record' -> 'source_event_ids') jsonb_path_ops) where payload is not null;
"""

# Marks on evidence travel with the record; claim states stay in each cache.
PG009_CLAIMS = """
alter table memory_records add column claims jsonb, add column cites jsonb,
    add column work_signature text collate "C", add column pinned jsonb;
create index idx_records_signature on memory_records (project_id, work_signature) where work_signature is not null;
create trigger record_changes_pinned after update of pinned on memory_records
    for each row when (old.pinned is distinct from new.pinned)
    execute function kirolearn_feed('record');
"""

# (name, SQL) in the order they apply. Append only.
MIGRATIONS: list[tuple[str, str]] = [
    ("pg001_tables", PG001_TABLES),
    ("pg002_record_changes", PG002_RECORD_CHANGES),
    ("pg003_purge_changes", PG003_PURGE_CHANGES),
    ("pg004_record_marks", PG004_RECORD_MARKS),
    ("pg005_supersede_merge", PG005_SUPERSEDE_MERGE),
    ("pg006_extraction_answers", PG006_EXTRACTION_ANSWERS),
    ("pg007_truth2_record_lists", PG007_TRUTH2_RECORD_LISTS),
    ("pg008_scale_indexes", PG008_SCALE_INDEXES),
    ("pg009_claims", PG009_CLAIMS),
]

# what `migrate --grant ROLE` grants a drainer; append when a migration adds one
TABLES = (
    "events",
    "memory_records",
    "extraction_runs",
    "drain_runs",
    "session_summaries",
    "forgotten_records",
    "record_audit",
    "record_changes",
)

LEDGER = """
create table if not exists kirolearn_migrations (
    name text collate "C" primary key,
    applied_at timestamptz not null default now()
)
"""
