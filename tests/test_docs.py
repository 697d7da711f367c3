"""Docs that cannot drift.

- Every command has help, and every command is named on a hand-written page (README.md or docs/).
- docs/cli.md is cog output over every `--help`, and must equal what the commands print now.
- Every figure the README and the agent pages quote is cog output over docs/figures.json (what
  `make bench` measured), and must equal what that file renders now; none is written by hand.
- Every shell example in README.md and docs/ runs (page by page, in a fresh home holding one turn
  summary and a fresh project, with the installed commands first on PATH) or says on the line before it why it cannot run here:
  `<!-- not run: reason -->`.
- README.md fits on a screen or so (at most about 200 lines), its links lead to files that exist,
  and its set-up commands are make targets that .ci/run calls.
"""

import os
import pathlib
import re
import subprocess
import sys

import click
import pytest

from kirolearn.cli.commands import cli

ROOT = pathlib.Path(__file__).parent.parent
README = (ROOT / "README.md").read_text("utf-8")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
HAND_WRITTEN = [p for p in PAGES if p.name != "cli.md"]
BIN = os.path.dirname(sys.executable)
SHELL = {"bash", "sh", "shell", "console"}
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->$")
FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w-]*)")


def shell_blocks(path: pathlib.Path):
    """(first line number, text, reason it is not run or None) of each shell code block of a page."""
    lines = path.read_text("utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.groups()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        if lang in SHELL:
            before = lines[i - 1].strip() if i else ""
            marker = NOT_RUN.match(before)
            body = "\n".join(
                line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
            )
            yield i + 1, body, (marker.group(1) if marker else None)
        i = end + 1


def runnable_pages():
    return [p for p in PAGES if any(reason is None for _, _, reason in shell_blocks(p))]


def every_command(group=cli, path=()):
    ctx = click.Context(group, info_name="kirolearn")
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from every_command(command, (*path, name))


def test_every_command_has_help_and_is_on_a_hand_written_page():
    text = "\n".join(p.read_text("utf-8") for p in HAND_WRITTEN)
    for path, command in every_command():
        name = " ".join(path)
        assert command.help and command.help.strip(), name
        assert f"kirolearn {name}" in text, f"`kirolearn {name}` is on no page of README.md or docs/"
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.help, f"{name} {param.opts} has no help"


def test_the_cli_reference_is_what_the_commands_print():
    done = subprocess.run(
        [sys.executable, "-m", "cogapp", "--check", "docs/cli.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (
        f"docs/cli.md is out of date: run `make cli-docs`\n{done.stdout}{done.stderr}"
    )
    reference = (ROOT / "docs" / "cli.md").read_text("utf-8")
    for path, _ in every_command():
        assert f"\n## kirolearn {' '.join(path)}\n" in reference


COG = re.compile(r"\[\[\[cog.*?\[\[\[end\]\]\]", re.S)
# a speed claim: "2.1× a bare start", "15 ms", "about a bare Python start"
FIGURE = re.compile(r"\d+(?:\.\d+)?\s?×|\d+(?:\.\d+)? ?ms\b|bare Python start")


def figure_pages():
    """The pages `make figures` runs cog over, as the Makefile names them."""
    makefile = (ROOT / "Makefile").read_text("utf-8")
    return re.search(r"^FIGURE_PAGES := (.*)$", makefile, re.M).group(1).split()


def test_the_quoted_figures_are_what_docs_figures_json_renders():
    pages = figure_pages()
    with_cog = sorted(str(p.relative_to(ROOT)) for p in HAND_WRITTEN if "[[[cog" in p.read_text("utf-8"))
    assert sorted(pages) == with_cog, "every page with a cog block is in the Makefile's FIGURE_PAGES"
    done = subprocess.run(
        [sys.executable, "-m", "cogapp", "--check", "-I", "bench", *pages],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (
        f"a page's figures differ from docs/figures.json: run `make figures`\n{done.stdout}{done.stderr}"
    )


def test_no_figure_on_the_readme_or_an_agent_page_is_written_by_hand():
    for page in [ROOT / "README.md", *sorted((ROOT / "docs" / "agents").glob("*.md"))]:
        outside = COG.sub("", page.read_text("utf-8"))
        found = FIGURE.findall(outside)
        assert not found, f"{page.name} quotes {found} by hand: measure it in a bench, render it with cog"


def test_a_bench_merges_its_figures_and_a_page_renders_them(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import figures
    finally:
        sys.path.remove(str(ROOT / "bench"))
    path = tmp_path / "figures.json"
    figures.merge(str(path), "mcp_start", {"tools_list_ratio": 1.04}, str(tmp_path / "venv"))
    figures.merge(str(path), "hook", {"ratio": 1.5, "hook_ms": 15.04}, str(tmp_path / "venv"))
    merged = figures.load(path)
    assert merged["mcp_start"]["tools_list_ratio"] == 1.04  # another bench's section is kept
    note = merged["hook"]["measured_on"]
    assert note["venv"] == "venv" and len(note["load_average"]) == 3 and note["editable_install"] is False
    text = figures.render("- Capture: {hook[ratio]:.1f}× ({hook[hook_ms]:.1f} ms, " + "x " * 60 + ")", merged)
    lines = text.splitlines()
    assert lines[0].startswith("- Capture: 1.5× (15.0 ms, x x") and text.endswith(")\n")
    assert len(lines) == 2 and lines[1].startswith("  x") and all(len(line) <= 96 for line in lines)
    assert figures.when(merged["hook"]).endswith(f"on {os.cpu_count()} cores")


def test_every_shell_block_runs_or_says_why_not():
    blocks = [(p, line, reason) for p in PAGES for line, _, reason in shell_blocks(p)]
    assert len(blocks) > 10  # the parser finds them
    for page, line, reason in blocks:
        if reason is not None:
            assert len(reason) >= 10, f"{page.relative_to(ROOT)}:{line}: say why the block is not run"
    assert any(p.name == "README.md" for p in runnable_pages())  # the README's own commands run


@pytest.mark.slow
@pytest.mark.parametrize("page", runnable_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_examples_run(page, tmp_path):
    """A page's runnable blocks, in order, as one bash script in a fresh home (holding one turn summary)."""
    script = "\n".join(body for _, body, reason in shell_blocks(page) if reason is None)
    project = tmp_path / "project"
    (project / "app").mkdir(parents=True)
    (project / "app" / "auth.py").write_text("def find_user(email): ...\n")
    subprocess.run(["git", "init", "-q", str(project)], check=True, timeout=30)
    env = {
        **os.environ,
        "HOME": str(tmp_path / "user"),
        "KIROLEARN_HOME": str(tmp_path / "kirolearn home"),
        "PATH": BIN + os.pathsep + os.environ.get("PATH", ""),
        "KIROLEARN_DEBUG": "1",
    }
    (tmp_path / "user").mkdir()
    seed = subprocess.run(
        [
            os.path.join(BIN, "kirolearn"),
            "save-summary",
            "--request",
            "Export job fails: database is locked",
            "--investigated",
            "scripts/export.py",
            "--learned",
            "the nightly job and the drain share the file",
            "--completed",
            "open with timeout=30 and WAL",
            "--next-steps",
            "add a retry",
            "--file-modified",
            "src/export.py",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert seed.returncode == 0, seed.stderr  # a home holding one turn summary, as after a first session
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, (
        f"{page.relative_to(ROOT)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    assert "Error:" not in done.stderr, done.stderr


def test_readme_fits_on_a_screen_and_its_links_exist():
    assert len(README.splitlines()) <= 200
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_readme_setup_commands_are_make_targets():
    makefile = (ROOT / "Makefile").read_text("utf-8")
    docs = "\n".join(p.read_text("utf-8") for p in HAND_WRITTEN)
    for target in ("demo", "test"):
        assert f"make {target} " in README
    for target in ("demo", "test", "test-slow", "test-all", "bench", "docs", "cli-docs", "figures"):
        assert f"make {target}" in docs
        assert f"\n{target}:" in makefile


def test_ci_runs_the_readme_test_command_the_slow_tests_the_docs_and_the_wheel():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text("utf-8").splitlines()]
    steps = [line for line in lines if line.startswith("make ")]
    # every test, each once: the README's test command, then the slow tests (other make steps may follow)
    assert [s for s in steps if s in ("make test", "make test-slow")] == ["make test", "make test-slow"]
    assert len(steps) == len(set(steps))
    assert "make docs" in steps  # mkdocs build --strict
    assert any(line.startswith("scripts/check_wheel.sh") for line in lines)
    makefile = (ROOT / "Makefile").read_text("utf-8")
    assert '-m "not slow and not agents and not llm"' in makefile.split("\ntest:")[1].split("\n\n")[0]
    assert '-m "slow and not llm"' in makefile.split("\ntest-slow:")[1].split("\n\n")[0]
    # the real model (marker llm) runs only in make test-llm, where CI makes a missing server a failure
    assert "KIROLEARN_REQUIRE_LLM=1 make test-llm" in lines
    assert "-m llm" in makefile.split("\ntest-llm:")[1].split("\n\n")[0]
    assert "mkdocs build --strict" in makefile.split("\ndocs:")[1].split("\n\n")[0]
    # the real agent CLIs (marker agents) run only in make test-agents, where a missing agent fails
    assert "make test-agents" in steps
    agents = makefile.split("\ntest-agents:")[1].split("\n\n")[0]
    assert "-m agents" in agents and "KIROLEARN_REQUIRE_AGENTS=1" in agents


def test_the_demo_recordings_ship_in_the_wheel():
    """`kirolearn.demo` runs from an installed wheel: its recordings are data files of the package."""
    setup = (ROOT / "setup.cfg").read_text("utf-8")
    assert "share/kirolearn/sessions = queue/sessions/*.jsonl" in setup


def test_docs_configuration_table_is_one_table():
    import pathlib

    readme = (pathlib.Path(__file__).parent.parent / "docs" / "configuration.md").read_text("utf-8")
    section = readme.split("# Configuration", 1)[1].split("\n## ", 1)[0].splitlines()
    rows = [i for i, line in enumerate(section) if line.startswith("|")]
    assert rows == list(range(rows[0], rows[-1] + 1))  # no row stranded outside the table
    assert any("`retention.events_days`" in section[i] for i in rows)


def test_the_docs_site_loads_no_web_fonts():
    """mkdocs-material fetches Google Fonts unless told not to; the site must read the same offline
    (.ci/run also greps the built site)."""
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as fh:
        theme = re.split(r"\n(?=\S)", fh.read().split("\ntheme:", 1)[1], maxsplit=1)[0]
    assert "\n  font: false" in theme


def test_the_architecture_layout_names_every_module():
    """docs/architecture.md's Layout table lists each module of its folder (issue #35: the table matches the tree)."""
    text = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `(kirolearn/[a-z_/]*)`(?: \(top\))? \| (.*?) \| [^|]* \|$", text, re.M)
    }
    missing = []
    for path in sorted((ROOT / "kirolearn").rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if path.name == "__init__.py" or "__pycache__" in parts:
            continue
        row = "kirolearn/" if len(parts) == 2 or parts[1] == "mcp_server" else f"kirolearn/{parts[1]}/"
        if f"`{path.name}`" not in rows.get(row, ""):
            missing.append("/".join(parts))
    assert rows and missing == [], f"add these to docs/architecture.md's Layout table: {missing}"
