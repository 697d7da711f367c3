"""Print the figures of kirolearn's comments and docstrings: long comment lines, measured figures, issue numbers.

    .venv/bin/python scripts/comment_stats.py [--verbose] [--width 80] [paths...]

- comment lines: physical lines holding a `#` comment (tokenize's COMMENT tokens, shebangs and
  `# type:`/`# noqa` pragmas included), and how many of them are longer than --width characters;
- docstrings holding measured figures: a number with a unit (ms, µs, s, min, %, ×, KB, MB, GB) or
  the word "measured" (not "measured in docs/…", which points to the figures, nor "measured on"
  an agent's version);
- issue references (`#31`) in comments and docstrings.

--verbose lists each long line, figure docstring and issue reference with its place.
"""

import argparse
import ast
import io
import os
import re
import sys
import tokenize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FIGURE = re.compile(
    r"(?<![\w'])\d(?:[\d,.]*\d)?\s?(?:ms|µs|us|s|min|%|×|x\b|KB|MB|GB|KiB|MiB|GiB)(?![A-Za-z])"
    r"|\bmeasured\b(?!\s+in\s+docs/)(?!\s+(?:on|with)\s+[\w@/ -]*\d+\.\d+)",
    re.IGNORECASE,
)
ISSUE = re.compile(r"(?<![\w&/])#\d+\b")


def python_files(paths):
    for top in paths:
        if os.path.isfile(top):
            yield top
            continue
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.join(folder, name)


def docstrings(tree):
    """(line, text) of the module's, each class's and each function's docstring."""
    nodes = [tree] + [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    for node in nodes:
        text = ast.get_docstring(node, clean=False)
        if text is not None:
            yield node.body[0].lineno, text


def file_figures(path, width):
    with open(path, encoding="utf-8") as f:
        source = f.read()
    lines = source.splitlines()
    comment_rows = set()
    issues = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comment_rows.add(tok.start[0])
            issues += [(tok.start[0], m.group()) for m in ISSUE.finditer(tok.string)]
    long_rows = sorted(r for r in comment_rows if len(lines[r - 1]) > width)
    figure_docs = []
    for line, text in docstrings(ast.parse(source, path)):
        found = FIGURE.findall(text)
        if found:
            figure_docs.append((line, found))
        issues += [(line, m.group()) for m in ISSUE.finditer(text)]
    return {
        "comment_lines": len(comment_rows),
        "long": [(r, len(lines[r - 1])) for r in long_rows],
        "figure_docs": figure_docs,
        "issues": sorted(issues),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=[os.path.join(ROOT, "kirolearn")])
    parser.add_argument("--width", type=int, default=80)
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args(argv)

    total = {"comment_lines": 0, "long": 0, "figure_docs": 0, "issues": 0}
    files = 0
    for path in python_files(args.paths):
        files += 1
        fig = file_figures(path, args.width)
        rel = os.path.relpath(path, ROOT)
        total["comment_lines"] += fig["comment_lines"]
        for key in ("long", "figure_docs", "issues"):
            total[key] += len(fig[key])
        if args.verbose:
            for row, n in fig["long"]:
                print(f"{rel}:{row}: comment line of {n} characters")
            for row, found in fig["figure_docs"]:
                print(f"{rel}:{row}: docstring with figures {', '.join(found[:4])}")
            for row, ref in fig["issues"]:
                print(f"{rel}:{row}: issue reference {ref}")

    lines = total["comment_lines"]
    share = 100 * total["long"] / lines if lines else 0.0
    print(f"files:                          {files}")
    print(f"comment lines:                  {lines}")
    print(f"  over {args.width} characters:         {total['long']} ({share:.0f} %)")
    print(f"docstrings with measured figures: {total['figure_docs']}")
    print(f"issue references (#N):          {total['issues']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
