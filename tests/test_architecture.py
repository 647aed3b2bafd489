"""The architecture, read from the imports: one direction of flow, no cycles, the model knows no analysis.

Every ``import`` and ``from ... import`` in ``memtrace/`` counts, the ones inside functions and
under ``TYPE_CHECKING`` too: a lazy import that closes a cycle still means a stage is in the
wrong place.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "memtrace"

ANALYSES = {"peak", "replay", "buffers", "dataflow", "timeline", "tensor", "summary", "ops", "frag", "diff",
            "budget", "export", "report", "batching", "trend", "fit", "oom"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> nx.DiGraph:
    """memtrace's modules and the memtrace modules each imports, anywhere in its body."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                # `from . import text` imports the module memtrace.read.text; `from .x import f` imports x.
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
            else:
                continue
            for target in targets:
                if target in modules and target != name:
                    graph.add_edge(name, target)
    return graph


def test_the_import_scan_sees_lazy_and_type_checking_imports() -> None:
    # GIVEN the scan WHEN it reads the API facade THEN imports inside methods count as edges.
    edges = set(import_graph().edges)
    assert ("memtrace.api", "memtrace.peak") in edges  # imported inside Trace.peak
    assert ("memtrace.api", "memtrace.tensor") in edges  # imported under TYPE_CHECKING and inside a method


def test_no_import_cycles() -> None:
    cycles = list(nx.simple_cycles(import_graph()))
    assert cycles == []


@pytest.mark.parametrize("low", ["memtrace.model", "memtrace.read", "memtrace.errors", "memtrace.units", "memtrace.bfc"])
def test_lower_stages_import_no_analysis(low: str) -> None:
    graph = import_graph()
    reached = {m for m in nx.descendants(graph, low) | {low}} if low != "memtrace.read" else {
        m for m in graph if m.startswith("memtrace.read")}
    for module in sorted(reached):
        imported = {target.removeprefix("memtrace.") for target in graph.successors(module)}
        assert not (imported & ANALYSES), f"{module} imports {sorted(imported & ANALYSES)}"


def test_reading_is_one_package_and_only_it_touches_the_generated_protobuf() -> None:
    graph = import_graph()
    users = {module for module, target in graph.edges if target.startswith("memtrace.read._proto")}
    assert users and all(module.startswith("memtrace.read") for module in users)
    assert not any(name.startswith("memtrace.") and name.count(".") == 1 and name.removeprefix("memtrace.")
                   in {"reader", "textreader", "textjobs", "binreader", "protoreader", "builder", "jobs", "dtypes",
                       "labels"} for name in graph)


def test_replay_reads_buffers_and_nothing_below_it_reaches_back() -> None:
    # Buffers are worked out once, below replay: replay and the dataflow graph no longer call each other.
    graph = import_graph()
    assert graph.has_edge("memtrace.replay", "memtrace.buffers")
    assert not nx.has_path(graph, "memtrace.buffers", "memtrace.replay")
    assert not nx.has_path(graph, "memtrace.replay", "memtrace.dataflow")


def test_the_allocator_model_is_a_mechanism_importing_nothing_of_memtrace() -> None:
    # memtrace/bfc.py takes requests and options, not a trace: it stands below the model and the readers.
    assert list(import_graph().successors("memtrace.bfc")) == []
