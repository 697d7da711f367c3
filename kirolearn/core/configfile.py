"""config.toml, read with the standard library: where it is, its tables, and the hook's view of it.

One reader for both sides: `kirolearn.settings` validates the tables with pydantic for everything
that can afford it; the hook path (kirolearn.recall.context) cannot, and takes `hook_view()`, the
few values it needs, each checked by hand and left at its default when it is not valid.
"""

import os

from kirolearn.core import paths
from kirolearn.core.limits import DEFAULTS, MAX_BUDGET_TOKENS

TYPE_CHECKING = False
if TYPE_CHECKING:  # types only: `typing` would cost the hook its import
    from typing import Any


class ConfigFileError(ValueError):
    """config.toml cannot be read as TOML; the message names the file and what is wrong."""


def config_path() -> str:
    """$KIROLEARN_HOME/config.toml."""
    return os.path.join(paths.home(), "config.toml")


def read_bytes(path: "str | None" = None) -> "bytes | None":
    """The file's bytes, or None when there is none."""
    try:
        with open(path or config_path(), "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def parse(raw: bytes, path: str) -> "dict[str, Any]":
    """The tables of a config file's bytes; ConfigFileError when they are not UTF-8 TOML."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigFileError(f"{path}: saved as UTF-16; save it as UTF-8 (TOML files are UTF-8)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"{path}: not UTF-8 (byte {exc.start}); save it as UTF-8") from None
    try:
        tables: dict[str, Any] = tomllib.loads(text)  # tomllib has no stubs for Python 3.10
        return tables
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"{path}: not valid TOML ({exc})") from None


def load(path: "str | None" = None) -> "dict[str, Any]":
    """The file's tables ({} without a file); ConfigFileError when it cannot be read as TOML."""
    path = path or config_path()
    raw = read_bytes(path)
    return {} if raw is None else parse(raw, path)


def hook_view() -> "dict[str, Any]":
    """The [recall] table over DEFAULTS, the [scrub] extras and the [team] actor, for the hook path.

    tomllib (docs/benchmarks.md, 'What the hot paths avoid loading') loads only when the file
    names one of those tables; a file that does not parse, or a Python without tomllib, leaves
    the defaults (`doctor` reports the file).
    """
    values = dict(DEFAULTS, scrub_extra={}, scrub_allow=[])
    try:
        raw = read_bytes()
    except OSError:
        return values
    if raw is None or (b"recall" not in raw and b"scrub" not in raw and b"team" not in raw):
        return values
    try:
        data = parse(raw, config_path())
    except (ImportError, ConfigFileError):
        return values
    table = data.get("recall", {}) if isinstance(data.get("recall"), dict) else {}
    for key in DEFAULTS:
        if isinstance(table.get(key), int) and not isinstance(table.get(key), bool) and table[key] >= 0:
            values[key] = table[key]
    values["budget_tokens"] = min(int(values["budget_tokens"]), MAX_BUDGET_TOKENS)  # type: ignore[call-overload]
    scrub = data.get("scrub", {}) if isinstance(data.get("scrub"), dict) else {}
    if isinstance(scrub.get("extra_patterns"), dict):
        from kirolearn.core.userpatterns import problem

        # a refused pattern never runs in the hook; settings says why elsewhere
        values["scrub_extra"] = {
            str(k): str(v) for k, v in scrub["extra_patterns"].items() if not problem(str(v))
        }
    if isinstance(scrub.get("allow"), list):
        values["scrub_allow"] = [str(a) for a in scrub["allow"]]
    team = data.get("team", {}) if isinstance(data.get("team"), dict) else {}
    if isinstance(team.get("actor"), str) and team["actor"].strip():
        values["actor"] = team["actor"].strip()
    return values
