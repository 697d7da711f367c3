"""The one error of the hook path: this hook input cannot become an event (standard library only)."""


class Rejected(ValueError):
    """The hook input cannot become an event; the message says why."""

    raw: "bytes | None" = None  # the payload, which the hook keeps in quarantine
