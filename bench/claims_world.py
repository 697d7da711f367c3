"""A second, independent history generator for the memory marks: small worlds of projects whose truth
is known because this module built them.

Each scenario is one project folder (a real git repository, or, for some, a folder with only a
`pyproject.toml` marker) holding one config file of a kind: Python `settings.py` constants, a
TypeScript `config.ts`, a `package.json` dependency, Go constants or a `go.mod` requirement, a TOML
file with `[staging]` and `[production]` tables, YAML, JSON or a `.env` file. Agents (Kiro CLI,
Claude Code, Copilot CLI, Codex CLI, each with its own payload shape) work on it through the real
`kirolearn-hook`; the person moves files with `git mv` or plain `mv`, runs a formatter, reverts,
switches branches. The world keeps, for every file, the values it holds, and for every turn what a
faithful memory should make of it. bench/bench_claims.py plays a world and scores kirolearn on it.

    world = World(root, bin_dir, half="tune", per_kind=6)
    world.play()                 # every phase: turns, the person's operations, `kirolearn drain`
    world.scenarios[0].expect    # the checks the scorer runs
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

# a half's seeds: base + scenario index. "fresh": a second held-out half, added after the first
# was read (to check what was fixed on the tune half since), read once
HALF_BASE = {"tune": 0, "heldout": 7919, "fresh": 15485}
AGENTS = ("kiro", "claude-code", "copilot", "codex")
KINDS = ("retune", "keeper", "noop", "echo", "chores")

# --- config files: how each format writes a key, and how its formatter rewrites it ------------------


@dataclass
class ConfigFile:
    """One config file as the world knows it: its entries in order, and whether the formatter ran."""

    fmt: str
    path: str  # relative to the project root
    entries: dict  # key -> value (python values: int or str); a TOML/YAML/JSON key is "section.name"
    pretty: bool = False

    def text(self) -> str:
        return RENDER[self.fmt](self.entries, self.pretty)

    def line(self, key: str, value=None) -> str:
        """The one line (or fragment) that holds `key`, as the file is formatted now."""
        value = self.entries[key] if value is None else value
        return LINE[self.fmt](key, value, self.pretty)


def _q(value, pretty: bool, single_first: bool = True) -> str:
    if isinstance(value, int):
        return str(value)
    quote = '"' if pretty == single_first else "'"
    return f"{quote}{value}{quote}"


def _py_line(key, value, pretty):
    return f"{key} = {_q(value, pretty)}"


def _py(entries, pretty):
    head = '"""Runtime knobs for the service."""\n\nimport os\nimport logging\n\n'
    if pretty:
        head = '"""Runtime knobs for the service."""\n\nimport logging\nimport os\n\n\n'
    body = ("\n" if pretty else "").join(_py_line(k, v, pretty) + "\n" for k, v in entries.items())
    return head + "LOG = logging.getLogger(__name__)\n" + body


def _ts_line(key, value, pretty):
    return f"export const {key} = {_q(value, pretty)}{'' if pretty else ';'}"


def _ts(entries, pretty):
    lines = [_ts_line(k, v, pretty) for k, v in entries.items()]
    return "// generated defaults; edit freely\n" + "\n".join(lines) + "\n"


def _go_line(key, value, pretty):
    lit = str(value) if isinstance(value, int) else f'"{value}"'
    return f"{'    ' if pretty else chr(9)}{key} = {lit}"


def _go(entries, pretty):
    items = "\n".join(_go_line(k, v, pretty) for k, v in entries.items())
    return f'package tuning\n\nconst (\n{items}\n)\n\nfunc Describe() string {{ return "tuning" }}\n'


def _toml_line(key, value, pretty):
    name = key.rpartition(".")[2]
    lit = str(value) if isinstance(value, int) else (f"'{value}'" if pretty else f'"{value}"')
    return f"{name}{'   =   ' if pretty else ' = '}{lit}"


def _toml(entries, pretty):
    out, section = [], None
    for key, value in entries.items():
        scope = key.rpartition(".")[0]
        if scope != section:
            out.append(("\n" if out else "") + f"[{scope}]")
            section = scope
        out.append(_toml_line(key, value, pretty))
    return "\n".join(out) + "\n"


def _yaml_line(key, value, pretty):
    name = key.rpartition(".")[2]
    lit = str(value) if isinstance(value, int) else (f'"{value}"' if pretty else f"'{value}'")
    return f"{name}: {lit}"


def _yaml(entries, pretty):
    out, section, pad = ["# deployment knobs"], None, "    " if pretty else "  "
    for key, value in entries.items():
        scope = key.rpartition(".")[0]
        if scope != section:
            out.append(f"{scope}:")
            section = scope
        out.append(pad + _yaml_line(key, value, pretty))
    return "\n".join(out) + "\n"


def _json_line(key, value, pretty):
    return f'"{key.rpartition(".")[2]}": {json.dumps(value)}'


def _json(entries, pretty):
    tree: dict = {}
    for key, value in entries.items():
        scope, _, name = key.rpartition(".")
        node = tree
        for part in scope.split(".") if scope else ():
            node = node.setdefault(part, {})
        node[name] = value
    if pretty:
        return json.dumps(tree, indent=4, sort_keys=True) + "\n"
    return json.dumps(tree, indent=2) + "\n"


def _env_line(key, value, pretty):
    return f'export {key}="{value}"' if pretty else f"{key}={value}"


def _env(entries, pretty):
    return "# local overrides\n" + "\n".join(_env_line(k, v, pretty) for k, v in entries.items()) + "\n"


def _pkg_line(key, value, pretty):
    return f'"{key.rpartition(".")[2]}": "{value}"'


def _pkg(entries, pretty):
    deps = {k.rpartition(".")[2]: v for k, v in entries.items()}
    body = {"name": "storefront", "version": "0.3.0", "private": True, "dependencies": deps}
    return json.dumps(body, indent=4 if pretty else 2, sort_keys=pretty) + "\n"


def _gomod_line(key, value, pretty):
    return f"{'    ' if pretty else chr(9)}{key} {value}"


def _gomod(entries, pretty):
    reqs = "\n".join(_gomod_line(k, v, pretty) for k, v in entries.items())
    return f"module example.org/fleet\n\ngo 1.22\n\nrequire (\n{reqs}\n)\n"


RENDER = {
    "py": _py,
    "ts": _ts,
    "go": _go,
    "toml": _toml,
    "yaml": _yaml,
    "json": _json,
    "env": _env,
    "pkg": _pkg,
    "gomod": _gomod,
}
LINE = {
    "py": _py_line,
    "ts": _ts_line,
    "go": _go_line,
    "toml": _toml_line,
    "yaml": _yaml_line,
    "json": _json_line,
    "env": _env_line,
    "pkg": _pkg_line,
    "gomod": _gomod_line,
}
FORMATS = tuple(RENDER)


def read_value(fmt: str, text: str, key: str):
    """The value a file's text holds for `key`, read back by this module's own simple means (for the
    sanity test: the world's files must hold what its truth says); None when absent."""
    name = key.rpartition(".")[2]
    if fmt in ("json", "pkg"):
        node = json.loads(text)
        if fmt == "pkg":
            return node.get("dependencies", {}).get(name)
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node
    section = key.rpartition(".")[0] if fmt in ("toml", "yaml") else ""
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if fmt == "toml" and line.startswith("["):
            current = line.strip("[]")
            continue
        if fmt == "yaml" and raw and not raw[0].isspace() and line.endswith(":"):
            current = line[:-1]
            continue
        if section and current != section:
            continue
        if fmt == "gomod":
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return parts[1]
            continue
        found = re.match(
            rf"^(?:export\s+)?(?:const\s+)?{re.escape(name)}\s*[:=]\s*(.+?);?$",
            line,
        )
        if found:
            lit = found.group(1).strip().strip("'\"")  # a .env value is text, quoted or not
            return int(lit) if lit.isdigit() else lit
    return None


# --- what each scenario's config looks like ---------------------------------------------------------

# fmt -> (paths, keys with value pools); a key's pool gives distinct values for its changes
PLANS = {
    "py": (
        ("src/dispatch/settings.py", "courier/conf/settings.py", "settings.py"),
        {
            "PREFETCH_DEPTH": (2, 3, 5, 8, 13),
            "LEDGER_FLUSH_SECONDS": (15, 30, 45, 90),
            "THUMBNAIL_CODEC": ("webp", "avif", "jpeg", "png"),
            "MAX_PARCEL_GRAMS": (500, 750, 1200, 2500),
        },
    ),
    "ts": (
        ("web/src/config.ts", "src/config.ts", "apps/kiosk/config.ts"),
        {
            "pollIntervalMs": (250, 500, 1000, 2000),
            "cartBadgeColor": ("teal", "amber", "plum", "slate"),
            "maxUploadMb": (4, 8, 16, 32),
        },
    ),
    "pkg": (
        ("package.json",),
        {
            "dependencies.zod": ("^3.22.4", "^3.23.8", "^3.24.1", "^3.25.0"),
            "dependencies.dayjs": ("1.11.9", "1.11.10", "1.11.13", "1.11.18"),
        },
    ),
    "go": (
        ("internal/tuning/limits.go", "pkg/tuning/limits.go"),
        {
            "DrainBatch": (16, 32, 64, 128),
            "ProbeRegion": ("eu-west", "us-east", "ap-south", "sa-east"),
            "Lanes": (2, 4, 6, 12),
        },
    ),
    "gomod": (
        ("go.mod",),
        {
            "github.com/nats-io/nats.go": ("v1.31.0", "v1.34.1", "v1.37.0", "v1.38.2"),
            "golang.org/x/sync": ("v0.6.0", "v0.7.0", "v0.8.0", "v0.10.0"),
        },
    ),
    "toml": (
        ("deploy/app.toml", "conf/runtime.toml"),
        {
            "staging.log_level": ("debug", "info", "trace", "verbose"),
            "staging.replicas": (1, 2, 4, 6),
            "production.log_level": ("warn", "error", "notice", "critical"),
            "production.replicas": (3, 5, 7, 9),
        },
    ),
    "yaml": (
        ("ops/values.yaml", "chart/values.yaml"),
        {
            "gateway.timeout_ms": (800, 1500, 3000, 4500),
            "gateway.region": ("fra", "iad", "sin", "gru"),
            "queue.depth": (10, 40, 80, 160),
        },
    ),
    "json": (
        ("config/limits.json", "etc/limits.json"),
        {
            "billing.graceDays": (3, 7, 14, 21),
            "billing.currency": ("EUR", "CHF", "SEK", "NOK"),
            "search.pageWindow": (20, 50, 100, 250),
        },
    ),
    "env": (
        (".env", "services/mailer/.env"),
        {
            "SMTP_POOL": (2, 4, 6, 10),
            "DIGEST_HOUR": (5, 6, 7, 8),
            "BOUNCE_POLICY": ("soft", "hard", "defer", "drop"),
        },
    ),
}
TEST_COMMANDS = {
    "py": "python -m pytest -q tests/test_settings.py",
    "ts": "npx vitest run src/config.test.ts",
    "pkg": "npm ci && npm test",
    "go": "go test ./internal/...",
    "gomod": "go build ./...",
    "toml": "make check-config",
    "yaml": "helm lint chart",
    "json": "node scripts/validate-limits.mjs",
    "env": "./scripts/smoke.sh",
}


# --- turns and how each agent says them -------------------------------------------------------------


@dataclass
class Step:
    """One tool call of a turn. op: edit | run | recall."""

    op: str
    path: str = ""  # edit: relative to the project root
    old: str = ""
    new: str = ""
    command: str = ""
    output: str = ""
    ok: bool = True
    query: str = ""
    key: str = ""  # edit: the key it sets, and to what (old/new lines are made when played)
    value: object = None


@dataclass
class Turn:
    label: str
    agent: str
    prompt: str
    answer: str
    steps: list = field(default_factory=list)
    cwd: str = ""  # relative to the project root ('' = the root)
    session: str = ""


def _cc_base(sid, cwd, event, home):
    return {
        "session_id": sid,
        "transcript_path": os.path.join(home, ".claude", "projects", "x", sid + ".jsonl"),
        "cwd": cwd,
        "hook_event_name": event,
        "permission_mode": "acceptEdits",
    }


def agent_calls(turn: Turn, root: str, home: str, recall_text: str = "") -> list:
    """The hook invocations of one turn in its agent's own shape: [(argv tail, payload)]."""
    cwd = os.path.join(root, turn.cwd) if turn.cwd else root
    sid, agent = turn.session, turn.agent
    calls = []

    def where(step):  # the path as the agent names it: absolute, or relative to its cwd
        full = os.path.join(root, step.path)
        return os.path.relpath(full, cwd) if turn.cwd else full

    if agent == "kiro":
        calls.append(
            (
                [],
                {"hook_event_name": "userPromptSubmit", "cwd": cwd, "session_id": sid, "prompt": turn.prompt},
            )
        )
        for s in turn.steps:
            if s.op == "edit":
                name, args = (
                    "fs_write",
                    {"command": "str_replace", "path": where(s), "old_str": s.old, "new_str": s.new},
                )
                resp = (
                    {"success": True, "result": ["Replaced 1 occurrence"]}
                    if s.ok
                    else {
                        "success": False,
                        "error": "no match for old_str: the file changed on disk",
                    }
                )
            elif s.op == "run":
                name, args = "execute_bash", {"command": s.command, "summary": "run it"}
                resp = {
                    "success": True,
                    "result": [{"exit_status": "0" if s.ok else "1", "stdout": s.output, "stderr": ""}],
                }
            else:
                name, args = "@kirolearn/search_memory", {"query": s.query}
                resp = {"success": True, "result": [recall_text]}
            calls.append(
                (
                    [],
                    {
                        "hook_event_name": "postToolUse",
                        "cwd": cwd,
                        "session_id": sid,
                        "tool_name": name,
                        "tool_input": args,
                        "tool_response": resp,
                    },
                )
            )
        calls.append(
            (
                [],
                {"hook_event_name": "stop", "cwd": cwd, "session_id": sid, "assistant_response": turn.answer},
            )
        )
    elif agent in ("claude-code", "codex"):
        argv = ["--agent", agent]
        first = _cc_base(sid, cwd, "UserPromptSubmit", home)
        if agent == "codex":
            first.update(turn_id="t-" + sid, model="gpt-5-codex")
        calls.append((argv, {**first, "prompt": turn.prompt}))
        for n, s in enumerate(turn.steps):
            body = _cc_base(sid, cwd, "PostToolUse", home)
            body["tool_use_id"] = f"call_{n}"
            if agent == "claude-code":
                if s.op == "edit":
                    body.update(
                        tool_name="Edit",
                        tool_input={"file_path": where(s), "old_string": s.old, "new_string": s.new},
                    )
                    if s.ok:
                        body["tool_response"] = {"filePath": where(s), "oldString": s.old, "newString": s.new}
                    else:
                        body.update(
                            hook_event_name="PostToolUseFailure", error="String to replace not found in file."
                        )
                elif s.op == "run":
                    body.update(tool_name="Bash", tool_input={"command": s.command, "description": "run it"})
                    if s.ok:
                        body["tool_response"] = {"stdout": s.output, "stderr": "", "interrupted": False}
                    else:
                        body.update(hook_event_name="PostToolUseFailure", error="Exit code 1\n" + s.output)
                else:
                    body.update(
                        tool_name="mcp__kirolearn__search_memory",
                        tool_input={"query": s.query},
                        tool_response=recall_text,
                    )
            else:
                if s.op == "edit":
                    rel = where(s)
                    patch = (
                        f"*** Begin Patch\n*** Update File: {rel}\n@@\n-{s.old}\n+{s.new}\n*** End Patch\n"
                    )
                    body.update(tool_name="apply_patch", tool_input={"input": patch})
                    body["tool_response"] = (
                        {"exit_code": 0, "output": f"Success. Updated the following files:\nM {rel}"}
                        if s.ok
                        else {
                            "exit_code": 1,
                            "output": "apply_patch verification failed: hunk does not apply",
                        }
                    )
                elif s.op == "run":
                    body.update(tool_name="Bash", tool_input={"command": s.command})
                    body["tool_response"] = {"exit_code": 0 if s.ok else 1, "output": s.output}
                else:
                    body.update(
                        tool_name="mcp__kirolearn__search_memory",
                        tool_input={"query": s.query},
                        tool_response=recall_text,
                    )
            calls.append((argv, body))
        last = _cc_base(sid, cwd, "Stop", home)
        calls.append((argv, {**last, "stop_hook_active": False, "last_assistant_message": turn.answer}))
    elif agent == "copilot":
        stamp = int(time.time() * 1000)
        calls.append(
            (
                ["--agent", "copilot", "userPromptSubmitted"],
                {"sessionId": sid, "timestamp": stamp, "cwd": cwd, "prompt": turn.prompt},
            )
        )
        for s in turn.steps:
            if s.op == "edit":
                name, args = "edit", {"path": where(s), "old_str": s.old, "new_str": s.new}
                result = {
                    "resultType": "success",
                    "textResultForLlm": f"File {where(s)} updated with changes.",
                }
                if not s.ok:
                    result = {"resultType": "failure", "textResultForLlm": "No match found for old_str."}
            elif s.op == "run":
                code = 0 if s.ok else 1
                name, args = "bash", {"command": s.command, "description": "run it"}
                result = {
                    "resultType": "success",
                    "textResultForLlm": f"{s.output}\n<shellId: 0 completed with exit code {code}>",
                }
            else:
                name, args = "kirolearn-search_memory", {"query": s.query}
                result = {"resultType": "success", "textResultForLlm": recall_text}
            calls.append(
                (
                    ["--agent", "copilot", "postToolUse"],
                    {
                        "sessionId": sid,
                        "timestamp": stamp,
                        "cwd": cwd,
                        "toolName": name,
                        "toolArgs": args,
                        "toolResult": result,
                    },
                )
            )
        transcript = os.path.join(home, ".copilot", "session-state", sid, "events.jsonl")
        os.makedirs(os.path.dirname(transcript), exist_ok=True)
        with open(transcript, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"type": "user.message", "data": {"content": turn.prompt}}) + "\n")
            fh.write(
                json.dumps(
                    {"type": "assistant.message", "data": {"content": turn.answer, "toolRequests": []}}
                )
                + "\n"
            )
        calls.append(
            (
                ["--agent", "copilot", "agentStop"],
                {
                    "sessionId": sid,
                    "timestamp": stamp,
                    "cwd": cwd,
                    "transcriptPath": transcript,
                    "stopReason": "end_turn",
                },
            )
        )
    else:
        raise ValueError(f"no payload shape for agent {agent!r}")
    return calls


