"""Helpers shared by test modules: each is defined once here, so no test module imports another."""

import functools
import gzip
import json
import os
import random
import shutil
import socket
import time
import urllib.parse
from pathlib import Path

import pytest

# --- MCP: a real client session against the server ------------------------------------------------

TURN = {
    "request": "Why does login 500 on plus-sign emails?",
    "investigated": "app/auth.py find_user",
    "learned": "find_user formats SQL with %",
    "completed": "Parameterised the query",
    "next_steps": "Fix app/orders.py the same way",
    "files_read": ["app/auth.py", "tests/test_auth.py"],
    "files_modified": ["app/auth.py"],
}


def call(project, tool, args, **server_kwargs):
    """Call one tool through a real client session; returns the CallToolResult."""
    import anyio
    from mcp.shared.memory import create_connected_server_and_client_session

    from kirolearn import mcp_server

    server = mcp_server.build_server(str(project), **server_kwargs)

    async def go():
        async with create_connected_server_and_client_session(server._mcp_server) as client:
            return await client.call_tool(tool, args)

    return anyio.run(go)


def list_tools(project):
    import anyio
    from mcp.shared.memory import create_connected_server_and_client_session

    from kirolearn import mcp_server

    server = mcp_server.build_server(str(project))

    async def go():
        async with create_connected_server_and_client_session(server._mcp_server) as client:
            return (await client.list_tools()).tools

    return anyio.run(go)


def text(result):
    return result.content[0].text


# --- extraction: a model's good answer --------------------------------------------------------------

GOOD = json.dumps(
    {
        "records": [
            {
                "observation_type": "session_summary",
                "title": "Parameterised the login query",
                "summary": "find_user built SQL with % formatting; now uses ? placeholders.",
                "facts": ["Use ? placeholders with sqlite3"],
                "concepts": ["SQL", "Injection"],
                "files_touched": ["/p/app/auth.py"],
            },
            {
                "observation_type": "pattern",
                "title": "String-formatted SQL elsewhere",
                "summary": "app/orders.py has the same pattern.",
                "facts": [],
                "concepts": [],
                "files_touched": [],
            },
        ]
    }
)


# --- secrets of issue 34's shapes (fake, as every value here) ----------------------------------------

PW = "Zq8mP2vL9xR4tW"
SID = "wnuh3ylome9odbqwou6tx2k9t3r6uw3p"
TOKEN = "bPIa84yRnBUb"


# --- PostgreSQL ---------------------------------------------------------------------------------------


def schema_url(database_url: str, schema: str) -> str:
    base, query = database_url.split("?", 1)
    return f"{base}?{query}&options={urllib.parse.quote(f'-csearch_path={schema}')}"


# --- SQLite damage ------------------------------------------------------------------------------------


