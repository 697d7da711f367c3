"""The recorded Kiro sessions in queue/sessions replay cleanly through the real hooks."""

import glob
import json
import os
import subprocess

import pytest

from kirolearn import demo
from kirolearn.capture import spool
from kirolearn.core import replay
from kirolearn.pipeline.schema import Event

RECORDINGS = sorted(glob.glob(os.path.join(demo.RECORDINGS, "*.jsonl")))


def test_recordings_exist():
    names = {os.path.basename(p) for p in RECORDINGS}
    assert {"cli-classic.jsonl", "ide-v3.jsonl", "ide-legacy.jsonl"} <= names


@pytest.mark.parametrize("path", RECORDINGS, ids=os.path.basename)
def test_recording_replays_into_valid_events(path, tmp_path, home):
    project = replay.make_project(str(tmp_path / "proj"))
    calls = replay.load(path)
    results = replay.replay(calls, project)
    assert [(r.returncode, r.stdout, r.stderr) for r in results] == [(0, b"", b"")] * len(calls)
    files = spool.ready_files()
    skipped = sum(1 for c in calls if c.argv == ["ide-agent-stop"] and not c.env.get("USER_PROMPT"))
    assert len(files) == len(calls) - skipped
    parsed = [Event.model_validate(json.loads(open(f, "rb").read())) for f in files]
    assert {e.project_root for e in parsed} == {os.path.realpath(project)}
    assert len({e.session_id for e in parsed}) == 1  # one recorded session, one id


def test_bad_recording_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"argv": []}\nnot json\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not a recorded hook call"):
        replay.load(str(bad))


@pytest.mark.slow
def test_demo_runs_end_to_end(capsys):
    assert demo.main([]) == 0
    out = capsys.readouterr().out
    assert "0 calls with output or errors" in out and "with output or errors)" in out
    # 24 hook calls, 23 events: the one that recorded nothing is explained
    assert "4 hook calls from queue/sessions/ide-legacy.jsonl: 3 events recorded" in out
    assert "1 call recorded nothing, by design: the IDE's agentStop came with an empty USER_PROMPT" in out
    assert out.rstrip().endswith("`make test` runs the tests.") and "== what next" in out
    assert "session_summary  stop" in out


def test_bin_shim_always_exits_0(tmp_path):
    shim = os.path.join(os.path.dirname(demo.RECORDINGS), "..", "bin", "kirolearn-hook")
    result = subprocess.run([shim, "--version"], capture_output=True, timeout=20)
    assert result.returncode == 0
    # Copied away from a checkout (no .venv beside it) it still exits 0, silently.
    lonely = tmp_path / "bin" / "kirolearn-hook"
    lonely.parent.mkdir()
    lonely.write_bytes(open(shim, "rb").read())
    lonely.chmod(0o755)
    result = subprocess.run([str(lonely), "stop"], capture_output=True, timeout=20)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")


@pytest.mark.slow
def test_demo_keep_prints_how_to_open_the_viewer_on_its_data(capsys, monkeypatch, home):
    """Issue #33: from `make demo` to a look at the viewer: --keep prints the command, which works."""
    import shlex
    import shutil

    from starlette.testclient import TestClient

    from kirolearn.viewer.app import create_app

    assert demo.main(["--keep"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "open the viewer on this demo's memory:" in line)
    words = shlex.split(line.split("memory:", 1)[1])
    assert words[0].startswith("KIROLEARN_HOME=") and os.path.basename(words[1]) == "kirolearn"
    assert words[2:] == ["serve"]
    kept = words[0].split("=", 1)[1]
    try:
        assert os.path.exists(os.path.join(kept, "kirolearn.db"))
        monkeypatch.setenv("KIROLEARN_HOME", kept)
        viewer = TestClient(create_app("t", 8765), base_url="http://127.0.0.1:8765")
        page = viewer.get("/?token=t")
        assert page.status_code == 200 and "No memory records yet" not in page.text and "mr_" in page.text
    finally:
        shutil.rmtree(os.path.dirname(kept), ignore_errors=True)
    assert "kirolearn serve" in out.split("== what next", 1)[1]


def test_the_viewer_empty_state_names_every_agent(home):
    from starlette.testclient import TestClient

    from kirolearn.viewer.app import create_app

    page = TestClient(create_app("t", 8765), base_url="http://127.0.0.1:8765").get("/?token=t").text
    assert "No memory records yet" in page
    assert all(
        name in page for name in ("Kiro", "Claude Code", "Codex", "Copilot", "Gemini", "opencode", "Cursor")
    )


@pytest.mark.parametrize("on_path", [False, True])
def test_what_next_names_kirolearn_as_it_can_be_typed_here(on_path):
    """After `make demo` in a checkout, `kirolearn` is only in .venv/bin unless PATH has it."""
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(demo.__file__)))
    venv_bin = os.path.dirname(sys.executable)
    path = os.pathsep.join(([venv_bin] if on_path else []) + ["/usr/bin", "/bin"])
    done = subprocess.run(
        [sys.executable, "-c", "from kirolearn import demo; print(demo.what_next())"],
        env={**os.environ, "PATH": path},
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    typed = "kirolearn" if on_path else os.path.relpath(os.path.join(venv_bin, "kirolearn"), root)
    assert f"\n  {typed} install " in done.stdout and f"`{typed} drain --watch`" in done.stdout
    if not on_path:
        assert "\n  kirolearn install" not in done.stdout
