"""Freshness tied to the code (issue #31): what a record's files were, and whether they still are.

Two halves, both in the drain (never in the hook, which stays standard-library only and no slower):

- `take(project_root, files_touched)`, when the drain stores a record: for each touched file
  (at most FILES_PER_RECORD), its git blob id (sha1 of b"blob <len>\\0" + bytes, computed
  here, no git needed), size and a line fingerprint (one 16-bit hash per non-blank line,
  whitespace-normalised, at most MAX_LINES lines: enough to measure how much changed,
  too little to hold the file's text), and the repository's HEAD commit (`git rev-parse`,
  None without git). Stored as the record's `file_state`.
- `check(record)`, in bounded passes (kirolearn.store.sqlite.extension: the oldest-checked
  first through an index, `drain.freshness_per_pass` records a pass): each file against the
  working tree. Gone: follow a git rename from the stored commit (committed and staged renames)
  and check the new path; still gone: `deleted`. Present: `changed` when it changed
  substantially (below), else `current`.

"Substantially": the file's blob differs and at least CHANGED_SHARE of its lines (non-blank,
whitespace-normalised, difflib over the fingerprints) are new or gone, counted against the
longer of the two versions. So a `touch`, blank lines, a re-indent or one added comment in a
module keep a record `current`; a rewrite makes it `changed`. A binary file (a NUL byte in its
first 8 KB) has no lines: any other blob is `changed`. A file over MAX_BYTES is not hashed: its
size stands in for it (a change of more than CHANGED_SHARE of its size is `changed`).

Every odd case has a defined answer, never an error and never a lost record: no git (blob ids
still work, renames are not followed), a detached HEAD or a submodule (`git rev-parse` answers for
the repository the file is in), a file outside the project (state "outside": not judged), a
path that is not a regular file or cannot be read ("unreadable": not judged), a file missing when
the record was stored ("missing": not judged, its later appearance neither), a file never committed
(judged by content; a rename of it is not seen by git: `deleted`), odd characters in a path (kept as
given; only os-level calls touch it). A record's freshness is the worst of its files: deleted,
then changed, then current.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import subprocess
import zlib

log = logging.getLogger("kirolearn.pipeline.freshness")

FILES_PER_RECORD = 20  # the first ones: a turn's writes come after its reads

MAX_BYTES = 2 * 1024 * 1024  # bigger: its size stands in for its content
MAX_LINES = 4000  # lines fingerprinted (the first ones)

CHANGED_SHARE = 0.4  # of lines new or gone (of the longer version)
GIT_TIMEOUT = 5.0  # seconds one git call may take


def blob_id(data: bytes) -> str:
    """git's blob id of these bytes (what `git hash-object` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _fingerprint(data: bytes) -> str:
    """One 16-bit hash (4 hex digits) per non-blank line, whitespace-normalised: diffable, not readable."""
    out = []
    for line in data.splitlines()[:MAX_LINES * 2]:
        words = line.split()
        if not words:
            continue
        out.append("%04x" % (zlib.crc32(b" ".join(words)) & 0xFFFF))
        if len(out) == MAX_LINES:
            break
    return "".join(out)


