"""Approximate nearest neighbours for big projects: one usearch HNSW index per (model, project).

Below THRESHOLD records with a vector a project is searched exactly (kirolearn.recall.semantic's matrix,
unchanged). Above it the drain (`refresh`, after its vector backfill) keeps an index file per
(model, project) beside the database, `vectors/<model>/<project>.usearch` (for the default
kirolearn.db; `vectors.<stem>/` for another file), with a JSON sidecar saying what it covers:
every vector row of the project up to a rowid watermark. Keys are the record_vectors rowid
times 8 plus the part (kirolearn.recall.semantic.record_parts), so an edited record (a new
vector row) or a forgotten one (no row) is told apart at query time: candidates are re-read from
the store and re-scored exactly, and rows that are gone, or of another model or project, drop out.

Rule 15: the rows above the watermark (the tail) are searched exactly by the query, and merged
into the index by the drain once they pass MERGE_FRACTION of it (at least MERGE_MIN, at most
MERGE_MAX): rewriting the index file is then paid once for every hundredth of its size, a cost per
new vector that does not grow with the store. A first build of a big project goes on for at most
BUILD_SECONDS a pass, saved at the end of each, so a killed build resumes. A query never builds:
with no usable index (missing, corrupt, a tail past MAX_TAIL, usearch not installed) the
searcher scans exactly and logs why.

usearch is optional (the `vectors` extra); without it nothing here runs and search is exact.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time

from kirolearn.core import crashpoint, envnum
from kirolearn.core.paths import ensure_private_dir

log = logging.getLogger("kirolearn.recall.ann")

# records with a vector below which a project's search stays exact (see docs)
THRESHOLD = 50_000
# overrides THRESHOLD (benches and tests force 0)
THRESHOLD_ENV = "KIROLEARN_ANN_THRESHOLD"
# index rows a query asks for, re-scored exactly from the store
CANDIDATE_ROWS = 200
# tail share of the index that makes the drain merge it in
MERGE_FRACTION = 0.01
MERGE_MIN = 2_000
MERGE_MAX = 10_000
# rows past the index a query still scans exactly; more: exact fallback
MAX_TAIL = 2 * MERGE_MAX
# per drain pass, for a bounded pass's first build or merge
BUILD_SECONDS = 20.0
ADD_CHUNK = 4_096
# records kept to estimate the project's median similarity (semantic._fuse)
SAMPLE = 1_024
PART_BITS = 3  # a vector blob holds at most 8 parts (record_parts gives 3)
# 384 + ~150 bytes a row; candidates are re-scored in f32 (docs/benchmarks.md)
DTYPE = "i8"
# 32 finds more of the exact ten than 16 at 1M rows (docs/benchmarks.md)
CONNECTIVITY = 32
EXPANSION_ADD = 64
# at least: recall@10 gains for a little query CPU (docs/benchmarks.md)
EXPANSION_SEARCH = 256
# past 256k rows a query explores one row in this many (expansion_for)
EXPANSION_SHARE = 1_000
EXPANSION_MAX = 1_024
FORMAT = 1


def threshold() -> int:
    """THRESHOLD, or $KIROLEARN_ANN_THRESHOLD when it holds a whole number."""
    return envnum.number(THRESHOLD_ENV, THRESHOLD, 0, 1 << 62, integer=True)


def available() -> bool:
    """Whether usearch can be imported (the `vectors` extra)."""
    try:
        import usearch.index  # noqa: F401
    except Exception:  # noqa: BLE001 - a missing or broken wheel: exact search
        return False
    return True


def _slug(text: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:40]
    return f"{clean}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


def directory(db_file: str, model_id: str) -> str:
    """Where a database's indexes of one model live ('' for an in-memory database)."""
    if not db_file:
        return ""
    folder, name = os.path.split(os.path.abspath(db_file))
    stem = os.path.splitext(name)[0]
    return os.path.join(folder, "vectors" if stem == "kirolearn" else f"vectors.{stem}", _slug(model_id))


