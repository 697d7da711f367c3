"""Build coding_distractors.jsonl.gz: real commit messages of public Python projects.

The coding-recall benchmark (bench/bench_coding.py) hides its target turns among
these. Run once against local git mirrors; the output is committed:

    python bench/data/make_distractors.py MIRROR_DIR... > /dev/null
"""

import gzip
import json
import os
import re
import subprocess
import sys

SKIP = re.compile(r"^(merge |bump |release |prepare |version |update changelog|changelog|\d+(\.\d+)+$)", re.I)


def messages(repo_dir: str):
    out = subprocess.run(
        ["git", "-C", repo_dir, "log", "--no-merges", "--format=%B%x00"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for raw in out.split("\x00"):
        lines = [
            ln
            for ln in raw.strip().splitlines()
            if not ln.lower().startswith(("signed-off-by", "co-authored-by"))
        ]
        text = " ".join(" ".join(lines).split())[:600]
        if len(text.split()) >= 4 and not SKIP.match(text):
            yield text


def build(dirs, filename: str, label: str, keep=lambda text: True) -> int:
    """Write the unique commit messages of these mirrors that `keep` accepts to `filename` (beside this file)."""
    seen, rows = set(), []
    for d in dirs:
        name = os.path.basename(os.path.dirname(d.rstrip("/"))).replace("+", "/")
        for text in messages(d):
            if keep(text) and text.lower() not in seen:
                seen.add(text.lower())
                rows.append({"repo": name, "text": text})
    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), filename)
    with gzip.open(target, "wt", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} {label} -> {target}", file=sys.stderr)
    return 0


def main(dirs) -> int:
    return build(dirs, "coding_distractors.jsonl.gz", "distractors")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
