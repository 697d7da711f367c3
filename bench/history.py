"""A project's history, replayed for real: the generator behind issue #31 ("Memory that stays true").

From a seed it plans scenarios and plays them in a REAL git repository (a temp folder, `git init`,
the user's commits): agent turns go through the real `kirolearn-hook` console script as the stdin
JSON payloads (or USER_PROMPT variables) each agent sends, with KIROLEARN_HOME in the temp folder
and the repository as the working directory; `kirolearn drain` runs after each day's sessions (the
scheduler's pass), and between days the user commits, deletes, renames and rewrites files.

Nothing here imports kirolearn: its module paths move, its console scripts stay. Only the console
scripts are run, as subprocesses (`--bin DIR`, default /work/main/.venv/bin).

Scenario families (every instance carries its ground truth in truth.json):
  changed_fact  a turn sets a setting (`RETRIES = 3` in config/retry.py), a later session changes it
                ("raised RETRIES from 3 to 7"), sometimes twice. Truth: the newest record ranks above
                the older ones for a query about the setting; each older one is superseded by a later one.
  file_fate     a turn writes a file; later the user deletes it (`git rm` + commit, or a plain `rm`)
                or renames it (`git mv` + commit). Truth: freshness `deleted`, or `current` (rename followed).
                Half of the plain `rm`s come with a new module of the same template the same night, which
                git's default rename detection pairs with the deleted file (still `deleted`).
  rewrite       two turns write two files; the user rewrites one substantially (committed or not), and
                leaves the other alone, `touch`es it, adds one comment line or a few blank lines.
                Truth: `changed` for the rewritten one, `current` for the control.
  outcome       three turns in one failure shape the adapters see: a command that fails (and nothing
                later in the turn succeeds), one that fails then succeeds after a fix, one that just
                succeeds. Truth: outcome `failed`, then not failed (`succeeded`), then `succeeded`.
                When the failure was not on the last day, a fourth turn on a later day runs the failed
                command again with success: the failed record is superseded by it, and by nothing else.
  chore         the same chore 3-5 times in other words over different days and agents, plus one
                near-miss turn (shared words, other work) and, for some chores, a second one: the
                chore's program scoped to one package, service, test or image (`npm run build
                --workspace admin` beside `npm run build`; every other one from Kiro IDE 0.x, which shows
                only its output), and a third: one step of the chore alone (`make seed` beside `make
                reset-db seed`). Truth: the chore's records form one group to merge; the near misses
                never merge with them.
  retry         in one failure shape: two failed attempts, each run again with success on a later day
                (by the same agent, or another one: the failed record is superseded by that success), a
                different work on the same module that failed too and is never retried (superseded by
                nothing), and two turns that recovered: the command re-run at once (Kiro v3's identical
                PreToolUse within the dedup window) or after reading a file (outcome never `failed`).

Agents and payload shapes (shared/reference/*.md, kirolearn/capture/agents/*.py, tests/agents/):
  kiro-classic  camelCase `hook_event_name`, fs_write / fs_read / execute_bash, tool_response
                {"success", "result": [{"exit_status", "stdout", "stderr"}]} or {"success": false, "error"}
  kiro-v3       PascalCase, PreToolUse carries the input, PostToolUse `tool_input: {}` and a string
                tool_response "Output: ... Exit Code: N"; Stop carries no answer
  kiro-ide      IDE 0.x: `kirolearn-hook ide-prompt-submit|ide-post-tool|ide-agent-stop`, payload in
                USER_PROMPT ({"toolName","toolArgs","toolResult","toolSuccess"}), no session id
  claude-code   `--agent claude-code`: Write / Edit / Read / Bash, {"stdout","stderr","interrupted"};
                Stop with last_assistant_message
  codex         `--agent codex`: Bash {"exit_code", "output"} (exit_code null when the sandbox killed
                it: "Read-only file system"), Stop with last_assistant_message
  gemini        `--agent gemini`: BeforeAgent / AfterTool / AfterAgent, tool_response {"llmContent",
                "returnDisplay", "error"?}
  copilot       `--agent copilot EVENT`: camelCase payload, no event name, toolResult {"resultType",
                "textResultForLlm"}; agentStop reads the answer from its events.jsonl transcript

Halves: scenario index i over 0 .. 2N-1; even i is "tune", odd i is "heldout"; the family of i is
FAMILIES[(i // 2) % 6], so both halves hold every family equally. Every random choice of scenario i
comes from random.Random(f"{seed}/{i}"), so a scenario is the same whichever half or size runs it.

    python bench/history.py --half tune --seed 1 --scenarios 60 [--workdir DIR] [--bin DIR] [--plan-only]
"""

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

FAMILIES = ("changed_fact", "file_fate", "rewrite", "outcome", "chore", "retry")
HALVES = ("tune", "heldout")
DEFAULT_BIN = "/work/main/.venv/bin"
DAYS = 6
SCENARIOS = 60  # per half: 10 of each family, so every goal counts 20+ cases (docs/benchmarks.md)
MORE_SETTLE = 8  # idle drain passes allowed past --settle while vectors are still being computed
ALL_AGENTS = ("kiro-classic", "kiro-v3", "kiro-ide", "claude-code", "codex", "gemini", "copilot")
# Agents whose file edits an adapter can attribute to a path (Codex edits through shell commands).
FILE_AGENTS = ("kiro-classic", "kiro-v3", "kiro-ide", "claude-code", "gemini", "copilot")
FACT_AGENTS = ("kiro-classic", "kiro-v3", "claude-code", "codex", "gemini", "copilot")
HOOK_AGENT_ARG = {
    "kiro-classic": None,
    "kiro-v3": None,
    "kiro-ide": None,
    "claude-code": "claude-code",
    "codex": "codex",
    "gemini": "gemini",
    "copilot": "copilot",
}

# --- the material ---------------------------------------------------------------------------------

# (config module, setting, values in the order a project moves through them; the first is the initial one)
SETTINGS = [
    ("retry", "RETRIES", [2, 3, 7, 10]),
    ("retry", "BACKOFF_MS", [100, 250, 500, 1000]),
    ("http", "TIMEOUT_SECONDS", [10, 30, 60, 90]),
    ("http", "MAX_REDIRECTS", [3, 5, 10, 20]),
    ("db", "POOL_SIZE", [5, 10, 20, 40]),
    ("db", "STATEMENT_TIMEOUT_MS", [1000, 5000, 15000, 30000]),
    ("worker", "MAX_WORKERS", [2, 4, 8, 16]),
    ("worker", "PREFETCH_COUNT", [1, 4, 10, 50]),
    ("cache", "CACHE_TTL_SECONDS", [60, 300, 900, 3600]),
    ("cache", "CACHE_MAX_ENTRIES", [1000, 5000, 20000, 100000]),
    ("api", "PAGE_SIZE", [20, 25, 50, 100]),
    ("api", "MAX_PAGE_SIZE", [100, 200, 500, 1000]),
    ("limits", "RATE_LIMIT_PER_MINUTE", [60, 120, 300, 600]),
    ("limits", "BURST_SIZE", [5, 10, 20, 50]),
    ("upload", "MAX_UPLOAD_MB", [10, 25, 100, 250]),
    ("upload", "CHUNK_SIZE_KB", [256, 512, 1024, 4096]),
    ("email", "SMTP_PORT", [25, 587, 2525, 465]),
    ("email", "SEND_BATCH_SIZE", [10, 50, 100, 500]),
    ("auth", "SESSION_TTL_MINUTES", [30, 60, 120, 720]),
    ("auth", "MAX_LOGIN_ATTEMPTS", [3, 5, 10, 20]),
    ("search", "MAX_RESULTS", [10, 20, 50, 200]),
    ("search", "MIN_SCORE", [0.1, 0.25, 0.4, 0.6]),
    ("logs", "LOG_LEVEL", ['"WARNING"', '"INFO"', '"DEBUG"', '"ERROR"']),
    ("logs", "LOG_RETENTION_DAYS", [7, 14, 30, 90]),
    ("queue", "VISIBILITY_TIMEOUT_SECONDS", [30, 60, 300, 900]),
    ("queue", "MAX_RECEIVE_COUNT", [3, 5, 8, 12]),
    ("thumbs", "THUMBNAIL_WIDTH", [128, 256, 320, 640]),
    ("thumbs", "JPEG_QUALITY", [70, 80, 85, 92]),
    ("billing", "INVOICE_DUE_DAYS", [14, 30, 45, 60]),
    ("billing", "GRACE_PERIOD_DAYS", [3, 7, 10, 14]),
    ("export", "EXPORT_ROW_LIMIT", [10000, 50000, 100000, 500000]),
    ("export", "CSV_DELIMITER", ['","', '";"', '"|"', '"\\t"']),
]
SET_PROMPTS = [
    "set {S} to {v} in {path}",
    "make {S} {v} ({path})",
    "we want {S} = {v}; put it in {path}",
    "configure {S} as {v} in {path}",
]
SET_ANSWERS = ["Set {S} to {v} in {path}.", "{S} is now {v} ({path}).", "Done: {path} has {S} = {v}."]
CHANGE_PROMPTS = [
    "raise {S} from {old} to {v}",
    "change {S} to {v}, {old} is not right any more",
    "{S} should be {v} now instead of {old}",
    "update {S}: {old} -> {v}",
]
QUERIES = ["what is {S} set to", "{S} value", "current {S} setting"]
CHANGE_ANSWERS = [
    "Changed {S} from {old} to {v} in {path}.",
    "{S} was {old}; it is {v} now ({path}).",
    "Updated {path}: {S} = {v} (was {old}).",
]

NOUNS = (
    "invoice",
    "thumbnail",
    "webhook",
    "ratelimit",
    "session",
    "payment",
    "report",
    "search",
    "notify",
    "audit",
    "upload",
    "geocode",
    "tax",
    "inventory",
    "coupon",
    "shipping",
    "ledger",
    "avatar",
    "digest",
    "calendar",
    "refund",
    "schedule",
    "locale",
    "sitemap",
    "feed",
    "badge",
    "quota",
    "archive",
    "pricing",
    "checkout",
    "review",
    "wishlist",
    "voucher",
    "metrics",
    "tenant",
    "profile",
    "importer",
    "captcha",
    "comment",
    "mailer",
    "sync",
    "backup",
    "license",
    "routing",
    "catalog",
    "shipment",
    "cart",
    "token_bucket",
)
AREAS = ("services", "utils", "jobs", "api", "domain")

