"""Issue #34's matrix: the shapes found stored, under the transforms tools apply, in each carrier.

Families (each with fresh random secrets, seeded): a .netrc dump (one line, several lines, a
`default` entry), `Cookie:` and `Set-Cookie:` headers, a base64 blob of an env line, a URL whose
password a terminal wrapped, a bearer token on an .env line under a neutral name, an AWS secret
key after its name; and text inside the four `<private>` spellings that leaked (HTML-encoded
twice, fullwidth brackets, a zero-width space in the word, markdown-escaped). Transforms: none, the JSON / URL / HTML escapes and shell quotes and line
break of tests/transforms.py, a hard wrap at a terminal column inside the secret, and `split`:
the text cut in two just before the secret, as two tool outputs of one turn (scrubbed with
kirolearn.privacy.carry.scrub_sequence when it exists, each text alone otherwise). Carriers:
prompt, shell command, tool output (transforms.carry).

Negatives: text that only looks like these shapes, under the same transforms and carriers; a
negative is kept when scrubbing leaves every text unchanged.

    python tests/shapes34.py     # prints the figures (caught / total, kept / total) and the misses
"""

from __future__ import annotations

import base64
import random
import string

import transforms

ALNUM = string.ascii_letters + string.digits


def _r(rng, n, chars=ALNUM):
    return "".join(rng.choice(chars) for _ in range(n))


def _password(rng):
    return rng.choice(
        [
            _r(rng, 14),
            _r(rng, 3, string.ascii_uppercase)
            + _r(rng, 5, string.ascii_lowercase)
            + _r(rng, 4, string.digits),
            "Tr0ub4dor-" + _r(rng, 6),
            _r(rng, 8, string.ascii_lowercase) + _r(rng, 3, string.digits) + "!",
            _r(rng, 20, string.ascii_lowercase + string.digits),
        ]
    )


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def cases(rng: random.Random, per_family: int = 2) -> list:
    """(family, text, secret): the secret appears once in the text, in its plain form."""
    out = []
    for _ in range(per_family):
        pw = _password(rng)
        host = rng.choice(["api.example.com", "git.acme.io", "registry.internal:5000", "10.0.4.12"])
        out.append(("netrc-line", f"machine {host} login bob password {pw}", pw))
        pw = _password(rng)
        out.append(("netrc-lines", f"machine {host}\n  login deploy\n  password {pw}\n", pw))
        pw = _password(rng)
        out.append(
            (
                "netrc-default",
                f"machine {host} login a password {_password(rng)}\ndefault login anonymous password {pw}",
                pw,
            )
        )
        sid, csrf = _r(rng, 32, string.ascii_lowercase + string.digits), _r(rng, 32)
        out.append(("cookie", f"Cookie: sessionid={sid}; csrftoken={csrf}", sid))
        out.append(("cookie-second", f"Cookie: theme=dark; sessionid={sid}; csrftoken={csrf}", csrf))
        sess = _r(rng, 24) + "%3D"
        out.append(
            ("set-cookie", f"Set-Cookie: _app_session={sess}; Path=/; HttpOnly; Secure; SameSite=Lax", sess)
        )
        pw = _password(rng)
        blob = _b64(f"DB_PASSWORD={pw}")
        out.append(("base64-env", f"echo {blob} | base64 -d", blob))
        blob = _b64(f"export STRIPE_SECRET=sk_live_{_r(rng, 24)}\n")
        out.append(("base64-env-export", f"printf '%s' {blob} | base64 --decode >> .env", blob))
        pw = _password(rng).replace("!", "x")
        url = f"postgres://app_user:{pw}@db.internal:5432/app"
        shell = rng.choice([f"psql {url}", f"DATABASE_URL={url}", f"connecting to {url} ..."])
        out.append(("postgres-url", shell, pw))
        tok = rng.choice([_r(rng, 12), _r(rng, 16), _r(rng, 28, string.ascii_lowercase)])
        out.append(("bearer-env", f"UPSTREAM=Bearer {tok}", tok))
        tok = rng.choice([_r(rng, 10), "abc123" + _r(rng, 8, string.ascii_lowercase + string.digits)])
        out.append(("bearer-env-quoted", f'X_HEADER="Bearer {tok}"', tok))
        aws = _r(rng, 18) + "/" + _r(rng, 10) + "+" + _r(rng, 11)
        out.append(("aws-secret", f"aws_secret_access_key = {aws}", aws))
        body = f"my home is {rng.randint(10, 999)} Oak Street, flat {_r(rng, 3, string.ascii_uppercase)}"
        for name, (lt, gt, slash) in PRIVATE_SPELLINGS.items():
            word = "pri\u200bvate" if name == "private-zero-width" else "private"
            out.append((name, f"deploy it. {lt}{word}{gt}{body}{lt}{slash}{word}{gt} thanks", body))
    return out


# issue #34's four `<private>` spellings: (opening bracket, closing bracket, the closing tag's slash)
PRIVATE_SPELLINGS = {
    "private-html-twice": ("&amp;lt;", "&amp;gt;", "/"),
    "private-fullwidth": ("\uff1c", "\uff1e", "/"),
    "private-zero-width": ("<", ">", "/"),  # the zero-width space goes inside the word, below
    "private-markdown": ("\\<", "\\>", "/"),
}


