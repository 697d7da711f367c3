"""A corpus generated from the rules table: credentials in every carrier, and ordinary text.

Shared by tests/test_secret_corpus.py (floors) and bench/bench_scrub.py (figures).

- Credentials: for every rule of kirolearn/privacy/rules.py, `examples` secrets sampled from the
  rule's own pattern (a small sampler over Python's regex parse tree, seeded: the corpus is the
  same on every run), each placed in the shapes the rule describes (`NAME_KEY = "…"`,
  `name: …`, `NAME||…`, a bare token) inside three carriers: a prompt, a shell command and a
  tool output. A case is caught when the secret no longer appears in the scrubbed text.
- Ordinary text: source code, git SHAs, UUIDs, lock-file and SRI hashes, base64 words, paths,
  URLs, timestamps and version strings. A line is kept when scrubbing leaves it unchanged.

Every secret here is random and assembled at run time: nothing in the repository is a credential.
"""

from __future__ import annotations

import os
import random
import re
import string
from dataclasses import dataclass

try:
    import re._parser as _sre  # Python 3.11+
    from re._constants import MAXREPEAT
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre  # type: ignore[no-redef]
    from sre_constants import MAXREPEAT  # type: ignore[no-redef]

CARRIERS = ("prompt", "shell", "tool_output")
_PRINTABLE = string.ascii_letters + string.digits
_CATEGORY = {
    "CATEGORY_DIGIT": string.digits,
    "CATEGORY_WORD": _PRINTABLE + "_",
    "CATEGORY_SPACE": " ",
    "CATEGORY_NOT_DIGIT": string.ascii_letters,
    "CATEGORY_NOT_WORD": "-.",
    "CATEGORY_NOT_SPACE": _PRINTABLE,
}


class _Sampler:
    """Random strings that match a regex (the subset of syntax the rules use)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.groups: dict = {}

    def sample(self, pattern: str, flags: int = re.ASCII) -> str:
        self.groups = {}
        return self._seq(_sre.parse(pattern, flags))

    def _seq(self, items) -> str:
        return "".join(self._item(op, av) for op, av in items)

    def _charset(self, av) -> str:
        chars, negate = [], False
        for op, val in av:
            name = str(op)
            if name == "NEGATE":
                negate = True
            elif name == "LITERAL":
                chars.append(chr(val))
            elif name == "RANGE":
                chars.extend(chr(c) for c in range(val[0], val[1] + 1))
            elif name == "CATEGORY":
                chars.extend(_CATEGORY.get(str(val), _PRINTABLE))
        if negate:
            chars = [c for c in _PRINTABLE if c not in chars] or ["x"]
        # Prefer letters and digits (what real tokens hold) but keep every listed character possible.
        alnum = [c for c in chars if c.isalnum()]
        return self.rng.choice(alnum if alnum and self.rng.random() < 0.9 else chars)

    def _item(self, op, av) -> str:
        name = str(op)
        rng = self.rng
        if name == "LITERAL":
            return chr(av)
        if name == "NOT_LITERAL":
            return rng.choice([c for c in _PRINTABLE if c != chr(av)])
        if name == "ANY":
            return "."  # an unescaped dot in a token format almost always means a literal dot
        if name == "IN":
            return self._charset(av)
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, hi, sub = av
            hi = lo + rng.randint(0, 6) if hi == MAXREPEAT else hi
            return "".join(self._seq(sub) for _ in range(rng.randint(lo, max(lo, min(hi, lo + 40)))))
        if name == "SUBPATTERN":
            group, _, _, sub = av
            out = self._seq(sub)
            if group:
                self.groups[group] = out
            return out
        if name == "BRANCH":
            return self._seq(rng.choice(av[1]))
        if name == "GROUPREF":
            return self.groups.get(av, "")
        if name == "CATEGORY":
            return rng.choice(_CATEGORY.get(str(av), _PRINTABLE))
        if name == "ATOMIC_GROUP":
            return self._seq(av)
        return ""  # AT, ASSERT, ASSERT_NOT: anchors and look-arounds take no characters


@dataclass(frozen=True)
class Case:
    rule: str
    carrier: str
    text: str
    secret: str


def _names(rng: random.Random, sampler: _Sampler, rule) -> list:
    """Assignment targets that hold one of the rule's names: ADAFRUIT_KEY, adafruitToken, ..."""
    out = []
    for _ in range(8):
        base = sampler.sample(f"(?:{rule.name})", re.ASCII)
        if base and re.fullmatch(r"[\w.\- ]{1,40}", base):
            out.append(base)
    base = rng.choice(out) if out else (rule.keywords[0] if rule.keywords else "api")
    return [
        base.upper().replace("-", "_").replace(".", "_") + "_KEY",
        base + "_api_key",
        base + "Token",
        base.lower() + ".secret",
        base,
    ]


