"""The installer's engine, shared by every agent's adapter: plan, diff, byte-exact apply, the record.

Each agent's installer half under kirolearn/install/agents/ owns its targets (which
files, and what goes in them: kiro.py, claude_code.py, codex.py, ...) and builds
them as `Change`s on this module and kirolearn/install/edit.py. Here:
the Change and its diff; the commands install writes (this Python and our
launcher, or with `--portable` names resolved on PATH) and the MCP server's
entry; JSON text read and written in the file's own look (BOM, CRLF, indent);
`apply`, which checks every change before writing any (one with a problem and
nothing is written) and records in $KIROLEARN_HOME/installs.json what undoing
each write needs, so `uninstall` gives back the user's bytes exactly; and the
wiring report `doctor` and `status` read.
"""

import difflib
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field

from kirolearn.core import paths
from kirolearn.core.errors import InstallError
from kirolearn.core.jsontext import indent_unit, newline

AGENT_NAME = "kirolearn"  # our MCP server in every agent (and Kiro's agent)
KIRO_KINDS = ("owned", "agent", "mcp")  # Kiro's records name no agent
MARK = "kirolearn-hook"
BOM = "\ufeff"


@dataclass
class Change:
    """One file install or uninstall would write (after=None: delete).

    `record` is what installs.json keeps about the file (kind, created, and for
    mcp.json the text inserted and the text it replaced); `undo` marks the
    removal of an older install's entry during an install.
    """

    path: str
    before: "str | None"
    after: "str | None"
    record: dict = field(default_factory=dict)
    problem: str = ""
    undo: bool = False

    @property
    def changed(self) -> bool:
        return not self.problem and self.before != self.after

    def diff(self) -> str:
        """A unified diff of the change."""
        lines = difflib.unified_diff(
            (self.before or "").splitlines(True),
            (self.after or "").splitlines(True),
            fromfile=self.path if self.before is not None else "/dev/null",
            tofile=self.path if self.after is not None else "/dev/null",
        )
        return "".join(lines)


def command_path(name: str, portable: bool = False) -> str:
    """Absolute path of one of our console scripts (next to this Python first); just `name` if portable."""
    if portable:
        return name
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(beside):
        return beside
    found = shutil.which(name)
    if not found:
        raise InstallError(
            f"{name} is not installed next to {sys.executable} or on PATH", "reinstall kirolearn"
        )
    return os.path.abspath(found)


def home_travels(portable: bool) -> bool:
    return bool(os.environ.get(paths.HOME_ENV)) and not portable


def env_prefix(portable: bool = False) -> str:
    """`KIROLEARN_HOME=... ` for a POSIX hook command when it is set (and the command is not portable)."""
    return f"{paths.HOME_ENV}={shlex.quote(paths.home())} " if home_travels(portable) else ""


LAUNCHER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "launcher", MARK)


def hook_argv(portable: bool = False) -> "list[str]":
    """The program and arguments of a hook command, before its event: this Python and our launcher
    file (pip's console script imports `re` first, see kirolearn/launcher), or, portable, the
    `kirolearn-hook` console script on PATH. The benchmarks run exactly this."""
    if portable or not sys.executable or not os.path.exists(LAUNCHER):
        return [command_path(MARK, portable)]
    return [os.path.abspath(sys.executable), LAUNCHER]


# read by the MCP server: records name the agent without clientInfo
AGENT_ENV = "KIROLEARN_AGENT"


def mcp_entry(portable: bool = False, agent: "str | None" = None) -> dict:
    """Our MCP server entry (command, args, env); `agent` goes into its env as KIROLEARN_AGENT."""
    env = {paths.HOME_ENV: paths.home()} if home_travels(portable) else {}
    if agent:
        env[AGENT_ENV] = agent
    return {"command": command_path("kirolearn-mcp", portable), "args": [], "env": env}


# A portable hook command: a missing `kirolearn-hook` is said, never fatal.
PORTABLE_GUARD = f"if command -v {MARK} >/dev/null 2>&1; then "
NOT_ON_PATH = (
    f"kirolearn: {MARK} is not on PATH, so this hook records nothing; install kirolearn where this "
    "agent's PATH finds it (pipx install kirolearn), or run kirolearn install without --portable"
)