# Text that only looks like the families: kept unchanged.
NEGATIVES = [
    "the password is stored in the keychain, never in .env",
    "Set the `password` field in ~/.netrc (see man 5 netrc)",
    "machine learning login page: the password reset flow needs a redesign",
    "machine learning models log in with SSO; password login is disabled",
    "netrc format: machine <host> login <user> password <password>",
    "Cookie: header docs: send `Cookie: name=value; name2=value2`",
    "Cookie: theme=dark; lang=en-US",
    "Set-Cookie: sessionid=deleted; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
    "Set-Cookie: Path=/; HttpOnly; SameSite=Lax",
    "the cookie banner says: Cookie: consent=yes",
    "echo aGVsbG8gd29ybGQ= | base64 -d",
    "echo " + _b64("PORT=8080 DEBUG=false LOG_LEVEL=info") + " | base64 -d",
    "echo " + _b64("Fix the export of empty tables (#42)") + " | base64 --decode",
    "data: " + _b64('{"name": "widget", "size": 3}'),
    "https://example.com/docs/install.html?page=2#usage",
    "postgres://db.internal:5432/app",
    "psql postgres://app_user@db.internal:5432/app\n  -- connected as app_user",
    "Listening on http://0.0.0.0:8080\nuser@host:~$ ls",
    "the Authorization header uses the Bearer scheme: `Authorization: Bearer <token>`",
    'X_HEADER="Bearer $TOKEN"',
    "UPSTREAM=Bearer ${API_TOKEN}",
    "the bearer token expires after 3600 seconds; Bearer authentication is required",
    "aws_secret_access_key is read from ~/.aws/credentials",
]

# Two texts of one turn that only look like a split key.
SPLIT_NEGATIVES = [
    ("Set these in ~/.aws/credentials:\naws_secret_access_key =", "(left blank on purpose, see the wiki)"),
    ("export DB_PASSWORD=", "exit status 0"),
    ("Authorization: Bearer", "is the scheme the API expects"),
    ("$ cat notes.md\nthe password:", "is in the vault, not here"),
]

TRANSFORMS = (
    "none",
    "json-string",
    "json-u-escape",
    "url-encoded",
    "html-entities",
    "single-quoted",
    "double-quoted",
    "line-break",
    "hard-wrap",
    "split",
)


def hard_wrap(text, secret, rng):
    """A terminal's hard wrap: a bare line break at a column that falls inside the secret."""
    i = text.find(secret)
    k = rng.randrange(1, len(secret))
    brk = rng.choice(["\n", "\n", "\r\n", "\n  "])  # a pager or a log prefix may indent the rest
    wrapped = text[: i + k] + brk + text[i + k :]

    def decode(s):
        return s.replace(secret[:k] + brk + secret[k:], secret)

    return wrapped, decode


def _transform(name, text, secret, rng):
    if name in ("none", "split"):
        return text, (lambda s: s)
    if name == "hard-wrap":
        return hard_wrap(text, secret, rng)
    return transforms.TRANSFORMS[name](text, secret, rng)


def _sequence_scrubber(scrubber):
    try:
        from kirolearn.privacy.carry import scrub_sequence
    except ImportError:  # before issue #34: each text alone
        return lambda texts: [scrubber.scrub_text(t) for t in texts]
    return lambda texts: scrub_sequence(texts, scrubber)


def _split(carried, at):
    return [carried[:at], carried[at:]]


def matrix(scrubber, seed: int = 34, per_family: int = 3) -> dict:
    rng = random.Random(seed)
    seq = _sequence_scrubber(scrubber)
    total = caught = 0
    missed = []
    by_family: dict = {}
    for family, text, secret in cases(rng, per_family):
        for name in TRANSFORMS:
            t, decode = _transform(name, text, secret, rng)
            for carrier in transforms.CARRIERS:
                carried = transforms.carry(t, carrier)
                if name == "split":
                    at = carried.find(secret)
                    out = "".join(seq(_split(carried, at)))
                else:
                    out = scrubber.scrub_text(carried)
                ok = not transforms.leaks(out, secret, decode)
                total += 1
                caught += ok
                fam = by_family.setdefault(family, [0, 0])
                fam[0] += ok
                fam[1] += 1
                if not ok:
                    missed.append((family, name, carrier, carried, out))
    return {"caught": caught, "total": total, "missed": missed, "by_family": by_family}


def keep(scrubber, seed: int = 35) -> dict:
    rng = random.Random(seed)
    seq = _sequence_scrubber(scrubber)
    total = kept = 0
    changed = []
    for text in NEGATIVES:
        for name in TRANSFORMS:
            if name == "split":
                continue
            # the transforms place their change on a "secret": take the text's longest word
            word = max(text.split(), key=len)
            t, _ = _transform(name, text, word, rng)
            for carrier in transforms.CARRIERS:
                carried = transforms.carry(t, carrier)
                out = scrubber.scrub_text(carried)
                total += 1
                if out == carried:
                    kept += 1
                else:
                    changed.append((name, carrier, carried, out))
    for first, second in SPLIT_NEGATIVES:
        for carrier in transforms.CARRIERS:
            texts = [transforms.carry(first, carrier), second + "\n"]
            out = seq(texts)
            total += 1
            if out == texts:
                kept += 1
            else:
                changed.append(("split", carrier, texts, out))
    return {"kept": kept, "total": total, "changed": changed}


def main() -> int:
    from kirolearn.privacy.scrub import Scrubber

    result = matrix(Scrubber())
    print(f"issue #34 matrix: caught {result['caught']} / {result['total']}")
    for family, (ok, n) in sorted(result["by_family"].items()):
        print(f"  {family:<20} {ok:>4} / {n}")
    seen = set()
    for family, name, carrier, carried, _out in result["missed"]:
        if (family, name) not in seen:
            seen.add((family, name))
            print(f"  miss: {family} / {name} / {carrier}: {carried[:90]!r}")
    k = keep(Scrubber())
    print(f"look-alikes kept: {k['kept']} / {k['total']}")
    for name, carrier, carried, out in k["changed"][:20]:
        print(f"  changed: {name} / {carrier}: {str(carried)[:80]!r} -> {str(out)[:80]!r}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
