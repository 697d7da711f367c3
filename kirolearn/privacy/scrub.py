"""Privacy scrubber run on every write path: no secret may reach the DB, a log, a prompt or an answer.

Replaces `<private>…</private>` spans and credentials (provider key formats, private keys, JWTs,
URL passwords, Authorization headers, values of secret-named assignments, high-entropy tokens next
to a secret keyword) with `[REDACTED:<type>]`. Pure and standard-library only: no I/O, inputs are
never mutated, and scrubbing is idempotent (a second call changes and counts nothing): one redaction can
change the context another rule saw, so `scrub_text` repeats its pass until the text stops changing
(at most _MAX_PASSES; every text we know of settles after two).
"""

from __future__ import annotations

import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Iterable
from functools import reduce
from operator import or_

from kirolearn.privacy import table as _scrub_table
from kirolearn.privacy import views as _views

# DEFAULT comes from the module __getattr__, built on first use
__all__ = [  # noqa: F822
    "DEFAULT",
    "TYPES",
    "Scrubber",
    "marker",
    "rules_version",
    "rule_types",
    "scrub_text",
    "scrub_value",
]

# every built-in redaction type, as in `[REDACTED:<type>]` and Scrubber.counts
TYPES = (
    "private",
    "private-key",
    "aws-access-key",
    "aws-secret-key",
    "github-token",
    "gitlab-token",
    "slack-token",
    "slack-webhook",
    "stripe-key",
    "openai-key",
    "anthropic-key",
    "google-api-key",
    "azure-storage-key",
    "azure-sas",
    "npm-token",
    "pypi-token",
    "huggingface-token",
    "sendgrid-key",
    "twilio-key",
    "jwt",
    "url-password",
    "user-password",
    "cli-password",
    "url-token",
    "gcp-access-token",
    "authorization",
    "secret-assignment",
    "high-entropy",
)


def rules_version() -> int:
    """The version of the scrubbing rules; stores remember the version their text was scrubbed with."""
    from kirolearn.privacy.rules import RULES_VERSION

    return RULES_VERSION


def rule_types() -> tuple:
    """Every redaction type: the built-in ones, then one per catalogue rule (its rule id)."""
    return TYPES + tuple(t for t in _scrub_table.table().ids if t not in TYPES)


def marker(kind: str) -> str:
    """The replacement text for one redaction of type `kind`."""
    return f"[REDACTED:{kind}]"


# compiled on first use: the prompt hook needs only the rules its text names
_SOURCES: dict = {}


def _lazy(name: str, pattern: str, flags: int = 0) -> re.Pattern[str]:
    _SOURCES[name] = (pattern, flags)
    return None  # type: ignore[return-value]  # compiled by _builtin_rules()


