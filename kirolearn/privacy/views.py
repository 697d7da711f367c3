"""Decoded views of a text, with the way back to the original's offsets (issue #23).

Tools rarely print a secret in its plain form: JSON escapes it (`\\u0067hp_…`, `postgres:\\/\\/…`),
a query string URL-encodes it (`%7B%22password%22…`), HTML escapes it (`&lt;private&gt;`), a
terminal or a pretty-printer wraps it across lines. A `View` is such a text decoded, plus a map
from each of its offsets to the original's, so a span the rules find in the view is redacted in
the original text (whose other bytes stay as they were).

Standard library only; pure.
"""

from __future__ import annotations

import bisect
import re

# One escape of the three encodings; the decoded text is searched again once (double encoding:
# `%2522`, `&amp;lt;`).
_ESCAPE_RE = re.compile(
    r"\\u([0-9a-fA-F]{4})|\\([/\"\\nrt])|%([0-9A-Fa-f]{2})|&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z]{2,8});")
_JSON_CHARS = {"/": "/", '"': '"', "\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'", "sol": "/", "colon": ":",
             "equals": "=", "nbsp": " ", "num": "#", "percnt": "%", "plus": "+", "commat": "@",
             "lbrack": "[", "rbrack": "]", "lbrace": "{", "rbrace": "}", "comma": ",", "period": "."}


def has_escapes(text: str) -> bool:
    """Whether the text may hold an escape the escape view decodes (a cheap first test)."""
    return ("\\" in text and ("\\u" in text or "\\/" in text or '\\"' in text)) or "%" in text or "&" in text


class View:
    """A decoded text and the map back: `pieces` are (view start, original start, view length,
    original length), in order; a piece is copied (equal lengths) or one escape (view length 1)."""

    __slots__ = ("text", "_vstarts", "_pieces", "joins")

    def __init__(self, text: str, pieces: list, joins: "list | None" = None) -> None:
        self.text = text
        self._pieces = pieces
        self._vstarts = [p[0] for p in pieces]
        self.joins = joins or []  # view offsets where a line break was removed

    def span(self, s: int, e: int) -> "tuple[int, int]":
        """The original span of view span [s, e) (e > s): every escape it touches, whole."""
        i = bisect.bisect_right(self._vstarts, s) - 1
        vs, os_, vl, ol = self._pieces[i]
        start = os_ + (s - vs) if vl == ol else os_
        j = bisect.bisect_right(self._vstarts, e - 1) - 1
        vs, os_, vl, ol = self._pieces[j]
        end = os_ + (e - vs) if vl == ol else os_ + ol
        return start, end


def _decode_once(text: str) -> "tuple[str, list] | None":
    out = []
    pieces = []
    last = v = 0
    changed = False
    for m in _ESCAPE_RE.finditer(text):
        u, slash, pct, ent = m.groups()
        if u is not None:
            ch = chr(int(u, 16))
            if 0xD800 <= ord(ch) <= 0xDFFF:
                continue  # half a surrogate pair: left as written
        elif slash is not None:
            ch = _JSON_CHARS[slash]
        elif pct is not None:
            ch = chr(int(pct, 16))
        elif ent[0] == "#":
            try:
                ch = chr(int(ent[2:], 16) if ent[1] in "xX" else int(ent[1:]))
            except (ValueError, OverflowError):
                continue
        else:
            ch = _ENTITIES.get(ent.lower())
            if ch is None:
                continue
        s, e = m.span()
        if s > last:
            pieces.append((v, last, s - last, s - last))
            out.append(text[last:s])
            v += s - last
        pieces.append((v, s, 1, e - s))
        out.append(ch)
        v += 1
        last = e
        changed = True
    if not changed:
        return None
    if last < len(text):
        pieces.append((v, last, len(text) - last, len(text) - last))
        out.append(text[last:])
    return "".join(out), pieces


def _compose(outer: list, inner: View) -> list:
    """Pieces of a view of `inner.text` (outer) mapped onto inner's original."""
    composed = []
    for vs, os_, vl, ol in outer:
        a, b = inner.span(os_, os_ + ol) if ol else (0, 0)
        if vl == ol:  # copied from inner: split again where inner's pieces split
            pos = os_
            end = os_ + ol
            while pos < end:
                i = bisect.bisect_right(inner._vstarts, pos) - 1
                ivs, ios, ivl, iol = inner._pieces[i]
                take = min(end, ivs + ivl) - pos
                if ivl == iol:
                    composed.append((vs + pos - os_, ios + pos - ivs, take, take))
                else:
                    composed.append((vs + pos - os_, ios, 1, iol))
                pos += take
        else:
            composed.append((vs, a, vl, b - a))
    return composed


