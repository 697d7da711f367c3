"""A test-only fault-injection seam: crash the process at a named point, deliberately.

`KIROLEARN_CRASH_AT=<point>[:<n>]` makes the process SIGKILL itself the n-th time
(default: the first) it reaches `reached(<point>)`, so crash tests can place a
kill exactly where a bug would hide instead of hoping a timer lands there.
Points: `ingest-in-transaction` (spool rows inserted, not committed),
`ingest-after-commit` (committed, spool files not yet removed),
`extract-before-commit` (the extractor answered, nothing stored),
`extract-in-transaction` (records and marks written, not committed).
Unset, which is always the case outside tests, it costs one environment lookup.
Standard library only.
"""

import os
import signal

ENV = "KIROLEARN_CRASH_AT"
_seen: "dict[str, int]" = {}


def reached(point: str) -> None:
    """Die here if KIROLEARN_CRASH_AT names this point (and this is its n-th visit)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    name, _, nth = spec.partition(":")
    if name != point:
        return
    _seen[point] = _seen.get(point, 0) + 1
    if _seen[point] == int(nth or 1):
        kill = getattr(signal, "SIGKILL", None)
        if kill is None:  # Windows: no SIGKILL; end as abruptly as it allows
            os._exit(137)
        os.kill(os.getpid(), kill)
