"""Imports flow one way (design.md rule 13): the contracts of setup.cfg hold, and there are no cycles.

The layer order is written down once, as import-linter contracts in setup.cfg ([importlinter]
sections): a layers contract (surfaces > features > recall > policy > store > capture > leaves)
and a forbidden one for the hook path. This test runs them; `lint-imports` from the worktree
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
MAX_UPWARD = 3  # issue #25: at most three deliberate upward arrows, each named in setup.cfg with its reason

HOW_TO_FIX = ("move the shared definition down to the floor of its lowest user (a leaf module if need be) "
              "instead of importing up; see the layers in setup.cfg and docs/architecture.md")


def test_the_import_contracts_of_setup_cfg_hold():
    if importlib.util.find_spec("importlinter") is None:
        pytest.fail("import-linter is missing: pip install -e '.[dev]'")
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='setup.cfg', no_cache=True, no_logo=True))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    broken = done.stdout.find("Broken contracts")
    report = done.stdout[broken:] if broken >= 0 else done.stdout
    assert done.returncode == 0, f"an import breaks the layer order:\n{report}{done.stderr}\n{HOW_TO_FIX}"


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
                cycles.add(loop[start:-1] + loop[:start + 1])
    shown = "\n".join("  " + " -> ".join(c) for c in sorted(cycles))
    assert not cycles, f"import cycles:\n{shown}\n{HOW_TO_FIX}"


def test_upward_imports_are_few_and_each_says_why():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    layers = cfg["importlinter:contract:layers"]
    ignored = [line.strip() for line in layers.get("ignore_imports", "").splitlines() if line.strip()]
    assert len(ignored) <= MAX_UPWARD, f"setup.cfg allows {len(ignored)} upward imports: {ignored}; {HOW_TO_FIX}"
    with open(os.path.join(ROOT, "setup.cfg"), encoding="utf-8") as fh:
        text = fh.read()
    section = text[text.index("[importlinter:contract:layers]"):]
    before = section[:section.index("ignore_imports")].rstrip().splitlines()
    assert ignored == [] or before[-1].lstrip().startswith("#"), "say why above ignore_imports in setup.cfg"
