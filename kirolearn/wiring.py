"""Adapters' install targets, on the installer's engine: add our entries to an agent's JSON or TOML file.

An agent adapter says what it adds (`Addition`s to a JSON file, or a block of
TOML appended to a file) and how to take its entries out of a parsed file
(`unwired`). This module turns that into one `install.Change` per file: our
entries go in as text, in the file's own style, and the exact insertions plus
a hash of the written text are recorded, so uninstall gives back the user's
bytes while the file is as install left it, and takes out only our entries
when the user edited it since. Off the hook path (the CLI loads it).
"""

import hashlib
import json
from dataclasses import dataclass

from kirolearn import install, jsontext


@dataclass
class Addition:
    """`value` appended to the container at `path` (object keys from the root): a member `key` of an
    object, or (key None) an item of an array. Missing containers on the way are created."""

    path: tuple
    value: object
    key: "str | None" = None


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _copy(data):
    return json.loads(json.dumps(data))


def _apply_structurally(data: dict, additions) -> dict:
    data = _copy(data)
    for add in additions:
        node = data
        for i, key in enumerate(add.path):
            last = i == len(add.path) - 1
            if key not in node or not isinstance(node[key], (dict, list)):
                node[key] = [] if (last and add.key is None) else {}
            node = node[key]
        if add.key is None:
            node.append(_copy(add.value))
        else:
            node[add.key] = _copy(add.value)
    return data


def _insert_as_text(text: str, additions) -> "tuple[str, list] | None":
    insertions = []
    try:
        for add in additions:
            root = jsontext.parse(text)
            depth = 0
            while depth < len(add.path) and jsontext.find(root, *add.path[:depth + 1]) is not None:
                depth += 1
            node = jsontext.find(root, *add.path[:depth]) if depth else root
            if depth == len(add.path):
                text, ins = jsontext.append(text, node, add.value, key=add.key)
            else:  # wrap the value in the containers that are missing, innermost first
                value = [add.value] if add.key is None else {add.key: add.value}
                for key in reversed(add.path[depth + 1:]):
                    value = {key: value}
                text, ins = jsontext.append(text, node, value, key=add.path[depth])
            insertions.append(list(ins))
    except jsontext.JSONTextError:
        return None
    return text, insertions


def plan_json(path: str, kind: str, additions, unwired, *, owned_problem=None) -> "install.Change":
    """The change that adds `additions` to the JSON file at `path` (created if missing).

    `unwired(data) -> data` takes every entry of ours out of a parsed file; an
    older install's entries are replaced. `owned_problem(data)` may name a
    reason to leave the file alone (a shape we cannot edit).
    """
    before = install._read(path)
    try:
        data = install._load(path, before)
    except install.InstallError as exc:
        return install.Change(path, before, before, problem=str(exc))
    problem = owned_problem(data) if owned_problem else None
    if problem:
        return install.Change(path, before, before, problem=f"{path}: {problem}; left untouched")
    base = unwired(_copy(data))
    wanted = _apply_structurally(base, additions)
    if before is not None and wanted == data:
        return install.Change(path, before, before, record={"kind": kind})
    record = {"kind": kind, "insertions": None}
    as_text = _insert_as_text(before, additions) if before is not None and base == data and before.strip() else None
    if as_text and json.loads(install._strip_bom(as_text[0])) == wanted:
        after, record["insertions"] = as_text
    else:
        after = install._dump(wanted, before)
    record["written_sha256"] = sha(after)
    return install.Change(path, before, after, record=record)


def undo_json(entry: dict, unwired) -> "install.Change | None":
    """The change that undoes one recorded `plan_json` install (None when the file is gone)."""
    path = entry["path"]
    try:
        before = install._read(path)
    except install.InstallError as exc:
        return install.Change(path, None, None, problem=str(exc))
    if before is None:
        return None
    record = {"kind": entry["kind"]}
    untouched = entry.get("written_sha256") == sha(before)
    if untouched and entry.get("created"):
        return install.Change(path, before, None, record=record)
    restored = jsontext.remove(before, [tuple(i) for i in entry["insertions"]]) \
        if untouched and entry.get("insertions") else None
    if restored is None:
        try:
            data = install._load(path, before)
        except install.InstallError as exc:
            return install.Change(path, before, before, problem=str(exc))
        rest = unwired(_copy(data))
        if rest == data:
            restored = before
        else:
            restored = None if (not rest and entry.get("created")) else install._dump(rest, before)
    return install.Change(path, before, restored, record=record)


# --- TOML: whole tables of ours appended at the end of the file ---------------------------------------


def _toml_problem(path: str, text: str) -> "str | None":
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # 3.10
        try:
            import tomli as tomllib
        except ImportError:
            return None
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return f"{path} would not be valid TOML with kirolearn's tables added ({exc}); left untouched"
    return None


def plan_toml(path: str, kind: str, block: str, headers, recorded: "dict | None" = None) -> "install.Change":
    """The change that appends `block` (whole TOML tables) to the file at `path`.

    `headers` are the table headers the block defines: a file that already has
    one of them (not from our recorded insertion) is left untouched, since
    TOML forbids defining a table twice.
    """
    before = install._read(path)
    text = before or ""
    previous = (recorded or {}).get("insertions") or []
    if previous and (recorded or {}).get("written_sha256") == sha(text):
        if len(previous) == 1 and previous[0][1].strip() == block.strip():
            return install.Change(path, before, before, record={"kind": kind})
        text = jsontext.remove(text, [tuple(i) for i in previous]) or text
    elif previous and sum(text.count(i[1]) for i in previous) == len(previous) \
            and all(text.count(i[1]) == 1 for i in previous):
        if len(previous) == 1 and previous[0][1].strip() == block.strip():
            return install.Change(path, before, before, record={"kind": kind})
        for _, inserted in previous:
            text = text.replace(inserted, "", 1)
    lines = [line.strip() for line in text.splitlines()]
    clash = [h for h in headers if h in lines]
    if clash:
        return install.Change(path, before, before,
                              problem=f"{path} already defines {clash[0]}; left untouched (remove that table "
                                      "and re-run, or keep your own)")
    nl = "\r\n" if "\r\n" in text else "\n"
    lead = ""
    if text and not text.endswith("\n"):
        lead = nl + nl
    elif text.strip():
        lead = nl
    inserted = lead + block.replace("\n", nl)
    after = text + inserted
    problem = _toml_problem(path, after)
    if problem:
        return install.Change(path, before, before, problem=problem)
    return install.Change(path, before, after, record={"kind": kind, "insertions": [[len(text), inserted]],
                                                       "written_sha256": sha(after)})


def undo_toml(entry: dict) -> "install.Change | None":
    """The change that undoes one recorded `plan_toml` install (None when the file is gone)."""
    path = entry["path"]
    try:
        before = install._read(path)
    except install.InstallError as exc:
        return install.Change(path, None, None, problem=str(exc))
    if before is None:
        return None
    record = {"kind": entry["kind"]}
    insertions = [tuple(i) for i in entry.get("insertions") or []]
    restored = jsontext.remove(before, insertions) if insertions else before
    if restored is None and all(before.count(text) == 1 for _, text in insertions):
        restored = before
        for _, text in insertions:
            restored = restored.replace(text, "", 1)
    if restored is None:
        return install.Change(path, before, before,
                              problem=f"{path} was edited where kirolearn's tables were; remove them yourself")
    if entry.get("created") and not restored.strip():
        return install.Change(path, before, None, record=record)
    return install.Change(path, before, restored, record=record)
