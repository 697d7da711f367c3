"""Make stored text safe to print as quoted lines (standard library only: the hook uses it).

Memory text is untrusted (design.md rule 9). Before it is quoted line by line
into the context an agent reads, `clean_lines` turns it into plain lines:
- every line break Python or a terminal honours (CR, CR LF, VT, FF, FS, GS,
  RS, NEL, U+2028, U+2029) becomes "\n", so each resulting line can be quoted
  and `str.splitlines()` finds no line that escaped its quote;
- terminal escape sequences (ESC/CSI/OSC/DCS/APC/PM/SOS, 7-bit and 8-bit forms)
  are removed whole, then every other C0 and C1 control character and DEL;
  a tab becomes four spaces;
- bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069, U+200E,
  U+200F, U+061C) are removed, so a line cannot be displayed reordered;
- lone surrogates become U+FFFD, so the text can always be encoded.
"""

LINE_BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"

# ESC-introduced sequences first (so their parameters go with them), then 8-bit C1 forms.
_ESCAPES_SOURCE = (
    r"\x1b\][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # OSC ... BEL / ST (never past a line end)
    r"|\x1b[P^_X][^\x1b\x9c\n]*(?:\x1b\\|\x9c)?"  # DCS, PM, APC, SOS ... ST
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI
    r"|\x1b[ -/]*[0-~]?"  # other two-byte and nF escapes
    r"|\x9d[^\x07\x1b\x9c\n]*(?:\x07|\x9c)?"  # 8-bit OSC
    r"|[\x90\x98\x9e\x9f][^\x1b\x9c\n]*\x9c?"  # 8-bit DCS, SOS, PM, APC
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
)
_PATTERNS: list = []  # compiled on first use: printable text, the common case, never needs them


def _compiled() -> list:
    if not _PATTERNS:
        import re  # here: the hook prints printable text without it (re and enum: ~25M instructions)

        _PATTERNS.extend((
            re.compile("[\ud800-\udfff]"),  # lone surrogates
            re.compile(_ESCAPES_SOURCE),
            re.compile(r"\r\n|[" + LINE_BREAKS.replace("\n", "") + "]"),
            re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f" + BIDI_CONTROLS + "]"),
        ))
    return _PATTERNS


def clean_text(text: str) -> str:
    """`text` with line breaks normalised to "\\n" and escapes, controls and bidi overrides removed."""
    text = str(text)
    # Printable text (and "\n") holds nothing the patterns below change: isprintable() is False for
    # every control character (Cc: C0, C1, TAB, DEL, NEL), format character (Cf: the bidi marks),
    # line or paragraph separator (Zl, Zp) and surrogate (Cs).
    if text.replace("\n", "").isprintable():
        return text
    return _clean(text)


def _clean(text: str) -> str:
    surrogates, escapes, breaks, controls = _compiled()
    text = surrogates.sub("\ufffd", text)
    text = escapes.sub("", text)
    text = breaks.sub("\n", text)
    text = text.replace("\t", "    ")
    return controls.sub("", text)


def clean_lines(text: str) -> "list[str]":
    """`clean_text(text)` split into lines; none of them contains a line break of any kind."""
    return clean_text(text).split("\n")
