"""A file's text read into facts a claim can cite: settings, dependencies and symbols, with lines.

One reader per file type, each with the real parser where the standard library has one (Python's
`ast`, `tomllib`, `json`, `configparser`) and a careful line reader where it has none (YAML's
block mappings, `.env`, Go, TypeScript and JavaScript). Every value is compared in a canonical
form, so whitespace, quotes, import order and line endings never change a fact.

`read(path, text)` gives {key: Fact}, or None when the text does not parse (a file half-way
through an edit): a caller then judges nothing rather than something false.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:  # types only: the hook re-checks claims, and `typing` would cost it the import
    from typing import Any  # a parsed file's values (TOML, JSON, YAML): any JSON-like shape

SETTING, DEPENDENCY, SYMBOL, LINES = "setting", "dependency", "symbol", "lines"
DISPLAY_MAX = 120  # characters of a value shown ("now 7")
FACTS_MAX = 2000  # facts read from one file, at most


@dataclass(frozen=True)
class Fact:
    """One citable thing in a file: `value` is canonical (what is compared), `shown` is for people."""

    kind: str
    key: str
    value: str
    shown: str
    start: int  # first line, 1-based
    end: int  # last line, inclusive

    @property
    def scope(self) -> str:
        """The section a setting sits in ('production' of 'production.LOG_LEVEL'), '' at the top."""
        if self.kind == SYMBOL:
            return ""
        return self.key.rpartition(".")[0]


def file_type(path: str) -> str:
    """The reader for a path: python, toml, json, yaml, env, ini, gomod, go, ts, or '' (lines only)."""
    name = os.path.basename(path).lower()
    ext = os.path.splitext(name)[1]
    if name == "go.mod":
        return "gomod"
    if name == ".env" or name.startswith(".env.") or ext == ".env":
        return "env"
    return {
        ".py": "python",
        ".pyi": "python",
        ".toml": "toml",
        ".json": "json",
        ".yaml": "yaml",
        ".yml": "yaml",
        ".ini": "ini",
        ".cfg": "ini",
        ".go": "go",
        ".ts": "ts",
        ".tsx": "ts",
        ".mts": "ts",
        ".cts": "ts",
        ".js": "ts",
        ".jsx": "ts",
        ".mjs": "ts",
        ".cjs": "ts",
    }.get(ext, "")


def read(path: str, text: str) -> dict[str, Fact] | None:
    """The facts of a file (see the module docstring); {} for a type no reader knows."""
    kind = file_type(path)
    reader = _READERS.get(kind)
    if reader is None:
        return {}
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    try:
        found = reader(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if kind in ("toml", "json") and os.path.basename(path).lower() in ("pyproject.toml", "package.json"):
        found = _dependencies(found)
    return dict(list(found.items())[:FACTS_MAX])


def canonical(value: object) -> str:
    """A parsed value as canonical text: JSON with sorted keys."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def shown(value: object) -> str:
    """A value as a person reads it: a string as itself, anything else as JSON, clipped."""
    text = value if isinstance(value, str) else canonical(value)
    text = " ".join(text.split())
    return text if len(text) <= DISPLAY_MAX else text[: DISPLAY_MAX - 1] + "…"


# --- Python: ast ---


def _python(text: str) -> dict[str, Fact]:
    tree = ast.parse(text)
    out: dict[str, Fact] = {}
    for node in tree.body:
        _python_node(node, "", out)
        if isinstance(node, ast.ClassDef):
            for inner in node.body:
                _python_node(inner, node.name + ".", out)
    return out


def _python_node(node: ast.stmt, prefix: str, out: dict[str, Fact]) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        word = "class" if isinstance(node, ast.ClassDef) else "def"
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        digest = hashlib.sha256(ast.dump(node, include_attributes=False).encode()).hexdigest()[:16]
        key = f"{word} {prefix}{node.name}"
        out[key] = Fact(
            SYMBOL,
            key,
            digest,
            f"{word} {prefix}{node.name} (body {digest[:8]})",
            start,
            node.end_lineno or start,
        )
        return
    targets, value = [], None
    if isinstance(node, ast.Assign) and node.value is not None:
        targets, value = node.targets, node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        targets, value = [node.target], node.value
    if value is None:
        return
    for target in targets:
        if not isinstance(target, ast.Name):
            continue
        try:
            literal = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            code = ast.unparse(value)  # normalises quotes and spacing
            fact_value, fact_shown = canonical({"expr": code}), shown(code)
        else:
            fact_value, fact_shown = canonical(_jsonable(literal)), shown(_jsonable(literal))
        key = prefix + target.id
        out[key] = Fact(SETTING, key, fact_value, fact_shown, node.lineno, node.end_lineno or node.lineno)


