"""Recall: read-only lexical search over memory records (kirolearn.recall.context renders the block).

Standard library only: it runs inside the hook process (architecture.md rule 1), so
it opens SQLite read-only through the stdlib driver (kirolearn.store.sqlite.reader), inside a time budget. No
database means nothing to say; a locked, corrupt or slow one raises
sqlite3.Error, which the hook logs and turns into silence. Used by the hook, `kirolearn search` / `kirolearn context`, and MCP.

Ranking: FTS5 BM25 over title, summary, facts, concepts and files (column
weights below), then weighted by record type (summaries and decisions outrank
routine tool use), recency and the record's marks (a record whose files changed or were
deleted since, or whose turn failed, keeps kirolearn.core.marks.factor of its score); ties break on
created_at, then record_id.
"""

import time

from kirolearn.core import jsonfast, marks, paths
from kirolearn.core.isotime import iso_epoch
from kirolearn.core.limits import DEFAULT_TIME_BUDGET
from kirolearn.recall import when
from kirolearn.store.sqlite import reader

# One weight per observation type (tests/test_constants.py checks).
TYPE_WEIGHTS = {
    "session_summary": 1.3,
    "decision": 1.3,
    "error": 1.15,
    "discovery": 1.1,
    "pattern": 1.1,
    "tool_use": 1.0,
    "conversation": 0.6,
}
RECENCY_HALF_LIFE_DAYS = 30.0
MAX_TERMS = 24
SEARCH_LIMIT_MAX = 100  # CLI --limit, MCP limit
CHARS_PER_TOKEN = 4  # rough: no tokenizer dependency
RELATIVE_FLOOR = 0.35  # of the best match's score

COMMON_SHARE = 0.2  # commoner words (idf < log 4): not searched
KEEP_RAREST = 2  # but a prompt's rarest few are kept
COMMON_DOCS = 5000  # nor words in more records: a word costs its document count
RECENT_ROWS = 50_000  # newest rowids a heavy phrase is looked up in (_with_phrases)
MATCH_BUDGET = 3000  # index matches a prompt ranks on a big store; past it, the newest records only

# Filter a big project after ranking: BM25 reads its whole doclist in MATCH.
PROJECT_IN_MATCH_BELOW = 0.75
PROJECT_MATCH_DOCS = 20_000  # so is a bigger project: its doclist costs more than it saves
SHARE_MARGIN = 2.0  # rank this many times the project's expected share, or all are ranked again

