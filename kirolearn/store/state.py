"""Small facts kept outside the database, in $KIROLEARN_HOME/state/ (standard library only).

A damaged or vanished database cannot vouch for itself, so three facts live
beside it, one small JSON file each (0600, replaced atomically):
- `store.json`: the database was created here and how much it held at the
  last drain, so a missing or 0-byte kirolearn.db reads as "lost", not "new";
- `drain.json`: when the last drain started and finished, and its error;
- `schedule.json`: when the job `kirolearn schedule` installed last started a drain, and its interval;
- `model.json`: the model's consecutive failures across drains (the breaker);
- `check.json`: when the drain last ran the store's integrity check, how many passes took
  events in since, and whether a pass that takes events in is under way (one that never
  finished is an unclean stop: the next pass checks first).
An unreadable file counts as absent: these files inform, they never block.

`store.json` names its database by the home's id (`home_id`, a random id written
once into this folder, so it moves with the home) and the file's path inside the
home, not only by its absolute path: a home moved or restored elsewhere keeps its
guard. Markers written before home ids (no `home_id` field) are still read.
"""

import json
import os

from kirolearn.core import isotime, paths

STORE = "store"
DRAIN = "drain"
MODEL = "model"
# the last drain the scheduled job started: its kind, interval and time
SCHEDULE = "schedule"
CHECK = "check"  # the drain's integrity-check schedule (Drainer.check_due)
# tombstones whose retention is due, and on how many drain passes
PURGE = "purge"


def state_dir() -> str:
    """$KIROLEARN_HOME/state."""
    return os.path.join(paths.home(), "state")


def _path(name: str) -> str:
    return os.path.join(state_dir(), name + ".json")


# UTC time as the store writes it (ISO 8601, milliseconds, Z)
utc_now = isotime.now_iso


HOME_ID = "home_id"  # the file in state/ that names this home


def _home_id_path() -> str:
    return os.path.join(state_dir(), HOME_ID)


def home_id(create: bool = False) -> "str | None":
    """This home's id (32 hex digits), written once into state/home_id; None when there is none yet
    and `create` is False."""
    path = _home_id_path()
    for _ in range(2):
        try:
            with open(path, encoding="ascii") as fh:
                found = fh.read(64).strip()
            if len(found) == 32 and all(c in "0123456789abcdef" for c in found):
                return found
            if not create:
                return None
            # damaged: a new id (markers naming the old one are read by path)
            os.remove(path)
        except FileNotFoundError:
            if not create:
                return None
        except (OSError, UnicodeDecodeError):
            if not create:
                return None
        directory = paths.ensure_private_dir(state_dir())
        new = os.urandom(16).hex()
        try:
            fd = os.open(os.path.join(directory, HOME_ID), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue  # another process wrote it first: read theirs
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(new + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return new
    return home_id()


def _inside_home(path: str) -> "str | None":
    """`path` relative to the home ('/'-separated), or None when it is not inside it."""
    home = os.path.abspath(paths.home())
    absolute = os.path.abspath(path)
    try:
        if os.path.commonpath([home, absolute]) != home or absolute == home:
            return None
    except ValueError:  # another drive (Windows)
        return None
    return os.path.relpath(absolute, home).replace(os.sep, "/")


def store_identity(path: str) -> dict:
    """The fields by which store.json names the database at `path` (home id, path in the home, absolute path)."""
    identity: dict[str, str | None] = {"path": os.path.abspath(path)}
    relative = _inside_home(path)
    if relative is not None:
        identity.update(home_id=home_id(create=True), db=relative)
    return identity


def store_marker_matches(marker: dict, path: str) -> bool:
    """Whether store.json's `marker` is about the database at `path`.

    Yes when it names this absolute path; else when `path` is inside the home and the marker names
    the same file of this home: by home id and path in the home, or (a marker from before home ids)
    by the tail of its old absolute path. So a moved home keeps its guard.
    """
    if not marker:
        return False
    absolute = os.path.abspath(path)
    if marker.get("path", absolute) == absolute:
        return True
    relative = _inside_home(path)
    if relative is None:
        return False
    if marker.get("home_id"):
        mine = home_id()
        return marker.get("db") == relative and (mine is None or mine == marker["home_id"])
    old = str(marker.get("path") or "").replace("\\", "/")
    return old.endswith("/" + relative)


def read(name: str) -> dict:
    """The state file `name` as a dict ({} when missing or unreadable)."""
    try:
        with open(_path(name), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write(name: str, data: dict) -> None:
    """Replace the state file `name` atomically (0600 in a 0700 folder)."""
    from kirolearn.capture.spool import write_atomic

    directory = paths.ensure_private_dir(state_dir())
    write_atomic(directory, name + ".json", json.dumps(data, sort_keys=True).encode("utf-8"), directory)


def update(name: str, **values) -> dict:
    """Merge `values` into the state file `name`; returns the new content."""
    data = read(name)
    data.update(values)
    write(name, data)
    return data


def try_update(name: str, **values) -> None:
    """`update`, but a full disk or a read-only home must not hide the error being recorded."""
    try:
        update(name, **values)
    except OSError:
        pass


# the file in state/ holding this home's key for hashes of raw text
DEDUP_KEY = "dedup.key"


def dedup_key() -> bytes:
    """This home's secret key (32 random bytes, 0600 in state/, created on first use): the drain
    keys a hash of raw text with it, so a hash tells two texts apart without revealing either."""
    path = os.path.join(state_dir(), DEDUP_KEY)
    for _ in range(2):
        try:
            with open(path, "rb") as fh:
                key = fh.read(64)
            if len(key) == 32:
                return key
            # damaged: a new key only makes this window's twins miss
            os.remove(path)
        except FileNotFoundError:
            pass
        directory = paths.ensure_private_dir(state_dir())
        try:
            fd = os.open(os.path.join(directory, DEDUP_KEY), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue  # another drainer wrote it first: read theirs
        key = os.urandom(32)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
            fh.flush()
            os.fsync(fh.fileno())
        return key
    raise OSError(f"{path}: cannot read or create the dedup key")
