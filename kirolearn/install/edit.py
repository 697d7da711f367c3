"""The installer engine's edits of a user's files: our entries added to JSON as text, TOML tables appended.

Every agent adapter describes what its config files need (`Member`: an object
member at a key path; `Item`: a value in a list at a key path); this module
plans the edit as an `install.Change` that inserts exactly those bytes, in the
file's own style, and records the insertions and a hash of what it wrote. So
`undo` gives back the user's exact bytes while the file is as install left
it, and otherwise takes out only our entries, structurally: the members and
items themselves, or, for an adapter that passes `unwired(data) -> data`,
everything of ours that function finds (older installs' hooks too). Also here:
whole files of ours (`owned`), and whole TOML tables appended to a file
(`plan_toml`, Codex's config.toml).

Used by the CLI only (never on the hook path).
"""

import hashlib
import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a type only: engine imports this module
    from kirolearn.install import engine as install


@dataclass(frozen=True)
class Member:
    """`keys` + [name] holds `value` (an object member)."""

    keys: tuple
    name: str
    value: object


@dataclass(frozen=True)
class Item:
    """The list at `keys` holds `value`."""

    keys: tuple
    value: object


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _current(path: str):
    """The file's text, None if it does not exist, or a Change with the problem when it cannot be read.

    Callers return a non-str result as it is: gone (None), or the Change naming why."""
    from kirolearn.install import engine as install

    try:
        return install.read_text(path)
    except install.InstallError as exc:
        return install.Change(path, None, None, problem=str(exc))


def _get(data, keys):
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _nest(keys, value):
    for key in reversed(keys):
        value = {key: value}
    return value


