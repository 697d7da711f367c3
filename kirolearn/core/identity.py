"""Who and where: the OS user and the host name that events and records are attributed to.

Standard library only. The hook stamps every event with them (kirolearn.capture.events); team
attribution (kirolearn.team.membership) and migration m016 fall back to the same rules for what no event said.
"""

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # types only: `typing` would cost the hook its import
    from collections.abc import Mapping

USER_VARIABLES = ("USER", "LOGNAME", "USERNAME")


def env_user(env: "Mapping[str, str]") -> "str | None":
    """The user that USER, LOGNAME or USERNAME in `env` names (at most 128 characters), or None."""
    for key in USER_VARIABLES:
        if env.get(key):
            return env[key][:128]
    return None


def os_user() -> str:
    """The OS user running this process: USER, LOGNAME or USERNAME, else its passwd entry.

    The hook calls `event_user` (the variables, else the passwd entry): getpass would cost it imports.
    """
    return event_user(os.environ)


def event_user(env: "Mapping[str, str]") -> str:
    """The user an event names: USER, LOGNAME or USERNAME in `env`, else the login name of this process's
    passwd entry (a cron job, a container, `env -i`), else "unknown" (a random uid with no entry)."""
    return env_user(env) or passwd_user()[:128] or "unknown"


def passwd_user() -> str:
    """The user this process runs as, by its passwd entry ('' where there is none, or no pwd module)."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError, AttributeError, OSError):
        return ""


def this_host(env: "Mapping[str, str] | None" = None) -> str:
    """This machine's name; on Windows (no os.uname) COMPUTERNAME from `env` (default os.environ)."""
    try:
        return os.uname().nodename or "unknown"
    except AttributeError:  # Windows
        return (os.environ if env is None else env).get("COMPUTERNAME", "unknown")
