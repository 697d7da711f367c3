#!/usr/bin/env bash
# Install kirolearn as a user does, away from the checkout, and run it from there:
#   python -m build (sdist + wheel) -> twine check -> pipx install the wheel into a fresh PIPX_HOME
#   -> kirolearn --version, kirolearn doctor, the demo (python -m kirolearn.demo) from that install.
# Usage: scripts/check_wheel.sh [--uv]   (--uv: `uv tool install` instead of pipx)
# Everything goes to a temporary folder, removed at the end; KEEP=1 keeps it. Needs network access
# to the package index (pip, pipx and the wheel's dependencies), as any install does.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
installer=pipx
[[ "${1:-}" == "--uv" ]] && installer=uv

work=$(mktemp -d "${TMPDIR:-/tmp}/kirolearn-wheel.XXXXXX")
if [[ -z "${KEEP:-}" ]]; then trap 'rm -rf "$work"' EXIT; else echo "keeping $work"; fi
step() { echo "== check_wheel: $*"; }

step "build tools in $work/tools"
"$PYTHON" -m venv "$work/tools"
"$work/tools/bin/python" -m pip install --disable-pip-version-check build twine "$installer" > "$work/tools.log" 2>&1 \
  || { tail -n 40 "$work/tools.log"; echo "installing the build tools failed; log: $work/tools.log"; exit 1; }

step "python -m build (sdist and wheel into $work/dist)"
# from a copy of the tracked files, so nothing of this checkout's build/ or .egg-info leaks in
git ls-files -z | tar --null -T - -cf - | (mkdir -p "$work/src" && tar -xf - -C "$work/src")
"$work/tools/bin/python" -m build --outdir "$work/dist" "$work/src" > "$work/build.log" 2>&1 \
  || { tail -n 40 "$work/build.log"; echo "python -m build failed; log: $work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/kirolearn-*.whl)
ls -l "$work/dist"

step "twine check"
"$work/tools/bin/twine" check --strict "$work"/dist/*

step "the wheel holds the package data the demo and the installer need"
"$work/tools/bin/python" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ["kirolearn/launcher/kirolearn-hook", "kirolearn/viewer/templates/", "kirolearn/recall/static/",
        ".data/data/share/kirolearn/sessions/cli-classic.jsonl"]
missing = [n for n in need if not any(name.startswith(n) or n in name for name in names)]
if missing:
    sys.exit(f"the wheel lacks {missing}")
print(f"{len(names)} files, none missing")
PY

# a fresh HOME and tool home; the download caches stay where they were (nothing of them is installed state)
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$HOME/.cache/pip}" UV_CACHE_DIR="${UV_CACHE_DIR:-$HOME/.cache/uv}"
export HOME="$work/home" KIROLEARN_HOME="$work/kirolearn home"
mkdir -p "$HOME"
if [[ $installer == pipx ]]; then
  step "pipx install the wheel into a fresh PIPX_HOME"
  export PIPX_HOME="$work/pipx" PIPX_BIN_DIR="$work/bin" PIPX_MAN_DIR="$work/man"
  "$work/tools/bin/pipx" install --python "$PYTHON" "$wheel" > "$work/install.log" 2>&1 \
    || { tail -n 40 "$work/install.log"; echo "pipx install failed; log: $work/install.log"; exit 1; }
  env_python="$PIPX_HOME/venvs/kirolearn/bin/python"
else
  step "uv tool install the wheel into a fresh UV_TOOL_DIR"
  export UV_TOOL_DIR="$work/uv-tools" UV_TOOL_BIN_DIR="$work/bin"
  "$work/tools/bin/uv" tool install --python "$PYTHON" "$wheel" > "$work/install.log" 2>&1 \
    || { tail -n 40 "$work/install.log"; echo "uv tool install failed; log: $work/install.log"; exit 1; }
  env_python="$UV_TOOL_DIR/kirolearn/bin/python"
fi
tail -n 3 "$work/install.log"
export PATH="$work/bin:$PATH"

# run from a folder with no checkout above it, so nothing can come from the source tree
cd "$work/home"
step "which kirolearn: $(command -v kirolearn)"
[[ "$(command -v kirolearn)" == "$work/bin/kirolearn" ]] || { echo "kirolearn is not the installed one"; exit 1; }
"$env_python" -c 'import kirolearn, sys; p = kirolearn.__file__; print("kirolearn from", p); sys.exit("from the checkout!" if "/site-packages/" not in p else 0)'

step "kirolearn --version"
kirolearn --version

step "kirolearn doctor (WARN lines are expected: nothing is wired or scheduled in this fresh home)"
set +e
kirolearn doctor
status=$?
set -e
[[ $status == 0 || $status == 1 ]] || { echo "kirolearn doctor crashed (exit $status)"; exit 1; }

step "the demo, from the installed wheel"
"$env_python" -m kirolearn.demo > "$work/demo.log" 2>&1 || { cat "$work/demo.log"; echo "the demo failed"; exit 1; }
grep -q "== recall in cli-classic" "$work/demo.log" || { cat "$work/demo.log"; echo "the demo showed no recall"; exit 1; }
grep -E "^== (replayed|kirolearn drain|[0-9]+ memory records)" "$work/demo.log"
step "ok: built, checked, installed with $installer and run from the wheel"
