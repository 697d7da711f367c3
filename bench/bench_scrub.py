"""Secrets: recall and keep per carrier on the corpus generated from every rule, and scrub cost.

The corpus (tests/secret_corpus.py) holds several secrets per rule of kirolearn's rules table
(gitleaks' default catalogue plus betterleaks' extra rules), each in a prompt, a shell command and
a tool output, and ordinary development text. Rows:
- kirolearn: the scrubber as shipped;
- built-in rules only: the same scrubber without the catalogue table (what earlier releases had);
- betterleaks alone, and kirolearn + betterleaks: only when `betterleaks` is importable
  (`pip install 'kirolearn[scan]'`).
Then issue #23's rows: recall over the transform matrix (tests/transforms.py: every catalogue
rule and the common secrets x JSON / URL / HTML escapes, shell quotes, a line break inside the
token, Basic auth, .env lines under neutral names x 3 carriers), keep on ordinary text written
the same ways, and the held-out corpus of gitleaks' own test samples
(bench/data/gitleaks_samples.jsonl.gz, scripts/gitleaks_samples.py; never used for tuning).
Then the scrubber's cost per drain-like event and the cold cost of a recall-time re-scrub (what
the prompt hook pays). Prints tables; never fails.

    python bench/bench_scrub.py [--examples 3] [--lines 2000]
"""

import argparse
import os
import subprocess
import sys
import time

from benchtable import print_table

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import secret_corpus  # noqa: E402
import transforms  # noqa: E402


class _BetterleaksOnly:
    """A scrubber-shaped wrapper around betterleaks alone."""

    def __init__(self):
        from kirolearn.privacy.scrub import Scrubber

        self._s = Scrubber(betterleaks=True)

    def scrub_text(self, text):
        return self._s._betterleaks_pass(text)


def _row(name, r):
    by = r["recall_by_carrier"]
    return (
        name,
        f"{r['recall']:.3f} ({by['prompt']:.3f} / {by['shell']:.3f} / {by['tool_output']:.3f})",
        f"{r['keep']:.3f}",
        f"{len(r['missed'])}",
    )


def drain_like_events(n=2000):
    import random

    rng = random.Random(1)
    lines = [f"tests/test_mod_{i}.py::test_{i} PASSED" for i in range(200)]
    out = []
    for i in range(n):
        step = i % 40
        if step == 0:
            out.append(
                {
                    "prompt": f"Why does the export job fail when the table has {i} rows? Fix scripts/export.py."
                }
            )
        elif step == 39:
            out.append({"assistant_response": "Fixed the export: it streams rows in batches of 500. " * 2})
        else:
            text = "\n".join(rng.sample(lines, rng.randint(5, 60)))
            if rng.random() < 0.05:
                text += f"\nexport API_TOKEN=tok_{rng.getrandbits(96):024x}"
            out.append(
                {
                    "tool_name": "execute_bash",
                    "tool_input": {"command": f"python -m pytest -q -k case_{i}"},
                    "tool_response": {"success": True, "result": [{"exit_status": "0", "stdout": text}]},
                }
            )
    return out


def per_event_us(scrubber, events, rounds=3):
    best = None
    for _ in range(rounds):
        start = time.process_time()
        for e in events:
            scrubber.scrub_value(e)
        took = (time.process_time() - start) / len(events) * 1e6
        best = took if best is None else min(best, took)
    return best


COLD = """
import time
t = time.perf_counter()
from kirolearn.privacy.scrub import Scrubber
s = Scrubber()
s.scrub_text('''## kirolearn memory
- Fixed the export job: streams rows in batches of 500; tests pass (scripts/export.py)
- Decided to keep the API token in the keychain, not in .env; auth moved to middleware
''' * 6)
print((time.perf_counter() - t) * 1000)
"""


def cold_ms(runs=15):
    values = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", COLD], capture_output=True, text=True, check=True)
        values.append(float(out.stdout))
    values.sort()
    return values[len(values) // 2]


def code_lines(limit_files=600):
    """Non-blank lines of the installed packages' own source (real code, no secrets expected)."""
    import glob
    import site

    lines = []
    for root in site.getsitepackages():
        for path in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True))[:limit_files]:
            if "/test" in path:
                continue
            try:
                with open(path, encoding="utf-8") as fh:
                    lines += [line for line in fh.read().splitlines() if line.strip()]
            except (OSError, UnicodeDecodeError):
                continue
    return lines


def code_keep(scrubber, lines):
    return 1 - sum(scrubber.scrub_text(line) != line for line in lines) / max(1, len(lines))


