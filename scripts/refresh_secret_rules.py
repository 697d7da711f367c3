#!/usr/bin/env python3
"""Regenerate kirolearn/privacy/rules.py from the public secret-scanner catalogues.

    python scripts/refresh_secret_rules.py GITLEAKS_TOML [BETTERLEAKS_TOML] \
        --gitleaks-version v8.30.0-27-gb58d3f10 --betterleaks-version v1.7.0 > kirolearn/privacy/rules.py

GITLEAKS_TOML is `config/gitleaks.toml` of github.com/gitleaks/gitleaks (the yardstick: every
rule is taken); BETTERLEAKS_TOML is `config/betterleaks.toml` of github.com/betterleaks/betterleaks
(a second list: its rules that gitleaks lacks are added, except the ones that find identifiers,
host names or URLs rather than credentials, see NOT_SECRETS).

Each rule is rewritten into kirolearn's form (see the docstring this script writes):
- KV: gitleaks' "semi-generic" shape `<name with KEYWORD> <op> <secret>` becomes the keyword
  alternation and the secret's own pattern; the scrubber adds the name/operator frame itself;
- TOKEN: `\\b(<secret>)<terminator>` becomes the secret's pattern with kirolearn's token edges;
- RAW: anything else, translated from Go RE2 to Python `re` (scoped flags, POSIX classes, \\z).
Rule allowlists (regexes aimed at the secret or the whole match, and stopwords) are carried over.
Requires Python 3.11+ (tomllib); the scrubber itself needs only the generated module.
After a refresh: bump SCRUB_RULES_VERSION in kirolearn/core/version.py, run `make test` (the corpus test covers every rule)
and `make bench`, and tell users to run `kirolearn rescrub`.
"""

from __future__ import annotations

import argparse
import re
import sys

import tomllib

# betterleaks rules that detect identifiers, host names, URLs or addresses, not credentials:
# redacting them would cost ordinary text (a bucket host, a tenant id) and protect nothing.
NOT_SECRETS = {
    "artifactory-jfrog-url",
    "azure-client-id",
    "azure-storage-account-name",
    "azure-tenant-id",
    "canva-client-id",
    "cloudinary-cloud-name",
    "clickhouse-cloud-key-id",
    "lark-app-id",
    "planetscale-id",
    "polymarket-address",
    "salesforce-instance-url.1",
    "snowflake-account-host.1",
    "supabase-project-url",
    "tableau-server-host.1",
    "tableau-personal-access-token-name.1",
    "ebay-client-id",
    "mongodb-atlas-service-account-id",
    "ramp-client-id",
    "aikido-client-id",
    "plivo-auth-id",
    "cloudinary-api-key",
}
# Rules that only name files (no pattern over text): nothing for a text scrubber to do.
PATH_ONLY = {"pkcs12-file"}
# RAW rules whose first capturing group is a repeated fragment, not the secret: redact the match.
WHOLE_MATCH = {"microsoft-teams-webhook", "jwt-base64"}  # jwt-base64: named groups mark the JWT header kind

_KV_HEAD = (
    r"(?i)[\w.-]{0,50}?(?:",
    r"(?i:[\w.-]{0,50}?(?:",
    r"[\w.-]{0,50}?(?i:[\w.-]{0,50}?(?:",
    r"(?i)(?:",
    r"(?i:(?:",
)
_KV_MID = (
    r")(?:[ \t\w.-]{0,20})[\s'" + '"' + r"]{0,3}(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)[\x60'" + '"' + r"\s=]{0,5}("
)
_KV_MID_CLOSE = (
    r")(?:[ \t\w.-]{0,20})[\s'" + '"' + r"]{0,3})(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)[\x60'" + '"' + r"\s=]{0,5}("
)
_TAILS = (
    r")(?:[\x60'" + '"' + r"\s;]|\\[nr]|$)",
    r")(?:\\?['" + '"' + r"\x60]|[\s;]|\\[nr]|$)",
    r")(?:[\x60'" + '"' + r"\s;]|\\[nr]|$|\b)",
    r")\b",
    ")",
)
_TOKEN_HEADS = (r"\b(", r"(?i)\b(")


def _strip_tail(rx: str) -> str | None:
    for tail in _TAILS:
        if rx.endswith(tail):
            return rx[: -len(tail)]
    return None


