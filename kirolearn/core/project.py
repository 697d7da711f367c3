"""Which project a hook call, an MCP call or a CLI command belongs to.

One function, used by every component (architecture.md rule 4), so that hooks, MCP
and CLI agree. Standard library only. Walks up from the working directory to
the nearest directory holding a project marker; the user's home directory is
never inspected itself (~/.kiro is Kiro's global config, not a project).

A project's id is the same on every machine when it has a git remote (kirolearn.core.gitremote:
`git:<normalised remote>[//<subpath>]`), else it is derived from its path as before.
"""

import os
import time

# not hashlib: it loads OpenSSL on every hook call (~3 ms)
from kirolearn.core.ids import sha256_hex

# order is only for the reader: any marker makes a directory a project root
MARKERS = (
    ".kiro",
    ".git",
    "package.json",
    "Cargo.toml",
    "pyproject.toml",
    "setup.py",
    "go.mod",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "Gemfile",
    "composer.json",
    "mix.exs",
    "deno.json",
    "deno.jsonc",
)


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def _has_marker(directory: str) -> bool:
    for marker in MARKERS:
        try:
            if os.path.lexists(os.path.join(directory, marker)):
                return True
        except (OSError, ValueError):
            continue
    return False


def find_project_root(cwd: str, home: "str | None" = None) -> "tuple[str, bool]":
    """Return (project_root, is_global) for a working directory.

    The nearest ancestor of `cwd` (itself included) holding one of MARKERS is
    the root. The walk stops below `home` (default: the user's home) and never
    checks home itself. When no marker is found, or cwd *is* home, the result
    is the global sentinel: (home, True).

    Unlike the reference system, directories outside home (devcontainer
    `/workspaces/x`, `/srv/code/y`) are walked too, up to but excluding the
    filesystem root, instead of all collapsing into the global project.
    """
    if home is None:
        home = os.path.expanduser("~")
    home_real = _real(home) if home and home != "~" else ""
    current = _real(cwd)
    global_root = home_real or current
    if current == home_real:
        return global_root, True
    while True:
        parent = os.path.dirname(current)
        if current == home_real or parent == current:
            # Reached home (not inspected) or the root (not a project).
            return global_root, True
        if _has_marker(current):
            return current, False
        current = parent


# the drain asks once per event (50,000 a drain); a new remote shows within this
_ID_TTL_SECONDS = 30.0
_ID_CACHE_MAX = 4096
_key_cache: "dict[tuple[str, str | None], tuple[float, str]]" = {}


def project_key(project_root: str, home: "str | None" = None) -> str:
    """What identifies a project: `git:<normalised remote>[//<subpath>]` when its repository has a
    remote (so clones on other machines and paths agree), else its root path as given."""
    now = time.monotonic()
    cache_key = (project_root, home)
    hit = _key_cache.get(cache_key)
    if hit is not None and hit[0] > now:
        return hit[1]
    # only when an id is needed: it compiles a few patterns
    from . import gitremote

    try:
        key = gitremote.identity(project_root, home) or project_root
    except (OSError, ValueError):
        # identity must never break the caller: fall back to the path
        key = project_root
    if len(_key_cache) >= _ID_CACHE_MAX:
        _key_cache.clear()
    _key_cache[cache_key] = (now + _ID_TTL_SECONDS, key)
    return key


def path_id(project_root: str) -> str:
    """The path-derived id every project had before git remotes named them (first 16 hex digits of the root's sha256)."""
    return sha256_hex(project_root.encode("utf-8", "surrogatepass"))[:16]


def describe_where(project: "str | os.PathLike[str] | None" = None) -> str:
    """The project `project` (or the current directory) resolves to, and why, for messages.

    Outside any project the answer is the global project, named as such: never as $HOME.
    """
    start = os.path.abspath(project or os.getcwd())
    root, is_global = find_project_root(start)
    if is_global:
        return (
            f"the global project ({start} is in no project: no marker such as .git, pyproject.toml or "
            ".kiro in it or above it)"
        )
    return f"project {root}" + (f" (found from {start})" if root != start else "")


def project_id(project_root: str, home: "str | None" = None) -> str:
    """Stable short id of a project: of its git remote when it has one, else of its path."""
    return path_id(project_key(project_root, home))


def forget_cached_ids() -> None:
    """Drop the resolved ids (a test, or a command that just changed a remote)."""
    _key_cache.clear()
