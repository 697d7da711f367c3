"""The PostgreSQL store (psycopg 3): a team's shared memory behind the same contract as SQLite.

`PostgresStore(url)` holds one connection, autocommit off; every contract method is one
transaction (`with conn.transaction()`), so it happens whole or not at all. Identifiers are
composed with `psycopg.sql`; every value travels as a query parameter, never inside SQL text.

- Schema: append-only named migrations (kirolearn.store.postgres.migrations) recorded in
  `kirolearn_migrations`. Opening never changes the schema unless asked (`migrate=True`, or
  `kirolearn migrate`): a shared server is upgraded on purpose, by someone allowed to. A store
  whose schema is behind says so (StoreError: run `kirolearn migrate`); one ahead of this
  kirolearn is SchemaTooNew.
- Idempotent writes: `insert … on conflict do nothing` keyed by event_id, record_id and
  record_hash. The forgotten-hash check runs in the writing transaction, under a shared advisory
  lock that `forget` takes exclusively, so a record forgotten on one laptop is never re-created
  by a drain committing on another at the same moment.
- Search: PostgreSQL's own full-text search (see `search`), words always as parameters.
- Vectors: the contract holds none; `capabilities()` says whether pgvector is on the server.
- Errors reach users as StoreError naming the server by a URL without any password.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from kirolearn.core import marks
from kirolearn.core.errors import SchemaTooNew, StoreError, one_line
from kirolearn.store.base import RECORD_LISTS, SUMMARY_LISTS, Store, assemble_changes, record_hash
from kirolearn.store.fields import FIELD_WEIGHTS
from kirolearn.store.postgres.migrations import LEDGER, MIGRATIONS, TABLES

CONNECT_TIMEOUT_SECONDS = 5
APPLICATION_NAME = "kirolearn"

EVENT_COLUMNS = (
    "event_id",
    "content_hash",
    "kind",
    "trigger",
    "hook",
    "generation",
    "surface",
    "session_id",
    "project_id",
    "project_root",
    "cwd",
    "received_at",
    "stored_at",
    "actor",
    "host",
    "client_version",
    "body",
    "extract_state",
    "run_id",
    "agent",
)
EVENT_DEFAULTS = {"extract_state": "pending", "agent": "kiro"}
RECORD_COLUMNS = (
    "record_id",
    "project_id",
    "project_root",
    "session_id",
    "title",
    "summary",
    "facts",
    "concepts",
    "files_touched",
    "observation_type",
    "strategy",
    "source_event_ids",
    "run_id",
    "record_hash",
    "created_at",
    "expansion",
    "actor",
    "host",
    "agent",
    "outcome",
    "freshness",
    "superseded_by",
    "merged_into",
    "claims",
    "cites",
    "work_signature",
    "pinned",
)
# kept only on the storing machine: another working tree has other files
LOCAL_ONLY = ("file_state", "freshness_checked_at")
SUMMARY_COLUMNS = (
    "id",
    "session_id",
    "project",
    "project_id",
    "project_root",
    "branch",
    "summary",
    "highlights",
    "pitfalls",
    "next_steps",
    "open_questions",
    "auto_compress",
    "compressed_used",
    "auto_compress_error",
    "record_id",
    "ended_at",
    "actor",
    "host",
    "agent",
)
RUN_COLUMNS = (
    "run_id",
    "batch_key",
    "project_id",
    "session_id",
    "reason",
    "extractor",
    "model",
    "event_count",
    "request",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "outcome",
    "error",
    "fallback_reason",
    "records_written",
    "started_at",
    "finished_at",
    "answer",
    "prompt_version",
    "response_form",
)
JSON_COLUMNS = frozenset(RECORD_LISTS + SUMMARY_LISTS)

# a page of the change feed: each project's next numbers by index, merged
FEED_AFTER = """
select c.seq, c.record_id, c.change
from unnest(%s::text[]) as p(project_id)
cross join lateral (select f.seq, f.record_id, f.change from record_changes f
                    where f.project_id = p.project_id and f.seq > %s order by f.seq limit %s) c
order by c.seq limit %s"""

# the setweight class of each field in migrations.SEARCH_VECTOR
FIELD_CLASSES = {
    "title": "A",
    "concepts": "B",
    "files_touched": "C",
    "facts": "C",
    "expansion": "C",
    "summary": "D",
}


def _class_weights() -> list[float]:
    """What each weight class weighs in ts_rank, in its order {D, C, B, A}: the mean of its fields'
    FIELD_WEIGHTS over the heaviest, so a title (A) match counts 8x a summary (D) match, as in
    SQLite's bm25 weights."""
    top = max(FIELD_WEIGHTS.values())
    out = []
    for cls in "DCBA":
        fields = [FIELD_WEIGHTS[f] for f, c in FIELD_CLASSES.items() if c == cls]
        out.append(round(sum(fields) / len(fields) / top, 4))
    return out


RANK_WEIGHTS = _class_weights()
# A marked record keeps freshness × outcome × superseded of its relevance.
MARK_FACTOR_SQL = (
    "(case r.freshness "
    + " ".join(f"when '{k}' then {v!r}" for k, v in marks.FRESHNESS_FACTORS.items())
    + " else 1.0 end) * (case r.outcome "
    + " ".join(f"when '{k}' then {v!r}" for k, v in marks.OUTCOME_FACTORS.items())
    + f" else 1.0 end) * (case when r.superseded_by is null then 1.0 else {marks.SUPERSEDED_FACTOR!r} end)"
)
# divide by 1 + log(document length): a long record does not win by length alone
RANK_NORMALIZATION = 1


# --- URLs and errors ---


def shown_url(url: str) -> str:
    """`url` fit to print: any password (in the user part or a password parameter) hidden."""
    from kirolearn.store.url import redact_url

    return redact_url(url)


_FIXES = (
    (
        (
            "password authentication failed",
            "no password supplied",
            "authentication failed",
            "peer authentication",
        ),
        "check your credentials: libpq reads them from ~/.pgpass (mode 0600, or the file PGPASSFILE names), a "
        "service file or PGPASSWORD; kirolearn keeps no password",
    ),
    (
        ("permission denied", "must be owner"),
        "ask the server's owner to grant your role the privilege, or to run `kirolearn migrate` themselves",
    ),
    (
        ("no schema has been selected",),
        "the URL's search_path (options=-csearch_path=...) or the server's default names no schema your role may use: "
        "ask the server's owner for USAGE and CREATE on one, or name one you own",
    ),
    (('relation "',), "the team store's tables are not there: run `kirolearn migrate`"),
    (
        ("does not exist",),
        "check the database and user names in the store URL; the server's owner creates them",
    ),
    (
        (
            "connection refused",
            "no such file or directory",
            "could not translate host name",
            "timeout expired",
            "could not connect",
            "network is unreachable",
            "no route to host",
            "name or service not known",
            "server closed the connection",
            "terminating connection",
            "connection is closed",
            "consuming input failed",
        ),
        "check that the PostgreSQL server runs and that host and port in the store URL are right; the spool and the "
        "local store keep everything meanwhile",
    ),
)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return one_line(lines[0]) if lines else type(exc).__name__


