"""A project's git remote, read straight from its git config, as a machine-independent identity.

Standard library only and cheap (the hook resolves the project id on every recall): no `git`
process, no configparser, one small file read. Two clones of one repository, wherever they
live and whichever URL form they were cloned with, map to one normalised remote:
`git@github.com:org/repo.git`, `ssh://git@github.com:22/org/repo`, and
`https://user:token@github.com/org/repo.git` are all `github.com/org/repo`.

What is read: the nearest `.git` (folder, or a `gitdir:` file as worktrees and submodules use)
at or above the project root (below the user's home, like the project marker walk); then the
`config` of its common git folder (`commondir` for linked worktrees); the url of remote
`origin`, else of the first remote in the file. `include` files, `insteadOf` rewrites and
$GIT_DIR are not followed: identity must not depend on a user's global git settings.

Plain string code, no regular expressions: compiling the few patterns this would need costs
more than the parsing itself (docs/benchmarks.md, 'What the hot paths avoid loading').
"""

import os  # no __future__ import on the hook path: annotations are strings

# no regex: compiling them cost ~0.8 ms a hook, more than the parsing
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")
_SCHEME_CHARS = _NAME_CHARS | {"+"}
# bigger git configs are not parsed on the hook path
_MAX_CONFIG_BYTES = 1 << 20


def _read(path: str, limit: int = _MAX_CONFIG_BYTES) -> "str | None":
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except (OSError, ValueError):
        return None
    if len(data) > limit:
        return None
    return data.decode("utf-8", "replace")


def find_git_dir(root: str, home: "str | None" = None) -> "tuple[str, str] | None":
    """(work tree top, git folder) of the repository holding `root`, or None.

    Walks up from `root` (itself included) to the first `.git`; stops below `home`
    (home itself is never inspected, as in project.find_project_root) and at `/`.
    """
    if home is None:
        home = os.path.expanduser("~")
    if home and home != "~":
        try:
            home = os.path.realpath(home)
        except (OSError, ValueError):
            pass
    current = root
    while True:
        if home and current == home:
            return None
        dot_git = os.path.join(current, ".git")
        try:
            if os.path.isdir(dot_git):
                return current, dot_git
            if os.path.isfile(dot_git):
                text = _read(dot_git, 4096) or ""
                if text.startswith("gitdir:"):
                    target = text[len("gitdir:") :].strip()
                    return current, os.path.normpath(os.path.join(current, target))
                # a `.git` file but no gitdir link: unreadable
                return None
        except (OSError, ValueError):
            return None
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def config_path(git_dir: str) -> str:
    """The config file of a git folder: a linked worktree's lives in its common folder."""
    common = _read(os.path.join(git_dir, "commondir"), 4096)
    if common and common.strip():
        return os.path.join(os.path.normpath(os.path.join(git_dir, common.strip())), "config")
    return os.path.join(git_dir, "config")


def _section(line: str) -> "tuple[str, str | None, str] | None":
    """`[name "sub"] rest` -> (name, sub, rest); `[name]` -> (name, None, rest); None if malformed."""
    n = len(line)
    i = 1
    while i < n and line[i] in " \t":
        i += 1
    start = i
    while i < n and line[i] in _NAME_CHARS:
        i += 1
    name = line[start:i]
    while i < n and line[i] in " \t":
        i += 1
    sub = None
    if i < n and line[i] == '"' and i > start:
        i += 1
        chars = []
        while i < n and line[i] != '"':
            if line[i] == "\\" and i + 1 < n:
                i += 1
            chars.append(line[i])
            i += 1
        if i >= n:
            return None
        sub = "".join(chars)
        i += 1
        while i < n and line[i] in " \t":
            i += 1
    if not name or i >= n or line[i] != "]":
        return None
    return name, sub, line[i + 1 :]


def _scheme(url: str) -> "str | None":
    """The scheme of `scheme://...`, lower-cased, or None."""
    head, sep, _ = url.partition("://")
    if sep and head and head[0].isascii() and head[0].isalpha() and all(c in _SCHEME_CHARS for c in head):
        return head.lower()
    return None


def _scp(url: str) -> "tuple[str, str] | None":
    """(host, path) of scp-like syntax `[user@]host:path` (git's rule: no slash before the colon)."""
    at, slash = url.find("@"), url.find("/")
    rest = url[at + 1 :] if at != -1 and (slash == -1 or at < slash) else url
    if rest.startswith("["):  # [ipv6]:path
        end = rest.find("]")
        if end == -1 or rest[end + 1 : end + 2] != ":" or "/" in rest[:end]:
            return None
        return rest[: end + 1], rest[end + 2 :]
    host, colon, path = rest.partition(":")
    if not colon or not host or any(c in host for c in "/[]"):
        return None
    return host, path


def _windows_drive(url: str) -> bool:
    return len(url) >= 3 and url[0].isascii() and url[0].isalpha() and url[1] == ":" and url[2] in "\\/"