def _parens(rx: str, start: int = 0):
    """(index, '(' or ')') of each group bracket of `rx` from `start`, outside escapes and classes."""
    i, in_class = start, False
    while i < len(rx):
        c = rx[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            if rx[i + 1 : i + 2] == "^":
                i += 1
            if rx[i + 1 : i + 2] == "]":
                i += 1
        elif c in "()":
            yield i, c
        i += 1
    if in_class:
        yield len(rx), "["  # an unclosed class


def _balanced(s: str) -> bool:
    depth = 0
    for _, c in _parens(s):
        if c == "[":
            return False
        depth += 1 if c == "(" else -1
        if depth < 0:
            return False
    return depth == 0


def classify(rx: str) -> tuple:
    """(form, name, secret, global_ignorecase) for one catalogue regex."""
    for head in _KV_HEAD:
        if not rx.startswith(head):
            continue
        rest = rx[len(head) :]
        for mid in (_KV_MID, _KV_MID_CLOSE):
            pos = rest.find(mid)
            if pos < 0:
                continue
            name, secret = rest[:pos], _strip_tail(rest[pos + len(mid) :])
            if secret is not None and _balanced(name) and _balanced(secret):
                return "KV", name, secret, True
    for head in _TOKEN_HEADS:
        if rx.startswith(head):
            secret = _strip_tail(rx[len(head) :])
            if secret is not None and _balanced(secret):
                return "TOKEN", "", secret, head.startswith("(?i)")
    return "RAW", "", rx, False


_POSIX = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "upper": "A-Z",
    "lower": "a-z",
    "xdigit": "0-9A-Fa-f",
    "space": r"\s",
    "word": r"\w",
    "punct": r"!-/:-@\[-`{-~",
}


def go_to_python(rx: str) -> str:
    """Translate the RE2 syntax the catalogues use into Python `re` syntax."""
    for name, chars in _POSIX.items():
        rx = rx.replace(f"[[:{name}:]]", f"[{chars}]").replace(f"[:{name}:]", chars)
    rx = rx.replace(r"\z", r"\Z")
    # RE2 is linear whatever the pattern; Python backtracks. `(?:.|[\n\r])` (any character, as an
    # alternation) explodes in a lazy repeat: a class says the same. A leading `[\w.-]{0,50}?`
    # only widens the match before the secret: dropped, it stops costing a retry per position.
    rx = rx.replace(r"(?:.|[\n\r])", r"[\s\S]")
    for lead in (r"[\w.-]{0,50}?",):
        if rx.startswith(lead):
            rx = rx[len(lead) :]
        elif rx.startswith("(?i)" + lead):
            rx = "(?i)" + rx[4 + len(lead) :]
    # A flag group in mid-pattern, `X(?i)Y`, applies to the end of its enclosing group in RE2;
    # Python only allows global flags at the start, so it becomes `X(?i:Y)`.
    while True:
        pos = _mid_flag(rx)
        if pos < 0:
            break
        flags = rx[pos + 2 : rx.index(")", pos)]
        end = _group_end(rx, pos)
        body = rx[rx.index(")", pos) + 1 : end]
        rx = rx[:pos] + f"(?{flags}:{body})" + rx[end:]
    # Python warns about possible future set syntax: escape a literal '[' inside a class.
    return _escape_class_brackets(rx)


def _mid_flag(rx: str) -> int:
    for m in re.finditer(r"\(\?[imsU-]+\)", rx):
        if m.start() > 0:
            return m.start()
    return -1


def _group_end(rx: str, pos: int) -> int:
    """Index of the ')' closing the group that contains `pos` (or len(rx))."""
    depth = 0
    for i, c in _parens(rx, pos):
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return i
            depth -= 1
    return len(rx)