def store_error(exc: BaseException, url: str, doing: str) -> StoreError:
    """The user-facing error for a psycopg failure while `doing` something with the store at `url`."""
    text = _first_line(exc)
    low = str(exc).lower()
    fix = next((fix for needles, fix in _FIXES if any(n in low for n in needles)), "run `kirolearn doctor`")
    return StoreError(f"{doing} the team store {shown_url(url)} failed: {text}", fix)


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise StoreError(
            "a PostgreSQL store is configured but psycopg is not installed", "pip install 'kirolearn[team]'"
        ) from None
    return psycopg


# --- the store ---


class PostgresStore(Store):
    """A team store on a PostgreSQL server (kirolearn.store.base.Store).

    `migrate=True` applies pending migrations on open (the contract tests and `kirolearn migrate`);
    otherwise a schema that is not current is refused with the fix (`kirolearn migrate`).
    `check=False` opens without looking at the schema (doctor, migrate).
    """

    backend = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = False,
        check: bool = True,
        connect_timeout: int = CONNECT_TIMEOUT_SECONDS,
    ):
        self.url = url
        self.connect_timeout = connect_timeout
        self.conn: Any = None  # a psycopg Connection once _connect ran
        self._connect()
        try:
            if migrate:
                self.migrate()
            elif check:
                self._check_schema()
        except BaseException:
            self.close()
            raise

    # --- connection and transactions ---

    def _connect(self) -> None:
        psycopg = _psycopg()
        from psycopg.rows import dict_row

        try:
            self.conn = psycopg.connect(
                self.url,
                autocommit=False,
                row_factory=dict_row,
                connect_timeout=max(2, int(self.connect_timeout)),
                application_name=APPLICATION_NAME,
            )
            with self.conn.transaction():
                # a stop word's phraseto_tsquery NOTICE is not for a terminal
                self.conn.execute("set client_min_messages = warning")
        except psycopg.Error as exc:
            self.conn = None
            raise store_error(exc, self.url, "connecting to") from None

    def _tx(self, doing: str = "using"):
        """One transaction; psycopg failures become StoreError (a bug in our SQL stays itself)."""
        return _Transaction(self, doing)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _shared_forget_lock(self, cur) -> None:
        # writers hold it shared, forget exclusive (see the module docstring)
        cur.execute("select pg_advisory_xact_lock_shared(hashtext(current_schema() || ':kirolearn:forget'))")

    def _exclusive_forget_lock(self, cur) -> None:
        cur.execute("select pg_advisory_xact_lock(hashtext(current_schema() || ':kirolearn:forget'))")

    # --- schema ---

    def _applied(self, cur) -> list[str]:
        cur.execute("select to_regclass('kirolearn_migrations') is not null as present")
        if not cur.fetchone()["present"]:
            return []
        cur.execute("select name from kirolearn_migrations order by applied_at, name")
        return [r["name"] for r in cur.fetchall()]

    def _check_schema(self) -> None:
        schema = self.schema()
        if schema["unknown"]:
            raise SchemaTooNew(
                f"the team store {shown_url(self.url)} was migrated by a newer kirolearn (unknown "
                f"migrations: {', '.join(schema['unknown'])})",
                "upgrade kirolearn",
            )
        if schema["pending"]:
            raise StoreError(
                f"the team store {shown_url(self.url)} needs {len(schema['pending'])} migration(s), "
                f"which `kirolearn migrate` applies ({', '.join(schema['pending'])})",
                "run `kirolearn migrate` (as a role allowed to create tables there)",
            )

    def schema(self) -> dict:
        with self._tx("reading the schema of") as cur:
            applied = self._applied(cur)
        known = [name for name, _ in MIGRATIONS]
        return {
            "applied": applied,
            "pending": [n for n in known if n not in applied],
            "unknown": [n for n in applied if n not in known],
        }

    def migrate(self) -> list[str]:
        done = []
        with self._tx("migrating") as cur:
            cur.execute("select pg_advisory_xact_lock(hashtext(current_schema() || ':kirolearn:migrate'))")
            applied = set(self._applied(cur))
            # only then: `create … if not exists` needs CREATE, drainers lack it
            if not applied:
                cur.execute(LEDGER)
            unknown = applied - {name for name, _ in MIGRATIONS}
            if unknown:
                raise SchemaTooNew(
                    f"the team store {shown_url(self.url)} was migrated by a newer kirolearn "
                    f"(unknown migrations: {', '.join(sorted(unknown))})",
                    "upgrade kirolearn",
                )
            for name, ddl in MIGRATIONS:
                if name in applied:
                    continue
                cur.execute(ddl)
                cur.execute("insert into kirolearn_migrations (name) values (%s)", [name])
                done.append(name)
        return done

    def grant(self, roles) -> list[str]:
        """Let these roles use the store as drainers do (read and write kirolearn's tables, read the
        migrations ledger; never create or alter anything). One transaction; returns the roles."""
        from psycopg import errors, sql

        roles = list(dict.fromkeys(roles))
        with self._tx("granting privileges on") as cur:
            cur.execute("select current_schema() as schema")
            schema = cur.fetchone()["schema"]
            tables = sql.SQL(", ").join(sql.Identifier(schema, t) for t in TABLES)
            for role in roles:
                who = sql.Identifier(role)
                try:
                    # a savepoint: name the role that failed
                    with self.conn.transaction():
                        cur.execute(
                            sql.SQL("grant usage on schema {} to {}").format(sql.Identifier(schema), who)
                        )
                        cur.execute(
                            sql.SQL("grant select, insert, update, delete on {} to {}").format(tables, who)
                        )
                        cur.execute(
                            sql.SQL("grant select on {} to {}").format(
                                sql.Identifier(schema, "kirolearn_migrations"), who
                            )
                        )
                except errors.UndefinedObject:
                    raise StoreError(
                        f"cannot grant the team store's tables to {role!r}: no such role",
                        f'create it first (CREATE ROLE "{role}" LOGIN, or a group role its '
                        "members are IN), or check the name",
                    ) from None
        return roles

    def capabilities(self) -> dict:
        """What this server offers beyond the contract: {"vectors": bool, "pgvector": "installed" |
        "available" | "absent", "server_version": str, "server_version_num": int, "read_only": bool (a
        replica), "schema": the schema in use, "can_create": bool (this role may create tables in it)}.
        Vectors are stored only with pgvector; without it
        the store keeps none and recall ranks by text alone, as SQLite does without an embedding model."""
        with self._tx("reading the capabilities of") as cur:
            cur.execute(
                "select current_setting('server_version') as version, "
                "current_setting('server_version_num')::int as version_num, "
                "pg_is_in_recovery() as read_only, current_schema() as schema, "
                "coalesce(has_schema_privilege(current_schema(), 'CREATE'), false) as can_create"
            )
            server = cur.fetchone()
            cur.execute("select installed_version from pg_available_extensions where name = 'vector'")
            row = cur.fetchone()
        pgvector = "absent" if row is None else "installed" if row["installed_version"] else "available"
        # no migration stores vectors yet, pgvector or not
        return {
            "vectors": False,
            "pgvector": pgvector,
            "server_version": server["version"],
            "server_version_num": server["version_num"],
            "read_only": server["read_only"],
            "schema": server["schema"],
            "can_create": server["can_create"],
        }

    def can_write(self) -> tuple[bool, str]:
        """(True, "") if this role may insert into the store's tables; tried with a rolled-back insert."""
        psycopg = _psycopg()
        try:
            with self.conn.transaction(force_rollback=True):
                self.conn.execute(
                    "insert into drain_runs (drain_id, started_at, finished_at, stats, error) "
                    "values ('doctor-write-check', '', '', '{}', '')"
                )
        except psycopg.Error as exc:
            return False, _first_line(exc)
        return True, ""

    # --- events ---

    def add_events(self, events: list[dict]) -> int:
        """COPY into a temporary table (emptied at commit), then one `insert … on conflict do nothing`:
        psycopg formats COPY rows in C, where a list parameter is formatted in Python, slower
        (docs/benchmarks.md, 'The two store backends').
        Rows go in in event_id order, so overlapping uploads wait for each other, never deadlock."""
        if not events:
            return 0
        _refuse_unknown(events, EVENT_COLUMNS, "events")
        with self._tx("storing events in") as cur:
            cur.execute(
                "create temp table if not exists kirolearn_events_in (like events including defaults) "
                "on commit delete rows"
            )
            with cur.copy("copy kirolearn_events_in (" + ", ".join(EVENT_COLUMNS) + ") from stdin") as copy:
                for e in events:
                    copy.write_row([e.get(c, EVENT_DEFAULTS.get(c)) for c in EVENT_COLUMNS])
            cur.execute(
                "insert into events ("
                + ", ".join(EVENT_COLUMNS)
                + ") select "
                + ", ".join(EVENT_COLUMNS)
                + " from kirolearn_events_in order by event_id on conflict (event_id) do nothing"
            )
            return cur.rowcount

    def _events_holding(self, column: str, values) -> set[str]:
        """Which of `values` some stored event has in `column` (a fixed column name)."""
        values = list(values)
        if not values:
            return set()
        with self._tx("reading") as cur:
            cur.execute(f"select distinct {column} from events where {column} = any(%s::text[])", [values])
            return {r[column] for r in cur.fetchall()}

    def event_ids_present(self, event_ids) -> set[str]:
        return self._events_holding("event_id", event_ids)

    def content_hashes_present(self, content_hashes) -> set[str]:
        return self._events_holding("content_hash", content_hashes)

    def content_duplicate(self, content_hash: str, since: str | None, until: str | None) -> bool:
        query, args = "select 1 from events where content_hash = %s", list[Any]([content_hash])
        if since is not None:
            query += " and received_at between %s and %s"
            args += [since, until]
        with self._tx("reading") as cur:
            cur.execute(query + " limit 1", args)
            return cur.fetchone() is not None

    def last_turn_event_id(self, project_id: str, session_id: str, before: str) -> str | None:
        with self._tx("reading") as cur:
            cur.execute(
                "select max(event_id) as event_id from events where project_id = %s and session_id = %s "
                "and event_id < %s and kind not in ('session_summary', 'note')",
                [project_id, session_id, before],
            )
            row = cur.fetchone()
        return row["event_id"] if row else None

    def pending_event_count(self) -> int:
        with self._tx("reading") as cur:
            cur.execute("select count(*)::int as n from events where extract_state = 'pending'")
            return cur.fetchone()["n"]

    def pending_sessions(self) -> list[dict]:
        with self._tx("reading") as cur:
            cur.execute("""
                select project_id, session_id, count(*)::int as n, min(event_id) as first_event_id,
                       max(received_at) as last_received_at,
                       max(case when kind = 'session_summary' then event_id end) as last_stop_id
                from events where extract_state = 'pending'
                group by project_id, session_id order by min(event_id)""")
            return cur.fetchall()

    def pending_events(self, project_id: str, session_id: str, up_to: str | None = None) -> list[dict]:
        query = (
            "select body from events where extract_state = 'pending' and project_id = %s and session_id = %s"
        )
        args = [project_id, session_id]
        if up_to:
            query += " and event_id <= %s"
            args.append(up_to)
        with self._tx("reading") as cur:
            cur.execute(query + " order by event_id", args)
            return [json.loads(r["body"]) for r in cur.fetchall()]

    def expire_events(self, before: str) -> int:
        with self._tx("expiring events in") as cur:
            cur.execute("delete from events where extract_state = 'done' and received_at < %s", [before])
            return cur.rowcount

    # --- records ---

    def _insert_records(self, cur, records: list[dict], skip_forgotten: bool = True) -> list[str]:
        """Insert record rows (record_hash set) not yet present nor forgotten; returns the ids written."""
        if not records:
            return []
        if skip_forgotten:
            gone = self._forgotten_hashes(cur, [r["record_hash"] for r in records])
            records = [r for r in records if r["record_hash"] not in gone]
        # held already (sent back by a cache): its tsvector is kept
        cur.execute(
            "select record_id from memory_records where record_id = any(%s::text[])",
            [[r["record_id"] for r in records]],
        )
        held = {r["record_id"] for r in cur.fetchall()}
        records = [r for r in records if r["record_id"] not in held]
        return _insert_many(cur, "memory_records", RECORD_COLUMNS, records, "record_id")

    def commit_extraction(self, run: dict, records: list[dict], event_ids: list[str]) -> int:
        rows = [_record_row(r) for r in records]
        _refuse_unknown(rows, RECORD_COLUMNS, "memory_records")
        _refuse_unknown([run], RUN_COLUMNS, "extraction_runs")
        with self._tx("storing an extraction in") as cur:
            self._shared_forget_lock(cur)
            written = len(self._insert_records(cur, rows))
            _insert(cur, "extraction_runs", dict(run, records_written=written))
            if event_ids:
                cur.execute(
                    "update events set extract_state = 'done', run_id = %s where event_id = any(%s::text[])",
                    [run["run_id"], list(event_ids)],
                )
        return written

    def record_failed_run(self, run: dict) -> None:
        row = dict(run, outcome="failed")
        _refuse_unknown([row], RUN_COLUMNS, "extraction_runs")
        with self._tx("storing a failed extraction in") as cur:
            _insert(cur, "extraction_runs", row)

    def failed_attempts(self, batch_key: str) -> int:
        with self._tx("reading") as cur:
            cur.execute(
                "select count(*)::int as n from extraction_runs where batch_key = %s and outcome = 'failed'",
                [batch_key],
            )
            return cur.fetchone()["n"]

    def model_spend(self, since: str) -> tuple[int, float]:
        with self._tx("reading") as cur:
            cur.execute(
                "select coalesce(sum(prompt_tokens + completion_tokens), 0)::bigint as tokens, "
                "coalesce(sum(cost_usd), 0)::float8 as dollars from extraction_runs "
                "where extractor = 'llm' and started_at >= %s",
                [since],
            )
            row = cur.fetchone()
        return int(row["tokens"]), float(row["dollars"])

    def add_records(self, records: list[dict]) -> int:
        rows = [_record_row({k: v for k, v in r.items() if k in RECORD_COLUMNS}) for r in records]
        if not rows:
            return 0
        with self._tx("storing records in") as cur:
            self._shared_forget_lock(cur)
            return len(self._insert_records(cur, rows))

    def get_record(self, record_id: str) -> dict | None:
        with self._tx("reading") as cur:
            cur.execute(_select_records("where r.record_id = %s"), [record_id])
            row = cur.fetchone()
        return _decode_record(row) if row else None

    def list_records(
        self,
        *,
        project_id=None,
        types=None,
        since=None,
        session_id=None,
        file=None,
        limit: int = 20,
        before=None,
    ) -> list[dict]:
        if file:
            raise self.unsupported("the file filter")
        conds, args = _filters(project_id=project_id, types=types, since=since, session_id=session_id)
        if before:
            conds.append("r.created_at <= %s and (r.created_at < %s or r.record_id < %s)")
            args += [before[0], before[0], before[1]]
        where = ("where " + " and ".join(conds)) if conds else ""
        with self._tx("reading") as cur:
            cur.execute(
                _select_records(where + " order by r.created_at desc, r.record_id desc limit %s"),
                [*args, limit],
            )
            return [_decode_record(r) for r in cur.fetchall()]

    def latest(self, project_id: str, *, types=None, limit: int = 5) -> list[dict]:
        return self.list_records(project_id=project_id, types=types, limit=limit)

    def search(self, words: list[str], *, project_id=None, types=None, limit: int = 10) -> list[dict]:
        """Records holding any of `words` (each a phrase of its stems), best first.

        Each word becomes its own tsquery with phraseto_tsquery in the store's `kirolearn` text
        search configuration (English stems, no stop words): whatever it holds is text to parse
        into lexemes, never tsquery syntax (no &, |, !, :*, quotes to escape), and a word that is
        only punctuation matches nothing. The match is those queries OR-ed
        (GIN index). Relevance sums, over the words, ts_rank with the field weights
        (RANK_WEIGHTS) times the word's inverse document frequency, as BM25 weighs a rare word
        above a common one. Document frequencies are counted (one GIN lookup a word, done once:
        the CTEs are materialized, or PostgreSQL would inline them into every matched row); the
        record count is the planner's estimate (pg_class.reltuples, kept by autovacuum), as
        counting every record would cost more than the search. A marked record's relevance is
        multiplied by the factors SQLite's recall uses (MARK_FACTOR_SQL: changed 0.6, deleted 0.4,
        failed 0.5, superseded 0.1); a merged record is left out.
        """
        words = [w for w in words if isinstance(w, str) and w.strip()]
        if not words or limit <= 0:
            return []
        conds, args = _filters(project_id=project_id, types=types)
        extra = "".join(" and " + c for c in conds)
        query = f"""
            with words as (
                select phraseto_tsquery('kirolearn'::regconfig,
                                        regexp_replace(w collate "C", '[[:punct:]]+', ' ', 'g')) as q
                from unnest(%s::text[]) as t(w)
            ), useful as (
                select distinct q from words where numnode(q) > 0
            ), counted as materialized (
                select u.q, (select count(*)::float8 from memory_records m where m.search @@ u.q) as df
                from useful u
            ), weighed as materialized (
                select c.q, ln(1 + (greatest(n.total, c.df) - c.df + 0.5) / (c.df + 0.5)) as idf
                from counted c
                cross join (select reltuples::float8 as total from pg_class
                            where oid = 'memory_records'::regclass) n
            )
            select {_RECORD_SELECT},
                   (select sum(w.idf * ts_rank(%s::float4[], r.search, w.q, {RANK_NORMALIZATION})) from weighed w)
                   * {MARK_FACTOR_SQL} as relevance
            from memory_records r
            where r.search @@ (select string_agg('(' || q::text || ')', ' | ')::tsquery from useful)
              and r.merged_into is null{extra}
            order by relevance desc, r.record_id
            limit %s"""
        with self._tx("searching") as cur:
            cur.execute(query, [words, RANK_WEIGHTS, *args, limit])
            rows = cur.fetchall()
        out = []
        for row in rows:
            found = _decode_record(row)
            found["relevance"] = float(row["relevance"])
            out.append(found)
        return out

    # --- session summaries ---

    def add_session_summary(self, summary: dict, record: dict | None = None) -> None:
        row = {k: v for k, v in summary.items()}
        _refuse_unknown([row], SUMMARY_COLUMNS, "session_summaries")
        with self._tx("storing a session summary in") as cur:
            if record is not None:
                self._shared_forget_lock(cur)
                self._insert_records(cur, [_record_row(record)], skip_forgotten=False)
            _insert(cur, "session_summaries", row)

    def session_summaries(self, project_id: str, *, label: str | None = None, limit: int = 50) -> list[dict]:
        query, args = (
            f"select {_SUMMARY_SELECT} from session_summaries s where s.project_id = %s",
            [project_id],
        )
        if label is not None:
            query += " and s.project = %s"
            args.append(label)
        with self._tx("reading") as cur:
            cur.execute(query + " order by s.ended_at desc, s.id desc limit %s", [*args, limit])
            return [_decode_summary(r) for r in cur.fetchall()]

    def apply_marks(self, records: list[dict], *, actor: str = "sync") -> int:
        changed = 0
        with self._tx("marking records in") as cur:
            for rec in records:
                for mark in ("superseded_by", "merged_into"):
                    if mark not in rec:
                        continue
                    cur.execute(
                        f"update memory_records set {mark} = %s where record_id = %s "
                        f"and {mark} is distinct from %s",
                        [rec[mark], rec["record_id"], rec[mark]],
                    )
                    if cur.rowcount:
                        changed += 1
                        self._audit(
                            cur,
                            rec["record_id"],
                            "supersede"
                            if mark == "superseded_by" and rec[mark]
                            else "merge"
                            if rec[mark]
                            else "unmark",
                            actor,
                            "from a teammate's store",
                        )
        return changed

    def merge_lists(self, records: list[dict], *, actor: str = "sync") -> int:
        changed = 0
        with self._tx("merging a record's lists in") as cur:
            for rec in records:
                cur.execute(
                    f"select {_RECORD_SELECT} from memory_records r where r.record_id = %s for update",
                    [rec.get("record_id")],
                )
                row = cur.fetchone()
                if row is None:
                    continue
                held = _decode_record(row)
                if not set(map(str, rec.get("source_event_ids") or ())) - set(
                    map(str, held["source_event_ids"])
                ):
                    continue
                after = {k: _union(held.get(k), rec.get(k)) for k in RECORD_LISTS if k in rec}
                after = {k: v for k, v in after.items() if v != held.get(k)}
                if not after:
                    continue
                # pg007's trigger feeds the change: every cache takes the lists
                cur.execute(
                    f"update memory_records set {', '.join(f'{k} = %s::jsonb' for k in after)} "
                    f"where record_id = %s",
                    [*(json.dumps(v, ensure_ascii=False) for v in after.values()), row["record_id"]],
                )
                self._forget_derived(cur, row)
                self._audit(cur, row["record_id"], "merge-survivor", actor, "lists merged in another store")
                changed += 1
        return changed

    # --- forgetting ---

    def _forget_derived(self, cur, row: dict) -> None:
        # the session neighbours' expansions hold its text: derive them again
        # (`=` or `is null`: `is not distinct from` cannot use the index)
        same = "session_id is null" if row["session_id"] is None else "session_id = %s"
        cur.execute(
            f"update memory_records set expansion = null "
            f"where project_id = %s and {same} and expansion is not null",
            [row["project_id"], *([] if row["session_id"] is None else [row["session_id"]])],
        )

    def _audit(self, cur, record_id: str, action: str, actor: str, reason: str = "", at: str | None = None):
        from kirolearn.core.ids import new_ulid

        _insert(
            cur,
            "record_audit",
            {
                "audit_id": new_ulid(),
                "record_id": record_id,
                "action": action,
                "actor": actor,
                "reason": reason or "",
                "at": at or _now(),
            },
        )

    def forget(self, record_ids, *, reason: str, actor: str) -> list[dict]:
        from psycopg.types.json import Jsonb

        done = []
        with self._tx("forgetting records in") as cur:
            self._exclusive_forget_lock(cur)
            for record_id in dict.fromkeys(record_ids):
                cur.execute(_select_records("where r.record_id = %s for update"), [record_id])
                row = cur.fetchone()
                if row is None:
                    continue
                record = _decode_record(row)
                cur.execute(
                    f"select {_SUMMARY_SELECT} from session_summaries s where s.record_id = %s order by s.id",
                    [record_id],
                )
                summaries = [_decode_summary(s) for s in cur.fetchall()]
                at = _now()
                # replaced whole, as SQLite does, so the feed's trigger fires
                cur.execute("delete from forgotten_records where record_id = %s", [record_id])
                cur.execute(
                    "insert into forgotten_records (record_id, record_hash, project_id, session_id, reason, actor, "
                    "forgotten_at, payload, purged_at) values (%s, %s, %s, %s, %s, %s, %s, %s, null)",
                    [
                        record_id,
                        record["record_hash"],
                        record["project_id"],
                        record["session_id"],
                        reason or "",
                        actor,
                        at,
                        Jsonb({"record": record, "session_summaries": summaries}),
                    ],
                )
                cur.execute("delete from session_summaries where record_id = %s", [record_id])
                cur.execute("delete from memory_records where record_id = %s", [record_id])
                self._forget_derived(cur, record)
                self._audit(cur, record_id, "forget", actor, reason, at=at)
                done.append(record)
        return done

    def pin(self, record_id: str, rule: str, at: str) -> None:
        with self._tx("pinning a record in") as cur:
            cur.execute(
                "update memory_records set pinned = coalesce(pinned, '{}'::jsonb) || jsonb_build_object(%s::text, %s::text) "
                "where record_id = %s",
                [rule, at, record_id],
            )

    def restore(self, record_ids, *, actor: str) -> tuple[list[dict], list[str]]:
        restored, purged = [], []
        with self._tx("restoring records in") as cur:
            for record_id in dict.fromkeys(record_ids):
                cur.execute(
                    "select payload from forgotten_records where record_id = %s for update", [record_id]
                )
                row = cur.fetchone()
                if row is None:
                    continue
                if not row["payload"]:
                    purged.append(record_id)
                    continue
                record = row["payload"]["record"]
                _insert(cur, "memory_records", _record_row(record), conflict="do nothing")
                for summary in row["payload"].get("session_summaries", []):
                    _insert(cur, "session_summaries", summary, conflict="do nothing")
                cur.execute("delete from forgotten_records where record_id = %s", [record_id])
                self._forget_derived(cur, record)
                self._audit(cur, record_id, "restore", actor)
                restored.append(_decode_record(record))
        return restored, purged

    def _forgotten_hashes(self, cur, hashes) -> set[str]:
        hashes = list(hashes)
        if not hashes:
            return set()
        cur.execute("select record_hash from forgotten_records where record_hash = any(%s::text[])", [hashes])
        return {r["record_hash"] for r in cur.fetchall()}

    def tombstones(self, record_ids) -> dict[str, dict]:
        ids = list(dict.fromkeys(record_ids))
        if not ids:
            return {}
        with self._tx("reading") as cur:
            cur.execute(
                "select f.record_id, f.record_hash, f.project_id, f.actor, f.forgotten_at, "
                "f.purged_at is not null as purged, f.payload -> 'record' ->> 'actor' as record_actor, "
                "(select max(c.seq) from record_changes c where c.record_id = f.record_id "
                "and c.change = 'forgotten') as seq "
                "from forgotten_records f where f.record_id = any(%s::text[])",
                [ids],
            )
            return {r.pop("record_id"): r for r in cur.fetchall()}

    def purgeable(self, *, record_ids=None, older_than: str | None = None) -> list[str]:
        """Tombstones still holding their record: these ids, those forgotten before a time, or all."""
        sql, args = "select record_id from forgotten_records where payload is not null", list[Any]()
        if older_than:
            sql += " and forgotten_at < %s"
            args.append(older_than)
        if record_ids is not None:
            sql += " and record_id = any(%s::text[])"
            args.append(list(record_ids))
        with self._tx("reading") as cur:
            cur.execute(sql + " order by record_id", args)
            return [r["record_id"] for r in cur.fetchall()]

    def purge(self, record_ids, *, actor: str) -> int:
        """What SQLite's purge drops, in one transaction: the tombstone's payload, the old text of its
        audit rows, its source events no live or kept record cites, and the prompt of its extraction
        run when no live record came from it. (The server's own storage reclaims the bytes at VACUUM.)"""
        ids = list(dict.fromkeys(record_ids))
        if not ids:
            return 0
        with self._tx("purging records in") as cur:
            return self._purge(cur, ids, actor)

    def _purge(self, cur, ids: list[str], actor: str) -> int:
        cur.execute(
            "select record_id, payload -> 'record' as record from forgotten_records "
            "where record_id = any(%s::text[]) and payload is not null for update",
            [ids],
        )
        found = cur.fetchall()
        if not found:
            return 0
        done = [r["record_id"] for r in found]
        events = sorted({e for r in found for e in (r["record"] or {}).get("source_event_ids") or []})
        runs = sorted({r["record"]["run_id"] for r in found if (r["record"] or {}).get("run_id")})
        at = _now()
        cur.execute(
            "update forgotten_records set payload = null, purged_at = %s where record_id = any(%s::text[])",
            [at, done],
        )
        cur.execute(
            "update record_audit set before = null, after = null where record_id = any(%s::text[])", [done]
        )
        # `@>` of a one-id array: pg008's GIN indexes find who cites it
        if events:
            cur.execute(
                "delete from events e where e.event_id = any(%s::text[]) "
                "and not exists (select 1 from memory_records r "
                "where r.source_event_ids @> jsonb_build_array(e.event_id)) "
                "and not exists (select 1 from forgotten_records f where f.payload is not null "
                "and f.payload -> 'record' -> 'source_event_ids' @> jsonb_build_array(e.event_id))",
                [events],
            )
        if runs:
            cur.execute(
                "update extraction_runs x set request = '' where x.run_id = any(%s::text[]) "
                "and not exists (select 1 from memory_records r where r.run_id = x.run_id)",
                [runs],
            )
        for record_id in done:
            self._audit(cur, record_id, "purge", actor, at=at)
        return len(done)

    def expire_forgotten(self, before: str) -> int:
        with self._tx("expiring forgotten records in") as cur:
            cur.execute(
                "select record_id from forgotten_records where payload is not null and forgotten_at < %s "
                "order by record_id",
                [before],
            )
            ids = [r["record_id"] for r in cur.fetchall()]
            return self._purge(cur, ids, "retention") if ids else 0

    # --- change feed ---

    def changes(self, project_ids: list[str], *, after: int = 0, limit: int = 500) -> dict:
        """The record_changes feed (migrations.PG002_RECORD_CHANGES) of these projects after `after`.

        The feed keeps each change's project, so a team server with many projects reads only
        the asked ones' numbers; `after` comes back as the last number read. Each project's
        numbers are read in order from idx_record_changes_feed (pg008), at most `limit` of each
        (FEED_AFTER): `project_id = any(…) order by seq` sorted every number of the project after
        the cursor for each page (a joining teammate's pages grew with the square of the project),
        or walked the whole feed's newer numbers when the cursor of a quiet project was old.
        """
        empty = {"records": [], "forgotten": [], "purged": [], "marks": [], "after": after}
        if not project_ids:
            return empty
        with self._tx("reading") as cur:
            cur.execute(FEED_AFTER, [list(dict.fromkeys(project_ids)), after, limit, limit])
            feed = cur.fetchall()
            if not feed:
                return empty
            new_ids = [c["record_id"] for c in feed if c["change"] == "record"]
            gone_ids = [c["record_id"] for c in feed if c["change"] == "forgotten"]
            cur.execute(
                _select_records("where r.record_id = any(%s::text[]) and r.project_id = any(%s::text[])"),
                [new_ids, list(project_ids)],
            )
            live = {r["record_id"]: _decode_record(r) for r in cur.fetchall()}
            cur.execute(
                "select record_id, record_hash, project_id, actor, forgotten_at, "
                "payload -> 'record' ->> 'actor' as record_actor from forgotten_records "
                "where record_id = any(%s::text[]) and project_id = any(%s::text[])",
                [gone_ids, list(project_ids)],
            )
            gone = {r["record_id"]: r for r in cur.fetchall()}
            purged_ids = [c["record_id"] for c in feed if c["change"] == "purged"]
            cur.execute(
                "select record_id, record_hash, project_id, purged_at from forgotten_records "
                "where record_id = any(%s::text[]) and project_id = any(%s::text[]) "
                "and purged_at is not null",
                [purged_ids, list(project_ids)],
            )
            purged = {r["record_id"]: r for r in cur.fetchall()}
            mark_ids = [c["record_id"] for c in feed if c["change"] == "mark"]
            marked = {}
            if mark_ids:
                cur.execute(
                    "select record_id, project_id, freshness, outcome from memory_records "
                    "where record_id = any(%s::text[]) and project_id = any(%s::text[])",
                    [mark_ids, list(project_ids)],
                )
                marked = {r["record_id"]: dict(r) for r in cur.fetchall()}
        return assemble_changes(feed, live, gone, purged, marked)

    def set_marks(self, marks: list[dict], *, actor: str) -> list[dict]:
        from kirolearn.core.ids import new_ulid

        done: list[dict] = []
        if not marks:
            return done
        with self._tx("marking records in") as cur:
            # one lock order: no deadlock
            for mark in sorted(marks, key=lambda m: m["record_id"]):
                cur.execute(
                    "select record_id, freshness, outcome from memory_records where record_id = %s "
                    "for update",
                    [mark["record_id"]],
                )
                row = cur.fetchone()
                if row is None:
                    continue
                after = {
                    k: mark[k]
                    for k in ("freshness", "outcome")
                    if mark.get(k) is not None and mark[k] != row[k]
                }
                if not after:
                    continue
                before = {k: row[k] for k in after}
                cur.execute(
                    "update memory_records set freshness = %s, outcome = %s where record_id = %s",
                    [
                        after.get("freshness", row["freshness"]),
                        after.get("outcome", row["outcome"]),
                        mark["record_id"],
                    ],
                )
                _insert(
                    cur,
                    "record_audit",
                    {
                        "audit_id": new_ulid(),
                        "record_id": mark["record_id"],
                        "action": "mark",
                        "actor": actor,
                        "reason": mark.get("reason") or "",
                        "at": mark.get("at") or _now(),
                        "before": before,
                        "after": after,
                    },
                )
                done.append(
                    {
                        "record_id": mark["record_id"],
                        "before": before,
                        "after": after,
                        "reason": mark.get("reason") or "",
                    }
                )
        return done

    def events_since(
        self,
        project_ids: list[str],
        stored_since: str | None,
        *,
        after: tuple[str, str] | None = None,
        limit: int = 1000,
    ) -> list[dict]:
        if not project_ids:
            return []
        query = "select " + ", ".join(EVENT_COLUMNS) + " from events where project_id = any(%s::text[])"
        args: list = [list(project_ids)]
        if stored_since is not None:
            query += " and stored_at >= %s"
            args.append(stored_since)
        if after is not None:
            query += " and (stored_at, event_id) > (%s, %s)"
            args.extend(after)
        with self._tx("reading") as cur:
            cur.execute(query + " order by stored_at, event_id limit %s", [*args, limit])
            return cur.fetchall()

    # --- figures, export and import ---

    def counts(self) -> dict:
        with self._tx("reading") as cur:
            cur.execute(
                "select (select count(*) from events)::int as events, "
                "(select count(*) from memory_records)::int as records"
            )
            return dict(cur.fetchone())

    def integrity_problem(self) -> str | None:
        """None once the server answers a read of the store: PostgreSQL guards its own pages (a damaged
        one is an error on the read that meets it, with data checksums on); there is no cheap whole-store
        check like SQLite's quick_check. An unreachable server raises StoreError."""
        with self._tx("checking") as cur:
            cur.execute("select count(*) from kirolearn_migrations")
            cur.fetchone()
        return None

    def figures(self, since: str, *, projects: bool = True) -> dict:
        with self._tx("reading") as cur:
            cur.execute(
                """
                select (select count(*) from events)::int as events,
                       (select count(*) from memory_records)::int as records,
                       (select count(*) from forgotten_records)::int as forgotten,
                       (select count(*) from events where extract_state = 'pending')::int as pending_events,
                       (select count(*) from extraction_runs where outcome = 'failed' and started_at >= %s)::int
                           as extraction_failures_24h""",
                [since],
            )
            out = dict(cur.fetchone())
            cur.execute(
                "select min(project_root) as project_root, count(*)::int as events, "
                "(count(*) filter (where extract_state = 'pending'))::int as pending "
                "from events group by project_id order by 1"
            )
            per_project = cur.fetchall()
            cur.execute(
                "select min(project_root) as project_root, count(*)::int as n "
                "from memory_records group by project_id"
            )
            records = {r["project_root"]: r["n"] for r in cur.fetchall()}
            cur.execute("select finished_at, stats from drain_runs order by drain_id desc limit 1")
            last = cur.fetchone()
        for p in per_project:
            p["records"] = records.get(p["project_root"], 0)
        out["projects"] = per_project
        out["last_drain"] = (
            {"finished_at": last["finished_at"], **json.loads(last["stats"] or "{}")} if last else None
        )
        return {
            k: out[k]
            for k in (
                "events",
                "records",
                "forgotten",
                "pending_events",
                "projects",
                "last_drain",
                "extraction_failures_24h",
            )
        }

    def export_objects(self) -> Iterator[dict]:
        """Read in one repeatable-read snapshot through a server-side cursor (2,000 rows a fetch)."""
        selects = (
            ("event", "select " + ", ".join(EVENT_COLUMNS) + " from events order by event_id", None),
            (
                "record",
                f"select {_RECORD_SELECT} from memory_records r order by r.created_at, r.record_id",
                _decode_record,
            ),
            (
                "summary",
                f"select {_SUMMARY_SELECT} from session_summaries s order by s.ended_at, s.id",
                _decode_summary,
            ),
        )
        with self._tx("exporting") as _:
            self.conn.execute("set transaction isolation level repeatable read, read only")
            for kind, query, decode in selects:
                with self.conn.cursor(name=f"kirolearn_export_{kind}") as cur:
                    cur.itersize = 2000
                    cur.execute(query)
                    for row in cur:
                        yield {"type": kind, **(decode(row) if decode else row)}

    def import_objects(self, objects: list[dict]) -> dict:
        kinds = {
            "event": ("events", EVENT_COLUMNS),
            "record": ("memory_records", RECORD_COLUMNS),
            "summary": ("session_summaries", SUMMARY_COLUMNS),
        }
        rows: dict = {"event": [], "record": [], "summary": []}
        for obj in objects:
            table, columns = kinds[obj["type"]]
            row = {k: v for k, v in obj.items() if k in columns}
            rows[obj["type"]].append(_record_row(row) if obj["type"] == "record" else row)
        counts: dict[str, Any] = {
            "events": [0, 0],
            "records": [0, 0],
            "summaries": [0, 0],
            "forgotten_skipped": 0,
        }
        with self._tx("importing into") as cur:
            self._shared_forget_lock(cur)
            cur.execute(
                "select record_id from forgotten_records where record_id = any(%s::text[])",
                [
                    [r["record_id"] for r in rows["record"]]
                    + [s["record_id"] for s in rows["summary"] if s.get("record_id")]
                ],
            )
            gone_ids = {r["record_id"] for r in cur.fetchall()}
            gone_hashes = self._forgotten_hashes(cur, [r["record_hash"] for r in rows["record"]])
            keys = {
                "event": ("events", "event_id"),
                "record": ("records", "record_id"),
                "summary": ("summaries", "id"),
            }
            for kind, (key, pk) in keys.items():
                wanted = []
                for row in rows[kind]:
                    if kind == "record" and (
                        row["record_id"] in gone_ids or row["record_hash"] in gone_hashes
                    ):
                        counts["forgotten_skipped"] += 1
                    elif kind == "summary" and row.get("record_id") in gone_ids:
                        counts["forgotten_skipped"] += 1
                    else:
                        wanted.append(row)
                table, columns = kinds[kind]
                added = len(_insert_many(cur, table, columns, wanted, pk))
                counts[key] = [added, len(wanted) - added]
        return {
            "events": {"added": counts["events"][0], "present": counts["events"][1]},
            "records": {"added": counts["records"][0], "present": counts["records"][1]},
            "summaries": {"added": counts["summaries"][0], "present": counts["summaries"][1]},
            "forgotten_skipped": counts["forgotten_skipped"],
        }


