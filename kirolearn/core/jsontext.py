"""Edit a JSON file as text, so every byte of the user's own content stays theirs.

`parse` finds where each value sits in the text; `append` adds one member to
an object (or one item to an array) in the file's own style (indent unit,
line ending, one-line or multi-line) and returns the insertion, so that
`remove` can take exactly those bytes out again. An install that records its
insertions can therefore be undone to the original bytes, without keeping a
copy of a file that may hold the user's secrets.
"""

import json
from dataclasses import dataclass, field

_WS = " \t\r\n"


@dataclass
class Node:
    """A JSON value's place in the text: [start, end), and its children."""

    start: int
    end: int
    kind: str  # object | array | scalar
    # object: key -> value
    members: "dict[str, Node]" = field(default_factory=dict)
    # also an object's values, in order
    items: "list[Node]" = field(default_factory=list)


class JSONTextError(ValueError):
    """The text is not JSON this module can edit."""


def parse(text: str) -> Node:
    """The root value's node (a leading BOM and surrounding whitespace are allowed)."""
    i = 1 if text.startswith("\ufeff") else 0
    node, i = _value(text, _skip(text, i))
    if _skip(text, i) != len(text):
        raise JSONTextError(f"extra data at offset {_skip(text, i)}")
    return node


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _value(text: str, i: int) -> "tuple[Node, int]":
    if i >= len(text):
        raise JSONTextError("unexpected end of text")
    ch = text[i]
    if ch in "{[":
        close = "}" if ch == "{" else "]"
        node = Node(i, i, "object" if ch == "{" else "array")
        j = _skip(text, i + 1)
        if j < len(text) and text[j] == close:
            node.end = j + 1
            return node, j + 1
        while True:
            if ch == "{":
                if j >= len(text) or text[j] != '"':
                    raise JSONTextError(f"expected a key at offset {j}")
                key_end = _string_end(text, j)
                key = json.loads(text[j:key_end])
                j = _skip(text, key_end)
                if j >= len(text) or text[j] != ":":
                    raise JSONTextError(f"expected ':' at offset {j}")
                child, j = _value(text, _skip(text, j + 1))
                node.members[key] = child
            else:
                child, j = _value(text, j)
            node.items.append(child)
            j = _skip(text, j)
            if j < len(text) and text[j] == ",":
                j = _skip(text, j + 1)
                continue
            if j < len(text) and text[j] == close:
                node.end = j + 1
                return node, j + 1
            raise JSONTextError(f"expected ',' or '{close}' at offset {j}")
    if ch == '"':
        end = _string_end(text, i)
        return Node(i, end, "scalar"), end
    try:
        _, end = json.JSONDecoder().raw_decode(text, i)
    except ValueError as exc:
        raise JSONTextError(str(exc)) from None
    return Node(i, end, "scalar"), end


def _string_end(text: str, i: int) -> int:
    j = i + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == '"':
            return j + 1
        j += 1
    raise JSONTextError(f"unterminated string at offset {i}")


def find(root: Node, *path: str) -> "Node | None":
    """The node at `path` (object keys) or None."""
    node = root
    for key in path:
        if node.kind != "object" or key not in node.members:
            return None
        node = node.members[key]
    return node


def newline(text: str) -> str:
    """The file's line ending: CRLF if it has one, else LF."""
    return "\r\n" if "\r\n" in text else "\n"


def indent_unit(text: str) -> str:
    """The file's indentation step: a tab or N spaces (2 when nothing is indented)."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            ws = line[: len(line) - len(stripped)]
            return "\t" if ws.startswith("\t") else ws
    return "  "


def line_indent(text: str, offset: int) -> str:
    """The leading white space of the line that holds `offset`."""
    start = text.rfind("\n", 0, offset) + 1
    line = text[start:offset]
    return line[: len(line) - len(line.lstrip(" \t"))]


def append(
    text: str, container: Node, value: object, key: "str | None" = None
) -> "tuple[str, tuple[int, str]]":
    """`text` with `value` added at the end of `container` (as member `key` of an object).

    Returns the new text and the insertion (offset, inserted text) for `remove`.
    """
    if (container.kind == "object") != (key is not None) or container.kind == "scalar":
        raise JSONTextError("append needs an object and a key, or an array and no key")
    nl, unit = newline(text), indent_unit(text)
    close = container.end - 1
    inner = text[container.start + 1 : close]
    one_line = "\n" not in inner and inner.strip() != ""
    if one_line:
        body = json.dumps(value, ensure_ascii=False)
        fragment = (f"{json.dumps(key)}: " if key is not None else "") + body
        last = container.items[-1]
        insertion = (last.end, ", " + fragment)
    else:
        indent = line_indent(text, container.start)
        body = json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", nl + indent + unit)
        fragment = (f"{json.dumps(key)}: " if key is not None else "") + body
        if container.items:
            insertion = (container.items[-1].end, "," + nl + indent + unit + fragment)
        else:  # empty: keep whatever whitespace was inside, put ours first
            insertion = (
                container.start + 1,
                nl + indent + unit + fragment + (nl + indent if not inner else ""),
            )
    offset, inserted = insertion
    return text[:offset] + inserted + text[offset:], insertion


def remove(text: str, insertions: "list[tuple[int, str]]") -> "str | None":
    """`text` without `insertions` (undone newest first); None if they are no longer where they were."""
    for offset, inserted in reversed(insertions):
        if text[offset : offset + len(inserted)] != inserted:
            return None
        text = text[:offset] + text[offset + len(inserted) :]
    return text


def remove_moved(text: str, insertions: "list[tuple[int, str]]") -> "str | None":
    """`text` without `insertions` after the user edited the file around them: each one is taken out where
    it stands, else where its exact text is found (nearest its old offset); None if one cannot be found.

    The caller checks that what is left is the file without kirolearn's entries: a hand edit inside
    an insertion, or a copy of it, makes this answer unusable and the caller falls back.
    """
    for offset, inserted in reversed(insertions):
        if text[offset : offset + len(inserted)] != inserted:
            found, start = [], text.find(inserted)
            while start != -1:
                found.append(start)
                start = text.find(inserted, start + 1)
            if not found:
                return None
            offset = min(found, key=lambda at: abs(at - offset))
        text = text[:offset] + text[offset + len(inserted) :]
    return text
