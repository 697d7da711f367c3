"""The viewer's polish (issue #33 item 13) and its marks (issue #31): labelled search scores, cut
snippets whose code stays closed, facts with `code`, a session end shown once, a conversation's
outcome on its card, an MCP record's provenance said as what it is, and freshness / outcome labels.

Pages come from the real app (Starlette's client in process) over a real SQLite store filled by
the real commands where one exists (`session-end`, `save-summary`, the drain's mark writer); the
last test reads the same things off the real page in headless Chromium.
"""

import os
import re

import pytest
from conftest import cli
from starlette.testclient import TestClient

from kirolearn.store.sqlite import records as recordstore
from kirolearn.viewer.app import create_app

CODE_FACT = "Run `make test` before <b>pushing</b>"
LONG_CODE = (
    "Set up the cache. " * 14
    + "Then run `python -m kirolearn.cli.commands drain --flush --json "
    + "--watch " * 30
    + "` and read what it prints."
)


@pytest.fixture
def client():
    c = TestClient(create_app("secret-token", 8765), base_url="http://127.0.0.1:8765")
    assert c.get("/?token=secret-token").status_code == 200
    return c


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_search_scores_are_labelled_with_what_they_mean(client, add_record, project):
    add_record(
        project, "Export job fails with database is locked", summary="export database locked, busy timeout"
    )
    add_record(project, "Database backup script", summary="database backup nightly")
    html = client.get("/search?q=database").text
    scores = re.findall(r'<span class="score" title="([^"]+)">([^<]+)</span>', html)
    assert len(scores) == 2 and scores[0][1] == "match 1.00"  # the best hit; no raw float such as 3.21
    assert re.fullmatch(r"match 0\.\d\d|match 1\.00", scores[1][1])
    assert "relative to the best result" in scores[0][0]


def test_a_cut_snippet_closes_its_code_span(client, add_record, project):
    add_record(project, "Cache setup", summary=LONG_CODE)
    html = client.get("/search?q=cache").text
    (snippet,) = re.findall(r'<div class="summary md">(.*?)</div>', html, re.S)
    assert "<code>" in snippet and "`" not in text_of(snippet)  # the cut span is code, no stray backtick
    assert "…" in snippet


def test_facts_render_backticks_as_code_and_still_escape_markup(client, add_record, project):
    rid = add_record(project, "Release checklist", facts=[CODE_FACT])
    html = client.get(f"/record/{rid}").text
    (facts,) = re.findall(r'<ul class="facts">(.*?)</ul>', html, re.S)
    assert "<code>make test</code>" in facts and "`" not in facts
    assert "<b>" not in facts and "&lt;b&gt;pushing&lt;/b&gt;" in facts


def test_a_session_end_appears_once_on_the_timeline(client, add_record, project):
    add_record(project, "Fixed the login query", session_id="sess-1", observation_type="session_summary")
    ended = cli(
        "session-end",
        "--project",
        str(project),
        "--session-id",
        "sess-1",
        "--summary",
        "Login fixed; orders next",
        "--next-step",
        "Fix the orders lookup",
    )
    assert ended.returncode == 0, ended.stderr
    html = client.get("/").text
    assert html.count('class="session-end"') == 1
    assert text_of(html).count("Login fixed; orders next") == 1  # not also as its record's card
    assert "Fixed the login query" in html


def test_a_conversation_card_shows_its_outcome(client, add_record, project):
    add_record(
        project,
        "write a haiku about databases",
        observation_type="conversation",
        summary="**Request:** write a haiku about databases\n\n**Outcome:** Rows wait in the dark, "
        "an index lights the way home, `SELECT` finds them all.",
    )
    card = re.search(r'<li class="rec t-conversation">(.*?)</li>', client.get("/").text, re.S).group(1)
    assert "Outcome:" in card and "Rows wait in the dark" in card and "<code>SELECT</code>" in card


def test_an_mcp_record_says_where_it_came_from_not_that_events_were_lost(client, project, monkeypatch):
    monkeypatch.setenv("KIROLEARN_AGENT", "codex")  # what install writes into the MCP server's entry
    saved = cli(
        "save-summary",
        "--project",
        str(project),
        "--request",
        "Speed up the export",
        "--investigated",
        "the query plan",
        "--learned",
        "a full scan of orders",
        "--completed",
        "Added an index on orders.created_at",
        "--next-steps",
        "none",
    )
    assert saved.returncode == 0, saved.stderr
    rid = re.search(r"mr_\w+", saved.stdout).group(0)
    page = text_of(client.get(f"/record/{rid}").text)
    assert "no longer kept" not in page and "0 events" not in page
    assert "saved over MCP" in page and "no captured events" in page


