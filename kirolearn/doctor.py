"""`kirolearn doctor`: every check `status` implies, each with what to do about it."""

import os
import time

from kirolearn.capture import spool
from kirolearn.core import paths
from kirolearn.core.ids import ulid_time_ms
from kirolearn.health import hook_errors_since
from kirolearn.install import agents as install_agents
from kirolearn.install import wiring

SPOOL_STALE_SECONDS = 3600


def run_checks():
    """Yield (level, message) pairs; level is OK, WARN or FAIL."""
    from kirolearn.settings import SettingsError, load

    try:
        conf = load()
        yield (
            "OK",
            "config.toml is valid"
            if os.path.exists(os.path.join(paths.home(), "config.toml"))
            else "no config.toml: all defaults",
        )
    except SettingsError as exc:
        yield "FAIL", f"{exc}"
        conf = None
    home = paths.home()
    if os.path.isdir(home) and not os.access(home, os.W_OK):
        yield "FAIL", f"{home} is not writable: hooks cannot record anything; fix its permissions"
    files = spool.ready_files()
    if files:
        age = time.time() - ulid_time_ms(os.path.basename(files[0])[:26]) / 1000
        if age > SPOOL_STALE_SECONDS:
            yield (
                "FAIL",
                (
                    f"{len(files)} events waiting, the oldest {age / 3600:.1f} h old: no drain is running; "
                    "run `kirolearn drain` and `kirolearn schedule`"
                ),
            )
        else:
            yield "OK", f"{len(files)} events waiting to be drained"
    else:
        yield "OK", "no events waiting in the spool"
    qdir = os.path.join(spool.root(), spool.QUARANTINE)
    quarantined = [n for n in os.listdir(qdir) if not n.endswith(".reason")] if os.path.isdir(qdir) else []
    if quarantined:
        yield "WARN", f"{len(quarantined)} quarantined file(s) in {qdir}: read the .reason files beside them"
    errors = hook_errors_since(86400)
    if errors:
        yield (
            "WARN",
            f"{errors} hook error(s) in the last 24 h: see {os.path.join(paths.logs_dir(), 'hook.log')}",
        )
    from kirolearn import health

    found = health.store_health()
    if found["state"] == "lost":
        yield "FAIL", f"{found['detail']}: run `kirolearn repair` (the spool keeps new events until then)"
    elif found["state"] in ("damaged", "unreadable"):
        yield (
            "FAIL",
            (
                f"the database {paths.db_path()} is {found['state']} ({found['detail']}): run "
                "`kirolearn repair` (it backs the file up first and re-ingests the spool, which keeps every "
                "event not yet drained and, in spool/done/, those drained since the last sound check)"
            ),
        )
    elif found["state"] == "ok":
        try:
            from kirolearn.core.isotime import now_iso, shift
            from kirolearn.store.backends import open_store

            store = open_store()
            failures = store.figures(shift(now_iso(), -86400), projects=False)["extraction_failures_24h"]
            yield "OK", f"database {found['detail']}"
            from kirolearn.privacy.rescrub import note

            stale = note(store)
            if stale:
                yield "WARN", stale
            if failures:
                yield (
                    "WARN",
                    f"{failures} failed model extraction(s) in the last 24 h: check extract.model and the key",
                )
            if conf and conf.extract.model:
                spent = store.daily_limit_reached(conf.extract)
                if spent:
                    yield "WARN", f"{spent}: extraction is deterministic until tomorrow (UTC)"
        except Exception as exc:  # a sick database
            yield "FAIL", f"cannot open {paths.db_path()}: {exc}"
    else:
        yield "OK", "no database yet (it is created by the first drain)"
    if conf is not None:
        yield from semantic_checks(conf)
        from kirolearn.pipeline.probe import model_checks

        # reachable, answers, JSON works, in which form
        yield from model_checks(conf)
        from kirolearn.team import membership as team
        from kirolearn.team.migrate import store_checks

        # the server: nothing unless [store] url names a team store
        yield from store_checks(conf)
        yield from team.doctor_checks(conf)  # what sharing adds
    model = health.model_state()
    if (
        conf
        and conf.extract.model
        and int(model.get("consecutive_failures") or 0) >= conf.extract.breaker_failures
    ):
        yield (
            "WARN",
            (
                f"the model failed {model['consecutive_failures']} batches in a row (last: "
                f"{model.get('last_error', '?')[:200]}): drains use the deterministic extractor until it answers"
            ),
        )
    yield from health.drain_checks()
    wired = wiring.wiring(run=True)
    from kirolearn.install import scopes

    found = scopes.scan()
    if not wired and not found:
        yield (
            "WARN",
            (
                "no agent is wired: run `kirolearn install --agent NAME` ("
                + ", ".join(install_agents.names())
                + "; `--project DIR` for a workspace)"
            ),
        )
    for entry in wired:
        if not entry.get("parses", True):
            yield (
                "FAIL",
                (
                    f"{entry['path']} is not valid JSON any more, so its agent ignores kirolearn's entries: "
                    "fix the file, then re-run `kirolearn install`"
                ),
            )
            continue
        if not entry["present"]:
            yield "FAIL", f"{entry['path']}: kirolearn's entries are gone; re-run `kirolearn install`"
        elif entry.get("missing_programs") or entry["missing_binaries"]:
            yield "FAIL", missing_message(entry)
        elif entry.get("broken_programs"):
            yield (
                "FAIL",
                (
                    f"{entry['path']}: its hook command fails: {'; '.join(entry['broken_programs'])}; "
                    "re-run `kirolearn install` from the current installation"
                ),
            )
        else:
            yield "OK", f"wired: {entry['path']}"
    # every wired agent: is the MCP server registered?
    for agent in dict.fromkeys(e["agent"] for e in wired):
        if not any(e["mcp"] for e in wired if e["agent"] == agent and e.get("mcp") is not None):
            yield (
                "WARN",
                (
                    f"{agent}: no wired file registers kirolearn's MCP server, so the model cannot search "
                    f"memory; re-run `kirolearn install --agent {agent}`"
                ),
            )
        else:
            yield from _mcp_runs(agent, [e["path"] for e in wired if e["agent"] == agent and e.get("mcp")])
    yield from scope_checks(found)
    yield from _wiring_clashes()


