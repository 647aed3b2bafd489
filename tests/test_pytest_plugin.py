"""The pytest plugin: the memory_budget marker and fixture, run in pytest sessions of their own."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

# Imported here so that pytester's in-process runs find them loaded and leave them alone.
import memtrace.analyses.check
import memtrace.pytest_plugin
import memtrace.testing

from .conftest import FIXTURES, ROOT, unavailable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytest_plugins = ["pytester"]

B8 = FIXTURES / "recorded" / "cpu_convnet_b8.pbtxt"
B8_PEAK = 753_708  # mklcpu, batch 8 (tests/test_diff.py derives it from the tensor shapes)


@pytest.fixture
def session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """Run pytest on the given test file with the plugin loaded explicitly, as its entry point would."""
    # With the entry point installed, autoloading would register the plugin a second time under
    # another name; without it, only -p loads it. Either way: exactly one copy.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def run(source: str, *args: str) -> pytest.RunResult:
        pytester.makepyfile(test_budget=f"import memtrace\nimport pytest\nTRACE = {str(B8)!r}\n\n{source}")
        return pytester.runpytest("-p", "memtrace.pytest_plugin", "--strict-markers", "-p", "no:cacheprovider", *args)

    return run


def test_marker_budget_passes_at_the_limit(session) -> None:
    result = session(f"""
@pytest.mark.memory_budget("mklcpu", max_peak={B8_PEAK}, max_waste="0%")
def test_fits(memory_budget):
    checked = memory_budget(memtrace.load(TRACE))
    assert [o.measured for o in checked.outcomes] == [{B8_PEAK}, 0.0]
""")
    result.assert_outcomes(passed=1)


def test_marker_budget_over_the_limit_fails_with_the_explanation(session) -> None:
    result = session("""
@pytest.mark.memory_budget("mklcpu", max_peak="700KiB")
def test_too_big(memory_budget):
    memory_budget(TRACE)
""")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*mklcpu max_peak: 736 KiB (753,708 B) is over the limit 700 KiB (716,800 B)*",
        "*top contributors at the peak (shares of the peak, baseline included, 736 KiB):*",
        "*conv1/Relu output: 256 KiB (34.8%)*",
    ])


def test_marked_test_that_never_checks_fails(session) -> None:
    result = session("""
@pytest.mark.memory_budget("mklcpu", max_peak="1MiB")
def test_forgot(memory_budget):
    pass

@pytest.mark.memory_budget("mklcpu", max_peak="1MiB")
def test_no_fixture():
    pass
""")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*is marked memory_budget but never called the memory_budget fixture*"])


def test_fixture_without_marker_is_an_error(session) -> None:
    result = session("""
def test_unmarked(memory_budget):
    memory_budget(TRACE)
""")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*has no @pytest.mark.memory_budget(...) stating a budget*"])


@pytest.mark.parametrize(
    ("marker", "says"),
    [
        ('"mklcpu", max_peak="lots"', "*not a size: 'lots'*"),
        ('"mklcpu"', "*write memory_budget(\"ALLOCATOR\"*"),
        ('"mklcpu", max_heap="1MiB"', "*unknown budget 'max_heap'*"),
        ('"GPU_0_bfc", max_peak="1MiB"', "*no allocator 'GPU_0_bfc' in this trace (it has: mklcpu)*"),
    ],
)
def test_bad_marker_is_an_error_not_a_pass(session, marker: str, says: str) -> None:
    result = session(f"""
@pytest.mark.memory_budget({marker})
def test_bad(memory_budget):
    memory_budget(TRACE)
""")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == 0 and outcomes.get("errors", 0) + outcomes.get("failed", 0) == 1
    result.stdout.fnmatch_lines([says])


def test_closest_marker_wins_and_file_budgets_load(session, pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", budget='[mklcpu]\nmax_peak = "1MiB"\nmax_peak_delta = "1MiB"\n')
    result = session("""
pytestmark = pytest.mark.memory_budget("mklcpu", max_peak="1KiB")  # the module's, overridden below

@pytest.mark.memory_budget("mklcpu", max_peak="1MiB")
def test_function_overrides_module(memory_budget):
    assert [(b.metric, b.limit) for b in memory_budget.budgets] == [("max_peak", 1048576)]
    memory_budget(TRACE)

def test_module_budget_applies(memory_budget):
    memory_budget(TRACE)

@pytest.mark.memory_budget(file="budget.toml")
def test_from_file(memory_budget):
    assert [b.metric for b in memory_budget.budgets] == ["max_peak", "max_peak_delta"]
    memory_budget(TRACE)
""")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_module_budget_applies*", "*over the limit 1 KiB (1,024 B)*"])


def test_marker_is_registered_for_strict_markers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest("-p", "memtrace.pytest_plugin", "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.memory_budget(allocator, max_peak=SIZE*"])


def test_plugin_loads_nothing_heavy() -> None:
    """pytest imports the plugin in every session of everyone who installs memtrace."""
    code = (
        "import sys, memtrace.pytest_plugin\n"
        "print(','.join(m for m in ('numpy', 'google.protobuf', 'networkx', 'tensorflow', 'memtrace.analyses.check') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == ""


def test_pyproject_declares_the_entry_point() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"memtrace": "memtrace.pytest_plugin"}


def test_installed_entry_point_resolves_to_the_plugin() -> None:
    """Where memtrace is installed with this pyproject (as CI installs it), pytest finds the plugin."""
    points = [ep for ep in importlib.metadata.entry_points(group="pytest11") if ep.name == "memtrace"]
    if not points:
        unavailable("the installed memtrace metadata predates the pytest11 entry point (reinstall to check)")
    assert points[0].value == "memtrace.pytest_plugin"
    assert points[0].load() is memtrace.pytest_plugin


def test_marker_takes_a_device_that_travels_between_machines(session) -> None:
    # CPU:0 is mklcpu on this machine's trace, cpu or bfc_cpu_allocator_for_gpu on others'.
    result = session("""
@pytest.mark.memory_budget("CPU:0", max_peak="700KiB")
def test_too_big(memory_budget):
    memory_budget(TRACE)
""")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*CPU:0 (mklcpu) max_peak: 736 KiB (753,708 B) is over the limit 700 KiB*"])