def corrupt(path, seed=1, size=8192):
    """Overwrite `size` bytes in the middle of the file with random bytes (what the issue did).

    "The middle" is the middle of the events table's pages, not of the file: which table
    sits at half the file size moves whenever a schema version adds a table or an index.
    """
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        pages = [
            r[0] for r in conn.execute("select pageno from dbstat where name = 'events' order by pageno")
        ]
        page_size = conn.execute("pragma page_size").fetchone()[0]
    except sqlite3.OperationalError:  # an SQLite built without dbstat: the file's middle
        pages, page_size = [], 0
    finally:
        conn.close()
    offset = (pages[len(pages) // 2] - 1) * page_size if pages else os.path.getsize(path) // 2
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(random.Random(seed).randbytes(size))


# --- a real browser -----------------------------------------------------------------------------------

CHROMIUM = os.environ.get("KIROLEARN_CHROMIUM", "/usr/bin/chromium")


def chromium_playwright():
    """Playwright's sync_playwright, once Chromium and Playwright are both there (else skip)."""
    # CI installs both (.ci/run): there a missing browser is a failure, not a skip
    give_up = pytest.fail if os.environ.get("CI") else pytest.skip
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        give_up(
            f"no Chromium at {CHROMIUM}: `apt-get install chromium` (as .ci/run does) to run the browser test"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        give_up("Playwright for Python is not installed: `pip install -e '.[dev]'` (as .ci/run does)")
    return sync_playwright


# --- the CLI, in this process ------------------------------------------------------------------------


def run_cli(*args, input=None, env=None, project=None, ok=False):
    """Invoke `kirolearn ARGS` through click in this process; `ok` asserts it succeeded."""
    from click.testing import CliRunner

    from kirolearn.cli.commands import cli

    argv = [*args, *(["--project", str(project)] if project else [])]
    result = CliRunner().invoke(cli, argv, input=input, env=env, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, (result.output, result.stderr)
    return result


def drain(flush=True):
    """`kirolearn drain [--flush] --json` in this process; returns its parsed report."""
    result = run_cli("drain", *(["--flush"] if flush else []), "--json", ok=True)
    return json.loads(result.stdout)


def exported() -> list:
    """`kirolearn export` in this process: every stored object, parsed."""
    result = run_cli("export", ok=True)
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


# --- turns into the spool, and the coding set among distractors ----------------------------------

ROOT = Path(__file__).parent.parent
DISTRACTORS = ROOT / "bench" / "data" / "coding_distractors.jsonl.gz"
CODING_SET = ROOT / "bench" / "data" / "coding_set.json"


def spool_turn(project, session_id, prompt, outcome=None, when=None):
    """One turn through the real capture code (what kirolearn-hook runs), into the spool."""
    from kirolearn.capture import events, spool

    payload = {
        "hook_event_name": "userPromptSubmit",
        "cwd": str(project),
        "session_id": session_id,
        "prompt": prompt,
    }
    event = events.build_event("userPromptSubmit", payload, now=when)
    spool.append(event["event_id"], events.serialize(event))
    if outcome is not None:
        payload = {
            "hook_event_name": "stop",
            "cwd": str(project),
            "session_id": session_id,
            "assistant_response": outcome,
        }
        event = events.build_event("stop", payload, now=(when or 0) + 1 if when else None)
        spool.append(event["event_id"], events.serialize(event))


def coding_store(project, n_turns, n_noise):
    """Spool bench_coding's first `n_turns` turns among `n_noise` real commit messages; returns the turns."""
    turns = json.loads(CODING_SET.read_text("utf-8"))["turns"][:n_turns]
    with gzip.open(DISTRACTORS, "rt", encoding="utf-8") as fh:
        noise = [json.loads(line)["text"] for _, line in zip(range(n_noise), fh)]
    items = [("noise", t) for t in noise]
    step = max(1, len(items) // (len(turns) + 1))
    for i, turn in enumerate(turns):
        items.insert((i + 1) * step + i, ("turn", turn))
    for n, (kind, item) in enumerate(items):
        if kind == "noise":
            spool_turn(project, f"s{n // 20}", item)
        else:
            spool_turn(project, f"s{n // 20}", item["prompt"], item["outcome"])
    return turns


# --- waiting, and what a killed recall server leaves ---------------------------------------------


def wait_for(condition, timeout=60.0, what="condition"):
    """Poll `condition` every 50 ms until it is true; fail naming `what` after `timeout` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def stale_socket(path: str) -> None:
    """Leave at `path` what a killed server leaves: a socket bound, never listening, then closed."""
    from kirolearn.recall import client

    address = client.socket_address(path)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(address.address)
    address.close()
    dead.close()


# --- the local sentence model's real files (tests/test_local_model.py) ---------------------------

LOCAL = "local/all-MiniLM-L6-v2"
NAME = "all-MiniLM-L6-v2"
REQUIRE_ENV = "KIROLEARN_REQUIRE_LOCAL_MODEL"
HF_VARS = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "KIROLEARN_MODEL_DIR")


@functools.cache
def real_weights():
    """The real files' folder, found with the user's HOME (the tests' own HOME is a fresh tmp dir);
    else the text saying where it looked."""
    from kirolearn.recall.embeddings import local as backends_local
    from kirolearn.recall.embeddings import registry as embeddings

    try:
        return backends_local.find_weights(NAME)[0]
    except embeddings.EmbeddingUnavailable as exc:
        return exc.message


def require_weights(found=None):
    """The real files' folder (or `found`'s); else skip saying why, or fail in CI."""
    from kirolearn.recall.embeddings import local as backends_local

    found = real_weights() if found is None else found
    if not isinstance(found, os.PathLike):
        reason = f"the local model's weights are not installed ({found}): {backends_local.install_hint(NAME)}"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return found
