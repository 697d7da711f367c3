"""Scrub the texts of one turn in order, each with the open end of the text before it.

A secret can be split over two tool outputs of one turn: `aws_secret_access_key =` ends one, the
value alone starts the next. Neither text holds the secret with its name, so scrubbing each alone
keeps the value. `TurnCarry` remembers the last line of a text when it leaves a secret open (it
names a secret, a rule's trigger or a command word, and ends with an operator, a keyword, a PEM
header or a cut token) and, for the next few texts, also scrubs a window made of that line and
the start of the text; what the rules find in the text's part of the window is redacted in the
text too. A `<private>` span a text opens and does not close goes on in the texts after it, up to
its closing tag (or the turn's end).

    carry = TurnCarry(scrubber)          # one per session; reset() at each turn's start and end
    clean = carry.scrub_event(event)     # capture.events.scrub_event(event, scrubber), plus the carry
    clean = carry.scrub_text(text)       # or one text at a time (scrub_value: a JSON-like value)

Only texts of the fields a person or a tool wrote (CARRIED_FIELDS), of MIN_VALUE_CHARS or more
(a shorter one is an id, a count, a tool name), are handed the remembered line, and a plain word
at the start of a text is never taken for the value. The remembered lines are raw text held in
memory only, for the next `ttl` such texts (DEFAULT_TTL 4: a pre-tool command, then the post-tool
command and output). The window holds at most TAIL_CHARS of the remembered text's end and
HEAD_CHARS of the next text's first line (PEM_HEAD_CHARS after a PEM header: a key body runs
over many lines).

Standard library only; pure (no I/O).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from kirolearn.privacy import scrub as _scrub
from kirolearn.privacy import views as _views

__all__ = ["TurnCarry", "scrub_sequence"]

TAIL_CHARS = 256
HEAD_CHARS = 4096
PEM_HEAD_CHARS = 16384
DEFAULT_TTL = 4

# a line left open: an operator, PEM dashes, `password`/`Bearer`, a cut token
_OPEN_CHARS = "=:>(,"
_OPEN_WORDS = frozenset(
    "pass password passwd passphrase pw pwd secret token key bearer basic authorization auth "
    "credential credentials cookie login p".split()
)  # (`-p`: mysql's, sshpass')
_ENTRY_WORDS = ("password", "passwd", "login", "account")
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_TOKEN_CHARS = _ALNUM + "+/=_-."
_PRIVATE_OPEN = "<private>"
_PRIVATE_MARKER = _scrub.marker("private")
# short texts found not to leave a value open
CLOSED_CACHE_TEXT, CLOSED_CACHE_SIZE = 256, 4096
MIN_VALUE_CHARS = 6
# what a person or a tool wrote; the envelope is scrubbed without the carry
CARRIED_FIELDS = frozenset(("prompt", "tool_input", "tool_response", "assistant_response", "extra"))


def _generated_fields() -> frozenset:
    # down the layers; loaded when first used
    from kirolearn.capture.events import GENERATED_FIELDS

    return GENERATED_FIELDS


def _cut_token(run: str) -> bool:
    """Whether a run of token characters may be a piece of a token cut between two texts: not a
    word (`PASSED`, `Done`), a number, a path or a host, but letters and digits mixed, case flips,
    or a token's symbols (`ghp_`, `tok_3f…`). String methods only: the carry asks about every text."""
    if len(run) < 4:
        return False
    if run.isalpha():
        return not (run.islower() or run.isupper() or run.istitle())
    if run.isdigit():
        return False
    name, eq, value = run.rpartition("=")
    # `NAME=value`: open only when the value may be a token's start
    if eq and name:
        return _cut_token(value)
    return run.isalnum() or not _scrub.complete_item(run)


