"""Shared by the benchmarks: percentiles, the printed table (figure, value, target), and the hook command."""

import json
import os
import subprocess


def installed_hook(venv: str) -> "list[str]":
    """The hook command `kirolearn install` writes in that venv: program and arguments before the event
    (kirolearn.install.engine.hook_argv, asked of the venv's own Python, so the benchmark runs exactly it)."""
    python = os.path.join(venv, "bin", "python")
    code = "import json; from kirolearn.install import engine; print(json.dumps(engine.hook_argv()))"
    # -I: not the source tree in the current folder, the installed package, as `kirolearn install` sees it
    return json.loads(
        subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, check=True).stdout
    )


def compile_package(venv: str) -> None:
    """kirolearn's bytecode written before anything is timed, as pip's install writes it. With
    PYTHONDONTWRITEBYTECODE set (this machine's shells set it) no process writes it, and each one
    compiles every kirolearn module changed since the last compile: measured at 100k records, the
    prompt hook with the recall server up 3.17x the bare interpreter without bytecode, 2.06x with it."""
    python = os.path.join(venv, "bin", "python")
    code = "import compileall, os, kirolearn; compileall.compile_dir(os.path.dirname(kirolearn.__file__), quiet=1)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([python, "-I", "-c", code], env=env, capture_output=True, check=False)


def pct(values, q):
    """The q-quantile (0..1) of values, nearest rank (NaN for none)."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def print_table(title: str, rows) -> None:
    """Print rows of (figure, value, target) under a title."""
    width = max(len(r[0]) for r in rows)
    value_width = max(8, max(len(r[1]) for r in rows))
    print(title)
    print(f"{'figure':<{width}}  {'value':>{value_width}}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>{value_width}}  {target}")
