"""Progress bars for the long jobs a person runs by hand: a `kirolearn drain` that stores a big
spool or backfills expansions, vectors or freshness checks, and a `kirolearn import` of a big file.

Shown on stderr, and only when stderr is a terminal: the hook, the MCP server and a scheduled drain (cron,
systemd, launchd: no terminal) never build one, and stdout stays what `--json` documents. One bar at a
time; work smaller than MIN_ITEMS gets none (a bar that flashes by says nothing).
"""

import sys
from typing import Any

import click

MIN_ITEMS = 200


def on_terminal(stream=None) -> bool:
    """Whether `stream` (stderr by default) is a terminal a person watches."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


class Bars:
    """Bars on stderr, one phase after another: `phase(label, total)` gives an `update(done, total=None)`
    callable (None when the work is small or unknown); the next phase, or close(), ends the bar before."""

    def __init__(self, stream=None, minimum: int = MIN_ITEMS):
        self.stream = sys.stderr if stream is None else stream
        self.minimum = minimum
        self.bar: Any = None  # a click progress bar while a phase shows one
        self._state: dict | None = None

    def phase(self, label: str, total: "int | None" = None):
        """An update callable for `label`; with `total` None, the first update's own total sizes the bar."""
        self.close()
        if total is not None and total < self.minimum:
            return None
        state: dict[str, Any] = {"total": total}
        self._state = state

        def update(done: int, of: "int | None" = None) -> None:
            # a later phase began: this one's bar is closed
            if self._state is not state:
                return
            if self.bar is None:
                size = state["total"] if state["total"] is not None else of
                if size is None or size < self.minimum:
                    return
                self.bar = click.progressbar(length=size, label=label, file=self.stream)
                self.bar.__enter__()
                state["total"] = size
            step = max(0, min(done, state["total"]) - self.bar.pos)
            if step:
                self.bar.update(step)

        return update

    def close(self) -> None:
        self._state = None
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def for_hand_run(watch: bool = False) -> "Bars | None":
    """Bars when a person runs the command in a terminal (not --watch, whose passes print their own
    lines), else None: the scheduled and machine paths never see one."""
    return Bars() if on_terminal() and not watch else None
