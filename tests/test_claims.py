"""Claims: facts read by file type, checked against a working tree, followed through moves."""

import os
import subprocess

import pytest

from kirolearn.claims import check, facts
from kirolearn.pipeline import claims as turns


def claims_of(path, text, **kw):
    return {c.key: c for c in turns.file_claims(path, text, None, [text], **kw)}


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)


def git(root, *args):
    subprocess.run(
        ["git", "-C", str(root), *args],
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@x",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@x",
        },
    )


TOML = '[staging]\nLOG_LEVEL = "DEBUG"\n\n[production]\nLOG_LEVEL = "WARNING"\nworkers = 4\n'


def test_toml_keys_carry_their_section():
    found = facts.read("config/app.toml", TOML)
    assert found["staging.LOG_LEVEL"].shown == "DEBUG" and found["production.LOG_LEVEL"].shown == "WARNING"
    assert found["production.LOG_LEVEL"].scope == "production"
    assert (found["production.workers"].start, found["production.workers"].end) == (6, 6)


@pytest.mark.parametrize(
    "path, before, after",
    [
        ("app.toml", TOML, TOML.replace('"', "'").replace(" = ", "   =   ").replace("\n", "\r\n")),
        (
            "settings.py",
            "import os\nimport sys\nX = 'a'\nY = [1, 2]\n",
            'import sys\nimport os\n\nX = "a"\nY = [\n    1,\n    2,\n]\n',
        ),
        ("c.json", '{"a": {"b": 1}, "c": "x"}', '{\n  "c": "x",\n  "a": {\n    "b": 1\n  }\n}\n'),
        ("c.yaml", "a:\n  b: 'x'\n  c: 1\n", 'a:\n    b: "x"   # note\n    c: 1\n'),
        (".env", "A='x'\nB=2\n", 'export A="x"\nB=2\n'),
        (
            "app.ts",
            "export const URL = 'x';\nexport function f(a) { return a }\n",
            'export const URL = "x"\n\nexport function f(a) {\n  return a;\n}\n',
        ),
        (
            "main.go",
            "package m\nconst N = 4\nfunc F() int {\n\treturn N\n}\n",
            "package m\n\nconst N = 4 // four\n\nfunc F() int {\n    return N\n}\n",
        ),
    ],
)
def test_a_formatter_never_changes_a_claim(path, before, after):
    old, new = facts.read(path, before), facts.read(path, after)
    assert old and {k: f.value for k, f in old.items()} == {k: f.value for k, f in new.items()}


def test_python_settings_and_symbols():
    found = facts.read(
        "s.py",
        "WORKERS = 4\nclass C:\n    DEBUG = True\n    def go(self):\n        pass\n\n@dec\ndef render(x):\n    return x\n",
    )
    assert found["WORKERS"].shown == "4" and found["C.DEBUG"].shown == "true"
    assert {"def render", "class C", "def C.go"} <= set(found)
    assert found["def render"].start == 7  # the decorator's line


def test_dependencies_are_one_fact_each():
    found = facts.read(
        "package.json", '{"dependencies": {"react": "^18.2.0"}, "devDependencies": {"vitest": "1.0"}}'
    )
    assert (
        found["dependencies.react"].kind == facts.DEPENDENCY
        and found["dependencies.react"].shown == "^18.2.0"
    )
    found = facts.read(
        "pyproject.toml", '[project]\nname = "x"\ndependencies = ["requests>=2.31", "click"]\n'
    )
    assert found["project.dependencies.requests"].shown == ">=2.31"
    assert found["project.dependencies.click"].shown == "(any)"
    found = facts.read("go.mod", "module m\n\nrequire (\n\tgithub.com/lib/pq v1.10.9\n)\n")
    assert found["require github.com/lib/pq"].shown == "v1.10.9"


def test_a_file_that_does_not_parse_is_none():
    assert facts.read("a.toml", "[x\n") is None and facts.read("a.py", "def (:\n") is None
    assert facts.read("notes.md", "# hi") == {}


def test_only_the_facts_an_edit_touched_are_claimed():
    text = TOML.replace('"WARNING"', '"ERROR"')
    fragment = 'LOG_LEVEL = "ERROR"'
    spans = turns._spans(text, [fragment])
    got = turns.file_claims("config/app.toml", text, spans, [fragment])
    assert [c.key for c in got] == ["production.LOG_LEVEL"] and got[0].shown == "ERROR"
    assert got[0].described() == "config/app.toml [production] LOG_LEVEL = ERROR"


def test_an_edit_inside_a_class_claims_the_setting_not_the_class():
    text = "class C:\n    DEBUG = False\n    def go(self):\n        pass\n"
    got = turns.file_claims("s.py", text, turns._spans(text, ["    DEBUG = False"]), ["DEBUG = False"])
    assert [c.key for c in got] == ["C.DEBUG"]