def _escape_class_brackets(rx: str) -> str:
    out = []
    i = 0
    in_class = False
    while i < len(rx):
        c = rx[i]
        if c == "\\":
            out.append(rx[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "[":
                out.append(r"\[")
                i += 1
                continue
            if c == "]":
                in_class = False
            elif c in "-&~|" and rx[i + 1 : i + 2] == c:
                out.append("\\" + c)
                i += 1
                continue
        elif c == "[":
            in_class = True
            out.append(c)
            i += 1
            if rx[i : i + 1] == "^":
                out.append("^")
                i += 1
            if rx[i : i + 1] == "]":
                out.append(r"\]")
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _allow(rule: dict) -> tuple:
    regexes, stopwords = [], []
    for al in rule.get("allowlists", []) or []:
        if al.get("paths") or al.get("condition") == "AND" or al.get("commits"):
            continue  # file-path allowlists do not apply to text
        target = al.get("regexTarget", "secret")
        if target in ("secret", "match"):
            regexes += [(target, go_to_python(r)) for r in al.get("regexes", [])]
        stopwords += [s.lower() for s in al.get("stopwords", [])]
    return tuple(regexes), tuple(sorted(set(stopwords)))


def build(toml_path: str, source: str, skip: set[str]) -> list:
    with open(toml_path, "rb") as fh:
        data = tomllib.load(fh)
    out = []
    for rule in data["rules"]:
        rid = rule["id"]
        if rid in skip or rid in PATH_ONLY or not rule.get("regex"):
            continue
        form, name, secret, ci = classify(rule["regex"])
        name, secret = go_to_python(name), go_to_python(secret)
        if form == "TOKEN" and ci:
            secret = f"(?i:{secret})"
        if form == "KV":
            secret = f"(?i:{secret})"
        entropy = rule.get("entropy")
        if entropy is None and "filter" in rule:  # betterleaks: `entropy(finding["secret"]) <= 3.5`
            m = re.search(r'entropy\(finding\["secret"\]\)\s*<=?\s*([0-9.]+)', rule["filter"])
            entropy = float(m.group(1)) if m else None
        keywords = tuple(sorted({k.lower() for k in rule.get("keywords", [])}))
        allow_regexes, stopwords = _allow(rule)
        out.append(
            dict(
                id=rid.removesuffix(".1").removesuffix(".2") if source == "betterleaks" else rid,
                source=source,
                keywords=keywords,
                form=form,
                name=name,
                secret=secret,
                group=-1 if rid in WHOLE_MATCH else int(rule.get("secretGroup", 0) or 0),
                entropy=entropy,
                allow=allow_regexes,
                stopwords=stopwords,
            )
        )
    return out


def render(rules: list, versions: dict) -> str:
    lines = [
        '"""kirolearn\'s rules table: every credential format of the public secret-scanner catalogues.',
        "",
        "GENERATED by scripts/refresh_secret_rules.py from "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + ";",
        'do not edit by hand: change the script and regenerate (README, "Secret rules").',
        "",
        "One row per rule: (id, keywords, form, name, secret, group, entropy, allow, stopwords).",
        "- keywords: lower-case substrings; the rule's pattern runs only on text holding one of them.",
        "- form: KV = `<a name containing NAME> <assignment operator> <SECRET>` (the scrubber builds",
        "  that frame around `name`); TOKEN = SECRET alone between token edges; RAW = SECRET is the",
        "  whole pattern and `group` picks the secret (0 = the first non-empty group, else the match;",
        "  -1 = the whole match).",
        "- entropy: the secret must have more Shannon bits per character than this (None = any).",
        "- allow: (target, regex) pairs and stopwords that mark a match as a placeholder, not a secret.",
        "Patterns are Python `re` syntax (translated from Go RE2) and are compiled lazily, per rule.",
        '"""',
        "",
        "from kirolearn.core.version import SCRUB_RULES_VERSION as RULES_VERSION  # noqa: E402",
        f"CATALOGUES = {versions!r}",
        'KV, TOKEN, RAW = "KV", "TOKEN", "RAW"',
        "",
        "RULES = (",
    ]
    for r in rules:
        lines.append(
            f"    ({r['id']!r}, {r['keywords']!r}, {r['form']}, {r['name']!r}, {r['secret']!r}, "
            f"{r['group']}, {r['entropy']!r}, {r['allow']!r}, {r['stopwords']!r}),"
        )
    lines.append(")")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("gitleaks")
    parser.add_argument("betterleaks", nargs="?")
    parser.add_argument("--gitleaks-version", required=True)
    parser.add_argument("--betterleaks-version", default="")
    args = parser.parse_args()
    rules = build(args.gitleaks, "gitleaks", set())
    versions = {"gitleaks": args.gitleaks_version}
    if args.betterleaks:
        seen = {r["id"] for r in rules}
        extra = [r for r in build(args.betterleaks, "betterleaks", NOT_SECRETS) if r["id"] not in seen]
        names = set()
        for r in extra:  # betterleaks splits some ids as foo.1 / foo.2
            base, n = r["id"], 2
            while r["id"] in names or r["id"] in seen:
                r["id"] = f"{base}-{n}"
                n += 1
            names.add(r["id"])
        rules += extra
        versions["betterleaks"] = args.betterleaks_version
    for r in rules:  # fail here, not at run time, on a pattern Python cannot compile
        frame = r["secret"] if r["form"] != "KV" else f"(?:{r['name']})({r['secret']})"
        try:
            re.compile(frame, re.ASCII)
            for _, rx in r["allow"]:
                re.compile(rx, re.ASCII)
        except re.error as err:
            sys.exit(f"{r['id']}: cannot translate {frame!r}: {err}")
    sys.stdout.write(render(rules, versions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
