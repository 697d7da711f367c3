"""Logging that cannot write a secret: a formatter that scrubs each finished log line.

Scrubbing the formatted line (not only `record.msg`) covers %-arguments, exception tracebacks and
stack info too. Used by the MCP server's handlers (stderr and logs/mcp.log) and the CLI's stderr
logging (which cron appends to logs/drain.log).
"""

import logging


class ScrubbingFormatter(logging.Formatter):
    """A logging.Formatter whose output has passed through the scrubber."""

    _scrubber = None

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if ScrubbingFormatter._scrubber is None:
            from kirolearn.privacy.scrub import Scrubber

            ScrubbingFormatter._scrubber = Scrubber()
        return ScrubbingFormatter._scrubber.scrub_text(text)


def use_scrubbing(handlers, fmt: str) -> None:
    """Give each handler a scrubbing formatter with format string `fmt`."""
    for handler in handlers:
        handler.setFormatter(ScrubbingFormatter(fmt))


def scrub_stderr_logging() -> None:
    """Route warnings from any library to stderr through the scrubber (cron appends stderr to
    logs/drain.log). Does nothing when the root logger is already configured."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(ScrubbingFormatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