def _kv_texts(rng: random.Random, names: list, secret: str) -> dict:
    n_env, n_snake, n_camel, n_dot, bare = names
    return {
        "prompt": rng.choice(
            [
                f'Use {n_snake} = "{secret}" for the staging job and retry the upload.',
                f"my {n_camel}: {secret}\nwhy does the client still get 401?",
                f"The config has {bare}||{secret} in it, can you rotate that?",
            ]
        ),
        "shell": rng.choice(
            [
                f"export {n_env}={secret} && ./scripts/deploy.sh --env staging",
                f"{n_env}='{secret}' python manage.py sync_accounts",
                f"kubectl create secret generic app --from-literal={n_dot}={secret}",
            ]
        ),
        "tool_output": rng.choice(
            [
                f'{{\n  "{n_snake}": "{secret}",\n  "region": "eu-west-1"\n}}',
                f"# .env\nDEBUG=false\n{n_env}={secret}\nPORT=8080\n",
                f"settings:\n  {n_camel}: {secret}\n  retries: 3\n",
                f"$config['{n_snake}'] => '{secret}';",
                f'"stdout": "{{\\"{n_snake}\\": \\"{secret}\\", \\"ok\\": true}}\\n"',
            ]
        ),
    }


def _token_texts(rng: random.Random, secret: str, whole: str) -> dict:
    return {
        "prompt": rng.choice(
            [
                f"I pasted the key {whole} by mistake, please rotate it",
                f"why does {whole} not work anymore?",
                f"here it is:\n{whole}\nthanks",
            ]
        ),
        "shell": rng.choice(
            [
                f"echo '{whole}' | some-cli login --with-token",
                f"curl -sS https://api.example.com/v1/me -d 'key={whole}'",
                f"printf '%s\\n' \"{whole}\" > ~/.config/app/credentials",
            ]
        ),
        "tool_output": rng.choice(
            [
                f"Created credential:\n  value: {whole}\n  expires: never\n",
                f'{{"id": 42, "value": "{whole}", "scopes": ["read"]}}',
                f"{whole}\n",
            ]
        ),
    }


def _rand(rng: random.Random, n: int, chars: str = _PRINTABLE) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


_B64 = _PRINTABLE + "+/"
# Rules whose pattern spans a whole document or a command line: sampled by hand, as (text, secret).
_EXAMPLES = {
    "curl-auth-user": lambda r: (f"curl --user deploy:{_rand(r, 14)} https://api.example.com/v1/ping", None),
    "curl-auth-header": lambda r: (
        f'curl -sS -H "Authorization: Bearer {_rand(r, 32)}" https://api.example.com/v1/me',
        None,
    ),
    "kubernetes-secret-yaml": lambda r: (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\n"
        f"data:\n  password: {_rand(r, 24, _B64)}==\n",
        None,
    ),
    "aiven-auth-token": lambda r: (f"aiven token {_rand(r, 372, _B64)}", None),
    "azure-storage-account-key": lambda r: (f"AccountKey={_rand(r, 86, _B64)}==", None),
    "amplitude-secret-key": lambda r: (f"AMPLITUDE_SECRET_KEY={_rand(r, 32, '0123456789abcdef')}", None),
    "cloudinary-api-secret": lambda r: (f"CLOUDINARY_API_SECRET={_rand(r, 32)}", None),
    "influxdb-api-token": lambda r: (f"influxdb token: {_rand(r, 88)}", None),
    "nuget-config-password": lambda r: (f'<add key="ClearTextPassword" value="{_rand(r, 16)}" />', None),
    "gcp-application-default-credentials": lambda r: (
        '{"client_id": "7640.apps.googleusercontent.com", "client_secret": "'
        + _rand(r, 24)
        + '", "refresh_token": "1//0'
        + _rand(r, 60)
        + '", "type": "authorized_user"}',
        None,
    ),
    "gcp-service-account": lambda r: (
        '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n'
        + _rand(r, 64, _B64)
        + '\\n-----END PRIVATE KEY-----\\n", "client_email": "x@p.iam.gserviceaccount.com", '
        '"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs"}',
        None,
    ),
}


