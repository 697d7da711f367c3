"""Everything kirolearn creates (home, spool, store, logs, state, locks, quarantine) is private, even under
umask 000: folders 0700, files 0600."""

import json
import os
import shutil
import subprocess

import pytest
from conftest import BIN, cli, hook_env


@pytest.mark.slow
def test_everything_kirolearn_creates_is_private_under_umask_000(home, project, filled):
    def open_umask():
        os.umask(0)

    shutil.rmtree(home)  # start again, with the umask open
    env = hook_env()
    for i in range(3):
        body = {
            "hook_event_name": "userPromptSubmit",
            "cwd": str(project),
            "session_id": "m",
            "prompt": f"question {i}",
        }
        subprocess.run(
            [str(BIN / "kirolearn-hook")],
            input=json.dumps(body).encode(),
            env=env,
            timeout=30,
            capture_output=True,
            preexec_fn=open_umask,
            check=True,
        )
    junk = home / "spool" / "ready" / "junk.json"
    junk.write_bytes(b"not json")  # quarantined, with a .reason file
    junk.chmod(0o666)  # whoever left it: a quarantined file is made private
    previous = os.umask(0)
    try:
        for command in (["drain"], ["status"], ["doctor"], ["repair", "--force"], ["export"]):
            cli(*command)
    finally:
        os.umask(previous)
    subprocess.run(
        [str(BIN / "kirolearn-mcp"), "--project", str(project / "missing")],
        env=env,
        timeout=60,
        capture_output=True,
        preexec_fn=open_umask,
    )
    assert (home / "logs" / "mcp.log").exists() and (home / ".." / "kirolearn-home" / "state").exists()
    assert (home / "spool" / ".drain.lock").exists() and (home / "kirolearn.db.setup.lock").exists()
    seen = []
    for root, dirs, files in os.walk(home):
        for name in dirs:
            mode = os.stat(os.path.join(root, name)).st_mode & 0o777
            seen.append((os.path.join(root, name), mode, 0o700))
        for name in files:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode & 0o777
            seen.append((path, mode, 0o600))
    wrong = [(p, oct(m)) for p, m, want in seen if m != want]
    assert not wrong, wrong
    assert len(seen) > 12