# --- a project: a folder, maybe git, one config file -------------------------------------------------

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Rin Okafor",
    "GIT_AUTHOR_EMAIL": "rin@example.org",
    "GIT_COMMITTER_NAME": "Rin Okafor",
    "GIT_COMMITTER_EMAIL": "rin@example.org",
    "GIT_CONFIG_NOSYSTEM": "1",
}


class Project:
    def __init__(self, root: str, use_git: bool):
        self.root, self.use_git = root, use_git
        os.makedirs(root, exist_ok=True)
        if use_git:
            self.git("init", "-q", "-b", "trunk")
        else:
            self.put("pyproject.toml", '[project]\nname = "sidecar"\nversion = "0.1.0"\n')

    def git(self, *args) -> str:
        env = {**os.environ, **GIT_ENV}
        done = subprocess.run(
            ["git", "-C", self.root, *args], capture_output=True, text=True, env=env, timeout=60
        )
        if done.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed in {self.root}: {done.stderr.strip()}")
        return done.stdout

    def put(self, rel: str, text: str) -> None:
        full = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)

    def get(self, rel: str) -> str | None:
        try:
            with open(os.path.join(self.root, rel), encoding="utf-8", newline="") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def commit(self, message: str) -> None:
        if self.use_git:
            self.git("add", "-A")
            self.git("commit", "-q", "--allow-empty", "-m", message)