def credential_cases(examples: int = 3, seed: int = 7) -> list[Case]:
    """`examples` secrets per rule, each in every carrier."""
    from kirolearn.privacy import table as scrub_table

    rng = random.Random(seed)
    sampler = _Sampler(rng)
    cases = []
    for rule in scrub_table.table().rules:
        made = 0
        for _attempt in range(examples * 20):
            if made >= examples:
                break
            try:
                sample = _EXAMPLES[rule.id](rng)[0] if rule.id in _EXAMPLES else sampler.sample(rule.secret)
            except (re.error, RecursionError):
                break
            if rule.form == "RAW":
                m = rule.regex.search(sample)
                if not m:
                    continue
                s, e = rule.secret_span(m)
                secret, whole = sample[s:e], sample
            else:
                if not rule.regex.pattern or (rule.form == "TOKEN" and not rule.regex.fullmatch(sample)):
                    continue
                secret = whole = sample
            if not _judged_secret(rule, secret):
                continue  # the sample happens to be a placeholder or below the entropy floor
            if rule.form == "KV":
                texts = _kv_texts(rng, _names(rng, sampler, rule), secret)
            else:
                texts = _token_texts(rng, secret, whole)
            for carrier in CARRIERS:
                text = texts[carrier]
                if rule.keywords and not any(kw in text.lower() for kw in rule.keywords):
                    # gitleaks looks for a rule only in text that names its keyword ("facebook",
                    # "salesforce.com"): say it on the line before, as a config file or a user would.
                    text = f"{rule.keywords[0]} credentials:\n{text}"
                cases.append(Case(rule.id, carrier, text, secret))
            made += 1
    return cases


def _judged_secret(rule, secret: str) -> bool:
    from kirolearn.privacy import table as scrub_table

    if len(secret) < 4 or (rule.entropy is not None and scrub_table.entropy(secret) <= rule.entropy):
        return False
    if rule.broad and scrub_table.is_digest(secret):
        return False  # a generic rule's sample that is shaped like a SHA or a UUID: kept on purpose
    return not scrub_table.globally_allowed(secret) and not rule.allowed(secret, secret)


# --------------------------------------------------------------------------------------------------
# Ordinary text
# --------------------------------------------------------------------------------------------------

_CODE = [
    "def tokenize(text: str) -> list[str]:",
    "    tokens = [t for t in text.split() if t]",
    "for key, value in sorted(config.items()):",
    '    cache_key = f"{user_id}:{page}"',
    "const apiUrl = `${baseUrl}/v2/items?page=${page}`;",
    "if (!token) { throw new Error('missing token'); }",
    '    secret_name = os.environ.get("SECRET_NAME", "default")',
    "func (s *Server) handleAuth(w http.ResponseWriter, r *http.Request) {",
    "    password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())",
    'export PATH="$HOME/.local/bin:$PATH"',
    "SELECT id, name, created_at FROM users WHERE org_id = $1 ORDER BY created_at DESC;",
    '    return jsonify({"status": "ok", "count": len(rows)})',
    "import { useState, useEffect } from 'react';",
    '    self.access_log = logging.getLogger("access")',
    "    key_size = 2048",
    '    api_version = "2024-06-01"',
    "  timeout: 30s",
    "  replicas: 3",
    "    token_count = len(encoder.encode(prompt))",
    '    auth_method = "oauth"',
    "assert response.status_code == 200, response.text",
    'with open(path, "rb") as fh: data = fh.read()',
    '    raise ValueError(f"unknown column {name!r}")',
    "let total = items.reduce((sum, x) => sum + x.price, 0);",
    "pub fn parse_header(input: &[u8]) -> Result<Header, Error> {",
    '    println!("{} items processed", count);',
    "docker compose up -d --build api worker",
    "git rebase -i HEAD~3",
    "npm install --save-dev typescript@5.4.5",
    "pip install -e '.[dev]'",
    "kubectl get pods -n monitoring -o wide",
    "python -m pytest tests/test_export.py -q -k streaming",
    '    session_key = request.cookies.get("session")',
    "class SecretManagerClient(BaseClient):",
    "    access_token_expires = timedelta(minutes=15)",
    '    credentials_path = Path.home() / ".config" / "app" / "credentials.json"',
    "# TODO: rotate the signing key before release",
    "ERROR: could not connect to server: Connection refused",
    "Ran 42 tests in 3.21s",
    "OK (skipped=2)",
]


