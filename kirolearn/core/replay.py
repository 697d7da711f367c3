"""Replay a recorded agent session through the real `kirolearn-hook` command.

A recording (queue/sessions/*.jsonl) holds one hook call per line:
    {"argv": [...], "env": {...}, "stdin": {...} | "text" | null, "files": {...}}
`${PROJECT}` anywhere in a line stands for the project directory the replay
runs in. The optional "files" maps paths under the project to the text the
agent had written there before that call (Claude Code's transcript, say). Used by `make demo`
and by the tests, so both exercise the same processes an agent would start.
"""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import overload


@dataclass(frozen=True)
class Call:
    """One recorded hook call."""

    argv: list[str]
    env: dict[str, str]
    stdin: object
    files: dict[str, str]


def load(path: str) -> "list[Call]":
    """Read a recording; raises ValueError naming the file and line on bad input."""
    calls = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                calls.append(
                    Call(
                        list(item.get("argv", [])),
                        dict(item.get("env", {})),
                        item.get("stdin"),
                        dict(item.get("files", {})),
                    )
                )
            except (ValueError, AttributeError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a recorded hook call ({exc})") from None
    return calls


if TYPE_CHECKING:  # a value keeps its type

    @overload
    def _substitute(value: str, project: str) -> str: ...
    @overload
    def _substitute(value: dict[str, str], project: str) -> dict[str, str]: ...
    @overload
    def _substitute(value: object, project: str) -> object: ...


def _substitute(value: object, project: str) -> object:
    if isinstance(value, str):
        return value.replace("${PROJECT}", project)
    if isinstance(value, list):
        return [_substitute(v, project) for v in value]
    if isinstance(value, dict):
        return {_substitute(k, project): _substitute(v, project) for k, v in value.items()}
    return value


def hook_command() -> str:
    """Absolute path of the installed `kirolearn-hook` (next to this Python first)."""
    beside = os.path.join(os.path.dirname(sys.executable), "kirolearn-hook")
    if os.path.exists(beside):
        return beside
    found = shutil.which("kirolearn-hook")
    if not found:
        raise FileNotFoundError("kirolearn-hook is not installed: run `pip install -e .` (or `make demo`)")
    return found


def make_project(directory: str) -> str:
    """Create a small demo project (a git-marked folder with app/ and tests/)."""
    for sub in (".git", "app", "tests", "scripts"):
        os.makedirs(os.path.join(directory, sub), exist_ok=True)
    return directory


def replay(
    calls: "list[Call]", project: str, env: "dict[str, str] | None" = None
) -> "list[subprocess.CompletedProcess[bytes]]":
    """Run every call through the real hook, in order, from inside `project`."""
    command = hook_command()
    results = []
    for call in calls:
        for relative, text in call.files.items():
            path = os.path.join(project, _substitute(relative, project))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(_substitute(text, project))
        stdin = _substitute(call.stdin, project)
        if stdin is None:
            data = b""
        elif isinstance(stdin, str):
            data = stdin.encode("utf-8")
        else:
            data = json.dumps(stdin).encode("utf-8")
        call_env = dict(os.environ if env is None else env)
        call_env.update(_substitute(call.env, project))
        results.append(
            subprocess.run(
                [command, *call.argv], input=data, env=call_env, cwd=project, capture_output=True, timeout=30
            )
        )
    return results
