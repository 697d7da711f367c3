"""Issue #32, vectors at scale: a big project's usearch index (kirolearn.recall.ann), built and kept
up to date by the drain, used by search instead of a scan of every vector, and exact search below
the threshold, without usearch, and while an index cannot be trusted.

The threshold is forced to 0 (KIROLEARN_ANN_THRESHOLD) so a small real store gets an index; the
model is the shipped wordllama, through a real drain."""

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kirolearn.core import paths
from kirolearn.recall import ann, context, semantic
from kirolearn.recall import lexical as recall
from kirolearn.store.sqlite import reader
from kirolearn.store.sqlite.vector_rows import VectorRows
from tests.conftest import as_store, hook_env, kl
from tests.helpers import coding_store, spool_turn

pytest.importorskip("usearch")


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setenv(ann.THRESHOLD_ENV, "0")


def _exact(monkeypatch):
    """Search as if no index existed (the exact matrix), for comparison."""
    monkeypatch.setattr(ann, "open_index", lambda *a, **k: (None, ""))


def _meta(project):
    files = ann.paths(paths.db_path(), _model_id(), context.project_id(str(project)))
    with open(files["meta"], encoding="utf-8") as handle:
        return json.load(handle), files


def _model_id():
    return "wordllama/l2_supercat_256"


def _ranks(searcher, turns, pid):
    return [[h.record_id for h in searcher.search(t["ordinary"], project_id=pid, limit=5)] for t in turns]


def test_a_small_store_is_searched_exactly_with_no_index(project, wordllama, drain_now):  # noqa: F811
    turns = coding_store(project, 10, 60)
    drain_now(flush=True)
    pid = context.project_id(str(project))
    assert not list(Path(paths.db_path()).parent.rglob("*.usearch"))  # below THRESHOLD: no index
    searcher = semantic.Searcher(as_store(recall.connect_readonly()))
    assert isinstance(searcher._index(pid), semantic._ProjectIndex)
    assert (
        searcher.search(turns[0]["ordinary"], project_id=pid, limit=1)[0].title[:40]
        == turns[0]["prompt"][:40]
    )


def test_the_drain_builds_the_index_and_search_uses_it_not_the_scan(
    project, wordllama, forced, drain_now, monkeypatch
):  # noqa: F811
    turns = coding_store(project, 40, 400)
    drain_now(flush=True)
    pid = context.project_id(str(project))
    meta, files = _meta(project)
    conn = recall.connect_readonly(budget=60)
    vectors = as_store(conn).derived().vector_stamp(_model_id(), pid)[0]
    assert meta["records"] == vectors and meta["rows"] >= vectors  # every record, each of its parts

    with monkeypatch.context() as m:
        _exact(m)
        exact = _ranks(semantic.Searcher(as_store(conn)), turns, pid)

    def no_scan(*args, **kwargs):
        raise AssertionError("the exact scan ran")

    monkeypatch.setattr(VectorRows, "load_vectors", no_scan)
    searcher = semantic.Searcher(as_store(conn))
    assert isinstance(searcher._index(pid), semantic._AnnIndex)
    approximate = _ranks(searcher, turns, pid)
    assert sum(a[0] == e[0] for a, e in zip(approximate, exact)) >= 38  # the same best hit, nearly always
    assert sum(len(set(a) & set(e)) for a, e in zip(approximate, exact)) >= 0.9 * 5 * len(turns)
    only = searcher.vector_only(turns[0]["ordinary"], project_id=pid, limit=5)
    assert only and all(h.score <= 1.0 for h in only)
    opened, _ = ann.open_index(as_store(conn).derived(), reader.database_file(conn), _model_id(), pid)
    assert opened[2].expansion_search == ann.expansion_for(meta["rows"]) == ann.EXPANSION_SEARCH