def paths(db_file: str, model_id: str, project_id: str) -> dict[str, str]:
    base = os.path.join(directory(db_file, model_id), _slug(project_id))
    return {
        "index": base + ".usearch",
        "meta": base + ".json",
        "sample": base + ".sample.npy",
        "lock": base + ".lock",
    }


def _merge_at(size: int) -> int:
    floor = min(MERGE_MIN, threshold())
    return max(floor, min(MERGE_MAX, int(size * MERGE_FRACTION)))


def _read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def meta_problem(meta, model_id: str, dimensions: int | None = None) -> str:
    """'' when a sidecar's fields have the types and counts its writer gives them, else what is wrong."""
    if not isinstance(meta, dict):
        return "not a JSON object"
    if meta.get("format") != FORMAT or isinstance(meta.get("format"), bool):
        return f"format {str(meta.get('format'))[:20]!r} is not {FORMAT}"
    if meta.get("model_id") != model_id:
        return f"not an index of {model_id}"
    if not isinstance(meta.get("project_id"), str):
        return "project_id is not a string"
    dims = meta.get("dimensions")
    if not _count(dims) or not dims or (dimensions is not None and dims != dimensions):
        return f"dimensions {str(dims)[:20]!r} is not {dimensions or 'a positive whole number'}"
    for key in ("watermark", "records", "rows", "index_bytes"):
        if not _count(meta.get(key)):
            return f"{key} {str(meta.get(key))[:20]!r} is not a whole number"
    if (meta["watermark"] == 0) != (meta["records"] == 0):
        return f"records {meta['records']} does not fit watermark {meta['watermark']}"
    # each record adds at most 8 parts
    if meta["rows"] > meta["records"] << PART_BITS:
        return f"rows {meta['rows']} is more than {meta['records']} records hold"
    if not isinstance(meta.get("updated"), str):
        return "updated is not a string"
    for key in ("stamp", "first"):
        if meta.get(key) is not None and not isinstance(meta[key], list):
            return f"{key} is not a list"
    first = meta.get("first")
    if first and not _count(first[0]):
        return "first does not start with a row id"
    return ""


def _load_meta(path: str, model_id: str, dimensions: int | None = None) -> tuple[dict | None, str]:
    """(the sidecar, '') when it can be trusted; (None, '') when there is none; (None, why) else."""
    if not os.path.lexists(path):
        return None, ""
    meta = _read_json(path)
    problem = "not readable JSON" if meta is None else meta_problem(meta, model_id, dimensions)
    return (None, problem) if problem else (meta, "")


def _feed_problem(feed) -> str:
    if not isinstance(feed, dict) or not _count(feed.get("after")):
        return "its watermark is not a whole number"
    if not isinstance(feed.get("pending"), list) or not all(isinstance(p, str) for p in feed["pending"]):
        return "pending is not a list of project ids"
    if feed.get("threshold") is not None and not _count(feed["threshold"]):
        return "threshold is not a whole number"
    indexes = feed.get("indexes", {})
    if not isinstance(indexes, dict) or not all(_count(v) for v in indexes.values()):
        return "indexes is not a map of project ids to times"
    return ""


def _private_dirs(folder: str) -> None:
    """The vectors folders at 0700 whatever the umask (rule 3: they hold text's vectors)."""
    ensure_private_dir(folder)
    for path in (folder, os.path.dirname(folder)):
        os.chmod(path, 0o700)


