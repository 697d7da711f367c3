"""The claims of the lines a block is about to show, re-checked against the working tree.

Standard library only: the hook runs it. The drain keeps each claim's last check and the git blob
id of the file it read; here a file whose bytes still have that id keeps the drain's verdict, read
from the row, with no parse. Only a file that changed since is parsed again (kirolearn.claims.check,
which loads `re` and `ast`), and its verdict is cached by blob in the session's state, so the next
prompt of the session pays a stat. At most FILES_MAX files are read for one block; the rest keep
the drain's verdict. A file missing here keeps it too: following a move needs git (the drain does).
"""

import os

from kirolearn.core.ids import git_blob_id
from kirolearn.store.sqlite import reader as store_reader

FILES_MAX = 16  # files read, at most, for one block
CLAIMS_MAX = 8  # claims of one record re-checked, at most
READ_MAX = 2 * 1024 * 1024  # bytes: a bigger file keeps the drain's verdict
CACHE_FILES, CACHE_VERDICTS = 64, 256  # entries a session's cache keeps
_WORSE = {"current": 0, "changed": 1, "deleted": 2}


def recheck(conn, root: str, record_ids, cache: "dict | None" = None) -> "dict[str, tuple[str, list[str]]]":
    """{record_id: (freshness now, [labels])} for those of these records that make claims.

    `cache` (a session state's dict, changed in place) keeps {"files": {path: [size, mtime_ns,
    blob]}, "verdicts": {key: [state, now]}}."""
    rows = store_reader.claims_shown(conn, record_ids)
    if not rows:
        return {}
    cache = cache if cache is not None else {}
    files = cache.setdefault("files", {})
    verdicts = cache.setdefault("verdicts", {})
    reads = [0]
    out = {}
    for rid, claims in rows.items():
        worst, labels = "current", []
        for claim in claims[:CLAIMS_MAX]:
            state, now = _state(root, claim, files, verdicts, reads)
            if state == "changed":
                labels.append(_changed(claim, now))
            elif state == "deleted":
                labels.append(f"gone: {_name(claim)}" if claim.get("key") else f"gone: {claim['file']}")
            if _WORSE.get(state, 0) > _WORSE.get(worst, 0):
                worst = state
        out[rid] = (worst, list(dict.fromkeys(labels))[:2])
    _trim(files, CACHE_FILES)
    _trim(verdicts, CACHE_VERDICTS)
    return out


def _state(root, claim, files, verdicts, reads) -> "tuple[str, str]":
    stored, stored_now = claim.get("state") or "current", claim.get("now") or ""
    rel = claim.get("path") or claim["file"]
    blob, data = _blob(os.path.join(root, rel), files, reads)
    if blob is None or blob == claim.get("blob"):
        return stored, stored_now
    key = f"{blob}:{claim.get('kind')}:{claim.get('key')}:{claim.get('digest')}"
    if key in verdicts:
        state, now = verdicts[key]
        return state, now
    if data is None:  # known by its stat, not read this time: read it now
        data = _read(os.path.join(root, rel))
        if data is None:
            return stored, stored_now
    state, now = _judge(claim, rel, data)
    if state == "unknown":
        return stored, stored_now
    verdicts[key] = [state, now]
    return state, now


def _blob(path: str, files: dict, reads: list) -> "tuple[str | None, bytes | None]":
    """The file's blob id (None: missing, unreadable, too big, or over this block's reads)."""
    try:
        st = os.stat(path)
    except OSError:
        return None, None
    seen = files.get(path)
    if isinstance(seen, list) and len(seen) == 3 and seen[:2] == [st.st_size, st.st_mtime_ns]:
        return seen[2], None
    if st.st_size > READ_MAX or reads[0] >= FILES_MAX:
        return None, None
    reads[0] += 1
    data = _read(path)
    if data is None:
        return None, None
    blob = git_blob_id(data)
    files.pop(path, None)
    files[path] = [st.st_size, st.st_mtime_ns, blob]
    return blob, data


def _read(path: str) -> "bytes | None":
    try:
        with open(path, "rb") as fh:
            return fh.read(READ_MAX)
    except OSError:
        return None


def _judge(claim: dict, rel: str, data: bytes) -> "tuple[str, str]":
    # re and ast: only for a file changed since the drain read it
    from kirolearn.claims import check
    from kirolearn.claims.model import Claim
    from kirolearn.core import jsonfast

    row = dict(claim)
    for name in ("lines", "fingerprint"):
        value = row.get(name)
        if isinstance(value, str):
            try:
                row[name] = jsonfast.loads(value)
            except ValueError:
                row[name] = []
    try:
        verdict = check.judge(Claim.from_dict(row), rel, data, None)
    except Exception:  # noqa: BLE001
        # an odd file is not judged here; the drain logs it
        return "unknown", ""
    return verdict.state, verdict.now


def _name(claim: dict) -> str:
    key = str(claim.get("key") or "")
    scope, _, name = key.rpartition(".")
    if claim.get("kind") in ("symbol", "dependency"):
        return key
    return f"[{scope}] {name}" if scope else name


def _changed(claim: dict, now: str) -> str:
    if not claim.get("key"):
        return f"changed: {claim['file']}"
    return f"changed: {_name(claim)}" + (f" now {_cut(now)}" if now else "")


def _cut(text: str, n: int = 40) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _trim(mapping: dict, keep: int) -> None:
    while len(mapping) > keep:
        mapping.pop(next(iter(mapping)))