def test_a_bigger_index_searches_wider():
    """HNSW's recall falls as the graph grows at a fixed expansion (bench_vectors: 0.47 of a mixture's
    exact ten at 1M rows with 256): one row in EXPANSION_SHARE is explored past 256k rows, up to 1,024."""
    assert ann.expansion_for(0) == ann.expansion_for(256_000) == 256
    assert ann.expansion_for(512_000) == 512 and ann.expansion_for(1_000_000) == 1000
    assert ann.expansion_for(10_000_000) == ann.EXPANSION_MAX


def test_new_records_are_added_to_the_index_alone(project, wordllama, forced, drain_now, monkeypatch):  # noqa: F811
    coding_store(project, 10, 60)
    drain_now(flush=True)
    before, files = _meta(project)
    taken = []
    original = ann._Builder._take

    def counting(self, rows):
        taken.extend(r[0] for r in rows)
        return original(self, rows)

    monkeypatch.setattr(ann._Builder, "_take", counting)
    spool_turn(
        project,
        "late",
        "The nightly export drops rows with a NULL owner",
        "coalesce the owner column to the team account before the join",
    )
    drain_now(flush=True)
    after, _ = _meta(project)
    assert len(taken) == after["records"] - before["records"] >= 1  # only the new vectors
    assert min(taken) > before["watermark"] and after["watermark"] == max(taken)
    pid = context.project_id(str(project))
    monkeypatch.setattr(VectorRows, "load_vectors", lambda *a, **k: pytest.fail("the exact scan ran"))
    top = semantic.Searcher(as_store(recall.connect_readonly())).search(
        "export loses rows without an owner", project_id=pid, limit=3
    )
    assert "nightly export" in top[0].title


def test_a_forgotten_record_is_not_found_through_the_index(project, wordllama, forced, drain_now):  # noqa: F811
    from kirolearn import Memory

    turns = coding_store(project, 10, 60)
    drain_now(flush=True)
    pid = context.project_id(str(project))
    searcher = semantic.Searcher(as_store(recall.connect_readonly()))
    [hit] = searcher.search(turns[3]["ordinary"], project_id=pid, limit=1)
    Memory().forget([hit.record_id])
    again = semantic.Searcher(as_store(recall.connect_readonly()))
    assert isinstance(again._index(pid), semantic._AnnIndex)  # the index still holds its vector
    assert hit.record_id not in {h.record_id for h in again.search(turns[3]["ordinary"], project_id=pid)}
    assert hit.record_id not in {h.record_id for h in again.vector_only(turns[3]["ordinary"], project_id=pid)}


REFRESH = """
from kirolearn.recall import semantic
from kirolearn.settings import load
from kirolearn.core import paths
from kirolearn.store.sqlite import db as store
from kirolearn.store.sqlite.store import SqliteStore
print(semantic.index_with_settings(SqliteStore(db=store.open_db()), load()))
"""