def _rare(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A pattern compiled when first used, not with the rules (_builtin_rules): the shape passes
    and the private-tag patterns are large (slow to compile: docs/benchmarks.md, 'Secrets') and
    most processes, the prompt hook's recall among them, never need them."""
    return _views.Lazy(pattern, flags)  # type: ignore[return-value]


MARKER_RE = _lazy("MARKER_RE", r"\[REDACTED:[A-Za-z0-9_\-]{1,64}\]")
_TYPE_NAME_RE = _lazy("_TYPE_NAME_RE", r"[A-Za-z0-9][A-Za-z0-9_\-]{0,39}")

# allowed literals hide behind private-use code points no rule can match
_SENTINEL_BASE = 0xF0000
_SENTINEL_RANGE_RE = _lazy("_SENTINEL_RANGE_RE", "[\U000f0000-\U000fffff]")

# --- which names look secret ---

# a name part (split on _ - . and camelCase) that is secret on its own
_SECRET_PARTS = frozenset(
    "password passwords passwd passphrase secret secrets token apikey apitoken credential credentials "
    "auth privatekey accesskey secretkey sessionkey signingkey masterkey clientsecret".split()
)
# secret only as the last part of a longer name: DB_PASS, but not PASS:
_WEAK_PARTS = frozenset("pass pwd pw".split())
# `<qualifier>_key` is secret: API_KEY, stripeApiKey, x-api-key, SESSION_KEY
_KEY_QUALIFIERS = frozenset(
    "api access private secret session signing encryption master account client auth app license shared "
    "service consumer admin webhook integration storage subscription deploy personal root".split()
)
# parts that still name the secret (SECRET_KEY_BASE); others do not (TOKEN_TYPE)
_VALUE_SUFFIXES = frozenset(
    "value val str string b64 base64 hex raw plain plaintext encoded enc literal base hash digest salt "
    "old new current prev previous next primary secondary backup main override live test prod production "
    "dev staging local confirm confirmation again repeat verify v".split()
)
# Dict keys that carry a credential although no part says so.
_SECRET_HEADER_KEYS = frozenset("authorization proxy-authorization cookie set-cookie".split())

_PART_RE = _lazy("_PART_RE", r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _name_parts(name: str) -> list[str]:
    last = name.strip().lstrip("-$@").rstrip(".-").rsplit(".", 1)[-1]
    return [p.lower() for p in _PART_RE.findall(last)]


def _is_secret_name(name: str) -> bool:
    """Whether an assignment target / flag / dict key names a secret (password, api_key, x-api-key, ...)."""
    if len(name) > 64 or name.count(" ") > 3:
        return False
    parts = _name_parts(name)
    if not parts or len(parts) > 8:
        return False
    while len(parts) > 1 and (parts[-1] in _VALUE_SUFFIXES or parts[-1].isdigit()):
        parts.pop()
    head, i = parts[-1], len(parts) - 1
    if i > 0 and parts[i - 1] == "per":  # cost_per_token is a price
        return False
    return (
        head in _SECRET_PARTS
        or head.endswith(("password", "passwd", "secret", "token"))
        or (head in _WEAK_PARTS and i > 0)
        or (head == "key" and i > 0 and parts[i - 1] in _KEY_QUALIFIERS)
        or (head.endswith("key") and head[:-3] in _KEY_QUALIFIERS)
    )


_NAME_CACHE: dict = {}


def _secret_name_cached(name: str) -> bool:
    hit = _NAME_CACHE.get(name)
    if hit is None:
        if len(_NAME_CACHE) >= 4096:
            _NAME_CACHE.clear()
        hit = _NAME_CACHE[name] = _is_secret_name(name)
    return hit


def _is_secret_key(key: str) -> bool:
    """Whether a dict key names a secret: a secret-looking name or a credential-carrying header."""
    return key.strip().lower() in _SECRET_HEADER_KEYS or _secret_name_cached(key)


# --- which values are not secrets ---

# deliberately without weak real passwords: changeme, password, admin, 123456
_PLACEHOLDER_WORDS = frozenset(
    "none null nil true false yes no on off undefined redacted hidden masked empty unset required optional "
    "example placeholder dummy fake sample todo tbd n/a na string str bytes int integer number float bool "
    "boolean object any secretstr secretbytes default env environment keyring keychain prompt file "
    "basic bearer digest oauth oauth2 jwt ntlm kerberos negotiate oidc saml sso iam value asc desc include "
    "omit same-origin".split()
)
_PLACEHOLDER_RE = _lazy(
    "_PLACEHOLDER_RE",
    r"""[*.#_\-~•·]+|[xX]{3,}|…
    |<[^<>\n]{1,80}>|\[[^\[\]\n]{1,80}\]|\{\{.{0,200}\}\}|\{%.{0,200}%\}
    |\$\{.{0,200}\}|\$\(.{0,200}\)|\$\$?[A-Za-z_][A-Za-z0-9_]{0,80}|%[A-Za-z_][A-Za-z0-9_]{0,80}%
    |%[sdrx]|%\([A-Za-z_]\w{0,40}\)[sdr]|\{[^{}\n]{0,200}\}
    |\?|\$[0-9]{1,3}(?:::\w{1,30})?|[:@][A-Za-z_]\w{0,60}
    |\#[0-9a-fA-F]{3,8}
    |(?i:(?:your|my|some|dummy|fake|example|sample|test)[_\-\s].{0,60}|.{0,60}[_\-\s]here
    |(?:op|vault|env|ssm|keyring|secretsmanager)://\S{1,200}|arn:aws[\w\-]{0,20}:\S{1,200}
    |os\.environ/\S{1,200})""",
    re.X | re.S,
)
_TYPE_NAMES = frozenset(
    "str string int integer bytes bool boolean number float any object secretstr secretbytes optional "
    "none null undefined char text buffer dict list tuple set mapping sequence callable".split()
)
_CODE_WORDS = frozenset(
    "none true false null nil undefined self cls this super await async new yield lambda not and or is in "
    "return raise pass continue break def del typeof instanceof function const let var if else elif "
    "for while try except finally with import from".split()
)
_STOPWORDS = frozenset(
    "a an the to of for and or in on at by as is it its be was are with from that this which when if "
    "then than instead only must should will can may flag flags option options argument arguments args "
    "parameter parameters params value values".split()
)
_FORMAT_RE = _lazy(  # '%s:%s' % (user, pw), '{0}:{1}'.format(...), f"{token}"
    "_FORMAT_RE",
    r"%(?![0-9A-Fa-f]{2})[-#0 +]?[0-9]*(?:\.[0-9]+)?[sdrxfi]|%\([A-Za-z_]\w{0,40}\)[sdr]|\{[^{}\n]{0,200}\}",
)
# 1.2.3, OIDs
_VERSIONISH_RE = _lazy("_VERSIONISH_RE", r"v?[0-9]{1,9}(?:\.[0-9]{1,9}){1,12}")
_KEY_NAME_RE = _lazy("_KEY_NAME_RE", r"[A-Za-z][A-Za-z0-9]*(?:[_.\-][A-Za-z0-9]+)+")
# password_123
_DIGIT_PART_RE = _lazy("_DIGIT_PART_RE", r"(?:^|[_.\-])[0-9]+(?:$|[_.\-])")
_CONSTANT_RE = _lazy("_CONSTANT_RE", r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_DOTTED_RE = _lazy("_DOTTED_RE", r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
_IDENT_RE = _lazy("_IDENT_RE", r"[A-Za-z_$][\w$]*")
_SMALL_NUMBER_RE = _lazy("_SMALL_NUMBER_RE", r"-?[0-9]{1,3}(?:\.[0-9]+)?")
_PATHLIKE_RE = _lazy("_PATHLIKE_RE", r"(?:~|\.{1,2})?/|[A-Za-z]:[\\/]|[A-Za-z][A-Za-z0-9+.\-]{1,31}://")
_PORT_PATH_RE = _lazy("_PORT_PATH_RE", r"[0-9]{1,5}(?:/|$)")
_INI_SECTION_RE = _lazy("_INI_SECTION_RE", r"(?m)^[ \t]*\[[^\[\]\n]{1,80}\][ \t]*$")
_EMAIL_RE = _lazy("_EMAIL_RE", r"[^@\s]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63})+")


def _only_sentinels(s: str) -> bool:
    return bool(s) and all(_SENTINEL_BASE <= ord(c) <= 0xFFFFF for c in s)


def _is_placeholder(value: str) -> bool:
    """True for values that cannot be a credential: empty, masks, templates, env references, markers."""
    s = value.strip()
    if not s:
        return True
    rest = MARKER_RE.sub("", s).strip(" \t\"'`,;:")
    if not rest or _only_sentinels(rest):
        return True
    if rest != s:  # judge what is left beside the markers
        return _is_placeholder(rest)
    if s.lower() in _PLACEHOLDER_WORDS or "***" in s or "..." in s or "…" in s or "xxxx" in s.lower():
        return True
    return _PLACEHOLDER_RE.fullmatch(s) is not None


def _literal_is_secret(value: str, name: str = "") -> bool:
    """A quoted (or otherwise literal) value under a secret name: secret unless a placeholder."""
    s = value.strip()
    if _is_placeholder(s) or _FORMAT_RE.search(s) or _VERSIONISH_RE.fullmatch(s):
        return False
    if name and _squash(s) in (_squash(name.rsplit(".", 1)[-1]), *_name_parts(name)):
        return False  # AUTH = "auth", PASSWORD = "password": an enum constant
    if _PATHLIKE_RE.match(s) or s.startswith("urn:"):
        # a URL (passwords in URLs have their own rule), a path, a URN
        return False
    if _KEY_NAME_RE.fullmatch(s) and (s.isupper() or s.islower()) and not _DIGIT_PART_RE.search(s):
        if "." in s or _is_secret_name(s) or _related(s, name):
            return False  # a name
    # the quotes belong to two literals: "Token: " + token + " ..."
    if s != value and (value[:1].isspace() and s[:1] in "+,." or value[-1:].isspace() and s[-1:] in "+,"):
        return False
    return True


def _squash(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def _related(value: str, name: str) -> bool:
    """Whether `value` and `name` contain one another once squashed (enum / field-name constants)."""
    v, n = _squash(value), _squash(name.rsplit(".", 1)[-1])
    return bool(v) and bool(n) and (v in n or n in v)


def _ini_value(text: str, s: int, ve: int, value: str, name: str) -> bool:
    """`password = letmein` as an INI / .properties line: a bare word that is the whole line's value.

    In code the same line assigns a variable, so a digit-less word counts only when the text has an
    INI section header, or when it is long enough (6+) under a password-like name.
    """
    line_start = text.rfind("\n", 0, s) + 1
    if text[line_start:s].strip() or text[ve : ve + 1] not in ("", "\n", "\r"):
        return False
    if not _IDENT_RE.fullmatch(value) or _has_digit(value) or "_" in value:
        # digits: _bare_is_secret already decides; FOO_BAR: a constant
        return False
    low = value.lower()
    if low in _CODE_WORDS or low in _PLACEHOLDER_WORDS or _is_secret_name(value) or _related(value, name):
        return False
    if _INI_SECTION_RE.search(text):
        return True
    parts = _name_parts(name)
    return (
        len(value) >= 6 and bool(parts) and parts[-1] in ("password", "passwd", "passphrase", "pwd", "pass")
    )


def _bare_is_secret(value: str, name: str, op: str, spaced: bool, after: str, flag_space: bool) -> bool:
    """An unquoted value after `name op`: decide between a literal secret and code / config syntax."""
    if _is_placeholder(value) or _SMALL_NUMBER_RE.fullmatch(value) or _VERSIONISH_RE.fullmatch(value):
        return False
    if _FORMAT_RE.search(value):  # "server=%s"
        return False
    if value.isdigit() and len(value) < 8 and _name_parts(name)[-1:] == ["token"]:
        # token=11098 is a token id; a numeric password or PIN is still redacted
        return False
    if _PATHLIKE_RE.match(value) or _EMAIL_RE.fullmatch(value):
        return False
    # call, subscription, template: f(), os.environ["X"], ${{ x }}
    if after[:1] in ("(", "[", "{"):
        return False
    # SQL: sl."api_key" = vt."token"
    if after[:1] in ('"', "'") and value.endswith("."):
        return False
    # "use --token to pass the token"
    if (flag_space or op == ":") and value.lower() in _STOPWORDS:
        return False
    # self._token, DEFAULT_TOKEN
    if _DOTTED_RE.fullmatch(value) or _CONSTANT_RE.fullmatch(value):
        return False
    if _IDENT_RE.fullmatch(value):
        low = value.lower()
        if low in _CODE_WORDS or (op == ":" and low in _TYPE_NAMES):
            return False
        has_digit = any(c.isdigit() for c in value)
        if (not has_digit or "_" in value) and (
            _is_secret_name(value) or _squash(value) == _squash(name.rsplit(".", 1)[-1])
        ):
            return False  # password=password, token=auth_token, api_key=apiKey
        if not has_digit and not flag_space:
            # token=key_hash, auth=jwt_claims
            if "_" in value.strip("_") and value == value.lower():
                return False
            # `token = value` in code (INI files lose digit-less values here)
            if spaced and op != ":":
                return False
            # f(password=pw), {token: tok}
            if after[:1] in (",", ")", "}", ";"):
                return False
    return True


# --- entropy ---

_HEX_RE = _lazy("_HEX_RE", r"[0-9a-fA-F]+")
_UUID_RE = _lazy("_UUID_RE", r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
# absolute paths, SRI hashes
_NOT_RANDOM_RE = _lazy("_NOT_RANDOM_RE", r"~?/[^/]+/|sha(?:1|224|256|384|512)-")
# git SHA-1, SHA-256/384/512 digests
_DIGEST_HEX_LENGTHS = frozenset((40, 64, 96, 128))
ENTROPY_MIN_LENGTH = 20
ENTROPY_THRESHOLD = 3.5
HEX_ENTROPY_THRESHOLD = 3.0
LONG_ENTROPY_THRESHOLD = 4.8
RUN_DENSITY_THRESHOLD = 0.3


def shannon_entropy(s: str) -> float:
    """Shannon entropy of `s` in bits per character."""
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _looks_random(tok: str) -> bool:
    """Whether a token next to a secret keyword is random enough to be the secret itself.

    The thresholds, in bits per character: ENTROPY_THRESHOLD for mixed base62/base64 tokens,
    HEX_ENTROPY_THRESHOLD for hex (at most 4 bits a character), LONG_ENTROPY_THRESHOLD from 32
    characters (no identifier or prose word mix gets this high). RUN_DENSITY_THRESHOLD counts
    case/digit runs per character: random ≈ 0.4–0.6, identifiers ≈ 0.1–0.25."""
    n = len(tok)
    if n < ENTROPY_MIN_LENGTH:
        return False
    if _HEX_RE.fullmatch(tok):
        return n not in _DIGEST_HEX_LENGTHS and shannon_entropy(tok) >= HEX_ENTROPY_THRESHOLD
    if _UUID_RE.fullmatch(tok) or _NOT_RANDOM_RE.match(tok) or not any(c.isdigit() for c in tok):
        return False
    entropy = shannon_entropy(tok)
    if n >= 32 and entropy >= LONG_ENTROPY_THRESHOLD:
        return True
    if entropy < ENTROPY_THRESHOLD:
        return False
    density = len(_PART_RE.findall(tok)) / n
    if density >= RUN_DENSITY_THRESHOLD:
        return True
    # single-case tokens: told from identifiers by odd letters, digits
    letters = [c for c in tok if c.isalpha()]
    if not letters or (any(c.isupper() for c in letters) and any(c.islower() for c in letters)):
        return False
    vowels = sum(c in "aeiouAEIOU" for c in letters) / len(letters)
    digits = sum(c.isdigit() for c in tok) / n
    return density >= 0.22 and vowels < 0.3 and digits >= 0.1


_IDENTISH_RE = _lazy(
    "_IDENTISH_RE", r"[A-Za-z]+[0-9]*(?:[_\-.][A-Za-z]+[0-9]*)+|[a-z]+[0-9]{1,4}|[A-Z][a-z]+[0-9]{1,4}"
)
_HOSTISH_RE = _lazy(
    "_HOSTISH_RE", r"[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63})*\.[A-Za-z]{2,24}(?::[0-9]{1,5})?"
)
_REL_PATH_RE = _lazy(
    "_REL_PATH_RE", r"(?:[\w\-]+/)+[\w\-]*\.[A-Za-z][A-Za-z0-9]{0,5}|[a-z0-9_\-]+(?:/[a-z0-9_\-.]+)+/?"
)
_USERISH_RE = _lazy("_USERISH_RE", r"[A-Za-z0-9_+=\-]{1,128}")
_DATEISH_RE = _lazy("_DATEISH_RE", r"[0-9:.\-+TZ_/]+")


# name parts saying a hex value is a digest or an id (git SHAs), not a secret
_DIGEST_NAME_PARTS = frozenset(
    "sha sha1 sha256 commit rev revision hash digest checksum etag git ref head "
    "build "
    "version id uuid fingerprint".split()
)


# names of ordinary values: the shape rule leaves them alone
_ORDINARY_NAME_PARTS = frozenset(
    "version ver build tag release commit rev revision ref image path dir file files url uri endpoint host "
    "hostname port region zone env mode level name id ids uuid date time timestamp lang locale tz".split()
)
_DIGEST_NAME_WORDS = (
    "md5",
    "sha",
    "checksum",
    "hash",
    "digest",
    "etag",
    "fingerprint",
    "integrity",
    "chksum",
)


def _ordinary_name(name: str) -> bool:
    low = name.lower()
    if any(w in low for w in _DIGEST_NAME_WORDS):
        return True
    return bool(_ORDINARY_NAME_PARTS.intersection(_name_parts(name)))


def _env_value_is_secret(value: str, name: str = "") -> bool:
    """A value under a name that says nothing (`SESSION_SIGNING=…`): secret when it looks random.

    Ordinary values stay: paths, URLs, e-mail addresses, numbers, dates, versions, booleans,
    host names, identifiers (`eu-west-1`, `my_service_v2`), UUIDs and digests (git SHAs).
    """
    v = value.strip()
    n = len(v)
    if n < 12 or n > 1024 or "[REDACTED:" in v or (name and _ordinary_name(name)):
        return False
    if _is_placeholder(v) or _PATHLIKE_RE.match(v) or _EMAIL_RE.fullmatch(v) or _VERSIONISH_RE.fullmatch(v):
        return False
    if _UUID_RE.fullmatch(v) or _DATEISH_RE.fullmatch(v) or _IDENTISH_RE.fullmatch(v):
        return False
    if _NOT_RANDOM_RE.match(v):
        return False
    if ":" in v and " " not in v and "," not in v:  # user:password, id:secret
        head, _, tail = v.rpartition(":")
        if (
            not tail
            or not head
            or tail.isdigit()
            or _VERSIONISH_RE.fullmatch(tail)
            or (not _USERISH_RE.fullmatch(head))
        ):
            return False  # host:port, image:tag, a time, a label, a path list
        v = head + tail
        n = len(v)
    if not any(c.isalpha() for c in v):
        return False  # a number
    # letters only: random case flips, not CamelCase words
    if not any(c.isdigit() for c in v):
        return (
            n >= 16
            and _mixed_case(v)
            and "_" not in v
            and "-" not in v
            and "." not in v
            and (len(_PART_RE.findall(v)) / n >= 0.3 and shannon_entropy(v) >= 3.5)
        )
    if _HEX_RE.fullmatch(v):
        if n in _DIGEST_HEX_LENGTHS and (not name or _DIGEST_NAME_PARTS.intersection(_name_parts(name))):
            # GIT_SHA=<40 hex>: with no name to go by, a digest is kept
            return False
        return n >= 16 and shannon_entropy(v) >= HEX_ENTROPY_THRESHOLD
    if _HOSTISH_RE.fullmatch(v) and not _mixed_case(v):
        return False
    if " " in v or ":" in v or "," in v:
        return False  # a list, a sentence
    if "/" in v and _REL_PATH_RE.fullmatch(v):
        return False  # env/cert.p12, config/app.yaml
    entropy = shannon_entropy(v)
    if entropy < 3.0:
        return False
    density = len(_PART_RE.findall(v)) / n
    return density >= 0.25 or (n >= 20 and entropy >= 4.0) or (n >= 24 and entropy >= 3.7)


# an .env line or `export NAME=value`, judged by shape; context: _env_context
_ENV_LINE_RE = _lazy(
    "_ENV_LINE_RE",
    r"""(?<![A-Za-z0-9_.\-$@/])(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,80})=
    (?:"(?P<dq>[^"\n\\]{12,1024})"|'(?P<sq>[^'\n]{12,1024})'|(?P<bare>[^\s"'`;&|#\\(){}\[\]<>]{12,1024}))
    (?=[ \t]|$|[;&|#)\\"'])""",
    re.X | re.M,
)
_ENV_PREFIX_RE = _lazy("_ENV_PREFIX_RE", r"(?:^|[;&|]|\\n|\b(?:export|set|env)|[ \t=][\"'])[ \t]*$")


def _env_context(text: str, start: int) -> bool:
    """Whether `NAME=` at `start` begins an .env line, a shell assignment or an export."""
    if text[start - 1 : start] in ('"', "'"):
        return start < 2 or text[start - 2] in " \t=\n"
    line_start = text.rfind("\n", 0, start) + 1
    before = text[max(line_start, start - 40) : start]
    return not before.strip() or _ENV_PREFIX_RE.search(before) is not None


def _prose_value_is_secret(value: str, strict: bool = False) -> bool:
    """The word after "the password is": a secret when it is not a plain word or a number.

    `strict` (after token, key, secret, credentials, which also name formats and kinds): the value
    must also not read as a name made of words and short codes (401-unauthorized, gpt-4o-mini,
    HS256-signed, t.co/abc).
    """
    v = value.rstrip(".,;:?)]}\u201d").lstrip("(\u201c")
    n = len(v)
    if n < 6 or n > 256 or "[REDACTED:" in v:
        return False
    low = v.lower()
    if low in _STOPWORDS or low in _CODE_WORDS or low in _PLACEHOLDER_WORDS or low in _TYPE_NAMES:
        return False
    if _is_placeholder(v) or _PATHLIKE_RE.match(v) or _EMAIL_RE.fullmatch(v) or _VERSIONISH_RE.fullmatch(v):
        return False
    if v.isalpha() and (v.islower() or v.isupper() or (v[0].isupper() and v[1:].islower())):
        return False  # a word: "stored", "EXPIRED", "Vault"
    if v.isdigit():
        return n >= 6  # a PIN or a numeric password; shorter numbers are counts
    if _DOTTED_RE.fullmatch(v) or _CONSTANT_RE.fullmatch(v) or "(" in v:
        return False  # settings.SECRET, MY_TOKEN, get_token()
    if _IDENTISH_RE.fullmatch(v) and not _has_digit(v):
        return False
    if strict and re.search(r"[\-./]", v):
        parts = [p for p in re.split(r"[\-./]", v) if p]
        if all(p.isalpha() or p.isdigit() or len(p) <= 5 for p in parts):
            return False
    return True


_PROSE_RE = _lazy(  # on the lowered text; the value is read from the original
    "_PROSE_RE",
    r"""(?<![a-z0-9_\-])(?:(?P<pw>password|passwd|passphrase|pass[ \t]phrase|pass[ \t]word|pw|pwd|pin)
    |secret|token
    |api[ \t_\-]?key|access[ \t_\-]key|secret[ \t_\-]key|private[ \t_\-]key|credentials?)s?(?![a-z0-9_\-])
    (?:[ \t]+(?:for|of|to|on)[ \t]+(?:the[ \t]+)?[a-z0-9_.\-]{1,40})?
    [ \t]*(?:(?:\bis|\bwas|\bare|\bwere|would[ \t]be|will[ \t]be|should[ \t]be|has[ \t]been|becomes?)[ \t]+
    (?:(?:now|still|just|actually|currently|set[ \t]to|changed[ \t]to|reset[ \t]to)[ \t]+)?
    |(?:set|changed|reset)[ \t]to[ \t]+)
    (?:["'`\u201c])?(?P<value>[^\s"'`\u201d]{4,256})""",
    re.X,
)
_ENV_NAME_RE = _lazy(
    "_ENV_NAME_RE", r"(?m)(?:^|[;(]|&&|\|\||\\n|\bexport[ \t])[ \t]*[A-Za-z_][A-Za-z0-9_.\-]{0,80}="
)


# --- pattern rules ---


def _mixed_case_digit(s: str) -> bool:
    return any(c.isdigit() for c in s) and any(c.isupper() for c in s) and any(c.islower() for c in s)


def _has_digit(s: str) -> bool:
    return any(c.isdigit() for c in s)


def _mixed_case(s: str) -> bool:
    return any(c.isupper() for c in s) and any(c.islower() for c in s)


def _aws_secret_ok(s: str) -> bool:
    # not docs.aws.amazon.com/AmazonS3/latest/dev/Uploading…
    return _mixed_case(s) and _looks_random(s)


def _auth_value_is_code(value: str, after: str) -> bool:
    """An Authorization value that is an expression, a type or a constant name, not a credential."""
    if after in ("(", "[", ".") or _CONSTANT_RE.fullmatch(value) or _DOTTED_RE.fullmatch(value):
        # headers.get(...), ReadOnly[...], Bearer LITELLM_VIRTUAL_KEY
        return True
    if not _IDENT_RE.fullmatch(value) or _has_digit(value):
        return False
    # auth, auth_header, MyAuth
    return value.islower() or (value[0].isupper() and value[1:2].islower())


def _url_password_ok(s: str) -> bool:
    # '/' may be in a password, but not a port and path, nor a second URL
    if "/" in s and (_PORT_PATH_RE.match(s) or "://" in s):
        return False
    # `scheme://user:TOKEN@host` in docs is a placeholder, like templates
    if s.lower() in ("pass", "password", "passwd", "pwd", "pw", "secret", "token"):
        return False  # user:pass@host in documentation
    return not _is_placeholder(s) and not (s.isupper() and s.replace("_", "").isalpha())


def _user_password_ok(s: str) -> bool:
    # `docker run -u 1000:1000` is uid:gid
    return not s.isdigit() and not _is_placeholder(s)


def _dsn_password_ok(s: str) -> bool:
    """`user:pw@host/` without a scheme: not a port, a version or a digest's algorithm."""
    return (
        _url_password_ok(s)
        and not s.isdigit()
        and not _VERSIONISH_RE.fullmatch(s)
        and not s.lower().startswith(("sha", "md5"))
    )


def _url_user_token_ok(s: str) -> bool:
    """A URL's user that is a token (an Azure DevOps PAT), not a name or an e-mail's local part."""
    if "%40" in s.lower() or _is_placeholder(s) or _IDENTISH_RE.fullmatch(s):
        return False
    return _looks_random(s) or (len(s) >= 32 and shannon_entropy(s) >= 4.0 and _has_digit(s))


def _path_token_ok(s: str) -> bool:
    return not _is_placeholder(s) and (_has_digit(s) or _mixed_case(s)) and shannon_entropy(s) >= 3.0


class _Rule:
    """One pattern rule: `group` of each match of `regex` becomes `[REDACTED:kind]`."""

    __slots__ = ("kind", "triggers", "regex", "group", "check", "lower")

    def __init__(
        self,
        kind: str,
        triggers: tuple,
        regex: re.Pattern[str],
        group: int | str,
        check: Callable[[str], bool] | None,
        lower: bool,
    ) -> None:
        self.kind = kind
        # one of these substrings must be present (lowered if `lower`)
        self.triggers = triggers
        self.regex = regex
        self.group = group  # the replaced group; the rest of the match is kept
        self.check = check  # veto on the replaced text
        self.lower = lower


_L = r"(?<![A-Za-z0-9])"  # left edge of a token
_LU = r"(?<![A-Za-z0-9_\-])"
_R = r"(?![A-Za-z0-9])"
# a value character that does not start a marker
_NOMARK = r"(?:(?!\[REDACTED:)[^\s'\"<>])"
_RU = r"(?![A-Za-z0-9_\-])"

# (kind, triggers, pattern, group, check, lower-case triggers?, flags)
_RULE_SPECS: tuple = (
    (
        "aws-access-key",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        _L + r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}" + _R,
        0,
        None,
        False,
        0,
    ),
    (
        "aws-secret-key",
        ("aws", "secretaccesskey", "secret_access_key", "secret-access-key"),
        r"(?i:aws|secret[_\-]?access[_\-]?key)[\w .\-:=>\"'\]]{0,40}?(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})"
        r"(?![A-Za-z0-9/+=])",
        1,
        _aws_secret_ok,
        True,
        0,
    ),
    (
        "github-token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _L + r"(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,246})" + _R,
        0,
        None,
        False,
        0,
    ),
    (
        "gitlab-token",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "glcbt-"),
        _L + r"gl(?:pat|dt|rt|ptt|ft|soat|cbt)-[A-Za-z0-9_\-]{20,250}",
        0,
        None,
        False,
        0,
    ),
    (
        "slack-webhook",
        ("hooks.slack.com",),
        r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+\-]{10,300}",
        0,
        None,
        False,
        0,
    ),
    (
        "slack-token",
        ("xox", "xapp-"),
        _L + r"(?:xox[abposre]-[A-Za-z0-9\-]{10,250}|xapp-[0-9]-[A-Za-z0-9\-]{10,250})",
        0,
        _has_digit,
        False,
        0,
    ),
    (
        "stripe-key",
        ("sk_live_", "rk_live_", "sk_test_", "rk_test_", "whsec_"),
        _L + r"(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,247}|whsec_[A-Za-z0-9+/]{20,100})" + _R,
        0,
        None,
        False,
        0,
    ),
    ("anthropic-key", ("sk-ant-",), _L + r"sk-ant-[A-Za-z0-9_\-]{20,300}", 0, None, False, 0),
    (
        "openai-key",
        ("sk-",),
        _LU + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,300}",
        0,
        _mixed_case_digit,
        False,
        0,
    ),
    ("google-api-key", ("AIza",), _LU + r"AIza[0-9A-Za-z_\-]{35}" + _RU, 0, None, False, 0),
    (
        "azure-storage-key",
        ("accountkey=", "sharedaccesskey="),
        r"(?i)(?<![A-Za-z0-9])(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{20,200}={0,2})",
        1,
        None,
        True,
        0,
    ),
    ("azure-sas", ("sig=",), r"[?&]sig=([A-Za-z0-9%+/=]{20,200})", 1, None, False, 0),
    ("npm-token", ("npm_",), _L + r"npm_[A-Za-z0-9]{36}" + _R, 0, None, False, 0),
    ("pypi-token", ("pypi-Ag",), _L + r"pypi-Ag[A-Za-z0-9_\-]{50,300}", 0, None, False, 0),
    ("huggingface-token", ("hf_",), _LU + r"hf_[A-Za-z0-9]{30,64}" + _RU, 0, _mixed_case, False, 0),
    ("sendgrid-key", ("SG.",), _L + r"SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}", 0, None, False, 0),
    ("twilio-key", ("SK",), _L + r"SK[0-9a-fA-F]{32}" + _R, 0, None, False, 0),
    (
        "jwt",
        ("eyJ",),
        _LU + r"eyJ[A-Za-z0-9_\-]{5,4096}\.[A-Za-z0-9_\-]{5,8192}\.[A-Za-z0-9_\-]{0,4096}"
        r"(?:\.[A-Za-z0-9_\-]{1,8192}){0,2}={0,2}",
        0,
        None,
        False,
        0,
    ),
    (
        "url-password",
        ("://",),
        r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{1,31}://[^\s:/?#@\"'<>\[\]]{0,256}:"
        r"([^\s?#\"'<>]{1,256})@",
        1,
        _url_password_ok,
        False,
        0,
    ),
    (
        "user-password",
        ("-u", "--user"),
        r"(?<![\w\-])(?:-u|--user)[ \t]+([\"']?)[^\s:'\"]{1,128}:(" + _NOMARK + r"{1,256})\1",
        2,
        _user_password_ok,
        False,
        0,
    ),
    (
        "user-password",
        ("-u", "--user"),  # curl -u user:'pw', --user "bob":"pw"
        r"(?<![\w\-])(?:-u|--user)(?:[ \t]+|=)[\"']?[^\s:'\"]{1,128}[\"']?:"
        r"([\"'])((?:(?!\[REDACTED:)[^\"'\n]){1,256})\1",
        2,
        _user_password_ok,
        False,
        0,
    ),
    (
        "user-password",
        ("auth=(", "auth = (", "auth =(", "auth= (", "basicauth("),  # requests:
        # auth=("user", "pw"), HTTPBasicAuth("user", "pw")
        r"(?i)(?:\bauth[ \t]*=[ \t]*|basicauth)\([ \t]*([\"'])[^\"'\n]{0,128}\1[ \t]*,[ \t]*([\"'])"
        r"([^\"'\n]{1,256})\2[ \t]*\)",
        3,
        _url_password_ok,
        True,
        0,
    ),
    # `user:password@` without a scheme: Go's MySQL DSN `app:pw@tcp(host)/db`
    (
        "user-password",
        ("@tcp(", "@tcp6(", "@udp(", "@unix(", "@/"),
        r"(?<![\w.\-+%/:@])[A-Za-z_][\w.\-+%]{0,63}:([^\s:@/\"'`<>()]{1,256})@(?:(?:tcp6?|udp|unix)\(|/)",
        1,
        _url_password_ok,
        True,
        0,
    ),
    (
        "user-password",
        ("@",),
        r"(?<![\w.\-+%/:@])[A-Za-z_][\w.\-+%]{0,63}:([^\s:@/\"'`<>()\[\]{}]{1,256})"
        r"@[A-Za-z0-9][A-Za-z0-9.\-]{0,253}(?::[0-9]{1,5})?/",
        1,
        _dsn_password_ok,
        False,
        0,
    ),
    # a token as a URL's user, without a password: `https://<PAT>@host/`
    (
        "url-token",
        ("://",),
        r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{1,31}://([A-Za-z0-9_\-.~%]{20,256})@(?=[A-Za-z0-9\[])",
        1,
        _url_user_token_ok,
        False,
        0,
    ),
    # tokens that known APIs take as a path segment of their URL
    (
        "url-token",
        (
            "discord.com/api/webhooks/",
            "discordapp.com/api/webhooks/",
            "api.telegram.org/bot",
            "api.telegram.org/file/bot",
            "hooks.zapier.com/hooks/catch/",
            "maker.ifttt.com/trigger/",
            "/hooks/",
        ),
        r"(?i:discord(?:app)?\.com/api/(?:v[0-9]{1,2}/)?webhooks/[0-9]{5,30}/"
        r"|api\.telegram\.org/(?:file/)?bot[0-9]{3,16}:"
        r"|hooks\.zapier\.com/hooks/catch/[0-9]{3,16}/"
        r"|maker\.ifttt\.com/trigger/[^/\s]{1,100}/with/key/"
        r"|/hooks/(?=[a-z0-9]{26}(?![A-Za-z0-9_\-])))"
        r"([A-Za-z0-9_\-]{16,128})",
        1,
        _path_token_ok,
        True,
        0,
    ),
    # a Telegram bot token on its own: `<bot id>:AA<33>`
    (
        "url-token",
        (":aa",),
        r"(?<![A-Za-z0-9_\-:])[0-9]{6,12}:(AA[A-Za-z0-9_\-]{33})(?![A-Za-z0-9_\-])",
        1,
        None,
        True,
        0,
    ),
    # Google OAuth access tokens and refresh tokens
    ("gcp-access-token", ("ya29.",), _LU + r"ya29\.[A-Za-z0-9_\-]{20,2048}", 0, None, False, 0),
    ("gcp-access-token", ("1//0",), _LU + r"1//0[A-Za-z0-9_\-]{40,512}", 0, None, False, 0),
    # PuTTY key files: the private lines and their MAC
    (
        "private-key",
        ("private-lines", "private-mac", "private-hash"),
        r"(?i:private-lines)[ \t]*:[ \t]*[0-9]{1,4}[ \t]*(?:\r?\n|\\r?\\n)"
        r"((?:[\"']?[A-Za-z0-9+/=]{1,128}[\"']?(?:\r?\n|\\r?\\n|$)){1,200})",
        1,
        None,
        True,
        0,
    ),
    (
        "private-key",
        ("private-mac", "private-hash"),
        r"(?i:private-(?:mac|hash))[ \t]*:[ \t]*[\"']?([0-9a-fA-F]{32,128})",
        1,
        None,
        True,
        0,
    ),
)

_PRIVATE_KEY_RE = _lazy(
    "_PRIVATE_KEY_RE",
    r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?=(?:\s|\\[nr]){0,8}(?:[A-Za-z0-9+/=]{16}|[A-Za-z][A-Za-z\-]{1,30}:))"
    r"(?:.*?-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----|.*)",
    re.S,
)
# mysql -uroot -pS3cret: every -p<password> of the command line
_MYSQL_CMD_RE = _lazy("_MYSQL_CMD_RE", r"\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n|;&]*")
# -p'S3cret', -p "S3cret": the quotes are kept, the password goes
_QUOTED_PW = r"""(?:'(?P<sq>[^'\n]{1,256})'|"(?P<dq>[^"\n]{1,256})"|(?P<bare>""" + _NOMARK + r"{1,256}))"
_MYSQL_P_RE = _lazy("_MYSQL_P_RE", r"(?<=[ \t])-p" + _QUOTED_PW)
# docker login -p S3cret, sshpass -p S3cret: spaced (else a port or a path)
_LOGIN_CMD_RE = _lazy(
    "_LOGIN_CMD_RE",
    r"\b(?:(?:docker|podman|buildah|skopeo|nerdctl|oc|helm[ \t]+registry)[ \t]+login|sshpass)\b[^\n|;&]*",
)
_SPACED_P_RE = _lazy("_SPACED_P_RE", r"(?<=[ \t])-p[ \t]+(?!-)" + _QUOTED_PW)