def portable_hook_command(args: str) -> str:
    """The portable POSIX hook command running `kirolearn-hook ARGS` (see PORTABLE_GUARD)."""
    log = (
        '{ d="${KIROLEARN_HOME:-$HOME/.kirolearn}"; [ -d "$d" ] && (umask 077; mkdir -p "$d/logs" && '
        'echo "$(date -u +%Y-%m-%dT%H:%M:%S.000Z) $m" >>"$d/logs/hook.log"); } 2>/dev/null'
    )
    return f'{PORTABLE_GUARD}{MARK} {args} || true; else m="{NOT_ON_PATH}"; echo "$m" >&2; {log}; true; fi'


def machine_paths(changes: "list[Change]", project: "str | None") -> "list[str]":
    """Files inside `project` this install would write holding this machine's absolute paths (this Python,
    the launcher, the home): a teammate's clone could not run them, and `--portable` writes none."""
    if not project:
        return []
    root = os.path.abspath(project) + os.sep
    here = [os.path.dirname(os.path.abspath(sys.executable)), os.path.dirname(LAUNCHER), paths.home()]
    return [
        c.path
        for c in changes
        if c.changed
        and c.after
        and not c.undo
        and c.path.startswith(root)
        and any(p and (p in c.after or json.dumps(p)[1:-1] in c.after) for p in here)
    ]


# JSON text that keeps the user's bytes


def read_text(path: str) -> "str | None":
    """The file's text exactly (BOM and CRLF kept), or None if it does not exist."""
    try:
        # keep CRLF: the bytes are the user's
        with open(path, encoding="utf-8", newline="") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise InstallError(
            f"{path} is not UTF-8 text; left untouched", "fix it or move it aside, then re-run"
        ) from exc


def strip_bom(text: str) -> str:
    return text[1:] if text.startswith(BOM) else text


def load_json(path: str, text: "str | None") -> dict:
    if text is None or not strip_bom(text).strip():
        return {}
    try:
        data = json.loads(strip_bom(text))
    except ValueError as exc:
        raise InstallError(
            f"{path} is not valid JSON ({exc}); left untouched", "fix it or move it aside, then re-run"
        ) from exc
    if not isinstance(data, dict):
        raise InstallError(
            f"{path} holds a JSON {type(data).__name__}, not an object; left untouched",
            "fix it or move it aside, then re-run",
        )
    return data


def dump_json(data, like: "str | None") -> str:
    """`data` as JSON text in the look of `like` (indent, line ending, BOM, final newline)."""
    if like is None or not strip_bom(like).strip():
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    text = json.dumps(data, indent=indent_unit(like), ensure_ascii=False).replace("\n", newline(like))
    if like.endswith("\n"):
        text += newline(like)
    return (BOM if like.startswith(BOM) else "") + text


# Applying and recording


def record_path() -> str:
    """Where installs are recorded."""
    return os.path.join(paths.home(), "installs.json")


def load_record() -> "list[dict]":
    """The recorded installs: [{path, kind, created, snippet?, replaced?}]."""
    try:
        with open(record_path(), encoding="utf-8") as fh:
            entries = json.load(fh).get("installs", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [e for e in entries if isinstance(e, dict) and "path" in e and "kind" in e]


def _save_record(entries: "list[dict]") -> None:
    paths.ensure_private_dir(paths.home())
    tmp = record_path() + ".tmp"
    # 0600 whatever the umask
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"installs": entries}, fh, indent=2)
    os.replace(tmp, record_path())


def _prune_empty_dirs(directory: str) -> None:
    """Remove empty folders install created, up to and including the agent's folder (`.kiro`, `.claude`, …)."""
    while os.path.basename(directory) in ("agents", "hooks", "settings", "plugin", "rules", *TOP_DIRS):
        try:
            os.rmdir(directory)  # only succeeds when empty
        except OSError:
            return
        if os.path.basename(directory) in TOP_DIRS:
            return
        directory = os.path.dirname(directory)


# agent folders pruned when install left them empty
TOP_DIRS = (
    ".kiro",
    ".claude",
    ".github",
    ".opencode",
    ".codex",
    ".gemini",
    ".cursor",
    ".kirolearn",
    ".qwen",
    ".augment",
    ".factory",
)


