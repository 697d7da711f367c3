"""Cutting text to a size without breaking it (standard library only: the hook uses it).

A cut lands on a line end if one is near, else a sentence end, else a word
boundary, and never inside a `code span` or a ``` fenced block: the cut moves
back to before the span opened. The cut text ends with a visible marker.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:  # types only: `typing` would cost the hook its import
    from collections.abc import Iterator

MARKER = " [… cut]"
# a sentence ends at one of these followed by white space
SENTENCE_ENDS = ".!?:;"


def _tick_runs(piece: str) -> "Iterator[tuple[int, int]]":
    """(start, length) of each run of backticks. By hand: `re` costs the hook ~25M instructions."""
    at = piece.find("`")
    while at >= 0:
        end = at + 1
        while end < len(piece) and piece[end] == "`":
            end += 1
        yield at, end - at
        at = piece.find("`", end)


def _outside_code(piece: str) -> str:
    """`piece` shortened so that it does not end inside a ``` fenced block or a `code span`."""
    fence_at = span_at = None
    span_len = 0
    for start, n in _tick_runs(piece):
        if fence_at is not None:
            if n >= 3:
                fence_at = None
        elif span_at is not None:
            if n == span_len:
                span_at = None
        elif n >= 3:
            fence_at = start
        else:
            span_at, span_len = start, n
    open_at = fence_at if fence_at is not None else span_at
    return piece if open_at is None else piece[:open_at]


def cut(text: str, limit: int, marker: str = MARKER) -> str:
    """`text` if it fits in `limit` characters, else a prefix cut at a boundary plus `marker`."""
    if len(text) <= limit:
        return text
    room = limit - len(marker)
    if room <= 0:
        return marker.strip()[: max(limit, 0)]
    head = text[: room + 1]  # a boundary right at the limit counts
    floor = room // 2  # an earlier boundary would lose too much
    at = head.rfind("\n", 0, room + 1)
    if at < floor:
        end = _last_sentence_end(head, room)
        at = end if end >= floor else -1
    if at < floor:
        space = _last_space(head, room + 1)
        at = space if space >= floor // 2 else room
    piece = _outside_code(text[:at]).rstrip()
    return (piece + marker) if piece else marker.strip()


def _last_sentence_end(text: str, stop: int) -> int:
    """The end (index after the mark) of the last sentence end in text[:stop], or -1."""
    for i in range(min(stop, len(text)) - 2, -1, -1):
        if text[i] in SENTENCE_ENDS and text[i + 1].isspace():
            return i + 1
    return -1


def _last_space(text: str, stop: int) -> int:
    """The index of the last white-space character in text[:stop], or -1."""
    for i in range(min(stop, len(text)) - 1, -1, -1):
        if text[i].isspace():
            return i
    return -1


def cut_bytes(text: str, max_bytes: int, marker: str = MARKER) -> str:
    """`text` cut (by `cut`) until its UTF-8 encoding fits in `max_bytes`."""
    limit = len(text)
    while len(text.encode("utf-8")) > max_bytes and limit > 0:
        limit = min(limit - 1, int(limit * max_bytes / max(1, len(text.encode("utf-8")))))
        text = cut(text, limit, marker)
    return text
