"""One error family for every failure a user can meet.

Standard library only: the hook path may import it.

Each `KirolearnError` says what went wrong (`message`) and what to do about it
(`fix`), and carries the exit status the CLI should end with. The CLI turns them
into one `Error: …` line in one place (`cli.KirolearnGroup`), the MCP server
into one error result; nothing else catches them to reword them. Subclasses keep
a stdlib base (ValueError, RuntimeError, OSError) where callers relied on it.
"""


class KirolearnError(Exception):
    """An expected failure: one line for the user, a fix-it hint, an exit status."""

    exit_code = 1
    default_fix: "str | None" = None

    def __init__(self, message: str, fix: "str | None" = None, *, exit_code: "int | None" = None):
        super().__init__(message)
        self.message = message
        self.fix = fix if fix is not None else self.default_fix
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return one_line(self.message if not self.fix else f"{self.message}; {self.fix}")


class ConfigError(KirolearnError, ValueError):
    """config.toml or a KIROLEARN_* variable holds something invalid."""


class HomeError(KirolearnError, RuntimeError):
    """kirolearn's home directory cannot be found or used."""


class ProjectError(KirolearnError, ValueError):
    """A project directory given by the caller does not exist or is not a directory (a usage error)."""

    exit_code = 2


class StoreError(KirolearnError, RuntimeError):
    """The database cannot be opened, read or written."""


class NoStore(StoreError):
    """A command that reads the store ran before any store exists."""

    default_fix = "run `kirolearn drain` first (it creates the database from the spool)"


class SchemaTooNew(StoreError):
    """The database was migrated by a newer kirolearn than this one."""


class StoreCorrupt(StoreError):
    """SQLite reports the database file as damaged."""

    default_fix = (
        "run `kirolearn repair` (it backs the file up, recovers what it can and re-ingests the spool); "
        "the spool keeps every event not yet drained and, in spool/done/, every one drained since the "
        "last check that found the database sound"
    )


class StoreLost(StoreError):
    """The database is missing or empty although events were stored in it before."""

    default_fix = (
        "run `kirolearn repair` to start a new database from what can be recovered and "
        "re-ingest the spool; new events wait in the spool until then"
    )


class SpoolError(KirolearnError, OSError):
    """A spool folder cannot be read or written."""


class DiskError(KirolearnError, OSError):
    """The disk refused a write: full, over a size limit, read-only or not permitted."""


class DrainLocked(KirolearnError, RuntimeError):
    """Another drainer holds the spool lock."""

    exit_code = 0  # not a failure: the other drain does the work


class ExtractionError(KirolearnError, RuntimeError):
    """A model call failed or returned something unusable."""


class SummaryError(KirolearnError, ValueError):
    """A turn or session summary was rejected (bad input, unknown project label, …)."""


class ScheduleError(KirolearnError, RuntimeError):
    """A drain schedule cannot be installed or removed."""


class InstallError(KirolearnError, RuntimeError):
    """A Kiro config file cannot be read or written safely."""


def one_line(text: str) -> str:
    """Collapse whitespace so a message is exactly one line."""
    return " ".join(str(text).split())


def from_sqlite(exc: BaseException, path: str) -> StoreError:
    """The user-facing error for a sqlite3 failure on the store at `path`."""
    text = one_line(str(exc)) or type(exc).__name__
    lowered = text.lower()
    if "malformed" in lowered or "not a database" in lowered or "corrupt" in lowered:
        return StoreCorrupt(f"the database {path} is damaged ({text})")
    if "disk is full" in lowered or "disk i/o error" in lowered:
        return StoreError(
            f"cannot write the database {path} ({text})",
            "free some disk space (or raise the file-size limit, `ulimit -f`) and run the command again; "
            "the spool keeps every event until then",
        )
    if "locked" in lowered or "busy" in lowered:
        return StoreError(
            f"the database {path} is busy ({text})",
            "another kirolearn process holds a long write: try again in a minute",
        )
    if "readonly" in lowered or "read-only" in lowered or "unable to open" in lowered:
        return StoreError(
            f"cannot write or open the database {path} ({text})",
            "check that the file and its folder are yours and writable",
        )
    return StoreError(f"the database {path} failed: {text}", "run `kirolearn doctor` to check the store")


def from_oserror(exc: OSError) -> KirolearnError:
    """The user-facing error for an OSError that reached the CLI (full disk, read-only folder, …)."""
    import errno

    where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
    reason = exc.strerror or one_line(str(exc)) or type(exc).__name__
    if exc.errno in (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", -1)):
        return DiskError(
            f"cannot write{where}: {reason}",
            "free some disk space (or raise the file-size limit, `ulimit -f`) and run the command "
            "again; the spool keeps every event until then",
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return DiskError(
            f"cannot write{where}: {reason}",
            "check that kirolearn's home ($KIROLEARN_HOME) and its files are yours and writable",
        )
    return DiskError(f"file system error{where}: {reason}", "check the disk and kirolearn's home folder")
