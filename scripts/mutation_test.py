"""Mutation testing: does the test suite notice when a rule of the code changes?

    python scripts/mutation_test.py [MODULE.py ...] [--tests TEST.py ...] [--out mutation-out]
                                    [--jobs 2] [--sample N --seed S] [--lines A-B[,C-D]]
                                    [--changed-since COMMIT] [--resume] [--report-only]

Each *mutant* is the module with one small change: an operator (``<`` for ``<=``, ``-`` for ``+``,
``or`` for ``and``, ``|`` for ``&``), a constant (``n`` for ``n + 1``, ``False`` for ``True``), a
``not`` dropped, a ``break`` for a ``continue``, or a statement left out. For each one the script runs
the tests that cover the mutated line (found once, with coverage.py's per-test contexts, and kept in
``OUT/coverage-map.json`` while the code and the tests stay the same; for a line that runs on import, such as a
constant, the module's main test file whole as well, and the tests that cover the lines reading what it defines)
against a copy of the package with the mutant in place, the tests that killed most mutants so far first, then the
quickest. Each call of a test (one parameter set) may take five times its longest call in the coverage run (at
least 20 s), and the run three times what its tests took (at least 30 s; at most three times what all the module's
covering tests take unmutated). The mutant is **killed** when a test fails (or runs past its time: a mutant that
loops forever), and **survives** when every test passes. A survivor is a rule the tests do not pin: it gets a test from
an independent expectation, or, where the change cannot alter any behaviour (a cache key, a value
only logged), a line in the committed ``scripts/mutation_equivalent.toml`` saying why. The report
(``OUT/report.md`` and ``OUT/report.json``) lists every mutant: module, line, the change, the verdict,
and the test that killed it. Each verdict is also appended to ``OUT/progress.jsonl`` as it comes: ``--resume``
keeps the kills there (and the equivalences that still stand) and runs the other mutants again (after tests were added: the survivors), and
``--report-only`` writes the report from every run into OUT (the latest verdict of each mutant), so that
modules may be run in several sittings, with different samples. A mutant is named by its *site*
(``FUNCTION: CHANGE in `THE LINE```, with `` #2`` for a second such change on one line): samples are drawn
by a seeded hash of the site, and the equivalence file is keyed by it, so both hold while other code moves.

A module that numba compiles (``allocator/bfc_compiled.py``) is run with ``NUMBA_DISABLE_JIT=1`` in every test
run: its loop runs as Python, so coverage sees its lines and no mutant waits on a compilation (slower tests: about 80 s
for ``tests/test_bfc_compiled.py`` whole, against 22 s compiled).

Mutants are generated from the module's syntax tree and written out with ``ast.unparse`` (comments
and layout are lost in the copy, the meaning is not); the unmutated module, written out the same
way, must pass its tests first. Needs ``pip install -e ".[mutation]"`` (coverage.py). A benchmark-like job, not a test:
the allocator stage takes tens of minutes on two cores.
"""

from __future__ import annotations

import argparse
import ast
import copy
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = ROOT / "scripts" / "mutation_equivalent.toml"

# The allocator stage and the replay, the default subject (issue 38).
DEFAULT_MODULES = (*(f"memtrace/allocator/{name}.py" for name in (
    "bfc", "requests", "fit", "reproduce", "batch_size", "batch_band", "regions", "address_space", "oom_fit",
    "orders")), "memtrace/trace/replay.py")
# The test files that exercise the allocator stage and the replay (the default): the ones that record with
# TensorFlow or drive a browser are slow, and not where these rules are pinned.
ALLOCATOR_TESTS = tuple(f"tests/test_{name}.py" for name in (
    "bfc", "bfc_compiled", "bfc_partitioned", "fit", "fit_xla", "fit_evidence", "fit_recorded", "batch_size", "batch_band",
    "address_space", "frag_regions", "frag", "oom_fit", "orders", "check", "testing", "replay", "builder", "peak",
    "timeline", "xla_profile", "api", "fuzz_fit", "proto_replay", "run_orders"))

_BINARY_SWAPS: dict[type[ast.operator], tuple[type[ast.operator], ...]] = {
    ast.Add: (ast.Sub,), ast.Sub: (ast.Add,), ast.Mult: (ast.FloorDiv,), ast.FloorDiv: (ast.Mult,),
    ast.Div: (ast.Mult,), ast.Mod: (ast.FloorDiv,), ast.LShift: (ast.RShift,), ast.RShift: (ast.LShift,),
    ast.BitAnd: (ast.BitOr,), ast.BitOr: (ast.BitAnd,), ast.BitXor: (ast.BitOr,), ast.Pow: (ast.Mult,),
}
_COMPARE_SWAPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Lt: (ast.LtE,), ast.LtE: (ast.Lt,), ast.Gt: (ast.GtE,), ast.GtE: (ast.Gt,), ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,), ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,), ast.In: (ast.NotIn,), ast.NotIn: (ast.In,),
}
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Div: "/", ast.Mod: "%", ast.LShift: "<<",
           ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.Pow: "**", ast.Lt: "<",
           ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
           ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.And: "and", ast.Or: "or"}


