"""Health facts for `doctor` and `status`: the store's integrity, the drain's record, the schedule.

`status(settings)` gathers what `kirolearn status` prints (the CLI adds the team sync's own facts).

Everything here works when the database is damaged or gone: it reads
$KIROLEARN_HOME/state/ (kirolearn.store.state) and SQLite's own checks, never
anything that needs a healthy store. It changes nothing.
"""

import os
import sqlite3
import time

from kirolearn.core import isotime, paths
from kirolearn.store import state

# no drain for this long while events wait: the schedule is not running
DRAIN_STALE_SECONDS = 3600


def drain_started() -> None:
    """Note that a drain began (called with the drain lock held)."""
    state.try_update(state.DRAIN, started_at=state.utc_now())


def drain_finished(exc: "BaseException | None") -> None:
    """Note how the drain ended: the error line a user saw, or none."""
    if exc is None:
        state.try_update(state.DRAIN, finished_at=state.utc_now(), error="", ok=True)
        return
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        state.try_update(state.DRAIN, finished_at=state.utc_now(), error="interrupted", ok=False)
        return
    from kirolearn.privacy import writes  # an error's text may quote a secret

    writes.state_try_update(state.DRAIN, finished_at=state.utc_now(), error=describe(exc), ok=False)


def describe(exc: BaseException) -> str:
    """One line for an exception, as the CLI would show it."""
    from kirolearn.core.errors import KirolearnError, from_oserror, from_sqlite, one_line

    if isinstance(exc, KirolearnError):
        return str(exc)
    if isinstance(exc, sqlite3.Error):
        return str(from_sqlite(exc, paths.db_path()))
    if isinstance(exc, OSError):
        return str(from_oserror(exc))
    return one_line(f"{type(exc).__name__}: {exc}")


def last_drain() -> dict:
    """{started_at, finished_at, error, ok} of the last drain that got the lock ({} if none yet)."""
    return state.read(state.DRAIN)


def drain_running() -> bool:
    """Is a drain holding the spool lock right now (e.g. `drain --watch`)?"""
    from filelock import FileLock, Timeout

    from kirolearn.capture import spool

    path = os.path.join(spool.root(), spool.LOCK_NAME)
    if not os.path.exists(path):
        return False
    probe = FileLock(path, timeout=0, mode=0o600)
    try:
        probe.acquire()
    except Timeout:
        return True
    except OSError:
        return False
    probe.release()
    return False


def model_state() -> dict:
    """The model breaker's record: consecutive_failures, last_error, last_failure_at, …"""
    return state.read(state.MODEL)


def status_facts(info: dict, settings) -> None:
    """Add the model breaker and the last drain's error to `kirolearn status`'s `info`."""
    model = model_state()
    in_a_row = int(model.get("consecutive_failures") or 0) if settings.extract.model else 0
    breaker = bool(settings.extract.model) and in_a_row >= settings.extract.breaker_failures
    info["extractor"].update(
        failures_in_a_row=in_a_row,
        breaker_open=breaker,
        last_model_error=model.get("last_error") if in_a_row else None,
    )
    if breaker:
        info["extractor"]["mode"] = f"deterministic (the model failed {in_a_row} batches in a row)"
    info["last_drain_error"] = last_drain().get("error") or None


def hook_errors_since(seconds: float) -> int:
    """Lines logged by hooks in the last `seconds`."""
    path = os.path.join(paths.logs_dir(), "hook.log")
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.readlines()
    except OSError:
        return 0
    # log lines start with a stored timestamp
    cutoff = isotime.utc_iso(time.time() - seconds)[:19]
    return sum(1 for line in lines if line[:19] >= cutoff)


def status(settings) -> dict:
    """What `kirolearn status` shows (its `--json` object, without "team"): the spool, the extractor
    and its spend today, the last drain, the database's figures and scrub state, hook errors, wiring.

    Creates nothing; a lost database raises StoreLost (an error to report, not "none yet").
    """
    from kirolearn.capture import spool
    from kirolearn.core.ids import ulid_time_ms

    files = spool.ready_files()
    oldest_age = None
    if files:
        oldest_age = round(time.time() - ulid_time_ms(os.path.basename(files[0])[:26]) / 1000, 1)
    quarantine_dir = os.path.join(spool.root(), spool.QUARANTINE)
    quarantined = (
        len([n for n in os.listdir(quarantine_dir) if not n.endswith(".reason")])
        if os.path.isdir(quarantine_dir)
        else 0
    )
    info = {
        "home": paths.home(),
        "spool": {
            "ready": len(files),
            "oldest_age_seconds": oldest_age,
            "quarantined": quarantined,
            # drained, kept in done/ until a later check (the log)
            "kept": len(spool.done_files()),
        },
        "database": None,
        "extractor": {
            "model": settings.extract.model or None,
            "mode": "llm" if settings.extract.model else "deterministic",
            "daily_token_limit": settings.extract.daily_token_limit,
            "daily_cost_limit_usd": settings.extract.daily_cost_limit_usd,
        },
    }
    from kirolearn.core.isotime import now_iso, shift
    from kirolearn.store import backends
    from kirolearn.store.base import start_of_day

    status_facts(info, settings)
    # a lost database is an error to report (StoreLost), not "none yet"
    store = backends.open_existing()
    if store is not None:
        day_ago = shift(now_iso(), -86400)
        tokens, dollars = store.model_spend(start_of_day())
        if settings.extract.model and store.daily_limit_reached(settings.extract):
            info["extractor"]["mode"] = "deterministic (daily limit reached)"
        found = store.figures(day_ago)
        info["database"] = {
            "path": paths.db_path(),
            **{
                k: found[k]
                for k in (
                    "events",
                    "records",
                    "projects",
                    "last_drain",
                    "extraction_failures_24h",
                    "agent_events_24h",
                    "superseded",
                    "merged",
                )
            },
        }
        info["extractor"].update(tokens_today=tokens, cost_usd_today=round(dollars, 6))
        if settings.extract.model:
            info["extractor"]["model_runs_24h"] = store.model_runs_since(day_ago)
        from kirolearn.privacy.rescrub import state as scrub_state

        info["database"]["scrub"] = scrub_state(store)
        store.close()
    from kirolearn.install.wiring import wiring

    info["hook_errors_24h"] = hook_errors_since(86400)
    info["kiro_wiring"] = wiring()
    from kirolearn.install import scopes

    # the agents' own files, this user's and this project's
    info["wiring_scopes"] = scopes.scan()
    return info