# Password flags of command-line tools, scoped by the tool.
# Forms: "sp" next word, "at" attached, "both", "pass:", "user%", "colon".
_CLI_PASSWORD_FLAGS = (
    ("redis-cli keydb-cli", (("-a", "sp"), ("--pass", "sp"))),
    (
        "ldapsearch ldapmodify ldapadd ldapdelete ldapwhoami ldappasswd ldapcompare ldapmodrdn ldapexop",
        (("-w", "both"),),
    ),
    (
        "openssl",
        (
            ("-pass", "pass:"),
            ("-passin", "pass:"),
            ("-passout", "pass:"),
            ("-password", "pass:"),
            ("-k", "sp"),
        ),
    ),
    (
        "keytool jarsigner",
        tuple(
            (f, "sp")
            for f in (
                "-storepass",
                "-keypass",
                "-srcstorepass",
                "-deststorepass",
                "-srckeypass",
                "-destkeypass",
                "-new",
            )
        ),
    ),
    (
        "mongo mongosh mongodump mongorestore mongoexport mongoimport mongostat mongotop mongofiles",
        (("-p", "sp"),),
    ),
    ("mysql mysqldump mysqladmin mysqlimport mysqlcheck mysqlsh mariadb mariadb-dump", (("-p", "both"),)),
    ("sqlcmd bcp isql osql", (("-P", "both"),)),
    ("mosquitto_pub mosquitto_sub mosquitto_rr", (("-P", "sp"),)),
    ("cqlsh", (("-p", "sp"),)),
    ("nodetool", (("-pw", "sp"),)),
    ("zip unzip zipcloak", (("-P", "sp"),)),
    ("7z 7za 7zr rar unrar", (("-p", "at"),)),
    ("ipmitool", (("-P", "sp"),)),
    ("ssh-keygen", (("-N", "sp"), ("-P", "sp"))),
    ("smbclient rpcclient smbmap", (("-U", "user%"), ("--user", "user%"))),
    ("xfreerdp wlfreerdp sdl-freerdp", (("/p", "colon"),)),
)
_CLI_TOOL_WORDS = tuple(w for tools, _ in _CLI_PASSWORD_FLAGS for w in tools.split())
_CLI_VALUE = r"""(?:'(?P<sq>[^'\n]{1,256})'|"(?P<dq>[^"\n]{1,256})"|(?P<bare>""" + _NOMARK + r"{1,256}))"