@dataclass
class Mutant:
    """One change to one module: where, what, and (once run) what the tests made of it."""

    module: str
    number: int  # the n-th site visited in the module's tree (what the mutant changes in this code)
    line: int
    change: str
    site: str = ""  # who it is, stable while its line and function stand: "function: change in `the line`"
    verdict: str = ""  # killed, survived, timeout, equivalent, no tests, error (the tests could not run)
    killed_by: str = ""
    seconds: float = 0.0
    tests: list[str] = field(default_factory=list)
    reason: str = ""  # for an equivalent mutant: why no behaviour can change

    @property
    def key(self) -> tuple[str, str]:
        """The mutant's identity across runs: its module and site (a line moved by other code keeps it)."""
        return self.module, self.site


def _docstring(node: ast.AST, parent: ast.AST | None) -> bool:
    return (isinstance(parent, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            and parent.body and parent.body[0] is node)


def _sites(tree: ast.Module) -> Iterator[tuple[ast.AST, str, int]]:
    """Every (node, change, choice) the mutators can make, in a stable walk order."""
    parents: dict[int, ast.AST] = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            parents[id(child)] = parent
    for node in ast.walk(tree):
        parent = parents.get(id(node))
        if isinstance(node, (ast.BinOp, ast.AugAssign)):
            for i, other in enumerate(_BINARY_SWAPS.get(type(node.op), ())):
                yield node, f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[other]}", i
        elif isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                for i, other in enumerate(_COMPARE_SWAPS.get(type(op), ())):
                    yield node, f"{_SYMBOL[type(op)]} -> {_SYMBOL[other]}", k * 10 + i
        elif isinstance(node, ast.BoolOp):
            yield node, f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[ast.Or if isinstance(node.op, ast.And) else ast.And]}", 0
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, "not x -> x", 0
        elif isinstance(node, ast.Constant) and type(node.value) in (int, bool) and not _in_annotation(node, parents):
            if isinstance(node.value, bool):
                yield node, f"{node.value} -> {not node.value}", 0
            else:
                yield node, f"{node.value} -> {node.value + 1}", 0
                if node.value not in (0, 1):
                    yield node, f"{node.value} -> {node.value - 1}", 1
        elif isinstance(node, (ast.Break, ast.Continue)):
            yield node, "break -> continue" if isinstance(node, ast.Break) else "continue -> break", 0
        if (isinstance(node, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Raise, ast.If,
                              ast.For, ast.While, ast.With)) and not _docstring(node, parent)
                and isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.For, ast.While, ast.If, ast.With,
                                        ast.Try))):
            yield node, f"statement left out ({type(node).__name__})", 99


