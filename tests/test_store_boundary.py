"""architecture.md rule 10: only the store package (kirolearn/store/) holds SQL.

Everything else asks the store. The check reads each module's syntax tree, so
it sees SQL wherever it is written: a string literal that reads as an SQL
statement, a call that runs one (`.execute`, `.query`, ...), or a sqlite-utils
table reached by name (`db["memory_records"]`).
"""

import ast
import pathlib
import re

import kirolearn

PACKAGE = pathlib.Path(kirolearn.__file__).parent
STORE = PACKAGE / "store"

SQL = re.compile(
    r"^\s*(with\s+\w+\s+as\s*\(|select\s+.+\s+from\s|insert\s+(or\s+\w+\s+)?into\s|update\s+\[?\w+\]?\s+set\s|"
    r"delete\s+from\s|create\s+(virtual\s+|unique\s+)?(table|index|trigger|view)\s|drop\s+(table|index)\s|"
    r"alter\s+table\s|pragma\s+\w+|vacuum\b)",
    re.IGNORECASE | re.DOTALL,
)
RUNS_SQL = {
    "execute",
    "executemany",
    "executescript",
    "query",
    "rows_where",
    "count_where",
    "delete_where",
    "insert_all",
    "upsert_all",
    "enable_fts",
    "create_table",
    "add_column",
    "transform",
}
TABLES = {
    "events",
    "memory_records",
    "session_summaries",
    "extraction_runs",
    "drain_runs",
    "forgotten_records",
    "record_audit",
    "record_vectors",
    "term_docs",
    "scrub_state",
    "memory_records_fts",
    "_migrations",
}


def _is_database(node) -> bool:
    """`db[...]`, `self.db[...]`, `database[...]`: a sqlite-utils Database, not a dict of results."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name in ("db", "database")


def sql_outside_store() -> "list[str]":
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if STORE in path.parents:
            continue
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        in_fstrings = {
            id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values
        }
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(tree):
            if id(node) in in_fstrings:
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if SQL.match(node.value):
                    found.append(f"{where}:{node.lineno}: SQL text {node.value[:60]!r}")
            elif isinstance(node, ast.JoinedStr):
                head = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
                if SQL.match(head):
                    found.append(f"{where}:{node.lineno}: SQL f-string {head[:60]!r}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in RUNS_SQL
            ):
                found.append(f"{where}:{node.lineno}: .{node.func.attr}() runs SQL")
            elif (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Constant)
                and node.slice.value in TABLES
                and _is_database(node.value)
            ):
                found.append(f"{where}:{node.lineno}: table {node.slice.value!r} reached by name")
    return found


def test_no_sql_outside_the_store():
    found = sql_outside_store()
    assert found == [], "SQL belongs in kirolearn/store/ (architecture.md rule 10):\n" + "\n".join(found)


def test_the_check_sees_each_form_of_sql(tmp_path, monkeypatch):
    """The checker itself: each way SQL can be written outside the store is caught."""
    fake = tmp_path / "kirolearn"
    (fake / "store").mkdir(parents=True)
    (fake / "store" / "ok.py").write_text('Q = "select * from events"\n')
    (fake / "bad.py").write_text(
        '"""select words from a docstring are prose."""\n'
        'A = "select count(*) from events"\n'
        'B = f"delete from {name} where x = 1"\n'
        "db.execute(anything)\n"
        'n = db["memory_records"].count\n'
        'C = "Select the project you want"\n'
    )
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    monkeypatch.setattr(__import__(__name__), "STORE", fake / "store")
    found = sql_outside_store()
    assert len(found) == 4, found
    assert all(line.startswith("kirolearn/bad.py") for line in found)