class _Transaction:
    """`with store._tx(doing) as cur`: one transaction on the store's connection, errors translated."""

    def __init__(self, store: PostgresStore, doing: str):
        self.store, self.doing = store, doing

    def __enter__(self):
        if self.store.conn is None or self.store.conn.broken:
            self.store.close()
            # the server came back (or the store was used after an outage)
            self.store._connect()
        self._tx = self.store.conn.transaction()
        try:
            self._tx.__enter__()
        except Exception as exc:  # noqa: BLE001 - translated below
            self._translate(exc)
            raise
        self.cur = self.store.conn.cursor()
        return self.cur

    def __exit__(self, kind, exc, tb):
        try:
            self.cur.close()
            self._tx.__exit__(kind, exc, tb)
        except Exception as failure:  # noqa: BLE001
            # a failed COMMIT (the connection dropped)
            self._translate(failure)
            raise
        if exc is not None:
            self._translate(exc)
        return False

    def _translate(self, exc: BaseException) -> None:
        import psycopg

        # programming errors caused by the server's set-up, not by our SQL
        setup = (
            psycopg.errors.InsufficientPrivilege,
            psycopg.errors.InvalidSchemaName,
            psycopg.errors.UndefinedTable,
        )
        if isinstance(exc, setup) or (
            isinstance(exc, psycopg.Error) and not isinstance(exc, psycopg.ProgrammingError)
        ):
            raise store_error(exc, self.store.url, self.doing) from None