def store_health(path: "str | None" = None) -> dict:
    """{"state": "none" | "ok" | "lost" | "damaged" | "unreadable", "detail": text} without changing anything."""
    from kirolearn.store.backends import local_health

    return local_health(path or paths.db_path())


def schedule_status() -> dict:
    """Which drain job is installed: {"installed": bool, "kind": str | None, "detail": str}."""
    import shutil

    from kirolearn.install import schedule

    found = schedule.installed_jobs()
    if found:
        kind, where = found[0]
        return {"installed": True, "kind": kind, "detail": where}
    return {
        "installed": False,
        "kind": None,
        "detail": "no drain job (systemd, launchd or cron) found"
        if shutil.which("crontab")
        else "no systemd or launchd drain job found (and no crontab command to check cron)",
    }


def note_scheduled_run() -> None:
    """Record that the job `kirolearn schedule` installed started this drain (its environment says so)."""
    from kirolearn.install import schedule

    found = schedule.parse_scheduled(os.environ.get(schedule.SCHEDULED_ENV))
    if found:
        state.try_update(state.SCHEDULE, kind=found[0], every=found[1], ran_at=state.utc_now())


def last_scheduled_run() -> dict:
    """{kind, every, ran_at} of the last drain a scheduled job started ({} if none yet)."""
    return state.read(state.SCHEDULE)


# a job's start-up and the scheduler's own slack, beyond two intervals
SCHEDULE_GRACE_SECONDS = 60

JOB_FIX = {
    "systemd": "see `systemctl --user status kirolearn-drain.timer` (a timer needs a running user manager: "
    "`loginctl enable-linger $USER`)",
    "cron": "check that the cron daemon runs and read logs/drain.log",
    "launchd": "see `launchctl list dev.kirolearn.pipeline.drain`",
}


def _job_checks(sched: dict, now: float):
    """OK only for an installed job that has started a drain within two of its intervals."""
    from kirolearn.core.isotime import iso_epoch

    ran = last_scheduled_run()
    at = iso_epoch(ran.get("ran_at") or "") if ran.get("kind") == sched["kind"] else None
    every = int(ran.get("every") or 60)
    where = f"{sched['kind']}: {sched['detail']}"
    again = "then re-run `kirolearn schedule`, or keep `kirolearn drain --watch` running"
    if at is None:
        yield (
            "WARN",
            f"a drain job is installed ({where}) but has not run a drain yet: {JOB_FIX[sched['kind']]}; {again}",
        )
    elif now - at > 2 * every + SCHEDULE_GRACE_SECONDS:
        yield (
            "WARN",
            (
                f"a drain job is installed ({where}) but last ran a drain {_ago(now - at)} ago, "
                f"though it runs every {every}s: {JOB_FIX[sched['kind']]}; {again}"
            ),
        )
    else:
        yield "OK", f"drain job installed ({where}), last ran {_ago(now - at)} ago"


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return (
        f"{seconds}s"
        if seconds < 120
        else f"{seconds // 60} min"
        if seconds < 7200
        else f"{seconds / 3600:.1f} h"
    )


def drain_checks(now: "float | None" = None):
    """Yield (level, message) about the schedule and the last drain."""
    from kirolearn.core.isotime import iso_epoch

    now = time.time() if now is None else now
    sched = schedule_status()
    running = drain_running()
    if sched["installed"]:
        yield from _job_checks(sched, now)
    elif running:
        yield "OK", "no drain job installed, but a drain is running now (e.g. `kirolearn drain --watch`)"
    else:
        yield (
            "WARN",
            f"{sched['detail']}: run `kirolearn schedule` (or keep `kirolearn drain --watch` running)",
        )
    last = last_drain()
    finished = iso_epoch(last.get("finished_at") or "")
    if last.get("error"):
        yield "FAIL", f"the last drain ({last.get('finished_at')}) failed: {last['error']}"
    if running:
        yield "OK", "a drain is running now"
    elif finished is None:
        yield "WARN", "no drain has run yet: run `kirolearn drain`"
    elif now - finished > DRAIN_STALE_SECONDS:
        yield (
            "WARN",
            (
                f"the last drain ran {(now - finished) / 3600:.1f} h ago: "
                "check the schedule (`kirolearn schedule`)"
            ),
        )
    elif not last.get("error"):
        yield "OK", f"last drain {last.get('finished_at')} succeeded"