def _mcp_runs(agent: str, files: "list[str]"):
    """Start each distinct MCP command these files register, as the agent would, and ask `initialize`."""
    from kirolearn.install import mcp_probe

    seen, failed = set(), False
    for path in files:
        for command, args, env in mcp_probe.servers(path):
            key = (command, tuple(args), tuple(sorted(env.items())))
            # not on this PATH: the wiring check says so
            if key in seen or not mcp_probe.resolve(command):
                continue
            seen.add(key)
            why = mcp_probe.probe(command, args, env)
            if why:
                failed = True
                yield (
                    "FAIL",
                    (
                        f"{agent}: {path}: kirolearn's MCP server does not start: {why}, so the model cannot "
                        f"search memory; re-run `kirolearn install --agent {agent}` (with the same --project) "
                        "from the current installation"
                    ),
                )
    if not failed:
        yield (
            "OK",
            f"{agent}: kirolearn's MCP server is registered" + (" and answers `initialize`" if seen else ""),
        )


def scope_checks(found: "list[dict]"):
    """Which scope wires which agent (a teammate's clone is wired by the project), and double wiring."""
    from kirolearn.install import scopes

    for entry in found:
        if entry["missing"]:
            yield (
                "WARN",
                scopes.describe(entry)
                + " (the agent's PATH may differ): install kirolearn where that PATH finds it "
                "(pipx install kirolearn)"
                + ("" if entry["portable"] else f", or re-run `kirolearn install --agent {entry['agent']}`"),
            )
        else:
            yield "OK", scopes.describe(entry)
        # Kiro's project may use ~/.kiro's
        if not entry["mcp"] and entry["agent"] not in scopes.SCOPES_APART:
            yield (
                "WARN",
                f"{entry['agent']}: its {entry['scope']} wiring registers no kirolearn MCP server, so the model "
                f"cannot search memory there; re-run `kirolearn install --agent {entry['agent']}` for that scope",
            )
    for user, project in scopes.doubles(found):
        yield (
            "WARN",
            (
                f"{user['agent']} is wired twice: for this user ({', '.join(user['files'])}) and by this "
                f"project ({', '.join(project['files'])}): each hook call runs twice (the hook keeps one "
                f"event, the agent waits for both); keep one: `kirolearn uninstall --agent {user['agent']}` "
                "removes the user's"
            ),
        )
    here = {e["agent"]: e for e in found if e["scope"] == scopes.PROJECT}
    if "opencode" in here and "kilo-code" in here:  # Kilo Code loads a project's opencode.json too
        yield (
            "WARN",
            f"this project wires opencode ({', '.join(here['opencode']['files'])}) and Kilo Code "
            f"({', '.join(here['kilo-code']['files'])}); Kilo Code loads both files, so each of its sessions "
            "runs both plugins: every event is sent twice and memory shown twice; keep one: "
            "`kirolearn uninstall --agent opencode --project .` if the project uses Kilo Code",
        )