# --- rows ---

_RECORD_SELECT = ", ".join(f"r.{c}" for c in RECORD_COLUMNS)
_SUMMARY_SELECT = ", ".join(f"s.{c}" for c in SUMMARY_COLUMNS)


def _select_records(tail: str) -> str:
    return f"select {_RECORD_SELECT} from memory_records r {tail}"


def _union(held, incoming) -> list:
    """Two lists' union, the held one's order first (a merge survivor's lists, Store.merge_lists)."""
    seen: dict = {}
    for value in [*(held or ()), *(incoming or ())]:
        seen.setdefault(json.dumps(value, sort_keys=True, ensure_ascii=False), value)
    return list(seen.values())


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _refuse_unknown(rows: list[dict], columns, table: str) -> None:
    unknown = sorted({k for row in rows for k in row} - set(columns))
    if unknown:
        raise ValueError(f"{table} has no column {', '.join(unknown)}")


def _record_row(record: dict) -> dict:
    """A record dict with its record_hash (kirolearn.store.base.record_hash) and lists as lists."""
    data = record.model_dump(mode="json") if hasattr(record, "model_dump") else dict(record)
    for key in LOCAL_ONLY:
        data.pop(key, None)
    for key in RECORD_LISTS:
        value = data.get(key)
        if isinstance(value, str):  # a SQLite row's JSON text
            try:
                value = json.loads(value or "[]")
            except ValueError:
                value = []
        data[key] = list(value or [])
    # JSON text from a SQLite row; NULL when empty
    for key in ("claims", "cites", "pinned"):
        value = data.get(key)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = None
        if key in data:
            data[key] = value or None
    if not data.get("record_hash"):
        data["record_hash"] = record_hash(data)
    return data


