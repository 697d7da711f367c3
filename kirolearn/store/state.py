"""Small facts kept outside the database, in $KIROLEARN_HOME/state/ (standard library only).

A damaged or vanished database cannot vouch for itself, so three facts live
beside it, one small JSON file each (0600, replaced atomically):
- `store.json`: the database was created here and how much it held at the
  last drain, so a missing or 0-byte kirolearn.db reads as "lost", not "new";
- `drain.json`: when the last drain started and finished, and its error;
- `model.json`: the model's consecutive failures across drains (the breaker).
An unreadable file counts as absent: these files inform, they never block.
"""

import json
import os

from kirolearn import config, isotime

STORE = "store"
DRAIN = "drain"
MODEL = "model"


def state_dir() -> str:
    """$KIROLEARN_HOME/state."""
    return os.path.join(config.home(), "state")


def _path(name: str) -> str:
    return os.path.join(state_dir(), name + ".json")


utc_now = isotime.now_iso  # UTC time as the store writes it (ISO 8601, milliseconds, Z)


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

    directory = config.ensure_private_dir(state_dir())
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
