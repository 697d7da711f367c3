"""Where kirolearn keeps its state: one root, every other path derived from it.

Standard library only (the hook imports it). Nothing here creates anything
except `ensure_private_dir`, so read-only commands never litter a fresh machine.
"""

import contextvars
import os

from kirolearn.core.errors import HomeError

HOME_ENV = "KIROLEARN_HOME"

# per thread or task (set by using_home), so two Memory objects never mix homes
_home_override: "contextvars.ContextVar[str | None]" = contextvars.ContextVar("kirolearn_home", default=None)


class HomeNotFound(HomeError):
    """Neither KIROLEARN_HOME nor a user home directory could be determined."""


def home() -> str:
    """Root of all kirolearn state: `using_home`'s, else $KIROLEARN_HOME, else ~/.kirolearn."""
    explicit = _home_override.get() or os.environ.get(HOME_ENV)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    user_home = user_home_dir()
    if user_home is None:
        raise HomeNotFound(
            "cannot find a home directory for kirolearn's data: set KIROLEARN_HOME "
            "(or HOME) to a writable directory"
        )
    return os.path.join(user_home, ".kirolearn")


class using_home:
    """Within the block, `home()` is `path` (None: leave it as the environment says).

    A class, not contextlib.contextmanager: contextlib's imports would cost every hook call.
    """

    def __init__(self, path: "str | None") -> None:
        self.path = path
        self.token: contextvars.Token[str | None] | None = None

    def __enter__(self) -> None:
        if self.path is not None:
            self.token = _home_override.set(os.path.abspath(os.path.expanduser(str(self.path))))

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            _home_override.reset(self.token)
            self.token = None


def check_home() -> str:
    """`home()`, or HomeError when it (or a folder above it) is a file: nothing could be kept there."""
    root = home()
    here = root
    while not os.path.exists(here):
        parent = os.path.dirname(here)
        if parent == here:
            return root
        here = parent
    if not os.path.isdir(here):
        where = "is a file" if here == root else f"is below {here}, which is a file"
        raise HomeError(
            f"kirolearn's home {root} {where}, not a directory",
            "set KIROLEARN_HOME (or Memory(home=...)) to a directory, or move that file away",
        )
    return root


def check_project(path: "str | os.PathLike[str]") -> str:
    """The absolute path of an existing project directory, or ProjectError (as the CLI's --project says)."""
    from kirolearn.core.errors import ProjectError

    text = os.fspath(path)
    if not os.path.exists(text):
        raise ProjectError(
            f"Invalid value for 'project': Directory {text!r} does not exist.",
            "pass an existing project directory",
        )
    if not os.path.isdir(text):
        raise ProjectError(
            f"Invalid value for 'project': Directory {text!r} is a file.",
            "pass the project's directory, not a file in it",
        )
    return os.path.abspath(text)


def user_home_dir() -> "str | None":
    """The user's home directory, or None when it cannot be determined."""
    found = os.path.expanduser("~")
    if found == "~" or not found:
        return None
    return found


def spool_dir() -> str:
    """The durable event spool (see queue/README.md for its layout)."""
    return os.path.join(home(), "spool")


def logs_dir() -> str:
    """Log files; nothing on the hook or MCP path logs anywhere else."""
    return os.path.join(home(), "logs")


def sessions_dir() -> str:
    """Fallback session ids, one file per (surface, project)."""
    return os.path.join(home(), "sessions")


def db_path() -> str:
    """The SQLite database."""
    return os.path.join(home(), "kirolearn.db")


def recall_socket() -> str:
    """$KIROLEARN_HOME/recall.sock: the recall server's socket (kirolearn.recall.client)."""
    return os.path.join(home(), "recall.sock")


def ensure_private_dir(path: str) -> str:
    """Create `path` (and missing parents) as mode 0700 if missing; return it.

    Existing directories are left as they are: tightening a directory the user
    chose (e.g. KIROLEARN_HOME pointing at a shared folder) is not ours to do.
    """
    if os.path.isdir(path):
        return path
    parent = os.path.dirname(os.path.abspath(path))
    if parent != path and not os.path.isdir(parent):
        # makedirs would give parents the umask's mode
        ensure_private_dir(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    return path


def open_log(name: str) -> int:
    """A descriptor appending to logs/`name` (created 0600).

    A name in logs/ that is a symbolic link, or a hard link to a file elsewhere, was planted:
    kirolearn drops its own name for it (the other file is left as it is) and starts a fresh file,
    so no log line is ever written through it.
    """
    import stat

    path = os.path.join(ensure_private_dir(logs_dir()), name)
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    for _ in range(3):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | nofollow, 0o600)
        except OSError:
            if os.path.islink(path):
                os.unlink(path)
                continue
            raise
        found = os.fstat(fd)
        if stat.S_ISREG(found.st_mode) and found.st_nlink <= 1:
            return fd
        os.close(fd)
        os.unlink(path)
    raise OSError(f"{path}: cannot be opened as kirolearn's own log file")
