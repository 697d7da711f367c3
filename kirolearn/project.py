"""Which project a hook call, an MCP call or a CLI command belongs to.

One function, used by every component (design.md rule 4), so that hooks, MCP
and CLI agree. Standard library only. Walks up from the working directory to
the nearest directory holding a project marker; the user's home directory is
never inspected itself (~/.kiro is Kiro's global config, not a project).
"""

import os

# Order matters only for documentation: any marker makes a directory a project root.
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
            # Reached home (not inspected) or the filesystem root (not a project).
            return global_root, True
        if _has_marker(current):
            return current, False
        current = parent
