"""Build coding_distractors_topical.jsonl.gz: commit messages that share the coding set's topics.

The held-out set's misses were topically close distractors winning over the right turn (a question
on publishing releases answered by commits about publishing; slow image builds by a registry change;
sessions expiring by a timeout commit). These are real commit messages of projects about releases
(pypa/twine), Docker (docker/docker-py), auth and sessions (maxcountryman/flask-login, lepture/authlib,
pallets-eco/flask-session), kept when they name one of those topics. Run once against local git
mirrors; the output is committed:

    python bench/data/make_topical_distractors.py MIRROR_DIR... > /dev/null
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_distractors import build  # noqa: E402

TOPICS = re.compile(
    r"\b(releas\w*|publish\w*|upload\w*|pypi|docker\w*|image\w*|container\w*|registr\w*|build\w*|"
    r"auth\w*|token\w*|login|logout|log in|log out|session\w*|cookie\w*|expir\w*|timeout\w*|"
    r"password\w*|credential\w*|oauth\w*|jwt|refresh\w*)\b",
    re.I,
)
BOTS = re.compile(r"^(build\(deps\)|\[pre-commit|pre-commit|bump |chore\(deps\))", re.I)


def main(dirs) -> int:
    return build(
        dirs,
        "coding_distractors_topical.jsonl.gz",
        "topical distractors",
        keep=lambda text: bool(TOPICS.search(text)) and not BOTS.match(text),
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
