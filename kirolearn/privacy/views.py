"""Decoded views of a text, with the way back to the original's offsets.

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


class Lazy:
    """A pattern compiled on first use (the prompt hook imports this module with the scrubber and
    must not pay for patterns its text never needs)."""

    __slots__ = ("_args", "_rx")

    def __init__(self, *args) -> None:
        self._args = args
        self._rx = None

    def __getattr__(self, name: str):
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(*self._args)
        return getattr(rx, name)


# decoded text is searched once more (`%2522`); `%EF%BC%9C` is one escape
_UTF8_PCT = (
    r"%[CDcd][0-9A-Fa-f]%[89ABab][0-9A-Fa-f]|%[Ee][0-9A-Fa-f](?:%[89ABab][0-9A-Fa-f]){2}"
    r"|%[Ff][0-7](?:%[89ABab][0-9A-Fa-f]){3}"
)
_ESCAPE_RE = Lazy(
    r"\\u([0-9a-fA-F]{4})|\\([/\"\\nrt])|(" + _UTF8_PCT + r")|%([0-9A-Fa-f]{2})"
    r"|&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z]{2,8});"
)
# no URL escapes: a secret may hold `%` + two hex digits (facebook's `id%token`)
_ESCAPE_NO_URL_RE = Lazy(
    r"\\u([0-9a-fA-F]{4})|\\([/\"\\nrt])|(?!)(x)|(?!)(x)|&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z]{2,8});"
)
_URL_ESCAPE_RE = Lazy(r"%[0-9A-Fa-f]{2}")
_JSON_CHARS = {"/": "/", '"': '"', "\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_ENTITIES = {
    "lt": "<",
    "gt": ">",
    "amp": "&",
    "quot": '"',
    "apos": "'",
    "sol": "/",
    "colon": ":",
    "equals": "=",
    "nbsp": " ",
    "num": "#",
    "percnt": "%",
    "plus": "+",
    "commat": "@",
    "lbrack": "[",
    "rbrack": "]",
    "lbrace": "{",
    "rbrace": "}",
    "comma": ",",
    "period": ".",
}


def has_escapes(text: str) -> bool:
    """Whether the text may hold an escape the escape view decodes (a cheap first test)."""
    return ("\\" in text and ("\\u" in text or "\\/" in text or '\\"' in text)) or "%" in text or "&" in text


class View:
    """A decoded text and the map back: `pieces` are (view start, original start, view length,
    original length), in order; a piece is copied (equal lengths) or one escape (view length 1)."""

    __slots__ = ("text", "_vstarts", "_pieces", "joins")

    def __init__(self, text: str, pieces: list, joins: list | None = None) -> None:
        self.text = text
        self._pieces = pieces
        self._vstarts = [p[0] for p in pieces]
        self.joins = joins or []  # view offsets where a line break was removed

    def span(self, s: int, e: int) -> tuple[int, int]:
        """The original span of view span [s, e) (e > s): every escape it touches, whole."""
        i = bisect.bisect_right(self._vstarts, s) - 1
        vs, os_, vl, ol = self._pieces[i]
        start = os_ + (s - vs) if vl == ol else os_
        j = bisect.bisect_right(self._vstarts, e - 1) - 1
        vs, os_, vl, ol = self._pieces[j]
        end = os_ + (e - vs) if vl == ol else os_ + ol
        return start, end


def _decode_once(text: str, url: bool = True) -> tuple[str, list] | None:
    out = []
    pieces = []
    last = v = 0
    changed = False
    for m in (_ESCAPE_RE if url else _ESCAPE_NO_URL_RE).finditer(text):
        u, slash, utf8, pct, ent = m.groups()
        if utf8 is not None:
            try:
                ch = bytes.fromhex(utf8.replace("%", "")).decode("utf-8")
            except UnicodeDecodeError:
                # an overlong or surrogate form: left as written
                continue
        elif u is not None:
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
        # copied from inner: split again where inner's pieces split
        if vl == ol:
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


def escape_views(text: str) -> list:
    """Decoded views of the text: JSON escapes (`\\uXXXX`, `\\/`, `\\"`, `\\n`, ...) and HTML
    entities decoded; and, when it holds URL escapes, the same with `%XX` decoded too (twice
    over, for double encoding). Empty when the text holds no escape."""
    out = []
    first = _decode_once(text, url=False)
    if first is not None:
        out.append(View(*first))
    if _URL_ESCAPE_RE.search(text):
        full = _decode_once(text)
        if full is not None:
            view = View(*full)
            second = _decode_once(view.text)
            if second is not None:
                view = View(second[0], _compose(second[1], view))
            out.append(view)
    return out


def escape_view(text: str) -> View | None:
    """The most decoded view (see escape_views), or None."""
    views = escape_views(text)
    return views[-1] if views else None


# a break with token characters on both sides, real or a JSON `\n` escape
_TOKEN_CHARS = "A-Za-z0-9+/=_\\-."
_TOKEN_SET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-."
_TOKEN_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA", "A3T", "eyJ", "ZXlK")
_ESCAPED_BREAK_RE = Lazy(r"[" + _TOKEN_CHARS + r"](\\r?\\n)[ \t]*(?=[" + _TOKEN_CHARS + r"])")
# a new assignment or entry (`PORT=8080`, `- name`) is not a continuation
_NEW_ENTRY_RE = Lazy(r"[A-Za-z_][A-Za-z0-9_.\-]{0,80}[ \t]*(?:=(?![=\r\n]|$)|:[ \t]|:$)|-[ \t]", re.M)


_CONSONANT_RUN_RE = Lazy(r"[b-df-hj-np-tv-z]{3}", re.I)


def _new_entry(text: str, at: int) -> bool:
    """Whether the line from `at` starts a new assignment or entry (_NEW_ENTRY_RE), and not a token's
    tail whose base64 padding looks like one (`g4B3Z3yDSoyq=",`): an entry's name is not a mix of
    upper case, lower case and digits."""
    m = _NEW_ENTRY_RE.match(text, at)
    if not m:
        return False
    name = m.group(0).rstrip("=: \t")
    mixed = (
        any(c.isupper() for c in name) and any(c.islower() for c in name) and any(c.isdigit() for c in name)
    )
    return not mixed


def wordlike(piece: str) -> bool:
    """Letters that read as a word (PASSED, done, Verbose): one case or capitalised, and no three
    consonants (y counted) in a row (uyftxvv, a piece of a random token, has five). A random
    token cut into such a piece is not joined: the known limit of the wrapped-token view."""
    return (piece.islower() or piece.isupper() or piece[1:].islower()) and not _CONSONANT_RUN_RE.search(piece)


_VALUE_START_WORDS = ("bearer", "password", "passwd", "token", "secret")


def value_start(before: str) -> bool:
    """Whether a piece written after `before` starts a value: after `=`, or after `Bearer ` or
    `password ` (a wrapped value's first piece may read as a word: `Bearer oha` + `zrydar…`)."""
    b = before.rstrip(" \t\"'")
    if len(b) == len(before):
        return before.endswith("=")
    return b.endswith("=") or b[-8:].lower().endswith(_VALUE_START_WORDS)


def breaks(text: str, start: int = 0, end: int | None = None) -> list:
    """(start, end, left run, right run) of each line break that may cut a token in two: token
    characters on both sides (after the next line's indentation), the left run not a plain word
    (PASSED, done), the next line not a new entry (`PORT=8080`, `- item`). Real breaks are found
    line by line with string methods (a regex over every character costs more); JSON `\\n`
    escapes with a regex, when the text has any."""
    out = []
    if "\n" in text:
        tokens = _TOKEN_SET
        # only the lines of text[start:end] (whole lines)
        if start or end is not None:
            start = text.rfind("\n", 0, start) + 1 if start else 0
            stop = len(text) if end is None else text.find("\n", min(end, len(text)))
            stop = len(text) if stop < 0 else stop
            lines = text[start:stop].split("\n")
            # the last line's break, if any, is judged with the next line
            lines.append("")
            if stop < len(text):
                nxt = text.find("\n", stop + 1)
                lines[-1] = text[stop + 1 : len(text) if nxt < 0 else nxt]
        else:
            lines = text.split("\n")
        pos = start
        for i in range(len(lines) - 1):
            line = lines[i]
            brk = pos + len(line)
            pos = brk + 1
            if not line:
                continue
            if line[-1] == "\r":
                line = line[:-1]
                brk -= 1
                if not line:
                    continue
            if line[-1] not in tokens:
                continue
            # id:secret split after its colon
            left = line[len(line.rstrip(tokens + ":")) :].lstrip(":")
            if (
                left.isalpha()
                and len(left) < 16
                and wordlike(left)
                and not left.startswith(_TOKEN_PREFIXES)
                and (not value_start(line[: len(line) - len(left)]))
            ):
                continue
            nxt = lines[i + 1]
            body = nxt.lstrip(" \t")
            if not body or body[0] not in tokens:
                continue
            e = pos + len(nxt) - len(body)
            if _new_entry(text, e):
                continue
            out.append((brk, e, left, body[: len(body) - len(body.lstrip(tokens))]))
    if "\\n" in text:
        for m in _ESCAPED_BREAK_RE.finditer(text):
            s, e = m.start(1), m.end()
            if _new_entry(text, e):
                continue
            before = text[max(0, s - 600) : s]
            after = text[e : e + 600]
            out.append(
                (
                    s,
                    e,
                    before[len(before.rstrip(_TOKEN_SET)) :],
                    after[: len(after) - len(after.lstrip(_TOKEN_SET))],
                )
            )
        out.sort()
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


def redacted_spans(view_text: str, scrubbed: str, marker_re: re.Pattern[str]) -> list:
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
        segs.append(scrubbed[last : m.start()])
        kinds.append(m.group(0)[len("[REDACTED:") : -1])
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
        # cannot happen for a scrubber's output; redact everything
        return [(0, n, cuts_kind[0])]
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
        # a marker already in the view
        if not marker_re.fullmatch(view_text, s, max(e, s + 1)):
            out.append((s, max(e, s + 1), cuts_kind[i - 1]))
    return out
