"""Recall whose cost follows the matches it ranks, not the store (issue #32): word counts find a word
whose Porter stem is shorter than its prefix, a word in too many records is not searched, a prompt of
prompt of common words only looks them up in the newest records, words matching more than a budget rank
only the newest records, a big project is filtered after ranking, and the recall
query reads the FTS index and joins by rowid (EXPLAIN QUERY PLAN). On a small store nothing changes."""

from datetime import datetime, timedelta, timezone

import pytest
from conftest import as_store

from kirolearn.core.ids import new_ulid
from kirolearn.core.project import project_id
from kirolearn.recall import lexical
from kirolearn.store.record import MemoryRecord
from kirolearn.store.sqlite import db as store
from kirolearn.store.sqlite import reader


def fill(db, root, texts, start=0):
    """One record per (title, summary), oldest first, in one transaction (as a big import lands)."""
    now = datetime.now(timezone.utc)
    with store.writing(db):
        for i, (title, summary) in enumerate(texts):
            store.insert_record(
                db,
                store.record_row(
                    MemoryRecord(
                        record_id="mr_" + new_ulid(),
                        project_id=project_id(str(root)),
                        project_root=str(root),
                        session_id=f"s{(start + i) // 20}",
                        title=title,
                        summary=summary,
                        observation_type="discovery",
                        strategy="test",
                        source_event_ids=[new_ulid()],
                        created_at=now - timedelta(minutes=len(texts) - i),
                    )
                ),
            )


@pytest.fixture
def big(project, new_store):
    """1,200 records that all hold "reference" and "deploy"; "zanzibar" in record 7, "quokka" in the last."""
    db = new_store()
    fill(
        db,
        project,
        [
            (
                f"note {i}",
                "the reference deploy went fine"
                + (" zanzibar" if i == 7 else "")
                + (" quokka" if i == 1199 else ""),
            )
            for i in range(1200)
        ],
    )
    assert store.refresh_term_docs(db, force=True)
    return db


def test_a_word_indexed_by_a_shorter_stem_is_counted(big):
    """Porter indexes "reference" as "refer": its stem-like prefix "refere" finds no term, and the word was
    searched as if rare, ranking every record that holds it. Each word is counted by the term FTS5's own
    tokenizer makes of it ("died" is "di": at 1M records its 2,300 matches were ranked as if it had none)."""
    conn = lexical.connect_readonly()
    assert reader.index_terms(["reference", "logged", "users", "died", "test_checkout", ""]) == [
        ["refer"],
        ["log"],
        ["user"],
        ["di"],
        ["test", "checkout"],
        [],
    ]
    total, counts = reader.term_doc_counts(conn, ["refere"], ["reference"])
    assert total == 1200 and counts == [1200]
    assert lexical.plan(conn, ["zanzibar", "quokka", "reference", "went"]).words == ["zanzibar", "quokka"]


def test_common_words_only_are_looked_up_in_the_newest_records(big, project, monkeypatch):
    monkeypatch.setattr(lexical, "COMMON_DOCS", 100)
    monkeypatch.setattr(lexical, "RECENT_ROWS", 300)
    monkeypatch.setattr(lexical, "MATCH_BUDGET", 600)
    conn = lexical.connect_readonly()
    pid = project_id(str(project))
    # a rare word among them: the common ones are not searched, the rare one in the whole store
    planned = lexical.plan(conn, ["deploy", "zanzibar", "went", "fine"])
    assert planned.words == ["zanzibar"] and planned.after_rowid == 0
    hits = lexical.search(conn, "deploy zanzibar went fine", project_id=pid)
    assert hits[0].title == "note 7"
    # common words only, ranked: the newest part of the store holding MATCH_BUDGET of their 2,400 matches
    assert lexical._budget_floor(1200, 2400) == 1200 - 1200 * 600 // 2400
    # search() ranks none of them (bm25() would read their whole doclists): each is looked up unranked
    # in the newest RECENT_ROWS records, newest first
    planned = lexical.plan(conn, ["deploy", "went", "fine"])
    assert planned.words == [] and planned.apart == ["deploy", "went"]
    seen: list = []
    conn.set_trace_callback(seen.append)
    hits = lexical.search(conn, "deploy went fine", project_id=pid, limit=100)
    conn.set_trace_callback(None)
    assert not [sql for sql in seen if "bm25(" in sql]
    assert len(hits) == 100 and all(int(h.title.split()[1]) >= 900 for h in hits)
    assert [s for s in lexical.scores(conn, "deploy went fine", project_id=pid, limit=300)]
    # the filters hold in the lookup (it stops at the first `limit` records that pass them)
    assert not lexical.search(conn, "deploy went fine", project_id=pid, types=["decision"])
    assert len(lexical.search(conn, "deploy went fine", project_id=pid, types=["discovery"])) == 10
    assert not lexical.search(conn, "deploy went fine", project_id="another-project")
    # two words alone are bounded too (they were searched unbounded: 2 s at 1M records)
    planned = lexical.plan(conn, ["deploy", "went"])
    assert planned.words == [] and planned.apart == ["deploy", "went"]
    # on a store under COMMON_DOCS / COMMON_SHARE records nothing is bounded (the real constants: 25,000)
    monkeypatch.undo()
    planned = lexical.plan(conn, ["deploy", "went", "fine"])
    assert planned.words == ["deploy", "went"]
    assert planned.after_rowid == 0 and planned.apart == []


