"""The transform matrix of issue #23: a secret written the ways tools print it.

Shared by tests/test_scrub_matrix.py (property test) and bench/bench_scrub.py (figures).
Each transform takes (text, secret) -- a text that holds the secret in its plain form -- and
returns (transformed text, decode): `decode` undoes the transform on any text, so a scrubbed
output still leaks the secret exactly when `secret in decode(output)`.
"""

from __future__ import annotations

import base64
import html
import json
import random
import re
import urllib.parse

CARRIERS = ("prompt", "shell", "tool_output")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


def _ident(s):
    return s


def _json_unescape(s: str) -> str:
    return re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), s).replace("\\/", "/")


def json_u(text, secret, rng):
    """One character of the secret as a JSON \\uXXXX escape (Go and Python both write these)."""
    i = rng.randrange(len(secret))
    escaped = secret[:i] + "\\u%04x" % ord(secret[i]) + secret[i + 1 :]
    return text.replace(secret, escaped), _json_unescape


def json_string(text, secret, rng):
    """The whole text as a JSON string's content, slashes escaped (`\\/`), as PHP and Go print it."""
    body = json.dumps(text)[1:-1].replace("/", "\\/")

    def decode(s):
        try:
            return json.loads('"' + s.replace('"', '\\"').replace('\\\\"', '\\"') + '"')
        except ValueError:
            return _json_unescape(s).replace('\\"', '"').replace("\\n", "\n")

    return body, decode


def url_encoded(text, secret, rng):
    """The text URL-encoded as a query parameter (a form body, a redirect URL)."""
    return "https://app.example.com/callback?data=" + urllib.parse.quote(text, safe=""), urllib.parse.unquote


def html_entities(text, secret, rng):
    """The text HTML-escaped, one character of the secret written as a numeric entity."""
    i = rng.randrange(len(secret))
    escaped = html.escape(secret[:i]) + "&#x%x;" % ord(secret[i]) + html.escape(secret[i + 1 :])
    return html.escape(text).replace(html.escape(secret), escaped), html.unescape


def _quote(text, secret, q):
    """Quote the shell word that holds the secret (from just after its `=`, as `NAME='…'` is written)."""
    i = text.find(secret)
    if i < 0:
        return text
    s = i
    while s > 0 and not text[s - 1].isspace() and text[s - 1] not in "=\"'":
        s -= 1
    e = i + len(secret)
    while e < len(text) and not text[e].isspace() and text[e] not in "\"',;":
        e += 1
    return text[:s] + q + text[s:e] + q + text[e:]


def single_quoted(text, secret, rng):
    """The secret's shell word in single quotes: sshpass -p '…', NAME='…', 'postgres://…'."""
    return _quote(text, secret, "'"), _ident


def double_quoted(text, secret, rng):
    return _quote(text, secret, '"'), _ident


