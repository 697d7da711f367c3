"""The library facade: the docs' example (docs/python.md) runs as written, and stays lazy."""

import io
import json
import pathlib
import re
import subprocess
import sys

import pytest

README = (pathlib.Path(__file__).parent.parent / "docs" / "python.md").read_text("utf-8")


def readme_example() -> str:
    section = README.split("# Use it from Python: `kirolearn.Memory`", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_runs(tmp_path, project, capsys):
    home = tmp_path / "facade-home"
    exec(compile(readme_example(), "docs/python.md", "exec"), {"home": str(home), "repo": str(project)})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Fix login 500")  # the saved summary is found by search
    assert "Fix login 500" in "\n".join(out)  # and shown at the next session start
    assert out[-1] == "True"  # init_session found the session summary
    assert (home / "kirolearn.db").exists()


def test_two_homes_do_not_mix(tmp_path, project):
    from kirolearn import Memory

    a, b = Memory(home=tmp_path / "a"), Memory(home=tmp_path / "b")
    a.save_turn_summary(
        project=project, request="Only in A", investigated="x", learned="y", completed="z", next_steps="w"
    )
    assert [h.title for h in a.search("only", project=project)] == ["Only in A"]
    assert b.search("only", project=project) == []
    buf = io.StringIO()
    assert a.export(buf) == 1
    assert json.loads(buf.getvalue())["type"] == "record"
    assert a.observations(project=project)[0].title == "Only in A"


def test_drain_and_context_through_the_facade(home, project, make_event):
    from kirolearn import Memory

    make_event("userPromptSubmit", prompt="why does the nightly export time out")
    make_event("stop", assistant_response="Added an index on orders.created_at; the export now takes 4 s")
    stats = Memory().drain(flush=True)
    assert stats.stored == 2 and stats.records_written >= 1
    assert "orders.created_at" in Memory().context(project=project)


def test_import_kirolearn_stays_cheap():
    code = "import sys, kirolearn; print(sorted(m for m in sys.modules if m.startswith(('kirolearn', 'sqlite_utils', 'pydantic'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['kirolearn']"


def test_import_and_forget_through_the_facade(tmp_path, project):
    from kirolearn import Memory

    a, b = Memory(home=tmp_path / "a"), Memory(home=tmp_path / "b")
    record = a.save_turn_summary(
        project=project, request="Backup me", investigated="x", learned="y", completed="z", next_steps="w"
    )
    buf = io.StringIO()
    a.export(buf)
    counts = b.import_(io.StringIO(buf.getvalue()))
    assert counts["records"]["added"] == 1
    assert b.import_(io.StringIO(buf.getvalue()))["records"]["added"] == 0  # idempotent
    b.forget([record.record_id], reason="wrong")
    assert b.search("backup", project=project) == []
    b.restore([record.record_id])
    assert [h.record_id for h in b.search("backup", project=project)] == [record.record_id]


def test_the_facade_fails_on_bad_input_as_the_cli_does(tmp_path, project):
    from click.testing import CliRunner

    from kirolearn import Memory
    from kirolearn.cli.commands import cli
    from kirolearn.core.errors import KirolearnError, ProjectError
    from kirolearn.core.paths import HomeError
    from kirolearn.manage.records import NotFound

    missing = str(tmp_path / "nonexistent")
    said = CliRunner().invoke(cli, ["search", "x", "--project", missing])
    assert said.exit_code == 2 and f"Directory {missing!r} does not exist" in said.output
    with pytest.raises(ProjectError, match=f"Directory {re.escape(repr(missing))} does not exist") as err:
        Memory().search("x", project=missing)
    assert err.value.exit_code == said.exit_code
    for call in (lambda m: m.context(project=missing), lambda m: m.observations(project=missing)):
        with pytest.raises(ProjectError):
            call(Memory())

    # forgetting an unknown id: the CLI's "no record", with and without a database
    with pytest.raises(NotFound, match="no record 'mr_nope'"):
        Memory().forget(["mr_nope"])
    Memory().save_turn_summary(
        project=project, request="r", investigated="i", learned="l", completed="c", next_steps="n"
    )
    said = CliRunner().invoke(cli, ["forget", "mr_nope"])
    assert said.exit_code == 1 and "no record 'mr_nope'" in said.output
    with pytest.raises(NotFound, match="no record 'mr_nope'"):
        Memory().forget(["mr_nope"])

    a_file = tmp_path / "not-a-home"
    a_file.write_text("x")
    with pytest.raises(HomeError, match=re.escape(str(a_file))) as err:
        Memory(home=a_file).drain()
    assert isinstance(err.value, KirolearnError) and "KIROLEARN_HOME" in err.value.fix
    said = CliRunner(env={"KIROLEARN_HOME": str(a_file)}).invoke(cli, ["drain"])
    assert said.exit_code == 1 and "is a file, not a directory" in said.output
