"""`kirolearn schedule`: run `kirolearn drain` periodically with the system's own scheduler.

A systemd user timer, a crontab line or a launchd agent, each calling the
absolute path of this installation's `kirolearn drain`; the drain's own file
lock keeps runs from overlapping. With `--recall-server`, the recall server
(kirolearn/recall/server.py) runs as a user service the same way. Generation is pure (tested as text); only
`install_job` / `remove_job` touch the system.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

from kirolearn.core import paths
from kirolearn.core.errors import ScheduleError

UNIT = "kirolearn-drain"
CRON_MARK = "# kirolearn drain (kirolearn schedule)"
LAUNCHD_LABEL = "dev.kirolearn.pipeline.drain"
# The recall server as a user service: `kirolearn schedule --recall-server`
RECALL_UNIT = "kirolearn-recall"
RECALL_LABEL = "dev.kirolearn.recall.server"


# */N that fires evenly every hour
CRON_MINUTES = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)
CRON_HOURS = (1, 2, 3, 4, 6, 8, 12, 24)  # 0 */N that fires evenly every day


def _cron_intervals() -> "list[int]":
    return [m * 60 for m in CRON_MINUTES] + [h * 3600 for h in CRON_HOURS]


def _human(seconds: int) -> str:
    return (
        f"{seconds // 3600}h"
        if seconds % 3600 == 0
        else (f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s")
    )


def parse_every(text: str, kind: "str | None" = None) -> int:
    """'90s', '1m', '15m', '2h' -> seconds (at least 60).

    With kind="cron", only intervals cron can express evenly are accepted: whole
    minutes dividing an hour, or whole hours dividing a day. Nothing is rounded.
    """
    match = re.fullmatch(r"\s*(\d+)\s*([smh])\s*", text or "")
    if not match:
        raise ScheduleError(f"--every {text!r}: use a number with s, m or h, e.g. 1m, 5m, 1h")
    seconds = int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]
    if seconds < 60:
        raise ScheduleError(
            f"--every {text}: the shortest interval is 1m (use `kirolearn drain --watch` for less)"
        )
    if kind == "cron" and seconds not in _cron_intervals():
        lower = max((s for s in _cron_intervals() if s < seconds), default=None)
        higher = min((s for s in _cron_intervals() if s > seconds), default=None)
        near = " or ".join(_human(s) for s in (lower, higher) if s)
        raise ScheduleError(
            f"--every {text}: cron cannot run a job evenly every {_human(seconds)}",
            f"use {near}, or --systemd / --launchd, which take any interval",
        )
    return seconds


def drain_argv() -> "list[str]":
    """Absolute `kirolearn drain` command of this installation."""
    return [_kirolearn_exe(), "drain"]


def serve_argv() -> "list[str]":
    """Absolute `kirolearn serve-recall` command of this installation."""
    return [_kirolearn_exe(), "serve-recall"]


def _kirolearn_exe() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "kirolearn")
    exe = beside if os.path.exists(beside) else (shutil.which("kirolearn") or beside)
    return os.path.abspath(exe)


# `systemctl --user` answers in milliseconds when a user manager runs
BUS_SECONDS = 5


def systemd_problem() -> "str | None":
    """Why `systemctl --user` cannot run a timer here (no systemctl, no user bus), or None."""
    if not shutil.which("systemctl"):
        return "systemctl is not installed"
    try:
        done = subprocess.run(
            ["systemctl", "--user", "show-environment"],
            capture_output=True,
            text=True,
            timeout=BUS_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"`systemctl --user` does not answer ({type(exc).__name__})"
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        return f"`systemctl --user` cannot reach a user manager ({said[-1][:200] if said else 'no output'})"
    return None


def supervisor_line() -> str:
    """The command a user's own supervisor (or a terminal) keeps running instead of a schedule."""
    env = "".join(f"{k}={shlex.quote(v)} " for k, v in _env().items())
    return env + " ".join(shlex.quote(a) for a in [_kirolearn_exe(), "drain", "--watch"])


def default_kind() -> str:
    """The scheduler that works here: launchd on macOS, a systemd user timer where `systemctl --user`
    reaches a user manager, else cron where crontab exists; ScheduleError when none does."""
    if sys.platform == "darwin" and shutil.which("launchctl"):
        return "launchd"
    why_not = systemd_problem()
    if why_not is None:
        return "systemd"
    if shutil.which("crontab"):
        return "cron"
    raise ScheduleError(
        f"no scheduler works here: {why_not}, and crontab is not installed",
        "keep `kirolearn drain --watch` running (a terminal, tmux), or have your own supervisor run: "
        + supervisor_line(),
    )


