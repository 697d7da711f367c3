"""Pinned agent CLIs from npm, installed once into a cache folder and re-used.

`install("@anthropic-ai/claude-code@2.1.197", "claude")` returns the path of the
`claude` binary of that exact version. The cache is `$KIROLEARN_AGENTS_CACHE/<spec>/`
or `~/.cache/kirolearn-agents/<spec>/` (the spec sanitised into a folder name).

Without KIROLEARN_REQUIRE_AGENTS=1 an agent that is not in the cache yet is a
skip (with the command that installs it): a plain `pytest` never downloads.
With it (`make test-agents`, CI), a missing agent is installed, and one that
cannot be installed fails the test.
"""

import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

REQUIRE_ENV = "KIROLEARN_REQUIRE_AGENTS"
CACHE_ENV = "KIROLEARN_AGENTS_CACHE"
INSTALL_TIMEOUT = 900  # seconds: a cold npm install of an agent (its native binary is ~100-200 MB)
# The user's home as the test run started: tests point HOME at a temporary folder (tests/conftest.py's
# `home` fixture), and the cache must not move with it.
REAL_HOME = pathlib.Path.home()


def required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"


def _missing(reason: str):
    if required():
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1: a missing agent fails)", pytrace=False)
    pytest.skip(f"{reason}; `make test-agents` installs it")


def cache_root() -> pathlib.Path:
    root = os.environ.get(CACHE_ENV)
    return pathlib.Path(root) if root else REAL_HOME / ".cache" / "kirolearn-agents"


def folder_name(package_spec: str) -> str:
    """'@openai/codex@0.171.0' -> 'openai-codex-0.171.0'."""
    name = package_spec.lstrip("@").replace("/", "-").replace("@", "-")
    return "".join(c if c.isalnum() or c in "-._" else "-" for c in name)


def install(package_spec: str, bin_name: str, path: "str | None" = None) -> pathlib.Path:
    """The `bin_name` binary of the pinned `package_spec`, from the cache or installed into it.

    `path`: the binary's path inside the install folder, for a package that links no bin (a platform
    package such as `@factory/cli-linux-x64`); by default node_modules/.bin/`bin_name`.
    """
    prefix = cache_root() / folder_name(package_spec)
    inside = path or os.path.join("node_modules", ".bin", bin_name)
    binary = prefix / inside
    if binary.exists():
        return binary
    if not required():
        _missing(f"{package_spec} is not installed in {prefix}")
    npm = shutil.which("npm")
    if not npm:
        _missing(f"npm is not on PATH, so {package_spec} cannot be installed (apt-get install nodejs npm)")
    prefix.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{prefix.name}-", dir=prefix.parent))
    try:
        result = subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--no-update-notifier",
                "--loglevel=error",
                "--prefix",
                str(staging),
                package_spec,
            ],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        if result.returncode != 0:
            _missing(
                f"`npm install {package_spec}` failed: {(result.stderr or result.stdout).strip()[-800:]}"
            )
        if not (staging / inside).exists():
            _missing(f"{package_spec} installed but has no bin {bin_name!r} ({inside})")
        try:
            os.rename(staging, prefix)  # atomic: a parallel worker sees all of it or nothing
        except OSError:
            if not binary.exists():  # someone else won the race: theirs is as good
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return binary