# Failing commands for the outcome family: (command, error output, fix command, ok output); {n} = a noun.
COMMANDS = [
    (
        "pytest -q tests/{a}/test_{n}.py",
        "E   ImportError: cannot import name 'load_{n}' from 'src.{a}.{n}'\n1 error in 0.31s",
        "git checkout src/{a}/__init__.py",
        "12 passed in 0.84s",
    ),
    (
        "npm run build --workspace {n}",
        "ERROR in ./src/{n}/index.ts\nModule not found: Error: Can't resolve './{n}-utils'",
        "npm install --workspace {n}",
        "webpack 5.91.0 compiled successfully in 2140 ms",
    ),
    (
        "make migrate SERVICE={n}",
        "psql: error: connection to server on socket "
        '"/var/run/postgresql/.s.PGSQL.5432" failed: No such file or directory',
        "docker compose up -d {n}-db",
        "Applied 3 migrations to {n}",
    ),
    (
        "cargo test -p {n}",
        "error[E0425]: cannot find value `limit` in this scope\n  --> {n}/src/lib.rs:41:17",
        "cargo fmt -p {n}",
        "test result: ok. 9 passed; 0 failed",
    ),
    (
        "go test ./internal/{a}/{n}/...",
        "--- FAIL: TestParse (0.00s)\n    parse_test.go:41: got 3, want 4\nFAIL",
        "go generate ./internal/{a}/{n}/...",
        "ok  \texample.com/app/internal/{a}/{n}\t0.412s",
    ),
    (
        "tox -e lint -- src/{a}/{n}.py",
        "src/{a}/{n}.py:14:1: F401 'os' imported but unused\nlint: commands failed",
        "ruff check --fix src/{a}/{n}.py",
        "lint: OK (1.92=setup[0.41]+cmd[1.51] seconds)",
    ),
    (
        "docker compose up -d {n}-cache",
        "Error response from daemon: driver failed programming external connectivity: "
        "Bind for 0.0.0.0:6379 failed: port is already allocated",
        "docker compose stop legacy-{n}-cache",
        "Container app-{n}-cache-1  Started",
    ),
    (
        "python scripts/export_{n}.py --out build/{n}.csv",
        "PermissionError: [Errno 13] Permission denied: 'build/{n}.csv'",
        "mkdir -p build && chmod u+w build",
        "wrote 1841 rows to build/{n}.csv",
    ),
    (
        "alembic -x service={n} upgrade head",
        'sqlalchemy.exc.ProgrammingError: relation "{n}_items" does not exist',
        "alembic -x service={n} stamp base",
        "INFO  [alembic.runtime.migration] Running upgrade -> 4c1d, {n} items",
    ),
    (
        "mvn -q -pl {n} verify",
        "[ERROR] Failed to execute goal on project {n}: Could not resolve dependencies",
        "mvn -q -pl {n} dependency:resolve -U",
        "[INFO] BUILD SUCCESS",
    ),
]
READONLY_ERRORS = [
    "OSError: [Errno 30] Read-only file system: '/home/dev/.cache/pip/wheels/{n}'",
    "touch: cannot touch 'build/{n}.lock': Read-only file system",
    "bash: line 1: src/{a}/{n}.py.orig: Read-only file system",
]
# Failure shapes: (name, agent, what it tests). Each outcome scenario uses one; each half sees all of them.
SHAPES = [
    ("kiro-success-false", "kiro-classic", 'success flag false: {"success": false, "error": [...]}'),
    ("kiro-exit-status", "kiro-classic", 'non-zero exit_status inside {"success": true, "result": [...]}'),
    ("kiro-v3-exit-code-string", "kiro-v3", '"Exit Code: 1" inside a string tool_response'),
    ("kiro-ide-tool-success-false", "kiro-ide", "IDE 0.x USER_PROMPT JSON with toolSuccess false"),
    ("codex-exit-null-readonly", "codex", 'exit_code null, "Read-only file system" in output'),
    ("gemini-error", "gemini", "agent error payload: tool_response.error {message, type}"),
    ("copilot-failure", "copilot", 'agent error payload: toolResult.resultType "failure"'),
    ("codex-exit-code", "codex", "non-zero exit_code"),
]

