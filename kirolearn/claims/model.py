"""A claim: what one record says about one thing in one file, and how it is compared.

A claim never keeps the value it cites as text it compares: `digest` is a keyed hash of the
canonical value (the home's own key, so a secret's hash cannot be guessed from a list of common
passwords), and `shown` is the value for people, which the drain scrubs like any stored text.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import asdict, dataclass, field

from kirolearn.claims.facts import DEPENDENCY, LINES, SETTING, SYMBOL, Fact

TYPE_CHECKING = False
if TYPE_CHECKING:  # types only: the hook re-checks claims, and `typing` would cost it the import
    from collections.abc import Callable, Iterable
    from typing import Any  # a claim as JSON: what the store keeps

KINDS = (SETTING, DEPENDENCY, SYMBOL, LINES)
ANCHOR_LINES = 24  # lines a lines claim cites, at most
FINGERPRINT_LINES = 48  # lines of a file kept to follow it when it moves
HOLDS_SHARE = 0.8  # of a lines claim's lines still there: it holds


@dataclass(frozen=True)
class Claim:
    """One claim (see the module docstring). `lines` are the cited lines' digests (a lines claim);
    `fingerprint` a sample of the whole file's, to find it again after a move."""

    file: str  # relative to the project root, '/' separated
    kind: str
    # the setting's dotted path, 'def render', 'require x'; '' for lines
    key: str
    digest: str
    shown: str
    lines: tuple[str, ...] = ()
    fingerprint: tuple[str, ...] = field(default=(), compare=False)

    @property
    def scope(self) -> str:
        if self.kind in (SYMBOL, LINES):
            return ""
        return self.key.rpartition(".")[0]

    @property
    def identity(self) -> tuple[str, str, str]:
        """What two claims must share to be about the same thing: file, kind and key."""
        return (self.file, self.kind, self.key)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["lines"] = list(self.lines)
        data["fingerprint"] = list(self.fingerprint)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Claim:
        return cls(
            file=str(data["file"]),
            kind=str(data["kind"]),
            key=str(data.get("key") or ""),
            digest=str(data.get("digest") or ""),
            shown=str(data.get("shown") or ""),
            lines=tuple(data.get("lines") or ()),
            fingerprint=tuple(data.get("fingerprint") or ()),
        )

    def described(self) -> str:
        """The claim in one line: `config/app.toml [production] LOG_LEVEL = WARNING`."""
        if self.kind == LINES:
            return f"{self.file}: {len(self.lines)} lines written"
        if self.kind == SYMBOL:
            return f"{self.file}: {self.key}"
        scope, _, name = self.key.rpartition(".")
        where = f" [{scope}]" if scope and self.kind == SETTING else ""
        name = name if where else self.key
        return f"{self.file}{where} {name} = {self.shown}"


def claim_digest(kind: str, key: str, value: str, secret: bytes | None = None) -> str:
    """The digest a claim compares: 's' and 16 hex digits of a SHA-256 of the canonical value; for a
    value the scrubber would redact, 'k', the key's id and an HMAC with the home's own key instead
    (a list of common passwords cannot be hashed against it, and another key cannot compare it)."""
    message = f"{kind}\x00{key}\x00{value}".encode()
    if secret is None:
        return "s" + hashlib.sha256(message).hexdigest()[:16]
    return "k" + key_id(secret) + hmac.new(secret, message, hashlib.sha256).hexdigest()[:16]


def key_id(secret: bytes) -> str:
    """Four hex digits naming a home key (a digest made with another key is not compared)."""
    return hashlib.sha256(b"kirolearn-claims" + secret).hexdigest()[:4]


def digest_holds(digest: str, fact: Fact, secret: bytes | None) -> bool | None:
    """Whether `fact` holds the value a claim's digest names; None when it cannot be told (a value
    keyed with another home's key, or no key at hand)."""
    if digest.startswith("k"):
        if secret is None or digest[1:5] != key_id(secret):
            return None
        return claim_digest(fact.kind, fact.key, fact.value, secret) == digest
    return claim_digest(fact.kind, fact.key, fact.value) == digest


def from_fact(
    file: str,
    fact: Fact,
    fingerprint: Iterable[str] = (),
    *,
    scrub: Callable[[str], str] | None = None,
    secret: bytes | None = None,
) -> Claim:
    """The claim a record makes by writing `fact`; `scrub` cleans the value shown, and a value it
    would redact is digested with `secret` (claim_digest)."""
    shown_as = scrub(fact.shown) if scrub else fact.shown
    hidden = scrub is not None and (shown_as != fact.shown or scrub(fact.value) != fact.value)
    return Claim(
        file=file,
        kind=fact.kind,
        key=fact.key,
        digest=claim_digest(fact.kind, fact.key, fact.value, secret if hidden and secret else None),
        shown=shown_as,
        fingerprint=tuple(fingerprint),
    )


def lines_claim(file: str, digests: Iterable[str], fingerprint: Iterable[str] = ()) -> Claim:
    """The claim of the lines a turn wrote where no reader knows the file (at most ANCHOR_LINES)."""
    chosen = tuple(sorted(digests))[:ANCHOR_LINES]
    return Claim(
        file=file,
        kind=LINES,
        key="",
        digest="",
        shown=f"{len(chosen)} lines",
        lines=chosen,
        fingerprint=tuple(fingerprint),
    )


def fingerprint_of(digests: Iterable[str]) -> tuple[str, ...]:
    """A file's sample of line digests, the same for the same set of lines."""
    return tuple(sorted(digests))[:FINGERPRINT_LINES]