def _private_open(path: str):
    """A new file (truncated) at 0600 whatever the umask, open for binary writing."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "wb")


def _replace_json(path: str, value: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with _private_open(tmp) as handle:
        handle.write(json.dumps(value).encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def unit_rows(blob: bytes, dimensions: int):
    import numpy as np

    return np.frombuffer(blob, dtype=np.float32).reshape(-1, dimensions)


# drain side


class _Builder:
    """One project's index opened for writing: the index, its meta and its sample."""

    def __init__(self, vectors, model_id: str, project_id: str, files: dict[str, str], dimensions: int):
        import numpy as np
        from usearch.index import Index

        self.vectors, self.model_id, self.project_id, self.files = vectors, model_id, project_id, files
        meta, problem = _load_meta(files["meta"], model_id, dimensions)
        if problem:
            log.warning(
                "vector index sidecar %s is not trusted (%s): rebuilding the index", files["meta"], problem
            )
        self.index = None
        if meta and os.path.exists(files["index"]):
            try:
                self.index = Index.restore(files["index"])
                sample = np.load(files["sample"])
                self.sample = [sample["rows"][a:b] for a, b in zip(sample["starts"], sample["ends"])]
            except Exception as exc:  # noqa: BLE001
                # a torn or foreign file: rebuilt
                log.warning("vector index %s cannot be read (%s): rebuilding it", files["index"], exc)
                self.index = None
            if self.index is not None and (self.index.ndim != dimensions or not _first_holds(vectors, meta)):
                log.warning("vector index %s no longer matches the store: rebuilding it", files["index"])
                self.index = None
        if self.index is None:
            meta = {
                "format": FORMAT,
                "model_id": model_id,
                "project_id": project_id,
                "dimensions": dimensions,
                "watermark": 0,
                "stamp": None,
                "updated": "",
                "records": 0,
            }
            self.index = Index(
                ndim=dimensions,
                metric="cos",
                dtype=DTYPE,
                connectivity=CONNECTIVITY,
                expansion_add=EXPANSION_ADD,
            )
            self.sample = []
        self.meta = meta
        self.added = 0

    def _take(self, rows) -> None:
        """Add vector rows (rowid, blob, dimensions, updated_at) not in the index yet."""
        import numpy as np

        keys, vectors = [], []
        for rowid, blob, dims, updated in rows:
            parts = unit_rows(blob, dims)[: 1 << PART_BITS]
            keys += [(rowid << PART_BITS) | p for p in range(len(parts))]
            vectors.append(parts)
            self.meta["records"] += 1
            seen = self.meta["records"]
            # reservoir sample of records (deterministic: seeded by the count)
            if len(self.sample) < SAMPLE:
                self.sample.append(parts)
            else:
                slot = int(np.random.default_rng(seen).integers(0, seen))
                if slot < SAMPLE:
                    self.sample[slot] = parts
            self.meta["updated"] = max(self.meta["updated"] or "", updated or "")
        if not keys:
            return
        keys_array = np.asarray(keys, dtype=np.uint64)
        matrix = np.ascontiguousarray(np.concatenate(vectors).astype(np.float32))
        present = np.asarray(self.index.contains(keys_array), dtype=bool).reshape(-1)
        # a resumed update, or a reused rowid: the store's row wins
        if present.any():
            for key in keys_array[present]:
                self.index.remove(int(key))
        self.index.add(keys_array, matrix, threads=1)
        self.added += len(rows)

    def catch_up(self, deadline: float | None) -> bool:
        """Add rows above the watermark (and rewritten rows at its top) until done or the deadline;
        True when the index covers every row of the project."""
        meta = self.meta
        if not stamp_holds(self.vectors, meta):
            # the newest rows deleted, their rowids reused: take those again
            self._take([r[:4] for r in rewritten_rows(self.vectors, self.model_id, self.project_id, meta)])
            meta["stamp"] = list(self.vectors.vector_row_stamp(meta["watermark"]) or ())
        while True:
            if deadline is not None and self.added and time.monotonic() >= deadline:
                return False
            rows = self.vectors.vector_rows_after(
                self.model_id, self.project_id, meta["watermark"], ADD_CHUNK
            )
            if not rows:
                return True
            if not meta["watermark"]:
                meta["first"] = [rows[0][0], *(self.vectors.vector_row_stamp(rows[0][0]) or ())]
            self._take(rows)
            meta["watermark"] = rows[-1][0]
            meta["stamp"] = list(self.vectors.vector_row_stamp(meta["watermark"]) or ())

    def save(self) -> None:
        """Index, sample, then meta (the commit): a kill before the meta leaves the old meta, whose
        watermark is below what the index holds, and the next update re-adds (replaces) those rows."""
        import numpy as np

        _private_dirs(os.path.dirname(self.files["index"]))
        # a killed writer's is overwritten (under the lock)
        tmp = self.files["index"] + ".tmp"
        _private_open(tmp).close()  # usearch writes into a file made 0600 first
        self.index.save(tmp)
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.files["index"])
        # tests/test_ann.py: the meta is the commit
        crashpoint.reached("ann-after-index")
        ends = np.cumsum([len(s) for s in self.sample]) if self.sample else np.zeros(0, dtype=np.int64)
        starts = ends - np.asarray([len(s) for s in self.sample], dtype=np.int64) if self.sample else ends
        rows = (
            np.concatenate(self.sample) if self.sample else np.zeros((0, self.meta["dimensions"]), np.float32)
        )
        tmp = self.files["sample"] + ".tmp"
        with _private_open(tmp) as handle:
            np.savez(handle, rows=rows.astype(np.float32), starts=starts, ends=ends)
        os.replace(tmp, self.files["sample"])
        self.meta["index_bytes"] = os.path.getsize(self.files["index"])
        self.meta["rows"] = len(self.index)
        _replace_json(self.files["meta"], self.meta)


