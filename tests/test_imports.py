"""The hook path imports the standard library and kirolearn's own stdlib modules only."""

import subprocess
import sys

HEAVY = ("pydantic", "click", "filelock", "sqlite_utils", "litellm", "mcp", "numpy", "wordllama")


def test_hook_imports_only_the_standard_library():
    code = (
        "import sys, json; before = set(sys.modules); import kirolearn.hook; "
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = __import__("json").loads(out)
    third_party = [
        m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "kirolearn"
    ]
    assert third_party == []
    assert not [m for m in loaded if m.split(".")[0] in HEAVY]
    assert "kirolearn.pipeline.schema" not in loaded
