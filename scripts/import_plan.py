"""The import plan of the package: which modules import which (module level and inside functions alike), the
circles among them and the imports that run back up a floor of the pipeline.

Floors, bottom to top: the shared leaves (errors, semconv, resources, hugepages, outputs, display), trace and catalog,
capture and importers, analysis, replay, report, and the top (the root package, every ``cli.py``, ``demo``,
``distributed``, ``loadtest``, ``collect``). A stage may import its own floor and any floor below.

    python scripts/import_plan.py [--json] [--max-circles N --max-upward N]

With the two limits it exits 1 when the plan exceeds them (the test suite runs it that way).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "agentprof"

FLOORS = [
    ("leaves", ("errors", "semconv", "resources", "hugepages", "outputs", "display", "safe_text")),
    ("trace, catalog", ("trace", "catalog")),
    ("capture, importers", ("capture", "importers")),
    ("analysis", ("analysis",)),
    ("replay", ("replay",)),
    ("report", ("report",)),
    ("top", ("cli", "demo", "distributed", "loadtest", "collect", "__main__")),
]
TOP = len(FLOORS) - 1


def floor_of(module: str) -> int:
    """The floor of ``agentprof.a.b…``: every ``cli`` module is the top (it wires a stage to the command line)."""
    parts = module.split(".")[1:]
    if parts and parts[-1] in ("cli", "__main__"):
        return TOP
    for i, (_, names) in enumerate(FLOORS):
        if parts[0] in names:
            return i
    return TOP


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its file (the longest known prefix of each), apart
    from imports for the type checker only."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    type_only: set[int] = set()  # imports under ``if TYPE_CHECKING:`` run for the type checker, not at run time
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            type_only.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("agentprof"):
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name if is_pkg else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    pkg = pkg.rpartition(".")[0]
                base = f"{pkg}.{base}" if base else pkg
            if not base.startswith("agentprof"):
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in known else base)
    return found


def plan() -> dict:
    """The graph's circles (scipy's strongly connected groups of two or more modules) and its upward imports."""
    mods = modules()
    names = list(mods)
    index = {m: i for i, m in enumerate(names)}
    edges = set()
    for name, path in mods.items():
        for target in imports(name, path, set(mods)):
            # a package's __init__ re-exporting its own modules is not a circle through its children
            if name != "agentprof" and target.startswith(name + "."):
                continue
            edges.add((name, target))
    src = np.array([index[a] for a, _ in edges], dtype=np.int64)
    dst = np.array([index[b] for _, b in edges], dtype=np.int64)
    adjacency = csr_matrix((np.ones(len(edges)), (src, dst)), shape=(len(names), len(names)))
    _, labels = connected_components(adjacency, directed=True, connection="strong")
    groups: dict[int, list[str]] = {}
    for m, label in zip(names, labels, strict=True):
        groups.setdefault(int(label), []).append(m)
    circles = sorted((sorted(g) for g in groups.values() if len(g) > 1), key=len, reverse=True)
    # the root package is the namespace: its version and lazy capture API are no floor of the pipeline
    upward = sorted((a, b) for a, b in edges if "agentprof" not in (a, b) and floor_of(b) > floor_of(a))
    return {"modules": len(mods), "imports": len(edges), "circles": circles,
            "upward": [{"from": a, "to": b, "floors": [FLOORS[floor_of(a)][0], FLOORS[floor_of(b)][0]]}
                       for a, b in upward]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--max-circles", type=int)
    ap.add_argument("--max-upward", type=int)
    args = ap.parse_args(argv)
    p = plan()
    if args.json:
        print(json.dumps(p, indent=1))
    else:
        print(f"{p['modules']} modules, {p['imports']} imports; {len(p['circles'])} circles, "
              f"{len(p['upward'])} upward imports")
        for c in p["circles"]:
            print(f"circle ({len(c)}): " + ", ".join(m.removeprefix("agentprof.") for m in c))
        for u in p["upward"]:
            print(f"up: {u['from']} -> {u['to']} ({u['floors'][0]} -> {u['floors'][1]})")
    over = ((args.max_circles is not None and len(p["circles"]) > args.max_circles)
            or (args.max_upward is not None and len(p["upward"]) > args.max_upward))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
