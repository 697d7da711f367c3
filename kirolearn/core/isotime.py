"""Timestamps as kirolearn writes them: ISO 8601, UTC, milliseconds and a "Z".

    2026-11-30T13:20:00.123Z

Every stored time (an event's received_at, a record's created_at, extraction
runs, drains, session ends, the state files) has this one fixed width, so two
of them compare as text (in SQL and in Python) as they do in time. Session ends
were once stored to the second ("…:11Z" sorts after "…:11.500Z"); migration
m018_session_end_milliseconds rewrote them and `normalize` fixes imported ones.
Standard library only: the hook stamps its events with `utc_iso` (datetime is
imported only by the functions that parse).
"""

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # types only: the hook does not load datetime
    from datetime import datetime

# tests' clock: epoch seconds or an ISO time; unset, the system clock
CLOCK_ENV = "KIROLEARN_NOW"


def now() -> float:
    """Seconds since the epoch: the system clock, or $KIROLEARN_NOW when a test sets it."""
    fake = os.environ.get(CLOCK_ENV)
    if not fake:
        return time.time()
    try:
        value = float(fake)
        # nan, inf or beyond year 5000: no clock
        return value if 0 <= value < 1e11 else time.time()
    except ValueError:
        pass
    try:
        return parse(fake).timestamp()
    except ValueError:
        return time.time()  # an unreadable test clock is no clock: the system's


def utc_iso(t: "float | None" = None) -> str:
    """`t` (seconds since the epoch; default now) in the stored format."""
    whole, ms = divmod(int((now() if t is None else t) * 1000), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{ms:03d}Z"


def now_iso() -> str:
    """Now, in the stored format."""
    return utc_iso()


def to_seconds(iso: "str | None") -> "str | None":
    """A stored timestamp cut to whole seconds ("2026-09-24T18:02:11Z"): the shape the session_end
    seed shows for `ended_at`, which the session_end and session_init results keep."""
    if not iso or len(iso) < 20 or iso[19] != ".":
        return iso
    return iso[:19] + "Z"


def parse(iso: str) -> "datetime":
    """A stored (or any ISO 8601) timestamp as an aware datetime; no offset means UTC."""
    from datetime import datetime, timezone

    dt = datetime.fromisoformat(iso.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def from_datetime(dt: "datetime") -> str:
    """A datetime in the stored format (a naive one is taken as UTC)."""
    from datetime import timezone

    dt = dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def normalize(iso: str) -> str:
    """Any ISO 8601 timestamp in the stored format; raises ValueError if it is not one."""
    return from_datetime(parse(iso))


def shift(iso: str, seconds: float) -> str:
    """A stored timestamp moved by `seconds`, in the stored format."""
    from datetime import timedelta

    return from_datetime(parse(iso) + timedelta(seconds=seconds))


SINCE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def since(text: str, now: "datetime | None" = None) -> str:
    """An age ('7d', '12h', '30m', '2w', '90s') back from `now` (an aware datetime; default now), a date
    (UTC midnight) or an ISO time, in the stored format; ValueError when it is none of them."""
    import re  # not at the top: the hook imports this module
    from datetime import datetime, timedelta, timezone

    match = re.match(r"^\s*(\d+)\s*([smhdw])\s*$", text, re.IGNORECASE)
    if match:
        now = now or datetime.now(timezone.utc)
        try:
            return from_datetime(
                now - timedelta(seconds=int(match.group(1)) * SINCE_UNITS[match.group(2).lower()])
            )
        except OverflowError:  # beyond datetime's years 1 to 9999
            raise ValueError(f"{text.strip()} reaches back before the year 1") from None
    return from_datetime(parse(text))


def iso_epoch(iso: str) -> "float | None":
    """Seconds since the epoch of a 'YYYY-MM-DDTHH:MM:SS…Z' UTC timestamp (None if unreadable).

    By hand: time.strptime and datetime cost the hook several ms of imports.
    """
    try:
        y, m, d = int(iso[0:4]), int(iso[5:7]), int(iso[8:10])
        hh, mm, ss = int(iso[11:13]), int(iso[14:16]), int(iso[17:19])
    except (ValueError, TypeError):
        return None
    if not (1 <= m <= 12 and 1 <= d <= 31):
        return None
    y -= m <= 2  # days_from_civil (H. Hinnant)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return days * 86400 + hh * 3600 + mm * 60 + ss