def _cli_flag_regex(flags: tuple) -> str:
    alts = []
    for flag, form in flags:
        f = re.escape(flag)
        if form in ("sp", "both"):
            alts.append(f + r"[ \t]+(?!-)")
        if form in ("at", "both"):
            alts.append(f + r"(?=[^\s\-=])")
        if form == "pass:":
            alts.append(f + r"[ \t]+[\"']?pass:")
        if form == "user%":
            alts.append(f + r"(?:[ \t]+|=)[\"']?[^\s%\"']{1,128}%")
        if form == "colon":
            alts.append(f + r":")
    return r"(?<![^\s\"'])(?:" + "|".join(alts) + r")" + _CLI_VALUE


# a tool at a command's start (after a pipe, `sudo`, a path): its flags
_CLI_TOOLS = tuple(
    (
        _lazy(
            "_CLI_CMD_RE_" + str(i),
            r"(?<![^\s/;|&(`'\"=])(?:" + "|".join(re.escape(t) for t in tools.split()) + r")(?:\.exe)?"
            r"(?=[ \t])[^\n|;&]*",
            re.I,
        ),
        "_CLI_CMD_RE_" + str(i),
        "_CLI_FLAG_RE_" + str(i),
        _lazy("_CLI_FLAG_RE_" + str(i), _cli_flag_regex(flags)),
    )
    for i, (tools, flags) in enumerate(_CLI_PASSWORD_FLAGS)
)
# Oracle's tools take `user/password@db` as their first argument
_ORACLE_LOGIN_RE = _lazy(
    "_ORACLE_LOGIN_RE",
    r"(?i)(?<![^\s/;|&(`'\"=])(?:sqlplus|sqlldr|expdp|impdp|rman|dgmgrl|sqlcl|conn(?:ect)?)(?:\.exe)?"
    r"(?:[ \t]+-[A-Za-z]+)*[ \t]+(?:(?:target|catalog|auxiliary)[ \t]+)?[\"']?[A-Za-z][\w$#.\-]{0,127}/"
    r"(?P<pw>[^\s@/\"']{1,256})(?=@|[\s\"']|$)"
    r"|(?<![^\s\"'=])(?:target|catalog|auxiliary)[ \t]+[\"']?[A-Za-z][\w$#.\-]{0,127}/(?P<pw2>[^\s@/\"']{1,256})@",
)
# <private> as tools escape it: HTML, JSON, fullwidth, markdown, zero-width
_LT = (
    r"(?:<|\uff1c|\ufe64|&(?:amp;){0,3}(?:lt|#0*60|#x0*3c|#0*65308|#x0*ff1c|#0*65124|#x0*fe64);"
    r"|\\u003c|\\uff1c|\\ufe64)"
)
_GT = (
    r"(?:>|\uff1e|\ufe65|&(?:amp;){0,3}(?:gt|#0*62|#x0*3e|#0*65310|#x0*ff1e|#0*65125|#x0*fe65);"
    r"|\\u003e|\\uff1e|\\ufe65)"
)
_PRIVATE_WORD = "private"
# they render as nothing: a tag with one inside `private` still counts
_ZW_CHARS = "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"
_ZW = (
    r"(?:[" + _ZW_CHARS + r"]|\\u(?:00[aA][dD]|180[eE]|200[b-fB-F]|206[0-4]|[fF][eE][fF][fF])"
    r"|&(?:amp;){0,3}#(?:173|8203|8204|8205|8288|65279|x0*(?:ad|200[b-d]|2060|feff));)*"
)


def _private_tag(word: str) -> str:
    return (
        _LT
        + r"[ \t]*(\\?/)?[ \t]*"
        + word
        + r"(?:[ \t]*|\s(?:(?!"
        + _GT
        + r")[^<>]){0,256}?)(/?)"
        + r"[ \t]*\\{0,4}"
        + _GT
    )


_PRIVATE_TAG_RE = _rare(_private_tag(_PRIVATE_WORD), re.I)
_PRIVATE_ZW_RE = _rare(_private_tag(_ZW.join(_PRIVATE_WORD)), re.I)
_ZW_CHAR_RE = _rare(r"[" + _ZW_CHARS + r"]")
_ZW_ANY_RE = _rare(
    r"[" + _ZW_CHARS + r"]|\\u(?:00ad|180e|200[b-f]|206[0-4]|feff)"
    r"|&(?:amp;){0,3}#(?:173|8203|8204|8205|8288|65279|x0*(?:ad|200[b-d]|2060|feff));",
    re.I,
)
# lowered text: a literal first is ~20x faster than a case-insensitive pattern
_AUTH_HEADER_RE = _lazy(
    "_AUTH_HEADER_RE",
    r"authorization(?<![a-z0-9_]authorization)([\"']?)[ \t]*(?::(?![:=])|=(?![=~>]))[ \t]*[\"']?"
    r"(?:(bearer|basic|token|digest|negotiate|ntlm|apikey|api-key|api-token|sso-key)[ \t]+)?"
    r"([^\s\"'<>,;(){}\[\]]{1,4096})",
)
_BASIC_B64_RE = _lazy(
    "_BASIC_B64_RE", r"(?<![A-Za-z0-9_])(?i:basic)[ \t]+([A-Za-z0-9+/]{8,4096}={0,2})(?![A-Za-z0-9+/=])"
)


def _is_basic_credential(b64: str) -> bool:
    """Whether base64 text decodes to a printable `user:password` with a password."""
    import base64
    import binascii

    try:
        raw = base64.b64decode(b64 + "=" * (-len(b64) % 4), validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return False
    user, sep, password = decoded.partition(":")
    return bool(sep) and bool(password) and decoded.isprintable() and len(user) <= 256


_AUTH_SCHEMES = frozenset("bearer basic token digest negotiate ntlm apikey api-key api-token sso-key".split())

# assignment pass: hits in the lowered text grow to the name around them
_KEYWORD_RE = _lazy("_KEYWORD_RE", r"pass|pw|secret|token|auth|credential|key|bearer")
_NAME_RUN_RE = _lazy("_NAME_RUN_RE", r"[A-Za-z0-9_.\-$@]+")


def _run_matters(run: str) -> bool:
    """Whether keyword hits inside this run of name characters can lead `_keyword_pass` anywhere."""
    if not _KEYWORD_RE.search(run.lower()):
        return False
    if len(run) > 64:
        # the pass bounds its name expansion: judge such runs in context
        return True
    name = run
    while name[-1:] in (".", "-") and len(name) > 1:
        name = name[:-1]
    low = name.lower()
    return _secret_name_cached(name) or low.endswith("key") or low == "bearer"


_KEYWORD_TRIGGERS = ("pass", "pw", "secret", "token", "auth", "credential", "key", "bearer")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-$@")
# one C translate splits ASCII into name runs ~2x faster than _NAME_RUN_RE
_NAME_BYTES = bytes(c if chr(c) in _NAME_CHARS else 0x20 for c in range(256))
_SEP_RE = _lazy("_SEP_RE", r"([ \t]*)(=>|:=|=(?![=~>])|:(?![:/\\=]))([ \t]*)")
_FLAG_SEP_RE = _lazy("_FLAG_SEP_RE", r"=|[ \t]+")
_VALUE_RE = _lazy(
    "_VALUE_RE",
    r"""(?P<marker>\[REDACTED:[A-Za-z0-9_\-]{1,64}\])
    |\\"(?P<edq>(?:[^"\\\n]|\\[^"\n]){0,4096})\\"
    |"(?P<dq>(?:[^"\\\n]|\\.){0,4096})"
    |'(?P<sq>(?:[^'\\\n]|\\.){0,4096})'
    |`(?P<bt>[^`\n]{0,4096})`
    |(?P<bare>[^\s"'`,;&|<>(){}\[\]\\]{1,4096})""",
    re.X,
)
# <password>value</password>, the value also on a line of its own
_XML_VALUE_RE = _lazy(
    "_XML_VALUE_RE", r"(?:[ \t]*\r?\n[ \t]*)?([^<\s](?:[^<\n]{0,4094}[^<\s])?)(?:[ \t]*\r?\n[ \t]*)?</"
)
_STRING_PREFIXES = frozenset("f r b u rb br fr rf".split())
_TYPE_EXPR_RE = _lazy(  # Token[Span | None], UserAPIKeyAuth | None
    "_TYPE_EXPR_RE",
    r"[A-Za-z_][\w.]*(?:\[[^\]\n]{0,200}\])?(?:[ \t]*\|[ \t]*[A-Za-z_][\w.]*(?:\[[^\]\n]{0,200}\])?)*",
)
_TYPED_REST_RE = _lazy("_TYPED_REST_RE", r"[ \t]*(=(?![=>])|\|)[ \t]*")
_PREV_WORD_RE = _lazy("_PREV_WORD_RE", r"([A-Za-z]+)[ \t_\-]+$")
_CANDIDATE_RE = _lazy(
    "_CANDIDATE_RE", r"(?<![A-Za-z0-9+/_\-=])[A-Za-z0-9+/_\-]{20,1024}={0,2}(?![A-Za-z0-9+/_\-=])"
)
# --- shapes of .netrc, cookies, bearer, wrapped URLs, base64 ---

# .netrc `machine H login U password P`: pairs in any order, across lines
_NETRC_SEP = r"(?:[ \t\r\n]|\\[nrt])+"
_NETRC_START_RE = _rare(
    r"(?<![\w.\-])machine" + _NETRC_SEP + r"(?P<host>[^\s\\\"'`;|&]{1,253})(?=[ \t\r\n\\])"
    r"|(?:^|(?<=\n)|(?<=\\n))[ \t]*default(?=" + _NETRC_SEP + r"(?:login|password|account)\b)",
    re.M,
)
_NETRC_PAIR_RE = _rare(
    _NETRC_SEP
    + r"(login|password|passwd|account|port|protocol|force)"
    + _NETRC_SEP
    + r"(?:\"(?P<dq>[^\"\n]{1,256})\"|'(?P<sq>[^'\n]{1,256})'|(?P<bare>[^\s\\\"'`;|&]{1,256}))"
)
_NETRC_HOST_RE = _rare(
    r"(?:[A-Za-z0-9\-_]{1,63}\.)+[A-Za-z0-9\-]{1,63}(?::[0-9]{1,5})?|localhost(?::[0-9]{1,5})?"
    r"|\[[0-9A-Fa-f:.]{2,45}\](?::[0-9]{1,5})?"
)
_PASSWORD_WORDS = frozenset(("pass", "password", "passwd", "pwd", "pw", "secret", "token"))


def _netrc_password_ok(value: str) -> bool:
    return not _is_placeholder(value) and value.lower() not in _PASSWORD_WORDS and "[REDACTED:" not in value


# Cookie: and Set-Cookie: headers, also as a JSON or Python key
_COOKIE_RE = _rare(r"(?i)(?<![A-Za-z0-9_\-])(set-)?cookie2?[\"']?[ \t]*:[ \t]*[\"']?([^\r\n<>]{3,4096})")
# one `name=value` of the header and its `;` (none: the header ends)
_COOKIE_PAIR_RE = _rare(
    r"[ \t]*([^=;\s,\"']{1,128})[ \t]*=[ \t]*(\"[^\";]{0,4096}\"|'[^';]{0,4096}'|[^;\s\"']{0,4096})[ \t]*(;?)"
)
_COOKIE_SECRET_NAME_RE = _rare(
    r"(?i)sess|sid|token|auth|csrf|xsrf|jwt|remember|login|secret|key|pass|cred|saml|oauth|refresh|access|identity"
)
_COOKIE_ATTRIBUTES = frozenset(
    "path domain expires max-age samesite secure httponly priority partitioned version comment".split()
)
_COOKIE_PLAIN_WORDS = frozenset("deleted expired invalid logout loggedout anonymous guest".split())


def _cookie_value_is_secret(name: str, value: str) -> bool:
    """A cookie's value: a secret under a session-like name unless it is a word or a mask; under
    any other name (theme, lang, consent) only when it looks random."""
    v = value.strip("\"'")
    if "&" in v or "\\" in v:
        # an HTML entity or a JSON escape: the decoded view judges the value
        return False
    if len(v) < 6 or "[REDACTED:" in v or _is_placeholder(v) or v.lower() in _COOKIE_PLAIN_WORDS:
        return False
    if _COOKIE_SECRET_NAME_RE.search(name):
        if v.isalpha() and _views.wordlike(v):
            return False
        return not _SMALL_NUMBER_RE.fullmatch(v) and not _VERSIONISH_RE.fullmatch(v)
    return _env_value_is_secret(v, name) or _looks_random(v)


# a bearer token anywhere: `X=Bearer …`, any header name (RFC 6750 b64token)
_BEARER_RE = _rare(
    r"(?<![A-Za-z0-9_\-])(?i:bearer)[ \t]+([\"']?)([A-Za-z0-9\-._~+/]{8,4096}=*)(?![A-Za-z0-9\-._~+/=])"
)


def _bearer_value_ok(value: str, after: str) -> bool:
    """Whether the word after `Bearer` is a token, not prose (`Bearer authentication`), a name
    (`Bearer access_token`, `Bearer self.token`, `Bearer LITELLM_KEY`) or code (`Bearer f(x)`)."""
    v = value.rstrip(".")
    if len(v) < 8 or after[:1] in ("(", "["):
        return False
    if _is_placeholder(v) or _VERSIONISH_RE.fullmatch(v) or _CONSTANT_RE.fullmatch(v):
        return False
    if _has_digit(v):
        return True
    if _DOTTED_RE.fullmatch(v) or _IDENTISH_RE.fullmatch(v) or (_IDENT_RE.fullmatch(v) and "_" in v):
        return False
    if v.isalpha():
        if _mixed_case(v):  # CapWords (AccessToken) against random case flips
            return len(v) >= 10 and len(_PART_RE.findall(v)) / len(v) >= 0.3
        return len(v) >= 12 and not _views.wordlike(v)
    return True


# a URL password a terminal wrapped: `postgres://user:pa\nss@host`
_WRAPPED_URL_RE = _rare(
    r"://([^\s:/?#@\"'<>\[\]]{0,256}):((?:[^\s?#\"'<>@/]|\r?\n[ \t]*){1,300})@(?=[A-Za-z0-9\[])"
)


def _wrapped_url_password(user: str, pw: str) -> bool:
    if "\n" not in pw or pw.count("\n") > 3:
        return False
    first = next((piece for piece in re.split(r"\r?\n[ \t]*", pw) if piece), "")
    if first.isdigit() and len(first) <= 5 and ("." in user or user.lower() == "localhost" or not user):
        # http://host:8080 at a line's end, an e-mail address on the next line
        return False
    joined = re.sub(r"\r?\n[ \t]*", "", pw)
    return bool(joined) and _url_password_ok(joined)


# base64 blobs: decoded if printable, masked whole if that holds a secret
_B64_MIN, _B64_MAX = 16, 8192
_B64_MAX_DEPTH = 2
# bytes.find over a translate: a regex at every offset cost 1/3 of scrub time
_B64_MARKS = bytes(
    0x78 if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "+/") else 0x20 for c in range(256)
)
_B64_RUN = b"x" * _B64_MIN
_B64_EDGE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-")