def _insert(cur, table: str, row: dict, conflict: str = "") -> bool:
    """Insert one row (lists and dicts as jsonb); True if it was written."""
    from psycopg import sql
    from psycopg.types.json import Jsonb

    values = [
        Jsonb(v) if (k in JSON_COLUMNS or isinstance(v, (list, dict))) and v is not None else v
        for k, v in row.items()
    ]
    query = sql.SQL("insert into {} ({}) values ({})").format(
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, row)),
        sql.SQL(", ").join(sql.Placeholder() * len(row)),
    )
    if conflict:
        query = sql.SQL("{} on conflict {}").format(query, sql.SQL(conflict))
    cur.execute(query, values)
    return cur.rowcount > 0


def _insert_many(cur, table: str, columns, rows: list[dict], key: str) -> list[str]:
    """Insert rows in one statement (`insert … select from jsonb_populate_recordset … on conflict do
    nothing`); returns the keys of the rows written. A column a row lacks takes its default."""
    if not rows:
        return []
    # key order: overlapping uploads then wait for each other, never deadlock
    rows = sorted((_with_defaults(table, row) for row in rows), key=lambda r: str(r.get(key)))
    from psycopg import sql
    from psycopg.types.json import Jsonb

    # a store a migration behind takes what it has
    present = {k for row in rows for k in row}
    names = sql.SQL(", ").join(sql.Identifier(c) for c in columns if c in present)
    query = sql.SQL(
        "insert into {table} ({names}) select {names} from jsonb_populate_recordset(null::{table}, %s) "
        "on conflict do nothing returning {key}"
    ).format(table=sql.Identifier(table), names=names, key=sql.Identifier(key))
    cur.execute(query, [Jsonb(rows)])
    return [r[key] for r in cur.fetchall()]