def test_a_kill_between_the_index_and_its_meta_is_repaired(project, wordllama, forced, drain_now):  # noqa: F811
    turns = coding_store(project, 10, 60)
    drain_now(flush=True)
    before, files = _meta(project)
    spool_turn(
        project, "late", "The nightly export drops rows with a NULL owner", "coalesce the owner column"
    )
    env = hook_env(KIROLEARN_CRASH_AT="ann-after-index")
    monkey_env = dict(env, KIROLEARN_EMBEDDING_MODEL=_model_id())
    # the new record, no vector yet; a child embeds it, dies mid-update
    with pytest.MonkeyPatch.context() as m:
        m.setenv("KIROLEARN_EMBEDDING_MODEL", "none")
        drain_now(flush=True)
    killed = subprocess.run(
        [sys.executable, "-c", REFRESH], env=monkey_env, capture_output=True, text=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    torn, _ = _meta(project)
    assert torn == before  # the old meta: the index file on disk is newer than it
    pid = context.project_id(str(project))
    opened, why = ann.open_index(
        as_store(recall.connect_readonly()).derived(), paths.db_path(), _model_id(), pid
    )
    assert opened is None and "cut short" in why  # not trusted: search is exact meanwhile
    searcher = semantic.Searcher(as_store(recall.connect_readonly()))
    assert (
        searcher.search(turns[2]["ordinary"], project_id=pid, limit=1)[0].title[:40]
        == turns[2]["prompt"][:40]
    )
    done = subprocess.run(
        [sys.executable, "-c", REFRESH],
        env=dict(monkey_env, KIROLEARN_CRASH_AT=""),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    after, _ = _meta(project)
    opened, why = ann.open_index(
        as_store(recall.connect_readonly()).derived(), paths.db_path(), _model_id(), pid
    )
    assert opened is not None, why
    assert len(opened[2]) == after["rows"] and after["records"] == before["records"] + 1  # no row twice
    top = semantic.Searcher(as_store(recall.connect_readonly())).search(
        "export loses rows without an owner", project_id=pid, limit=1
    )
    assert "nightly export" in top[0].title


def test_without_usearch_search_is_exact_and_says_why(
    project, wordllama, forced, drain_now, monkeypatch, caplog
):  # noqa: F811
    turns = coding_store(project, 10, 60)
    drain_now(flush=True)
    pid = context.project_id(str(project))
    monkeypatch.setitem(sys.modules, "usearch", None)  # `import usearch` raises ImportError
    monkeypatch.setitem(sys.modules, "usearch.index", None)
    monkeypatch.setattr(ann, "_OPEN", {})
    assert not ann.available()
    with caplog.at_level(logging.WARNING, logger="kirolearn.recall.semantic"):
        searcher = semantic.Searcher(as_store(recall.connect_readonly()))
        hits = searcher.search(turns[1]["ordinary"], project_id=pid, limit=1)
    assert hits[0].title[:40] == turns[1]["prompt"][:40]
    assert isinstance(searcher._index(pid), semantic._ProjectIndex)
    assert "usearch is not installed" in caplog.text
    spool_turn(project, "late", "a turn drained without usearch", "nothing breaks")
    stats, _ = drain_now(flush=True)
    assert stats.records_embedded >= 1 and not stats.embedding_error


def test_an_edited_newest_record_is_found_by_its_new_text(project, wordllama, forced, drain_now, monkeypatch):  # noqa: F811
    """The newest vector row deleted and written again takes its rowid back (at the watermark):
    search reads it as new (ann.rewritten_rows), not the index's copy of the old text."""
    from click.testing import CliRunner

    from kirolearn.cli.commands import cli

    coding_store(project, 10, 60)
    spool_turn(
        project, "late", "The nightly export drops rows with a NULL owner", "coalesce the owner column"
    )
    drain_now(flush=True)
    before, _ = _meta(project)
    pid = context.project_id(str(project))
    conn = recall.connect_readonly()
    [newest] = [
        h
        for h in semantic.Searcher(as_store(conn)).search(
            "nightly export NULL owner", project_id=pid, limit=3
        )
        if "nightly export" in h.title
    ]
    result = CliRunner().invoke(
        cli,
        [
            "edit",
            newest.record_id,
            "--title",
            "Kubernetes pods evicted under memory pressure",
            "--summary",
            "raise the memory limit of the worker deployment",
        ],
    )
    assert result.exit_code == 0, result.output
    drain_now(flush=True)
    conn = recall.connect_readonly()
    assert (
        as_store(conn).derived().vector_stamp(_model_id(), pid)[1] == before["watermark"]
    )  # the same rowid again
    monkeypatch.setattr(VectorRows, "load_vectors", lambda *a, **k: pytest.fail("the exact scan ran"))
    searcher = semantic.Searcher(as_store(conn))
    assert newest.record_id in searcher._index(pid).tail  # read from the store, not the index's old copy
    only = searcher.vector_only("pods evicted for memory pressure", project_id=pid, limit=1)
    assert only[0].record_id == newest.record_id


def test_a_lowered_threshold_indexes_a_store_with_no_new_vectors(project, wordllama, drain_now, monkeypatch):  # noqa: F811
    """An upgraded store (or a new threshold): the next pass indexes what is there, no new turn needed."""
    coding_store(project, 10, 60)
    drain_now(flush=True)
    assert not list(Path(paths.db_path()).parent.rglob("*.usearch"))
    monkeypatch.setenv(ann.THRESHOLD_ENV, "0")
    stats, _ = drain_now(flush=True)
    assert stats.records_embedded == 0  # nothing new was embedded
    meta, files = _meta(project)
    assert (
        Path(files["index"]).exists()
        and meta["records"]
        == as_store(recall.connect_readonly())
        .derived()
        .vector_stamp(_model_id(), context.project_id(str(project)))[0]
    )


@pytest.mark.parametrize("bad", ["400", None, -3, [1], True])
def test_an_untrusted_sidecar_is_scanned_around_and_the_next_drain_rebuilds_it(
    project, wordllama, forced, drain_now, bad, caplog
):  # noqa: F811
    turns = coding_store(project, 6, 30)
    drain_now(flush=True)
    meta, files = _meta(project)
    good_records = meta["records"]
    Path(files["meta"]).write_text(json.dumps(dict(meta, records=bad)), "utf-8")
    env = hook_env(KIROLEARN_EMBEDDING_MODEL=_model_id(), KIROLEARN_ANN_THRESHOLD="0")
    ran = kl("search", turns[1]["ordinary"], "--json", "--project", str(project), env=env, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]  # the exact scan, no "kirolearn bug"
    assert json.loads(ran.stdout)[0]["title"][:40] == turns[1]["prompt"][:40]
    assert "records" in ran.stderr and "not trusted" in ran.stderr  # one line saying why
    if bad is None:  # MCP search_memory scans too
        mcp = subprocess.Popen(
            [str(Path(sys.executable).parent / "kirolearn-mcp")],
            env=dict(env, KIROLEARN_PROJECT=str(project)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        call = {"name": "search_memory", "arguments": {"query": turns[1]["ordinary"]}}
        lines = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
        ]
        out, err = mcp.communicate("".join(json.dumps(m) + "\n" for m in lines).encode(), timeout=120)
        reply = [json.loads(line) for line in out.splitlines()][-1]
        assert reply["id"] == 2 and not reply["result"].get("isError"), (reply, err[-2000:])
        assert turns[1]["prompt"][:30] in json.dumps(reply["result"]), reply
    with caplog.at_level(logging.WARNING, logger="kirolearn.recall.ann"):
        drain_now()  # no new vector: the drain still sees the sidecar changed
    rebuilt, _ = _meta(project)
    assert rebuilt["records"] == good_records
    assert [r for r in caplog.records if "not trusted" in r.getMessage() and "rebuilding" in r.getMessage()]
    pid = context.project_id(str(project))
    opened, why = ann.open_index(
        as_store(recall.connect_readonly()).derived(), paths.db_path(), _model_id(), pid
    )
    assert opened is not None, why


def test_the_vectors_folder_and_files_are_private_under_umask_000(project, wordllama, forced, home):  # noqa: F811
    coding_store(project, 3, 10)
    env = hook_env(KIROLEARN_EMBEDDING_MODEL=_model_id(), KIROLEARN_ANN_THRESHOLD="0")
    ran = kl("drain", "--flush", env=env, preexec_fn=lambda: os.umask(0), timeout=180)
    assert ran.returncode == 0, ran.stderr[-2000:]
    folder = Path(paths.db_path()).parent / "vectors"
    made = [folder, *folder.rglob("*")]
    assert any(p.suffix == ".usearch" for p in made) and any(p.name == "feed.json" for p in made)
    for p in made:
        want = 0o700 if p.is_dir() else 0o600
        assert p.stat().st_mode & 0o777 == want, (p, oct(p.stat().st_mode))