def _within(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([os.path.realpath(path), os.path.realpath(root)]) == os.path.realpath(root)
    except ValueError:  # another drive (Windows), or a mix of absolute and relative
        return False


def _abs(root: str, rel: str) -> str:
    return rel if os.path.isabs(rel) else os.path.join(root, rel)


def file_facts(path: str) -> dict:
    """What a file is now: {"state": "present", "blob", "size", "lines", "binary"} or a state saying why
    it is not judged ("missing", "unreadable"; "huge" with its size)."""
    try:
        if not os.path.lexists(path):
            return {"state": "missing"}
        if not os.path.isfile(path):
            return {"state": "unreadable"}
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            return {"state": "huge", "size": size}
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError:
        return {"state": "unreadable"}
    binary = b"\0" in data[:8192]
    facts = {"state": "present", "blob": blob_id(data), "size": len(data), "binary": binary}
    if not binary:
        facts["lines"] = _fingerprint(data)
    return facts


def _git(root: str, *args: str) -> "str | None":
    """A git command's stdout in `root`, or None (no git, not a repository, an error, too slow)."""
    try:
        done = subprocess.run(["git", "-C", root, *args], capture_output=True, timeout=GIT_TIMEOUT,
                              stdin=subprocess.DEVNULL, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0",
                                                             "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "surrogateescape")


def head_commit(root: str, cache: "dict | None" = None) -> "str | None":
    """The HEAD commit of the repository at `root` (a detached HEAD, a submodule, a worktree: git knows),
    None without git, outside a repository, or before the first commit."""
    if cache is not None and root in cache:
        return cache[root]
    found = _git(root, "rev-parse", "--verify", "-q", "HEAD") if os.path.isdir(root) else None
    commit = found.strip() if found and len(found.strip()) == 40 else None
    if cache is not None:
        cache[root] = commit
    return commit


def take(project_root: str, files_touched, cache: "dict | None" = None) -> "dict | None":
    """A record's file_state: {"commit", "files": {path: facts}}; None when it touched no file."""
    files = list(dict.fromkeys(f for f in files_touched or () if isinstance(f, str) and f))[:FILES_PER_RECORD]
    if not files or not project_root:
        return None
    out = {}
    for rel in files:
        path = _abs(project_root, rel)
        if not _within(path, project_root):
            out[rel] = {"state": "outside"}
            continue
        out[rel] = file_facts(path)
    return {"commit": head_commit(project_root, cache), "files": out}


def _renamed(root: str, rel: str, commit: "str | None") -> "str | None":
    """Where git says `rel` went since `commit` (renames committed since, then staged), or None."""
    if not os.path.isdir(root):
        return None
    path, moved = rel.replace(os.sep, "/"), False
    log_args = ["log", "--reverse", "--no-merges", "-M", "--name-status", "--format=", "-z"]
    found = _git(root, *log_args, f"{commit}..HEAD") if commit else _git(root, *log_args, "HEAD")
    for text in (found, _git(root, "diff", "--cached", "-M", "--name-status", "-z", "HEAD")):
        if not text:
            continue
        parts = text.split("\0")
        i = 0
        while i < len(parts):
            status = parts[i].strip()
            if status.startswith(("R", "C")) and i + 2 < len(parts):
                if status.startswith("R") and parts[i + 1] == path:
                    path, moved = parts[i + 2], True
                i += 3
            else:
                i += 2 if status else 1
    return path if moved else None


def _changed_share(old: str, new: str) -> float:
    a = [old[i:i + 4] for i in range(0, len(old), 4)]
    b = [new[i:i + 4] for i in range(0, len(new), 4)]
    if not a and not b:
        return 0.0
    same = sum(block.size for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
    return 1.0 - same / max(len(a), len(b))


def judge(before: dict, now: dict) -> "tuple[str, str]":
    """(verdict, why) of one file: "current", "changed" or "deleted" (the caller follows renames first)."""
    if now.get("state") == "missing":
        return "deleted", "deleted"
    if now.get("state") == "unreadable":
        return "current", "not readable now: not judged"
    if before.get("state") == "huge" or now.get("state") == "huge":
        old, new = before.get("size") or 0, now.get("size") or 0
        if old and abs(new - old) / max(old, new) >= CHANGED_SHARE:
            return "changed", f"its size went from {old} to {new} bytes"
        return "current", "too big to compare: size about the same"
    if before.get("blob") == now.get("blob"):
        return "current", "unchanged"
    if before.get("binary") or now.get("binary"):
        return "changed", "binary content changed"
    share = _changed_share(before.get("lines", ""), now.get("lines", ""))
    if share >= CHANGED_SHARE:
        return "changed", f"{round(share * 100)}% of its lines differ"
    return "current", f"touched lightly ({round(share * 100)}% of its lines differ)"


_ORDER = {"current": 0, "changed": 1, "deleted": 2}


def check(record: dict) -> "tuple[str, str]":
    """(freshness, reason) of a record with a file_state, against the working tree now."""
    state = record.get("file_state") or {}
    root = record.get("project_root") or ""
    if not os.path.isdir(root):  # another machine's path, or a project moved away: nothing to compare with
        return record.get("freshness") or "current", "project folder not here: not checked"
    worst, reasons = "current", []
    for rel, before in (state.get("files") or {}).items():
        if not isinstance(before, dict) or before.get("state") not in ("present", "huge"):
            continue  # outside the project, missing or unreadable when stored: never judged
        now = file_facts(_abs(root, rel))
        verdict, why = judge(before, now)
        if verdict == "deleted":
            moved = _renamed(root, rel, state.get("commit"))
            if moved and os.path.lexists(_abs(root, moved)):
                verdict, why = judge(before, file_facts(_abs(root, moved)))
                why = f"renamed to {moved}" + ("" if verdict == "current" else f", and {why}")
        if verdict != "current":
            reasons.append(f"{rel}: {why}")
        if _ORDER[verdict] > _ORDER[worst]:
            worst = verdict
    return worst, "; ".join(reasons)[:500] or "files as the turn left them"
