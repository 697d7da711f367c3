"""Issue #34: secret shapes and `<private>` spellings that still reached the store.

Each test names one shape the issue found stored; tests/shapes34.py builds the matrix of these
families under the transforms of tests/transforms.py (test_the_shapes_matrix below) and the
look-alikes that must be kept.
"""

import json

import pytest

from kirolearn.privacy.scrub import Scrubber

BODY = "my home address is 12 Oak Street"
P = "[REDACTED:private]"


@pytest.fixture()
def s():
    return Scrubber()


# --------------------------------------------------------------------------------------------------
# B. <private> spellings
# --------------------------------------------------------------------------------------------------

SPELLINGS = {
    "html-twice": f"&amp;lt;private&amp;gt;{BODY}&amp;lt;/private&amp;gt;",
    "html-three-times": f"&amp;amp;lt;private&amp;amp;gt;{BODY}&amp;amp;lt;/private&amp;amp;gt;",
    "fullwidth": f"＜private＞{BODY}＜/private＞",
    "small-form": f"﹤private﹥{BODY}﹤/private﹥",
    "zero-width": f"<pri\u200bvate>{BODY}</pri\u200bvate>",
    "zero-width-open-only": f"<p\u200brivate>{BODY}</private>",
    "word-joiner": f"<priv\u2060ate>{BODY}</priv\u2060ate>",
    "soft-hyphen-html": f"<pri&#173;vate>{BODY}</pri&#173;vate>",
    "markdown-escaped": f"\\<private\\>{BODY}\\</private\\>",
    "json-slash": f"<private>{BODY}<\\/private>",
}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
@pytest.mark.parametrize("carrier", ["bare", "prose", "html", "json"])
def test_private_spellings_are_redacted(s, name, carrier):
    tag = SPELLINGS[name]
    text = {"bare": tag, "prose": f"note {tag} thanks", "html": f"<p>{tag}</p>",
            "json": json.dumps({"prompt": f"note {tag} thanks"})}[carrier]
    out = s.scrub_text(text)
    assert "Oak" not in out, out
    assert "[REDACTED:private]" in out
    assert s.scrub_text(out) == out


def test_private_spellings_keep_their_surroundings(s):
    assert s.scrub_text(f"a {SPELLINGS['fullwidth']} b") == f"a {P} b"
    assert s.scrub_text(f"a {SPELLINGS['zero-width']} b") == f"a {P} b"
    assert s.scrub_text(f"a {SPELLINGS['html-twice']} b") == f"a {P} b"
    # the backslash before `<` is markdown's, outside the tag
    assert s.scrub_text(f"a {SPELLINGS['markdown-escaped']} b") == f"a \\{P} b"


@pytest.mark.parametrize("text", [
    "＜privateer＞x＜/privateer＞",
    "a ＜/private＞ stray closing tag",
    "the private\u200b key word alone",
    "public class Foo { pri\u200bvate int x; }",
    "\\<private/\\> is empty",
    "&amp;lt;privately&amp;gt; held",
    "private < public and public > protected",
])
def test_private_look_alikes_are_kept(s, text):
    assert s.scrub_text(text) == text
