"""Issue #34's shapes through the real drain: nothing of them in the database (every table, the
FTS index's too) nor in `export`."""

import base64

from click.testing import CliRunner
from helpers import PW, SID, TOKEN

from kirolearn.cli.commands import cli

AWS_SECRET = "r7y7qYRPxkfVUX04Wl/ZbTi8MGGaB+Q5ZUoNxYz1"
BLOB = base64.b64encode(f"DB_PASSWORD={PW}4".encode()).decode()
SECRETS = (PW, SID, TOKEN, BLOB, "Oak Street")


def _everything(db, home):
    tables = [r[0] for r in db.execute("select name from sqlite_master where type = 'table'")]
    rows = []
    for table in tables:
        try:
            rows += [str(tuple(r)) for r in db.execute(f'select * from "{table}"')]
        except Exception:  # noqa: BLE001 - an FTS shadow table that cannot be read directly
            continue
    exported = CliRunner().invoke(cli, ["export"], env={"KIROLEARN_HOME": str(home)}).output
    raw = []  # every file's bytes under the home: the database, its WAL, the logs, the state
    for path in sorted(home.rglob("*")):
        if path.is_file() and "spool" not in path.parts:  # the spool keeps raw text until the drain (rule 3)
            raw.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(rows) + "\n" + exported + "\n" + "\n".join(raw)


def test_the_shapes_are_clean_in_the_store_and_export(make_event, drain_now, home):
    make_event(
        "userPromptSubmit",
        prompt="my netrc:\nmachine api.example.com login bob password "
        + PW
        + "\n＜private＞12 Oak Street＜/private＞",
    )
    make_event(
        tool_name="execute_bash",
        tool_input={"command": f"echo {BLOB} | base64 -d"},
        tool_response=f"> Cookie: sessionid={SID}; theme=dark\nUPSTREAM=Bearer {TOKEN}\n",
    )
    make_event(
        tool_name="execute_bash",
        tool_input={"command": "env"},
        tool_response=f"DATABASE_URL=postgres://app:{PW[:5]}\n{PW[5:]}2@db.internal/app\n",
    )
    make_event(
        "stop", assistant_response="Done: &amp;lt;private&amp;gt;12 Oak Street&amp;lt;/private&amp;gt;"
    )
    stats, db = drain_now(flush=True)
    dump = _everything(db, home)
    for secret in SECRETS + (PW[5:] + "2",):
        assert secret not in dump, secret
    assert stats.redactions.get("user-password", 0) >= 1 and stats.redactions.get("private", 0) >= 2


def test_a_key_split_over_two_tool_outputs_is_clean_in_the_store(make_event, drain_now, home):
    make_event("userPromptSubmit", prompt="show me the credentials file, in two parts")
    make_event(
        tool_name="execute_bash",
        tool_input={"command": "head -c 60 ~/.aws/credentials"},
        tool_response="[default]\naws_secret_access_key =",
    )
    make_event(
        tool_name="execute_bash",
        tool_input={"command": "tail -c 41 ~/.aws/credentials"},
        tool_response=f"{AWS_SECRET}\n",
    )
    make_event("stop", assistant_response="Those are your credentials.")
    _, db = drain_now(flush=True)
    assert AWS_SECRET not in _everything(db, home)


def test_prompts_that_differ_only_inside_private_stay_two_events(make_event, drain_now, home):
    """Within the 3 s window, two prompts whose only difference was private scrubbed to one text and
    were taken for a twin hook call (#34, defect 11). The dedup key is now a keyed hash of the raw
    text: the two stay two, a real twin (the same raw payload) is still one, and nothing stored
    holds what was private."""
    import time

    now = time.time()
    make_event("userPromptSubmit", now=now, prompt="deploy with <private>hunter2-alpha</private> please")
    make_event(
        "userPromptSubmit", now=now + 0.5, prompt="deploy with <private>hunter2-bravo</private> please"
    )
    make_event(
        "userPromptSubmit", now=now + 0.6, prompt="deploy with <private>hunter2-bravo</private> please"
    )
    stats, db = drain_now()
    assert stats.stored == 2 and stats.duplicates == 1
    stored = _everything(db, home)
    assert "hunter2" not in stored
    hashes = [r[0] for r in db.execute("select content_hash from events").fetchall()]
    assert all(h.startswith("hmac-sha256:") for h in hashes) and len(set(hashes)) == 2