def _first_holds(vectors, meta: dict) -> bool:
    """Whether the first row the index took is still there: else the store was replaced (a backup
    restored, a reindex), or its oldest vector deleted, and the index is rebuilt."""
    first = meta.get("first")
    if not first:
        return not meta.get("watermark")
    now = vectors.vector_row_stamp(first[0])
    return now is not None and list(now) == list(first[1:])


def rewritten_rows(vectors, model_id: str, project_id: str, meta: dict, chunk: int = 64):
    """Rows at or below the watermark written after the index took its newest (rowids reused once
    the newest rows were deleted): newest first, until an older row. Reads a few rows when none."""
    at_most = meta.get("watermark") or 0
    while at_most > 0:
        rows = vectors.vector_rows_down(model_id, project_id, at_most, chunk)
        for row in rows:
            if (row[3] or "") < (meta.get("updated") or ""):
                return
            yield row
        if len(rows) < chunk:
            return
        at_most = rows[-1][0] - 1


def stamp_holds(vectors, meta: dict) -> bool:
    """Whether the watermark's row is still the one the index took (not deleted nor rewritten)."""
    if not meta.get("watermark"):
        return True
    now = vectors.vector_row_stamp(meta["watermark"])
    return now is not None and list(now) == list(meta.get("stamp") or ())


