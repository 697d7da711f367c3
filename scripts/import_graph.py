"""Print the figures of kirolearn's import graph: floors, upward arrows, cycles (issue #25).

    .venv/bin/python scripts/import_graph.py [--verbose]

The graph is grimp's (it comes with import-linter): one node per module, one arrow per
importing module and imported module, lazy imports (inside functions) included. The floors
are the layers contract of setup.cfg (`[importlinter:contract:layers]`), top first; a module
sits on the floor of the first layer entry that is it or contains it. An upward arrow is an
import from a lower floor into a higher one; a cycle is a strongly connected set of two or
more modules. `lint-imports` (tests/test_layers.py) is what enforces the order; this script
only counts.
"""

import configparser
import os
import sys

import grimp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


SETUP_CFG = os.path.join(ROOT, "setup.cfg")


def floors_from_setup_cfg(path=SETUP_CFG) -> "list[list[str]]":
    """The layers contract's layers, top first, as lists of absolute module names."""
    cfg = configparser.ConfigParser()
    cfg.read(path)
    section = cfg["importlinter:contract:layers"]
    containers = [c.strip() for c in section.get("containers", "").split() if c.strip()]
    floors = []
    for line in section["layers"].splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        names = [n.strip() for n in line.replace("|", ":").split(":") if n.strip()]
        floors.append([f"{containers[0]}.{n}" if containers else n for n in names])
    return floors


def floor_of(module: str, floors) -> "int | None":
    for i, names in enumerate(floors):
        if any(module == n or module.startswith(n + ".") for n in names):
            return i
    return None


def cycles(graph) -> "list[list[str]]":
    """Strongly connected sets of two or more modules (Tarjan, iterative)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    scc = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        scc.append(m)
                        if m == node:
                            break
                    if len(scc) > 1:
                        out.append(sorted(scc))
    return out


def chain_length(graph, found) -> int:
    """The most modules on one downward import path, each cycle squashed into one node."""
    group = {m: i for i, scc in enumerate(found) for m in scc}
    node = lambda m: group.get(m, m)  # noqa: E731
    edges = {}
    for a in graph.modules:
        for b in graph.find_modules_directly_imported_by(a):
            if node(a) != node(b):
                edges.setdefault(node(a), set()).add(node(b))
    depth = {}

    def visit(n):
        if n not in depth:
            depth[n] = 0  # a placeholder: the squashed graph has no cycles
            depth[n] = 1 + max((visit(c) for c in edges.get(n, ())), default=0)
        return depth[n]

    sys.setrecursionlimit(10_000)
    return max(visit(node(m)) for m in graph.modules)


def main(argv) -> int:
    verbose = "--verbose" in argv
    graph = grimp.build_graph("kirolearn", cache_dir=None)  # no cache: a stale one once hid moved modules
    floors = floors_from_setup_cfg()
    arrows = [
        (a, b) for a in sorted(graph.modules) for b in sorted(graph.find_modules_directly_imported_by(a))
    ]
    up, unplaced = [], set()
    for a, b in arrows:
        fa, fb = floor_of(a, floors), floor_of(b, floors)
        if fa is None or fb is None:
            unplaced.update(m for m, f in ((a, fa), (b, fb)) if f is None)
            continue
        if fa > fb:  # floors are listed top first: a higher index is a lower floor
            up.append((a, b))
    found = cycles(graph)
    print(f"modules: {len(graph.modules)}, arrows: {len(arrows)}, floors: {len(floors)}")
    print(f"upward arrows: {len(up)}")
    for a, b in up:
        lazy = all(d["is_lazy"] for d in graph.get_import_details(importer=a, imported=b))
        print(f"  {a} -> {b}{' (lazy)' if lazy else ''}")
    print(f"cycles: {len(found)}")
    for scc in found:
        print("  {" + ", ".join(m.removeprefix("kirolearn.") for m in scc) + "}")
    print(f"modules on no floor: {', '.join(sorted(unplaced)) or 'none'}")
    print(f"longest import chain (modules, a cycle counted once): {chain_length(graph, found)}")
    if verbose:
        for i, names in enumerate(floors):
            print(f"floor {len(floors) - i}: {' '.join(n.removeprefix('kirolearn.') for n in names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