def _in_annotation(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    child: ast.AST | None = node
    while child is not None:
        parent = parents.get(id(child))
        if isinstance(parent, (ast.arg, ast.AnnAssign)) and getattr(parent, "annotation", None) is child:
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and parent.returns is child:
            return True
        child = parent
    return False


ANNOTATION = "a type annotation: never evaluated (every module has `from __future__ import annotations`)"


def mutants_of(module: str, source: str | None = None) -> list[Mutant]:
    """Every mutant of ``module`` (or of ``source``, that module's text at another commit), numbered in walk order,
    each named by its site; an operator in a type annotation is equivalent by rule."""
    source = (ROOT / module).read_text(encoding="utf-8") if source is None else source
    tree = ast.parse(source)
    lines = source.splitlines()
    parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    found, seen = [], {}
    for n, (node, change, _) in enumerate(_sites(tree)):
        line = getattr(node, "lineno", 0)
        site = f"{_qualname(node, parents)}: {change} in `{lines[line - 1].strip() if line else ''}`"
        seen[site] = seen.get(site, 0) + 1
        if seen[site] > 1:  # the same change twice on one line: the second is "#2", in walk order
            site += f" #{seen[site]}"
        found.append(Mutant(module, n, line, change, site,
                            reason=ANNOTATION if isinstance(node, ast.BinOp) and _in_annotation(node, parents) else ""))
    return found


def _qualname(node: ast.AST, parents: dict[int, ast.AST]) -> str:
    """The dotted name of the functions and classes around ``node`` ("<module>" at the top level)."""
    names = []
    child: ast.AST | None = node
    while child is not None:
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child is not node:
            names.append(child.name)
        child = parents.get(id(child))
    return ".".join(reversed(names)) or "<module>"


def _draw(seed: int, mutant: Mutant) -> str:
    """The mutant's place in a seeded random order that depends on its site alone."""
    return hashlib.sha256(f"{seed}\0{mutant.module}\0{mutant.site}".encode()).hexdigest()


def mutated_source(module: str, number: int) -> str:
    """The module's source with mutant ``number`` applied (written out by ``ast.unparse``)."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    mutated = copy.deepcopy(tree)
    node, _, choice = list(_sites(mutated))[number]
    if choice == 99:  # a statement left out: `pass` in its place (a body never becomes empty)
        _replace(mutated, node, ast.Pass())
    elif isinstance(node, (ast.BinOp, ast.AugAssign)):
        node.op = _BINARY_SWAPS[type(node.op)][choice]()
    elif isinstance(node, ast.Compare):
        node.ops[choice // 10] = _COMPARE_SWAPS[type(node.ops[choice // 10])][choice % 10]()
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.UnaryOp):
        _replace(mutated, node, node.operand)
    elif isinstance(node, ast.Constant):
        node.value = (not node.value) if isinstance(node.value, bool) else node.value + (1 if choice == 0 else -1)
    else:
        _replace(mutated, node, ast.Continue() if isinstance(node, ast.Break) else ast.Break())
    ast.fix_missing_locations(mutated)
    return ast.unparse(mutated) + "\n"


@functools.cache
def _unparsed_lines(module: str) -> tuple[str, ...]:
    return tuple(ast.unparse(ast.parse((ROOT / module).read_text(encoding="utf-8"))).splitlines())


def mutated_line(module: str, number: int) -> str:
    """The line of mutant ``number`` as mutated (written out by ``ast.unparse``): where one change can be made twice on
    a line (``#2`` counts in walk order, the outer expression first, not left to right), which one this is."""
    plain = _unparsed_lines(module)
    mutated = mutated_source(module, number).splitlines()
    return next((new.strip() for old, new in zip(plain, mutated) if old != new), "")


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                value[next(i for i, item in enumerate(value) if item is old)] = new
                return
    raise AssertionError("node not found")


# -- which tests cover which line ----------------------------------------------------------------


def changed_lines_since(commit: str, module: str) -> set[int]:
    """The lines of ``module`` added or changed since ``commit`` (as they are numbered now)."""
    diff = subprocess.run(["git", "diff", "-U0", commit, "--", module], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout
    found: set[int] = set()
    for line in diff.splitlines():
        if line.startswith("@@"):  # @@ -a,b +c,d @@: d lines from c now (d omitted: 1)
            start, _, count = line.split()[2][1:].partition(",")
            found.update(range(int(start), int(start) + int(count or 1)))
    return found


def _module_names(body: list[ast.stmt]) -> dict[str, str]:
    """A test module's top-level functions and assigned names (a parametrize list, a sequence named for other test
    files), each with its source as parsed."""
    named: dict[str, str] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef):
            named[node.name] = ast.dump(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    named[target.id] = ast.dump(node)
    return named


def changed_tests_since(commit: str) -> set[str]:
    """The test functions (``tests/test_x.py::test_y``) added or changed since ``commit``: their source differs, or
    they use (in their body or their decorators, at any depth of helpers) a top-level name of a test module that was
    added or changed: a parametrize list, a sequence that another test file imports, a helper."""
    changed: set[str] = set()
    names = subprocess.run(["git", "diff", "--name-only", commit, "HEAD", "--", "tests"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    for path in names:
        if not path.startswith("tests/") or not path.endswith(".py") or not (ROOT / path).exists():
            continue
        old = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True,
                             check=False).stdout
        before = _module_names(ast.parse(old).body) if old else {}
        now = _module_names(ast.parse((ROOT / path).read_text(encoding="utf-8")).body)
        changed |= {name for name, source in now.items() if before.get(name) != source}
    functions: dict[tuple[str, str], set[str]] = {}  # (file, function) -> the names it uses
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef):
                used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                functions[(path.relative_to(ROOT).as_posix(), node.name)] = used
    while True:  # a function that uses a changed name is changed: to a fixpoint, through helpers
        more = {name for (_, name), used in functions.items() if used & changed} - changed
        if not more:
            break
        changed |= more
    return {f"{path}::{name}" for path, name in functions if name in changed and name.startswith("test")}


def _fingerprint(modules: list[str], tests: list[str]) -> str:
    """What a coverage run depends on: the package's and the tests' sources, which modules, which test files."""
    digest = hashlib.sha256(json.dumps([modules, tests]).encode())
    for path in sorted([*(ROOT / "memtrace").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def coverage_map(modules: list[str], tests: list[str], out: Path) -> dict[str, dict[int, list[str]]]:
    """For each module, line -> the pytest node ids (test functions) that ran it, from one coverage run (kept in
    ``OUT/coverage-map.json``, and read from there while the package and the tests are what they were)."""
    kept = out / "coverage-map.json"
    fingerprint = _fingerprint(modules, tests)
    if kept.exists() and (out / "durations.xml").exists():
        earlier = json.loads(kept.read_text(encoding="utf-8"))
        if earlier["fingerprint"] == fingerprint:
            print(f"coverage of {len(modules)} modules: as measured before ({kept})", flush=True)
            return {module: {int(line): ids for line, ids in lines.items()}
                    for module, lines in earlier["covered"].items()}
    print(f"coverage of {len(modules)} modules by {len(tests)} test files ...", flush=True)
    found = _measure_coverage(modules, tests, out)
    kept.write_text(json.dumps({"fingerprint": fingerprint, "covered": found}), encoding="utf-8")
    return found


def _measure_coverage(modules: list[str], tests: list[str], out: Path) -> dict[str, dict[int, list[str]]]:
    rc = out / "coveragerc"
    rc.write_text("[run]\ndynamic_context = test_function\ninclude =\n" + "".join(
        f"    {ROOT / m}\n" for m in modules) + "[report]\n", encoding="utf-8")
    data_file = out / ".coverage"
    env = {**os.environ, "COVERAGE_FILE": str(data_file), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest", "-q", "-x",
                    "-p", "no:cacheprovider", f"--junitxml={out / 'durations.xml'}", *tests], cwd=ROOT, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    import coverage

    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    # A line run inside a Hypothesis test is credited to Hypothesis's own ``ConjectureRunner.test_function``, not
    # to the test: such lines are covered by the test files that use Hypothesis, which then run whole.
    hypothesis_files = [t for t in tests if "hypothesis" in (ROOT / t).read_text(encoding="utf-8")]
    found: dict[str, dict[int, list[str]]] = {}
    for module in modules:
        by_line = data.contexts_by_lineno(str(ROOT / module))
        found[module] = {}
        for line, contexts in by_line.items():
            ids = {_node_id(c) for c in contexts if c}
            resolved = {i for i in ids if i.startswith("tests/")}
            if len(resolved) < len(ids):
                resolved |= set(hypothesis_files)
            found[module][line] = sorted(resolved)
    return found


def test_seconds(out: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Seconds each test function (all its parameters) and each test file took in the coverage run (traced: slower
    than a plain run), from its JUnit XML; and the longest one call of each (one parameter set, one test)."""
    from xml.etree import ElementTree

    seconds: dict[str, float] = {}
    longest: dict[str, float] = {}
    for case in ElementTree.parse(out / "durations.xml").iter("testcase"):
        node = _node_id(f"{case.get('classname')}.{case.get('name', '').split('[')[0]}")
        took = float(case.get("time") or 0.0)
        for key in (node, node.split("::")[0]):
            seconds[key] = seconds.get(key, 0.0) + took
            longest[key] = max(longest.get(key, 0.0), took)
    return seconds, longest


def import_lines(module: str, out: Path) -> set[int]:
    """The lines of ``module`` that run when it is imported (constants, class bodies, decorators, ``def`` lines with
    their defaults). coverage.py credits them to whichever test imported the module first, so they have a test's
    context that says nothing of the tests that read what they define."""
    data_file = out / ".coverage-import"
    env = {**os.environ, "COVERAGE_FILE": str(data_file), "PYTHONPATH": str(ROOT)}
    script = out / "import_only.py"
    script.write_text(f"import {module.removesuffix('.py').replace('/', '.')}\n", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "coverage", "run", f"--include={ROOT / module}", str(script)],
                   cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    import coverage

    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    return set(data.lines(str(ROOT / module)) or ())


def readers_of(module: str, number: int) -> set[int]:
    """The lines of ``module`` that read what the statement of mutant ``number`` defines on import (outside that
    statement): the lines reading a name a module-level statement assigns (where a constant's value is used), and
    the body of a function whose signature holds the mutant (where a default argument's value is used)."""
    first, last = _spans(module)[number]
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    names = {name.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
             and node.lineno <= first and last <= (node.end_lineno or node.lineno)
             for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
             for name in ast.walk(target) if isinstance(name, ast.Name)}
    bodies = {line for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
              and node.lineno <= first and last < node.body[0].lineno
              for line in range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1)}
    return bodies | {node.lineno for node in ast.walk(tree)
                     if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load)
                     and not first <= node.lineno <= last}


def _uses_numba(module: str) -> bool:
    """Whether ``module`` compiles code with numba: coverage.py cannot see into compiled code."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    return any(isinstance(node, ast.Import) and any(alias.name == "numba" for alias in node.names)
               or isinstance(node, ast.ImportFrom) and node.module == "numba" for node in ast.walk(tree))


def _node_id(context: str) -> str:
    """``tests.test_bfc.test_x`` or ``tests.test_x.TestY.test_z`` -> a pytest node id."""
    parts = context.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        path = ROOT.joinpath(*parts[:cut]).with_suffix(".py")
        if path.exists():
            return "::".join([str(path.relative_to(ROOT)), *parts[cut:]])
    return context


def lines_of(module: str, number: int) -> set[int]:
    """The lines of the node mutant ``number`` changes (a statement's whole span)."""
    first, last = _spans(module)[number]
    return set(range(first, last + 1))


@functools.cache
def _spans(module: str) -> list[tuple[int, int]]:
    """Each mutant site's (first, last) line, the module parsed once (not once per mutant)."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    return [(getattr(node, "lineno", 0), getattr(node, "end_lineno", None) or getattr(node, "lineno", 0))
            for node, _, _ in _sites(tree)]


# -- running --------------------------------------------------------------------------------------


# Loaded into each mutant's pytest (-p): a test that runs past its own limit (MUTANT_TEST_SECONDS, by test function
# or test file) fails at once, where a mutant loops forever, instead of the run waiting for the whole timeout.
_TEST_LIMITS_PLUGIN = """\
import json, os, signal

import pytest

_SECONDS = json.loads(os.environ.get("MUTANT_TEST_SECONDS", "{}"))


class MutantTestTooLong(Exception):
    pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    seconds = _SECONDS.get(item.nodeid.split("[")[0]) or _SECONDS.get(item.nodeid.split("::")[0])
    if not seconds:
        yield
        return

    def expire(signum, frame):
        raise MutantTestTooLong(f"ran past its {seconds:.0f} s")

    before = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
"""
_PLUGIN_NAME = "mutant_test_limits"


def run_tests(package_root: Path, tests: list[str], timeout: float,
              test_seconds: dict[str, float] | None = None) -> tuple[str, str, float]:
    """Run ``tests`` against the package under ``package_root``: (verdict, the first failing test, seconds). With
    ``test_seconds`` (by test function or file), a test that runs past its own limit ends the run as a timeout."""
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(package_root), "PYTHONDONTWRITEBYTECODE": "1", "MEMTRACE_CI": "1"}
    plugin: list[str] = []
    if test_seconds:
        plugin_file = package_root / f"{_PLUGIN_NAME}.py"
        if not plugin_file.exists():  # (written once into each worker's copy)
            plugin_file.write_text(_TEST_LIMITS_PLUGIN, encoding="utf-8")
        env["MUTANT_TEST_SECONDS"] = json.dumps(test_seconds)
        plugin = ["-p", _PLUGIN_NAME]
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *plugin, "-rf",
                               *tests],
                              check=False, cwd=package_root, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", "", time.perf_counter() - start
    seconds = time.perf_counter() - start
    if done.returncode == 0:
        return "survived", "", seconds
    said = (done.stdout + done.stderr).strip()
    if done.returncode in (4, 5) and "found no collectors" in said:
        # the test module no longer imports with the mutant in place (it ran unmutated): the change broke it
        return "killed", "collection: " + next((line for line in said.splitlines() if "found no collectors" in line), ""), \
            seconds
    if done.returncode in (4, 5):  # pytest's usage error or no tests collected: the run says nothing of the mutant
        return "error", said.splitlines()[-1] if said else "", seconds
    failed = next((line.split()[1] for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))), "")
    if "MutantTestTooLong" in done.stdout:
        return "timeout", failed, seconds
    return "killed", failed, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", default=list(DEFAULT_MODULES), help="modules to mutate (paths)")
    parser.add_argument("--tests", nargs="*", help="test files to measure coverage with (default: the allocator stage's)")
    parser.add_argument("--out", type=Path, default=ROOT / "mutation-out")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--sample", type=int, help="run only N mutants per module, drawn at random")
    parser.add_argument("--sample-of", action="append", default=[], metavar="MODULE=N",
                        help="another sample size for one module (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lines", help="only mutants on these lines: A-B, or several ranges A-B,C-D")
    parser.add_argument("--changed-since", metavar="COMMIT",
                        help="only mutants on the lines of each module changed since COMMIT (git diff)")
    parser.add_argument("--report-only", action="store_true",
                        help="write OUT/report.md and report.json from OUT/progress.jsonl (the latest verdict of each "
                             "mutant, from every run into OUT) without running anything")
    parser.add_argument("--new-tests-since", metavar="COMMIT",
                        help="with --resume, where tests were only added or strengthened since COMMIT (every earlier "
                             "test still there): run a mutant not killed before against its covering test functions "
                             "added or changed since COMMIT alone; one they do not kill keeps its earlier verdict")
    parser.add_argument("--resume", action="store_true",
                        help="keep the kills already in OUT/progress.jsonl, and the equivalences that still stand, and "
                             "run only the other mutants (after new tests: the survivors again)")
    args = parser.parse_args(argv)
    modules = [m for m in args.modules if (ROOT / m).exists()]
    tests = args.tests or [t for t in ALLOCATOR_TESTS if (ROOT / t).exists()]
    args.out.mkdir(parents=True, exist_ok=True)
    equivalent = tomllib.loads(EQUIVALENT.read_text(encoding="utf-8")) if EQUIVALENT.exists() else {}
    if args.report_only:
        write_report(recorded(args.out / "progress.jsonl", equivalent), args.out, equivalent)
        return 0

    compiled = [m for m in modules if _uses_numba(m)]
    if compiled:
        # Its loop runs as Python (numba's own switch): coverage sees its lines, and no mutant waits on a compilation.
        os.environ["NUMBA_DISABLE_JIT"] = "1"
        print(f"NUMBA_DISABLE_JIT=1 for every test run ({', '.join(compiled)} compiled by numba)", flush=True)
    covered = coverage_map(modules, tests, args.out)
    took, took_once = test_seconds(args.out)
    progress = args.out / "progress.jsonl"
    ran_before = ([json.loads(line) for line in progress.read_text(encoding="utf-8").splitlines()]
                  if args.resume and progress.exists() else [])
    before_sites = {(entry["module"], entry["site"]) for entry in ran_before}
    mutants: list[Mutant] = []
    on_import: dict[str, set[int]] = {}
    for module in modules:
        found = mutants_of(module)
        if args.lines:
            ranges = [(int(a), int(b or a)) for a, _, b in (part.partition("-") for part in args.lines.split(","))]
            found = [m for m in found if any(a <= m.line <= b for a, b in ranges)]
        if args.changed_since:
            changed = changed_lines_since(args.changed_since, module)
            found = [m for m in found if changed & lines_of(module, m.number)]
        size = dict(entry.rsplit("=", 1) for entry in args.sample_of).get(module, args.sample)
        if size and len(found) > int(size):  # drawn by site: code changed elsewhere in the module keeps the draw
            # (resumed, the mutants run before stay in the sample while their site stands, even where a new site
            # drawn before them would push them out of the first N)
            drawn = sorted(found, key=lambda m: _draw(args.seed, m))
            found = sorted([m for k, m in enumerate(drawn) if k < int(size) or m.key in before_sites],
                           key=lambda m: m.number)
        # Lines run only on import (decorators, class bodies, constants) have no test's context but that of the test
        # that imported the module first: their mutants run the test file that covers most of the module's lines,
        # whole, as well.
        files = [t.split("::")[0] for tests_of_line in covered[module].values() for t in tests_of_line]
        main_file = max(set(files), key=files.count) if files else None
        on_import[module] = import_lines(module, args.out)
        for m in found:
            lines = lines_of(module, m.number)
            m.tests = sorted({t for line in lines for t in covered[module].get(line, [])})
            if main_file is not None and lines <= on_import[module]:
                # ... and the tests that cover the lines reading what the statement defines (a constant read in a
                # replay: the tests of the replay, which may live in other files than the main one)
                read = {t for line in readers_of(module, m.number) for t in covered[module].get(line, [])}
                m.tests = [main_file, *sorted(t for t in set(m.tests) | read if not t.startswith(main_file + "::"))]
        mutants += found

    done_before: dict[tuple[str, str], dict] = {}
    not_killed: dict[tuple[str, str], dict] = {}
    for entry in ran_before:
        # A mutant the tests could not kill whose equivalence still stands (its reason is in the file) is not run
        # again either, but against new tests (--new-tests-since), which may show the reason wrong.
        stands = (entry["verdict"] == "equivalent" and not args.new_tests_since
                  and entry["site"] in equivalent.get(entry["module"], {}))
        kept = done_before if entry["verdict"] in ("killed", "timeout") or stands else not_killed
        kept[(entry["module"], entry["site"])] = entry
    if not args.resume and progress.exists():
        progress.unlink()
    changed = changed_tests_since(args.new_tests_since) if args.new_tests_since else None
    for m in mutants:
        earlier = not_killed.get(m.key)
        if changed is not None and earlier is not None and earlier["verdict"] in ("survived", "equivalent") \
                and m.reason != ANNOTATION:
            if lines_of(m.module, m.number) <= on_import[m.module]:  # run on import: every new test covering the module
                m.tests = sorted({t for tests_of_line in covered[m.module].values() for t in tests_of_line})
            m.tests = [t for t in m.tests if t in changed]
            if not m.tests:  # no added or changed test covers it: the earlier run's verdict stands
                m.verdict = earlier["verdict"]

    # A copy of the package per worker; the baseline (unmutated, unparsed) must pass first.
    scratch = Path(tempfile.mkdtemp(prefix="memtrace-mutants-"))
    workers = [scratch / f"w{i}" for i in range(max(1, args.jobs))]
    for w in workers:  # the package and the tests copied (run from there, they import the copy), the rest linked
        for name in ("memtrace", "tests"):
            shutil.copytree(ROOT / name, w / name, ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("fixtures", "docs", "scripts", "pyproject.toml", "README.md"):
            (w / name).symlink_to(ROOT / name)
    baseline: dict[str, float] = {}
    for module in modules:
        target = workers[0] / module
        target.write_text(ast.unparse(ast.parse((ROOT / module).read_text(encoding="utf-8"))) + "\n", encoding="utf-8")
        module_tests = sorted({t for m in mutants if m.module == module and m.key not in done_before
                               and not m.verdict for t in m.tests})
        verdict, failed, seconds = run_tests(workers[0], module_tests, 3600) if module_tests else ("survived", "", 0.0)
        shutil.copy(ROOT / module, target)
        if verdict != "survived":
            print(f"{module}: its tests fail even unmutated ({verdict}: {failed or 'see pytest'}); fix that first",
                  file=sys.stderr)
            return 2
        baseline[module] = seconds

    free = list(workers)
    lock = threading.Lock()
    # A mutant's tests run until the first fails (-x): the tests that killed most mutants so far go first, then the
    # quickest. The verdict is the same in any order; a killed mutant's time is not.
    kills: dict[str, int] = {}

    def count_kill(killed_by: str) -> None:
        killer = killed_by.split("[")[0]  # a test function, all its parameters
        kills[killer] = kills.get(killer, 0) + 1

    for entry in ran_before:
        if entry["verdict"] == "killed" and entry["killed_by"]:
            count_kill(entry["killed_by"])

    def first_to_fail(test: str) -> tuple[int, float]:
        return -kills.get(test, 0), took.get(test, float("inf"))

    def one(m: Mutant) -> Mutant:
        reason = equivalent.get(m.module, {}).get(m.site)
        before = done_before.get(m.key)
        if before is not None:
            m.verdict, m.killed_by, m.seconds = before["verdict"], before["killed_by"], before["seconds"]
            if m.verdict == "equivalent":
                m.reason = m.reason or reason or ""
            return m
        if m.verdict:  # kept from the earlier run (no added or changed test covers it)
            pass
        elif m.reason == ANNOTATION:
            m.verdict = "equivalent"
        elif not m.tests:
            m.verdict = "no tests"
        else:
            worker = free.pop()
            try:
                (worker / m.module).write_text(mutated_source(m.module, m.number), encoding="utf-8")
                # three times what its tests took in the coverage run (at least 30 s), or what the module's did
                timeout = max(20.0, 3 * baseline[m.module])
                if all(t in took for t in m.tests):
                    timeout = min(timeout, max(30.0, 3 * sum(took[t] for t in m.tests) + 20))
                with lock:
                    order = sorted(m.tests, key=first_to_fail)
                # each call of a test (one parameter set): five times the longest call of it in the coverage run
                # (traced: slower), and at least 20 s
                limits = {t: max(20.0, 5 * took_once[t]) for t in m.tests if t in took_once}
                m.verdict, m.killed_by, m.seconds = run_tests(worker, order, timeout, limits)
                if m.verdict == "killed" and m.killed_by:
                    with lock:
                        count_kill(m.killed_by)
            finally:
                shutil.copy(ROOT / m.module, worker / m.module)
                free.append(worker)
        if m.verdict in ("survived", "equivalent", "no tests") and m.reason != ANNOTATION:  # the file decides
            m.verdict, m.reason = _judged(m, reason)
        print(f"{m.verdict:>10}  {m.module}:{m.line}  {m.change}  {m.killed_by}", flush=True)
        with lock, progress.open("a", encoding="utf-8") as f:  # a run stopped half way keeps what it found
            f.write(json.dumps(asdict(m)) + "\n")
        return m

    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        done = list(pool.map(one, mutants))
    shutil.rmtree(scratch, ignore_errors=True)
    write_report(done, args.out, equivalent)
    return 0


def recorded(progress: Path, equivalent: dict[str, dict[str, str]]) -> list[Mutant]:
    """Every mutant in ``progress`` (the runs' verdicts, one JSON object a line) whose site the code still has, the
    latest verdict of each (at the site's line now), with the equivalence file's reasons applied to the survivors."""
    latest: dict[tuple[str, str], Mutant] = {}
    for line in progress.read_text(encoding="utf-8").splitlines():
        m = Mutant(**json.loads(line))
        latest[m.key] = m
    now: dict[str, dict[str, Mutant]] = {}
    for module in {m.module for m in latest.values()}:
        now[module] = {m.site: m for m in mutants_of(module)} if (ROOT / module).exists() else {}
    stale = [m for m in latest.values() if m.site not in now[m.module]]
    if stale:  # code changed since they ran: not mutants of this code
        print(f"left out: {len(stale)} recorded mutants whose site the code no longer has", file=sys.stderr)
    found = []
    for m in latest.values():
        if m.site in now[m.module]:
            m.line, m.number = now[m.module][m.site].line, now[m.module][m.site].number
            found.append(m)
    found.sort(key=lambda m: (m.module, m.number))
    for m in found:
        if m.verdict in ("survived", "equivalent", "no tests") and m.reason != ANNOTATION:
            m.verdict, m.reason = _judged(m, equivalent.get(m.module, {}).get(m.site))
    return found


def _judged(m: Mutant, reason: str | None) -> tuple[str, str]:
    """The verdict of a mutant no test killed: equivalent where the equivalence file gives its reason (code no test
    reaches too, where the reason shows it unreachable), else a survivor, or one no test covers (a reason taken back
    makes it that again)."""
    if reason:
        return "equivalent", reason
    if m.verdict == "equivalent":  # its reason taken back
        return ("survived" if m.tests else "no tests"), ""
    return m.verdict, ""


def write_report(mutants: list[Mutant], out: Path, equivalent: dict[str, dict[str, str]]) -> None:
    (out / "report.json").write_text(json.dumps([asdict(m) for m in mutants], indent=1) + "\n",
                                     encoding="utf-8")
    lines = ["# Mutation testing report", "",
             "| module | mutants | killed | survived | equivalent | no tests | killed of the non-equivalent |",
             "|---|---|---|---|---|---|---|"]
    for module in dict.fromkeys(m.module for m in mutants):
        ms = [m for m in mutants if m.module == module]
        killed = sum(m.verdict in ("killed", "timeout") for m in ms)
        eq = sum(m.verdict == "equivalent" for m in ms)
        rest = len(ms) - eq
        lines.append(f"| `{module}` | {len(ms)} | {killed} | {sum(m.verdict == 'survived' for m in ms)} | {eq} | "
                     f"{sum(m.verdict == 'no tests' for m in ms)} | {100 * killed / rest if rest else 100:.1f}% |")
    # Where one change can be made twice on a line, the site alone does not say which: the line as mutated does.
    numbered = re.compile(r" #\d+$")
    twice = {(m.module, numbered.sub("", m.site)) for m in mutants if numbered.search(m.site)}

    def named(m: Mutant) -> str:
        if (m.module, numbered.sub("", m.site)) not in twice or not (ROOT / m.module).exists():
            return m.site
        return f"{m.site} (as mutated: `{mutated_line(m.module, m.number)}`)"

    lines += ["", "## Survivors", ""]
    lines += [f"- `{m.module}:{m.line}` {named(m)}" for m in mutants if m.verdict in ("survived", "no tests")]
    lines += ["", "## Equivalent (scripts/mutation_equivalent.toml)", ""]
    lines += [f"- `{m.module}:{m.line}` {named(m)}: {m.reason}" for m in mutants if m.verdict == "equivalent"]
    sites = {module: {m.site for m in mutants_of(module)} for module in equivalent if (ROOT / module).exists()}
    stale = [f"{module} {key}" for module, keys in equivalent.items() for key in keys if key not in sites.get(module, ())]
    if stale:
        lines += ["", "## Stale equivalence entries (no such mutant any more)", ""] + [f"- {s}" for s in stale]
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print((out / "report.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    sys.exit(main())
