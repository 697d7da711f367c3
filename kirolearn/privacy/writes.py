"""The one writer of what kirolearn keeps beside its events: every text passes the scrubber first.

The drain scrubs events; these are the other writes: the small JSON files of `state/` (a provider's
error can quote the key it refused), the lines of `logs/truth.log`, the reasons of the audit trail
(`kirolearn edit --reason`, the viewer's form, the drain's marks), the session ids and other fields
a caller names (MCP's `KIROLEARN_SESSION_ID`), and the files of `sessions/` that the hook writes
raw (Cursor's `cursor-last-<id>.txt`, scrubbed in place at drain time: the hook cannot afford the
scrubber). `kirolearn rescrub` re-applies today's rules to the same files (`rescrub_files`).
"""

from __future__ import annotations

import os

from kirolearn.core import isotime, paths
from kirolearn.privacy.scrub import Scrubber, default_scrubber
from kirolearn.store import state as _state

__all__ = [
    "append_log",
    "rescrub_files",
    "scrub_session_files",
    "state_try_update",
    "state_update",
    "state_write",
    "text",
    "value",
]


def text(found: object, scrubber: Scrubber | None = None) -> str:
    """`found` as text fit to keep: scrubbed ('' for None)."""
    if found is None:
        return ""
    return (scrubber or default_scrubber()).scrub_text(found if isinstance(found, str) else str(found))


def value(found: object, scrubber: Scrubber | None = None) -> object:
    """A JSON-like value fit to keep: every string in it (keys too) scrubbed."""
    return (scrubber or default_scrubber()).scrub_value(found)


def state_write(name: str, data: dict) -> None:
    """store.state.write, scrubbed."""
    _state.write(name, value(data))  # type: ignore[arg-type]


def state_update(name: str, **values) -> dict:
    """store.state.update, scrubbed (what was there before is scrubbed again too)."""
    data = _state.read(name)
    data.update(values)
    clean = value(data)
    _state.write(name, clean)  # type: ignore[arg-type]
    return clean  # type: ignore[return-value]


def state_try_update(name: str, **values) -> None:
    """state_update, but a full disk or a read-only home must not hide the error being recorded."""
    try:
        state_update(name, **values)
    except OSError:
        pass


def append_log(name: str, lines: list, source: str = "") -> None:
    """Append scrubbed, time-stamped lines to logs/<name> (0600)."""
    if not lines:
        return
    prefix = f"{isotime.now_iso()} {source + ' ' if source else ''}"
    out = "".join(prefix + " ".join(text(line).splitlines()) + "\n" for line in lines)
    with os.fdopen(paths.open_log(name), "a", encoding="utf-8") as fh:
        fh.write(out)


def _rewrite(path: str, scrubber: Scrubber, *, unless_changed: bool) -> int:
    """Scrub one text file in place (atomically, 0600); lines changed. `unless_changed`: leave it
    when another process replaced it meanwhile (the hook writes these files)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        before = fh.read()
    lines = before.splitlines(keepends=True)
    new = [scrubber.scrub_text(line) for line in lines]
    whole = scrubber.scrub_text("".join(new))  # a key over several lines
    changed = sum(a != b for a, b in zip(lines, new)) or int(whole != "".join(new))
    if not changed:
        return 0
    tmp = f"{path}.{os.getpid()}.scrub.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
        fh.write(whole)
        fh.flush()
        os.fsync(fh.fileno())
    if unless_changed:
        try:
            with open(path, encoding="utf-8", errors="replace", newline="") as fh:
                now = fh.read()
        except OSError:
            now = None
        # the hook wrote a newer text: the next pass scrubs that one
        if now != before:
            os.remove(tmp)
            return 0
    os.replace(tmp, path)
    return changed


def _files(directory: str, suffixes: tuple = ()) -> list:
    if not os.path.isdir(directory):
        return []
    return [
        os.path.join(directory, n)
        for n in sorted(os.listdir(directory))
        if (not suffixes or n.endswith(suffixes))
        and ".tmp" not in n
        and os.path.isfile(os.path.join(directory, n))
        and not os.path.islink(os.path.join(directory, n))
    ]


def scrub_session_files(scrubber: Scrubber | None = None) -> dict:
    """Scrub every text file of sessions/ in place (the hook wrote them raw); lines changed per file."""
    scrubber = scrubber or default_scrubber()
    done = {}
    for path in _files(paths.sessions_dir()):
        try:
            n = _rewrite(path, scrubber, unless_changed=True)
        except (OSError, UnicodeDecodeError):
            continue
        if n:
            done[os.path.relpath(path, paths.home())] = n
    return done


def _rescrub_state(path: str, scrubber: Scrubber) -> int:
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return 0
    clean = scrubber.scrub_value(data)
    if clean == data:
        return 0
    name = os.path.basename(path)[: -len(".json")]
    _state.write(name, clean)  # type: ignore[arg-type]
    return 1


def rescrub_files(scrubber: Scrubber | None = None) -> dict:
    """Re-scrub the files written beside the database: state/*.json and sessions/; changes per file."""
    scrubber = scrubber or default_scrubber()
    done = {}
    for path in _files(_state.state_dir(), (".json",)):
        if _rescrub_state(path, scrubber):
            done[os.path.relpath(path, paths.home())] = 1
    done.update(scrub_session_files(scrubber))
    return done