def matrix_rows(scrubber) -> None:
    """Issue #23's rows: the transform matrix (tests/transforms.py) and the held-out catalogue."""
    import random

    common = transforms.matrix(scrubber, transforms.common_cases(random.Random(5)))
    catalogue_cases = [
        (c.rule, c.text, c.secret) for c in secret_corpus.credential_cases(1) if c.carrier == "tool_output"
    ]
    catalogue = transforms.matrix(scrubber, catalogue_cases)
    keep = transforms.keep(
        scrubber, transforms.ordinary_texts(secret_corpus.ordinary_lines(2000, seed=31), random.Random(4))
    )
    rows = [
        (
            "transform matrix, common secrets x 9 transforms x 3 carriers (recall)",
            f"{common['recall']:.4f} ({common['cases']})",
            ">= 0.99",
        ),
        (
            "transform matrix, every catalogue rule x 9 transforms x 3 carriers (recall)",
            f"{catalogue['recall']:.4f} ({catalogue['cases']})",
            ">= 0.99",
        ),
        (
            "ordinary text in the same shapes kept unchanged (keep)",
            f"{keep['keep']:.4f} ({keep['texts']})",
            ">= 0.99",
        ),
    ]
    if os.path.exists(secret_corpus.HELDOUT):
        held = secret_corpus.measure_heldout(scrubber)
        by = held["recall_by_carrier"]
        rows.append(
            (
                "held out: gitleaks' own samples, recall (prompt / shell / tool output)",
                f"{by['prompt']:.4f} / {by['shell']:.4f} / {by['tool_output']:.4f} ({held['cases']}, "
                f"{held['rules']} rules)",
                ">= 0.995",
            )
        )
        # gitleaks' negatives are per rule ("this rule must not fire"): many are secrets to other rules.
        rows.append(
            ("held out: gitleaks' per-rule negatives kept", f"{held['keep']:.3f} ({held['fps']})", "")
        )
    print_table("secrets as tools write them (issue #23)", rows)
    import shapes43

    found = shapes43.matrix(scrubber)
    kept = shapes43.keep(scrubber)
    print_table(
        "tokens of everyday tools (issue #43, tests/shapes43.py)",
        [
            ("shapes x 10 transforms x 3 carriers caught", f"{found['caught']:,} / {found['total']:,}", ""),
            ("their look-alikes kept unchanged", f"{kept['kept']:,} / {kept['total']:,}", "all"),
        ],
    )
    for kind, name, carrier, _ in sorted(set((k, n, c, "") for k, n, c, _ in catalogue["missed"]))[:12]:
        print(f"  matrix miss: {kind} / {name} / {carrier}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3)
    parser.add_argument("--lines", type=int, default=2000)
    args = parser.parse_args()
    from kirolearn.privacy import table as scrub_table
    from kirolearn.privacy.scrub import Scrubber

    table = scrub_table.table()
    mine = secret_corpus.measure(Scrubber(), args.examples, args.lines)
    rows = [_row("kirolearn", mine)]
    original = Scrubber._table_pass
    Scrubber._table_pass = lambda self, text, found=None: text
    try:
        rows.append(
            _row(
                "built-in rules only (before the table)",
                secret_corpus.measure(Scrubber(), args.examples, args.lines),
            )
        )
    finally:
        Scrubber._table_pass = original
    try:
        import betterleaks  # noqa: F401

        have_bl = True
    except ImportError:
        have_bl = False
    if have_bl:
        rows.append(
            _row("betterleaks alone", secret_corpus.measure(_BetterleaksOnly(), args.examples, args.lines))
        )
        rows.append(
            _row(
                "kirolearn + betterleaks layer",
                secret_corpus.measure(Scrubber(betterleaks=True), args.examples, args.lines),
            )
        )
    else:
        rows.append(("betterleaks", "not installed (pip install 'kirolearn[scan]')", "", ""))
    catalogue = ", ".join(f"{k} {v}" for k, v in table.catalogues.items())
    print(
        f"secrets: {mine['cases']} credentials from {mine['rules']} rules ({catalogue}), "
        f"{mine['ordinary']} ordinary lines"
    )
    width = max(len(r[0]) for r in rows)
    print(f"{'scrubber':<{width}}  {'recall (prompt / shell / tool output)':<38}  {'keep':>5}  rules missed")
    for name, recall, keep, missed in rows:
        print(f"{name:<{width}}  {recall:<38}  {keep:>5}  {missed}")
    print("targets: recall >= 0.99 in every carrier, keep >= 0.99")
    for rule, cases in sorted(mine["missed"].items())[:10]:
        print(f"  missed: {rule} ({len(cases)})")
    print()

    matrix_rows(Scrubber())
    print()

    code = code_lines()
    mine_keep = code_keep(Scrubber(), code)
    Scrubber._table_pass = lambda self, text, found=None: text
    try:
        old_keep = code_keep(Scrubber(), code)
    finally:
        Scrubber._table_pass = original
    print(
        f"installed packages' source, {len(code):,} lines kept unchanged: {mine_keep:.5f} "
        f"(built-in rules only: {old_keep:.5f})"
    )
    print()

    events = drain_like_events()
    full = per_event_us(Scrubber(), events)
    Scrubber._table_pass = lambda self, text, found=None: text
    try:
        builtin = per_event_us(Scrubber(), events)
    finally:
        Scrubber._table_pass = original
    cost = [
        ("scrub per drain-like event, all rules (us CPU)", f"{full:.0f}", ""),
        ("scrub per drain-like event, built-in rules only (us CPU)", f"{builtin:.0f}", ""),
        ("catalogue table's share of the scrub", f"{(full - builtin) / full:.0%}", ""),
    ]
    if have_bl:
        cost.append(
            (
                "scrub per drain-like event with the betterleaks layer (us CPU)",
                f"{per_event_us(Scrubber(betterleaks=True), events[:500], 1):.0f}",
                "",
            )
        )
    cost.append(
        (
            "recall-time re-scrub, cold process: import + Scrubber() + 1 KB (ms, median)",
            f"{cold_ms():.1f}",
            "within the prompt hook's budget",
        )
    )
    print_table("scrub cost", cost)
    return 0


if __name__ == "__main__":
    sys.exit(main())