# Chores: (name, 5 paraphrased prompts, command variants, output, answers, near miss (prompt, tool, answer))
CHORES = [
    (
        "release",
        [
            "bump the version and regenerate the changelog",
            "cut a patch release: version bump plus a fresh CHANGELOG",
            "increment the patch version and rebuild CHANGELOG.md from the commits",
            "do the release chore again - bump version, regenerate changelog",
            "new patch version please, and update the changelog from git history",
        ],
        [
            ["bump-my-version bump patch", "git cliff -o CHANGELOG.md"],
            ["bump-my-version bump patch --no-commit", "git cliff --output CHANGELOG.md"],
        ],
        "Bumped version 1.4.{k} -> 1.4.{k1}",
        [
            "Bumped the version to 1.4.{k1} and regenerated CHANGELOG.md with git cliff.",
            "Version is 1.4.{k1}; CHANGELOG.md regenerated from the commits.",
        ],
        (
            "bump the requests pin to 2.32.3 in requirements.in and check nothing else moves",
            ("run", "pip-compile --upgrade-package requests==2.32.3 requirements.in", "requests==2.32.3"),
            "Pinned requests to 2.32.3; no other pins changed.",
        ),
    ),
    (
        "format",
        [
            "run the formatter over src/",
            "reformat everything under src with black",
            "format the src tree before I commit",
            "apply the code formatter to src/ again",
            "can you run black on the source folder",
        ],
        [["black src/"], ["black src"], ["black --quiet src/"]],
        "reformatted {k} files, {k1} files left unchanged",
        ["Ran black over src/: {k} files reformatted.", "Formatted src/ with black ({k} files changed)."],
        (
            "run the type checker over src/ and list the errors",
            ("run", "mypy src/", "Success: no issues found in 41 source files"),
            "mypy found no issues in src/.",
        ),
    ),
    (
        "api-client",
        [
            "regenerate the API client from openapi.yaml",
            "the spec changed, rebuild the generated client in clients/api",
            "re-run the openapi generator for the python client",
            "refresh clients/api from the OpenAPI spec",
            "regen the http client code from openapi.yaml again",
        ],
        [
            ["openapi-generator-cli generate -i openapi.yaml -g python -o clients/api"],
            ["openapi-generator-cli generate -g python -i openapi.yaml -o clients/api --skip-validate-spec"],
        ],
        "Successfully generated code to clients/api ({k} files)",
        [
            "Regenerated clients/api from openapi.yaml.",
            "The python client in clients/api is regenerated from the spec.",
        ],
        (
            "validate openapi.yaml and tell me what is wrong with it",
            ("run", "openapi-spec-validator openapi.yaml", "openapi.yaml: OK"),
            "openapi.yaml validates; nothing is wrong with it.",
        ),
    ),
    (
        "docs-build",
        [
            "rebuild the docs site",
            "build the mkdocs site again to check it renders",
            "regenerate the documentation HTML with mkdocs",
            "run a strict docs build",
            "make the docs site from scratch",
        ],
        [["mkdocs build --strict"], ["mkdocs build --strict --clean"]],
        "INFO    -  Documentation built in 1.{k} seconds",
        ["Built the docs with mkdocs --strict: no warnings.", "The docs site builds cleanly (strict mode)."],
        (
            "add a docs page about the retry settings",
            (
                "write",
                "docs/retry-settings.md",
                "# Retry settings\n\nRETRIES and BACKOFF_MS live in config/retry.py.\n",
            ),
            "Added docs/retry-settings.md.",
        ),
    ),
    (
        "lockfile",
        [
            "refresh the lock file",
            "re-lock the dependencies without upgrading anything",
            "regenerate uv.lock",
            "update the lockfile so CI stops complaining it is stale",
            "sync the lock file with pyproject.toml",
        ],
        [["uv lock"], ["uv lock --offline"]],
        "Resolved 8{k} packages in 312ms",
        ["Refreshed uv.lock; no versions moved.", "uv.lock is in sync with pyproject.toml again."],
        (
            "add httpx as a dependency",
            ("run", "uv add httpx", "Resolved 85 packages\n + httpx==0.27.2"),
            "Added httpx 0.27.2 to the dependencies.",
        ),
    ),
    (
        "migrate-local",
        [
            "apply the database migrations locally",
            "run alembic upgrade on my dev db",
            "migrate the local database to head",
            "bring the dev database schema up to date",
            "run the pending migrations against the local postgres",
        ],
        [["alembic upgrade head"], ["alembic upgrade heads"]],
        "Running upgrade -> 7a{k}f, add index",
        ["Applied the pending migrations; the dev database is at head.", "Local database migrated to head."],
        (
            "write a migration that adds orders.shipped_at",
            (
                "run",
                "alembic revision --autogenerate -m 'add orders.shipped_at'",
                "Generating migrations/versions/3f2a_add_orders_shipped_at.py ... done",
            ),
            "Created migration 3f2a_add_orders_shipped_at.py adding orders.shipped_at.",
        ),
    ),
    (
        "protobuf",
        [
            "regenerate the protobuf stubs",
            "re-run buf generate for the grpc code",
            "rebuild the generated protobuf python files",
            "the .proto files changed, regen the stubs",
            "refresh the gRPC stubs under gen/",
        ],
        [["buf generate"], ["buf generate --template buf.gen.yaml"]],
        "wrote {k} files to gen/",
        ["Regenerated the gRPC stubs under gen/ with buf.", "buf generate done; gen/ is up to date."],
        (
            "lint the proto files and fix the naming warnings",
            ("run", "buf lint", 'proto/orders.proto:12:3:Field name "orderID" should be lower_snake_case'),
            "buf lint flags one field name.",
        ),
    ),
    (
        "translations",
        [
            "update the translation catalogs",
            "extract new strings and update the .po files",
            "run the babel extract/update cycle",
            "refresh messages.pot and the locale catalogs",
            "sync translations with the new UI strings",
        ],
        [
            [
                "pybabel extract -F babel.cfg -o messages.pot .",
                "pybabel update -i messages.pot -d translations",
            ]
        ],
        "updating catalog translations/de/LC_MESSAGES/messages.po ({k} new strings)",
        [
            "Extracted messages.pot and updated the catalogs.",
            "Translation catalogs updated with the new strings.",
        ],
        (
            "translate the login page strings into German",
            None,
            "Anmelden, Passwort vergessen and Konto erstellen are the German strings for the login page.",
        ),
    ),
    (
        "docker-dev",
        [
            "rebuild the dev docker image",
            "docker build the app image again with the dev tag",
            "rebuild app:dev after the dependency change",
            "make a fresh docker image for local testing",
            "re-run the docker build for the dev container",
        ],
        [["docker build -t app:dev ."], ["docker build --pull -t app:dev ."]],
        "Successfully tagged app:dev",
        ["Rebuilt the app:dev image.", "app:dev is rebuilt from the current Dockerfile."],
        (
            "shrink the docker image by switching to a slim base",
            ("run", "sed -i 's/python:3.12$/python:3.12-slim/' Dockerfile", ""),
            "Dockerfile now starts FROM python:3.12-slim.",
        ),
    ),
    (
        "isort",
        [
            "sort the imports",
            "run isort across src and tests",
            "fix the import order everywhere",
            "tidy the import blocks with isort",
            "re-sort imports in the whole repo",
        ],
        [["isort src tests"], ["isort --profile black src tests"]],
        "Fixing {k} files",
        ["Sorted the imports in src/ and tests/ with isort.", "isort fixed the import order."],
        (
            "remove unused imports from src/cli.py",
            ("run", "ruff check --select F401 --fix src/cli.py", "Found 2 errors (2 fixed, 0 remaining)."),
            "Removed two unused imports from src/cli.py.",
        ),
    ),
    (
        "coverage",
        [
            "regenerate the coverage report",
            "run the tests under coverage and build the html report",
            "refresh htmlcov with the current coverage",
            "give me an updated coverage report",
            "rerun coverage and regenerate the HTML",
        ],
        [
            ["coverage run -m pytest -q", "coverage html"],
            ["coverage run -m pytest", "coverage html -d htmlcov"],
        ],
        "Wrote HTML report to htmlcov/index.html (total 8{k}%)",
        ["Coverage report regenerated in htmlcov/.", "htmlcov/ holds the new coverage report."],
        (
            "raise the coverage threshold in setup.cfg to 90",
            ("run", "sed -i 's/fail_under = 80/fail_under = 90/' setup.cfg", ""),
            "setup.cfg now has fail_under = 90.",
        ),
    ),
    (
        "tag-release",
        [
            "tag the release and push the tags",
            "create the git tag for this version and push it",
            "push a new release tag to origin",
            "tag HEAD with the version and push tags",
            "make the release tag and send it upstream",
        ],
        [
            ["git tag v1.4.{k}", "git push origin --tags"],
            ["git tag -a v1.4.{k} -m v1.4.{k}", "git push --tags"],
        ],
        " * [new tag]         v1.4.{k} -> v1.4.{k}",
        ["Tagged v1.4.{k} and pushed the tags.", "v1.4.{k} is tagged and on origin."],
        (
            "delete the stale release/1.2 branch on origin",
            ("run", "git push origin --delete release/1.2", " - [deleted]         release/1.2"),
            "Deleted release/1.2 from origin.",
        ),
    ),
    (
        "reset-db",
        [
            "reset the dev database and reseed it",
            "wipe the local db and load the seed data again",
            "drop and recreate the dev database with fixtures",
            "give me a clean seeded database",
            "reseed the local database from scratch",
        ],
        [["make reset-db", "make seed"], ["make reset-db seed"]],
        "seeded {k}0 rows",
        ["Reset the dev database and loaded the seed data.", "Dev database recreated and reseeded."],
        (
            "add an admin user to the seed data",
            (
                "run",
                "python scripts/add_seed_user.py --role admin admin@example.test",
                "added admin@example.test to seeds/users.json",
            ),
            "seeds/users.json has an admin user now.",
        ),
    ),
    (
        "precommit-update",
        [
            "update the pre-commit hooks",
            "run pre-commit autoupdate",
            "bump the hook revisions in .pre-commit-config.yaml",
            "refresh pre-commit hook versions",
            "upgrade our pre-commit hooks to their latest tags",
        ],
        [["pre-commit autoupdate"], ["pre-commit autoupdate --freeze"]],
        "updating v0.{k}.0 -> v0.{k1}.0",
        ["Updated the pre-commit hook revisions.", "pre-commit hooks are on their latest tags."],
        (
            "run pre-commit on all files",
            ("run", "pre-commit run --all-files", "ruff....Passed\nblack....Passed"),
            "pre-commit passes on every file.",
        ),
    ),
    (
        "frontend-build",
        [
            "rebuild the frontend assets",
            "run the npm build for the web bundle",
            "regenerate static/dist with a production build",
            "build the frontend again",
            "make a fresh production bundle of the UI",
        ],
        [["npm run build"], ["npm run build -- --mode production"]],
        "built in {k}.2s, dist/ 412 kB",
        ["Rebuilt the frontend bundle into static/dist.", "Production bundle rebuilt."],
        (
            "upgrade webpack to v5",
            ("run", "npm install webpack@5 --save-dev", "+ webpack@5.91.0"),
            "webpack is on 5.91.0 now.",
        ),
    ),
    (
        "cassettes",
        [
            "re-record the VCR cassettes for the integration tests",
            "refresh the recorded HTTP fixtures",
            "rewrite the cassettes under tests/cassettes",
            "regenerate the integration test recordings",
            "re-run integration tests in record mode",
        ],
        [
            ["pytest tests/integration --record-mode=rewrite"],
            ["pytest -q tests/integration --record-mode rewrite"],
        ],
        "{k}4 passed, cassettes rewritten",
        ["Re-recorded the cassettes in tests/cassettes.", "Integration recordings refreshed."],
        (
            "delete the cassettes we no longer use",
            ("run", "git rm -q tests/cassettes/legacy_*.yaml", "rm 'tests/cassettes/legacy_a.yaml'"),
            "Removed the legacy cassettes.",
        ),
    ),
    (
        "sbom",
        [
            "regenerate the SBOM",
            "write a fresh CycloneDX bill of materials for the repo",
            "refresh sbom.json with syft",
            "produce the software bill of materials again",
            "update the sbom file before the audit",
        ],
        [["syft . -o cyclonedx-json=sbom.json"], ["syft . -q -o cyclonedx-json=sbom.json"]],
        "Cataloged {k}12 packages",
        ["sbom.json regenerated with syft (CycloneDX).", "The SBOM is fresh: sbom.json."],
        (
            "scan the dev image for vulnerabilities",
            ("run", "grype app:dev", "No vulnerabilities found"),
            "grype found no vulnerabilities in app:dev.",
        ),
    ),
    (
        "licenses",
        [
            "regenerate the third-party licenses file",
            "refresh THIRD_PARTY.md from the installed packages",
            "update the list of dependency licenses",
            "rebuild the licenses page for the release",
            "write the third party notices again",
        ],
        [
            ["pip-licenses --format=markdown --output-file=THIRD_PARTY.md"],
            ["pip-licenses --output-file=THIRD_PARTY.md --format=markdown"],
        ],
        "wrote {k}1 packages to THIRD_PARTY.md",
        [
            "THIRD_PARTY.md lists the dependency licenses again.",
            "Regenerated THIRD_PARTY.md with pip-licenses.",
        ],
        (
            "check that no dependency is GPL licensed",
            ("run", "liccheck -s strategy.ini", "all packages allowed"),
            "liccheck allows every dependency.",
        ),
    ),
    (
        "dead-links",
        [
            "check the docs for broken links",
            "run the link checker over docs/",
            "look for dead links in the documentation",
            "verify every link in docs still resolves",
            "scan docs/ for 404s",
        ],
        [["lychee docs/"], ["lychee --no-progress docs/"]],
        "{k}3 links OK",
        ["Every link in docs/ resolves.", "lychee found no broken links in docs/."],
        (
            "check the links in README.md only",
            ("run", "lychee README.md", "12 links OK"),
            "README.md has no broken links.",
        ),
    ),
    (
        "fixtures",
        [
            "dump the fixtures from the dev database",
            "export the dev data as fixtures/dev.json",
            "refresh fixtures/dev.json from my local db",
            "re-dump the development fixtures",
            "write the dev database out to the fixtures file",
        ],
        [
            ["python manage.py dumpdata --indent 2 -o fixtures/dev.json"],
            ["python manage.py dumpdata -o fixtures/dev.json --indent 2"],
        ],
        "dumped {k}14 objects",
        ["fixtures/dev.json holds the dev data again.", "Dumped the dev data to fixtures/dev.json."],
        (
            "load the fixtures into the dev database",
            (
                "run",
                "python manage.py loaddata fixtures/dev.json",
                "Installed 214 object(s) from 1 fixture(s)",
            ),
            "Loaded fixtures/dev.json.",
        ),
    ),
]
CHORE_SCOPES = ("", " in the billing service", " in the admin app", " for the mobile backend")
# A second near miss of some chores: the chore's program scoped to one package, service, test selection,
# image or config (a selector flag's value, NAME=value): near-identical commands, other work.
SCOPED_NEAR = {
    "frontend-build": (
        "build only the {w} workspace bundle",
        "npm run build --workspace {w}",
        "built {w} in 1.9s",
        "Built the {w} workspace.",
    ),
    "migrate-local": (
        "migrate just the {w} service's schema",
        "alembic -x service={w} upgrade head",
        "Running upgrade -> 9c1e, {w} items",
        "The {w} schema is at head.",
    ),
    "reset-db": (
        "reset only the {w} database",
        "make reset-db SERVICE={w}",
        "seeded 40 rows",
        "The {w} database is reset.",
    ),
    "docker-dev": (
        "build the {w} image for local runs",
        "docker build -t {w}:dev .",
        "Successfully tagged {w}:dev",
        "Built {w}:dev.",
    ),
    "docs-build": (
        "build the {w} docs site",
        "mkdocs build --strict -f docs/{w}/mkdocs.yml",
        "INFO    -  Documentation built in 0.8 seconds",
        "The {w} docs build cleanly.",
    ),
    "cassettes": (
        "re-record only the {w} cassettes",
        "pytest tests/integration --record-mode=rewrite -k {w}",
        "6 passed, cassettes rewritten",
        "Re-recorded the {w} cassettes.",
    ),
    "protobuf": (
        "regenerate only the {w} stubs",
        "buf generate --path proto/{w}",
        "wrote 3 files to gen/",
        "Regenerated the {w} stubs.",
    ),
    "format": (
        "format only the {w} package",
        "black src/ --include {w}",
        "reformatted 2 files",
        "Formatted the {w} package.",
    ),
}
SCOPED_WORDS = ("worker", "payments", "admin", "search", "reports")
# A third near miss of some chores: one step of the chore alone, other work (`make seed` beside `make
# reset-db seed`): its program and words a subset of the chore's.
SUBSET_NEAR = {
    "reset-db": (
        "load the seed data again without resetting anything",
        "make seed",
        "seeded 40 rows",
        "Loaded the seed data into the existing database.",
    ),
    "coverage": (
        "rebuild only the html coverage report from the data we have",
        "coverage html",
        "Wrote HTML report to htmlcov/index.html",
        "htmlcov/ rebuilt from the existing data.",
    ),
    "tag-release": (
        "push the tags we already have to origin",
        "git push --tags",
        "Everything up-to-date",
        "Pushed the existing tags.",
    ),
    "translations": (
        "merge messages.pot into the catalogs without extracting",
        "pybabel update -i messages.pot -d translations",
        "updating catalog translations/de/LC_MESSAGES/messages.po",
        "Catalogs updated from the existing messages.pot.",
    ),
}