def _jsonable(value: object) -> object:
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in value]
        return sorted(items, key=canonical) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, (complex, type(Ellipsis))):
        return repr(value)
    return value


# --- nested data (TOML, JSON, YAML, INI): flattened to dotted keys ---


def _flatten(
    data: object, spans: dict[str, tuple[int, int]], prefix: str = "", out: dict[str, Fact] | None = None
) -> dict[str, Fact]:
    out = {} if out is None else out
    for key, value in data.items() if isinstance(data, dict) else ():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            _flatten(value, spans, path + ".", out)
            continue
        start, end = spans.get(path) or _nearest_span(path, spans)
        out[path] = Fact(SETTING, path, canonical(value), shown(value), start, end)
    return out


def _nearest_span(path: str, spans: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """The span of the closest ancestor whose line the scanner saw (an inline table's leaf)."""
    while "." in path:
        path = path.rpartition(".")[0]
        if path in spans:
            return spans[path]
    return (0, 0)


def _close_spans(keys: list[tuple[str, int]], lines: list[str]) -> dict[str, tuple[int, int]]:
    """Spans from (key, line) in file order: each runs to the line before the next key, blank and
    comment lines at its end left out."""
    spans: dict[str, tuple[int, int]] = {}
    for i, (key, line) in enumerate(keys):
        end = keys[i + 1][1] - 1 if i + 1 < len(keys) else len(lines)
        while end > line and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith(("#", "//"))):
            end -= 1
        spans[key] = (line, max(line, end))
    return spans


_TOML_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(
    r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+))*)\s*="""
)


def _toml_key(raw: str) -> str:
    parts = re.findall(r""""([^"]*)"|'([^']*)'|([A-Za-z0-9_\-]+)""", raw)
    return ".".join(a or b or c for a, b, c in parts)


def _toml(text: str) -> dict[str, Fact]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: tomli, the same parser
        import tomli as tomllib
    data = tomllib.loads(text)
    keys, table, lines = [], "", text.split("\n")
    for number, line in enumerate(lines, 1):
        header = _TOML_HEADER.match(line)
        if header:
            table = _toml_key(header.group(1))
            keys.append((table, number))
            continue
        found = _TOML_KEY.match(line)
        if found:
            keys.append(((table + "." if table else "") + _toml_key(found.group(1)), number))
    return _flatten(data, _close_spans(keys, lines))


def _json(text: str) -> dict[str, Fact]:
    return _flatten(json.loads(text), _json_spans(text))


def _json_spans(text: str) -> dict[str, tuple[int, int]]:
    """Each object key's line, by path, from a scan of the text (json.loads keeps no positions).
    Keys inside arrays are not named: a list is one value."""
    keys: list[tuple[str, int]] = []
    # per open container: its key prefix, None inside an array
    frames: list[str | None] = []
    pending: str | None = None  # the key whose value comes next
    line, i, n = 1, 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == '"':
            j, start = i + 1, line
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            word, i = text[i + 1 : j], j
            k = j + 1
            while k < n and text[k] in " \t\r\n":
                k += 1
            if k < n and text[k] == ":" and frames and frames[-1] is not None:
                pending = frames[-1] + word
                keys.append((pending, start))
        elif c == "{":
            if not frames:
                frames.append("")  # the root object
            elif frames[-1] is None:
                frames.append(None)  # an object inside an array
            else:
                frames.append(pending + "." if pending else None)
            pending = None
        elif c == "[":
            frames.append(None)
            pending = None
        elif c in "}]":
            if frames:
                frames.pop()
            pending = None
        elif c == ",":
            pending = None
        i += 1
    return _close_spans(keys, text.split("\n"))


_YAML_KEY = re.compile(
    r"""^(\s*)(?:-\s+)?("(?:[^"\\]|\\.)*"|'[^']*'|[^\s#'"{\[\]}&*!|>%@`][^:#]*?)\s*:(?:\s+(.*?))?\s*$"""
)