def apply_structurally(data: dict, edits) -> dict:
    """`data` (a copy) with every edit in it."""
    data = json.loads(json.dumps(data))
    for edit in edits:
        keys = (*edit.keys, edit.name) if isinstance(edit, Member) else edit.keys
        node = data
        for key in keys[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        if isinstance(edit, Member):
            node[keys[-1]] = json.loads(json.dumps(edit.value))
        else:
            if not isinstance(node.get(keys[-1]), list):
                node[keys[-1]] = []
            if edit.value not in node[keys[-1]]:
                node[keys[-1]].append(json.loads(json.dumps(edit.value)))
    return data


def _conflict(data: dict, edit, ours) -> "str | None":
    keys = (*edit.keys, edit.name) if isinstance(edit, Member) else edit.keys
    node = data
    for depth, key in enumerate(keys):
        if not isinstance(node, dict):
            return f"'{'.'.join(keys[:depth])}' is not an object"
        if key not in node:
            return None
        node = node[key]
    if isinstance(edit, Item) and not isinstance(node, list):
        return f"'{'.'.join(keys)}' is not a list"
    if isinstance(edit, Member) and node != edit.value and not ours(node):
        return f"'{'.'.join(keys)}' already exists and is not kirolearn's"
    return None


def plan(
    path: str,
    edits,
    kind: str,
    *,
    ours=lambda value: False,
    previous: "dict | None" = None,
    unwired=None,
    problem=None,
):
    """The Change that puts `edits` into the JSON file at `path` (nothing is written).

    `ours(value)` says whether an existing member of the same name is an older
    kirolearn entry (it is then replaced) rather than the user's (a problem:
    nothing is written). An adapter that passes `unwired(data) -> data` (every
    entry of ours taken out) has older entries replaced by that instead, and
    `problem(data)` may then name a shape it cannot edit (nothing is written).
    """
    from kirolearn.core import jsontext
    from kirolearn.install import engine as install

    before = _current(path)
    if isinstance(before, install.Change):
        return before
    try:
        data = install.load_json(path, before)
    except install.InstallError as exc:
        return install.Change(path, before, before, problem=str(exc))
    if unwired is None:
        problems = [_conflict(data, edit, ours) for edit in edits]
    else:
        problems = [problem(data) if problem else None]
    for found in problems:
        if found:
            return install.Change(path, before, before, problem=f"{path}: {found}; left untouched")
    base = data if unwired is None else unwired(json.loads(json.dumps(data)))
    wanted = apply_structurally(base, edits)
    record = {"kind": kind}
    if wanted == data and before is not None:
        return install.Change(path, before, before, record={**(previous or {}), **record})
    if unwired is None:
        replaced = any(
            isinstance(e, Member) and _get(data, (*e.keys, e.name)) not in (None, e.value) for e in edits
        )
    else:
        # an older install's entries: the file is written whole
        replaced = base != data
    after, insertions = None, []
    if before is not None and install.strip_bom(before).strip() and not replaced:
        text = before
        try:
            for edit in edits:
                current = install.load_json(path, text)
                if apply_structurally(current, [edit]) == current:
                    continue
                keys = (*edit.keys, edit.name) if isinstance(edit, Member) else edit.keys
                root = jsontext.parse(text)
                depth = 0
                while depth < len(keys) and jsontext.find(root, *keys[: depth + 1]) is not None:
                    depth += 1
                parent = jsontext.find(root, *keys[:depth])
                if depth == len(keys):  # Item: the list exists
                    text, ins = jsontext.append(text, parent, edit.value)
                else:
                    rest = keys[depth + 1 :]
                    value = edit.value if isinstance(edit, Member) else [edit.value]
                    text, ins = jsontext.append(text, parent, _nest(rest, value), key=keys[depth])
                insertions.append(list(ins))
            if install.load_json(path, text) == wanted:
                after = text
        except (jsontext.JSONTextError, install.InstallError):
            after = None
    if after is None:
        after, insertions = install.dump_json(wanted, before), None
    record.update(insertions=insertions, written_sha256=sha(after))
    return install.Change(path, before, after, record=record)


def undo(entry: dict, edits=(), *, ours=lambda value: False, unwired=None):
    """The Change that takes `edits` out of the file an install `entry` recorded (None: nothing to do).

    With `unwired(data) -> data`, what it takes out is what comes out after a user's edit.
    """
    from kirolearn.core import jsontext
    from kirolearn.install import engine as install

    path = entry["path"]
    before = _current(path)
    if not isinstance(before, str):
        return before
    untouched = entry.get("written_sha256") == sha(before)
    if untouched and entry.get("created"):
        return install.Change(path, before, None, record=entry)
    if untouched and entry.get("insertions"):
        restored = jsontext.remove(before, [tuple(i) for i in entry["insertions"]])
        if restored is not None:
            return install.Change(path, before, restored, record=entry)
    try:
        data = install.load_json(path, before)
    except install.InstallError as exc:
        return install.Change(path, before, before, problem=str(exc))
    rest = json.loads(json.dumps(data))
    if unwired is not None:
        rest, edits = unwired(rest), ()
    for edit in edits:
        keys = (*edit.keys, edit.name) if isinstance(edit, Member) else edit.keys
        parent = _get(rest, keys[:-1])
        if not isinstance(parent, dict) or keys[-1] not in parent:
            continue
        if isinstance(edit, Member):
            if parent[keys[-1]] == edit.value or ours(parent[keys[-1]]):
                del parent[keys[-1]]
        elif isinstance(parent[keys[-1]], list):
            parent[keys[-1]] = [v for v in parent[keys[-1]] if v != edit.value]
        _prune(rest, keys[:-1] if isinstance(edit, Member) else keys)
    if rest == data:
        return install.Change(path, before, before, record=entry)
    if not rest and entry.get("created"):
        return install.Change(path, before, None, record=entry)
    restored = without_insertions(path, before, entry.get("insertions"), lambda left: left == rest)
    return install.Change(
        path, before, restored if restored is not None else install.dump_json(rest, before), record=entry
    )


def without_insertions(path: str, text: str, insertions, accept) -> "str | None":
    """The user's edited `text` with only install's recorded insertions taken out, every other byte kept,
    when `accept(data)` says what is left is the file without kirolearn's entries; else None."""
    from kirolearn.core import jsontext
    from kirolearn.install import engine as install

    if not insertions:
        return None
    restored = jsontext.remove_moved(text, [tuple(i) for i in insertions])
    if restored is None:
        return None
    try:
        return restored if accept(install.load_json(path, install.strip_bom(restored))) else None
    except install.InstallError:
        return None


def _prune(data: dict, keys) -> None:
    """Drop empty containers along `keys`, deepest first."""
    for depth in range(len(keys), 0, -1):
        parent = _get(data, keys[: depth - 1])
        value = parent.get(keys[depth - 1]) if isinstance(parent, dict) else None
        if value in ({}, []):
            del parent[keys[depth - 1]]
        else:
            return


def under(path: str, project: "str | None") -> bool:
    """Is `path` inside `project` (always true when no project is given)?"""
    return not project or path.startswith(os.path.abspath(project) + os.sep)


def owned(path: str, text: str, kind: str, mark: str = "kirolearn"):
    """The Change that writes a whole file of ours (a file there that is not ours is a problem)."""
    from kirolearn.install import engine as install

    before = _current(path)
    if isinstance(before, install.Change):
        return before
    if before is not None and before != text and mark not in before:
        return install.Change(
            path, before, before, problem=f"{path} exists and is not kirolearn's; left untouched"
        )
    return install.Change(path, before, text, record={"kind": kind, "written_sha256": sha(text)})


def undo_owned(entry: dict, mark: str = "kirolearn"):
    """The Change that deletes a file of ours (left alone, as a problem, if it no longer looks like ours)."""
    from kirolearn.install import engine as install

    path = entry["path"]
    text = _current(path)
    if not isinstance(text, str):
        return text
    if mark in text:
        return install.Change(path, text, None, record=entry)
    return install.Change(path, text, text, problem=f"{path} no longer looks like kirolearn's; left alone")


# TOML: whole tables of ours appended at the end of the file


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
    from kirolearn.core import jsontext
    from kirolearn.install import engine as install

    before = install.read_text(path)
    text = before or ""
    previous = (recorded or {}).get("insertions") or []
    if previous and (recorded or {}).get("written_sha256") == sha(text):
        if len(previous) == 1 and previous[0][1].strip() == block.strip():
            return install.Change(path, before, before, record={"kind": kind})
        text = jsontext.remove(text, [tuple(i) for i in previous]) or text
    elif (
        previous
        and sum(text.count(i[1]) for i in previous) == len(previous)
        and all(text.count(i[1]) == 1 for i in previous)
    ):
        if len(previous) == 1 and previous[0][1].strip() == block.strip():
            return install.Change(path, before, before, record={"kind": kind})
        for _, inserted in previous:
            text = text.replace(inserted, "", 1)
    lines = [line.strip() for line in text.splitlines()]
    clash = [h for h in headers if h in lines]
    if clash:
        return install.Change(
            path,
            before,
            before,
            problem=f"{path} already defines {clash[0]}; left untouched (remove that table "
            "and re-run, or keep your own)",
        )
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
    return install.Change(
        path,
        before,
        after,
        record={"kind": kind, "insertions": [[len(text), inserted]], "written_sha256": sha(after)},
    )


def undo_toml(entry: dict) -> "install.Change | None":
    """The change that undoes one recorded `plan_toml` install (None when the file is gone)."""
    from kirolearn.core import jsontext
    from kirolearn.install import engine as install

    path = entry["path"]
    before = _current(path)
    if not isinstance(before, str):
        return before
    record = {"kind": entry["kind"]}
    insertions = [tuple(i) for i in entry.get("insertions") or []]
    restored = jsontext.remove(before, insertions) if insertions else before
    if restored is None and all(before.count(text) == 1 for _, text in insertions):
        restored = before
        for _, text in insertions:
            restored = restored.replace(text, "", 1)
    if restored is None:
        return install.Change(
            path,
            before,
            before,
            problem=f"{path} was edited where kirolearn's tables were; remove them yourself",
        )
    if entry.get("created") and not restored.strip():
        return install.Change(path, before, None, record=record)
    return install.Change(path, before, restored, record=record)