# words() tokenizes by hand: re costs the hook ~25M instructions.
_STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does doing done for from get got had has have
    how i if in into is it its it's just let me my no not now of on or our please should so some such
    than that the their them then there these they this those to too up us was we were what when where
    which while who why will with would you your yes ok okay thanks thank hi hello hey also again still
    make sure want need like look see tell show give use using used one two new way any all more most
    very really something anything everything here
    he him his she her hers herself himself i'm me mine myself ours yours yourself its about say said says
    tell told kind kinds type types thing things ever much many lot lots""".split()
)
# Searched, but no prompt is about one alone ("that's all for today").
RELATIVE_DAYS = frozenset(("today", "tonight", "tomorrow", "yesterday"))
# Superseded: this share of its match (kirolearn.core.marks); merged ones are not recalled.
SUPERSEDED_FACTOR = marks.SUPERSEDED_FACTOR
ECHO_FACTOR = marks.ECHO_FACTOR


class Hit:
    """One ranked memory record (a plain class: dataclasses costs the hook ~5 ms of imports)."""

    FIELDS = (
        "record_id",
        "project_root",
        "session_id",
        "title",
        "summary",
        "facts",
        "concepts",
        "files_touched",
        "observation_type",
        "strategy",
        "created_at",
        "bm25",
        "score",
        "matched_terms",
        "actor",
        "freshness",
        "outcome",
        "superseded_by",
        "merged_into",
    )
    __slots__ = FIELDS

    def __init__(
        self,
        record_id,
        project_root,
        session_id,
        title,
        summary,
        facts,
        concepts,
        files_touched,
        observation_type,
        strategy,
        created_at,
        bm25=0.0,
        actor=None,
        freshness=None,
        outcome=None,
        superseded_by=None,
        merged_into=None,
    ):
        self.record_id, self.project_root, self.session_id = record_id, project_root, session_id
        self.title, self.summary, self.facts, self.concepts = title, summary, facts, concepts
        self.files_touched, self.observation_type, self.strategy = files_touched, observation_type, strategy
        self.created_at, self.bm25, self.score, self.matched_terms = created_at, bm25, 0.0, []
        self.actor = actor  # who made it
        # marks (core.marks): demoted and labelled
        self.freshness, self.outcome = freshness or marks.DEFAULT_FRESHNESS, outcome or marks.DEFAULT_OUTCOME
        self.superseded_by, self.merged_into = superseded_by, merged_into  # marks: demoted / hidden

    def to_dict(self) -> dict:
        """Plain dict for --json output and MCP results."""
        return {k: getattr(self, k) for k in self.FIELDS}


# Opening the store read-only


def connect_readonly(db_path: "str | None" = None, budget: float = DEFAULT_TIME_BUDGET):
    """A read-only connection to the store that gives up after `budget` seconds, or None if there is none."""
    return reader.connect_readonly(db_path or paths.db_path(), budget)


# Query building


def _is_word_char(ch: str) -> bool:  # regex \w
    return ch.isalnum() or ch == "_"


def _is_letter(ch: str) -> bool:  # regex [^\W\d_]
    return ch.isalnum() and not ch.isdecimal()


def _scan(chunk: str, out: list) -> None:
    i, n = 0, len(chunk)
    while i < n:
        if not _is_word_char(chunk[i]):
            i += 1
            continue
        j = i
        while j + 1 < n and chunk[j + 1] == "." and _is_letter(chunk[j]):
            j += 2
        if j - i >= 4:  # two or more "letter." pairs: a dotted acronym
            out.append(chunk[i:j])
            i = j
            continue
        j = i + 1
        while j < n and _is_word_char(chunk[j]):
            j += 1
        out.append(chunk[i:j])
        i = j


def words(text: str) -> "list[str]":
    r"""The tokens of `text`, as re.findall(r"(?:[^\W\d_]\.){2,}|\w+", text) finds them.

    No token spans white space, so each white-space-separated chunk is read alone, and one made
    of word characters only (most of them) is a token as it is."""
    out: list = []
    for chunk in text.split():
        if chunk.replace("_", "a").isalnum():  # word characters only
            out.append(chunk)
        else:
            _scan(chunk, out)
    return out


def terms(text: str, limit: int = MAX_TERMS) -> "list[str]":
    """The telling words of `text`: no stopwords, no duplicates, identifiers and long words first."""
    seen: dict = {}
    for position, word in enumerate(words(text or "")):
        low = word.lower()
        if low in _STOPWORDS or low in seen or len(low) > 60:
            continue
        short_ok = "." in low or (len(word) == 2 and word.isupper())  # "U.S.", "CI", "DB"
        if len(low) < 3 and not short_ok and not any(ch.isdigit() for ch in low) and low.isascii():
            continue
        # identifiers (digits, _, camelCase) say the most, then longer words
        identifier = any(ch.isdigit() or ch == "_" for ch in word) or (
            word[:1].islower() and word.lower() != word
        )
        seen[low] = (0 if identifier else 1, -min(len(low), 12), position)
    ranked = sorted(seen, key=lambda t: seen[t])[:limit]
    return sorted(ranked, key=lambda t: seen[t][2])


def _stem_prefix(word: str) -> str:
    return word if len(word) <= 4 else word[: max(4, len(word) - 3)]


def matched(words: "list[str]", text: str) -> "list[str]":
    low = text.lower()
    return [w for w in words if _stem_prefix(w) in low]


def _recency(created_at: str, now: float) -> float:
    t = iso_epoch(created_at)
    if t is None:
        return 0.5
    age_days = max(0.0, (now - t) / 86400)
    return 0.5 + 0.5 * 0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS)  # halves every half-life (no math import)


def hit_of(row, bm25: float = 0.0) -> Hit:
    def lst(value):
        try:
            found = jsonfast.loads(value or "[]")
            return found if isinstance(found, list) else []
        except ValueError:
            return []

    return Hit(
        row["record_id"],
        row["project_root"],
        row["session_id"],
        row["title"],
        row["summary"],
        lst(row["facts"]),
        lst(row["concepts"]),
        lst(row["files_touched"]),
        row["observation_type"],
        row["strategy"],
        row["created_at"],
        bm25=bm25,
        actor=row["actor"] if "actor" in row.keys() else None,
        freshness=row["freshness"] if "freshness" in row.keys() else None,
        outcome=row["outcome"] if "outcome" in row.keys() else None,
        superseded_by=row["superseded_by"] if "superseded_by" in row.keys() else None,
        merged_into=row["merged_into"] if "merged_into" in row.keys() else None,
    )


def _weight(row, now: float, marked: bool = True) -> float:
    """What a match's BM25 is multiplied by: its type, its age, and its marks (kirolearn.core.marks.factor)."""
    weight = TYPE_WEIGHTS.get(row["observation_type"], 1.0) * _recency(row["created_at"], now)
    return weight * marks.factor(row.get("freshness"), row.get("outcome")) if marked else weight