def _b64word(rng: random.Random) -> str:
    import base64

    words = [
        "hello world",
        "the quick brown fox",
        "config.yaml",
        "release notes",
        "user:guest",
        "lorem ipsum",
    ]
    return base64.b64encode(rng.choice(words).encode()).decode()


def ordinary_lines(n: int = 2000, seed: int = 11) -> list[str]:
    """`n` lines of ordinary development text, the kinds the issue lists."""
    import base64
    import hashlib
    import uuid

    rng = random.Random(seed)

    def hx(k: int) -> str:
        return "".join(rng.choice("0123456789abcdef") for _ in range(k))

    def digest(alg: str) -> str:
        return base64.b64encode(getattr(hashlib, alg)(rng.randbytes(16)).digest()).decode()

    makers = [
        lambda: rng.choice(_CODE),
        lambda: f"commit {hx(40)}",
        lambda: f"{hx(7)} Fix the export of empty tables ({rng.randint(1, 999)})",
        lambda: f"Merge: {hx(7)} {hx(7)}",
        lambda: f"request_id={uuid.UUID(int=rng.getrandbits(128), version=4)}",
        lambda: f"  trace {uuid.UUID(int=rng.getrandbits(128), version=4)} took {rng.randint(1, 900)} ms",
        lambda: f'      "integrity": "sha512-{digest("sha512")}",',
        lambda: (
            f'<script src="/app.js" integrity="sha384-{digest("sha384")}" crossorigin="anonymous"></script>'
        ),
        lambda: (
            f'resolved "https://registry.npmjs.org/left-pad/-/left-pad-1.{rng.randint(0, 9)}.0.tgz#{hx(40)}"'
        ),
        lambda: f"sha256:{hx(64)}",
        lambda: f"{hx(64)}  dist/app-{rng.randint(1, 9)}.{rng.randint(0, 20)}.tar.gz",
        lambda: f"echo {_b64word(rng)} | base64 -d",
        lambda: f"data: {_b64word(rng)}",
        lambda: f"/home/dev/src/project/{rng.choice(['api', 'web', 'lib'])}/module_{rng.randint(1, 99)}.py",
        lambda: (
            f'  File "/usr/lib/python3.11/site-packages/pkg/mod{rng.randint(1, 50)}.py", line {rng.randint(1, 999)}'
        ),
        lambda: (
            f"https://github.com/acme/widgets/pull/{rng.randint(1, 9999)}#issuecomment-{rng.randint(10**8, 10**9)}"
        ),
        lambda: (
            f"https://docs.example.com/en/latest/{rng.choice(['install', 'usage', 'api'])}.html?highlight=token"
        ),
        lambda: (
            f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z INFO worker started"
        ),
        lambda: (
            f'[{rng.randint(1, 28):02d}/Nov/2026:10:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} +0000] "GET /health HTTP/1.1" 200'
        ),
        lambda: f"version {rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 99)}",
        lambda: (
            f"bumped typescript from 5.{rng.randint(0, 9)}.{rng.randint(0, 9)} to 5.{rng.randint(0, 9)}.{rng.randint(0, 9)}-rc.{rng.randint(1, 5)}+build.{rng.randint(1, 99)}"
        ),
        lambda: f"image: ghcr.io/acme/api@sha256:{hx(64)}",
        lambda: f'ETag: "{hx(32)}"',
        lambda: f"Content-MD5: {digest('md5')}",
        lambda: f"github.com/acme/lib v1.{rng.randint(0, 9)}.{rng.randint(0, 9)} h1:{digest('sha256')}",
        lambda: f'checksum = "{hx(64)}"',
        lambda: f'{{file = "pkg-{rng.randint(1, 9)}.0-py3-none-any.whl", hash = "sha256:{hx(64)}"}},',
        lambda: f"Digest: sha256:{hx(64)}",
        lambda: f"index {hx(7)}..{hx(7)} 100644",
        lambda: f"Change-Id: I{hx(40)}",
        lambda: f'uuid = "{uuid.UUID(int=rng.getrandbits(128), version=4)}"',
        lambda: f"    id: {uuid.UUID(int=rng.getrandbits(128), version=4)}",
        lambda: f'    "cache_key": "{hx(40)}",',
        lambda: f"  access_log: /var/log/nginx/access-{rng.randint(1, 9)}.log",
        lambda: "  api_base: https://api.openai.com/v1",
        lambda: f"secret_ref: projects/{rng.randint(100, 999)}/secrets/db-password/versions/latest",
        lambda: "const key = crypto.randomUUID();",
        lambda: "token_hash = hashlib.sha256(token.encode()).hexdigest()",
        lambda: f"keyid = {hx(16).upper()}",
        lambda: f"Author: Jane Doe <jane@example.com>  Date: 2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
        lambda: f"session_id={uuid.UUID(int=rng.getrandbits(128), version=4)}",
    ]
    return [rng.choice(makers)() for _ in range(n)]


