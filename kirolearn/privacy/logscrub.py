"""Logging that cannot write a secret: a formatter that scrubs each finished log line.

Scrubbing the formatted line (not only `record.msg`) covers %-arguments, exception tracebacks and
stack info too. Used by the MCP server's handlers (stderr and logs/mcp.log) and the CLI's stderr
logging (which cron appends to logs/drain.log).
"""

import logging

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kirolearn.privacy.scrub import Scrubber

_QUOTED_INPUT: list = []


def drop_quoted_input(text: str) -> str:
    """`text` without the input pydantic quotes in a validation error (`input_value=...`).

    Pydantic cuts a long input to its head and its tail around "...": a secret cut that way no
    longer looks like one to the scrubber, so the quote goes whole, up to the last `, input_type=`
    of its line (the input itself may contain that text). The mcp SDK's own quote of the whole
    message it could not validate ("Message was: ...") goes too: a secret in it need not look like one.
    """
    if "input_value=" not in text and "Message was:" not in text and "failed validation:" not in text:
        return text
    if not _QUOTED_INPUT:
        import re

        _QUOTED_INPUT.extend(
            (
                (re.compile(r"input_value=[^\n]*(?=, input_type=)"), "input_value=[not logged]"),
                (re.compile(r"input_value=(?![\[]not logged)[^\n]*"), "input_value=[not logged]"),
                # the mcp SDK quotes a whole failed client message: never logged
                (re.compile(r"(Message was:|Message that failed validation:).*", re.S), r"\1 [not logged]"),
            )
        )
    for pattern, replacement in _QUOTED_INPUT:
        text = pattern.sub(replacement, text)
    return text


class ScrubbingFormatter(logging.Formatter):
    """A logging.Formatter whose output has passed through the scrubber (and the sanitiser: one line
    of log is one line, with no terminal escape)."""

    _scrubber: "Scrubber | None" = None

    def format(self, record: logging.LogRecord) -> str:
        from kirolearn.privacy.sanitize import clean_text

        text = drop_quoted_input(super().format(record))
        scrubber = ScrubbingFormatter._scrubber
        if scrubber is None:
            from kirolearn.privacy.scrub import Scrubber

            scrubber = ScrubbingFormatter._scrubber = Scrubber()
        return scrubber.scrub_text(clean_text(text))


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
