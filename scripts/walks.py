"""Measure the two walks of issue #44: a hook event's way to the database, and a prompt's recall.

    .venv/bin/python scripts/walks.py [--json]

Under a temporary KIROLEARN_HOME (and HOME), with a project that has a git remote:
  (a) one real `postToolUse` hook call (kirolearn.hook.handle, its stdin JSON) into the spool, then
      one `kirolearn drain --flush` (kirolearn.Memory.drain) into a real SQLite store; the drain's
      `ingest` (spool file to stored row) is also counted alone;
  (b) one prompt's recall against that store (kirolearn.recall.context.for_event, what the prompt
      hook runs), after a few turns were stored first (not measured).
Each measured step runs in a fresh interpreter under sys.setprofile, which records every call of a
function of a `kirolearn.*` module (module bodies, i.e. imports, are not counted). Printed per walk:
  modules      distinct kirolearn modules whose functions ran
  re-entries   calls that entered a module from another one, after the first entry of that module
  capture/     calls that entered kirolearn.capture.* from outside it
  project_id   calls of kirolearn.core.project.project_id
  git remote   calls of kirolearn.core.gitremote.identity (a project id's remote, read, not cached)
  json         dumps and loads (json, kirolearn.core.jsonfast) of the event itself
  pydantic     pydantic model validations and dumps
  lex<->reader calls between kirolearn.recall.lexical and kirolearn.store.sqlite.reader, both ways
"""

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEXICAL = "kirolearn.recall.lexical"
READER = "kirolearn.store.sqlite.reader"


class Walk:
    """What the profile hook saw in one process."""

    def __init__(self) -> None:
        self.modules: dict[str, int] = {}  # module -> entries from another module
        self.capture_entries = 0
        self.project_id = 0
        self.event_json = 0
        self.pydantic = 0
        self.crossings = 0
        self.git_remote = 0
        self.ingest: Walk | None = None  # the drain's ingest step alone, when asked for
        self._inside: object = None  # the ingest frame under way

    def __call__(self, frame: object, event: str, arg: object) -> None:
        if self.ingest is not None:
            if self._inside is None and frame.f_code.co_name == "ingest" and event == "call":  # type: ignore[attr-defined]
                if frame.f_globals.get("__name__") == "kirolearn.pipeline.drain":  # type: ignore[attr-defined]
                    self._inside = frame
            if self._inside is not None:
                self.ingest(frame, event, arg)
                if event == "return" and frame is self._inside:
                    self._inside = None
        if event != "call":
            return
        code = frame.f_code  # type: ignore[attr-defined]
        name = code.co_name
        module = frame.f_globals.get("__name__", "")  # type: ignore[attr-defined]
        if module in ("json", "kirolearn.core.jsonfast") and name in ("dumps", "loads"):
            self._json(frame, name)
        if module.startswith("pydantic") and name in ("model_validate", "model_dump", "model_dump_json"):
            self.pydantic += 1
        if not module.startswith("kirolearn") or name == "<module>":
            return
        back = frame.f_back  # type: ignore[attr-defined]
        caller = back.f_globals.get("__name__", "") if back is not None else ""
        if module == "kirolearn.core.project" and name == "project_id":
            self.project_id += 1
        if module == "kirolearn.core.gitremote" and name == "identity":
            self.git_remote += 1
        if {module, caller} == {LEXICAL, READER}:
            self.crossings += 1
        if caller != module:
            self.modules[module] = self.modules.get(module, 0) + 1
            if module.startswith("kirolearn.capture") and not caller.startswith("kirolearn.capture"):
                self.capture_entries += 1

    def _json(self, frame: object, name: str) -> None:
        local = frame.f_locals  # type: ignore[attr-defined]
        if name == "dumps":
            obj = local.get("obj")
            if isinstance(obj, dict) and "event_id" in obj and "trigger" in obj:
                self.event_json += 1
        else:
            text = local.get("s")
            if isinstance(text, bytes):
                text = text.decode("utf-8", "replace")
            if isinstance(text, str) and '"event_id"' in text and '"trigger"' in text:
                self.event_json += 1

    def figures(self) -> dict[str, Any]:
        return {
            "modules": len(self.modules),
            "re-entries": sum(n - 1 for n in self.modules.values()),
            "capture/": self.capture_entries,
            "project_id": self.project_id,
            "git remote": self.git_remote,
            "json": self.event_json,
            "pydantic": self.pydantic,
            "lex<->reader": self.crossings,
            "names": sorted(self.modules),
        }


