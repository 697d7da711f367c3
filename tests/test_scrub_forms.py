"""Issue #23: secrets in the shapes real tools write them, through the real commands.

Every crafted form the issue measured (and the quoted shell forms, prose, `<private>` variants)
goes through the installed `kirolearn-hook`, `kirolearn drain` and `kirolearn export` /
`kirolearn search`, as separate processes on one home; each form is its own test over that run.
Then `kirolearn scan -` must judge every line exactly as the drain stored it.

Every secret here is fake and assembled at run time.
"""

import base64
import json
import os
import subprocess

import pytest
from click.testing import CliRunner
from conftest import BIN, hook_env

from kirolearn.privacy import views


def _pw(tag, n=12):
    """A distinct fake password per form, so one form's leak cannot fail another's test."""
    import random

    rng = random.Random(tag)
    return "".join(
        rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ")
        + rng.choice("abcdefghijkmnpqrstuvwxyz")
        + rng.choice("23456789")
        for _ in range(n // 3)
    )


PW = _pw("pw")
SSHPW = "Sp4Ss8" + "Ww2Dd6"
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"
AWS = "AKIA" + "Z7Q3XW5RT2YU4KLM"
JWT = (
    "eyJhbGciOiJIUzI1NiJ9"
    + "."
    + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    + "."
    + "dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
)
SIGNING = "Zk3pQ9vR2xT7mW4n" + "B8cY1hJ6fL0sD5"
PRIVATE = "my home is 12 Elm Street"

# (id, carrier, text, fragments that must not survive anywhere, text that must survive)
FORMS = [
    (
        "sshpass-single-quoted",
        "shell",
        f"sshpass -p '{SSHPW}' ssh deploy@db.internal uptime",
        [SSHPW],
        "ssh deploy@db.internal",
    ),
    (
        "sshpass-double-quoted",
        "shell",
        f'sshpass -p "{_pw("sshpass")}" ssh deploy@db.internal uptime',
        [_pw("sshpass")],
        "uptime",
    ),
    (
        "url-json-escaped-slashes",
        "tool_output",
        '{"dsn": "postgres:\\/\\/admin:' + _pw("url-json-escaped-slashes") + '@db.internal:5432\\/app"}',
        [_pw("url-json-escaped-slashes")],
        "db.internal",
    ),
    (
        "json-u-escape",
        "tool_output",
        '{"value": "\\u0067' + GHP[1:] + '", "ok": true}',
        [GHP[1:]],
        '"ok": true',
    ),
    (
        "aws-key-wrapped",
        "tool_output",
        f"Created key:\n{AWS[:10]}\n{AWS[10:]}\ndone",
        [AWS[:10], AWS[10:]],
        "done",
    ),
    (
        "ghp-wrapped-indented",
        "tool_output",
        f"token:\n  {GHP[:22]}\n  {GHP[22:]}\nexpires never",
        [GHP[:22], GHP[22:]],
        "expires never",
    ),
    (
        "jwt-wrapped",
        "tool_output",
        f"session cookie:\n{JWT[:40]}\n{JWT[40:]}\n(end)",
        [JWT[:40], JWT[40:]],
        "(end)",
    ),
    (
        "url-encoded-json-body",
        "shell",
        f"curl -s 'https://api.internal/v1/login?data=%7B%22password%22%3A%22{_pw('url-encoded-json-body')}%22%7D'",
        [_pw("url-encoded-json-body")],
        "api.internal",
    ),
    (
        "env-neutral-name",
        "tool_output",
        f"# .env\nDEBUG=false\nSESSION_SIGNING={SIGNING}\nPORT=8080\n",
        [SIGNING],
        "PORT=8080",
    ),
    (
        "export-neutral-name",
        "shell",
        f"export SESSION_SIGNING={SIGNING[::-1]} && ./run.sh",
        [SIGNING[::-1]],
        "./run.sh",
    ),
    (
        "private-spaced",
        "prompt",
        f"< private >{PRIVATE}</ private > where do I deploy?",
        [PRIVATE],
        "where do I deploy?",
    ),
    (
        "private-html-escaped",
        "tool_output",
        f"&lt;private&gt;{PRIVATE} 2&lt;/private&gt; rendered",
        [PRIVATE + " 2"],
        "rendered",
    ),
    (
        "private-go-json",
        "tool_output",
        '{"note": "\\u003cprivate\\u003e' + PRIVATE + ' 3\\u003c/private\\u003e ok"}',
        [PRIVATE + " 3"],
        "ok",
    ),
    ("private-upper", "prompt", f"<PRIVATE>{PRIVATE} 4</PRIVATE> thanks", [PRIVATE + " 4"], "thanks"),
    (
        "prose-password",
        "prompt",
        f"the staging db password is {_pw('prose-password')}, can you connect?",
        [_pw("prose-password")],
        "can you connect?",
    ),
    (
        "prose-pw-was",
        "prompt",
        f"fyi the pw was {_pw('prose-pw-was')} before the rotation",
        [_pw("prose-pw-was")],
        "before the rotation",
    ),
    (
        "prose-token-colon",
        "prompt",
        f"token: {_pw('prose-token-colon')}Qx and then retry",
        [_pw("prose-token-colon")],
        "retry",
    ),
    (
        "flag-password-double-quoted",
        "shell",
        f'psql-admin --password "{_pw("flag-password-double-quoted")}" --host db',
        [_pw("flag-password-double-quoted")],
        "--host db",
    ),
    (
        "mysql-p-double-quoted",
        "shell",
        f'mysql -uroot -p"{_pw("mysql-p-double-quoted")}" app',
        [_pw("mysql-p-double-quoted")],
        " app",
    ),
    (
        "mysql-p-single-quoted",
        "shell",
        f"mysql -uroot -p'{_pw('mysql-p-single-quoted')}' app",
        [_pw("mysql-p-single-quoted")],
        " app",
    ),
    (
        "pgpassword-quoted",
        "shell",
        f"PGPASSWORD='{_pw('pgpassword-quoted')}' psql -h db.internal app",
        [_pw("pgpassword-quoted")],
        "psql -h db.internal",
    ),
    (
        "curl-user-quoted",
        "shell",
        f"curl -u admin:'{_pw('curl-user-quoted')}' https://api.internal/health",
        [_pw("curl-user-quoted")],
        "https://api.internal/health",
    ),
    (
        "curl-bearer-header",
        "shell",
        f"curl -H 'Authorization: Bearer {_pw('curl-bearer-header')}Zz9' https://api.internal",
        [_pw("curl-bearer-header")],
        "https://api.internal",
    ),
    (
        "basic-auth",
        "tool_output",
        "> Authorization: Basic "
        + base64.b64encode(f"admin:{_pw('basic-auth')}".encode()).decode()
        + "\n< HTTP/1.1 200 OK",
        [base64.b64encode(f"admin:{_pw('basic-auth')}".encode()).decode()],
        "HTTP/1.1 200 OK",
    ),
]

# Lines that must come out unchanged (and that scan must leave alone too).
ORDINARY = [
    "git log --oneline -3 # 3f2a9c1 Fix the export of empty tables",
    "request_id=5b0c6f1e-8a2d-4c3b-9e7f-1a2b3c4d5e6f took 212 ms",
    "export PATH=$HOME/.local/bin:$PATH",
    "curl -s 'https://docs.example.com/search?q=token%20refresh&page=2'",
    "the password is stored in the vault, not in the repo",
]


def _payload(carrier, text, session):
    if carrier == "prompt":
        return {"hook_event_name": "userPromptSubmit", "prompt": text, "session_id": session}
    if carrier == "shell":
        return {
            "hook_event_name": "postToolUse",
            "tool_name": "execute_bash",
            "session_id": session,
            "tool_input": {"command": text},
            "tool_response": {"result": [{"exit_status": "0", "stdout": ""}]},
        }
    return {
        "hook_event_name": "postToolUse",
        "tool_name": "execute_bash",
        "session_id": session,
        "tool_input": {"command": "./deploy.sh --verbose"},
        "tool_response": {"result": [{"exit_status": "0", "stdout": text}]},
    }


def _strings(value):
    if isinstance(value, str):
        yield value
        if value[:1] in "[{":
            try:
                yield from _strings(json.loads(value))
            except ValueError:
                pass
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _decoded(text):
    """The text and what it says once its escapes are decoded and its wrapped lines joined."""
    out = [text]
    for view in views.escape_views(text):
        out.append(view.text)
    out += [t.replace("\n", "").replace(" ", "") for t in list(out)]
    return out


@pytest.fixture(scope="module")
def forms_run(tmp_path_factory):
    """Every form and ordinary line through hook -> drain -> export / search, one process each."""
    root = tmp_path_factory.mktemp("forms")
    project = root / "project"
    project.mkdir()
    (project / ".git").mkdir()
    env = hook_env(
        KIROLEARN_HOME=str(root / "home"), HOME=str(root / "user"), KIROLEARN_EMBEDDING_MODEL="none"
    )
    os.makedirs(env["HOME"], exist_ok=True)
    stored = {}
    for fid, carrier, text, _, _ in FORMS:
        stored[fid] = (carrier, text)
    for i, line in enumerate(ORDINARY):
        stored[f"ordinary-{i}"] = ("prompt", line)
    for n, (_key, (carrier, text)) in enumerate(stored.items()):
        payload = dict(_payload(carrier, text, f"s-{n}"), cwd=str(project))
        proc = subprocess.run(
            [str(BIN / "kirolearn-hook")],
            input=json.dumps(payload).encode(),
            env=env,
            capture_output=True,
            timeout=30,
        )
        assert proc.returncode == 0, proc.stderr
        stop = {
            "hook_event_name": "stop",
            "assistant_response": f"done with step {n}",
            "session_id": f"s-{n}",
            "cwd": str(project),
        }
        subprocess.run(
            [str(BIN / "kirolearn-hook")],
            input=json.dumps(stop).encode(),
            env=env,
            capture_output=True,
            timeout=30,
            check=True,
        )

    def kl(*args, stdin=None):
        proc = subprocess.run(
            [str(BIN / "kirolearn"), *args],
            input=stdin,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=str(project),
        )
        assert proc.returncode == 0, (args, proc.stderr)
        return proc.stdout

    kl("drain", "--flush")
    dump = [json.loads(line) for line in kl("export").splitlines()]
    searched = kl("search", "deploy staging password token key session", "--json")
    by_session = {}
    for obj in dump:
        if obj.get("type") == "event":
            by_session.setdefault(obj.get("session_id"), []).append(obj)
    return {
        "dump": dump,
        "search": searched,
        "by_session": by_session,
        "keys": list(stored),
        "env": env,
        "everything": "\n".join(t for obj in dump for t in _strings(obj)) + "\n" + searched,
    }


def _event_text(forms_run, key):
    """The stored text of the form's event: the prompt, the command or the tool output."""
    n = forms_run["keys"].index(key)
    texts = []
    for obj in forms_run["by_session"].get(f"s-{n}", []):
        for t in _strings(obj):
            texts.append(t)
    return "\n".join(texts)


@pytest.mark.parametrize("fid, carrier, text, fragments, kept", FORMS, ids=[f[0] for f in FORMS])
def test_crafted_form_is_redacted_everywhere(forms_run, fid, carrier, text, fragments, kept):
    everything = forms_run["everything"]
    for fragment in fragments:
        for seen in _decoded(everything):
            assert fragment not in seen, (fid, fragment)
    event = _event_text(forms_run, fid)
    assert "[REDACTED:" in event, (fid, event[:400])
    assert kept in event, (fid, kept, event[:400])  # the rest of the text stays as it was


def test_ordinary_lines_are_stored_as_written(forms_run):
    for i, line in enumerate(ORDINARY):
        assert line in _event_text(forms_run, f"ordinary-{i}"), line


def _scan_lines(text, monkeypatch, env):
    """`kirolearn scan -` on `text` (in process, the real click command): the redacted lines it prints."""
    from kirolearn.cli.commands import cli

    monkeypatch.setenv("KIROLEARN_HOME", env["KIROLEARN_HOME"])
    result = CliRunner().invoke(cli, ["scan", "-"], input=text, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    total = int(lines[0].split()[0])
    printed = {}
    for line in lines[1:]:
        head, sep, rest = line.partition(": ")
        if sep and head.strip().isdigit():
            printed[int(head)] = rest
    return total, printed


@pytest.mark.parametrize(
    "key", [f[0] for f in FORMS if f[1] == "prompt"] + [f"ordinary-{i}" for i in range(len(ORDINARY))]
)
def test_scan_gives_the_drains_verdict_on_every_prompt_line(forms_run, key, monkeypatch):
    """The same line through `kirolearn scan -` and through hook + drain + export: same verdict,
    same redacted text."""
    n = forms_run["keys"].index(key)
    text = (FORMS + [(f"ordinary-{i}", "prompt", line, [], "") for i, line in enumerate(ORDINARY)])[n][2]
    prompts = [obj["body"] if "body" in obj else obj for obj in forms_run["by_session"][f"s-{n}"]]
    stored = [
        t
        for obj in prompts
        for t in _strings(obj)
        if t.replace("[REDACTED:", "").strip() and _same_shape(t, text)
    ]
    assert stored, (key, prompts)
    total, printed = _scan_lines(text, monkeypatch, forms_run["env"])
    if stored[0] == text:
        assert total == 0 and printed == {}, (key, printed)
    else:
        assert total > 0 and printed.get(1) == stored[0].splitlines()[0], (key, printed, stored[0])


def _same_shape(stored, original):
    """Whether a stored string is the scrubbed form of `original` (same text outside the markers)."""
    import re

    pattern = (
        re.escape(re.sub(r"\[REDACTED:[A-Za-z0-9_\-]+\]", "\0", stored))
        .replace("\\\0", ".+?")
        .replace("\0", ".+?")
    )
    return re.fullmatch(pattern, original, re.S) is not None


@pytest.mark.parametrize("fid", [f[0] for f in FORMS if f[1] != "prompt"])
def test_scan_gives_the_drains_verdict_on_commands_and_outputs(forms_run, fid, monkeypatch):
    """A command or a tool output scanned as a file: each line it prints redacted is the line the
    drain stored, and it redacts exactly when the drain did."""
    n = forms_run["keys"].index(fid)
    text = FORMS[n][2]
    stored = [t for t in _strings(forms_run["by_session"][f"s-{n}"]) if _same_shape(t, text)]
    assert stored, fid
    total, printed = _scan_lines(text, monkeypatch, forms_run["env"])
    assert (total > 0) == (stored[0] != text)
    lines = stored[0].splitlines()
    for number, line in printed.items():
        assert lines[number - 1] == line, (fid, number, line)


def test_rescrub_cleans_what_rules_v2_stored(make_event, drain_now, project):
    """A store drained before these rules (views, shape and prose rules off, marked v2) holds the
    crafted forms; `kirolearn rescrub` cleans the database file of them."""
    from kirolearn.cli.commands import cli
    from kirolearn.core import paths
    from kirolearn.privacy import rules
    from kirolearn.privacy.scrub import Scrubber
    from kirolearn.store.sqlite import db as store
    from kirolearn.store.sqlite import scrubbing as store_scrub

    forms = [
        f
        for f in FORMS
        if f[0]
        in ("json-u-escape", "aws-key-wrapped", "url-encoded-json-body", "env-neutral-name", "prose-password")
    ]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(Scrubber, "_scrub_views", lambda self, text: text)
        m.setattr(Scrubber, "_env_pass", lambda self, text: text)
        m.setattr(Scrubber, "_prose_pass", lambda self, text: text)
        for _fid, carrier, text, _, _ in forms:
            payload = _payload(carrier, text, "s-old")
            payload.pop("hook_event_name")
            make_event("userPromptSubmit" if carrier == "prompt" else "postToolUse", **payload)
        _, db = drain_now(flush=True)
    store_scrub.finish(db, rules.RULES_VERSION - 1)

    def raw():
        data = b""
        for p in (paths.db_path(), paths.db_path() + "-wal"):
            if os.path.exists(p):
                data += open(p, "rb").read()
        return data

    leaked = [fid for fid, _, _, fragments, _ in forms if any(f.encode() in raw() for f in fragments)]
    assert leaked, "the old rules stored the forms (or the test proves nothing)"
    result = CliRunner().invoke(cli, ["rescrub", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["rules_version"] == rules.RULES_VERSION
    still = [fid for fid, _, _, fragments, _ in forms if any(f.encode() in raw() for f in fragments)]
    assert still == []
    assert store_scrub.scrubbed_with(store.open_db()) == rules.RULES_VERSION
