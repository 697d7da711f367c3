"""Issue #23's transform matrix: every catalogue sample x every transform x every carrier.

Transforms (tests/transforms.py): one JSON \\u escape, a JSON-escaped string (`\\/`, `\\"`, `\\n`),
URL encoding, HTML entities, single and double shell quotes, a line break inside the token,
HTTP Basic auth, an .env / export line under a name that holds no secret word. Carriers: a
prompt, a shell command, a tool output. Then keep on ordinary text written the same ways, and
the held-out corpus of gitleaks' own test samples (bench/data/gitleaks_samples.jsonl.gz).
"""

import random

import pytest
import secret_corpus
import transforms
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kirolearn.privacy import views
from kirolearn.privacy.scrub import Scrubber

CATALOGUE = [
    (c.rule, c.text, c.secret) for c in secret_corpus.credential_cases(1) if c.carrier == "tool_output"
]
COMMON = transforms.common_cases(random.Random(5))

# Known gaps, each a (rule, transform) whose sample the property test may see leak; the full
# matrix below bounds how often. A break inside `user:password` right at the colon, or after a
# prefix that reads as a word (`xapp`), leaves two pieces that are no token on their own;
# facebook's `id%token` form holds a `%XX` that URL decoding changes. The line-break transform
# never cuts a token's literal prefix nor leaves a piece that reads as a word (see
# transforms.line_break): both are the wrapped-token view's limits, reported as such.
KNOWN_GAPS = {
    ("sidekiq-secret", "line-break"),
    ("sidekiq-sensitive-url", "line-break"),
    ("slack-app-token", "line-break"),
    ("mongodb-connection-string", "line-break"),
    ("sidekiq-secret", "env-neutral-name"),
    ("facebook-access-token", "url-encoded"),
    ("facebook-access-token", "json-u-escape"),
    ("facebook-access-token", "line-break"),  # `%` (its id%token form) is no token character
    ("flutterwave-encryption-key", "line-break"),  # the break cuts its keyword FLWSECK_TEST: no rule looks
}


@pytest.fixture(scope="module")
def scrubber():
    return Scrubber()


# derandomize: CI sees the same 400 cases every run (`--hypothesis-seed=N` explores others locally)
@settings(
    max_examples=400,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    case=st.sampled_from(CATALOGUE + COMMON),
    transform=st.sampled_from(sorted(transforms.TRANSFORMS)),
    carrier=st.sampled_from(transforms.CARRIERS),
    seed=st.integers(0, 2**16),
)
def test_every_sample_under_every_transform_in_every_carrier_is_redacted(case, transform, carrier, seed):
    rule, text, secret = case
    if not transforms.applies(transform, rule, secret) or (rule, transform) in KNOWN_GAPS:
        return
    t, decode = transforms.TRANSFORMS[transform](text, secret, random.Random(seed))
    carried = transforms.carry(t, carrier)
    out = Scrubber().scrub_text(carried)
    assert not transforms.leaks(out, secret, decode), (rule, transform, carrier, carried, out)


def test_the_whole_matrix_reaches_its_floor(scrubber):
    common = transforms.matrix(scrubber, COMMON)
    assert common["recall"] == 1.0, common["missed"][:5]
    catalogue = transforms.matrix(scrubber, CATALOGUE)
    assert catalogue["recall"] >= 0.995, catalogue["missed"][:10]
    assert {(kind, name) for kind, name, _, _ in catalogue["missed"]} <= KNOWN_GAPS


def test_ordinary_text_written_the_same_ways_is_kept(scrubber):
    texts = transforms.ordinary_texts(secret_corpus.ordinary_lines(1200, seed=31), random.Random(4))
    result = transforms.keep(scrubber, texts)
    assert result["keep"] >= 0.99, result["changed"][:5]


def test_held_out_gitleaks_samples(scrubber):
    """gitleaks' own true and false positives, never used to tune the rules: recall per carrier."""
    result = secret_corpus.measure_heldout(scrubber)
    assert result["rules"] >= 200 and result["cases"] >= 10000
    for carrier, recall in result["recall_by_carrier"].items():
        assert recall >= 0.995, (carrier, {k: v[0][:200] for k, v in list(result["missed"].items())[:8]})


def test_scrubbing_stays_idempotent_under_the_transforms(scrubber):
    rng = random.Random(9)
    for rule, text, secret in rng.sample(CATALOGUE, 60) + COMMON:
        for name, transform in transforms.TRANSFORMS.items():
            carried = transforms.carry(transform(text, secret, rng)[0], "tool_output")
            once = scrubber.scrub_text(carried)
            assert scrubber.scrub_text(once) == once, (rule, name, carried)


# --------------------------------------------------------------------------------------------------
# The views themselves: decoded offsets map back to the original
# --------------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="abcXYZ019 /", min_size=1, max_size=6),
            st.sampled_from(
                ["\\u0041", "\\/", "%2F", "%41", "&lt;", "&#x41;", "&amp;lt;", "%252F", '\\"', "\\n"]
            ),
        ),
        max_size=12,
    )
)
def test_every_view_span_maps_back_to_whole_escapes(parts):
    text = "".join(parts)

    def decode(sub, url):
        once = views._decode_once(sub, url)
        sub = once[0] if once else sub
        if url:
            twice = views._decode_once(sub)
            sub = twice[0] if twice else sub
        return sub

    found = views.escape_views(text)
    for view, url in zip(found, [False, True] if len(found) == 2 else [not views._decode_once(text, False)]):
        assert decode(text, url) == view.text
        for s in range(len(view.text)):
            for e in range(s + 1, min(len(view.text), s + 4) + 1):
                a, b = view.span(s, e)
                assert 0 <= a < b <= len(text)
                # the original span holds whole escapes: decoded alone, it holds the view's characters
                assert view.text[s:e] in decode(text[a:b], url), (text, view.text[s:e], text[a:b])


def test_redacted_spans_recover_each_redaction():
    marker = __import__("re").compile(r"\[REDACTED:[A-Za-z0-9_\-]{1,64}\]")
    view = 'a="s3cret" b="s3cret" c=[REDACTED:x] d'
    out = 'a="[REDACTED:k]" b="[REDACTED:k]" c=[REDACTED:x] d'
    spans = views.redacted_spans(view, out, marker)
    assert [(view[s:e], k) for s, e, k in spans] == [("s3cret", "k"), ("s3cret", "k")]
    # A kept segment that also occurs inside the secret: the span covers every cut it could be.
    view = "x=ab:cd:ef y"
    spans = views.redacted_spans(view, "x=[REDACTED:k]:ef y", marker)
    assert all(s <= 2 and e >= 5 for s, e, _ in spans)


@settings(max_examples=150, deadline=None, database=None)
@given(
    st.lists(
        st.sampled_from(["ghp_A1b2C3", "d4E5f6", "PASSED", "x=1", "  key9Z", "", "\r", "done", "AKIAQW"]),
        min_size=1,
        max_size=10,
    ),
    st.integers(0, 80),
    st.integers(0, 80),
)
def test_breaks_of_a_slice_are_the_breaks_of_its_lines(lines, a, b):
    text = "\n".join(lines)
    whole = views.breaks(text)
    part = views.breaks(text, min(a, b), max(a, b))
    assert set(part) <= set(whole)
    lo = text.rfind("\n", 0, min(a, b)) + 1 if min(a, b) else 0
    hi = text.find("\n", min(max(a, b), len(text)))
    hi = len(text) if hi < 0 else hi
    assert {x for x in whole if lo <= x[0] <= hi} <= set(part)
