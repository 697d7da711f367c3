"""JSON for the hook path through CPython's C accelerator (`_json`) alone.

The `json` package imports `re` (and `re` imports `enum`): about 30 million
instructions, three quarters of a bare `python -c pass`, on every hook call.
`_json` holds the same scanner and encoder that `json` uses on CPython, so the
results are the same; anything out of the ordinary (bytes, a BOM, invalid or
trailing text) goes to the `json` package itself, which raises its usual
errors. Where `_json` is missing (another Python), this is `json`.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:  # types only: `typing` would cost the hook its import
    from typing import Any, NoReturn

    from _typeshed import SupportsRead

try:
    import _json
except ImportError:  # not CPython
    _json = None  # type: ignore[assignment]

__all__ = ["loads", "load", "dumps", "int_or_text"]

_WHITESPACE = " \t\n\r"  # what json.JSONDecoder skips around a document


def int_or_text(digits: str) -> "int | str":
    """An integer, or its digits as text past Python's int-string conversion limit (4,300 digits):
    one huge number must not cost the event that holds it."""
    try:
        return int(digits)
    except ValueError:
        return digits


class _Context:
    """What `_json.make_scanner` reads off a JSONDecoder: the defaults of json.loads."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = staticmethod(int_or_text)

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]


def _default(o: object) -> "NoReturn":
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


try:
    _scan = _json.make_scanner(_Context())  # type: ignore[arg-type]
    _json.make_encoder({}, _default, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True)
except Exception:  # noqa: BLE001
    # no _json, or one whose signatures differ: use the json package
    _scan = None  # type: ignore[assignment]


def loads(s: "str | bytes | bytearray") -> "Any":
    """json.loads(s) for a str document (anything else goes to json.loads)."""
    if _scan is None or not isinstance(s, str) or s.startswith("\ufeff"):
        import json  # here, not at the top: it imports `re`; only the unusual documents pay for it

        return json.loads(s, parse_int=int_or_text)
    start = len(s) - len(s.lstrip(_WHITESPACE))
    try:
        value, end = _scan(s, start)
    except Exception:  # noqa: BLE001
        # _json may raise SystemError: json raises the right one
        import json

        return json.loads(s, parse_int=int_or_text)
    if end != len(s) and s[end:].strip(_WHITESPACE):
        # raises json's "Extra data" error
        import json

        return json.loads(s, parse_int=int_or_text)
    return value


def load(fh: "SupportsRead[str | bytes]") -> "Any":
    """json.load(fh)."""
    return loads(fh.read())


def dumps(obj: object, *, ensure_ascii: bool = True, separators: "tuple[str, str] | None" = None) -> str:
    """json.dumps(obj, ensure_ascii=..., separators=...) with json's other defaults."""
    if _scan is None:
        import json

        return json.dumps(obj, ensure_ascii=ensure_ascii, separators=separators)
    item_separator, key_separator = separators or (", ", ": ")
    encoder = _json.make_encoder(
        {},
        _default,
        _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring,
        None,
        key_separator,
        item_separator,
        False,
        False,
        True,
    )
    return "".join(encoder(obj, 0))


def _finite(value: object) -> object:
    # inf - inf and nan - nan are nan
    if isinstance(value, float) and value - value != 0.0:
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def strict_dumps(obj: object, **options: "Any") -> str:
    """json.dumps(obj, **options) as strict JSON: NaN and the infinities, which json.dumps writes
    bare (not JSON; other readers refuse the line), become the strings "NaN", "Infinity", "-Infinity"."""
    import json

    try:
        return json.dumps(obj, allow_nan=False, **options)
    except ValueError:
        # a non-finite float somewhere: the rare case pays for the walk
        return json.dumps(_finite(obj), allow_nan=False, **options)
