"""Team memory, the parts that live on this machine: attribution, opt-in sharing.

- The team store's URL rule (never a password) is kirolearn.store.url's; who and where
  (the OS user, the host) is kirolearn.core.identity's.
- Attribution: who made a record (actor: KIROLEARN_ACTOR > `[team] actor` > the OS user the hook
  saw), on which host, with which agent.
- Sharing is opt-in per project: `kirolearn team join --project DIR` records the project's id in
  $KIROLEARN_HOME/state/sharing.json (0600); `shared_project_ids()` is the only way the uploader learns
  what may leave the machine. A project not in that file never does.

Not on the hook path (filelock).
"""

from __future__ import annotations

import os

from kirolearn.core import paths
from kirolearn.core.errors import KirolearnError
from kirolearn.core.identity import os_user, this_host
from kirolearn.store import state
from kirolearn.store.url import redact_url

# Not team.json: a drain rewriting that must not lose a `team leave`.
STATE_NAME = "sharing"


class TeamError(KirolearnError):
    """A team command cannot do what was asked (the message says why)."""


# Attribution


def attribution(
    settings=None, *, actor: str | None = None, host: str | None = None, agent: str | None = None
) -> dict:
    """{"actor", "host", "agent"} of something written now.

    `actor`/`host`/`agent` are what the event said (the hook saw the OS user and the host); a
    configured actor (KIROLEARN_ACTOR or `[team] actor`) wins over the OS user.
    """
    if settings is None:
        from kirolearn import settings as settings_mod

        settings = settings_mod.load()
    configured = settings.team.actor
    # an event of an older hook that found no USER: this process's user
    if actor == "unknown":
        actor = None
    return {"actor": configured or actor or os_user(), "host": host or this_host(), "agent": agent or "kiro"}


# Opt-in sharing


def _lock():
    from filelock import FileLock

    directory = paths.ensure_private_dir(state.state_dir())
    return FileLock(os.path.join(directory, STATE_NAME + ".lock"), timeout=10)


def _projects() -> dict:
    projects = state.read(STATE_NAME).get("projects")
    return projects if isinstance(projects, dict) else {}


def shared_project_ids() -> frozenset[str]:
    """The project ids whose records and events may be uploaded to the team store.

    The one function the uploader asks. Only `team join` adds to it; an unreadable or missing
    state file means nothing is shared.
    """
    return frozenset(
        pid
        for pid, entry in _projects().items()
        if isinstance(pid, str) and isinstance(entry, dict) and entry.get("shared") is True
    )


def _resolve(project_dir) -> dict:
    """The project that `project_dir` belongs to: root, id, identity key, remote."""
    from kirolearn.core import gitremote, project

    root, is_global = project.find_project_root(paths.check_project(project_dir))
    if is_global:
        raise TeamError(
            f"{project_dir} is not inside a project (no marker such as .git or .kiro up to your home)",
            "pass the project's directory; the global memory is never shared",
            exit_code=2,
        )
    remote = gitremote.remote_of(root)
    return {
        "root": root,
        "project_id": project.project_id(root),
        "identity": project.project_key(root),
        "remote": remote["normalised"] if remote else None,
    }


def join(project_dir) -> dict:
    """Share a project's memory with the team from now on; returns the project's entry."""
    found = _resolve(project_dir)
    if found["remote"] is None:
        raise TeamError(
            f"project {found['root']} has no git remote, so teammates' clones cannot be matched to it",
            "add one (git remote add origin URL) and run `kirolearn team join` again",
            exit_code=2,
        )
    with _lock():
        data = state.read(STATE_NAME)
        projects: dict = data["projects"] if isinstance(data.get("projects"), dict) else {}
        entry = {
            "shared": True,
            "identity": found["identity"],
            "root": found["root"],
            "joined_at": state.utc_now(),
        }
        previous = projects.get(found["project_id"])
        if isinstance(previous, dict) and previous.get("shared") is True:
            entry["joined_at"] = previous.get("joined_at", entry["joined_at"])
        projects[found["project_id"]] = entry
        data["projects"] = projects
        state.write(STATE_NAME, data)
    moved = rekey_local_store()
    return {
        "project_id": found["project_id"],
        **entry,
        "already": bool(previous and previous.get("shared")),
        "rekeyed": moved,
    }


def rekey_local_store() -> dict[str, str]:
    """Move local rows of projects whose id changed (a remote added since the store was migrated).

    Returns {old id: new id}; {} when there is no local store yet.
    """
    from kirolearn.core import project
    from kirolearn.store.backends import open_existing

    store = open_existing()
    if store is None:
        return {}
    project.forget_cached_ids()
    with store:
        return store.rekey_projects(project.project_id)


def leave(project_dir) -> dict:
    """Stop sharing a project: nothing more of it is uploaded (what was uploaded stays until forgotten)."""
    found = _resolve(project_dir)
    with _lock():
        data = state.read(STATE_NAME)
        projects: dict = data["projects"] if isinstance(data.get("projects"), dict) else {}
        was = projects.pop(found["project_id"], None)
        data["projects"] = projects
        state.write(STATE_NAME, data)
    return {
        "project_id": found["project_id"],
        "identity": found["identity"],
        "root": found["root"],
        "was_shared": bool(isinstance(was, dict) and was.get("shared")),
    }


def status() -> dict:
    """What `kirolearn team status` shows: the store (URL without secrets), actor, host, shared projects."""
    from kirolearn import settings as settings_mod

    settings = settings_mod.load()
    url = settings.store.url
    shared = shared_project_ids()
    from kirolearn.core import project

    projects = []
    for pid, entry in sorted(_projects().items(), key=lambda kv: str(kv[1].get("identity"))):
        if pid not in shared:
            continue
        root = entry.get("root")
        # its remote changed since it joined: a new id, which is not shared
        stale = bool(isinstance(root, str) and os.path.isdir(root) and project.project_id(root) != pid)
        projects.append(
            {
                "project_id": pid,
                "identity": entry.get("identity"),
                "root": root,
                "joined_at": entry.get("joined_at"),
                "stale": stale,
            }
        )
    return {
        "store_url": redact_url(url) or None,
        "configured": bool(url),
        "actor": settings.team.actor or os_user(),
        "host": this_host(),
        "state_file": os.path.join(state.state_dir(), STATE_NAME + ".json"),
        "projects": projects,
    }


# Doctor


def doctor_checks(settings):
    """Yield (level, message) about sharing for `kirolearn doctor`; nothing without a team store.

    Only what sharing adds: the connection, schema and permissions of the server are the team
    store's own checks (kirolearn.store.postgres.store).
    """
    if not settings.store.url:
        return
    current = status()
    if not current["projects"]:
        yield "WARN", "a team store is configured but no project is shared: kirolearn team join --project DIR"
    for entry in current["projects"]:
        if entry["stale"]:
            yield (
                "WARN",
                (
                    f"{entry['root']} was shared as {entry['identity']}, but its git remote changed since: "
                    f"its new memory is not shared; run `kirolearn team join --project {entry['root']}` again"
                ),
            )
