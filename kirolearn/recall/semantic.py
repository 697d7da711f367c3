"""Semantic recall: record vectors written by the drainer, hybrid search for `search`, `context` and MCP.

Drain side (`index_pending`): records without a vector of the configured model
are embedded in batches and stored through the store (record_vectors, with the
model id; a model with `embeds_parts` stores a row per part of a turn, see record_parts,
and a record scores its best part). Read side (`Searcher`): lexical BM25 candidates (recall.search, the
same ranking the hook uses) and vector candidates are fused by weighted,
normalised scores, then each record borrows a share of its session neighbours'
scores. If the model cannot load, search is the lexical ranking unchanged.
Not on the hook path: it imports numpy and loads a model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time

from kirolearn.core import crashpoint, marks
from kirolearn.recall import ann, when
from kirolearn.recall import lexical as recall
from kirolearn.recall.embeddings.registry import EmbeddingUnavailable, from_settings
from kirolearn.store.base import PARTS_MARK, DerivedIndex, Store

# Fusion weights and the meaning-alone floor are the model's (EmbeddingModel).
NEIGHBOUR_WEIGHT = 0.2
# extra share a question passes to the turn right after it (its likely answer)
QUESTION_WEIGHT = 0.3
CANDIDATES = 60
# lexical candidates routed fusion reads (EmbeddingModel.route_below_coverage)
ROUTE_TOP = 10

log = logging.getLogger("kirolearn.recall.semantic")

_MARKUP = re.compile(r"\*\*(Request|Outcome|Ran|Read|Changed|Tool results|Errors):\*\*")


def _listed(value) -> list[str]:
    """A JSON list column's items as strings ([] for anything else)."""
    try:
        found = json.loads(value or "[]") if isinstance(value, str) else (value or [])
    except ValueError:
        return []
    return [str(x) for x in found] if isinstance(found, list) else []


def record_text(row) -> str:
    """The text a record is embedded from: title, summary (without section labels), facts, concepts."""
    summary = _MARKUP.sub(" ", row["summary"] or "")
    parts = [row["title"] or ""]
    if " ".join(summary.split()) != " ".join(parts[0].split()):
        parts.append(summary)
    parts += _listed(row["facts"]) + _listed(row["concepts"])
    return "\n".join(dict.fromkeys(p.strip() for p in parts if p and p.strip()))


def record_parts(row) -> list[str]:
    """What a record is embedded from with a model that reads parts (EmbeddingModel.embeds_parts): its
    whole text (record_text) alone, or, for a record that holds both a request and an outcome, each
    of the two on its own (after the whole text when it holds more than the two). Search scores a
    record by its best part: a follow-up about the outcome alone is not drowned by the request's
    words, nor cut off where the whole text passes the model's token limit. The request is the
    summary's Request section (else the title); the outcome its Outcome section (else, with no
    sections, the summary's text beyond a restated title)."""
    whole = record_text(row)
    title = " ".join((row["title"] or "").split())
    summary = row["summary"] or ""
    pieces = _MARKUP.split(summary)
    sections = {pieces[i]: " ".join(pieces[i + 1].split()) for i in range(1, len(pieces) - 1, 2)}
    request = sections.get("Request") or title
    if pieces[1:]:
        outcome = sections.get("Outcome", "")
    else:
        outcome = " ".join(summary.split())
        if outcome.startswith(title.rstrip("…")):
            outcome = outcome[len(title.rstrip("…")) :].strip()
    if not request or not outcome:
        return [whole]
    # the whole text too, unless the parts hold it all: fewer tokens
    inside = f"{request}\n{outcome}".lower()
    held = [
        title,
        *(text for label, text in sections.items() if label not in ("Request", "Outcome")),
        *_listed(row["facts"]),
        *_listed(row["concepts"]),
    ]
    covered = all(" ".join(p.split()).lower().rstrip("…") in inside for p in held)
    return list(dict.fromkeys([request, outcome] if covered else [whole, request, outcome]))