def test_lines_claim_where_no_reader_knows_the_file(tmp_path):
    text = "# Deploy\n\nRun `make deploy` from the repo root.\nThen tag the release.\n"
    got = turns.file_claims("docs/deploy.md", text, None, [text])
    assert len(got) == 1 and got[0].kind == facts.LINES and len(got[0].lines) == 3
    write(tmp_path, "docs/deploy.md", text.replace("Then tag the release.", "Then   tag  the release."))
    assert check.check(got[0], str(tmp_path)).state == check.CURRENT
    write(tmp_path, "docs/deploy.md", "# Something else entirely\n")
    assert check.check(got[0], str(tmp_path)).state == check.CHANGED  # rewritten, not gone
    os.remove(tmp_path / "docs/deploy.md")
    assert check.check(got[0], str(tmp_path)).state == check.DELETED


def test_check_states(tmp_path):
    root = str(tmp_path)
    write(tmp_path, "config/app.toml", TOML)
    claim = claims_of("config/app.toml", TOML)["production.LOG_LEVEL"]
    assert check.check(claim, root).state == check.CURRENT
    write(tmp_path, "config/app.toml", TOML.replace('"DEBUG"', '"INFO"') + "extra = 1\n")
    assert check.check(claim, root).state == check.CURRENT  # other lines changed
    write(tmp_path, "config/app.toml", TOML.replace('"WARNING"', '"ERROR"'))
    verdict = check.check(claim, root)
    assert verdict.state == check.CHANGED and verdict.now == "ERROR" and "now ERROR" in verdict.why
    write(tmp_path, "config/app.toml", "[production]\nworkers = 4\n")
    assert check.check(claim, root).state == check.DELETED
    write(tmp_path, "config/app.toml", "[production\n")
    assert check.check(claim, root).state == check.UNKNOWN
    os.remove(tmp_path / "config/app.toml")
    assert check.check(claim, root).state == check.DELETED


def test_a_secret_value_is_digested_with_the_home_key(tmp_path):
    from kirolearn.privacy.scrub import Scrubber

    text = 'API_KEY="ghp_' + "a1B2c3D4e5F6g7H8i9J0" * 2 + '"\nRETRIES=3\n'
    scrub = Scrubber().scrub_text
    got = {c.key: c for c in turns.file_claims(".env", text, None, [text], scrub, b"home-one")}
    assert got["RETRIES"].digest.startswith("s") and got["RETRIES"].shown == "3"
    assert got["API_KEY"].digest.startswith("k") and "ghp_" not in got["API_KEY"].shown
    write(tmp_path, ".env", text)
    assert check.check(got["API_KEY"], str(tmp_path), b"home-one").state == check.CURRENT
    assert check.check(got["API_KEY"], str(tmp_path), b"home-two").state == check.UNKNOWN
    assert check.check(got["RETRIES"], str(tmp_path)).state == check.CURRENT


@pytest.mark.parametrize("how", ["git-mv-committed", "git-mv-staged", "plain-mv", "no-git"])
def test_a_moved_file_is_followed(tmp_path, how):
    root = str(tmp_path)
    text = "WORKERS = 4\nTIMEOUT = 30\n" + "".join(f"NAME_{i} = {i}\n" for i in range(20))
    write(tmp_path, "src/shop/settings.py", text)
    if how != "no-git":
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "one")
    claim = claims_of("src/shop/settings.py", text)["WORKERS"]
    os.makedirs(tmp_path / "src/core")
    if how.startswith("git-mv"):
        git(root, "mv", "src/shop/settings.py", "src/core/settings.py")
        if how == "git-mv-committed":
            git(root, "commit", "-qm", "move")
    else:
        os.replace(tmp_path / "src/shop/settings.py", tmp_path / "src/core/settings.py")
    verdict = check.check(claim, root)
    assert verdict.state == check.CURRENT and verdict.path == "src/core/settings.py", verdict


def test_a_removed_file_is_not_followed_to_a_look_alike(tmp_path):
    root = str(tmp_path)
    text = "".join(f"VALUE_{i} = {i}\n" for i in range(20))
    write(tmp_path, "a/settings.py", text)
    claim = claims_of("a/settings.py", text)["VALUE_1"]
    os.remove(tmp_path / "a/settings.py")
    write(tmp_path, "b/other.py", "".join(f"OTHER_{i} = {i}\n" for i in range(20)) + "VALUE_1 = 1\n")
    assert check.check(claim, root).state == check.DELETED


def _event(tool, tool_input, cwd, response=None, agent="claude-code"):
    return {
        "kind": "tool_use",
        "trigger": "postToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_response": response if response is not None else {"success": True},
        "cwd": cwd,
        "agent": agent,
    }