def measure(scrubber=None, examples: int = 3, lines: int = 2000) -> dict:
    """Recall per carrier (and overall), keep, and the rules with a miss."""
    from kirolearn.privacy.scrub import Scrubber

    scrubber = scrubber or Scrubber()
    cases = credential_cases(examples)
    per: dict = {c: [0, 0] for c in CARRIERS}
    missed: dict = {}
    for case in cases:
        out = scrubber.scrub_text(case.text)
        ok = case.secret not in out
        per[case.carrier][0] += ok
        per[case.carrier][1] += 1
        if not ok:
            missed.setdefault(case.rule, []).append(case)
    ordinary = ordinary_lines(lines)
    changed = [line for line in ordinary if scrubber.scrub_text(line) != line]
    caught = sum(v[0] for v in per.values())
    return {
        "recall": caught / max(1, len(cases)),
        "recall_by_carrier": {c: v[0] / max(1, v[1]) for c, v in per.items()},
        "cases": len(cases),
        "rules": len({c.rule for c in cases}),
        "missed": missed,
        "keep": 1 - len(changed) / max(1, len(ordinary)),
        "changed": changed,
        "ordinary": len(ordinary),
    }


# --------------------------------------------------------------------------------------------------
# Held out: gitleaks' own test samples (scripts/gitleaks_samples.py), never used to tune the rules
# --------------------------------------------------------------------------------------------------

HELDOUT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "data", "gitleaks_samples.jsonl.gz"
)


def _carry(text: str, carrier: str) -> str:
    if carrier == "prompt":
        return f"I found this in the repo, is it safe to commit?\n{text}\nthanks"
    if carrier == "shell":
        return f"cat > config.txt <<'EOF'\n{text}\nEOF"
    return f"$ cat config.txt\n{text}\n"


def heldout_samples(path: str = HELDOUT) -> tuple[list, dict]:
    """(samples, meta) of the held-out file: each sample {"rule", "kind": "tp" | "fp", "text"}."""
    import gzip
    import json

    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    return rows[1:], rows[0]["meta"]


def measure_heldout(scrubber=None, path: str = HELDOUT) -> dict:
    """Recall on gitleaks' true positives in every carrier, keep on its false positives.

    A true positive is caught when the secret the catalogue rule finds in it (kirolearn's copy of
    the rule locates it) no longer appears; where that copy finds nothing, when the text changed.
    """
    from kirolearn.privacy import table as scrub_table
    from kirolearn.privacy.scrub import Scrubber

    scrubber = scrubber or Scrubber()
    rules = {r.id: r for r in scrub_table.table().rules}
    samples, meta = heldout_samples(path)
    per = {c: [0, 0] for c in CARRIERS}
    missed: dict = {}
    unlocated = 0
    fps = kept = 0
    for sample in samples:
        text = sample["text"]
        if sample["kind"] == "fp":
            fps += 1
            kept += scrubber.scrub_text(text) == text
            continue
        rule = rules.get(sample["rule"])
        secret = None
        if rule is not None:
            m = rule.regex.search(text)
            if m:
                s, e = rule.secret_span(m)
                secret = text[s:e] if e > s else None
        unlocated += secret is None
        for carrier in CARRIERS:
            carried = _carry(text, carrier)
            out = scrubber.scrub_text(carried)
            ok = (secret not in out) if secret else out != carried
            per[carrier][0] += ok
            per[carrier][1] += 1
            if not ok:
                missed.setdefault(sample["rule"], []).append(carried)
    total = sum(v[1] for v in per.values())
    return {
        "recall": sum(v[0] for v in per.values()) / max(1, total),
        "recall_by_carrier": {c: v[0] / max(1, v[1]) for c, v in per.items()},
        "cases": total,
        "rules": len({s["rule"] for s in samples if s["kind"] == "tp"}),
        "missed": missed,
        "unlocated": unlocated,
        "keep": kept / max(1, fps),
        "fps": fps,
        "meta": meta,
    }
