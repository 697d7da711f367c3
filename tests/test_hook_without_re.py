"""The prompt hook's text code reads by hand what regular expressions read elsewhere, and finds the same.

`re` (with the `enum` it imports) costs every hook call ~25M instructions, a
bare interpreter's ~40M: the hook path keeps it for dates and unprintable text.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kirolearn.core import textcut
from kirolearn.recall import lexical, when

# letters, digits of several scripts, dots, underscores, backticks, marks and white space of all kinds
ALPHABET = st.sampled_from(
    list("aZé.._`!?:;-/ \t\n\x0b\u2028\u3000")
    + ["U.S.", "e.g.", "٣", "²", "ſ", "ı", "İ", "K", "ⅷ", "_x", "1.2.", "a.b.c", "May", "19", "2023"]
)
TEXTS = st.lists(ALPHABET, max_size=40).map("".join) | st.text(max_size=60)
OLD_WORD = re.compile(r"(?:[^\W\d_]\.){2,}|\w+", re.UNICODE)


@settings(max_examples=3000, deadline=None)
@given(TEXTS)
def test_words_are_the_regex_tokens(text):
    assert lexical.words(text) == OLD_WORD.findall(text)


def _old_cut(text: str, limit: int, marker: str = textcut.MARKER) -> str:
    """textcut.cut as it was with regular expressions."""
    if len(text) <= limit:
        return text
    room = limit - len(marker)
    if room <= 0:
        return marker.strip()[: max(limit, 0)]
    head = text[: room + 1]
    floor = room // 2
    at = head.rfind("\n", 0, room + 1)
    if at < floor:
        ends = [m.end() for m in re.compile(r"[.!?:;](?=\s)").finditer(head, 0, room)]
        at = ends[-1] if ends and ends[-1] >= floor else -1
    if at < floor:
        spaces = [m.start() for m in re.finditer(r"\s", head[: room + 1])]
        at = spaces[-1] if spaces and spaces[-1] >= floor // 2 else room
    piece = text[:at]
    fence_at = span_at = None
    span_len = 0
    for m in re.compile(r"`+").finditer(piece):
        n = len(m.group())
        if fence_at is not None:
            if n >= 3:
                fence_at = None
        elif span_at is not None:
            if n == span_len:
                span_at = None
        elif n >= 3:
            fence_at = m.start()
        else:
            span_at, span_len = m.start(), n
    open_at = fence_at if fence_at is not None else span_at
    piece = (piece if open_at is None else piece[:open_at]).rstrip()
    return (piece + marker) if piece else marker.strip()


@settings(max_examples=3000, deadline=None)
@given(TEXTS, st.integers(min_value=0, max_value=50))
def test_cut_cuts_where_the_regex_version_cut(text, limit):
    assert textcut.cut(text, limit) == _old_cut(text, limit)


@settings(max_examples=3000, deadline=None)
@given(TEXTS)
def test_a_date_is_never_missed_by_the_quick_check(text):
    if any(pattern.search(text) for _, pattern, _ in when._patterns()):
        assert when._may_name_a_date(text)


def test_dates_still_found():
    assert when.windows("what did we change on 3 May 2023?")[0]
    assert when.windows("which city in September?")[0]
    assert not when._may_name_a_date("the export broke again after the migration, line 42")


def test_a_prompt_hook_that_prints_memory_imports_neither_re_nor_json(project, add_record, tmp_path):
    """The whole prompt path, printing included, in a fresh interpreter (as `kirolearn-hook` runs it)."""
    add_record(project, "Export job: database is locked", "use timeout=30 and WAL", observation_type="error")
    # -S and the source folder on sys.path: an editable install's import finder loads re at start-up
    root = str(Path(__file__).resolve().parent.parent)
    code = (
        "import sys\n"
        "assert 're' not in sys.modules and 'json' not in sys.modules, 'loaded at start-up'\n"
        f"sys.path.insert(0, {root!r})\n"
        "sys.argv = ['kirolearn-hook']\n"
        "from kirolearn.hook import main\n"
        "main()\n"
        "sys.stdout.flush()\n"
        "print('\\nLOADED', sorted(m for m in ('re', 'json', 'enum') if m in sys.modules), file=sys.stderr)\n"
    )
    payload = json.dumps(
        {
            "hook_event_name": "userPromptSubmit",
            "cwd": str(project),
            "session_id": "h1",
            "prompt": "why is the export job locked",
        }
    ).encode()
    out = subprocess.run([sys.executable, "-S", "-c", code], input=payload, capture_output=True, timeout=60)
    assert "> - Export job: database is locked: use timeout=30 and WAL · error".encode() in out.stdout
    assert out.stderr.decode().strip().endswith("LOADED []"), out.stderr