# --- file contents -------------------------------------------------------------------------------


def camel(noun: str) -> str:
    return "".join(part.capitalize() for part in noun.split("_"))


def module_text(noun: str, limit: int) -> str:
    """A small plausible module about `noun` (what a turn writes)."""
    c = camel(noun)
    return f'''"""{c} helpers."""

import dataclasses

DEFAULT_{noun.upper()}_LIMIT = {limit}


@dataclasses.dataclass
class {c}Item:
    id: int
    name: str
    weight: float = 1.0


def load_{noun}(rows):
    """Build {noun} items from raw rows."""
    items = []
    for row in rows:
        items.append({c}Item(id=int(row["id"]), name=str(row["name"]).strip()))
    return items


def total_{noun}_weight(items):
    return sum(item.weight for item in items)


def top_{noun}(items, limit=DEFAULT_{noun.upper()}_LIMIT):
    ranked = sorted(items, key=lambda item: item.weight, reverse=True)
    return ranked[:limit]


def describe_{noun}(item):
    return f"{{item.name}} ({{item.weight:.1f}})"
'''


def rewritten_text(noun: str) -> str:
    """The same module after the user rewrote it around a registry: hardly a line in common."""
    c = camel(noun)
    return f'''"""{c} registry: one store-backed index instead of loose helpers."""

from collections import defaultdict
from typing import Callable, Iterable


class {c}Registry:
    """Keeps {noun} entries by key and by tag; the store persists them."""

    def __init__(self, store):
        self._store = store
        self._tags = defaultdict(set)

    def register(self, key: str, value: dict, tags: Iterable[str] = ()) -> None:
        self._store.put(key, value)
        for tag in tags:
            self._tags[tag].add(key)

    def lookup(self, key: str) -> "dict | None":
        return self._store.get(key)

    def tagged(self, tag: str) -> "list[dict]":
        return [self._store.get(k) for k in sorted(self._tags.get(tag, ()))]

    def purge(self, keep: Callable[[dict], bool]) -> int:
        gone = [k for k, v in self._store.items() if not keep(v)]
        for key in gone:
            self._store.delete(key)
            for keys in self._tags.values():
                keys.discard(key)
        return len(gone)
'''


def config_text(module: str, values: dict) -> str:
    lines = [f'"""Settings of the {module} module (edited by hand and by agents)."""', ""]
    for name, value in values.items():
        lines.append(f"{name} = {value}")
    return "\n".join(lines) + "\n"


# --- planning (pure: no I/O) ---------------------------------------------------------------------


def half_of(index: int) -> str:
    return HALVES[index % 2]


