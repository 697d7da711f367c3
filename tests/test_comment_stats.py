"""scripts/comment_stats.py: what it counts, and the package's comments staying one short line of why."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("comment_stats", ROOT / "scripts" / "comment_stats.py")
comment_stats = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(comment_stats)


def test_it_counts_comment_lines_long_ones_figures_and_issue_numbers(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        '"""A module (measured in docs/benchmarks.md, \'Speed\')."""\n'
        "\n"
        "# a short why\n"
        "x = 1  # " + "a long inline comment " * 4 + "\n"
        's = "# not a comment"\n'
        "\n"
        "\n"
        "def f():\n"
        '    """Loading it costs ~3 ms; see #31."""\n'
        "    return '90s'  # an example, not a figure (#12)\n",
        "utf-8",
    )
    fig = comment_stats.file_figures(str(source), 80)
    assert fig["comment_lines"] == 3
    assert [row for row, _ in fig["long"]] == [4]
    assert [row for row, _ in fig["figure_docs"]] == [9]
    assert sorted(ref for _, ref in fig["issues"]) == ["#12", "#31"]


def test_few_comment_lines_of_the_package_are_over_80_characters(capsys):
    assert comment_stats.main([str(ROOT / "kirolearn")]) == 0
    out = capsys.readouterr().out
    lines = int(out.split("comment lines:")[1].split()[0])
    long = int(out.split("over 80 characters:")[1].split()[0])
    assert long / lines < 0.15, out
