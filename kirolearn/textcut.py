"""Cutting text to a size without breaking it (standard library only: the hook uses it).

A cut lands on a line end if one is near, else a sentence end, else a word
boundary, and never inside a `code span` or a ``` fenced block: the cut moves
back to before the span opened. The cut text ends with a visible marker.
"""

import re

MARKER = " [… cut]"
_TICKS = re.compile(r"`+")
_SENTENCE_END = re.compile(r"[.!?:;](?=\s)")


def _outside_code(piece: str) -> str:
    """`piece` shortened so that it does not end inside a ``` fenced block or a `code span`."""
    fence_at = span_at = None
    span_len = 0
    for m in _TICKS.finditer(piece):
        n = len(m.group())
        if fence_at is not None:
            if n >= 3:
                fence_at = None
        elif span_at is not None:
            if n == span_len:
                span_at = None
        elif n >= 3:
            fence_at = m.start()
        else:
            span_at, span_len = m.start(), n
    open_at = fence_at if fence_at is not None else span_at
    return piece if open_at is None else piece[:open_at]


def cut(text: str, limit: int, marker: str = MARKER) -> str:
    """`text` if it fits in `limit` characters, else a prefix cut at a boundary plus `marker`."""
    if len(text) <= limit:
        return text
    room = limit - len(marker)
    if room <= 0:
        return marker.strip()[: max(limit, 0)]
    head = text[:room + 1]  # one more: a boundary right at the limit counts
    floor = room // 2  # a boundary in the first half would throw away too much
    at = head.rfind("\n", 0, room + 1)
    if at < floor:
        ends = [m.end() for m in _SENTENCE_END.finditer(head, 0, room)]
        at = ends[-1] if ends and ends[-1] >= floor else -1
    if at < floor:
        spaces = [m.start() for m in re.finditer(r"\s", head[:room + 1])]
        at = spaces[-1] if spaces and spaces[-1] >= floor // 2 else room
    piece = _outside_code(text[:at]).rstrip()
    return (piece + marker) if piece else marker.strip()


def cut_bytes(text: str, max_bytes: int, marker: str = MARKER) -> str:
    """`text` cut (by `cut`) until its UTF-8 encoding fits in `max_bytes`."""
    limit = len(text)
    while len(text.encode("utf-8")) > max_bytes and limit > 0:
        limit = min(limit - 1, int(limit * max_bytes / max(1, len(text.encode("utf-8")))))
        text = cut(text, limit, marker)
    return text