def _b64_candidates(text: str) -> list:
    """(start, end) of each base64 blob candidate: a run of 16-8192 characters of the alphabet,
    its `=` padding, and no identifier character (`_`, `-`) or more `=` right around it."""
    # one byte per character: non-ASCII becomes `?`, no base64 character
    marks = (text.encode("ascii") if text.isascii() else text.encode("ascii", "replace")).translate(
        _B64_MARKS
    )
    i = marks.find(_B64_RUN)
    if i < 0:
        return []
    out = []
    n = len(text)
    while i >= 0:
        s = marks.rfind(b" ", 0, i) + 1
        e = marks.find(b" ", i)
        e = n if e < 0 else e
        if e - s <= _B64_MAX and (s == 0 or text[s - 1] not in _B64_EDGE or text[s - 1] == "="):
            pad = e
            while pad < n and pad - e < 2 and text[pad] == "=":
                pad += 1
            if pad == n or text[pad] not in _B64_EDGE:
                out.append((s, pad))
        i = marks.find(_B64_RUN, e)
    return out


def _b64_text(blob: str) -> str | None:
    """The printable UTF-8 text a base64 blob encodes, or None."""
    import base64
    import binascii

    core = blob.rstrip("=")
    if len(core) % 4 == 1 or not _mixed_case(core):
        return None
    try:
        decoded = base64.b64decode(core + "=" * (-len(core) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    if len(decoded) < 8 or not decoded.replace("\n", " ").replace("\t", " ").replace("\r", " ").isprintable():
        return None
    return decoded


class _Shape:
    """A pass gated by words, as the trigger index sees it: in a text's `found` when one of its
    keywords occurs, so that no pass scans the text for its words again (docs/benchmarks.md,
    'Secrets'). `views`: its words make the decoded views and the
    wrapped-token view worth a look (rules_may_apply); `regex`: what a line break's verdict tries."""

    __slots__ = ("kind", "triggers", "regex", "lower", "also", "views")

    def __init__(self, kind: str, triggers: tuple, regex: re.Pattern[str], also: tuple, views: bool) -> None:
        self.kind = kind
        self.triggers = triggers  # lower-case keywords
        self.regex = regex
        self.lower = True
        self.also = also  # and one of these must occur in the lowered text too
        self.views = views

    def may_match(self, low: str) -> bool:
        return self.views and (not self.also or any(w in low for w in self.also))


# (name, keywords, pattern, words, views); word-only entries never match
_SHAPE_SPECS = (
    ("netrc", ("machine", "default"), "_NETRC_START_RE", ("password", "passwd"), True),
    ("cookie", ("cookie",), "_COOKIE_RE", (), True),
    ("bearer", ("bearer",), "_BEARER_RE", (), True),
    # views: a wrapped blob
    ("base64", ("base64", "b64decode", "atob"), "_B64_HINT_RE", (), True),
    ("mysql", ("mysql", "mariadb"), "_NEVER_RE", (), True),
    ("login", ("login", "sshpass"), "_NEVER_RE", (), True),
    (
        "cli",
        _CLI_TOOL_WORDS + ("sqlplus", "sqlldr", "expdp", "impdp", "rman", "dgmgrl", "sqlcl", "conn"),
        "_CLI_BREAK_RE",
        (),
        True,
    ),
    ("authorization", ("authorization",), "_NEVER_RE", (), True),
    ("basic-command", ("basic ",), "_NEVER_RE", (), True),
    ("private-key", ("private key",), "_NEVER_RE", (), True),
    ("pin", ("pin ",), "_NEVER_RE", (), True),
    ("basic", ("basic",), "_NEVER_RE", (), False),
    ("prose", ("pw", "pin", "pass phrase", "pass word"), "_NEVER_RE", (), False),
)
_B64_HINT_RE = _rare(r"(?i)base64|b64decode|atob")
# a tool's line ending in a flag's word may have its value cut by the break
_CLI_BREAK_RE = _rare(
    r"(?i)(?<![^\s/;|&(`'\"=])(?:"
    + "|".join(re.escape(t) for t in _CLI_TOOL_WORDS + ("sqlplus", "rman"))
    + r")(?:\.exe)?[ \t][^\n|;&]*(?:[ \t]-{1,2}[A-Za-z]{1,16}[ \t]+|[ \t]-[A-Za-z]|pass:|%|/)[^\s]*$"
)
_NEVER_RE = _lazy("_NEVER_RE", r"(?!)")
_SHAPES: dict = {}  # name -> _Shape, built with the rules
_SHAPE_SET: frozenset = frozenset()
# the url-password rule: its `://` trigger also gates the wrapped-URL pass
_URL_RULE: list = []
_ENTROPY_WINDOW = 40
_MAX_PASSES = 4


_COMPILED: tuple | None = None
# triggers of the rules above
_TRIGGER_INDEX: _scrub_table.KeywordIndex | None = None
_RULE_ORDER = operator.attrgetter("order")
_CLEAN_CACHE_TEXT = 256
_CLEAN_CACHE_SIZE = 16384


def _builtin_rules() -> tuple:
    global _COMPILED, _TRIGGER_INDEX, _SHAPE_SET
    if _COMPILED is None:
        g = globals()
        for name, (pattern, flags) in _SOURCES.items():
            g[name] = re.compile(pattern, flags)
        rules = tuple(
            _Rule(kind, triggers, re.compile(pattern, flags), group, check, lower)
            for kind, triggers, pattern, group, check, lower, flags in _RULE_SPECS
        )
        for name, keywords, regex, also, views in _SHAPE_SPECS:
            # (_rare: compiled when used)
            _SHAPES[name] = _Shape(name, keywords, g[regex], also, views)
        _SHAPE_SET = frozenset(_SHAPES.values())
        _URL_RULE[:] = [r for r in rules if r.kind == "url-password"][:1]
        # one index for all triggers and keywords: words looked up once
        _TRIGGER_INDEX = _scrub_table.KeywordIndex(
            [(t, r, not r.lower) for r in rules for t in r.triggers]
            + [(t, shape, False) for shape in _SHAPES.values() for t in shape.triggers]
            + [(kw, rule, False) for rule in _scrub_table.table().rules for kw in rule.keywords],
            segment_chars=_NAME_CHARS,
        )
        _COMPILED = rules
    return _COMPILED


def _ci(regex: re.Pattern[str]) -> re.Pattern[str]:
    """The case-insensitive twin of a pattern meant for lowered text (for when lower() changes lengths)."""
    # re's own cache keeps this cheap
    return re.compile(regex.pattern, regex.flags | re.I)


# --- which rules a text needs ---

# run -> keyword mask << 1 | matters to the assignment pass (see _scan)
_RUN_VERDICTS: dict = {}
_RUN_CACHE_SIZE = 65536
# longer runs (random blobs) are judged each time they occur, not remembered
_RUN_CACHE_MAX_LEN = 128


def _verdict(run: str) -> int:
    """Judge a run not seen before, and remember the verdict if the run is short."""
    verdict = _TRIGGER_INDEX.in_segment(run) << 1 | _run_matters(run)
    if len(run) <= _RUN_CACHE_MAX_LEN:
        if len(_RUN_VERDICTS) >= _RUN_CACHE_SIZE:
            _RUN_VERDICTS.clear()
        _RUN_VERDICTS[run] = verdict
    return verdict


# their lower() holds an ASCII letter: a hit may span a run boundary
_LOWERS_TO_ASCII = ("\u0130", "\u212a")


def _scan(text: str, low: str, shapes: bool = False) -> tuple[set, set | None]:
    """What the text's words say: (the rules whose keyword or trigger occurs, the runs of name
    characters whose keyword hits the assignment pass must judge; None: all hits). `low` is
    text.lower(). `shapes`: the found rules include the shape passes (_Shape) whose keyword occurs.

    Keywords made of name characters (all but a few), and every hit of the assignment pass, lie
    inside one run of name characters: the text is split into its distinct runs once, and each
    run is judged once and remembered. lower() can turn a non-ASCII character into an ASCII
    letter (the Kelvin sign into k): the rules of such text are looked up in its lowered words.
    A marker's type is the scrubber's word, not the text's: `[REDACTED:secret-assignment]` does
    not make the rules keyed on `secret` run again over what it already redacted.

    _RUN_VERDICTS keeps each run's verdict as one int: its keyword-index mask
    (KeywordIndex.in_segment) shifted left once, plus 1 if its keyword hits matter to the
    assignment pass (_run_matters), so ORing a text's verdicts ORs both parts at once. The
    verdicts are read once (map(dict.get), in C) and used as a snapshot, so a thread that clears
    the cache meanwhile cannot make a text miss a rule.
    """
    if "[REDACTED:" in text:
        text = MARKER_RE.sub(" ", text)
        low = text.lower()
    ascii_text = text.isascii()
    if ascii_text:
        runs = tuple(set(text.encode("ascii").translate(_NAME_BYTES).decode("ascii").split()))
    else:
        runs = tuple(set(_NAME_RUN_RE.findall(text)))
    verdicts = list(map(_RUN_VERDICTS.get, runs))
    if None in verdicts:
        verdicts = [_verdict(run) if v is None else v for run, v in zip(runs, verdicts)]
    # Most runs share a few verdicts: OR each distinct one once.
    total = reduce(or_, set(verdicts), 0)
    matter = {run for run, v in zip(runs, verdicts) if v & 1} if total & 1 else set()
    if not ascii_text:
        # the pass must look at every hit in `low`
        if any(c in text for c in _LOWERS_TO_ASCII):
            matter = None if any(k in low for k in _KEYWORD_TRIGGERS) else set()
        found = _TRIGGER_INDEX.find(text, low, _scrub_table.words(low))
    else:
        found = _TRIGGER_INDEX.resolve(text, low, total >> 1)
    if not shapes and found and not _SHAPE_SET.isdisjoint(found):
        found -= _SHAPE_SET  # a new set on every call: changed in place
    return found, matter


def _run_spans(text: str, runs: set) -> list:
    """The spans of every occurrence of these runs in text as whole runs of name characters, in order."""
    spans = []
    for run in runs:
        n = len(run)
        i = text.find(run)
        while i >= 0:
            e = i + n
            if (i == 0 or text[i - 1] not in _NAME_CHARS) and (e == len(text) or text[e] not in _NAME_CHARS):
                spans.append((i, e))
            i = text.find(run, i + 1)
    spans.sort()
    return spans


def _cuts_marker(text: str, ms: int, me: int, gs: int, ge: int) -> bool:
    """Whether a match [ms, me) touches a marker that is not wholly inside its replaced part [gs, ge)."""
    if text.find("[REDACTED:", max(0, ms - 50), me) < 0:
        return False
    for mk in MARKER_RE.finditer(text, max(0, ms - 50), me + 50):
        a, b = mk.span()
        if a < me and ms < b and not (gs <= a and b <= ge):
            return True
    return False


def _after_key_qualifier(text: str, s: int) -> bool:
    """Whether the word `key` at `s` follows a qualifier: "API key", "access key", "secret key"."""
    prev = _PREV_WORD_RE.search(text, max(0, s - 24), s)
    return bool(prev) and prev.group(1).lower() in _KEY_QUALIFIERS


def _entropy_after(text: str, e: int) -> tuple | None:
    """The span of a random-looking token a few characters after a secret keyword ending at `e`."""
    eol = text.find("\n", e)
    if eol < 0:
        eol = len(text)
    limit = min(eol, e + _ENTROPY_WINDOW)
    redacted = text.find("[REDACTED:", e, limit)
    # already handled; looking past a marker would break idempotence
    if redacted >= 0:
        limit = redacted
    for i, m in enumerate(_CANDIDATE_RE.finditer(text, e, min(eol, limit + 1100))):
        if m.start() > limit or i >= 3:
            break
        if _looks_random(m.group(0)):
            return m.span()
    return None


_BREAK_CACHE: dict = {}


def _break_matters(text: str, s: int, left: str, right: str) -> bool:
    """Whether the line break at `s`, between token runs `left` and `right`, may cut a secret.

    Cheap tests only (a tool output has a break on nearly every line): the joined token looks
    random, or holds a rule's trigger that may match it, or the line before the break assigns
    to a secret-looking name. The verdict is remembered per (line, right run).
    """
    if not _piece_of_token(right):
        return False
    if not _piece_of_token(left):
        # a value's first piece may be short or read as a word
        line = text[max(text.rfind("\n", 0, s) + 1, s - 400) : s].rstrip("\r")
        if not left or not (_views.value_start(line[: len(line) - len(left)])):
            return False
    if complete_item(left.rsplit("=", 1)[-1]) or complete_item(right):
        # a UUID or digest at the end, a path at the start: whole items
        return False
    line_start = max(text.rfind("\n", 0, s) + 1, s - 400)
    line = text[line_start:s]
    key = (line, right)
    hit = _BREAK_CACHE.get(key)
    if hit is None:
        if len(_BREAK_CACHE) >= 8192:
            _BREAK_CACHE.clear()
        hit = _BREAK_CACHE[key] = _break_verdict(line, left, right)
    return hit


_WORDISH_PATH_RE = _lazy("_WORDISH_PATH_RE", r"[a-z0-9\-]+(?:[./][a-z0-9_\-]+)+/?")


def complete_item(piece: str) -> bool:
    """A run that is a whole item of its own: a UUID, a hex digest, a lower-case path or host."""
    if _UUID_RE.fullmatch(piece) or (_HEX_RE.fullmatch(piece) and len(piece) in _DIGEST_HEX_LENGTHS):
        return True
    if "/" not in piece and "." not in piece:
        return False
    return _WORDISH_PATH_RE.fullmatch(piece) is not None and _letters_wordish(piece)


def _letters_wordish(piece: str) -> bool:
    # every segment a word or a number: github.com/acme/lib, dist/app-8.20
    for seg in re.split(r"[./\-_]", piece):
        if seg and not (seg.isalpha() or seg.isdigit()):
            return False
    return True


_TOKEN_PREFIXES = (
    "AKIA",
    "ASIA",
    "ABIA",
    "ACCA",
    "A3T",
    "eyJ",
    "ZXlK",
    "gh",
    "glpat",
    "xox",
    "sk",
    "AIza",
    "npm_",
    "hf_",
)


def _piece_of_token(piece: str) -> bool:
    """Whether a run of token characters at a line break may be a piece of a random token: a
    word ("done", "PASSED") is not; a random piece of 4+ characters almost always holds a digit,
    both cases or a symbol."""
    # --verbose, ./run, a sentence's end
    if piece[:1] in "-./" or piece[-1:] in ".":
        piece = piece.strip("-./")
    if len(piece) < 2:
        return False
    if len(piece) >= 16 or piece.startswith(_TOKEN_PREFIXES):
        return True
    for c in piece:
        if c.isdigit() or c in "+/=_-":
            return True
    return not _views.wordlike(piece)


def _break_verdict(line: str, left: str, right: str) -> bool:
    joined = left + right
    core = joined.strip(".=-/+_")
    if _looks_random(core) or _env_value_is_secret(core):
        return True
    for part in (joined, line + right):
        low = part.lower()
        found, matter = _scan(part, low, True)
        if matter is None or matter:
            return True
        for rule in found:
            if type(rule) is _scrub_table.Rule:
                if rule.may_match(part, low) and rule.regex.search(part):
                    return True
            elif rule.regex.search(low if rule.lower and False else part):
                return True
    return False


# --- the scrubber ---


class Scrubber:
    """Redacts private spans and credentials; `counts` accumulates redactions per type over calls."""

    def __init__(
        self,
        extra_patterns: dict[str, str] | None = None,
        allow: Iterable[str] = (),
        *,
        betterleaks: bool = False,
    ) -> None:
        self.counts: Counter = Counter()
        # optional (kirolearn[scan]): betterleaks' Go engine after our own rules
        self._betterleaks = _betterleaks_scan() if betterleaks else None
        self._rules = _builtin_rules()
        self._extra: list = []
        for kind, pattern in (extra_patterns or {}).items():
            if not isinstance(kind, str) or not _TYPE_NAME_RE.fullmatch(kind):
                raise ValueError(f"extra pattern type {kind!r}: type names are 1-40 of [A-Za-z0-9_-]")
            try:
                regex = re.compile(pattern)
            except (re.error, TypeError) as err:
                raise ValueError(f"extra pattern {kind!r}: invalid regex {pattern!r}: {err}") from None
            self._extra.append((kind, regex))
        self._allow = tuple(sorted({a for a in allow if isinstance(a, str) and a}, key=len, reverse=True))
        self._allow_set = frozenset(self._allow)
        self._clean: set = set()
        self._memo: tuple | None = None
        self._low_memo: tuple | None = None
        self._b64_depth = 0

    # --- public ---

    def scrub_text(self, text: str) -> str:
        """Return `text` with every private span and credential replaced by `[REDACTED:<type>]`."""
        if not isinstance(text, str):
            raise TypeError(f"scrub_text expects str, got {type(text).__name__}")
        # short texts recur (paths, ids): a clean one costs a look-up next
        short = len(text) <= _CLEAN_CACHE_TEXT
        if short and text in self._clean:
            return text
        # a redaction changes what rules saw: repeat until stable
        original = text
        out = self._scrub_once(text)
        for _ in range(_MAX_PASSES - 1):
            if out == text:
                break
            text, out = out, self._scrub_once(out)
        if short and out == original:
            if len(self._clean) >= _CLEAN_CACHE_SIZE:
                self._clean.clear()
            self._clean.add(original)
        return out

    def _scrub_once(self, text: str) -> str:
        if not text:
            return text
        restore = None
        if self._allow:
            text, restore = self._mask_allowed(text)
        text = self._scrub_private(text)
        text = self._scrub_views(text)
        text = self._scrub_plain(text)
        if restore:
            text = text.translate(restore)
        return text

    def _scrub_plain(self, text: str) -> str:
        """Every rule but the private spans and the decoded views, on the text as written."""
        if "PRIVATE KEY" in text:
            text = self._sub(text, "private-key", _PRIVATE_KEY_RE, 0, None)
        for kind, regex in self._extra:
            text = self._sub_extra(text, kind, regex)
        # the text's words pick the rules, and whether the assignment pass runs
        low, found, matter = self._scanned(text)
        before = text
        bearer = prose = False
        if found:
            for rule in self._rules:
                if rule in found:
                    text = self._sub(text, rule.kind, rule.regex, rule.group, rule.check)
            shapes = _SHAPES
            if shapes["mysql"] in found:
                text = _MYSQL_CMD_RE.sub(self._sub_password_flags, text)
            if shapes["login"] in found:
                text = _LOGIN_CMD_RE.sub(self._sub_password_flags, text)
            if shapes["cli"] in found:
                text = self._sub_cli_passwords(text)
            if shapes["authorization"] in found:
                text = self._sub_auth_header(text)
            if shapes["basic"] in found:
                text = self._sub_basic_credentials(text)
            if shapes["netrc"] in found and ("password" in low or "passwd" in low):
                text = self._sub_netrc(text)
            if shapes["cookie"] in found:
                text = self._sub_cookies(text)
            if _URL_RULE[0] in found and "\n" in text:
                text = self._sub_wrapped_url(text)
            bearer = shapes["bearer"] in found
            prose = shapes["prose"] in found
        if self._b64_depth < _B64_MAX_DEPTH:
            text = self._sub_base64(text)
        if text is not before:  # a redaction changed the words: look again
            low = text.lower()
            found, matter = _scan(text, low, True)
            before = text
        if matter is None or matter:
            text = self._keyword_pass(text, matter)
        text = self._table_pass(text, found if text is before else None)
        # after the keyword pass, which names a long random token high-entropy
        if bearer:
            text = self._sub_bearer(text)
        # Shape rules last: a catalogue rule names the secret better.
        if "=" in text:
            text = self._env_pass(text)
        # (every prose word but these is a secret-looking name)
        if matter is None or matter or prose:
            text = self._prose_pass(text)
        if self._betterleaks is not None and len(text) >= 16:
            text = self._betterleaks_pass(text)
        return text

    # --- decoded views ---

    def _plain_fixpoint(self, text: str) -> str:
        out = self._scrub_plain(text)
        for _ in range(_MAX_PASSES - 1):
            if out == text:
                break
            text, out = out, self._scrub_plain(out)
        return out

    def _view_spans(self, view_text: str) -> list:
        """(start, end, kind) of what the rules redact in a decoded view (counts left untouched)."""
        counts = Counter(self.counts)
        try:
            out = self._plain_fixpoint(self._scrub_private(view_text))
        finally:  # in place: callers may hold the Counter itself
            self.counts.clear()
            self.counts.update(counts)
        if out == view_text:
            return []
        return _views.redacted_spans(view_text, out, MARKER_RE)

    def _scrub_views(self, text: str) -> str:
        """Redact, in the text as written, what the rules find in its decoded views: JSON, URL and
        HTML escapes decoded; tokens a line break cut in two joined again.

        Breaks are looked at only where a rule may apply: walking every line of every tool output
        would double the drain's scrub time. A break inside the very keyword a rule needs
        (FLWSECK_TES + T-…) is the cost: tests/test_scrub_matrix.py's KNOWN_GAPS."""
        spans = []
        if _views.has_escapes(text):
            for view in _views.escape_views(text):
                # a decoded private tag is the private pass's too
                if self.rules_may_apply(view.text) or self._private_regex(view.text) is not None:
                    spans += [(*view.span(s, e), kind) for s, e, kind in self._view_spans(view.text)]
        # breaks only where a rule may apply: every line doubled the scrub time
        if ("\n" in text or "\\n" in text) and self.rules_may_apply(text):
            spans += self._wrapped_spans(text)
        if not spans:
            return text
        # redact the plain pass's finds too: a view's find may overlap them
        counts = Counter(self.counts)
        try:
            plain = self._scrub_plain(text)
        finally:
            self.counts.clear()
            self.counts.update(counts)
        if plain != text:
            spans += _views.redacted_spans(text, plain, MARKER_RE)
        spans.sort()
        out = []
        last = 0
        out_kind = ""
        for s, e, kind in spans:
            if e <= last:
                continue
            if s < last:  # overlapping: extend the previous redaction
                s = last
                # the previous marker is re-emitted below with the extended span
                out.pop()
                kind = out_kind
            else:
                out.append(text[last:s])
                out_kind = kind
                self.counts[kind] += 1
            if MARKER_RE.fullmatch(text, s, e):
                out.append(text[s:e])
            else:
                out.append(marker(kind))
            last = e
        out.append(text[last:])
        return "".join(out)

    def _scanned(self, text: str) -> tuple:
        """(text.lower(), *_scan(text)), remembered for the last text (views ask first, then the
        plain pass asks again about the same string)."""
        memo = self._memo
        if memo is not None and memo[0] is text:
            return memo[1:]
        low = self._lower(text)
        found, matter = _scan(text, low, True)
        self._memo = (text, low, found, matter)
        return low, found, matter

    def _lower(self, text: str) -> str:
        """text.lower(), remembered for the last text: the private pass, the scan and the table pass
        of one text share it (docs/benchmarks.md, 'Secrets')."""
        memo = self._low_memo
        if memo is not None and memo[0] is text:
            return memo[1]
        low = text.lower()
        self._low_memo = (text, low)
        return low

    def rules_may_apply(self, text: str) -> bool:
        """False when no rule can redact anything in this text or in its views: no rule's
        trigger that may match, no secret-looking name, no literal a command rule needs, no
        `NAME=` an .env line has. (Views cost a second scrub: most texts skip them here.)"""
        low, found, matter = self._scanned(text)
        if matter is None or matter or self._extra or self._betterleaks is not None:
            return True
        # a command word (mysql, login, authorization, ...) is a _Shape too
        for rule in found:
            kind = type(rule)
            if kind is _Shape:
                if rule.may_match(low):
                    return True
            elif kind is not _scrub_table.Rule or rule.may_match(text, low):
                return True
        return "=" in text and _ENV_NAME_RE.search(text) is not None

    def _wrapped_spans(self, text: str) -> list:
        """Spans of tokens that a line break (real or `\\n`) cuts in two, found joined."""
        lo, hi = self._hot_span(text)
        cuts = [
            (s, e)
            for s, e, left, right in _views.breaks(text, lo, hi)
            if _break_matters(text, s, left, right)
        ]
        if not cuts:
            return []
        spans = []
        # one window per tied group, each break alone too
        i = 0
        singles = 0
        while i < len(cuts):
            j = i
            while j + 1 < len(cuts) and text.find("\n", cuts[j][1], cuts[j + 1][0]) < 0:
                j += 1
            spans += self._joined_findings(text, cuts[i : j + 1])
            if j > i:
                for cut in cuts[i : j + 1]:
                    if singles >= 16:
                        break
                    singles += 1
                    spans += self._joined_findings(text, [cut])
            i = j + 1
        return spans

    def _hot_span(self, text: str) -> tuple:
        """(start, end) of the part of the text a wrapped token can matter in: from two lines
        before the first place a rule may apply (a secret-looking name, a rule's trigger, an
        .env `NAME=`) to 12 lines after the last. The whole text when that is unclear."""
        low, found, matter = self._scanned(text)
        if matter is None or self._extra or self._betterleaks is not None:
            return 0, None
        pos = []

        def at(hay, lit):
            i = hay.find(lit)
            if i >= 0:
                pos.append(i)
                pos.append(hay.rfind(lit))

        for run in list(matter)[:64]:
            at(text, run)
        for rule in found:
            if type(rule) is _scrub_table.Rule:
                for lit in rule.starts or ():
                    at(text if rule.cased else low, lit if rule.cased else lit.lower())
                if not rule.starts:
                    for kw in rule.keywords:
                        at(low, kw)
            elif type(rule) is not _Shape or rule.views:
                # (command words are shapes: see _SHAPE_SPECS)
                for lit in rule.triggers:
                    at(low if rule.lower else text, lit)
        if "=" in text:
            for m in _ENV_NAME_RE.finditer(text):
                pos.append(m.start())
        if not pos or len(low) != len(text):
            return 0, None
        first, last = min(pos), max(pos)
        lo = text.rfind("\n", 0, first)
        lo = text.rfind("\n", 0, lo) if lo > 0 else -1  # and the line before
        hi = last
        for _ in range(12):
            nxt = text.find("\n", hi + 1)
            if nxt < 0:
                return max(0, lo), None
            hi = nxt
        return max(0, lo), hi

    def _joined_findings(self, text: str, cuts: list) -> list:
        """What the rules find across these breaks once they are removed, in a window of the lines
        they tie together and the line before (which may name the secret)."""
        ws = text.rfind("\n", 0, cuts[0][0])
        ws = text.rfind("\n", 0, ws) + 1 if ws > 0 else 0
        we = text.find("\n", cuts[-1][1])
        we = len(text) if we < 0 else we
        view = _views.joined_view(text[ws:we], [(s - ws, e - ws) for s, e in cuts])
        out = []
        for s, e, kind in self._view_spans(view.text):
            # A PEM block spans lines: the plain rule judges the whole text.
            if kind != "private-key" and any(s < jn < e for jn in view.joins):
                a, b = view.span(s, e)
                out.append((a + ws, b + ws, kind))
        return out

    def scrub_value(self, value: object) -> object:
        """Scrub a JSON-like value recursively (dict keys too), returning new objects."""
        return self.walk(value, self.scrub_text)

    def walk(self, value: object, scrub_text: Callable[[str], str]) -> object:
        """scrub_value, with `scrub_text` for the string values (keys always use this scrubber's:
        kirolearn.privacy.carry passes one that sees the text before).

        A string under a secret-named key is replaced whole (_scrub_secret_field). Keys that scrub
        to the same text (two private keys) collide and the later wins: nothing leaks, one entry
        is lost."""
        if isinstance(value, str):
            return scrub_text(value)
        if isinstance(value, dict):
            # secret-named key: replaced whole; alike keys: the later wins
            out = {}
            for key, item in value.items():
                new_key = self.scrub_text(key) if isinstance(key, str) else key
                if isinstance(key, str) and isinstance(item, str) and _is_secret_key(key):
                    out[new_key] = self._scrub_secret_field(item)
                else:
                    out[new_key] = self.walk(item, scrub_text)
            return out
        if isinstance(value, list):
            return [self.walk(item, scrub_text) for item in value]
        if isinstance(value, tuple):
            return tuple(self.walk(item, scrub_text) for item in value)
        return value

    # --- helpers ---

    def _scrub_secret_field(self, item: str) -> str:
        # a secret-named key's value is secret unless placeholder or allowed
        if item.strip() in self._allow_set:
            return item
        scrubbed = self.scrub_text(item)
        rest = MARKER_RE.sub("", scrubbed).strip()
        first, _, tail = rest.partition(" ")
        if first.lower() in _AUTH_SCHEMES:  # "Bearer [REDACTED:jwt]"
            rest = tail.strip()
        if _is_placeholder(rest) or rest in self._allow_set:
            return scrubbed
        self.counts["secret-assignment"] += 1
        return marker("secret-assignment")

    def _mask_allowed(self, text: str) -> tuple:
        table: dict = {}
        taken = set(_SENTINEL_RANGE_RE.findall(text)) if _SENTINEL_RANGE_RE.search(text) else ()
        code = _SENTINEL_BASE
        for literal in self._allow:
            if literal in text:
                # private-use characters already in the input stay theirs
                while chr(code) in taken:
                    code += 1
                if code > 0xFFFFD:
                    # over 65,000 distinct literals: the rest are not protected
                    break
                text = text.replace(literal, chr(code))
                table[code] = literal
                code += 1
        return text, table

    def _private_regex(self, text: str) -> re.Pattern[str] | None:
        """The private-tag pattern this text needs, or None when it cannot hold a tag."""
        low = self._lower(text)
        ascii_text = text.isascii()
        if "private" not in low:
            # a zero-width char hides `private`; views decode ASCII escapes
            if ascii_text or not _ZW_CHAR_RE.search(text):
                return None
            return _PRIVATE_ZW_RE
        if ascii_text and "<" not in text and "&" not in text and "\\u" not in low:
            return None
        if (not ascii_text or "\\u" in text or "&#" in text) and _ZW_ANY_RE.search(text):
            return _PRIVATE_ZW_RE
        return _PRIVATE_TAG_RE

    def private_unclosed(self, text: str) -> bool:
        """Whether `text` ends inside a private span: an opening tag whose closing one is not there
        (every spelling, escaped zero-width characters too: only asked about rare texts)."""
        depth = 0
        for m in _PRIVATE_ZW_RE.finditer(text):
            if m.group(1):
                depth = max(0, depth - 1)
            elif not m.group(2):
                depth += 1
        return depth > 0

    def _scrub_private(self, text: str) -> str:
        regex = self._private_regex(text)
        if regex is None:
            return text
        out = []
        last = depth = start = 0
        for m in regex.finditer(text):
            if m.group(1):  # closing tag
                if depth == 0:
                    continue  # stray closing tag: left as is
                depth -= 1
                if depth == 0:
                    out.append(text[last:start])
                    out.append(marker("private"))
                    self.counts["private"] += 1
                    last = m.end()
            elif not m.group(2):  # <private/> is empty: ignored
                if depth == 0:
                    start = m.start()
                depth += 1
        if depth:  # unclosed: over-redact to the end rather than leak
            out.append(text[last:start])
            out.append(marker("private"))
            self.counts["private"] += 1
            last = len(text)
        if not out:
            return text
        out.append(text[last:])
        return "".join(out)

    def _sub(self, text: str, kind: str, regex: re.Pattern[str], group: object, check: object) -> str:
        rep = marker(kind)

        def replace(m: re.Match[str]) -> str:
            secret = m.group(group)
            if not secret or MARKER_RE.fullmatch(secret) or _only_sentinels(secret):
                return m.group(0)
            if check is not None and not check(secret):
                return m.group(0)
            s, e = m.span(group)
            if _cuts_marker(text, m.start(), m.end(), s, e):
                return m.group(0)
            self.counts[kind] += 1
            if group == 0:
                return rep
            base = m.start()
            whole = m.group(0)
            return whole[: s - base] + rep + whole[e - base :]

        return regex.sub(replace, text)

    def _table_pass(self, text: str, found: set | None = None) -> str:
        """Every catalogue rule (rules.py) whose keyword the text holds and that may match it.

        `found` is what `_scan` gave for this very text, if known.
        """
        low = self._lower(text)
        if found is None:
            found, _ = _scan(text, low)
        rules = sorted(
            (r for r in found if type(r) is _scrub_table.Rule and r.may_match(text, low)), key=_RULE_ORDER
        )
        for rule in rules:
            text = self._sub_rule(text, rule)
        return text

    def _betterleaks_pass(self, text: str) -> str:
        for finding in self._betterleaks(text):
            secret = finding.secret
            if not secret or len(secret) < 6 or "[REDACTED:" in secret or secret not in text:
                continue
            kind = re.sub(r"[^A-Za-z0-9_\-]", "-", finding.rule_id or "betterleaks")[:64]
            n = text.count(secret)
            text = text.replace(secret, marker(kind))
            self.counts[kind] += n
        return text

    def _sub_rule(self, text: str, rule: _scrub_table.Rule) -> str:
        out = []
        last = 0
        for m in rule.regex.finditer(text):
            s, e = rule.secret_span(m)
            if s < last or s >= e:
                continue
            secret = text[s:e]
            if "[REDACTED:" in secret and MARKER_RE.fullmatch(secret.strip()):
                continue
            if _only_sentinels(secret) or (
                rule.entropy is not None and _scrub_table.entropy(secret) <= rule.entropy
            ):
                continue
            if _scrub_table.globally_allowed(secret) or (rule.broad and _scrub_table.is_digest(secret)):
                continue
            if rule.allowed(secret, m.group(0), text[m.start() : s]) or _cuts_marker(
                text, m.start(), m.end(), s, e
            ):
                continue
            out.append(text[last:s])
            out.append(marker(rule.id))
            self.counts[rule.id] += 1
            last = e
        if not out:
            return text
        out.append(text[last:])
        return "".join(out)

    def _sub_extra(self, text: str, kind: str, regex: re.Pattern[str]) -> str:
        markers = [m.span() for m in MARKER_RE.finditer(text)]
        group = "secret" if "secret" in regex.groupindex else 0
        out = []
        last = 0
        for m in regex.finditer(text):
            s, e = m.span(group)
            if s < 0 or s == e or s < last:
                continue
            # never rewrite a marker
            if any(ms < e and s < me for ms, me in markers):
                continue
            out.append(text[last:s])
            out.append(marker(kind))
            self.counts[kind] += 1
            last = e
        if not out:
            return text
        out.append(text[last:])
        return "".join(out)

    def _sub_cli_passwords(self, text: str) -> str:
        """The password flags of the command-line tools _CLI_PASSWORD_FLAGS names, and Oracle's
        `user/password@db` logins."""
        g = globals()
        low = self._lower(text)
        for i, (tools, _) in enumerate(_CLI_PASSWORD_FLAGS):
            if not any(t in low for t in tools.split()):
                continue
            flag_re = g["_CLI_FLAG_RE_" + str(i)]

            def command(m: re.Match[str], flag_re=flag_re) -> str:
                return flag_re.sub(self._cli_value, m.group(0))

            text = g["_CLI_CMD_RE_" + str(i)].sub(command, text)
        spans = []
        for m in _ORACLE_LOGIN_RE.finditer(text):
            group = "pw" if m.group("pw") is not None else "pw2"
            if not _is_placeholder(m.group(group)) and not MARKER_RE.match(text, m.start(group)):
                spans.append(m.span(group))
        return self._mark(text, spans, "cli-password")

    def _cli_value(self, m: re.Match[str]) -> str:
        group = m.lastgroup or "bare"
        value = m.group(group)
        if _is_placeholder(value) or MARKER_RE.match(value) or _only_sentinels(value):
            return m.group(0)
        if group == "bare" and (value.startswith(("env:", "file:", "fd:", "stdin")) or value[:1] in "<>|"):
            # openssl `-passin env:VAR`, keytool `-storepass:env`
            return m.group(0)
        if group == "bare" and value[:1] == "\\":
            # `-p\nEnter password:` in JSON text: the flag ends its line
            return m.group(0)
        spaced = m.string[m.start(group) - 1 : m.start(group)] in (" ", "\t")
        if spaced and _IDENT_RE.fullmatch(value) and not _has_digit(value) and value.islower():
            # `mysql -p mydb`: a spaced word is the database, `-p` prompts
            return m.group(0)
        self.counts["cli-password"] += 1
        s, e = m.span(group)
        return m.group(0)[: s - m.start()] + marker("cli-password") + m.group(0)[e - m.start() :]

    def _sub_password_flags(self, command: re.Match[str]) -> str:
        """Redact the -p password(s) of one mysql / login command line."""

        def replace(m: re.Match[str]) -> str:
            group = m.lastgroup or "bare"
            if _is_placeholder(m.group(group)) or MARKER_RE.fullmatch(m.group(group)):
                return m.group(0)
            # `-p\nEnter password:` in JSON text
            if group == "bare" and m.group(group)[:1] == "\\":
                return m.group(0)
            self.counts["user-password"] += 1
            s, e = m.span(group)
            return m.group(0)[: s - m.start()] + marker("user-password") + m.group(0)[e - m.start() :]

        line = command.group(0)
        return (_SPACED_P_RE if "login" in line or "sshpass" in line else _MYSQL_P_RE).sub(replace, line)

    def _sub_basic_credentials(self, text: str) -> str:
        """`Basic <base64>` anywhere (a log line, a header dump, a config value) that decodes to
        `user:password`: the whole base64 goes."""

        def replace(m: re.Match[str]) -> str:
            if not _is_basic_credential(m.group(1)):
                return m.group(0)
            self.counts["authorization"] += 1
            return m.group(0)[: m.start(1) - m.start()] + marker("authorization")

        return _BASIC_B64_RE.sub(replace, text)

    def _sub_netrc(self, text: str) -> str:
        """The password of each .netrc entry (`machine HOST login USER password PW`, one line or several)."""
        spans = []
        for m in _NETRC_START_RE.finditer(text):
            host = m.group("host")
            if host is not None and not _NETRC_HOST_RE.fullmatch(host):
                continue  # "machine learning login page": no host
            pos = m.end()
            for _ in range(8):
                pair = _NETRC_PAIR_RE.match(text, pos)
                if not pair:
                    break
                pos = pair.end()
                group = pair.lastgroup
                if pair.group(1) in ("password", "passwd", "account") and _netrc_password_ok(
                    pair.group(group)
                ):
                    if not spans or pair.start(group) >= spans[-1][1]:
                        spans.append(pair.span(group))
        return self._mark(text, spans, "user-password")

    def _sub_cookies(self, text: str) -> str:
        """The values of a `Cookie:` header and the cookie of a `Set-Cookie:` one that are secrets."""
        spans = []
        for m in _COOKIE_RE.finditer(text):
            region, base = m.group(2), m.start(2)
            # a header inside a JSON string ends at its escape
            for esc in ("\\n", "\\r", '\\"'):
                cut = region.find(esc)
                if cut >= 0:
                    region = region[:cut]
            pos = 0
            for i in range(64):
                pair = _COOKIE_PAIR_RE.match(region, pos)
                if pair is None:
                    break
                pos = pair.end()
                name, value = pair.group(1), pair.group(2)
                if m.group(1) and (i > 0 or name.lower() in _COOKIE_ATTRIBUTES):
                    break  # Set-Cookie: one cookie, then its attributes
                if _cookie_value_is_secret(name, value):
                    s, e = pair.span(2)
                    if value[:1] in ("'", '"') and value.endswith(value[0]) and len(value) > 1:
                        s, e = s + 1, e - 1
                    if not spans or base + s >= spans[-1][1]:
                        spans.append((base + s, base + e))
                if not pair.group(3):
                    break
        return self._mark(text, spans, "authorization")

    def _sub_bearer(self, text: str) -> str:
        """`Bearer <token>` under any name: an .env line, a quoted header value, a log line."""
        spans = []
        for m in _BEARER_RE.finditer(text):
            value = m.group(2)
            if _bearer_value_ok(value, text[m.end() : m.end() + 1]):
                s = m.start(2)
                spans.append((s, s + len(value.rstrip("."))))
        return self._mark(text, spans, "authorization")

    def _sub_wrapped_url(self, text: str) -> str:
        """A URL password that a line break cut in two: the whole password, break included."""
        # the pattern starts with its literal (fast); the scheme is checked here
        spans = [
            m.span(2)
            for m in _WRAPPED_URL_RE.finditer(text)
            if m.start() > 0
            and text[m.start() - 1].isalnum()
            and _wrapped_url_password(m.group(1), m.group(2))
        ]
        return self._mark(text, spans, "url-password")

    def _sub_base64(self, text: str) -> str:
        """Base64 blobs whose decoded text holds a secret (`echo <base64 of DB_PASSWORD=…> | base64 -d`)
        are masked whole, with the type of what the decoded text holds."""
        spans = []
        for start, end in _b64_candidates(text):
            decoded = _b64_text(text[start:end])
            if decoded is None or not self.rules_may_apply(decoded):
                continue
            counts = Counter(self.counts)
            self._b64_depth += 1
            try:
                out = self._plain_fixpoint(self._scrub_private(decoded))
            finally:
                self._b64_depth -= 1
                self.counts.clear()
                self.counts.update(counts)
            if out != decoded:
                found = MARKER_RE.search(out)
                kind = found.group(0)[len("[REDACTED:") : -1] if found else "secret-assignment"
                spans.append((start, end, kind))
        if not spans:
            return text
        out, last = [], 0
        for s, e, kind in spans:
            out += [text[last:s], marker(kind)]
            self.counts[kind] += 1
            last = e
        out.append(text[last:])
        return "".join(out)

    def _env_pass(self, text: str) -> str:
        """High-entropy values of .env lines and `export NAME=value`, whatever the name."""

        def replace(m: re.Match[str]) -> str:
            group = m.lastgroup
            if group not in ("dq", "sq", "bare") or not _env_value_is_secret(m.group(group), m.group("name")):
                return m.group(0)
            if not _env_context(text, m.start()):
                return m.group(0)
            self.counts["high-entropy"] += 1
            s, e = m.span(group)
            return m.group(0)[: s - m.start()] + marker("high-entropy") + m.group(0)[e - m.start() :]

        return _ENV_LINE_RE.sub(replace, text)

    def _prose_pass(self, text: str) -> str:
        """A secret named in prose: "the staging db password is …", "pw was …", "token - …"."""
        low = text.lower()
        matches = _PROSE_RE.finditer(low) if len(low) == len(text) else _ci(_PROSE_RE).finditer(text)
        spans = []
        for m in matches:
            s, e = m.span("value")
            value = text[s:e]
            stripped = value.rstrip(".,;:?)]}\u201d")
            if (spans and s < spans[-1][1]) or not _prose_value_is_secret(
                value, strict=m.group("pw") is None
            ):
                continue
            spans.append((s, s + len(stripped)))
        return self._mark(text, spans, "secret-assignment")

    def _sub_auth_header(self, text: str) -> str:
        low = text.lower()
        same = len(low) == len(text)
        matches = _AUTH_HEADER_RE.finditer(low) if same else _ci(_AUTH_HEADER_RE).finditer(text)
        spans = []
        for m in matches:
            s, e = m.span(3)
            value = text[s:e]
            if value.rstrip(".,:").lower() in _AUTH_SCHEMES or _is_placeholder(value):
                continue
            # a regex source: r"(Authorization:\s*)…"
            if value.startswith("\\"):
                continue
            if _auth_value_is_code(value, text[e : e + 1]):
                # authorization = headers.get("authorization")
                continue
            spans.append((s, e))
        return self._mark(text, spans, "authorization")

    def _mark(self, text: str, spans: list, kind: str) -> str:
        """`text` with each (start, end) span (in order, none overlapping) replaced by `kind`'s marker, counted."""
        if not spans:
            return text
        out, last = [], 0
        for s, e in spans:
            out += [text[last:s], marker(kind)]
            last = e
        self.counts[kind] += len(spans)
        out.append(text[last:])
        return "".join(out)

    def _keyword_pass(self, text: str, runs: set | None = None) -> str:
        """Redact values of secret-named assignments, and random tokens right after a secret keyword.

        `runs`: the runs of name characters whose keyword hits can matter (see `_keyword_hits`);
        None: judge every hit.
        """
        spans: list = []  # (start, end, kind)
        done = 0  # hits before this offset are not looked at again
        n = len(text)
        names = _NAME_CHARS
        low = text.lower()
        same = len(low) == len(text)
        for hit in self._keyword_hits(text, low if same else None, runs):
            hs, he = hit.span()
            if hs < done or any(ts <= hs < te for ts, te, _ in spans[-3:]):
                continue
            s = hs
            floor = max(0, hs - 64)
            while s > floor and text[s - 1] in names:
                s -= 1
            e = he
            ceiling = min(n, s + 80)
            while e < ceiling and text[e] in names:
                e += 1
            while e > he and text[e - 1] in ".-":
                e -= 1
            done = e
            # the type inside a marker
            if s >= 10 and text[s - 10 : s] == "[REDACTED:":
                continue
            name = text[s:e]
            if _secret_name_cached(name):
                found = self._assignment_at(text, s, e, name)
                if found is not None:
                    vs, ve, secret = found
                    done = max(done, ve)
                    if secret:
                        spans.append((vs, ve, "secret-assignment"))
                    continue
            else:
                lowname = name.lower()
                # STRIPE_KEY=…, mailgunKey: …
                if lowname.endswith("key") and lowname != "key":
                    found = self._assignment_at(text, s, e, name)
                    if found is not None:
                        vs, ve, secret = found
                        done = max(done, ve)
                        if secret and _looks_random(text[vs:ve]):
                            spans.append((vs, ve, "high-entropy"))
                        continue
                if lowname != "bearer" and (lowname != "key" or not _after_key_qualifier(text, s)):
                    continue
            # a token after a keyword keeps the text before parsed; spans merge
            tok = _entropy_after(text, e)
            if tok is not None:
                spans.append((tok[0], tok[1], "high-entropy"))
        if not spans:
            return text
        spans.sort()
        merged = [list(spans[0])]
        for vs, ve, kind in spans[1:]:
            cur = merged[-1]
            if vs < cur[1]:
                cur[1] = max(cur[1], ve)
                if kind == "secret-assignment":
                    cur[2] = kind
            else:
                merged.append([vs, ve, kind])
        out = []
        last = 0
        for vs, ve, kind in merged:
            out.append(text[last:vs])
            out.append(marker(kind))
            self.counts[kind] += 1
            last = ve
        out.append(text[last:])
        return "".join(out)

    @staticmethod
    def _keyword_hits(text: str, low: str | None, runs: set | None) -> Iterable[re.Match[str]]:
        """The keyword hits `_keyword_pass` looks at, in order (`low` None: lower() changed lengths).

        Only hits inside `runs` (None: every hit). A hit inside a run of name characters that is
        short (no expansion bound cuts it) and whose name is neither secret nor `…key` nor
        `bearer` ends as `continue` in the pass whatever its context, and sets nothing a later
        hit depends on: `_scan` leaves such runs out (`PASSED`, `tokenize`, `author`), and text
        where every keyword sits in one skips the pass.
        """
        if low is None:
            return _ci(_KEYWORD_RE).finditer(text)
        if runs is None:
            return _KEYWORD_RE.finditer(low)
        finditer = _KEYWORD_RE.finditer
        return (hit for s, e in _run_spans(text, runs) for hit in finditer(low, s, e))

    def _assignment_at(self, text: str, s: int, e: int, name: str) -> tuple | None:
        """(value start, value end, is secret) if secret-named `name` at text[s:e] is assigned a value."""
        flag = name.startswith("-")
        if flag:
            body = name.lstrip("-")
            if not body[:1].isalpha() or len(name) - len(body) > 2:
                return None
            if s > 0 and not text[s - 1].isspace() and text[s - 1] not in "\"'=([{,":
                return None
        pos = e
        quote = ""
        if not flag:
            if s >= 2 and text[s - 2 : s] == '\\"':
                quote = '\\"'
            elif s >= 1 and text[s - 1] in "\"'<":
                quote = text[s - 1]
        if quote == "<":  # <password>value</password>
            if text[e : e + 1] != ">":
                return None
            m = _XML_VALUE_RE.match(text, e + 1)
            if not m:
                return None
            return m.start(1), m.end(1), _literal_is_secret(m.group(1), name)
        if quote:
            if text.startswith(quote, pos):
                pos += len(quote)
                if text[pos : pos + 1] == "]":  # os.environ["API_KEY"] = "..."
                    pos += 1
            else:
                quote = ""
        if flag:
            sep = _FLAG_SEP_RE.match(text, pos)
            if not sep:
                return None
            op, spaced_flag = "=", sep.group(0) != "="
            if spaced_flag and text[sep.end() : sep.end() + 1] in ("-", "=", ":"):
                # `--token -v`; `-token_key = "…"` is an assignment, not a flag
                return None
            spaced = False
        else:
            sep = _SEP_RE.match(text, pos)
            if not sep:
                return None
            op, spaced_flag = sep.group(2), False
            spaced = bool(sep.group(1)) and bool(sep.group(3))
        value = _VALUE_RE.match(text, sep.end())
        if not value:
            return None
        kind = value.lastgroup
        vs, ve = value.span(kind)
        content = value.group(kind)
        if kind == "marker":
            return vs, ve, False
        if kind == "bare" and content.lower() in _STRING_PREFIXES and text[ve : ve + 1] in "\"'":
            value = _VALUE_RE.match(text, ve)  # f"Bearer {key}", b"…", r'…'
            if not value or value.lastgroup not in ("dq", "sq"):
                return vs, ve, False
            kind = value.lastgroup
            vs, ve = value.span(kind)
            content = value.group(kind)
        if kind != "bare":
            if _only_sentinels(content.strip()):
                return vs, ve, False
            after = text[ve + 1 : ve + 3].lstrip(" ")[:1]
            if after == "+" or (
                op == ":"
                and _TYPE_EXPR_RE.fullmatch(content)
                and (
                    "|" in content
                    or "[" in content
                    or (not quote and content[0].isupper() and not _has_digit(content) and after in ")=,")
                )
            ):
                # "k" + var; def f(token: "Token[Span] | None") -> …
                return vs, ve, False
            return vs, ve, _literal_is_secret(content, name)
        if _only_sentinels(content):
            return vs, ve, False
        after = text[ve : ve + 1]
        if op == ":" and _IDENT_RE.fullmatch(content):
            typed = _TYPED_REST_RE.match(text, ve)
            # `password: str = "x"`, `token: Final = f()`, `auth: Auth | None`
            if typed:
                lit = _VALUE_RE.match(text, typed.end()) if typed.group(1) == "=" else None
                if lit and lit.lastgroup in ("dq", "sq", "edq", "bt"):
                    ls, le = lit.span(lit.lastgroup)
                    return ls, le, _literal_is_secret(lit.group(lit.lastgroup), name)
                return vs, ve, False
            if content[0].isupper() and content[1:2].islower() and not _has_digit(content):
                return vs, ve, False  # a CapWords type: `token_cost: Histogram`
        if op == ":" and content.rstrip(".,;!?").replace("-", "").isalpha():
            eol = text.find("\n", ve, ve + 200)
            rest = text[ve : eol if eol >= 0 else ve + 200].strip()
            # "auth: refreshed session for …" is prose, not YAML
            if rest and rest[0] != "#":
                return vs, ve, False
        if spaced and op == "=" and _ini_value(text, s, ve, content, name):
            return vs, ve, True
        return vs, ve, _bare_is_secret(content, name, op, spaced, after, spaced_flag)


# --- module-level conveniences ---


def _betterleaks_scan():
    """betterleaks.scan_string, or an error that says how to install it."""
    try:
        from betterleaks import scan_string
    except ImportError:
        from kirolearn.core.errors import ConfigError

        raise ConfigError(
            "scrub.betterleaks is on but betterleaks is not installed",
            fix="pip install 'kirolearn[scan]' (Linux and Windows wheels only), "
            "or set scrub.betterleaks = false",
        ) from None
    return scan_string


_DEFAULT: Scrubber | None = None


def default_scrubber() -> Scrubber:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Scrubber()
    return _DEFAULT


def __getattr__(name: str) -> object:
    # built on first use: keeps importing the scrubber cheap for the hook
    if name == "DEFAULT":
        return default_scrubber()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def scrub_text(text: str) -> str:
    """Scrub `text` with the default Scrubber."""
    return default_scrubber().scrub_text(text)


def scrub_value(value: object) -> object:
    """Scrub a JSON-like value with the default Scrubber."""
    return default_scrubber().scrub_value(value)
