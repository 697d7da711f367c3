"""Pinned agent CLIs from npm, installed once into a cache folder and re-used.

`install("@openai/codex@0.171.0", "codex")` returns the path of the CLI's
binary. The cache is `$KIROLEARN_AGENTS_CACHE/<spec>` or
`~/.cache/kirolearn-agents/<spec>` (the spec sanitised to a folder name). When
npm or the package is missing the test is skipped with the reason, unless
KIROLEARN_REQUIRE_AGENTS=1 (CI), which fails it instead.
"""

import os
import pathlib
import re
import shutil
import subprocess

import pytest

NPM_TIMEOUT = 600  # seconds: a first install downloads a native binary


def _cache_root() -> pathlib.Path:
    root = os.environ.get("KIROLEARN_AGENTS_CACHE")
    if root:
        return pathlib.Path(root)
    # Tests point HOME at a tmp dir: the cache belongs in the real user's home, so a re-run is fast.
    try:
        import pwd

        real_home = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):  # Windows, or a uid without an entry
        real_home = os.environ.get("USERPROFILE") or str(pathlib.Path.home())
    return pathlib.Path(real_home) / ".cache" / "kirolearn-agents"


def _unavailable(reason: str):
    if os.environ.get("KIROLEARN_REQUIRE_AGENTS") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def install(package_spec: str, bin_name: str) -> pathlib.Path:
    """The bin path of `package_spec` (e.g. "@google/gemini-cli@0.61.0"), installed with npm if needed."""
    folder = _cache_root() / re.sub(r"[^A-Za-z0-9._-]+", "-", package_spec.lstrip("@")).strip("-")
    binary = folder / "node_modules" / ".bin" / bin_name
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        _unavailable(f"npm is not on PATH, so {package_spec} cannot be installed "
                     "(apt-get install nodejs npm, or set KIROLEARN_AGENTS_CACHE to a folder that has it)")
    folder.mkdir(parents=True, exist_ok=True)
    from filelock import FileLock  # pytest-xdist workers may ask for the same CLI at once

    with FileLock(str(folder) + ".lock", timeout=NPM_TIMEOUT):
        if binary.exists():
            return binary
        return _npm_install(npm, package_spec, folder, binary)


def _npm_install(npm: str, package_spec: str, folder: pathlib.Path, binary: pathlib.Path) -> pathlib.Path:
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false",
           "npm_config_audit": "false"}
    try:
        result = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), package_spec],
                                capture_output=True, text=True, timeout=NPM_TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        _unavailable(f"npm install {package_spec} took more than {NPM_TIMEOUT} s")
    if result.returncode != 0 or not binary.exists():
        _unavailable(f"npm install {package_spec} failed (exit {result.returncode}): "
                     f"{(result.stderr or result.stdout).strip()[-400:]}")
    return binary