def test_words_matching_more_than_the_budget_rank_the_newest_records(project, new_store, monkeypatch):
    """Words each under COMMON_DOCS whose matches together pass MATCH_BUDGET are ranked only in the newest
    part of the store expected to hold MATCH_BUDGET of them: ranking costs its matches (#32)."""
    db = new_store()
    fill(
        db,
        project,
        [
            (f"note {i}", ("died " if i % 2 else "") + ("cron " if i % 3 == 0 else "") + "zanzibar")
            for i in range(3000)
        ],
    )
    assert store.refresh_term_docs(db, force=True)
    monkeypatch.setattr(lexical, "COMMON_DOCS", 1600)  # the store is big: 0.6 x 3,000 > 1,600
    monkeypatch.setattr(lexical, "COMMON_SHARE", 0.6)
    monkeypatch.setattr(lexical, "MATCH_BUDGET", 500)
    conn = lexical.connect_readonly()
    pid = project_id(str(project))
    # "died" (1,500 records, indexed as "di") and "cron" (1,000): 2,500 matches, five times the budget
    planned = lexical.plan(conn, ["died", "cron", "zanzibar"])
    assert planned.words == ["died", "cron"]
    assert planned.after_rowid == 3000 - 3000 * 500 // 2500
    hits = lexical.search(conn, "died cron zanzibar", project_id=pid, limit=50)
    assert len(hits) == 50 and all(int(h.title.split()[1]) >= 2400 for h in hits)
    monkeypatch.setattr(lexical, "MATCH_BUDGET", 2500)  # within the budget: the whole store
    assert lexical.plan(conn, ["died", "cron", "zanzibar"]).after_rowid == 0


def test_a_big_project_is_filtered_after_ranking_with_the_same_hits(big, project, tmp_path, monkeypatch):
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    fill(
        big,
        other,
        [(f"other {i}", "the reference deploy went fine zanzibar") for i in range(600)],
        start=1200,
    )
    store.refresh_term_docs(big, force=True)
    conn = lexical.connect_readonly()
    pid = project_id(str(project))
    planned = lexical.plan(conn, ["zanzibar"], pid)
    assert (planned.in_match, planned.share) == (True, 1.0)  # 1,200 records: narrowed in the MATCH
    now = 1.9e9
    narrowed = [
        (h.record_id, h.score) for h in lexical.search(conn, "zanzibar fine", project_id=pid, now=now)
    ]
    monkeypatch.setattr(lexical, "PROJECT_MATCH_DOCS", 1000)
    planned = lexical.plan(conn, ["zanzibar"], pid)
    assert not planned.in_match and planned.share == pytest.approx(1200 / 1800 / lexical.SHARE_MARGIN)
    after = [(h.record_id, h.score) for h in lexical.search(conn, "zanzibar fine", project_id=pid, now=now)]
    assert after == narrowed and len(narrowed) == 10  # the other project's 600 matches crowded the ranking
    rare = [(h.record_id, h.score) for h in lexical.search(conn, "quokka fine", project_id=pid, now=now)]
    monkeypatch.undo()
    assert rare == [
        (h.record_id, h.score) for h in lexical.search(conn, "quokka fine", project_id=pid, now=now)
    ]