def _yaml_scalar(raw: str) -> str:
    raw = raw.strip()
    if raw[:1] in ('"', "'"):
        quote = raw[0]
        end = raw.find(quote, 1)
        return raw[1:end] if end > 0 else raw[1:]
    raw = re.split(r"\s+#", raw, maxsplit=1)[0].strip()
    return " ".join(raw.split())


def _yaml(text: str) -> dict[str, Fact]:
    """Block mappings of scalars and lists of scalars (what configuration files hold); anything else
    (flow collections, anchors, block scalars) is kept as its normalised text."""
    data: dict[str, Any] = {}
    keys: list[tuple[str, int]] = []
    stack: list[tuple[int, str]] = []  # (indent, path) of open mappings
    lines = text.split("\n")
    last_key: tuple[int, str] | None = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped == "---":
            if keys:
                break  # the first document only
            continue
        indent = len(line) - len(line.lstrip(" "))
        if stripped.startswith("- ") or stripped == "-":
            item = _yaml_scalar(stripped[1:])
            if last_key is not None and indent >= last_key[0] and not _YAML_KEY.match(line):
                holder = _yaml_get(data, last_key[1])
                value = holder if isinstance(holder, list) else []
                value.append(item)
                _yaml_set(data, last_key[1], value)
            continue
        found = _YAML_KEY.match(line)
        if not found:
            # a continued or block scalar
            if last_key is not None and indent > last_key[0]:
                held = _yaml_get(data, last_key[1])
                text_now = " ".join([held if isinstance(held, str) else "", stripped]).strip()
                _yaml_set(data, last_key[1], text_now)
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        name = _yaml_scalar(found.group(2)) if found.group(2)[:1] in "\"'" else found.group(2).strip()
        path = (stack[-1][1] + "." if stack else "") + name
        rest = found.group(3)
        keys.append((path, number))
        if rest is None or rest == "" or rest.startswith("#"):
            _yaml_set(data, path, {})
            stack.append((indent, path))
            last_key = (indent, path)
        else:
            scalar = _yaml_scalar(rest) if rest[:1] not in "|>" else ""
            _yaml_set(data, path, scalar)
            last_key = (indent, path)
    return _flatten(data, _close_spans(keys, lines))


def _yaml_get(data: dict[str, Any], path: str) -> object:
    node = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _yaml_set(data: dict[str, Any], path: str, value: object) -> None:
    node = data
    parts = path.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value


def _ini(text: str) -> dict[str, Fact]:
    import configparser

    parser = configparser.ConfigParser(interpolation=None, strict=False, delimiters=("=", ":"))
    # keys keep their case
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    data = {section: dict(parser.items(section, raw=True)) for section in parser.sections()}
    keys, section, lines = [], "", text.split("\n")
    for number, line in enumerate(lines, 1):
        header = re.match(r"^\s*\[([^\]]+)\]", line)
        if header:
            section = header.group(1).strip()
            keys.append((section, number))
            continue
        found = re.match(r"^([^\s#;=:][^=:]*?)\s*[=:]", line)
        if found and section:
            keys.append((f"{section}.{found.group(1).strip()}", number))
    facts = _flatten(data, _close_spans(keys, lines))
    return {
        k: Fact(f.kind, f.key, canonical(" ".join(json.loads(f.value).split())), f.shown, f.start, f.end)
        for k, f in facts.items()
    }


_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.\-]*)\s*=\s*(.*?)\s*$")


def _env(text: str) -> dict[str, Fact]:
    out = {}
    for number, line in enumerate(text.split("\n"), 1):
        found = _ENV_LINE.match(line)
        if not found or line.lstrip().startswith("#"):
            continue
        raw = found.group(2)
        if raw[:1] in ('"', "'") and raw.rfind(raw[0]) > 0:
            value = raw[1 : raw.rfind(raw[0])]
        else:
            value = re.split(r"\s+#", raw, maxsplit=1)[0].strip()
        out[found.group(1)] = Fact(SETTING, found.group(1), canonical(value), shown(value), number, number)
    return out


# --- code without a standard-library parser: Go, TypeScript, JavaScript ---