# set by the job: "KIND:SECONDS", so a drain knows the schedule ran it
SCHEDULED_ENV = "KIROLEARN_SCHEDULED"


def scheduled_env(kind: str, seconds: int) -> dict:
    """The job's environment: kirolearn's home, and the mark a scheduled drain records."""
    return {**_env(), SCHEDULED_ENV: f"{kind}:{seconds}"}


def parse_scheduled(value: "str | None") -> "tuple[str, int] | None":
    """(kind, seconds) from a job's KIROLEARN_SCHEDULED value, None if it is not one."""
    kind, _, seconds = (value or "").partition(":")
    return (kind, int(seconds)) if kind in ("systemd", "cron", "launchd") and seconds.isdigit() else None


@dataclass
class Job:
    """What one scheduler needs: file path and content (cron: the line)."""

    kind: str
    path: "str | None"
    content: str


def _env() -> dict:
    return {paths.HOME_ENV: paths.home()} if os.environ.get(paths.HOME_ENV) else {}


def _systemd_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")


def systemd_job(seconds: int) -> "list[Job]":
    """The service and timer units."""
    unit_dir = os.path.join(os.path.expanduser("~"), ".config", "systemd", "user")
    env = "".join(
        f'Environment="{k}={_systemd_escape(v)}"\n' for k, v in scheduled_env("systemd", seconds).items()
    )
    service = (
        "[Unit]\nDescription=kirolearn: drain the Kiro event spool into memory\n\n"
        f"[Service]\nType=oneshot\n{env}ExecStart={' '.join(shlex.quote(a) for a in drain_argv())}\n"
    )
    timer = (
        "[Unit]\nDescription=Run kirolearn drain periodically\n\n"
        # OnActiveSec: a first run right after install
        f"[Timer]\nOnBootSec=1min\nOnActiveSec=1min\nOnUnitActiveSec={seconds}s\nPersistent=true\n\n"
        "[Install]\nWantedBy=timers.target\n"
    )
    return [
        Job("systemd", os.path.join(unit_dir, f"{UNIT}.service"), service),
        Job("systemd", os.path.join(unit_dir, f"{UNIT}.timer"), timer),
    ]


def cron_line(seconds: int) -> str:
    """One crontab line (minute granularity)."""
    # refuses what cron cannot express, rather than rounding it
    parse_every(_human(seconds), "cron")
    minutes = seconds // 60
    hours = minutes // 60
    when = (
        "* * * * *"
        if minutes == 1
        else f"*/{minutes} * * * *"
        if minutes < 60
        else "0 0 * * *"
        if hours == 24
        else "0 * * * *"
        if hours == 1
        else f"0 */{hours} * * *"
    )
    env = "".join(f"{k}={shlex.quote(v)} " for k, v in scheduled_env("cron", seconds).items())
    log = shlex.quote(os.path.join(paths.logs_dir(), "drain.log"))
    return f"{when} {env}{' '.join(shlex.quote(a) for a in drain_argv())} >>{log} 2>&1 {CRON_MARK}"


def _launchd_plist(label: str, argv: "list[str]", keys: str, environment: "dict | None" = None) -> "Job":
    """A launchd agent running `argv` under `label`, with kirolearn's environment and the given keys."""
    from xml.sax.saxutils import escape

    args = "".join(f"    <string>{escape(a)}</string>\n" for a in argv)
    env = "".join(
        f"    <key>{escape(k)}</key><string>{escape(v)}</string>\n"
        for k, v in (_env() if environment is None else environment).items()
    )
    plist = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
        '<plist version="1.0">\n<dict>\n'
        f"  <key>Label</key><string>{label}</string>\n"
        f"  <key>ProgramArguments</key>\n  <array>\n{args}  </array>\n"
        + (f"  <key>EnvironmentVariables</key>\n  <dict>\n{env}  </dict>\n" if env else "")
        + keys
        + "</dict>\n</plist>\n"
    )
    path = os.path.join(os.path.expanduser("~"), "Library", "LaunchAgents", f"{label}.plist")
    return Job("launchd", path, plist)


def launchd_job(seconds: int) -> "list[Job]":
    """The launchd agent plist."""
    return [
        _launchd_plist(
            LAUNCHD_LABEL,
            drain_argv(),
            f"  <key>StartInterval</key><integer>{seconds}</integer>\n  <key>RunAtLoad</key><true/>\n",
            scheduled_env("launchd", seconds),
        )
    ]


