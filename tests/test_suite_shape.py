"""The suite's own shape: shared helpers live in tests/helpers.py and conftest.py, so no test module
imports another (a change to one test file never breaks a second)."""

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_test_module_imports_another():
    offenders = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        others = {m for m in imported_modules(path) if m.rsplit(".", 1)[-1].startswith("test_")}
        if others:
            offenders[str(path.relative_to(TESTS))] = sorted(others)
    assert offenders == {}, f"move what these share into tests/helpers.py: {offenders}"


def test_the_check_sees_both_import_forms(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text("import tests.test_a\nfrom tests.test_b import x\nfrom tests.helpers import y\n")
    assert {m for m in imported_modules(sample) if m.rsplit(".", 1)[-1].startswith("test_")} == {
        "tests.test_a",
        "tests.test_b",
    }
