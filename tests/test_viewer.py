"""The web viewer: its token gate, CSRF checks, escaping and paging (Starlette's test client, in process),
then the same pages in a real headless Chromium over a real uvicorn server on 127.0.0.1."""

import os
import re
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import CHROMIUM, chromium_playwright
from starlette.testclient import TestClient

from kirolearn.manage import records as manage
from kirolearn.viewer.app import create_app

XSS_TITLE = 'Login fails <script>alert(1)</script> "><img src=x onerror=alert(2)>'
XSS_SUMMARY = (
    "</textarea><script>window.pwned=1</script><b onmouseover=alert(3)>hover</b> javascript:alert(4)"
)


@pytest.fixture
def client():
    app = create_app("secret-token", 8765)
    c = TestClient(app, base_url="http://127.0.0.1:8765")
    assert c.get("/?token=secret-token").status_code == 200  # trades the token for the cookie
    return c


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', html).group(1)


def test_every_page_needs_the_token(add_record, project):
    add_record(project, "A record")
    c = TestClient(create_app("secret-token", 8765), base_url="http://127.0.0.1:8765")
    for path in (
        "/",
        "/search?q=record",
        "/sessions",
        "/forgotten",
        "/health",
        "/static/style.css",
        "/record/x",
    ):
        r = c.get(path)
        assert r.status_code == 403 and "needs its token" in r.text, path
    assert c.get("/?token=wrong").status_code == 403
    assert c.post("/record/x/forget", data={"csrf": "x"}).status_code == 403
    first = c.get("/search?q=record&token=secret-token", follow_redirects=False)
    assert (
        first.status_code == 303 and first.headers["location"] == "/search?q=record"
    )  # token leaves the URL
    sneaky = c.get("http://127.0.0.1:8765//evil.example/x?token=secret-token", follow_redirects=False)
    assert sneaky.headers["location"] == "/evil.example/x"  # never a "//host" redirect
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert c.get("/search?q=record").status_code == 200
    # a page fetched through another host name (DNS rebinding) is refused even with the token
    evil = TestClient(create_app("secret-token", 8765), base_url="http://evil.example:8765")
    assert evil.get("/?token=secret-token").status_code == 403


def test_security_headers_forbid_scripts(client):
    r = client.get("/")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp  # no script source at all
    assert r.headers["x-frame-options"] == "DENY" and r.headers["referrer-policy"] == "same-origin"
    assert r.headers["cache-control"] == "no-store"


def test_memory_text_is_escaped_and_rescrubbed(client, add_record, project):
    rid = add_record(
        project,
        XSS_TITLE,
        summary=XSS_SUMMARY + " key AKIAIOSFODNN7EXAMPLE",
        facts=["<i>fact</i>"],
        files=['src/"quoted".py'],
    )
    for path in ("/", f"/record/{rid}", "/search?q=login"):
        html = client.get(path).text
        assert "<script>" not in html and "<img" not in html and "<b onmouseover" not in html, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, path
        assert "AKIAIOSFODNN7EXAMPLE" not in html, (
            path
        )  # stored raw by an old version: re-scrubbed on the way out
    detail = client.get(f"/record/{rid}").text
    assert (
        "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;" in detail
    )  # inside the edit form's value attribute too
    assert "&lt;/textarea&gt;" in detail and "&lt;i&gt;fact&lt;/i&gt;" in detail


def test_writes_need_post_csrf_and_same_origin(client, add_record, project):
    rid = add_record(project, "Forget me via the viewer")
    page = client.get(f"/record/{rid}").text
    token = csrf_of(page)
    assert client.get(f"/record/{rid}/forget").status_code == 405
    assert client.post(f"/record/{rid}/forget", data={"reason": "x"}).status_code == 403
    assert client.post(f"/record/{rid}/forget", data={"csrf": "0" * 64}).status_code == 403
    cross = client.post(
        f"/record/{rid}/forget", data={"csrf": token}, headers={"origin": "http://evil.example"}
    )
    assert cross.status_code == 403
    assert (
        client.post(
            f"/record/{rid}/forget", data={"csrf": token}, headers={"sec-fetch-site": "cross-site"}
        ).status_code
        == 403
    )
    assert manage.show(rid)["status"] == "live"

    done = client.post(
        f"/record/{rid}/forget",
        data={"csrf": token, "reason": "from the viewer"},
        headers={"origin": "http://127.0.0.1:8765"},
        follow_redirects=False,
    )
    assert done.status_code == 303 and done.headers["location"] == f"/record/{rid}?done=forget"
    shown = manage.show(rid)
    assert shown["status"] == "forgotten" and shown["history"][0]["actor"] == "viewer"
    assert rid in client.get("/forgotten").text
    assert (
        client.post(f"/record/{rid}/restore", data={"csrf": token}).status_code == 200
    )  # follows the redirect
    assert manage.show(rid)["status"] == "live"
    r = client.post(
        f"/record/{rid}/edit",
        data={"csrf": token, "title": "Edited in the viewer", "summary": "token=ghp_" + "b" * 36},
    )
    assert r.status_code == 200 and "Edited in the viewer" in r.text and "ghp_bbbb" not in r.text
    bad = client.post(f"/record/{rid}/edit", data={"csrf": token, "title": "", "summary": "s"})
    assert bad.status_code == 400 and "empty" in bad.text
    assert (
        client.post("/record/mr_01M8P11TV4D5K3PEVTAMHCTT16/forget", data={"csrf": token}).status_code == 404
    )


