"""Extract gitleaks' own test samples into a held-out corpus: bench/data/gitleaks_samples.jsonl.gz.

gitleaks validates every rule against true positives (`tps`) and false positives (`fps`) written
in its rule generators (cmd/generate/config/rules/*.go): literal strings, strings built with
`secrets.NewSecret(<regex>)`, and `utils.GenerateSampleSecret(s)` templates (INI, JSON, XML,
YAML, Go, Java, PHP, Makefile, logstash, ...). kirolearn's tests and tuning never used them: the
bench (bench/bench_scrub.py) reports recall and keep on this corpus as a held-out figure.

Only a small subset of Go is evaluated (string literals, `+`, `[]string{...}`, `append`, and the
helper calls above); an element that uses anything else is skipped and counted. Regex samples
are drawn with tests/secret_corpus.py's sampler, seeded, so the file is the same on every run.
The output is gzip-compressed (the samples look like credentials; none is live).

    python scripts/gitleaks_samples.py /path/to/gitleaks [--version v8.30.0-27-gb58d3f10] [-o FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import secret_corpus  # noqa: E402

_HELPERS = {
    "Numeric": "[0-9]{%s}",
    "Hex": "[a-f0-9]{%s}",
    "AlphaNumeric": "[a-z0-9]{%s}",
    "AlphaNumericExtendedShort": "[a-z0-9_-]{%s}",
    "AlphaNumericExtended": r"[a-z0-9=_\-]{%s}",
    "AlphaNumericExtendedLong": r"[a-z0-9\/=_\+\-]{%s}",
}
_TEMPLATES = [  # utils.GenerateSampleSecrets (gitleaks/cmd/generate/config/utils/generate.go)
    '{i}Token="{s}"',
    '{i}Token = "{s}"',
    "{i}Token={s}",
    "{i}Token = {s}",
    '{\n    "{i}_token": "{s}"\n}',
    '{"config.ini": "{I}_TOKEN={s}\\nBACKUP_ENABLED=true"}',
    "<{i}Token>\n    {s}\n</{i}Token>",
    "{i}_token: {s}",
    "{i}_token: '{s}'",
    '{i}_token: "{s}"',
    'string {i}Token = "{s}";',
    'var {i}Token string = "{s}"',
    '{i}Token := "{s}"',
    "{i}Token := `{s}`",
    'String {i}Token = "{s}";',
    'var {i}Token = "{s}"',
    '${i}Token .= "{s}"',
    "{i}Token = '{s}'",
    '{i}Token = "{s}"',
    'System.setProperty("{I}_TOKEN", "{s}")',
    '  "{i}Token" => "{s}"',
    '{i}_TOKEN = "{s}"',
    '{i}_TOKEN := "{s}"',
    '{i}_TOKEN ::= "{s}"',
    '{i}_TOKEN :::= "{s}"',
    '{i}_TOKEN ?= "{s}"',
]


class _Skip(Exception):
    pass


class _Parser:
    """A recursive-descent evaluator for the Go expressions the rule generators use."""

    _TOKEN = re.compile(r'\s+|//[^\n]*|`[^`]*`|"(?:[^"\\\n]|\\.)*"|[A-Za-z_][\w.]*|[(){},+\[\]]|.', re.S)

    def __init__(self, src: str, pos: int, sampler) -> None:
        self.src, self.pos, self.sampler = src, pos, sampler

    def _next(self, peek=False):
        pos = self.pos
        while True:
            m = self._TOKEN.match(self.src, pos)
            if not m:
                return None
            tok = m.group(0)
            pos = m.end()
            if tok.isspace() or tok.startswith("//"):
                continue
            if not peek:
                self.pos = pos
            return tok

    def expect(self, tok):
        got = self._next()
        if got != tok:
            raise _Skip(f"expected {tok!r}, got {got!r}")

    def expr(self):
        value = self.term()
        while self._next(peek=True) == "+":
            self._next()
            right = self.term()
            if not isinstance(value, str) or not isinstance(right, str):
                raise _Skip("+ on a list")
            value += right
        return value

    def args(self):
        self.expect("(")
        out = []
        while self._next(peek=True) != ")":
            out.append(self.expr())
            if self._next(peek=True) == ",":
                self._next()
        self.expect(")")
        return out

    def term(self):
        tok = self._next()
        if tok is None:
            raise _Skip("end of file")
        if tok[0] == "`":
            return tok[1:-1]
        if tok[0] == '"':
            return json.loads(tok.replace("\\'", "'").replace("\\x", "\\u00"))
        if tok == "[":
            self.expect("]")
            if self._next() != "string":
                raise _Skip("not a []string")
            self.expect("{")
            items = []
            while self._next(peek=True) != "}":
                start = self.pos
                try:
                    value = self.expr()
                    items.extend(value if isinstance(value, list) else [value])
                except _Skip:
                    self.pos = start
                    self._skip_element()
                    items.append(None)
                if self._next(peek=True) == ",":
                    self._next()
            self.expect("}")
            return items
        name = tok.split(".")[-1]
        if tok == "secrets.NewSecret":
            (regex,) = self.args()
            return self.sampler.sample(regex)
        if tok.startswith("utils.") and name in _HELPERS:
            (size,) = self.args()
            return _HELPERS[name] % size
        if tok == "utils.Hex8_4_4_4_12":
            self.args()
            return "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        if tok == "utils.GenerateSampleSecret":
            ident, secret = self.args()
            return f'{ident}_api_token = "{secret}"'
        if tok == "utils.GenerateSampleSecrets":
            ident, secret = self.args()
            return [
                t.replace("{i}", ident).replace("{I}", ident.upper()).replace("{s}", secret)
                for t in _TEMPLATES
            ]
        if tok == "append":
            parts = self.args()
            out = []
            for part in parts:
                out.extend(part if isinstance(part, list) else [part])
            return out
        if tok in ("tps", "fps"):
            return []  # append(tps, ...): the earlier items are already recorded
        if tok == "fmt.Sprintf":
            fmt, *rest = self.args()
            try:
                return fmt.replace("%%", "\0") % tuple(rest)
            except TypeError:
                raise _Skip("Sprintf") from None
        raise _Skip(f"unknown {tok}")

    def _skip_element(self):
        depth = 0
        while True:
            tok = self._next(peek=True)
            if tok is None:
                return
            if depth == 0 and tok in (",", "}"):
                return
            self._next()
            if tok in "({[":
                depth += 1
            elif tok in ")}]":
                depth -= 1


_FUNC_RE = re.compile(r"^func \w+\(\) \*config\.Rule \{", re.M)
_ASSIGN_RE = re.compile(r"\b(tps|fps)\s*(:?=)\s*")


def extract(root: str, seed: int = 23, version: str = "") -> tuple[list, dict]:
    rules_dir = os.path.join(root, "cmd", "generate", "config", "rules")
    sampler = secret_corpus._Sampler(random.Random(seed))
    samples, skipped = [], 0
    for name in sorted(os.listdir(rules_dir)):
        if not name.endswith(".go") or name.endswith("_test.go"):
            continue
        src = open(os.path.join(rules_dir, name), encoding="utf-8").read()
        starts = [m.start() for m in _FUNC_RE.finditer(src)] + [len(src)]
        for a, b in zip(starts, starts[1:]):
            body = src[a:b]
            rid = re.search(r'RuleID:\s*"([^"]+)"', body)
            if not rid:
                continue
            for m in _ASSIGN_RE.finditer(body):
                parser = _Parser(body, m.end(), sampler)
                try:
                    value = parser.expr()
                except (_Skip, ValueError, re.error, RecursionError, IndexError):
                    skipped += 1
                    continue
                for text in value if isinstance(value, list) else [value]:
                    if text is None:
                        skipped += 1
                    elif text.strip():
                        samples.append(
                            {
                                "rule": rid.group(1),
                                "kind": "tp" if m.group(1) == "tps" else "fp",
                                "text": text,
                            }
                        )
    return samples, {"gitleaks": version or _describe(root), "skipped_elements": skipped, "seed": seed}


def _describe(root: str) -> str:
    try:
        return subprocess.run(
            ["git", "-C", root, "describe", "--tags", "--always"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gitleaks", help="a gitleaks checkout")
    parser.add_argument(
        "-o",
        "--output",
        default=os.path.join(os.path.dirname(HERE), "bench", "data", "gitleaks_samples.jsonl.gz"),
    )
    parser.add_argument(
        "--version",
        default="",
        help="the checkout's version, when it is no git work tree (e.g. exported with git archive)",
    )
    args = parser.parse_args()
    samples, meta = extract(args.gitleaks, version=args.version)
    lines = [json.dumps({"meta": meta})] + [json.dumps(s) for s in samples]
    with open(args.output, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:  # byte-stable
        fh.write(("\n".join(lines) + "\n").encode("utf-8"))
    tps = sum(s["kind"] == "tp" for s in samples)
    print(
        f"{tps} true positives, {len(samples) - tps} false positives from {len({s['rule'] for s in samples})} "
        f"rules ({meta['gitleaks']}); {meta['skipped_elements']} elements skipped -> {args.output}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
