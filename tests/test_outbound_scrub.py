"""The re-scrub of recalled text on its way out (architecture.md rule 9) and when the hook may skip it.

Every writer scrubs what it stores, and the store marks the rules version its text was scrubbed
with (scrub_state.scrubbed_with). When that mark is the installed version and no extra pattern is
configured, the catalogue pass could change nothing (scrubbing is idempotent), so the prompt hook
skips it and keeps only the sanitising of every line; anything else gets the full pass.
"""

import json
import subprocess
import sys

import pytest
from conftest import hook_env, run_hook

from kirolearn.privacy import rules
from kirolearn.recall import context

KEY = "AKIA" + "Z7VQ3K9XW2ML4PTB"


@pytest.fixture
def leaky_store(project, add_record):
    """A store holding a raw key, as a record kept before the rules that catch it would be."""
    add_record(
        project,
        "AWS deploy credentials",
        f"the deploy used {KEY} from the vault",
        observation_type="decision",
    )

    def mark(version):
        add_record.db.execute("update scrub_state set value = ? where key = 'scrubbed_with'", [str(version)])
        add_record.db.conn.commit()

    return mark


def prompt_hook(project, session):
    payload = {
        "hook_event_name": "userPromptSubmit",
        "cwd": str(project),
        "session_id": session,
        "prompt": "aws deploy credentials",
    }
    result = run_hook(stdin=json.dumps(payload).encode())
    assert result.returncode == 0, result.stderr
    return result.stdout.decode()


def test_a_record_kept_under_older_rules_is_rescrubbed_by_the_hook(project, leaky_store):
    leaky_store(rules.RULES_VERSION - 1)
    out = prompt_hook(project, "s-old")
    assert "AWS deploy credentials" in out and KEY not in out and "[REDACTED:aws-access-key]" in out


def test_a_store_marked_with_newer_rules_is_rescrubbed_too(project, leaky_store):
    leaky_store(rules.RULES_VERSION + 1)  # a downgraded kirolearn reads a newer store: trust nothing
    assert KEY not in prompt_hook(project, "s-new")


def test_extra_patterns_force_the_full_pass(project, add_record, home):
    add_record(
        project,
        "Billing ticket",
        "customer ACME-123456 asked about the deploy invoice",
        observation_type="decision",
    )
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('[scrub.extra_patterns]\nticket = "ACME-[0-9]{6}"\n')
    conf = context.settings()
    assert conf["scrub_extra"] == {"ticket": "ACME-[0-9]{6}"}
    text, _ = context.for_prompt(
        context.lexical.connect_readonly(), str(project), "billing deploy invoice", conf=conf
    )
    assert "Billing ticket" in text and "ACME-123456" not in text and "[REDACTED:ticket]" in text


def probe(project, session):
    """Run one prompt's recall in a fresh interpreter: (printed text, whether the catalogue loaded)."""
    code = (
        "import json, sys; from kirolearn.recall import context; "
        f"text = context.for_event({{'trigger': 'userPromptSubmit', 'session_id': {session!r}, "
        f"'project_root': {str(project)!r}, 'prompt': 'aws deploy credentials'}}); "
        "print(json.dumps([text, 'kirolearn.privacy.scrub' in sys.modules, 'kirolearn.privacy.rules' in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=hook_env(), capture_output=True, timeout=30, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_store_scrubbed_with_the_installed_rules_skips_the_catalogue(project, leaky_store):
    leaky_store(rules.RULES_VERSION)
    text, scrub_loaded, rules_loaded = probe(project, "s-cur")
    assert "AWS deploy credentials" in text
    assert not scrub_loaded and not rules_loaded  # the ~30 ms of the hook this saves
    leaky_store(rules.RULES_VERSION - 1)
    text, scrub_loaded, _ = probe(project, "s-cur2")
    assert scrub_loaded and KEY not in text


def test_lines_are_still_sanitised_when_the_catalogue_is_skipped(project, add_record):
    add_record(
        project,
        "Terminal colours",
        "deploy log \x1b[31mred\x1b[0m\u202eevil\rline two",
        observation_type="decision",
    )
    text, _ = context.for_prompt(context.lexical.connect_readonly(), str(project), "terminal colours deploy")
    assert "Terminal colours" in text
    assert "\x1b" not in text and "\u202e" not in text and "\r" not in text
    # one line per record: the carriage return is gone, its text stays inside the record's quoted line
    assert any(line.startswith("> - ") and "line two" in line for line in text.splitlines())


def test_the_cheap_rules_version_read_matches_the_module():
    assert context.installed_rules_version() == rules.RULES_VERSION


def test_sanitising_skips_only_text_it_would_not_change():
    from kirolearn.privacy import sanitize

    # printable, less the few invisible characters isprintable() accepts (Hangul fillers, variation selectors 17-256)
    printable = "".join(ch for ch in map(chr, range(0x110000)) if ch.isprintable() and sanitize.is_plain(ch))
    assert len(printable) > 100_000 and sanitize.is_plain(printable)
    assert sanitize._clean(printable + "\n" + printable) == printable + "\n" + printable
    for hostile in (
        "\x1b[31mred",
        "a\u202eb",
        "a\rb",
        "a\u2028b",
        "a\tb",
        "a\x85b",
        "a\ud800b",
        "a\x9b2Jb",
        "a\u200bb",
        "a\u2060b",
        "a\ufeffb",
        "a\U000e0041b",
        "a\U000e0100b",
        "a\u3164b",
    ):
        assert sanitize.clean_text(hostile) == sanitize._clean(hostile) != hostile