def recall_server_jobs(kind: str) -> "list[Job]":
    """The recall server as a user service that stays up: a systemd user unit or a launchd agent.

    cron starts jobs, it cannot keep one running: refused (`kirolearn drain --watch` serves recall too).
    """
    if kind == "cron":
        raise ScheduleError(
            "cron cannot keep the recall server running",
            "use --systemd or --launchd, or keep `kirolearn drain --watch` running (it serves recall too)",
        )
    if kind == "systemd":
        unit_dir = os.path.join(os.path.expanduser("~"), ".config", "systemd", "user")
        env = "".join(f'Environment="{k}={_systemd_escape(v)}"\n' for k, v in _env().items())
        service = (
            "[Unit]\nDescription=kirolearn: answer recall queries with the embedding model loaded\n\n"
            f"[Service]\nType=simple\n{env}ExecStart={' '.join(shlex.quote(a) for a in serve_argv())}\n"
            "Restart=on-failure\nRestartSec=5\nNice=5\n\n[Install]\nWantedBy=default.target\n"
        )
        return [Job("systemd", os.path.join(unit_dir, f"{RECALL_UNIT}.service"), service)]
    return [
        _launchd_plist(
            RECALL_LABEL,
            serve_argv(),
            "  <key>KeepAlive</key><true/>\n  <key>RunAtLoad</key><true/>\n"
            "  <key>ProcessType</key><string>Background</string>\n",
        )
    ]


def _write(jobs: list) -> list:
    """Write each job's file (its folder made if missing); returns the jobs."""
    for job in jobs:
        os.makedirs(os.path.dirname(job.path), exist_ok=True)
        with open(job.path, "w", encoding="utf-8") as fh:
            fh.write(job.content)
    return jobs


def install_recall_server(kind: str) -> str:
    """Install (or replace) and start the recall server's user service; returns a one-line report."""
    jobs = recall_server_jobs(kind)
    why_not = systemd_problem() if kind == "systemd" else None
    if why_not:
        raise ScheduleError(
            f"cannot install the recall server's systemd unit: {why_not}",
            "keep `kirolearn drain --watch` running (it serves recall too)",
        )
    before = {j.path: _read(j.path) for j in jobs}
    (job,) = _write(jobs)
    try:
        if kind == "systemd":
            _run(["systemctl", "--user", "daemon-reload"])
            _run(["systemctl", "--user", "enable", "--now", f"{RECALL_UNIT}.service"])
            _run(
                ["systemctl", "--user", "restart", f"{RECALL_UNIT}.service"]
            )  # a new kirolearn: the new code
            return f"systemd: started {RECALL_UNIT}.service; see `systemctl --user status {RECALL_UNIT}`"
        try:
            _run(["launchctl", "unload", job.path])
        except ScheduleError:
            pass  # not loaded yet
        _run(["launchctl", "load", "-w", job.path])
        return f"launchd: loaded {job.path}"
    except ScheduleError as exc:
        _restore(before)
        raise ScheduleError(
            f"{exc.args[0]} (the service's file was removed again)",
            "keep `kirolearn drain --watch` running (it serves recall too)",
        ) from None


def installed_recall_server() -> "list[str]":
    """The kinds whose recall server service file is installed here."""
    return [k for k in ("systemd", "launchd") if os.path.exists(recall_server_jobs(k)[0].path)]


def remove_recall_server(kind: str) -> str:
    """Stop and remove the recall server's user service; returns a one-line report."""
    (job,) = recall_server_jobs(kind)
    if kind == "systemd" and not systemd_problem():
        try:
            _run(["systemctl", "--user", "disable", "--now", f"{RECALL_UNIT}.service"])
        except ScheduleError:
            pass
    elif os.path.exists(job.path):
        try:
            _run(["launchctl", "unload", "-w", job.path])
        except ScheduleError:
            pass
    if os.path.exists(job.path):
        os.remove(job.path)
    return f"{kind}: recall server service removed"


OPTION_OF = {"crontab": "--cron", "systemctl": "--systemd", "launchctl": "--launchd"}


def _run(argv: "list[str]", stdin: "str | None" = None) -> str:
    try:
        result = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise ScheduleError(
            f"{argv[0]} is not installed", _instead(OPTION_OF.get(argv[0], "--")[2:])
        ) from None
    except subprocess.TimeoutExpired:
        raise ScheduleError(
            f"`{' '.join(argv)}` did not answer in 30 s", _instead(OPTION_OF.get(argv[0], "--")[2:])
        ) from None
    if result.returncode != 0:
        raise ScheduleError(f"`{' '.join(argv)}` failed: {(result.stderr or result.stdout).strip()}")
    return result.stdout