_DEFAULTS: dict[str, dict[str, Any]] = {
    "events": EVENT_DEFAULTS,
    "memory_records": {**{k: [] for k in RECORD_LISTS}, "outcome": "unknown", "freshness": "current"},
    "session_summaries": {k: [] for k in SUMMARY_LISTS},
}


def _with_defaults(table: str, row: dict) -> dict:
    out = {k: (int(v) if isinstance(v, bool) else v) for k, v in row.items()}
    for key, value in _DEFAULTS.get(table, {}).items():
        if out.get(key) is None:
            out[key] = value
    return out


def _filters(*, project_id=None, types=None, since=None, session_id=None) -> tuple[list[str], list]:
    conds, args = [], []
    if project_id:
        conds.append("r.project_id = %s")
        args.append(project_id)
    if types:
        conds.append("r.observation_type = any(%s::text[])")
        args.append(list(types))
    if since:
        conds.append("r.created_at >= %s")
        args.append(since)
    if session_id:
        conds.append("r.session_id = %s")
        args.append(session_id)
    return conds, args


def _decode_record(row: dict) -> dict:
    out = {c: row[c] for c in RECORD_COLUMNS if c in row}
    for key in RECORD_LISTS:
        value = out.get(key)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = []
        out[key] = value if isinstance(value, list) else []
    for key, kind in (("claims", list), ("cites", list), ("pinned", dict)):
        if key in out:
            value = out[key]
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    value = None
            out[key] = value if isinstance(value, kind) else ([] if kind is list else None)
    return out


def _decode_summary(row: dict) -> dict:
    out = {c: row[c] for c in SUMMARY_COLUMNS if c in row}
    for key in SUMMARY_LISTS:
        value = out.get(key)
        out[key] = value if isinstance(value, list) else []
    return out