_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|`[^`]*`')


def normalised_code(text: str) -> str:
    """Code with comments and whitespace gone, quotes made one kind and optional punctuation dropped,
    so a formatter's pass leaves it as it was."""
    parts, last = [], 0
    for m in _STRING.finditer(text):
        parts.append(_strip_code(text[last : m.start()]))
        body = m.group(0)[1:-1].replace('\\"', '"').replace("\\'", "'")
        parts.append('"' + body + '"')
        last = m.end()
    parts.append(_strip_code(text[last:]))
    out = "".join(parts)
    return re.sub(r",(?=[}\])])", "", out)


def _strip_code(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"[\s;]+", "", text)


def _block_end(lines: list[str], start: int) -> int:
    """The last line (0-based) of the braced block that opens at or after lines[start]."""
    depth, opened = 0, False
    for i in range(start, len(lines)):
        code = _STRING.sub('""', re.sub(r"//[^\n]*", "", lines[i]))
        depth += code.count("{") - code.count("}")
        opened = opened or "{" in code
        if opened and depth <= 0:
            return i
        if not opened and i > start and not lines[i].strip().endswith((",", "(", "=>", "=")):
            return i - 1 if not lines[i].strip() else i
    return len(lines) - 1


def _code_fact(
    kind: str, key: str, lines: list[str], start: int, end: int, shown_as: str | None = None
) -> Fact:
    body = normalised_code("\n".join(lines[start : end + 1]))
    if kind == SYMBOL:
        digest = hashlib.sha256(body.encode()).hexdigest()[:16]
        return Fact(SYMBOL, key, digest, f"{key} (body {digest[:8]})", start + 1, end + 1)
    return Fact(
        SETTING, key, canonical(body), shown(shown_as if shown_as is not None else body), start + 1, end + 1
    )


_GO_FUNC = re.compile(r"^func\s+(?:\(\s*\w*\s*\*?\s*([A-Za-z_]\w*)[^)]*\)\s*)?([A-Za-z_]\w*)\s*[\[(]")
_GO_TYPE = re.compile(r"^type\s+([A-Za-z_]\w*)\b")
_GO_ONE = re.compile(r"^(?:const|var)\s+([A-Za-z_]\w*)\b[^=]*=\s*(.+)$")
_GO_ITEM = re.compile(r"^\s+([A-Za-z_]\w*)\b[^=]*=\s*(.+)$")


def _go(text: str) -> dict[str, Fact]:
    lines, out, i = text.split("\n"), {}, 0
    while i < len(lines):
        line = lines[i]
        func, kind_of = _GO_FUNC.match(line), _GO_TYPE.match(line)
        if func or kind_of:
            if func:
                key = f"func {func.group(1) + '.' if func.group(1) else ''}{func.group(2)}"
            else:
                key = f"type {kind_of.group(1)}"  # type: ignore[union-attr]
            end = _block_end(lines, i)
            out[key] = _code_fact(SYMBOL, key, lines, i, end)
            i = end + 1
            continue
        one = _GO_ONE.match(line)
        if one:
            value = re.sub(r"\s//.*$", "", one.group(2)).strip()
            fact = _code_fact(SETTING, one.group(1), [value], 0, 0)
            out[one.group(1)] = Fact(SETTING, one.group(1), fact.value, shown(_ts_shown(value)), i + 1, i + 1)
        elif re.match(r"^(?:const|var)\s*\($", line.strip()):
            j = i + 1
            while j < len(lines) and lines[j].strip() != ")":
                item = _GO_ITEM.match(lines[j])
                if item:
                    value = re.sub(r"\s//.*$", "", item.group(2)).strip()
                    fact = _code_fact(SETTING, item.group(1), [value], 0, 0)
                    shown_as = shown(_ts_shown(value))
                    out[item.group(1)] = Fact(SETTING, item.group(1), fact.value, shown_as, j + 1, j + 1)
                j += 1
            i = j
        i += 1
    return out


def _gomod(text: str) -> dict[str, Fact]:
    out, block = {}, False
    for number, line in enumerate(text.split("\n"), 1):
        code = line.split("//", 1)[0].strip()
        if code.startswith("require ("):
            block = True
            continue
        if block and code == ")":
            block = False
            continue
        found = (
            re.match(r"^(?:require\s+)?(\S+)\s+(v\S+)$", code)
            if (block or code.startswith("require "))
            else None
        )
        if found:
            key = f"require {found.group(1)}"
            out[key] = Fact(DEPENDENCY, key, canonical(found.group(2)), found.group(2), number, number)
        elif re.match(r"^(go|toolchain|module)\s+\S+$", code):
            word, value = code.split(None, 1)
            out[word] = Fact(SETTING, word, canonical(value), value, number, number)
    return out


_TS_SYMBOL = re.compile(
    r"^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?"
    r"(function\*?|class|interface|enum|type)\s+([A-Za-z_$][\w$]*)"
)
_TS_CONST = re.compile(r"^(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*(?::[^=]+)?=\s*(.*)$")


def _ts(text: str) -> dict[str, Fact]:
    lines, out, i = text.split("\n"), {}, 0
    while i < len(lines):
        line = lines[i]
        symbol, const = _TS_SYMBOL.match(line), _TS_CONST.match(line)
        if symbol:
            word = "function" if symbol.group(1).startswith("function") else symbol.group(1)
            key = f"{word} {symbol.group(2)}"
            end = _block_end(lines, i) if word != "type" else _statement_end(lines, i)
            out[key] = _code_fact(SYMBOL, key, lines, i, end)
            i = end + 1
            continue
        if const:
            rest = const.group(2).strip()
            if rest.startswith(("(", "async")) and "=>" in "".join(lines[i : i + 3]):
                key = f"function {const.group(1)}"
                end = _block_end(lines, i)
                out[key] = _code_fact(SYMBOL, key, lines, i, end)
                i = end + 1
                continue
            end = _block_end(lines, i) if rest.endswith(("{", "[", "(")) else _statement_end(lines, i)
            body = "\n".join(lines[i : end + 1]).split("=", 1)[1]
            fact = _code_fact(SETTING, const.group(1), [body], 0, 0, _ts_shown(body))
            out[const.group(1)] = Fact(SETTING, const.group(1), fact.value, fact.shown, i + 1, end + 1)
            i = end + 1
            continue
        i += 1
    return out


def _ts_shown(body: str) -> str:
    text = " ".join(body.split()).rstrip(";").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"`":
        return text[1:-1]
    return text


