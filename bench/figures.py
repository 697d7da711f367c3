"""docs/figures.json: the figures the README and the agent pages quote, as `make bench` measured them.

The benchmarks merge their measured values in (`--figures PATH`); cog blocks in the pages render
their sentences from the file (`make figures`), and tests/test_docs.py fails when a page differs
from what the file renders. Standard library only: cog imports it with `-I bench`.
"""

import datetime
import json
import os
import pathlib
import platform
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures.json"
WIDTH = 96  # the pages' line length


def merge(path: str, section: str, values: dict, venv: str) -> None:
    """Write `values` as `section` of the figures file at `path`, keeping every other section, with a
    note of when, where and under what load they were measured (a loaded machine inflates wall times)."""
    target = pathlib.Path(path)
    figures = json.loads(target.read_text("utf-8")) if target.exists() else {}
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    figures[section] = {
        **values,
        "measured_on": {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_average": [round(x, 2) for x in load],
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "venv": os.path.basename(os.path.abspath(venv)),
            # an editable install's import hook slows every start, the bare one too: ratios read lower
            "editable_install": any(
                pathlib.Path(venv).glob("lib/python*/site-packages/__editable__*kirolearn*")
            ),
        },
    }
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", "utf-8")
    os.replace(tmp, target)


def load(path=FIGURES) -> dict:
    return json.loads(pathlib.Path(path).read_text("utf-8"))


def when(section: dict) -> str:
    """When and under what load a section was measured, in words."""
    note = section["measured_on"]
    editable = ", an editable install" if note.get("editable_install") else ""
    return (
        f"{note['date'][:10]}, load average {note['load_average'][0]:.1f} on {note['cpus']} cores{editable}"
    )


def render(template: str, figures=None) -> str:
    """`template` (a page's paragraph or `- ` bullet, written in its cog block) with the figures put in
    (`{hook[ratio]:.2f}`, `{when[hook]}`), wrapped to the pages' width, for cog.out."""
    figures = figures if figures is not None else load()
    sections = {k: v for k, v in figures.items() if isinstance(v, dict) and "measured_on" in v}
    text = " ".join(template.split()).format(**sections, when={k: when(v) for k, v in sections.items()})
    bullet = text.startswith("- ")
    wrapped = textwrap.fill(
        text[2:] if bullet else text,
        WIDTH,
        initial_indent="- " if bullet else "",
        subsequent_indent="  " if bullet else "",
        break_on_hyphens=False,
        break_long_words=False,
    )
    return wrapped + "\n"