def test_timeline_pages_by_keyset(client, add_record, project):
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    made = [
        add_record(
            project, f"Record number {i}", created_at=start + timedelta(minutes=i), session_id=f"s{i // 10}"
        )
        for i in range(120)
    ]
    seen, url = [], "/"
    while url:
        html = client.get(url).text
        seen += re.findall(r'href="/record/(mr_\w+)"', html)
        nxt = re.search(r'rel="next" href="([^"]+)"', html)
        url = nxt.group(1).replace("&amp;", "&") if nxt else None
    assert seen == made[::-1]  # every record once, newest first, over three pages
    one = client.get("/?session=s3").text
    assert re.findall(r'href="/record/(mr_\w+)"', one) == made[30:40][::-1]


def test_sessions_and_health_pages(client, project, monkeypatch):
    from click.testing import CliRunner

    from kirolearn.cli.commands import cli

    monkeypatch.chdir(project)
    CliRunner().invoke(
        cli,
        [
            "session-end",
            "--session-id",
            "s1",
            "--summary",
            "Moved JWT <b>checks</b>",
            "--next-step",
            "Rate-limit /auth/refresh",
        ],
        catch_exceptions=False,
    )
    html = client.get("/sessions").text
    assert "Moved JWT &lt;b&gt;checks&lt;/b&gt;" in html and "Rate-limit /auth/refresh" in html
    timeline = client.get("/").text
    assert "Session end:" in timeline and "Next: Rate-limit /auth/refresh" in timeline
    health = client.get("/health").text
    for label in (
        "Spool: events waiting",
        "Quarantined files",
        "Last drain",
        "Extraction failures (24 h)",
        "Spend today",
    ):
        assert label in health
    assert "of 200000 tokens" in health


def test_search_page_uses_the_cli_ranking_and_filters(client, add_record, project):
    now = datetime.now(timezone.utc)
    a = add_record(project, "Export job decision: WAL mode", observation_type="decision", created_at=now)
    b = add_record(
        project, "Export job error: locked", observation_type="error", created_at=now - timedelta(days=9)
    )
    html = client.get("/search?q=export+job").text
    found = re.findall(r'href="/record/(mr_\w+)"', html)
    assert found == [h["record_id"] for h in manage.search("export job")]
    assert re.findall(r'href="/record/(mr_\w+)"', client.get("/search?q=export&type=error").text) == [b]
    assert re.findall(r'href="/record/(mr_\w+)"', client.get("/search?q=export&since=7d").text) == [a]
    scores = re.findall(r'class="score" title="[^"]+">match ([^<]+)<', html)  # labelled (#33): best = 1.00
    assert scores and scores[0] == "1.00" and all(0 < float(s) <= 1 for s in scores)
    assert "cannot read --since" in client.get("/search?q=export&since=someday").text


# --- a real browser ----------------------------------------------------------------------------------


def test_templates_and_static_files_ship_in_a_regular_install():
    import configparser
    import fnmatch

    conf = configparser.ConfigParser()
    conf.read(Path(__file__).parent.parent / "setup.cfg")
    patterns = [p.strip() for p in conf["options.package_data"]["kirolearn.viewer"].split(",")]
    viewer = Path(__file__).parent.parent / "kirolearn" / "viewer"
    for path in viewer.rglob("*"):
        if path.is_file() and path.suffix != ".py" and "__pycache__" not in path.parts:
            rel = path.relative_to(viewer).as_posix()
            assert any(fnmatch.fnmatch(rel, p) for p in patterns), f"{rel} is not in package_data"


