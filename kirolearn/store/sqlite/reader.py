"""The store's read-only queries, on a standard-library `sqlite3` connection.

The hook runs these (architecture.md rule 1: no sqlite-utils on that path), and so do
`search`, `context`, MCP and the SQLite store itself: there is one definition
of each recall query, and the ranking built on top of them lives once, in
kirolearn.recall.lexical. Nothing here writes.

Each function takes a connection from `connect_readonly` (or any sqlite3
connection, including a sqlite-utils Database's `.conn`) and returns plain rows.
A store older than a migration gives what it can: no table means no rows.
"""

import _thread  # built in: `threading` would cost the hook ~1.5 ms of imports
import os
import time

try:  # not the sqlite3 package: its unused datetime adapters cost the hook ~3 ms
    import _sqlite3 as sqlite3
except ImportError:  # not CPython
    import sqlite3  # type: ignore[no-redef]

from kirolearn.store.fields import FIELD_WEIGHTS

# in index order; `expansion` (drain-derived, recall.semantic) arrived in m012
FTS_COLUMNS = ("title", "summary", "facts", "concepts", "files_touched", "project_id", "expansion")
BM25_WEIGHTS = ", ".join(str(FIELD_WEIGHTS.get(c, 0.0)) for c in FTS_COLUMNS)  # bm25() arguments
TEXT_COLUMNS = "{title summary facts concepts files_touched expansion}"
OLD_TEXT_COLUMNS = "{title summary facts concepts files_touched}"


class _Deadline:
    def __init__(self, seconds: float):
        self.until = time.monotonic() + seconds

    def __call__(self) -> int:
        return 1 if time.monotonic() > self.until else 0


def connect_readonly(db_path: str, budget: float):
    """A read-only connection that gives up after `budget` seconds, or None if there is no database."""
    if not os.path.exists(db_path):
        return None
    # by hand: urllib.parse costs an import; a URI path needs only these escaped
    escaped = os.path.abspath(db_path).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    uri = "file:" + escaped + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=min(budget, 0.2), check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.set_progress_handler(_Deadline(budget), 2000)
    # up to 32 MB of pages, used as read (SQLite's default is 2 MB): a long-lived reader (the recall
    # server, MCP, search in process) keeps the rows a ranking joins, ~16 -> ~11 ms a prompt at 1M
    try:
        conn.execute("pragma cache_size = -32768")
    except sqlite3.OperationalError:  # locked or unreadable: the first query says so, where callers expect it
        pass
    return conn


def database_file(conn) -> str:
    """The file behind a connection ('' for an in-memory database)."""
    return conn.execute("pragma database_list").fetchone()[2] or ""


def _dicts(cursor) -> "list[dict]":
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _placeholders(values) -> str:
    return ",".join("?" * len(values))


def record_filters(*, project_id=None, types=None, since=None, session_id=None, file=None, alias="r"):
    """SQL conditions and arguments for the filters `list`, `search` and the viewer share."""
    conds, args = [], []
    if project_id:
        conds.append(f"{alias}.project_id = ?")
        args.append(project_id)
    if types:
        conds.append(f"{alias}.observation_type in ({_placeholders(types)})")
        args.extend(types)
    if since:
        conds.append(f"{alias}.created_at >= ?")
        args.append(since)
    if session_id:
        conds.append(f"{alias}.session_id = ?")
        args.append(session_id)
    if file:
        # FILE or */FILE: records keep paths as the agent wrote them
        conds.append(
            f"exists (select 1 from json_each({alias}.files_touched) j "
            "where j.value = ? or j.value like ? escape '\\')"
        )
        args.extend([file, "%/" + _like(file.lstrip("/"))])
    return conds, args


# --- word statistics (which prompt words are too common to search) ---


TOKENIZER = "porter"  # memory_records_fts's, as kirolearn.store.sqlite.migrations makes it
_tokenizer: list = []  # the in-memory index, made on first use
_tokenizing = _thread.allocate_lock()  # the recall server's threads share it


def word_tokens(word: str) -> "list[str]":
    """The tokens FTS5's unicode61 tokenizer makes of a word, unstemmed: its runs of letters and
    digits ("test_checkout_total" is searched as the phrase "test checkout total")."""
    out, run = [], ""
    for ch in word.lower():
        if ch.isalnum():
            run += ch
        elif run:
            out.append(run)
            run = ""
    return out + [run] if run else out


