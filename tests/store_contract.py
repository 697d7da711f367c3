"""The store contract suite: one set of tests every kirolearn store backend passes.

Written against kirolearn.store.base.Store only. A backend's test module
subclasses StoreContract and provides `make_store(name)`, which returns a fresh,
migrated, empty store each time it is called with a new name (as huey runs one
storage test class over each backend). tests/test_store_sqlite.py runs it on
SQLite; the PostgreSQL backend runs the same class.
"""

import json

import pytest

from kirolearn.store.base import Store

T0 = "2026-11-01T10:00:00.000Z"


def at(minute: int, second: int = 0) -> str:
    return f"2026-11-01T10:{minute:02d}:{second:02d}.000Z"


def event(n: int, *, project="p1", session="s1", kind="tool_use", received=None, state="pending") -> dict:
    """An event as the drain stores it."""
    received = received or at(n // 60, n % 60)
    body = {
        "event_id": f"ev{n:04d}",
        "kind": kind,
        "session_id": session,
        "project_root": f"/src/{project}",
        "received_at": received,
        "payload": {"n": n, "text": f"event {n}"},
    }
    return {
        "event_id": f"ev{n:04d}",
        "content_hash": f"h{n:04d}",
        "kind": kind,
        "trigger": "postToolUse",
        "hook": "postToolUse",
        "generation": "classic",
        "surface": "kiro-cli",
        "agent": "kiro",
        "session_id": session,
        "project_id": project,
        "project_root": f"/src/{project}",
        "cwd": f"/src/{project}",
        "received_at": received,
        "stored_at": received,
        "actor": "dev",
        "host": "laptop",
        "client_version": "1",
        "body": json.dumps(body),
        "extract_state": state,
        "run_id": None,
    }


def record(
    n: int,
    *,
    project="p1",
    session="s1",
    title=None,
    summary=None,
    kind="tool_use",
    created=None,
    facts=(),
    concepts=(),
    files=(),
    events=None,
) -> dict:
    """A record as extraction makes it (lists as lists)."""
    return {
        "record_id": f"mr_{n:04d}",
        "project_id": project,
        "project_root": f"/src/{project}",
        "session_id": session,
        "title": title or f"record {n}",
        "summary": summary or f"summary of record {n}",
        "facts": list(facts),
        "concepts": list(concepts),
        "files_touched": list(files),
        "observation_type": kind,
        "strategy": "deterministic",
        "source_event_ids": list(events if events is not None else [f"ev{n:04d}"]),
        "created_at": created or at(n // 60, n % 60),
    }


def run_row(n: int, **extra) -> dict:
    return {
        "run_id": f"run{n:04d}",
        "batch_key": f"p1/s1/{n}",
        "extractor": "deterministic",
        "reason": "stop",
        "model": "",
        "event_count": 1,
        "request": "",
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost_usd": 0.0,
        "outcome": "ok",
        "error": "",
        "fallback_reason": "",
        "records_written": 0,
        "started_at": T0,
        "finished_at": T0,
        **extra,
    }


def summary(n: int, *, project="p1", label="general", ended=None, text="", record_id=None, **lists) -> dict:
    return {
        "id": f"sum{n:04d}",
        "session_id": f"s{n}",
        "project": label,
        "project_id": project,
        "project_root": f"/src/{project}",
        "branch": "main",
        "summary": text or f"session {n} ended",
        "highlights": [],
        "pitfalls": [],
        "next_steps": [],
        "open_questions": [],
        "auto_compress": 0,
        "compressed_used": 0,
        "auto_compress_error": None,
        "record_id": record_id,
        "ended_at": ended or at(n),
        **lists,
    }


def ids(rows) -> "list[str]":
    return [r["record_id"] for r in rows]


class StoreContract:
    """Subclasses provide make_store(name) -> Store (fresh, migrated, empty)."""

    def make_store(self, name: str) -> Store:  # pragma: no cover - every backend overrides it
        raise NotImplementedError

    @pytest.fixture
    def store(self):
        st = self.make_store("main")
        yield st
        st.close()

    def extract(self, store: Store, n: int, records: "list[dict]", event_ids=None) -> int:
        return store.commit_extraction(run_row(n), records, event_ids or [])

    # --- schema -------------------------------------------------------------------------

    def test_is_a_store_with_its_schema_applied(self, store):
        assert isinstance(store, Store)
        assert store.backend in ("sqlite", "postgresql")
        schema = store.schema()
        assert schema["applied"] and schema["pending"] == []
        assert store.migrate() == []  # applying twice changes nothing

    # --- events -------------------------------------------------------------------------

    def test_events_are_stored_once_by_id(self, store):
        assert store.add_events([event(1), event(2)]) == 2
        assert store.add_events([event(2), event(3)]) == 1  # a re-run after a crash inserts nothing twice
        assert store.event_ids_present(["ev0001", "ev0003", "ev0009"]) == {"ev0001", "ev0003"}
        assert store.figures(T0)["events"] == 3

    def test_many_event_ids_are_checked_at_once(self, store):
        store.add_events([event(n) for n in range(1200)])
        wanted = [f"ev{n:04d}" for n in range(0, 2400, 2)]
        assert len(store.event_ids_present(wanted)) == 600

    def test_pending_sessions_and_events(self, store):
        store.add_events(
            [event(1), event(2, kind="session_summary"), event(3, session="s2"), event(4, state="done")]
        )
        sessions = {(s["project_id"], s["session_id"]): s for s in store.pending_sessions()}
        assert set(sessions) == {("p1", "s1"), ("p1", "s2")}
        s1 = sessions[("p1", "s1")]
        assert s1["n"] == 2 and s1["first_event_id"] == "ev0001" and s1["last_stop_id"] == "ev0002"
        assert sessions[("p1", "s2")]["last_stop_id"] is None
        assert [e["event_id"] for e in store.pending_events("p1", "s1")] == ["ev0001", "ev0002"]
        assert [e["event_id"] for e in store.pending_events("p1", "s1", up_to="ev0001")] == ["ev0001"]
        assert store.pending_events("p1", "s1")[0]["payload"] == {"n": 1, "text": "event 1"}  # bodies decoded

    def test_extraction_marks_its_events_done_with_its_records(self, store):
        store.add_events([event(1), event(2)])
        assert self.extract(store, 1, [record(1, events=["ev0001", "ev0002"])], ["ev0001", "ev0002"]) == 1
        assert store.pending_sessions() == []
        assert store.figures(T0)["pending_events"] == 0
        assert store.get_record("mr_0001")["source_event_ids"] == ["ev0001", "ev0002"]

    def test_expiry_removes_only_extracted_old_events(self, store):
        store.add_events([event(1, state="done"), event(2), event(3, state="done", received=at(30))])
        assert store.expire_events(at(10)) == 1
        assert store.event_ids_present(["ev0001", "ev0002", "ev0003"]) == {"ev0002", "ev0003"}

    def test_content_hashes_present_whenever_received(self, store):
        store.add_events([event(1), event(2, received="2020-01-01T00:00:00.000Z")])
        assert store.content_hashes_present({"h0001", "h0002", "h0009"}) == {"h0001", "h0002"}
        assert store.content_hashes_present(set()) == set()
        store.add_events([event(n) for n in range(10, 1210)])
        assert (
            len(store.content_hashes_present(f"h{n:04d}" for n in range(0, 2400, 2))) == 1 + 600
        )  # h0002, h0010…

    def test_a_content_duplicate_is_found_only_within_its_window(self, store):
        store.add_events(
            [event(1, received=at(1, 0)), dict(event(2, received=at(9, 0)), content_hash="h0001")]
        )
        assert store.content_duplicate("h0001", at(0, 57), at(1, 3))  # the 3 s window around 10:01:00
        assert store.content_duplicate("h0001", at(1, 0), at(1, 0))  # both ends included
        assert not store.content_duplicate("h0001", at(1, 1), at(1, 7))  # same content, outside the window
        assert not store.content_duplicate("h0001", at(2, 0), at(8, 59))
        assert store.content_duplicate("h0001", None, None)  # no window: stored at any time
        assert not store.content_duplicate("h0009", None, None)
        assert not store.content_duplicate("h0009", at(0, 0), at(59, 0))

    def test_last_turn_event_id_skips_stops_notes_and_other_sessions(self, store):
        store.add_events(
            [
                event(1),
                event(2, kind="note"),
                event(3, kind="session_summary"),
                event(4),
                event(5, kind="session_summary"),
                event(6, session="s2"),
                event(7, project="p2"),
                event(8, kind="prompt", state="done"),
            ]
        )
        assert store.last_turn_event_id("p1", "s1", "ev0005") == "ev0004"
        assert store.last_turn_event_id("p1", "s1", "ev0004") == "ev0001"  # the note and the stop are no turn
        assert store.last_turn_event_id("p1", "s1", "ev0009") == "ev0008"  # extracted events count too
        assert store.last_turn_event_id("p1", "s1", "ev0001") is None
        assert store.last_turn_event_id("p1", "s2", "ev9999") == "ev0006"
        assert store.last_turn_event_id("p2", "s1", "ev9999") == "ev0007"
        assert store.last_turn_event_id("p9", "s1", "ev9999") is None

    def test_pending_event_count(self, store):
        assert store.pending_event_count() == 0
        store.add_events([event(1), event(2), event(3, state="done"), event(4, session="s2")])
        assert store.pending_event_count() == 3
        self.extract(store, 1, [record(1, events=["ev0001", "ev0002"])], ["ev0001", "ev0002"])
        assert store.pending_event_count() == 1 == store.figures(T0)["pending_events"]

    # --- model runs -----------------------------------------------------------------------

    def test_failed_attempts_are_counted_per_batch(self, store):
        store.add_events([event(1)])
        assert store.failed_attempts("p1/s1/b1") == 0
        store.record_failed_run(run_row(1, batch_key="p1/s1/b1", extractor="llm", error="timeout"))
        store.record_failed_run(
            run_row(2, batch_key="p1/s1/b1", extractor="llm", outcome="ok")
        )  # kept as failed
        store.record_failed_run(run_row(3, batch_key="p1/s1/b2", extractor="llm"))
        store.commit_extraction(
            run_row(4, batch_key="p1/s1/b1"), [record(1)], ["ev0001"]
        )  # a success: no failure
        assert store.failed_attempts("p1/s1/b1") == 2
        assert store.failed_attempts("p1/s1/b2") == 1
        assert store.failed_attempts("p1/s1/b9") == 0
        assert store.figures(T0)["extraction_failures_24h"] == 3

    def test_a_failed_run_leaves_its_events_pending(self, store):
        store.add_events([event(1), event(2)])
        store.record_failed_run(run_row(1, extractor="llm"))
        assert store.pending_event_count() == 2 and store.figures(T0)["records"] == 0
        assert [e["event_id"] for e in store.pending_events("p1", "s1")] == ["ev0001", "ev0002"]

    def test_model_spend_sums_model_runs_since_a_time(self, store):
        assert store.model_spend(T0) == (0, 0.0)
        store.record_failed_run(
            run_row(
                1, extractor="llm", prompt_tokens=100, completion_tokens=20, cost_usd=0.25, started_at=at(1)
            )
        )
        store.commit_extraction(
            run_row(
                2, extractor="llm", prompt_tokens=30, completion_tokens=7, cost_usd=0.5, started_at=at(2)
            ),
            [record(1)],
            [],
        )
        store.commit_extraction(
            run_row(3, prompt_tokens=999, cost_usd=9.0, started_at=at(3)), [], []
        )  # deterministic
        tokens, dollars = store.model_spend(at(0))
        assert (tokens, round(dollars, 6)) == (157, 0.75)
        tokens, dollars = store.model_spend(at(2))  # a run started at `since` counts
        assert (tokens, round(dollars, 6)) == (37, 0.5)
        assert store.model_spend(at(2, 1)) == (0, 0.0)

    def test_daily_limit_reached_counts_today_only(self, store):
        from types import SimpleNamespace

        from kirolearn.core.isotime import shift
        from kirolearn.store.base import start_of_day

        def limits(tokens=0, dollars=0.0):
            return SimpleNamespace(daily_token_limit=tokens, daily_cost_limit_usd=dollars)

        today = start_of_day()
        store.record_failed_run(
            run_row(1, extractor="llm", prompt_tokens=5000, cost_usd=5.0, started_at=shift(today, -0.001))
        )  # yesterday's spend
        store.record_failed_run(
            run_row(
                2, extractor="llm", prompt_tokens=60, completion_tokens=40, cost_usd=0.5, started_at=today
            )
        )
        assert store.daily_limit_reached(limits(tokens=100)) == "daily token limit reached (100 of 100)"
        assert store.daily_limit_reached(limits(tokens=101)) == ""
        assert store.daily_limit_reached(limits(dollars=0.5)) == "daily cost limit reached ($0.5000 of $0.50)"
        assert store.daily_limit_reached(limits(dollars=0.51)) == ""
        assert store.daily_limit_reached(limits()) == ""  # 0: no limit

    # --- records ------------------------------------------------------------------------

    def test_records_are_stored_once_by_id_and_by_content(self, store):
        assert self.extract(store, 1, [record(1)]) == 1
        assert self.extract(store, 2, [record(1)]) == 0  # same id
        twin = dict(record(1), record_id="mr_twin")  # same content, new id: one memory
        assert self.extract(store, 3, [twin]) == 0
        assert store.figures(T0)["records"] == 1

    def test_a_record_reads_back_as_written(self, store):
        rec = record(
            7,
            title="Lock order",
            summary="Take the spool lock before the store lock.",
            facts=["deadlock when reversed"],
            concepts=["locking"],
            files=["kirolearn/drain.py"],
            kind="decision",
        )
        self.extract(store, 1, [rec])
        got = store.get_record("mr_0007")
        assert {k: got[k] for k in rec} == rec
        assert got["record_hash"]
        assert store.get_record("mr_nope") is None

    def test_unicode_and_long_text_survive(self, store):
        text = "naïve café ✓ 日本語 " + "x" * 20_000
        self.extract(store, 1, [record(1, summary=text)])
        assert store.get_record("mr_0001")["summary"] == text

    def test_list_is_newest_first_with_filters_and_keyset(self, store):
        recs = [
            record(
                n, created=at(n), kind="decision" if n % 2 else "tool_use", project="p2" if n == 5 else "p1"
            )
            for n in range(1, 7)
        ]
        self.extract(store, 1, recs)
        assert ids(store.list_records()) == ["mr_0006", "mr_0005", "mr_0004", "mr_0003", "mr_0002", "mr_0001"]
        assert ids(store.list_records(project_id="p1", types=["decision"])) == ["mr_0003", "mr_0001"]
        assert ids(store.list_records(since=at(4))) == ["mr_0006", "mr_0005", "mr_0004"]
        page = store.list_records(limit=2)
        after = store.list_records(limit=2, before=(page[-1]["created_at"], page[-1]["record_id"]))
        assert ids(after) == ["mr_0004", "mr_0003"]

    def test_list_breaks_ties_on_record_id(self, store):
        self.extract(store, 1, [record(n, created=T0) for n in (3, 1, 2)])
        assert ids(store.list_records()) == ["mr_0003", "mr_0002", "mr_0001"]
        assert ids(store.list_records(limit=1, before=(T0, "mr_0003"))) == ["mr_0002"]

    def test_latest_of_a_project(self, store):
        self.extract(
            store,
            1,
            [
                record(1, created=at(1)),
                record(2, created=at(2), kind="decision"),
                record(3, created=at(3), project="p2"),
            ],
        )
        assert ids(store.latest("p1")) == ["mr_0002", "mr_0001"]
        assert ids(store.latest("p1", types=["decision"])) == ["mr_0002"]
        assert ids(store.latest("p1", limit=1)) == ["mr_0002"]

    # --- search -------------------------------------------------------------------------

    def test_search_finds_words_in_every_text_field(self, store):
        self.extract(
            store,
            1,
            [
                record(1, title="Flaky retry in the uploader"),
                record(2, summary="The nightly job times out: orders.created_at has no index"),
                record(3, facts=["never run migrations against the replica"]),
                record(4, concepts=["idempotency"]),
                record(5, files=["kirolearn/pipeline/drain.py"]),
            ],
        )
        assert ids(store.search(["uploader"])) == ["mr_0001"]
        assert ids(store.search(["nightly"])) == ["mr_0002"]
        assert ids(store.search(["replica"])) == ["mr_0003"]
        assert ids(store.search(["idempotency"])) == ["mr_0004"]
        assert ids(store.search(["drain"])) == ["mr_0005"]
        assert all(r["relevance"] > 0 for r in store.search(["uploader", "replica"]))

    def test_search_matches_stems(self, store):
        self.extract(store, 1, [record(1, summary="the migrations were running slowly")])
        assert ids(store.search(["migration"])) == ["mr_0001"]
        assert ids(store.search(["runs"])) == ["mr_0001"]

    def test_search_ranks_a_title_match_above_a_summary_match(self, store):
        self.extract(
            store,
            1,
            [
                record(1, title="notes", summary="we talked about the websocket reconnect a while"),
                record(2, title="websocket reconnect backoff", summary="notes"),
            ],
        )
        assert ids(store.search(["websocket"])) == ["mr_0002", "mr_0001"]

    def test_search_prefers_more_of_the_words(self, store):
        self.extract(
            store,
            1,
            [
                record(1, summary="redis cache"),
                record(2, summary="redis cache eviction policy"),
                record(3, summary="policy"),
            ],
        )
        assert ids(store.search(["redis", "eviction", "policy"]))[0] == "mr_0002"

    def test_search_ranks_a_rare_word_above_a_common_one(self, store):
        self.extract(
            store,
            1,
            [record(n, summary="the cache layer") for n in range(1, 7)]
            + [record(7, summary="the eviction layer")],
        )
        assert ids(store.search(["cache", "eviction"]))[0] == "mr_0007"

    def test_search_narrows_by_project_and_type_and_limit(self, store):
        self.extract(
            store,
            1,
            [
                record(
                    n,
                    summary="shared deploy word",
                    project="p2" if n > 3 else "p1",
                    kind="error" if n % 2 else "tool_use",
                )
                for n in range(1, 7)
            ],
        )
        assert sorted(ids(store.search(["deploy"], project_id="p1"))) == ["mr_0001", "mr_0002", "mr_0003"]
        assert sorted(ids(store.search(["deploy"], project_id="p2", types=["error"]))) == ["mr_0005"]
        assert len(store.search(["deploy"], limit=2)) == 2
        assert store.search(["deploy"], project_id="p9") == []

    @pytest.mark.parametrize(
        "word",
        [
            '"',
            "AND",
            "OR",
            "NOT",
            "a*",
            "col:umn",
            "(x",
            "'; drop table x; --",
            "NEAR(a b)",
            "\\",
            "%",
            "_",
            "^start",
            "ünïcödé",
        ],
    )
    def test_search_never_reads_words_as_syntax(self, store, word):
        self.extract(store, 1, [record(1, summary=f"text with {word} in it")])
        store.search([word])  # no error, whatever it finds
        store.search([word, "text"])

    def test_search_of_nothing_finds_nothing(self, store):
        self.extract(store, 1, [record(1)])
        assert store.search([]) == []
        assert store.search(["absent"]) == []

    # --- session summaries ----------------------------------------------------------------

    def test_session_summaries_newest_first_by_label(self, store):
        store.add_session_summary(summary(1, ended=at(1), next_steps=["ship it"]))
        store.add_session_summary(summary(2, ended=at(2), label="infra"))
        rec = record(3, kind="session_summary", title="Session end: wired the cache")
        store.add_session_summary(summary(3, ended=at(3), record_id="mr_0003"), rec)
        got = store.session_summaries("p1")
        assert [s["id"] for s in got] == ["sum0003", "sum0002", "sum0001"]
        assert got[-1]["next_steps"] == ["ship it"]
        assert [s["id"] for s in store.session_summaries("p1", label="infra")] == ["sum0002"]
        assert store.session_summaries("p2") == []
        assert store.get_record("mr_0003")["observation_type"] == "session_summary"
        assert store.session_summaries("p1", limit=1)[0]["id"] == "sum0003"

    # --- forgetting ---------------------------------------------------------------------

    def test_a_forgotten_record_leaves_memory_and_search(self, store):
        self.extract(store, 1, [record(1, summary="rotate the staging token"), record(2)])
        gone = store.forget(["mr_0001", "mr_missing"], reason="wrong", actor="dev")
        assert ids(gone) == ["mr_0001"]
        assert store.get_record("mr_0001") is None
        assert store.search(["staging"]) == []
        assert ids(store.list_records()) == ["mr_0002"]
        assert store.figures(T0)["forgotten"] == 1

    def test_a_forgotten_record_is_never_stored_again(self, store):
        rec = record(1, summary="rotate the staging token")
        self.extract(store, 1, [rec])
        (gone,) = store.forget(["mr_0001"], reason="", actor="dev")
        assert self.extract(store, 2, [rec]) == 0  # a later drain re-extracting the turn
        assert self.extract(store, 3, [dict(rec, record_id="mr_new")]) == 0
        assert store.get_record("mr_0001") is None and store.get_record("mr_new") is None

    def test_forgetting_takes_the_session_summary_made_from_the_record(self, store):
        rec = record(1, kind="session_summary")
        store.add_session_summary(summary(1, record_id="mr_0001"), rec)
        store.forget(["mr_0001"], reason="", actor="dev")
        assert store.session_summaries("p1") == []
        restored, purged = store.restore(["mr_0001"], actor="dev")
        assert ids(restored) == ["mr_0001"] and purged == []
        assert [s["id"] for s in store.session_summaries("p1")] == ["sum0001"]

    def test_restore_brings_a_record_back(self, store):
        self.extract(store, 1, [record(1, summary="rotate the staging token")])
        store.forget(["mr_0001"], reason="", actor="dev")
        restored, purged = store.restore(["mr_0001", "mr_never"], actor="dev")
        assert ids(restored) == ["mr_0001"] and purged == []
        assert ids(store.search(["staging"])) == ["mr_0001"]
        assert store.figures(T0)["forgotten"] == 0

    def test_tombstones_by_id(self, store):
        self.extract(store, 1, [dict(record(1), actor="ana"), record(2)])
        assert store.tombstones(["mr_0001", "mr_0002", "mr_never"]) == {}
        start = store.changes(["p1"])["after"]
        (gone,) = store.forget(["mr_0001"], reason="wrong", actor="cli")
        got = store.tombstones(["mr_0001", "mr_0002", "mr_never"])
        assert list(got) == ["mr_0001"]
        t = got["mr_0001"]
        assert (t["record_hash"], t["project_id"], t["actor"], t["record_actor"], t["purged"]) == (
            gone["record_hash"],
            "p1",
            "cli",
            "ana",
            False,
        )
        assert t["forgotten_at"] and t["seq"] > start
        assert store.changes(["p1"], after=t["seq"] - 1)["forgotten"][0]["record_id"] == "mr_0001"
        store.restore(["mr_0001"], actor="cli")
        assert store.tombstones(["mr_0001"]) == {}

    def test_purge_keeps_only_the_hash(self, store):
        store.add_events([event(1), event(2, state="done")])
        self.extract(
            store,
            1,
            [
                record(1, summary="the staging token is hunter2", events=["ev0001"]),
                record(2, events=["ev0002"]),
            ],
            ["ev0001", "ev0002"],
        )
        (gone,) = store.forget(["mr_0001"], reason="secret", actor="ana")
        assert (
            store.purge(["mr_0001", "mr_0002", "mr_never"], actor="ana") == 1
        )  # a live record is not purged
        assert store.purge(["mr_0001"], actor="ana") == 0  # twice is harmless
        t = store.tombstones(["mr_0001"])["mr_0001"]
        assert t["purged"] and t["record_actor"] is None and t["record_hash"] == gone["record_hash"]
        assert "hunter2" not in json.dumps(list(store.export_objects()))
        assert store.event_ids_present(["ev0001", "ev0002"]) == {"ev0002"}  # its source event went with it
        assert (
            self.extract(store, 2, [record(1, summary="the staging token is hunter2", events=["ev0001"])])
            == 0
        )
        restored, purged = store.restore(["mr_0001"], actor="ana")
        assert restored == [] and purged == ["mr_0001"]
        assert store.get_record("mr_0002") is not None

    def test_changes_feed_purges(self, store):
        self.extract(store, 1, [record(1), record(2, project="p2")])
        store.forget(["mr_0001", "mr_0002"], reason="", actor="ana")
        start = store.changes(["p1", "p2"], limit=100)["after"]
        store.purge(["mr_0001", "mr_0002"], actor="ana")
        got = store.changes(["p1"], after=start)
        assert [p["record_id"] for p in got["purged"]] == ["mr_0001"]  # only the projects asked for
        assert got["purged"][0]["record_hash"] and got["purged"][0]["purged_at"] and got["after"] > start
        assert got["records"] == [] and got["forgotten"] == []
        assert store.changes(["p1"], after=got["after"])["purged"] == []

    def test_purgeable_lists_the_kept_tombstones_by_id_and_age(self, store):
        from kirolearn.core.isotime import shift

        store.add_events([event(1, state="done"), event(2, state="done"), event(3, state="done")])
        self.extract(store, 1, [record(1), record(2), record(3)])
        store.forget(["mr_0001", "mr_0002"], reason="", actor="ana")
        first = min(t["forgotten_at"] for t in store.tombstones(["mr_0001", "mr_0002"]).values())
        assert store.purgeable(older_than=first) == []  # the drain's retention asks this every pass
        assert sorted(store.purgeable(older_than=shift(first, 86400))) == ["mr_0001", "mr_0002"]
        assert store.purgeable(record_ids=["mr_0002", "mr_0003"]) == ["mr_0002"]
        store.purge(["mr_0001"], actor="ana")
        assert store.purgeable() == ["mr_0002"]

    def test_expire_forgotten_purges_only_tombstones_older_than_the_cutoff(self, store):
        from kirolearn.core.isotime import shift

        store.add_events([event(1, state="done"), event(2, state="done"), event(3, state="done")])
        self.extract(store, 1, [record(1), record(2), record(3)])
        store.forget(["mr_0001", "mr_0002"], reason="", actor="ana")
        first = min(t["forgotten_at"] for t in store.tombstones(["mr_0001", "mr_0002"]).values())
        assert store.expire_forgotten(first) == 0  # forgotten at the cutoff is not before it
        assert not any(t["purged"] for t in store.tombstones(["mr_0001", "mr_0002"]).values())
        assert store.expire_forgotten(shift(first, 365 * 86400)) == 2
        gone = store.tombstones(["mr_0001", "mr_0002"])
        assert all(t["purged"] for t in gone.values()) and len(gone) == 2
        assert store.expire_forgotten(shift(first, 365 * 86400)) == 0  # purged once
        assert store.restore(["mr_0001"], actor="ana") == ([], ["mr_0001"])
        assert store.get_record("mr_0003") is not None  # live records are not touched
        assert self.extract(store, 2, [record(1)]) == 0  # and never come back
        assert self.extract(store, 3, [record(2)]) == 0

    # --- figures, health, export and import ------------------------------------------------

    def test_counts_of_events_and_live_records(self, store):
        assert store.counts() == {"events": 0, "records": 0}
        store.add_events([event(1), event(2), event(3, state="done")])
        self.extract(store, 1, [record(1), record(2)])
        assert store.counts() == {"events": 3, "records": 2}
        store.forget(["mr_0001"], reason="", actor="dev")
        assert store.counts() == {"events": 3, "records": 1}

    def test_a_healthy_store_has_no_integrity_problem(self, store):
        assert store.integrity_problem() is None
        store.add_events([event(n) for n in range(300)])
        self.extract(store, 1, [record(n) for n in range(50)], [f"ev{n:04d}" for n in range(50)])
        store.forget(["mr_0001"], reason="", actor="dev")
        assert store.integrity_problem() is None

    def test_figures(self, store):
        assert store.figures(T0)["records"] == 0
        store.add_events([event(1), event(2, project="p2", state="done")])
        self.extract(store, 1, [record(1), record(2, project="p2")])
        store.commit_extraction(run_row(9, outcome="failed", started_at=at(5)), [], [])
        f = store.figures(at(1))
        assert (f["events"], f["records"], f["pending_events"], f["forgotten"]) == (2, 2, 1, 0)
        assert f["extraction_failures_24h"] == 1
        assert store.figures(at(6))["extraction_failures_24h"] == 0
        by_root = {p["project_root"]: p for p in f["projects"]}
        assert by_root["/src/p1"]["events"] == 1 and by_root["/src/p1"]["pending"] == 1
        assert by_root["/src/p2"]["records"] == 1

    def test_export_then_import_into_an_empty_store_is_the_same_store(self, store):
        store.add_events([event(1), event(2, state="done")])
        self.extract(store, 1, [record(1, facts=["a fact"], files=["x.py"])])
        store.add_session_summary(summary(1, next_steps=["next"], highlights=["h"]))
        exported = list(store.export_objects())
        assert [o["type"] for o in exported] == ["event", "event", "record", "summary"]
        other = self.make_store("copy")
        try:
            counts = other.import_objects(exported)
            assert counts["events"]["added"] == 2 and counts["records"]["added"] == 1
            assert counts["summaries"]["added"] == 1 and counts["forgotten_skipped"] == 0
            assert list(other.export_objects()) == exported
            again = other.import_objects(exported)  # idempotent
            assert again["events"] == {"added": 0, "present": 2} and again["records"]["present"] == 1
            assert ids(other.search(["fact"])) == ["mr_0001"]
        finally:
            other.close()

    def test_import_keeps_forgotten_records_forgotten(self, store):
        self.extract(store, 1, [record(1)])
        exported = list(store.export_objects())
        store.forget(["mr_0001"], reason="", actor="dev")
        counts = store.import_objects(exported)
        assert counts["forgotten_skipped"] == 1
        assert store.get_record("mr_0001") is None

    # --- change feed (team upload and cache sync) -------------------------------------------

    def test_records_made_elsewhere_keep_their_ids_and_hash(self, store):
        other = self.make_store("elsewhere")
        try:
            self.extract(other, 1, [record(1, facts=["f"]), record(2, project="p2")])
            made = other.list_records()
            assert store.add_records(made) == 2
            assert store.add_records(made) == 0  # idempotent: a re-run after a network cut
            got = store.get_record("mr_0001")
            assert got["record_hash"] == other.get_record("mr_0001")["record_hash"] and got["facts"] == ["f"]
            (gone,) = store.forget(["mr_0002"], reason="", actor="dev")
            assert store.add_records([other.get_record("mr_0002")]) == 0  # forgotten stays forgotten
        finally:
            other.close()

    def test_changes_feed_every_record_once_in_order(self, store):
        self.extract(store, 1, [record(n, project="p2" if n == 3 else "p1") for n in range(1, 6)])
        first = store.changes(["p1"], limit=2)
        assert ids(first["records"]) == ["mr_0001", "mr_0002"]
        rest, seen = first, list(ids(first["records"]))
        while rest["records"] or rest["forgotten"]:
            rest = store.changes(["p1"], after=rest["after"], limit=2)
            seen += ids(rest["records"])
        assert seen == ["mr_0001", "mr_0002", "mr_0004", "mr_0005"]  # only the projects asked for
        assert store.changes(["p1"], after=rest["after"]) == {
            "records": [],
            "forgotten": [],
            "purged": [],
            "marks": [],
            "after": rest["after"],
        }
        assert store.changes([], after=0)["records"] == []

    def test_marks_start_unknown_current_and_changes_are_fed_and_audited(self, store):
        """Issue #31: freshness and outcome on every record; a change of mark is fed once, an equal one never."""
        self.extract(store, 1, [record(1), dict(record(2), outcome="failed"), record(3, project="p2")])
        assert (store.get_record("mr_0001")["freshness"], store.get_record("mr_0001")["outcome"]) == (
            "current",
            "unknown",
        )
        assert store.get_record("mr_0002")["outcome"] == "failed"
        start = store.changes(["p1", "p2"], limit=100)["after"]
        done = store.set_marks(
            [
                {"record_id": "mr_0001", "freshness": "deleted", "reason": "src/a.py: deleted"},
                {"record_id": "mr_0002", "outcome": "failed"},  # as it is: no change
                {"record_id": "mr_0003", "freshness": "changed"},
                {"record_id": "mr_nope", "freshness": "changed"},
            ],
            actor="drain",
        )
        assert [(d["record_id"], d["before"], d["after"]) for d in done] == [
            ("mr_0001", {"freshness": "current"}, {"freshness": "deleted"}),
            ("mr_0003", {"freshness": "current"}, {"freshness": "changed"}),
        ]
        got = store.changes(["p1"], after=start)
        assert [(m["record_id"], m["freshness"], m["outcome"]) for m in got["marks"]] == [
            ("mr_0001", "deleted", "unknown")
        ]  # only the projects asked for
        assert got["records"] == [] and store.changes(["p1"], after=got["after"])["marks"] == []
        assert store.get_record("mr_0001")["freshness"] == "deleted"
        assert store.set_marks([{"record_id": "mr_0001", "freshness": "deleted"}], actor="drain") == []
        assert store.changes(["p1"], after=got["after"])["marks"] == []
        exported = [o for o in store.export_objects() if o["type"] == "record"]
        assert {o["record_id"]: (o["freshness"], o["outcome"]) for o in exported}["mr_0002"] == (
            "current",
            "failed",
        )

    def test_changes_feed_tombstones_and_numbers_are_never_reused(self, store):
        self.extract(store, 1, [record(1), record(2)])
        start = store.changes(["p1"])["after"]
        store.forget(["mr_0002"], reason="wrong", actor="ana")  # the newest record
        self.extract(store, 2, [record(3)])
        later = store.changes(["p1"], after=start)
        assert [(t["record_id"], t["actor"]) for t in later["forgotten"]] == [("mr_0002", "ana")]
        assert later["forgotten"][0]["record_hash"] and later["forgotten"][0]["forgotten_at"]
        assert ids(later["records"]) == ["mr_0003"]
        assert later["after"] > start
        store.restore(["mr_0002"], actor="ana")  # back again: it arrives once more
        assert ids(store.changes(["p1"], after=later["after"])["records"]) == ["mr_0002"]

    def test_a_record_forgotten_before_it_was_read_is_not_fed(self, store):
        self.extract(store, 1, [record(1)])
        store.forget(["mr_0001"], reason="", actor="dev")
        got = store.changes(["p1"])
        assert got["records"] == [] and [t["record_id"] for t in got["forgotten"]] == ["mr_0001"]

    def test_events_since(self, store):
        store.add_events([event(1, received=at(1)), event(2, received=at(2)), event(3, project="p2")])
        assert [e["event_id"] for e in store.events_since(["p1"], None)] == ["ev0001", "ev0002"]
        assert [e["event_id"] for e in store.events_since(["p1"], at(2))] == ["ev0002"]
        assert [e["event_id"] for e in store.events_since(["p1"], None, limit=1)] == ["ev0001"]
        assert [e["event_id"] for e in store.events_since(["p1"], None, after=(at(1), "ev0001"))] == [
            "ev0002"
        ]
        assert store.events_since([], None) == []
        sent = store.events_since(["p1", "p2"], None)
        other = self.make_store("team")
        try:
            assert other.add_events(sent) == 3 and other.add_events(sent) == 0
        finally:
            other.close()

    # --- what the drain calls beyond the basics: optional capabilities, and the drainer itself ----

    def test_optional_capabilities_answer_or_say_not_supported(self, store):
        from kirolearn.store.base import DerivedIndex

        derived = store.derived()
        assert derived is None or isinstance(derived, DerivedIndex)
        assert store.refresh_term_docs(force=True) in (True, False, None)
        assert store.remember_counts(store.counts()) in (True, False, None)
        assert store.database_file() is None or isinstance(store.database_file(), str)
        if store.database_file() is None:  # a server: nothing outside it to keep, no file to name
            assert store.remember_counts(store.counts()) is None

    def test_derived_work_is_found_once_and_kept_with_its_cursor(self, store):
        derived = store.derived()
        if derived is None:
            pytest.skip(f"the {store.backend} store keeps no expansions or vectors (Store.derived is None)")
        store.add_records([record(1), record(2), record(3, session="s2")])
        pending = derived.sessions_needing_expansion()
        assert sorted((p, s) for p, s, _ in pending) == [("p1", "s1"), ("p1", "s2")]
        rows = derived.session_records("p1", "s1")
        assert [r["record_id"] for r in rows] == ["mr_0001", "mr_0002"]
        derived.set_expansions({r["record_id"]: "near" for r in rows} | {"mr_0003": ""})
        assert derived.sessions_needing_expansion() == []
        found, cursor = derived.vectors_to_embed("test/m", 2)
        assert [r["record_id"] for r in found] == ["mr_0001", "mr_0002"] and cursor["more"]
        vector = {"model_id": "test/m", "dimensions": 1, "vector": b"\x00\x00\x80?", "text_hash": "x"}
        derived.save_vectors([dict(vector, record_id=r["record_id"], project_id="p1") for r in found], cursor)
        assert derived.count_to_embed("test/m") == 1
        found, cursor = derived.vectors_to_embed("test/m", 2)
        assert [r["record_id"] for r in found] == ["mr_0003"]
        derived.save_vectors([dict(vector, record_id="mr_0003", project_id="p1")], cursor)
        assert derived.count_to_embed("test/m") == 0
        store.add_records([record(4)])  # written after: found through the change feed
        found, cursor = derived.vectors_to_embed("test/m", 5)
        assert [r["record_id"] for r in found] == ["mr_0004"]
        assert derived.drop_vectors() == 3 and derived.count_to_embed("test/m") == 4

    def test_the_drainer_runs_on_this_store(self, store, tmp_path, monkeypatch):
        """Drainer takes any Store: spool → store → records, and an idle pass after it does nothing."""
        from kirolearn import settings
        from kirolearn.capture import events, spool
        from kirolearn.pipeline import drain

        (tmp_path / "proj" / ".git").mkdir(parents=True)
        monkeypatch.setenv("KIROLEARN_EMBEDDING_MODEL", "none")
        for name, payload in (
            ("userPromptSubmit", {"prompt": "enable WAL mode"}),
            (
                "postToolUse",
                {"tool_name": "shell", "tool_input": {"command": "make wal"}, "tool_response": "ok"},
            ),
            ("stop", {"assistant_response": "WAL is on"}),
        ):
            ev = events.build_event(name, {"cwd": str(tmp_path / "proj"), "session_id": "d1", **payload})
            spool.append(ev["event_id"], events.serialize(ev))
        drainer = drain.Drainer(store, settings.load())
        stats = drainer.run_once()
        assert (stats.stored, stats.records_written, stats.released, stats.pending_events) == (3, 1, 3, 0)
        assert spool.ready_files() == [] and store.counts() == {"events": 3, "records": 1}
        assert [h["title"] for h in store.search(["wal"])] == ["enable WAL mode"]
        idle = drainer.run_once()
        assert (idle.events_read, idle.records_written) == (0, 0) and drainer.checks == 1

    # --- marks (issue #31): superseded_by and merged_into ------------------------------------------

    def test_marks_start_null_are_set_fed_exported_and_cleared(self, store):
        self.extract(store, 1, [record(1), record(2), record(3)])
        assert [(r["superseded_by"], r["merged_into"]) for r in store.list_records()] == [(None, None)] * 3
        start = store.changes(["p1"])["after"]
        marks = [
            {"record_id": "mr_0001", "superseded_by": "mr_0002"},
            {"record_id": "mr_0003", "merged_into": "mr_0002"},
        ]
        assert store.apply_marks(marks, actor="ana") == 2
        assert store.apply_marks(marks, actor="ana") == 0  # the same marks again change nothing
        assert store.apply_marks([{"record_id": "mr_0002"}]) == 0  # a record without the keys keeps its marks
        assert store.get_record("mr_0001")["superseded_by"] == "mr_0002"
        assert store.get_record("mr_0003")["merged_into"] == "mr_0002"
        fed = store.changes(["p1"], after=start)  # the team sync sends the mark changes
        assert {r["record_id"]: (r["superseded_by"], r["merged_into"]) for r in fed["records"]} == {
            "mr_0001": ("mr_0002", None),
            "mr_0003": (None, "mr_0002"),
        }
        exported = [o for o in store.export_objects() if o["type"] == "record"]
        other = self.make_store("marks-copy")
        try:
            other.import_objects(exported)
            assert other.get_record("mr_0001")["superseded_by"] == "mr_0002"
            assert other.get_record("mr_0003")["merged_into"] == "mr_0002"
            made = [store.get_record(rid) for rid in ("mr_0001", "mr_0003")]
            third = self.make_store("marks-sync")
            try:  # what a sync does: the records, then their marks
                assert (
                    third.add_records(made) == 2 and third.get_record("mr_0001")["superseded_by"] == "mr_0002"
                )
            finally:
                third.close()
        finally:
            other.close()
        assert store.apply_marks([{"record_id": "mr_0001", "superseded_by": None}], actor="ana") == 1
        assert store.get_record("mr_0001")["superseded_by"] is None

    def test_search_demotes_marked_records_by_recalls_factors_and_leaves_merged_ones_out(self, store):
        """A store's own search (the team store's recall) keeps of a marked record's relevance what SQLite's
        recall does (kirolearn.core.marks): changed 0.6, deleted 0.4, failed 0.5, superseded 0.1; merged: gone."""
        from kirolearn.core import marks

        same = "the uploader retries a chunk three times before it gives up"
        made = [record(n, title="uploader retries", summary=same) for n in range(1, 8)]
        self.extract(store, 1, made)
        plain = {r["record_id"]: r["relevance"] for r in store.search(["uploader", "retries"])}
        assert len(plain) == 7 and max(plain.values()) - min(plain.values()) < 1e-6 * max(plain.values())
        store.set_marks(
            [
                {"record_id": "mr_0002", "freshness": "changed"},
                {"record_id": "mr_0003", "freshness": "deleted"},
                {"record_id": "mr_0004", "outcome": "failed"},
                {"record_id": "mr_0007", "freshness": "changed", "outcome": "failed"},
            ],
            actor="drain",
        )
        store.apply_marks(
            [
                {"record_id": "mr_0005", "superseded_by": "mr_0001"},
                {"record_id": "mr_0006", "merged_into": "mr_0001"},
            ],
            actor="drain",
        )
        found = store.search(["uploader", "retries"])
        got = {r["record_id"]: r["relevance"] / plain[r["record_id"]] for r in found}
        want = {
            "mr_0001": 1.0,
            "mr_0002": 0.6,
            "mr_0003": 0.4,
            "mr_0004": 0.5,
            "mr_0005": marks.SUPERSEDED_FACTOR,
            "mr_0007": 0.3,
        }
        assert set(got) == set(want), got  # the merged record is left out
        assert all(abs(got[k] - want[k]) < 1e-4 for k in want), got
        assert [r["record_id"] for r in found] == [
            "mr_0001",
            "mr_0002",
            "mr_0004",
            "mr_0003",
            "mr_0007",
            "mr_0005",
        ]
        # the cut comes after the demotion: the unmarked record wins a limit of one
        assert [r["record_id"] for r in store.search(["uploader"], limit=1)] == ["mr_0001"]
        store.apply_marks([{"record_id": "mr_0006", "merged_into": None}], actor="ana")  # restored: back
        assert "mr_0006" in {r["record_id"] for r in store.search(["uploader", "retries"])}

    # --- both halves of issue #31's marks on one record ---------------------------------------------

    def test_all_four_marks_live_side_by_side_on_one_record(self, store):
        """set_marks (freshness, outcome: fed as 'mark') and apply_marks (superseded_by, merged_into: fed as
        'record') change one record independently; the feed, the record and an export carry all four."""
        self.extract(store, 1, [record(1), record(2)])
        start = store.changes(["p1"])["after"]
        assert (
            len(
                store.set_marks(
                    [
                        {
                            "record_id": "mr_0001",
                            "freshness": "changed",
                            "outcome": "failed",
                            "reason": "src/a.py: changed",
                        }
                    ],
                    actor="drain",
                )
            )
            == 1
        )
        assert store.apply_marks([{"record_id": "mr_0001", "superseded_by": "mr_0002"}], actor="drain") == 1
        # neither half touches the other's marks
        assert store.apply_marks([{"record_id": "mr_0001", "freshness": "current"}], actor="drain") == 0
        assert store.set_marks([{"record_id": "mr_0001", "superseded_by": None}], actor="drain") == []
        got = store.get_record("mr_0001")
        assert (got["freshness"], got["outcome"], got["superseded_by"], got["merged_into"]) == (
            "changed",
            "failed",
            "mr_0002",
            None,
        )
        fed = store.changes(["p1"], after=start)
        assert [(m["record_id"], m["freshness"], m["outcome"]) for m in fed["marks"]] == [
            ("mr_0001", "changed", "failed")
        ]
        assert [(r["record_id"], r["superseded_by"], r["freshness"]) for r in fed["records"]] == [
            ("mr_0001", "mr_0002", "changed")
        ]
        exported = {o["record_id"]: o for o in store.export_objects() if o["type"] == "record"}
        assert {
            k: exported["mr_0001"][k] for k in ("freshness", "outcome", "superseded_by", "merged_into")
        } == {"freshness": "changed", "outcome": "failed", "superseded_by": "mr_0002", "merged_into": None}
        assert "file_state" not in exported["mr_0001"]  # machine-local: never in what a team store takes