def embed_records(model, rows) -> tuple[list, list[list[str]]]:
    """(one float32 matrix per record, the texts of each): one unit row per text it is embedded from
    (record_parts when the model embeds parts, else record_text alone), a batch's texts in one call."""
    texts = [record_parts(r) if getattr(model, "embeds_parts", False) else [record_text(r)] for r in rows]
    flat = model.embed_batch([t for group in texts for t in group])
    out, at = [], 0
    for group in texts:
        out.append(flat[at : at + len(group)])
        at += len(group)
    return out, texts


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


def _text_hash(model, texts: list[str]) -> str:
    """A vector's text_hash: a parts model's starts with PARTS_MARK, so a vector it made before
    it embedded parts (one row of the whole text) is told apart and re-embedded (index_pending)."""
    digest = _hash("\x00".join(texts))
    return PARTS_MARK + digest[1:] if getattr(model, "embeds_parts", False) else digest


# a pass's first batch is bounded; later ones fit the time left
BOUNDED_BATCH = 8


def derived_of(target: Store | DerivedIndex) -> DerivedIndex:
    """The store-side object recall's passes write through (kirolearn.store.base.DerivedIndex): `target`
    itself, or a store's (Store.derived())."""
    return target.derived() if isinstance(target, Store) else target


def to_embed(db, model) -> int:
    """How many records index_pending would embed with `model`: those without a vector of it, and with
    a parts model those whose vector of it was made before parts."""
    derived = derived_of(db)
    return derived.count_to_embed(model.model_id) + (
        derived.count_to_embed(model.model_id, before_parts=True)
        if getattr(model, "embeds_parts", False)
        else 0
    )


def index_pending(
    db, model, *, batch: int = 512, progress=None, seconds: float | None = None, interrupt=None
) -> int:
    """Embed every record that has no vector of `model`, then (a parts model) every record whose
    vector of it was made before it embedded parts; returns how many were embedded.

    `db`: the store's DerivedIndex (or a sqlite-utils Database), which finds the pending records
    through its watermarks and indexes, and commits each batch with its cursor: a pass killed
    between batches resumes after the last one, none embedded twice. New records come first, so a
    store in a backfill keeps finding its new turns by meaning. `progress(n_done, n_total)` is
    called after each batch (the reindex progress bar). With `seconds`, it embeds small batches,
    each sized by the time one record took so far to fit the time left, and stops when that is
    spent (at least one batch): the drainer's pass stays bounded, and the next pass embeds what is
    left (records without a vector are found by their words meanwhile). `interrupt()`, asked
    between batches once one is done, ends it early when true (the drainer: new turns in the spool).
    """
    if model is None:
        return 0
    derived = derived_of(db)
    total = to_embed(derived, model) if progress else 0
    done = 0
    start = time.monotonic()
    if seconds is not None:
        batch = min(batch, BOUNDED_BATCH)
    # a backfill call that found nothing to embed still spends the pass's time
    scanned = False
    for before_parts in (False, True) if getattr(model, "embeds_parts", False) else (False,):
        while True:
            if interrupt is not None and done and interrupt():
                return done
            if seconds is not None and (done or scanned):
                left = seconds - (time.monotonic() - start)
                if left <= 0:
                    return done
                if done:
                    per_record = (time.monotonic() - start) / done
                    batch = max(1, min(4 * BOUNDED_BATCH, int(left / per_record)))
            rows, cursor = derived.vectors_to_embed(model.model_id, batch, before_parts=before_parts)
            if not rows:
                if cursor:
                    # a watermark moved past records that have a vector
                    derived.save_vectors([], cursor)
                if cursor.get("more"):
                    scanned = True
                    continue
                break
            vectors, texts = embed_records(model, rows)
            # the blob holds the parts' rows in a row (`dimensions` floats each)
            derived.save_vectors(
                [
                    {
                        "record_id": r["record_id"],
                        "project_id": r["project_id"],
                        "model_id": model.model_id,
                        "dimensions": int(vectors[i].shape[1]),
                        "vector": vectors[i].tobytes(),
                        "text_hash": _text_hash(model, texts[i]),
                    }
                    for i, r in enumerate(rows)
                ],
                cursor,
            )
            done += len(rows)
            # tests/test_drain_scale.py: a killed backfill resumes
            crashpoint.reached("embed-after-batch")
            if progress:
                progress(done, max(total, done))
    return done