def line_break(text, secret, rng):
    """A line break inside the token (a terminal or a pretty-printer wrapped it), maybe indented.

    The break is placed after the token's literal prefix, and so that neither piece reads as a plain word (views.wordlike: `rocylv`,
    `done`): the scrubber does not join such pieces, on purpose (every line of every tool output
    would be a candidate), and that limit is reported, not tested away silently."""
    from kirolearn.privacy.views import wordlike

    n = len(secret)
    # After the token's literal prefix too (persona_production_, hooks.slack.com/...): a break inside
    # the very literal a rule looks for is the other known limit (KNOWN_GAPS in test_scrub_matrix).
    prefix = len(re.match(r"[^0-9]*", secret).group(0))
    low = min(max(1, n // 3, prefix + 1), max(1, n - 3))
    for _ in range(12):
        i = rng.randrange(low, max(low + 1, n - n // 3, n - 2))
        pieces = (
            re.split(r"[^A-Za-z0-9+/=_\-.]", secret[:i])[-1],
            re.split(r"[^A-Za-z0-9+/=_\-.]", secret[i:])[0],
        )
        if not any(p.isalpha() and len(p) < 16 and wordlike(p) for p in pieces):
            break
    brk = rng.choice(["\n", "\n    ", "\r\n", "\n\t"])
    broken = secret[:i] + brk + secret[i:]

    def decode(s):
        return s.replace(broken, secret).replace(brk, "")

    return text.replace(secret, broken), decode


def basic_auth(text, secret, rng):
    """The secret as the password of an HTTP Basic Authorization header."""
    b64 = base64.b64encode(f"deploy:{secret}".encode()).decode()
    header = f"Authorization: Basic {b64}"

    def decode(s):
        return s.replace(b64, f"deploy:{secret}")

    return rng.choice(
        [
            f"curl -sS -H '{header}' https://api.example.com/v1/me",
            f"> GET /v1/me HTTP/1.1\n> Host: api.example.com\n> {header}\n",
            f'{{"headers": {{"Authorization": "Basic {b64}"}}}}',
        ]
    ), decode


def env_neutral(text, secret, rng):
    """The secret as a .env / export line under a name that holds no secret word."""
    name = rng.choice(["SESSION_SIGNING", "APP_SEAL", "UPSTREAM_SIG", "RELAY_VALUE", "EDGE_SALTING"])
    return rng.choice(
        [
            f"# .env\nDEBUG=false\n{name}={secret}\nPORT=8080\n",
            f"export {name}={secret}",
            f"{name}='{secret}' ./run.sh --port 8080",
        ]
    ), _ident


TRANSFORMS = {
    "json-u-escape": json_u,
    "json-string": json_string,
    "url-encoded": url_encoded,
    "html-entities": html_entities,
    "single-quoted": single_quoted,
    "double-quoted": double_quoted,
    "line-break": line_break,
    "basic-auth": basic_auth,
    "env-neutral-name": env_neutral,
}


def carry(text: str, carrier: str) -> str:
    if carrier == "prompt":
        return f"can you check why this fails?\n{text}\nthanks"
    if carrier == "shell":
        if "\n" in text:
            return f"cat <<'EOF' > /tmp/in.txt\n{text}\nEOF"
        return f"echo '{text}' | tee /tmp/out.log" if "'" not in text else f'echo "{text}" | tee /tmp/out.log'
    return f"$ ./deploy.sh --verbose\n{text}\nexit status 0\n"


# Common secrets of the goal, each in a plain text that holds it (fake, built at run time).
def common_secrets(rng: random.Random) -> list:
    def r(n, chars="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"):
        return "".join(rng.choice(chars) for _ in range(n))

    up = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    aws_id = "AKIA" + r(16, up)
    aws_secret = r(18) + "/" + r(10) + "+" + r(10)
    jwt = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOi" + r(20) + "." + r(43)
    pem_body = r(64) + "\n" + r(64)
    return [
        ("aws-access-key", f"aws_access_key_id = {aws_id}", aws_id),
        ("aws-secret-key", f"aws_secret_access_key = {aws_secret}", aws_secret),
        ("github-token", f"git push https://x:{'ghp_' + r(36)}@github.com/o/r", None),
        ("gitlab-token", "token " + "glpat-" + r(20), None),
        (
            "slack-token",
            "SLACK_BOT=" + "xoxb-" + r(11, "0123456789") + "-" + r(13, "0123456789") + "-" + r(24),
            None,
        ),
        ("openai-key", "OPENAI_API_KEY=" + "sk-proj-" + r(40), None),
        ("stripe-key", "stripe.api_key = '" + "sk_live_" + r(24) + "'", None),
        ("jwt", f"cookie: session={jwt}", jwt),
        (
            "private-key",
            "-----BEGIN RSA PRIVATE KEY-----\n" + pem_body + "\n-----END RSA PRIVATE KEY-----",
            pem_body,
        ),
        ("url-password", f"psql postgres://admin:{r(14)}@db.internal:5432/app", None),
        ("password-assignment", f"DB_PASSWORD={r(14)}", None),
        ("bearer", f"Authorization: Bearer {r(32)}", None),
    ]


def common_cases(rng: random.Random) -> list:
    """(kind, text, secret) for the common secrets; the secret is the random part of the text."""
    out = []
    for kind, text, secret in common_secrets(rng):
        if secret is None:
            secret = re.search(
                r"(?:ghp_|glpat-|xoxb-|sk-proj-|sk_live_)[\w\-]+|(?<=:)[A-Za-z0-9]{14}(?=@)"
                r"|(?<==)[A-Za-z0-9]{14}$|(?<=Bearer )\w+",
                text,
            ).group(0)
        out.append((kind, text, secret))
    return out


def applies(transform: str, kind: str, secret: str) -> bool:
    """Transforms that make no sense for a secret: a PEM key is no .env value nor a Basic password."""
    if transform == "env-neutral-name" and (secret.isdigit() or _UUID.fullmatch(secret)):
        return False  # a number or a UUID under a name that says nothing is an ordinary value (an id)
    if kind == "private-key" and transform in (
        "env-neutral-name",
        "basic-auth",
        "line-break",
        "json-u-escape",
        "html-entities",
        "single-quoted",
        "double-quoted",
    ):
        return False
    return True


def leaks(out: str, secret: str, decode) -> bool:
    """Whether a scrubbed output still shows the secret (as written or once the transform is undone)."""
    if secret in out:
        return True
    try:
        return secret in decode(out)
    except Exception:  # noqa: BLE001 - a decoder that cannot read the output saw no secret
        return False


def matrix(scrubber, cases, seed: int = 23) -> dict:
    """Recall over cases x transforms x carriers: cases are (kind, text, secret)."""
    rng = random.Random(seed)
    total = caught = 0
    missed = []
    for kind, text, secret in cases:
        for name, transform in TRANSFORMS.items():
            if not applies(name, kind, secret):
                continue
            t, decode = transform(text, secret, rng)
            for carrier in CARRIERS:
                carried = carry(t, carrier)
                out = scrubber.scrub_text(carried)
                total += 1
                if leaks(out, secret, decode):
                    missed.append((kind, name, carrier, carried))
                else:
                    caught += 1
    return {"recall": caught / max(1, total), "cases": total, "missed": missed}


# --------------------------------------------------------------------------------------------------
# Ordinary text under the same transforms: what must come out unchanged
# --------------------------------------------------------------------------------------------------

_ENV_ORDINARY = [
    "NODE_ENV=production",
    "LOG_LEVEL=debug",
    "PORT=8080",
    "DEBUG=false",
    "WORKERS=4",
    "DATABASE_URL=postgres://db.internal:5432/app",
    "REDIS_URL=redis://cache:6379/0",
    "API_BASE=https://api.example.com/v2",
    "REGION=eu-west-1",
    "HOSTNAME=build-runner-07.internal",
    "APP_VERSION=1.24.3",
    "GIT_SHA=3f2a9c1b7e4d5a6f8091a2b3c4d5e6f708192a3b",
    "RELEASE_ID=2026-11-30T10:22:01Z",
    "IMAGE=ghcr.io/acme/api:v1.24.3",
    "REQUEST_ID=5b0c6f1e-8a2d-4c3b-9e7f-1a2b3c4d5e6f",
    "TZ=Europe/Berlin",
    "PYTHONPATH=/srv/app/src",
    "CONFIG_FILE=config/app.prod.yaml",
    "SERVICE_NAME=billing_worker_v2",
    "FEATURE_FLAGS=search,export,beta_ui",
    "CACHE_TTL=3600",
    "MAX_UPLOAD_MB=250",
    "JAVA_OPTS=-Xmx2g",
    "export PATH=$HOME/.local/bin:$PATH",
    "export KUBECONFIG=~/.kube/staging.yaml",
    "export GOFLAGS=-mod=mod",
    "CI_COMMIT_SHA=9b1d3e5f7a9c2e4f6a8b0c1d3e5f7a9b1c3d5e7f",
    "BUILD_NUMBER=18452",
    "LANG=en_US.UTF-8",
]


def _wrapped_blob(rng, width):
    import base64 as b64

    blob = b64.b64encode(rng.randbytes(rng.randint(120, 600))).decode()
    return "\n".join(blob[i : i + width] for i in range(0, len(blob), width))


def ordinary_texts(lines: list, rng: random.Random) -> list:
    """Ordinary lines (secret_corpus.ordinary_lines) as tools print them: JSON strings, query
    strings, HTML, multi-line outputs, base64 data wrapped at 64 and 76 columns (certificates,
    PGP public keys, MIME parts), .env files and export lines with ordinary values."""
    out = []
    for line in lines:
        form = rng.randrange(6)
        if form == 0:
            out.append(json.dumps({"stdout": line}).replace("/", "\\/"))
        elif form == 1:
            out.append("https://app.example.com/search?q=" + urllib.parse.quote(line, safe=""))
        elif form == 2:
            out.append("<pre>" + html.escape(line) + "</pre>")
        elif form == 3:
            out.append("\n".join(rng.sample(lines, 6)))
        elif form == 4:
            width = rng.choice([64, 76])
            kind = rng.choice(["CERTIFICATE", "PGP PUBLIC KEY BLOCK", "PUBLIC KEY"])
            out.append(f"-----BEGIN {kind}-----\n{_wrapped_blob(rng, width)}\n-----END {kind}-----")
        else:
            out.append("\n".join(rng.sample(_ENV_ORDINARY, 6)))
    return out


def keep(scrubber, texts: list) -> dict:
    changed = [t for t in texts if scrubber.scrub_text(t) != t]
    return {"keep": 1 - len(changed) / max(1, len(texts)), "texts": len(texts), "changed": changed}
