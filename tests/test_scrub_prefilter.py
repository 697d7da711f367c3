"""The scrubber's shortcuts pick exactly what the slow definitions would (issue #10's drain speed).

- `_scan` (runs of name characters judged once, as int masks) finds the rules whose keyword or
  trigger occurs in the text: the definition is one substring test per keyword.
- The assignment pass, walking only the runs `_scan` marks, redacts what it redacts walking
  every keyword hit.
- `Rule.may_match` never turns away a text the rule's pattern matches.
- A small run cache (evicted often), or one emptied by another thread at any moment, changes nothing.
"""

import random
import re

import pytest
import secret_corpus

from kirolearn.privacy import scrub
from kirolearn.privacy import table as scrub_table
from kirolearn.privacy.scrub import Scrubber


@pytest.fixture(scope="module")
def cases():
    return secret_corpus.credential_cases(1)


@pytest.fixture(scope="module")
def texts(cases):
    Scrubber()  # builds the index _scan reads
    rng = random.Random(3)
    base = [c.text for c in cases][::2] + secret_corpus.ordinary_lines(300)
    base += [
        "tests/test_mod_1.py::test_1 PASSED\ntests/test_mod_2.py::test_2 PASSED",
        "export API_TOKEN=tok_0123456789abcdef01234567\nrows 42 done",
        "[REDACTED:secret-assignment] and [REDACTED:aws-access-key] only",
        "api_key: [REDACTED:generic-api-key] -- the task is done, ask again",
        "password = letmein\n[db]\nhost = x",
    ]
    out = list(base)
    for t in rng.sample(base, len(base) // 3):
        out.append(t.upper())
        out.append("é " + t)  # non-ASCII: the lowered-words path
        out.append(t.replace("k", "\u212a"))  # Kelvin sign: lower() makes it an ASCII k
        out.append(t + " " + rng.choice(base))
    return out


def _pairs():
    """(keyword, item, case-sensitive) for every built-in trigger and catalogue keyword."""
    rules = scrub._builtin_rules()
    return [(t, r, not r.lower) for r in rules for t in r.triggers] + [
        (kw, rule, False) for rule in scrub_table.table().rules for kw in rule.keywords
    ]


def _expected(text, pairs):
    plain = re.sub(r"\[REDACTED:[A-Za-z0-9_\-]{1,64}\]", " ", text)  # a marker's type triggers nothing
    low = plain.lower()
    return {item for kw, item, cased in pairs if kw in (plain if cased else low)}


def test_scan_finds_exactly_the_rules_whose_keyword_occurs(texts):
    pairs = _pairs()
    for text in texts:
        for _ in range(2):  # first from cold runs, then from remembered ones
            found, _ = scrub._scan(text, text.lower())
            assert found == _expected(text, pairs), text[:200]


def test_the_assignment_pass_sees_every_hit_that_matters(texts):
    for text in texts:
        _, runs = scrub._scan(text, text.lower())
        some, every = Scrubber(), Scrubber()
        if runs is not None:
            assert some._keyword_pass(text, runs) == every._keyword_pass(text, None), text[:200]
            assert some.counts == every.counts


def test_may_match_never_turns_away_a_match(cases):
    by_id = {rule.id: rule for rule in scrub_table.table().rules}
    checked = 0
    for case in cases:
        rule = by_id[case.rule]
        if rule.regex.search(case.text):
            assert rule.may_match(case.text, case.text.lower()), (rule.id, rule.starts, case.text[:200])
            checked += 1
    assert checked >= len(by_id) * 2


def test_leading_literals():
    assert scrub_table._leading_literals("new-relic|newrelic|new_relic") == (
        "new-relic",
        "newrelic",
        "new_relic",
    )
    assert scrub_table._leading_literals("linked[_-]?in") == ("linked",)
    assert scrub_table._leading_literals(r"\bAKCp[A-Za-z0-9]{69}\b") == ("AKCp",)
    assert scrub_table._leading_literals("abc?d") == ("ab",)  # the c is optional
    assert scrub_table._leading_literals("x[|]y|z") == ("x", "z")
    assert scrub_table._leading_literals("(?-i:[Oo]kta|OKTA)") == ()
    assert scrub_table._leading_literals("(a|b)|c") == ()


def test_a_lob_key_needs_its_name_and_a_twilio_key_its_case():
    lob = "test_" + "0123456789abcdef0123456789abcdef012"
    assert lob not in Scrubber().scrub_text(f"lob: {lob}")
    rule = {r.id: r for r in scrub_table.table().rules}["lob-api-key"]
    assert rule.may_match(f"LOB: {lob}", f"lob: {lob}")
    text = f"tests/test_mod.py::{lob} PASSED"
    assert not rule.may_match(text, text.lower())
    twilio = {r.id: r for r in scrub_table.table().rules}["twilio-api-key"]
    assert not twilio.may_match("the task is done", "the task is done")


def test_a_small_run_cache_changes_nothing(texts, monkeypatch):
    texts = texts[::3]
    expected = [Scrubber().scrub_text(t) for t in texts]
    monkeypatch.setattr(scrub, "_RUN_CACHE_SIZE", 7)
    monkeypatch.setattr(scrub, "_RUN_CACHE_MAX_LEN", 5)
    assert [Scrubber().scrub_text(t) for t in texts] == expected


class _Forgetful(dict):
    """A run cache another thread keeps clearing: emptied right after every look-up."""

    def get(self, key, default=None):
        value = super().get(key, default)
        self.clear()
        return value


def test_a_cache_cleared_under_a_text_changes_nothing(texts, monkeypatch):
    texts = texts[::3]
    pairs = _pairs()
    matters = [scrub._scan(t, t.lower())[1] for t in texts]
    outputs = [Scrubber().scrub_text(t) for t in texts]
    monkeypatch.setattr(scrub, "_RUN_VERDICTS", _Forgetful())
    for text, matter in zip(texts, matters):
        for _ in range(2):
            assert scrub._scan(text, text.lower()) == (_expected(text, pairs), matter), text[:200]
    assert [Scrubber().scrub_text(t) for t in texts] == outputs
