"""A claim compared with the working tree: current, changed (and what it is now), deleted, unknown.

- A claim whose key still holds its value is current, whatever else changed in the file.
- A key that holds another value is changed, with the value now ("now 7").
- A key or symbol that is gone is deleted; so is a file that is gone and found nowhere else.
- A moved file is followed (`follow`): a rename git recorded (committed or staged), else a file
  that git does not track yet, or, without git, any file of the same type, that holds the claim's
  key and shares most of the moved file's lines.
- A file that does not parse right now (half-way through an edit) is unknown: nothing is judged.

`Verdict.blob` is git's id of the file's bytes: a caller that kept it from the last check may skip
the parse while the file is unchanged (the hook does, before it shows a line).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from kirolearn.claims import facts as factlib
from kirolearn.claims.model import HOLDS_SHARE, Claim, digest_holds
from kirolearn.core.ids import git_blob_id

CURRENT, CHANGED, DELETED, UNKNOWN = "current", "changed", "deleted", "unknown"
READ_MAX = 2 * 1024 * 1024  # bytes of a file read, at most
MOVE_SHARE = 0.5  # of the moved file's fingerprint a candidate must hold
WALK_MAX = 5000  # files looked at for a move without git
GIT_SECONDS = 5.0
_SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", "dist", "build"})


@dataclass(frozen=True)
class Verdict:
    state: str
    now: str = ""  # the value now, for a changed setting or dependency
    path: str = ""  # where the file is now, relative to the root ('' when gone)
    blob: str = ""
    why: str = ""


blob_id = git_blob_id


def read_file(root: str, rel: str) -> bytes | None:
    """A file's bytes (at most READ_MAX), None when it is missing, unreadable or too big."""
    path = os.path.join(root, rel)
    try:
        if os.path.getsize(path) > READ_MAX:
            return None
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def judge(claim: Claim, rel: str, data: bytes, secret: bytes | None = None) -> Verdict:
    """The claim against one file's bytes (at path `rel`)."""
    blob = blob_id(data)
    if b"\x00" in data[:8192]:
        return Verdict(UNKNOWN, path=rel, blob=blob, why="a binary file")
    text = data.decode("utf-8", "replace")
    if claim.kind == factlib.LINES:
        present = factlib.line_digests(text)
        held = sum(1 for d in claim.lines if d in present)
        if not claim.lines or held >= HOLDS_SHARE * len(claim.lines):
            return Verdict(CURRENT, path=rel, blob=blob)
        # the file is there, rewritten: changed (deleted is for what is gone)
        if held == 0:
            return Verdict(CHANGED, path=rel, blob=blob, why="none of the lines it wrote are there")
        return Verdict(
            CHANGED,
            path=rel,
            blob=blob,
            why=f"{len(claim.lines) - held} of {len(claim.lines)} lines it wrote are gone",
        )
    found = factlib.read(rel, text)
    if found is None:
        return Verdict(UNKNOWN, path=rel, blob=blob, why="the file does not parse now")
    fact = found.get(claim.key)
    if fact is None or fact.kind != claim.kind:
        return Verdict(DELETED, path=rel, blob=blob, why=f"{claim.key} is gone from {rel}")
    holds = digest_holds(claim.digest, fact, secret)
    if holds is None:
        return Verdict(UNKNOWN, path=rel, blob=blob, why="kept with another home's key")
    if holds:
        return Verdict(CURRENT, path=rel, blob=blob)
    now = "" if claim.kind == factlib.SYMBOL else fact.shown
    why = f"{claim.key} changed" + (f": now {now}" if now else "")
    return Verdict(CHANGED, now=now, path=rel, blob=blob, why=why)


def check(claim: Claim, root: str, secret: bytes | None = None, *, follow: bool = True) -> Verdict:
    """The claim against the working tree under `root` (see the module docstring)."""
    data = read_file(root, claim.file)
    if data is not None:
        return judge(claim, claim.file, data, secret)
    if os.path.exists(os.path.join(root, claim.file)):
        return Verdict(UNKNOWN, path=claim.file, why="the file cannot be read")
    moved = find_move(claim, root, secret) if follow else None
    if moved is not None:
        return moved
    return Verdict(DELETED, why=f"{claim.file} is gone")


def find_move(claim: Claim, root: str, secret: bytes | None = None) -> Verdict | None:
    """The verdict at the file's new place, when a move can be followed (None: it cannot)."""
    for rel in _renamed_to(root, claim.file):
        data = read_file(root, rel)
        if data is not None:
            return _moved(judge(claim, rel, data, secret), claim.file)
    if not claim.fingerprint:
        return None
    best, best_share = None, MOVE_SHARE
    wanted = set(claim.fingerprint)
    for rel in _candidates(root, claim.file):
        data = read_file(root, rel)
        if data is None or b"\x00" in data[:8192]:
            continue
        present = factlib.line_digests(data.decode("utf-8", "replace"))
        share = len(wanted & present) / len(wanted)
        if share >= best_share:
            verdict = judge(claim, rel, data, secret)
            if verdict.state != DELETED or claim.kind == factlib.LINES:
                best, best_share = verdict, share
    return _moved(best, claim.file) if best is not None else None


def _moved(verdict: Verdict, old: str) -> Verdict:
    why = f"moved from {old} to {verdict.path}" + (f"; {verdict.why}" if verdict.why else "")
    return Verdict(verdict.state, verdict.now, verdict.path, verdict.blob, why)


def _git(root: str, *args: str) -> list[str] | None:
    try:
        done = subprocess.run(
            ["git", "-C", root, *args],
            capture_output=True,
            text=True,
            timeout=GIT_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.splitlines() if done.returncode == 0 else None


def _renamed_to(root: str, old: str) -> list[str]:
    """Where git says `old` went: staged renames, then renames in the recent commits (chained)."""
    found: list[str] = []
    renames: dict[str, str] = {}
    for lines in (
        _git(root, "log", "-M50%", "--diff-filter=R", "--name-status", "--format=", "-n", "200"),
        _git(root, "diff", "--cached", "-M50%", "--name-status"),
    ):
        # oldest first: a later rename of the new path chains on
        for line in reversed(lines or []):
            parts = line.split("\t")
            if len(parts) == 3 and parts[0].startswith("R"):
                renames[parts[1]] = parts[2]
    path, seen = old, set()
    while path in renames and path not in seen:
        seen.add(path)
        path = renames[path]
        found.insert(0, path)
    return found


def _candidates(root: str, old: str) -> list[str]:
    """Files the moved one may have become: of the same type, untracked when git is there."""
    kind = factlib.file_type(old)
    ext = os.path.splitext(old)[1].lower()

    def same_type(rel: str) -> bool:
        return factlib.file_type(rel) == kind and bool(kind or os.path.splitext(rel)[1].lower() == ext)

    untracked = _git(root, "ls-files", "--others", "--exclude-standard")
    if untracked is not None:
        return [r for r in untracked if same_type(r)][:WALK_MAX]
    out: list[str] = []
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")]
        for name in files:
            seen += 1
            rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
            if same_type(rel):
                out.append(rel)
            if seen >= WALK_MAX:
                return out
    return out