def _statement_end(lines: list[str], start: int) -> int:
    i = start
    while i < len(lines) - 1:
        code = lines[i].rstrip()
        if code.endswith(";") or not code.endswith((",", "=", "|", "&", "(", "{", "[", "+", "-", "?", ":")):
            return i
        i += 1
    return i


# --- dependency lists: one fact per package ---

_DEPENDENCY_KEYS = re.compile(
    r"^(?:dependencies|devDependencies|peerDependencies|optionalDependencies|project\.dependencies|"
    r"project\.optional-dependencies\.[^.]+|dependency-groups\.[^.]+|tool\.poetry\.(?:dev-)?dependencies|"
    r"tool\.poetry\.group\.[^.]+\.dependencies)(?:\.|$)"
)
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)$")


def _dependencies(facts: dict[str, Fact]) -> dict[str, Fact]:
    """Dependencies as one fact each: a package.json map's entries, a PEP 621 list's requirements."""
    out = {}
    for key, fact in facts.items():
        if not _DEPENDENCY_KEYS.match(key):
            out[key] = fact
            continue
        value = json.loads(fact.value)
        if isinstance(value, list):
            for item in value:
                found = _REQUIREMENT.match(str(item))
                if found:
                    name = found.group(1).lower().replace("_", "-")
                    spec = " ".join(found.group(3).split())
                    sub = f"{key}.{name}"
                    out[sub] = Fact(DEPENDENCY, sub, canonical(spec), spec or "(any)", fact.start, fact.end)
        else:
            out[key] = Fact(DEPENDENCY, key, fact.value, fact.shown, fact.start, fact.end)
    return out


_READERS = {
    "python": _python,
    "toml": _toml,
    "json": _json,
    "yaml": _yaml,
    "env": _env,
    "ini": _ini,
    "go": _go,
    "gomod": _gomod,
    "ts": _ts,
}


# --- lines: what a claim cites when no reader knows the file ---


def line_key(line: str) -> str:
    """One line in a form no formatter changes: trimmed, spaces collapsed, one kind of quote, no
    trailing comma or semicolon; '' for a line too short to cite."""
    text = " ".join(line.split()).replace("'", '"').rstrip(",;").strip()
    return text if len(text) >= 4 and re.search(r"[A-Za-z0-9]", text) else ""


def line_digests(text: str) -> set[str]:
    """The digests of a text's citable lines (line_key), for an anchor's check."""
    out = set()
    for line in text.replace("\r\n", "\n").split("\n"):
        key = line_key(line)
        if key:
            out.add(hashlib.sha1(key.encode()).hexdigest()[:12])
    return out