def test_turn_claims_of_each_write_shape(tmp_path):
    root = str(tmp_path)
    write(tmp_path, "config/app.toml", TOML.replace('"WARNING"', '"ERROR"'))
    events = [
        _event("Write", {"file_path": "settings.py", "content": "WORKERS = 8\n"}, root),
        _event(
            "Edit",
            {
                "file_path": f"{root}/config/app.toml",
                "old_string": 'LOG_LEVEL = "WARNING"',
                "new_string": 'LOG_LEVEL = "ERROR"',
            },
            root,
        ),
        _event(
            "fs_write",
            {"command": "create", "path": "README.md", "file_text": "# App\n\nRun make.\n"},
            str(tmp_path / "docs"),
            agent="kiro",
        ),
        _event(
            "apply_patch",
            {"input": "*** Begin Patch\n*** Add File: web/app.ts\n+export const API = 'x'\n*** End Patch"},
            root,
            agent="codex",
        ),
        _event("Write", {"file_path": "broken.py", "content": "X = 1\n"}, root, {"is_error": True}),
    ]
    got = {(c.file, c.key): c for c in turns.turn_claims(events, root)}
    assert got[("settings.py", "WORKERS")].shown == "8"
    assert got[("config/app.toml", "production.LOG_LEVEL")].shown == "ERROR"
    assert ("config/app.toml", "staging.LOG_LEVEL") not in got
    assert ("docs/README.md", "") in got  # written from docs/: resolved against the cwd
    assert got[("web/app.ts", "API")].shown == "x"
    assert not any(f == "broken.py" for f, _ in got)  # a failed write claims nothing


def test_an_edit_the_file_no_longer_holds_cites_only_its_lines(tmp_path):
    write(tmp_path, "app.toml", TOML)  # the edit's text is not there any more
    events = [
        _event(
            "Edit",
            {"file_path": "app.toml", "old_string": "x", "new_string": 'LOG_LEVEL = "TRACE"'},
            str(tmp_path),
        )
    ]
    got = turns.turn_claims(events, str(tmp_path))
    assert [c.kind for c in got] == [facts.LINES]


def test_cites_from_memory_tools_and_repeated_claims():
    rid = "mr_01KBX8Y2Z3Q4R5S6T7V8W9X0YZ"
    tools = [
        _event(
            "mcp__kirolearn__search_memory",
            {"query": "retries"},
            "/r",
            f'{{"results": [{{"record_id": "{rid}"}}]}}',
        )
    ]
    assert turns.turn_cites(tools) == [rid]
    assert turns.turn_cites([_event("mcp__other__search", {}, "/r", rid)]) == []
    shown = [{"record_id": rid, "claims": [{"key": "retry.UPLOAD_RETRIES", "shown": "5"}]}]
    assert turns.turn_cites([], "UPLOAD_RETRIES is 5 today.", shown) == [rid]
    assert turns.turn_cites([], "UPLOAD_RETRIES is 50 today.", shown) == []


def test_signatures_are_the_same_only_for_identical_work():
    def sig(command, outcome="succeeded", claims=()):
        return turns.work_signature([_event("Bash", {"command": command}, "/r")], list(claims), outcome)

    assert sig("pytest tests/test_orders.py -q") == sig("pytest  tests/test_orders.py -q")
    assert sig("pytest tests/test_orders.py") != sig("pytest tests/test_payments.py")
    assert sig("terraform -chdir=infra/staging apply") != sig("terraform -chdir=infra/prod apply")
    assert sig("make") != sig("make", "failed")
    assert turns.work_signature([], [], "unknown", prompt="what is X?") is None
    assert turns.work_signature([], [], "unknown", prompt="What is X?", cites=["a"]) == turns.work_signature(
        [], [], "unknown", prompt="what is x", cites=["a"]
    )


def test_a_shell_command_that_writes_a_file_claims_what_it_wrote(tmp_path):
    root = str(tmp_path)
    write(tmp_path, "config/limits.py", "BURST_SIZE = 20\nRATE = 5\n")
    write(tmp_path, "config/app.env", "MODE=fast\n")
    events = [
        _event("Bash", {"command": "cat > config/new.py <<'EOF'\nTIMEOUT = 30\nEOF"}, root, agent="codex"),
        _event(
            "Bash",
            {"command": "sed -i 's/^BURST_SIZE = 10$/BURST_SIZE = 20/' config/limits.py"},
            root,
            agent="codex",
        ),
        _event("Bash", {"command": "echo 'MODE=fast' > config/app.env"}, root, agent="codex"),
        _event("Bash", {"command": "cat config/limits.py && pytest -q"}, root, agent="codex"),
    ]
    got = {(c.file, c.key): c.shown for c in turns.turn_claims(events, root)}
    assert got == {
        ("config/new.py", "TIMEOUT"): "30",
        ("config/limits.py", "BURST_SIZE"): "20",
        ("config/app.env", "MODE"): "fast",
    }
