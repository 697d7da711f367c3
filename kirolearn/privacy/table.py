"""The catalogue rules (kirolearn/privacy/rules.py) as the scrubber runs them: prefilter, frame, judge.

Standard library only, and cheap to import: the table is loaded, indexed and compiled on first
use, one rule's pattern at a time, when a text first holds one of its keywords (the prompt hook
re-scrubs recalled text and must not pay for 400 patterns it never needs).

Prefilter, as gitleaks does it: a rule runs only on text whose lowered form holds one of its
keywords, and only if the text also holds the literal start of its matches (Rule.may_match:
lob-api-key's keyword `test_` is in every test log, its name `lob` rarely). Instead of testing 440
keywords against every text, each keyword is indexed by its longest alphanumeric run; the text is
split into alphanumeric words once, and which runs each distinct word contains is cached per word
(vocabularies repeat; random tokens are few). That run of every keyword occurrence lies inside one
such word, so this finds exactly the keywords `kw in text` would. KeywordIndex's segments let the
scrubber go one step further: judge each run of name characters once, confirm few keywords per text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator

_WORD_RE = re.compile(r"[a-z0-9]+")
_RUN_RE = re.compile(r"[a-z0-9]+")

# a sentence end closes a value too: the catalogues' edge loses "key: abc123."
_KV_RIGHT = r"(?=[\x60'\"\s;,)\]}&|<>\\]|[.!?:](?:\s|$)|$)"
# one line: across a break a rule takes the next line's name for a secret
_KV_OPERATOR = r"(?:[ \t\w.-]{0,20})[ \t'\"\\\]]{0,5}(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)[\x60'\" \t=\\]{0,6}"
_TOKEN_LEFT, _TOKEN_RIGHT = r"(?<![A-Za-z0-9])", r"(?![A-Za-z0-9_+=\-])"

# not scrub's placeholder test: it takes `test_…` and `$aact_…` for placeholders
_GLOBAL_ALLOW_SOURCE = (
    r"(?i)^(?:true|false|null)$"
    r"|^(?i:a+|b+|c+|d+|e+|f+|g+|h+|i+|j+|k+|l+|m+|n+|o+|p+|q+|r+|s+|t+|u+|v+|w+|x+|y+|z+|\*+|\.+|0+|1+)$"
    r"|^\$(?:\d+|\{\d+\})$|^\$(?:[A-Z_]+|[a-z_]+)$|^\$\{(?:[A-Z_]+|[a-z_]+)\}$"
    r"|^\{\{[ \t]*[\w ().|]+[ \t]*\}\}$|^%(?:[A-Z_]+|[a-z_]+)%$|^%[+\-# 0]?[bcdeEfFgGoOpqstTUvxX]$"
    r"|^\{\d{0,2}\}$|^@(?:[A-Z_]+|[a-z_]+)@$|^/Users/[A-Za-z0-9]+/[\w ./-]+$"
    r"|^/(?:bin|etc|home|opt|tmp|usr|var)/[\w ./-]+$"
    r"|^<[^<>]{1,80}>$|^\[[^\[\]]{1,80}\]$|^\{[^{}]{0,200}\}$|\$\{[^}]{0,200}\}|\{\{|\*\*\*|\.\.\.|\u2026"
)
_GLOBAL_STOPWORDS = (
    "abcdefghijklmnopqrstuvwxyz",
    "014df517-39d1-4453-b7b3-9930c563627c",
    "example",
    "xxxxxx",
    "your_",
    "your-",
    "<your",
    "placeholder",
    "redacted",
    "changeme",
)


class Rule:
    """One catalogue rule; its pattern is compiled on first use.

    `broad`: a rule triggered by a common word (key, token, secret, ...) names no provider, so a
    git SHA or a SHA-256 under `cache_key` is a digest, not its secret. `starts`: literals one of
    which starts every match (a KV rule's name, matched ignoring case; a TOKEN or RAW rule's
    secret, matched as written). Text with a keyword but none of them cannot match: lob-api-key's
    keyword `test_` is in every test log, its name `lob` is rarely there; twilio-api-key's keyword
    `sk` is in "task", its tokens start with `SK`.
    """

    __slots__ = (
        "id",
        "keywords",
        "form",
        "name",
        "secret",
        "group",
        "entropy",
        "allow",
        "stopwords",
        "order",
        "broad",
        "starts",
        "cased",
        "_regex",
    )

    def __init__(self, order: int, row: tuple) -> None:
        (
            self.id,
            self.keywords,
            self.form,
            self.name,
            self.secret,
            self.group,
            self.entropy,
            self.allow,
            self.stopwords,
        ) = row
        self.order = order
        # a common-word trigger names no provider: a digest is not its secret
        self.broad = bool(_BROAD_KEYWORDS.intersection(self.keywords))
        # a keyword alone is weak evidence (`test_`, `sk`): class docstring
        if self.form == "KV":
            self.starts, self.cased = tuple(s.lower() for s in _leading_literals(self.name)), False
        else:
            self.starts, self.cased = _leading_literals(self.secret), True
        self._regex = None

    def may_match(self, text: str, low: str) -> bool:
        """False when the text (`low` = text.lower()) cannot hold a match; else True."""
        return not self.starts or any(s in (text if self.cased else low) for s in self.starts)

    @property
    def regex(self) -> re.Pattern[str]:
        if self._regex is None:
            if self.form == "KV":
                pattern = f"(?:{self.name}){_KV_OPERATOR}(?P<_kls>{self.secret}){_KV_RIGHT}"
                self._regex = re.compile(pattern, re.ASCII | re.IGNORECASE)
            elif self.form == "TOKEN":
                pattern = f"{_TOKEN_LEFT}(?P<_kls>{self.secret}){_TOKEN_RIGHT}"
                self._regex = re.compile(pattern, re.ASCII)
            else:
                self._regex = re.compile(self.secret, re.ASCII)
        return self._regex

    def secret_span(self, m: re.Match[str]) -> tuple[int, int]:
        """The span of the secret in a match (the catalogue's secret-group rules)."""
        if self.form != "RAW":
            return m.span("_kls")
        if self.group > 0:
            return m.span(self.group)
        if self.group == 0 and m.re.groups:
            for i in range(1, m.re.groups + 1):
                if m.group(i):
                    return m.span(i)
        return m.span(0)

    def allowed(self, secret: str, match: str, before: str = "") -> bool:
        """Whether the rule's own allowlist or stopwords mark this finding as not a secret.

        `before` is the matched text ahead of the secret (name and operator). A rule triggered by
        a common word also lets through what code says with such words: a comparison
        (`auth_type == 'v4-unsigned-body'`), a word or a dotted name (`private_key: ed25519.Key`).
        """
        if self.broad:
            if "==" in before or "!=" in before:
                return True
            bare = secret.strip("'\"` ")
            # `key, default=_MISSING`: code's name=value, not a value
            if "=" in bare.rstrip("="):
                return True
            if (
                re.fullmatch(_WORDISH, bare)
                or re.fullmatch(_DOTTED_NAME, bare)
                or re.fullmatch(_CAMEL_NAME, bare)
            ):
                return True
        # compiled on the first finding only
        if self.allow and isinstance(self.allow[0][1], str):
            self.allow = tuple((target, re.compile(rx, re.ASCII)) for target, rx in self.allow)
        for target, rx in self.allow:
            if rx.search(match if target == "match" else secret):
                return True
        if self.stopwords:
            low = secret.lower()
            return any(w in low for w in self.stopwords)
        return False


_LITERAL_RE = re.compile(r"[A-Za-z0-9_\-]*")


def _leading_literals(pattern: str) -> tuple:
    """Literals one of which starts every match of `pattern` (as written, before any flag); () if a
    top-level branch starts with none.

    `new-relic|newrelic|new_relic` -> all three, `linked[_-]?in` -> `linked`, `\\bAKCp[A-Za-z0-9]{69}`
    -> `AKCp`, `(?-i:[Oo]kta|OKTA)` -> none. Patterns are compiled with re.ASCII, so a match holds
    the literal as written, or lowered as the text is when IGNORECASE applies.
    """
    branches, start, depth, in_class, i = [], 0, 0, False, 0
    while i < len(pattern):  # split at the top-level |
        c = pattern[i]
        if c == "\\":
            i += 1
        elif in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c in "()":
            depth += 1 if c == "(" else -1
        elif c == "|" and depth == 0:
            branches.append(pattern[start:i])
            start = i + 1
        i += 1
    branches.append(pattern[start:])
    literals = []
    for branch in branches:
        while branch.startswith("\\b"):  # a word boundary matches no character
            branch = branch[2:]
        literal = _LITERAL_RE.match(branch).group(0)
        # the last character is optional
        if branch[len(literal) : len(literal) + 1] in ("?", "*", "{"):
            literal = literal[:-1]
        if not literal:
            return ()
        literals.append(literal)
    return tuple(literals)


_BROAD_KEYWORDS = frozenset(
    "key secret token access api auth password passwd credential creds client".split()
)
_DIGEST_SOURCE = (
    r"(?:[0-9a-f]{40}|[0-9a-f]{64}|[0-9a-f]{96}|[0-9a-f]{128}|[0-9A-F]{40}|[0-9A-F]{64}"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
)


_WORDISH = r"[A-Za-z_.\-]+"  # gitleaks' generic rule allows these too
_DOTTED_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+"
# a class name: Ed25519PrivateKey
_CAMEL_NAME = r"[A-Z][a-z]+(?:[0-9]+|[A-Z][a-z]{2,})+"


def is_digest(secret: str) -> bool:
    """A hex digest of a standard length (SHA-1, SHA-256/384/512) or a UUID."""
    # re's cache compiles it once
    return re.fullmatch(_DIGEST_SOURCE, secret) is not None


def entropy(s: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values()) if n else 0.0


def globally_allowed(secret: str) -> bool:
    """The catalogues' global allowlist: booleans, runs of one character, templates, paths."""
    low = secret.lower()
    return bool(re.search(_GLOBAL_ALLOW_SOURCE, secret)) or any(w in low for w in _GLOBAL_STOPWORDS)


class KeywordIndex:
    """Which of many keywords occur in a text, at the cost of one split and a few dict look-ups.

    Each keyword is indexed by its longest alphanumeric run (lowered). A text's distinct words
    are looked up in a per-word cache of the runs they contain; each candidate keyword is then
    confirmed with one substring test (against the text itself for case-sensitive keywords).

    With `segment_chars` (a set of characters that holds every letter and digit), a keyword made
    only of those characters occurs in a text exactly when it occurs in one of the text's
    segments, its maximal runs of those characters. `in_segment` judges one segment as an int
    mask (the caller remembers it per segment and ORs the masks of a text's segments): a bit per
    item whose keyword the segment holds, and a bit per indexed run whose other keywords must be
    looked for in the whole text, which `resolve` does.
    """

    def __init__(self, pairs: list[tuple], segment_chars: frozenset | None = None) -> None:
        by_run: dict = {}
        for keyword, item, cased in pairs:
            runs = _RUN_RE.findall(keyword.lower())
            run = max(runs, key=len) if runs else ""
            by_run.setdefault(run, {}).setdefault((keyword, cased), []).append(item)
        # run -> ((keyword, items, cased, keyword is the run itself), ...)
        self._by_run = {
            run: tuple(
                (kw, tuple(items), cased, kw == run and not cased) for (kw, cased), items in kws.items()
            )
            for run, kws in by_run.items()
        }
        # keywords without a letter or digit
        self._always = self._by_run.get("", ())
        # confirmed in one segment, or in the text
        inside = (lambda kw: set(kw) <= segment_chars) if segment_chars else (lambda kw: False)
        self._in_segment = {
            run: tuple(e for e in entries if inside(e[0])) for run, entries in self._by_run.items()
        }
        self._in_text = {
            run: tuple(e for e in entries if not inside(e[0])) for run, entries in self._by_run.items()
        }
        # by bigram: a new word is tried against a few runs, not all of them
        self._short = tuple(r for r in self._by_run if len(r) == 1)
        self._by_bigram: dict = {}
        for run in self._by_run:
            if len(run) >= 2:
                self._by_bigram.setdefault(run[:2], []).append(run)
        # mask bits: items first, then runs to confirm in the whole text
        self._items = tuple(
            dict.fromkeys(
                item for entries in self._by_run.values() for _, items, _, _ in entries for item in items
            )
        )
        self._item_bit = {item: 1 << i for i, item in enumerate(self._items)}
        self._item_mask = (1 << len(self._items)) - 1
        self._text_runs = tuple(run for run, entries in self._in_text.items() if run and entries)
        self._run_bit = {run: 1 << (len(self._items) + i) for i, run in enumerate(self._text_runs)}
        self._word_cache: dict = {}
        # no all-digit run today: numbers, the commonest words, are skipped
        self._digit_runs = any(run.isdigit() for run in self._by_run)

    def runs_in(self, word: str) -> tuple:
        """The indexed runs that occur in one lowered alphanumeric word (cached per word)."""
        hit = self._word_cache.get(word)
        if hit is None:
            if not self._digit_runs and word.isdigit():
                return ()
            if len(self._word_cache) >= 65536:
                self._word_cache.clear()
            found = [r for r in self._short if r in word]
            by_bigram = self._by_bigram
            for bigram in {word[i : i + 2] for i in range(len(word) - 1)}:
                for run in by_bigram.get(bigram, ()):
                    if run in word:
                        found.append(run)
            hit = self._word_cache[word] = tuple(found)
        return hit

    def find(self, text: str, low: str, words: set | frozenset) -> set:
        """The items whose keyword occurs in `text` (`low` = text.lower(), `words` = words(low))."""
        runs_in = self.runs_in
        return self._confirm(text, low, {run for word in words for run in runs_in(word)}, self._by_run)

    def in_segment(self, segment: str) -> int:
        """The mask of one segment of a text: the items whose segment-only keyword occurs in it,
        and the indexed runs in it whose other keywords `resolve` must look for in the whole text."""
        low = segment.lower()
        runs = {run for word in words(low) for run in self.runs_in(word)}
        if not runs:
            return 0
        mask = 0
        for item in self._confirm(segment, low, runs, self._in_segment, always=False):
            mask |= self._item_bit[item]
        for run in runs:
            mask |= self._run_bit.get(run, 0)
        return mask

    def resolve(self, text: str, low: str, mask: int) -> set:
        """The items whose keyword occurs in `text`, given the OR of its segments' masks."""
        found = self._confirm(
            text, low, [self._text_runs[i] for i in _bits(mask >> len(self._items))], self._in_text
        )
        found.update(self._items[i] for i in _bits(mask & self._item_mask))
        return found

    def _confirm(self, text: str, low: str, runs: set | frozenset, by_run: dict, always: bool = True) -> set:
        found: set = set()
        for run in runs:
            for kw, items, cased, exact in by_run[run]:
                if exact or kw in (text if cased else low):
                    found.update(items)
        if always:
            for kw, items, cased, _ in self._always:
                if kw in (text if cased else low):
                    found.update(items)
        return found


def _bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of a mask, lowest first."""
    while mask:
        lowest = mask & -mask
        yield lowest.bit_length() - 1
        mask ^= lowest


# one C translate splits ASCII text ~3x faster than _WORD_RE
_WORD_BYTES = bytes(c if 0x30 <= c <= 0x39 or 0x61 <= c <= 0x7A else 0x20 for c in range(256))


def words(low: str) -> set:
    """The distinct alphanumeric words of a lowered text (what KeywordIndex.find takes)."""
    if low.isascii():
        return set(low.encode("ascii").translate(_WORD_BYTES).decode("ascii").split())
    return set(_WORD_RE.findall(low))


class Table:
    """The indexed rules table."""

    def __init__(self) -> None:
        from kirolearn.privacy import rules as secret_rules

        self.version = secret_rules.RULES_VERSION
        self.catalogues = dict(secret_rules.CATALOGUES)
        self.rules = tuple(Rule(i, row) for i, row in enumerate(secret_rules.RULES))
        self.ids = tuple(r.id for r in self.rules)
        # the scrubber indexes the keywords with its own triggers
        self._index: KeywordIndex | None = None

    def candidates(self, low: str, text_words: set | None = None) -> list[Rule]:
        """The rules whose keyword occurs in `low` (the lowered text), in table order."""
        if self._index is None:
            self._index = KeywordIndex([(kw, rule, False) for rule in self.rules for kw in rule.keywords])
        found = self._index.find(low, low, words(low) if text_words is None else text_words)
        return sorted(found, key=lambda r: r.order)


_TABLE: Table | None = None


def table() -> Table:
    """The process-wide indexed table (built on first use)."""
    global _TABLE
    if _TABLE is None:
        _TABLE = Table()
    return _TABLE