class _ProjectIndex:
    """One project's vectors as a matrix, and each record's session neighbours."""

    def __init__(self, vectors, model_id: str, project_id: str | None):
        import numpy as np

        rows = vectors.load_vectors(model_id, project_id)
        self.ids = [r[1] for r in rows]
        self.position = {rid: i for i, rid in enumerate(self.ids)}
        # one row per embedded text; starts[i] is record i's first row
        counts = np.array([max(1, len(r[3]) // (4 * r[4])) if r[4] else 1 for r in rows], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) if rows else np.zeros(0, dtype=np.int64)
        self.parts = bool(rows) and int(counts.max()) > 1
        self.matrix = (
            np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(int(counts.sum()), -1)
            if rows
            else np.zeros((0, 1), dtype=np.float32)
        )
        # record -> [(neighbour, weight)]
        self.neighbours: dict[str, list[tuple[str, float]]] = {}
        # when each record's turn happened (its first event)
        self.times: dict[str, float | None] = {}
        previous = (None, None, False)
        for _, record_id, session_id, title, sources, created_at in vectors.session_order(project_id):
            self.times[record_id] = when.record_time(sources, created_at)
            if previous[1] == session_id and previous[0] is not None:
                self.neighbours.setdefault(record_id, []).append(
                    (previous[0], NEIGHBOUR_WEIGHT + (QUESTION_WEIGHT if previous[2] else 0.0))
                )
                self.neighbours.setdefault(previous[0], []).append((record_id, NEIGHBOUR_WEIGHT))
            previous = (record_id, session_id, "?" in (title or ""))


_INDEXES: dict = {}  # (db file, model id, project id) -> (stamp, _ProjectIndex)
# (index file, watermark) -> {record id: (rowid, part rows)} above it
_TAILS: dict = {}
_WHY: set = set()  # (db file, project, reason) already logged


def _best(blobs, q) -> list[float]:
    """Each (blob, dimensions)'s best part's cosine with q, in one product."""
    import numpy as np

    if not blobs:
        return []
    parts = [ann.unit_rows(blob, dims) for blob, dims in blobs]
    starts = np.cumsum([0] + [len(p) for p in parts[:-1]])
    return np.maximum.reduceat(np.concatenate(parts) @ q, starts).tolist()


class _AnnIndex:
    """A big project's usearch index (kirolearn.recall.ann) and the rows above its watermark."""

    def __init__(self, vectors, model_id: str, project_id: str, opened):
        self.vectors, self.model_id, self.project_id, self.opened = vectors, model_id, project_id, opened
        meta = opened[1]
        key = (ann.paths(vectors.database_file(), model_id, project_id)["index"], meta["watermark"])
        for old in [k for k in _TAILS if k[0] == key[0] and k != key]:
            del _TAILS[old]  # the drain merged that tail into the index
        tail = _TAILS.setdefault(key, {})
        last = max((rowid for rowid, _ in tail.values()), default=meta["watermark"])
        while True:  # only the rows written since the last query
            found = vectors.vector_records_after(model_id, project_id, last, ann.ADD_CHUNK)
            for rowid, record_id, blob, dims in found:
                tail[record_id] = (rowid, ann.unit_rows(blob, dims))
            if len(found) < ann.ADD_CHUNK:
                break
            last = found[-1][0]
        # rowids at the top reused: those rows count as new
        if not ann.stamp_holds(vectors, meta):
            for rowid, blob, dims, _, record_id in ann.rewritten_rows(vectors, model_id, project_id, meta):
                if rowid > tail.get(record_id, (0,))[0]:
                    tail[record_id] = (rowid, ann.unit_rows(blob, dims))
        self.tail = tail
        # not a matrix of every record: Searcher.similarities asks candidates()
        self.ids = ()

    def candidates(self, q, extra=()) -> tuple[_Candidates, object]:
        """The query's nearest records (index and tail), `extra` records (the lexical candidates),
        each one's session neighbours and theirs, with exact similarities from their stored vectors."""
        import numpy as np

        # record -> (vector rowid, best part's cosine)
        sims: dict[str, tuple[int, float]] = {}
        found = [
            r
            for r in self.vectors.vectors_by_rowid(ann.nearest_rows(self.opened, q))
            if r[3] == self.model_id and r[2] == self.project_id
        ]
        for row, sim in zip(found, _best([(r[4], r[5]) for r in found], q)):
            sims[row[1]] = (row[0], sim)
        for record_id, (rowid, parts) in self.tail.items():
            if rowid >= sims.get(record_id, (0, 0.0))[0]:
                sims[record_id] = (rowid, float((parts @ q).max()))
        nearest = sorted(sims, key=lambda rid: -sims[rid][1])[:CANDIDATES]
        view = _Candidates(ann.sample_floor(self.opened, q))
        first = list(dict.fromkeys([*nearest, *extra]))
        rings = self._neighbours(first, view)
        second = [n for rid in extra for n, _ in view.neighbours.get(rid, ())]
        self._neighbours([n for n in second if n not in rings], view)
        wanted = set(sims) | set(view.neighbours) | {n for near in view.neighbours.values() for n, _ in near}
        missing = [rid for rid in wanted if rid not in sims]
        found = [
            r for r in self.vectors.vectors_of_records(self.model_id, missing) if r[1] == self.project_id
        ]
        for row, sim in zip(found, _best([(r[2], r[3]) for r in found], q)):
            sims[row[0]] = (0, sim)
        view.ids = list(sims)
        view.position = {rid: i for i, rid in enumerate(view.ids)}
        return view, np.asarray([sims[rid][1] for rid in view.ids], dtype=np.float32)

    def _neighbours(self, record_ids, view) -> set:
        """Fill view.neighbours and view.times of these records (as _ProjectIndex pairs them)."""
        found = self.vectors.session_neighbours(self.project_id, list(record_ids))
        for record_id, (row, before, after) in found.items():
            near = []
            if before is not None:
                near.append(
                    (before[1], NEIGHBOUR_WEIGHT + (QUESTION_WEIGHT if "?" in (before[3] or "") else 0.0))
                )
            if after is not None:
                near.append((after[1], NEIGHBOUR_WEIGHT))
            if near:
                view.neighbours[record_id] = near
            for one in (row, before, after):
                if one is not None:
                    view.sources[one[1]] = (one[4], one[5])
        return set(found)


class _Candidates:
    """What _fuse reads of a project, for the candidates of one query only (an _AnnIndex's answer):
    ids, position, neighbours and times as _ProjectIndex has them, and the project's typical
    similarity (`floor`) estimated from the index's sample instead of every record's."""

    def __init__(self, floor):
        self.floor = floor
        self.ids: list = []
        self.position: dict = {}
        self.neighbours: dict[str, list[tuple[str, float]]] = {}
        # record -> (source_event_ids, created_at)
        self.sources: dict[str, tuple] = {}
        self._times = None

    @property
    def times(self) -> dict[str, float | None]:
        """When each record's turn happened (read only by a query that names a date)."""
        if self._times is None:
            self._times = {rid: when.record_time(*raw) for rid, raw in self.sources.items()}
        return self._times


class Searcher:
    """Hybrid search over one store (None: no database yet); each project's vectors stay in memory
    between calls (in this process, until the project's vectors change)."""

    def __init__(self, store: Store | None, model=None, *, settings=None):
        self.store = store
        self.conn = store.recall_connection() if store is not None else None
        self.vectors = store.derived() if store is not None else None
        self.error = ""
        if model is None:
            if settings is None:
                from kirolearn.settings import load

                settings = load()
            try:
                model = from_settings(settings)
                if model is not None:
                    # load now: a broken model shows here, not mid-search
                    model.embed_batch(["warm up"])
            except EmbeddingUnavailable as exc:
                self.error, model = exc.message, None
        self.model = model
        self._file = (store.database_file() or "") if store is not None else ""
        # last hits: record id -> cosine
        self.last_similarity: dict[str, float] = {}

        # the last search ranked by the vector alone (_fuse)
        self.last_routed = False

    @property
    def semantic(self) -> bool:
        """Whether vectors take part (a model loaded and this store has vectors of it)."""
        return (
            self.model is not None
            and self.vectors is not None
            and bool(self.vectors.vector_counts().get(self.model.model_id))
        )

    def _index(self, project_id):
        """The project's vectors: its usearch index when the drain keeps one (kirolearn.recall.ann),
        else every vector in a matrix (cached until they change)."""
        if project_id and self._file:
            try:
                opened, why = ann.open_index(self.vectors, self._file, self.model.model_id, project_id)
            except Exception as exc:  # noqa: BLE001
                # an index is only a shortcut: search scans instead
                opened, why = None, f"its index cannot be opened ({type(exc).__name__}: {str(exc)[:200]})"
            if opened is not None:
                return _AnnIndex(self.vectors, self.model.model_id, project_id, opened)
            if why and (self._file, project_id, why) not in _WHY:
                _WHY.add((self._file, project_id, why))
                log.warning("searching project %s exactly: %s", project_id, why)
        key = (self._file, self.model.model_id, project_id)
        stamp = self.vectors.vector_stamp(self.model.model_id, project_id)
        cached = _INDEXES.get(key)
        if cached is None or cached[0] != stamp or not self._file:
            cached = (stamp, _ProjectIndex(self.vectors, self.model.model_id, project_id))
            _INDEXES[key] = cached
        return cached[1]

    def similarities(self, query: str, project_id: str | None, extra=(), index=None):
        """(index, cosine of the query with every record vector of the project); for a project with a
        usearch index, (its candidates: the nearest records, `extra` and their neighbours, their cosines).
        `index`: the project's, when the caller has it (_index)."""
        index = index if index is not None else self._index(project_id)
        if isinstance(index, _AnnIndex):
            view, sims = index.candidates(self.model.embed_batch([query])[0], extra)
            return (view, sims) if len(sims) else (view, None)
        if not len(index.ids):
            return index, None
        q = self.model.embed_batch([query])[0]
        sims = index.matrix @ q
        if index.parts:
            import numpy as np

            sims = np.maximum.reduceat(sims, index.starts)
        return index, sims

    def vector_only(self, query: str, *, project_id: str | None = None, limit: int = 10) -> list[recall.Hit]:
        """Records ranked by cosine similarity alone (the embedding baseline)."""
        if self.model is None:
            return []
        index, sims = self.similarities(query, project_id)
        if sims is None:
            return []
        import numpy as np

        top = np.argsort(-sims)[: limit * 2]
        scored = recall.marked(self.conn, [(index.ids[i], float(sims[i])) for i in top])
        return self._hits(sorted(scored, key=lambda kv: (-kv[1], kv[0]))[:limit])

    def _hits(self, scored: list[tuple[str, float]]) -> list[recall.Hit]:
        rows = {r["record_id"]: r for r in self.vectors.records_by_id([rid for rid, _ in scored])}
        hits = []
        for rid, value in scored:
            if rid not in rows:
                continue
            hit = recall.hit_of(rows[rid])
            hit.score = value
            hits.append(hit)
        return hits

    def search(
        self,
        query: str,
        *,
        project_id: str | None = None,
        types=None,
        limit: int = 10,
        now: float | None = None,
        **filters,
    ) -> list[recall.Hit]:
        """Hybrid ranking; the lexical ranking alone when no vectors can take part.

        Keyword filters this module does not know (other issues add them to recall.search)
        make it the lexical ranking, so a filter is never bypassed by a vector candidate.
        """
        filters = {k: v for k, v in filters.items() if v not in (None, "", [], ())}
        self.last_routed = False
        # no database yet: recall.search gives []
        if self.conn is None or self.model is None or filters:
            return recall.search(
                self.conn, query, project_id=project_id, types=types, limit=limit, now=now, **filters
            )
        # Named dates rank the records of those days, not as words.
        dates, words_query = when.windows(query)
        # first: a big project's load is kept even if the rest fails
        index = self._index(project_id)
        lexical = recall.scores(
            self.conn, words_query, project_id=project_id, types=types, limit=CANDIDATES, now=now
        )
        index, sims = self.similarities(
            words_query, project_id, extra=[rid for rid, _ in lexical], index=index
        )
        if sims is None:
            return recall.search(self.conn, query, project_id=project_id, types=types, limit=limit, now=now)
        return self._fuse(words_query, lexical, index, sims, types=types, limit=limit, dates=dates)

    def _coverage(self, query: str, record_ids) -> dict[str, float]:
        """Each record's share of the query's searched words found in its own text (not its neighbours')."""
        words = recall.terms(query)
        if not words:
            return {}
        out = {}
        for row in self.vectors.records_by_id(list(record_ids)):
            text = " ".join(
                [
                    row["title"] or "",
                    row["summary"] or "",
                    str(row["facts"] or ""),
                    str(row["concepts"] or ""),
                ]
            )
            out[row["record_id"]] = len(recall.matched(words, text)) / len(words)
        return out

    def _fuse(self, query, lexical_scores, index, sims, *, types, limit, dates=()):
        import numpy as np

        lexical_weight, vector_weight = self.model.lexical_weight, self.model.vector_weight
        min_similarity = self.model.vector_only_min_similarity

        lexical = dict(lexical_scores)
        best_lex = max(lexical.values(), default=0.0) or 1.0
        # An incidental word match is weighed by query coverage.
        power = self.model.lexical_coverage_power
        route_below = self.model.route_below_coverage
        coverage = self._coverage(query, lexical) if (power or route_below) and lexical else {}
        if power and lexical:
            lexical = {rid: value * coverage.get(rid, 1.0) ** power for rid, value in lexical.items()}
        # Routed fusion: no top lexical match reads like the question.
        top_lexical = sorted(lexical_scores, key=lambda kv: -kv[1])[:ROUTE_TOP]
        routed = bool(route_below) and all(coverage.get(rid, 0.0) < route_below for rid, _ in top_lexical)
        self.last_routed = routed
        # Vector scores: how far above the project's typical similarity.
        order = np.argsort(-sims)
        # an index's: from its sample of the project
        floor = getattr(index, "floor", None)
        if floor is None:
            floor = float(np.median(sims)) if len(sims) >= 3 else float(sims.min()) - 1e-6
        top_sim = float(sims[order[0]])
        span = (top_sim - floor) or 1.0
        candidates = set(lexical)
        candidates.update(index.ids[i] for i in order[:CANDIDATES])
        # the turn next to a strong match is often the one that holds the answer
        candidates.update(n for rid in lexical for n, _ in index.neighbours.get(rid, ()))

        def vector_score(rid):
            pos = index.position.get(rid)
            return max(0.0, (float(sims[pos]) - floor) / span) if pos is not None else 0.0

        # The vector score is relative: without a floor all finds something.
        reached = set(lexical) | {n for rid in lexical for n, _ in index.neighbours.get(rid, ())}

        def close_enough(rid):
            pos = index.position.get(rid)
            return pos is not None and float(sims[pos]) >= min_similarity

        candidates = {rid for rid in candidates if rid in reached or close_enough(rid)}
        # a named day or month: its records are candidates on their own
        if dates and when.narrow(dates):
            candidates.update(rid for rid, t in index.times.items() if when.closeness(t, dates) > 0)
        if routed:
            fused = {rid: vector_score(rid) for rid in candidates if close_enough(rid)}
        else:
            fused = {
                rid: lexical_weight * lexical.get(rid, 0.0) / best_lex + vector_weight * vector_score(rid)
                for rid in candidates
            }
            base = dict(fused)
            for rid in list(fused):
                near = [
                    weight * base.get(n, vector_weight * vector_score(n))
                    for n, weight in index.neighbours.get(rid, ())
                ]
                if near:
                    fused[rid] += max(near)
        if dates:
            best = max(fused.values(), default=0.0) or 1.0
            for rid in fused:
                fused[rid] += when.DATE_WEIGHT * best * when.closeness(index.times.get(rid), dates)
        # marks weigh the fused score once, here (recall.scores skips them)
        for rid, (fresh, outcome) in self.store.marks_of(list(fused)).items():
            fused[rid] *= marks.factor(fresh, outcome)
        # and a merged record is not recalled, a superseded one is demoted
        ranked = sorted(
            recall.marked(self.conn, [(rid, s) for rid, s in fused.items() if s > 0]),
            key=lambda kv: (-kv[1], kv[0]),
        )
        hits = self._hits(ranked[: max(limit * 3, limit + 10)] if types else ranked[:limit])
        if types:
            hits = [h for h in hits if h.observation_type in types]
        words = recall.terms(query)
        for hit in hits:
            hit.matched_terms = recall.matched(
                words, " ".join([hit.title, hit.summary, *map(str, hit.facts), *map(str, hit.concepts)])
            )
        hits = hits[:limit]
        self.last_similarity = {
            h.record_id: float(sims[index.position[h.record_id]])
            for h in hits
            if h.record_id in index.position
        }
        return hits


def prompt_hits(
    searcher: Searcher, prompt: str, *, project_id: str | None, limit: int, exclude=()
) -> list[recall.Hit]:
    """What the prompt hook injects when the recall server answers (kirolearn.recall.server).

    The hybrid ranking, kept to hits that hold enough of the prompt's words near the best score
    (recall.relevant's rule, the hook's own), or that are close in meaning on their own: a cosine of
    at least the model's prompt_min_similarity (None: words alone decide, as for wordllama, whose
    cosines cannot tell a paraphrase from an unrelated record).

    Then, while there is room, what the hook's lexical recall would inject without the server: the
    server never gives a prompt less than its fallback does. (Routed fusion ranks a query that no
    candidate holds half of by meaning alone, and a strong cosine can put a fused score so far ahead
    that a record holding two of the prompt's words falls below the relative floor.)
    """
    words = recall.prompt_words(prompt)
    if not words:
        return []
    # routed: maybe none close enough
    hits = searcher.search(prompt, project_id=project_id, limit=limit * 3)
    best = max((h.score for h in hits), default=0.0)
    floor = getattr(searcher.model, "prompt_min_similarity", None) if searcher.model is not None else None
    sims = searcher.last_similarity
    exclude = set(exclude)
    keep = [
        h
        for h in hits
        if h.record_id not in exclude
        and (
            (recall.holds_enough(h, words) and h.score >= recall.RELATIVE_FLOOR * best)
            or (floor is not None and sims.get(h.record_id, -1.0) >= floor)
        )
    ][:limit]
    if len(keep) < limit:
        chosen = exclude | {h.record_id for h in keep}
        lexical = recall.search(searcher.conn, prompt, project_id=project_id, limit=limit * 3)
        keep += [h for h in recall.relevant(lexical, prompt) if h.record_id not in chosen][
            : limit - len(keep)
        ]
    return keep


# of each neighbour's text copied into a record's expansion
NEIGHBOUR_CHARS = 200

# Turns each side that lend their text (measured: see expansions_for).
NEIGHBOUR_SPAN = 2


def _turn_text(rec: dict) -> str:
    title = " ".join(rec["title"].split())
    summary = " ".join(_MARKUP.sub(" ", rec["summary"] or "").split())
    # deterministic records restate the (maybe clipped) title in the summary
    text = summary if summary.startswith(title[:60].rstrip("…")) else f"{title} {summary}"
    return text.strip()[:NEIGHBOUR_CHARS]


def expansions_for(records: list[dict]) -> dict[str, str]:
    """Each record's expansion: the text of the NEIGHBOUR_SPAN records before and after it in its session.

    NEIGHBOUR_SPAN: two each side ranked best on LoCoMo (docs/benchmarks.md, 'Recall quality')."""
    out = {}
    for i, rec in enumerate(records):
        near = [
            records[j]
            for j in range(i - NEIGHBOUR_SPAN, i + NEIGHBOUR_SPAN + 1)
            if j != i and 0 <= j < len(records)
        ]
        out[rec["record_id"]] = "\n".join(_turn_text(r) for r in near)
    return out


def enrich_pending(db, *, progress=None) -> int:
    """Derive the expansion column of new records (and of their neighbours, whose context changed).

    Plain text in SQLite: the stdlib-only hook searches it with no model (architecture.md rule 8).
    `db`: the store's DerivedIndex (or a sqlite-utils Database). Pending records are found through
    the store's index of them, and each session is read from its first pending record on (with the
    neighbours it needs): linear in the new work. Each batch of sessions commits on its own, so a
    killed backfill resumes with the sessions still pending. Returns how many records were updated.
    """
    derived = derived_of(db)
    updated = 0
    while True:
        sessions = derived.sessions_needing_expansion()
        if not sessions:
            return updated
        changed = enrich_sessions(derived, sessions)
        # tests/test_drain_scale.py: a killed backfill resumes
        crashpoint.reached("expand-after-batch")
        if not changed:
            # nothing derived (a writer racing us): the next pass tries again
            return updated
        updated += changed
        if progress:
            progress(updated)


def enrich_sessions(db, sessions) -> int:
    """Derive the expansion column of these sessions' records: (project_id, session_id) for all of a
    session, or (project_id, session_id, rowid) from the record with that rowid on (and the
    NEIGHBOUR_SPAN before it, whose neighbours changed)."""
    derived = derived_of(db)
    changes = {}
    for key in dict.fromkeys(map(tuple, sessions)):
        project_id, session_id, first = (*key, 0)[:3]
        records = derived.session_records(project_id, session_id, first, context=2 * NEIGHBOUR_SPAN)
        # only the NEIGHBOUR_SPAN context rows nearest `first` change
        context = sum(1 for r in records if r["rowid"] < first)
        keep = max(0, context - NEIGHBOUR_SPAN)
        derived_text = expansions_for(records)
        for rec in records[keep:]:
            if rec["expansion"] != derived_text[rec["record_id"]]:
                changes[rec["record_id"]] = derived_text[rec["record_id"]]
    derived.set_expansions(changes)
    return len(changes)


def search(store: Store | None, query: str, *, settings=None, **options) -> list[recall.Hit]:
    """Hybrid search with the configured model (lexical alone when it cannot load)."""
    return Searcher(store, settings=settings).search(query, **options)


def index_with_settings(
    db, conf, *, progress=None, seconds: float | None = None, interrupt=None
) -> tuple[int, str]:
    """Embed pending records with the configured model: (embedded, '' or why not); `seconds` and
    `interrupt`: see index_pending."""
    try:
        model = from_settings(conf)
    except EmbeddingUnavailable as exc:
        return 0, exc.message
    if model is None:
        return 0, "embeddings are off"
    try:
        embedded = index_pending(db, model, progress=progress, seconds=seconds, interrupt=interrupt)
    except EmbeddingUnavailable as exc:
        return 0, exc.message
    refresh_ann(db, model, seconds=None if seconds is None else ann.BUILD_SECONDS)
    return embedded, ""


def refresh_ann(db, model, *, seconds: float | None = None) -> dict:
    """Bring the usearch indexes of the embedded store's big projects up to date after embedding
    (kirolearn.recall.ann.refresh; nothing for another store, or without usearch)."""
    vectors = derived_of(db)
    db_file = vectors.database_file() if vectors is not None else ""
    if not db_file or model is None:
        return {}
    try:
        return ann.refresh(vectors, model.model_id, db_file, dimensions=model.dimensions, seconds=seconds)
    except OSError as exc:
        # a full disk or a read-only home: search stays exact
        log.warning("vector indexes not updated: %s", exc)
        return {"error": str(exc)}


def vectors_pending(db, conf) -> int:
    """How many records still lack a vector of the configured model, or hold one it made before it
    embedded parts (0 when it is off or cannot load)."""
    try:
        model = from_settings(conf)
    except EmbeddingUnavailable:
        return 0
    return to_embed(db, model) if model is not None else 0


def reindex(store: Store, conf, *, everything: bool = False, progress=None) -> dict:
    """Re-derive expansions and (re)embed records with the configured model.

    Vectors of other models are dropped; `everything` re-embeds records that already
    have a vector of this model too. Raises EmbeddingUnavailable if the model cannot
    load (expansions are still rebuilt first, so the hook's index is current).
    """
    derived = derived_of(store)
    derived.clear_expansions()
    expanded = enrich_pending(derived)
    store.refresh_term_docs(force=True)
    model = from_settings(conf)
    if model is None:
        dropped = derived.drop_vectors(None)
        return {"model": None, "embedded": 0, "dropped": dropped, "expanded": expanded}
    model.embed_batch(["kirolearn"])  # fail before touching any vector
    dropped = derived.drop_vectors(None if everything else model.model_id)
    start = time.monotonic()
    embedded = index_pending(store, model, progress=progress)
    refresh_ann(store, model)
    return {
        "model": model.model_id,
        "dimensions": model.dimensions,
        "embedded": embedded,
        "dropped": dropped,
        "expanded": expanded,
        "seconds": round(time.monotonic() - start, 2),
    }
