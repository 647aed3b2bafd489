"""The architecture, read from the imports: stages as packages, one direction of flow, no cycles.

Every ``import`` and ``from ... import`` in ``memtrace/`` counts, the ones inside functions and
under ``TYPE_CHECKING`` too: a lazy import that closes a cycle, or reaches up a stage, still means a
module is in the wrong place. The stages are the packages; a module's stage is its package (or, at
the top, the module itself), so a new module is placed by the folder it is put in, not by a list.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "memtrace"

# The stages, lowest first: each may import only its own stage and the ones before it. ``read`` comes
# after ``trace`` and ``allocator`` because it builds their data (a step's tables, a dump's chunks), and
# ``api`` before ``many`` and ``commands`` because they read their traces through it.
STAGES = (
    ("foundation", ("memtrace.errors", "memtrace.units", "memtrace.output", "memtrace.version")),
    ("trace", ("memtrace.trace",)),
    ("allocator", ("memtrace.allocator",)),
    ("read", ("memtrace.read",)),
    ("analyses", ("memtrace.analyses",)),
    ("api", ("memtrace.api",)),
    ("many", ("memtrace.many",)),
    ("reporters", ("memtrace.reporters",)),
    ("commands", ("memtrace.commands",)),
    ("faces", ("memtrace", "memtrace.__main__", "memtrace.cli", "memtrace.testing", "memtrace.pytest_plugin",
               "memtrace.tensorflow", "memtrace.jax", "memtrace.scratch")),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def stage_of(module: str) -> int:
    """The rank of the stage a module belongs to: its package's, else its own (a top-level module)."""
    for rank, (_, members) in enumerate(STAGES):
        for member in members:
            if module == member or (member != "memtrace" and module.startswith(member + ".")):
                return rank
    raise AssertionError(f"{module} is in no stage: put it in a stage's package or name it in STAGES")


def import_graph() -> nx.DiGraph:
    """memtrace's modules and the memtrace modules each imports, anywhere in its body."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py") if "_proto" not in p.parts}
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
                if target.startswith("memtrace.read._proto"):
                    target = "memtrace.read._proto"
                    graph.add_node(target)
                if target in graph and target != name:
                    graph.add_edge(name, target)
    return graph


def test_the_import_scan_sees_lazy_and_type_checking_imports() -> None:
    # GIVEN the scan WHEN it reads the API facade THEN imports inside methods count as edges.
    edges = set(import_graph().edges)
    assert ("memtrace.api", "memtrace.analyses.peak") in edges  # imported inside Trace.peak
    assert ("memtrace.api", "memtrace.analyses.tensor") in edges  # imported under TYPE_CHECKING and inside a method


def test_no_import_cycles() -> None:
    cycles = list(nx.simple_cycles(import_graph()))
    assert cycles == []


def test_every_module_is_in_a_stage_and_imports_only_its_own_stage_and_those_below() -> None:
    upward = [f"{a} ({STAGES[stage_of(a)][0]}) imports {b} ({STAGES[stage_of(b)][0]})"
              for a, b in import_graph().edges if b != "memtrace.read._proto" and stage_of(b) > stage_of(a)]
    assert upward == []


def test_the_stage_check_fails_on_an_import_up_a_stage() -> None:
    # GIVEN an import from the trace stage up into an analysis THEN it ranks above, so the test above would fail.
    assert stage_of("memtrace.analyses.peak") > stage_of("memtrace.trace.replay")
    assert stage_of("memtrace.reporters.fit") > stage_of("memtrace.allocator.fit")
    with pytest.raises(AssertionError, match="in no stage"):
        stage_of("memtrace_other.x")


def test_each_stage_package_says_its_one_job() -> None:
    packages = [p.parent for p in PACKAGE.glob("*/__init__.py") if p.parent.name != "__pycache__"]
    assert {p.name for p in packages} == {"trace", "allocator", "read", "analyses", "many", "reporters", "commands"}
    for package in packages:
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc) > 80, f"memtrace/{package.name}/__init__.py has no docstring saying its job"


def test_reading_is_one_package_and_only_it_touches_the_generated_protobuf() -> None:
    graph = import_graph()
    users = {module for module, target in graph.edges if target == "memtrace.read._proto"}
    assert users and all(module.startswith("memtrace.read") for module in users)


def test_replay_reads_buffers_and_nothing_below_it_reaches_back() -> None:
    # Buffers are worked out once, below replay: replay and the dataflow graph no longer call each other.
    graph = import_graph()
    assert graph.has_edge("memtrace.trace.replay", "memtrace.trace.buffers")
    assert not nx.has_path(graph, "memtrace.trace.buffers", "memtrace.trace.replay")
    assert not nx.has_path(graph, "memtrace.trace.replay", "memtrace.analyses.graph")


def test_the_allocator_model_is_a_mechanism_importing_nothing_of_memtrace() -> None:
    # memtrace/allocator/bfc.py takes requests and options, not a trace: every other stage may lean on it. Its loop
    # compiled (bfc_compiled.py, numba) is part of it and takes arrays: it imports nothing of memtrace either.
    graph = import_graph()
    assert list(graph.successors("memtrace.allocator.bfc")) == ["memtrace.allocator.bfc_compiled"]
    assert list(graph.successors("memtrace.allocator.bfc_compiled")) == []


def test_no_private_name_is_imported_from_another_module() -> None:
    # A name with a leading underscore is a module's own: another module that needs it needs a public one.
    crossing = []
    for path in PACKAGE.rglob("*.py"):
        if "_proto" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("memtrace")):
                crossing += [f"{module_name(path)}: {a.name}" for a in node.names
                             if a.name.startswith("_") and not a.name.startswith("__")]
    assert crossing == []


# Modules of reporters/ that render no result of their own, but help those that do.
REPORTER_HELPERS = {"common", "tables", "progress", "icicle"}


@pytest.mark.parametrize("name", sorted(p.stem for p in (PACKAGE / "reporters").glob("*.py")
                                         if p.stem != "__init__" and p.stem not in REPORTER_HELPERS))
def test_every_reporter_keeps_the_one_contract(name: str) -> None:
    # GIVEN a reporter module THEN what it offers is to_json and render_<format>: no bare render or write.
    module = importlib.import_module(f"memtrace.reporters.{name}")
    public = {n for n, f in inspect.getmembers(module, inspect.isfunction)
              if f.__module__ == module.__name__ and not n.startswith("_")}
    assert public & ({"to_json"} | {n for n in public if n.startswith("render_")}), f"{name} renders nothing"
    assert not public & {"render", "write"}, f"{name}: name the format (render_text, render_html...)"


def test_commands_analyses_and_reporters_share_names() -> None:
    # A command's analysis (or allocator answer) and its reporter carry the command's name.
    commands = importlib.import_module("memtrace.commands").COMMANDS
    analyses = {p.stem for p in (PACKAGE / "analyses").glob("*.py")} | {p.stem for p in (PACKAGE / "allocator").glob("*.py")}
    reporters = {p.stem for p in (PACKAGE / "reporters").glob("*.py")}
    for command in commands:
        if command in ("run", "batch"):  # run records a script; batch writes tables (many/batch.py), neither reports
            continue
        assert command in reporters, f"no reporters/{command}.py"
        assert command in analyses or command == "trend", f"no analyses/{command}.py or allocator/{command}.py"