def escape_view(text: str) -> "View | None":
    """The text with JSON escapes (`\\uXXXX`, `\\/`, `\\"`, `\\n`, ...), URL `%XX` and HTML entity escapes decoded (twice
    over, for double encoding); None when it holds none."""
    first = _decode_once(text)
    if first is None:
        return None
    view = View(*first)
    second = _decode_once(view.text)
    if second is not None:
        view = View(second[0], _compose(second[1], view))
    return view


# A line break inside a token: token characters on both sides (after the next line's
# indentation), written as a real break or as a JSON `\n` escape.
_TOKEN_CHARS = "A-Za-z0-9+/=_\\-."
_BREAK_RE = re.compile(
    # a run that holds a digit, a symbol or both cases (a word such as PASSED or done is no piece
    # of a random token), then the break, then the next run
    r"(?<![" + _TOKEN_CHARS + r"])(?=[" + _TOKEN_CHARS + r"]{16}|[" + _TOKEN_CHARS + r"]*?(?:[0-9+/=_\-]|[a-z][A-Z]"
    r"|[A-Z][A-Z][a-z]))([" + _TOKEN_CHARS + r"]{1,600})(\r?\n|\\r?\\n)[ \t]*(?=([" + _TOKEN_CHARS
    + r"]{1,600}))")
# The next line starts a new assignment or entry (`PORT=8080`, `- name`): not a continuation.
_NEW_ENTRY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,80}[ \t]*(?:=|:[ \t]|:$)|-[ \t]")


def breaks(text: str) -> list:
    """(start, end, left run, right run) of each line break that may cut a token in two."""
    if "\n" not in text:
        return []
    out = []
    for m in _BREAK_RE.finditer(text):
        s, e = m.end(1), m.end()
        if _NEW_ENTRY_RE.match(text, e):
            continue
        out.append((s, e, m.group(1), m.group(3)))
    return out


def joined_view(text: str, cuts: list) -> View:
    """The text with the given line breaks ((start, end) spans) removed."""
    pieces = []
    out = []
    joins = []
    last = v = 0
    for s, e in cuts:
        if s > last:
            pieces.append((v, last, s - last, s - last))
            out.append(text[last:s])
            v += s - last
        joins.append(v)
        last = e
    pieces.append((v, last, len(text) - last, len(text) - last))
    out.append(text[last:])
    return View("".join(out), pieces, joins)


def redacted_spans(view_text: str, scrubbed: str, marker_re: "re.Pattern[str]") -> list:
    """(start, end, kind) in `view_text` of each redaction that turned it into `scrubbed`.

    The scrubber only replaces spans by markers, so `scrubbed` is the view's text cut into
    kept segments with a marker between each two. A segment that also occurs inside a secret
    makes the cut ambiguous: each span runs from the earliest start to the latest end that any
    consistent cut allows (more is redacted, never less). Markers already in the view are kept
    segments, not redactions.
    """
    segs = []
    kinds = []
    last = 0
    for m in marker_re.finditer(scrubbed):
        if m.start() == last and segs:  # two markers side by side: one cut
            last = m.end()
            continue
        segs.append(scrubbed[last:m.start()])
        kinds.append(m.group(0)[len("[REDACTED:"):-1])
        last = m.end()
    if not kinds:
        return []
    segs.append(scrubbed[last:])
    cuts_kind = kinds
    n = len(view_text)
    if not cuts_kind:
        return []
    k = len(segs) - 1
    if not view_text.startswith(segs[0]) or not view_text.endswith(segs[-1]):
        return [(0, n, cuts_kind[0])]  # cannot happen for a scrubber's output; redact everything
    lo = [0] * (k + 1)
    hi = [0] * (k + 1)
    lo[0] = hi[0] = 0
    lo[k] = hi[k] = n - len(segs[k])
    for i in range(1, k):
        p = view_text.find(segs[i], lo[i - 1] + len(segs[i - 1]) + 1)
        lo[i] = p if p >= 0 else n
    for i in range(k - 1, 0, -1):
        p = view_text.rfind(segs[i], 0, hi[i + 1] - 1)
        hi[i] = p if p >= 0 else 0
    out = []
    for i in range(1, k + 1):
        s = lo[i - 1] + len(segs[i - 1])
        e = hi[i]
        if e <= s:
            s, e = min(s, e), max(s, e)
        if not marker_re.fullmatch(view_text, s, max(e, s + 1)):  # a marker already in the view
            out.append((s, max(e, s + 1), cuts_kind[i - 1]))
    return out