@pytest.mark.slow
def test_viewer_in_headless_chromium(project, make_event, drain_now, add_record, tmp_path, monkeypatch):
    sync_playwright = chromium_playwright()
    from kirolearn.viewer.server import start

    monkeypatch.chdir(project)
    for prompt, cmd, path in (
        (
            "Why does the export job fail with database is locked?",
            "pytest tests/test_export.py",
            "src/export.py",
        ),
        ("Add a cache to the product page", "make cache", "src/cache.py"),
    ):
        make_event("userPromptSubmit", prompt=prompt)
        make_event(tool_name="shell", tool_input={"command": cmd}, tool_response={"stdout": "ok"})
        make_event(
            tool_name="fs_write", tool_input={"path": path, "content": "x"}, tool_response={"ok": True}
        )
        make_event("stop", assistant_response=f"Done: changed {path}; tests pass.")
    drain_now()
    from click.testing import CliRunner

    from kirolearn.cli.commands import cli

    CliRunner().invoke(
        cli,
        [
            "session-end",
            "--session-id",
            "sess-1",
            "--summary",
            "Export fixed with a busy timeout; cache added",
            "--next-step",
            "Watch the nightly export for a week",
        ],
        catch_exceptions=False,
    )
    evil = add_record(project, XSS_TITLE, summary=XSS_SUMMARY, observation_type="error")

    running = start()
    try:
        # no token, no page (a real HTTP request through the real server)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(running.base + "/", timeout=10)
        assert refused.value.code == 403
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM,
                args=[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--no-first-run",
                    "--disable-sync",
                ],
            )
            try:
                page = browser.new_page(viewport={"width": 1100, "height": 760})
                dialogs, errors = [], []
                page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
                page.on("pageerror", lambda e: errors.append(str(e)))

                page.goto(running.url)  # the token URL; the server swaps it for a cookie
                assert "token=" not in page.url
                assert page.locator("h1").inner_text() == "Timeline"
                assert page.locator(".session-end").first.is_visible()
                assert page.get_by_text("Next: Watch the nightly export for a week").is_visible()
                assert page.locator(".rec .title", has_text="<script>alert(1)</script>").count() == 1
                # sessions are labelled by their first prompt and date, not by UUID (#24)
                heads = page.locator("section.session h2").all_inner_texts()
                assert any(
                    h.startswith("Why does the export job fail with database is locked?") for h in heads
                )
                assert not any("sess-1" in h for h in heads)
                # memory markdown is rendered (markdown-it-py), not shown as source
                assert page.locator(".summary.md strong", has_text="Request:").count() >= 1
                assert "**Request:**" not in page.locator("main").inner_text()
                page.screenshot(path=str(tmp_path / "timeline.png"))

                page.fill("header input[name=q]", "export database locked")
                page.press("header input[name=q]", "Enter")
                page.wait_for_url(lambda url: "/search?q=export" in url)
                first = page.locator("ol.hits .title").first
                title = first.inner_text()
                assert title.startswith("Why does the export job fail")
                first.click()
                page.wait_for_url("**/record/mr_*")
                rid = page.url.rsplit("/", 1)[1]
                assert page.locator("h2", has_text="Provenance").is_visible()
                assert page.locator(".summary-full.md strong", has_text="Outcome:").is_visible()
                assert page.get_by_text("deterministic").first.is_visible()
                page.fill("input[name=reason]", "wrong diagnosis")
                page.click("button.danger")
                page.wait_for_url(lambda url: url.endswith(f"/record/{rid}?done=forget"))
                assert "forgotten" in page.locator(".status").inner_text()
                page.goto(running.base + "/search?q=export+database+locked")
                assert rid not in page.content()
                assert page.locator("ol.hits .title", has_text="Why does the export job fail").count() == 0

                page.goto(f"{running.base}/record/{evil}")
                assert page.locator("h1.record-title").inner_text() == XSS_TITLE
                assert page.locator("img").count() == 0 and page.locator("b[onmouseover]").count() == 0
                assert page.evaluate("() => typeof window.pwned") == "undefined"
                page.goto(f"{running.base}/")
                page.set_viewport_size({"width": 1100, "height": 700})
                page.screenshot(path=str(tmp_path / "viewer.png"))
                # the README's picture (docs/viewer.png) is scripts/screenshot.py's, from the demo's data
                assert dialogs == [] and errors == []
            finally:
                browser.close()
    finally:
        running.stop()
    assert manage.show(rid)["status"] == "forgotten"


def test_serve_command_listens_on_loopback_behind_its_token(home, tmp_path):
    """`kirolearn serve` as a user runs it: prints the token URL, 403 without it, stops on SIGINT."""
    import signal
    import subprocess
    import sys
    import threading

    proc = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "kirolearn"), "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    timer = threading.Timer(60, proc.kill)  # bound the test whatever happens
    timer.start()
    try:
        line = proc.stderr.readline()
        match = re.search(r"(http://127\.0\.0\.1:(\d+))/\?token=([\w-]+)", line)
        assert match, line
        base, token = match.group(1), match.group(3)
        assert len(token) >= 40
        import http.cookiejar

        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        with browser.open(f"{base}/health?token={token}", timeout=10) as page:  # token → cookie → page
            assert page.status == 200 and "Spool: events waiting" in page.read().decode()
            assert page.url == f"{base}/health"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/health", timeout=10)
        assert refused.value.code == 403
        with pytest.raises(urllib.error.HTTPError) as wrong:
            urllib.request.urlopen(f"{base}/health?token=guess", timeout=10)
        assert wrong.value.code == 403
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        finally:
            timer.cancel()
            proc.kill()
