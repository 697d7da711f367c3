"""Make stored text safe to print as quoted lines (standard library only: the hook uses it).

Memory text is untrusted (architecture.md rule 9). Before it is quoted line by line
into the context an agent reads, `clean_lines` turns it into plain lines:
- every line break Python or a terminal honours (CR, CR LF, VT, FF, FS, GS,
  RS, NEL, U+2028, U+2029) becomes "\n", so each resulting line can be quoted
  and `str.splitlines()` finds no line that escaped its quote;
- terminal escape sequences (ESC/CSI/OSC/DCS/APC/PM/SOS, 7-bit and 8-bit forms)
  are removed whole, then every other C0 and C1 control character and DEL;
  a tab becomes four spaces;
- bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069, U+200E,
  U+200F, U+061C) are removed, so a line cannot be displayed reordered;
- invisible characters are removed: every format character (Unicode category
  Cf: zero-width space and joiners, U+2060-U+2064, U+FEFF, soft hyphen, the
  tag characters U+E0000-U+E007F that can smuggle text to a model), the
  variation selectors U+E0100-U+E01EF and the Hangul fillers;
- lone surrogates become U+FFFD, so the text can always be encoded.

On top of that, for every surface that shows memory (architecture.md rule 9; the one
outbound sanitiser, so the hook's context block, every MCP answer, the viewer
and the CLI judge alike):
- `defuse` rewrites Kiro's own context markers (`--- CONTEXT ENTRY ...`);
- `quote` prefixes every line of a memory with "> " (the context block, MCP text);
- `guard_lines` quotes only the lines that could pass for a marker or an
  instruction (rules and fences, role labels and headings, "ignore previous
  instructions"), for text whose layout is not ours to change;
- `clean_value` sanitises every string (and key) of a JSON-like value;
- `outbound_text` / `outbound_value` add the secret re-scrub (kirolearn.privacy.scrub)
  after the characters are cleaned, so a secret split by invisible characters is
  scrubbed once it is whole;
- `visible` is the terminal's form: control and invisible characters shown as \\xNN / \\uNNNN.
"""

LINE_BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
# Cf (Unicode 15) and the printable-but-invisible characters, as regex ranges
INVISIBLE_RANGES = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
    # variation selectors 17-256, Hangul fillers
    "\U000e0100-\U000e01ef\u115f\u1160\u3164\uffa0"
)
# the invisible ones isprintable() accepts (it rejects the rest, all Cf)
_PRINTABLE_INVISIBLE = frozenset(
    ["\u115f", "\u1160", "\u3164", "\uffa0"] + [chr(c) for c in range(0xE0100, 0xE01F0)]
)

# ESC sequences first, so their parameters go with them; then 8-bit C1 forms
_ESCAPES_SOURCE = (
    # OSC ... BEL / ST (never past a line end)
    r"\x1b\][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[P^_X][^\x1b\x9c\n]*(?:\x1b\\|\x9c)?"  # DCS, PM, APC, SOS ... ST
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI
    r"|\x1b[ -/]*[0-~]?"  # other two-byte and nF escapes
    r"|\x9d[^\x07\x1b\x9c\n]*(?:\x07|\x9c)?"  # 8-bit OSC
    r"|[\x90\x98\x9e\x9f][^\x1b\x9c\n]*\x9c?"  # 8-bit DCS, SOS, PM, APC
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
)
# compiled on first use: printable text, the common case, never needs them
_PATTERNS: list = []


def _compiled() -> list:
    if not _PATTERNS:
        # here: the hook prints printable text without it (re is costly)
        import re

        _PATTERNS.extend(
            (
                re.compile("[\ud800-\udfff]"),  # lone surrogates
                re.compile(_ESCAPES_SOURCE),
                re.compile(r"\r\n|[" + LINE_BREAKS.replace("\n", "") + "]"),
                re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f" + BIDI_CONTROLS + INVISIBLE_RANGES + "]"),
            )
        )
    return _PATTERNS


def clean_text(text: str) -> str:
    """`text` with line breaks normalised to "\\n" and escapes, controls, bidi and invisible characters removed."""
    text = str(text)
    return text if is_plain(text) else _clean(text)


def is_plain(text: str) -> bool:
    """Whether `clean_text` would leave `text` as it is (no regex needed to tell).

    Printable text (and "\n") holds nothing the patterns change but the few invisible characters
    isprintable() accepts: it is False for every control character (Cc: C0, C1, TAB, DEL, NEL),
    format character (Cf: the bidi marks, zero-width characters, tags), line or paragraph
    separator (Zl, Zp) and surrogate (Cs)."""
    return text.replace("\n", "").isprintable() and (text.isascii() or _PRINTABLE_INVISIBLE.isdisjoint(text))


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