def _crontab_without_ours() -> "list[str]":
    try:
        current = _run(["crontab", "-l"])
    except ScheduleError as exc:
        if "no crontab" in str(exc).lower():
            current = ""
        else:
            raise
    return [line for line in current.splitlines() if CRON_MARK not in line]


def install_job(kind: str, seconds: int) -> str:
    """Install (or replace) the drain job; returns a one-line report. A job the scheduler refuses
    leaves nothing behind: its files are removed again."""
    if kind == "cron":
        # the line appends to logs/drain.log: 0600, not the umask's
        os.close(paths.open_log("drain.log"))
        lines = _crontab_without_ours() + [cron_line(seconds)]
        _run(["crontab", "-"], "\n".join(lines) + "\n")
        return "crontab: added " + lines[-1]
    if kind == "systemd":
        why_not = systemd_problem()
        # checked first: the unit files would only sit there, never run
        if why_not:
            raise ScheduleError(
                f"cannot install a systemd timer: {why_not}",
                _instead("systemd"),
            )
    jobs = systemd_job(seconds) if kind == "systemd" else launchd_job(seconds)
    before = {job.path: _read(job.path) for job in jobs}
    _write(jobs)
    try:
        if kind == "systemd":
            _run(["systemctl", "--user", "daemon-reload"])
            _run(["systemctl", "--user", "enable", "--now", f"{UNIT}.timer"])
            return f"systemd: enabled {UNIT}.timer (every {seconds}s); see `systemctl --user list-timers`"
        _run(["launchctl", "load", "-w", jobs[0].path])
        return f"launchd: loaded {jobs[0].path}"
    except ScheduleError as exc:
        _restore(before)
        raise ScheduleError(f"{exc.args[0]} (the job's files were removed again)", _instead(kind)) from None


def _read(path: str) -> "str | None":
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return None


def _restore(before: dict) -> None:
    """Put each file back as it was before a failed install (removed if it was not there)."""
    for path, text in before.items():
        try:
            if text is None:
                os.remove(path)
            else:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(text)
        except OSError:
            pass


def _instead(failed: str) -> str:
    """What to do when `failed` cannot schedule the drain here."""
    others = [o for p, o in OPTION_OF.items() if o != f"--{failed}" and shutil.which(p)]
    if "--systemd" in others and systemd_problem():
        others.remove("--systemd")
    if "--launchd" in others and sys.platform != "darwin":
        others.remove("--launchd")
    return (
        (f"try {' or '.join(others)}, or " if others else "")
        + "keep `kirolearn drain --watch` running, or have your own supervisor run: "
        + supervisor_line()
    )


def installed_jobs() -> "list[tuple[str, str]]":
    """Each drain job installed here, as (kind, where): unit or plist files, and our crontab line.

    The crontab is read only when crontab exists (bounded by a timeout)."""
    found = [
        (job.kind, job.path) for job in systemd_job(60)[1:] + launchd_job(60) if os.path.exists(job.path)
    ]
    if os.path.exists(systemd_job(60)[0].path) and not any(k == "systemd" for k, _ in found):
        found.insert(0, ("systemd", systemd_job(60)[0].path))
    if shutil.which("crontab"):
        try:
            listing = subprocess.run(
                ["crontab", "-l"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
            ).stdout
        except (OSError, subprocess.SubprocessError):
            listing = ""
        if CRON_MARK in listing:
            found.append(("cron", "crontab line"))
    return found


def remove_job(kind: "str | None") -> str:
    """Remove the drain job (with no kind: every one installed); returns the report."""
    if kind is None:
        kinds = list(dict.fromkeys(k for k, _ in installed_jobs()))
        if not kinds:
            return "no drain job installed (systemd, launchd or cron): nothing to remove"
        return "\n".join(remove_job(k) for k in kinds)
    if kind == "cron":
        _run(["crontab", "-"], "\n".join(_crontab_without_ours()) + "\n")
        return "crontab: kirolearn line removed"
    if kind == "systemd":
        if not systemd_problem():
            try:
                _run(["systemctl", "--user", "disable", "--now", f"{UNIT}.timer"])
            except ScheduleError:
                pass  # not enabled: removing the files is enough
        for job in systemd_job(60):
            if os.path.exists(job.path):
                os.remove(job.path)
        return "systemd: kirolearn-drain units removed"
    (job,) = launchd_job(60)
    if os.path.exists(job.path):
        try:
            _run(["launchctl", "unload", "-w", job.path])
        except ScheduleError:
            pass
        os.remove(job.path)
    return "launchd: agent removed"