def _payload(project: str, name: str, **fields: object) -> bytes:
    return json.dumps({"hook_event_name": name, "cwd": project, "session_id": "walk-1", **fields}).encode()


def _step(step: str, project: str) -> dict[str, Any]:
    """Run one measured step in this (fresh) process; returns its figures."""
    walk = Walk()
    if step == "hook":
        import io

        from kirolearn import hook

        payload = _payload(
            project,
            "postToolUse",
            tool_name="execute_bash",
            tool_input={"command": "pytest -q tests/test_checkout.py"},
            tool_response={"success": True, "result": "3 passed"},
        )
        sys.stdin = io.TextIOWrapper(io.BytesIO(b""))  # capture() is given the bytes
        sys.setprofile(walk)
        hook.handle(["--agent", "kiro"], payload)
        sys.setprofile(None)
    elif step == "drain":
        from kirolearn.memory import Memory

        memory = Memory()
        walk.ingest = Walk()
        sys.setprofile(walk)
        memory.drain(flush=True)
        sys.setprofile(None)
        return dict(walk.figures(), ingest=walk.ingest.figures())
    elif step == "recall":
        from kirolearn.capture import events
        from kirolearn.recall import context

        event = events.build_event(
            "userPromptSubmit",
            {"cwd": project, "session_id": "walk-2", "prompt": "why does the checkout total test fail?"},
        )
        shown: list[str] = []

        def deliver(text: str) -> bool:
            shown.append(text)
            return True

        sys.setprofile(walk)
        context.for_event(event, deliver)
        sys.setprofile(None)
        if not shown:
            raise SystemExit("walks: the recall found nothing to show; the measurement is not of a real walk")
    elif step == "setup":
        from kirolearn import hook
        from kirolearn.memory import Memory

        turns = [
            ("the checkout total test fails on rounding", "fixed: round the checkout total to cents"),
            ("add a retry to the payment client", "the payment client retries three times on 503"),
            ("why is the cart slow?", "the cart query had no index on user_id; added one"),
        ]
        for prompt, outcome in turns:
            hook.handle(["--agent", "kiro"], _payload(project, "userPromptSubmit", prompt=prompt))
            hook.handle(["--agent", "kiro"], _payload(project, "stop", assistant_response=outcome))
        Memory().drain(flush=True)
    return walk.figures()


def _run(step: str, env: "dict[str, str]", project: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--step", step, project],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"walks: step {step} failed:\n{done.stderr[-3000:]}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _add(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {k: a[k] + b[k] for k in a if k != "names"}
    names = sorted(set(a["names"]) | set(b["names"]))
    out["modules"] = len(names)
    out["names"] = names
    return out


def measure() -> "dict[str, dict[str, Any]]":
    with tempfile.TemporaryDirectory(prefix="kirolearn-walks-") as tmp:
        home, user, project = (os.path.join(tmp, n) for n in ("home", "user", "project"))
        for path in (user, os.path.join(project, ".git")):
            os.makedirs(path)
        with open(os.path.join(project, ".git", "config"), "w", encoding="utf-8") as fh:
            fh.write('[remote "origin"]\n\turl = git@github.com:example/shop.git\n')
        env = dict(os.environ, KIROLEARN_HOME=home, HOME=user, KIROLEARN_RAISE_ERRORS="1")
        for key in ("KIRO_SESSION_ID", "KIROLEARN_DISABLE", "KIROLEARN_INTERNAL", "USER_PROMPT"):
            env.pop(key, None)
        _run("setup", env, project)
        hook, drain = _run("hook", env, project), _run("drain", env, project)
        ingest = drain.pop("ingest")
        return {
            "hook": hook,
            "drain (whole pass)": drain,
            "drain: ingest": ingest,
            "event: hook+ingest": _add(hook, ingest),
            "prompt recall": _run("recall", env, project),
        }


COLUMNS = (
    "modules",
    "re-entries",
    "capture/",
    "project_id",
    "git remote",
    "json",
    "pydantic",
    "lex<->reader",
)


def main(argv: "list[str]") -> int:
    if argv[:1] == ["--step"]:
        print(json.dumps(_step(argv[1], argv[2])))
        return 0
    found = measure()
    if "--json" in argv:
        print(json.dumps(found, indent=2))
        return 0
    print(f"{'walk':<20}" + "".join(f"{c:>13}" for c in COLUMNS))
    for walk, figures in found.items():
        print(f"{walk:<20}" + "".join(f"{figures[c]:>13}" for c in COLUMNS))
    if "--modules" in argv:
        for walk, figures in found.items():
            print(f"\n{walk}: " + " ".join(n.removeprefix("kirolearn.") for n in figures["names"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