def _value(raw: str) -> str:
    """A git config value: quotes removed, escapes resolved, trailing comment dropped."""
    out = []
    quoted = False
    i = 0
    n = len(raw)
    while i < n:
        ch = raw[i]
        if ch == "\\" and i + 1 < n:
            nxt = raw[i + 1]
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(nxt, nxt))
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
        elif ch in "#;" and not quoted:
            break
        else:
            out.append(ch)
        i += 1
    return "".join(out).strip()


def remote_urls(config_text: str) -> "list[tuple[str, str]]":
    """(remote name, first url) for every remote with a url, in file order."""
    found: dict[str, str] = {}
    section = None
    pending = ""
    for line in config_text.splitlines():
        if pending:  # a value continued with a trailing backslash
            line = pending + line
            pending = ""
        if line.rstrip().endswith("\\") and not line.rstrip().endswith("\\\\"):
            pending = line.rstrip()[:-1]
            continue
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("["):
            header = _section(stripped)
            if header is None:
                section = None
                continue
            name, sub, rest = header
            name = name.lower()
            # [remote.origin]: deprecated, subsection lower-cased
            if sub is None and "." in name:
                name, sub = name.split(".", 1)
            section = sub if name == "remote" and sub else None
            stripped = rest.strip()
            if not stripped:
                continue
        if section is None:
            continue
        key, sep, raw = stripped.partition("=")
        if not sep or key.strip().lower() != "url":
            continue
        url = _value(raw)
        if url and section not in found:
            found[section] = url
    return list(found.items())


def pick_remote(remotes: "list[tuple[str, str]]") -> "tuple[str, str] | None":
    """`origin` if it has a url, else the first remote that has one."""
    for name, url in remotes:
        if name == "origin":
            return name, url
    return remotes[0] if remotes else None


def _strip_repo_suffix(path: str) -> str:
    path = path.replace("\\", "/")
    while "//" in path:
        path = path.replace("//", "/")
    path = path.rstrip("/")
    if path.endswith(".git"):
        path = path[:-4].rstrip("/")
    return path


def normalise(url: str, base: "str | None" = None) -> "str | None":
    """The machine-independent form of a remote URL: host/path, no scheme, credentials, port or `.git`.

    Lower-cased: the hosting services treat `Org/Repo` and `org/repo` as one repository, and
    two clones spelt differently must still share memory.
    A local path remote (`/srv/git/x.git`, `file:///srv/git/x`, `../x` relative to `base`)
    becomes its absolute path. Returns None for an empty or unusable url.
    """
    url = (url or "").strip()
    if not url or any(ord(c) < 32 for c in url):
        return None
    kind = _scheme(url)
    if kind:
        rest = url[len(kind) + 3 :]
        for mark in "?#":
            rest = rest.split(mark, 1)[0]
        if kind == "file":
            path = "/" + rest.split("/", 1)[1] if "/" in rest and not rest.startswith("/") else rest
            return _strip_repo_suffix(os.path.normpath(path)) or None
        authority, _, path = rest.partition("/")
        host = authority.rpartition("@")[2]  # credentials go
        if host.startswith("["):  # [ipv6]:port
            host = host[: host.find("]") + 1] if "]" in host else host
        else:
            # the port goes: ssh on :22 and https on :443 are one repository
            host = host.split(":", 1)[0]
        path = _strip_repo_suffix(path).lstrip("/")
        if not host or not path:
            return None
        return f"{host}/{path}".lower()
    if not _windows_drive(url):
        scp = _scp(url)
        if scp and not url.startswith(("/", ".")):
            host = scp[0]
            path = _strip_repo_suffix(scp[1]).lstrip("/")
            return f"{host}/{path}".lower() if host and path else None
    # a local path (kept as it is spelt: file systems may be case-sensitive)
    absolute = os.path.isabs(url) or _windows_drive(url)
    path = url if absolute or base is None else os.path.join(base, url)
    return _strip_repo_suffix(os.path.normpath(path)) or None


def remote_of(root: str, home: "str | None" = None) -> "dict[str, str] | None":
    """The git remote identifying `root`: {"remote", "normalised", "top", "subpath"}, or None.

    `subpath` is `root` relative to the work tree's top ("" at the top, "packages/web" for a
    project inside a monorepo), so sub-projects of one repository keep separate identities.
    The raw url is not returned: it may hold credentials.
    """
    found = find_git_dir(root, home)
    if found is None:
        return None
    top, git_dir = found
    text = _read(config_path(git_dir))
    if not text:
        return None
    picked = pick_remote(remote_urls(text))
    if picked is None:
        return None
    normalised = normalise(picked[1], base=top)
    if not normalised:
        return None
    subpath = "" if root == top else os.path.relpath(root, top).replace(os.sep, "/")
    return {"remote": picked[0], "normalised": normalised, "top": top, "subpath": subpath}


def identity(root: str, home: "str | None" = None) -> "str | None":
    """`git:<normalised remote>[//<subpath>]` for a project root with a git remote, else None."""
    found = remote_of(root, home)
    if found is None:
        return None
    key = "git:" + found["normalised"]
    return key + "//" + found["subpath"] if found["subpath"] else key