def missing_message(entry: dict) -> str:
    """What doctor says of a wired file whose interpreter, launcher or command is not there: per agent, each
    path that does not exist and each command PATH does not find, and the fix for each kind."""
    agent = entry["agent"]
    programs, binaries = entry.get("missing_programs", []), entry["missing_binaries"]
    bare = [w for w in [*programs, *binaries] if os.sep not in w and not (os.altsep and os.altsep in w)]
    again = f"`kirolearn install --agent {agent}` (with the same --project)"
    parts = []
    if [w for w in programs if w not in bare]:
        parts.append(
            f"its hook commands run {', '.join(w for w in programs if w not in bare)}, which does not "
            "exist (a moved or deleted virtual environment?), so every hook fails without a word"
        )
    if [w for w in binaries if w not in bare]:
        parts.append(
            f"it points at {', '.join(w for w in binaries if w not in bare)}, which no longer exists"
        )
    if parts:
        parts[-1] += f"; re-run {again} from the current installation"
    if bare:
        parts.append(
            f"it runs {', '.join(bare)} from PATH, which this PATH does not find (the agent's may differ), "
            "so its hooks only log that they cannot run and its MCP server does not start; install "
            f"kirolearn where that PATH finds it (pipx install kirolearn), or re-run {again} without "
            "--portable"
        )
    return f"{agent}: {entry['path']}: " + "; and ".join(parts)


def _wiring_clashes():
    """Kiro-side clashes: a workspace agent named like ours, and classic + v3 hooks for one session."""
    from kirolearn.core.project import find_project_root
    from kirolearn.install.agents import kiro as kiro_install

    here, is_global = find_project_root(os.getcwd())
    extra = [] if is_global else [here]
    for path in kiro_install.agent_conflicts(extra):
        yield (
            "WARN",
            (
                f"{path} and ~/.kiro/agents/kirolearn.json are both named kirolearn: Kiro warns about the "
                "conflict; run `kirolearn uninstall --project` for that project and re-run "
                "`kirolearn install --project` (it no longer writes a workspace agent)"
            ),
        )
    for project in kiro_install.double_wiring(extra):
        yield (
            "WARN",
            (
                f"{project} has kirolearn's v3 hook file, which Kiro CLI >= 3 runs for every agent: start "
                "`kiro-cli chat` there without `--agent kirolearn`, or each hook runs twice"
            ),
        )


def semantic_checks(conf):
    """Can the embedding model load, and how many records have vectors of it."""
    from kirolearn.recall.embeddings import registry as embeddings

    usable, message = embeddings.check(conf)
    yield ("OK" if usable else "WARN"), message
    from kirolearn.recall import (
        client,  # the recall server: whether the hook gets the model's answers
    )

    answer = client.ask({"op": "ping"}, deadline=1.0)
    yield (
        "OK",
        (
            f"recall server up (pid {answer.get('pid')}, model {answer.get('model') or 'none: words only'})"
            if answer
            else "recall server not running: the prompt hook recalls by words alone "
            "(`kirolearn serve-recall`, `kirolearn drain --watch`, or `kirolearn schedule --recall-server`)"
        ),
    )
    if not usable or not os.path.exists(paths.db_path()):
        return
    model = embeddings.from_settings(conf)
    if model is None:
        return
    from kirolearn.store.backends import open_reading

    store = open_reading(budget=5.0)
    if store is None:
        return
    with store:
        counts = store.derived().vector_counts()
        total = store.counts()["records"]
    have = counts.get(model.model_id, 0)
    # vectors of an earlier model (embeddings.model changed, or a new default)
    others = ", ".join(f"{n} have vectors of {m}" for m, n in sorted(counts.items()) if m != model.model_id)
    if have < total:
        yield (
            "WARN",
            (
                f"{total - have} of {total} records have no {model.model_id} vector yet"
                + (f" ({others}, which search no longer uses)" if others else "")
                + ": the next drain adds them, or run `kirolearn reindex`"
            ),
        )