# --- scenarios ---------------------------------------------------------------------------------------


@dataclass
class Scenario:
    """One story in one project: phased actions, the world's files, and what a true memory says."""

    name: str
    kind: str
    variant: str
    seed: int
    project: Project
    config: ConfigFile
    phases: dict = field(default_factory=dict)  # phase -> [("turn", Turn) | ("op", name, fn)]
    expect: list = field(default_factory=list)  # checks (tuples) for the scorer
    turns: dict = field(default_factory=dict)  # label -> Turn
    recall_queries: dict = field(default_factory=dict)  # turn label -> search query for its recall text
    ops_done: list = field(default_factory=list)
    moved_from: str = ""  # the config's path before the person moved it
    recalled: dict = field(default_factory=dict)  # (query, drains so far) -> what search_memory returned


QUESTION_FORMS = (
    "remind me, which value does {name} have right now?",
    "quick check before the release: what is {name} at?",
    "is {name} still what we agreed on? just tell me the number",
)
HYPOTHETICAL_FORMS = (
    "suppose {name} went to {value}: would the smoke suite still pass? leave the file alone for now",
    "thinking aloud: what breaks if {name} were {value}? don't edit anything",
    "hypothetically, {name} = {value} — worth it? answer only, no changes",
)
CHANGE_FORMS = (
    "please move {name} to {value} in {path} and run the checks",
    "we need {name} at {value} now ({path}); update it and verify",
    "switch {name} over to {value} in {path}, then make sure the checks are green",
)