def index_terms(words: "list[str]") -> "list[list[str]]":
    """The terms memory_records_fts indexes for each word: FTS5's own Porter tokenizer, run on an
    in-memory table (~1 ms the first time in a process, ~0.3 ms after), so a word is counted as the
    index holds it ("died" is "di", "test_checkout" is "test" and "checkout")."""
    with _tokenizing:
        if not _tokenizer:
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            conn.execute(f"create virtual table t using fts5(x, tokenize='{TOKENIZER}')")
            conn.execute("create virtual table v using fts5vocab(t, 'instance')")
            _tokenizer.append(conn)
        conn = _tokenizer[0]
        conn.execute("delete from t")
        conn.executemany("insert into t(rowid, x) values (?, ?)", list(enumerate(words)))
        out: list[list[str]] = [[] for _ in words]
        for term, doc in conn.execute("select term, doc from v order by doc, offset"):
            out[doc].append(term)
    return out


def term_doc_counts(
    conn, prefixes: "list[str]", words: "list[str] | None" = None
) -> "tuple[int, list[int]] | None":
    """(records indexed, records containing a term starting with each prefix), or None if unknown.

    The drainer keeps these counts in term_docs (one indexed range per word); a
    store without it falls back to FTS5's vocabulary table, which walks each
    term's whole doclist (~8 ms a word at 100k). The index holds Porter stems and
    a word is looked up by its stem-like prefix, which misses a stem shorter than
    it ("reference" is indexed as "refer", "died" as "di"): `words`, when given, are
    the words the prefixes come from, each also counted by the term it is indexed as
    (index_terms; a primary-key lookup); a word counts the most of both.
    """
    try:
        row = conn.execute("select docs from term_docs where term = ''").fetchone()
    except sqlite3.OperationalError:  # a store not migrated to m012 yet
        row = None
    try:
        if row is not None:
            sql = "select coalesce(sum(docs), 0) from term_docs where term >= ? and term < ?"
            total = row[0]
        else:
            sql = "select coalesce(sum(doc), 0) from memory_records_fts_vocab where term >= ? and term < ?"
            total = conn.execute("select count(*) from memory_records_fts_docsize").fetchone()[0]
        if total < 1000:  # too few records for the counts to matter: the caller keeps every word
            return total, []
        counts = [conn.execute(sql, [p, p + "\U0010ffff"]).fetchone()[0] for p in prefixes]
        if words and row is not None:
            exact = "select coalesce(max(docs), 0) from term_docs where term = ?"
            counts = [
                max(count, conn.execute(exact, terms).fetchone()[0]) if len(terms) == 1 else count
                for count, terms in zip(counts, index_terms(words))
            ]
        return total, counts
    except sqlite3.OperationalError:  # an older store without the vocabulary table
        return None


# --- full-text search ---