def refresh(
    vectors, model_id: str, db_file: str, *, dimensions: int, seconds: float | None = BUILD_SECONDS
) -> dict:
    """The drain's step after its vector backfill: bring each big project's index up to date.

    Finds the projects with vectors written since the last call (a per-model watermark file), and
    builds the index of one that reached threshold(), or merges a tail past _merge_at into one that
    has an index; `seconds` bounds the building (None: until done). Returns what it did."""
    done = {"projects": 0, "added": 0, "pending": 0, "error": ""}
    if not db_file:
        return done
    folder = directory(db_file, model_id)
    feed_file = os.path.join(folder, "feed.json")
    feed = _read_json(feed_file) if os.path.lexists(feed_file) else {"after": 0, "pending": []}
    problem = _feed_problem(feed)
    if problem:
        log.warning(
            "vector index feed %s is not trusted (%s): every project is checked again", feed_file, problem
        )
        feed = {"after": 0, "pending": []}
    top = vectors.vector_max_rowid()
    if top < feed["after"] or feed.get("threshold") != threshold():
        # a store restored, or a new threshold: every project again
        feed = {"after": 0, "pending": [], "indexes": feed.get("indexes", {})}
    indexes = dict(feed.get("indexes", {}))
    projects = list(
        dict.fromkeys(
            [
                *feed.get("pending", []),
                *(
                    vectors.projects_with_vectors_after(model_id, feed["after"])
                    if top > feed["after"]
                    else []
                ),
                *_touched(db_file, model_id, indexes),
            ]
        )
    )
    deadline = None if seconds is None else time.monotonic() + seconds
    pending = []
    for project_id in projects:
        if deadline is not None and time.monotonic() >= deadline:
            pending.append(project_id)
            continue
        try:
            if not _refresh_project(vectors, model_id, project_id, db_file, dimensions, deadline, done):
                pending.append(project_id)
        except Exception as exc:  # noqa: BLE001
            # search stays exact; the next pass tries again
            log.warning("vector index of project %s not updated: %s", project_id, exc)
            done["error"] = str(exc)
            pending.append(project_id)
        files = paths(db_file, model_id, project_id)
        written = _meta_time(files)
        if written is not None and os.path.exists(files["index"]):
            indexes[project_id] = written
        else:
            indexes.pop(project_id, None)
    now = {"after": top, "pending": pending, "threshold": threshold(), "indexes": indexes}
    if now != feed:  # an idle pass writes nothing
        _private_dirs(folder)
        _replace_json(feed_file, now)
    done["pending"] = len(pending)
    return done


def _meta_time(files: dict[str, str]) -> int | None:
    try:
        return os.stat(files["meta"]).st_mtime_ns
    except OSError:
        return None


def _touched(db_file: str, model_id: str, indexes: dict) -> list[str]:
    """Projects whose sidecar changed since the drain wrote it (edited, truncated, removed): one stat
    an index a pass, so an index nobody adds to is still checked and rebuilt."""
    return [p for p, when in indexes.items() if _meta_time(paths(db_file, model_id, p)) != when]


_WARNED: list = []  # the missing-usearch warning, once a process


def _refresh_project(vectors, model_id, project_id, db_file, dimensions, deadline, done) -> bool:
    """Update one project's index; True when nothing is left for a later pass."""
    files = paths(db_file, model_id, project_id)
    meta, problem = _load_meta(files["meta"], model_id)
    if meta is None or not os.path.exists(files["index"]):
        if vectors.count_vectors_capped(model_id, project_id, max(1, threshold())) < threshold():
            # nothing to rebuild for a small project: the untrusted files go
            if problem:
                log.warning("vector index sidecar %s is not trusted (%s): removed", files["meta"], problem)
                for name in ("meta", "index", "sample"):
                    if os.path.lexists(files[name]):
                        os.unlink(files[name])
            return True  # small: searched exactly
    elif (
        meta.get("model_id") == model_id
        and stamp_holds(vectors, meta)
        and _first_holds(vectors, meta)
        and os.path.getsize(files["index"]) == meta.get("index_bytes")
    ):
        tail = vectors.count_vectors_capped_after(
            model_id, project_id, meta["watermark"], _merge_at(meta.get("records", 0))
        )
        if tail < _merge_at(meta.get("records", 0)):
            return True  # queries scan the short tail
    # usearch is imported only once a project needs an index (~0.3 s)
    if not available():
        if not _WARNED:
            _WARNED.append(project_id)
            log.warning(
                "project %s is past %s vectors: pip install 'kirolearn[vectors]' for an index, "
                "until then its search scans them all",
                project_id,
                threshold(),
            )
        return True
    from filelock import FileLock, Timeout

    _private_dirs(os.path.dirname(files["index"]))
    try:
        with FileLock(
            files["lock"], timeout=0, mode=0o600
        ):  # a reindex beside a drain: one writes, one waits a pass
            builder = _Builder(vectors, model_id, project_id, files, dimensions)
            complete = builder.catch_up(deadline)
            builder.save()
    except Timeout:
        return False
    done["projects"] += 1
    done["added"] += builder.added
    return complete