def name_of(key: str) -> str:
    """A key as people say it: the setting's own name; a Go module path whole."""
    return key if "/" in key else key.rpartition(".")[2]


def query_of(key: str) -> str:
    """The words a person searches memory with for a key."""
    return key.rsplit("/", 1)[-1].split(".")[0] if "/" in key else name_of(key)


def _value_pool(fmt: str, key: str):
    pool = PLANS[fmt][1][key]
    assert len(set(pool)) >= 4, f"{key}: a pool needs four distinct values (start, two changes, a wild one)"
    return pool


class Builder:
    """Builds scenarios; each one its own project under `base`."""

    def __init__(self, base: str, home: str):
        self.base, self.home = base, home

    def _start(
        self, kind: str, variant: str, seed: int, rng: random.Random, fmt: str | None = None, use_git=True
    ):
        fmt = fmt or FORMATS[(seed + KINDS.index(kind)) % len(FORMATS)]  # every format in a half
        paths, pools = PLANS[fmt]
        name = f"{kind}-{variant}-{seed}"
        project = Project(os.path.join(self.base, name), use_git)
        entries = {k: pool[0] for k, pool in pools.items()}
        config = ConfigFile(fmt, rng.choice(paths), entries)
        project.put(config.path, config.text())
        project.put("README.md", f"# {name}\n\nA small service used by the claims benchmark.\n")
        project.commit("scaffold")
        return Scenario(name, kind, variant, seed, project, config)

    def _session(self, sc: Scenario, label: str) -> str:
        return f"{sc.name}-{label}"

    def add_turn(self, sc: Scenario, phase: int, turn: Turn, query: str = "") -> Turn:
        turn.session = turn.session or self._session(sc, turn.label)
        sc.turns[turn.label] = turn
        sc.phases.setdefault(phase, []).append(("turn", turn))
        if query:
            sc.recall_queries[turn.label] = query
        return turn

    def add_op(self, sc: Scenario, phase: int, name: str, fn) -> None:
        sc.phases.setdefault(phase, []).append(("op", name, fn))

    def change_turn(
        self,
        sc: Scenario,
        label: str,
        agent: str,
        key: str,
        value,
        rng,
        *,
        ok=True,
        tests_ok=True,
        cwd="",
        undo=None,
    ):
        """A turn that edits `key` to `value` and runs the checks; when played the file is written
        first, as the agent does. `undo`: the agent puts this value back itself after failed checks."""
        cfg = sc.config
        name = name_of(key)
        prompt = rng.choice(CHANGE_FORMS).format(name=name, value=value, path=cfg.path)
        done = ok and tests_ok
        answer = (
            f"{name} is {value} now; the checks ran."
            if done
            else f"Could not finish: {name} stays as it was."
        )
        turn = Turn(label, agent, prompt, answer, cwd=cwd)
        turn.steps = [Step("edit", key=key, value=value, ok=ok)]
        if ok:
            output = "all checks passed" if tests_ok else "1 check failed: limits out of range"
            turn.steps.append(Step("run", command=TEST_COMMANDS[cfg.fmt], output=output, ok=tests_ok))
        if undo is not None:
            turn.steps.append(Step("edit", key=key, value=undo))
        return turn

    def question_turn(self, sc, label, agent, key, rng, *, recall=False, form=None):
        name = name_of(key)
        turn = Turn(label, agent, (form or rng.choice(QUESTION_FORMS)).format(name=name), "")
        if recall:
            turn.steps = [Step("recall", query=query_of(key))]
        return turn

    # each kind: its variants

    def retune(self, seed, rng, variant):
        """A setting changed twice by succeeded writes; between them the person may move or reformat."""
        fmt = {"nogit": "py", "subdir": "ts", "section": "toml"}.get(variant) or self._movable(rng, variant)
        sc = self._start("retune", variant, seed, rng, fmt=fmt, use_git=variant != "nogit")
        key = self._key(sc, rng)
        pool = _value_pool(sc.config.fmt, key)
        agents = rng.sample(AGENTS, 2)
        cwd = sc.config.path.split("/")[0] if variant == "subdir" and "/" in sc.config.path else ""
        self.add_turn(sc, 1, self.change_turn(sc, "first", agents[0], key, pool[1], rng, cwd=cwd))
        self.add_op(sc, 1, "commit", lambda: sc.project.commit("first change"))
        self._user_move(sc, 2, variant)
        self.add_turn(sc, 2, self.change_turn(sc, "second", agents[1], key, pool[2], rng))
        sc.expect += [
            ("superseded", "first", "second"),
            ("newer_first", query_of(key), "second", "first"),
            ("unmarked", "second"),
            ("not_merged", "first"),
        ]
        if seed % 2 == 0:
            sc.expect.append(("restore_lasts", "first", "superseded_by"))
        return sc

    def keeper(self, seed, rng, variant):
        """A setting written once; the person's operations since never change its value."""
        fmt = {"section": "toml", "subdir": "ts", "nogit": "env"}.get(variant) or self._movable(rng, variant)
        sc = self._start("keeper", variant, seed, rng, fmt=fmt, use_git=variant != "nogit")
        key = self._key(sc, rng, section="production" if variant == "section" else None)
        pool = _value_pool(sc.config.fmt, key)
        agents = rng.sample(AGENTS, 2)
        cwd = sc.config.path.split("/")[0] if variant == "subdir" and "/" in sc.config.path else ""
        self.add_turn(sc, 1, self.change_turn(sc, "kept", agents[0], key, pool[1], rng, cwd=cwd))
        self.add_op(sc, 1, "commit", lambda: sc.project.commit("kept change"))
        if variant in ("section", "otherline"):
            # the agent changes the same name in the other section, or another key of the file
            if variant == "section":
                other = "staging." + key.rpartition(".")[2]
            else:
                other = next(k for k in sc.config.entries if k != key)
            opool = _value_pool(sc.config.fmt, other)
            self.add_turn(sc, 2, self.change_turn(sc, "neighbour", agents[1], other, opool[1], rng))
            sc.expect.append(("unmarked", "neighbour"))
        else:
            if variant == "subdir" and cwd:
                # the same relative path, read from the root instead of the agent's folder: a twin
                twin = ConfigFile(sc.config.fmt, sc.config.path.split("/", 1)[1], dict(sc.config.entries))

                def make_twin():
                    sc.project.put(twin.path, twin.text())
                    sc.project.commit("a root copy of the config")

                def rewrite_twin():
                    twin.entries[key] = pool[2]
                    sc.project.put(twin.path, twin.text())

                self.add_op(sc, 0, "root twin", make_twin)
                self.add_op(sc, 2, "rewrite the root twin", rewrite_twin)
            else:
                self._user_move(sc, 2, variant)
            aside = Turn(
                "aside",
                agents[1],
                "what changed in the working tree since this morning?",
                "Only housekeeping; nothing in the config.",
                steps=[Step("run", command="git status --short", output="")],
            )
            self.add_turn(sc, 2, aside)
        sc.expect.append(("unmarked", "kept"))
        return sc

    def noop(self, seed, rng, variant):
        """A setting written once, then turns that must not change what memory says about it."""
        sc = self._start("noop", variant, seed, rng)
        key = self._key(sc, rng)
        name = name_of(key)
        pool = _value_pool(sc.config.fmt, key)
        kept, wild = pool[1], pool[-1]
        agents = list(AGENTS)
        rng.shuffle(agents)
        self.add_turn(sc, 1, self.change_turn(sc, "truth", agents[0], key, kept, rng))
        self.add_op(sc, 1, "commit", lambda: sc.project.commit("truth"))
        talk = self.question_turn(sc, "talk", agents[1], key, rng)
        talk.answer = f"{name} is {kept} at the moment; I did not touch anything."
        self.add_turn(sc, 2, talk)
        hypo = Turn("hypo", agents[2], rng.choice(HYPOTHETICAL_FORMS).format(name=name, value=wild), "")
        hypo.answer = (
            f"With {name} = {wild} the limits check would likely fail; I left {sc.config.path} as it is."
        )
        self.add_turn(sc, 2, hypo)
        self.add_turn(sc, 2, self.change_turn(sc, "failed", agents[3], key, wild, rng, ok=False))
        if variant == "checkout":  # a succeeded write the person throws away before the drain

            def discard():
                sc.project.git("checkout", "--", sc.config.path)
                sc.config.entries[key] = kept

            self.add_turn(sc, 2, self.change_turn(sc, "discarded", agents[0], key, wild, rng))
            self.add_op(sc, 2, "git checkout", discard)
        elif variant == "revert":  # committed, then `git revert`

            def revert():
                sc.project.commit("try the wild value")
                sc.project.git("revert", "--no-edit", "HEAD")
                sc.config.entries[key] = kept

            self.add_turn(sc, 2, self.change_turn(sc, "discarded", agents[0], key, wild, rng))
            self.add_op(sc, 2, "git revert", revert)
        else:  # the write succeeded, the checks failed, and the agent put the value back itself
            self.add_turn(
                sc, 2, self.change_turn(sc, "undone", agents[0], key, wild, rng, tests_ok=False, undo=kept)
            )
        sc.expect += [
            ("unmarked", "truth"),
            ("top", query_of(key), "truth", 5),
            ("no_claim", ["talk", "hypo", "failed"]),
        ]
        return sc

    def echo(self, seed, rng, variant):
        """A setting, then the same question three times answered from memory, then a real change."""
        sc = self._start("echo", variant, seed, rng)
        key = self._key(sc, rng)
        name = name_of(key)
        pool = _value_pool(sc.config.fmt, key)
        agents = list(AGENTS)
        rng.shuffle(agents)
        self.add_turn(sc, 1, self.change_turn(sc, "origin", agents[0], key, pool[1], rng))
        self.add_op(sc, 1, "commit", lambda: sc.project.commit("origin"))
        form = rng.choice(QUESTION_FORMS)
        labels = []
        for n in range(3):
            q = self.question_turn(sc, f"echo{n}", agents[1], key, rng, recall=True, form=form)
            q.answer = f"From memory: {name} is {pool[1]}."
            self.add_turn(sc, 2, q, query=query_of(key))
            labels.append(q.label)
        self.add_turn(sc, 3, self.change_turn(sc, "change", agents[2], key, pool[2], rng))
        sc.expect += [
            ("cites", labels, "origin"),
            ("echo_below", query_of(key), labels, "origin", 2),
            ("repeats", labels),
            ("superseded", "origin", "change"),
            ("newer_first", query_of(key), "change", "origin"),
            ("echo_below", query_of(key), labels, "change", 3),
            ("unmarked", "change"),
        ]
        return sc

    CHORE_COMMANDS = {
        "pytest": (
            "python -m pytest -q tests/test_refunds.py",
            "python -m pytest -q tests/test_shipping.py",
            "python -m pytest -q tests/test_refunds.py -k partial",
        ),
        "terraform": (
            "terraform -chdir=infra/staging plan -input=false",
            "terraform -chdir=infra/prod plan -input=false",
            "terraform -chdir=infra/staging apply -input=false",
        ),
        "gotest": (
            "go test ./pkg/ledger/...",
            "go test ./pkg/courier/...",
            "go test -run TestRefund ./pkg/ledger/...",
        ),
        "workspace": (
            "npm run build --workspace admin",
            "npm run build --workspace kiosk",
            "npm run build --workspace admin -- --mode staging",
        ),
    }
    CHORE_ASKS = ("run {c} for me", "again please: {c}", "one more time, {c}", "last run before lunch: {c}")

    def chores(self, seed, rng, variant):
        """The same command with the same arguments, three times; look-alikes that differ in target."""
        sc = self._start("chores", variant, seed, rng, fmt=rng.choice(("py", "go", "toml")))
        same_cmd, *alikes = self.CHORE_COMMANDS[variant]
        agents = list(AGENTS)
        rng.shuffle(agents)
        same = []
        for n in range(4):
            turn = Turn(
                f"same{n}",
                agents[n % 2],
                self.CHORE_ASKS[n].format(c=f"`{same_cmd}`"),
                "Done, it passed.",
                steps=[Step("run", command=same_cmd, output="ok: 12 passed")],
            )
            if n < 3:
                self.add_turn(sc, 1 + n % 2, turn)
                same.append(turn.label)
            else:  # played in the restore phase only
                turn.session = self._session(sc, turn.label)
                sc.turns[turn.label] = turn
        other = []
        for n, cmd in enumerate(alikes):
            turn = Turn(
                f"alike{n}",
                agents[2 + n % 2],
                f"please run `{cmd}`",
                "Done, it passed.",
                steps=[Step("run", command=cmd, output="ok: 12 passed")],
            )
            self.add_turn(sc, 1 + n % 2, turn)
            other.append(turn.label)
        sc.expect += [
            ("repeats", same),
            ("apart", [same, [other[0]], [other[1]]]),
            ("restore_lasts", "same0", "merged_into"),
        ]
        return sc

    # helpers

    def _movable(self, rng, variant):
        """A format for the variant: a moved file is one a project keeps under another name too."""
        if variant in ("gitmv", "mv"):
            movable = [f for f in FORMATS if f not in ("pkg", "gomod")]
            return movable[(rng.randrange(len(movable)) + len(variant)) % len(movable)]
        return None

    def _key(self, sc, rng, section=None):
        keys = [k for k in sc.config.entries if section is None or k.startswith(section + ".")]
        if sc.config.fmt == "toml" and section is None:
            keys = [k for k in keys if k.startswith(rng.choice(("staging.", "production.")))] or keys
        return rng.choice(keys)

    def _user_move(self, sc, phase, variant):
        cfg, project = sc.config, sc.project

        def moved_path():
            head, tail = os.path.split(cfg.path)
            stem, ext = os.path.splitext(tail)
            if tail.startswith(".env"):
                return os.path.join(head, "config", tail) if head else os.path.join("config", tail)
            new_tail = ("base_" + tail) if ext != ".mod" else tail
            return (
                os.path.join(head, "moved", new_tail)
                if tail in ("package.json", "go.mod")
                else os.path.join(head, new_tail)
            )

        if variant == "gitmv" and cfg.fmt not in ("pkg", "gomod"):
            dest = moved_path()

            def op():
                os.makedirs(os.path.join(project.root, os.path.dirname(dest)), exist_ok=True)
                project.git("mv", cfg.path, dest)
                project.commit("move the config")
                sc.moved_from, cfg.path = cfg.path, dest

            self.add_op(sc, phase, "git mv", op)
        elif variant in ("mv", "nogit") and cfg.fmt not in ("pkg", "gomod"):
            dest = moved_path()

            def op():
                os.makedirs(os.path.join(project.root, os.path.dirname(dest)), exist_ok=True)
                os.replace(os.path.join(project.root, cfg.path), os.path.join(project.root, dest))
                sc.moved_from, cfg.path = cfg.path, dest

            self.add_op(sc, phase, "mv (uncommitted)", op)
        elif variant == "format":

            def op():
                cfg.pretty = True
                project.put(cfg.path, cfg.text())

            self.add_op(sc, phase, "formatter", op)
        elif variant == "branch":

            def op():
                if project.use_git:
                    project.git("switch", "-q", "-c", "topic/tidy")
                    project.put("NOTES.md", "tidy-up notes\n")
                    project.commit("notes on a branch")

            self.add_op(sc, phase, "branch switch", op)
        elif variant == "revert":

            def op():
                project.put("CHANGELOG.md", "- unrelated entry\n")
                project.commit("unrelated")
                project.git("revert", "--no-edit", "HEAD")

            self.add_op(sc, phase, "git revert (unrelated)", op)


