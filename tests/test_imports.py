"""The package's import structure: no cycle, and every import runs downhill.

Every ``import fastsample...`` in the package's own sources is read with ``ast``, at any
depth (a function-level import counts as much as a module-level one), and each module is
given a layer. An import may go to a module of its own layer or a lower one, never up,
and the import graph has no cycle. In particular the library (loader, trainer, inference,
...) never imports a command-line module (cli, train, infer, plan, the __main__ modules).
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "fastsample"

# Lowest first. A module takes the layer of the longest prefix listed here.
LAYERS = [
    # 0: facts and schemas that depend on nothing of ours
    ["fastsample.choices", "fastsample.options", "fastsample.atomic", "fastsample.allocator", "fastsample.bf16",
     "fastsample.int8", "fastsample.rows", "fastsample.native", "fastsample.launcher", "fastsample.sampling.mfg",
     "fastsample.sampling.rng", "fastsample.sampling.nodemap", "fastsample.comm.base", "fastsample.faults",
     "fastsample.phases", "fastsample.progress"],
    # 1: the dataset record and the job's settings
    ["fastsample.data.graph", "fastsample.data.edge_splits", "fastsample.job"],
    # 2: making datasets; sampling; collectives
    ["fastsample.data", "fastsample.sampling", "fastsample.comm"],
    # 3: partitioning
    ["fastsample.partition"],
    # 4: the distributed pieces; the models and their numeric kernels
    ["fastsample.distributed", "fastsample.loading.prefetch", "fastsample.nn"],
    # 5: the data path
    ["fastsample.loading"],
    # 6: inference over it
    ["fastsample.loading.layerwise"],
    # 7: tasks, and training as a library
    ["fastsample.tasks", "fastsample.export"],
    ["fastsample.trainer"],
    # 8: command lines
    ["fastsample.cli", "fastsample.data.__main__", "fastsample.partition.__main__", "fastsample.supervisor"],
    ["fastsample.train", "fastsample.infer", "fastsample.plan", "fastsample.report"],
    # 9: the package's lazy front door (its imports are strings, not statements)
    ["fastsample"],
]
CLI = {"fastsample.cli", "fastsample.train", "fastsample.infer", "fastsample.plan", "fastsample.report", "fastsample.data.__main__",
       "fastsample.partition.__main__"}


def _modules() -> dict[str, Path]:
    mods = {}
    for f in PACKAGE.rglob("*.py"):
        parts = list(f.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    return mods


def _resolve(name: str, mods) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _compiled(package: str, name: str, mods) -> bool:
    """``from fastsample import _native``: a compiled extension (no source here), not the package."""
    return name.startswith("_") and f"{package}.{name}" not in mods and package in mods


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (anywhere in its source)."""
    mods, graph = _modules(), {}
    for mod, file in mods.items():
        out = set()
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Import):
                out |= {_resolve(a.name, mods) for a in node.names if a.name.startswith("fastsample")}
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's package
                    base = mod.split(".")[: None if file.name == "__init__.py" else -1]
                    base = base[: len(base) - node.level + 1]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                if name.startswith("fastsample"):  # `from pkg import submodule` imports the submodule
                    out |= {_resolve(f"{name}.{a.name}", mods) if f"{name}.{a.name}" in mods else _resolve(name, mods)
                            for a in node.names if not _compiled(name, a.name, mods)}
        graph[mod] = out - {mod, None}
    return graph


def layer(mod: str) -> int:
    best, rank = -1, None
    for i, names in enumerate(LAYERS):
        for name in names:
            if (mod == name or mod.startswith(name + ".")) and len(name) > best:
                best, rank = len(name), i
    assert rank is not None and (mod == "fastsample" or best > len("fastsample")), \
        f"{mod}: give it a layer in tests/test_imports.py"
    return rank


def _cycle(graph) -> list[str] | None:
    state, stack = {}, []

    def visit(v):
        state[v] = "open"
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == "open":
                return stack[stack.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        state[v] = "done"
        stack.pop()
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 40 and graph["fastsample.loading"], "the scan found the package's imports"
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_import_runs_downhill_and_the_library_imports_no_command_line():
    graph = import_graph()
    up = [f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})" for a in sorted(graph) for b in sorted(graph[a])
          if layer(b) > layer(a)]
    assert not up, "imports up a layer:\n" + "\n".join(up)
    library = [m for m in graph if m not in CLI and m != "fastsample"]
    into_cli = [f"{m} imports {b}" for m in sorted(library) for b in sorted(graph[m] & CLI)]
    assert not into_cli, "the library imports a command-line module:\n" + "\n".join(into_cli)


def test_the_check_sees_function_level_imports_and_cycles(tmp_path):
    # the checks themselves can fail: a cycle through a function-level import is found
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    src = "def f():\n    from fastsample.cli import describe\n"
    nodes = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom)]
    assert nodes and nodes[0].module == "fastsample.cli"
