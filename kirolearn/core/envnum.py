"""Numbers from KIROLEARN_* environment variables, checked, for every floor (the hook's too).

A value that is not a finite number inside its range (`nan`, `inf`, `1e308`, `-1`, `abc`, a
5,000-digit integer) is not used: the default is, and logs/env.log gets one line naming the
variable, what it held (cut short) and the default, once a process. Standard library only and no
`re`, so the hook can read its own settings with it.
"""

import os
import time

from kirolearn.core import paths

TYPE_CHECKING = False
if TYPE_CHECKING:  # types only: `typing` would cost the hook its import
    from collections.abc import Mapping
    from typing import Literal, overload


LOG_NAME = "env.log"
_SAID: "set[str]" = set()  # variables already logged by this process


if TYPE_CHECKING:  # integer=True: an int (`default` one too); else a float (an int `default` is one)

    @overload
    def number(
        name: str,
        default: int,
        low: int,
        high: int,
        *,
        integer: Literal[True],
        env: "Mapping[str, str] | None" = None,
    ) -> int: ...
    @overload
    def number(
        name: str,
        default: float,
        low: float,
        high: float,
        *,
        integer: bool = False,
        env: "Mapping[str, str] | None" = None,
    ) -> float: ...


def number(
    name: str,
    default: float,
    low: float,
    high: float,
    *,
    integer: bool = False,
    env: "Mapping[str, str] | None" = None,
) -> float:
    """$`name` as an int (`integer`) or float within [low, high], else `default` (logged if set)."""
    text = (os.environ if env is None else env).get(name)
    if text is None or not text.strip():
        return default
    try:
        value = int(text) if integer else float(text)
    except (ValueError, OverflowError):
        # int(): also the int-string conversion limit
        value = None
    # value == value: not NaN
    if value is not None and value == value and low <= value <= high:
        return value
    _warn(name, text, default, low, high)
    return default


def _warn(name: str, text: str, default: float, low: float, high: float) -> None:
    if name in _SAID:
        return
    _SAID.add(name)
    shown = "".join(c if c.isprintable() else "?" for c in text[:40]) + ("..." if len(text) > 40 else "")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = (
        f"{stamp} pid={os.getpid()} {name}={shown!r} is not a number from {low} to {high}: using {default}\n"
    )
    try:
        fd = paths.open_log(LOG_NAME)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:  # noqa: BLE001
        # a log that cannot be written must not cost the caller its value
        pass