VARIANTS = {
    "retune": ("plain", "gitmv", "mv", "format", "branch", "nogit", "subdir", "section"),
    # a half of 8 per kind plays the first 8 (the held-out half's seeds start at another one)
    "keeper": ("gitmv", "mv", "format", "branch", "revert", "section", "subdir", "nogit", "otherline"),
    "noop": ("selfundo", "checkout", "revert"),
    "echo": ("plain",),
    "chores": ("pytest", "terraform", "gotest", "workspace"),
}


# --- the world: a home, projects, phases, and the drain between them ---------------------------------


class World:
    """Scenarios over one KIROLEARN_HOME, played phase by phase through the real console scripts."""

    def __init__(
        self,
        base: str,
        bin_dir: str,
        half: str = "tune",
        per_kind: int = 6,
        jobs: int = 2,
        log=None,
        env_extra=None,
        drain=True,
    ):
        self.base, self.bin = base, os.path.abspath(bin_dir)
        self.home = os.path.join(base, "kirolearn-home")
        self.user_home = os.path.join(base, "user-home")
        os.makedirs(self.user_home, exist_ok=True)
        self.jobs, self.log = jobs, log or (lambda msg: None)
        self.draining = drain  # False: hooks only, no drain and no memory to recall (the sanity test)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KIROLEARN_")},
            "KIROLEARN_HOME": self.home,
            "HOME": self.user_home,
            **(env_extra or {}),
        }
        self.hook_calls, self.hook_failures, self.drains = 0, [], []
        self._lock = threading.Lock()
        builder = Builder(os.path.join(base, "projects"), self.user_home)
        self.scenarios: list[Scenario] = []
        offset = HALF_BASE[half]
        for kind in KINDS:
            variants = VARIANTS[kind]
            for i in range(per_kind):
                seed = offset + i
                rng = random.Random(f"{kind}:{seed}")
                self.scenarios.append(getattr(builder, kind)(seed, rng, variants[seed % len(variants)]))
        self.builder = builder

    # processes

    def hook(self, argv, payload, cwd):
        done = subprocess.run(
            [os.path.join(self.bin, "kirolearn-hook"), *argv],
            input=json.dumps(payload).encode(),
            env=self.env,
            cwd=cwd,
            capture_output=True,
            timeout=60,
        )
        with self._lock:
            self.hook_calls += 1
            if done.returncode != 0:
                self.hook_failures.append(
                    (argv, done.returncode, done.stderr.decode("utf-8", "replace")[-300:])
                )

    def cli(self, *args, cwd=None, timeout=300):
        done = subprocess.run(
            [os.path.join(self.bin, "kirolearn"), *args],
            env=self.env,
            cwd=cwd or self.base,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return done.returncode, done.stdout, done.stderr

    def cli_json(self, *args, cwd=None):
        code, out, err = self.cli(*args, "--json", cwd=cwd)
        if code != 0:
            return None
        try:
            return json.loads(out)
        except ValueError:
            return None

    def drain(self, label: str):
        started = time.monotonic()
        code, out, err = self.cli("drain", "--flush", "--json")
        try:
            stats = json.loads(out) if code == 0 else {}
        except ValueError:
            stats = {}
        self.drains.append(
            {
                "label": label,
                "code": code,
                "seconds": time.monotonic() - started,
                "stats": stats,
                "err": err[-300:],
            }
        )

    # playing

    def play_turn(self, sc: Scenario, turn: Turn):
        """Do what the agent did to the files, then tell the hook in the agent's shape."""
        cfg = sc.config
        for step in turn.steps:
            if step.op != "edit":
                continue
            step.path = cfg.path
            step.old, step.new = cfg.line(step.key), cfg.line(step.key, step.value)
            if step.ok:
                cfg.entries[step.key] = step.value
        if any(s.op == "edit" and s.ok for s in turn.steps):
            sc.project.put(cfg.path, cfg.text())
        recall_text = ""
        if turn.label in sc.recall_queries and self.draining:
            # memory answers the same question the same way until the next drain: asked once
            asked = (sc.recall_queries[turn.label], len(self.drains))
            if asked not in sc.recalled:
                found = self.cli_json("search", asked[0], "--project", sc.project.root)
                sc.recalled[asked] = json.dumps(found if found is not None else [], ensure_ascii=False)
            recall_text = sc.recalled[asked]
        for argv, payload in agent_calls(turn, sc.project.root, self.user_home, recall_text):
            self.hook(argv, payload, payload.get("cwd") or sc.project.root)

    def play_phase(self, phase: int):
        def one(sc):
            for item in sc.phases.get(phase, ()):
                if item[0] == "turn":
                    self.play_turn(sc, item[1])
                else:
                    item[2]()
                    sc.ops_done.append(item[1])

        with ThreadPoolExecutor(self.jobs) as pool:
            list(pool.map(one, self.scenarios))

    def play(self, after_phase=None):
        """Every phase in order: its turns and operations, then a drain; `after_phase(n)` then."""
        phases = sorted({p for sc in self.scenarios for p in sc.phases})
        if 0 in phases:
            self.play_phase(0)
        for phase in (p for p in phases if p):
            started = time.monotonic()
            self.play_phase(phase)
            if self.draining:
                self.drain(f"phase {phase}")
            self.log(f"phase {phase}: played and drained in {time.monotonic() - started:.1f} s")
            if after_phase:
                after_phase(phase)

    def play_extra(self, sc: Scenario, label: str):
        self.play_turn(sc, sc.turns[label])