class Plan:
    """How a prompt's words are searched (plan): `words` ranked after rowid `after_rowid` (0: the whole
    store), `apart` looked up unranked in the newest records (_with_phrases), the project narrowed in
    the MATCH (`in_match`) or after ranking, `share` its expected part of the matches."""

    __slots__ = ("words", "after_rowid", "apart", "in_match", "share", "newest_rowid")

    def __init__(self, words, after_rowid=0, apart=(), in_match=True, share=1.0, newest_rowid=0) -> None:
        self.words = list(words)
        self.after_rowid = after_rowid
        self.apart = list(apart)
        self.in_match = in_match
        self.share = share
        self.newest_rowid = newest_rowid


def plan(conn, words: "list[str]", project_id: "str | None" = None) -> Plan:
    """The plan for searching `words` (one reader call: reader.query_stats).

    Words that most records contain get ~0 BM25 weight yet cost the most: scoring a match reads its
    row's size, so a word's cost is its document count. A word is dropped past COMMON_SHARE of the
    records or COMMON_DOCS of them (the cap keeps a big store's cost bounded), but the
    rarest KEEP_RAREST are always kept (past COMMON_DOCS only when no word is under it). A store
    under COMMON_DOCS / COMMON_SHARE records is searched as it always was; on a bigger one, when
    the kept words are in more than MATCH_BUDGET records together, only the newest part of the store
    expected to hold MATCH_BUDGET of their matches is searched (_budget_floor).

    On a big store, kept words in more than COMMON_DOCS records, and heavy phrases (_heavy_phrases),
    go `apart`: BM25 would read their whole doclists whatever the floor."""
    stats = reader.query_stats(conn, words, [_stem_prefix(w) for w in words], project_id)
    in_match, share = _project_in_match(stats.project)
    found = stats.words
    if not found or not found[1]:  # counts unknown, or too few records for them to matter
        return Plan(words, 0, (), in_match, share, stats.newest_rowid)
    total, docs = found
    counts = dict(zip(words, docs))
    big = COMMON_SHARE * total > COMMON_DOCS  # a smaller store is searched as it always was
    kept = words
    if len(words) > KEEP_RAREST:
        limit = min(COMMON_SHARE * total, COMMON_DOCS)
        # the rarest stay, but on a big store not past COMMON_DOCS when a word under it is searched anyway
        pool = [w for w in words if counts[w] <= COMMON_DOCS] if big else []
        pool = pool or words
        rarest = set(sorted(pool, key=lambda w: counts[w])[:KEEP_RAREST])
        kept = [w for w in words if w in rarest or counts[w] <= limit]
    if not big:
        return Plan(kept, 0, (), in_match, share, stats.newest_rowid)
    # bm25() would count these words' records over the whole index
    apart = list(
        dict.fromkeys(
            [w for w in kept if counts[w] > COMMON_DOCS]
            + _heavy_phrases(kept, dict(zip(words, stats.tokens)), stats.parts)
        )
    )
    kept = [w for w in kept if w not in apart]
    after = _budget_floor(stats.newest_rowid, sum(counts[w] for w in kept))
    return Plan(kept, after, apart, in_match, share, stats.newest_rowid)


