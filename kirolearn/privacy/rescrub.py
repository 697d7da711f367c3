"""`kirolearn rescrub` and `kirolearn scan`: apply today's scrubbing rules to what is already kept.

rescrub re-applies the scrubber to every stored event, record, summary, run and FTS index
(Store.rescrub walks the tables), to every log file and to the quarantine's reason files, then
checkpoints the WAL and vacuums so the old bytes leave the database files. It is safe to
interrupt (progress is committed per chunk) and to re-run. The quarantined event files
themselves stay raw, like the spool they came from: they wait for a person to repair them.
"""

from __future__ import annotations

import json
import os
from collections import Counter

from kirolearn.core import paths
from kirolearn.privacy.scrub import Scrubber, rules_version
from kirolearn.store.base import Store

LOG_SUFFIXES = (".log",)


def note(store: Store) -> str:
    """One line when the store's text predates the current rules ('' when it does not)."""
    current = rules_version()
    have = store.scrubbed_with()
    if have is None or have >= current:
        return ""
    return (
        f"the scrubbing rules (v{current}) are newer than this store's last scrub (v{have}): "
        "run `kirolearn rescrub` to clean what older versions stored"
    )


def state(store: Store) -> dict:
    """The scrub part of `status --json`."""
    have = store.scrubbed_with()
    return {
        "rules_version": rules_version(),
        "store_scrubbed_with": have,
        "rescrub_needed": have is not None and have < rules_version(),
    }


def _scrub_cell(scrubber: Scrubber):
    from kirolearn.capture.events import scrub_event
    from kirolearn.core.dedup import event_content_hash

    def scrub_cell(table: str, column: str, value, derived: dict):
        if not isinstance(value, str) or not value:
            return value
        if value[:1] in "[{":
            try:
                data = json.loads(value)
            except ValueError:
                data = None
            if isinstance(data, (dict, list)):
                clean: object
                if table == "events" and column == "body" and isinstance(data, dict):
                    clean = scrub_event(data, scrubber)
                    # dedup compares new events with this hash
                    if clean != data:
                        derived["content_hash"] = event_content_hash(clean)
                else:
                    clean = scrubber.scrub_value(data)
                return value if clean == data else json.dumps(clean, ensure_ascii=False)
        return scrubber.scrub_text(value)

    return scrub_cell


def _log_files() -> list[str]:
    found = []
    logs = paths.logs_dir()
    if os.path.isdir(logs):
        found += [
            os.path.join(logs, n)
            for n in sorted(os.listdir(logs))
            if n.endswith(LOG_SUFFIXES) or ".log." in n
        ]
    quarantine = os.path.join(paths.spool_dir(), "quarantine")
    if os.path.isdir(quarantine):
        found += [
            os.path.join(quarantine, n) for n in sorted(os.listdir(quarantine)) if n.endswith(".reason")
        ]
    return found


def rescrub_file(path: str, scrubber: Scrubber) -> int:
    """Scrub one text file in place (atomically, mode 0600); returns how many lines changed."""
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        lines = fh.readlines()
    new = [scrubber.scrub_text(line) for line in lines]
    changed = sum(a != b for a, b in zip(lines, new))
    if changed:
        tmp = path + ".rescrub.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.writelines(new)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    return changed


def rescrub_logs(scrubber: Scrubber) -> dict[str, int]:
    """Scrub every log and quarantine reason file, and the state/ and sessions/ files, in place;
    lines changed per file (relative to the home)."""
    from kirolearn.privacy import writes

    logs = writes.rescrub_files(scrubber)
    for path in _log_files():
        try:
            n = rescrub_file(path, scrubber)
        except OSError:
            continue
        if n:
            logs[os.path.relpath(path, paths.home())] = n
    return logs


def rescrub(store: Store, scrubber: Scrubber | None = None, on_chunk=None) -> dict:
    """Re-scrub the store and the logs with today's rules; returns the counts `rescrub` reports."""
    scrubber = scrubber or Scrubber()
    version = rules_version()
    found = store.rescrub(_scrub_cell(scrubber), version, on_chunk)
    logs = rescrub_logs(scrubber)
    return {
        "rules_version": version,
        **found,
        "redactions": dict(Counter(scrubber.counts)),
        "log_lines_changed": logs,
    }


def scan(text: str, scrubber: Scrubber | None = None) -> dict:
    """What the scrubber would redact in `text`: counts by type and the redacted lines."""
    import re

    scrubber = scrubber or Scrubber()
    out = scrubber.scrub_text(text)
    findings = []
    for number, line in enumerate(out.splitlines(), 1):
        for m in re.finditer(r"\[REDACTED:([A-Za-z0-9_\-]{1,64})\]", line):
            findings.append({"line": number, "type": m.group(1)})
    return {
        "total": sum(scrubber.counts.values()),
        "by_type": dict(sorted(scrubber.counts.items())),
        "findings": findings,
        "rules_version": rules_version(),
        "scrubbed": out,
    }