def test_cards_and_pages_label_freshness_and_outcome_and_keep_the_chain(client, add_record, project):
    changed = add_record(project, "Raised the pool size in db.py", files=["src/db.py"])
    deleted = add_record(project, "Documented old_export.py", files=["src/old_export.py"])
    failed = add_record(project, "Tried a migration", observation_type="error")
    plain = add_record(project, "Plain current record")
    db = add_record.db
    recordstore.set_marks(
        db,
        [
            {"record_id": changed, "freshness": "changed", "reason": "db.py rewritten"},
            {"record_id": deleted, "freshness": "deleted", "reason": "gone"},
            {"record_id": failed, "outcome": "failed", "reason": "exit 1"},
        ],
        actor="drain",
    )
    recordstore.set_mark(db, plain, "superseded_by", changed, actor="drain", reason="newer value")
    html = client.get("/").text
    cards = dict(re.findall(r'href="/record/(mr_\w+)">.*?</a>(.*?)</li>', html, re.S))
    assert "changed since" in cards[changed] and "gone since" in cards[deleted]
    assert "failed attempt" in cards[failed]
    assert ">superseded<" in cards[plain] and not [
        w for w in ("changed since", "gone since", "failed attempt") if w in cards[plain]
    ]
    assert "What this record says about the code" in cards[changed]  # the tooltip says what the label means
    for rid, label in (
        (changed, "changed since"),
        (deleted, "gone since"),
        (failed, "failed attempt"),
    ):
        meta = re.search(r'<p class="meta">(.*?)</p>', client.get(f"/record/{rid}").text, re.S).group(1)
        assert label in meta
    page = client.get(f"/record/{plain}").text
    assert f'Superseded by <a href="/record/{changed}">' in page
    assert f'href="/record/{plain}"' in client.get(f"/record/{changed}").text  # and back: "Supersedes ..."
    hits = client.get("/search?q=pool+size").text
    assert "changed since" in hits


def test_the_polish_on_the_real_page_in_chromium(add_record, project, monkeypatch):
    from helpers import CHROMIUM, chromium_playwright

    sync_playwright = chromium_playwright()
    from kirolearn.viewer.server import start

    rid = add_record(project, "Release checklist", summary=LONG_CODE, facts=[CODE_FACT], session_id="sess-1")
    recordstore.set_marks(add_record.db, [{"record_id": rid, "freshness": "changed"}], actor="drain")
    assert (
        cli(
            "session-end",
            "--project",
            str(project),
            "--session-id",
            "sess-1",
            "--summary",
            "Checklist written",
        ).returncode
        == 0
    )
    running = start()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM,
                args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
            )
            try:
                page = browser.new_page()
                page.goto(running.url)
                assert page.locator(".session-end").count() == 1
                assert page.locator(".rec .mark", has_text="changed since").count() == 1
                page.goto(running.base + "/search?q=cache+setup")
                assert page.locator(".score").first.inner_text() == "match 1.00"
                assert "relative to the best" in page.locator(".score").first.get_attribute("title")
                assert "`" not in page.locator(".summary.md").first.inner_text()
                page.goto(f"{running.base}/record/{rid}")
                assert page.locator(".facts code").inner_text() == "make test"
                assert page.locator(".facts b").count() == 0
            finally:
                browser.close()
    finally:
        running.stop()


@pytest.mark.slow
def test_the_screenshot_script_shoots_the_demo_without_a_temporary_path(tmp_path):
    """scripts/screenshot.py (`make screenshot`, issue #33 item 9): the demo's data, the real `kirolearn serve`,
    headless Chromium; the page it shot names its projects `~/projects/...`, no temporary path, no test record."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from helpers import CHROMIUM

    if not (os.environ.get("KIROLEARN_CHROMIUM") or shutil.which("chromium") or os.path.exists(CHROMIUM)):
        pytest.skip("no Chromium: `apt-get install chromium` (as .ci/run does)")
    out, page = tmp_path / "shot" / "viewer.png", tmp_path / "page.html"
    env = {
        **os.environ,
        "KIROLEARN_CHROMIUM": os.environ.get("KIROLEARN_CHROMIUM") or shutil.which("chromium") or CHROMIUM,
    }
    done = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).parent.parent / "scripts" / "screenshot.py"),
            "--out",
            str(out),
            "--html",
            str(page),
            "--size",
            "900,600",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert int.from_bytes(png[16:20], "big") == 900  # the width asked for
    html = page.read_text()
    assert "<h1>Timeline</h1>" in html and "~/projects/" in html and "Session end" in html
    assert "/tmp" not in html and str(tmp_path) not in html and os.path.expanduser("~") not in html
    assert "<script" not in html.lower() and "alert(" not in html