def _ends_open(end_of_line: str) -> bool:
    """Whether a line ends where a value is to come."""
    t = end_of_line.rstrip(" \t\"'")
    if not t:
        return False
    if t[-1] in _OPEN_CHARS or t.endswith("-----"):
        return True
    if t[-1] in "/%":  # a URL's path or user to come, smbclient's `user%`
        return True
    flag = t[t.rfind(" ") + 1 :]
    if flag[:1] == "-" and 2 <= len(flag) <= 32 and flag.lstrip("-")[:1].isalpha():
        # a flag's value to come: `redis-cli -a`, `ldapsearch -w`, `--password`
        return True
    word = t[len(t.rstrip(_ALNUM)) :]
    if word and word.lower() in _OPEN_WORDS:
        return word != "p" or t.endswith(" -p")
    # `ghp_` + `A1b2…` in the next text
    return _cut_token(t[len(t.rstrip(_TOKEN_CHARS)) :].strip("."))


class TurnCarry:
    """Scrubs consecutive texts of one turn with `scrubber`, each also with the open end of the one
    before it as context. Counts go to the scrubber's `counts`."""

    def __init__(self, scrubber: _scrub.Scrubber | None = None, *, ttl: int = DEFAULT_TTL) -> None:
        self.scrubber = scrubber if scrubber is not None else _scrub.default_scrubber()
        self.ttl = ttl
        self._tail: str | None = None
        self._left = 0
        self._cut_only = False
        self._private_open = False
        self._closed: set = set()

    @property
    def counts(self) -> Counter:
        return self.scrubber.counts

    def reset(self) -> None:
        """Forget the remembered line and any private span left open (a new turn, a new session)."""
        self._tail = None
        self._left = 0
        self._private_open = False

    def scrub_event(self, event: dict) -> dict:
        """capture.events.scrub_event with the carry: the fields a person or a tool wrote are
        scrubbed in order with it, the rest of the envelope as the scrubber alone would."""
        generated = _generated_fields()
        scrubber = self.scrubber
        return {
            k: v
            if k in generated
            else self.scrub_value(v)
            if k in CARRIED_FIELDS
            else scrubber.scrub_value(v)
            for k, v in event.items()
        }

    def scrub_value(self, value: object) -> object:
        """`Scrubber.scrub_value`, each string value scrubbed with the carry (keys without)."""
        return self.scrubber.walk(value, self.scrub_text)

    def scrub_text(self, text: str) -> str:
        """`Scrubber.scrub_text(text)`, plus what the open end of the texts before reveals in it."""
        scrubber = self.scrubber
        # a text before opened a private span and did not close it
        if self._private_open:
            joined = _PRIVATE_OPEN + text
            out = scrubber.scrub_text(joined)
            if out.startswith(_PRIVATE_MARKER):
                self._private_open = scrubber.private_unclosed(joined)
                return out
            self._private_open = False
        tail = self._tail
        if tail is not None and len(text.strip()) >= MIN_VALUE_CHARS:
            spans = self._spans_after(tail, text)
            if spans:
                text = self._mark(text, spans)
                self._tail = None  # the value it left open was found
            else:
                self._left -= 1
                if self._left <= 0:
                    self._tail = None
        out = scrubber.scrub_text(text)
        if out.endswith(_PRIVATE_MARKER) and scrubber.private_unclosed(text):
            # what follows, up to the closing tag, is private too
            self._private_open = True
            return out
        short = len(text) <= CLOSED_CACHE_TEXT
        # a short text seen before that leaves nothing open
        if short and text in self._closed:
            return out
        opened = self._open_tail(text, out)
        if opened is None:
            if short:
                if len(self._closed) >= CLOSED_CACHE_SIZE:
                    self._closed.clear()
                self._closed.add(text)
        else:
            # a redacted end is mostly whole: check only the next text (cheap)
            cut_only = (
                out.rstrip(" \t\r\n").endswith("]")
                and _scrub.MARKER_RE.search(out, max(0, len(out) - 80)) is not None
            )
            self._tail, self._left, self._cut_only = opened, 1 if cut_only else self.ttl, cut_only
        return out

    def _open_tail(self, text: str, out: str) -> str | None:
        """The end of `text` (its last lines, up to TAIL_CHARS) if its last line leaves a secret's
        value to the next text, else None. `out` is the text scrubbed."""
        end = len(text.rstrip(" \t\r\n"))
        if end < 3:
            return None
        # a PuTTY key's private lines may go on in the next text
        if "Private-Lines" in text:
            i = text.rfind("Private-Lines", max(0, end - PEM_HEAD_CHARS), end)
            if i >= 0 and "Private-MAC" not in text[i:end]:
                return text[i:end]
        # every open end is shorter
        if not _ends_open(text[max(0, end - 40) : end]):
            return None
        line_start = max(text.rfind("\n", 0, end) + 1, end - TAIL_CHARS)
        line = text[line_start:end]
        if "\\n" in line:  # JSON text: its last escaped line
            line = line[line.rfind("\\n") + 2 :]
        if not line.strip() or "[REDACTED:" in line[-40:]:
            return None
        if not self.scrubber.rules_may_apply(line):
            return None
        start = end - len(line)
        if not line.lstrip().startswith(_ENTRY_WORDS):
            return line
        # a .netrc `password` line: its host and login are on the lines before
        while start > 0 and end - start < TAIL_CHARS:
            prev = text.rfind("\n", 0, start - 1) + 1
            if end - prev > TAIL_CHARS:
                break
            start = prev
        return text[start:end]

    def _spans_after(self, tail: str, text: str) -> list:
        """(start, end, kind) in `text` of what the rules find in `tail` + the start of `text`."""
        h0 = len(text) - len(text.lstrip())
        limit = PEM_HEAD_CHARS if "PRIVATE KEY" in tail or "Private-Lines" in tail else HEAD_CHARS
        h1 = text.find("\n", h0)
        h1 = min(len(text) if h1 < 0 or limit == PEM_HEAD_CHARS else h1, h0 + limit)
        head = text[h0:h1]
        if not head:
            return []
        joins = [] if self._cut_only else [tail.rstrip() + " "]
        if h0 == 0 and (tail[-1:].isalnum() or tail[-1:] in "_-+/:=%"):
            # cut mid-line; a word is no token's rest (views.breaks' rule)
            first = head[: len(head) - len(head.lstrip(_TOKEN_CHARS))]
            if (
                first
                and not (first.isalpha() and len(first) < 16 and _views.wordlike(first))
                and (not self._cut_only or _cut_token(first))
            ):
                joins.append(tail)
        spans = []
        for left in joins:
            joined = left + head
            for s, e, kind in self._found(joined):
                if e <= len(left):
                    continue
                s, e = max(s, len(left)) - len(left) + h0, min(e - len(left) + h0, h1)
                piece = text[s:e]
                if kind != "private-key" and (
                    (piece.isalpha() and len(piece) < 16 and _views.wordlike(piece))
                    or _scrub.complete_item(piece)
                ):
                    # `DB_PASSWORD=` then `exit status 0`: a word starts
                    continue
                spans.append((s, e, kind))
        return sorted(spans)

    def _found(self, text: str) -> list:
        scrubber = self.scrubber
        counts = Counter(scrubber.counts)
        try:
            out = scrubber.scrub_text(text)
        finally:  # in place: callers may hold the Counter itself
            scrubber.counts.clear()
            scrubber.counts.update(counts)
        if out == text:
            return []
        return _views.redacted_spans(text, out, _scrub.MARKER_RE)

    def _mark(self, text: str, spans: list) -> str:
        out, last = [], 0
        for s, e, kind in spans:
            if e <= last:
                continue
            s = max(s, last)
            if _scrub.MARKER_RE.fullmatch(text, s, e):
                continue
            out += [text[last:s], _scrub.marker(kind)]
            self.scrubber.counts[kind] += 1
            last = e
        out.append(text[last:])
        return "".join(out)


def scrub_sequence(texts: Iterable[str], scrubber: _scrub.Scrubber | None = None) -> list[str]:
    """Scrub consecutive texts of one turn (tool outputs, in order), each with the open end of the
    one before it as context: `aws_secret_access_key =` ending one text redacts the value that
    starts the next."""
    carry = TurnCarry(scrubber)
    return [carry.scrub_text(text) for text in texts]