def family_of(index: int) -> str:
    return FAMILIES[(index // 2) % len(FAMILIES)]


def ordinal_of(index: int) -> int:
    """The scenario's position among the scenarios of its family (both halves)."""
    return (index // (2 * len(FAMILIES))) * 2 + index % 2


def _pool(seed: int, name: str, items: list) -> list:
    items = list(items)
    random.Random(f"{seed}/pool/{name}").shuffle(items)
    return items


def _pick(pool: list, k: int):
    """Item k of a pool; past its end, the same items again with a numeric suffix (still unique)."""
    item = pool[k % len(pool)]
    return item, k // len(pool)


class Planner:
    """Turns, user actions and truth of scenarios 0 .. 2N-1 (only those of one half are kept)."""

    def __init__(self, seed: int, n_per_half: int, days: int = DAYS):
        self.seed, self.n, self.days = seed, n_per_half, days
        self.settings = _pool(seed, "settings", SETTINGS)
        self.files = _pool(seed, "files", [(a, n) for n in NOUNS for a in AREAS])
        self.chores = _pool(seed, "chores", range(len(CHORES)))
        self.commands = _pool(seed, "commands", range(len(COMMANDS)))

    def plan(self, half: str) -> dict:
        scenarios, turns, actions = [], [], []
        config_values = {}  # module -> {setting: initial value}
        for module, name, values in SETTINGS:
            config_values.setdefault(module, {})[name] = values[0]
        for i in range(2 * self.n):
            if half_of(i) != half:
                continue
            rng = random.Random(f"{self.seed}/{i}")
            family = family_of(i)
            scenario = {"index": i, "family": family, "half": half}
            made_turns, made_actions = getattr(self, "_" + family)(i, rng, scenario, config_values)
            scenario["turns"] = [t["key"] for t in made_turns]
            scenarios.append(scenario)
            turns += made_turns
            actions += made_actions
        prompts = [t["prompt"] for t in turns]
        assert len(set(prompts)) == len(prompts), "each turn's prompt must be unique (turns match by it)"
        return {
            "seed": self.seed,
            "half": half,
            "scenarios_per_half": self.n,
            "days": self.days,
            "scenarios": scenarios,
            "turns": turns,
            "actions": actions,
            "config": config_values,
        }

    # helpers
    def _turn(self, i, j, day, agent, prompt, answer, tools, expect):
        return {
            "key": f"s{i:03d}t{j}",
            "scenario": i,
            "day": day,
            "agent": agent,
            "prompt": prompt,
            "answer": answer,
            "tools": tools,
            "expect": expect,
        }

    def _file(self, i, slot):
        """A (area, noun) no other scenario of any family uses: slot < 3 of the scenario's own twelve."""
        family = ("file_fate", "rewrite", "outcome", "retry").index(family_of(i))
        (area, noun), again = _pick(self.files, 12 * ordinal_of(i) + 3 * family + slot)
        noun = noun + (str(again + 1) if again else "")
        return area, noun

    # a. changed facts
    def _changed_fact(self, i, rng, scenario, config_values):
        (module, setting, values), again = _pick(self.settings, ordinal_of(i))
        if again:  # past the pool: a module of its own so the file stays unique to this setting chain
            module = f"{module}{again + 1}"
            setting = f"{setting}_{again + 1}"
            config_values.setdefault(module, {})[setting] = values[0]
        path = f"config/{module}.py"
        steps = 3 if rng.random() < 0.35 else 2
        days = sorted(rng.sample(range(self.days), steps))
        agents = [rng.choice(FACT_AGENTS) for _ in range(steps)]
        turns = []
        for j in range(steps):
            old, new = values[j], values[j + 1]
            if j == 0:
                prompt = rng.choice(SET_PROMPTS).format(S=setting, v=new, path=path)
                answer = rng.choice(SET_ANSWERS).format(S=setting, v=new, path=path)
            else:
                prompt = rng.choice(CHANGE_PROMPTS).format(S=setting, v=new, old=old)
                answer = rng.choice(CHANGE_ANSWERS).format(S=setting, v=new, old=old, path=path)
            tools = [{"op": "read", "path": path}] if rng.random() < 0.3 else []
            tools.append(
                {"op": "edit", "path": path, "old": f"{setting} = {old}", "new": f"{setting} = {new}"}
            )
            if rng.random() < 0.4:
                tools.append(
                    {
                        "op": "run",
                        "command": f"pytest -q tests/test_config.py -k {setting.lower()}",
                        "output": f"3 passed in 0.2{j}s",
                        "status": "ok",
                    }
                )
            turns.append(
                self._turn(
                    i,
                    j,
                    days[j],
                    agents[j],
                    prompt,
                    answer,
                    tools,
                    {"outcome": "succeeded", "unit": f"s{i:03d}t{j}"},
                )
            )
        scenario["truth"] = {
            "setting": setting,
            "path": path,
            "values": values[1 : steps + 1],
            "chain": [t["key"] for t in turns],
            "query": rng.choice(QUERIES).format(S=setting),
        }
        return turns, []

    # b. deleted and renamed files
    def _file_fate(self, i, rng, scenario, config_values):
        area, noun = self._file(i, 0)
        path = f"src/{area}/{noun}.py"
        day = rng.randrange(self.days - 1)
        agent = rng.choice(FILE_AGENTS)
        action = ("git-rm", "rm", "git-mv")[(ordinal_of(i) // 2) % 3]  # each half: every action
        after = rng.randrange(day, self.days)  # the night after that day (the last one: just before scoring)
        prompt = rng.choice(
            [
                "add a {noun} helper module at {path}",
                "write the {noun} helpers in {path}",
                "create {path} with loading and ranking of {noun} items",
            ]
        )
        prompt = prompt.format(noun=noun, path=path)
        answer = f"Created {path} with load_{noun}, top_{noun} and describe_{noun}."
        tools = [{"op": "write", "path": path, "content": module_text(noun, rng.choice([5, 10, 20]))}]
        turn = self._turn(
            i,
            0,
            day,
            agent,
            prompt,
            answer,
            tools,
            {
                "outcome": "succeeded",
                "unit": f"s{i:03d}t0",
                "freshness": "current" if action == "git-mv" else "deleted",
            },
        )
        new_path = f"src/{area}/{noun}_v2.py" if action == "git-mv" else None
        act = {
            "after_day": after,
            "scenario": i,
            "kind": action,
            "path": path,
            "to": new_path,
            "commit": action != "rm" or rng.random() < 0.5,
        }
        if action == "rm" and rng.random() < 0.5:
            # the same night the user adds a module of the same template (another noun): committed with the
            # deletion (now, or by the next day's `git add -A`), git pairs the two as a ~50 % "rename"
            other, _ = _pick(self.files, 12 * ordinal_of(i) + 3 * 0 + 2)
            act["sibling"] = {"path": f"src/{area}/{other[1]}_{noun}_legacy.py", "noun": f"{other[1]}x"}
        scenario["truth"] = {
            "turn": turn["key"],
            "path": path,
            "action": action,
            "to": new_path,
            "expect": turn["expect"]["freshness"],
            "after_day": after,
        }
        return [turn], [act]

    # c. rewritten files and their controls
    def _rewrite(self, i, rng, scenario, config_values):
        turns, actions, items = [], [], []
        control = ("untouched", "touch", "comment", "blank-lines")[(ordinal_of(i) // 2) % 4]  # each half: all
        for j, kind in enumerate(["rewrite", control]):
            area, noun = self._file(i, j)
            path = f"src/{area}/{noun}.py"
            day = rng.randrange(self.days - 1)
            agent = rng.choice(FILE_AGENTS)
            prompt = rng.choice(
                [
                    "implement {noun} loading in {path}",
                    "put the {noun} item helpers into {path}",
                    "new module {path}: load, rank and describe {noun} items",
                ]
            )
            prompt = prompt.format(noun=noun, path=path)
            answer = f"Wrote {path}: {camel(noun)}Item, load_{noun}, top_{noun}."
            tools = [{"op": "write", "path": path, "content": module_text(noun, rng.choice([5, 10, 20]))}]
            if rng.random() < 0.3:
                tools.append(
                    {"op": "run", "command": f"python -m pyflakes {path}", "output": "", "status": "ok"}
                )
            expect = "changed" if kind == "rewrite" else "current"
            turn = self._turn(
                i,
                j,
                day,
                agent,
                prompt,
                answer,
                tools,
                {"outcome": "succeeded", "freshness": expect, "unit": f"s{i:03d}t{j}"},
            )
            turns.append(turn)
            after = rng.randrange(day, self.days)
            if kind != "untouched":
                actions.append(
                    {
                        "after_day": after,
                        "scenario": i,
                        "kind": kind,
                        "path": path,
                        "noun": noun,
                        "commit": kind != "touch" and rng.random() < 0.7,
                    }
                )
            items.append(
                {"turn": turn["key"], "path": path, "action": kind, "expect": expect, "after_day": after}
            )
        scenario["truth"] = {"items": items}
        return turns, actions

    # d. outcomes in every failure shape
    def _outcome(self, i, rng, scenario, config_values):
        shape, agent, what = SHAPES[(ordinal_of(i) // 2) % len(SHAPES)]  # each half: every shape
        area, noun = self._file(i, 0)
        picks = [self.commands[(3 * ordinal_of(i) + k) % len(self.commands)] for k in range(3)]
        turns = []
        for j, (variant, c) in enumerate(zip(("failed", "recovered", "succeeded"), picks, strict=True)):
            command, error, fix, ok = (s.format(n=noun, a=area) for s in COMMANDS[c])
            if shape == "codex-exit-null-readonly":
                error = rng.choice(READONLY_ERRORS).format(n=noun, a=area)
            day = rng.randrange(self.days)
            if variant == "failed":
                prompt = rng.choice(["run `{c}` and tell me if it passes", "try `{c}`", "does `{c}` work?"])
                tools = []
                if rng.random() < 0.5:  # a success BEFORE the failure: the turn still failed
                    tools.append(
                        {
                            "op": "run",
                            "command": "git status --short",
                            "output": " M README.md",
                            "status": "ok",
                        }
                    )
                tools.append(
                    {"op": "run", "command": command, "output": error, "status": "fail", "shape": shape}
                )
                answer = f"`{command}` failed: {error.splitlines()[-1]}. I did not get it to work."
                outcome = "failed"
            elif variant == "recovered":
                prompt = rng.choice(["make `{c}` pass", "get `{c}` green again", "fix whatever breaks `{c}`"])
                tools = [
                    {"op": "run", "command": command, "output": error, "status": "fail", "shape": shape},
                    {"op": "run", "command": fix, "output": "", "status": "ok"},
                    {"op": "run", "command": command, "output": ok, "status": "ok"},
                ]
                answer = f"`{command}` failed first ({error.splitlines()[-1]}); after `{fix}` it passes."
                outcome = "succeeded"
            else:
                prompt = rng.choice(
                    ["check that `{c}` still works", "run `{c}` once more", "confirm `{c}` is fine"]
                )
                tools = [{"op": "run", "command": command, "output": ok, "status": "ok"}]
                answer = f"`{command}` works: {ok.splitlines()[-1]}"
                outcome = "succeeded"
            expect = {"outcome": outcome, "variant": variant, "shape": shape, "unit": f"s{i:03d}t{j}"}
            turns.append(self._turn(i, j, day, agent, prompt.format(c=command), answer, tools, expect))
        failed_day = turns[0]["day"]
        if failed_day < self.days - 1:  # a later day: the failed command, run again, succeeds
            command, _, _, ok = (s.format(n=noun, a=area) for s in COMMANDS[picks[0]])
            prompt = rng.choice(
                ["run `{c}` again now the fix is in", "retry `{c}`", "see whether `{c}` passes today"]
            )
            tools = [{"op": "run", "command": command, "output": ok, "status": "ok"}]
            expect = {"outcome": "succeeded", "variant": "retried", "shape": shape, "unit": f"s{i:03d}t3"}
            turns.append(
                self._turn(
                    i,
                    3,
                    rng.randrange(failed_day + 1, self.days),
                    agent,
                    prompt.format(c=command),
                    f"`{command}` passes now: {ok.splitlines()[-1]}",
                    tools,
                    expect,
                )
            )
        scenario["truth"] = {
            "shape": shape,
            "agent": agent,
            "what": what,
            "turns": {t["expect"]["variant"]: t["key"] for t in turns},
        }
        return turns, []

    # f. failed attempts, their later successes, a different failed work, and turns that recovered
    def _retry(self, i, rng, scenario, config_values):
        """Two failed attempts in one shape, each run again with success on a later day (the failed record
        is superseded by that success); a different work on the same module that also failed and is never
        retried (superseded by nothing); and two turns that recovered: the same command re-run at once
        (Kiro v3's identical PreToolUse, seconds apart), or after a look at a file. Every shape, every half."""
        shape, agent, what = SHAPES[(ordinal_of(i) // 2) % len(SHAPES)]
        area, noun = self._file(i, 0)
        noun = f"{noun}_{area}"  # the pool repeats a noun in other areas; most commands name only the noun
        picks = [self.commands[(5 * ordinal_of(i) + k) % len(self.commands)] for k in range(5)]
        cmds = [tuple(x.format(n=noun, a=area) for x in COMMANDS[c]) for c in picks]
        if shape == "codex-exit-null-readonly":
            cmds = [(c, rng.choice(READONLY_ERRORS).format(n=noun, a=area), f, o) for c, _, f, o in cmds]
        turns, pairs = [], []

        def fail_turn(j, command, error, day, variant):
            prompt = rng.choice(
                ["try `{c}` for the {n} module", "run `{c}` and report", "see if `{c}` works"]
            )
            tools = [{"op": "run", "command": command, "output": error, "status": "fail", "shape": shape}]
            answer = f"`{command}` failed: {error.splitlines()[-1]}. Left as it is."
            expect = {"outcome": "failed", "variant": variant, "shape": shape, "unit": f"s{i:03d}t{j}"}
            return self._turn(i, j, day, agent, prompt.format(c=command, n=noun), answer, tools, expect)

        for k in range(2):
            command, error, _, ok = cmds[k]
            day = rng.randrange(self.days - 1)
            failed = fail_turn(2 * k, command, error, day, "failed")
            later = agent if agent == "kiro-ide" or rng.random() < 0.7 else rng.choice(FACT_AGENTS)
            prompt = rng.choice(
                ["retry `{c}` now", "run `{c}` again, it should pass", "`{c}` once more please"]
            )
            tools = [{"op": "run", "command": command, "output": ok, "status": "ok"}]
            expect = {
                "outcome": "succeeded",
                "variant": "retried",
                "shape": shape,
                "unit": f"s{i:03d}t{2 * k + 1}",
            }
            retried = self._turn(
                i,
                2 * k + 1,
                rng.randrange(day + 1, self.days),
                later,
                prompt.format(c=command),
                f"`{command}` passes now: {ok.splitlines()[-1]}",
                tools,
                expect,
            )
            turns += [failed, retried]
            pairs.append({"failed": failed["key"], "retried": retried["key"]})
        command, error, _, _ = cmds[2]
        control = fail_turn(4, command, error, rng.randrange(self.days), "failed")
        turns.append(control)
        for j, form in ((5, "at-once"), (6, "after-a-look")):
            command, error, _, ok = cmds[j - 2]
            tools = [{"op": "run", "command": command, "output": error, "status": "fail", "shape": shape}]
            if form == "after-a-look":
                tools.append({"op": "read", "path": f"config/{sorted(config_values)[0]}.py"})
            tools.append({"op": "run", "command": command, "output": ok, "status": "ok"})
            prompt = rng.choice(["get `{c}` through", "`{c}` is flaky, make it pass"]).format(c=command)
            expect = {
                "outcome": "succeeded",
                "variant": "recovered",
                "shape": shape,
                "form": form,
                "unit": f"s{i:03d}t{j}",
            }
            turns.append(
                self._turn(
                    i,
                    j,
                    rng.randrange(self.days),
                    agent,
                    prompt,
                    f"`{command}` failed once, then passed: {ok.splitlines()[-1]}",
                    tools,
                    expect,
                )
            )
        scenario["truth"] = {
            "shape": shape,
            "agent": agent,
            "what": what,
            "pairs": pairs,
            "controls": [control["key"]],
        }
        return turns, []

    # e. repeated chores and a near miss
    def _chore(self, i, rng, scenario, config_values):
        c, again = _pick(self.chores, ordinal_of(i))
        name, prompts, variants, output, answers, near = CHORES[c]
        scope = CHORE_SCOPES[again % len(CHORE_SCOPES)]
        if again >= len(CHORE_SCOPES):
            scope += f" (#{again})"
        k = rng.randint(3, 5)
        days = sorted(rng.sample(range(self.days), min(k, self.days)))
        chosen = rng.sample(prompts, k)
        unit = f"s{i:03d}:chore"
        turns = []
        for j in range(k):
            n, n1 = 3 + j, 4 + j
            commands = [cmd.format(k=n) for cmd in rng.choice(variants)]
            tools = [
                {
                    "op": "run",
                    "command": cmd,
                    "status": "ok",
                    "output": output.format(k=n, k1=n1) if x == len(commands) - 1 else "",
                }
                for x, cmd in enumerate(commands)
            ]
            turns.append(
                self._turn(
                    i,
                    j,
                    days[j % len(days)],
                    rng.choice(ALL_AGENTS),
                    chosen[j] + scope,
                    rng.choice(answers).format(k=n, k1=n1),
                    tools,
                    {"outcome": "succeeded", "unit": unit, "chore": name},
                )
            )
        near_prompt, near_tool, near_answer = near
        tools = []
        if near_tool and near_tool[0] == "run":
            tools = [{"op": "run", "command": near_tool[1], "output": near_tool[2], "status": "ok"}]
        elif near_tool and near_tool[0] == "write":
            path = near_tool[1] if not again else near_tool[1].replace(".md", f"-{again}.md")
            tools = [{"op": "write", "path": path, "content": near_tool[2]}]
        agent = rng.choice(FILE_AGENTS if tools and tools[0]["op"] == "write" else ALL_AGENTS)
        expect = {"outcome": "succeeded", "unit": f"s{i:03d}:near", "near_miss_of": name}
        day = rng.randrange(self.days)
        turns.append(self._turn(i, k, day, agent, near_prompt + scope, near_answer, tools, expect))
        if name in SCOPED_NEAR:
            prompt, command, output, answer = (
                x.format(w=rng.choice(SCOPED_WORDS)) for x in SCOPED_NEAR[name]
            )
            tools = [{"op": "run", "command": command, "output": output, "status": "ok"}]
            expect = {"outcome": "succeeded", "unit": f"s{i:03d}:scoped", "near_miss_of": name}
            # every other one from Kiro IDE 0.x, whose calls carry no command: only its output is seen
            agent = "kiro-ide" if (ordinal_of(i) // 2) % 2 == 0 else rng.choice(ALL_AGENTS)
            turns.append(
                self._turn(i, k + 1, rng.randrange(self.days), agent, prompt + scope, answer, tools, expect)
            )
        if name in SUBSET_NEAR:
            prompt, command, output, answer = SUBSET_NEAR[name]
            tools = [{"op": "run", "command": command, "output": output, "status": "ok"}]
            expect = {"outcome": "succeeded", "unit": f"s{i:03d}:subset", "near_miss_of": name}
            turns.append(
                self._turn(
                    i,
                    k + 2,
                    rng.randrange(self.days),
                    rng.choice(ALL_AGENTS),
                    prompt + scope,
                    answer,
                    tools,
                    expect,
                )
            )
        scenario["truth"] = {
            "chore": name,
            "group": [t["key"] for t in turns[:k]],
            "near_miss": [t["key"] for t in turns[k:]],
        }
        return turns, []


# --- payloads -------------------------------------------------------------------------------------


class Calls:
    """The hook calls of one turn in one agent's shapes: a list of (argv after the command, stdin dict or
    None, extra environment, trigger label)."""

    def __init__(self, agent: str, repo: str, session: dict):
        self.agent, self.repo, self.session = agent, repo, session
        self.calls = []

    def abs(self, rel):
        return os.path.join(self.repo, rel)

    def base(self):
        s = self.session
        if self.agent in ("kiro-classic", "kiro-v3"):
            return {"cwd": self.repo, "session_id": s["id"]}
        if self.agent in ("claude-code", "codex", "gemini"):
            out = {"session_id": s["id"], "transcript_path": s["transcript"], "cwd": self.repo}
            if self.agent == "codex":
                out.update({"model": "gpt-5-codex", "permission_mode": "workspace-write"})
                if s.get("turn_id"):
                    out["turn_id"] = s["turn_id"]
            if self.agent == "claude-code":
                out["permission_mode"] = "default"
            if self.agent == "gemini":
                out["timestamp"] = "2026-12-01T10:00:00.000Z"
            return out
        if self.agent == "copilot":
            return {"sessionId": s["id"], "timestamp": int(time.time() * 1000), "cwd": self.repo}
        return {}

    def add(self, argv, payload, env=None, label=""):
        self.calls.append((argv, payload, env or {}, label))

    def event(self, name, label, **fields):
        """A stdin payload with `hook_event_name` (every agent but Copilot and IDE 0.x)."""
        self.add([], {**self.base(), "hook_event_name": name, **fields}, None, label)

    # lifecycle
    def session_start(self, first_prompt):
        a = self.agent
        if a == "kiro-classic":
            self.event("agentSpawn", "agentSpawn")
        elif a in ("kiro-v3", "claude-code", "codex", "gemini"):
            extra = {} if a == "kiro-v3" else {"source": "startup"}
            self.event("SessionStart", "agentSpawn", **extra)
        elif a == "copilot":
            self.add(
                ["sessionStart"],
                {**self.base(), "source": "new", "initialPrompt": first_prompt},
                None,
                "agentSpawn",
            )
        # kiro-ide (IDE 0.x) fires no session-start hook

    def prompt(self, text):
        a = self.agent
        if a == "kiro-classic":
            self.event("userPromptSubmit", "userPromptSubmit", prompt=text)
        elif a in ("kiro-v3", "claude-code", "codex"):
            self.event("UserPromptSubmit", "userPromptSubmit", prompt=text)
        elif a == "gemini":
            self.event("BeforeAgent", "userPromptSubmit", prompt=text)
        elif a == "copilot":
            self.add(["userPromptSubmitted"], {**self.base(), "prompt": text}, None, "userPromptSubmit")
        elif a == "kiro-ide":
            self.add(["ide-prompt-submit"], None, {"USER_PROMPT": text}, "userPromptSubmit")

    def stop(self, prompt, answer):
        a = self.agent
        if a == "kiro-classic":
            self.event("stop", "stop", assistant_response=answer)
        elif a == "kiro-v3":
            self.event("Stop", "stop")  # v3 Stop carries no answer (Kiro #10344)
        elif a in ("claude-code", "codex"):
            self.event("Stop", "stop", stop_hook_active=False, last_assistant_message=answer)
        elif a == "gemini":
            self.event("AfterAgent", "stop", prompt=prompt, prompt_response=answer)
        elif a == "copilot":
            message = {"type": "assistant.message", "data": {"content": answer, "toolRequests": []}}
            # where Copilot's agentStop hook reads the turn's answer
            with open(self.session["transcript"], "a", encoding="utf-8") as fh:
                fh.write(json.dumps(message) + "\n")
            self.add(
                ["agentStop"],
                {
                    **self.base(),
                    "transcriptPath": self.session["transcript"],
                    "stopReason": "end_turn",
                    "stop_hook_active": False,
                },
                None,
                "stop",
            )
        elif a == "kiro-ide":
            self.add(["ide-agent-stop"], None, {"USER_PROMPT": answer}, "stop")

    # tools
    def tool(self, spec, content_before: "str | None"):
        op = spec["op"]
        getattr(self, "_" + op)(spec, content_before)

    def _post(self, name, tool_input, response, pre_input=None):
        """Post-tool call (and the pre-tool call where the agent's installed hooks need it)."""
        a = self.agent
        if a == "kiro-classic":
            self.event(
                "postToolUse", "postToolUse", tool_name=name, tool_input=tool_input, tool_response=response
            )
        elif a == "kiro-v3":
            self.event("PreToolUse", "preToolUse", tool_name=name, tool_input=pre_input or tool_input)
            self.event("PostToolUse", "postToolUse", tool_name=name, tool_input={}, tool_response=response)
        elif a in ("claude-code", "codex"):
            digest = hashlib.sha1(json.dumps([name, tool_input], sort_keys=True).encode()).hexdigest()
            self.event(
                "PostToolUse",
                "postToolUse",
                tool_name=name,
                tool_input=tool_input,
                tool_response=response,
                tool_use_id="toolu_" + digest[:20],
            )
        elif a == "gemini":
            self.event(
                "AfterTool", "postToolUse", tool_name=name, tool_input=tool_input, tool_response=response
            )
        elif a == "copilot":
            self.add(
                ["postToolUse"],
                {**self.base(), "toolName": name, "toolArgs": tool_input, "toolResult": response},
                None,
                "postToolUse",
            )
        elif a == "kiro-ide":
            ok = not (isinstance(response, dict) and response.get("_ok") is False)
            result = response.get("text") if isinstance(response, dict) else response
            self.add(
                ["ide-post-tool"],
                None,
                {
                    "USER_PROMPT": json.dumps(
                        {"toolName": name, "toolArgs": {}, "toolResult": result, "toolSuccess": ok}
                    )
                },
                "postToolUse",
            )

    def _write(self, spec, before):
        a, rel, text = self.agent, spec["path"], spec["content"]
        p = self.abs(rel)
        if a == "kiro-classic":
            self._post(
                "fs_write",
                {"command": "create", "path": p, "file_text": text},
                {"success": True, "result": [""]},
            )
        elif a == "kiro-v3":
            self._post("write", {"path": p, "text": text}, f"Created the {rel} file.")
        elif a == "kiro-ide":
            self._post("fs_write", {}, {"text": f"Created the {rel} file.", "_ok": True})
        elif a == "claude-code":
            self._post(
                "Write",
                {"file_path": p, "content": text},
                {"type": "create", "filePath": p, "content": text, "structuredPatch": []},
            )
        elif a == "gemini":
            self._post(
                "write_file",
                {"file_path": p, "content": text},
                {
                    "llmContent": f"Successfully created and wrote to new file: {p}.",
                    "returnDisplay": f"Created {rel}",
                },
            )
        elif a == "copilot":
            self._post(
                "create",
                {"path": p, "file_text": text},
                {
                    "resultType": "success",
                    "textResultForLlm": f"Created file {p} with {len(text)} characters",
                },
            )
        elif a == "codex":
            self._post("Bash", {"command": f"cat > {rel} <<'EOF'\n{text}EOF"}, {"exit_code": 0, "output": ""})

    def _edit(self, spec, before):
        a, rel, old, new = self.agent, spec["path"], spec["old"], spec["new"]
        p = self.abs(rel)
        if a == "kiro-classic":
            self._post(
                "fs_write",
                {"command": "str_replace", "path": p, "old_str": old, "new_str": new},
                {"success": True, "result": [""]},
            )
        elif a == "kiro-v3":
            self._post("str_replace", {"path": p, "oldStr": old, "newStr": new}, f"Replaced text in {rel}.")
        elif a == "kiro-ide":
            self._post("fs_write", {}, {"text": f"Edited the {rel} file.", "_ok": True})
        elif a == "claude-code":
            self._post(
                "Edit",
                {"file_path": p, "old_string": old, "new_string": new, "replace_all": False},
                {
                    "filePath": p,
                    "oldString": old,
                    "newString": new,
                    "originalFile": before or "",
                    "structuredPatch": [
                        {
                            "oldStart": 1,
                            "oldLines": 1,
                            "newStart": 1,
                            "newLines": 1,
                            "lines": [f"-{old}", f"+{new}"],
                        }
                    ],
                    "userModified": False,
                    "replaceAll": False,
                },
            )
        elif a == "gemini":
            self._post(
                "replace",
                {"file_path": p, "old_string": old, "new_string": new},
                {
                    "llmContent": f"Successfully modified file: {p} (1 replacements).",
                    "returnDisplay": f"Edited {rel}",
                },
            )
        elif a == "copilot":
            self._post(
                "edit",
                {"path": p, "old_str": old, "new_str": new},
                {"resultType": "success", "textResultForLlm": f"File {p} updated with changes."},
            )
        elif a == "codex":
            sed = f"sed -i 's/^{old}$/{new}/' {rel}"
            self._post("Bash", {"command": sed}, {"exit_code": 0, "output": ""})

    def _read(self, spec, before):
        a, rel = self.agent, spec["path"]
        p, text = self.abs(rel), (before or "")[:400]
        if a == "kiro-classic":
            self._post(
                "fs_read", {"operations": [{"mode": "Line", "path": p}]}, {"success": True, "result": [text]}
            )
        elif a == "kiro-v3":
            self._post("read", {"operations": [{"mode": "Line", "path": p}]}, text)
        elif a == "kiro-ide":
            self._post("fs_read", {}, {"text": text, "_ok": True})
        elif a == "claude-code":
            lines = text.count("\n")
            self._post(
                "Read",
                {"file_path": p},
                {
                    "type": "text",
                    "file": {
                        "filePath": p,
                        "content": text,
                        "numLines": lines,
                        "startLine": 1,
                        "totalLines": lines,
                    },
                },
            )
        elif a == "gemini":
            self._post("read_file", {"file_path": p}, {"llmContent": text, "returnDisplay": ""})
        elif a == "copilot":
            self._post("view", {"path": p}, {"resultType": "success", "textResultForLlm": text})
        elif a == "codex":
            self._post("Bash", {"command": f"cat {rel}"}, {"exit_code": 0, "output": text})

    def _run(self, spec, before):
        a, cmd, out, ok = self.agent, spec["command"], spec["output"], spec["status"] == "ok"
        shape = spec.get("shape")
        if a == "kiro-classic":
            name, tin = "execute_bash", {"command": cmd, "summary": cmd.split()[0]}
            if ok:
                resp = {"success": True, "result": [{"exit_status": "0", "stdout": out, "stderr": ""}]}
            elif shape == "kiro-success-false":
                resp = {"success": False, "error": [out]}
            else:
                resp = {"success": True, "result": [{"exit_status": "1", "stdout": "", "stderr": out}]}
            self._post(name, tin, resp)
        elif a == "kiro-v3":
            tool_input = {"command": cmd, "cwd": self.repo, "run_in_background": False, "timeout": 120}
            self._post("shell", tool_input, f"Output:\n{out}\nExit Code: {0 if ok else 1}")
        elif a == "kiro-ide":
            self._post("execute_bash", {}, {"text": out if ok else f"Command failed: {out}", "_ok": ok})
        elif a == "claude-code":
            self._post(
                "Bash",
                {"command": cmd, "description": "Run " + cmd.split()[0]},
                {"stdout": out, "stderr": "", "interrupted": False, "isImage": False},
            )
        elif a == "codex":
            if ok:
                resp = {"exit_code": 0, "output": out}
            elif shape == "codex-exit-null-readonly":
                resp = {"exit_code": None, "output": out}
            else:
                resp = {"exit_code": 2, "output": out}
            self._post("Bash", {"command": cmd}, resp)
        elif a == "gemini":
            if ok:
                text = f"Command: {cmd}\nDirectory: (root)\nOutput: {out or '(empty)'}\nError: (none)"
                resp = {"llmContent": text, "returnDisplay": out}
            else:
                resp = {
                    "llmContent": f"Error: {out}",
                    "returnDisplay": f"Error: {out}",
                    "error": {"message": out, "type": "execution_failed"},
                }
            self._post("run_shell_command", {"command": cmd, "description": cmd.split()[0]}, resp)
        elif a == "copilot":
            status = "success" if ok else "failure"
            text = f"{out}\n<shellId: 0 completed with exit code {0 if ok else 1}>"
            self._post(
                "bash",
                {"command": cmd, "description": cmd.split()[0]},
                {"resultType": status, "textResultForLlm": text},
            )


# --- running -------------------------------------------------------------------------------------


class Runner:
    """Plays a plan in a real repository through the real console scripts; records CPU costs."""

    def __init__(self, plan: dict, workdir: str, bin_dir: str, jobs: int = 2, settle: int = 3, log=print):
        self.plan, self.workdir, self.jobs, self.settle, self.log = plan, workdir, max(1, jobs), settle, log
        self.repo = os.path.join(workdir, "repo")
        self.home = os.path.join(workdir, "kirolearn-home")
        bin_dir = os.path.abspath(bin_dir)  # the hooks run in the repository, not here
        self.hook = os.path.join(bin_dir, "kirolearn-hook")
        self.cli = os.path.join(bin_dir, "kirolearn")
        for exe in (self.hook, self.cli):
            if not os.access(exe, os.X_OK):
                raise SystemExit(
                    f"history: {exe} is not an executable "
                    "(pass --bin DIR holding kirolearn and kirolearn-hook)"
                )
        for exe in (self.hook, self.cli):  # a script whose module moved fails here, not 400 times later
            probe = subprocess.run(
                [exe, "--version"], capture_output=True, text=True, check=False, cwd=tempfile.gettempdir()
            )
            if probe.returncode != 0:
                raise SystemExit(
                    f"history: `{exe} --version` failed (exit {probe.returncode}): "
                    f"{(probe.stderr or probe.stdout).strip()[-300:]}"
                )
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(
                ("KIROLEARN_", "KIRO_", "VSCODE_", "CLAUDE_", "CODEX_", "GEMINI_", "COPILOT_")
            )
            and k not in ("USER_PROMPT", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH")
        }
        env["KIROLEARN_HOME"] = self.home
        # Bytecode as an installed package has it, written outside the source tree (never into /work/main).
        env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "kirolearn-bench-pycache")
        self.env = env
        self.costs = {}  # label -> list of (cpu seconds, wall seconds)
        self.hook_errors = []
        self.drains = []
        self.lock = threading.Lock()
        self.files = {}  # rel path -> content (what the agent last left)

    # processes
    def run_process(self, argv, stdin: "bytes | None", env: dict, label: str, cwd: "str | None" = None):
        """Run one process; returns (exit status, output) and records its CPU seconds from wait4."""
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            cwd=cwd or self.repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        )
        if stdin is not None:
            try:
                proc.stdin.write(stdin)
            except BrokenPipeError:
                pass
            proc.stdin.close()
        out = proc.stdout.read()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        with self.lock:
            self.costs.setdefault(label, []).append((usage.ru_utime + usage.ru_stime, wall))
        return proc.returncode, out.decode("utf-8", "replace")

    def cli_json(self, *args, label=None):
        code, out = self.run_process([self.cli, *args], None, self.env, label or "cli " + args[0])
        return code, out

    def git(self, *args, check=True):
        env = {
            **self.env,
            "GIT_AUTHOR_NAME": "Dana Dev",
            "GIT_AUTHOR_EMAIL": "dana@example.test",
            "GIT_COMMITTER_NAME": "Dana Dev",
            "GIT_COMMITTER_EMAIL": "dana@example.test",
        }
        result = subprocess.run(
            ["git", "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", *args],
            cwd=self.repo,
            env=env,
            capture_output=True,
            text=True,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)}: {result.stderr.strip()}")
        return result

    # the repository
    def init_repo(self):
        os.makedirs(self.repo)
        os.makedirs(self.home, mode=0o700)
        self.git("init", "-q")
        self.write("README.md", "# shopfront\n\nA web shop backend used to replay a month of agent work.\n")
        self.write("pyproject.toml", '[project]\nname = "shopfront"\nversion = "1.4.0"\n')
        self.write(".gitignore", "__pycache__/\nbuild/\n")
        self.write("src/__init__.py", "")
        for module, values in sorted(self.plan["config"].items()):
            self.write(f"config/{module}.py", config_text(module, values))
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "initial import")

    def write(self, rel, text):
        path = os.path.join(self.repo, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)

    def read(self, rel) -> "str | None":
        try:
            with open(os.path.join(self.repo, rel), encoding="utf-8") as fh:
                return fh.read()
        except OSError:
            return None

    def apply_tool(self, spec):
        """What the agent's tool did to the working tree (before its post-tool hook fires)."""
        if spec["op"] == "write":
            self.write(spec["path"], spec["content"])
        elif spec["op"] == "edit":
            text = self.read(spec["path"]) or ""
            assert spec["old"] in text, f"{spec['path']}: {spec['old']!r} not found"
            self.write(spec["path"], text.replace(spec["old"], spec["new"], 1))

    # sessions
    def sessions_of_day(self, day):
        by_agent = {}
        for turn in self.plan["turns"]:
            if turn["day"] == day:
                by_agent.setdefault(turn["agent"], []).append(turn)
        rng = random.Random(f"{self.plan['seed']}/day/{day}")
        sessions = []
        for agent in sorted(by_agent):
            turns = sorted(by_agent[agent], key=lambda t: t["key"])
            rng.shuffle(turns)
            sid = self.session_id(agent, day)
            transcript = os.path.join(self.workdir, "transcripts", f"{agent}-{day}.jsonl")
            sessions.append({"agent": agent, "day": day, "id": sid, "transcript": transcript, "turns": turns})
        rng.shuffle(sessions)
        return sessions

    def session_id(self, agent, day):
        digest = hashlib.sha256(f"{self.plan['seed']}/{self.plan['half']}/{agent}/{day}".encode()).hexdigest()
        u = str(uuid.UUID(digest[:32]))
        if agent == "kiro-v3":
            return "sess_" + digest[:24]
        if agent == "kiro-ide":
            return None  # the hook's session file decides
        return u

    def play_session(self, session):
        os.makedirs(os.path.dirname(session["transcript"]), exist_ok=True)
        open(session["transcript"], "a").close()
        agent = session["agent"]
        first = True
        for n, turn in enumerate(session["turns"]):
            session["turn_id"] = f"turn-{n}"
            calls = Calls(agent, self.repo, session)
            if first:
                calls.session_start(turn["prompt"])
                first = False
            calls.prompt(turn["prompt"])
            for spec in turn["tools"]:
                before = self.read(spec["path"]) if "path" in spec else None
                self.flush(calls, agent)  # earlier calls go out before the tool changes the tree
                self.apply_tool(spec)
                calls.tool(spec, before)
                self.flush(calls, agent)
            calls.stop(turn["prompt"], turn["answer"])
            self.flush(calls, agent)
            turn["session_id"] = session["id"]

    def flush(self, calls, agent):
        for argv_tail, payload, env_extra, label in calls.calls:
            argv = [self.hook]
            if HOOK_AGENT_ARG[agent]:
                argv += ["--agent", HOOK_AGENT_ARG[agent]]
            argv += argv_tail
            env = {**self.env, **env_extra}
            data = json.dumps(payload).encode() if payload is not None else None
            code, out = self.run_process(argv, data, env, "hook " + label)
            if code != 0 or "[kirolearn]" in out:
                with self.lock:
                    self.hook_errors.append(
                        {"agent": agent, "label": label, "status": code, "output": out[-300:]}
                    )
        calls.calls = []

    def drain(self, label="drain"):
        code, out = self.cli_json("drain", "--json", label=label)
        try:
            stats = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        except ValueError:
            stats = {"unparsed": out[-300:]}
        self.drains.append(
            {
                "label": label,
                "status": code,
                **{
                    k: stats.get(k)
                    for k in (
                        "records_written",
                        "records_embedded",
                        "embedding_error",
                        "stored",
                        "quarantined",
                        "pending_events",
                        "duration_ms",
                        "unparsed",
                    )
                    if k in stats
                },
            }
        )
        return stats

    # user actions
    def act(self, action):
        kind, rel = action["kind"], action["path"]
        path = os.path.join(self.repo, rel)
        if kind == "git-rm":
            self.git("rm", "-q", rel)
        elif kind == "rm":
            os.remove(path)
            if action.get("sibling"):
                self.write(action["sibling"]["path"], module_text(action["sibling"]["noun"], 10))
        elif kind == "git-mv":
            self.git("mv", rel, action["to"])
        elif kind == "rewrite":
            self.write(rel, rewritten_text(action["noun"]))
        elif kind == "touch":
            later = time.time() + 5
            os.utime(path, (later, later))
        elif kind == "comment":
            self.write(rel, self.read(rel) + f"# Reviewed: keep the {action['noun']} helpers small.\n")
        elif kind == "blank-lines":
            self.write(rel, (self.read(rel) or "").replace("\n\n\ndef ", "\n\n\n\ndef ", 1) + "\n")
        if action["commit"] and kind != "touch":
            self.git("add", "-A")
            self.git("commit", "-q", "-m", f"{kind} {rel}")

    def end_of_day_commit(self, day):
        if self.git("status", "--porcelain").stdout.strip():
            self.git("add", "-A")
            self.git("commit", "-q", "-m", f"day {day}: agent work")

    def run(self):
        t0 = time.perf_counter()
        self.phases = {"sessions": 0.0, "drains": 0.0, "user": 0.0}

        def timed(phase, fn, *args):
            start = time.perf_counter()
            try:
                return fn(*args)
            finally:
                self.phases[phase] += time.perf_counter() - start

        timed("user", self.init_repo)
        for day in range(self.plan["days"]):
            sessions = self.sessions_of_day(day)
            if self.jobs > 1:
                with ThreadPoolExecutor(self.jobs) as pool:
                    timed("sessions", lambda todo: list(pool.map(self.play_session, todo)), sessions)
            else:
                for session in sessions:
                    timed("sessions", self.play_session, session)
            timed("user", self.end_of_day_commit, day)
            timed("drains", self.drain)
            for action in self.plan["actions"]:
                if action["after_day"] == day:
                    timed("user", self.act, action)
        # The scheduler's next passes, nothing new spooled: at least `settle`, and on until a pass embeds
        # nothing (a pass embeds for a bounded time, so on a busy machine vectors can lag a few passes;
        # without this, what search ranks would depend on the machine's load).
        for n in range(self.settle + MORE_SETTLE):
            stats = timed("drains", self.drain, "drain (idle)")
            if n + 1 >= self.settle and not stats.get("records_embedded") and not stats.get("pending_events"):
                break
        self.seconds = time.perf_counter() - t0
        return self.summary()

    def summary(self):
        return {
            "workdir": self.workdir,
            "repo": self.repo,
            "kirolearn_home": self.home,
            "seconds": round(self.seconds, 1),
            "hook_calls": sum(len(v) for k, v in self.costs.items() if k.startswith("hook ")),
            "hook_errors": self.hook_errors,
            "drains": self.drains,
            "phases": {k: round(v, 1) for k, v in self.phases.items()},
            "head": self.git("rev-parse", "HEAD").stdout.strip(),
            "commits": int(self.git("rev-list", "--count", "HEAD").stdout.strip()),
        }


def session_of_turns(plan):
    return {t["key"]: t.get("session_id") for t in plan["turns"]}


def build(
    half: str,
    seed: int,
    scenarios: int,
    workdir: str,
    bin_dir: str = DEFAULT_BIN,
    jobs: int = 2,
    days: int = DAYS,
    settle: int = 3,
    log=print,
) -> "tuple[dict, Runner]":
    """Plan and play one half in `workdir` (created); writes workdir/truth.json; returns (truth, runner)."""
    plan = Planner(seed, scenarios, days).plan(half)
    os.makedirs(workdir, exist_ok=True)
    runner = Runner(plan, workdir, bin_dir, jobs=jobs, settle=settle, log=log)
    played = runner.run()
    truth = {**plan, "played": played}
    with open(os.path.join(workdir, "truth.json"), "w", encoding="utf-8") as fh:
        json.dump(truth, fh, indent=1)
    return truth, runner


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=HALVES, default="tune")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--scenarios", type=int, default=SCENARIOS, help=f"scenarios per half (default {SCENARIOS})"
    )
    parser.add_argument("--days", type=int, default=DAYS)
    parser.add_argument(
        "--workdir", help="where the repository and KIROLEARN_HOME go (default: a new temp folder, kept)"
    )
    parser.add_argument(
        "--bin",
        default=os.environ.get("KIROLEARN_BENCH_BIN", DEFAULT_BIN),
        help="folder with the kirolearn and kirolearn-hook console scripts",
    )
    parser.add_argument("--jobs", type=int, default=3, help="sessions of one day played at once (default 3)")
    parser.add_argument("--plan-only", action="store_true", help="print the plan as JSON; run nothing")
    args = parser.parse_args(argv)
    if args.plan_only:
        json.dump(Planner(args.seed, args.scenarios, args.days).plan(args.half), sys.stdout, indent=1)
        print()
        return 0
    workdir = args.workdir or tempfile.mkdtemp(prefix=f"kirolearn-history-{args.half}-")
    truth, _ = build(args.half, args.seed, args.scenarios, workdir, args.bin, args.jobs, args.days)
    played = truth["played"]
    print(
        f"{len(truth['scenarios'])} scenarios, {len(truth['turns'])} turns, "
        f"{played['hook_calls']} hook calls, "
        f"{len(played['drains'])} drains, {played['commits']} commits in {played['seconds']} s"
    )
    print(
        f"repository {played['repo']}; KIROLEARN_HOME {played['kirolearn_home']}; truth {workdir}/truth.json"
    )
    if played["hook_errors"]:
        print(f"{len(played['hook_errors'])} hook calls reported errors, first: {played['hook_errors'][0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