def apply(changes: "list[Change]", *, installing: bool) -> None:
    """Write the changes and update the install record.

    An install is all or nothing: any change with a problem and nothing is
    written. Every new text is written to a temporary file beside its target
    before the first target is replaced.
    """
    problems = [c for c in changes if c.problem]
    if installing and problems:
        raise InstallError(
            f"{len(problems)} file(s) cannot be changed safely, so nothing was written: "
            + "; ".join(c.problem for c in problems)
        )
    todo = [c for c in changes if c.changed]
    targets = {c.path: write_target(c.path) for c in todo}
    refused = [why for why in map(refusal, todo) if why]
    if refused:
        raise InstallError(
            "; ".join(refused) + "; nothing was changed",
            "fix that file (or the link) and run the command again",
        )
    staged = []
    try:
        for change in todo:
            if change.after is None:
                continue
            target = targets[change.path]
            os.makedirs(os.path.dirname(target), exist_ok=True)
            tmp = target + ".kirolearn-tmp"
            staged.append((tmp, target, change))
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                fh.write(change.after)
            if change.before is not None:
                shutil.copymode(target, tmp)
    except OSError as exc:
        _discard(staged)
        raise InstallError(
            f"cannot write {exc.filename}: {exc.strerror}; nothing was changed",
            "check the folder's permissions",
        ) from exc
    done: list = []
    for tmp, target, change in staged:
        try:
            os.replace(tmp, target)
        except OSError as exc:
            _discard([s for s in staged if s[1] != target and s not in done] + [(tmp, target, change)])
            _give_back(done)
            raise InstallError(
                f"cannot replace {target}: {exc.strerror}; nothing was changed",
                "check the file's permissions and attributes (an immutable file cannot be edited)",
            ) from exc
        done.append((tmp, target, change))
    for change in todo:
        if change.after is None:
            os.remove(change.path)
            _prune_empty_dirs(os.path.dirname(change.path))
    recorded = {e["path"]: e for e in load_record()}
    for change in changes:
        if change.problem:
            continue
        if installing and not change.undo:
            previous = recorded.get(change.path, {})
            entry = {
                **previous,
                **change.record,
                "path": change.path,
            }  # record: what undoing this write needs
            entry["created"] = previous.get("created", change.before is None)
            recorded[change.path] = entry
        else:
            recorded.pop(change.path, None)
    _save_record(list(recorded.values()))


def write_target(path: str) -> str:
    """The file a write to `path` lands in: a symbolic link's target (the link itself stays)."""
    return os.path.realpath(path) if os.path.islink(path) else path


def refusal(change: "Change") -> "str | None":
    """Why `change` cannot be written safely before anything is (a dangling link, a read-only file), or None."""
    path = change.path
    if os.path.islink(path):
        target = os.path.realpath(path)
        if not os.path.exists(target):
            return (
                f"{path} is a symbolic link to {target}, which does not exist (create it, or remove the link)"
            )
        if change.after is None:
            return f"{path} is a symbolic link: kirolearn does not remove a link you made"
        path = target
    if change.after is not None and os.path.exists(path):
        try:
            with open(
                path, "a", encoding="utf-8"
            ):  # opens for writing, writes nothing: an immutable file refuses
                pass
        except OSError as exc:
            return f"{path} cannot be written ({exc.strerror})"
    return None


def _discard(staged) -> None:
    """Remove staged temporary files (they hold the whole new config)."""
    for tmp, _, _ in staged:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def _give_back(done) -> None:
    """Put back the bytes of the files already replaced when a later replace failed."""
    for _, target, change in reversed(done):
        if change.before is None:
            os.remove(target)
            continue
        tmp = target + ".kirolearn-tmp"
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(change.before)
        shutil.copymode(target, tmp)
        os.replace(tmp, target)


def commands(value):
    if isinstance(value, dict):
        for key, item in value.items():
            # Copilot's hook files say "bash"
            if key in ("command", "bash") and isinstance(item, str):
                yield item
            elif key == "command" and isinstance(item, list) and item and isinstance(item[0], str):
                yield shlex.join(item)  # opencode: the command as a list
            else:
                yield from commands(item)
    elif isinstance(value, list):
        for item in value:
            yield from commands(item)


def binaries(command: str) -> "list[str]":
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return [w for w in words if os.path.basename(w) in (MARK, "kirolearn-mcp")]


def agent_of(entry: dict) -> str:
    """Which agent a recorded install wires: 'kiro', 'claude-code' (its settings file), else the kind."""
    if entry.get("agent"):
        # adapters record their name beside what they wrote
        return str(entry["agent"])
    if entry.get("kind") in KIRO_KINDS:
        return "kiro"
    # their kinds are "<agent>-<file>"
    for name in ("codex", "gemini", "cursor"):
        if str(entry.get("kind")).startswith(name + "-"):
            return name
    return "claude-code" if entry.get("kind") == "claude-settings" else str(entry.get("kind"))