def _phrase(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def fts_query(words: "list[str]", project_id: "str | None" = None, columns: str = TEXT_COLUMNS) -> str:
    """An FTS5 MATCH expression: each word a quoted phrase, OR-ed over the text columns,
    AND-ed with the project when given (FTS5 then scores only that project's rows).
    Safe for any input: nothing the user typed is parsed as FTS5 syntax."""
    text = f"{columns} : (" + " OR ".join(_phrase(w) for w in words) + ")"
    return f"project_id : {_phrase(project_id)} AND {text}" if project_id else text


def _fts_top(
    conn,
    columns: str,
    match: str,
    depth: int,
    weights: str,
    conds: list,
    args: list,
    limit: int,
    after_rowid: int = 0,
):
    """Up to `limit` rows, best first, of the `depth` best index matches that pass `conds` (and past
    `after_rowid`). Ranked inside the FTS index before the join: joining every match before sorting
    read thousands of full records per query at 100k records."""
    # rank first, join only the top rows; a rowid floor goes inside the FTS query
    floor = " and rowid > ?" if after_rowid else ""
    sql = (
        f"with top as (select rowid, bm25(memory_records_fts, {weights}) as bm25 from memory_records_fts "
        f"where memory_records_fts match ?{floor} order by bm25 limit ?) "
        f"select {columns}, top.bm25 from top join memory_records r on r.rowid = top.rowid"
    )
    if conds:
        sql += " where " + " and ".join(conds)
    sql += " order by top.bm25 limit ?"
    return _dicts(conn.execute(sql, [match, *([after_rowid] if after_rowid else []), depth, *args, limit]))


def fts_matches(
    conn,
    words: "list[str]",
    *,
    depth: int,
    limit: int,
    project_id=None,
    types=None,
    since=None,
    session_id=None,
    file=None,
    columns: str = "r.*",
    weights: str = BM25_WEIGHTS,
    project_in_match: bool = True,
    after_rowid: int = 0,
) -> list:
    """Rows (dicts) of memory_records containing any of `words`, best BM25 first, with a `bm25` column
    (lower is better, as SQLite gives it).

    `depth` is how many index matches are ranked before the filters apply. The
    project narrows the MATCH itself (so FTS5 scores only its rows) unless
    `project_in_match` is false: then it filters the ranked matches like the
    other filters (cheaper when the project holds most records: BM25 reads a
    MATCH phrase's whole doclist, the project's too). `after_rowid`: only records
    past that rowid (the newest ones) are ranked. A store not yet migrated
    to m012 (no `expansion` column) is searched too. The query is always
    well-formed: any other error means a sick store.
    """
    conds, args = record_filters(
        project_id=project_id, types=types, since=since, session_id=session_id, file=file
    )
    narrow = project_id if project_in_match else None
    return _on_any_store(
        lambda cols, text: _fts_ranked(
            conn, cols, words, narrow, depth, weights, conds, args, limit, after_rowid, text
        ),
        columns,
    )


def _on_any_store(run, columns: str) -> list:
    """run(columns, text columns) on this store; a store the drain has not migrated yet is asked again
    without the marks (before m020: nothing demoted) or without the expansion column (before m012)."""
    try:
        return _on_any_text(run, columns)
    except sqlite3.OperationalError as exc:
        if MARK_COLUMNS not in columns or "no such column" not in str(exc):
            raise
        return _on_any_text(run, columns.replace(MARK_COLUMNS, ""))


def _on_any_text(run, columns: str) -> list:
    try:
        return run(columns, TEXT_COLUMNS)
    except sqlite3.OperationalError as exc:
        if "expansion" not in str(exc):
            raise
        return run(columns, OLD_TEXT_COLUMNS)


def _fts_ranked(conn, columns, words, narrow, depth, weights, conds, args, limit, after_rowid, text):
    rows = _fts_top(
        conn, columns, fts_query(words, narrow, text), depth, weights, conds, args, limit, after_rowid
    )
    if narrow or _project_arg(conds, args) is None or len(rows) >= limit:
        return rows
    # the filters kept fewer than asked of the `depth` best: when the index held more matches, other
    # projects crowded them out, and all the matches are ranked (as many as the words' capped counts:
    # cheaper on a big store than the project's doclist in the MATCH)
    floor = " and rowid > ?" if after_rowid else ""
    matches = conn.execute(
        f"select count(*) from memory_records_fts where memory_records_fts match ?{floor}",
        [fts_query(words, None, text), *([after_rowid] if after_rowid else [])],
    ).fetchone()[0]
    if matches <= depth:
        return rows
    return _fts_top(
        conn, columns, fts_query(words, None, text), matches, weights, conds, args, limit, after_rowid
    )


PHRASE_SCAN = 5000  # matches of one phrase read past the floor, newest first


def phrase_matches(
    conn,
    phrase: str,
    *,
    after_rowid: int,
    limit: int,
    columns: str,
    project_id=None,
    types=None,
    since=None,
    session_id=None,
    file=None,
) -> list:
    """Rows (dicts, newest first, `bm25` 0.0) of records past `after_rowid` that hold one word as
    FTS5 reads it, unranked: bm25() would count the word's records over the whole index first.

    At most PHRASE_SCAN of the word's matches past the floor are read. A word of one index term is
    read newest first and the reading stops at `limit` rows that pass the filters (a word in every
    record: ~2 ms at 1M records, where joining its 5,000 newest matches cost ~10 ms). A phrase of
    several terms (an identifier) is read oldest first from the floor and its matches joined
    and sorted: FTS5 walks a phrase backwards ~7x slower, and a phrase has few matches."""
    conds, args = record_filters(
        project_id=project_id, types=types, since=since, session_id=session_id, file=file
    )
    where = "".join(" and " + c for c in conds)
    several = len(word_tokens(phrase)) > 1

    def run(cols, text):
        match = fts_query([phrase], None, text)
        if several:
            sql = (
                f"with top as (select rowid from memory_records_fts where memory_records_fts match ? "
                f"and rowid > ? limit ?) select {cols}, 0.0 as bm25 from top "
                f"join memory_records r on r.rowid = top.rowid where 1{where} order by r.rowid desc limit ?"
            )
            return _dicts(conn.execute(sql, [match, after_rowid, PHRASE_SCAN, *args, limit]))
        edge = conn.execute(
            "select rowid from memory_records_fts where memory_records_fts match ? and rowid > ? "
            "order by rowid desc limit 1 offset ?",
            [match, after_rowid, PHRASE_SCAN - 1],
        ).fetchone()
        floor = max(after_rowid, edge[0] - 1) if edge else after_rowid
        # CROSS JOIN keeps the index outside: the planner would otherwise walk a filter's records
        sql = (
            f"select {cols}, 0.0 as bm25 from memory_records_fts f cross join memory_records r "
            f"on r.rowid = f.rowid where memory_records_fts match ? and f.rowid > ?{where} "
            f"order by f.rowid desc limit ?"
        )
        return _dicts(conn.execute(sql, [match, floor, *args, limit]))

    return _on_any_store(run, columns)


def _project_arg(conds: list, args: list) -> "str | None":
    """The project id among record_filters' conditions (it comes first when given), or None."""
    return args[0] if conds and conds[0].endswith(".project_id = ?") else None


class QueryStats:
    """What planning a prompt's ranking needs from the index, read in one call (query_stats)."""

    __slots__ = ("words", "tokens", "parts", "project", "newest_rowid")

    def __init__(self, words, tokens, parts, project, newest: int) -> None:
        self.words = words  # term_doc_counts of the words
        self.tokens = tokens  # word_tokens of each word
        self.parts = parts  # {token: records holding it} of the words of several tokens (None: unknown)
        self.project = project  # project_docs (None: no project, or unknown)
        self.newest_rowid = newest


def _token_prefix(token: str) -> str:
    # the stem-like prefix recall.lexical looks a word up by; a short token exactly
    if len(token) <= 3:
        return token + "\x00"
    return token if len(token) <= 4 else token[: max(4, len(token) - 3)]


def query_stats(conn, words: "list[str]", prefixes: "list[str]", project_id: "str | None") -> QueryStats:
    """term_doc_counts of the words (looked up by `prefixes`) and of the tokens of those made of
    several, project_docs and newest_rowid. A token of three characters or fewer is counted exactly,
    not by prefix ("ci" is not every word that starts with it)."""
    tokens = [word_tokens(w) for w in words]
    parts = sorted({p for split in tokens if len(split) > 1 for p in split})
    part_counts = None
    if parts:
        found = term_doc_counts(conn, [_token_prefix(p) for p in parts], parts)
        part_counts = dict(zip(parts, found[1])) if found and found[1] else None
    try:
        newest = newest_rowid(conn)
    except sqlite3.OperationalError:  # no records table: nothing to bound
        newest = 0
    return QueryStats(
        term_doc_counts(conn, prefixes, words),
        tokens,
        part_counts,
        project_docs(conn, project_id) if project_id else None,
        newest,
    )


def newest_rowid(conn) -> int:
    """The highest rowid of memory_records (0 when empty): one step down the table's b-tree."""
    return conn.execute("select coalesce(max(rowid), 0) from memory_records").fetchone()[0]


def project_docs(conn, project_id: str) -> "tuple[int, int] | None":
    """(records of a project, records indexed), from the drainer's term_docs copy (a project id is one
    indexed token; its first 12 characters are looked up, as a stemmer may have cut its end), or None
    when unknown."""
    key = project_id.lower()[:12]
    try:
        total = conn.execute("select docs from term_docs where term = ''").fetchone()
        docs = conn.execute(
            "select coalesce(sum(docs), 0) from term_docs where term >= ? and term < ?",
            [key, key + "\U0010ffff"],
        ).fetchone()
    except sqlite3.OperationalError:  # a store not migrated to m012 yet
        return None
    if total is None or not total[0] or len(key) < 12:
        return None
    return min(docs[0], total[0]), total[0]


def project_share(conn, project_id: str) -> "float | None":
    """The share of indexed records that belong to a project (project_docs), or None when unknown."""
    found = project_docs(conn, project_id)
    return None if found is None else found[0] / found[1]


# the marks demote stale or failed records; absent before m020
MARK_COLUMNS = ", r.freshness, r.outcome"
SCORE_COLUMNS = "r.record_id, r.observation_type, r.created_at" + MARK_COLUMNS
RANK_COLUMNS = "r.rowid, " + SCORE_COLUMNS  # what ranking needs, and where to read the rest


def marks_of(conn, record_ids) -> "dict[str, tuple]":
    """{record_id: (freshness, outcome)} of these records ({} on a store before m020)."""
    ids = list(record_ids)
    out = {}
    try:
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            for rid, fresh, outcome in conn.execute(
                "select record_id, freshness, outcome from memory_records "
                f"where record_id in ({_placeholders(part)})",
                part,
            ):
                out[rid] = (fresh, outcome)
    except sqlite3.OperationalError as exc:
        if "no such column" not in str(exc):
            raise
    return out


def records_by_rowid(conn, rowids: "list[int]") -> list:
    """memory_records rows (dicts, with `rowid`) of these rowids, in any order."""
    if not rowids:
        return []
    return _dicts(
        conn.execute(
            f"select rowid, * from memory_records where rowid in ({_placeholders(rowids)})", list(rowids)
        )
    )


def scrubbed_with(conn) -> "int | None":
    """The scrub-rules version the store's text was scrubbed with (None: unknown or no mark)."""
    try:
        row = conn.execute("select value from scrub_state where key = 'scrubbed_with'").fetchone()
        return int(row[0]) if row else None
    except (sqlite3.OperationalError, ValueError, TypeError):
        return None


def latest_records(conn, project_id: str, *, types=None, exclude_strategies=(), limit: int = 5) -> list:
    """A project's newest records (dicts), optionally of some types and not of some strategies."""
    sql = "select * from memory_records where project_id = ?"
    args: list = [project_id]
    if types:
        sql += f" and observation_type in ({_placeholders(types)})"
        args.extend(types)
    if exclude_strategies:
        sql += f" and strategy not in ({_placeholders(exclude_strategies)})"
        args.extend(exclude_strategies)
    sql += " order by created_at desc, record_id desc limit ?"
    args.append(limit)
    return _dicts(conn.execute(sql, args))


# --- session summaries (what a new session resumes from) ---


def session_end_rows(conn, project_id: str, label: "str | None", limit: int) -> "tuple[list, list[str]]":
    """(rows, column names) of a project's session summaries, newest first; ([], []) before m008."""
    sql = "select * from session_summaries where project_id = ?"
    args: list = [project_id]
    if label is not None:
        sql += " and project = ?"
        args.append(label)
    sql += " order by ended_at desc, rowid desc limit ?"
    args.append(limit)
    try:
        cursor = conn.execute(sql, args)
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):  # a store from before session_end existed
            return [], []
        raise
    return [tuple(r) for r in cursor.fetchall()], [d[0] for d in cursor.description]


