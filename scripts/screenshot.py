"""Take the README's viewer screenshot (docs/viewer.png) from the demo's data.

    python scripts/screenshot.py [--out docs/viewer.png] [--html PAGE.html] [--size 1100,700]
    make screenshot

Builds the demo's memory (`python -m kirolearn.demo --into WORK`: the recorded sessions through
the real hooks and drain) in a work folder that is also HOME for the run, so the viewer shows its
projects as `~/projects/...` and no temporary path reaches the picture; serves it with the real
`kirolearn serve --port 0` (127.0.0.1, a free port, its token); and shoots the timeline with
headless Chromium (`chromium --headless --screenshot=...`). `--html` saves the page the server
returned for that shot, which the test reads. Needs chromium on PATH (or $KIROLEARN_CHROMIUM).
"""

import argparse
import http.cookiejar
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
SERVE_START_SECONDS = 60


def chromium() -> str:
    """The Chromium to shoot with: $KIROLEARN_CHROMIUM, else the first of the usual names on PATH."""
    named = os.environ.get("KIROLEARN_CHROMIUM")
    for candidate in ([named] if named else []) + ["chromium", "chromium-browser", "google-chrome"]:
        found = shutil.which(candidate) or (candidate if os.path.isfile(candidate) else None)
        if found:
            return found
    sys.exit(
        "screenshot: no Chromium found: install it (`apt-get install chromium`, as .ci/run does) "
        "or set KIROLEARN_CHROMIUM to its path"
    )


def build_demo(work: str, env: dict) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kirolearn.demo", "--into", work],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        sys.exit(
            f"screenshot: the demo failed (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )


def serve(env: dict) -> "tuple[subprocess.Popen, str]":
    """`kirolearn serve --port 0` in its own process, and the token URL it prints."""
    proc = subprocess.Popen(
        [os.path.join(BIN, "kirolearn"), "serve", "--port", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stderr.readline()  # the first line is the URL (it is printed once the socket listens)
    match = re.search(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", line)
    if not match:
        proc.kill()
        sys.exit(
            f"screenshot: `kirolearn serve` did not print its URL: {line.strip() or proc.stderr.read()[-2000:]}"
        )
    return proc, match.group(0)


def page_html(url: str) -> str:
    """The HTML the server returns for the token URL (the token is traded for a cookie, then the page)."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    with opener.open(url, timeout=30) as response:
        return response.read().decode("utf-8")


def shoot(browser: str, url: str, out: str, size: str, profile: str) -> None:
    args = [
        browser,
        "--headless",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--window-size={size}",
        f"--screenshot={out}",
        url,
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if done.returncode != 0 or not os.path.exists(out):
        sys.exit(f"screenshot: {browser} exited {done.returncode}: {done.stderr[-2000:]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "viewer.png"), help="the PNG to write")
    parser.add_argument("--html", help="also save the HTML of the page shot here")
    parser.add_argument("--size", default="1100,700", help="window size WIDTH,HEIGHT (default 1100,700)")
    args = parser.parse_args(argv)
    browser = chromium()
    work = tempfile.mkdtemp(prefix="kirolearn-shot-")
    try:
        home = os.path.join(work, "kirolearn home")  # where the demo puts its memory (a space, on purpose)
        env = {**os.environ, "HOME": work, "KIROLEARN_HOME": home}
        env.pop("KIROLEARN_RAISE_ERRORS", None)
        build_demo(work, env)
        proc, url = serve(env)
        try:
            html = page_html(url)
            out = os.path.abspath(args.out)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            shoot(browser, url, out, args.size, os.path.join(work, "chromium-profile"))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        if args.html:
            with open(args.html, "w", encoding="utf-8") as fh:
                fh.write(html)
        print(f"wrote {out} ({os.path.getsize(out)} bytes) from {url.split('?')[0]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
