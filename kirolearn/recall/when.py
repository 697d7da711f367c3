"""Dates named in a query: "what did we change on 3 May 2023?", "which city in August 2023?".

A memory's own words rarely repeat the date a question names, but the record knows when its
turn happened (the time part of its first source event's ULID). `windows(text)` finds the
dates a query names and returns the time spans they cover, plus the query with those dates
blanked out, so the words "May" or "2023" are not searched as text; `closeness(t, spans)` says
how well a record's time fits them. Standard library only (no datetime, no calendar), so the
hook could use it too.

Recognised, case-insensitive: "3 May 2023", "3rd May, 2023", "May 3, 2023", "2023-05-03" (a
day); "May 2023", "May, 2023" (a month); "in 2023", "during 2023" (a year); "in May",
"during October" (that month of any year, a weaker hint).
"""

MONTHS = {
    name: i + 1
    for i, name in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        )
    )
}
MONTHS.update({name[:3]: number for name, number in list(MONTHS.items())})
MONTHS["sept"] = 9
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
DAY, MONTH, YEAR, ANY_YEAR_MONTH = "day", "month", "year", "month-of-any-year"
# a turn often tells what happened in the days before it
GRACE_SECONDS = 7 * 86400
ANY_YEAR_MONTH_CLOSENESS = 0.5

# share of the best score a record gains for happening on a date the query names
DATE_WEIGHT = 0.5
_SOURCES = (
    (DAY, rf"\b{_DAY}\s+({_MONTH})\.?,?\s+{_YEAR}\b", lambda m: (m[3], m[2], m[1])),
    (DAY, rf"\b({_MONTH})\.?\s+{_DAY},?\s+{_YEAR}\b", lambda m: (m[3], m[1], m[2])),
    (DAY, r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b", lambda m: (m[1], m[2], m[3])),
    (MONTH, rf"\b({_MONTH})\.?,?\s+{_YEAR}\b", lambda m: (m[2], m[1], None)),
    (YEAR, rf"\b(?:in|during|since|throughout|of)\s+{_YEAR}\b", lambda m: (m[1], None, None)),
    (
        ANY_YEAR_MONTH,
        rf"\b(?:in|during|since|throughout|of)\s+({_MONTH})\b(?!\s*\d)",
        lambda m: (None, m[1], None),
    ),
)
_PATTERNS: list = []  # lazy: prompts rarely name a date
# a-z stay, any other byte becomes a space
_NOT_A_TO_Z = bytes(b if 97 <= b <= 122 else 32 for b in range(256))
_MONTH_WORDS = frozenset(name.encode() for name in MONTHS)
# non-ASCII letters a re.I pattern matches as ASCII (dotless i, long s, Kelvin)
_IGNORECASE_EXTRA = {0x131: "i", 0x130: "i", 0x17F: "s", 0x212A: "k"}


def _patterns() -> list:
    if not _PATTERNS:
        import re  # here: re and enum are costly, and most prompts name no date

        _PATTERNS.extend((kind, re.compile(source, re.I), parts) for kind, source, parts in _SOURCES)
    return _PATTERNS


def _may_name_a_date(text: str) -> bool:
    """False when no pattern can match: each needs a year (19xx or 20xx) or a month's name as a word."""
    if "19" in text or "20" in text:
        return True
    if not text.isascii():
        text = text.translate(_IGNORECASE_EXTRA)
    words = text.lower().encode("ascii", "replace").translate(_NOT_A_TO_Z).split()
    return not _MONTH_WORDS.isdisjoint(words)


def _epoch(year: int, month: int, day: int) -> int:
    """Seconds since the epoch of a UTC midnight (days_from_civil, H. Hinnant); ValueError if no such day."""
    if not (
        1 <= month <= 12
        and 1 <= day <= (31, 29 if _leap(year) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]
    ):
        raise ValueError("no such day")
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return (era * 146097 + doe - 719468) * 86400


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _month_of(seconds: float) -> int:
    days = int(seconds // 86400) + 719468  # civil_from_days
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    mp = (5 * (doe - (365 * yoe + yoe // 4 - yoe // 100)) + 2) // 153
    return mp + 3 if mp < 10 else mp - 9


def _span(kind: str, year, month, day) -> "tuple[int, int]":
    if kind == ANY_YEAR_MONTH:
        return month, month  # not a time range: closeness() compares the month
    if kind == YEAR:
        return _epoch(year, 1, 1), _epoch(year + 1, 1, 1)
    if kind == MONTH:
        return _epoch(year, month, 1), _epoch(year + (month == 12), month % 12 + 1, 1)
    start = _epoch(year, month, day)
    return start, start + 86400


def windows(text: str) -> "tuple[list[tuple[str, int, int]], str]":
    """([(kind, start, end)], `text` with every date it names blanked out); ([], text) if it names none."""
    if not text or not _may_name_a_date(text):
        return [], text
    found: list = []
    spans: list = []
    for kind, pattern, parts in _patterns():
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in spans):
                continue  # already part of a longer date
            year, month, day = parts(m)
            try:
                month = None if month is None else (int(month) if month.isdigit() else MONTHS[month.lower()])
                found.append(
                    (
                        kind,
                        *_span(
                            kind,
                            None if year is None else int(year),
                            month,
                            None if day is None else int(day),
                        ),
                    )
                )
            except (KeyError, ValueError):
                continue
            spans.append((m.start(), m.end()))
    if not found:
        return [], text
    chars = list(text)
    for a, b in spans:
        chars[a:b] = " " * (b - a)
    return found, "".join(chars)


def closeness(seconds: "float | None", found: "list[tuple[str, int, int]]") -> float:
    """How well a time fits the named dates: 1 inside one, fading to 0 over GRACE_SECONDS after it,
    ANY_YEAR_MONTH_CLOSENESS in a month named without a year, else 0."""
    if seconds is None:
        return 0.0
    best = 0.0
    for kind, start, end in found:
        if kind == ANY_YEAR_MONTH:
            if _month_of(seconds) == start:
                best = max(best, ANY_YEAR_MONTH_CLOSENESS)
        elif start <= seconds < end:
            return 1.0
        elif end <= seconds < end + GRACE_SECONDS:
            best = max(best, 1.0 - (seconds - end) / GRACE_SECONDS)
    return best


def record_time(source_event_ids, created_at) -> "float | None":
    """When a record's turn happened: its first source event's time (event ids are ULIDs, see
    kirolearn.core.ids), else when the record was made (an import or a summary may carry no event)."""
    from kirolearn.core import jsonfast
    from kirolearn.core.ids import ulid_time_ms
    from kirolearn.core.isotime import iso_epoch

    try:
        return ulid_time_ms(jsonfast.loads(source_event_ids or "[]")[0]) / 1000.0
    except (ValueError, IndexError, TypeError, KeyError, AttributeError):
        return iso_epoch(created_at or "")


def narrow(found: "list[tuple[str, int, int]]") -> bool:
    """Whether the dates pin down a day or a month (their records are worth adding as candidates)."""
    return any(kind in (DAY, MONTH) for kind, _, _ in found)
