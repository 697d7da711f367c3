"""Imports flow one way (docs/architecture.md, rule 13): the contracts of setup.cfg hold, and there are no cycles.

The layer order is written down once, as import-linter contracts in setup.cfg ([importlinter]
sections): a layers contract of at most ten floors (surfaces > features > pipeline > recall, team,
health > policy > store, install > capture, claims > core), the one door to storage, and a
forbidden one for the hook path. This test runs them; `lint-imports` from the worktree
runs the same check by hand, and scripts/import_graph.py prints the figures.
"""

import configparser
import importlib.util
import os
import subprocess
import sys

import grimp
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_UPWARD = 0  # no import goes up a floor, and setup.cfg ignores none
MAX_FLOORS = 10  # a package joins a floor with `|` before it gets a floor of its own

HOW_TO_FIX = (
    "move the shared definition down to the floor of its lowest user (a leaf module if need be) "
    "instead of importing up; see the layers in setup.cfg and docs/architecture.md"
)


def test_the_import_contracts_of_setup_cfg_hold():
    if importlib.util.find_spec("importlinter") is None:
        pytest.fail("import-linter is missing: pip install -e '.[dev]'")
    code = (
        "import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename='setup.cfg', no_cache=True, no_logo=True))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    broken = done.stdout.find("Broken contracts")
    report = done.stdout[broken:] if broken >= 0 else done.stdout
    assert done.returncode == 0, f"an import breaks the layer order:\n{report}{done.stderr}\n{HOW_TO_FIX}"


def test_the_floors_are_ten_or_fewer():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    floors = [line for line in cfg["importlinter:contract:layers"]["layers"].splitlines() if line.strip()]
    assert len(floors) <= MAX_FLOORS, (
        f"setup.cfg has {len(floors)} floors; put packages that do not import each other on one "
        "floor (joined by `|`) instead of stacking them"
    )


def test_kirolearn_has_no_import_cycles():
    """No module reaches itself through imports (lazy ones, inside functions, count too)."""
    graph = grimp.build_graph("kirolearn", cache_dir=None)
    cycles = set()
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                loop = (importer,) + tuple(back)
                start = loop.index(min(loop[:-1]))  # one spelling per cycle
                cycles.add(loop[start:-1] + loop[: start + 1])
    shown = "\n".join("  " + " -> ".join(c) for c in sorted(cycles))
    assert not cycles, f"import cycles:\n{shown}\n{HOW_TO_FIX}"


def test_upward_imports_are_few_and_each_says_why():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    layers = cfg["importlinter:contract:layers"]
    ignored = [line.strip() for line in layers.get("ignore_imports", "").splitlines() if line.strip()]
    assert len(ignored) <= MAX_UPWARD, (
        f"setup.cfg allows {len(ignored)} upward imports: {ignored}; {HOW_TO_FIX}"
    )
    with open(os.path.join(ROOT, "setup.cfg"), encoding="utf-8") as fh:
        text = fh.read()
    section = text[text.index("[importlinter:contract:layers]") :]
    if ignored:
        before = section[: section.index("ignore_imports")].rstrip().splitlines()
        assert before[-1].lstrip().startswith("#"), "say why above ignore_imports in setup.cfg"


def _sources():
    for dirpath, _, files in os.walk(os.path.join(ROOT, "kirolearn")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as fh:
                    yield os.path.relpath(path, ROOT), fh.read()


def test_every_import_is_visible_to_the_contracts():
    """No `__import__` or `importlib.import_module`: an import the graph cannot see escapes the contracts."""
    import ast

    hidden = []
    for path, text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call):
                func = node.func
                name = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else ""
                )
                if name in ("__import__", "import_module"):
                    hidden.append(f"{path}:{node.lineno}")
    assert not hidden, f"imports the contracts cannot see: {hidden}; import the module by name"


def test_no_module_imports_another_modules_underscore_name():
    """A name shared between modules is public: `from kirolearn.x import _y` means it should not be private."""
    import ast

    found = []
    for path, text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kirolearn"):
                found += [
                    f"{path}:{node.lineno} {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not found, f"underscore names imported from another module: {found}"


def test_the_top_of_the_package_holds_few_modules():
    """Modules live in folders named for their floor; at most eight sit directly in kirolearn/."""
    top = [n for n in os.listdir(os.path.join(ROOT, "kirolearn")) if n.endswith(".py")]
    assert len(top) <= 8, f"kirolearn/ holds {len(top)} modules directly: {sorted(top)}"