def test_an_identifier_of_common_words_is_looked_up_unranked_in_the_newest_records(big, project, monkeypatch):
    """FTS5 reads "deploy_went_fine" as the phrase "deploy went fine": every token's doclist, and bm25()
    counts the phrase's records over the whole index first (~50 ms at 1M records). On a big store it
    is looked up without bm25 in the newest RECENT_ROWS records, and what holds it ranks first."""
    fill(big, project, [("the old flag", "set deploy_went_fine to false")], start=1200)
    fill(big, project, [("the flag", "set deploy_went_fine to true zanzibar")], start=1201)
    store.refresh_term_docs(big, force=True)
    monkeypatch.setattr(lexical, "COMMON_DOCS", 100)
    monkeypatch.setattr(lexical, "RECENT_ROWS", 1)
    conn = lexical.connect_readonly()
    pid = project_id(str(project))
    planned = lexical.plan(conn, ["deploy_went_fine", "quokka", "zanzibar"])
    assert planned.words == ["quokka", "zanzibar"] and planned.apart == ["deploy_went_fine"]
    seen: list = []
    conn.set_trace_callback(seen.append)
    hits = lexical.search(conn, "deploy_went_fine quokka zanzibar", project_id=pid)
    conn.set_trace_callback(None)
    assert hits[0].title == "the flag" and "deploy_went_fine" in hits[0].matched_terms
    assert "the old flag" not in [h.title for h in hits]  # past the newest RECENT_ROWS: the bound
    ranked = [sql for sql in seen if "bm25(" in sql]
    assert ranked and not any("deploy_went_fine" in sql for sql in ranked)
    assert any("deploy_went_fine" in sql and "rowid >" in sql for sql in seen)
    assert lexical.scores(conn, "deploy_went_fine quokka zanzibar", project_id=pid)[0][0] == hits[0].record_id
    monkeypatch.undo()  # a store under COMMON_DOCS records: the phrase is ranked as always
    planned = lexical.plan(conn, ["deploy_went_fine", "quokka", "zanzibar"])
    assert "deploy_went_fine" in planned.words and planned.apart == []


def plans(conn, run) -> "list[str]":
    """EXPLAIN QUERY PLAN of every statement `run` executes on `conn` (the trace gives them expanded)."""
    seen: list = []
    conn.set_trace_callback(seen.append)
    run()
    conn.set_trace_callback(None)
    out = []
    for sql in seen:
        if sql.lstrip().lower().startswith(("with", "select")):
            out.append(" | ".join(row[3] for row in conn.execute("explain query plan " + sql)))
    return out


def test_the_recall_queries_use_the_fts_index_and_the_rowid(big, project, monkeypatch):
    monkeypatch.setattr(lexical, "COMMON_DOCS", 100)
    monkeypatch.setattr(lexical, "RECENT_ROWS", 300)
    conn = lexical.connect_readonly()
    pid = project_id(str(project))
    for prompt in ("zanzibar quokka fine", "deploy went fine"):  # ranked; looked up unranked
        found = plans(conn, lambda p=prompt: lexical.search(conn, p, project_id=pid))
        index = [p for p in found if "VIRTUAL TABLE" in p]
        assert index, found
        for plan in index:
            assert plan.startswith(
                (
                    "SCAN memory_records_fts VIRTUAL TABLE INDEX",
                    "SCAN f VIRTUAL TABLE INDEX",
                    "MATERIALIZE top | SCAN memory_records_fts VIRTUAL TABLE INDEX",
                )
            ), plan
            assert "SCAN r" not in plan and "SCAN memory_records " not in plan
        joined = [p for p in index if " r " in p]
        assert joined and all(
            "SEARCH r USING INTEGER PRIMARY KEY (rowid=?)" in p for p in joined
        )  # top rows only
    # the word counts and the newest rowid: index lookups, never a scan
    counted = plans(conn, lambda: lexical.plan(conn, ["deploy", "went", "fine"], pid))
    assert counted and all("SCAN" not in p for p in counted), counted


def test_a_drain_that_expands_imported_records_refreshes_the_word_counts(project, new_store, write_config):
    """Records an import or a team sync added are expanded by the next drain, which writes none itself:
    it copies the word counts too, or the hook read fts5vocab's doclists (230 ms a prompt at 100k)."""
    from kirolearn import settings
    from kirolearn.pipeline import drain

    write_config('[embeddings]\nmodel = "none"\n')
    db = new_store()
    fill(db, project, [(f"note {i}", "the reference deploy went fine") for i in range(1200)])
    assert db.execute("select count(*) from term_docs").fetchone()[0] == 0
    stats = drain.Drainer(as_store(db), settings.load()).run_once()
    assert stats.records_written == 0
    assert db.execute("select count(*) from memory_records where expansion is null").fetchone()[0] == 0
    assert db.execute("select docs from term_docs where term = ''").fetchone()[0] == 1200
    conn = lexical.connect_readonly()
    assert reader.term_doc_counts(conn, ["refere"], ["reference"]) == (1200, [1200])