def session_end_labels(conn, project_id: str) -> "list[str]":
    """The labels (`project` arguments) this project's session ends used."""
    try:
        return [
            r[0]
            for r in conn.execute(
                "select distinct project from session_summaries where project_id = ? order by project",
                [project_id],
            )
        ]
    except sqlite3.OperationalError:
        return []


def project_ids(conn) -> "list[str]":
    """Every project id that has records."""
    return [r[0] for r in conn.execute("select distinct project_id from memory_records")]


def all_records(conn) -> "list[dict]":
    """Every record, oldest first (created_at, then record_id), as dicts."""
    return _dicts(conn.execute("select * from memory_records order by created_at, record_id"))


def record_count(conn) -> int:
    """How many records the store holds."""
    return conn.execute("select count(*) from memory_records").fetchone()[0]


# --- marks: superseded_by, merged_into ---


def record_marks(conn, record_ids) -> "dict[str, tuple]":
    """{record_id: (superseded_by, merged_into, cites)} of the marked ones among these ids (cites: the
    records an echo repeats, a JSON list or None); {} on a store before m021. Primary-key lookups:
    recall asks it for its ranked candidates."""
    ids = list(dict.fromkeys(record_ids))
    out: dict = {}
    for columns, where in (
        (
            "superseded_by, merged_into, cites",
            "superseded_by is not null or merged_into is not null or cites is not null",
        ),
        ("superseded_by, merged_into, null", "superseded_by is not null or merged_into is not null"),
    ):
        try:
            for i in range(0, len(ids), 500):
                part = ids[i : i + 500]
                for rid, sup, merged, cites in conn.execute(
                    f"select record_id, {columns} from memory_records where record_id in "
                    f"({_placeholders(part)}) and ({where})",
                    part,
                ):
                    out[rid] = (sup, merged, cites)
            return out
        except sqlite3.OperationalError as exc:
            if "no such column" not in str(exc):
                raise
            out = {}
    return out


def claims_shown(conn, record_ids) -> "dict[str, list[dict]]":
    """{record_id: [claim rows]} of these records, with this machine's last check of each (state,
    now, path, blob): what the hook re-checks before it shows a line. {} on a store before m023."""
    ids = list(dict.fromkeys(record_ids))
    out: dict = {}
    if not ids:
        return out
    try:
        rows = conn.execute(
            "select record_id, file, kind, key, digest, shown, lines, fingerprint, state, now, path, blob "
            f"from record_claims where record_id in ({_placeholders(ids)}) order by record_id, file, key",
            ids,
        ).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        return out
    names = ("file", "kind", "key", "digest", "shown", "lines", "fingerprint", "state", "now", "path", "blob")
    for row in rows:
        out.setdefault(row[0], []).append(dict(zip(names, row[1:])))
    return out