# query side

# index file -> (meta file mtime, meta, view, sample matrix, sample starts)
_OPEN: dict = {}


def open_index(vectors, db_file: str, model_id: str, project_id: str) -> tuple[object, str]:
    """(the project's index as a read-only Index view with its meta and sample, '') or (None, why not).

    A missing file is the normal case of a small project ('' as the reason)."""
    if not db_file or not project_id:
        return None, ""
    files = paths(db_file, model_id, project_id)
    try:
        mtime = os.stat(files["meta"]).st_mtime_ns
    except OSError:
        return None, ""
    cached = _OPEN.get(files["index"])
    if cached is None or cached[0] != mtime:
        if not available():
            return None, "usearch is not installed (pip install 'kirolearn[vectors]')"
        import numpy as np
        from usearch.index import Index

        meta, problem = _load_meta(files["meta"], model_id)
        if meta is None:
            return None, f"{files['meta']} is not trusted ({problem or 'gone'}): the drain rebuilds it"
        try:
            if os.path.getsize(files["index"]) != meta.get("index_bytes"):
                return None, f"{files['index']} is not the file its meta describes (an update was cut short)"
            view = Index.restore(files["index"], view=True)
            if len(view) != meta["rows"] or view.ndim != meta["dimensions"]:
                return (
                    None,
                    f"{files['index']} does not hold the rows its meta counts (the drain rebuilds it)",
                )
            view.expansion_search = expansion_for(len(view))
            sample = np.load(files["sample"])
            cached = (mtime, meta, view, sample["rows"], sample["starts"])
        except Exception as exc:  # noqa: BLE001 - the drain rebuilds it
            return None, f"{files['index']} cannot be read ({exc})"
        _OPEN[files["index"]] = cached
    meta = cached[1]
    if meta["records"] < threshold():
        # the threshold was raised past it: exact, as for any small project
        return None, ""
    if not _first_holds(vectors, meta):
        return None, f"{files['index']} is not an index of this store's vectors (the drain rebuilds it)"
    tail = vectors.count_vectors_capped_after(model_id, project_id, meta["watermark"], MAX_TAIL + 1)
    if tail > MAX_TAIL:
        return None, f"{tail}+ vectors are not in {files['index']} yet (the drain adds them)"
    return cached, ""


def expansion_for(rows: int) -> int:
    """The search expansion of an index of `rows` rows: EXPANSION_SEARCH, growing with the index
    past EXPANSION_SEARCH x EXPANSION_SHARE rows up to EXPANSION_MAX: a fixed expansion misses
    more of the exact ten as the index grows (measured in docs/benchmarks.md, 'The vector index')."""
    return min(EXPANSION_MAX, max(EXPANSION_SEARCH, rows // EXPANSION_SHARE))


def nearest_rows(opened, query_vector, k: int = CANDIDATE_ROWS) -> list[int]:
    """The record_vectors rowids of the index's k nearest rows to the query (any part)."""
    view = opened[2]
    if len(view) == 0:
        return []
    found = view.search(query_vector, min(k, len(view)), threads=1)
    return list(dict.fromkeys(int(key) >> PART_BITS for key in found.keys))


def sample_floor(opened, query_vector) -> float | None:
    """The median similarity of the query with the sampled records (each its best part)."""
    import numpy as np

    rows, starts = opened[3], opened[4]
    if not len(starts):
        return None
    sims = np.maximum.reduceat(rows @ query_vector, starts)
    return float(np.median(sims)) if len(sims) >= 3 else float(sims.min()) - 1e-6