def _heavy_phrases(words: "list[str]", tokens: "dict[str, list[str]]", counts) -> "list[str]":
    """The words made of several `tokens` one of which is in more than COMMON_DOCS records (`counts`:
    token -> records holding it, reader.query_stats; None when unknown).

    FTS5 matches such a phrase by reading every token's doclist, and bm25() counts the phrase's
    records over the whole index before it scores one: ~50 ms a phrase at 1M records, whatever
    rowid floor the query has."""
    if not counts:
        return []
    return [w for w in words if len(tokens[w]) > 1 and max(counts[p] for p in tokens[w]) > COMMON_DOCS]


def _budget_floor(newest: int, matches: int) -> int:
    """The rowid past which the newest records hold about MATCH_BUDGET of `matches` (the kept words'
    records, taken as spread evenly over the rowids), or 0 when all of them fit the budget. Ranking
    costs 4-10 us a match at 1M records: a prompt of common words ("database locked") ranked a
    million of them in 2 s, and the hook's deadline gave it no memory."""
    if matches <= MATCH_BUDGET:
        return 0
    return max(0, newest - newest * MATCH_BUDGET // matches)


def _project_in_match(found) -> "tuple[bool, float]":
    """(narrow the MATCH by the project?, the share of ranked matches expected to be the project's),
    from `found`: reader.project_docs of the project (None: no project, or unknown).

    In the MATCH, FTS5 scores only the project's rows, but BM25 reads the project phrase's whole
    doclist for its weight: as long as the project (PROJECT_MATCH_DOCS). A bigger project, or one
    holding most of the store (the one-project user), is filtered after ranking instead: the scores
    are the same either way (the project column weighs 0), and the ranking depth grows by
    SHARE_MARGIN/share so that enough of the project's matches are ranked: with fewer than asked,
    reader.fts_matches ranks every match again (twice the cost; ranking deeper costs only the join)."""
    if found is None or not found[0]:
        return True, 1.0
    docs, total = found
    if docs <= PROJECT_MATCH_DOCS and docs < PROJECT_IN_MATCH_BELOW * total:
        return True, 1.0
    return False, min(1.0, docs / total / SHARE_MARGIN)


def _ceil(x: float) -> int:
    return int(-(-x // 1))


def _query_plan(conn, query: str, limit: int, project_id: "str | None") -> "Plan | None":
    """The plan to search `query` with, or None when there is nothing to search."""
    words = terms(query)
    if conn is None or not words or limit <= 0:
        return None
    return plan(conn, words, project_id)


def _with_phrases(
    conn, rows: "list[dict]", phrases: "list[str]", *, newest_rowid: int, limit: int, columns: str, **filters
) -> "list[dict]":
    """`rows` (ranked matches, best first) with the records of the newest RECENT_ROWS that hold a
    heavy phrase (_heavy_phrases). An identifier is the most telling word of a prompt (terms()
    puts it first), so each phrase a record holds adds the best ranked match's score to its own:
    it ranks above the matches of the other words alone. Best first again."""
    after = max(0, newest_rowid - RECENT_ROWS)
    best = max((-r["bm25"] for r in rows), default=0.0) or 1.0
    merged = {r["record_id"]: dict(r) for r in rows}
    for phrase in phrases:
        for row in reader.phrase_matches(
            conn, phrase, after_rowid=after, limit=limit, columns=columns, **filters
        ):
            held = merged.setdefault(row["record_id"], dict(row))
            held["bm25"] -= best
    return sorted(merged.values(), key=lambda r: r["bm25"])[: max(limit, len(rows))]


def search(
    conn,
    query: str,
    *,
    project_id: "str | None" = None,
    types=None,
    limit: int = 10,
    now: "float | None" = None,
    since: "str | None" = None,
    session_id: "str | None" = None,
    file: "str | None" = None,
) -> "list[Hit]":
    """Ranked records matching `query` (any text, never an SQL syntax error).

    A missing store gives []; a locked, corrupt or too-slow one raises
    sqlite3.Error, which the hook logs and the CLI reports. `since` (a store
    timestamp), `session_id` and `file` narrow it like `kirolearn list`.
    """
    # Named dates ("on 3 May 2023") are not words: they rank that day's matches.
    dates, query = when.windows(query)
    planned = _query_plan(conn, query, limit, project_id)
    if planned is None:
        return []
    words, apart = planned.words, planned.apart
    now = time.time() if now is None else now
    depth = max(limit * 5, 25)
    narrowed = bool(types or since or session_id or file)
    columns = reader.RANK_COLUMNS + (", r.source_event_ids" if dates else "")
    filters = {
        "project_id": project_id,
        "types": types,
        "since": since,
        "session_id": session_id,
        "file": file,
    }
    # Full rows are read for the best `limit` alone.
    rows = (
        reader.fts_matches(
            conn,
            words,
            depth=_ceil((depth * 20 if narrowed else depth) / planned.share),
            limit=depth,
            columns=columns,
            project_in_match=planned.in_match,
            after_rowid=planned.after_rowid,
            **filters,
        )
        if words
        else []
    )
    if apart:
        rows = _with_phrases(
            conn, rows, apart, newest_rowid=planned.newest_rowid, limit=depth, columns=columns, **filters
        )
    words = words + apart
    scored = [(row, -row["bm25"] * _weight(row, now)) for row in rows]
    scored = marked(conn, scored, key=lambda item: item[0]["record_id"])  # superseded demoted, merged dropped
    if dates:
        best = max((score for _, score in scored), default=0.0) or 1.0
        scored = [
            (
                row,
                score
                + when.DATE_WEIGHT
                * best
                * when.closeness(when.record_time(row["source_event_ids"], row["created_at"]), dates),
            )
            for row, score in scored
        ]
    ranked = []
    for row, score in scored:
        ranked.append(
            ((-round(score, 9), _neg(row["created_at"]), row["record_id"]), row["rowid"], -row["bm25"], score)
        )
    ranked.sort()
    ranked = ranked[:limit]
    full = {r["rowid"]: r for r in reader.records_by_rowid(conn, [rowid for _, rowid, _, _ in ranked])}
    hits = []
    for _, rowid, bm25, score in ranked:
        hit = hit_of(full[rowid], bm25=bm25)
        text = " ".join(
            [
                hit.title,
                hit.summary,
                *map(str, hit.facts),
                *map(str, hit.concepts),
                *map(str, hit.files_touched),
            ]
        )
        hit.matched_terms = matched(words, text)
        hit.score = score
        hits.append(hit)
    return hits


def scores(
    conn,
    query: str,
    *,
    project_id: "str | None" = None,
    types=None,
    limit: int = 60,
    now: "float | None" = None,
) -> "list[tuple[str, float]]":
    """(record_id, score) of the best `limit` matches, scored as search() scores them but
    without building hits, nor the marks (semantic.Searcher weighs the fused score by them once):
    the lexical half of semantic.Searcher's fusion."""
    planned = _query_plan(conn, query, limit, project_id)
    if planned is None:
        return []
    words, apart = planned.words, planned.apart
    now = time.time() if now is None else now
    depth = limit * 20 if types else limit
    rows = (
        reader.fts_matches(
            conn,
            words,
            depth=_ceil(depth / planned.share),
            limit=depth,
            project_id=project_id,
            types=types,
            columns=reader.SCORE_COLUMNS,
            project_in_match=planned.in_match,
            after_rowid=planned.after_rowid,
        )
        if words
        else []
    )
    if apart:
        rows = _with_phrases(
            conn,
            rows,
            apart,
            newest_rowid=planned.newest_rowid,
            limit=depth,
            columns=reader.SCORE_COLUMNS,
            project_id=project_id,
            types=types,
        )
    # fusion weighs freshness/outcome once; superseded/merged apply here already
    found = [(r["record_id"], -r["bm25"] * _weight(r, now, marked=False)) for r in rows]
    found = marked(conn, found)
    found.sort(key=lambda kv: (-kv[1], kv[0]))
    return found[:limit]


def marked(conn, scored: "list[tuple]", key=lambda item: item[0]) -> "list[tuple]":
    """(record id or row, score) pairs with the marks applied: merged records dropped, superseded ones
    scored SUPERSEDED_FACTOR of their match, an echo ECHO_FACTOR and never above a record it cites
    (reader.record_marks: one primary-key lookup of the candidates)."""
    if not scored:
        return scored
    marks = reader.record_marks(conn, [key(item) for item in scored])
    if not marks:
        return scored
    out = []
    for item in scored:
        sup, merged, _ = marks.get(key(item), (None, None, None))
        if merged:
            continue
        out.append((item[0], item[1] * SUPERSEDED_FACTOR) if sup else item)
    score_of = {key(item): score for item, score in ((o, o[1]) for o in out)}
    ranked = []
    for item in out:
        cites = marks.get(key(item), (None, None, None))[2]
        if not cites:
            ranked.append(item)
            continue
        try:
            cited = [c for c in jsonfast.loads(cites) if isinstance(c, str)]
        except ValueError:
            cited = []
        score = item[1] * ECHO_FACTOR
        ceilings = [score_of[c] for c in cited if c in score_of]
        if ceilings:
            score = min(score, min(ceilings) * 0.99)
        ranked.append((item[0], score))
    return ranked


def _neg(text: str) -> "tuple":
    return tuple(-ord(c) for c in text)


def prompt_words(prompt: str) -> "list[str]":
    """The words a record must hold to be injected for a prompt: its telling words but the days
    named from where the writer stood (RELATIVE_DAYS)."""
    return [w for w in terms(prompt) if w not in RELATIVE_DAYS]


def holds_enough(hit: Hit, words: "list[str]") -> bool:
    """Whether a hit holds enough of a prompt's words (prompt_words) to be injected for it: all of
    one or two ("what is the capital of australia" is not about a commit that mentions Australia
    once), two of more."""
    held = sum(1 for w in hit.matched_terms if w in words)
    return held >= (len(words) if len(words) <= 2 else 2)


def relevant(hits: "list[Hit]", query: str) -> "list[Hit]":
    """Hits worth injecting for a prompt: enough of the prompt's words, near the best score."""
    words = prompt_words(query)
    if not hits or not words:
        return []
    best = max(h.score for h in hits)
    return [h for h in hits if holds_enough(h, words) and h.score >= RELATIVE_FLOOR * best]


def latest(
    conn, project_id: str, *, types=None, limit: int = 5, exclude=(), exclude_strategies=()
) -> "list[Hit]":
    """Newest records of a project, optionally of some types and not of some strategies."""
    if conn is None:
        return []
    rows = reader.latest_records(
        conn, project_id, types=types, exclude_strategies=exclude_strategies, limit=limit + len(exclude)
    )
    return [h for h in (hit_of(r) for r in rows) if h.record_id not in exclude and not h.merged_into][:limit]
