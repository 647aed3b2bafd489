"""The pytest plugin (entry point ``pytest11``: ``memtrace``): memory budgets stated on a test.

::

    @pytest.mark.memory_budget("GPU_0_bfc", max_peak="1.3GiB", max_waste="5%")
    def test_step_fits(memory_budget):
        trace = memtrace.tensorflow.record(session, train_op, feed)
        memory_budget(trace)  # fails the test, naming the limit, the value and who held the bytes

The marker takes an allocator and limits (``max_peak``, ``max_peak_delta``, ``max_waste``, as in
``memtrace check``), or ``file="memory-budget.toml"`` (relative to the test file). Markers stack,
also from classes and modules (``pytestmark``); for one allocator and limit the closest marker
wins. A marked test that never hands a trace to the ``memory_budget`` fixture fails: a budget
that is never checked must not pass.

**TensorFlow's environment for stable recordings**: ``memtrace_stable_tensorflow = true`` in the
pytest configuration (``[tool.pytest.ini_options]`` of pyproject.toml, pytest.ini), or
``--memtrace-stable-tensorflow``, sets what TensorFlow reads when it is imported and starts (the
CPU's BFC allocator, one inter-op and one intra-op thread, oneDNN's kernels off:
:func:`memtrace.tensorflow.stable_environment`) before conftest files and test modules are
imported, so that a test module may import TensorFlow at its top and still record the same peak
run after run. Without it, ``memtrace.testing`` refuses a recording made otherwise.

pytest loads this module in every session of everyone who installs memtrace, so it imports
nothing heavy (numpy, protobuf, TensorFlow) until a test uses the fixture.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .analyses.check import Budget, CheckResult

MARKER = "memory_budget"
STABLE = "memtrace_stable_tensorflow"
_CHECKED = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(STABLE, type="bool", default=False,
                  help="set TensorFlow's environment for recordings whose peak is the same run after run (the CPU's "
                  "BFC allocator, one inter-op and one intra-op thread, oneDNN's kernels off) before test modules "
                  "import TensorFlow")
    parser.addoption("--memtrace-stable-tensorflow", dest=STABLE, action="store_true", default=None,
                     help=f"the same as {STABLE} = true in the configuration")


def _wants_stable(config: pytest.Config) -> bool:
    given = getattr(getattr(config, "known_args_namespace", None), STABLE, None)
    return bool(given) or bool(config.getini(STABLE))


def stabilize_tensorflow(config: pytest.Config) -> dict[str, str] | None:
    """Set TensorFlow's environment for stable recordings where the configuration asks for it; the variables
    as set, or None. Too late for oneDNN where TensorFlow is imported already (a warning says so)."""
    if not _wants_stable(config):
        return None
    from importlib.util import find_spec

    if find_spec("tensorflow") is None:
        return None  # nothing will record: nothing to set
    from .tensorflow import stable_environment

    if "tensorflow" in sys.modules:
        warnings.warn(pytest.PytestConfigWarning(
            f"{STABLE}: TensorFlow was imported before memtrace's plugin could set its environment (by a plugin or "
            "a conftest loaded earlier?): oneDNN's kernels are as it found them"), stacklevel=1)
    return stable_environment()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Before the conftest files (and so before any test module) are imported."""
    stabilize_tensorflow(early_config)


def pytest_configure(config: pytest.Config) -> None:
    stabilize_tensorflow(config)  # (where the plugin came too late for the conftests' hook: the same, once more)
    config.addinivalue_line(
        "markers",
        f"{MARKER}(allocator, max_peak=SIZE, max_peak_delta=SIZE, max_waste=PERCENT_OR_SIZE) or {MARKER}(file=TOML): "
        "memory budgets that the memory_budget fixture checks on the trace the test hands it",
    )


class MemoryBudget:
    """The ``memory_budget`` fixture: call it with a trace (or a trace's path) to check the marked budgets."""

    def __init__(self, item: pytest.Item, budgets: list[Budget]):
        self._item = item
        self.budgets = budgets

    def __call__(self, trace: Any) -> CheckResult:
        """Check every budget on ``trace``; AssertionError naming the failures, else the CheckResult."""
        __tracebackhide__ = True
        from .testing import as_trace, assert_budgets

        self._item.stash[_CHECKED] = True
        return assert_budgets(as_trace(trace), self.budgets)


def _marked_budgets(item: pytest.Item) -> list[Budget]:
    """The budgets of every memory_budget marker on the item, closest first; the closest wins a tie."""
    from .analyses.check import budgets_from_mapping, load_budget_file
    from .errors import UsageError

    found: dict[tuple[str, str], Budget] = {}
    for marker in item.iter_markers(MARKER):
        where = f"@pytest.mark.{MARKER} on {item.nodeid}"
        kwargs = dict(marker.kwargs)
        path = kwargs.pop("file", None)
        if path is not None:
            if marker.args or kwargs:
                raise UsageError(f"{where}: give either file=... or an allocator and limits, not both")
            budgets = load_budget_file(os.path.join(os.path.dirname(str(item.path)), os.fspath(path)))
        else:
            if len(marker.args) != 1 or not isinstance(marker.args[0], str) or not kwargs:
                raise UsageError(f"{where}: write {MARKER}(\"ALLOCATOR\", max_peak=\"1.3GiB\", ...) or {MARKER}(file=\"budget.toml\")")
            budgets = budgets_from_mapping({marker.args[0]: kwargs}, where)
        for b in budgets:
            found.setdefault((b.allocator, b.metric), b)
    return list(found.values())


@pytest.fixture
def memory_budget(request: pytest.FixtureRequest) -> MemoryBudget:
    """Checks the test's ``memory_budget`` marker budgets on the trace it is called with."""
    from .errors import MemtraceError

    item = request.node
    try:
        budgets = _marked_budgets(item)
    except MemtraceError as error:
        pytest.fail(str(error), pytrace=False)
    if not budgets:
        pytest.fail(f"{item.nodeid} uses the memory_budget fixture but has no @pytest.mark.{MARKER}(...) "
                    "stating a budget", pytrace=False)
    return MemoryBudget(item, budgets)


@pytest.hookimpl(trylast=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """After a marked test passed: fail it if its budgets were never checked on a trace."""
    if item.get_closest_marker(MARKER) is not None and not item.stash.get(_CHECKED, False):
        pytest.fail(f"{item.nodeid} is marked {MARKER} but never called the memory_budget fixture with a "
                    "trace, so no budget was checked", pytrace=False)