# --- markers: no line of memory may pass for one ---

# Kiro wraps hook output between "--- CONTEXT ENTRY BEGIN/END ---"
KIRO_MARKER = "--- CONTEXT ENTRY"
DEFUSED_MARKER = "— context entry"
# rules, fences, role labels, headings, "ignore previous instructions"
_MARKERISH_SOURCE = (
    r"(?i)^[ \t]*(?:"
    r"[-=_*~`<>\[\]|+]{3,}|#{3,}[ \t]*$"
    # a role heading
    r"|#{1,6}[ \t]*(?:system|assistant|user|human|developer|tool|instructions?|inst|sys)\b"
    r"|(?:#{1,6}|\*\*|__|\[|<\|?|\{\{)?[ \t]*/?(?:system|assistant|user|human|developer|tool|instructions?"
    r"|inst|sys|im_start|im_end|endoftext)\b[ \t]*(?:prompt|message|note|override)?[ \t]*(?:[:\]>|}]|$)"
    r"|.*\bignore\b.{0,30}\b(?:previous|prior|above|earlier|all)\b.{0,30}\b(?:instructions?|prompts?|rules)\b"
    r")"
)
_MARKER_PATTERNS: list = []


def _marker_patterns() -> list:
    if not _MARKER_PATTERNS:
        import re

        _MARKER_PATTERNS.extend(
            (re.compile(r"(?i)-{2,}[ \t]*context[ \t]+entry"), re.compile(_MARKERISH_SOURCE))
        )
    return _MARKER_PATTERNS


def defuse(text: str) -> str:
    """`text` with Kiro's context markers (any case or spacing) rewritten so none can close or open one."""
    text = str(text).replace(KIRO_MARKER, DEFUSED_MARKER)
    if "context" in text.lower() and "--" in text:
        text = _marker_patterns()[0].sub(DEFUSED_MARKER, text)
    return text


def quote(lines) -> str:
    """Each of `lines` cleaned, defused and quoted ("> ", ">" for a blank one): the context block's form."""
    out = []
    for line in lines:
        for part in defuse(clean_text(str(line))).split("\n"):
            out.append("> " + part if part.strip() else ">")
    return "\n".join(out)


def markerish(line: str) -> bool:
    """Whether one line could pass for a marker or an instruction (see `guard_lines`)."""
    return bool(_marker_patterns()[1].match(line))


def guard_lines(text: str) -> str:
    """`text` cleaned and defused, each line that could pass for a marker or an instruction quoted ("> ").

    For text whose layout is ours (headings, ids) but holds memory: ordinary lines stay as they are.
    Idempotent: a quoted line no longer looks like a marker.
    """
    lines = defuse(clean_text(text)).split("\n")
    return "\n".join("> " + line if not line.startswith("> ") and markerish(line) else line for line in lines)


def one_line(text) -> str:
    """`text` cleaned and defused on one line (every run of whitespace, line breaks too, is one space)."""
    return " ".join(defuse(clean_text(str(text))).split())


def clean_value(value):
    """A JSON-like value with every string (and every key) cleaned and defused; other values as they are."""
    if isinstance(value, str):
        return defuse(clean_text(value))
    if isinstance(value, dict):
        return {clean_value(k) if isinstance(k, str) else k: clean_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_value(v) for v in value]
    return value


def _scrubber(scrubber):
    if scrubber is not None:
        return scrubber
    # only when something is shown: it compiles patterns
    from kirolearn.privacy.scrub import Scrubber

    return Scrubber()


def outbound_text(text, scrubber=None) -> str:
    """Memory text for a text medium: cleaned, re-scrubbed (`scrubber`, default the built-in rules), then
    each line that could pass for a marker quoted (`guard_lines`)."""
    return guard_lines(_scrubber(scrubber).scrub_text(clean_text(str(text))))


def outbound_value(value, scrubber=None):
    """A JSON-like value for a structured medium (JSON, HTML): cleaned, defused and re-scrubbed."""
    return _scrubber(scrubber).scrub_value(clean_value(value))


_VISIBLE: list = []


def visible(text) -> str:
    """Text for a terminal: control, bidi and invisible characters shown as \\xNN / \\uNNNN (not removed:
    a person sees that something was there), "\\n" kept, and marker-like lines quoted."""
    text = str(text)
    if not is_plain(text):
        if not _VISIBLE:
            import re

            _VISIBLE.append(
                re.compile("[\ud800-\udfff\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029" + INVISIBLE_RANGES + "]")
            )
        text = _VISIBLE[0].sub(
            lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}", text
        )
    return guard_lines(text) if "\n" in text or markerish(text) or "context" in text.lower() else text
